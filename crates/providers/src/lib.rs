//! Upstream providers, one module each: a provider's LiteLLM prefixes, the `litellm_params`
//! keys it reads and their validation, its URLs and credentials, its wire format (its own
//! `codec` when the format is not a client dialect), and the call itself. `registry` lists
//! them and generates the enums the rest of sluice dispatches on (no dynamic dispatch);
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
//! | `mock` | the built-in mock provider, in process (feature `mock`) |

pub mod anthropic;
pub mod azure;
pub mod bedrock;
pub mod body;
pub mod call;
pub mod exchange;
pub mod gemini;
pub mod http;
#[cfg(feature = "mock")]
pub mod mock;
pub mod openai_compatible;
pub mod registry;
pub mod settings;
pub mod target;
#[cfg(test)]
mod test_support;
pub mod vertex;

pub use body::{UpstreamBody, UpstreamBodyError};
pub use call::Call;
pub use registry::{provider_keys, Family, Provider, ProviderConfig, ProviderSpec};
pub use settings::{ApiKey, Given, UpstreamConfig};
pub use target::{DeploymentSpec, DeploymentTarget, TargetError, Timeouts};
