//! Upstream providers, one module each: a provider's LiteLLM prefixes, the `litellm_params`
//! keys it reads and their validation, its URLs and credentials, its wire format (its own
//! `codec` when the format is not a client dialect), and the call itself. The list at the end
//! of this file declares them and generates the enums the rest of sluice dispatches on (no
//! dynamic dispatch; the trait and the macro are in `registry`);
//! `settings` reads what every provider shares (base URL, keys, headers), `http` holds the
//! shared HTTP side (pooled client, keys, pass-through), `exchange` the upstream half of a
//! translated call.
//!
//! | module | serves |
//! | --- | --- |
//! | `openai_compatible` | OpenAI and every OpenAI-compatible server (a table of prefixes) |
//! | `azure` | Azure OpenAI |
//! | `anthropic` | Anthropic's Messages API |
//! | `gemini` | Google AI Studio's Gemini API |
//! | `bedrock` | Amazon Bedrock's Converse API |
//! | `vertex` | Vertex AI (Gemini and Claude models) |
//! | `unserved` | LiteLLM providers sluice has no module for: loaded with a warning, 501 |
//! | `mock` | the built-in mock provider, in process (feature `mock`) |

#[macro_use]
pub mod registry;

pub mod body;
pub mod call;
pub mod exchange;
pub mod files;
/// The fuzz target over the providers' stream formats (fuzz/README.md); not an API.
#[doc(hidden)]
pub mod fuzz;
pub mod http;
pub mod passthrough;
pub mod realtime;
pub mod search;
pub mod settings;
pub mod target;
#[cfg(test)]
mod test_support;

pub use body::{UpstreamBody, UpstreamBodyError};
pub use call::Call;
pub use registry::{provider_keys, Provider, ProviderSpec};
pub use settings::{ApiKey, Given, UpstreamConfig};
pub use target::{seconds_header, DeploymentSpec, DeploymentTarget, TargetError, Timeouts};

// The providers: one module each, one line each.
families! {
    OpenAiCompatible => openai_compatible::OpenAiCompatible,
    Azure => azure::Azure,
    Anthropic => anthropic::Anthropic,
    Gemini => gemini::Gemini,
    Bedrock => bedrock::Bedrock,
    Vertex => vertex::Vertex,
    Unserved => unserved::Unserved,
    #[cfg(feature = "mock")]
    Mock => mock::Mock,
}
