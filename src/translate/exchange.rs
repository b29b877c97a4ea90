//! One translated upstream call: the client's request read into the internal representation,
//! written in the provider's format and sent; the answer (whole, streamed, or an error) comes
//! back in the client's format, so the pipeline treats it like any other upstream answer.

use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_LENGTH, CONTENT_TYPE};
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};

use super::stream::TranslatedBody;
use super::{anthropic, errors, parse_request, parse_response, write_request, write_response};
use super::{Params, TranslateError};
use crate::endpoint::{Dialect, Endpoint};
use crate::error::ApiError;
use crate::providers::body::{SegmentsBody, UpstreamBody};
use crate::providers::call::{client_error, model_json, Call};
use crate::providers::target::HttpTarget;

/// Largest upstream answer translated whole (it is held as values while translated).
const MAX_TRANSLATED_BODY: usize = 64 * 1024 * 1024;

/// Call an upstream whose dialect differs from the client's.
pub async fn send(
    provider: &'static str,
    t: &HttpTarget,
    call: &Call<'_>,
) -> Result<Response<UpstreamBody>, ApiError> {
    let client = call.endpoint.dialect();
    let upstream = match client {
        Dialect::OpenAi => Dialect::Anthropic,
        Dialect::Anthropic => Dialect::OpenAi,
    };
    let params = Params {
        drop: t.drop_params,
    };
    let fail = |e: TranslateError| e.into_api(provider);
    let upstream_endpoint = match call.endpoint {
        Endpoint::ChatCompletions => Endpoint::Messages,
        Endpoint::Messages => Endpoint::ChatCompletions,
        Endpoint::CountTokens => return count_locally(call.body).map_err(fail),
        Endpoint::Completions | Endpoint::Embeddings | Endpoint::Responses => {
            return Err(ApiError::EndpointNotSupported {
                provider,
                endpoint: call.endpoint.name(),
            })
        }
    };
    let mut req = parse_request(client, call.body, params).map_err(fail)?;
    req.model = serde_json::from_slice(&model_json(t, call))
        .map_err(|e| ApiError::UpstreamInvalid(e.to_string()))?;
    let body = write_request(upstream, &req, params).map_err(fail)?;
    let mut up = Request::post(t.url(upstream_endpoint).clone())
        .body(SegmentsBody::new(vec![Bytes::from(body)]))
        .map_err(|e| ApiError::UpstreamInvalid(e.to_string()))?;
    *up.headers_mut() = t.headers.next().clone();
    let resp = t.client.request(up).await.map_err(client_error)?;
    let (mut parts, body) = resp.into_parts();
    parts.headers.remove(CONTENT_LENGTH);
    if !parts.status.is_success() {
        let bytes = collect(body).await?;
        let (status, out) = errors::translate(upstream, client, parts.status, &bytes);
        parts.status = status;
        parts
            .headers
            .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        return Ok(Response::from_parts(
            parts,
            UpstreamBody::Translated(Full::new(out)),
        ));
    }
    if req.stream {
        parts
            .headers
            .insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
        let stream = TranslatedBody::new(UpstreamBody::Http(body), upstream, client);
        return Ok(Response::from_parts(
            parts,
            UpstreamBody::TranslatedStream(Box::new(stream)),
        ));
    }
    let bytes = collect(body).await?;
    let answer = parse_response(upstream, &bytes).map_err(fail)?;
    parts
        .headers
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    let out = Bytes::from(write_response(client, &answer));
    Ok(Response::from_parts(
        parts,
        UpstreamBody::Translated(Full::new(out)),
    ))
}

/// `count_tokens` for a provider without a counter: an estimate from the request's text.
fn count_locally(body: &[u8]) -> Result<Response<UpstreamBody>, TranslateError> {
    // Nothing is sent anywhere, so no parameter needs refusing.
    let req = anthropic::parse_request(body, Params { drop: true })?;
    let out = serde_json::json!({ "input_tokens": anthropic::estimate_tokens(&req) });
    let mut resp = Response::new(UpstreamBody::Translated(Full::new(Bytes::from(
        out.to_string(),
    ))));
    *resp.status_mut() = StatusCode::OK;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Ok(resp)
}

async fn collect(body: hyper::body::Incoming) -> Result<Bytes, ApiError> {
    Limited::new(body, MAX_TRANSLATED_BODY)
        .collect()
        .await
        .map(|c| c.to_bytes())
        .map_err(|e| ApiError::UpstreamUnreachable(format!("reading the answer failed: {e}")))
}
