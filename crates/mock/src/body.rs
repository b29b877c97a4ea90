//! The mock's response body: one buffer, or a paced sequence of SSE frames that can be cut off
//! on request (to test how a gateway handles an upstream that breaks mid-stream).

use std::collections::VecDeque;
use std::future::Future as _;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::Full;
use tokio::time::Sleep;

/// Why a mock body ended early.
#[derive(Debug, thiserror::Error)]
pub enum MockBodyError {
    /// A cut was asked for (`cut_after_chunks`).
    #[error("mock stream cut after {0} chunks (injected fault)")]
    Cut(usize),
    /// A connection reset was asked for (`reset`).
    #[error("mock connection reset (injected fault)")]
    Reset,
}

/// A mock answer body.
#[derive(Debug)]
pub struct MockBody {
    inner: Inner,
}

#[derive(Debug)]
enum Inner {
    Full(Full<Bytes>),
    Stream(Box<Paced>),
    Reset,
}

#[derive(Debug)]
struct Paced {
    frames: VecDeque<Bytes>,
    interval: Duration,
    sleep: Option<Pin<Box<Sleep>>>,
    sent: usize,
    cut_after: Option<usize>,
    /// Pause once, this long, after this many frames.
    stall: Option<(usize, Duration)>,
}

impl MockBody {
    /// A complete body.
    pub fn full(bytes: impl Into<Bytes>) -> Self {
        Self {
            inner: Inner::Full(Full::new(bytes.into())),
        }
    }

    /// SSE frames sent `interval` apart (the first at once); after `cut_after` frames the body
    /// fails instead of going on.
    pub fn paced(frames: Vec<Bytes>, interval: Duration, cut_after: Option<usize>) -> Self {
        Self {
            inner: Inner::Stream(Box::new(Paced {
                frames: frames.into(),
                interval,
                sleep: None,
                sent: 0,
                cut_after,
                stall: None,
            })),
        }
    }

    /// A body that fails at once: after the head, the connection breaks.
    pub fn reset() -> Self {
        Self {
            inner: Inner::Reset,
        }
    }

    /// Pause a paced stream for `pause` after `after` frames (no effect on other bodies).
    pub fn stall(mut self, after: Option<usize>, pause: Duration) -> Self {
        if let (Inner::Stream(p), Some(after)) = (&mut self.inner, after) {
            p.stall = Some((after, pause));
        }
        self
    }
}

impl Body for MockBody {
    type Data = Bytes;
    type Error = MockBodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, MockBodyError>>> {
        match &mut self.get_mut().inner {
            Inner::Full(full) => Pin::new(full)
                .poll_frame(cx)
                .map_err(|never| match never {}),
            Inner::Reset => Poll::Ready(Some(Err(MockBodyError::Reset))),
            Inner::Stream(p) => {
                if p.cut_after == Some(p.sent) {
                    p.cut_after = None;
                    p.frames.clear();
                    return Poll::Ready(Some(Err(MockBodyError::Cut(p.sent))));
                }
                if p.frames.is_empty() {
                    return Poll::Ready(None);
                }
                let stall = match p.stall {
                    Some((after, pause)) if after == p.sent && after > 0 => pause,
                    _ => Duration::ZERO,
                };
                if p.sent > 0 && !(p.interval + stall).is_zero() {
                    let interval = p.interval + stall;
                    let sleep = p
                        .sleep
                        .get_or_insert_with(|| Box::pin(tokio::time::sleep(interval)));
                    if sleep.as_mut().poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    p.sleep = None;
                    if !stall.is_zero() {
                        p.stall = None;
                    }
                }
                p.sent += 1;
                Poll::Ready(p.frames.pop_front().map(|f| Ok(Frame::data(f))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.inner {
            Inner::Full(full) => full.is_end_stream(),
            Inner::Stream(p) => p.frames.is_empty() && p.cut_after.is_none(),
            Inner::Reset => false,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.inner {
            Inner::Full(full) => full.size_hint(),
            Inner::Stream(_) | Inner::Reset => SizeHint::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn paced_frames_then_cut() {
        let frames = vec![Bytes::from_static(b"a"), Bytes::from_static(b"b")];
        let mut body = MockBody::paced(frames.clone(), Duration::from_millis(1), None);
        let mut got = Vec::new();
        while let Some(f) = body.frame().await {
            got.push(f.unwrap().into_data().unwrap());
        }
        assert_eq!(got, frames);

        let mut cut = MockBody::paced(frames, Duration::ZERO, Some(1));
        assert!(cut.frame().await.unwrap().is_ok());
        assert!(cut.frame().await.unwrap().is_err());
        assert!(cut.frame().await.is_none());
    }

    #[tokio::test]
    async fn full_body_has_exact_size() {
        let b = MockBody::full(Bytes::from_static(b"{}"));
        assert_eq!(b.size_hint().exact(), Some(2));
        assert_eq!(&b.collect().await.unwrap().to_bytes()[..], b"{}");
    }
}
