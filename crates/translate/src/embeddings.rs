//! OpenAI's `/v1/embeddings` on the client side of a native upstream: the request read into
//! the texts to embed, and the vectors the upstream returned written as OpenAI's list of
//! embeddings. Providers that report no token count get an estimate (four bytes of input a
//! token), as the mock counts. The native request and answer shapes live with their providers.

use base64::Engine as _;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::{to_json, TranslateError};

/// An OpenAI embeddings request, as far as native providers can take it.
#[derive(Debug, Clone, PartialEq)]
pub struct EmbedRequest {
    /// The texts, in order.
    pub inputs: Vec<String>,
    /// `dimensions`.
    pub dimensions: Option<u64>,
    /// `encoding_format: base64`.
    pub base64: bool,
}

#[derive(Deserialize)]
struct RawRequest {
    input: Value,
    #[serde(default)]
    dimensions: Option<u64>,
    #[serde(default)]
    encoding_format: Option<String>,
}

/// Read an OpenAI embeddings request. Token-id inputs cannot be sent to a native provider.
pub fn parse_request(body: &[u8]) -> Result<EmbedRequest, TranslateError> {
    let raw: RawRequest = serde_json::from_slice(body).map_err(TranslateError::bad_request)?;
    let inputs = match raw.input {
        Value::String(s) => vec![s],
        Value::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            for i in items {
                match i {
                    Value::String(s) => out.push(s),
                    _ => {
                        return Err(TranslateError::invalid(
                            "input",
                            "this provider takes text inputs, not token ids",
                        ))
                    }
                }
            }
            out
        }
        _ => {
            return Err(TranslateError::invalid(
                "input",
                "must be a string or an array of strings",
            ))
        }
    };
    if inputs.is_empty() {
        return Err(TranslateError::invalid("input", "must not be empty"));
    }
    Ok(EmbedRequest {
        inputs,
        dimensions: raw.dimensions,
        base64: raw.encoding_format.as_deref() == Some("base64"),
    })
}

/// OpenAI's answer for `vectors` (one per input, in order); `tokens` when the upstream
/// counted them.
pub fn write_response(
    model: &str,
    req: &EmbedRequest,
    vectors: &[Vec<f32>],
    tokens: Option<u64>,
) -> Vec<u8> {
    let data: Vec<Value> = vectors
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let embedding = if req.base64 {
                let bytes: Vec<u8> = v.iter().flat_map(|f| f.to_le_bytes()).collect();
                Value::from(base64::engine::general_purpose::STANDARD.encode(bytes))
            } else {
                json!(v)
            };
            json!({"object": "embedding", "index": i, "embedding": embedding})
        })
        .collect();
    let estimate = req
        .inputs
        .iter()
        .map(|t| (t.len() as u64).div_ceil(4).max(1))
        .sum::<u64>();
    let tokens = tokens.unwrap_or(estimate);
    to_json(&json!({
        "object": "list",
        "data": data,
        "model": model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }))
}
