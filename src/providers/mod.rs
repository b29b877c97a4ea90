//! Upstream providers: the provider table, the pooled HTTP client, and the OpenAI-compatible
//! pass-through path (envelope read, in-place model rewrite, SSE tap).

pub mod body;
pub mod call;
pub mod client;
pub mod envelope;
pub mod eventstream;
pub mod google_auth;
mod kind;
pub mod native;
pub mod sigv4;
pub mod sse;
pub mod target;

pub use kind::{KeyHeader, Provider, ProviderSpec, Wire};
pub use target::{DeploymentTarget, TargetKind};
