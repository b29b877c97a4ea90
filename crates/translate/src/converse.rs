//! Bedrock's Converse API as a client dialect: a boto3 / Converse client's request read into the
//! internal representation, and answers written back in Converse's shape (whole, and streamed
//! as AWS event-stream frames), whichever provider serves the model. The inverse of the Bedrock
//! provider's codec; botocore's `bedrock-runtime` service model is the reference for every name.
//!
//! - A `cachePoint` marks the block before it, as Anthropic's `cache_control` does: it becomes
//!   that block's marker (`{"type": "ephemeral"}`, with the `ttl` when given).
//! - `additionalModelRequestFields` is the model's own document: the thinking settings the
//!   models on Bedrock read (Anthropic's `thinking` / `reasoning_config`, Nova's
//!   `reasoningConfig`, `reasoning_effort`) and `top_k` are carried; other keys are hints.
//! - Content the internal representation cannot carry (documents, video, audio, search
//!   results, S3 locations, Bedrock's system tools) is refused by name, or dropped with
//!   `drop_params`; `guardrailConfig` and `promptVariables` name state kept at AWS and are
//!   always refused.

use serde_json::{json, Map, Value};

use crate::eventstream;
use crate::ir::{
    ChatRequest, ChatResponse, Effort, ImageSource, Part, ResponseFormat, Role, StopReason,
    StreamEvent, Text, Thinking, Tool, ToolCall, ToolChoice,
};
use crate::params::{asks_nothing, Key};
use crate::{to_json, tool_input, Params, TranslateError};
use sluice_core::usage::Usage;

// ---------------------------------------------------------------------------------------------
// Requests

/// Top-level keys that name state kept at AWS (a guardrail, a managed prompt's variables): no
/// other provider can honour them, and dropping a guardrail silently would be unsafe, so they
/// are refused even with `drop_params`.
const AWS_STATE: [&str; 2] = ["guardrailConfig", "promptVariables"];

/// A top-level key the reader does not carry: the model id (the URL's) is sluice's; the rest
/// (`additionalModelResponseFieldPaths`, `requestMetadata`, `performanceConfig`,
/// `serviceTier`, `projectIdentifier`, future fields) only tunes Bedrock: hints.
fn converse_key(key: &str, _value: &Value) -> Key {
    match key {
        "modelId" => Key::Carried,
        _ => Key::Hint,
    }
}

/// Where a value sits in the request, so that an error names it (`messages[0].content[2]`).
#[derive(Debug, Clone)]
struct Loc {
    /// The top-level field, as `TranslateError::Invalid` names it.
    param: &'static str,
    path: String,
}

impl Loc {
    fn root(param: &'static str) -> Self {
        Self {
            param,
            path: param.to_owned(),
        }
    }

    fn key(&self, key: &str) -> Self {
        Self {
            param: self.param,
            path: format!("{}.{key}", self.path),
        }
    }

    fn index(&self, i: usize) -> Self {
        Self {
            param: self.param,
            path: format!("{}[{i}]", self.path),
        }
    }

    fn err(&self, why: &str) -> TranslateError {
        TranslateError::invalid(self.param, &format!("{}: {why}", self.path))
    }
}

fn object(v: Value, at: &Loc) -> Result<Map<String, Value>, TranslateError> {
    match v {
        Value::Object(o) => Ok(o),
        _ => Err(at.err("expected an object")),
    }
}

fn list(v: Value, at: &Loc) -> Result<Vec<Value>, TranslateError> {
    match v {
        Value::Array(a) => Ok(a),
        _ => Err(at.err("expected a list")),
    }
}

fn string(v: Value, at: &Loc) -> Result<String, TranslateError> {
    match v {
        Value::String(s) => Ok(s),
        _ => Err(at.err("expected a string")),
    }
}

fn number(v: &Value, at: &Loc) -> Result<f64, TranslateError> {
    v.as_f64().ok_or_else(|| at.err("expected a number"))
}

/// Remove `key`; `null` is as good as absent.
fn optional(o: &mut Map<String, Value>, key: &str) -> Option<Value> {
    o.remove(key).filter(|v| !v.is_null())
}

/// Remove a member the service model requires.
fn required(o: &mut Map<String, Value>, key: &str, at: &Loc) -> Result<Value, TranslateError> {
    optional(o, key).ok_or_else(|| at.err(&format!("missing `{key}`")))
}

fn required_string(
    o: &mut Map<String, Value>,
    key: &str,
    at: &Loc,
) -> Result<String, TranslateError> {
    let v = required(o, key, at)?;
    string(v, &at.key(key))
}

/// The one member set in a union (a content block, a tool, a tool choice, ...): its name and
/// value.
fn member(v: Value, at: &Loc) -> Result<(String, Value), TranslateError> {
    let o = object(v, at)?;
    let mut set = o.into_iter().filter(|(_, v)| !v.is_null());
    match (set.next(), set.next()) {
        (Some(m), None) => Ok(m),
        (None, _) => Err(at.err("no member set; a union takes exactly one")),
        (Some((a, _)), Some((b, _))) => Err(at.err(&format!(
            "`{a}` and `{b}` both set; a union takes exactly one"
        ))),
    }
}

/// Read a `ConverseRequest` / `ConverseStreamRequest` body. The model and whether the answer
/// streams come from the URL, so `model` is left empty and `stream` false for the caller to
/// set. What the target cannot carry is noted in, or refused by, `params`.
pub fn parse_request(body: &[u8], params: &mut Params) -> Result<ChatRequest, TranslateError> {
    let mut raw: Map<String, Value> =
        serde_json::from_slice(body).map_err(TranslateError::bad_request)?;
    for key in AWS_STATE {
        if raw.remove(key).is_some_and(|v| !asks_nothing(&v)) {
            return Err(TranslateError::Unsupported(key.to_owned()));
        }
    }
    let mut req = ChatRequest::default();
    // The system prompt first: `system` turns among the messages add to it.
    if let Some(v) = optional(&mut raw, "system") {
        read_system(v, &mut req, params)?;
    }
    let messages = optional(&mut raw, "messages")
        .ok_or_else(|| TranslateError::BadRequest("missing field `messages`".into()))?;
    read_messages(messages, &mut req, params)?;
    if let Some(v) = optional(&mut raw, "inferenceConfig") {
        read_inference(v, &mut req, params)?;
    }
    if let Some(v) = optional(&mut raw, "toolConfig") {
        read_tool_config(v, &mut req, params)?;
    }
    let asked = match optional(&mut raw, "additionalModelRequestFields") {
        Some(v) => read_additional(v, &mut req, params)?,
        None => None,
    };
    let effort = match optional(&mut raw, "outputConfig") {
        Some(v) => read_output_config(v, &mut req, params)?,
        None => None,
    };
    req.thinking = thinking(asked, effort);
    for (key, value) in raw {
        params.unread(key, &value, converse_key)?;
    }
    Ok(req)
}

// --- messages and content blocks -------------------------------------------------------------

/// What one content block reads as.
enum Block {
    /// A part of the turn.
    Part(Part),
    /// A `cachePoint`: the marker for the block before it.
    Cache(Value),
    /// Nothing to carry (dropped, and noted).
    Skip,
}

fn read_messages(
    v: Value,
    req: &mut ChatRequest,
    params: &mut Params,
) -> Result<(), TranslateError> {
    let root = Loc::root("messages");
    for (i, m) in list(v, &root)?.into_iter().enumerate() {
        let at = root.index(i);
        let mut m = object(m, &at)?;
        let role = required_string(&mut m, "role", &at)?;
        let content = list(required(&mut m, "content", &at)?, &at.key("content"))?;
        let parts = read_blocks(content, &at.key("content"), req, params)?;
        match role.as_str() {
            "user" if !parts.is_empty() => req.push_turn(Role::User, parts),
            "assistant" if !parts.is_empty() => req.push_turn(Role::Assistant, parts),
            "user" | "assistant" => {}
            // A system turn: its text joins the system prompt.
            "system" => {
                for p in parts {
                    match p {
                        Part::Text(t) => req.system.push(t),
                        _ => return Err(at.err("a system message holds text only")),
                    }
                }
            }
            other => return Err(at.key("role").err(&format!("unknown role `{other}`"))),
        }
    }
    Ok(())
}

/// A message's blocks as parts; a `cachePoint` marks the part before it (the previous turn's
/// last, when it opens the message).
fn read_blocks(
    blocks: Vec<Value>,
    at: &Loc,
    req: &mut ChatRequest,
    params: &mut Params,
) -> Result<Vec<Part>, TranslateError> {
    let mut parts: Vec<Part> = Vec::with_capacity(blocks.len());
    for (j, b) in blocks.into_iter().enumerate() {
        match read_block(b, &at.index(j), params)? {
            Block::Part(p) => parts.push(p),
            Block::Cache(marker) => {
                let before = match parts.last_mut() {
                    Some(p) => Some(p),
                    None => req.messages.last_mut().and_then(|m| m.content.last_mut()),
                };
                mark(before, marker, params);
            }
            Block::Skip => {}
        }
    }
    Ok(parts)
}

/// Put a cache marker on a part that can carry one; otherwise the marker is a dropped hint.
fn mark(part: Option<&mut Part>, marker: Value, params: &mut Params) {
    let slot = match part {
        Some(Part::Text(t)) => &mut t.cache_control,
        Some(Part::Image { cache_control, .. } | Part::ToolResult { cache_control, .. }) => {
            cache_control
        }
        _ => {
            params.hint("cachePoint");
            return;
        }
    };
    *slot = Some(marker);
}

/// A `CachePointBlock` as Anthropic's marker.
fn cache_marker(v: Value, at: &Loc) -> Result<Value, TranslateError> {
    let mut o = object(v, at)?;
    let kind = required_string(&mut o, "type", at)?;
    if kind != "default" {
        return Err(at.key("type").err("expected `default`"));
    }
    let mut marker = json!({"type": "ephemeral"});
    if let Some(ttl) = optional(&mut o, "ttl") {
        match ttl.as_str() {
            Some(t @ ("5m" | "1h")) => marker["ttl"] = t.into(),
            _ => return Err(at.key("ttl").err("expected `5m` or `1h`")),
        }
    }
    Ok(marker)
}

/// One `ContentBlock`.
fn read_block(b: Value, at: &Loc, params: &mut Params) -> Result<Block, TranslateError> {
    let (kind, v) = member(b, at)?;
    let at = at.key(&kind);
    let part = match kind.as_str() {
        "text" => Part::Text(Text::plain(string(v, &at)?)),
        "image" => match read_image(v, &at, params)? {
            Some(p) => p,
            None => return Ok(Block::Skip),
        },
        "toolUse" => match read_tool_use(v, &at, params)? {
            Some(p) => p,
            None => return Ok(Block::Skip),
        },
        "toolResult" => read_tool_result(v, &at, params)?,
        "reasoningContent" => read_reasoning(v, &at)?,
        "cachePoint" => return Ok(Block::Cache(cache_marker(v, &at)?)),
        "guardContent" => match read_guard(v, &at, params)? {
            Some(p) => p,
            None => return Ok(Block::Skip),
        },
        "citationsContent" => match read_citations(v, &at, params)? {
            Some(p) => p,
            None => return Ok(Block::Skip),
        },
        // Tools offered or withdrawn from here on: targets get every tool throughout.
        "toolAddition" | "toolRemoval" => {
            params.hint(kind);
            return Ok(Block::Skip);
        }
        // Documents, video, audio, search results, and whatever AWS adds next: content no
        // other target is sent.
        _ => {
            params.meaning(kind)?;
            return Ok(Block::Skip);
        }
    };
    Ok(Block::Part(part))
}

/// The media type of a Converse image `format`.
fn media_type(format: &str) -> Option<&'static str> {
    match format {
        "png" => Some("image/png"),
        "jpeg" => Some("image/jpeg"),
        "gif" => Some("image/gif"),
        "webp" => Some("image/webp"),
        _ => None,
    }
}

/// Converse's image `format` for a media type (the inverse of [`media_type`]); the Bedrock
/// provider's codec writes its requests' images with it too.
pub fn image_format(media_type: &str) -> Option<&'static str> {
    match media_type {
        "image/png" => Some("png"),
        "image/jpeg" | "image/jpg" => Some("jpeg"),
        "image/gif" => Some("gif"),
        "image/webp" => Some("webp"),
        _ => None,
    }
}

/// An `ImageBlock`: inline bytes (base64 in JSON) are carried; an S3 location is AWS's to
/// read, so refused (or dropped).
fn read_image(v: Value, at: &Loc, params: &mut Params) -> Result<Option<Part>, TranslateError> {
    let mut o = object(v, at)?;
    let format = required_string(&mut o, "format", at)?;
    let media = media_type(&format)
        .ok_or_else(|| at.key("format").err("expected png, jpeg, gif or webp"))?;
    let source_at = at.key("source");
    let (kind, source) = member(required(&mut o, "source", at)?, &source_at)?;
    match kind.as_str() {
        "bytes" => {
            let data = string(source, &source_at.key("bytes"))?;
            if data.is_empty() {
                return Err(source_at.key("bytes").err("empty"));
            }
            Ok(Some(Part::Image {
                source: ImageSource::Base64 {
                    media_type: media.to_owned(),
                    data,
                },
                cache_control: None,
            }))
        }
        other => {
            params.meaning(format!("image.source.{other}"))?;
            Ok(None)
        }
    }
}

/// A `ToolUseBlock` (a call the model made earlier). A server tool's call ran at Bedrock.
fn read_tool_use(v: Value, at: &Loc, params: &mut Params) -> Result<Option<Part>, TranslateError> {
    let mut o = object(v, at)?;
    if let Some(kind) = optional(&mut o, "type") {
        params.meaning(format!(
            "toolUse.type.{}",
            kind.as_str().unwrap_or_default()
        ))?;
        return Ok(None);
    }
    let id = required_string(&mut o, "toolUseId", at)?;
    let name = required_string(&mut o, "name", at)?;
    let arguments = match optional(&mut o, "input") {
        None => "{}".to_owned(),
        Some(input) => input.to_string(),
    };
    Ok(Some(Part::ToolCall(ToolCall {
        id,
        name,
        arguments,
    })))
}

/// A `ToolResultBlock`: text and images are carried, JSON as its text; other content cannot be.
fn read_tool_result(v: Value, at: &Loc, params: &mut Params) -> Result<Part, TranslateError> {
    let mut o = object(v, at)?;
    let id = required_string(&mut o, "toolUseId", at)?;
    let is_error = match optional(&mut o, "status") {
        None => false,
        Some(s) => match s.as_str() {
            Some("success") => false,
            Some("error") => true,
            _ => return Err(at.key("status").err("expected `success` or `error`")),
        },
    };
    let content_at = at.key("content");
    let items = list(required(&mut o, "content", at)?, &content_at)?;
    let mut content = Vec::with_capacity(items.len());
    for (k, item) in items.into_iter().enumerate() {
        let item_at = content_at.index(k);
        let (kind, v) = member(item, &item_at)?;
        let item_at = item_at.key(&kind);
        match kind.as_str() {
            "text" => content.push(Part::Text(Text::plain(string(v, &item_at)?))),
            "json" => content.push(Part::Text(Text::plain(v.to_string()))),
            "image" => content.extend(read_image(v, &item_at, params)?),
            other => params.meaning(format!("toolResult.content.{other}"))?,
        }
    }
    Ok(Part::ToolResult {
        id,
        content,
        is_error,
        cache_control: None,
    })
}

/// A `ReasoningContentBlock`: reasoning text with its signature, or redacted reasoning (its
/// base64 text kept as is, as the Bedrock codec sends it back).
fn read_reasoning(v: Value, at: &Loc) -> Result<Part, TranslateError> {
    let (kind, v) = member(v, at)?;
    let at = at.key(&kind);
    match kind.as_str() {
        "reasoningText" => {
            let mut o = object(v, &at)?;
            let text = required_string(&mut o, "text", &at)?;
            let signature = match optional(&mut o, "signature") {
                None => None,
                Some(s) => Some(string(s, &at.key("signature"))?),
            };
            Ok(Part::Thinking { text, signature })
        }
        "redactedContent" => Ok(Part::RedactedThinking(string(v, &at)?)),
        other => Err(at.err(&format!("unknown member `{other}`"))),
    }
}

/// A `GuardrailConverseContentBlock`: without a guardrail (refused) it is plain content to the
/// model; what marks it for a guardrail is a dropped hint.
fn read_guard(v: Value, at: &Loc, params: &mut Params) -> Result<Option<Part>, TranslateError> {
    params.hint("guardContent");
    let (kind, v) = member(v, at)?;
    let at = at.key(&kind);
    match kind.as_str() {
        "text" => {
            let mut o = object(v, &at)?;
            Ok(Some(Part::Text(Text::plain(required_string(
                &mut o, "text", &at,
            )?))))
        }
        "image" => read_image(v, &at, params),
        other => Err(at.err(&format!("unknown member `{other}`"))),
    }
}

/// A `CitationsContentBlock` (an earlier answer's cited text): its text is carried, the
/// citations themselves are a dropped hint.
fn read_citations(v: Value, at: &Loc, params: &mut Params) -> Result<Option<Part>, TranslateError> {
    let mut o = object(v, at)?;
    if optional(&mut o, "citations").is_some_and(|c| !asks_nothing(&c)) {
        params.hint("citationsContent.citations");
    }
    let mut text = String::new();
    if let Some(content) = optional(&mut o, "content") {
        let content_at = at.key("content");
        for (k, c) in list(content, &content_at)?.into_iter().enumerate() {
            let c_at = content_at.index(k);
            let (kind, v) = member(c, &c_at)?;
            match kind.as_str() {
                "text" => text.push_str(&string(v, &c_at.key("text"))?),
                other => return Err(c_at.err(&format!("unknown member `{other}`"))),
            }
        }
    }
    Ok((!text.is_empty()).then(|| Part::Text(Text::plain(text))))
}

// --- system, inference and tool settings ---------------------------------------------------------

/// `system`: text blocks; a `cachePoint` marks the text before it; guard content is text.
fn read_system(v: Value, req: &mut ChatRequest, params: &mut Params) -> Result<(), TranslateError> {
    let root = Loc::root("system");
    for (i, b) in list(v, &root)?.into_iter().enumerate() {
        let at = root.index(i);
        let (kind, v) = member(b, &at)?;
        let at = at.key(&kind);
        match kind.as_str() {
            "text" => req.system.push(Text::plain(string(v, &at)?)),
            "cachePoint" => {
                let marker = cache_marker(v, &at)?;
                match req.system.last_mut() {
                    Some(t) => t.cache_control = Some(marker),
                    None => params.hint("cachePoint"),
                }
            }
            "guardContent" => match read_guard(v, &at, params)? {
                Some(Part::Text(t)) => req.system.push(t),
                Some(_) => params.meaning("system.guardContent.image")?,
                None => {}
            },
            other => params.meaning(format!("system.{other}"))?,
        }
    }
    Ok(())
}

/// `inferenceConfig`.
fn read_inference(
    v: Value,
    req: &mut ChatRequest,
    params: &mut Params,
) -> Result<(), TranslateError> {
    let root = Loc::root("inferenceConfig");
    for (key, value) in object(v, &root)? {
        if value.is_null() {
            continue;
        }
        let at = root.key(&key);
        match key.as_str() {
            "maxTokens" => {
                let n = value.as_u64().filter(|n| *n >= 1);
                req.max_tokens = Some(n.ok_or_else(|| at.err("expected a count of at least 1"))?);
            }
            "temperature" => req.temperature = Some(number(&value, &at)?),
            "topP" => req.top_p = Some(number(&value, &at)?),
            "stopSequences" => {
                for (k, s) in list(value, &at)?.into_iter().enumerate() {
                    req.stop.push(string(s, &at.index(k))?);
                }
            }
            _ => params.hint(format!("inferenceConfig.{key}")),
        }
    }
    Ok(())
}

/// `toolConfig`: tool specifications (a `cachePoint` marks the tool before it) and the choice.
/// A system tool runs at Bedrock only.
fn read_tool_config(
    v: Value,
    req: &mut ChatRequest,
    params: &mut Params,
) -> Result<(), TranslateError> {
    let root = Loc::root("toolConfig");
    let mut o = object(v, &root)?;
    let tools_at = root.key("tools");
    for (i, t) in list(required(&mut o, "tools", &root)?, &tools_at)?
        .into_iter()
        .enumerate()
    {
        let at = tools_at.index(i);
        let (kind, v) = member(t, &at)?;
        let at = at.key(&kind);
        match kind.as_str() {
            "toolSpec" => req.tools.push(read_tool_spec(v, &at, params)?),
            "cachePoint" => {
                let marker = cache_marker(v, &at)?;
                match req.tools.last_mut() {
                    Some(t) => t.cache_control = Some(marker),
                    None => params.hint("cachePoint"),
                }
            }
            other => params.meaning(format!("toolConfig.tools.{other}"))?,
        }
    }
    if let Some(c) = optional(&mut o, "toolChoice") {
        req.tool_choice = Some(read_tool_choice(c, &root.key("toolChoice"))?);
    }
    for (key, value) in o {
        if !asks_nothing(&value) {
            params.hint(format!("toolConfig.{key}"));
        }
    }
    Ok(())
}

/// A `ToolSpecification`. `strict` only tunes the provider (a hint, as the other readers
/// treat it).
fn read_tool_spec(v: Value, at: &Loc, params: &mut Params) -> Result<Tool, TranslateError> {
    let mut o = object(v, at)?;
    let name = required_string(&mut o, "name", at)?;
    let description = match optional(&mut o, "description") {
        None => None,
        Some(d) => Some(string(d, &at.key("description"))?),
    };
    let schema_at = at.key("inputSchema");
    let (kind, parameters) = member(required(&mut o, "inputSchema", at)?, &schema_at)?;
    if kind != "json" {
        return Err(schema_at.err(&format!("unknown member `{kind}`")));
    }
    if optional(&mut o, "strict").is_some_and(|s| !asks_nothing(&s)) {
        params.hint("toolSpec.strict");
    }
    Ok(Tool {
        name,
        description,
        parameters,
        cache_control: None,
    })
}

fn read_tool_choice(v: Value, at: &Loc) -> Result<ToolChoice, TranslateError> {
    let (kind, v) = member(v, at)?;
    match kind.as_str() {
        "auto" => Ok(ToolChoice::Auto),
        "any" => Ok(ToolChoice::Any),
        "tool" => {
            let at = at.key("tool");
            let mut o = object(v, &at)?;
            Ok(ToolChoice::Tool(required_string(&mut o, "name", &at)?))
        }
        other => Err(at.err(&format!("unknown member `{other}`"))),
    }
}

/// The thinking a model-specific field asks for, before `outputConfig.effort` joins it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Asked {
    /// Anthropic's `{type: enabled, budget_tokens}`.
    Budget(u64),
    /// Anthropic's `{type: adaptive}`.
    Adaptive,
    /// Thinking turned off.
    Off,
    /// A level (Nova's `maxReasoningEffort`, `reasoning_effort`).
    Effort(Effort),
}

/// The request's thinking, as the Anthropic reader joins `thinking` and `output_config.effort`.
fn thinking(asked: Option<Asked>, effort: Option<Effort>) -> Option<Thinking> {
    match asked {
        Some(Asked::Budget(b)) => Some(Thinking::Budget(b)),
        Some(Asked::Adaptive) => Some(Thinking::Adaptive(effort)),
        Some(Asked::Off) => Some(Thinking::Effort(Effort::None)),
        Some(Asked::Effort(e)) => Some(Thinking::Effort(e)),
        None => effort.map(|e| Thinking::Adaptive(Some(e))),
    }
}

/// `additionalModelRequestFields`: what the internal request can carry is read, every other
/// key is a hint noted as `additionalModelRequestFields.<key>`.
fn read_additional(
    v: Value,
    req: &mut ChatRequest,
    params: &mut Params,
) -> Result<Option<Asked>, TranslateError> {
    let root = Loc::root("additionalModelRequestFields");
    let mut asked = None;
    for (key, value) in object(v, &root)? {
        if value.is_null() {
            continue;
        }
        let at = root.key(&key);
        match key.as_str() {
            "thinking" | "reasoning_config" => {
                asked = anthropic_thinking(value, &at, params)?.or(asked);
            }
            "reasoningConfig" => asked = nova_reasoning(value, &at, params)?.or(asked),
            "reasoning_effort" => match Effort::parse(&string(value, &at)?) {
                Some(e) => asked = Some(Asked::Effort(e)),
                None => params.hint("additionalModelRequestFields.reasoning_effort"),
            },
            "top_k" => {
                req.top_k = Some(value.as_u64().ok_or_else(|| at.err("expected a count"))?);
            }
            _ => {
                if !asks_nothing(&value) {
                    params.hint(format!("additionalModelRequestFields.{key}"));
                }
            }
        }
    }
    Ok(asked)
}

/// Anthropic's `thinking` (and `reasoning_config`, its early spelling on Bedrock).
fn anthropic_thinking(
    v: Value,
    at: &Loc,
    params: &mut Params,
) -> Result<Option<Asked>, TranslateError> {
    let mut o = object(v, at)?;
    let budget = match optional(&mut o, "budget_tokens") {
        None => None,
        Some(b) => Some(
            b.as_u64()
                .ok_or_else(|| at.key("budget_tokens").err("expected a count"))?,
        ),
    };
    Ok(match required_string(&mut o, "type", at)?.as_str() {
        "enabled" => Some(Asked::Budget(budget.unwrap_or(Effort::Medium.budget()))),
        "adaptive" => Some(Asked::Adaptive),
        "disabled" => Some(Asked::Off),
        _ => {
            params.hint(at.path.clone());
            None
        }
    })
}

/// Amazon Nova's `reasoningConfig {type, maxReasoningEffort}`.
fn nova_reasoning(
    v: Value,
    at: &Loc,
    params: &mut Params,
) -> Result<Option<Asked>, TranslateError> {
    let mut o = object(v, at)?;
    let effort = match optional(&mut o, "maxReasoningEffort") {
        None => None,
        Some(e) => Some(string(e, &at.key("maxReasoningEffort"))?),
    };
    Ok(match required_string(&mut o, "type", at)?.as_str() {
        "disabled" => Some(Asked::Off),
        "enabled" => match effort.as_deref().map(Effort::parse) {
            Some(Some(e)) => Some(Asked::Effort(e)),
            Some(None) => {
                params.hint(at.key("maxReasoningEffort").path);
                Some(Asked::Adaptive)
            }
            None => Some(Asked::Adaptive),
        },
        _ => {
            params.hint(at.path.clone());
            None
        }
    })
}

/// `outputConfig`: a JSON schema for the answer, and the effort (returned, to join the
/// thinking asked for).
fn read_output_config(
    v: Value,
    req: &mut ChatRequest,
    params: &mut Params,
) -> Result<Option<Effort>, TranslateError> {
    let root = Loc::root("outputConfig");
    let mut effort = None;
    for (key, value) in object(v, &root)? {
        if value.is_null() {
            continue;
        }
        let at = root.key(&key);
        match key.as_str() {
            "textFormat" => req.response_format = Some(read_text_format(value, &at, params)?),
            "effort" => {
                let s = string(value, &at)?;
                match Effort::parse(&s) {
                    Some(e) => effort = Some(e),
                    None if s.is_empty() => {}
                    None => params.hint("outputConfig.effort"),
                }
            }
            _ => params.hint(format!("outputConfig.{key}")),
        }
    }
    Ok(effort)
}

/// `outputConfig.textFormat`: a JSON schema (sent as a string), which Bedrock enforces.
fn read_text_format(
    v: Value,
    at: &Loc,
    params: &mut Params,
) -> Result<ResponseFormat, TranslateError> {
    let mut o = object(v, at)?;
    if required_string(&mut o, "type", at)? != "json_schema" {
        return Err(at.key("type").err("expected `json_schema`"));
    }
    let structure_at = at.key("structure");
    let (kind, v) = member(required(&mut o, "structure", at)?, &structure_at)?;
    let def_at = structure_at.key(&kind);
    if kind != "jsonSchema" {
        return Err(structure_at.err(&format!("unknown member `{kind}`")));
    }
    let mut def = object(v, &def_at)?;
    let schema = match required(&mut def, "schema", &def_at)? {
        Value::String(s) => serde_json::from_str(&s)
            .map_err(|e| def_at.key("schema").err(&format!("not JSON: {e}")))?,
        // botocore sends a string; an object is taken as the schema itself.
        v @ Value::Object(_) => v,
        _ => {
            return Err(def_at
                .key("schema")
                .err("expected a JSON schema as a string"))
        }
    };
    let name = match optional(&mut def, "name") {
        None => "response".to_owned(),
        Some(n) => string(n, &def_at.key("name"))?,
    };
    if optional(&mut def, "description").is_some_and(|d| !asks_nothing(&d)) {
        params.hint("outputConfig.textFormat.description");
    }
    Ok(ResponseFormat::Schema {
        name,
        schema,
        strict: Some(true),
    })
}

// ---------------------------------------------------------------------------------------------
// Answers

/// Converse's `stopReason` (botocore's `StopReason` enum). A paused turn has no Converse
/// counterpart: the turn ended, as OpenAI's clients see it.
fn stop_reason(stop: StopReason) -> &'static str {
    match stop {
        StopReason::EndTurn | StopReason::PauseTurn => "end_turn",
        StopReason::StopSequence => "stop_sequence",
        StopReason::MaxTokens => "max_tokens",
        StopReason::ToolUse => "tool_use",
        StopReason::ContentFilter => "content_filtered",
        StopReason::ContextWindow => "model_context_window_exceeded",
    }
}

/// Converse's `TokenUsage`: `inputTokens` leaves out cache reads and writes (as Bedrock counts
/// them for the models that cache), `totalTokens` counts everything; cache writes are broken
/// down by TTL, the hour first.
fn usage_json(u: &Usage) -> Value {
    let input = u.uncached_input_tokens();
    let mut v = json!({
        "inputTokens": input,
        "outputTokens": u.completion_tokens,
        "totalTokens": input + u.cached_tokens + u.cache_creation_tokens + u.completion_tokens,
    });
    if u.cached_tokens > 0 {
        v["cacheReadInputTokens"] = u.cached_tokens.into();
    }
    if u.cache_creation_tokens > 0 {
        v["cacheWriteInputTokens"] = u.cache_creation_tokens.into();
        let hour = u.cache_creation_1h_tokens.min(u.cache_creation_tokens);
        let details: Vec<Value> = [("1h", hour), ("5m", u.cache_creation_tokens - hour)]
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .map(|(ttl, n)| json!({"ttl": ttl, "inputTokens": n}))
            .collect();
        v["cacheDetails"] = Value::Array(details);
    }
    v
}

/// One answer part as a Converse content block; parts Converse cannot show (empty text, an
/// image by URL, a tool result) are left out.
fn block_json(p: &Part) -> Option<Value> {
    match p {
        Part::Text(t) if t.text.is_empty() => None,
        Part::Text(t) => Some(json!({"text": t.text})),
        Part::Thinking { text, signature } => {
            let mut reasoning = json!({"text": text});
            if let Some(s) = signature {
                reasoning["signature"] = s.clone().into();
            }
            Some(json!({"reasoningContent": {"reasoningText": reasoning}}))
        }
        Part::RedactedThinking(data) => {
            Some(json!({"reasoningContent": {"redactedContent": data}}))
        }
        Part::ToolCall(c) => Some(json!({"toolUse": {
            "toolUseId": c.id, "name": c.name, "input": tool_input(&c.arguments),
        }})),
        Part::Image {
            source: ImageSource::Base64 { media_type, data },
            ..
        } => image_format(media_type)
            .map(|format| json!({"image": {"format": format, "source": {"bytes": data}}})),
        Part::Image { .. } | Part::ToolResult { .. } => None,
    }
}

/// Write a whole answer as a `ConverseResponse`. Latency is the gateway's to measure, not the
/// translation's: `metrics.latencyMs` is 0.
pub fn write_response(r: &ChatResponse) -> Vec<u8> {
    let content: Vec<Value> = r.content.iter().filter_map(block_json).collect();
    to_json(&json!({
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": stop_reason(r.stop),
        "usage": usage_json(&r.usage),
        "metrics": {"latencyMs": 0},
    }))
}

// ---------------------------------------------------------------------------------------------
// Streams

/// What a content block of the stream holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Text,
    Reasoning,
    Tool,
}

/// The block being written: its number in the internal stream, its Converse index, its kind.
#[derive(Debug, Clone, Copy)]
struct Open {
    from: usize,
    at: usize,
    kind: Kind,
}

/// Writes stream events as ConverseStream's event-stream frames: `messageStart`, each block's
/// deltas (a tool block opened by `contentBlockStart`, as Bedrock opens only those) and its
/// `contentBlockStop`, `messageStop`, then `metadata` with the final usage at the end. Blocks
/// are written one at a time and numbered from 0 as they appear, whatever the upstream's
/// numbers; clients such as Strands read deltas into the block last opened. An error ends the
/// stream with an exception frame.
#[derive(Debug, Default)]
pub struct EventWriter {
    started: bool,
    open: Option<Open>,
    /// The next block's index.
    next: usize,
    /// `messageStop` was written: content that follows has nowhere to go.
    stopped: bool,
    usage: Usage,
    /// `metadata` or an exception was written: nothing more goes out.
    ended: bool,
}

fn emit(kind: &str, payload: &Value, out: &mut Vec<u8>) {
    out.extend_from_slice(&eventstream::event(kind, &to_json(payload)));
}

/// The ConverseStream exception for an upstream error's kind (Anthropic's and OpenAI's error
/// types, and the Bedrock codec's): only the five the stream's union lists.
fn exception_type(kind: &str) -> &'static str {
    let k = kind.to_ascii_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| k.contains(w));
    if has(&["rate_limit", "throttl", "too_many", "quota"]) {
        "throttlingException"
    } else if has(&["overloaded", "unavailable", "not_ready"]) {
        "serviceUnavailableException"
    } else if has(&["invalid_request", "validation", "too_large", "bad_request"]) {
        "validationException"
    } else if has(&["api_error", "server_error", "internal"]) {
        "internalServerException"
    } else {
        "modelStreamErrorException"
    }
}

impl EventWriter {
    /// `messageStart`, once, before anything else.
    fn start(&mut self, out: &mut Vec<u8>) {
        if !self.started {
            self.started = true;
            emit("messageStart", &json!({"role": "assistant"}), out);
        }
    }

    /// The Converse index of block `from` as `kind`: the open block, or a new one (the open
    /// block is stopped first).
    fn block(&mut self, from: usize, kind: Kind, out: &mut Vec<u8>) -> usize {
        if let Some(o) = self.open.filter(|o| o.from == from && o.kind == kind) {
            return o.at;
        }
        self.close(out);
        let at = self.next;
        self.next += 1;
        self.open = Some(Open { from, at, kind });
        at
    }

    fn close(&mut self, out: &mut Vec<u8>) {
        if let Some(o) = self.open.take() {
            emit("contentBlockStop", &json!({"contentBlockIndex": o.at}), out);
        }
    }

    fn delta(at: usize, delta: Value, out: &mut Vec<u8>) {
        emit(
            "contentBlockDelta",
            &json!({"contentBlockIndex": at, "delta": delta}),
            out,
        );
    }

    /// A content event (text, reasoning, a tool call's start and arguments, a block's end).
    fn content(&mut self, ev: StreamEvent, out: &mut Vec<u8>) {
        match ev {
            StreamEvent::Text { index, text } if !text.is_empty() => {
                let at = self.block(index, Kind::Text, out);
                Self::delta(at, json!({ "text": text }), out);
            }
            StreamEvent::Thinking { index, text } if !text.is_empty() => {
                let at = self.block(index, Kind::Reasoning, out);
                Self::delta(at, json!({"reasoningContent": {"text": text}}), out);
            }
            StreamEvent::Signature { index, signature } => {
                let at = self.block(index, Kind::Reasoning, out);
                Self::delta(
                    at,
                    json!({"reasoningContent": {"signature": signature}}),
                    out,
                );
            }
            StreamEvent::ToolStart { index, id, name } => {
                if self
                    .open
                    .is_some_and(|o| o.from == index && o.kind == Kind::Tool)
                {
                    return;
                }
                // Always a new block, even for a number just seen as text.
                self.close(out);
                let at = self.block(index, Kind::Tool, out);
                emit(
                    "contentBlockStart",
                    &json!({"contentBlockIndex": at,
                        "start": {"toolUse": {"toolUseId": id, "name": name}}}),
                    out,
                );
            }
            StreamEvent::ToolArgs { index, json } => {
                // Arguments of a call that is not open (no start, or already stopped) have
                // no block to go to.
                let Some(o) = self
                    .open
                    .filter(|o| o.from == index && o.kind == Kind::Tool)
                else {
                    return;
                };
                if !json.is_empty() {
                    Self::delta(o.at, json!({"toolUse": {"input": json}}), out);
                }
            }
            StreamEvent::BlockStop { index } if self.open.is_some_and(|o| o.from == index) => {
                self.close(out);
            }
            _ => {}
        }
    }

    /// `messageStop`, once, after the open block's stop.
    fn stop(&mut self, reason: StopReason, out: &mut Vec<u8>) {
        if self.stopped {
            return;
        }
        self.start(out);
        self.close(out);
        self.stopped = true;
        emit(
            "messageStop",
            &json!({"stopReason": stop_reason(reason)}),
            out,
        );
    }

    /// The end: `messageStop` if the upstream gave no reason, then `metadata`.
    fn finish(&mut self, out: &mut Vec<u8>) {
        self.stop(StopReason::EndTurn, out);
        emit(
            "metadata",
            &json!({"usage": usage_json(&self.usage), "metrics": {"latencyMs": 0}}),
            out,
        );
        self.ended = true;
    }

    /// An exception frame; nothing follows it.
    fn fail(&mut self, kind: &str, message: &str, out: &mut Vec<u8>) {
        out.extend_from_slice(&eventstream::exception(exception_type(kind), message));
        self.ended = true;
    }

    /// Append the frames for one internal event to `out`. Nothing follows the end
    /// (`metadata`) or an exception.
    pub fn write(&mut self, ev: StreamEvent, out: &mut Vec<u8>) {
        if self.ended {
            return;
        }
        match ev {
            StreamEvent::Start { usage, .. } => {
                self.usage = self.usage.merge(usage);
                self.start(out);
            }
            StreamEvent::Stop { reason, .. } => self.stop(reason, out),
            StreamEvent::Usage(u) => self.usage = self.usage.merge(u),
            StreamEvent::Done => self.finish(out),
            StreamEvent::Error { kind, message } => self.fail(&kind, &message, out),
            // Event streams have no keep-alive frame.
            StreamEvent::Ping => {}
            content => {
                if !self.stopped {
                    self.start(out);
                    self.content(content, out);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eventstream::Decoder;
    use crate::ir::Message;
    use crate::testing::dropped_names;
    use sluice_core::endpoint::Dialect;

    fn strict() -> Params {
        Params::new(false, Dialect::Converse)
    }

    fn dropping() -> Params {
        Params::new(true, Dialect::Converse)
    }

    fn parse(body: Value, params: &mut Params) -> Result<ChatRequest, TranslateError> {
        parse_request(body.to_string().as_bytes(), params)
    }

    fn text(t: &str) -> Part {
        Part::Text(Text::plain(t))
    }

    fn cached(t: &str) -> Part {
        Part::Text(Text {
            text: t.into(),
            cache_control: Some(json!({"type": "ephemeral"})),
        })
    }

    /// The frames of a stream: (event or exception type, message type, payload).
    fn frames(bytes: &[u8]) -> Vec<(String, String, Value)> {
        let mut d = Decoder::default();
        d.push(bytes);
        let mut out = Vec::new();
        while let Some(m) = d.next_message().unwrap() {
            let kind = m
                .header(":event-type")
                .or(m.header(":exception-type"))
                .unwrap()
                .to_owned();
            assert_eq!(m.header(":content-type"), Some("application/json"));
            let payload = serde_json::from_slice(&m.payload).unwrap();
            out.push((kind, m.header(":message-type").unwrap().to_owned(), payload));
        }
        assert!(!d.has_partial());
        out
    }

    fn write_all(events: Vec<StreamEvent>) -> Vec<(String, String, Value)> {
        let mut w = EventWriter::default();
        let mut out = Vec::new();
        for ev in events {
            w.write(ev, &mut out);
        }
        frames(&out)
    }

    #[test]
    fn a_multi_turn_boto3_request_with_tools() {
        let body = json!({
            "modelId": "anthropic.claude-sonnet-4",
            "system": [{"text": "Be brief."}, {"cachePoint": {"type": "default"}},
                {"text": "Use tools."}],
            "messages": [
                {"role": "user", "content": [
                    {"text": "Weather in Rome? Here is a map."},
                    {"image": {"format": "png", "source": {"bytes": "iVBORw0KGgo="}}},
                    {"cachePoint": {"type": "default", "ttl": "1h"}},
                ]},
                {"role": "assistant", "content": [
                    {"reasoningContent": {"reasoningText": {"text": "Need the tool.",
                        "signature": "sig-1"}}},
                    {"reasoningContent": {"redactedContent": "b64redacted"}},
                    {"text": "Checking."},
                    {"toolUse": {"toolUseId": "tooluse_1", "name": "weather",
                        "input": {"city": "Rome"}}},
                    {"toolUse": {"toolUseId": "tooluse_2", "name": "time", "input": {}}},
                ]},
                {"role": "user", "content": [
                    {"toolResult": {"toolUseId": "tooluse_1", "content": [{"text": "18C"}]}},
                    {"toolResult": {"toolUseId": "tooluse_2", "status": "error",
                        "content": [{"json": {"error": "no clock"}},
                            {"image": {"format": "jpeg", "source": {"bytes": "/9j/"}}}]}},
                    {"cachePoint": {"type": "default"}},
                    {"text": "And?"},
                ]},
            ],
            "inferenceConfig": {"maxTokens": 512, "temperature": 0.3, "topP": 0.9,
                "stopSequences": ["END"]},
            "toolConfig": {
                "tools": [
                    {"toolSpec": {"name": "weather", "description": "Weather now",
                        "inputSchema": {"json": {"type": "object",
                            "properties": {"city": {"type": "string"}}}}}},
                    {"toolSpec": {"name": "time", "inputSchema": {"json": {"type": "object"}}}},
                    {"cachePoint": {"type": "default"}},
                ],
                "toolChoice": {"auto": {}},
            },
        });
        let mut params = strict();
        let req = parse(body, &mut params).unwrap();
        assert!(params.dropped().is_empty(), "{:?}", params.dropped());
        assert_eq!(req.model, "");
        assert!(!req.stream);
        let system = [
            Text {
                text: "Be brief.".into(),
                cache_control: Some(json!({"type": "ephemeral"})),
            },
            Text::plain("Use tools."),
        ];
        assert_eq!(req.system, system);
        let expected = vec![
            Message {
                role: Role::User,
                content: vec![
                    text("Weather in Rome? Here is a map."),
                    Part::Image {
                        source: ImageSource::Base64 {
                            media_type: "image/png".into(),
                            data: "iVBORw0KGgo=".into(),
                        },
                        cache_control: Some(json!({"type": "ephemeral", "ttl": "1h"})),
                    },
                ],
            },
            Message {
                role: Role::Assistant,
                content: vec![
                    Part::Thinking {
                        text: "Need the tool.".into(),
                        signature: Some("sig-1".into()),
                    },
                    Part::RedactedThinking("b64redacted".into()),
                    text("Checking."),
                    Part::ToolCall(ToolCall {
                        id: "tooluse_1".into(),
                        name: "weather".into(),
                        arguments: r#"{"city":"Rome"}"#.into(),
                    }),
                    Part::ToolCall(ToolCall {
                        id: "tooluse_2".into(),
                        name: "time".into(),
                        arguments: "{}".into(),
                    }),
                ],
            },
            Message {
                role: Role::User,
                content: vec![
                    Part::ToolResult {
                        id: "tooluse_1".into(),
                        content: vec![text("18C")],
                        is_error: false,
                        cache_control: None,
                    },
                    Part::ToolResult {
                        id: "tooluse_2".into(),
                        content: vec![
                            text(r#"{"error":"no clock"}"#),
                            Part::Image {
                                source: ImageSource::Base64 {
                                    media_type: "image/jpeg".into(),
                                    data: "/9j/".into(),
                                },
                                cache_control: None,
                            },
                        ],
                        is_error: true,
                        cache_control: Some(json!({"type": "ephemeral"})),
                    },
                    text("And?"),
                ],
            },
        ];
        assert_eq!(req.messages, expected);
        assert_eq!(req.max_tokens, Some(512));
        assert_eq!(req.temperature, Some(0.3));
        assert_eq!(req.top_p, Some(0.9));
        assert_eq!(req.stop, ["END"]);
        assert_eq!(req.tools.len(), 2);
        assert_eq!(req.tools[0].name, "weather");
        assert_eq!(req.tools[0].description.as_deref(), Some("Weather now"));
        assert_eq!(
            req.tools[0].parameters["properties"]["city"]["type"],
            "string"
        );
        assert_eq!(req.tools[0].cache_control, None);
        assert_eq!(
            req.tools[1].cache_control,
            Some(json!({"type": "ephemeral"}))
        );
        assert_eq!(req.tool_choice, Some(ToolChoice::Auto));
        assert_eq!(req.thinking, None);
    }

    #[test]
    fn a_cache_point_opening_a_turn_marks_the_turn_before() {
        let body = json!({"messages": [
            {"role": "user", "content": [{"text": "long context"}]},
            {"role": "assistant", "content": [{"text": "ok"}]},
            {"role": "user", "content": [{"cachePoint": {"type": "default"}}, {"text": "q"}]},
        ]});
        let req = parse(body, &mut strict()).unwrap();
        assert_eq!(req.messages[1].content, [cached("ok")]);
        assert_eq!(req.messages[2].content, [text("q")]);
        // Nothing before it, or a block that cannot carry it: a hint.
        let body = json!({"messages": [{"role": "user", "content": [
            {"cachePoint": {"type": "default"}}, {"text": "q"}]}],
            "system": [{"cachePoint": {"type": "default"}}]});
        let mut params = strict();
        parse(body, &mut params).unwrap();
        assert_eq!(dropped_names(&params), ["cachePoint"]);
    }

    #[test]
    fn tool_choice_variants() {
        let with = |choice: Value| {
            json!({"messages": [{"role": "user", "content": [{"text": "hi"}]}],
                "toolConfig": {"tools": [{"toolSpec": {"name": "f",
                    "inputSchema": {"json": {"type": "object"}}}}], "toolChoice": choice}})
        };
        let choice = |c: Value| parse(with(c), &mut strict()).unwrap().tool_choice;
        assert_eq!(choice(json!({"auto": {}})), Some(ToolChoice::Auto));
        assert_eq!(choice(json!({"any": {}})), Some(ToolChoice::Any));
        assert_eq!(
            choice(json!({"tool": {"name": "f"}})),
            Some(ToolChoice::Tool("f".into()))
        );
        let err = parse(with(json!({"auto": {}, "any": {}})), &mut strict()).unwrap_err();
        assert!(err.to_string().contains("toolConfig.toolChoice"), "{err}");
        let err = parse(with(json!({"tool": {}})), &mut strict()).unwrap_err();
        assert!(
            err.to_string()
                .contains("toolConfig.toolChoice.tool: missing `name`"),
            "{err}"
        );
        let err = parse(with(json!({"none": {}})), &mut strict()).unwrap_err();
        assert!(err.to_string().contains("unknown member `none`"), "{err}");
    }

    #[test]
    fn thinking_and_model_fields() {
        let with = |extra: Value| {
            json!({"messages": [{"role": "user", "content": [{"text": "hi"}]}],
                "additionalModelRequestFields": extra})
        };
        let read = |extra: Value| {
            let mut params = strict();
            let req = parse(with(extra), &mut params).unwrap();
            let dropped: Vec<String> = params.dropped().iter().map(|d| d.to_string()).collect();
            (req, dropped)
        };
        let (req, dropped) = read(
            json!({"thinking": {"type": "enabled", "budget_tokens": 2048},
            "top_k": 40, "anthropic_beta": ["interleaved-thinking-2025-05-14"]}),
        );
        assert_eq!(req.thinking, Some(Thinking::Budget(2048)));
        assert_eq!(req.top_k, Some(40));
        assert_eq!(dropped, ["additionalModelRequestFields.anthropic_beta"]);
        let (req, _) =
            read(json!({"reasoning_config": {"type": "enabled", "budget_tokens": 1024}}));
        assert_eq!(req.thinking, Some(Thinking::Budget(1024)));
        let (req, _) = read(json!({"thinking": {"type": "disabled"}}));
        assert_eq!(req.thinking, Some(Thinking::Effort(Effort::None)));
        let (req, _) = read(json!({"reasoningConfig": {"type": "enabled",
            "maxReasoningEffort": "high"}}));
        assert_eq!(req.thinking, Some(Thinking::Effort(Effort::High)));
        let (req, _) = read(json!({"reasoning_effort": "low"}));
        assert_eq!(req.thinking, Some(Thinking::Effort(Effort::Low)));
        // Adaptive thinking takes its level from outputConfig.effort; the level alone too.
        let mut body = with(json!({"thinking": {"type": "adaptive"}}));
        body["outputConfig"] = json!({"effort": "max"});
        let req = parse(body, &mut strict()).unwrap();
        assert_eq!(req.thinking, Some(Thinking::Adaptive(Some(Effort::Max))));
        let mut body = with(json!({}));
        body["outputConfig"] = json!({"effort": "medium", "textFormat": {"type": "json_schema",
            "structure": {"jsonSchema": {"schema": "{\"type\":\"object\"}", "name": "out"}}}});
        let req = parse(body, &mut strict()).unwrap();
        assert_eq!(req.thinking, Some(Thinking::Adaptive(Some(Effort::Medium))));
        assert_eq!(
            req.response_format,
            Some(ResponseFormat::Schema {
                name: "out".into(),
                schema: json!({"type": "object"}),
                strict: Some(true),
            })
        );
        // A document that is not an object, a budget that is no count.
        let err = parse(with(json!([1])), &mut strict()).unwrap_err();
        assert!(
            err.to_string().contains("additionalModelRequestFields"),
            "{err}"
        );
        let err = parse(
            with(json!({"thinking": {"type": "enabled", "budget_tokens": "lots"}})),
            &mut strict(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("thinking.budget_tokens"), "{err}");
    }

    #[test]
    fn aws_state_is_refused_and_hints_are_dropped() {
        let base = || json!({"messages": [{"role": "user", "content": [{"text": "hi"}]}]});
        for key in ["guardrailConfig", "promptVariables"] {
            let mut body = base();
            body[key] = json!({"guardrailIdentifier": "gr-1", "var": {"text": "x"}});
            for mut params in [strict(), dropping()] {
                let err = parse(body.clone(), &mut params).unwrap_err();
                assert!(
                    matches!(&err, TranslateError::Unsupported(k) if k == key),
                    "{err}"
                );
            }
        }
        let mut body = base();
        body["requestMetadata"] = json!({"team": "a"});
        body["performanceConfig"] = json!({"latency": "optimized"});
        body["serviceTier"] = json!({"type": "flex"});
        body["additionalModelResponseFieldPaths"] = json!(["/stop_sequence"]);
        body["guardrailConfig"] = json!({});
        body["modelId"] = json!("ignored");
        let mut params = strict();
        parse(body, &mut params).unwrap();
        assert_eq!(
            dropped_names(&params),
            [
                "additionalModelResponseFieldPaths",
                "performanceConfig",
                "requestMetadata",
                "serviceTier"
            ]
        );
    }

    #[test]
    fn content_no_target_reads_is_refused_by_name_or_dropped() {
        let with = |block: Value| json!({"messages": [{"role": "user", "content": [{"text": "see"}, block]}]});
        let cases = [
            (
                json!({"document": {"format": "pdf", "name": "a", "source": {"bytes": "JVBE"}}}),
                "document",
            ),
            (
                json!({"video": {"format": "mp4", "source": {"bytes": "AAAA"}}}),
                "video",
            ),
            (
                json!({"image": {"format": "png", "source": {"s3Location": {"uri": "s3://b/k"}}}}),
                "image.source.s3Location",
            ),
            (
                json!({"toolResult": {"toolUseId": "t", "content": [
                    {"document": {"name": "d", "source": {"text": "x"}}}]}}),
                "toolResult.content.document",
            ),
            (
                json!({"toolUse": {"toolUseId": "t", "name": "web", "input": {},
                    "type": "server_tool_use"}}),
                "toolUse.type.server_tool_use",
            ),
        ];
        for (block, name) in cases {
            let err = parse(with(block.clone()), &mut strict()).unwrap_err();
            assert!(
                matches!(&err, TranslateError::Unsupported(k) if k == name),
                "{name}: {err}"
            );
            let mut params = dropping();
            let req = parse(with(block), &mut params).unwrap();
            assert_eq!(dropped_names(&params), [name]);
            let content = &req.messages[0].content;
            assert!(
                content.len() == 1 || matches!(content[1], Part::ToolResult { .. }),
                "{content:?}"
            );
        }
        let body = json!({"messages": [{"role": "user", "content": [{"text": "hi"}]}],
            "toolConfig": {"tools": [{"systemTool": {"name": "nova_grounding"}}]}});
        let err = parse(body, &mut strict()).unwrap_err();
        assert!(
            matches!(&err, TranslateError::Unsupported(k) if k == "toolConfig.tools.systemTool")
        );
    }

    #[test]
    fn guard_and_cited_content_are_carried_as_text() {
        let body = json!({
        "system": [{"guardContent": {"text": {"text": "policy", "qualifiers": ["guard_content"]}}}],
        "messages": [
            {"role": "user", "content": [{"guardContent": {"text": {"text": "q"}}}]},
            {"role": "assistant", "content": [{"citationsContent": {
                "content": [{"text": "cited "}, {"text": "answer"}],
                "citations": [{"title": "doc"}]}}]},
            {"role": "user", "content": [{"toolAddition": {"tool": {"name": "x"}}},
                {"text": "more"}]},
        ]});
        let mut params = strict();
        let req = parse(body, &mut params).unwrap();
        assert_eq!(req.system, [Text::plain("policy")]);
        assert_eq!(req.messages[0].content, [text("q")]);
        assert_eq!(req.messages[1].content, [text("cited answer")]);
        assert_eq!(req.messages[2].content, [text("more")]);
        assert_eq!(
            dropped_names(&params),
            ["citationsContent.citations", "guardContent", "toolAddition"]
        );
    }

    #[test]
    fn bad_input_names_the_field() {
        let msg = |body: Value| parse(body, &mut strict()).unwrap_err().to_string();
        let m = msg(json!({"messages": [{"role": "user", "content": [
            {"text": "a"}, {"image": {"format": "tiff", "source": {"bytes": "AA=="}}}]}]}));
        assert!(m.contains("messages[0].content[1].image.format"), "{m}");
        let m = msg(json!({"messages": [{"role": "robot", "content": []}]}));
        assert!(m.contains("messages[0].role: unknown role `robot`"), "{m}");
        let m = msg(json!({"messages": [{"role": "user"}]}));
        assert!(m.contains("messages[0]: missing `content`"), "{m}");
        let m = msg(json!({"messages": [{"role": "user", "content": [{}]}]}));
        assert!(m.contains("messages[0].content[0]: no member set"), "{m}");
        let m = msg(json!({"messages": [{"role": "user", "content": [
            {"text": "a", "image": {}}]}]}));
        assert!(m.contains("both set"), "{m}");
        let m = msg(json!({"messages": [{"role": "user", "content": [
            {"toolResult": {"toolUseId": "t", "status": "maybe", "content": []}}]}]}));
        assert!(m.contains("toolResult.status"), "{m}");
        let m = msg(json!({"messages": [], "inferenceConfig": {"maxTokens": 0}}));
        assert!(m.contains("inferenceConfig.maxTokens"), "{m}");
        let m = msg(json!({"messages": [], "inferenceConfig": {"temperature": "hot"}}));
        assert!(m.contains("inferenceConfig.temperature"), "{m}");
        let m =
            msg(json!({"messages": [], "toolConfig": {"tools": [{"toolSpec": {"name": "f"}}]}}));
        assert!(
            m.contains("toolConfig.tools[0].toolSpec: missing `inputSchema`"),
            "{m}"
        );
        let m = msg(json!({"messages": [], "system": [{"cachePoint": {"type": "forever"}}]}));
        assert!(m.contains("system[0].cachePoint.type"), "{m}");
        let m = msg(
            json!({"messages": [], "outputConfig": {"textFormat": {"type": "json_schema",
            "structure": {"jsonSchema": {"schema": "{nope"}}}}}),
        );
        assert!(m.contains("jsonSchema.schema: not JSON"), "{m}");
        assert!(matches!(
            parse(json!({"system": []}), &mut strict()),
            Err(TranslateError::BadRequest(_))
        ));
        assert!(matches!(
            parse_request(b"{not json", &mut strict()),
            Err(TranslateError::BadRequest(_))
        ));
    }

    #[test]
    fn a_whole_answer_with_reasoning_text_and_a_tool_call() {
        let r = ChatResponse {
            id: "msg_1".into(),
            model: "m".into(),
            content: vec![
                Part::Thinking {
                    text: "Think.".into(),
                    signature: Some("sig".into()),
                },
                Part::RedactedThinking("opaque".into()),
                text("Let me check."),
                text(""),
                Part::ToolCall(ToolCall {
                    id: "tooluse_1".into(),
                    name: "weather".into(),
                    arguments: r#"{"city":"Rome"}"#.into(),
                }),
            ],
            stop: StopReason::ToolUse,
            stop_sequence: None,
            usage: Usage {
                prompt_tokens: 110,
                completion_tokens: 20,
                cached_tokens: 60,
                cache_creation_tokens: 40,
                cache_creation_1h_tokens: 10,
                ..Usage::default()
            },
            created: 0,
        };
        let v: Value = serde_json::from_slice(&write_response(&r)).unwrap();
        assert_eq!(
            v,
            json!({
                "output": {"message": {"role": "assistant", "content": [
                    {"reasoningContent": {"reasoningText": {"text": "Think.", "signature": "sig"}}},
                    {"reasoningContent": {"redactedContent": "opaque"}},
                    {"text": "Let me check."},
                    {"toolUse": {"toolUseId": "tooluse_1", "name": "weather",
                        "input": {"city": "Rome"}}},
                ]}},
                "stopReason": "tool_use",
                "usage": {"inputTokens": 10, "outputTokens": 20, "totalTokens": 130,
                    "cacheReadInputTokens": 60, "cacheWriteInputTokens": 40,
                    "cacheDetails": [{"ttl": "1h", "inputTokens": 10},
                        {"ttl": "5m", "inputTokens": 30}]},
                "metrics": {"latencyMs": 0},
            })
        );
        // Every stop reason is one botocore's enum lists; no cache, no cache fields.
        for (stop, name) in [
            (StopReason::EndTurn, "end_turn"),
            (StopReason::StopSequence, "stop_sequence"),
            (StopReason::MaxTokens, "max_tokens"),
            (StopReason::ContentFilter, "content_filtered"),
            (StopReason::ContextWindow, "model_context_window_exceeded"),
            (StopReason::PauseTurn, "end_turn"),
        ] {
            let r = ChatResponse {
                stop,
                content: vec![text("x")],
                usage: Usage {
                    prompt_tokens: 3,
                    completion_tokens: 1,
                    ..Usage::default()
                },
                ..r.clone()
            };
            let v: Value = serde_json::from_slice(&write_response(&r)).unwrap();
            assert_eq!(v["stopReason"], name);
            assert_eq!(
                v["usage"],
                json!({"inputTokens": 3, "outputTokens": 1, "totalTokens": 4})
            );
        }
    }

    #[test]
    fn a_stream_with_reasoning_text_and_a_tool_call() {
        let frames = write_all(vec![
            StreamEvent::Start {
                id: "msg_1".into(),
                model: "m".into(),
                usage: Usage {
                    prompt_tokens: 50,
                    ..Usage::default()
                },
            },
            StreamEvent::Ping,
            StreamEvent::Thinking {
                index: 0,
                text: "Hmm".into(),
            },
            StreamEvent::Signature {
                index: 0,
                signature: "sig".into(),
            },
            StreamEvent::BlockStop { index: 0 },
            // The upstream numbers its blocks with a gap: Converse's stay contiguous.
            StreamEvent::Text {
                index: 2,
                text: "Hel".into(),
            },
            StreamEvent::Text {
                index: 2,
                text: "lo".into(),
            },
            StreamEvent::BlockStop { index: 2 },
            StreamEvent::ToolStart {
                index: 3,
                id: "tooluse_1".into(),
                name: "weather".into(),
            },
            StreamEvent::ToolArgs {
                index: 3,
                json: r#"{"city":"#.into(),
            },
            StreamEvent::ToolArgs {
                index: 3,
                json: r#""Rome"}"#.into(),
            },
            StreamEvent::BlockStop { index: 3 },
            StreamEvent::Stop {
                reason: StopReason::ToolUse,
                stop_sequence: None,
            },
            StreamEvent::Usage(Usage {
                prompt_tokens: 50,
                completion_tokens: 12,
                ..Usage::default()
            }),
            StreamEvent::Done,
            StreamEvent::Text {
                index: 9,
                text: "after the end".into(),
            },
        ]);
        let expected: Vec<(&str, Value)> = vec![
            ("messageStart", json!({"role": "assistant"})),
            (
                "contentBlockDelta",
                json!({"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": "Hmm"}}}),
            ),
            (
                "contentBlockDelta",
                json!({"contentBlockIndex": 0,
                    "delta": {"reasoningContent": {"signature": "sig"}}}),
            ),
            ("contentBlockStop", json!({"contentBlockIndex": 0})),
            (
                "contentBlockDelta",
                json!({"contentBlockIndex": 1, "delta": {"text": "Hel"}}),
            ),
            (
                "contentBlockDelta",
                json!({"contentBlockIndex": 1, "delta": {"text": "lo"}}),
            ),
            ("contentBlockStop", json!({"contentBlockIndex": 1})),
            (
                "contentBlockStart",
                json!({"contentBlockIndex": 2,
                    "start": {"toolUse": {"toolUseId": "tooluse_1", "name": "weather"}}}),
            ),
            (
                "contentBlockDelta",
                json!({"contentBlockIndex": 2, "delta": {"toolUse": {"input": "{\"city\":"}}}),
            ),
            (
                "contentBlockDelta",
                json!({"contentBlockIndex": 2, "delta": {"toolUse": {"input": "\"Rome\"}"}}}),
            ),
            ("contentBlockStop", json!({"contentBlockIndex": 2})),
            ("messageStop", json!({"stopReason": "tool_use"})),
            (
                "metadata",
                json!({"usage": {"inputTokens": 50, "outputTokens": 12, "totalTokens": 62},
                    "metrics": {"latencyMs": 0}}),
            ),
        ];
        assert_eq!(frames.len(), expected.len(), "{frames:#?}");
        for ((kind, message_type, payload), (want_kind, want)) in frames.iter().zip(expected) {
            assert_eq!(message_type, "event");
            assert_eq!(kind, want_kind);
            assert_eq!(payload, &want, "{kind}");
        }
    }

    #[test]
    fn blocks_left_open_are_stopped_and_a_missing_stop_is_end_turn() {
        let frames = write_all(vec![
            StreamEvent::Text {
                index: 0,
                text: "a".into(),
            },
            StreamEvent::ToolStart {
                index: 1,
                id: "t1".into(),
                name: "f".into(),
            },
            StreamEvent::ToolStart {
                index: 2,
                id: "t2".into(),
                name: "g".into(),
            },
            // Arguments of a call already stopped have no block to go to.
            StreamEvent::ToolArgs {
                index: 1,
                json: "{}".into(),
            },
            StreamEvent::Done,
        ]);
        let names: Vec<(&str, Value)> = frames
            .iter()
            .map(|(k, _, p)| (k.as_str(), p["contentBlockIndex"].clone()))
            .collect();
        assert_eq!(
            names,
            [
                ("messageStart", Value::Null),
                ("contentBlockDelta", json!(0)),
                ("contentBlockStop", json!(0)),
                ("contentBlockStart", json!(1)),
                ("contentBlockStop", json!(1)),
                ("contentBlockStart", json!(2)),
                ("contentBlockStop", json!(2)),
                ("messageStop", Value::Null),
                ("metadata", Value::Null),
            ]
        );
        assert_eq!(frames[7].2, json!({"stopReason": "end_turn"}));
    }

    #[test]
    fn an_error_is_an_exception_frame_and_the_end() {
        let frames = write_all(vec![
            StreamEvent::Start {
                id: String::new(),
                model: String::new(),
                usage: Usage::default(),
            },
            StreamEvent::Text {
                index: 0,
                text: "partial".into(),
            },
            StreamEvent::Error {
                kind: "overloaded_error".into(),
                message: "Overloaded".into(),
            },
            StreamEvent::Text {
                index: 0,
                text: "more".into(),
            },
            StreamEvent::Done,
        ]);
        assert_eq!(frames.len(), 3, "{frames:#?}");
        let (kind, message_type, payload) = &frames[2];
        assert_eq!(kind, "serviceUnavailableException");
        assert_eq!(message_type, "exception");
        assert_eq!(payload, &json!({"message": "Overloaded"}));
        for (kind, exception) in [
            ("rate_limit_error", "throttlingException"),
            ("invalid_request_error", "validationException"),
            ("api_error", "internalServerException"),
            ("server_error", "internalServerException"),
            ("timeout", "modelStreamErrorException"),
        ] {
            assert_eq!(exception_type(kind), exception, "{kind}");
        }
    }
}
