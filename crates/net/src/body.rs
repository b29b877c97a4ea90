//! The request body sluice sends upstream: the client's bytes with sluice's few edits, as
//! reference-counted segments with an exact length (a 500 KB prompt is never copied).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

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
