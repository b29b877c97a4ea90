//! OpenAI's `/v1/embeddings` on Gemini: one `batchEmbedContents` call for every input.

use serde::Deserialize;
use serde_json::{json, Value};
use sluice_translate::embeddings::EmbedRequest;
use sluice_translate::{to_json, TranslateError};

use crate::exchange::{EmbedApi, Vectors};

/// Gemini's `batchEmbedContents`.
#[derive(Debug, Clone, Copy, Default)]
pub struct BatchEmbed;

#[derive(Deserialize)]
struct RawAnswer {
    #[serde(default)]
    embeddings: Option<Vec<RawEmbedding>>,
}

#[derive(Deserialize)]
struct RawEmbedding {
    values: Vec<f32>,
}

impl EmbedApi for BatchEmbed {
    fn write(&self, model: &str, req: &EmbedRequest) -> Result<Vec<u8>, TranslateError> {
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
        Ok(to_json(&json!({ "requests": requests })))
    }

    fn read(&self, body: &[u8]) -> Result<Vectors, TranslateError> {
        let raw: RawAnswer = serde_json::from_slice(body).map_err(TranslateError::bad_answer)?;
        let Some(embeddings) = raw.embeddings else {
            return Err(TranslateError::BadAnswer(
                "no embeddings in the answer".into(),
            ));
        };
        Ok(Vectors {
            vectors: embeddings.into_iter().map(|e| e.values).collect(),
            tokens: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_translate::embeddings::{parse_request, write_response};

    fn v(b: &[u8]) -> Value {
        serde_json::from_slice(b).unwrap()
    }

    #[test]
    fn gemini_batch_both_ways() {
        let req = parse_request(br#"{"model":"e","input":["a","bb"],"dimensions":3}"#).unwrap();
        let body = v(&BatchEmbed.write("text-embedding-004", &req).unwrap());
        assert_eq!(body["requests"][1]["model"], "models/text-embedding-004");
        assert_eq!(body["requests"][1]["content"]["parts"][0]["text"], "bb");
        assert_eq!(body["requests"][0]["outputDimensionality"], 3);
        let got = BatchEmbed
            .read(br#"{"embeddings":[{"values":[0.5,1]},{"values":[2,3]}]}"#)
            .unwrap();
        let out = v(&write_response("e", &req, &got.vectors, got.tokens));
        assert_eq!(out["data"][1]["embedding"], json!([2.0, 3.0]));
        assert_eq!(out["data"][1]["index"], 1);
        assert_eq!(out["usage"]["prompt_tokens"], 2);
    }
}
