//! OpenAI and every OpenAI-compatible server (Groq, Mistral, DeepSeek, xAI, Together,
//! Fireworks, OpenRouter, Perplexity, Cerebras, vLLM, Ollama, any server at `api_base`): one
//! table-driven module, since they differ only in data. OpenAI endpoints pass through with the
//! model spliced in; Anthropic clients (`/v1/messages`) are translated to Chat Completions;
//! `count_tokens` is estimated locally. Adding a compatible provider is one entry in [`SPECS`].

use http::header::{HeaderName, HeaderValue};
use http::{Response, Uri};
use sluice_core::endpoint::Endpoint;
use sluice_core::error::ApiError;
use sluice_translate::codec::OpenAiChat;

use crate::body::UpstreamBody;
use crate::call::Call;
use crate::exchange;
use crate::http::{uri, EndpointUrls, HttpTarget, KeyHeader};
use crate::realtime::RealtimeUrl;
use crate::registry::{ProviderSpec, Upstream};
use crate::Family;
use crate::settings::Reading;
use crate::target::{Prepared, TargetError};

mod rerank;

pub use rerank::Shape;

/// `openai/`
pub const OPENAI: ProviderSpec = ProviderSpec {
    base_env: &["OPENAI_BASE_URL", "OPENAI_API_BASE"],
    ..compatible(
        "openai",
        Some("https://api.openai.com/v1"),
        &["OPENAI_API_KEY"],
    )
};

/// `text-completion-openai/`: OpenAI's completions models (`gpt-3.5-turbo-instruct`), at
/// OpenAI's URL with OpenAI's key; its own prefix so that `model_info.mode` defaults to
/// `completion`, as LiteLLM's `/health` infers.
pub const TEXT_COMPLETION_OPENAI: ProviderSpec = ProviderSpec {
    prefix: "text-completion-openai",
    ..OPENAI
};

/// `custom_openai/` (and `openai_compatible/`, `openai_like/`): any OpenAI-compatible server at
/// `api_base`; also a bare model name with an `api_base`.
pub const CUSTOM_OPENAI: ProviderSpec = ProviderSpec {
    aliases: &["openai_compatible", "openai_like"],
    ..compatible("custom_openai", None, &[])
};

const fn compatible(
    prefix: &'static str,
    default_base: Option<&'static str>,
    key_env: &'static [&'static str],
) -> ProviderSpec {
    ProviderSpec::new(prefix, Family::OpenAiCompatible, default_base, key_env)
}

/// Every OpenAI-compatible provider, by its LiteLLM prefix.
pub const SPECS: &[ProviderSpec] = &[
    OPENAI,
    TEXT_COMPLETION_OPENAI,
    compatible(
        "groq",
        Some("https://api.groq.com/openai/v1"),
        &["GROQ_API_KEY"],
    ),
    ProviderSpec {
        serves_ocr: true,
        ..compatible(
            "mistral",
            Some("https://api.mistral.ai/v1"),
            &["MISTRAL_API_KEY"],
        )
    },
    compatible(
        "deepseek",
        Some("https://api.deepseek.com/v1"),
        &["DEEPSEEK_API_KEY"],
    ),
    compatible("xai", Some("https://api.x.ai/v1"), &["XAI_API_KEY"]),
    compatible(
        "together_ai",
        Some("https://api.together.xyz/v1"),
        &[
            "TOGETHERAI_API_KEY",
            "TOGETHER_AI_API_KEY",
            "TOGETHER_API_KEY",
        ],
    ),
    ProviderSpec {
        aliases: &["fireworks"],
        ..compatible(
            "fireworks_ai",
            Some("https://api.fireworks.ai/inference/v1"),
            &["FIREWORKS_AI_API_KEY", "FIREWORKS_API_KEY"],
        )
    },
    compatible(
        "openrouter",
        Some("https://openrouter.ai/api/v1"),
        &["OPENROUTER_API_KEY"],
    ),
    compatible(
        "perplexity",
        Some("https://api.perplexity.ai"),
        &["PERPLEXITYAI_API_KEY", "PERPLEXITY_API_KEY"],
    ),
    compatible(
        "cerebras",
        Some("https://api.cerebras.ai/v1"),
        &["CEREBRAS_API_KEY"],
    ),
    // Cohere's v2 API: rerank (`/v2/rerank`), in the shape sluice serves.
    compatible(
        "cohere",
        Some("https://api.cohere.com/v2"),
        &["COHERE_API_KEY", "CO_API_KEY"],
    ),
    // Jina AI: OpenAI-shaped embeddings and Cohere-shaped rerank.
    compatible("jina_ai", Some("https://api.jina.ai/v1"), &["JINA_AI_API_KEY"]),
    // Voyage AI: OpenAI-shaped embeddings; rerank in its own shape (`rerank.rs`).
    compatible("voyage", Some("https://api.voyageai.com/v1"), &["VOYAGE_API_KEY"]),
    // Infinity: OpenAI-shaped embeddings, Cohere-shaped rerank with bare-string documents.
    ProviderSpec {
        base_env: &["INFINITY_API_BASE"],
        ..compatible("infinity", None, &["INFINITY_API_KEY"])
    },
    // Hugging Face Text Embeddings Inference: rerank in TEI's shape at `{api_base}/rerank`
    // (`rerank.rs`); the rest as an OpenAI-compatible server at `api_base`.
    ProviderSpec {
        base_env: &["HF_API_BASE", "HUGGINGFACE_API_BASE"],
        ..compatible("huggingface", None, &["HUGGINGFACE_API_KEY"])
    },
    ProviderSpec {
        base_env: &["HOSTED_VLLM_API_BASE"],
        ..compatible("hosted_vllm", None, &["HOSTED_VLLM_API_KEY"])
    },
    // Ollama's OpenAI-compatible API, under `/v1`.
    ProviderSpec {
        aliases: &["ollama_chat"],
        base_env: &["OLLAMA_API_BASE"],
        base_suffix: Some("/v1"),
        ..compatible(
            "ollama",
            Some("http://localhost:11434/v1"),
            &["OLLAMA_API_KEY"],
        )
    },
    CUSTOM_OPENAI,
];

/// What an OpenAI-compatible deployment reads beyond the common keys.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// `organization` (OpenAI), sent as `OpenAI-Organization`.
    pub organization: Option<String>,
}

/// A deployment on the OpenAI wire: its URLs and HTTP side (Azure's too, with its own URLs).
#[derive(Debug)]
pub struct Target {
    /// Client, keys, model.
    pub http: HttpTarget,
    /// One URL per endpoint.
    pub urls: EndpointUrls,
    /// The rerank API it speaks.
    pub rerank: Shape,
    /// Where Realtime API sessions go (`crate::realtime`).
    pub realtime: RealtimeUrl,
    /// Its provider reads documents (`ProviderSpec::serves_ocr`).
    pub ocr: bool,
    /// `GET {base}/models`, a health check's free probe.
    pub models: Uri,
}

/// The OpenAI-compatible family.
#[derive(Debug)]
pub struct OpenAiCompatible;

impl Upstream for OpenAiCompatible {
    type Config = Config;
    type Target = Target;
    const SPECS: &'static [ProviderSpec] = SPECS;
    const KEYS: &'static [&'static str] = &["organization"];

    fn config(cx: &mut Reading<'_>) -> Option<Config> {
        Some(Config {
            organization: cx.params.text("organization"),
        })
    }

    fn target(d: &Prepared<'_>, c: &Config) -> Result<Target, TargetError> {
        let base = d.upstream.api_base.as_deref().unwrap_or_default();
        Ok(Target {
            http: HttpTarget::build(
                d,
                KeyHeader::Bearer,
                &organization(d, c.organization.as_deref())?,
            )?,
            urls: EndpointUrls::build(d, |e| {
                if e == Endpoint::Rerank {
                    rerank::url(d.upstream.provider.name(), base)
                } else {
                    format!("{base}{}", e.path())
                }
            })?,
            rerank: Shape::of(d.upstream.provider.name()),
            realtime: RealtimeUrl::openai(base),
            ocr: d.upstream.provider.spec().serves_ocr,
            models: uri(d, format!("{base}/models"))?,
        })
    }

    fn model_list(t: &Target) -> Option<(&HttpTarget, &Uri)> {
        Some((&t.http, &t.models))
    }

    async fn send(t: &Target, call: &Call<'_>) -> Result<Response<UpstreamBody>, ApiError> {
        send(t, call).await
    }
}

/// `OpenAI-Organization`, when set.
pub(crate) fn organization(
    d: &Prepared<'_>,
    org: Option<&str>,
) -> Result<Vec<(HeaderName, HeaderValue)>, TargetError> {
    org.map(|o| {
        HeaderValue::from_str(o)
            .map(|v| (HeaderName::from_static("openai-organization"), v))
            .map_err(|_| d.bad_header("OpenAI-Organization"))
    })
    .into_iter()
    .collect()
}

/// One call on the OpenAI wire.
pub(crate) async fn send(t: &Target, call: &Call<'_>) -> Result<Response<UpstreamBody>, ApiError> {
    let http = &t.http;
    match call.endpoint {
        Endpoint::ChatCompletions
        | Endpoint::Completions
        | Endpoint::Embeddings
        | Endpoint::Responses
        | Endpoint::ImageGenerations
        | Endpoint::ImageEdits
        | Endpoint::ImageVariations
        | Endpoint::AudioTranscriptions
        | Endpoint::AudioTranslations
        | Endpoint::AudioSpeech
        | Endpoint::Moderations => {
            http.pass_through(t.urls.get(call.endpoint), call, &[])
                .await
        }
        // The translated branches are boxed so that the pass-through call's future stays small.
        Endpoint::Rerank => Box::pin(rerank::send(t, call)).await,
        Endpoint::Messages | Endpoint::GenerateContent | Endpoint::Converse => {
            let url = t.urls.get(Endpoint::ChatCompletions);
            Box::pin(exchange::chat(
                http.provider,
                &OpenAiChat,
                call,
                http.model(call)?,
                (http.drop_params, http.rules_for(call)),
                |_, _, body| http.post(url.clone(), http.request_headers(call), body),
            ))
            .await
        }
        Endpoint::CountTokens => exchange::count_locally(http.provider, call.body),
        // Mistral's document OCR, on its own API only.
        Endpoint::Ocr if t.ocr => {
            http.pass_through(t.urls.get(Endpoint::Ocr), call, &[])
                .await
        }
        Endpoint::Ocr => exchange::not_served(http.provider, call),
    }
}
