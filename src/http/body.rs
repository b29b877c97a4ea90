//! The body of every response sluice sends: a whole buffer, or a stream some feature
//! produces. Open to features: a relay is a boxed body, so a new kind of stream needs no
//! variant here.

use std::pin::Pin;
use std::task::{Context, Poll};

use std::task::ready;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::Full;

/// Why a relayed stream ended before its upstream did: the error ends the body, which
/// makes the HTTP layer cut the response so that no client mistakes it for a complete one.
#[derive(Debug, thiserror::Error)]
#[error("upstream stream interrupted: {0}")]
pub struct RelayError(pub(crate) String);

/// A boxed streaming body: one allocation, whatever feature made the stream.
pub type BoxedBody = UnsyncBoxBody<Bytes, RelayError>;

/// A response body. Whole answers are not boxed (no allocation); every stream is.
#[derive(Debug)]
pub enum ResponseBody {
    /// A complete buffer (errors, non-stream answers, admin routes).
    Full(Full<Bytes>),
    /// A relayed stream that owns its request's record and records it when it ends (the
    /// inference and pass-through relays, and the guardrails that check them as they pass).
    Relay(BoxedBody),
    /// A stream whose request is recorded when its answer begins (an answer another request
    /// is receiving, an MCP client's event stream, a reshaped or held body).
    Shared(BoxedBody),
}

impl ResponseBody {
    /// A whole-buffer body.
    pub fn full(data: impl Into<Bytes>) -> Self {
        Self::Full(Full::new(data.into()))
    }

    /// A stream that records its own request when it ends.
    pub fn relay<B>(body: B) -> Self
    where
        B: Body<Data = Bytes, Error = RelayError> + Send + 'static,
    {
        Self::Relay(UnsyncBoxBody::new(body))
    }

    /// A stream whose request the pipeline records.
    pub fn shared<B>(body: B) -> Self
    where
        B: Body<Data = Bytes, Error = RelayError> + Send + 'static,
    {
        Self::Shared(UnsyncBoxBody::new(body))
    }

    /// Whether the body records its request itself (so the pipeline must not).
    pub fn owns_record(&self) -> bool {
        matches!(self, Self::Relay(_))
    }

    /// This body, holding `guard` until it ends or is dropped (an in-flight slot).
    pub fn holding<G: Send + Unpin + 'static>(self, guard: G) -> Self {
        let relay = self.owns_record();
        let held = Holding {
            body: self,
            _guard: guard,
        };
        match relay {
            true => Self::Relay(UnsyncBoxBody::new(held)),
            false => Self::Shared(UnsyncBoxBody::new(held)),
        }
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
            Self::Relay(body) | Self::Shared(body) => Pin::new(body).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Self::Full(full) => full.is_end_stream(),
            Self::Relay(body) | Self::Shared(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Self::Full(full) => full.size_hint(),
            Self::Relay(body) | Self::Shared(body) => body.size_hint(),
        }
    }
}

/// A body and something to drop when it is done with.
struct Holding<G> {
    body: ResponseBody,
    _guard: G,
}

impl<G: Unpin> Body for Holding<G> {
    type Data = Bytes;
    type Error = RelayError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, RelayError>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A reshaping of a streamed answer's bytes as they pass: what a client asked to read
/// differently from what the pipeline makes (Google's JSON-array stream, a Responses stream
/// naming the response it continued).
pub trait Reshape: Send + Unpin + 'static {
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
pub struct Reshaped<R> {
    inner: ResponseBody,
    reshape: R,
    ended: bool,
}

impl<R: Reshape> Reshaped<R> {
    /// `inner`'s bytes through `reshape`, as a response body.
    pub fn body(inner: ResponseBody, reshape: R) -> ResponseBody {
        let relay = inner.owns_record();
        let reshaped = Self {
            inner,
            reshape,
            ended: false,
        };
        match relay {
            true => ResponseBody::relay(reshaped),
            false => ResponseBody::shared(reshaped),
        }
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
