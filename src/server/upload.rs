//! Step 4 for uploads (`multipart/form-data`): read the form only as far as routing needs —
//! its fields up to the first file, once one it routes by is known (`model`; a Files
//! upload's group), and at least [`READ_WHOLE`] bytes
//! — and leave the rest of the body to be relayed upstream as it arrives ([`Upload`]), so a
//! 25 MB audio file passes through in the few frames in flight instead of one 25 MB buffer.
//!
//! A form that puts that field after its file (curl's `-F file=@… -F model=…` order) is
//! read until the field arrives, as a whole body is.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use http::HeaderMap;
use http_body::Body;
use http_body_util::BodyExt;

use sluice_core::error::ApiError;
use sluice_net::Upload;
use sluice_translate::multipart::{Progress, Scanner};

/// Uploads up to this size are read whole (they can be retried and hedged like any body);
/// past it, the rest is relayed. Also about what one upload holds beyond a frame.
pub(crate) const READ_WHOLE: usize = 256 * 1024;

/// The head of an upload, and the rest of it when the head is not the whole body. The head
/// is enough once one of the fields in `routes_by` is read (with none, at the first file).
pub(crate) async fn read_head<B>(
    body: B,
    headers: &HeaderMap,
    limit: usize,
    boundary: &str,
    routes_by: &[&str],
) -> Result<(Bytes, Option<Arc<Upload>>), ApiError>
where
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: std::fmt::Display,
{
    let ready = |scanner: &Scanner, head: &[u8]| {
        routes_by.is_empty() || routes_by.iter().any(|f| scanner.has_field(head, f))
    };
    read_head_until(body, headers, limit, boundary, &ready).await
}

/// [`read_head`] with its own test of when the fields read are enough (`ready`, given the
/// scanner and the head so far, asked once the head is inside a file): the Files API waits for
/// `purpose` as well as the group, since a batch file's lines are checked.
pub(crate) async fn read_head_until<B>(
    mut body: B,
    headers: &HeaderMap,
    limit: usize,
    boundary: &str,
    ready: &(dyn Fn(&Scanner, &[u8]) -> bool + Sync),
) -> Result<(Bytes, Option<Arc<Upload>>), ApiError>
where
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: std::fmt::Display,
{
    let declared = crate::http::declared_length(headers, limit)?;
    let mut scanner = Scanner::new(boundary);
    let mut head = BytesMut::new();
    loop {
        let Some(frame) = body.frame().await else {
            return Ok((head.freeze(), None));
        };
        let frame = frame.map_err(|e| ApiError::BodyRead(e.to_string()))?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        if head.len() + data.len() > limit {
            return Err(ApiError::BodyTooLarge { limit });
        }
        head.extend_from_slice(&data);
        let everything = declared == Some(head.len()) || body.is_end_stream();
        match scanner.advance(&head)? {
            Progress::InFile
                if !everything && head.len() >= READ_WHOLE && ready(&scanner, &head) =>
            {
                break
            }
            // A form that ends early is the upstream's to judge, as a whole body is.
            _ if everything => return Ok((head.freeze(), None)),
            Progress::InFile | Progress::NeedMore | Progress::Done => {}
        }
    }
    let head = head.freeze();
    let upload = Upload::new(body, head.len(), declared, limit);
    Ok((head, Some(upload)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::header::CONTENT_LENGTH;
    use http_body::Frame;
    use http_body_util::StreamBody;
    use std::convert::Infallible;

    const BOUNDARY: &str = "b0undary";

    fn form(model_first: bool, file: &[u8]) -> Vec<u8> {
        let model =
            b"--b0undary\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper-1\r\n"
                .to_vec();
        let mut f = b"--b0undary\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\n\r\n".to_vec();
        f.extend_from_slice(file);
        f.extend_from_slice(b"\r\n");
        let mut out = if model_first {
            [model, f].concat()
        } else {
            [f, model].concat()
        };
        out.extend_from_slice(b"--b0undary--\r\n");
        out
    }

    /// `bytes` as a client body of `frame`-sized frames.
    fn client(
        bytes: &[u8],
        frame: usize,
    ) -> StreamBody<impl futures_util::Stream<Item = Result<Frame<Bytes>, Infallible>> + Unpin>
    {
        let frames: Vec<_> = bytes
            .chunks(frame)
            .map(|c| Ok(Frame::data(Bytes::copy_from_slice(c))))
            .collect();
        StreamBody::new(futures_util::stream::iter(frames))
    }

    fn length(n: usize) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(CONTENT_LENGTH, n.into());
        h
    }

    #[tokio::test]
    async fn the_head_stops_in_the_file_and_the_rest_follows_unchanged() {
        let file: Vec<u8> = (0..1_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let body = form(true, &file);
        let (head, upload) = read_head(
            client(&body, 16 * 1024),
            &length(body.len()),
            1 << 30,
            BOUNDARY,
            &["model"],
        )
        .await
        .unwrap();
        assert_eq!(
            head.len(),
            READ_WHOLE,
            "the model, and the file up to READ_WHOLE"
        );
        let upload = upload.expect("the rest is left to relay");
        assert!(!upload.spent());
        let rest = upload.collect().await.unwrap();
        assert!(upload.spent());
        assert_eq!([&head[..], &rest[..]].concat(), body);
    }

    #[tokio::test]
    async fn a_model_after_the_file_is_waited_for_and_small_forms_are_read_whole() {
        let file = vec![7u8; 1_000_000];
        let body = form(false, &file);
        let (head, upload) = read_head(
            client(&body, 8 * 1024),
            &HeaderMap::new(),
            1 << 30,
            BOUNDARY,
            &["model"],
        )
        .await
        .unwrap();
        assert!(upload.is_none());
        assert_eq!(head, body);
        // A form that arrives in one frame is whole: nothing is left to relay.
        let body = form(true, b"tiny");
        let (head, upload) = read_head(
            client(&body, body.len()),
            &HeaderMap::new(),
            1 << 30,
            BOUNDARY,
            &["model"],
        )
        .await
        .unwrap();
        assert!(upload.is_none());
        assert_eq!(head, body);
    }

    #[tokio::test]
    async fn limits_hold_for_the_head_and_for_the_rest() {
        let body = form(true, &vec![1u8; 2 * READ_WHOLE]);
        let limit = READ_WHOLE + 1000;
        let declared = read_head(
            client(&body, 4096),
            &length(body.len()),
            limit,
            BOUNDARY,
            &["model"],
        )
        .await;
        assert!(matches!(declared, Err(ApiError::BodyTooLarge { limit: l }) if l == limit));
        // Undeclared: the head is under the limit, the rest passes it while relayed.
        let (_, upload) = read_head(
            client(&body, 4096),
            &HeaderMap::new(),
            limit,
            BOUNDARY,
            &["model"],
        )
        .await
        .unwrap();
        let upload = upload.unwrap();
        assert_eq!(
            upload.collect().await,
            Err(sluice_net::UploadError::TooLarge { limit })
        );
        assert!(matches!(
            upload.client_error(),
            Some(sluice_net::UploadError::TooLarge { .. })
        ));
        // A malformed form is refused before anything is sent.
        let bad = read_head(
            client(b"--b0undary\r\nno headers\r\n\r\n", 5),
            &HeaderMap::new(),
            1 << 20,
            BOUNDARY,
            &["model"],
        )
        .await;
        assert!(matches!(
            bad,
            Err(ApiError::InvalidParam { param: "body", .. })
        ));
    }
}
