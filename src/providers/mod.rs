//! Upstream providers: the provider table, the pooled HTTP client, and the OpenAI-compatible
//! pass-through path.

mod kind;

pub use kind::{KeyHeader, Provider, ProviderSpec, Wire};
