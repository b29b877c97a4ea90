//! Pure codecs and stream framing, no I/O: the bytes of a request or an answer to sluice's one
//! internal representation (`ir`) and back. The easiest part of sluice to fuzz.
//!
//! - the client dialects' readers and writers: `openai` and `anthropic`; `embeddings` for
//!   OpenAI's embeddings on the client side; `responses` for OpenAI's Responses API asked of
//!   a deployment that does not speak it (the request read, the answer and its stream written);
//! - [`Codec`]: an upstream chat format (the dialects implement it here, providers with a
//!   format of their own in their module); `errors` maps an upstream's error into the
//!   client's dialect;
//! - framing: `sse` (the pass-through tap that reads usage and notices the end),
//!   `eventstream` (AWS's binary frames), `jsonstream` (JSON lines and arrays streamed
//!   without SSE), `stream` (frame-by-frame translation through a [`stream::StreamRead`]);
//! - `envelope`: the few fields of a request sluice reads, and the splice that rewrites them
//!   in the client's buffer without copying it;
//! - `params`: what a translation does with parameters its target cannot carry (hints dropped
//!   and noted, parameters the answer depends on refused by name).
//!
//! Translation is used only when the client's dialect differs from the upstream's; same-dialect
//! traffic keeps the splice-only pass-through.

pub mod anthropic;
pub mod assemble;
pub mod codec;
pub mod converse;
pub mod embeddings;
pub mod envelope;
pub mod errors;
pub mod eventstream;
pub mod fit;
/// The fuzz targets over this crate's parsers (fuzz/README.md); not an API.
#[doc(hidden)]
#[allow(clippy::expect_used, clippy::panic)] // a broken promise must crash the fuzz target
pub mod fuzz;
pub mod gemini;
pub mod images;
pub mod invoke_sse;
pub mod ir;
pub mod json_tool;
pub mod jsonstream;
pub mod multipart;
pub mod openai;
pub mod params;
pub mod replay;
pub mod rerank;
pub mod responses;
pub mod sse;
pub mod stream;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod units;

pub use codec::Codec;
pub use params::Params;

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

use ir::{ChatRequest, ChatResponse, Part};
use sluice_core::endpoint::Dialect;
use sluice_core::error::ApiError;

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
    /// The client's body is not valid JSON for its format.
    pub fn bad_request(e: serde_json::Error) -> Self {
        Self::BadRequest(e.to_string())
    }

    /// The upstream's answer is not valid JSON for its format.
    pub fn bad_answer(e: serde_json::Error) -> Self {
        Self::BadAnswer(e.to_string())
    }

    /// A parameter's value cannot be translated (the message is cut to 200 characters).
    pub fn invalid(param: &'static str, message: &str) -> Self {
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

/// Tool-call arguments (JSON text) as the object Anthropic, Gemini and Bedrock take.
pub fn tool_input(arguments: &str) -> Value {
    if arguments.trim().is_empty() {
        return Value::Object(serde_json::Map::new());
    }
    serde_json::from_str(arguments).unwrap_or_else(|_| Value::Object(serde_json::Map::new()))
}

/// Every tool call of a conversation as (id, name), for formats whose tool results name the
/// function instead of the call (Gemini).
pub fn tool_names(req: &ChatRequest) -> Vec<(&str, &str)> {
    req.messages
        .iter()
        .flat_map(|m| &m.content)
        .filter_map(|p| match p {
            Part::ToolCall(c) => Some((c.id.as_str(), c.name.as_str())),
            _ => None,
        })
        .collect()
}

/// The function a tool result answers: the latest call with its id, else what `from_id`
/// reads out of the id itself, else the id.
pub fn name_for_call<'a>(
    names: &[(&'a str, &'a str)],
    id: &'a str,
    from_id: fn(&str) -> Option<&str>,
) -> &'a str {
    names
        .iter()
        .rev()
        .find(|(i, _)| *i == id)
        .map(|(_, n)| *n)
        .or_else(|| from_id(id))
        .unwrap_or(id)
}

/// Unix seconds, for OpenAI's `created`.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A JSON value as bytes. Serialising a `Value` cannot fail.
pub fn to_json(v: &Value) -> Vec<u8> {
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

/// Read a chat request in `dialect`; what the target cannot carry is noted in, or refused by,
/// `params`.
pub fn parse_request(
    dialect: Dialect,
    body: &[u8],
    params: &mut Params,
) -> Result<ChatRequest, TranslateError> {
    match dialect {
        Dialect::OpenAi => openai::parse_request(body, params),
        Dialect::Anthropic => anthropic::parse_request(body, params),
        Dialect::Gemini => gemini::parse_request(body, params),
        Dialect::Converse => converse::parse_request(body, params),
    }
}

/// Write a whole answer in `dialect`.
pub fn write_response(dialect: Dialect, r: &ChatResponse) -> Vec<u8> {
    match dialect {
        Dialect::OpenAi => openai::write_response(r),
        Dialect::Anthropic => anthropic::write_response(r),
        Dialect::Gemini => gemini::write_response(r),
        Dialect::Converse => converse::write_response(r),
    }
}

#[cfg(test)]
mod tests;
