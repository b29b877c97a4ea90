//! The one answer body over every upstream: a real HTTP connection, an answer sluice made
//! whole (translated, or counted locally), or a stream sluice makes as it goes (a translated
//! stream, an in-process upstream such as the mock provider).

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::Full;

/// Why an upstream body broke off.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamBodyError {
    /// The connection failed or was reset mid-body.
    #[error("{0}")]
    Http(#[from] sluice_net::client::AnswerError),
    /// An in-process upstream ended its body early (the mock's injected faults).
    #[error("{0}")]
    InProcess(String),
}

/// A body sluice produces as it goes, boxed: translated streams and in-process upstreams. One
/// virtual call per frame, only on those paths; pass-through answers are `Http`.
pub type MadeBody = Pin<Box<dyn Body<Data = Bytes, Error = UpstreamBodyError> + Send>>;

/// An upstream answer's body, whichever upstream produced it, already in the client's format.
pub enum UpstreamBody {
    /// A real HTTP upstream, passed through.
    Http(sluice_net::client::Answer),
    /// A whole answer sluice made (translated into the client's format, or counted locally).
    Whole(Full<Bytes>),
    /// A stream sluice makes as it goes.
    Made(MadeBody),
}

impl std::fmt::Debug for UpstreamBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Http(b) => f.debug_tuple("Http").field(b).finish(),
            Self::Whole(b) => f.debug_tuple("Whole").field(b).finish(),
            Self::Made(_) => f.write_str("Made(..)"),
        }
    }
}

impl UpstreamBody {
    /// A whole answer.
    pub fn whole(bytes: Bytes) -> Self {
        Self::Whole(Full::new(bytes))
    }

    /// A stream sluice makes from another upstream body (a translated stream).
    pub fn made<B>(body: B) -> Self
    where
        B: Body<Data = Bytes, Error = UpstreamBodyError> + Send + 'static,
    {
        Self::Made(Box::pin(body))
    }

    /// An in-process upstream's body; its errors become [`UpstreamBodyError::InProcess`].
    pub fn in_process<B>(body: B) -> Self
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: std::fmt::Display,
    {
        use http_body_util::BodyExt as _;
        Self::Made(Box::pin(
            body.map_err(|e| UpstreamBodyError::InProcess(e.to_string())),
        ))
    }
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
            Self::Whole(b) => Pin::new(b).poll_frame(cx).map_err(|never| match never {}),
            Self::Made(b) => b.as_mut().poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Self::Http(b) => b.is_end_stream(),
            Self::Whole(b) => b.is_end_stream(),
            Self::Made(b) => b.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Self::Http(b) => b.size_hint(),
            Self::Whole(b) => b.size_hint(),
            Self::Made(b) => b.size_hint(),
        }
    }
}
