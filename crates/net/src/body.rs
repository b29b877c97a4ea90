//! The request body sluice sends upstream: the client's bytes with sluice's few edits, as
//! reference-counted segments with an exact length (a 500 KB prompt is never copied).

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::BodyExt;

/// The upstream request body: the client's bytes with sluice's few edits, sent segment by
/// segment with an exact length, so a 500 KB prompt is never copied; optionally followed by
/// the rest of a client's upload, relayed as it arrives ([`Upload`]).
#[derive(Debug, Default)]
pub struct SegmentsBody {
    segments: VecDeque<Bytes>,
    remaining: u64,
    tail: Option<Tail>,
}

impl SegmentsBody {
    /// A body made of these segments, in order.
    pub fn new(segments: Vec<Bytes>) -> Self {
        let remaining = segments.iter().map(|s| s.len() as u64).sum();
        Self {
            segments: segments.into_iter().filter(|s| !s.is_empty()).collect(),
            remaining,
            tail: None,
        }
    }

    /// The body's segments and their length in all, when that is the whole body (no upload
    /// follows); the body itself back otherwise.
    pub fn into_segments(self) -> Result<(Vec<Bytes>, u64), Self> {
        if self.tail.is_some() {
            return Err(self);
        }
        Ok((self.segments.into(), self.remaining))
    }

    /// These segments, then what is left of `upload` (its length exact when the client
    /// declared one).
    pub fn with_upload(segments: Vec<Bytes>, upload: &Arc<Upload>) -> Self {
        let mut body = Self::new(segments);
        body.tail = Some(Tail::of(upload));
        body
    }
}

impl Body for SegmentsBody {
    type Data = Bytes;
    type Error = UploadError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, UploadError>>> {
        if let Some(seg) = self.segments.pop_front() {
            self.remaining -= seg.len() as u64;
            return Poll::Ready(Some(Ok(Frame::data(seg))));
        }
        match self.tail.as_mut() {
            Some(tail) => tail.poll_frame(cx),
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.segments.is_empty() && self.tail.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        match &self.tail {
            None => SizeHint::with_exact(self.remaining),
            Some(t) => match t.upload.declared {
                Some(rest) => SizeHint::with_exact(self.remaining + rest.saturating_sub(t.sent)),
                None => {
                    let mut h = SizeHint::new();
                    h.set_lower(self.remaining);
                    h
                }
            },
        }
    }
}

/// Why the rest of an upload could not be sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UploadError {
    /// Another attempt already sent (part of) it: an upload is read once, never held whole.
    #[error("the upload was already sent to another deployment")]
    Spent,
    /// The client sent more than the body limit allows.
    #[error("the upload is larger than {limit} bytes")]
    TooLarge {
        /// The limit, in bytes, for the whole body.
        limit: usize,
    },
    /// The client's connection failed while sending it.
    #[error("reading the upload failed: {0}")]
    Client(String),
}

impl From<UploadError> for sluice_core::error::ApiError {
    fn from(e: UploadError) -> Self {
        match e {
            UploadError::TooLarge { limit } => Self::BodyTooLarge { limit },
            UploadError::Client(why) => Self::BodyRead(why),
            UploadError::Spent => Self::Internal("the upload was already sent"),
        }
    }
}

/// The boxed rest of a client's body.
type RestBody = UnsyncBoxBody<Bytes, UploadError>;

/// What has become of an upload's rest.
const FRESH: u8 = 0;
const SENDING: u8 = 1;
const TOO_LARGE: u8 = 2;
const CLIENT_FAILED: u8 = 3;

/// The rest of a client's upload after the head sluice read (the form fields before the
/// first file): relayed to the first upstream that reads it, as it arrives, so a 25 MB file
/// is never held whole. Shared by the attempts of one request; an attempt whose connection
/// failed before reading it leaves it for the next.
#[derive(Debug)]
pub struct Upload {
    rest: Mutex<Option<RestBody>>,
    state: AtomicU8,
    /// Bytes still expected, when the client declared a length.
    declared: Option<u64>,
    /// Bytes the rest may have before the body limit is passed.
    allowed: u64,
    /// The body limit, for the error.
    limit: usize,
}

impl Upload {
    /// The rest of a client's body, `read` bytes of which are already in sluice's head, with
    /// `declared` the client's `Content-Length` and `limit` the body limit.
    pub fn new<B>(rest: B, read: usize, declared: Option<usize>, limit: usize) -> Arc<Self>
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: std::fmt::Display,
    {
        let rest = rest.map_err(|e| UploadError::Client(e.to_string()));
        Arc::new(Self {
            rest: Mutex::new(Some(UnsyncBoxBody::new(rest))),
            state: AtomicU8::new(FRESH),
            declared: declared.map(|d| d.saturating_sub(read) as u64),
            allowed: limit.saturating_sub(read) as u64,
            limit,
        })
    }

    /// Whether an attempt has begun sending the rest: no other attempt can send it again.
    pub fn spent(&self) -> bool {
        self.state.load(Ordering::Acquire) != FRESH
    }

    /// The client's fault, when the rest failed because of the client (too large, or its
    /// connection broke): that, not the upstream's error, is the request's answer.
    pub fn client_error(&self) -> Option<UploadError> {
        match self.state.load(Ordering::Acquire) {
            TOO_LARGE => Some(UploadError::TooLarge { limit: self.limit }),
            CLIENT_FAILED => Some(UploadError::Client("the client stopped sending".into())),
            _ => None,
        }
    }

    /// The whole rest, for a deployment that needs the body in one buffer (the in-process
    /// mock). Spends the upload.
    pub async fn collect(self: &Arc<Self>) -> Result<Bytes, UploadError> {
        let mut tail = Tail::of(self);
        let expected = self.declared.map_or(0, |d| d.min(self.allowed));
        let mut buf = BytesMut::with_capacity(usize::try_from(expected).unwrap_or(0));
        while let Some(frame) = std::future::poll_fn(|cx| tail.poll_frame(cx)).await {
            if let Ok(data) = frame?.into_data() {
                buf.extend_from_slice(&data);
            }
        }
        Ok(buf.freeze())
    }

    fn take(&self) -> Option<RestBody> {
        let rest = self.rest.lock().ok()?.take();
        if rest.is_some() {
            self.state.store(SENDING, Ordering::Release);
        }
        rest
    }

    fn fail(&self, e: &UploadError) {
        let state = match e {
            UploadError::TooLarge { .. } => TOO_LARGE,
            UploadError::Client(_) => CLIENT_FAILED,
            UploadError::Spent => return,
        };
        self.state.store(state, Ordering::Release);
    }
}

/// One attempt's hold on an upload's rest: taken at the first poll, counted against the
/// limit as it passes.
#[derive(Debug)]
struct Tail {
    upload: Arc<Upload>,
    body: Option<RestBody>,
    sent: u64,
}

impl Tail {
    fn of(upload: &Arc<Upload>) -> Self {
        Self {
            upload: Arc::clone(upload),
            body: None,
            sent: 0,
        }
    }

    fn poll_frame(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, UploadError>>> {
        if self.body.is_none() {
            match self.upload.take() {
                Some(b) => self.body = Some(b),
                None => return Poll::Ready(Some(Err(UploadError::Spent))),
            }
        }
        let Some(body) = self.body.as_mut() else {
            return Poll::Ready(None);
        };
        match Pin::new(body).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    self.sent += data.len() as u64;
                    if self.sent > self.upload.allowed {
                        let e = UploadError::TooLarge {
                            limit: self.upload.limit,
                        };
                        self.upload.fail(&e);
                        return Poll::Ready(Some(Err(e)));
                    }
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => {
                self.upload.fail(&e);
                Poll::Ready(Some(Err(e)))
            }
            other => other,
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
