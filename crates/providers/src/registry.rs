//! What a provider module is: the [`Upstream`] trait every module implements, the static facts
//! of a LiteLLM prefix ([`ProviderSpec`]), a provider by its prefix ([`Provider`]), and the
//! `families!` macro that turns the one list of modules in `lib.rs` into the enums the rest of
//! sluice dispatches on (exhaustive matches, no dynamic dispatch). Adding a provider: its
//! module, and one line in that list; an OpenAI-compatible provider is one entry in
//! `openai_compatible::SPECS` instead.

use std::fmt;
use std::future::Future;

use http::{Response, Uri};
use sluice_core::error::ApiError;

use crate::body::UpstreamBody;
use crate::call::Call;
use crate::http::HttpTarget;
use crate::settings::Reading;
use crate::target::{Prepared, TargetError};
use crate::Family;

/// What a provider module supplies. The registry calls it through [`Family`],
/// [`ProviderConfig`] and [`UpstreamTarget`], generated from the list below.
pub trait Upstream {
    /// What this provider reads from a deployment beyond the common keys, validated.
    type Config: fmt::Debug + Clone + Send + Sync + 'static;
    /// A deployment of this provider, ready to call.
    type Target: fmt::Debug + Send + Sync + 'static;
    /// The LiteLLM prefixes it serves.
    const SPECS: &'static [ProviderSpec];
    /// The `litellm_params` keys only it reads (the common ones are the configuration's).
    const KEYS: &'static [&'static str];
    /// Whether it calls an HTTP upstream (the in-process mock does not): then the deployment
    /// gets a base URL and keys.
    const HTTP: bool = true;
    /// Whether its deployments cost money (a price table miss is then worth a warning).
    const PRICED: bool = true;

    /// Read its keys of one deployment; `None` when a problem was recorded.
    fn config(cx: &mut Reading<'_>) -> Option<Self::Config>;

    /// The base URL its config implies: a given one under a key of its own, and the default
    /// it derives (a region's or a location's endpoint).
    fn base(_config: &Self::Config) -> Base {
        Base::default()
    }

    /// Prepare a deployment (URLs, headers, credentials) once, at config load.
    fn target(d: &Prepared<'_>, config: &Self::Config) -> Result<Self::Target, TargetError>;

    /// Where its model list is, and the HTTP side that may call it: the free probe of an
    /// active health check. `None` where the provider has no such call (a health check then
    /// sends the smallest valid request).
    fn model_list(_target: &Self::Target) -> Option<(&HttpTarget, &Uri)> {
        None
    }

    /// Make one call; resolves when the answer's head is there (for a translated whole answer,
    /// when it is translated). The answer is in the client's dialect.
    fn send(
        target: &Self::Target,
        call: &Call<'_>,
    ) -> impl Future<Output = Result<Response<UpstreamBody>, ApiError>> + Send;
}

/// A base URL a provider's own keys imply.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Base {
    /// Given under a key of the provider's own (Bedrock's `aws_bedrock_runtime_endpoint`).
    pub given: Option<String>,
    /// Derived from its settings when nothing else names one.
    pub default: Option<String>,
}

/// Static facts about one LiteLLM provider prefix.
#[derive(Debug)]
pub struct ProviderSpec {
    /// The canonical prefix, as written before the `/` in `model`.
    pub prefix: &'static str,
    /// Other prefixes LiteLLM accepts for the same provider.
    pub aliases: &'static [&'static str],
    /// The module that serves it.
    pub family: Family,
    /// Base URL used when the deployment sets no `api_base`; `None` means `api_base` is
    /// required (or the module derives one).
    pub default_base: Option<&'static str>,
    /// Environment variables LiteLLM reads for the key when `api_key` is not set, in order.
    pub key_env: &'static [&'static str],
    /// Environment variables LiteLLM reads for the base URL when `api_base` is not set.
    pub base_env: &'static [&'static str],
    /// Path appended to a user-given `api_base` that lacks it (Ollama serves OpenAI at `/v1`).
    pub base_suffix: Option<&'static str>,
    /// A key is expected (a hosted API): its absence is worth a warning.
    pub hosted: bool,
    /// Its API reads documents (`POST /v1/ocr`, Mistral's OCR): only such deployments are
    /// sent OCR calls.
    pub serves_ocr: bool,
}

impl ProviderSpec {
    /// A spec with no aliases, environment base URL or suffix.
    pub const fn new(
        prefix: &'static str,
        family: Family,
        default_base: Option<&'static str>,
        key_env: &'static [&'static str],
    ) -> Self {
        Self {
            prefix,
            aliases: &[],
            family,
            default_base,
            key_env,
            base_env: &[],
            base_suffix: None,
            hosted: match default_base {
                Some(b) => starts_with(b, "https://"),
                None => false,
            },
            serves_ocr: false,
        }
    }
}

/// `str::starts_with`, at compile time.
const fn starts_with(s: &str, prefix: &str) -> bool {
    let (s, p) = (s.as_bytes(), prefix.as_bytes());
    if s.len() < p.len() {
        return false;
    }
    let mut i = 0;
    while i < p.len() {
        if s[i] != p[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// A provider, by its LiteLLM prefix (`groq/llama-3.1-8b` → `groq`). Copy, compared by prefix.
#[derive(Clone, Copy)]
pub struct Provider(&'static ProviderSpec);

impl PartialEq for Provider {
    fn eq(&self, other: &Self) -> bool {
        self.0.prefix == other.0.prefix
    }
}

impl Eq for Provider {}

impl std::hash::Hash for Provider {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.prefix.hash(state);
    }
}

impl fmt::Debug for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Provider({})", self.0.prefix)
    }
}

impl Provider {
    /// The provider of a spec.
    pub(crate) const fn new(spec: &'static ProviderSpec) -> Self {
        Self(spec)
    }

    /// Every provider, in registry order.
    pub fn all() -> impl Iterator<Item = Provider> {
        Family::ALL
            .iter()
            .flat_map(|f| f.specs().iter())
            .map(Provider)
    }

    /// The provider's static facts.
    pub fn spec(self) -> &'static ProviderSpec {
        self.0
    }

    /// The module that serves it.
    pub fn family(self) -> Family {
        self.0.family
    }

    /// The canonical prefix, for logs, metrics and `owned_by`.
    pub fn name(self) -> &'static str {
        self.0.prefix
    }

    /// Look a provider up by a LiteLLM prefix or alias.
    pub fn from_prefix(prefix: &str) -> Option<Self> {
        Self::all().find(|p| p.0.prefix == prefix || p.0.aliases.contains(&prefix))
    }

    /// The known prefix closest to a misspelt one, for "did you mean" hints.
    pub fn suggest(prefix: &str) -> Option<&'static str> {
        Self::all()
            .flat_map(|p| std::iter::once(p.0.prefix).chain(p.0.aliases.iter().copied()))
            .map(|name| (strsim::damerau_levenshtein(prefix, name), name))
            .filter(|(d, name)| *d <= 2.max(name.len() / 4))
            .min_by_key(|(d, _)| *d)
            .map(|(_, name)| name)
    }

    /// Guess the provider of a bare model name the way LiteLLM does for the well-known families.
    pub fn infer_from_model(model: &str) -> Option<Self> {
        const OPENAI_FAMILIES: [&str; 14] = [
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
            "dall-e-",
            "gpt-image-",
            "tts-",
            "whisper-",
        ];
        if OPENAI_FAMILIES.iter().any(|f| model.starts_with(f)) {
            Some(Self(&crate::openai_compatible::OPENAI))
        } else if model.starts_with("claude-") {
            Some(Self(&crate::anthropic::SPECS[0]))
        } else {
            None
        }
    }

    /// Whether requests to it cost money.
    pub fn priced(self) -> bool {
        self.0.family.priced()
    }
}

/// Declares each provider module listed in `lib.rs` and generates, from the list, the enums
/// sluice dispatches on: which module ([`Family`](crate::Family)), a deployment's
/// provider-specific config ([`ProviderConfig`](crate::ProviderConfig)) and its target
/// ([`UpstreamTarget`](crate::UpstreamTarget)), every match exhaustive.
macro_rules! families {
    ($( $(#[$attr:meta])* $name:ident => $module:ident :: $imp:ident, )*) => {
        $( $(#[$attr])* pub mod $module; )*

        /// Which provider module serves a provider.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Family {
            $( $(#[$attr])* #[doc = concat!("`", stringify!($module), "`")] $name, )*
        }

        /// A deployment's provider-specific configuration, validated: what only its provider
        /// reads.
        #[derive(Debug, Clone)]
        pub enum ProviderConfig {
            $(
                $(#[$attr])* #[doc = concat!("`", stringify!($module), "`")]
                $name(<$module::$imp as $crate::registry::Upstream>::Config),
            )*
        }

        /// A deployment's provider side, ready to call.
        #[derive(Debug)]
        pub enum UpstreamTarget {
            $(
                $(#[$attr])* #[doc = concat!("`", stringify!($module), "`")]
                $name(<$module::$imp as $crate::registry::Upstream>::Target),
            )*
        }

        impl Family {
            /// Every family, in registry order.
            pub const ALL: &'static [Family] = &[ $( $(#[$attr])* Family::$name, )* ];

            /// The prefixes it serves.
            pub fn specs(self) -> &'static [$crate::registry::ProviderSpec] {
                use $crate::registry::Upstream;
                match self { $( $(#[$attr])* Self::$name => <$module::$imp>::SPECS, )* }
            }

            /// The `litellm_params` keys only it reads.
            pub fn keys(self) -> &'static [&'static str] {
                use $crate::registry::Upstream;
                match self { $( $(#[$attr])* Self::$name => <$module::$imp>::KEYS, )* }
            }

            /// Whether it calls an HTTP upstream.
            pub fn http(self) -> bool {
                use $crate::registry::Upstream;
                match self { $( $(#[$attr])* Self::$name => <$module::$imp>::HTTP, )* }
            }

            /// Whether its deployments cost money.
            pub fn priced(self) -> bool {
                use $crate::registry::Upstream;
                match self { $( $(#[$attr])* Self::$name => <$module::$imp>::PRICED, )* }
            }

            /// Read its keys of one deployment.
            pub(crate) fn config(
                self,
                cx: &mut $crate::settings::Reading<'_>,
            ) -> Option<ProviderConfig> {
                use $crate::registry::Upstream;
                match self {
                    $( $(#[$attr])* Self::$name => <$module::$imp>::config(cx).map(ProviderConfig::$name), )*
                }
            }
        }

        impl ProviderConfig {
            /// The base URL the config implies.
            pub(crate) fn base(&self) -> $crate::registry::Base {
                use $crate::registry::Upstream;
                match self { $( $(#[$attr])* Self::$name(c) => <$module::$imp>::base(c), )* }
            }

            /// Prepare the deployment's target.
            pub(crate) fn target(
                &self,
                d: &$crate::target::Prepared<'_>,
            ) -> Result<UpstreamTarget, $crate::target::TargetError> {
                use $crate::registry::Upstream;
                match self {
                    $( $(#[$attr])* Self::$name(c) => <$module::$imp>::target(d, c).map(UpstreamTarget::$name), )*
                }
            }
        }

        impl UpstreamTarget {
            /// Its provider's model list call, where there is one.
            pub(crate) fn model_list(&self) -> Option<(&$crate::http::HttpTarget, &::http::Uri)> {
                use $crate::registry::Upstream;
                match self { $( $(#[$attr])* Self::$name(t) => <$module::$imp>::model_list(t), )* }
            }

            /// Make one call.
            pub(crate) async fn send(
                &self,
                call: &$crate::call::Call<'_>,
            ) -> Result<::http::Response<$crate::body::UpstreamBody>, ::sluice_core::error::ApiError> {
                use $crate::registry::Upstream;
                // Boxed: each provider's future is as large as its largest call (a translated
                // exchange, an OAuth refresh), and an unboxed match makes every call's future the
                // size of the largest provider's, copied whole each time it moves.
                match self { $( $(#[$attr])* Self::$name(t) => Box::pin(<$module::$imp>::send(t, call)).await, )* }
            }
        }
    };
}

/// Every `litellm_params` key some provider reads beyond the common ones.
pub fn provider_keys() -> impl Iterator<Item = &'static str> {
    Family::ALL.iter().flat_map(|f| f.keys().iter().copied())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_and_aliases_resolve() {
        for p in Provider::all() {
            assert_eq!(Provider::from_prefix(p.name()), Some(p));
        }
        assert_eq!(
            Provider::from_prefix("ollama_chat").map(Provider::name),
            Some("ollama")
        );
        assert_eq!(
            Provider::from_prefix("openai_compatible").map(Provider::name),
            Some("custom_openai")
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
        assert_eq!(
            Provider::infer_from_model("gpt-4o").map(Provider::name),
            Some("openai")
        );
        assert_eq!(
            Provider::infer_from_model("claude-3-5-sonnet").map(Provider::name),
            Some("anthropic")
        );
        assert_eq!(
            Provider::infer_from_model("dall-e-3").map(Provider::name),
            Some("openai")
        );
        assert_eq!(Provider::infer_from_model("llama3"), None);
    }
}
