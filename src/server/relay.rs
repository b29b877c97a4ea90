//! Relaying an upstream stream to the client: each frame is forwarded as it arrives (through
//! the SSE tap, which reads usage and strips the chunk sluice asked for on the client's
//! behalf). A stream the upstream breaks ends with an error event and an aborted body, never
//! with a made-up `[DONE]`. The request's record is emitted when the relay is dropped, so a
//! client that goes away is still accounted.

use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame};

use crate::endpoint::Endpoint;
use crate::error::error_body;
use crate::providers::body::UpstreamBody;
use crate::providers::sse::SseTap;
use crate::telemetry::{Outcome, Recorder, RequestRecord};

/// Why a relayed stream was aborted. The client already got an error event; this error only
/// makes the HTTP layer cut the response so that no client mistakes it for a complete one.
#[derive(Debug, thiserror::Error)]
#[error("upstream stream interrupted: {0}")]
pub struct RelayError(String);

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
        }
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
            Endpoint::ChatCompletions | Endpoint::Completions | Endpoint::Embeddings => {
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
            match ready!(Pin::new(&mut this.upstream).poll_frame(cx)) {
                Some(Ok(frame)) => {
                    let Ok(data) = frame.into_data() else {
                        continue; // trailers carry nothing for the client
                    };
                    let out = this.tap.feed(data);
                    if !out.is_empty() {
                        return Poll::Ready(Some(Ok(Frame::data(out))));
                    }
                }
                Some(Err(e)) => {
                    let msg = e.to_string();
                    let event = this.error_event(&msg);
                    this.failure = Some(msg);
                    this.state = State::Failing;
                    this.record.outcome = Outcome::StreamCut;
                    return Poll::Ready(Some(Ok(Frame::data(event))));
                }
                None if this.tap.finished() => {
                    this.state = State::Ended;
                    this.record.outcome = Outcome::StreamComplete;
                    let rest = this.tap.finish();
                    if !rest.is_empty() {
                        return Poll::Ready(Some(Ok(Frame::data(rest))));
                    }
                    return Poll::Ready(None);
                }
                None => {
                    // The upstream closed without its end marker (`[DONE]`, a final Responses
                    // event): the answer is incomplete, and the client must not take it whole.
                    let mut out = this.tap.finish().to_vec();
                    let msg = "the upstream closed the stream before its end".to_owned();
                    out.extend_from_slice(&this.error_event(&msg));
                    this.failure = Some(msg);
                    this.state = State::Failing;
                    this.record.outcome = Outcome::StreamCut;
                    return Poll::Ready(Some(Ok(Frame::data(Bytes::from(out)))));
                }
            }
        }
    }
}

impl Drop for StreamRelay {
    fn drop(&mut self) {
        if self.state == State::Relaying {
            self.record.outcome = Outcome::ClientGone;
        }
        self.record.usage = self.tap.usage();
        let shell = self.record.clone_shell();
        let record = std::mem::replace(&mut self.record, shell);
        self.recorder.record(record);
    }
}
