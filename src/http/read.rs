//! Reading bodies: a client's request within its limits, an upstream's whole answer.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::header::CONTENT_LENGTH;
use http::HeaderMap;
use http_body::Body;
use http_body_util::{BodyExt, Limited};

use sluice_core::error::ApiError;
use sluice_providers::UpstreamBody;

/// Largest upstream answer sluice buffers (non-stream answers and error bodies).
pub const MAX_UPSTREAM_BODY: usize = 256 * 1024 * 1024;

/// Smallest body limit for file uploads (multipart endpoints): OpenAI takes audio files up
/// to 25 MB and several images to edit, whatever the limit for JSON bodies is.
pub const MIN_UPLOAD_LIMIT: usize = 64 * 1024 * 1024;

/// An upstream's whole answer, up to [`MAX_UPSTREAM_BODY`].
pub async fn collect_upstream(body: UpstreamBody) -> Result<Bytes, ApiError> {
    Limited::new(body, MAX_UPSTREAM_BODY)
        .collect()
        .await
        .map(|c| c.to_bytes())
        .map_err(|e| ApiError::UpstreamUnreachable(format!("reading the answer failed: {e}")))
}

/// The body length the client declared (`Content-Length`); a declared length over `limit`
/// is refused before anything is read.
pub fn declared_length(headers: &HeaderMap, limit: usize) -> Result<Option<usize>, ApiError> {
    let declared = headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    match declared {
        Some(n) if n > limit => Err(ApiError::BodyTooLarge { limit }),
        _ => Ok(declared),
    }
}

/// Read the request body into one buffer, refusing more than `limit` bytes. A body that
/// arrives in one frame is kept as is; otherwise it is copied once into a buffer sized from
/// `Content-Length`.
pub async fn read_body<B>(
    body: B,
    headers: &HeaderMap,
    limit: usize,
    timeout: Duration,
) -> Result<Bytes, ApiError>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    // A body that is already here completes at the first poll, and the timer is never armed.
    tokio::time::timeout(timeout, read_body_within(body, headers, limit))
        .await
        .unwrap_or(Err(ApiError::BodyTimeout(timeout)))
}

/// [`read_body`] with no time limit.
async fn read_body_within<B>(
    mut body: B,
    headers: &HeaderMap,
    limit: usize,
) -> Result<Bytes, ApiError>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let declared = declared_length(headers, limit)?;
    let mut first: Option<Bytes> = None;
    let mut buf = BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| ApiError::BodyRead(e.to_string()))?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        let have = first.as_ref().map_or(0, Bytes::len) + buf.len();
        if have + data.len() > limit {
            return Err(ApiError::BodyTooLarge { limit });
        }
        match first.take() {
            None if buf.is_empty() => first = Some(data),
            None => buf.extend_from_slice(&data),
            Some(f) => {
                buf.reserve(declared.unwrap_or(0).max(f.len() + data.len()));
                buf.extend_from_slice(&f);
                buf.extend_from_slice(&data);
            }
        }
    }
    Ok(first.unwrap_or_else(|| buf.freeze()))
}
