//! Translation between wire formats through one internal representation (`ir`). Only used
//! when the client's dialect differs from the provider's: OpenAI clients on Anthropic
//! deployments, Anthropic clients (`/v1/messages`) on OpenAI-compatible ones. Same-dialect
//! traffic keeps the splice-only pass-through.
//!
//! `exchange` makes one translated upstream call; `stream` translates an SSE body frame by
//! frame; `openai` and `anthropic` hold each format's readers and writers; `errors` maps
//! error bodies and statuses.

pub mod anthropic;
pub mod errors;
pub mod exchange;
pub mod ir;
pub mod openai;
pub mod stream;

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::endpoint::Dialect;
use crate::error::ApiError;
use ir::{ChatRequest, ChatResponse};

/// What the translators may do with parameters the target cannot take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    /// `litellm_settings.drop_params`: drop them instead of refusing the request.
    pub drop: bool,
}

/// Why a translation failed.
#[derive(Debug, thiserror::Error)]
pub enum TranslateError {
    /// The client's body does not fit its format.
    #[error("{0}")]
    BadRequest(String),
    /// A parameter's value cannot be translated.
    #[error("Invalid value for '{param}': {message}")]
    Invalid {
        /// The parameter.
        param: &'static str,
        /// Why.
        message: String,
    },
    /// A parameter the provider cannot take (and `drop_params` is off).
    #[error("unsupported parameter `{0}`")]
    Unsupported(String),
    /// The upstream's answer does not fit its format.
    #[error("{0}")]
    BadAnswer(String),
}

impl TranslateError {
    fn bad_request(e: serde_json::Error) -> Self {
        Self::BadRequest(e.to_string())
    }

    fn bad_answer(e: serde_json::Error) -> Self {
        Self::BadAnswer(e.to_string())
    }

    fn invalid(param: &'static str, message: &str) -> Self {
        Self::Invalid {
            param,
            message: message.chars().take(200).collect(),
        }
    }

    /// The client-facing error, naming the deployment's provider.
    pub fn into_api(self, provider: &'static str) -> ApiError {
        match self {
            Self::BadRequest(m) => ApiError::InvalidJson(m),
            Self::Invalid { param, message } => ApiError::InvalidParam { param, message },
            Self::Unsupported(param) => ApiError::UnsupportedParam { param, provider },
            Self::BadAnswer(m) => ApiError::UpstreamInvalid(m),
        }
    }
}

/// Refuse a parameter by name, unless `drop_params` is on.
fn check_param(params: Params, key: &str) -> Result<(), TranslateError> {
    if params.drop {
        Ok(())
    } else {
        Err(TranslateError::Unsupported(key.chars().take(100).collect()))
    }
}

/// Unix seconds, for OpenAI's `created`.
fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A JSON value as bytes. Serialising a `Value` cannot fail.
fn to_json(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).unwrap_or_default()
}

/// Append `data: <json>\n\n`.
fn sse_data(v: &Value, out: &mut Vec<u8>) {
    out.extend_from_slice(b"data: ");
    let _ = serde_json::to_writer(&mut *out, v);
    out.extend_from_slice(b"\n\n");
}

/// The sampling parameters both formats spell the same way.
fn insert_sampling(req: &ChatRequest, body: &mut serde_json::Map<String, Value>) {
    if let Some(t) = req.temperature {
        body.insert("temperature".into(), t.into());
    }
    if let Some(p) = req.top_p {
        body.insert("top_p".into(), p.into());
    }
}

/// Read a chat request in `dialect`.
pub fn parse_request(
    dialect: Dialect,
    body: &[u8],
    params: Params,
) -> Result<ChatRequest, TranslateError> {
    match dialect {
        Dialect::OpenAi => openai::parse_request(body, params),
        Dialect::Anthropic => anthropic::parse_request(body, params),
    }
}

/// Write a chat request in `dialect`.
pub fn write_request(
    dialect: Dialect,
    req: &ChatRequest,
    params: Params,
) -> Result<Vec<u8>, TranslateError> {
    match dialect {
        Dialect::OpenAi => openai::write_request(req, params),
        Dialect::Anthropic => anthropic::write_request(req, params),
    }
}

/// Read a whole answer in `dialect`.
pub fn parse_response(dialect: Dialect, body: &[u8]) -> Result<ChatResponse, TranslateError> {
    match dialect {
        Dialect::OpenAi => openai::parse_response(body),
        Dialect::Anthropic => anthropic::parse_response(body),
    }
}

/// Write a whole answer in `dialect`.
pub fn write_response(dialect: Dialect, r: &ChatResponse) -> Vec<u8> {
    match dialect {
        Dialect::OpenAi => openai::write_response(r),
        Dialect::Anthropic => anthropic::write_response(r),
    }
}

#[cfg(test)]
mod tests;
