//! The request body every handler of the accept loop reads: hyper's, or the bytes sluice's own
//! HTTP/1.1 path read whole before calling the handler.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;

/// A request's body, from whichever path served the connection. One type, so that a handler
/// is written once for both.
#[derive(Debug)]
pub enum RequestBody {
    /// Read by hyper (HTTP/2, TLS, and HTTP/1.1 requests sluice's own path hands over).
    Hyper(Incoming),
    /// Already read whole (sluice's own HTTP/1.1 path); `None` once taken, or for no body.
    Whole(Option<Bytes>),
}

impl From<Incoming> for RequestBody {
    fn from(b: Incoming) -> Self {
        Self::Hyper(b)
    }
}

impl Body for RequestBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        match self.get_mut() {
            Self::Hyper(b) => Pin::new(b).poll_frame(cx),
            Self::Whole(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Self::Hyper(b) => b.is_end_stream(),
            Self::Whole(b) => b.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Self::Hyper(b) => b.size_hint(),
            Self::Whole(b) => SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64)),
        }
    }
}
