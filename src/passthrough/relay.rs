//! A pass-through answer relayed to the client frame by frame, as the provider sends it: SSE,
//! Bedrock's binary event-stream, or any other body (a file download). The usage tap reads
//! the frames as they pass; nothing is buffered, reframed or made up. A body the upstream
//! breaks is cut for the client too (the provider's own SDK sees what it would have seen);
//! the request is charged and recorded when the relay is dropped, however the stream ended.

use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame};

use sluice_core::record::{Outcome, RequestRecord};
use sluice_providers::passthrough::Tap;
use sluice_providers::UpstreamBody;
use sluice_telemetry::Recorder;

use crate::server::RelayError;
use crate::spend::Charges;

/// A pass-through answer in flight; owns the request's record and charges.
#[derive(Debug)]
pub struct PassRelay {
    upstream: UpstreamBody,
    tap: Tap,
    record: RequestRecord,
    recorder: Recorder,
    charges: Charges,
    ended: bool,
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
            ended: false,
            settled: false,
        }
    }

    /// Settle the answer's usage and cost (once) and journal its record: when the upstream
    /// body ends, before the end of the body is released to the client, else when the relay
    /// is dropped. The record itself is handed over when the relay is dropped.
    fn settle(&mut self) {
        if std::mem::replace(&mut self.settled, true) {
            return;
        }
        self.record.usage = self.tap.usage();
        self.charges.settle(&mut self.record);
        self.recorder.journal(&mut self.record);
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
            if this.ended {
                return Poll::Ready(None);
            }
            match ready!(Pin::new(&mut this.upstream).poll_frame(cx)) {
                Some(Ok(frame)) => {
                    let Ok(data) = frame.into_data() else {
                        continue; // trailers carry nothing for the client
                    };
                    if let Some(c) = this.record.content.as_deref_mut() {
                        c.keep(&data);
                    }
                    let out = this.tap.feed(data);
                    if !out.is_empty() {
                        return Poll::Ready(Some(Ok(Frame::data(out))));
                    }
                }
                Some(Err(e)) => {
                    this.ended = true;
                    this.record.outcome = Outcome::StreamCut;
                    this.settle();
                    return Poll::Ready(Some(Err(RelayError(e.to_string()))));
                }
                None => {
                    this.ended = true;
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
        if !self.ended {
            self.record.outcome = Outcome::ClientGone;
        }
        self.settle();
        let shell = self.record.clone_shell();
        let record = std::mem::replace(&mut self.record, shell);
        self.recorder.record(record);
    }
}
