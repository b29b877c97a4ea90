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
//!
//! An upstream cannot hold a worker: an event that grows past the tap's bound
//! (`sluice_translate::sse::MAX_EVENT`) ends the stream with an error event, and the idle
//! timeout counts completed events, not bytes, so bytes trickled without ever ending an event
//! time out too. Either way the upstream is dropped at once.

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use tokio::time::{Instant, Sleep};

use sluice_core::endpoint::Endpoint;
use sluice_core::error::{anthropic_error_body, error_body, google_error_body};
use sluice_core::record::{Outcome, RequestRecord};
use sluice_core::usage::Usage;
use sluice_providers::passthrough::Tap;
use sluice_providers::UpstreamBody;
use sluice_telemetry::Recorder;

use crate::http::RelayError;
use crate::spend::Charges;

/// Where a relayed stream is: the inference relay's and the pass-through relay's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    /// Frames pass.
    Relaying,
    /// Error event sent; the body fails once it had time to flush ([`Abort`]).
    Failing,
    /// Done: the body ends.
    Ended,
}

/// A relayed stream's idle timeout: how long the upstream may go without completing a unit
/// of the stream (an event, a line, a frame, as its tap counts them), with its timer. Bytes
/// that complete nothing do not restart it, so an upstream trickling bytes cannot hold a
/// stream open. The inference relay and the pass-through relay share it.
#[derive(Debug)]
pub(crate) struct IdleTimer {
    limit: Duration,
    timer: Pin<Box<Sleep>>,
}

impl IdleTimer {
    /// A timer of `limit`, running from now.
    pub(crate) fn new(limit: Duration) -> Self {
        Self {
            limit,
            timer: Box::pin(tokio::time::sleep(limit)),
        }
    }

    /// The configured limit.
    pub(crate) fn limit(&self) -> Duration {
        self.limit
    }

    /// After a frame was fed to the tap: restart on `progressed`, else the reason to end the
    /// stream when the window passed (checked on every frame, not only while the upstream is
    /// quiet).
    pub(crate) fn after_frame(&mut self, progressed: bool) -> Result<(), String> {
        let now = Instant::now();
        if progressed {
            self.timer.as_mut().reset(now + self.limit);
        } else if self.timer.deadline() <= now {
            return Err(idle_message(self.limit));
        }
        Ok(())
    }

    /// While the upstream is pending: ready with the reason to end when the window passes.
    pub(crate) fn poll_expired(&mut self, cx: &mut Context<'_>) -> Poll<String> {
        ready!(self.timer.as_mut().poll(cx));
        Poll::Ready(idle_message(self.limit))
    }
}

/// How sluice fails a stream it ends itself: the reason, kept while the error event it sent
/// flushes, then the body's error after [`FLUSH_GRACE`] (hyper drops what it still buffers
/// when a body fails). The inference relay and the pass-through relay share it.
#[derive(Debug, Default)]
pub(crate) struct Abort {
    why: Option<String>,
    grace: Option<Pin<Box<Sleep>>>,
}

impl Abort {
    /// The stream is ending for `why`; its error event has just been handed to the client.
    pub(crate) fn begin(&mut self, why: String) {
        self.why = Some(why);
    }

    /// Ready with the body's error once the grace has passed.
    pub(crate) fn poll_error(&mut self, cx: &mut Context<'_>) -> Poll<RelayError> {
        let grace = self
            .grace
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(FLUSH_GRACE)));
        ready!(grace.as_mut().poll(cx));
        Poll::Ready(RelayError(self.why.take().unwrap_or_default()))
    }
}

/// A stream in flight.
#[derive(Debug)]
pub struct StreamRelay {
    first: Option<Bytes>,
    upstream: UpstreamBody,
    tap: Tap,
    endpoint: Endpoint,
    state: State,
    record: RequestRecord,
    recorder: Recorder,
    /// Longest wait for the next complete upstream event.
    idle: Option<IdleTimer>,
    /// The deployment's and the caller's slots and counters, settled when the stream ends.
    charges: Charges,
    /// Keep reading the upstream after the client leaves, to account its full usage.
    finish_on_disconnect: bool,
    /// Output waiting for the upstream's next ready frame, to leave in the same write.
    held: Held,
    /// Told the settled usage and cost when the stream ends (the cache stores them).
    report: Option<tokio::sync::oneshot::Sender<Settled>>,
    /// Why sluice ended the stream, until the body fails.
    abort: Abort,
    /// Usage and cost settled and the record journaled (`settle`).
    settled: bool,
    /// Keeps a Responses answer the client asked to `store`, from the stream's final event.
    keeper: Option<Box<crate::responses::Keeper>>,
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

/// How long a broken stream's error event has to reach the client before the body fails
/// (hyper drops what it still buffers then). The event is the last frame; hyper writes it
/// while the body is pending, so a client that reads gets it well within this.
pub(crate) const FLUSH_GRACE: Duration = Duration::from_millis(50);

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
            tap: Tap::for_endpoint(endpoint, strip_usage_chunk),
            endpoint,
            state: State::Relaying,
            record,
            recorder,
            idle: None,
            charges: Charges::default(),
            finish_on_disconnect: false,
            report: None,
            held: Held::default(),
            abort: Abort::default(),
            settled: false,
            keeper: None,
        }
    }

    /// Keep the Responses answer this stream carries once it ends whole.
    pub(crate) fn keep(mut self, keeper: Option<Box<crate::responses::Keeper>>) -> Self {
        if keeper.is_some() {
            self.tap.keep_final_event();
        }
        self.keeper = keeper;
        self
    }

    /// Fail the stream when the upstream completes no event for `idle` (bytes that do not
    /// end one do not count).
    pub fn idle_timeout(mut self, idle: Option<Duration>) -> Self {
        self.idle = idle.map(IdleTimer::new);
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
            self.tap = Tap::raw();
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
            Poll::Ready(frame) => Poll::Ready(frame.map(|f| f.map_err(|e| e.to_string()))),
            Poll::Pending => match &mut self.idle {
                Some(idle) => idle.poll_expired(cx).map(|why| Some(Err(why))),
                None => Poll::Pending,
            },
        }
    }

    /// Feed one upstream frame to the tap and hold what goes on; restart the idle timer when
    /// an event completed. Why the stream must end instead: an event past its bound, or no
    /// event completed within the idle timeout while bytes kept coming.
    fn take_in(&mut self, data: Bytes) -> Result<(), String> {
        let out = self.tap.feed(data).map_err(|e| e.to_string())?;
        self.held.push(out);
        let progressed = self.tap.take_progress();
        match &mut self.idle {
            Some(idle) => idle.after_frame(progressed),
            None => Ok(()),
        }
    }

    /// End the stream with an error event (sent with whatever is held); the body fails after
    /// [`FLUSH_GRACE`], and the upstream is read no more.
    fn fail(&mut self, msg: String) -> Poll<Option<Result<Frame<Bytes>, RelayError>>> {
        let event = self.error_event(&msg);
        self.held.push(event);
        self.abort.begin(msg);
        self.state = State::Failing;
        self.record.outcome = Outcome::StreamCut;
        self.settle();
        Poll::Ready(self.held.take().map(|d| Ok(Frame::data(d))))
    }

    /// Settle the stream's usage and cost (once) and journal its record: when the stream
    /// ends, before its last frame is released, else when the relay is dropped. The record
    /// itself is handed over when the relay is dropped (a guardrail may still note on it).
    fn settle(&mut self) {
        if std::mem::replace(&mut self.settled, true) {
            return;
        }
        self.record.usage = merged(self.record.usage, self.tap.usage());
        if let (Some(k), Some(last)) = (self.keeper.take(), self.tap.take_final_event()) {
            k.keep_streamed(last);
        }
        self.charges.settle(&mut self.record);
        if let Some(tx) = self.report.take() {
            let _ = tx.send((self.record.usage, self.record.cost));
        }
        self.recorder.journal(&mut self.record);
    }

    /// The SSE event that tells the client the stream broke, in the endpoint's own format;
    /// after a blank line when the client was sent part of an event that will not end.
    fn error_event(&self, message: &str) -> Bytes {
        let event = self.error_event_alone(message);
        if event.is_empty() || !self.tap.mid_event() {
            return event;
        }
        let mut out = BytesMut::with_capacity(event.len() + 2);
        out.extend_from_slice(b"\n\n");
        out.extend_from_slice(&event);
        out.freeze()
    }

    fn error_event_alone(&self, message: &str) -> Bytes {
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
            Endpoint::GenerateContent => {
                let body = google_error_body(http::StatusCode::BAD_GATEWAY, &message);
                let mut out = Vec::with_capacity(body.len() + 10);
                out.extend_from_slice(b"data: ");
                out.extend_from_slice(&body);
                out.extend_from_slice(b"\r\n\r\n");
                Bytes::from(out)
            }
            // An exception message, which AWS's SDKs raise.
            Endpoint::Converse => Bytes::from(sluice_translate::eventstream::exception(
                "modelStreamErrorException",
                &message,
            )),
            Endpoint::ChatCompletions
            | Endpoint::Completions
            | Endpoint::Embeddings
            | Endpoint::ImageGenerations
            | Endpoint::ImageEdits
            | Endpoint::ImageVariations
            | Endpoint::AudioTranscriptions
            | Endpoint::AudioTranslations
            | Endpoint::Moderations
            | Endpoint::Rerank
            | Endpoint::Ocr => {
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
            if let Err(msg) = this.take_in(first) {
                return this.fail(msg);
            }
            if this.held.len() > 0 {
                return Poll::Ready(this.held.take().map(|d| Ok(Frame::data(d))));
            }
        }
        loop {
            match this.state {
                State::Ended => return Poll::Ready(None),
                State::Failing => {
                    // The HTTP layer writes the error event while the body is pending (one
                    // turn was not enough behind a client slow to read).
                    let e = ready!(this.abort.poll_error(cx));
                    this.state = State::Ended;
                    return Poll::Ready(Some(Err(e)));
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
                    if let Err(msg) = this.take_in(data) {
                        return this.fail(msg);
                    }
                    if this.held.len() >= MAX_HELD {
                        return Poll::Ready(this.held.take().map(|d| Ok(Frame::data(d))));
                    }
                }
                Some(Err(msg)) => return this.fail(msg),
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
                    return this.fail("the upstream closed the stream before its end".to_owned());
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
                    let tap = std::mem::replace(&mut self.tap, Tap::raw());
                    let idle = self.idle.as_ref().map(IdleTimer::limit);
                    let recorder = self.recorder.clone();
                    rt.spawn(drain(upstream, tap, idle, record, recorder, charges));
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

/// Read what is left of an abandoned stream, only to learn its usage, then record it. The
/// same bounds hold as while relaying: an event past its bound, or no event completed within
/// the idle timeout, stops the reading.
async fn drain(
    mut upstream: UpstreamBody,
    mut tap: Tap,
    idle: Option<Duration>,
    mut record: RequestRecord,
    recorder: Recorder,
    mut charges: Charges,
) {
    let mut deadline = idle.map(|d| Instant::now() + d);
    loop {
        let next = match deadline {
            Some(at) => match tokio::time::timeout_at(at, upstream.frame()).await {
                Ok(next) => next,
                Err(_) => break,
            },
            None => upstream.frame().await,
        };
        let Some(Ok(frame)) = next else {
            break;
        };
        if let Ok(data) = frame.into_data() {
            if let Some(c) = record.content.as_deref_mut() {
                c.keep(&data);
            }
            if tap.feed(data).is_err() {
                break;
            }
            if tap.take_progress() {
                deadline = idle.map(|d| Instant::now() + d);
            } else if deadline.is_some_and(|at| at <= Instant::now()) {
                break;
            }
        }
    }
    record.usage = merged(record.usage, tap.usage());
    charges.settle(&mut record);
    recorder.record(record);
}

/// Why a stream ended that completed no event within its idle timeout.
fn idle_message(idle: Duration) -> String {
    format!(
        "no complete event from the upstream for {}s",
        idle.as_secs_f64()
    )
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

    /// An upstream that trickles bytes of an event that never ends: the idle timeout counts
    /// completed events, so it fires while the bytes still come, and the error event follows
    /// the unfinished one as an event of its own.
    #[tokio::test(start_paused = true)]
    async fn bytes_that_complete_no_event_do_not_hold_off_the_idle_timeout() {
        let mut trickle = vec!["data: {\"par"];
        trickle.extend(std::iter::repeat_n("x", 200));
        let mut r = relay(&trickle, Duration::from_millis(20))
            .idle_timeout(Some(Duration::from_millis(100)));
        let start = Instant::now();
        let mut out = Vec::new();
        let failed = loop {
            match r.frame().await {
                Some(Ok(f)) => out.push(f.into_data().unwrap()),
                Some(Err(e)) => break e,
                None => panic!("the stream ended cleanly"),
            }
        };
        assert!(r.frame().await.is_none(), "nothing after the failure");
        assert!(
            start.elapsed() < Duration::from_millis(100) + FLUSH_GRACE + Duration::from_millis(40),
            "{:?}",
            start.elapsed()
        );
        assert!(failed.0.contains("no complete event"), "{failed}");
        let last = String::from_utf8(out.last().unwrap().to_vec()).unwrap();
        assert!(
            last.contains("\n\ndata: {\"error\""),
            "an event of its own: {last}"
        );
        assert!(
            last.contains("no complete event from the upstream for 0.1s"),
            "{last}"
        );
        // A steady stream of whole events never meets it.
        let steady = ["data: {\"n\":1}\n\n"; 20].to_vec();
        let mut r = relay(&steady, Duration::from_millis(60))
            .idle_timeout(Some(Duration::from_millis(100)));
        let mut n = 0;
        while let Some(f) = r.frame().await {
            n += 1;
            assert!(n < 100, "the relay ends");
            match f {
                Ok(_) => {}
                // The stream has no `[DONE]`: cut at its end, not by the timer.
                Err(e) => assert!(e.0.contains("before its end"), "{e}"),
            }
        }
    }
}
