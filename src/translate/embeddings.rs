//! OpenAI's `/v1/embeddings` on native upstreams: Gemini's `batchEmbedContents`, Bedrock's
//! Titan text embeddings (one input per call) and Cohere embeddings (`InvokeModel`). The
//! answer is OpenAI's list of embeddings; providers that report no token count get an
//! estimate (four bytes of input a token), as the mock counts.

use base64::Engine as _;
use serde::Deserialize;
use serde_json::{json, Value};

use super::{to_json, TranslateError};

/// Which native embedding API a model speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmbedApi {
    /// Gemini `batchEmbedContents`.
    Gemini,
    /// Bedrock `amazon.titan-embed-*`.
    Titan,
    /// Bedrock `cohere.embed-*`.
    Cohere,
}

impl EmbedApi {
    /// The API of a Bedrock model id (inference-profile prefixes such as `us.` allowed).
    pub fn bedrock(model: &str) -> Option<Self> {
        let bare = model.rsplit('/').next().unwrap_or(model);
        if bare.contains("amazon.titan-embed") {
            Some(Self::Titan)
        } else if bare.contains("cohere.embed") {
            Some(Self::Cohere)
        } else {
            None
        }
    }
}

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

/// The native request body for `model`.
pub fn write_request(
    api: EmbedApi,
    model: &str,
    req: &EmbedRequest,
) -> Result<Vec<u8>, TranslateError> {
    let v = match api {
        EmbedApi::Gemini => {
            let name = if model.contains('/') {
                model.to_owned()
            } else {
                format!("models/{model}")
            };
            let requests: Vec<Value> = req
                .inputs
                .iter()
                .map(|t| {
                    let mut r = json!({"model": name, "content": {"parts": [{"text": t}]}});
                    if let Some(d) = req.dimensions {
                        r["outputDimensionality"] = d.into();
                    }
                    r
                })
                .collect();
            json!({ "requests": requests })
        }
        EmbedApi::Titan => {
            let [text] = req.inputs.as_slice() else {
                return Err(TranslateError::invalid(
                    "input",
                    "Titan text embeddings take one input per request",
                ));
            };
            let mut r = json!({ "inputText": text });
            if let Some(d) = req.dimensions {
                r["dimensions"] = d.into();
            }
            r
        }
        EmbedApi::Cohere => json!({"texts": req.inputs, "input_type": "search_document"}),
    };
    Ok(to_json(&v))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawAnswer {
    /// Gemini: `[{values}]`; Cohere: `[[...]]`.
    #[serde(default)]
    embeddings: Option<Vec<Value>>,
    /// Titan.
    #[serde(default)]
    embedding: Option<Vec<f32>>,
    /// Titan's token count.
    #[serde(default)]
    input_text_token_count: Option<u64>,
}

/// Read the native answer and write OpenAI's.
pub fn write_response(
    model: &str,
    req: &EmbedRequest,
    body: &[u8],
) -> Result<Vec<u8>, TranslateError> {
    let raw: RawAnswer = serde_json::from_slice(body).map_err(TranslateError::bad_answer)?;
    let vectors: Vec<Vec<f32>> = match (raw.embeddings, raw.embedding) {
        (Some(list), _) => list
            .into_iter()
            .map(|e| {
                let values = match e {
                    Value::Object(mut o) => o.remove("values").unwrap_or(Value::Null),
                    other => other,
                };
                serde_json::from_value(values).map_err(TranslateError::bad_answer)
            })
            .collect::<Result<_, _>>()?,
        (None, Some(one)) => vec![one],
        (None, None) => {
            return Err(TranslateError::BadAnswer(
                "no embeddings in the answer".into(),
            ))
        }
    };
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
    let tokens = raw.input_text_token_count.unwrap_or(estimate);
    Ok(to_json(&json!({
        "object": "list",
        "data": data,
        "model": model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(b: &[u8]) -> Value {
        serde_json::from_slice(b).unwrap()
    }

    #[test]
    fn gemini_batch_both_ways() {
        let req = parse_request(br#"{"model":"e","input":["a","bb"],"dimensions":3}"#).unwrap();
        let body = v(&write_request(EmbedApi::Gemini, "text-embedding-004", &req).unwrap());
        assert_eq!(body["requests"][1]["model"], "models/text-embedding-004");
        assert_eq!(body["requests"][1]["content"]["parts"][0]["text"], "bb");
        assert_eq!(body["requests"][0]["outputDimensionality"], 3);
        let out = v(&write_response(
            "e",
            &req,
            br#"{"embeddings":[{"values":[0.5,1]},{"values":[2,3]}]}"#,
        )
        .unwrap());
        assert_eq!(out["data"][1]["embedding"], json!([2.0, 3.0]));
        assert_eq!(out["data"][1]["index"], 1);
        assert_eq!(out["usage"]["prompt_tokens"], 2);
    }

    #[test]
    fn titan_and_cohere() {
        let one =
            parse_request(br#"{"model":"e","input":"hello","encoding_format":"base64"}"#).unwrap();
        let body =
            v(&write_request(EmbedApi::Titan, "amazon.titan-embed-text-v2:0", &one).unwrap());
        assert_eq!(body, json!({"inputText": "hello"}));
        let out = v(
            &write_response("e", &one, br#"{"embedding":[1.0],"inputTextTokenCount":7}"#).unwrap(),
        );
        assert_eq!(out["usage"]["prompt_tokens"], 7);
        assert_eq!(out["data"][0]["embedding"], "AACAPw==");
        let two = parse_request(br#"{"model":"e","input":["a","b"]}"#).unwrap();
        assert!(write_request(EmbedApi::Titan, "t", &two).is_err());
        let body = v(&write_request(EmbedApi::Cohere, "cohere.embed-english-v3", &two).unwrap());
        assert_eq!(body["texts"], json!(["a", "b"]));
        let out = v(&write_response("e", &two, br#"{"embeddings":[[1],[2]],"id":"x"}"#).unwrap());
        assert_eq!(out["data"][1]["embedding"], json!([2.0]));
        assert_eq!(
            EmbedApi::bedrock("us.cohere.embed-v4:0"),
            Some(EmbedApi::Cohere)
        );
        assert_eq!(EmbedApi::bedrock("anthropic.claude"), None);
        assert!(parse_request(br#"{"model":"e","input":[[1,2]]}"#).is_err());
    }
}
