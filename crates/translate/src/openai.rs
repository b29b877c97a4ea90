//! OpenAI Chat Completions ⇄ the internal representation: requests, answers and stream chunks.
//! Used only when client and provider formats differ; OpenAI-to-OpenAI traffic never comes here.

use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::ir::{
    ChatRequest, ChatResponse, Effort, ImageSource, Message, Part, ResponseFormat, Role,
    StopReason, StreamEvent, Text, Thinking, Tool, ToolCall, ToolChoice,
};
use super::params::{openai_key, unknown_block_types, Setting};
use super::{now, to_json, Params, TranslateError};
use crate::stream::SseRead;
use sluice_core::rules::OutputCap;
use sluice_core::usage::Usage;

// ---------------------------------------------------------------------------------------------
// Requests

#[derive(Deserialize)]
struct RawRequest {
    model: String,
    #[serde(default)]
    messages: Vec<RawMessage>,
    #[serde(default)]
    max_tokens: Option<u64>,
    #[serde(default)]
    max_completion_tokens: Option<u64>,
    #[serde(default)]
    temperature: Option<f64>,
    #[serde(default)]
    top_p: Option<f64>,
    #[serde(default)]
    stop: Option<Stop>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    tools: Vec<RawTool>,
    #[serde(default)]
    tool_choice: Option<Value>,
    #[serde(default)]
    parallel_tool_calls: Option<bool>,
    #[serde(default)]
    user: Option<String>,
    #[serde(default)]
    reasoning_effort: Option<String>,
    #[serde(default)]
    n: Option<u64>,
    #[serde(default)]
    response_format: Option<RawResponseFormat>,
    /// Everything else: each key is checked against what the provider can take.
    #[serde(flatten)]
    rest: Map<String, Value>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum RawResponseFormat {
    Text,
    JsonObject,
    JsonSchema { json_schema: RawJsonSchema },
}

#[derive(Deserialize)]
struct RawJsonSchema {
    #[serde(default)]
    name: String,
    #[serde(default)]
    schema: Value,
    #[serde(default)]
    strict: Option<bool>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Stop {
    One(String),
    Many(Vec<String>),
}

#[derive(Deserialize)]
struct RawMessage {
    role: String,
    #[serde(default)]
    content: Option<Content>,
    #[serde(default)]
    tool_calls: Vec<RawToolCall>,
    #[serde(default)]
    tool_call_id: Option<String>,
    /// LiteLLM's spelling for an assistant turn's reasoning.
    #[serde(default)]
    reasoning_content: Option<String>,
    /// LiteLLM's spelling for Anthropic thinking blocks with their signatures.
    #[serde(default)]
    thinking_blocks: Vec<RawThinkingBlock>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Parts(Vec<RawPart>),
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum RawPart {
    Text {
        text: String,
        #[serde(default)]
        cache_control: Option<Value>,
    },
    ImageUrl {
        image_url: ImageUrl,
        #[serde(default)]
        cache_control: Option<Value>,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ImageUrl {
    Url(String),
    Object { url: String },
}

#[derive(Deserialize)]
struct RawToolCall {
    id: String,
    function: RawFunction,
}

#[derive(Deserialize)]
struct RawFunction {
    name: String,
    #[serde(default)]
    arguments: String,
}

#[derive(Deserialize)]
struct RawThinkingBlock {
    #[serde(default, rename = "type")]
    kind: String,
    #[serde(default)]
    thinking: String,
    #[serde(default)]
    signature: Option<String>,
    #[serde(default)]
    data: Option<String>,
}

#[derive(Deserialize)]
struct RawTool {
    #[serde(default, rename = "type")]
    kind: Option<String>,
    /// Absent on tools that are not functions (`custom` grammar tools, …).
    #[serde(default)]
    function: Option<RawFunctionDef>,
    #[serde(default)]
    cache_control: Option<Value>,
}

#[derive(Deserialize)]
struct RawFunctionDef {
    name: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    parameters: Option<Value>,
}

/// The content part types the reader translates; any other is named through
/// [`unknown_block_types`].
const PART_TYPES: [&str; 2] = ["text", "image_url"];

/// Read an OpenAI chat request. Keys it does not carry are noted as hints or refused by
/// `params` (see [`openai_key`]).
pub fn parse_request(body: &[u8], params: &mut Params) -> Result<ChatRequest, TranslateError> {
    let mut raw: RawRequest = serde_json::from_slice(body).map_err(TranslateError::bad_request)?;
    for (key, value) in std::mem::take(&mut raw.rest) {
        params.unread(key, &value, openai_key)?;
    }
    if raw.n.is_some_and(|n| n > 1) {
        params.meaning("n")?;
    }
    let thinking = match raw.reasoning_effort.as_deref() {
        None => None,
        Some(e) => match Effort::parse(e) {
            Some(e) => Some(Thinking::Effort(e)),
            None => {
                params.hint("reasoning_effort");
                None
            }
        },
    };
    let mut tools = Vec::with_capacity(raw.tools.len());
    for t in raw.tools {
        let Some(function) = t.function else {
            // A tool the translated targets cannot call: the answer depends on it.
            params.meaning(format!("tools.{}", t.kind.as_deref().unwrap_or("unknown")))?;
            continue;
        };
        tools.push(Tool {
            name: function.name,
            description: function.description,
            parameters: function
                .parameters
                .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
            cache_control: t.cache_control,
        });
    }
    let mut req = ChatRequest {
        model: raw.model,
        max_tokens: raw.max_completion_tokens.or(raw.max_tokens),
        temperature: raw.temperature,
        top_p: raw.top_p,
        stop: match raw.stop {
            None => Vec::new(),
            Some(Stop::One(s)) => vec![s],
            Some(Stop::Many(v)) => v,
        },
        stream: raw.stream.unwrap_or(false),
        parallel_tool_calls: raw.parallel_tool_calls,
        user: raw.user,
        thinking,
        tools,
        tool_choice: raw.tool_choice.map(tool_choice).transpose()?,
        response_format: match raw.response_format {
            None | Some(RawResponseFormat::Text) => None,
            Some(RawResponseFormat::JsonObject) => Some(ResponseFormat::Json),
            Some(RawResponseFormat::JsonSchema { json_schema: s }) => {
                Some(ResponseFormat::Schema {
                    name: s.name,
                    schema: s.schema,
                    strict: s.strict,
                })
            }
        },
        ..ChatRequest::default()
    };
    let mut unknown = false;
    for m in raw.messages {
        read_message(&mut req, m, &mut unknown)?;
    }
    if unknown {
        for kind in unknown_block_types(body, &PART_TYPES) {
            params.meaning(kind)?;
        }
    }
    Ok(req)
}

fn tool_choice(v: Value) -> Result<ToolChoice, TranslateError> {
    match &v {
        Value::String(s) => match s.as_str() {
            "auto" => Ok(ToolChoice::Auto),
            "required" => Ok(ToolChoice::Any),
            "none" => Ok(ToolChoice::None),
            _ => Err(TranslateError::invalid("tool_choice", s)),
        },
        _ => v
            .pointer("/function/name")
            .and_then(Value::as_str)
            .map(|n| ToolChoice::Tool(n.to_owned()))
            .ok_or_else(|| TranslateError::invalid("tool_choice", &v.to_string())),
    }
}

/// The parts of a message's content; parts of other types are left out and flagged in
/// `unknown`.
fn read_parts(content: Option<Content>, unknown: &mut bool) -> Vec<Part> {
    match content {
        None => Vec::new(),
        Some(Content::Text(t)) if t.is_empty() => Vec::new(),
        Some(Content::Text(t)) => vec![Part::Text(Text::plain(t))],
        Some(Content::Parts(parts)) => {
            let mut out = Vec::with_capacity(parts.len());
            for p in parts {
                out.push(match p {
                    RawPart::Text {
                        text,
                        cache_control,
                    } => Part::Text(Text {
                        text,
                        cache_control,
                    }),
                    RawPart::ImageUrl {
                        image_url,
                        cache_control,
                    } => Part::Image {
                        source: ImageSource::from_url(match image_url {
                            ImageUrl::Url(u) | ImageUrl::Object { url: u } => u,
                        }),
                        cache_control,
                    },
                    RawPart::Other => {
                        *unknown = true;
                        continue;
                    }
                });
            }
            out
        }
    }
}

fn read_message(
    req: &mut ChatRequest,
    m: RawMessage,
    unknown: &mut bool,
) -> Result<(), TranslateError> {
    match m.role.as_str() {
        "system" | "developer" => {
            for p in read_parts(m.content, unknown) {
                if let Part::Text(t) = p {
                    req.system.push(t);
                }
            }
        }
        "user" => {
            let parts = read_parts(m.content, unknown);
            req.push_turn(Role::User, parts);
        }
        "assistant" => {
            let mut parts = Vec::new();
            if m.thinking_blocks.is_empty() {
                if let Some(r) = m.reasoning_content.filter(|r| !r.is_empty()) {
                    parts.push(Part::Thinking {
                        text: r,
                        signature: None,
                    });
                }
            }
            for b in m.thinking_blocks {
                parts.push(match (b.kind.as_str(), b.data) {
                    ("redacted_thinking", Some(data)) => Part::RedactedThinking(data),
                    _ => Part::Thinking {
                        text: b.thinking,
                        signature: b.signature,
                    },
                });
            }
            parts.extend(read_parts(m.content, unknown));
            parts.extend(m.tool_calls.into_iter().map(|c| {
                Part::ToolCall(ToolCall {
                    id: c.id,
                    name: c.function.name,
                    arguments: c.function.arguments,
                })
            }));
            req.push_turn(Role::Assistant, parts);
        }
        "tool" | "function" => {
            let id = m.tool_call_id.ok_or_else(|| {
                TranslateError::invalid("messages", "tool message without tool_call_id")
            })?;
            let content = read_parts(m.content, unknown);
            req.push_turn(
                Role::User,
                vec![Part::ToolResult {
                    id,
                    content,
                    is_error: false,
                    cache_control: None,
                }],
            );
        }
        other => {
            return Err(TranslateError::invalid(
                "messages",
                &format!("unknown role `{other}`"),
            ))
        }
    }
    Ok(())
}

/// Write an OpenAI chat request for an OpenAI-compatible upstream. Streams ask for usage.
/// Cache markers and `top_k` have no place in it: hints.
pub fn write_request(req: &ChatRequest, params: &mut Params) -> Result<Vec<u8>, TranslateError> {
    if req.has_cache_control() {
        params.hint_setting(Setting::CacheControl);
    }
    let mut body = Map::new();
    body.insert("model".into(), req.model.clone().into());
    let mut messages = Vec::with_capacity(req.messages.len() + 1);
    if !req.system.is_empty() {
        let text = req
            .system
            .iter()
            .map(|t| t.text.as_str())
            .collect::<Vec<_>>()
            .join("\n\n");
        messages.push(json!({"role": "system", "content": text}));
    }
    for m in &req.messages {
        write_message(m, &mut messages);
    }
    body.insert("messages".into(), Value::Array(messages));
    if let Some(n) = req.max_tokens {
        let field = match params.rules().output_cap {
            OutputCap::MaxTokens => "max_tokens",
            OutputCap::MaxCompletionTokens => "max_completion_tokens",
        };
        body.insert(field.into(), n.into());
    }
    super::insert_sampling(req, &mut body);
    if req.top_k.is_some() {
        params.hint_setting(Setting::TopK);
    }
    if !req.stop.is_empty() {
        body.insert("stop".into(), req.stop.clone().into());
    }
    if req.stream {
        body.insert("stream".into(), true.into());
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    if !req.tools.is_empty() {
        let tools = req
            .tools
            .iter()
            .map(|t| {
                let mut f = json!({"name": t.name, "parameters": t.parameters});
                if let Some(d) = &t.description {
                    f["description"] = d.clone().into();
                }
                json!({"type": "function", "function": f})
            })
            .collect::<Vec<_>>();
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(c) = &req.tool_choice {
        let v = match c {
            ToolChoice::Auto => json!("auto"),
            ToolChoice::Any => json!("required"),
            ToolChoice::None => json!("none"),
            ToolChoice::Tool(name) => json!({"type": "function", "function": {"name": name}}),
        };
        body.insert("tool_choice".into(), v);
    }
    if let Some(p) = req.parallel_tool_calls.filter(|_| !req.tools.is_empty()) {
        body.insert("parallel_tool_calls".into(), p.into());
    }
    if let Some(u) = &req.user {
        body.insert("user".into(), u.clone().into());
    }
    if let Some(effort) = req.thinking.and_then(Thinking::effort) {
        let effort = params.rules().efforts.fit(effort);
        body.insert("reasoning_effort".into(), effort.name().into());
    }
    if let Some(f) = &req.response_format {
        let v = match f {
            ResponseFormat::Json => json!({"type": "json_object"}),
            ResponseFormat::Schema {
                name,
                schema,
                strict,
            } => {
                let mut s = json!({"name": name, "schema": schema});
                if let Some(strict) = strict {
                    s["strict"] = (*strict).into();
                }
                json!({"type": "json_schema", "json_schema": s})
            }
        };
        body.insert("response_format".into(), v);
    }
    Ok(to_json(&Value::Object(body)))
}

fn write_message(m: &Message, out: &mut Vec<Value>) {
    match m.role {
        Role::User => {
            // Tool results become `tool` messages, which must directly follow the assistant
            // turn; the rest of the user turn comes after them.
            let mut rest = Vec::new();
            for p in &m.content {
                match p {
                    Part::ToolResult { id, content, .. } => {
                        let text = content
                            .iter()
                            .filter_map(|c| match c {
                                Part::Text(t) => Some(t.text.as_str()),
                                _ => None,
                            })
                            .collect::<Vec<_>>()
                            .join("\n");
                        out.push(json!({"role": "tool", "tool_call_id": id, "content": text}));
                        rest.extend(
                            content
                                .iter()
                                .filter(|c| matches!(c, Part::Image { .. }))
                                .filter_map(write_part),
                        );
                    }
                    other => rest.extend(write_part(other)),
                }
            }
            if !rest.is_empty() {
                let content = match rest.as_slice() {
                    [one] if one["type"] == "text" => one["text"].clone(),
                    _ => Value::Array(rest),
                };
                out.push(json!({"role": "user", "content": content}));
            }
        }
        Role::Assistant => out.push(assistant_message(&m.content)),
    }
}

/// An assistant turn as OpenAI writes it: the text joined, tool calls apart, and `content`
/// null when only tools are called.
fn assistant_message(parts: &[Part]) -> Value {
    let text: String = parts
        .iter()
        .filter_map(|p| match p {
            Part::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect();
    let calls: Vec<Value> = parts
        .iter()
        .filter_map(|p| match p {
            Part::ToolCall(c) => Some(json!({
                "id": c.id, "type": "function",
                "function": {"name": c.name, "arguments": c.arguments}
            })),
            _ => None,
        })
        .collect();
    let content = if text.is_empty() && !calls.is_empty() {
        Value::Null
    } else {
        text.into()
    };
    let mut msg = json!({"role": "assistant", "content": content});
    if !calls.is_empty() {
        msg["tool_calls"] = Value::Array(calls);
    }
    msg
}

fn write_part(p: &Part) -> Option<Value> {
    match p {
        Part::Text(t) => Some(json!({"type": "text", "text": t.text})),
        Part::Image { source, .. } => {
            Some(json!({"type": "image_url", "image_url": {"url": source.to_url()}}))
        }
        Part::ToolCall(_)
        | Part::ToolResult { .. }
        | Part::Thinking { .. }
        | Part::RedactedThinking(_) => None,
    }
}

// ---------------------------------------------------------------------------------------------
// Answers

#[derive(Deserialize)]
struct RawResponse {
    #[serde(default)]
    id: String,
    #[serde(default)]
    model: String,
    #[serde(default)]
    created: Option<u64>,
    #[serde(default)]
    choices: Vec<RawChoice>,
    #[serde(default)]
    usage: Option<Value>,
}

#[derive(Deserialize)]
struct RawChoice {
    #[serde(default)]
    message: Option<RawMessage>,
    #[serde(default)]
    finish_reason: Option<String>,
}

/// Read an OpenAI chat answer.
pub fn parse_response(body: &[u8]) -> Result<ChatResponse, TranslateError> {
    let raw: RawResponse = serde_json::from_slice(body).map_err(TranslateError::bad_answer)?;
    let choice = raw.choices.into_iter().next();
    let finish = choice
        .as_ref()
        .and_then(|c| c.finish_reason.as_deref())
        .map_or(StopReason::EndTurn, StopReason::from_openai);
    let mut content = Vec::new();
    if let Some(m) = choice.and_then(|c| c.message) {
        if let Some(r) = m.reasoning_content.filter(|r| !r.is_empty()) {
            content.push(Part::Thinking {
                text: r,
                signature: None,
            });
        }
        let mut unknown = false;
        content.extend(read_parts(m.content, &mut unknown));
        if unknown {
            return Err(TranslateError::BadAnswer(
                "content parts other than text and image_url cannot be translated".into(),
            ));
        }
        content.extend(m.tool_calls.into_iter().map(|c| {
            Part::ToolCall(ToolCall {
                id: c.id,
                name: c.function.name,
                arguments: c.function.arguments,
            })
        }));
    }
    Ok(ChatResponse {
        id: raw.id,
        model: raw.model,
        content,
        stop: finish,
        stop_sequence: None,
        usage: raw.usage.as_ref().map(usage_of).unwrap_or_default(),
        created: raw.created.unwrap_or_else(now),
    })
}

fn usage_of(v: &Value) -> Usage {
    sluice_core::usage::usage_from_value(v).unwrap_or_default()
}

pub(crate) fn usage_json(u: &Usage) -> Value {
    json!({
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "total_tokens": u.prompt_tokens + u.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": u.cached_tokens},
        "completion_tokens_details": {"reasoning_tokens": u.reasoning_tokens},
        "cache_read_input_tokens": u.cached_tokens,
        "cache_creation_input_tokens": u.cache_creation_tokens,
    })
}

/// Write an OpenAI chat answer.
pub fn write_response(r: &ChatResponse) -> Vec<u8> {
    let thinking: Vec<Value> = r
        .content
        .iter()
        .filter_map(|p| match p {
            Part::Thinking { text, signature } => {
                Some(json!({"type": "thinking", "thinking": text, "signature": signature}))
            }
            Part::RedactedThinking(data) => {
                Some(json!({"type": "redacted_thinking", "data": data}))
            }
            _ => None,
        })
        .collect();
    let mut message = assistant_message(&r.content);
    if !thinking.is_empty() {
        let reasoning: String = thinking
            .iter()
            .filter_map(|t| t["thinking"].as_str())
            .collect();
        message["reasoning_content"] = reasoning.into();
        message["thinking_blocks"] = Value::Array(thinking);
    }
    to_json(&json!({
        "id": r.id,
        "object": "chat.completion",
        "created": r.created,
        "model": r.model,
        "choices": [{
            "index": 0,
            "message": message,
            "logprobs": null,
            "finish_reason": r.stop.openai(),
        }],
        "usage": usage_json(&r.usage),
    }))
}

// ---------------------------------------------------------------------------------------------
// Streams

/// Turns OpenAI chunks into stream events, numbering content blocks as they appear.
#[derive(Debug, Default)]
pub struct ChunkReader {
    started: bool,
    /// The open block: its number and what it holds.
    open: Option<(usize, Block)>,
    next_block: usize,
    /// Tool calls seen: OpenAI's index, the call's id, its block number.
    tools: Vec<(u64, String, usize)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Block {
    Text,
    Thinking,
    /// The n-th tool call of the answer.
    Tool(usize),
}

#[derive(Deserialize)]
struct RawChunk {
    #[serde(default)]
    id: String,
    #[serde(default)]
    model: String,
    #[serde(default)]
    choices: Vec<RawChunkChoice>,
    #[serde(default)]
    usage: Option<Value>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct RawChunkChoice {
    #[serde(default)]
    delta: Option<RawDelta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct RawDelta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default, alias = "reasoning")]
    reasoning_content: Option<String>,
    #[serde(default)]
    tool_calls: Vec<RawToolDelta>,
}

#[derive(Deserialize)]
struct RawToolDelta {
    #[serde(default)]
    index: u64,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<RawFunctionDelta>,
}

#[derive(Deserialize)]
struct RawFunctionDelta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

impl SseRead for ChunkReader {
    /// Read one SSE `data:` payload.
    fn read_data(&mut self, data: &[u8], out: &mut Vec<StreamEvent>) {
        if data == b"[DONE]" {
            self.close(out);
            out.push(StreamEvent::Done);
            return;
        }
        let Ok(chunk) = serde_json::from_slice::<RawChunk>(data) else {
            return;
        };
        if let Some(e) = chunk.error {
            out.push(StreamEvent::Error {
                kind: e["type"].as_str().unwrap_or("api_error").to_owned(),
                message: e["message"].as_str().unwrap_or_default().to_owned(),
            });
            return;
        }
        if !self.started {
            self.started = true;
            out.push(StreamEvent::Start {
                id: chunk.id,
                model: chunk.model,
                usage: Usage::default(),
            });
        }
        for choice in chunk.choices {
            if let Some(d) = choice.delta {
                self.delta(d, out);
            }
            if let Some(f) = choice.finish_reason {
                self.close(out);
                out.push(StreamEvent::Stop {
                    reason: StopReason::from_openai(&f),
                    stop_sequence: None,
                });
            }
        }
        if let Some(u) = chunk.usage.as_ref().filter(|u| !u.is_null()) {
            out.push(StreamEvent::Usage(usage_of(u)));
        }
    }
}

impl ChunkReader {
    fn close(&mut self, out: &mut Vec<StreamEvent>) {
        if let Some((index, _)) = self.open.take() {
            out.push(StreamEvent::BlockStop { index });
        }
    }

    /// The block for `kind`, opening a new one (and closing the previous) when needed.
    fn block(&mut self, kind: Block, out: &mut Vec<StreamEvent>) -> (usize, bool) {
        match self.open {
            Some((i, k)) if k == kind => (i, false),
            _ => {
                self.close(out);
                let i = self.next_block;
                self.next_block += 1;
                self.open = Some((i, kind));
                (i, true)
            }
        }
    }

    fn delta(&mut self, d: RawDelta, out: &mut Vec<StreamEvent>) {
        if let Some(text) = d.reasoning_content.filter(|t| !t.is_empty()) {
            let (index, _) = self.block(Block::Thinking, out);
            out.push(StreamEvent::Thinking { index, text });
        }
        if let Some(text) = d.content.filter(|t| !t.is_empty()) {
            let (index, _) = self.block(Block::Text, out);
            out.push(StreamEvent::Text { index, text });
        }
        for t in d.tool_calls {
            let f = t.function.unwrap_or(RawFunctionDelta {
                name: None,
                arguments: None,
            });
            // The latest call at this index continues unless a different id starts a new one
            // (some servers repeat the id on every delta; some reuse index 0 for every call).
            let known = self
                .tools
                .iter()
                .rev()
                .find(|(n, _, _)| *n == t.index)
                .filter(|(_, id, _)| t.id.as_ref().is_none_or(|new| new == id))
                .map(|(_, _, block)| *block);
            let index = match known {
                Some(block) => block,
                None => {
                    let (block, _) = self.block(Block::Tool(self.tools.len()), out);
                    let id = t.id.unwrap_or_else(|| format!("call_{block}"));
                    self.tools.push((t.index, id.clone(), block));
                    out.push(StreamEvent::ToolStart {
                        index: block,
                        id,
                        name: f.name.clone().unwrap_or_default(),
                    });
                    block
                }
            };
            if let Some(json) = f.arguments.filter(|a| !a.is_empty()) {
                out.push(StreamEvent::ToolArgs { index, json });
            }
        }
    }
}

/// Writes stream events as OpenAI chunks. Always ends with a usage chunk: the SSE tap reads
/// it and removes it when the client did not ask for it.
#[derive(Debug, Default)]
pub struct ChunkWriter {
    id: String,
    model: String,
    created: u64,
    /// Block number → OpenAI tool-call index.
    tools: Vec<(usize, usize)>,
    usage: Usage,
}

impl ChunkWriter {
    fn chunk(&self, delta: Value, finish: Option<&str>, out: &mut Vec<u8>) {
        let c = json!({
            "id": self.id, "object": "chat.completion.chunk", "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
        });
        super::sse_data(&c, out);
    }

    /// The OpenAI tool-call index of block `index`, if that block is a tool call.
    fn tool(&self, index: usize) -> Option<usize> {
        self.tools
            .iter()
            .find(|(b, _)| *b == index)
            .map(|(_, t)| *t)
    }

    /// Append the chunks for one event to `out`.
    pub fn write(&mut self, ev: StreamEvent, out: &mut Vec<u8>) {
        match ev {
            StreamEvent::Start { id, model, usage } => {
                self.id = id;
                self.model = model;
                self.created = now();
                self.usage = usage;
                self.chunk(json!({"role": "assistant", "content": ""}), None, out);
            }
            StreamEvent::Text { text, .. } => self.chunk(json!({ "content": text }), None, out),
            StreamEvent::Thinking { text, .. } => {
                self.chunk(json!({ "reasoning_content": text }), None, out);
            }
            StreamEvent::Signature { .. } | StreamEvent::BlockStop { .. } => {}
            StreamEvent::ToolStart { index, id, name } => {
                let n = self.tools.len();
                self.tools.push((index, n));
                self.chunk(
                    json!({"tool_calls": [{"index": n, "id": id, "type": "function",
                        "function": {"name": name, "arguments": ""}}]}),
                    None,
                    out,
                );
            }
            StreamEvent::ToolArgs { index, json } => {
                // Arguments of a block that is no client tool call (an Anthropic server tool)
                // have nowhere to go.
                let Some(n) = self.tool(index) else { return };
                self.chunk(
                    json!({"tool_calls": [{"index": n, "function": {"arguments": json}}]}),
                    None,
                    out,
                );
            }
            StreamEvent::Stop { reason, .. } => self.chunk(json!({}), Some(reason.openai()), out),
            StreamEvent::Usage(u) => self.usage = self.usage.merge(u),
            StreamEvent::Done => {
                let c = json!({
                    "id": self.id, "object": "chat.completion.chunk", "created": self.created,
                    "model": self.model, "choices": [], "usage": usage_json(&self.usage),
                });
                super::sse_data(&c, out);
                out.extend_from_slice(b"data: [DONE]\n\n");
            }
            StreamEvent::Error { kind, message } => {
                let body = sluice_core::error::error_body(&message, &kind, None, &kind);
                out.extend_from_slice(b"data: ");
                out.extend_from_slice(&body);
                out.extend_from_slice(b"\n\n");
            }
            StreamEvent::Ping => out.extend_from_slice(b": ping\n\n"),
        }
    }
}

/// The provider's error type and message from an OpenAI-shaped error body.
pub fn parse_error(body: &[u8]) -> Option<(String, String)> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let e = v.get("error")?;
    let message = match e {
        Value::String(s) => s.clone(),
        _ => e["message"].as_str().unwrap_or_default().to_owned(),
    };
    Some((e["type"].as_str().unwrap_or_default().to_owned(), message))
}
