//! How the mock provider behaves: deterministic content and usage, with tunable timing and size.

use std::time::Duration;

use super::faults::Faults;

/// Behaviour of the mock provider, per deployment (`litellm_params.mock_*`) or per
/// `sluice mock` server (command-line flags).
#[derive(Debug, Clone, PartialEq)]
pub struct MockSettings {
    /// Fixed reply text (`mock_response`, as in LiteLLM). `None`: deterministic filler text.
    pub response: Option<String>,
    /// Delay before the response starts (headers, and for streams the first chunk).
    pub latency: Duration,
    /// Delay between stream chunks.
    pub chunk_interval: Duration,
    /// Number of content chunks in a stream.
    pub chunks: u32,
    /// Completion tokens in each reply when no fixed `response` is set (a "token" is one word).
    pub response_tokens: u32,
    /// Length of each embedding vector.
    pub embedding_dims: u32,
    /// Injected failures.
    pub faults: Faults,
    /// AWS key pair (access key id, secret) the Bedrock paths check SigV4 signatures
    /// against; unset, signatures are not checked.
    pub aws: Option<(String, String)>,
    /// The API key the OpenAI, Anthropic, Azure, Gemini and Cohere paths require (in the
    /// header each provider reads), as the real providers do; unset, keys are not checked.
    pub api_key: Option<String>,
}

/// A native wire format the mock can play in process ([`crate::respond_wire`]), for `mock/`
/// deployments with `mock_wire`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MockWire {
    /// Gemini `generateContent`.
    Gemini,
    /// Bedrock Converse (event-stream frames for streams).
    Bedrock,
}

impl MockWire {
    /// Read `mock_wire`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "gemini" => Some(Self::Gemini),
            "bedrock" => Some(Self::Bedrock),
            _ => None,
        }
    }
}

impl Default for MockSettings {
    fn default() -> Self {
        Self {
            response: None,
            latency: Duration::ZERO,
            chunk_interval: Duration::ZERO,
            chunks: 8,
            response_tokens: 16,
            embedding_dims: 16,
            faults: Faults::default(),
            aws: None,
            api_key: None,
        }
    }
}
