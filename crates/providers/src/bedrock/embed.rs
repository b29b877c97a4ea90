//! OpenAI's `/v1/embeddings` on Bedrock through `InvokeModel`: Titan text embeddings (one
//! input per call, with a token count) and Cohere embeddings (a batch, no count).

use serde::Deserialize;
use serde_json::json;
use sluice_translate::embeddings::EmbedRequest;
use sluice_translate::{to_json, TranslateError};

use crate::exchange::{EmbedApi, Vectors};

/// Which Bedrock embedding model family a model id is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Embeddings {
    /// `amazon.titan-embed-*`.
    Titan,
    /// `cohere.embed-*`.
    Cohere,
}

impl Embeddings {
    /// The family of a model id (inference-profile prefixes such as `us.` allowed); `None`
    /// for a model that does not embed.
    pub fn of(model: &str) -> Option<Self> {
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

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawAnswer {
    /// Cohere: `[[...]]`.
    #[serde(default)]
    embeddings: Option<Vec<Vec<f32>>>,
    /// Titan.
    #[serde(default)]
    embedding: Option<Vec<f32>>,
    /// Titan's token count.
    #[serde(default)]
    input_text_token_count: Option<u64>,
}

impl EmbedApi for Embeddings {
    fn write(&self, _model: &str, req: &EmbedRequest) -> Result<Vec<u8>, TranslateError> {
        let v = match self {
            Self::Titan => {
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
            Self::Cohere => json!({"texts": req.inputs, "input_type": "search_document"}),
        };
        Ok(to_json(&v))
    }

    fn read(&self, body: &[u8]) -> Result<Vectors, TranslateError> {
        let raw: RawAnswer = serde_json::from_slice(body).map_err(TranslateError::bad_answer)?;
        let vectors = match (raw.embeddings, raw.embedding) {
            (Some(list), _) => list,
            (None, Some(one)) => vec![one],
            (None, None) => {
                return Err(TranslateError::BadAnswer(
                    "no embeddings in the answer".into(),
                ))
            }
        };
        Ok(Vectors {
            vectors,
            tokens: raw.input_text_token_count,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;
    use sluice_translate::embeddings::{parse_request, write_response};

    use super::*;

    fn v(b: &[u8]) -> Value {
        serde_json::from_slice(b).unwrap()
    }

    fn answer(api: Embeddings, req: &EmbedRequest, body: &[u8]) -> Value {
        let got = api.read(body).unwrap();
        v(&write_response("e", req, &got.vectors, got.tokens))
    }

    #[test]
    fn titan_and_cohere() {
        let one =
            parse_request(br#"{"model":"e","input":"hello","encoding_format":"base64"}"#).unwrap();
        let body = v(&Embeddings::Titan
            .write("amazon.titan-embed-text-v2:0", &one)
            .unwrap());
        assert_eq!(body, json!({"inputText": "hello"}));
        let out = answer(
            Embeddings::Titan,
            &one,
            br#"{"embedding":[1.0],"inputTextTokenCount":7}"#,
        );
        assert_eq!(out["usage"]["prompt_tokens"], 7);
        assert_eq!(out["data"][0]["embedding"], "AACAPw==");
        let two = parse_request(br#"{"model":"e","input":["a","b"]}"#).unwrap();
        assert!(Embeddings::Titan.write("t", &two).is_err());
        let body = v(&Embeddings::Cohere
            .write("cohere.embed-english-v3", &two)
            .unwrap());
        assert_eq!(body["texts"], json!(["a", "b"]));
        let out = answer(
            Embeddings::Cohere,
            &two,
            br#"{"embeddings":[[1],[2]],"id":"x"}"#,
        );
        assert_eq!(out["data"][1]["embedding"], json!([2.0]));
        assert_eq!(
            Embeddings::of("us.cohere.embed-v4:0"),
            Some(Embeddings::Cohere)
        );
        assert_eq!(Embeddings::of("anthropic.claude"), None);
        assert!(parse_request(br#"{"model":"e","input":[[1,2]]}"#).is_err());
    }
}
