//! Google AI Studio's wire format as the mock writes it, on the real paths
//! (`/v1beta/models/{m}:generateContent`, `:streamGenerateContent?alt=sse` (SSE; without
//! `alt=sse`, one JSON array sent element by element, as Google does),
//! `:batchEmbedContents`, and Vertex AI's
//! `/v1/projects/{p}/locations/{l}/publishers/google/models/{m}:…`): a candidate with text parts
//! (and a `functionCall` part when the request offers function declarations), `usageMetadata`,
//! SSE chunks ending `\r\n\r\n`, and Google's error shape `{"error": {"code", "message",
//! "status"}}`. It also plays Google's OAuth token endpoint (`POST /token`, a JWT-bearer grant)
//! and requires the tokens it issued on Vertex paths.

use bytes::Bytes;
use http::{Response, StatusCode};
use serde::Deserialize;
use serde_json::{json, Value};

use super::openai::{pieces, vector, Plan};
use super::tools::{plan_gemini, Turn};
use super::{json, MockBody, MockSettings};

/// What a Gemini path asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    /// `:generateContent`
    Generate,
    /// `:streamGenerateContent`
    Stream,
    /// `:batchEmbedContents`
    Embed,
    /// `:predict` (Imagen)
    Predict,
}

/// Match `/v1beta/models/{model}:{op}` (AI Studio) or Vertex AI's project path; the flag says
/// Vertex.
pub(super) fn route(path: &str) -> Option<(&str, Op, bool)> {
    let rest = path
        .strip_prefix("/v1beta/")
        .or_else(|| path.strip_prefix("/v1/"))?;
    let (name, op) = rest.rsplit_once(':')?;
    let vertex = name.starts_with("projects/");
    let name = match name.split_once("/publishers/google/") {
        Some((_, model)) if vertex => model,
        _ => name,
    };
    let model = name.strip_prefix("models/").unwrap_or(name);
    let op = match op {
        "generateContent" => Op::Generate,
        "streamGenerateContent" => Op::Stream,
        "batchEmbedContents" => Op::Embed,
        "predict" => Op::Predict,
        _ => return None,
    };
    Some((model, op, vertex))
}

/// Match Vertex AI's Anthropic path (`…/publishers/anthropic/models/{m}:rawPredict` or
/// `:streamRawPredict`): the model.
pub(super) fn anthropic_route(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("/v1/projects/")?;
    let (_, model_op) = rest.split_once("/publishers/anthropic/models/")?;
    let (model, op) = model_op.rsplit_once(':')?;
    matches!(op, "rawPredict" | "streamRawPredict").then_some(model)
}

/// Prefix of the access tokens the mock issues.
const TOKEN_PREFIX: &str = "mock-vertex-token-";

/// `POST /token`: a JWT-bearer grant with a three-part assertion gets an hour's token.
pub(super) fn token(body: &[u8], serial: u64) -> Response<MockBody> {
    let form = String::from_utf8_lossy(body);
    let field = |name: &str| {
        form.split('&')
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
    };
    let grant_ok =
        field("grant_type") == Some("urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer");
    let assertion_ok = field("assertion").is_some_and(|a| a.split('.').count() == 3);
    if !grant_ok || !assertion_ok {
        let v = json!({"error": "invalid_grant", "error_description": "Invalid JWT Signature."});
        return json(StatusCode::BAD_REQUEST, Bytes::from(v.to_string()));
    }
    let v = json!({
        "access_token": format!("{TOKEN_PREFIX}{serial}"),
        "expires_in": 3599,
        "token_type": "Bearer",
    });
    json(StatusCode::OK, Bytes::from(v.to_string()))
}

/// Vertex paths need a token the mock issued: Google's 401 otherwise.
pub(super) fn check_token(headers: &http::HeaderMap) -> Option<Response<MockBody>> {
    let ok = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|t| t.starts_with(TOKEN_PREFIX));
    (!ok).then(|| {
        error(
            StatusCode::UNAUTHORIZED,
            "Request had invalid authentication credentials. Expected OAuth 2 access token.",
        )
    })
}

/// A 400 in Google's shape for a body the mock cannot read.
pub(super) fn bad_request(message: &str) -> Response<MockBody> {
    error(StatusCode::BAD_REQUEST, message)
}

/// Google's error body for a status.
pub(super) fn error(status: StatusCode, message: &str) -> Response<MockBody> {
    let name = match status.as_u16() {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        429 => "RESOURCE_EXHAUSTED",
        503 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        _ => "INTERNAL",
    };
    let body = json!({"error": {"code": status.as_u16(), "message": message, "status": name}});
    json(status, Bytes::from(body.to_string()))
}

impl Plan {
    fn gemini_usage(&self) -> Value {
        json!({
            "promptTokenCount": self.prompt_tokens,
            "candidatesTokenCount": self.completion_tokens,
            "totalTokenCount": self.prompt_tokens + self.completion_tokens,
        })
    }

    fn gemini_chunk(&self, parts: Vec<Value>, last: bool) -> Value {
        let mut candidate = json!({"content": {"role": "model", "parts": parts}, "index": 0});
        if last {
            candidate["finishReason"] = "STOP".into();
        }
        let mut v = json!({
            "candidates": [candidate],
            "modelVersion": self.model,
            "responseId": format!("mockresp{:012x}", self.serial),
        });
        if last {
            v["usageMetadata"] = self.gemini_usage();
        }
        v
    }

    fn function_call(&self) -> Option<Value> {
        self.tool.as_ref().map(|t| {
            let args: Value = serde_json::from_str(&t.arguments).unwrap_or_else(|_| json!({}));
            let mut part = json!({"functionCall": {"name": t.name, "args": args}});
            // Gemini 3 signs the reasoning behind each call; it must come back next turn.
            if super::rules::signs_calls(&self.model) {
                part["thoughtSignature"] = super::rules::signature(self.serial).into();
            }
            part
        })
    }

    fn gemini_text(&self) -> String {
        match &self.tool {
            Some(t) => format!("Calling {}.", t.name),
            None => self.text.clone(),
        }
    }

    /// `:generateContent`.
    fn generate(&self) -> Bytes {
        let mut parts = vec![json!({"text": self.gemini_text()})];
        parts.extend(self.function_call());
        Bytes::from(self.gemini_chunk(parts, true).to_string())
    }

    /// `:streamGenerateContent?alt=sse`: each chunk an SSE event.
    fn generate_stream(&self) -> Vec<Bytes> {
        self.stream_chunks().iter().map(sse).collect()
    }

    /// `:streamGenerateContent` without `alt=sse`: one JSON array, an element a frame, each
    /// pretty-printed as Google's are (`[{…}`, `\n,\r\n{…}`, …, `\n]`).
    fn generate_array(&self) -> Vec<Bytes> {
        let chunks = self.stream_chunks();
        let last = chunks.len().saturating_sub(1);
        chunks
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let pretty = serde_json::to_string_pretty(c).unwrap_or_default();
                let lead = if i == 0 { "[" } else { "\n,\r\n" };
                let tail = if i == last { "\n]" } else { "" };
                Bytes::from(format!("{lead}{pretty}{tail}"))
            })
            .collect()
    }

    /// A stream's chunks: text pieces, then the function call, finish reason and usage in the
    /// last chunk.
    fn stream_chunks(&self) -> Vec<Value> {
        let text = self.gemini_text();
        let mut texts: Vec<&str> = pieces(&text, self.chunks)
            .into_iter()
            .filter(|p| !p.is_empty())
            .collect();
        let last_text = texts.pop();
        let mut chunks: Vec<Value> = texts
            .into_iter()
            .map(|t| self.gemini_chunk(vec![json!({ "text": t })], false))
            .collect();
        let mut parts: Vec<Value> = last_text
            .map(|t| json!({ "text": t }))
            .into_iter()
            .collect();
        parts.extend(self.function_call());
        chunks.push(self.gemini_chunk(parts, true));
        chunks
    }
}

/// Gemini's SSE framing: `data: ` and a CRLF blank line.
fn sse(v: &Value) -> Bytes {
    Bytes::from(format!("data: {v}\r\n\r\n"))
}

#[derive(Deserialize)]
struct EmbedProbe {
    #[serde(default)]
    requests: Vec<EmbedItem>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct EmbedItem {
    #[serde(default)]
    content: Value,
    #[serde(default)]
    output_dimensionality: Option<u32>,
}

/// Answer one Gemini call (faults and latency already applied); `sse` when the query asks
/// for `alt=sse`.
pub(super) fn answer(
    model: &str,
    op: Op,
    sse: bool,
    body: &Bytes,
    s: &MockSettings,
    prompt_tokens: u64,
) -> Response<MockBody> {
    if op == Op::Predict {
        return predict(body);
    }
    if op == Op::Embed {
        let Ok(probe) = serde_json::from_slice::<EmbedProbe>(body) else {
            return bad_request("Invalid JSON payload received.");
        };
        let embeddings: Vec<Value> = probe
            .requests
            .iter()
            .map(|r| {
                let text: String = r.content["parts"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|p| p["text"].as_str())
                    .collect();
                let dims = r.output_dimensionality.unwrap_or(s.embedding_dims).max(1);
                json!({ "values": vector(&text, dims) })
            })
            .collect();
        let v = json!({ "embeddings": embeddings });
        return json(StatusCode::OK, Bytes::from(v.to_string()));
    }
    let plan = match plan_gemini(body) {
        Ok(Some(Turn::Call(t))) => super::plan(s, model, Some(t), prompt_tokens, true),
        Ok(Some(Turn::Say(words))) => {
            let said = MockSettings {
                response: Some(words),
                ..s.clone()
            };
            super::plan(&said, model, None, prompt_tokens, true)
        }
        Ok(None) => super::plan(s, model, None, prompt_tokens, true),
        Err(e) => return bad_request(&format!("Invalid JSON payload received. {e}")),
    };
    match op {
        Op::Stream if sse => super::stream(plan.generate_stream(), s, "text/event-stream"),
        Op::Stream => super::stream(plan.generate_array(), s, "application/json; charset=UTF-8"),
        Op::Generate | Op::Embed | Op::Predict => json(StatusCode::OK, plan.generate()),
    }
}

/// Imagen's `:predict`: `sampleCount` images (a 1×1 PNG each).
fn predict(body: &Bytes) -> Response<MockBody> {
    #[derive(Deserialize)]
    struct Parameters {
        #[serde(default, rename = "sampleCount")]
        sample_count: Option<u32>,
    }
    #[derive(Deserialize)]
    struct Predict {
        instances: Vec<Value>,
        #[serde(default)]
        parameters: Option<Parameters>,
    }
    let Ok(req) = serde_json::from_slice::<Predict>(body) else {
        return bad_request("Invalid JSON payload received.");
    };
    if req
        .instances
        .first()
        .and_then(|i| i["prompt"].as_str())
        .is_none()
    {
        return bad_request("instances[0].prompt is required");
    }
    let n = req
        .parameters
        .and_then(|p| p.sample_count)
        .unwrap_or(1)
        .clamp(1, 4);
    let png = super::media::png_base64();
    let predictions: Vec<Value> = (0..n)
        .map(|_| json!({"bytesBase64Encoded": png, "mimeType": "image/png"}))
        .collect();
    json(
        StatusCode::OK,
        Bytes::from(json!({ "predictions": predictions }).to_string()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        assert_eq!(
            route("/v1beta/models/gemini-2.0-flash:streamGenerateContent"),
            Some(("gemini-2.0-flash", Op::Stream, false))
        );
        assert_eq!(
            route("/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-pro:generateContent"),
            Some(("gemini-2.5-pro", Op::Generate, true))
        );
        assert_eq!(route("/v1beta/models/x:countTokens"), None);
        assert_eq!(
            anthropic_route("/v1/projects/p/locations/l/publishers/anthropic/models/claude-x@1:streamRawPredict"),
            Some("claude-x@1")
        );
        assert_eq!(route("/v1/chat/completions"), None);
    }

    #[test]
    fn streams_without_sse_are_one_json_array() {
        let plan = crate::plan(&MockSettings::default(), "gemini-x", None, 10, true);
        let frames = plan.generate_array();
        assert!(frames.len() > 1);
        let all: Vec<u8> = frames.concat();
        let v: Value = serde_json::from_slice(&all).unwrap();
        let items = v.as_array().unwrap();
        assert_eq!(items.len(), frames.len());
        assert_eq!(
            items.last().unwrap()["usageMetadata"]["promptTokenCount"],
            10
        );
        assert!(items[0].get("usageMetadata").is_none());
    }

    #[test]
    fn function_declarations_and_answers() {
        let call = |body: &[u8]| match plan_gemini(body).unwrap() {
            Some(Turn::Call(t)) => Some(t),
            Some(Turn::Say(words)) => panic!("said {words}"),
            None => None,
        };
        let body = br#"{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"tools":[{"functionDeclarations":[{"name":"a","parametersJsonSchema":{"type":"object","properties":{"n":{"type":"integer"}}}},{"name":"b"}]}],"toolConfig":{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["b"]}}}"#;
        assert_eq!(call(body).unwrap().name, "b");
        let body = br#"{"contents":[{"role":"user","parts":[{"functionResponse":{"name":"a","response":{}}}]}],"tools":[{"functionDeclarations":[{"name":"a"}]}]}"#;
        assert_eq!(call(body), None);
        let body = br#"{"contents":[],"tools":[{"functionDeclarations":[{"name":"a","parametersJsonSchema":{"type":"object","properties":{"n":{"type":"integer"}}}}]}]}"#;
        assert_eq!(call(body).unwrap().arguments, r#"{"n":1}"#);
        // A scripted call, then its result echoed, as on the other shapes.
        let script = r#"{"contents":[{"role":"user","parts":[{"text":"go\nmock-tool: sh {\"cmd\": \"ls\"}"}]}],"tools":[{"functionDeclarations":[{"name":"a"},{"name":"sh"}]}]}"#;
        let t = call(script.as_bytes()).unwrap();
        assert_eq!(
            (t.name.as_str(), t.arguments.as_str()),
            ("sh", r#"{"cmd":"ls"}"#)
        );
        let answered = r#"{"contents":[{"role":"user","parts":[{"text":"mock-tool: sh {}"}]},{"role":"model","parts":[{"functionCall":{"name":"sh","args":{}}}]},{"role":"user","parts":[{"functionResponse":{"name":"sh","response":{"output":"x.txt"}}}]}],"tools":[{"functionDeclarations":[{"name":"sh"}]}]}"#;
        match plan_gemini(answered.as_bytes()).unwrap() {
            Some(Turn::Say(words)) => assert_eq!(words, "mock tool result: x.txt"),
            other => panic!("{other:?}"),
        }
    }
}
