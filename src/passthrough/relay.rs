//! A pass-through answer relayed to the client frame by frame, as the provider sends it: SSE,
//! Bedrock's binary event-stream, or any other body (a file download). The usage tap reads
//! the frames as they pass; nothing is buffered, reframed or made up. A body the upstream
//! breaks is cut for the client too (the provider's own SDK sees what it would have seen);
//! the request is settled and its record journaled when the stream ends (before its last
//! byte leaves), and recorded when the relay is dropped, however the stream ended.
//!
//! Two ends are sluice's own, each told with an error in the stream's framing
//! (`Tap::error_event`) before the body is cut, and the upstream dropped at once: an event,
//! line or frame that outgrows the tap's bound, and the idle timeout, which counts units the
//! tap saw complete rather than bytes, so an upstream trickling bytes cannot hold the stream.

use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame};

use sluice_core::record::{Outcome, RequestRecord};
use sluice_providers::passthrough::Tap;
use sluice_providers::UpstreamBody;
use sluice_telemetry::Recorder;

use crate::http::RelayError;
use crate::server::{Abort, IdleTimer, RelayState as State};
use crate::spend::Charges;

/// A pass-through answer in flight; owns the request's record and charges.
#[derive(Debug)]
pub struct PassRelay {
    upstream: UpstreamBody,
    tap: Tap,
    record: RequestRecord,
    recorder: Recorder,
    charges: Charges,
    state: State,
    /// Why sluice ended the stream, until the body fails.
    abort: Abort,
    /// Longest wait for the tap to see a unit of the stream complete.
    idle: Option<IdleTimer>,
    /// Usage and cost settled and the record journaled (`settle`).
    settled: bool,
}

impl PassRelay {
    /// Relay `upstream`, reading usage with `tap`; `charges` are settled when it ends.
    pub fn new(
        upstream: UpstreamBody,
        tap: Tap,
        record: RequestRecord,
        recorder: Recorder,
        charges: Charges,
    ) -> Self {
        Self {
            upstream,
            tap,
            record,
            recorder,
            charges,
            state: State::Relaying,
            abort: Abort::default(),
            idle: None,
            settled: false,
        }
    }

    /// Settle the answer's usage and cost (once) and journal its record: when the upstream
    /// body ends or sluice ends it, before the end of the body is released to the client,
    /// else when the relay is dropped. The record itself is handed over when the relay is
    /// dropped.
    fn settle(&mut self) {
        if std::mem::replace(&mut self.settled, true) {
            return;
        }
        // What the record already holds (a custom route's per-call unit) stays.
        if let Some(u) = self.tap.usage() {
            self.record.usage = Some(self.record.usage.map_or(u, |r| r.merge(u)));
        }
        self.charges.settle(&mut self.record);
        self.recorder.journal(&mut self.record);
    }

    /// End the stream when the upstream completes no event, line or frame for `idle`
    /// (`stream_idle_timeout`); bytes that complete none do not count.
    pub fn idle_timeout(mut self, idle: Option<Duration>) -> Self {
        self.idle = idle.map(IdleTimer::new);
        self
    }

    /// Restart the idle timer when the tap saw progress; the idle message when the window
    /// passed without any while bytes kept coming.
    fn count_progress(&mut self) -> Result<(), String> {
        let progressed = self.tap.take_progress();
        match &mut self.idle {
            Some(idle) => idle.after_frame(progressed),
            None => Ok(()),
        }
    }

    /// sluice ends the stream: its error event (when the framing has one) goes first, the
    /// body fails after; the upstream is read no more.
    fn fail(&mut self, msg: String) -> Poll<Option<Result<Frame<Bytes>, RelayError>>> {
        self.record.outcome = Outcome::StreamCut;
        self.settle();
        let event = self.tap.error_event(&msg);
        if event.is_empty() {
            self.state = State::Ended;
            return Poll::Ready(Some(Err(RelayError(msg))));
        }
        self.abort.begin(msg);
        self.state = State::Failing;
        Poll::Ready(Some(Ok(Frame::data(event))))
    }
}

impl crate::guardrails::NotesGuardrails for PassRelay {
    fn note_guardrail(&mut self, run: sluice_core::record::GuardrailRun) {
        crate::guardrails::note_on(&mut self.record, run);
    }
}

impl Body for PassRelay {
    type Data = Bytes;
    type Error = RelayError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, RelayError>>> {
        let this = self.get_mut();
        loop {
            match this.state {
                State::Ended => return Poll::Ready(None),
                State::Failing => {
                    let e = ready!(this.abort.poll_error(cx));
                    this.state = State::Ended;
                    return Poll::Ready(Some(Err(e)));
                }
                State::Relaying => {}
            }
            let polled = match Pin::new(&mut this.upstream).poll_frame(cx) {
                Poll::Ready(polled) => polled,
                Poll::Pending => {
                    let Some(idle) = &mut this.idle else {
                        return Poll::Pending;
                    };
                    let why = ready!(idle.poll_expired(cx));
                    return this.fail(why);
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
                    let out = match this.tap.feed(data) {
                        Ok(out) => out,
                        Err(e) => return this.fail(e.to_string()),
                    };
                    if let Err(msg) = this.count_progress() {
                        return this.fail(msg);
                    }
                    if !out.is_empty() {
                        return Poll::Ready(Some(Ok(Frame::data(out))));
                    }
                }
                Some(Err(e)) => {
                    this.state = State::Ended;
                    this.record.outcome = Outcome::StreamCut;
                    this.settle();
                    return Poll::Ready(Some(Err(RelayError(e.to_string()))));
                }
                None => {
                    this.state = State::Ended;
                    this.record.outcome = Outcome::StreamComplete;
                    let rest = this.tap.finish();
                    this.settle();
                    if !rest.is_empty() {
                        return Poll::Ready(Some(Ok(Frame::data(rest))));
                    }
                }
            }
        }
    }
}

impl Drop for PassRelay {
    fn drop(&mut self) {
        if self.state == State::Relaying {
            self.record.outcome = Outcome::ClientGone;
        }
        self.settle();
        let shell = self.record.clone_shell();
        let record = std::mem::replace(&mut self.record, shell);
        self.recorder.record(record);
    }
}
