//! LiteLLM providers sluice has no module for (`sagemaker/`, `replicate/`, ...). A config
//! written for LiteLLM names them, and refusing the whole file for one deployment would keep
//! every other group from serving: such a deployment loads with a one-line warning naming its
//! `model`, and each request routed to it is answered 501 with an OpenAI-shaped error naming
//! the provider, so a group's other deployments and its fallbacks still serve.

use http::Response;
use sluice_core::error::ApiError;

use crate::body::UpstreamBody;
use crate::call::Call;
use crate::registry::{ProviderSpec, Upstream};
use crate::settings::Reading;
use crate::target::{Prepared, TargetError};
use crate::Family;

/// A spec for one prefix LiteLLM knows and sluice does not serve.
const fn spec(prefix: &'static str) -> ProviderSpec {
    ProviderSpec::new(prefix, Family::Unserved, None, &[])
}

/// LiteLLM's provider prefixes (its `LlmProviders`) that no sluice module serves. An
/// OpenAI-compatible one among them can be reached as `openai/<model>` with its `api_base`.
pub const SPECS: &[ProviderSpec] = &[
    spec("sagemaker"),
    spec("sagemaker_chat"),
    spec("replicate"),
    spec("clarifai"),
    spec("cohere_chat"),
    spec("anthropic_text"),
    spec("azure_text"),
    spec("azure_ai"),
    spec("ai21"),
    spec("ai21_chat"),
    spec("baseten"),
    spec("bytez"),
    spec("datarobot"),
    spec("vllm"),
    spec("nlp_cloud"),
    spec("petals"),
    spec("oobabooga"),
    spec("deepinfra"),
    spec("nvidia_nim"),
    spec("volcengine"),
    spec("codestral"),
    spec("text-completion-codestral"),
    spec("dashscope"),
    spec("moonshot"),
    spec("v0"),
    spec("morph"),
    spec("lambda_ai"),
    spec("sambanova"),
    spec("maritalk"),
    spec("cloudflare"),
    spec("xinference"),
    spec("friendliai"),
    spec("featherless_ai"),
    spec("watsonx"),
    spec("watsonx_text"),
    spec("triton"),
    spec("predibase"),
    spec("databricks"),
    spec("empower"),
    spec("github"),
    spec("compactifai"),
    spec("litellm_proxy"),
    spec("llamafile"),
    spec("lm_studio"),
    spec("galadriel"),
    spec("nebius"),
    spec("deepgram"),
    spec("elevenlabs"),
    spec("novita"),
    spec("aiohttp_openai"),
    spec("topaz"),
    spec("assemblyai"),
    spec("github_copilot"),
    spec("snowflake"),
    spec("gradient_ai"),
    spec("meta_llama"),
    spec("nscale"),
    spec("hyperbolic"),
    spec("recraft"),
    spec("heroku"),
    spec("aiml"),
    spec("cometapi"),
    spec("oci"),
    spec("vercel_ai_gateway"),
    spec("wandb"),
    spec("ovhcloud"),
    spec("lemonade"),
    spec("palm"),
];

/// A deployment of a provider sluice does not serve: its prefix, for the error.
#[derive(Debug, Clone, Copy)]
pub struct Target {
    /// The provider's prefix.
    pub provider: &'static str,
}

/// Providers without a module.
#[derive(Debug)]
pub struct Unserved;

impl Upstream for Unserved {
    type Config = Target;
    type Target = Target;
    const SPECS: &'static [ProviderSpec] = SPECS;
    const KEYS: &'static [&'static str] = &[];
    const HTTP: bool = false;
    const PRICED: bool = false;

    fn config(cx: &mut Reading<'_>) -> Option<Target> {
        let provider = cx.provider.name();
        cx.problems.warn(
            cx.params.path("model"),
            format!(
                "{provider}/ is a LiteLLM provider sluice does not serve: \"{}\" loads, and its \
                 requests are answered 501",
                cx.model_name
            ),
        );
        Some(Target { provider })
    }

    fn target(_: &Prepared<'_>, c: &Target) -> Result<Target, TargetError> {
        Ok(*c)
    }

    async fn send(t: &Target, call: &Call<'_>) -> Result<Response<UpstreamBody>, ApiError> {
        Err(ApiError::EndpointNotSupported {
            provider: t.provider,
            endpoint: call.endpoint.name(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Provider;

    #[test]
    fn prefixes_are_unique_and_not_served_elsewhere() {
        for s in SPECS {
            let p = Provider::from_prefix(s.prefix);
            assert_eq!(p.map(Provider::family), Some(Family::Unserved), "{}", s.prefix);
            assert_eq!(SPECS.iter().filter(|o| o.prefix == s.prefix).count(), 1);
        }
    }
}
