//! Amazon Bedrock's wire format as the mock writes it, on the real paths
//! (`/model/{id}/converse`, `/model/{id}/converse-stream`, `/model/{id}/invoke`,
//! `/model/{id}/invoke-with-response-stream`): Converse answers with `toolUse` blocks when the
//! request offers a `toolConfig`, ConverseStream as binary event-stream frames with real CRCs,
//! InvokeModel in the model's own format (Anthropic's Messages for a Claude body, Titan and
//! Cohere embeddings, image generation: Titan and Nova Canvas, SD3 and Stable Image, Stable
//! Diffusion XL, each family's body checked as AWS checks it, images from
//! [`super::media::image_png`]), InvokeModelWithResponseStream as `chunk` events whose base64
//! `bytes` are Anthropic's stream events, the last with Bedrock's
//! `amazon-bedrock-invocationMetrics`, and AWS's error shape (`{"message"}` with
//! `x-amzn-ErrorType`). With a key pair configured, every request's SigV4 signature is checked
//! first: a wrong one gets AWS's 403.

use bytes::Bytes;
use http::header::HeaderValue;
use http::{HeaderMap, Response, StatusCode};
use serde::Deserialize;
use serde_json::{json, Value};

use super::openai::{pieces, vector, Plan};
use super::tools::{decide, split, ToolPlan};
use super::{json, MockBody, MockSettings};
use sluice_net::sigv4;
use sluice_translate::eventstream;
use sluice_translate::images::{SDXL_SIZES, STABILITY_RATIOS};

/// What a Bedrock path asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    /// `/converse`
    Converse,
    /// `/converse-stream`
    Stream,
    /// `/invoke` (a Claude Messages body, embeddings, images)
    Invoke,
    /// `/invoke-with-response-stream` (a Claude Messages body)
    InvokeStream,
}

/// Match `/model/{id}/{op}`; the id comes back decoded (`%3A` → `:`).
pub(super) fn route(path: &str) -> Option<(String, Op)> {
    let rest = path.strip_prefix("/model/")?;
    let (id, op) = rest.rsplit_once('/')?;
    let op = match op {
        "converse" => Op::Converse,
        "converse-stream" => Op::Stream,
        "invoke" => Op::Invoke,
        "invoke-with-response-stream" => Op::InvokeStream,
        _ => return None,
    };
    Some((sigv4::uri_decode(id), op))
}

/// AWS's error answer: `{"message"}` and the exception name in `x-amzn-ErrorType`.
pub(super) fn error(status: StatusCode, message: &str) -> Response<MockBody> {
    let kind = match status.as_u16() {
        400 => "ValidationException",
        403 => "AccessDeniedException",
        404 => "ResourceNotFoundException",
        408 => "ModelTimeoutException",
        429 => "ThrottlingException",
        503 => "ServiceUnavailableException",
        _ => "InternalServerException",
    };
    error_of(status, kind, message)
}

fn error_of(status: StatusCode, kind: &'static str, message: &str) -> Response<MockBody> {
    let mut resp = json(
        status,
        Bytes::from(json!({ "message": message }).to_string()),
    );
    resp.headers_mut()
        .insert("x-amzn-errortype", HeaderValue::from_static(kind));
    resp
}

/// Check the request's SigV4 signature when the mock holds a key pair: `Some` AWS 403 when it
/// does not verify.
pub(super) fn check_signature(
    s: &MockSettings,
    path: &str,
    query: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Option<Response<MockBody>> {
    let (key, secret) = s.aws.as_ref()?;
    sigv4::verify(key, secret, path, query, headers, body)
        .err()
        .map(|e| {
            let kind = match e {
                sigv4::VerifyError::Missing => "MissingAuthenticationTokenException",
                sigv4::VerifyError::UnknownKey => "UnrecognizedClientException",
                sigv4::VerifyError::Mismatch => "InvalidSignatureException",
            };
            error_of(StatusCode::FORBIDDEN, kind, &e.to_string())
        })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Probe {
    #[serde(default)]
    messages: Vec<Value>,
    #[serde(default)]
    tool_config: Option<Value>,
}

/// The tool call to answer with: `toolConfig.tools[].toolSpec`, `toolChoice.tool.name`, and
/// whether the last turn holds a `toolResult`.
fn tool_plan(body: &[u8]) -> Result<Option<ToolPlan>, String> {
    let probe: Probe = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    let Some(config) = probe.tool_config else {
        return Ok(None);
    };
    let offered: Vec<(String, Option<&Value>)> = config["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| {
            let spec = t.get("toolSpec")?;
            Some((
                spec["name"].as_str()?.to_owned(),
                spec.pointer("/inputSchema/json"),
            ))
        })
        .collect();
    let forced = config
        .pointer("/toolChoice/tool/name")
        .and_then(Value::as_str);
    let answered = probe.messages.last().is_some_and(|m| {
        m["content"]
            .as_array()
            .is_some_and(|c| c.iter().any(|b| b.get("toolResult").is_some()))
    });
    Ok(decide(&offered, forced, answered))
}

impl Plan {
    fn tool_use_id(&self) -> String {
        format!("tooluse_mock{:012x}", self.serial)
    }

    fn bedrock_text(&self) -> String {
        match &self.tool {
            Some(t) => format!("Calling {}.", t.name),
            None => self.text.clone(),
        }
    }

    fn bedrock_stop(&self) -> &'static str {
        if self.tool.is_some() {
            "tool_use"
        } else {
            "end_turn"
        }
    }

    fn bedrock_usage(&self) -> Value {
        json!({
            "inputTokens": self.prompt_tokens,
            "outputTokens": self.completion_tokens,
            "totalTokens": self.prompt_tokens + self.completion_tokens,
            "cacheReadInputTokens": 0,
            "cacheWriteInputTokens": 0,
        })
    }

    /// `/converse`.
    fn converse(&self) -> Bytes {
        let mut content = vec![json!({"text": self.bedrock_text()})];
        if let Some(t) = &self.tool {
            let input: Value = serde_json::from_str(&t.arguments).unwrap_or_else(|_| json!({}));
            content.push(json!({"toolUse": {
                "toolUseId": self.tool_use_id(), "name": t.name, "input": input,
            }}));
        }
        let v = json!({
            "output": {"message": {"role": "assistant", "content": content}},
            "stopReason": self.bedrock_stop(),
            "usage": self.bedrock_usage(),
            "metrics": {"latencyMs": 1},
        });
        Bytes::from(v.to_string())
    }

    /// `/converse-stream`: `messageStart`, text deltas in block 0, the tool block's
    /// `contentBlockStart` and input deltas, `messageStop`, `metadata` — one frame each.
    fn converse_stream(&self) -> Vec<Bytes> {
        let ev =
            |kind: &str, v: Value| Bytes::from(eventstream::event(kind, v.to_string().as_bytes()));
        let mut frames = vec![ev("messageStart", json!({"role": "assistant"}))];
        let text = self.bedrock_text();
        for p in pieces(&text, self.chunks)
            .into_iter()
            .filter(|p| !p.is_empty())
        {
            frames.push(ev(
                "contentBlockDelta",
                json!({"contentBlockIndex": 0, "delta": {"text": p}}),
            ));
        }
        frames.push(ev("contentBlockStop", json!({"contentBlockIndex": 0})));
        if let Some(t) = &self.tool {
            frames.push(ev(
                "contentBlockStart",
                json!({"contentBlockIndex": 1, "start": {"toolUse": {
                    "toolUseId": self.tool_use_id(), "name": t.name,
                }}}),
            ));
            for p in split(&t.arguments, self.chunks) {
                frames.push(ev(
                    "contentBlockDelta",
                    json!({"contentBlockIndex": 1, "delta": {"toolUse": {"input": p}}}),
                ));
            }
            frames.push(ev("contentBlockStop", json!({"contentBlockIndex": 1})));
        }
        frames.push(ev(
            "messageStop",
            json!({"stopReason": self.bedrock_stop()}),
        ));
        frames.push(ev(
            "metadata",
            json!({"usage": self.bedrock_usage(), "metrics": {"latencyMs": 1}}),
        ));
        frames
    }
}

/// A prompt the mock's content filter stops, as Bedrock's image models' filters would.
const FILTERED_WORD: &str = "forbidden";

/// The mock's `index`th image for `prompt`, base64-encoded.
fn drawn(prompt: &str, index: u32) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(super::media::image_png(prompt, index))
}

fn answer_json(v: &Value) -> Response<MockBody> {
    json(StatusCode::OK, Bytes::from(v.to_string()))
}

fn invalid(message: &str) -> Response<MockBody> {
    error(StatusCode::BAD_REQUEST, message)
}

/// Titan Image Generator and Nova Canvas: a `TEXT_IMAGE` task, 1 to 5 images.
fn titan_image(v: &Value) -> Response<MockBody> {
    if v["taskType"] != "TEXT_IMAGE" {
        return invalid("Malformed input request: taskType must be TEXT_IMAGE");
    }
    let Some(prompt) = v
        .pointer("/textToImageParams/text")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
    else {
        return invalid(
            "Malformed input request: #/textToImageParams: required key [text] not found",
        );
    };
    let config = &v["imageGenerationConfig"];
    let n = config["numberOfImages"].as_u64().unwrap_or(1);
    if !(1..=5).contains(&n) {
        return invalid("Malformed input request: #/imageGenerationConfig/numberOfImages: must be between 1 and 5");
    }
    if config.get("width").is_some() != config.get("height").is_some() {
        return invalid("Malformed input request: width and height must be given together");
    }
    if !matches!(
        config.get("quality").and_then(Value::as_str),
        None | Some("standard" | "premium")
    ) {
        return invalid(
            "Malformed input request: #/imageGenerationConfig/quality: standard or premium",
        );
    }
    if prompt.contains(FILTERED_WORD) {
        return invalid("This request has been blocked by our content filters.");
    }
    let images: Vec<String> = (0..n as u32).map(|i| drawn(prompt, i)).collect();
    answer_json(&json!({"images": images, "error": null}))
}

/// SD3 and Stable Image: a `prompt`, one image, a filter reason per image.
fn stability_image(v: &Value) -> Response<MockBody> {
    const KEYS: [&str; 8] = [
        "prompt",
        "aspect_ratio",
        "mode",
        "output_format",
        "seed",
        "negative_prompt",
        "image",
        "strength",
    ];
    let Some(body) = v.as_object() else {
        return invalid("Malformed input request");
    };
    if let Some(k) = body.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return invalid(&format!(
            "Malformed input request: extraneous key [{k}] is not permitted"
        ));
    }
    let Some(prompt) = v["prompt"].as_str().filter(|p| !p.is_empty()) else {
        return invalid("Malformed input request: required key [prompt] not found");
    };
    if let Some(r) = body.get("aspect_ratio") {
        if !r.as_str().is_some_and(|r| STABILITY_RATIOS.contains(&r)) {
            return invalid("Malformed input request: #/aspect_ratio is not a permitted value");
        }
    }
    let seed = v["seed"].as_u64().unwrap_or(0);
    let answer = if prompt.contains(FILTERED_WORD) {
        json!({"seeds": [seed], "finish_reasons": ["Filter reason: prompt"], "images": [null]})
    } else {
        json!({"seeds": [seed], "finish_reasons": [null], "images": [drawn(prompt, 0)]})
    };
    answer_json(&answer)
}

/// Stable Diffusion XL: `text_prompts`, one of its sizes, `artifacts` back.
fn sdxl_image(v: &Value) -> Response<MockBody> {
    let Some(prompt) = v
        .pointer("/text_prompts/0/text")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
    else {
        return invalid("Malformed input request: text_prompts: a text prompt is required");
    };
    let side = |k: &str| v[k].as_u64().map_or(Some(1024), |n| u32::try_from(n).ok());
    let size = side("width").zip(side("height"));
    if !size.is_some_and(|s| SDXL_SIZES.contains(&s)) {
        return invalid("Malformed input request: invalid height and width for SDXL v1.0");
    }
    let seed = v["seed"].as_u64().unwrap_or(0);
    let (image, reason) = if prompt.contains(FILTERED_WORD) {
        (String::new(), "CONTENT_FILTERED")
    } else {
        (drawn(prompt, 0), "SUCCESS")
    };
    answer_json(&json!({
        "result": "success",
        "artifacts": [{"seed": seed, "base64": image, "finishReason": reason}],
    }))
}

/// InvokeModel on a Claude model: Anthropic's Messages body (with Bedrock's
/// `anthropic_version`, no `model`), answered as Anthropic answers it; streamed, each event
/// a `chunk`, the last carrying Bedrock's own count.
fn invoke_claude(
    model: &str,
    body: &[u8],
    stream: bool,
    s: &MockSettings,
    prompt_tokens: u64,
) -> Response<MockBody> {
    #[derive(Deserialize)]
    struct Probe<'a> {
        #[serde(borrow, default)]
        tools: Option<&'a serde_json::value::RawValue>,
    }
    // Offered tools are called (or a scripted answer given) as on Anthropic's own API.
    let turn = serde_json::from_slice::<Probe<'_>>(body)
        .ok()
        .and_then(|p| super::tools::plan(p.tools, body));
    let plan = match turn {
        Some(super::tools::Turn::Call(t)) => super::plan(s, model, Some(t), prompt_tokens, true),
        Some(super::tools::Turn::Say(words)) => {
            let said = MockSettings {
                response: Some(words),
                ..s.clone()
            };
            super::plan(&said, model, None, prompt_tokens, true)
        }
        None => super::plan(s, model, None, prompt_tokens, true),
    };
    if !stream {
        return json(StatusCode::OK, plan.message());
    }
    let events = plan.message_events();
    let last = events.len().saturating_sub(1);
    let frames = events
        .into_iter()
        .enumerate()
        .map(|(i, (_, mut v))| {
            if i == last {
                v["amazon-bedrock-invocationMetrics"] = json!({
                    "inputTokenCount": plan.prompt_tokens,
                    "outputTokenCount": plan.completion_tokens,
                    "invocationLatency": 1,
                    "firstByteLatency": 1,
                });
            }
            Bytes::from(eventstream::chunk(v.to_string().as_bytes()))
        })
        .collect();
    super::stream(frames, s, "application/vnd.amazon.eventstream")
}

/// Whether an InvokeModel body is Anthropic's Messages (Claude on Bedrock).
fn is_claude_body(v: &Value) -> bool {
    v.get("anthropic_version").is_some() || v.get("messages").is_some()
}

/// `InvokeModel` (and its stream): Claude's Messages bodies, an image model's body, else Titan
/// (`inputText`) and Cohere (`texts`) embedding bodies.
fn invoke(
    model: &str,
    body: &[u8],
    stream: bool,
    s: &MockSettings,
    prompt_tokens: u64,
) -> Response<MockBody> {
    let Ok(v) = serde_json::from_slice::<Value>(body) else {
        return error(StatusCode::BAD_REQUEST, "Malformed input request");
    };
    if is_claude_body(&v) {
        // Bedrock's own rules for a Claude body: an API version, and no `model` or `stream`
        // (the URL carries both).
        if !v["anthropic_version"].is_string() {
            return invalid("Malformed input request: #: required key [anthropic_version] not found or invalid, please reformat your input and try again.");
        }
        for key in ["model", "stream"] {
            if v.get(key).is_some() {
                return invalid(&format!("Malformed input request: #: extraneous key [{key}] is not permitted, please reformat your input and try again."));
            }
        }
        return invoke_claude(model, body, stream, s, prompt_tokens);
    }
    if stream {
        return error(
            StatusCode::BAD_REQUEST,
            &format!("The mock streams InvokeModel for Claude bodies only, not for {model}"),
        );
    }
    let bare = model.rsplit('/').next().unwrap_or(model);
    if bare.contains("amazon.titan-image") || bare.contains("amazon.nova-canvas") {
        return titan_image(&v);
    }
    if bare.contains("stability.stable-diffusion-xl") {
        return sdxl_image(&v);
    }
    if bare.contains("stability.") {
        return stability_image(&v);
    }
    if let Some(text) = v["inputText"].as_str() {
        let dims = v["dimensions"]
            .as_u64()
            .map_or(s.embedding_dims, |d| d as u32);
        let out = json!({
            "embedding": vector(text, dims.max(1)),
            "inputTextTokenCount": (text.len() as u64).div_ceil(4).max(1),
        });
        return json(StatusCode::OK, Bytes::from(out.to_string()));
    }
    if let Some(texts) = v["texts"].as_array() {
        let embeddings: Vec<Value> = texts
            .iter()
            .map(|t| json!(vector(t.as_str().unwrap_or_default(), s.embedding_dims)))
            .collect();
        let out = json!({"id": "mock", "embeddings": embeddings, "texts": texts});
        return json(StatusCode::OK, Bytes::from(out.to_string()));
    }
    error(
        StatusCode::BAD_REQUEST,
        &format!(
            "The mock cannot invoke {model}: send a Claude, Titan or Cohere embedding body, or \
             name an image model"
        ),
    )
}

/// Answer one Bedrock call (signature, faults and latency already handled).
pub(super) fn answer(
    model: &str,
    op: Op,
    body: &Bytes,
    s: &MockSettings,
    prompt_tokens: u64,
) -> Response<MockBody> {
    if matches!(op, Op::Invoke | Op::InvokeStream) {
        return invoke(model, body, op == Op::InvokeStream, s, prompt_tokens);
    }
    let tool = match tool_plan(body) {
        Ok(t) => t,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                &format!("Malformed input request: {e}"),
            )
        }
    };
    let plan = super::plan(s, model, tool, prompt_tokens, true);
    match op {
        Op::Stream => super::stream(
            plan.converse_stream(),
            s,
            "application/vnd.amazon.eventstream",
        ),
        Op::Converse | Op::Invoke | Op::InvokeStream => json(StatusCode::OK, plan.converse()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_decode_model_ids() {
        assert_eq!(
            route("/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse-stream"),
            Some((
                "anthropic.claude-3-5-sonnet-20240620-v1:0".to_owned(),
                Op::Stream
            ))
        );
        assert_eq!(route("/model/x/other"), None);
        assert_eq!(
            route("/model/x/invoke-with-response-stream"),
            Some(("x".to_owned(), Op::InvokeStream))
        );
        assert_eq!(sigv4::uri_decode("a%2Fb%3"), "a/b%3");
    }

    async fn invoked(model: &str, body: Value) -> (u16, Value) {
        let resp = invoke(
            model,
            body.to_string().as_bytes(),
            false,
            &MockSettings::default(),
            1,
        );
        let status = resp.status().as_u16();
        let bytes = http_body_util::BodyExt::collect(resp.into_body())
            .await
            .unwrap()
            .to_bytes();
        (status, serde_json::from_slice(&bytes).unwrap())
    }

    #[tokio::test]
    async fn image_models_answer_in_their_shapes() {
        let (s, v) = invoked(
            "amazon.titan-image-generator-v2:0",
            json!({"taskType": "TEXT_IMAGE", "textToImageParams": {"text": "a fox"},
                   "imageGenerationConfig": {"numberOfImages": 2}}),
        )
        .await;
        assert_eq!(s, 200, "{v}");
        assert_eq!(v["images"][1], drawn("a fox", 1));
        assert_ne!(v["images"][0], v["images"][1]);
        let (s, _) = invoked(
            "amazon.nova-canvas-v1:0",
            json!({"taskType": "TEXT_IMAGE", "textToImageParams": {"text": "a fox"},
                   "imageGenerationConfig": {"numberOfImages": 6}}),
        )
        .await;
        assert_eq!(s, 400);
        let (s, v) = invoked(
            "stability.sd3-5-large-v1:0",
            json!({"prompt": "a fox", "aspect_ratio": "16:9"}),
        )
        .await;
        assert_eq!((s, &v["images"][0]), (200, &json!(drawn("a fox", 0))));
        let (s, v) = invoked(
            "stability.stable-image-core-v1:1",
            json!({"prompt": "a fox", "n": 2}),
        )
        .await;
        assert_eq!(s, 400);
        assert!(v["message"].as_str().unwrap().contains("[n]"));
        let (_, v) = invoked(
            "stability.sd3-large-v1:0",
            json!({"prompt": "forbidden fox"}),
        )
        .await;
        assert_eq!(v["finish_reasons"][0], "Filter reason: prompt");
        let (s, v) = invoked(
            "stability.stable-diffusion-xl-v1",
            json!({"text_prompts": [{"text": "a fox", "weight": 1.0}], "width": 1344, "height": 768}),
        ).await;
        assert_eq!(
            (s, &v["artifacts"][0]["finishReason"]),
            (200, &json!("SUCCESS"))
        );
        let (s, _) = invoked(
            "stability.stable-diffusion-xl-v1",
            json!({"text_prompts": [{"text": "a fox"}], "width": 1792, "height": 1024}),
        )
        .await;
        assert_eq!(s, 400);
    }

    #[tokio::test]
    async fn claude_invoke_streams_chunks_with_bedrocks_count_last() {
        use http_body_util::BodyExt;
        let body = Bytes::from_static(
            br#"{"anthropic_version":"bedrock-2023-05-31","max_tokens":9,"messages":[{"role":"user","content":"hi"}]}"#,
        );
        let s = MockSettings::default();
        let resp = answer("anthropic.claude-x", Op::InvokeStream, &body, &s, 7);
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        let mut d = eventstream::Decoder::default();
        d.push(&bytes);
        let mut events = Vec::new();
        let mut buf = Vec::new();
        while let Some(m) = d.next_message().unwrap() {
            assert_eq!(m.header(":event-type"), Some("chunk"));
            assert!(eventstream::chunk_bytes(&m.payload, &mut buf));
            events.push(serde_json::from_slice::<Value>(&buf).unwrap());
        }
        assert_eq!(events[0]["type"], "message_start");
        let last = events.last().unwrap();
        assert_eq!(last["type"], "message_stop");
        let metrics = &last["amazon-bedrock-invocationMetrics"];
        assert_eq!(metrics["inputTokenCount"], 7);
        let delta = events
            .iter()
            .find(|e| e["type"] == "message_delta")
            .unwrap();
        assert_eq!(metrics["outputTokenCount"], delta["usage"]["output_tokens"]);
        // Not streamed: Anthropic's message.
        let resp = answer("anthropic.claude-x", Op::Invoke, &body, &s, 7);
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        let v: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            (v["type"].as_str(), v["usage"]["input_tokens"].as_u64()),
            (Some("message"), Some(7))
        );
    }

    #[test]
    fn tool_config_and_results() {
        let body = br#"{"messages":[{"role":"user","content":[{"text":"hi"}]}],"toolConfig":{"tools":[{"toolSpec":{"name":"a","inputSchema":{"json":{"type":"object","properties":{"q":{"type":"string"}}}}}}]}}"#;
        let p = tool_plan(body).unwrap().unwrap();
        assert_eq!(
            (p.name.as_str(), p.arguments.as_str()),
            ("a", r#"{"q":"mock q"}"#)
        );
        let body = br#"{"messages":[{"role":"user","content":[{"toolResult":{"toolUseId":"t","content":[{"text":"ok"}]}}]}],"toolConfig":{"tools":[{"toolSpec":{"name":"a"}}]}}"#;
        assert_eq!(tool_plan(body).unwrap(), None);
        assert_eq!(tool_plan(br#"{"messages":[]}"#).unwrap(), None);
    }
}
