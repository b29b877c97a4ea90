//! Relaying an upstream stream to the client: each frame is forwarded as it arrives (through
//! the SSE tap, which reads usage and strips the chunk sluice asked for on the client's
//! behalf). A stream the upstream breaks ends with an error event and an aborted body, never
//! with a made-up `[DONE]`. The request's record is emitted when the relay is dropped, so a
//! client that goes away is still accounted.
//!
//! Frames the upstream connection already holds leave in one write. hyper's client hands body
//! frames over one at a time, each only after the reader asked for the next, and the server
//! flushes whenever the body is not ready, so relaying frame by frame cost a write system call
//! (and a client wake-up) per SSE frame. After a frame the relay asks for the next and gives
//! the upstream connection's task up to two scheduler turns to hand it over; when they bring
//! nothing, what is held goes out at once (a frame waits for other ready tasks, never for time).

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use tokio::time::{Instant, Sleep};

use sluice_core::endpoint::Endpoint;
use sluice_core::error::{anthropic_error_body, error_body};
use sluice_core::record::{Outcome, RequestRecord};
use sluice_core::usage::Usage;
use sluice_providers::UpstreamBody;
use sluice_telemetry::Recorder;
use sluice_translate::sse::SseTap;

use crate::spend::Charges;

/// Why a relayed stream was aborted. The client already got an error event; this error only
/// makes the HTTP layer cut the response so that no client mistakes it for a complete one.
#[derive(Debug, thiserror::Error)]
#[error("upstream stream interrupted: {0}")]
pub struct RelayError(pub(crate) String);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Relaying,
    /// Error event sent; let it flush.
    Failing,
    /// Error event flushed; abort the body.
    Aborting,
    Ended,
}

/// A stream in flight.
#[derive(Debug)]
pub struct StreamRelay {
    first: Option<Bytes>,
    upstream: UpstreamBody,
    tap: SseTap,
    endpoint: Endpoint,
    state: State,
    failure: Option<String>,
    record: RequestRecord,
    recorder: Recorder,
    /// Longest wait for the next upstream frame, with its timer.
    idle: Option<(Duration, Pin<Box<Sleep>>)>,
    /// The deployment's and the caller's slots and counters, settled when the stream ends.
    charges: Charges,
    /// Keep reading the upstream after the client leaves, to account its full usage.
    finish_on_disconnect: bool,
    /// Output waiting for the upstream's next ready frame, to leave in the same write.
    held: Held,
    /// Told the settled usage and cost when the stream ends (the cache stores them).
    report: Option<tokio::sync::oneshot::Sender<Settled>>,
    /// Usage and cost settled and the record journaled (`settle`).
    settled: bool,
}

impl crate::guardrails::NotesGuardrails for StreamRelay {
    fn note_guardrail(&mut self, run: sluice_core::record::GuardrailRun) {
        crate::guardrails::note_on(&mut self.record, run);
    }
}

/// What a finished stream used and cost.
pub(crate) type Settled = (
    Option<sluice_core::usage::Usage>,
    Option<sluice_core::limits::Nanos>,
);

/// Most bytes held back for one write: past this the relay sends at once.
const MAX_HELD: usize = 32 * 1024;

/// Scheduler turns the relay waits, after a frame, for the upstream connection to hand over one
/// it already holds. hyper's client connection needs two (measured: with one, none of the
/// frames a mock sent in one write was ever joined; with two, all were).
const UPSTREAM_TURNS: u8 = 2;

/// Output frames gathered for one write. A lone frame passes through as it came; only when a
/// second one joins are they copied into one buffer.
#[derive(Debug, Default)]
struct Held {
    single: Option<Bytes>,
    joined: BytesMut,
    /// Scheduler turns the upstream had since the last frame came in.
    turns: u8,
}

impl Held {
    fn push(&mut self, data: Bytes) {
        self.turns = 0;
        if data.is_empty() {
            return;
        }
        match self.single.take() {
            None if self.joined.is_empty() => self.single = Some(data),
            Some(first) => {
                self.joined.reserve(first.len() + data.len());
                self.joined.extend_from_slice(&first);
                self.joined.extend_from_slice(&data);
            }
            None => self.joined.extend_from_slice(&data),
        }
    }

    fn len(&self) -> usize {
        self.single.as_ref().map_or(0, Bytes::len) + self.joined.len()
    }

    /// Everything held, as one frame's data.
    fn take(&mut self) -> Option<Bytes> {
        self.turns = 0;
        self.single
            .take()
            .or_else(|| (!self.joined.is_empty()).then(|| self.joined.split().freeze()))
    }
}

impl StreamRelay {
    /// Relay `upstream`, whose first data frame `first` was already read.
    pub fn new(
        first: Bytes,
        upstream: UpstreamBody,
        strip_usage_chunk: bool,
        endpoint: Endpoint,
        record: RequestRecord,
        recorder: Recorder,
    ) -> Self {
        Self {
            first: Some(first),
            upstream,
            tap: SseTap::new(strip_usage_chunk),
            endpoint,
            state: State::Relaying,
            failure: None,
            record,
            recorder,
            idle: None,
            charges: Charges::default(),
            finish_on_disconnect: false,
            report: None,
            held: Held::default(),
            settled: false,
        }
    }

    /// Fail the stream when the upstream sends nothing for `idle`.
    pub fn idle_timeout(mut self, idle: Option<Duration>) -> Self {
        self.idle = idle.map(|d| (d, Box::pin(tokio::time::sleep(d))));
        self
    }

    /// Hold the deployment's and the caller's in-flight slots until the stream ends; its
    /// usage and cost are charged then.
    pub fn charges(mut self, charges: Charges) -> Self {
        self.charges = charges;
        self
    }

    /// Whether the upstream body is an event stream. Audio bytes (speech) are relayed
    /// untouched, and the upstream's clean end is the stream's end.
    pub fn events(mut self, events: bool) -> Self {
        if !events {
            self.tap = SseTap::raw();
        }
        self
    }

    /// Tell `tx` the stream's settled usage and cost when it ends.
    pub(crate) fn report_to(mut self, tx: tokio::sync::oneshot::Sender<Settled>) -> Self {
        self.report = Some(tx);
        self
    }

    /// When the client goes away, read the upstream to its end in the background so that the
    /// full usage is recorded (`on_client_disconnect: finish`).
    pub fn finish_on_disconnect(mut self, finish: bool) -> Self {
        self.finish_on_disconnect = finish;
        self
    }

    /// Poll the upstream, failing it when it stays silent past the idle timeout.
    fn poll_upstream(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, String>>> {
        match Pin::new(&mut self.upstream).poll_frame(cx) {
            Poll::Ready(frame) => {
                if let Some((d, sleep)) = &mut self.idle {
                    sleep.as_mut().reset(Instant::now() + *d);
                }
                Poll::Ready(frame.map(|f| f.map_err(|e| e.to_string())))
            }
            Poll::Pending => match &mut self.idle {
                Some((d, sleep)) => {
                    ready!(sleep.as_mut().poll(cx));
                    Poll::Ready(Some(Err(format!(
                        "no data from the upstream for {}s",
                        d.as_secs_f64()
                    ))))
                }
                None => Poll::Pending,
            },
        }
    }

    /// Settle the stream's usage and cost (once) and journal its record: when the stream
    /// ends, before its last frame is released, else when the relay is dropped. The record
    /// itself is handed over when the relay is dropped (a guardrail may still note on it).
    fn settle(&mut self) {
        if std::mem::replace(&mut self.settled, true) {
            return;
        }
        self.record.usage = merged(self.record.usage, self.tap.usage());
        self.charges.settle(&mut self.record);
        if let Some(tx) = self.report.take() {
            let _ = tx.send((self.record.usage, self.record.cost));
        }
        self.recorder.journal(&mut self.record);
    }

    /// The SSE event that tells the client the stream broke, in the endpoint's own format.
    fn error_event(&self, message: &str) -> Bytes {
        let message = format!("upstream stream interrupted: {message}");
        match self.endpoint {
            Endpoint::Responses => {
                let body = serde_json::json!({
                    "type": "error",
                    "code": "stream_interrupted",
                    "message": message,
                    "param": null,
                });
                Bytes::from(format!("event: error\ndata: {body}\n\n"))
            }
            Endpoint::Messages | Endpoint::CountTokens => {
                let body = anthropic_error_body("api_error", &message);
                let mut out = Vec::with_capacity(body.len() + 24);
                out.extend_from_slice(b"event: error\ndata: ");
                out.extend_from_slice(&body);
                out.extend_from_slice(b"\n\n");
                Bytes::from(out)
            }
            // Audio bytes have no place for an event: the aborted body tells the client.
            Endpoint::AudioSpeech => Bytes::new(),
            Endpoint::ChatCompletions
            | Endpoint::Completions
            | Endpoint::Embeddings
            | Endpoint::ImageGenerations
            | Endpoint::ImageEdits
            | Endpoint::ImageVariations
            | Endpoint::AudioTranscriptions
            | Endpoint::AudioTranslations
            | Endpoint::Moderations
            | Endpoint::Rerank => {
                let body = error_body(&message, "upstream_error", None, "stream_interrupted");
                let mut out = Vec::with_capacity(body.len() + 8);
                out.extend_from_slice(b"data: ");
                out.extend_from_slice(&body);
                out.extend_from_slice(b"\n\n");
                Bytes::from(out)
            }
        }
    }
}

impl Body for StreamRelay {
    type Data = Bytes;
    type Error = RelayError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, RelayError>>> {
        let this = self.get_mut();
        if let Some(first) = this.first.take() {
            // Content logging on: keep a handle on the frame (a refcount bump); off: one branch.
            if let Some(c) = this.record.content.as_deref_mut() {
                c.keep(&first);
            }
            let out = this.tap.feed(first);
            if !out.is_empty() {
                return Poll::Ready(Some(Ok(Frame::data(out))));
            }
        }
        loop {
            match this.state {
                State::Ended => return Poll::Ready(None),
                State::Failing => {
                    // Give the HTTP layer one turn to flush the error event: hyper drops
                    // buffered bytes when a body fails, so fail only on the next poll.
                    this.state = State::Aborting;
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
                State::Aborting => {
                    this.state = State::Ended;
                    let why = this.failure.take().unwrap_or_default();
                    return Poll::Ready(Some(Err(RelayError(why))));
                }
                State::Relaying => {}
            }
            let polled = match this.poll_upstream(cx) {
                Poll::Ready(polled) => polled,
                Poll::Pending if this.held.len() == 0 => return Poll::Pending,
                // The upstream connection may hold more frames but hands them over only once
                // asked (the poll above asked): give its task a scheduler turn or two first.
                Poll::Pending if this.held.turns < UPSTREAM_TURNS => {
                    this.held.turns += 1;
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
                // Nothing came in those turns: what is held goes now.
                Poll::Pending => {
                    return Poll::Ready(this.held.take().map(|d| Ok(Frame::data(d))));
                }
            };
            match polled {
                Some(Ok(frame)) => {
                    let Ok(data) = frame.into_data() else {
                        continue; // trailers carry nothing for the client
                    };
                    if let Some(c) = this.record.content.as_deref_mut() {
                        c.keep(&data);
                    }
                    this.held.push(this.tap.feed(data));
                    if this.held.len() >= MAX_HELD {
                        return Poll::Ready(this.held.take().map(|d| Ok(Frame::data(d))));
                    }
                }
                Some(Err(msg)) => {
                    let event = this.error_event(&msg);
                    this.held.push(event);
                    this.failure = Some(msg);
                    this.state = State::Failing;
                    this.record.outcome = Outcome::StreamCut;
                    this.settle();
                    return Poll::Ready(this.held.take().map(|d| Ok(Frame::data(d))));
                }
                None if this.tap.finished() => {
                    this.state = State::Ended;
                    this.record.outcome = Outcome::StreamComplete;
                    let rest = this.tap.finish();
                    this.held.push(rest);
                    this.settle();
                    return Poll::Ready(this.held.take().map(|d| Ok(Frame::data(d))));
                }
                None => {
                    // The upstream closed without its end marker (`[DONE]`, a final Responses
                    // event): the answer is incomplete, and the client must not take it whole.
                    let rest = this.tap.finish();
                    this.held.push(rest);
                    let msg = "the upstream closed the stream before its end".to_owned();
                    let event = this.error_event(&msg);
                    this.held.push(event);
                    this.failure = Some(msg);
                    this.state = State::Failing;
                    this.record.outcome = Outcome::StreamCut;
                    this.settle();
                    return Poll::Ready(this.held.take().map(|d| Ok(Frame::data(d))));
                }
            }
        }
    }
}

impl Drop for StreamRelay {
    fn drop(&mut self) {
        if self.state == State::Relaying {
            self.record.outcome = Outcome::ClientGone;
            if self.finish_on_disconnect {
                if let Ok(rt) = tokio::runtime::Handle::try_current() {
                    let shell = self.record.clone_shell();
                    let record = std::mem::replace(&mut self.record, shell);
                    let charges = std::mem::take(&mut self.charges);
                    let upstream =
                        std::mem::replace(&mut self.upstream, UpstreamBody::whole(Bytes::new()));
                    let tap = std::mem::replace(&mut self.tap, SseTap::new(false));
                    rt.spawn(drain(upstream, tap, record, self.recorder.clone(), charges));
                    return;
                }
            }
        }
        self.settle();
        let shell = self.record.clone_shell();
        let record = std::mem::replace(&mut self.record, shell);
        self.recorder.record(record);
    }
}

/// Read what is left of an abandoned stream, only to learn its usage, then record it.
async fn drain(
    mut upstream: UpstreamBody,
    mut tap: SseTap,
    mut record: RequestRecord,
    recorder: Recorder,
    mut charges: Charges,
) {
    while let Some(Ok(frame)) = upstream.frame().await {
        if let Ok(data) = frame.into_data() {
            if let Some(c) = record.content.as_deref_mut() {
                c.keep(&data);
            }
            tap.feed(data);
        }
    }
    record.usage = merged(record.usage, tap.usage());
    charges.settle(&mut record);
    recorder.record(record);
}

/// The usage the request stated (speech's characters) with what the stream reported.
fn merged(stated: Option<Usage>, streamed: Option<Usage>) -> Option<Usage> {
    match (stated, streamed) {
        (Some(a), Some(b)) => Some(a.merge(b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{HeaderValue, Method};

    #[test]
    fn a_lone_frame_passes_uncopied_and_more_are_joined() {
        let mut held = Held::default();
        let one = Bytes::from_static(b"data: 1\n\n");
        held.push(one.clone());
        held.push(Bytes::new());
        let out = held.take().unwrap();
        assert_eq!(out.as_ptr(), one.as_ptr(), "a lone frame was copied");
        assert!(held.take().is_none());
        for f in ["a", "b", "c"] {
            held.push(Bytes::from(f));
        }
        assert_eq!(held.len(), 3);
        assert_eq!(held.take().unwrap(), "abc");
        assert_eq!(held.len(), 0);
    }

    fn relay(frames: &[&'static str], interval: Duration) -> StreamRelay {
        let frames = frames.iter().map(|f| Bytes::from_static(f.as_bytes()));
        let upstream = UpstreamBody::in_process(sluice_mock::MockBody::paced(
            frames.collect(),
            interval,
            None,
        ));
        let record = RequestRecord::new(
            HeaderValue::from_static("id"),
            Method::POST,
            "/v1/chat/completions",
            std::time::Instant::now(),
        );
        let (recorder, _task) = Recorder::start(Vec::new());
        StreamRelay::new(
            Bytes::from_static(b"data: {\"first\":true}\n\n"),
            upstream,
            false,
            Endpoint::ChatCompletions,
            record,
            recorder,
        )
    }

    async fn frames(mut relay: StreamRelay) -> Vec<Bytes> {
        let mut out = Vec::new();
        while let Some(frame) = relay.frame().await {
            out.push(frame.unwrap().into_data().unwrap());
        }
        out
    }

    const STREAM: [&str; 4] = [
        "data: {\"n\":1}\n\n",
        "data: {\"n\":2}\n\n",
        "data: {\"n\":3}\n\n",
        "data: [DONE]\n\n",
    ];

    #[tokio::test]
    async fn frames_ready_together_leave_in_one_write_after_the_first() {
        let out = frames(relay(&STREAM, Duration::ZERO)).await;
        assert_eq!(out.len(), 2, "{out:?}");
        assert_eq!(out[0], "data: {\"first\":true}\n\n");
        assert_eq!(out[1], STREAM.concat());
    }

    #[tokio::test(start_paused = true)]
    async fn a_frame_never_waits_for_the_next() {
        let out = frames(relay(&STREAM, Duration::from_millis(20))).await;
        assert_eq!(out.len(), 1 + STREAM.len(), "{out:?}");
        assert_eq!(out[1..].concat(), STREAM.concat().as_bytes());
    }
}
