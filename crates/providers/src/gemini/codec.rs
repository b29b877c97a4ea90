//! Google AI Studio's `generateContent` ⇄ the internal representation: requests written,
//! answers and `streamGenerateContent?alt=sse` chunks read, Google's error bodies read.
//!
//! Gemini has no tool-call ids: an answer's calls get stable synthesised ids
//! (`call_<n>_<name>`), and a tool result finds its function's name through the call it
//! answers (by id, in the conversation), or, failing that, from a synthesised id itself.
//! Those ids, and the thought signatures they carry, are `sluice_translate::gemini`'s, which
//! the Gemini client dialect shares.
//! Gemini cannot fetch arbitrary image URLs and sluice does no I/O while translating: `gs://`
//! URIs become `fileData`, inline bytes `inlineData`, any other URL is refused (400 naming
//! the part) or, with `drop_params`, left out.

use serde::Deserialize;
use serde_json::{json, Map, Value};

use sluice_core::usage::Usage;
use sluice_translate::gemini::{call_id, parse_call_id, signature_of};
use sluice_translate::ir::{
    ChatRequest, ChatResponse, ImageSource, Part, Role, StopReason, StreamEvent, ToolCall,
    ToolChoice,
};
use sluice_translate::params::Setting;
use sluice_translate::stream::SseRead;
use sluice_translate::{
    name_for_call, now, to_json, tool_input, tool_names, Codec, Params, TranslateError,
};

/// Gemini's `generateContent` as an upstream chat format (Google AI Studio and Vertex AI).
#[derive(Debug, Clone, Copy, Default)]
pub struct GenerateContent;

impl Codec for GenerateContent {
    type Reader = ChunkReader;

    fn write_request(
        &self,
        req: &ChatRequest,
        params: &mut Params,
    ) -> Result<Vec<u8>, TranslateError> {
        write_request(req, params)
    }

    fn parse_response(&self, body: &[u8]) -> Result<ChatResponse, TranslateError> {
        parse_response(body)
    }

    fn reader(&self, _id: &str, _model: &str) -> ChunkReader {
        ChunkReader::default()
    }

    fn parse_error(&self, body: &[u8]) -> Option<(String, String)> {
        parse_error(body)
    }
}

// ---------------------------------------------------------------------------------------------
// Requests

/// Write a `generateContent` request body (the model and the stream mode are in the URL).
/// Gemini has no inline cache markers and no end-user field: hints.
pub fn write_request(req: &ChatRequest, params: &mut Params) -> Result<Vec<u8>, TranslateError> {
    if req.has_cache_control() {
        params.hint_setting(Setting::CacheControl);
    }
    if req.user.is_some() {
        params.hint_setting(Setting::User);
    }
    let mut body = Map::new();
    let names = tool_names(req);
    let mut contents: Vec<Value> = Vec::with_capacity(req.messages.len());
    for (i, m) in req.messages.iter().enumerate() {
        let mut parts = Vec::with_capacity(m.content.len());
        for (j, p) in m.content.iter().enumerate() {
            if let Some(v) = write_part(p, &names, params, i, j)? {
                parts.push(v);
            }
        }
        if parts.is_empty() {
            continue;
        }
        let role = match m.role {
            Role::User => "user",
            Role::Assistant => "model",
        };
        // Gemini wants alternating turns: merge consecutive ones of one role.
        if let Some(prev) = contents.last_mut().filter(|c| c["role"] == role) {
            if let Some(Value::Array(a)) = prev.get_mut("parts") {
                a.extend(parts);
                continue;
            }
        }
        contents.push(json!({"role": role, "parts": parts}));
    }
    body.insert("contents".into(), Value::Array(contents));
    if !req.system.is_empty() {
        let parts: Vec<Value> = req.system.iter().map(|t| json!({"text": t.text})).collect();
        body.insert("systemInstruction".into(), json!({ "parts": parts }));
    }
    if !req.tools.is_empty() {
        let decls: Vec<Value> = req
            .tools
            .iter()
            .map(|t| {
                let mut d = json!({"name": t.name, "parametersJsonSchema": t.parameters});
                if let Some(desc) = &t.description {
                    d["description"] = desc.clone().into();
                }
                d
            })
            .collect();
        body.insert("tools".into(), json!([{ "functionDeclarations": decls }]));
        if let Some(c) = &req.tool_choice {
            let config = match c {
                ToolChoice::Auto => json!({"mode": "AUTO"}),
                ToolChoice::Any => json!({"mode": "ANY"}),
                ToolChoice::None => json!({"mode": "NONE"}),
                ToolChoice::Tool(name) => json!({"mode": "ANY", "allowedFunctionNames": [name]}),
            };
            body.insert(
                "toolConfig".into(),
                json!({ "functionCallingConfig": config }),
            );
        }
    }
    let mut config = Map::new();
    if let Some(t) = req.temperature {
        config.insert("temperature".into(), t.into());
    }
    if let Some(p) = req.top_p {
        config.insert("topP".into(), p.into());
    }
    if let Some(k) = req.top_k {
        config.insert("topK".into(), k.into());
    }
    if let Some(n) = req.max_tokens {
        config.insert("maxOutputTokens".into(), n.into());
    }
    if !req.stop.is_empty() {
        config.insert("stopSequences".into(), req.stop.clone().into());
    }
    if let Some(f) = &req.response_format {
        config.insert("responseMimeType".into(), "application/json".into());
        if let Some(schema) = f.schema() {
            config.insert("responseJsonSchema".into(), schema.clone());
        }
    }
    if let Some(t) = req.thinking {
        // Effort `none` is a budget of 0 (thinking off where the model allows it).
        let config_value = match t.budget() {
            Some(budget) => json!({"thinkingBudget": budget, "includeThoughts": true}),
            None => json!({"thinkingBudget": 0}),
        };
        config.insert("thinkingConfig".into(), config_value);
    }
    if !config.is_empty() {
        body.insert("generationConfig".into(), Value::Object(config));
    }
    if req.parallel_tool_calls == Some(false) {
        params.meaning_setting(Setting::ParallelToolCalls)?;
    }
    Ok(to_json(&Value::Object(body)))
}

/// The media type of a `gs://` object, from its extension (Gemini requires one).
fn media_type_of(uri: &str) -> &'static str {
    let ext = uri.rsplit('.').next().unwrap_or_default();
    match ext.to_ascii_lowercase().as_str() {
        "png" => "image/png",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "heic" => "image/heic",
        "pdf" => "application/pdf",
        _ => "image/jpeg",
    }
}

/// A tool result's content as Gemini's `functionResponse.response` object: a JSON object the
/// tool returned as is, anything else under `content`.
fn tool_response(content: &[Part], is_error: bool) -> Value {
    let text: String = content
        .iter()
        .filter_map(|p| match p {
            Part::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect();
    let key = if is_error { "error" } else { "content" };
    match serde_json::from_str::<Value>(&text) {
        Ok(v @ Value::Object(_)) if !is_error => v,
        _ => json!({ key: text }),
    }
}

fn write_part(
    p: &Part,
    names: &[(&str, &str)],
    params: &mut Params,
    message: usize,
    part: usize,
) -> Result<Option<Value>, TranslateError> {
    Ok(Some(match p {
        Part::Text(t) => json!({"text": t.text}),
        Part::Image { source, .. } => match source {
            ImageSource::Base64 { media_type, data } => {
                json!({"inlineData": {"mimeType": media_type, "data": data}})
            }
            ImageSource::Url(u) if u.starts_with("gs://") => {
                json!({"fileData": {"mimeType": media_type_of(u), "fileUri": u}})
            }
            ImageSource::Url(_) => {
                let name = Setting::Image.name(params.client());
                params.meaning_or(name, || TranslateError::Invalid {
                    param: "messages",
                    message: format!(
                        "messages[{message}].content[{part}]: Gemini cannot fetch image URLs; \
                         send the image inline (a data: URL) or as a gs:// URI"
                    ),
                })?;
                return Ok(None);
            }
        },
        Part::ToolCall(c) => {
            let mut part =
                json!({"functionCall": {"name": c.name, "args": tool_input(&c.arguments)}});
            // Gemini 3 refuses a function call of its own sent back without its signature.
            if let Some(signature) = signature_of(&c.id) {
                part["thoughtSignature"] = signature.into();
            }
            part
        }
        Part::ToolResult {
            id,
            content,
            is_error,
            ..
        } => {
            let name = name_for_call(names, id, parse_call_id);
            json!({"functionResponse": {"name": name, "response": tool_response(content, *is_error)}})
        }
        // Gemini's thoughts cannot be sent back (its function calls' signatures are, above).
        Part::Thinking { .. } | Part::RedactedThinking(_) => return Ok(None),
    }))
}

// ---------------------------------------------------------------------------------------------
// Answers

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawResponse {
    #[serde(default)]
    candidates: Vec<RawCandidate>,
    #[serde(default)]
    prompt_feedback: Option<RawFeedback>,
    #[serde(default)]
    usage_metadata: Option<RawUsage>,
    #[serde(default)]
    model_version: Option<String>,
    #[serde(default)]
    response_id: Option<String>,
    /// An error Google reports inside a stream.
    #[serde(default)]
    error: Option<RawError>,
}

#[derive(Deserialize)]
struct RawError {
    #[serde(default)]
    message: String,
    #[serde(default)]
    status: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawCandidate {
    #[serde(default)]
    content: Option<RawContent>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct RawContent {
    #[serde(default)]
    parts: Vec<RawPart>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawPart {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    thought: bool,
    #[serde(default)]
    function_call: Option<RawCall>,
    /// Gemini 3's signature of the reasoning behind a part (sent back with a function call).
    #[serde(default)]
    thought_signature: Option<String>,
}

#[derive(Deserialize)]
struct RawCall {
    name: String,
    #[serde(default)]
    args: Value,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawFeedback {
    #[serde(default)]
    block_reason: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RawUsage {
    #[serde(default)]
    prompt_token_count: u64,
    #[serde(default)]
    candidates_token_count: u64,
    #[serde(default)]
    cached_content_token_count: u64,
    #[serde(default)]
    thoughts_token_count: u64,
}

impl From<RawUsage> for Usage {
    /// `promptTokenCount` includes cached content (as OpenAI's `prompt_tokens` does);
    /// `candidatesTokenCount` excludes thoughts, which OpenAI counts as completion tokens.
    fn from(u: RawUsage) -> Self {
        Usage {
            prompt_tokens: u.prompt_token_count,
            completion_tokens: u.candidates_token_count + u.thoughts_token_count,
            cached_tokens: u.cached_content_token_count,
            cache_creation_tokens: 0,
            reasoning_tokens: u.thoughts_token_count,
            ..Usage::default()
        }
    }
}

/// Gemini's `finishReason`.
fn stop_reason(s: &str) -> StopReason {
    match s {
        "MAX_TOKENS" => StopReason::MaxTokens,
        // Every refusal google-genai's `FinishReason` lists (Model Armor's included).
        "SAFETY"
        | "RECITATION"
        | "LANGUAGE"
        | "BLOCKLIST"
        | "PROHIBITED_CONTENT"
        | "SPII"
        | "IMAGE_SAFETY"
        | "IMAGE_PROHIBITED_CONTENT"
        | "IMAGE_RECITATION"
        | "MODEL_ARMOR" => StopReason::ContentFilter,
        _ => StopReason::EndTurn,
    }
}

fn read_call(n: usize, c: RawCall, signature: Option<&str>) -> ToolCall {
    let arguments = if c.args.is_null() {
        "{}".to_owned()
    } else {
        c.args.to_string()
    };
    ToolCall {
        id: call_id(n, &c.name, signature),
        name: c.name,
        arguments,
    }
}

/// Read a `generateContent` answer. A prompt Gemini blocked (`promptFeedback.blockReason`,
/// no candidates) is an empty answer stopped by the content filter.
pub fn parse_response(body: &[u8]) -> Result<ChatResponse, TranslateError> {
    let raw: RawResponse = serde_json::from_slice(body).map_err(TranslateError::bad_answer)?;
    let mut content = Vec::new();
    let mut calls = 0;
    let mut stop = StopReason::EndTurn;
    if raw
        .prompt_feedback
        .as_ref()
        .is_some_and(|f| f.block_reason.is_some())
    {
        stop = StopReason::ContentFilter;
    }
    if let Some(c) = raw.candidates.into_iter().next() {
        if let Some(f) = &c.finish_reason {
            stop = stop_reason(f);
        }
        for p in c.content.map(|c| c.parts).unwrap_or_default() {
            if let Some(call) = p.function_call {
                let signature = p.thought_signature.as_deref();
                content.push(Part::ToolCall(read_call(calls, call, signature)));
                calls += 1;
            } else if let Some(text) = p.text {
                content.push(if p.thought {
                    Part::Thinking {
                        text,
                        signature: None,
                    }
                } else {
                    Part::Text(sluice_translate::ir::Text::plain(text))
                });
            }
        }
    }
    // Gemini says STOP when it calls functions.
    if calls > 0 && stop == StopReason::EndTurn {
        stop = StopReason::ToolUse;
    }
    Ok(ChatResponse {
        id: raw.response_id.unwrap_or_default(),
        model: raw.model_version.unwrap_or_default(),
        content,
        stop,
        stop_sequence: None,
        usage: raw.usage_metadata.map(Usage::from).unwrap_or_default(),
        created: now(),
    })
}

// ---------------------------------------------------------------------------------------------
// Streams

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Block {
    Text,
    Thinking,
}

/// Turns `streamGenerateContent?alt=sse` chunks into stream events. Each chunk carries new
/// text (or a whole function call); Gemini has no end marker, so the stream's proper end is
/// a chunk with a `finishReason` followed by the end of the body.
#[derive(Debug, Default)]
pub struct ChunkReader {
    started: bool,
    open: Option<(usize, Block)>,
    next_block: usize,
    calls: usize,
    finished: bool,
    failed: bool,
}

impl SseRead for ChunkReader {
    /// Read one SSE `data:` payload.
    fn read_data(&mut self, data: &[u8], out: &mut Vec<StreamEvent>) {
        let Ok(chunk) = serde_json::from_slice::<RawResponse>(data) else {
            return;
        };
        if let Some(e) = chunk.error {
            self.close(out);
            // The stream is over; `end` adds nothing after this.
            self.failed = true;
            out.push(StreamEvent::Error {
                kind: anthropic_kind(&e.status).to_owned(),
                message: e.message,
            });
            return;
        }
        if !self.started {
            self.started = true;
            out.push(StreamEvent::Start {
                id: chunk.response_id.clone().unwrap_or_default(),
                model: chunk.model_version.clone().unwrap_or_default(),
                usage: Usage::default(),
            });
        }
        let blocked = chunk
            .prompt_feedback
            .as_ref()
            .is_some_and(|f| f.block_reason.is_some());
        let mut finish = blocked.then_some(StopReason::ContentFilter);
        if let Some(c) = chunk.candidates.into_iter().next() {
            for p in c.content.map(|c| c.parts).unwrap_or_default() {
                self.part(p, out);
            }
            if let Some(f) = &c.finish_reason {
                finish = Some(stop_reason(f));
            }
        }
        if let Some(u) = chunk.usage_metadata {
            out.push(StreamEvent::Usage(u.into()));
        }
        if let Some(mut reason) = finish.filter(|_| !self.finished) {
            self.close(out);
            if self.calls > 0 && reason == StopReason::EndTurn {
                reason = StopReason::ToolUse;
            }
            self.finished = true;
            out.push(StreamEvent::Stop {
                reason,
                stop_sequence: None,
            });
        }
    }

    /// At the end of the body: the stream's end, or an error when Gemini never finished.
    fn end(&mut self, out: &mut Vec<StreamEvent>) {
        if self.failed {
            return;
        }
        if self.finished {
            out.push(StreamEvent::Done);
        } else {
            self.close(out);
            out.push(StreamEvent::Error {
                kind: "api_error".into(),
                message: "the upstream stream ended before its finish reason".into(),
            });
        }
    }
}

impl ChunkReader {
    fn close(&mut self, out: &mut Vec<StreamEvent>) {
        if let Some((index, _)) = self.open.take() {
            out.push(StreamEvent::BlockStop { index });
        }
    }

    fn open(&mut self, kind: Block, out: &mut Vec<StreamEvent>) -> usize {
        if let Some((i, k)) = self.open {
            if k == kind {
                return i;
            }
        }
        self.close(out);
        let i = self.next_block;
        self.next_block += 1;
        self.open = Some((i, kind));
        i
    }

    fn part(&mut self, p: RawPart, out: &mut Vec<StreamEvent>) {
        if let Some(call) = p.function_call {
            self.close(out);
            let index = self.next_block;
            self.next_block += 1;
            let call = read_call(self.calls, call, p.thought_signature.as_deref());
            self.calls += 1;
            out.push(StreamEvent::ToolStart {
                index,
                id: call.id,
                name: call.name,
            });
            out.push(StreamEvent::ToolArgs {
                index,
                json: call.arguments,
            });
            out.push(StreamEvent::BlockStop { index });
            return;
        }
        let Some(text) = p.text.filter(|t| !t.is_empty()) else {
            return;
        };
        if p.thought {
            let index = self.open(Block::Thinking, out);
            out.push(StreamEvent::Thinking { index, text });
        } else {
            let index = self.open(Block::Text, out);
            out.push(StreamEvent::Text { index, text });
        }
    }
}

/// Anthropic's error type (which both client formats understand) for a Google status.
fn anthropic_kind(status: &str) -> &'static str {
    match status {
        "RESOURCE_EXHAUSTED" => "rate_limit_error",
        "UNAVAILABLE" => "overloaded_error",
        "INVALID_ARGUMENT" | "FAILED_PRECONDITION" | "OUT_OF_RANGE" => "invalid_request_error",
        "PERMISSION_DENIED" => "permission_error",
        "UNAUTHENTICATED" => "authentication_error",
        "NOT_FOUND" => "not_found_error",
        _ => "api_error",
    }
}

/// Google's error body `{"error": {"code", "message", "status"}}`: its status
/// (`RESOURCE_EXHAUSTED`, ...) and message.
pub fn parse_error(body: &[u8]) -> Option<(String, String)> {
    #[derive(Deserialize)]
    struct Raw {
        error: Inner,
    }
    #[derive(Deserialize)]
    struct Inner {
        #[serde(default)]
        message: String,
        #[serde(default)]
        status: String,
    }
    // Google sometimes wraps the error in a one-element array (which serde would otherwise
    // read as the struct's fields in order).
    let wrapped = body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[');
    let raw = if wrapped {
        serde_json::from_slice::<Vec<Raw>>(body)
            .ok()?
            .into_iter()
            .next()?
    } else {
        serde_json::from_slice::<Raw>(body).ok()?
    };
    Some((raw.error.status, raw.error.message))
}
