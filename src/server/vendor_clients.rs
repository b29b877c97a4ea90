//! What Google's clients (the google-genai SDK, the Gemini CLI) and AWS's (boto3) ask of
//! sluice besides their chat call, which is an inference request like any other
//! (`Endpoint::GenerateContent`, `Endpoint::Converse`): their key where their vendor takes it,
//! Google's model list in Google's shape, `:countTokens`, counted here, `:embedContent` /
//! `:batchEmbedContents`, answered through `/v1/embeddings`, and Google's JSON-array stream.

use bytes::Bytes;
use http::header::{HeaderValue, AUTHORIZATION, CONTENT_TYPE};
use http::{HeaderMap, Request, Response, StatusCode};
use http_body::Body;
use serde::Deserialize;
use serde_json::value::RawValue;

use sluice_core::endpoint::Dialect;
use sluice_core::error::ApiError;
use sluice_providers::passthrough::Route as PassRoute;
use sluice_translate::gemini::ArrayStream;
use sluice_translate::{anthropic, gemini, Params};

use crate::auth::{Caller, Wanted};
use crate::http::read_body;
use crate::http::{Reshaped, ResponseBody};
use crate::server::steps::{self, Authenticated, Presented};
use crate::server::{AppState, Snapshot};

/// Put the key a Google client presents (`x-goog-api-key`, `?key=`) where the gate reads it,
/// unless the request carries one the usual way (LiteLLM's header first, as on the `/gemini`
/// pass-through route).
pub(crate) fn key_header(headers: &mut HeaderMap, query: Option<&str>) {
    let presented = crate::passthrough::caller_key(PassRoute::Gemini, headers, query);
    if let Some(v) = presented.get(AUTHORIZATION) {
        headers.insert(AUTHORIZATION, v.clone());
    }
}

/// Whether a request comes from one of Google's clients (its key in Google's header or
/// query, or Google's client header): google-genai asks `GET /v1/models`, which is OpenAI's
/// path too.
pub(crate) fn is_google_client(headers: &HeaderMap, query: Option<&str>) -> bool {
    headers.contains_key("x-goog-api-key")
        || headers.contains_key("x-goog-api-client")
        || query.is_some_and(|q| q.split('&').any(|p| p.starts_with("key=")))
}

/// A streamed `:streamGenerateContent` answer as the JSON array a client without `alt=sse`
/// reads: every answer sluice streams to a Gemini client is SSE (its writers', and a Gemini
/// deployment's, asked with `alt=sse`), turned into the array's elements as they pass. Errors
/// and whole answers are left as they are.
pub(crate) fn json_array(resp: Response<ResponseBody>) -> Response<ResponseBody> {
    let sse = resp
        .headers()
        .get(CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    if !resp.status().is_success() || !sse {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    parts
        .headers
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Response::from_parts(parts, Reshaped::body(body, ArrayStream::default()))
}

/// A SigV4-signed request (boto3 with an access key pair): its access key id is the virtual
/// key, put where the gate reads it. The signature is not checked: sluice keeps keys only as
/// hashes, so it holds no secret to check it with, and the access key id travels in the
/// header as a bearer key does. A request with a bearer key (boto3's
/// `AWS_BEARER_TOKEN_BEDROCK`) or LiteLLM's header is left as it is.
pub(crate) fn sigv4_key(headers: &mut HeaderMap) {
    let key = headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("AWS4-HMAC-SHA256 "))
        .and_then(|v| {
            v.split(',')
                .find_map(|p| p.trim().strip_prefix("Credential="))
        })
        .and_then(|c| c.split('/').next())
        .filter(|k| !k.is_empty())
        .and_then(|k| HeaderValue::from_str(&format!("Bearer {k}")).ok());
    if let Some(mut v) = key {
        v.set_sensitive(true);
        headers.insert(AUTHORIZATION, v);
    }
}

/// A model group as Google's `models.get` describes a model: the name a client calls it by,
/// and the methods sluice serves for it.
pub(crate) fn model_object(name: &str) -> serde_json::Value {
    serde_json::json!({
        "name": format!("models/{name}"),
        "baseModelId": name,
        "version": "sluice",
        "displayName": name,
        "supportedGenerationMethods": ["generateContent", "streamGenerateContent", "countTokens"],
    })
}

/// `:countTokens`'s body: the contents, or a whole `generateContentRequest`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CountRequest<'a> {
    #[serde(default, borrow)]
    generate_content_request: Option<&'a RawValue>,
}

/// `POST /v1beta/models/{model}:countTokens`: the prompt's tokens estimated here, for any
/// provider (as sluice counts for Anthropic's clients of providers that count nothing); the
/// caller must hold a key that may use the model.
pub(crate) async fn count<B>(
    state: &AppState,
    snap: &Snapshot,
    model: &str,
    req: Request<B>,
) -> Result<http::Response<crate::http::ResponseBody>, ApiError>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let (mut parts, body) = req.into_parts();
    key_header(&mut parts.headers, parts.uri.query());
    let Authenticated { caller, wall } =
        steps::authenticate(state, snap, Presented::by_parts(&parts)).await?;
    let directory = state.gate().directory();
    let not_found = || ApiError::ModelNotFound(model.chars().take(256).collect());
    let group = snap
        .router
        .models
        .resolve(model)
        .ok_or_else(not_found)?
        .group;
    if let Caller::Key(k) = &caller {
        directory.subjects(k, None, &Wanted::of(model, group), wall)?;
    }
    let body = read_body(body, &parts.headers, snap.max_body, snap.body_timeout).await?;
    let wrapped: CountRequest<'_> =
        serde_json::from_slice(&body).map_err(|e| ApiError::InvalidJson(e.to_string()))?;
    let contents = wrapped
        .generate_content_request
        .map_or(&body[..], |r| r.get().as_bytes());
    // Nothing is sent anywhere, so no parameter needs refusing.
    let request = gemini::parse_request(contents, &mut Params::new(true, Dialect::Gemini))
        .map_err(|e| e.into_api("sluice"))?;
    let out = serde_json::json!({ "totalTokens": anthropic::estimate_tokens(&request) });
    Ok(crate::http::json(
        StatusCode::OK,
        Bytes::from(out.to_string()),
    ))
}

/// A Gemini embedding request: its content and the size asked for.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct EmbedOne {
    #[serde(default)]
    content: Option<serde_json::Value>,
    #[serde(default)]
    output_dimensionality: Option<u32>,
}

/// `:batchEmbedContents`'s body.
#[derive(Deserialize)]
struct EmbedBatch {
    #[serde(default)]
    requests: Vec<EmbedOne>,
}

/// The text of a Gemini `Content` (its text parts, joined).
fn content_text(content: Option<&serde_json::Value>) -> Result<String, ApiError> {
    let parts = content
        .and_then(|c| c.get("parts"))
        .and_then(serde_json::Value::as_array)
        .ok_or(ApiError::InvalidParam {
            param: "content",
            message: "expected a Content with text parts".into(),
        })?;
    let texts: Vec<&str> = parts
        .iter()
        .filter_map(|p| p.get("text").and_then(serde_json::Value::as_str))
        .collect();
    if texts.is_empty() {
        return Err(ApiError::InvalidParam {
            param: "content",
            message: "only text parts are embedded here".into(),
        });
    }
    Ok(texts.join("\n"))
}

/// `:embedContent` and `:batchEmbedContents`: the texts sent to the group as an OpenAI
/// embeddings request (the pipeline's own: the key, its limits and budgets, routing, spend; a
/// Gemini deployment gets `batchEmbedContents` again), the vectors answered in Google's shape.
pub(crate) async fn embed<B>(
    state: &AppState,
    snap: &Snapshot,
    model: &str,
    batch: bool,
    req: Request<B>,
    record: &mut sluice_core::record::RequestRecord,
) -> Result<http::Response<crate::http::ResponseBody>, ApiError>
where
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: std::fmt::Display,
{
    let (mut parts, body) = req.into_parts();
    key_header(&mut parts.headers, parts.uri.query());
    let body = read_body(body, &parts.headers, snap.max_body, snap.body_timeout).await?;
    let json_err = |e: serde_json::Error| ApiError::InvalidJson(e.to_string());
    let asked: Vec<EmbedOne> = if batch {
        serde_json::from_slice::<EmbedBatch>(&body)
            .map_err(json_err)?
            .requests
    } else {
        vec![serde_json::from_slice::<EmbedOne>(&body).map_err(json_err)?]
    };
    let input = asked
        .iter()
        .map(|r| content_text(r.content.as_ref()))
        .collect::<Result<Vec<_>, _>>()?;
    let mut openai = serde_json::json!({"model": model, "input": input});
    if let Some(d) = asked.first().and_then(|r| r.output_dimensionality) {
        openai["dimensions"] = d.into();
    }
    parts.headers.remove(http::header::CONTENT_LENGTH);
    let inner = Request::from_parts(
        parts,
        http_body_util::Full::new(Bytes::from(openai.to_string())),
    );
    let resp = crate::server::inference::inference(
        state,
        snap,
        sluice_core::endpoint::Endpoint::Embeddings,
        inner,
        record,
    )
    .await?;
    let (head, answer) = resp.into_parts();
    let bytes = http_body_util::BodyExt::collect(answer)
        .await
        .map_err(|_| ApiError::Internal("an embeddings answer could not be read"))?
        .to_bytes();
    let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
    let out = if head.status.is_success() {
        let values: Vec<serde_json::Value> = v["data"]
            .as_array()
            .map(|d| {
                d.iter()
                    .map(|e| serde_json::json!({"values": e["embedding"]}))
                    .collect()
            })
            .unwrap_or_default();
        if batch {
            serde_json::json!({ "embeddings": values })
        } else {
            serde_json::json!({ "embedding": values.into_iter().next().unwrap_or_default() })
        }
    } else {
        let message = v["error"]["message"].as_str().unwrap_or("embedding failed");
        serde_json::from_slice(&sluice_core::error::google_error_body(head.status, message))
            .unwrap_or_default()
    };
    let mut resp = crate::http::json(head.status, Bytes::from(out.to_string()));
    for (name, value) in &head.headers {
        if name.as_str().starts_with("x-") {
            resp.headers_mut().insert(name.clone(), value.clone());
        }
    }
    Ok(resp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sigv4_access_key_id_is_the_virtual_key() {
        let mut h = HeaderMap::new();
        h.insert(
            AUTHORIZATION,
            HeaderValue::from_static(
                "AWS4-HMAC-SHA256 Credential=sk-virtual-1/20261129/us-west-2/bedrock/aws4_request, \
                 SignedHeaders=host;x-amz-date, Signature=abc",
            ),
        );
        sigv4_key(&mut h);
        assert_eq!(h[AUTHORIZATION], "Bearer sk-virtual-1");
        let mut bearer = HeaderMap::new();
        bearer.insert(AUTHORIZATION, HeaderValue::from_static("Bearer sk-2"));
        sigv4_key(&mut bearer);
        assert_eq!(bearer[AUTHORIZATION], "Bearer sk-2");
    }

    #[test]
    fn google_keys_go_where_the_gate_reads_them() {
        let mut h = HeaderMap::new();
        h.insert("x-goog-api-key", HeaderValue::from_static("sk-g"));
        key_header(&mut h, None);
        assert_eq!(h[AUTHORIZATION], "Bearer sk-g");
        let mut q = HeaderMap::new();
        key_header(&mut q, Some("alt=sse&key=sk-q"));
        assert_eq!(q[AUTHORIZATION], "Bearer sk-q");
    }
}
