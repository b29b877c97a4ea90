//! Google AI Studio's Gemini API (`generateContent`): every request is translated (`codec`),
//! the model and the operation are in the URL, the key goes in `x-goog-api-key` (kept out of
//! the URL, so out of logs); embeddings through `batchEmbedContents` (`embed`). Vertex AI
//! serves the same format (`crate::vertex`).

pub mod codec;
mod embed;
mod image;
#[cfg(test)]
mod tests;

use http::Response;
use sluice_core::endpoint::Endpoint;
use sluice_core::error::ApiError;
use sluice_net::sigv4::uri_encode;
use sluice_translate::envelope::Edits;

pub use codec::GenerateContent;
pub use embed::BatchEmbed;
pub use image::Imagen;

use crate::body::UpstreamBody;
use crate::call::Call;
use crate::exchange;
use crate::http::{Host, HttpTarget, KeyHeader, ModelUrls, Op};
use crate::registry::{ProviderSpec, Upstream};
use crate::Family;
use crate::settings::Reading;
use crate::target::{Prepared, TargetError};

/// `gemini/`
pub const SPECS: &[ProviderSpec] = &[ProviderSpec {
    base_env: &["GEMINI_API_BASE"],
    // LiteLLM's `api_base` for Gemini is the host; the API version is a path segment.
    base_suffix: Some("/v1beta"),
    ..ProviderSpec::new(
        "gemini",
        Family::Gemini,
        Some("https://generativelanguage.googleapis.com/v1beta"),
        &["GEMINI_API_KEY", "GOOGLE_API_KEY"],
    )
}];

/// A Gemini deployment.
#[derive(Debug)]
pub struct Target {
    http: HttpTarget,
    urls: ModelUrls,
}

/// Google AI Studio.
#[derive(Debug)]
pub struct Gemini;

impl Upstream for Gemini {
    type Config = ();
    type Target = Target;
    const SPECS: &'static [ProviderSpec] = SPECS;
    const KEYS: &'static [&'static str] = &[];

    fn config(_: &mut Reading<'_>) -> Option<()> {
        Some(())
    }

    fn target(d: &Prepared<'_>, (): &()) -> Result<Target, TargetError> {
        let base = d.upstream.api_base.clone().unwrap_or_default();
        Ok(Target {
            http: HttpTarget::build(d, KeyHeader::Named("x-goog-api-key"), &[])?,
            urls: ModelUrls::build(d, base, url)?,
        })
    }

    async fn send(t: &Target, call: &Call<'_>) -> Result<Response<UpstreamBody>, ApiError> {
        let http = &t.http;
        let post = |op: Op, model: &str, body: bytes::Bytes| {
            let uri = t.urls.get(op, http.wildcard_model(model));
            async move { http.post(uri?, http.request_headers(call), body).await }
        };
        match call.endpoint {
            // A Gemini client's body goes to Gemini as it came; the model is in the URL.
            // Boxed, as the other arms' futures would grow every call's.
            Endpoint::GenerateContent => Box::pin(relay(t, call)).await,
            Endpoint::ChatCompletions
            | Endpoint::Messages
            | Endpoint::Responses
            | Endpoint::Converse => {
                exchange::chat(
                    http.provider,
                    &GenerateContent,
                    call,
                    http.model(call)?,
                    (http.drop_params, http.rules_for(call)),
                    |stream, model, body| post(Op::chat(stream), model, body),
                )
                .await
            }
            Endpoint::Embeddings => {
                exchange::embed(
                    http.provider,
                    &BatchEmbed,
                    &GenerateContent,
                    call,
                    http.model(call)?,
                    |model, body| post(Op::Embed, model, body),
                )
                .await
            }
            Endpoint::ImageGenerations => {
                exchange::images(
                    http.provider,
                    &Imagen,
                    &GenerateContent,
                    call,
                    http.model(call)?,
                    |model, body| post(Op::Predict, model, body),
                )
                .await
            }
            Endpoint::CountTokens => exchange::count_locally(http.provider, call.body),
            Endpoint::Completions
            | Endpoint::ImageEdits
            | Endpoint::ImageVariations
            | Endpoint::AudioTranscriptions
            | Endpoint::AudioTranslations
            | Endpoint::AudioSpeech
            | Endpoint::Moderations
            | Endpoint::Rerank
            | Endpoint::Ocr => exchange::not_served(http.provider, call),
        }
    }
}

/// A Gemini client's call to Gemini: its body as it came; the deployment's model in the URL.
async fn relay(t: &Target, call: &Call<'_>) -> Result<Response<UpstreamBody>, ApiError> {
    let http = &t.http;
    let model = http.model(call)?;
    let op = Op::chat(call.envelope.stream);
    let uri = t.urls.get(op, http.wildcard_model(&model))?;
    let host = Host::Platform(Edits::default());
    http.relay(&uri, call, &[], http.request_headers(call), host)
        .await
}

/// The URL of an operation on `model` below `base`: `models/{model}` (or a full resource name
/// the model already is) and the method.
pub(crate) fn url(base: &str, model: &str, op: Op) -> String {
    let name = if model.contains('/') {
        uri_encode(model, true)
    } else {
        format!("models/{}", uri_encode(model, false))
    };
    let method = match op {
        Op::Chat => ":generateContent",
        Op::Stream => ":streamGenerateContent?alt=sse",
        Op::Embed => ":batchEmbedContents",
        Op::Predict => ":predict",
    };
    format!("{base}/{name}{method}")
}

#[cfg(test)]
mod url_tests {
    use super::*;

    #[test]
    fn urls_name_the_model_and_method() {
        assert_eq!(
            url("http://h/v1beta", "gemini-2.0-flash", Op::Stream),
            "http://h/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse"
        );
        assert_eq!(
            url("http://h/v1beta", "text-embedding-004", Op::Embed),
            "http://h/v1beta/models/text-embedding-004:batchEmbedContents"
        );
    }
}
