//! Phases 3–4 of an inference request: who calls, and its body read within the limits; 4¾ a
//! Responses request's kept items put in (or the request queued to run in the background).

use std::sync::Arc;

use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::request::Parts;
use http::{HeaderMap, Response, StatusCode};
use http_body::Body;

use sluice_core::endpoint::{BodyFormat, Endpoint};
use sluice_core::error::ApiError;
use sluice_core::record::RequestRecord;
use sluice_net::Upload;
use sluice_translate::multipart;

use super::Cx;
use crate::auth::Caller;
use crate::http::ResponseBody;
use crate::http::{json, read_body, MIN_UPLOAD_LIMIT};

/// The request as read, but for its body (kept apart: the envelope borrows it while later
/// phases take from the head's extensions): its head, and the rest of an upload still
/// arriving.
pub(super) struct Read {
    pub parts: Parts,
    pub upload: Option<Arc<Upload>>,
}

impl Read {
    /// A multipart request's boundary; `None` for a JSON body.
    pub(super) fn boundary(&self, endpoint: Endpoint) -> Result<Option<&str>, ApiError> {
        boundary(&self.parts.headers, endpoint)
    }
}

/// The multipart boundary an upload endpoint's body must declare.
fn boundary(headers: &HeaderMap, endpoint: Endpoint) -> Result<Option<&str>, ApiError> {
    match endpoint.body_format() {
        BodyFormat::Json => Ok(None),
        BodyFormat::Multipart => headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(multipart::boundary)
            .map(Some)
            .ok_or(ApiError::InvalidParam {
                param: "content-type",
                message: "expected multipart/form-data with a boundary".into(),
            }),
    }
}

/// Phase 4: the body, within the size limit: an upload's only up to its first file, the
/// rest relayed as it arrives (`server::upload`). A `/moderations` body without a model
/// names OpenAI's default one, as in LiteLLM.
pub(super) async fn body<B>(
    cx: Cx<'_>,
    headers: &HeaderMap,
    body: B,
) -> Result<(Bytes, Option<Arc<Upload>>), ApiError>
where
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: std::fmt::Display,
{
    let (snap, endpoint) = (cx.snap, cx.endpoint);
    let (mut body, upload) = match boundary(headers, endpoint)? {
        None => (
            read_body(body, headers, snap.max_body, snap.body_timeout).await?,
            None,
        ),
        Some(b) => {
            let limit = snap.max_body.max(MIN_UPLOAD_LIMIT);
            Box::pin(crate::server::upload::read_head(
                body,
                headers,
                limit,
                b,
                &["model"],
            ))
            .await?
        }
    };
    if endpoint == Endpoint::Moderations && endpoint.body_format() == BodyFormat::Json {
        if let Some(b) = crate::server::named_model::with_model(
            &body,
            crate::server::named_model::MODERATION_DEFAULT,
        ) {
            body = b;
        }
    }
    Ok((body, upload))
}

/// Phase 4¾ for a Responses request: `Some` is the answer of one queued to run in the
/// background.
pub(super) async fn responses_part(
    cx: Cx<'_>,
    read: &mut Read,
    body: &mut Bytes,
    caller: &Caller,
    record: &mut RequestRecord,
) -> Result<Option<Response<ResponseBody>>, ApiError> {
    if cx.endpoint != Endpoint::Responses {
        return Ok(None);
    }
    let queued = Box::pin(responses(cx, read, body, caller)).await?;
    Ok(queued.map(|q| {
        record.status = 200;
        json(StatusCode::OK, q)
    }))
}

/// Phase 4¾: a Responses request that continues a kept answer or a conversation gets their items
/// first; one whose answer is to be kept gets its keeper (`crate::responses`), which rides in
/// the request's extensions, so that no other request's future grows. A request run in the
/// background is answered here, queued (`Some`, the answer); it runs on as a request of its
/// own (`crate::responses::background`).
async fn responses(
    cx: Cx<'_>,
    read: &mut Read,
    body: &mut Bytes,
    caller: &Caller,
) -> Result<Option<Bytes>, ApiError> {
    let keeping = cx.snap.features.responses.as_ref();
    let queued =
        crate::responses::background::start(cx.state, keeping, caller, &read.parts, body).await?;
    if let Some(queued) = queued {
        return Ok(Some(Bytes::from(queued.to_string())));
    }
    let store = cx.state.store().map(|s| &s.store);
    let run = read
        .parts
        .extensions
        .get::<crate::responses::background::BackgroundRun>()
        .cloned();
    let keeper = crate::responses::prepare(keeping, store, caller, body, run.as_ref()).await?;
    if let Some(k) = keeper {
        read.parts.extensions.insert(k);
    }
    Ok(None)
}
