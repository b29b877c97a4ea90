//! Rerank in Cohere's shape (what sluice serves at `/v1/rerank`, as LiteLLM does) and Voyage
//! AI's (`top_k`, answers under `data` with a token count): the few fields read, and an answer
//! written back in Cohere's shape.

use serde::Deserialize;
use serde_json::{json, Value};

use crate::TranslateError;

/// A rerank request, in Cohere's terms.
#[derive(Debug, Clone, PartialEq)]
pub struct RerankRequest {
    /// The query to rank the documents against.
    pub query: String,
    /// The documents' texts.
    pub documents: Vec<String>,
    /// How many results to return.
    pub top_n: Option<u64>,
    /// Return each document's text with its result.
    pub return_documents: bool,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawDocument {
    Text(String),
    Object { text: String },
}

#[derive(Deserialize)]
struct RawRequest {
    query: String,
    documents: Vec<RawDocument>,
    #[serde(default)]
    top_n: Option<u64>,
    #[serde(default)]
    return_documents: Option<bool>,
}

/// Read a Cohere-shaped rerank request.
pub fn parse_request(body: &[u8]) -> Result<RerankRequest, TranslateError> {
    let raw: RawRequest = serde_json::from_slice(body).map_err(TranslateError::bad_request)?;
    Ok(RerankRequest {
        query: raw.query,
        documents: raw
            .documents
            .into_iter()
            .map(|d| match d {
                RawDocument::Text(t) | RawDocument::Object { text: t } => t,
            })
            .collect(),
        top_n: raw.top_n,
        return_documents: raw.return_documents.unwrap_or(false),
    })
}

/// Voyage AI's request body for `model`.
pub fn write_voyage(model: &str, req: &RerankRequest) -> Vec<u8> {
    let mut body = json!({
        "model": model,
        "query": req.query,
        "documents": req.documents,
        "return_documents": req.return_documents,
    });
    if let Some(k) = req.top_n {
        body["top_k"] = k.into();
    }
    crate::to_json(&body)
}

#[derive(Deserialize)]
struct VoyageAnswer {
    data: Vec<VoyageResult>,
    #[serde(default)]
    usage: Option<VoyageUsage>,
}

#[derive(Deserialize)]
struct VoyageResult {
    index: u64,
    relevance_score: f64,
    #[serde(default)]
    document: Option<String>,
}

#[derive(Deserialize)]
struct VoyageUsage {
    #[serde(default)]
    total_tokens: u64,
}

/// Voyage AI's answer in Cohere's shape, its token count as `usage.prompt_tokens` (what
/// sluice prices token-priced rerankers by).
pub fn voyage_to_cohere(id: &str, model: &str, body: &[u8]) -> Result<Vec<u8>, TranslateError> {
    let raw: VoyageAnswer = serde_json::from_slice(body).map_err(TranslateError::bad_answer)?;
    let results: Vec<Value> = raw
        .data
        .into_iter()
        .map(|r| {
            let mut v = json!({"index": r.index, "relevance_score": r.relevance_score});
            if let Some(text) = r.document {
                v["document"] = json!({ "text": text });
            }
            v
        })
        .collect();
    let tokens = raw.usage.map_or(0, |u| u.total_tokens);
    Ok(crate::to_json(&json!({
        "id": id,
        "model": model,
        "results": results,
        "meta": {"api_version": {"version": "2"}, "billed_units": {"total_tokens": tokens}},
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cohere_to_voyage_and_back() {
        let req = parse_request(
            br#"{"model":"r","query":"fox","documents":["a",{"text":"b"}],"top_n":1,"return_documents":true}"#,
        )
        .unwrap();
        assert_eq!(req.documents, ["a", "b"]);
        let body: Value = serde_json::from_slice(&write_voyage("rerank-2", &req)).unwrap();
        assert_eq!(body["top_k"], 1);
        assert_eq!(body["model"], "rerank-2");
        assert!(body.get("top_n").is_none());
        let out: Value = serde_json::from_slice(
            &voyage_to_cohere(
                "id1",
                "rerank-2",
                br#"{"object":"list","data":[{"relevance_score":0.9,"index":1,"document":"b"}],"model":"rerank-2","usage":{"total_tokens":12}}"#,
            )
            .unwrap(),
        )
        .unwrap();
        assert_eq!(out["results"][0]["index"], 1);
        assert_eq!(out["results"][0]["document"]["text"], "b");
        assert_eq!(out["usage"]["prompt_tokens"], 12);
        assert!(parse_request(br#"{"query":"q"}"#).is_err());
    }
}
