//! Rerank in Cohere's shape (what sluice serves at `/v1/rerank`, as LiteLLM does), Voyage AI's
//! (`top_k`, answers under `data` with a token count), Hugging Face Text Embeddings Inference's
//! (`texts`, a bare list of `{index, score, text}` back) and Infinity's (Cohere's, but each
//! document a bare string): the few fields read, and an answer written back in Cohere's shape.

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
    /// `truncate` (TEI's: cut inputs longer than the model takes instead of refusing them),
    /// when given as a boolean.
    pub truncate: Option<bool>,
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
    #[serde(default)]
    truncate: Option<Value>,
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
        truncate: raw.truncate.as_ref().and_then(Value::as_bool),
    })
}

/// One result in Cohere's shape.
fn cohere_result(index: u64, score: f64, text: Option<String>) -> Value {
    let mut v = json!({"index": index, "relevance_score": score});
    if let Some(text) = text {
        v["document"] = json!({ "text": text });
    }
    v
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
        .map(|r| cohere_result(r.index, r.relevance_score, r.document))
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

/// Text Embeddings Inference's `/rerank` body (TEI takes no model and no `top_n`: the answer
/// is cut here).
pub fn write_tei(req: &RerankRequest) -> Vec<u8> {
    let mut body = json!({
        "query": req.query,
        "texts": req.documents,
        "raw_scores": false,
        "return_text": req.return_documents,
    });
    if let Some(t) = req.truncate {
        body["truncate"] = t.into();
    }
    crate::to_json(&body)
}

#[derive(Deserialize)]
struct TeiResult {
    index: u64,
    score: f64,
    #[serde(default)]
    text: Option<String>,
}

/// Text Embeddings Inference's answer (a bare list) in Cohere's shape: sorted by score, cut at
/// `top_n`, each document's text (from the answer, else the request) when asked for, and one
/// search unit (what LiteLLM bills a TEI rerank).
pub fn tei_to_cohere(
    id: &str,
    model: &str,
    req: &RerankRequest,
    body: &[u8],
) -> Result<Vec<u8>, TranslateError> {
    let mut raw: Vec<TeiResult> =
        serde_json::from_slice(body).map_err(TranslateError::bad_answer)?;
    raw.sort_by(|a, b| b.score.total_cmp(&a.score));
    if let Some(n) = req.top_n.and_then(|n| usize::try_from(n).ok()) {
        raw.truncate(n);
    }
    let results: Vec<Value> = raw
        .into_iter()
        .map(|r| {
            let text = req.return_documents.then(|| {
                r.text.or_else(|| {
                    usize::try_from(r.index)
                        .ok()
                        .and_then(|i| req.documents.get(i).cloned())
                })
            });
            cohere_result(r.index, r.score, text.flatten())
        })
        .collect();
    Ok(crate::to_json(&json!({
        "id": id,
        "model": model,
        "results": results,
        "meta": {"api_version": {"version": "2"}, "billed_units": {"search_units": 1}},
    })))
}

/// Infinity's answer in Cohere's shape: each result's `document`, a bare string there, becomes
/// `{"text": …}`; everything else (its `usage` tokens included) is kept.
pub fn infinity_to_cohere(body: &[u8]) -> Result<Vec<u8>, TranslateError> {
    let mut v: Value = serde_json::from_slice(body).map_err(TranslateError::bad_answer)?;
    let results = v
        .get_mut("results")
        .and_then(Value::as_array_mut)
        .ok_or_else(|| TranslateError::BadAnswer("Infinity's answer has no results".into()))?;
    for doc in results.iter_mut().filter_map(|r| r.get_mut("document")) {
        if let Value::String(text) = doc {
            *doc = json!({ "text": std::mem::take(text) });
        }
    }
    Ok(crate::to_json(&v))
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

    #[test]
    fn cohere_to_tei_and_back() {
        let req = parse_request(
            br#"{"model":"r","query":"fox","documents":["a",{"text":"b"},"c"],"top_n":2,"return_documents":true,"truncate":true}"#,
        )
        .unwrap();
        let body: Value = serde_json::from_slice(&write_tei(&req)).unwrap();
        assert_eq!(
            body,
            json!({"query": "fox", "texts": ["a", "b", "c"], "raw_scores": false,
                   "return_text": true, "truncate": true})
        );
        // TEI's list, out of order and with one text left out: sorted, cut at top_n, the
        // missing text taken from the request.
        let out: Value = serde_json::from_slice(
            &tei_to_cohere(
                "id1",
                "bge",
                &req,
                br#"[{"index":0,"score":0.1,"text":"a"},{"index":2,"score":0.9},{"index":1,"score":0.5,"text":"b"}]"#,
            )
            .unwrap(),
        )
        .unwrap();
        assert_eq!(
            out["results"],
            json!([
                {"index": 2, "relevance_score": 0.9, "document": {"text": "c"}},
                {"index": 1, "relevance_score": 0.5, "document": {"text": "b"}},
            ])
        );
        assert_eq!(out["meta"]["billed_units"]["search_units"], 1);
        let bare = parse_request(br#"{"query":"q","documents":["a"],"truncate":"END"}"#).unwrap();
        assert_eq!(bare.truncate, None);
        let body: Value = serde_json::from_slice(&write_tei(&bare)).unwrap();
        assert!(body.get("truncate").is_none());
        let out: Value = serde_json::from_slice(
            &tei_to_cohere("i", "m", &bare, br#"[{"index":0,"score":0.3,"text":"a"}]"#).unwrap(),
        )
        .unwrap();
        assert!(out["results"][0].get("document").is_none());
        assert!(tei_to_cohere("i", "m", &bare, br#"{"error":"x"}"#).is_err());
    }

    #[test]
    fn infinity_documents_become_objects() {
        let out: Value = serde_json::from_slice(
            &infinity_to_cohere(
                br#"{"object":"rerank","results":[{"relevance_score":0.9,"index":1,"document":"b"},{"relevance_score":0.1,"index":0},{"relevance_score":0.05,"index":2,"document":{"text":"c"}}],"usage":{"prompt_tokens":9,"total_tokens":9},"id":"x"}"#,
            )
            .unwrap(),
        )
        .unwrap();
        assert_eq!(out["results"][0]["document"], json!({"text": "b"}));
        assert!(out["results"][1].get("document").is_none());
        assert_eq!(out["results"][2]["document"], json!({"text": "c"}));
        assert_eq!(out["usage"]["prompt_tokens"], 9);
        assert!(infinity_to_cohere(br#"{"detail":"x"}"#).is_err());
    }
}
