//! Rerankers whose API is not Cohere's shape, behind an OpenAI-compatible prefix: the request
//! sluice serves (Cohere's) written in theirs, the answer written back in Cohere's.

use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_LENGTH, CONTENT_TYPE};
use http::Response;
use sluice_core::endpoint::Endpoint;
use sluice_core::error::ApiError;
use sluice_translate::rerank;

use super::Target;
use crate::body::UpstreamBody;
use crate::call::Call;
use crate::exchange;

/// The rerank API a compatible provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Cohere's (Cohere, Jina, Together, vLLM, Infinity): passed through.
    Cohere,
    /// Voyage AI's (`top_k`, results under `data`).
    Voyage,
}

/// The prefixes whose rerank API is not Cohere's.
const SHAPES: &[(&str, Shape)] = &[("voyage", Shape::Voyage)];

impl Shape {
    /// The shape a provider prefix speaks.
    pub fn of(prefix: &str) -> Self {
        SHAPES
            .iter()
            .find(|(p, _)| *p == prefix)
            .map_or(Self::Cohere, |(_, s)| *s)
    }
}

/// `/v1/rerank` on Voyage AI.
pub(crate) async fn voyage(t: &Target, call: &Call<'_>) -> Result<Response<UpstreamBody>, ApiError> {
    let http = &t.http;
    let req = rerank::parse_request(call.body).map_err(|e| e.into_api(http.provider))?;
    let model = http.model(call)?;
    let body = Bytes::from(rerank::write_voyage(&model, &req));
    let url = t.urls.get(Endpoint::Rerank).clone();
    let resp = http.post(url, http.request_headers(call), body).await?;
    let (mut parts, body) = resp.into_parts();
    if !parts.status.is_success() {
        // Voyage's errors are `{"detail": ...}`: passed on as they are.
        return Ok(Response::from_parts(parts, body));
    }
    let bytes = exchange::collect(body).await?;
    let id = format!("rerank-{}", uuid::Uuid::new_v4().simple());
    let out = rerank::voyage_to_cohere(&id, &model, &bytes).map_err(|e| e.into_api(http.provider))?;
    parts.headers.remove(CONTENT_LENGTH);
    parts
        .headers
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Ok(Response::from_parts(parts, UpstreamBody::whole(Bytes::from(out))))
}
