//! Rerank behind an OpenAI-compatible prefix: where each provider's rerank API is (LiteLLM's
//! URL rules), and for those whose shape is not Cohere's the request sluice serves (Cohere's)
//! written in theirs and the answer written back in Cohere's.

use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_LENGTH, CONTENT_TYPE};
use http::Response;
use sluice_core::endpoint::Endpoint;
use sluice_core::error::ApiError;
use sluice_translate::rerank;
use sluice_translate::TranslateError;

use super::Target;
use crate::body::UpstreamBody;
use crate::call::Call;
use crate::exchange;

/// The rerank API a compatible provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Cohere's (Cohere, Jina, Together, vLLM): passed through.
    Cohere,
    /// Voyage AI's (`top_k`, results under `data`).
    Voyage,
    /// Hugging Face Text Embeddings Inference's (`texts`, a bare list of scores back).
    Tei,
    /// Infinity's: Cohere's request passed through; each answer's document is a bare string.
    Infinity,
}

/// The prefixes whose rerank API is not Cohere's.
const SHAPES: &[(&str, Shape)] = &[
    ("voyage", Shape::Voyage),
    ("huggingface", Shape::Tei),
    ("infinity", Shape::Infinity),
];

impl Shape {
    /// The shape a provider prefix speaks.
    pub fn of(prefix: &str) -> Self {
        SHAPES
            .iter()
            .find(|(p, _)| *p == prefix)
            .map_or(Self::Cohere, |(_, s)| *s)
    }
}

/// A provider's rerank URL below `base`, as LiteLLM builds it: `{base}/rerank`, or `base`
/// itself when it already names the route; vLLM's `…/v1/rerank` is called at `…/rerank`.
pub fn url(prefix: &str, base: &str) -> String {
    let base = base.trim_end_matches('/');
    if prefix == "hosted_vllm" {
        if let Some(root) = base.strip_suffix("/v1/rerank") {
            return format!("{root}/rerank");
        }
    }
    if base.ends_with("/rerank") {
        return base.to_owned();
    }
    format!("{base}{}", Endpoint::Rerank.path())
}

/// `/v1/rerank` on a compatible deployment, in its provider's shape.
pub(crate) async fn send(t: &Target, call: &Call<'_>) -> Result<Response<UpstreamBody>, ApiError> {
    let http = &t.http;
    let url = t.urls.get(Endpoint::Rerank);
    let provider = http.provider;
    let fail = |e: TranslateError| e.into_api(provider);
    let id = || format!("rerank-{}", sluice_core::random::uuid_v4().simple());
    let post = |body: Vec<u8>| http.post(url.clone(), http.request_headers(call), Bytes::from(body));
    match t.rerank {
        Shape::Cohere => http.pass_through(url, call, &[]).await,
        Shape::Infinity => {
            let resp = http.pass_through(url, call, &[]).await?;
            rewrite(provider, resp, rerank::infinity_to_cohere).await
        }
        Shape::Voyage => {
            let req = rerank::parse_request(call.body).map_err(fail)?;
            let model = http.model(call)?;
            let resp = post(rerank::write_voyage(&model, &req)).await?;
            rewrite(provider, resp, |b| rerank::voyage_to_cohere(&id(), &model, b)).await
        }
        Shape::Tei => {
            let req = rerank::parse_request(call.body).map_err(fail)?;
            let model = http.model(call)?;
            let resp = post(rerank::write_tei(&req)).await?;
            rewrite(provider, resp, |b| rerank::tei_to_cohere(&id(), &model, &req, b)).await
        }
    }
}

/// A successful answer rewritten by `to_cohere`; an error passed on as it is (Voyage's
/// `{"detail"}`, TEI's `{"error", "error_type"}`).
async fn rewrite(
    provider: &'static str,
    resp: Response<UpstreamBody>,
    to_cohere: impl FnOnce(&[u8]) -> Result<Vec<u8>, TranslateError>,
) -> Result<Response<UpstreamBody>, ApiError> {
    let (mut parts, body) = resp.into_parts();
    if !parts.status.is_success() {
        return Ok(Response::from_parts(parts, body));
    }
    let bytes = exchange::collect(body).await?;
    let out = to_cohere(&bytes).map_err(|e| e.into_api(provider))?;
    parts.headers.remove(CONTENT_LENGTH);
    parts
        .headers
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Ok(Response::from_parts(parts, UpstreamBody::whole(Bytes::from(out))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_as_litellm_builds_them() {
        for (prefix, base, want) in [
            ("together_ai", "https://api.together.xyz/v1", "https://api.together.xyz/v1/rerank"),
            ("hosted_vllm", "http://vllm:8000/v1", "http://vllm:8000/v1/rerank"),
            ("hosted_vllm", "http://vllm:8000/v1/rerank", "http://vllm:8000/rerank"),
            ("hosted_vllm", "http://vllm:8000/rerank/", "http://vllm:8000/rerank"),
            ("infinity", "http://inf:7997", "http://inf:7997/rerank"),
            ("infinity", "http://inf:7997/v1/rerank", "http://inf:7997/v1/rerank"),
            ("huggingface", "http://tei:8080/", "http://tei:8080/rerank"),
            ("cohere", "https://api.cohere.com/v2", "https://api.cohere.com/v2/rerank"),
        ] {
            assert_eq!(url(prefix, base), want, "{prefix} {base}");
        }
        assert_eq!(Shape::of("huggingface"), Shape::Tei);
        assert_eq!(Shape::of("infinity"), Shape::Infinity);
        assert_eq!(Shape::of("together_ai"), Shape::Cohere);
    }
}
