//! `post_call` guardrails on a streamed answer: the text of each event is added to a window
//! that the guardrails check as chunks pass, and an event is released to the client only once
//! [`HOLD`] more characters of text have followed it (or the stream has ended), so a finding is
//! known before any of its text is sent. A finding ends the stream with an error event in the
//! endpoint's format. A `MASK` finding, and a placeholder of the request to give back
//! (`output_parse_pii`), is decided once its text is fully seen and applied where it falls:
//! the event where it starts carries the replacement, the events after it lose the rest.
//! `tool_permission` judges each tool call as its name, and then its whole arguments, arrive
//! (`tools::StreamedCalls`); a refused call ends the stream the same way (`rewrite` too: a
//! stream cannot take back what it sent).

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame};
use serde_json::Value;
use sluice_core::endpoint::Endpoint;
use sluice_core::error::{anthropic_error_body, error_body};
use sluice_core::record::{GuardrailRun, GuardrailStage, GuardrailVerdict};

use sluice_guardrails::{Guardrail, Masks, Tally};

use crate::http::RelayError;

/// Characters of text held back behind the newest: longer than any built-in detector's match
/// except a PEM block.
pub(crate) const HOLD: usize = 256;

/// Where a checked stream notes its guardrails' verdicts: the relay's record, which it hands
/// to the recorder when the stream ends.
pub trait NotesGuardrails {
    /// Note one guardrail's run on the stream.
    fn note_guardrail(&mut self, run: GuardrailRun);
}

/// Note `run` on a stream's `record` (what every relay's [`NotesGuardrails`] does): a block
/// marks the record's error.
pub fn note_on(record: &mut sluice_core::record::RequestRecord, run: GuardrailRun) {
    if run.verdict == GuardrailVerdict::Blocked {
        record.error = Some("guardrail_blocked");
    }
    record
        .guardrails
        .get_or_insert_with(Default::default)
        .push(run);
}

/// A streamed answer checked as it passes.
#[derive(Debug)]
pub struct GuardedStream<B: NotesGuardrails> {
    inner: B,
    guardrails: Vec<Guardrail>,
    /// Time each guardrail has spent on this stream.
    spent: Vec<Duration>,
    /// What each guardrail masked.
    masked: Vec<Tally>,
    /// Whether the verdicts were noted.
    noted: bool,
    endpoint: Endpoint,
    /// Bytes of an event not yet complete.
    partial: BytesMut,
    /// Complete events not yet released.
    held: VecDeque<Held>,
    /// Events ready to go out.
    ready: VecDeque<Bytes>,
    /// The text of the window (the part not yet checked as released), and its start offset.
    window: String,
    window_start: usize,
    /// Total text length seen.
    total: usize,
    /// What the checks of the window would change, in stream offsets.
    found: Vec<Found>,
    /// Stream offset up to which the text was checked.
    scanned_to: usize,
    /// Changes decided (their text fully seen) that events not yet released may still hold.
    committed: Vec<Edit>,
    /// Stream offset up to which changes are decided.
    horizon: usize,
    /// The answer's own placeholders (never given back).
    masks: Masks,
    /// The request's placeholders, given back in the answer (`output_parse_pii`).
    restore: Option<Masks>,
    /// Whether any event may need rewriting (something can be masked or given back).
    edits: bool,
    /// The detectors' findings, reused from check to check.
    scratch: Vec<sluice_guardrails::Finding>,
    /// The upstream's error, returned once the events before it are out.
    error: Option<RelayError>,
    finished: bool,
    /// Tool calls seen so far, when a `tool_permission` guardrail checks them.
    calls: Option<super::tools::StreamedCalls>,
}

/// An event held back, with the stream offsets of the text it carries.
#[derive(Debug)]
struct Held {
    event: Bytes,
    start: usize,
    end: usize,
}

/// A change the window's check found: a value to mask, or a placeholder to give back.
#[derive(Debug)]
struct Found {
    start: usize,
    end: usize,
    with: Replacement,
}

#[derive(Debug)]
enum Replacement {
    /// Masked by guardrail `.0` as label `.1`.
    Mask(usize, Arc<str>),
    /// A request placeholder's value.
    Value(String),
}

/// A decided change of the stream's text: `start..end` becomes `with`.
#[derive(Debug)]
struct Edit {
    start: usize,
    end: usize,
    with: String,
}

impl<B: NotesGuardrails> GuardedStream<B> {
    /// Check `inner`'s events with `guardrails` (the request's `post_call` ones), giving
    /// `restore`'s placeholders back their values.
    pub(crate) fn new(
        inner: B,
        guardrails: Vec<Guardrail>,
        endpoint: Endpoint,
        restore: Option<Masks>,
    ) -> Self {
        let calls = guardrails
            .iter()
            .any(|g| g.tools.is_some())
            .then(super::tools::StreamedCalls::default);
        let edits = restore.is_some() || guardrails.iter().any(Guardrail::can_mask);
        GuardedStream {
            calls,
            inner,
            spent: vec![Duration::ZERO; guardrails.len()],
            masked: vec![Tally::default(); guardrails.len()],
            noted: false,
            guardrails,
            endpoint,
            partial: BytesMut::new(),
            held: VecDeque::new(),
            ready: VecDeque::new(),
            window: String::new(),
            window_start: 0,
            total: 0,
            found: Vec::new(),
            scanned_to: 0,
            committed: Vec::new(),
            horizon: 0,
            masks: Masks::default(),
            restore,
            edits,
            scratch: Vec::new(),
            error: None,
            finished: false,
        }
    }

    /// Take in a complete event: note its text and tool-call pieces, and hold it.
    fn take_event(&mut self, event: Bytes) {
        let start = self.total;
        if let Some(t) = event_text(self.endpoint, &event) {
            self.window.push_str(&t);
            self.total += t.len();
        }
        self.observe_calls(&event);
        self.held.push_back(Held {
            event,
            start,
            end: self.total,
        });
    }

    /// Split `data` into events, note their text, and check the window.
    fn feed(&mut self, data: &[u8]) -> Result<(), String> {
        // What is held holds no event's end: only the new bytes can end one, so a long event
        // arriving in many frames is searched once (the relay bounds its length). Events end
        // in `\n\n` or `\r\n\r\n` (Gemini's).
        let from = self.partial.len();
        self.partial.extend_from_slice(data);
        if let Some(end) = sluice_translate::sse::last_event_end_after(&self.partial, from) {
            let done = self.partial.split_to(end).freeze();
            for (start, end) in sluice_translate::sse::events(&done) {
                self.take_event(done.slice(start..end));
            }
        }
        self.judge_calls(false)?;
        // The text is checked only when an event could go out: a short answer is scanned
        // once, at its end, and a long one once per release, never per chunk.
        if self
            .held
            .front()
            .is_some_and(|h| h.end + HOLD <= self.total)
        {
            self.check_text()?;
            self.release(false);
        }
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

    /// The tool calls seen, and the window, through every guardrail (see `judge_calls` and
    /// `check_text`). `end`: the stream is over.
    fn check(&mut self, end: bool) -> Result<(), String> {
        self.judge_calls(end)?;
        self.check_text()
    }

    /// The tool calls seen so far through the `tool_permission` guardrails, at every chunk (a
    /// refused call ends the stream as soon as its name arrives): the error message of the
    /// first refusal. `end`: arguments that never became whole JSON are judged as absent.
    fn judge_calls(&mut self, end: bool) -> Result<(), String> {
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
        Ok(())
    }

    /// The text that arrived since the last check (with the HOLD characters before it, where a
    /// finding ending in the new text may start) through every text guardrail: the error
    /// message of the first finding that refuses; what may be masked or given back is kept in
    /// `found` (findings that start earlier are known already and cannot change: none is
    /// longer than HOLD).
    fn check_text(&mut self) -> Result<(), String> {
        if self.scanned_to == self.total {
            return Ok(());
        }
        let mut from =
            self.scanned_to.saturating_sub(HOLD).max(self.window_start) - self.window_start;
        while !self.window.is_char_boundary(from) {
            from -= 1;
        }
        let base = self.window_start + from;
        self.scanned_to = self.total;
        let mut found = std::mem::take(&mut self.found);
        let horizon = self.horizon;
        found.retain(|f| f.start < base && f.start >= horizon);
        let window = std::mem::take(&mut self.window);
        let judged = self.find(&window[from..], base, &mut found);
        self.window = window;
        self.found = found;
        judged.map_err(|(i, what)| {
            let why = format!(
                "Blocked by guardrail: {what} ('{}') found in the answer.",
                self.guardrails[i].name
            );
            self.note(Some((i, &what)));
            why
        })
    }

    /// What `text` (at stream offset `base`) holds: `Err` with the guardrail and label of a
    /// finding that refuses; otherwise the values to mask and the placeholders to give back,
    /// in order and not overlapping (earliest first, then longest), pushed to `out`.
    fn find(
        &mut self,
        text: &str,
        base: usize,
        out: &mut Vec<Found>,
    ) -> Result<(), (usize, String)> {
        let mut scratch = std::mem::take(&mut self.scratch);
        let judged = self.find_with(text, base, out, &mut scratch);
        self.scratch = scratch;
        judged
    }

    fn find_with(
        &mut self,
        text: &str,
        base: usize,
        out: &mut Vec<Found>,
        scratch: &mut Vec<sluice_guardrails::Finding>,
    ) -> Result<(), (usize, String)> {
        for (i, g) in self.guardrails.iter().enumerate() {
            if g.tools.is_some() {
                continue;
            }
            let started = Instant::now();
            let scanned = g.scan(text, scratch);
            self.spent[i] += started.elapsed();
            if let Err(v) = scanned {
                return Err((i, v.found.to_string()));
            }
            for f in scratch.iter() {
                if let Some(label) = g.label(f) {
                    out.push(Found {
                        start: base + f.start,
                        end: base + f.end,
                        with: Replacement::Mask(i, label.clone()),
                    });
                }
            }
        }
        if let Some(r) = &self.restore {
            for (start, end, value) in r.placeholders_in(text) {
                out.push(Found {
                    start: base + start,
                    end: base + end,
                    with: Replacement::Value(value.to_owned()),
                });
            }
        }
        if out.len() > 1 {
            out.sort_by(|a, b| a.start.cmp(&b.start).then(b.end.cmp(&a.end)));
            let mut last_end = 0;
            out.retain(|f| {
                let keep = f.start >= last_end;
                if keep {
                    last_end = f.end;
                }
                keep
            });
        }
        Ok(())
    }

    /// The text that replaces a finding whose value is `value`.
    fn replacement(&mut self, with: &Replacement, value: &str) -> String {
        match with {
            Replacement::Mask(i, label) => {
                self.masked[*i].add(label);
                self.masks.placeholder(label, value).to_owned()
            }
            Replacement::Value(v) => v.clone(),
        }
    }

    /// Note every guardrail's run on the relay's record, once: the one that blocked (if any)
    /// as blocked, those that masked as masked (with what), the others as passed.
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
                _ if !self.masked[i].masked.is_empty() => (
                    GuardrailVerdict::Masked,
                    std::mem::take(&mut self.masked[i].masked),
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
    /// masked and with placeholders given back where needed, and let the window forget text
    /// that can no longer start a finding.
    fn release(&mut self, all: bool) {
        let mut moved = Vec::new();
        while let Some(h) = self.held.front() {
            if !all && h.end + HOLD > self.total {
                break;
            }
            if let Some(h) = self.held.pop_front() {
                moved.push(h);
            }
        }
        if let (true, Some(last)) = (self.edits, moved.last()) {
            // Every finding that starts in the released text is decided now: HOLD characters
            // follow it (or the stream has ended), more than any finding is long.
            let upto = last.end;
            let found = std::mem::take(&mut self.found);
            let horizon = self.horizon;
            for f in found
                .iter()
                .filter(|f| f.start >= horizon && f.start < upto)
            {
                if self.committed.last().is_some_and(|e| f.start < e.end) {
                    continue;
                }
                let from = f.start.saturating_sub(self.window_start);
                let to = f.end.saturating_sub(self.window_start);
                let Some(value) = self.window.get(from..to).map(str::to_owned) else {
                    continue;
                };
                let with = self.replacement(&f.with, &value);
                self.committed.push(Edit {
                    start: f.start,
                    end: f.end,
                    with,
                });
            }
            self.found = found;
            self.horizon = self.horizon.max(upto);
            for h in moved {
                let event = if h.end > h.start
                    && self
                        .committed
                        .iter()
                        .any(|e| e.start < h.end && e.end > h.start)
                {
                    rewrite(self.endpoint, &h.event, h.start, &self.committed)
                } else if self.masks.is_empty() && self.restore.is_none() {
                    h.event
                } else {
                    self.rewrite_repeated(h.event)
                };
                self.ready.push_back(event);
            }
            self.committed.retain(|e| e.end > upto);
        } else {
            self.ready.extend(moved.into_iter().map(|h| h.event));
        }
        let released = self.held.front().map_or(self.total, |h| h.start);
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

    /// An event that repeats whole text (Responses' `.done` events), masked and given back
    /// the way its deltas were; unchanged when it repeats none.
    fn rewrite_repeated(&mut self, event: Bytes) -> Bytes {
        if self.endpoint != Endpoint::Responses {
            return event;
        }
        let Some(mut parsed) = Parsed::of(&event) else {
            return event;
        };
        let mut changed = false;
        {
            let mut texts = Vec::new();
            super::texts::repeated(self.endpoint, &mut parsed.value, &mut texts);
            let mut found = Vec::new();
            for t in texts {
                found.clear();
                // A block in the whole text was already a block in its deltas.
                if self.find(t, 0, &mut found).is_err() || found.is_empty() {
                    continue;
                }
                let mut edits = Vec::with_capacity(found.len());
                for f in &found {
                    let value = t[f.start..f.end].to_owned();
                    let with = match &f.with {
                        // The same value has the same placeholder; counting it again would
                        // count it twice.
                        Replacement::Mask(_, label) => {
                            self.masks.placeholder(label, &value).to_owned()
                        }
                        Replacement::Value(v) => v.clone(),
                    };
                    edits.push(Edit {
                        start: f.start,
                        end: f.end,
                        with,
                    });
                }
                *t = apply(t, 0, &edits);
                changed = true;
            }
        }
        if changed {
            parsed.write()
        } else {
            event
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
            // Google's error object, as the event a Gemini stream ends with.
            Endpoint::GenerateContent => {
                let body =
                    sluice_core::error::google_error_body(http::StatusCode::BAD_REQUEST, message);
                let mut out = b"data: ".to_vec();
                out.extend_from_slice(&body);
                out.extend_from_slice(b"\r\n\r\n");
                Bytes::from(out)
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

/// An SSE event with its `data:` JSON parsed, to change and write back.
struct Parsed<'e> {
    /// The lines before the data line, as they were (`event: ...`).
    head: &'e str,
    value: Value,
}

impl<'e> Parsed<'e> {
    fn of(event: &'e [u8]) -> Option<Self> {
        let text = std::str::from_utf8(event).ok()?;
        let at = if text.starts_with("data:") {
            0
        } else {
            text.find("\ndata:")? + 1
        };
        let line = text[at..].lines().next()?;
        let value = serde_json::from_str(line.strip_prefix("data:")?.trim_start()).ok()?;
        Some(Parsed {
            head: &text[..at],
            value,
        })
    }

    fn write(&self) -> Bytes {
        let mut out = self.head.as_bytes().to_vec();
        out.extend_from_slice(b"data: ");
        // A Value always serialises.
        out.extend_from_slice(&serde_json::to_vec(&self.value).unwrap_or_default());
        out.extend_from_slice(b"\n\n");
        Bytes::from(out)
    }
}

/// `event` (whose text starts at stream offset `start`) with `edits` applied to its deltas:
/// a change that starts in a delta puts its whole replacement there, and the rest of its value
/// is taken out of the deltas that follow.
fn rewrite(endpoint: Endpoint, event: &Bytes, start: usize, edits: &[Edit]) -> Bytes {
    let Some(mut parsed) = Parsed::of(event) else {
        return event.clone();
    };
    {
        let mut texts = Vec::new();
        super::texts::delta(endpoint, &mut parsed.value, &mut texts);
        let mut at = start;
        for t in texts {
            let len = t.len();
            *t = apply(t, at, edits);
            at += len;
        }
    }
    parsed.write()
}

/// `text` (at stream offset `base`) with the parts of `edits` that fall in it applied.
fn apply(text: &str, base: usize, edits: &[Edit]) -> String {
    let end = base + text.len();
    let mut out = String::with_capacity(text.len());
    let mut at = base;
    for e in edits.iter().filter(|e| e.start < end && e.end > base) {
        if e.start >= at {
            out.push_str(&text[at - base..e.start - base]);
        }
        if e.start >= base {
            out.push_str(&e.with);
        }
        at = at.max(e.end.min(end));
    }
    out.push_str(&text[at - base..]);
    out
}

/// The answer text an SSE event carries, per endpoint.
fn event_text(endpoint: Endpoint, event: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(event).ok()?;
    let mut out = String::new();
    for line in text.lines() {
        let Some(data) = line.strip_prefix("data:").map(str::trim_start) else {
            continue;
        };
        if typed_delta(endpoint, data, &mut out) {
            continue;
        }
        let Ok(mut v) = serde_json::from_str::<Value>(data) else {
            continue;
        };
        let mut texts = Vec::new();
        super::texts::delta(endpoint, &mut v, &mut texts);
        for t in texts {
            out.push_str(t);
        }
    }
    (!out.is_empty()).then_some(out)
}

/// A chat or completions chunk, read for its text only (borrowed where unescaped): several
/// times cheaper than a `Value` tree, which stays the fallback for any other shape.
#[derive(serde::Deserialize)]
struct ChatChunk<'a> {
    #[serde(borrow, default)]
    choices: Vec<ChatChoice<'a>>,
}

#[derive(serde::Deserialize)]
struct ChatChoice<'a> {
    #[serde(borrow, default)]
    delta: Option<Delta<'a>>,
    #[serde(borrow, default)]
    text: Option<std::borrow::Cow<'a, str>>,
}

/// Chat's `delta.content`; Anthropic's `delta.text`.
#[derive(serde::Deserialize)]
struct Delta<'a> {
    #[serde(borrow, default)]
    content: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    text: Option<std::borrow::Cow<'a, str>>,
}

#[derive(serde::Deserialize)]
struct MessagesEvent<'a> {
    #[serde(borrow, default)]
    delta: Option<Delta<'a>>,
}

/// The text of one `data:` payload through the typed shapes, in the order `texts::delta`
/// visits it (a choice's `delta` before its `text`): `false` when the shape is not one of
/// them (the caller reads it as a `Value`).
fn typed_delta(endpoint: Endpoint, data: &str, out: &mut String) -> bool {
    match endpoint {
        Endpoint::ChatCompletions | Endpoint::Completions => {
            let Ok(chunk) = serde_json::from_str::<ChatChunk<'_>>(data) else {
                return false;
            };
            for c in chunk.choices {
                if let Some(t) = c.delta.and_then(|d| d.content) {
                    out.push_str(&t);
                }
                if let Some(t) = c.text {
                    out.push_str(&t);
                }
            }
            true
        }
        Endpoint::Messages => {
            let Ok(event) = serde_json::from_str::<MessagesEvent<'_>>(data) else {
                return false;
            };
            if let Some(t) = event.delta.and_then(|d| d.text) {
                out.push_str(&t);
            }
            true
        }
        _ => false,
    }
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
                    // What arrived before the error goes out, once checked.
                    if let Err(what) = this.check(true) {
                        this.stop(&what);
                        continue;
                    }
                    this.release(true);
                    this.error = Some(e);
                }
                Poll::Ready(None) => {
                    // The last bytes may be an event without its blank line.
                    if !this.partial.is_empty() {
                        let rest = this.partial.split().freeze();
                        this.take_event(rest);
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
        run_on(frames, vec![g], Endpoint::ChatCompletions, None).await
    }

    async fn run_on(
        frames: Vec<String>,
        guardrails: Vec<Guardrail>,
        endpoint: Endpoint,
        restore: Option<Masks>,
    ) -> (String, Vec<GuardrailVerdict>) {
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
        let body = GuardedStream::new(inner, guardrails, endpoint, restore);
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

    fn masking(entity: Entity) -> Guardrail {
        Guardrail::build(Settings {
            name: "pii".into(),
            kind: Kind::ContentFilter,
            modes: Modes {
                post_call: true,
                ..Modes::default()
            },
            default_on: false,
            output_parse_pii: false,
            spec: SpecSettings {
                entities: vec![(entity, Action::Mask)],
                ..SpecSettings::default()
            },
            threshold: 0.8,
            tools: Default::default(),
            size: Default::default(),
            external: None,
        })
        .unwrap()
    }

    /// The text of a chat stream's deltas, joined.
    fn chat_text(out: &str) -> String {
        out.split("\n\n")
            .filter_map(|e| e.strip_prefix("data: "))
            .filter_map(|d| serde_json::from_str::<Value>(d).ok())
            .filter_map(|v| {
                v["choices"][0]["delta"]["content"]
                    .as_str()
                    .map(str::to_owned)
            })
            .collect()
    }

    #[tokio::test]
    async fn a_value_split_across_chunks_is_masked_where_it_falls() {
        // Far into the stream, so the window has moved on (offsets are the stream's).
        let mut frames: Vec<String> = (0..150).map(|_| chunk("Some filler text. ")).collect();
        frames.extend([
            chunk("Write to jane.do"),
            chunk("e@exam"),
            chunk("ple.com or "),
            chunk("jane.doe@example.com, thanks"),
        ]);
        for _ in 0..30 {
            frames.push(chunk(" and then some more text"));
        }
        frames.push("data: [DONE]\n\n".to_owned());
        let events = frames.len();
        let (out, verdicts) = run_with(frames, masking(Entity::EmailAddress)).await;
        assert_eq!(verdicts, [GuardrailVerdict::Masked]);
        assert!(!out.contains("jane") && !out.contains("exam"), "{out}");
        let text = chat_text(&out);
        let want = format!(
            "{}Write to <EMAIL_ADDRESS_1> or <EMAIL_ADDRESS_1>, thanks and then some",
            "Some filler text. ".repeat(150)
        );
        assert!(text.starts_with(&want), "{text}");
        // No event is lost or merged: the chunks that held the rest of the value are empty.
        assert_eq!(out.matches("\n\n").count(), events, "{out}");
        assert!(out.ends_with("data: [DONE]\n\n"));
    }

    #[tokio::test]
    async fn placeholders_split_across_chunks_are_given_back() {
        let mut restore = Masks::default();
        restore.placeholder("EMAIL_ADDRESS", "a@x.io");
        let frames = vec![
            chunk("Sent to <EMAIL_"),
            chunk("ADDRESS_1> and <EMAIL_ADDRESS_2> (1 < 2)"),
            "data: [DONE]\n\n".to_owned(),
        ];
        let (out, verdicts) =
            run_on(frames, Vec::new(), Endpoint::ChatCompletions, Some(restore)).await;
        assert!(verdicts.is_empty());
        assert_eq!(
            chat_text(&out),
            "Sent to a@x.io and <EMAIL_ADDRESS_2> (1 < 2)"
        );
    }

    #[tokio::test]
    async fn a_responses_stream_masks_the_text_it_repeats_whole() {
        let delta = |t: &str| {
            format!(
                "event: response.output_text.delta\ndata: {}\n\n",
                serde_json::json!({"type": "response.output_text.delta", "delta": t})
            )
        };
        let whole = "card 4111 1111 1111 1111 ok";
        let frames = vec![
            delta("card 4111 1111 "),
            delta("1111 1111 ok"),
            format!(
                "event: response.output_text.done\ndata: {}\n\n",
                serde_json::json!({"type": "response.output_text.done", "text": whole})
            ),
            format!(
                "event: response.completed\ndata: {}\n\n",
                serde_json::json!({"type": "response.completed", "response": {"output": [
                    {"type": "message", "content": [{"type": "output_text", "text": whole}]}]}})
            ),
        ];
        let (out, verdicts) = run_on(
            frames,
            vec![masking(Entity::CreditCard)],
            Endpoint::Responses,
            None,
        )
        .await;
        assert_eq!(verdicts, [GuardrailVerdict::Masked]);
        assert!(!out.contains("1111"), "{out}");
        assert_eq!(out.matches("card <CREDIT_CARD_1> ok").count(), 2, "{out}");
        assert!(out.contains("event: response.completed\ndata: "), "{out}");
    }

    #[test]
    fn the_typed_reading_of_deltas_agrees_with_the_tree() {
        let samples = [
            (
                Endpoint::ChatCompletions,
                r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"h\u00e9 \"q\""}}]}"#,
            ),
            (
                Endpoint::ChatCompletions,
                r#"{"choices":[{"delta":{"content":null}},{"delta":{"content":"b"}}]}"#,
            ),
            (
                Endpoint::ChatCompletions,
                r#"{"choices":[],"usage":{"total_tokens":3}}"#,
            ),
            (
                Endpoint::Completions,
                r#"{"choices":[{"text":"t1"},{"text":"t2"}]}"#,
            ),
            (
                Endpoint::Messages,
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"m\n"}}"#,
            ),
            (
                Endpoint::Messages,
                r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"}}"#,
            ),
        ];
        for (endpoint, data) in samples {
            let mut typed = String::new();
            assert!(typed_delta(endpoint, data, &mut typed), "{data}");
            let mut v: Value = serde_json::from_str(data).unwrap();
            let mut texts = Vec::new();
            crate::guardrails::texts::delta(endpoint, &mut v, &mut texts);
            let tree: String = texts.into_iter().map(|t| t.as_str()).collect();
            assert_eq!(typed, tree, "{data}");
        }
        // Shapes the typed reading does not know go to the tree.
        assert!(!typed_delta(
            Endpoint::ChatCompletions,
            r#"{"choices":[{"delta":{"content":[1]}}]}"#,
            &mut String::new()
        ));
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
