//! Anthropic's Messages API: `/v1/messages` and `count_tokens` pass through with the model
//! spliced in (and the client's `anthropic-version` / `anthropic-beta`, which Claude Code relies
//! on); OpenAI chat clients are translated to Messages. The Messages codec itself is
//! `sluice_translate::anthropic`, since it is also a client dialect.

use http::header::{HeaderName, HeaderValue};
use http::{Response, Uri};
use sluice_core::endpoint::Endpoint;
use sluice_core::error::ApiError;
use sluice_translate::anthropic::API_VERSION;
use sluice_translate::codec::AnthropicMessages;

use crate::body::UpstreamBody;
use crate::call::Call;
use crate::exchange;
use crate::http::{uri, HttpTarget, KeyHeader};
use crate::registry::{ProviderSpec, Upstream};
use crate::Family;
use crate::settings::Reading;
use crate::target::{Prepared, TargetError};

/// `anthropic/`
pub const SPECS: &[ProviderSpec] = &[ProviderSpec {
    base_env: &["ANTHROPIC_API_BASE", "ANTHROPIC_BASE_URL"],
    // LiteLLM's `api_base` for Anthropic is the host (`https://api.anthropic.com`).
    base_suffix: Some("/v1"),
    ..ProviderSpec::new(
        "anthropic",
        Family::Anthropic,
        Some("https://api.anthropic.com/v1"),
        &["ANTHROPIC_API_KEY"],
    )
}];

/// Anthropic request headers a pass-through call takes from the client (API version and beta
/// features).
static CLIENT_HEADERS: [HeaderName; 2] = [
    HeaderName::from_static("anthropic-version"),
    HeaderName::from_static("anthropic-beta"),
];

/// An Anthropic deployment.
#[derive(Debug)]
pub struct Target {
    http: HttpTarget,
    messages: Uri,
    count_tokens: Uri,
    /// `GET {base}/v1/models`, a health check's free probe.
    models: Uri,
}

/// Anthropic.
#[derive(Debug)]
pub struct Anthropic;

impl Upstream for Anthropic {
    type Config = ();
    type Target = Target;
    const SPECS: &'static [ProviderSpec] = SPECS;
    const KEYS: &'static [&'static str] = &[];

    fn config(_: &mut Reading<'_>) -> Option<()> {
        Some(())
    }

    fn target(d: &Prepared<'_>, (): &()) -> Result<Target, TargetError> {
        let base = d.upstream.api_base.as_deref().unwrap_or_default();
        let version = (
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(API_VERSION),
        );
        Ok(Target {
            http: HttpTarget::build(d, KeyHeader::Named("x-api-key"), &[version])?,
            messages: uri(d, format!("{base}{}", Endpoint::Messages.path()))?,
            count_tokens: uri(d, format!("{base}{}", Endpoint::CountTokens.path()))?,
            models: uri(d, format!("{base}/v1/models"))?,
        })
    }

    fn model_list(t: &Target) -> Option<(&HttpTarget, &Uri)> {
        Some((&t.http, &t.models))
    }

    async fn send(t: &Target, call: &Call<'_>) -> Result<Response<UpstreamBody>, ApiError> {
        let http = &t.http;
        match call.endpoint {
            Endpoint::Messages => http.pass_through(&t.messages, call, &CLIENT_HEADERS).await,
            Endpoint::CountTokens => {
                http.pass_through(&t.count_tokens, call, &CLIENT_HEADERS)
                    .await
            }
            Endpoint::ChatCompletions
            | Endpoint::Responses
            | Endpoint::GenerateContent
            | Endpoint::Converse => {
                exchange::chat(
                    http.provider,
                    &AnthropicMessages::DIRECT,
                    call,
                    http.model(call)?,
                    (http.drop_params, http.rules_for(call)),
                    |_, _, body| http.post(t.messages.clone(), http.request_headers(call), body),
                )
                .await
            }
            Endpoint::Completions | Endpoint::Embeddings
            | Endpoint::ImageGenerations
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
