//! One translated upstream call: the client's request read into the internal representation,
//! written in the provider's format and sent; the answer (whole, streamed, or an error) comes
//! back in the client's format, so the pipeline treats it like any other upstream answer.

use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_LENGTH, CONTENT_TYPE};
use http::{Request, Response, StatusCode, Uri};
use http_body_util::{BodyExt, Full, Limited};

use super::embeddings::{self, EmbedApi};
use super::ir::ChatRequest;
use super::stream::{TranslatedBody, Translator};
use super::{anthropic, errors, parse_request, parse_response, write_request, write_response};
use super::{Format, Params, TranslateError};
use crate::mock::{MockSettings, MockWire};
use crate::providers::body::{SegmentsBody, UpstreamBody};
use crate::providers::call::{client_error, model_json, Call};
use crate::providers::native::NativeCall;
use crate::providers::target::HttpTarget;
use crate::providers::Wire;
use sluice_core::endpoint::{Dialect, Endpoint};
use sluice_core::error::ApiError;

/// Largest upstream answer translated whole (it is held as values while translated).
const MAX_TRANSLATED_BODY: usize = 64 * 1024 * 1024;

/// Call an upstream whose format differs from the client's.
pub async fn send(
    provider: &'static str,
    t: &HttpTarget,
    call: &Call<'_>,
) -> Result<Response<UpstreamBody>, ApiError> {
    let fail = |e: TranslateError| e.into_api(provider);
    match call.endpoint {
        Endpoint::ChatCompletions | Endpoint::Messages => {}
        Endpoint::CountTokens => return count_locally(call.body).map_err(fail),
        Endpoint::Embeddings if t.native.is_some() => return embed(provider, t, call).await,
        Endpoint::Completions | Endpoint::Embeddings | Endpoint::Responses => {
            return Err(ApiError::EndpointNotSupported {
                provider,
                endpoint: call.endpoint.name(),
            })
        }
    }
    let params = Params {
        drop: t.drop_params,
    };
    let mut req = parse_request(call.endpoint.dialect(), call.body, params).map_err(fail)?;
    req.model = upstream_model(t, call)?;
    let upstream = t
        .native
        .as_ref()
        .map_or(t.wire.format(), |n| n.format(&req.model));
    let body = Bytes::from(write_request(upstream, &req, params).map_err(fail)?);
    let uri = match &t.native {
        Some(n) => {
            let mode = if req.stream {
                NativeCall::Stream
            } else {
                NativeCall::Chat
            };
            n.url(mode, t.wildcard.is_some().then_some(req.model.as_str()))
                .map_err(ApiError::UpstreamInvalid)?
        }
        // The other dialect's chat endpoint.
        None => t
            .url(match call.endpoint.dialect() {
                Dialect::OpenAi => Endpoint::Messages,
                Dialect::Anthropic => Endpoint::ChatCompletions,
            })
            .clone(),
    };
    let resp = post(t, call, uri, body).await?;
    answer(provider, call, upstream, req, resp.map(UpstreamBody::Http)).await
}

/// A `mock/` deployment with `mock_wire`: the request is translated as for that provider and
/// the in-process mock answers in its wire format, so the translators run without a socket.
pub async fn send_mock(
    provider: &'static str,
    wire: MockWire,
    settings: &MockSettings,
    call: &Call<'_>,
) -> Result<Response<UpstreamBody>, ApiError> {
    let fail = |e: TranslateError| e.into_api(provider);
    let params = Params { drop: false };
    let mut req = parse_request(call.endpoint.dialect(), call.body, params).map_err(fail)?;
    req.model = call.envelope.model.to_string();
    let upstream = match wire {
        MockWire::Gemini => Format::Gemini,
        MockWire::Bedrock => Format::Bedrock,
    };
    let body = Bytes::from(write_request(upstream, &req, params).map_err(fail)?);
    let resp = crate::mock::respond_wire(
        wire,
        &req.model,
        req.stream,
        call.client_headers,
        &body,
        settings,
    )
    .await;
    answer(provider, call, upstream, req, resp.map(UpstreamBody::Mock)).await
}

/// The upstream's answer in the client's format: an error translated, a stream translated as
/// it arrives, a whole answer read and rewritten.
async fn answer(
    provider: &'static str,
    call: &Call<'_>,
    upstream: Format,
    req: ChatRequest,
    resp: Response<UpstreamBody>,
) -> Result<Response<UpstreamBody>, ApiError> {
    let client = call.endpoint.dialect();
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
    // Bedrock's answers carry no id: its request id stands in.
    let id = parts
        .headers
        .get("x-amzn-requestid")
        .and_then(|v| v.to_str().ok())
        .map_or_else(|| fresh_id(client), |r| format!("{}{r}", id_prefix(client)));
    if req.stream {
        parts
            .headers
            .insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
        let translator = Translator::new(upstream, client, id, req.model);
        let stream = TranslatedBody::new(body, translator);
        return Ok(Response::from_parts(
            parts,
            UpstreamBody::TranslatedStream(Box::new(stream)),
        ));
    }
    let bytes = collect(body).await?;
    let mut answer = parse_response(upstream, &bytes).map_err(|e| e.into_api(provider))?;
    if answer.id.is_empty() {
        answer.id = id;
    }
    if answer.model.is_empty() {
        answer.model = req.model;
    }
    parts
        .headers
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    let out = Bytes::from(write_response(client, &answer));
    Ok(Response::from_parts(
        parts,
        UpstreamBody::Translated(Full::new(out)),
    ))
}

/// The upstream model name for this call (the deployment's, or a wildcard's fill-in).
fn upstream_model(t: &HttpTarget, call: &Call<'_>) -> Result<String, ApiError> {
    serde_json::from_slice(&model_json(t, call))
        .map_err(|e| ApiError::UpstreamInvalid(e.to_string()))
}

/// POST a translated body with the deployment's headers, signed when the deployment signs.
async fn post(
    t: &HttpTarget,
    call: &Call<'_>,
    uri: Uri,
    body: Bytes,
) -> Result<Response<hyper::body::Incoming>, ApiError> {
    let mut headers = t.headers.next().clone();
    if let Some(n) = &t.native {
        n.authorize(&uri, &mut headers, &body).await?;
    }
    call.trace_headers(&mut headers);
    let mut up = Request::post(uri)
        .body(SegmentsBody::new(vec![body]))
        .map_err(|e| ApiError::UpstreamInvalid(e.to_string()))?;
    *up.headers_mut() = headers;
    t.client.request(up).await.map_err(client_error)
}

fn id_prefix(client: Dialect) -> &'static str {
    match client {
        Dialect::OpenAi => "chatcmpl-",
        Dialect::Anthropic => "msg_",
    }
}

fn fresh_id(client: Dialect) -> String {
    format!("{}{}", id_prefix(client), uuid::Uuid::new_v4().simple())
}

/// `/v1/embeddings` on a native upstream (Gemini, Bedrock Titan/Cohere).
async fn embed(
    provider: &'static str,
    t: &HttpTarget,
    call: &Call<'_>,
) -> Result<Response<UpstreamBody>, ApiError> {
    let fail = |e: TranslateError| e.into_api(provider);
    let model = upstream_model(t, call)?;
    // Vertex AI embeds through `:predict`, which sluice does not speak yet.
    let api = match t.wire {
        Wire::Gemini => Some(EmbedApi::Gemini),
        Wire::Bedrock => EmbedApi::bedrock(&model),
        Wire::Vertex
        | Wire::OpenAiCompatible
        | Wire::Azure
        | Wire::Anthropic
        | Wire::Mock
        | Wire::NotYetSupported => None,
    };
    let (Some(api), Some(native)) = (api, &t.native) else {
        return Err(ApiError::EndpointNotSupported {
            provider,
            endpoint: call.endpoint.name(),
        });
    };
    let req = embeddings::parse_request(call.body).map_err(fail)?;
    let body = Bytes::from(embeddings::write_request(api, &model, &req).map_err(fail)?);
    let uri = native
        .url(
            NativeCall::Embed,
            t.wildcard.is_some().then_some(model.as_str()),
        )
        .map_err(ApiError::UpstreamInvalid)?;
    let resp = post(t, call, uri, body).await?;
    let (mut parts, body) = resp.into_parts();
    parts.headers.remove(CONTENT_LENGTH);
    parts
        .headers
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    let bytes = collect(body).await?;
    let out = if parts.status.is_success() {
        Bytes::from(embeddings::write_response(&model, &req, &bytes).map_err(fail)?)
    } else {
        let (status, out) =
            errors::translate(t.wire.format(), Dialect::OpenAi, parts.status, &bytes);
        parts.status = status;
        out
    };
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

async fn collect<B>(body: B) -> Result<Bytes, ApiError>
where
    B: http_body::Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    Limited::new(body, MAX_TRANSLATED_BODY)
        .collect()
        .await
        .map(|c| c.to_bytes())
        .map_err(|e| ApiError::UpstreamUnreachable(format!("reading the answer failed: {e}")))
}
