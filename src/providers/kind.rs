//! The provider table: every LiteLLM model prefix sluice knows, with what it takes to call it.
//! A table, not a module per provider, because the OpenAI-compatible family differs only in data.

/// How the upstream expects its API key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyHeader {
    /// `Authorization: Bearer <key>` (OpenAI and nearly every compatible server).
    Bearer,
    /// `api-key: <key>` (Azure OpenAI).
    AzureApiKey,
    /// `x-api-key: <key>` (Anthropic).
    XApiKey,
    /// `x-goog-api-key: <key>` (Google AI Studio; kept out of the URL, so out of logs).
    XGoogApiKey,
    /// No key header: each request carries per-request credentials (AWS SigV4, or a Google
    /// OAuth token from a service account).
    Signed,
}

/// How requests to a provider are carried out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    /// The OpenAI wire format, forwarded byte for byte (only `model` is rewritten).
    OpenAiCompatible,
    /// Azure OpenAI: OpenAI's body, deployment in the URL, `api-version` query.
    Azure,
    /// Anthropic's Messages API: `/v1/messages` passed through, OpenAI requests translated.
    Anthropic,
    /// Google AI Studio's `generateContent`: every request translated.
    Gemini,
    /// Amazon Bedrock's Converse API, SigV4-signed: every request translated.
    Bedrock,
    /// Vertex AI's Gemini API (`generateContent` under a project and location), with OAuth
    /// tokens from a service account: every request translated.
    Vertex,
    /// Answered inside sluice by the built-in mock provider.
    Mock,
    /// A LiteLLM provider whose native wire format sluice does not speak yet. Configs naming it
    /// still load (with a warning) and requests to it fail with a clear 501.
    NotYetSupported,
}

impl Wire {
    /// The API dialect an HTTP upstream of this wire speaks; `None` when there is no HTTP
    /// upstream (the in-process mock, unsupported providers).
    pub const fn dialect(self) -> Option<Dialect> {
        match self {
            Self::OpenAiCompatible | Self::Azure => Some(Dialect::OpenAi),
            Self::Anthropic => Some(Dialect::Anthropic),
            Self::Gemini | Self::Bedrock | Self::Vertex | Self::Mock | Self::NotYetSupported => {
                None
            }
        }
    }

    /// The wire format an HTTP upstream of this wire speaks, for translation.
    pub const fn format(self) -> Format {
        match self {
            Self::Anthropic => Format::Anthropic,
            Self::Gemini | Self::Vertex => Format::Gemini,
            Self::Bedrock => Format::Bedrock,
            Self::OpenAiCompatible | Self::Azure | Self::Mock | Self::NotYetSupported => {
                Format::OpenAi
            }
        }
    }
}

/// A provider, identified by its LiteLLM model prefix (`groq/llama-3.1-8b` → `Provider::Groq`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Provider {
    /// `openai/`
    OpenAi,
    /// `azure/`
    Azure,
    /// `groq/`
    Groq,
    /// `mistral/`
    Mistral,
    /// `deepseek/`
    DeepSeek,
    /// `xai/`
    XAi,
    /// `together_ai/`
    TogetherAi,
    /// `fireworks_ai/`
    FireworksAi,
    /// `openrouter/`
    OpenRouter,
    /// `perplexity/`
    Perplexity,
    /// `cerebras/`
    Cerebras,
    /// `hosted_vllm/`
    HostedVllm,
    /// `ollama/` and `ollama_chat/`, through Ollama's OpenAI-compatible API.
    Ollama,
    /// `custom_openai/` and `openai_compatible/`: any OpenAI-compatible server at `api_base`.
    CustomOpenAi,
    /// `anthropic/`: Anthropic's native Messages API.
    Anthropic,
    /// `gemini/`: Google AI Studio's native `generateContent` API.
    Gemini,
    /// `bedrock/`: Amazon Bedrock's Converse API.
    Bedrock,
    /// `vertex_ai/`: Gemini models on Vertex AI.
    VertexAi,
    /// `mock/`: the built-in mock provider, answered in process.
    Mock,
}

/// Static facts about one provider.
#[derive(Debug)]
pub struct ProviderSpec {
    /// The canonical LiteLLM prefix, as written before the `/` in `model`.
    pub prefix: &'static str,
    /// Other prefixes LiteLLM accepts for the same provider.
    pub aliases: &'static [&'static str],
    /// How requests are carried out.
    pub wire: Wire,
    /// Base URL used when the deployment sets no `api_base`; `None` means `api_base` is required.
    pub default_base: Option<&'static str>,
    /// Environment variables LiteLLM reads for the key when `api_key` is not set, in order.
    pub key_env: &'static [&'static str],
    /// Environment variables LiteLLM reads for the base URL when `api_base` is not set.
    pub base_env: &'static [&'static str],
    /// How the key is presented.
    pub key_header: KeyHeader,
    /// Path appended to a user-given `api_base` that lacks it (Ollama serves OpenAI at `/v1`).
    pub base_suffix: Option<&'static str>,
}

const fn spec(
    prefix: &'static str,
    wire: Wire,
    default_base: Option<&'static str>,
    key_env: &'static [&'static str],
) -> ProviderSpec {
    ProviderSpec {
        prefix,
        aliases: &[],
        wire,
        default_base,
        key_env,
        base_env: &[],
        key_header: KeyHeader::Bearer,
        base_suffix: None,
    }
}

use crate::translate::Format;
use sluice_core::endpoint::Dialect;
use Wire::OpenAiCompatible;

static OPENAI: ProviderSpec = ProviderSpec {
    base_env: &["OPENAI_BASE_URL", "OPENAI_API_BASE"],
    ..spec(
        "openai",
        OpenAiCompatible,
        Some("https://api.openai.com/v1"),
        &["OPENAI_API_KEY"],
    )
};
static AZURE: ProviderSpec = ProviderSpec {
    key_header: KeyHeader::AzureApiKey,
    base_env: &["AZURE_API_BASE", "AZURE_OPENAI_ENDPOINT"],
    ..spec(
        "azure",
        Wire::Azure,
        None,
        &["AZURE_API_KEY", "AZURE_OPENAI_API_KEY"],
    )
};
static GROQ: ProviderSpec = spec(
    "groq",
    OpenAiCompatible,
    Some("https://api.groq.com/openai/v1"),
    &["GROQ_API_KEY"],
);
static MISTRAL: ProviderSpec = spec(
    "mistral",
    OpenAiCompatible,
    Some("https://api.mistral.ai/v1"),
    &["MISTRAL_API_KEY"],
);
static DEEPSEEK: ProviderSpec = spec(
    "deepseek",
    OpenAiCompatible,
    Some("https://api.deepseek.com/v1"),
    &["DEEPSEEK_API_KEY"],
);
static XAI: ProviderSpec = spec(
    "xai",
    OpenAiCompatible,
    Some("https://api.x.ai/v1"),
    &["XAI_API_KEY"],
);
static TOGETHER: ProviderSpec = spec(
    "together_ai",
    OpenAiCompatible,
    Some("https://api.together.xyz/v1"),
    &[
        "TOGETHERAI_API_KEY",
        "TOGETHER_AI_API_KEY",
        "TOGETHER_API_KEY",
    ],
);
static FIREWORKS: ProviderSpec = ProviderSpec {
    aliases: &["fireworks"],
    ..spec(
        "fireworks_ai",
        OpenAiCompatible,
        Some("https://api.fireworks.ai/inference/v1"),
        &["FIREWORKS_AI_API_KEY", "FIREWORKS_API_KEY"],
    )
};
static OPENROUTER: ProviderSpec = spec(
    "openrouter",
    OpenAiCompatible,
    Some("https://openrouter.ai/api/v1"),
    &["OPENROUTER_API_KEY"],
);
static PERPLEXITY: ProviderSpec = spec(
    "perplexity",
    OpenAiCompatible,
    Some("https://api.perplexity.ai"),
    &["PERPLEXITYAI_API_KEY", "PERPLEXITY_API_KEY"],
);
static CEREBRAS: ProviderSpec = spec(
    "cerebras",
    OpenAiCompatible,
    Some("https://api.cerebras.ai/v1"),
    &["CEREBRAS_API_KEY"],
);
static HOSTED_VLLM: ProviderSpec = ProviderSpec {
    base_env: &["HOSTED_VLLM_API_BASE"],
    ..spec(
        "hosted_vllm",
        OpenAiCompatible,
        None,
        &["HOSTED_VLLM_API_KEY"],
    )
};
static OLLAMA: ProviderSpec = ProviderSpec {
    aliases: &["ollama_chat"],
    base_env: &["OLLAMA_API_BASE"],
    base_suffix: Some("/v1"),
    ..spec(
        "ollama",
        OpenAiCompatible,
        Some("http://localhost:11434/v1"),
        &["OLLAMA_API_KEY"],
    )
};
static CUSTOM_OPENAI: ProviderSpec = ProviderSpec {
    aliases: &["openai_compatible", "openai_like"],
    ..spec("custom_openai", OpenAiCompatible, None, &[])
};
static ANTHROPIC: ProviderSpec = ProviderSpec {
    key_header: KeyHeader::XApiKey,
    base_env: &["ANTHROPIC_API_BASE", "ANTHROPIC_BASE_URL"],
    // LiteLLM's `api_base` for Anthropic is the host (`https://api.anthropic.com`).
    base_suffix: Some("/v1"),
    ..spec(
        "anthropic",
        Wire::Anthropic,
        Some("https://api.anthropic.com/v1"),
        &["ANTHROPIC_API_KEY"],
    )
};
static GEMINI: ProviderSpec = ProviderSpec {
    key_header: KeyHeader::XGoogApiKey,
    base_env: &["GEMINI_API_BASE"],
    // LiteLLM's `api_base` for Gemini is the host; the API version is a path segment.
    base_suffix: Some("/v1beta"),
    ..spec(
        "gemini",
        Wire::Gemini,
        Some("https://generativelanguage.googleapis.com/v1beta"),
        &["GEMINI_API_KEY", "GOOGLE_API_KEY"],
    )
};
static BEDROCK: ProviderSpec = ProviderSpec {
    key_header: KeyHeader::Signed,
    base_env: &["AWS_BEDROCK_RUNTIME_ENDPOINT"],
    // The default endpoint depends on the region: built from it in config validation.
    ..spec("bedrock", Wire::Bedrock, None, &[])
};
static VERTEX_AI: ProviderSpec = ProviderSpec {
    aliases: &["vertex_ai_beta"],
    key_header: KeyHeader::Signed,
    base_env: &["VERTEXAI_API_BASE"],
    // The default endpoint depends on the location: built from it in config validation.
    ..spec("vertex_ai", Wire::Vertex, None, &[])
};
static MOCK: ProviderSpec = spec("mock", Wire::Mock, None, &[]);

impl Provider {
    /// Every provider, for lookups and suggestions.
    pub const ALL: [Provider; 19] = [
        Self::OpenAi,
        Self::Azure,
        Self::Groq,
        Self::Mistral,
        Self::DeepSeek,
        Self::XAi,
        Self::TogetherAi,
        Self::FireworksAi,
        Self::OpenRouter,
        Self::Perplexity,
        Self::Cerebras,
        Self::HostedVllm,
        Self::Ollama,
        Self::CustomOpenAi,
        Self::Anthropic,
        Self::Gemini,
        Self::Bedrock,
        Self::VertexAi,
        Self::Mock,
    ];

    /// The provider's static facts.
    pub fn spec(self) -> &'static ProviderSpec {
        match self {
            Self::OpenAi => &OPENAI,
            Self::Azure => &AZURE,
            Self::Groq => &GROQ,
            Self::Mistral => &MISTRAL,
            Self::DeepSeek => &DEEPSEEK,
            Self::XAi => &XAI,
            Self::TogetherAi => &TOGETHER,
            Self::FireworksAi => &FIREWORKS,
            Self::OpenRouter => &OPENROUTER,
            Self::Perplexity => &PERPLEXITY,
            Self::Cerebras => &CEREBRAS,
            Self::HostedVllm => &HOSTED_VLLM,
            Self::Ollama => &OLLAMA,
            Self::CustomOpenAi => &CUSTOM_OPENAI,
            Self::Anthropic => &ANTHROPIC,
            Self::Gemini => &GEMINI,
            Self::Bedrock => &BEDROCK,
            Self::VertexAi => &VERTEX_AI,
            Self::Mock => &MOCK,
        }
    }

    /// The canonical prefix, for logs, metrics and `owned_by`.
    pub fn name(self) -> &'static str {
        self.spec().prefix
    }

    /// Look a provider up by a LiteLLM prefix or alias.
    pub fn from_prefix(prefix: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| {
            let s = p.spec();
            s.prefix == prefix || s.aliases.contains(&prefix)
        })
    }

    /// The known prefix closest to a misspelt one, for "did you mean" hints.
    pub fn suggest(prefix: &str) -> Option<&'static str> {
        Self::ALL
            .iter()
            .flat_map(|p| std::iter::once(p.spec().prefix).chain(p.spec().aliases.iter().copied()))
            .map(|name| (strsim::damerau_levenshtein(prefix, name), name))
            .filter(|(d, name)| *d <= 2.max(name.len() / 4))
            .min_by_key(|(d, _)| *d)
            .map(|(_, name)| name)
    }

    /// Guess the provider of a bare model name the way LiteLLM does for the well-known families.
    pub fn infer_from_model(model: &str) -> Option<Self> {
        const OPENAI_FAMILIES: [&str; 10] = [
            "gpt-",
            "o1",
            "o3",
            "o4",
            "chatgpt-",
            "text-embedding-",
            "davinci",
            "babbage",
            "omni-moderation",
            "gpt4",
        ];
        if OPENAI_FAMILIES.iter().any(|f| model.starts_with(f)) {
            Some(Self::OpenAi)
        } else if model.starts_with("claude-") {
            Some(Self::Anthropic)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_and_aliases_resolve() {
        for p in Provider::ALL {
            assert_eq!(Provider::from_prefix(p.name()), Some(p));
        }
        assert_eq!(Provider::from_prefix("ollama_chat"), Some(Provider::Ollama));
        assert_eq!(
            Provider::from_prefix("openai_compatible"),
            Some(Provider::CustomOpenAi)
        );
        assert_eq!(Provider::from_prefix("opnai"), None);
    }

    #[test]
    fn suggestions_for_typos() {
        assert_eq!(Provider::suggest("opnai"), Some("openai"));
        assert_eq!(Provider::suggest("antropic"), Some("anthropic"));
        assert_eq!(Provider::suggest("zzzzzzzz"), None);
    }

    #[test]
    fn infers_well_known_families() {
        assert_eq!(Provider::infer_from_model("gpt-4o"), Some(Provider::OpenAi));
        assert_eq!(
            Provider::infer_from_model("claude-3-5-sonnet"),
            Some(Provider::Anthropic)
        );
        assert_eq!(Provider::infer_from_model("llama3"), None);
    }
}
