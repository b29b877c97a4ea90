//! The body of every response sluice sends: a whole buffer, or a relayed stream.

use std::pin::Pin;
use std::task::{Context, Poll};

use std::task::ready;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::Full;

use super::overload::Slot;
use super::relay::{RelayError, StreamRelay};
use crate::guardrails::GuardedStream;
use crate::passthrough::PassRelay;

/// A response body. An enum rather than a boxed trait object: no allocation for whole
/// answers, and one exhaustive place for every kind.
#[derive(Debug)]
pub enum ResponseBody {
    /// A complete buffer (errors, non-stream answers, admin routes).
    Full(Full<Bytes>),
    /// An upstream stream relayed frame by frame.
    Stream(Box<StreamRelay>),
    /// A pass-through answer relayed as it arrives (`crate::passthrough`).
    Pass(Box<PassRelay>),
    /// An answer another request is receiving, read as it arrives (`crate::cache`); also an
    /// MCP client's SSE event stream (`crate::mcp::legacy`).
    Shared(UnsyncBoxBody<Bytes, RelayError>),
    /// A relayed stream checked by `post_call` guardrails as it passes (`crate::guardrails`).
    Guarded(Box<GuardedStream<StreamRelay>>),
    /// A pass-through stream checked the same way.
    GuardedPass(Box<GuardedStream<PassRelay>>),
    /// A response that holds its request's in-flight slot until the body ends
    /// (`server::overload`; only when `max_in_flight_requests` is set).
    Held(Box<(ResponseBody, Slot)>),
}

impl ResponseBody {
    /// A whole-buffer body.
    pub fn full(data: impl Into<Bytes>) -> Self {
        Self::Full(Full::new(data.into()))
    }
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = RelayError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, RelayError>>> {
        match self.get_mut() {
            Self::Full(full) => Pin::new(full)
                .poll_frame(cx)
                .map_err(|never| match never {}),
            Self::Stream(relay) => Pin::new(relay.as_mut()).poll_frame(cx),
            Self::Pass(relay) => Pin::new(relay.as_mut()).poll_frame(cx),
            Self::Shared(body) => Pin::new(body).poll_frame(cx),
            Self::Guarded(body) => Pin::new(body.as_mut()).poll_frame(cx),
            Self::GuardedPass(body) => Pin::new(body.as_mut()).poll_frame(cx),
            Self::Held(held) => Pin::new(&mut held.0).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Self::Full(full) => full.is_end_stream(),
            Self::Held(held) => held.0.is_end_stream(),
            Self::Stream(_)
            | Self::Pass(_)
            | Self::Shared(_)
            | Self::Guarded(_)
            | Self::GuardedPass(_) => false,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Self::Full(full) => full.size_hint(),
            Self::Held(held) => held.0.size_hint(),
            Self::Stream(_)
            | Self::Pass(_)
            | Self::Shared(_)
            | Self::Guarded(_)
            | Self::GuardedPass(_) => SizeHint::default(),
        }
    }
}

/// A reshaping of a streamed answer's bytes as they pass: what a client asked to read
/// differently from what the pipeline makes (Google's JSON-array stream, a Responses stream
/// naming the response it continued).
pub(crate) trait Reshape: Send + Unpin + 'static {
    /// The bytes to send for these (what is not yet whole is held back).
    fn feed(&mut self, data: &[u8]) -> Vec<u8>;
    /// What is left to send when the stream ends.
    fn finish(&mut self) -> Vec<u8>;
}

impl Reshape for sluice_translate::gemini::ArrayStream {
    fn feed(&mut self, data: &[u8]) -> Vec<u8> {
        sluice_translate::gemini::ArrayStream::feed(self, data)
    }

    fn finish(&mut self) -> Vec<u8> {
        sluice_translate::gemini::ArrayStream::finish(self)
    }
}

/// A response body reshaped as it passes (boxed into [`ResponseBody::Shared`]).
pub(crate) struct Reshaped<R> {
    inner: ResponseBody,
    reshape: R,
    ended: bool,
}

impl<R: Reshape> Reshaped<R> {
    /// `inner`'s bytes through `reshape`, as a response body.
    pub(crate) fn body(inner: ResponseBody, reshape: R) -> ResponseBody {
        ResponseBody::Shared(UnsyncBoxBody::new(Self {
            inner,
            reshape,
            ended: false,
        }))
    }
}

impl<R: Reshape> Body for Reshaped<R> {
    type Data = Bytes;
    type Error = RelayError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, RelayError>>> {
        let this = &mut *self;
        loop {
            if this.ended {
                return Poll::Ready(None);
            }
            match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => {
                        let out = this.reshape.feed(&data);
                        if !out.is_empty() {
                            return Poll::Ready(Some(Ok(Frame::data(Bytes::from(out)))));
                        }
                    }
                    Err(other) => return Poll::Ready(Some(Ok(other))),
                },
                Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                None => {
                    this.ended = true;
                    let out = this.reshape.finish();
                    if !out.is_empty() {
                        return Poll::Ready(Some(Ok(Frame::data(Bytes::from(out)))));
                    }
                }
            }
        }
    }
}
