//! Azure OpenAI: OpenAI's wire with the deployment named in the URL, an `api-version` query
//! and an `api-key` header. Calls are made as for any OpenAI-compatible deployment.

use http::{Response, Uri};
use sluice_core::endpoint::Endpoint;
use sluice_core::error::ApiError;

use crate::body::UpstreamBody;
use crate::call::Call;
use crate::http::{uri, EndpointUrls, HttpTarget, KeyHeader};
use crate::openai_compatible::{self, organization};
use crate::realtime::RealtimeUrl;
use crate::registry::{ProviderSpec, Upstream};
use crate::Family;
use crate::settings::Reading;
use crate::target::{Prepared, TargetError};

/// Azure OpenAI API version used when neither the deployment nor `AZURE_API_VERSION` sets one.
pub const DEFAULT_API_VERSION: &str = "2024-10-21";

/// `azure/`
pub const SPECS: &[ProviderSpec] = &[ProviderSpec {
    base_env: &["AZURE_API_BASE", "AZURE_OPENAI_ENDPOINT"],
    // Azure has no default endpoint, but it always wants a key.
    hosted: true,
    ..ProviderSpec::new(
        "azure",
        Family::Azure,
        None,
        &["AZURE_API_KEY", "AZURE_OPENAI_API_KEY"],
    )
}];

/// What an Azure deployment reads beyond the common keys.
#[derive(Debug, Clone)]
pub struct Config {
    /// `api_version`, else `AZURE_API_VERSION`, else [`DEFAULT_API_VERSION`].
    pub api_version: String,
    /// `organization`, sent as `OpenAI-Organization`.
    pub organization: Option<String>,
}

/// Azure OpenAI.
#[derive(Debug)]
pub struct Azure;

impl Upstream for Azure {
    type Config = Config;
    type Target = openai_compatible::Target;
    const SPECS: &'static [ProviderSpec] = SPECS;
    const KEYS: &'static [&'static str] = &["api_version", "organization"];

    fn config(cx: &mut Reading<'_>) -> Option<Config> {
        Some(Config {
            api_version: cx.params.text("api_version").unwrap_or_else(|| {
                cx.env
                    .var("AZURE_API_VERSION")
                    .filter(|s| !s.is_empty())
                    .unwrap_or_else(|| DEFAULT_API_VERSION.to_owned())
            }),
            organization: cx.params.text("organization"),
        })
    }

    fn target(d: &Prepared<'_>, c: &Config) -> Result<Self::Target, TargetError> {
        let base = d.upstream.api_base.as_deref().unwrap_or_default();
        let deployment = &d.upstream.model;
        Ok(openai_compatible::Target {
            http: HttpTarget::build(
                d,
                KeyHeader::Named("api-key"),
                &organization(d, c.organization.as_deref())?,
            )?,
            urls: EndpointUrls::build(d, |e| url(base, deployment, &c.api_version, e))?,
            rerank: openai_compatible::Shape::Cohere,
            realtime: RealtimeUrl::azure(base, deployment, &c.api_version),
            ocr: d.upstream.provider.spec().serves_ocr,
            models: uri(
                d,
                format!(
                    "{}/openai/models?api-version={}",
                    base.trim_end_matches('/'),
                    c.api_version
                ),
            )?,
        })
    }

    fn model_list(t: &openai_compatible::Target) -> Option<(&HttpTarget, &Uri)> {
        Some((&t.http, &t.models))
    }

    async fn send(
        t: &openai_compatible::Target,
        call: &Call<'_>,
    ) -> Result<Response<UpstreamBody>, ApiError> {
        openai_compatible::send(t, call).await
    }
}

fn url(base: &str, deployment: &str, version: &str, e: Endpoint) -> String {
    match e {
        Endpoint::Responses => format!("{base}/openai/responses?api-version={version}"),
        Endpoint::ChatCompletions
        | Endpoint::Completions
        | Endpoint::Embeddings
        | Endpoint::Messages
        | Endpoint::CountTokens
        | Endpoint::ImageGenerations
        | Endpoint::ImageEdits
        | Endpoint::ImageVariations
        | Endpoint::AudioTranscriptions
        | Endpoint::AudioTranslations
        | Endpoint::AudioSpeech
        | Endpoint::Moderations
        | Endpoint::Rerank
        | Endpoint::GenerateContent
        | Endpoint::Converse
        | Endpoint::Ocr => format!(
            "{base}/openai/deployments/{deployment}{}?api-version={version}",
            e.path()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn azure_urls() {
        assert_eq!(
            url("https://r.openai.azure.com", "gpt4o", "2024-06-01", Endpoint::ChatCompletions),
            "https://r.openai.azure.com/openai/deployments/gpt4o/chat/completions?api-version=2024-06-01"
        );
        assert_eq!(
            url(
                "https://r.openai.azure.com",
                "x",
                DEFAULT_API_VERSION,
                Endpoint::Responses
            ),
            "https://r.openai.azure.com/openai/responses?api-version=2024-10-21"
        );
    }
}
