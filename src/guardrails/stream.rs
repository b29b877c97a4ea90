//! `post_call` guardrails on a streamed answer: the text of each event is added to a window
//! that the guardrails check as chunks pass, and an event is released to the client only once
//! [`HOLD`] more characters of text have followed it (or the stream has ended), so a finding is
//! known before any of its text is sent. A finding ends the stream with an error event in the
//! endpoint's format. Masking inside a stream is not built yet: on a stream, a `MASK` finding
//! ends it like a `BLOCK` one (stricter, never leakier). `tool_permission` judges each tool
//! call as its name, and then its whole arguments, arrive (`tools::StreamedCalls`); a refused
//! call ends the stream the same way (`rewrite` too: a stream cannot take back what it sent).

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame};
use serde_json::Value;
use sluice_core::endpoint::Endpoint;
use sluice_core::error::{anthropic_error_body, error_body};
use sluice_core::record::{GuardrailRun, GuardrailStage, GuardrailVerdict};
use sluice_guardrails::{Guardrail, Masks, Tally};

use crate::server::RelayError;

/// Characters of text held back behind the newest: longer than any built-in detector's match
/// except a PEM block.
pub(crate) const HOLD: usize = 256;

/// Where a checked stream notes its guardrails' verdicts: the relay's record, which it hands
/// to the recorder when the stream ends.
pub trait NotesGuardrails {
    /// Note one guardrail's run on the stream.
    fn note_guardrail(&mut self, run: GuardrailRun);
}

/// A streamed answer checked as it passes.
#[derive(Debug)]
pub struct GuardedStream<B: NotesGuardrails> {
    inner: B,
    guardrails: Vec<Guardrail>,
    /// Time each guardrail has spent on this stream.
    spent: Vec<Duration>,
    /// Whether the verdicts were noted.
    noted: bool,
    endpoint: Endpoint,
    /// Bytes of an event not yet complete.
    partial: BytesMut,
    /// Complete events not yet released, each with the text length at its end.
    held: VecDeque<(Bytes, usize)>,
    /// Events ready to go out.
    ready: VecDeque<Bytes>,
    /// The text of the window (the part not yet checked as released), and its start offset.
    window: String,
    window_start: usize,
    /// Total text length seen.
    total: usize,
    /// The upstream's error, returned once the events before it are out.
    error: Option<RelayError>,
    finished: bool,
    /// Tool calls seen so far, when a `tool_permission` guardrail checks them.
    calls: Option<super::tools::StreamedCalls>,
}

impl<B: NotesGuardrails> GuardedStream<B> {
    /// Check `inner`'s events with `guardrails` (the request's `post_call` ones).
    pub(crate) fn new(inner: B, guardrails: Vec<Guardrail>, endpoint: Endpoint) -> Self {
        let calls = guardrails
            .iter()
            .any(|g| g.tools.is_some())
            .then(super::tools::StreamedCalls::default);
        GuardedStream {
            calls,
            inner,
            spent: vec![Duration::ZERO; guardrails.len()],
            noted: false,
            guardrails,
            endpoint,
            partial: BytesMut::new(),
            held: VecDeque::new(),
            ready: VecDeque::new(),
            window: String::new(),
            window_start: 0,
            total: 0,
            error: None,
            finished: false,
        }
    }

    /// Split `data` into events, note their text, and check the window.
    fn feed(&mut self, data: &[u8]) -> Result<(), String> {
        self.partial.extend_from_slice(data);
        while let Some(end) = memchr::memmem::find(&self.partial, b"\n\n") {
            let event = self.partial.split_to(end + 2).freeze();
            if let Some(t) = event_text(self.endpoint, &event) {
                self.window.push_str(&t);
                self.total += t.len();
            }
            self.observe_calls(&event);
            self.held.push_back((event, self.total));
        }
        self.check(false)?;
        self.release(false);
        Ok(())
    }

    /// Note an event's tool-call pieces, when a guardrail judges tool calls.
    fn observe_calls(&mut self, event: &[u8]) {
        let Some(calls) = &mut self.calls else {
            return;
        };
        let Ok(text) = std::str::from_utf8(event) else {
            return;
        };
        for line in text.lines() {
            let Some(data) = line.strip_prefix("data:").map(str::trim_start) else {
                continue;
            };
            if let Ok(v) = serde_json::from_str::<Value>(data) {
                calls.observe(self.endpoint, &v);
            }
        }
    }

    /// The window, and the tool calls seen, through every guardrail: the error message of the
    /// first finding, if any. `end`: the stream is over (arguments that never became whole
    /// JSON are judged as absent).
    fn check(&mut self, end: bool) -> Result<(), String> {
        for i in 0..self.guardrails.len() {
            let (Some(policy), Some(calls)) = (&self.guardrails[i].tools, &mut self.calls) else {
                continue;
            };
            let started = Instant::now();
            let judged = calls.judge(policy, end);
            self.spent[i] += started.elapsed();
            if let Err(d) = judged {
                let why = format!(
                    "Blocked by guardrail '{}' in the answer: {}",
                    self.guardrails[i].name, d.message
                );
                self.note(Some((i, super::TOOL_DENIED)));
                return Err(why);
            }
        }
        if self.window.is_empty() {
            return Ok(());
        }
        let (mut masks, mut tally, mut scratch) = (Masks::default(), Tally::default(), Vec::new());
        for i in 0..self.guardrails.len() {
            let g = &self.guardrails[i];
            if g.tools.is_some() {
                continue;
            }
            let started = Instant::now();
            let found = match g.check(&self.window, &mut masks, &mut tally, &mut scratch) {
                Ok(None) => None,
                Ok(Some(_)) => tally.masked.first().map(|(l, _)| l.to_string()),
                Err(v) => Some(v.found.to_string()),
            };
            self.spent[i] += started.elapsed();
            if let Some(found) = found {
                let why = format!(
                    "Blocked by guardrail: {found} ('{}') found in the answer.",
                    g.name
                );
                self.note(Some((i, &found)));
                return Err(why);
            }
        }
        Ok(())
    }

    /// Note every guardrail's run on the relay's record, once: the one that blocked (if any)
    /// as blocked, the others as passed.
    fn note(&mut self, blocked: Option<(usize, &str)>) {
        if self.noted {
            return;
        }
        self.noted = true;
        for (i, g) in self.guardrails.iter().enumerate() {
            let (verdict, found) = match blocked {
                Some((b, what)) if b == i => (
                    GuardrailVerdict::Blocked,
                    vec![(std::sync::Arc::from(what), 1)],
                ),
                _ => (GuardrailVerdict::Passed, Vec::new()),
            };
            self.inner.note_guardrail(GuardrailRun {
                name: g.name.clone(),
                stage: GuardrailStage::Answer,
                verdict,
                duration: self.spent[i],
                found,
            });
        }
    }

    /// Move the held events whose text is far enough behind (all of them at the end) to ready,
    /// and let the window forget text that can no longer start a finding.
    fn release(&mut self, all: bool) {
        while let Some((_, end)) = self.held.front() {
            if !all && end + HOLD > self.total {
                break;
            }
            if let Some((event, _)) = self.held.pop_front() {
                self.ready.push_back(event);
            }
        }
        let released = self.held.front().map_or(self.total, |(_, e)| *e);
        let keep_from = released.saturating_sub(HOLD);
        if keep_from > self.window_start + 4 * HOLD {
            let mut cut = keep_from - self.window_start;
            while !self.window.is_char_boundary(cut) {
                cut -= 1;
            }
            self.window.drain(..cut);
            self.window_start += cut;
        }
    }

    /// The event that ends a stream a guardrail stopped, saying `message`.
    fn blocked_event(&self, message: &str) -> Bytes {
        match self.endpoint {
            Endpoint::Messages => {
                let body = anthropic_error_body("invalid_request_error", message);
                let mut out = b"event: error\ndata: ".to_vec();
                out.extend_from_slice(&body);
                out.extend_from_slice(b"\n\n");
                Bytes::from(out)
            }
            Endpoint::Responses => {
                let body = serde_json::json!({
                    "type": "error", "code": "guardrail_blocked", "message": message, "param": null,
                });
                Bytes::from(format!("event: error\ndata: {body}\n\n"))
            }
            _ => {
                let body = error_body(message, "invalid_request_error", None, "guardrail_blocked");
                let mut out = b"data: ".to_vec();
                out.extend_from_slice(&body);
                out.extend_from_slice(b"\n\n");
                Bytes::from(out)
            }
        }
    }

    fn stop(&mut self, what: &str) {
        self.held.clear();
        self.ready.clear();
        self.ready.push_back(self.blocked_event(what));
        self.error = None;
        self.finished = true;
    }
}

/// The answer text an SSE event carries, per endpoint.
fn event_text(endpoint: Endpoint, event: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(event).ok()?;
    let mut out = String::new();
    for line in text.lines() {
        let Some(data) = line.strip_prefix("data:").map(str::trim_start) else {
            continue;
        };
        let Ok(v) = serde_json::from_str::<Value>(data) else {
            continue;
        };
        match endpoint {
            Endpoint::ChatCompletions | Endpoint::Completions => {
                for c in v
                    .get("choices")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let t = c
                        .get("delta")
                        .and_then(|d| d.get("content"))
                        .or_else(|| c.get("text"));
                    if let Some(t) = t.and_then(Value::as_str) {
                        out.push_str(t);
                    }
                }
            }
            Endpoint::Messages => {
                if let Some(t) = v
                    .get("delta")
                    .and_then(|d| d.get("text"))
                    .and_then(Value::as_str)
                {
                    out.push_str(t);
                }
            }
            Endpoint::Responses
                if v.get("type").and_then(Value::as_str) == Some("response.output_text.delta") =>
            {
                if let Some(t) = v.get("delta").and_then(Value::as_str) {
                    out.push_str(t);
                }
            }
            _ => {}
        }
    }
    (!out.is_empty()).then_some(out)
}

impl<B> Body for GuardedStream<B>
where
    B: Body<Data = Bytes, Error = RelayError> + NotesGuardrails + Unpin,
{
    type Data = Bytes;
    type Error = RelayError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, RelayError>>> {
        let this = self.get_mut();
        loop {
            if let Some(event) = this.ready.pop_front() {
                return Poll::Ready(Some(Ok(Frame::data(event))));
            }
            if let Some(e) = this.error.take() {
                return Poll::Ready(Some(Err(e)));
            }
            if this.finished {
                return Poll::Ready(None);
            }
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        if let Err(what) = this.feed(&data) {
                            this.stop(&what);
                        }
                    }
                }
                Poll::Ready(Some(Err(e))) => {
                    this.release(true);
                    this.error = Some(e);
                }
                Poll::Ready(None) => {
                    // The last bytes may be an event without its blank line.
                    if !this.partial.is_empty() {
                        let rest = this.partial.split().freeze();
                        if let Some(t) = event_text(this.endpoint, &rest) {
                            this.window.push_str(&t);
                            this.total += t.len();
                        }
                        this.observe_calls(&rest);
                        this.held.push_back((rest, this.total));
                    }
                    if let Err(what) = this.check(true) {
                        this.stop(&what);
                        continue;
                    }
                    this.release(true);
                    this.note(None);
                    this.finished = true;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, StreamBody};
    use sluice_guardrails::{Action, Entity, Kind, Modes, Settings, SpecSettings};
    use std::sync::{Arc, Mutex};

    fn guard() -> Guardrail {
        Guardrail::build(Settings {
            name: "secrets".into(),
            kind: Kind::HideSecrets,
            modes: Modes {
                post_call: true,
                ..Modes::default()
            },
            default_on: false,
            output_parse_pii: false,
            spec: SpecSettings {
                entities: vec![(Entity::AwsAccessKey, Action::Block)],
                ..SpecSettings::default()
            },
            threshold: 0.8,
            tools: Default::default(),
            size: Default::default(),
            external: None,
        })
        .unwrap()
    }

    fn tool_guard() -> Guardrail {
        use sluice_guardrails::tools::RuleSettings;
        use sluice_guardrails::{Decision, ToolSettings};
        Guardrail::build(Settings {
            name: "tools".into(),
            kind: Kind::ToolPermission,
            modes: Modes {
                post_call: true,
                ..Modes::default()
            },
            default_on: false,
            output_parse_pii: false,
            spec: SpecSettings::default(),
            threshold: 0.8,
            tools: ToolSettings {
                rules: vec![RuleSettings {
                    id: "mail".into(),
                    tool_name: "send_email".into(),
                    decision: Decision::Allow,
                    params: vec![("to[]".into(), r"^.+@corp\.example$".into())],
                }],
                default: Some(Decision::Deny),
                ..ToolSettings::default()
            },
            size: Default::default(),
            external: None,
        })
        .unwrap()
    }

    fn chunk(text: &str) -> String {
        format!(
            "data: {}\n\n",
            serde_json::json!({"choices": [{"index": 0, "delta": {"content": text}}]})
        )
    }

    async fn run(frames: Vec<String>) -> (String, Vec<GuardrailVerdict>) {
        run_with(frames, guard()).await
    }

    async fn run_with(frames: Vec<String>, g: Guardrail) -> (String, Vec<GuardrailVerdict>) {
        let s = futures_util::stream::iter(
            frames
                .into_iter()
                .map(|f| Ok::<_, RelayError>(Frame::data(Bytes::from(f)))),
        );
        let runs = Arc::default();
        let inner = Noting {
            body: StreamBody::new(s),
            runs: Arc::clone(&runs),
        };
        let body = GuardedStream::new(inner, vec![g], Endpoint::ChatCompletions);
        let out = body.collect().await.unwrap().to_bytes();
        let verdicts = runs.lock().unwrap().clone();
        (String::from_utf8(out.to_vec()).unwrap(), verdicts)
    }

    /// A body that keeps the verdicts noted on it.
    struct Noting<S> {
        body: S,
        runs: Arc<Mutex<Vec<GuardrailVerdict>>>,
    }

    impl<S> NotesGuardrails for Noting<S> {
        fn note_guardrail(&mut self, run: GuardrailRun) {
            self.runs.lock().unwrap().push(run.verdict);
        }
    }

    impl<S: Body<Data = Bytes, Error = RelayError> + Unpin> Body for Noting<S> {
        type Data = Bytes;
        type Error = RelayError;
        fn poll_frame(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, RelayError>>> {
            Pin::new(&mut self.get_mut().body).poll_frame(cx)
        }
    }

    #[tokio::test]
    async fn a_clean_stream_passes_whole() {
        let frames = vec![
            chunk("Hello"),
            chunk(" world"),
            "data: [DONE]\n\n".to_owned(),
        ];
        let want: String = frames.concat();
        assert_eq!(run(frames).await, (want, vec![GuardrailVerdict::Passed]));
    }

    #[tokio::test]
    async fn a_secret_split_across_chunks_is_never_sent() {
        let mut frames = vec![chunk("The key is AKIAIOSF"), chunk("ODNN7EXAMPLE, enjoy")];
        // Plenty of text after it: the events before the key may go out, the key's may not.
        for _ in 0..40 {
            frames.push(chunk(" and more harmless text"));
        }
        frames.push("data: [DONE]\n\n".to_owned());
        let (out, verdicts) = run(frames).await;
        assert_eq!(verdicts, [GuardrailVerdict::Blocked]);
        assert!(!out.contains("AKIAIOSF"), "{out}");
        assert!(
            out.contains("guardrail_blocked") && out.contains("AWS_ACCESS_KEY"),
            "{out}"
        );
        assert!(!out.contains("[DONE]"));
    }

    #[tokio::test]
    async fn text_far_enough_ahead_is_released_before_the_end() {
        let long = "x".repeat(HOLD + 10);
        let frames = vec![chunk("first"), chunk(&long), chunk(" AKIAIOSFODNN7EXAMPLE")];
        let (out, _) = run(frames).await;
        // "first" was HOLD characters behind the newest text and went out; the key's event did not.
        assert!(out.starts_with(&chunk("first")), "{out}");
        assert!(!out.contains("AKIA"));
        assert!(out.contains("guardrail_blocked"));
    }

    fn call_chunk(name: Option<&str>, arguments: &str) -> String {
        let mut f = serde_json::json!({"arguments": arguments});
        if let Some(n) = name {
            f["name"] = serde_json::json!(n);
        }
        format!(
            "data: {}\n\n",
            serde_json::json!({"choices": [{"index": 0,
                "delta": {"tool_calls": [{"index": 0, "function": f}]}}]})
        )
    }

    #[tokio::test]
    async fn a_denied_tool_call_is_never_sent_and_an_allowed_one_passes_whole() {
        // Denied by name: the stream ends at the call's first chunk.
        let frames = vec![
            chunk("Let me read it."),
            call_chunk(Some("Read"), ""),
            call_chunk(None, "{\"path\": \"/etc/passwd\"}"),
            "data: [DONE]\n\n".to_owned(),
        ];
        let (out, verdicts) = run_with(frames, tool_guard()).await;
        assert_eq!(verdicts, [GuardrailVerdict::Blocked]);
        assert!(!out.contains("Read\""), "{out}");
        assert!(!out.contains("passwd"), "{out}");
        assert!(out.contains("denied by default action"), "{out}");

        // Allowed by name, refused by its whole arguments (split over chunks).
        let frames = vec![
            call_chunk(Some("send_email"), ""),
            call_chunk(None, "{\"to\": [\"x@evil"),
            call_chunk(None, ".example\"]}"),
            "data: [DONE]\n\n".to_owned(),
        ];
        let (out, _) = run_with(frames, tool_guard()).await;
        assert!(!out.contains("evil"), "{out}");
        assert!(out.contains("'to[]'"), "{out}");

        // Allowed, arguments matching: the stream passes unchanged.
        let frames = vec![
            call_chunk(Some("send_email"), ""),
            call_chunk(None, "{\"to\": [\"a@corp.example\"]}"),
            "data: [DONE]\n\n".to_owned(),
        ];
        let want = frames.concat();
        assert_eq!(
            run_with(frames, tool_guard()).await,
            (want, vec![GuardrailVerdict::Passed])
        );
    }
}
