//! Body types on the upstream side: the spliced request body sluice sends, and the one answer
//! type over every upstream (a real HTTP connection or the in-process mock).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

use crate::mock::MockBody;
use crate::translate::stream::TranslatedBody;

/// The upstream request body: the client's bytes with sluice's few edits, sent segment by
/// segment with an exact length, so a 500 KB prompt is never copied.
#[derive(Debug, Default)]
pub struct SegmentsBody {
    segments: VecDeque<Bytes>,
    remaining: u64,
}

impl SegmentsBody {
    /// A body made of these segments, in order.
    pub fn new(segments: Vec<Bytes>) -> Self {
        let remaining = segments.iter().map(|s| s.len() as u64).sum();
        Self {
            segments: segments.into_iter().filter(|s| !s.is_empty()).collect(),
            remaining,
        }
    }
}

impl Body for SegmentsBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.segments.pop_front() {
            Some(seg) => {
                self.remaining -= seg.len() as u64;
                Poll::Ready(Some(Ok(Frame::data(seg))))
            }
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.segments.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining)
    }
}

/// Why an upstream body broke off.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamBodyError {
    /// The connection failed or was reset mid-body.
    #[error("{0}")]
    Http(#[from] hyper::Error),
    /// The in-process mock ended the body with an injected fault.
    #[error("{0}")]
    Mock(String),
}

/// An upstream answer's body, whichever upstream produced it, already in the client's format.
#[derive(Debug)]
pub enum UpstreamBody {
    /// A real HTTP upstream.
    Http(hyper::body::Incoming),
    /// The in-process mock provider.
    Mock(MockBody),
    /// A whole answer sluice translated into the client's format.
    Translated(http_body_util::Full<Bytes>),
    /// A stream translated into the client's format as it arrives.
    TranslatedStream(Box<TranslatedBody>),
}

impl Body for UpstreamBody {
    type Data = Bytes;
    type Error = UpstreamBodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, UpstreamBodyError>>> {
        match self.get_mut() {
            Self::Http(b) => Pin::new(b).poll_frame(cx).map_err(UpstreamBodyError::Http),
            Self::Mock(b) => Pin::new(b)
                .poll_frame(cx)
                .map_err(|e| UpstreamBodyError::Mock(e.to_string())),
            Self::Translated(b) => Pin::new(b).poll_frame(cx).map_err(|never| match never {}),
            Self::TranslatedStream(b) => Pin::new(b.as_mut()).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Self::Http(b) => b.is_end_stream(),
            Self::Mock(b) => b.is_end_stream(),
            Self::Translated(b) => b.is_end_stream(),
            Self::TranslatedStream(b) => b.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Self::Http(b) => b.size_hint(),
            Self::Mock(b) => b.size_hint(),
            Self::Translated(b) => b.size_hint(),
            Self::TranslatedStream(b) => b.size_hint(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn segments_body_has_exact_length_and_order() {
        let body = SegmentsBody::new(vec![
            Bytes::from_static(b"{\"a\":"),
            Bytes::new(),
            Bytes::from_static(b"1}"),
        ]);
        assert_eq!(body.size_hint().exact(), Some(7));
        let all = body.collect().await.unwrap().to_bytes();
        assert_eq!(&all[..], b"{\"a\":1}");
    }
}
