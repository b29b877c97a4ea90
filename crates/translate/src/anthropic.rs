//! Anthropic Messages ⇄ the internal representation: requests, answers and stream events.
//! Used only when client and provider formats differ; Anthropic-to-Anthropic traffic is
//! passed through with the model spliced in.

use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::ir::{
    ChatRequest, ChatResponse, Effort, ImageSource, Message, Part, ResponseFormat, Role,
    StopReason, StreamEvent, Text, Thinking, Tool, ToolCall, ToolChoice,
};
use super::params::{anthropic_key, asks_nothing, unknown_block_types, Setting};
use super::{now, to_json, tool_input, Params, TranslateError};
use crate::stream::SseRead;
use sluice_core::endpoint::Dialect;
use sluice_core::rules::ModelRules;
use sluice_core::usage::{usage_from_value, Usage};

/// `max_tokens` sent when an OpenAI client leaves it out (Anthropic requires it).
pub const DEFAULT_MAX_TOKENS: u64 = 4096;

/// The API version sluice speaks, sent as `anthropic-version`.
pub const API_VERSION: &str = "2023-06-01";

// ---------------------------------------------------------------------------------------------
// Requests

#[derive(Deserialize)]
struct RawRequest {
    model: String,
    #[serde(default)]
    messages: Vec<RawMessage>,
    #[serde(default)]
    system: Option<Content>,
    #[serde(default)]
    max_tokens: Option<u64>,
    #[serde(default)]
    temperature: Option<f64>,
    #[serde(default)]
    top_p: Option<f64>,
    #[serde(default)]
    top_k: Option<u64>,
    #[serde(default)]
    stop_sequences: Vec<String>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    tools: Vec<RawTool>,
    #[serde(default)]
    tool_choice: Option<RawToolChoice>,
    #[serde(default)]
    metadata: Option<RawMetadata>,
    #[serde(default)]
    thinking: Option<RawThinking>,
    #[serde(default)]
    output_config: Option<RawOutputConfig>,
    /// The deprecated spelling of `output_config.format`.
    #[serde(default)]
    output_format: Option<RawJsonFormat>,
    /// Everything else: each key is classified by [`anthropic_key`].
    #[serde(flatten)]
    rest: Map<String, Value>,
}

#[derive(Deserialize)]
struct RawMessage {
    role: String,
    content: Content,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Blocks(Vec<RawBlock>),
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum RawBlock {
    Text {
        text: String,
        #[serde(default)]
        cache_control: Option<Value>,
    },
    Image {
        source: RawSource,
        #[serde(default)]
        cache_control: Option<Value>,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Value,
    },
    ToolResult {
        tool_use_id: String,
        #[serde(default)]
        content: Option<Content>,
        #[serde(default)]
        is_error: bool,
        #[serde(default)]
        cache_control: Option<Value>,
    },
    Thinking {
        #[serde(default)]
        thinking: String,
        #[serde(default)]
        signature: Option<String>,
    },
    RedactedThinking {
        data: String,
    },
    /// System instructions mid-conversation: their text joins the system prompt.
    MidConvSystem {
        #[serde(default)]
        content: Vec<RawBlock>,
    },
    /// A summary of compacted earlier context: kept as text.
    Compaction {
        #[serde(default)]
        content: Option<String>,
    },
    /// Tool search's pointer to a deferred tool (targets get every tool's schema: a hint).
    ToolReference,
    /// A tool offered from this point on (targets get every tool throughout: a hint).
    ToolAddition,
    /// A tool withdrawn from this point on (a hint, as above).
    ToolRemoval,
    #[serde(other)]
    Other,
}

/// The block types the reader translates or drops as hints; any other is named through
/// [`unknown_block_types`].
const BLOCK_TYPES: [&str; 11] = [
    "text",
    "image",
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
    "mid_conv_system",
    "compaction",
    "tool_reference",
    "tool_addition",
    "tool_removal",
];

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum RawSource {
    Base64 { media_type: String, data: String },
    Url { url: String },
}

#[derive(Deserialize)]
struct RawTool {
    name: String,
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    input_schema: Option<Value>,
    #[serde(default)]
    cache_control: Option<Value>,
    /// `defer_loading`, `input_examples`, `strict`, …: hints, noted as `tools.<key>`.
    #[serde(flatten)]
    rest: Map<String, Value>,
}

#[derive(Deserialize)]
struct RawToolChoice {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    disable_parallel_tool_use: Option<bool>,
}

#[derive(Deserialize)]
struct RawMetadata {
    #[serde(default)]
    user_id: Option<String>,
    #[serde(flatten)]
    rest: Map<String, Value>,
}

/// Anthropic's `thinking` (read by `crate::fit` too, for a same-dialect body).
#[derive(Deserialize)]
pub(crate) struct RawThinking {
    #[serde(rename = "type")]
    pub(crate) kind: String,
    #[serde(default)]
    pub(crate) budget_tokens: Option<u64>,
}

/// Anthropic's `output_config` (read by `crate::fit` too).
#[derive(Deserialize)]
pub(crate) struct RawOutputConfig {
    #[serde(default)]
    format: Option<RawJsonFormat>,
    /// How hard the model thinks, with adaptive thinking.
    #[serde(default)]
    pub(crate) effort: Option<String>,
    /// `task_budget`, …: hints, noted as `output_config.<key>`.
    #[serde(flatten)]
    rest: Map<String, Value>,
}

#[derive(Deserialize)]
struct RawJsonFormat {
    #[serde(default)]
    schema: Value,
}

/// What reading a request's content gathers besides its parts.
struct Reading<'p> {
    params: &'p mut Params,
    /// System text found among the messages (`system` turns, `mid_conv_system` blocks).
    system: Vec<Text>,
    /// Blocks of a type sluice cannot translate were met (and left out).
    unknown: bool,
}

/// Read an Anthropic Messages request. Keys and blocks it does not carry are noted as hints
/// or refused by `params` (see [`anthropic_key`]).
pub fn parse_request(body: &[u8], params: &mut Params) -> Result<ChatRequest, TranslateError> {
    let mut raw: RawRequest = serde_json::from_slice(body).map_err(TranslateError::bad_request)?;
    for (key, value) in std::mem::take(&mut raw.rest) {
        params.unread(key, &value, anthropic_key)?;
    }
    let mut tools = Vec::with_capacity(raw.tools.len());
    for t in raw.tools {
        // Server tools (web search, code execution, ...) run at Anthropic only.
        if let Some(kind) = t.kind.as_deref().filter(|k| *k != "custom") {
            params.meaning(format!("tools.{kind}"))?;
            continue;
        }
        for (key, value) in &t.rest {
            if !asks_nothing(value) {
                params.hint(format!("tools.{key}"));
            }
        }
        tools.push(Tool {
            name: t.name,
            description: t.description,
            parameters: t
                .input_schema
                .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
            cache_control: t.cache_control,
        });
    }
    let (tool_choice, parallel) = match raw.tool_choice {
        None => (None, None),
        Some(c) => {
            let choice = match (c.kind.as_str(), c.name) {
                ("auto", _) => ToolChoice::Auto,
                ("any", _) => ToolChoice::Any,
                ("none", _) => ToolChoice::None,
                ("tool", Some(name)) => ToolChoice::Tool(name),
                (other, _) => return Err(TranslateError::invalid("tool_choice", other)),
            };
            (Some(choice), c.disable_parallel_tool_use.map(|d| !d))
        }
    };
    let mut cx = Reading {
        params,
        system: Vec::new(),
        unknown: false,
    };
    if let Some(c) = raw.system {
        let parts = read_content(c, &mut cx)?;
        cx.system.extend(parts.into_iter().filter_map(|p| match p {
            Part::Text(t) => Some(t),
            _ => None,
        }));
    }
    let mut messages = Vec::with_capacity(raw.messages.len());
    for m in raw.messages {
        let role = match m.role.as_str() {
            "user" => Role::User,
            "assistant" => Role::Assistant,
            // A system turn mid-conversation: its text joins the system prompt, as OpenAI's
            // system messages anywhere do.
            "system" => {
                let parts = read_content(m.content, &mut cx)?;
                cx.system.extend(parts.into_iter().filter_map(|p| match p {
                    Part::Text(t) => Some(t),
                    _ => None,
                }));
                continue;
            }
            other => {
                return Err(TranslateError::invalid(
                    "messages",
                    &format!("unknown role `{other}`"),
                ))
            }
        };
        messages.push(Message {
            role,
            content: read_content(m.content, &mut cx)?,
        });
    }
    let Reading {
        params,
        system,
        unknown,
    } = cx;
    if unknown {
        for kind in unknown_block_types(body, &BLOCK_TYPES) {
            params.meaning(kind)?;
        }
    }
    let user = match raw.metadata {
        None => None,
        Some(m) => {
            if m.rest.values().any(|v| !asks_nothing(v)) {
                params.hint("metadata");
            }
            m.user_id
        }
    };
    let (format, effort) = match raw.output_config {
        None => (None, None),
        Some(c) => {
            for (key, value) in &c.rest {
                if !asks_nothing(value) {
                    params.hint(format!("output_config.{key}"));
                }
            }
            let effort = c.effort.as_deref().and_then(|e| {
                let level = Effort::parse(e);
                if level.is_none() {
                    params.hint("output_config.effort");
                }
                level
            });
            (c.format, effort)
        }
    };
    let thinking = match raw.thinking.as_ref().map(|t| t.kind.as_str()) {
        Some("enabled") => Some(Thinking::Budget(
            raw.thinking
                .and_then(|t| t.budget_tokens)
                .unwrap_or(Effort::Medium.budget()),
        )),
        Some("adaptive") => Some(Thinking::Adaptive(effort)),
        Some("disabled") => Some(Thinking::Effort(Effort::None)),
        // Effort alone guides a model that thinks adaptively by default.
        None => effort.map(|e| Thinking::Adaptive(Some(e))),
        Some(_) => {
            params.hint("thinking");
            None
        }
    };
    Ok(ChatRequest {
        model: raw.model,
        system,
        messages,
        max_tokens: raw.max_tokens,
        temperature: raw.temperature,
        top_p: raw.top_p,
        top_k: raw.top_k,
        stop: raw.stop_sequences,
        stream: raw.stream.unwrap_or(false),
        tools,
        tool_choice,
        parallel_tool_calls: parallel,
        user,
        thinking,
        response_format: format
            .or(raw.output_format)
            .map(|f| ResponseFormat::Schema {
                name: "response".into(),
                schema: f.schema,
                strict: Some(true),
            }),
    })
}

/// The parts of a message's (or a tool result's) content. System blocks go to `cx.system`,
/// hint blocks are noted, blocks of other types are left out and flagged in `cx.unknown`.
fn read_content(c: Content, cx: &mut Reading<'_>) -> Result<Vec<Part>, TranslateError> {
    let blocks = match c {
        Content::Text(t) => return Ok(vec![Part::Text(Text::plain(t))]),
        Content::Blocks(b) => b,
    };
    let mut out = Vec::with_capacity(blocks.len());
    for b in blocks {
        out.push(match b {
            RawBlock::Text {
                text,
                cache_control,
            } => Part::Text(Text {
                text,
                cache_control,
            }),
            RawBlock::Image {
                source,
                cache_control,
            } => Part::Image {
                source: match source {
                    RawSource::Url { url } => ImageSource::Url(url),
                    RawSource::Base64 { media_type, data } => {
                        ImageSource::Base64 { media_type, data }
                    }
                },
                cache_control,
            },
            RawBlock::ToolUse { id, name, input } => Part::ToolCall(ToolCall {
                id,
                name,
                arguments: if input.is_null() {
                    "{}".to_owned()
                } else {
                    input.to_string()
                },
            }),
            RawBlock::ToolResult {
                tool_use_id,
                content,
                is_error,
                cache_control,
            } => Part::ToolResult {
                id: tool_use_id,
                content: match content {
                    None => Vec::new(),
                    Some(c) => read_content(c, cx)?,
                },
                is_error,
                cache_control,
            },
            RawBlock::Thinking {
                thinking,
                signature,
            } => Part::Thinking {
                text: thinking,
                signature,
            },
            RawBlock::RedactedThinking { data } => Part::RedactedThinking(data),
            RawBlock::MidConvSystem { content } => {
                let parts = read_content(Content::Blocks(content), cx)?;
                cx.system.extend(parts.into_iter().filter_map(|p| match p {
                    Part::Text(t) => Some(t),
                    _ => None,
                }));
                continue;
            }
            RawBlock::Compaction { content } => match content.filter(|c| !c.is_empty()) {
                Some(summary) => Part::Text(Text::plain(summary)),
                None => continue,
            },
            RawBlock::ToolReference => {
                cx.params.hint("tool_reference");
                continue;
            }
            RawBlock::ToolAddition => {
                cx.params.hint("tool_addition");
                continue;
            }
            RawBlock::ToolRemoval => {
                cx.params.hint("tool_removal");
                continue;
            }
            RawBlock::Other => {
                cx.unknown = true;
                continue;
            }
        });
    }
    Ok(out)
}

/// The API version Anthropic models on Vertex AI take in the body (`anthropic_version`).
pub const VERTEX_VERSION: &str = "vertex-2023-10-16";

/// The edits that make an Anthropic client's Messages body the one a platform hosting Claude
/// takes (Vertex AI's `rawPredict`, Bedrock's `InvokeModel`): no `model` (the URL names it) and
/// the platform's `anthropic_version`.
pub fn platform_edits(
    env: &crate::envelope::Envelope<'_>,
    version: &str,
) -> crate::envelope::Edits {
    crate::envelope::Edits {
        remove: vec![env.model_range.clone()],
        replace: Vec::new(),
        insert: vec![bytes::Bytes::from(format!(
            "\"anthropic_version\":\"{version}\","
        ))],
    }
}

/// Write an Anthropic Messages request for an Anthropic upstream.
pub fn write_request(req: &ChatRequest, params: &mut Params) -> Result<Vec<u8>, TranslateError> {
    let mut body = request_body(req, params)?;
    body.insert("model".into(), req.model.clone().into());
    Ok(to_json(&Value::Object(body)))
}

/// Write a Messages request for an Anthropic model on Vertex AI (`rawPredict`): the model is
/// in the URL, the API version in the body.
pub fn write_vertex_request(
    req: &ChatRequest,
    params: &mut Params,
) -> Result<Vec<u8>, TranslateError> {
    let mut body = request_body(req, params)?;
    body.insert("anthropic_version".into(), VERTEX_VERSION.into());
    Ok(to_json(&Value::Object(body)))
}

fn request_body(
    req: &ChatRequest,
    params: &mut Params,
) -> Result<Map<String, Value>, TranslateError> {
    let rules = *params.rules();
    // A model without structured output is asked for the schema as its one tool.
    if let Some(forced) = crate::json_tool::forced_json(req, &rules) {
        return request_body(&forced, params);
    }
    let mut body = Map::new();
    // A JSON schema goes in `output_config.format` for a model that answers in one natively
    // (the registry's `supports_native_structured_output`), else through the forced tool
    // above; a bare `json_object` (no schema) cannot be promised.
    match (&req.response_format, rules.native_structured_output) {
        (None, _) => {}
        (Some(ResponseFormat::Schema { schema, .. }), true) => {
            body.insert(
                "output_config".into(),
                json!({"format": {"type": "json_schema", "schema": schema}}),
            );
        }
        (Some(_), _) => params.meaning_setting(Setting::ResponseFormat)?,
    }
    let mut thinking = req.thinking.map_or(Shape::Omit, |t| Shape::of(t, &rules));
    // Anthropic requires max_tokens, and more of them than the thinking budget.
    let max = req.max_tokens.unwrap_or_else(|| {
        let wanted = DEFAULT_MAX_TOKENS + thinking.budget().unwrap_or(0);
        rules
            .max_output_tokens
            .map_or(wanted, |cap| wanted.min(u64::from(cap)))
    });
    if let Shape::Budget(b) = thinking {
        if max <= b {
            thinking = match max.checked_sub(1).filter(|b| *b >= MIN_THINKING_BUDGET) {
                Some(fits) => Shape::Budget(fits),
                None => {
                    params.hint("thinking");
                    Shape::Omit
                }
            };
        }
    }
    body.insert("max_tokens".into(), max.into());
    let mut messages: Vec<Value> = Vec::with_capacity(req.messages.len());
    let mut last_role = None;
    for m in &req.messages {
        // Thinking without its signature (an OpenAI client's `reasoning_content`) cannot be
        // sent back: Anthropic refuses an unsigned thinking block. It is left out, as the
        // providers leave out each other's reasoning.
        let blocks: Vec<Value> = m
            .content
            .iter()
            .filter(|p| {
                !matches!(
                    p,
                    Part::Thinking {
                        signature: None,
                        ..
                    }
                )
            })
            .map(write_part)
            .collect();
        if blocks.is_empty() {
            continue;
        }
        // Anthropic wants alternating turns: merge consecutive ones of one role.
        if last_role == Some(m.role) {
            if let Some(Value::Array(prev)) = messages.last_mut().and_then(|v| v.get_mut("content"))
            {
                prev.extend(blocks);
                continue;
            }
        }
        last_role = Some(m.role);
        let role = match m.role {
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        messages.push(json!({"role": role, "content": blocks}));
    }
    body.insert("messages".into(), Value::Array(messages));
    if !req.system.is_empty() {
        let system: Vec<Value> = req.system.iter().map(text_block).collect();
        body.insert("system".into(), Value::Array(system));
    }
    super::insert_sampling(req, &mut body);
    if let Some(k) = req.top_k {
        body.insert("top_k".into(), k.into());
    }
    if !req.stop.is_empty() {
        body.insert("stop_sequences".into(), req.stop.clone().into());
    }
    if req.stream {
        body.insert("stream".into(), true.into());
    }
    if !req.tools.is_empty() {
        let tools: Vec<Value> = req
            .tools
            .iter()
            .map(|t| {
                let mut v = json!({"name": t.name, "input_schema": t.parameters});
                if let Some(d) = &t.description {
                    v["description"] = d.clone().into();
                }
                if let Some(c) = &t.cache_control {
                    v["cache_control"] = c.clone();
                }
                v
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    let disable_parallel = req.parallel_tool_calls.map(|p| !p);
    let choice = match (&req.tool_choice, disable_parallel) {
        (None, None) => None,
        (None | Some(ToolChoice::Auto), _) => Some(json!({"type": "auto"})),
        (Some(ToolChoice::Any), _) => Some(json!({"type": "any"})),
        (Some(ToolChoice::None), _) => Some(json!({"type": "none"})),
        (Some(ToolChoice::Tool(name)), _) => Some(json!({"type": "tool", "name": name})),
    };
    if let Some(mut c) = choice.filter(|_| !req.tools.is_empty()) {
        if let (Some(d), false) = (disable_parallel, c["type"] == "none") {
            c["disable_parallel_tool_use"] = d.into();
        }
        body.insert("tool_choice".into(), c);
    }
    if let Some(u) = &req.user {
        body.insert("metadata".into(), json!({ "user_id": u }));
    }
    thinking.write(&mut body);
    Ok(body)
}

/// The smallest thinking budget Anthropic takes.
const MIN_THINKING_BUDGET: u64 = 1024;

/// Thinking as a Claude model takes it, from what the client asked and the model's rules
/// (Anthropic's API, and Claude on Bedrock's `additionalModelRequestFields`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Nothing sent: the model's default.
    Omit,
    /// `{type: disabled}`: off, for a model that thinks by default.
    Disabled,
    /// `{type: enabled, budget_tokens}`.
    Budget(u64),
    /// `{type: adaptive}`, with `output_config.effort` when a level is known.
    Adaptive(Option<Effort>),
}

impl Shape {
    /// What to send for `asked` to a model with these rules.
    pub fn of(asked: Thinking, rules: &ModelRules) -> Self {
        let style = rules.thinking;
        match asked {
            Thinking::Effort(Effort::None) if rules.thinks_by_default => Self::Disabled,
            Thinking::Effort(Effort::None) => Self::Omit,
            Thinking::Budget(b) if style.budget() => Self::Budget(b),
            Thinking::Budget(b) => Self::Adaptive(Some(rules.efforts.fit(Effort::from_budget(b)))),
            Thinking::Effort(e) | Thinking::Adaptive(Some(e)) if style.adaptive() => {
                Self::Adaptive(Some(rules.efforts.fit(e)))
            }
            Thinking::Adaptive(None) if style.adaptive() => Self::Adaptive(None),
            other => Self::Budget(other.budget().unwrap_or(MIN_THINKING_BUDGET)),
        }
    }

    /// The budget it sends, if any.
    pub fn budget(self) -> Option<u64> {
        match self {
            Self::Budget(b) => Some(b),
            _ => None,
        }
    }

    /// `thinking` (and `output_config.effort`) written into a request body.
    pub fn write(self, body: &mut Map<String, Value>) {
        let thinking = match self {
            Self::Omit => return,
            Self::Disabled => json!({"type": "disabled"}),
            Self::Budget(b) => json!({"type": "enabled", "budget_tokens": b}),
            Self::Adaptive(effort) => {
                if let Some(e) = effort {
                    // Anthropic's lowest level is `low`.
                    let e = e.max(Effort::Low);
                    let config = body
                        .entry("output_config")
                        .or_insert_with(|| Value::Object(Map::new()));
                    if let Some(c) = config.as_object_mut() {
                        c.insert("effort".into(), e.name().into());
                    }
                }
                json!({"type": "adaptive"})
            }
        };
        body.insert("thinking".into(), thinking);
    }
}

fn text_block(t: &Text) -> Value {
    let mut v = json!({"type": "text", "text": t.text});
    if let Some(c) = &t.cache_control {
        v["cache_control"] = c.clone();
    }
    v
}

fn with_cache(mut v: Value, cache_control: &Option<Value>) -> Value {
    if let Some(c) = cache_control {
        v["cache_control"] = c.clone();
    }
    v
}

fn write_part(p: &Part) -> Value {
    match p {
        Part::Text(t) => text_block(t),
        Part::Image {
            source,
            cache_control,
        } => {
            let source = match source {
                ImageSource::Url(url) => json!({"type": "url", "url": url}),
                ImageSource::Base64 { media_type, data } => {
                    json!({"type": "base64", "media_type": media_type, "data": data})
                }
            };
            with_cache(json!({"type": "image", "source": source}), cache_control)
        }
        Part::ToolCall(c) => json!({
            "type": "tool_use", "id": c.id, "name": c.name, "input": tool_input(&c.arguments),
        }),
        Part::ToolResult {
            id,
            content,
            is_error,
            cache_control,
        } => {
            let mut v = json!({
                "type": "tool_result", "tool_use_id": id,
                "content": content.iter().map(write_part).collect::<Vec<_>>(),
            });
            if *is_error {
                v["is_error"] = true.into();
            }
            with_cache(v, cache_control)
        }
        Part::Thinking { text, signature } => {
            json!({"type": "thinking", "thinking": text, "signature": signature})
        }
        Part::RedactedThinking(data) => json!({"type": "redacted_thinking", "data": data}),
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
    content: Vec<RawBlock>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    stop_sequence: Option<String>,
    #[serde(default)]
    usage: Option<Value>,
}

/// Read an Anthropic Messages answer.
pub fn parse_response(body: &[u8]) -> Result<ChatResponse, TranslateError> {
    let raw: RawResponse = serde_json::from_slice(body).map_err(TranslateError::bad_answer)?;
    let mut params = Params::new(false, Dialect::Anthropic);
    let mut cx = Reading {
        params: &mut params,
        system: Vec::new(),
        unknown: false,
    };
    let content = read_content(Content::Blocks(raw.content), &mut cx)
        .map_err(|e| TranslateError::BadAnswer(e.to_string()))?;
    if cx.unknown {
        return Err(TranslateError::BadAnswer(
            "content blocks other than text, tool_use and thinking cannot be translated".into(),
        ));
    }
    Ok(ChatResponse {
        id: raw.id,
        model: raw.model,
        content,
        stop: raw
            .stop_reason
            .as_deref()
            .map_or(StopReason::EndTurn, StopReason::from_anthropic),
        stop_sequence: raw.stop_sequence,
        usage: raw
            .usage
            .as_ref()
            .and_then(usage_from_value)
            .unwrap_or_default(),
        created: now(),
    })
}

fn usage_json(u: &Usage) -> Value {
    json!({
        "input_tokens": u.uncached_input_tokens(),
        "output_tokens": u.completion_tokens,
        "cache_creation_input_tokens": u.cache_creation_tokens,
        "cache_read_input_tokens": u.cached_tokens,
    })
}

/// Write an Anthropic Messages answer.
pub fn write_response(r: &ChatResponse) -> Vec<u8> {
    to_json(&json!({
        "id": r.id,
        "type": "message",
        "role": "assistant",
        "model": r.model,
        "content": r.content.iter().map(write_part).collect::<Vec<_>>(),
        "stop_reason": r.stop.anthropic(),
        "stop_sequence": r.stop_sequence,
        "usage": usage_json(&r.usage),
    }))
}

/// A local estimate of a request's input tokens (about four bytes of text a token), for
/// `count_tokens` when the deployment's provider has no counter.
pub fn estimate_tokens(req: &ChatRequest) -> u64 {
    let mut bytes = req.system.iter().map(|t| t.text.len()).sum::<usize>();
    for m in &req.messages {
        for p in &m.content {
            bytes += match p {
                Part::Text(t) => t.text.len(),
                Part::ToolCall(c) => c.name.len() + c.arguments.len(),
                Part::ToolResult { content, .. } => content
                    .iter()
                    .map(|c| match c {
                        Part::Text(t) => t.text.len(),
                        _ => 0,
                    })
                    .sum(),
                Part::Thinking { text, .. } => text.len(),
                // Anthropic bills an image at roughly (width × height) / 750 tokens; without
                // decoding it, count a typical 1 MP image.
                Part::Image { .. } => 1334 * 4,
                Part::RedactedThinking(_) => 0,
            };
        }
    }
    for t in &req.tools {
        bytes += t.name.len() + t.description.as_ref().map_or(0, String::len);
        bytes += t.parameters.to_string().len();
    }
    (bytes as u64).div_ceil(4).max(1)
}

// ---------------------------------------------------------------------------------------------
// Streams

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum RawEvent {
    MessageStart {
        message: RawStartMessage,
    },
    ContentBlockStart {
        index: usize,
        content_block: RawStartBlock,
    },
    ContentBlockDelta {
        index: usize,
        delta: RawDelta,
    },
    ContentBlockStop {
        index: usize,
    },
    MessageDelta {
        delta: RawMessageDelta,
        #[serde(default)]
        usage: Option<Value>,
    },
    MessageStop,
    Ping,
    Error {
        error: RawError,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct RawStartMessage {
    #[serde(default)]
    id: String,
    #[serde(default)]
    model: String,
    #[serde(default)]
    usage: Option<Value>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum RawStartBlock {
    Text {
        #[serde(default)]
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
    },
    Thinking {
        #[serde(default)]
        thinking: String,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum RawDelta {
    TextDelta {
        text: String,
    },
    InputJsonDelta {
        partial_json: String,
    },
    ThinkingDelta {
        thinking: String,
    },
    SignatureDelta {
        signature: String,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct RawMessageDelta {
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    stop_sequence: Option<String>,
}

#[derive(Deserialize)]
struct RawError {
    #[serde(default, rename = "type")]
    kind: String,
    #[serde(default)]
    message: String,
}

/// Turns Anthropic stream events into internal ones.
#[derive(Debug, Default)]
pub struct EventReader;

impl SseRead for EventReader {
    /// Read one SSE `data:` payload.
    fn read_data(&mut self, data: &[u8], out: &mut Vec<StreamEvent>) {
        let Ok(ev) = serde_json::from_slice::<RawEvent>(data) else {
            return;
        };
        match ev {
            RawEvent::MessageStart { message } => out.push(StreamEvent::Start {
                id: message.id,
                model: message.model,
                usage: message
                    .usage
                    .as_ref()
                    .and_then(usage_from_value)
                    .unwrap_or_default(),
            }),
            RawEvent::ContentBlockStart {
                index,
                content_block,
            } => match content_block {
                RawStartBlock::Text { text } if !text.is_empty() => {
                    out.push(StreamEvent::Text { index, text });
                }
                RawStartBlock::ToolUse { id, name } => {
                    out.push(StreamEvent::ToolStart { index, id, name });
                }
                RawStartBlock::Thinking { thinking } if !thinking.is_empty() => {
                    out.push(StreamEvent::Thinking {
                        index,
                        text: thinking,
                    });
                }
                RawStartBlock::Text { .. }
                | RawStartBlock::Thinking { .. }
                | RawStartBlock::Other => {}
            },
            RawEvent::ContentBlockDelta { index, delta } => match delta {
                RawDelta::TextDelta { text } => out.push(StreamEvent::Text { index, text }),
                RawDelta::InputJsonDelta { partial_json } => {
                    if !partial_json.is_empty() {
                        out.push(StreamEvent::ToolArgs {
                            index,
                            json: partial_json,
                        });
                    }
                }
                RawDelta::ThinkingDelta { thinking } => out.push(StreamEvent::Thinking {
                    index,
                    text: thinking,
                }),
                RawDelta::SignatureDelta { signature } => {
                    out.push(StreamEvent::Signature { index, signature });
                }
                RawDelta::Other => {}
            },
            RawEvent::ContentBlockStop { index } => out.push(StreamEvent::BlockStop { index }),
            RawEvent::MessageDelta { delta, usage } => {
                if let Some(reason) = delta.stop_reason {
                    out.push(StreamEvent::Stop {
                        reason: StopReason::from_anthropic(&reason),
                        stop_sequence: delta.stop_sequence,
                    });
                }
                if let Some(u) = usage.as_ref().and_then(usage_from_value) {
                    out.push(StreamEvent::Usage(u));
                }
            }
            RawEvent::MessageStop => out.push(StreamEvent::Done),
            RawEvent::Ping => out.push(StreamEvent::Ping),
            RawEvent::Error { error } => out.push(StreamEvent::Error {
                kind: error.kind,
                message: error.message,
            }),
            RawEvent::Other => {}
        }
    }
}

/// Writes internal stream events as Anthropic's named SSE events, opening and closing content
/// blocks around them.
#[derive(Debug, Default)]
pub struct EventWriter {
    open: Option<usize>,
    stop: Option<(StopReason, Option<String>)>,
    usage: Usage,
}

fn event(name: &str, data: &Value, out: &mut Vec<u8>) {
    out.extend_from_slice(b"event: ");
    out.extend_from_slice(name.as_bytes());
    out.push(b'\n');
    super::sse_data(data, out);
}

impl EventWriter {
    fn open(&mut self, index: usize, block: Value, out: &mut Vec<u8>) {
        if self.open == Some(index) {
            return;
        }
        self.close(out);
        self.open = Some(index);
        event(
            "content_block_start",
            &json!({"type": "content_block_start", "index": index, "content_block": block}),
            out,
        );
    }

    fn close(&mut self, out: &mut Vec<u8>) {
        if let Some(index) = self.open.take() {
            event(
                "content_block_stop",
                &json!({"type": "content_block_stop", "index": index}),
                out,
            );
        }
    }

    fn delta(index: usize, delta: Value, out: &mut Vec<u8>) {
        event(
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": index, "delta": delta}),
            out,
        );
    }

    /// A delta of the thinking block `index`, opening it first when needed.
    fn thinking(&mut self, index: usize, delta: Value, out: &mut Vec<u8>) {
        self.open(
            index,
            json!({"type": "thinking", "thinking": "", "signature": ""}),
            out,
        );
        Self::delta(index, delta, out);
    }

    /// Append the events for one internal event to `out`.
    pub fn write(&mut self, ev: StreamEvent, out: &mut Vec<u8>) {
        match ev {
            StreamEvent::Start { id, model, usage } => {
                self.usage = usage;
                event(
                    "message_start",
                    &json!({"type": "message_start", "message": {
                        "id": id, "type": "message", "role": "assistant", "model": model,
                        "content": [], "stop_reason": null, "stop_sequence": null,
                        "usage": usage_json(&usage),
                    }}),
                    out,
                );
            }
            StreamEvent::Text { index, text } => {
                self.open(index, json!({"type": "text", "text": ""}), out);
                Self::delta(index, json!({"type": "text_delta", "text": text}), out);
            }
            StreamEvent::Thinking { index, text } => self.thinking(
                index,
                json!({"type": "thinking_delta", "thinking": text}),
                out,
            ),
            StreamEvent::Signature { index, signature } => self.thinking(
                index,
                json!({"type": "signature_delta", "signature": signature}),
                out,
            ),
            StreamEvent::ToolStart { index, id, name } => self.open(
                index,
                json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
                out,
            ),
            StreamEvent::ToolArgs { index, json } => {
                Self::delta(
                    index,
                    json!({"type": "input_json_delta", "partial_json": json}),
                    out,
                );
            }
            StreamEvent::BlockStop { index } => {
                if self.open == Some(index) {
                    self.close(out);
                }
            }
            StreamEvent::Stop {
                reason,
                stop_sequence,
            } => self.stop = Some((reason, stop_sequence)),
            StreamEvent::Usage(u) => self.usage = self.usage.merge(u),
            StreamEvent::Done => {
                self.close(out);
                let (reason, seq) = self.stop.take().unwrap_or((StopReason::EndTurn, None));
                event(
                    "message_delta",
                    &json!({"type": "message_delta",
                        "delta": {"stop_reason": reason.anthropic(), "stop_sequence": seq},
                        "usage": usage_json(&self.usage)}),
                    out,
                );
                event("message_stop", &json!({"type": "message_stop"}), out);
            }
            StreamEvent::Error { kind, message } => event(
                "error",
                &json!({"type": "error", "error": {"type": kind, "message": message}}),
                out,
            ),
            StreamEvent::Ping => event("ping", &json!({"type": "ping"}), out),
        }
    }
}

/// The provider's error type and message from an Anthropic error body.
pub fn parse_error(body: &[u8]) -> Option<(String, String)> {
    let v: Value = serde_json::from_slice(body).ok()?;
    let e = v.get("error")?;
    Some((
        e["type"].as_str().unwrap_or_default().to_owned(),
        e["message"].as_str().unwrap_or_default().to_owned(),
    ))
}
