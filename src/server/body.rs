//! The body of every response sluice sends: a whole buffer, or a relayed stream.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

use super::relay::{RelayError, StreamRelay};

/// A response body. An enum rather than a boxed trait object: no allocation for whole
/// answers, and one exhaustive place for every kind.
#[derive(Debug)]
pub enum ResponseBody {
    /// A complete buffer (errors, non-stream answers, admin routes).
    Full(Option<Bytes>),
    /// An upstream stream relayed frame by frame.
    Stream(Box<StreamRelay>),
}

impl ResponseBody {
    /// A whole-buffer body.
    pub fn full(data: impl Into<Bytes>) -> Self {
        let data = data.into();
        Self::Full((!data.is_empty()).then_some(data))
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
            Self::Full(data) => Poll::Ready(data.take().map(|d| Ok(Frame::data(d)))),
            Self::Stream(relay) => Pin::new(relay.as_mut()).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Self::Full(data) => data.is_none(),
            Self::Stream(_) => false,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Self::Full(data) => SizeHint::with_exact(data.as_ref().map_or(0, |d| d.len() as u64)),
            Self::Stream(_) => SizeHint::default(),
        }
    }
}
