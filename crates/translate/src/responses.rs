//! OpenAI's Responses API ⇄ the internal representation: a `/v1/responses` request read into a
//! chat request (with the settings its answer repeats, [`Echo`]), a whole answer written as a
//! `response` object, and a stream's events written as the Responses API's typed SSE events.
//! Used only when the deployment does not speak Responses (Anthropic, Gemini, Vertex, Bedrock);
//! an OpenAI deployment gets the body passed through.
//!
//! sluice keeps no Responses state: what names a stored response or conversation
//! (`previous_response_id`, `conversation`, `prompt`, `background`, `item_reference` items) is
//! refused by name even with `drop_params`, since the request without it is another request.
//! Built-in tools (web search, file search, computer use, ...) run only at OpenAI, so they are
//! refused by name as content the target cannot act on (dropped with `drop_params`).
//!
//! Reasoning goes both ways: a thinking block is a `reasoning` item whose one summary part is
//! the text and whose `encrypted_content` is the signature; redacted thinking is a reasoning
//! item with no summary and the data as `encrypted_content`. A client that sends the items
//! back (as Responses clients do when they keep the conversation) sends the provider its own
//! blocks again.

use serde_json::{json, Map, Value};

use super::ir::{
    ChatRequest, ChatResponse, Effort, ImageSource, Part, ResponseFormat, Role, StopReason,
    StreamEvent, Text, Thinking, Tool, ToolCall, ToolChoice,
};
use super::params::{asks_nothing, Key};
use super::{now, to_json, Params, TranslateError};
use sluice_core::usage::Usage;

// ---------------------------------------------------------------------------------------------
// Requests

/// What the answer repeats of the request: a Responses object states the settings it was made
/// with, and a client (or the SDK's parsing of structured output and strict tools) reads them
/// back. The values are the request's own JSON, kept only for settings that were carried; a
/// setting that was dropped is stated as what sluice did instead.
#[derive(Debug, Clone, Default)]
pub struct Echo {
    /// `instructions` (a string).
    pub instructions: Option<Value>,
    /// The function tools as sent (built-in tools are refused, or dropped and not repeated).
    pub tools: Vec<Value>,
    /// `tool_choice` as sent (`"auto"` when absent or dropped).
    pub tool_choice: Option<Value>,
    /// `parallel_tool_calls` (`true` when absent).
    pub parallel_tool_calls: Option<Value>,
    /// `temperature`.
    pub temperature: Option<Value>,
    /// `top_p`.
    pub top_p: Option<Value>,
    /// `max_output_tokens`.
    pub max_output_tokens: Option<Value>,
    /// `max_tool_calls` (it limits built-in tools, none of which run here: nothing is lost).
    pub max_tool_calls: Option<Value>,
    /// `metadata`: the client's tags, only ever repeated.
    pub metadata: Option<Value>,
    /// `reasoning` as sent (`effort`, `summary`).
    pub reasoning: Option<Value>,
    /// `text` as sent (`format`, `verbosity`); the SDK parses structured output by its format.
    pub text: Option<Value>,
    /// `user`.
    pub user: Option<Value>,
    /// `safety_identifier`.
    pub safety_identifier: Option<Value>,
    /// `previous_response_id` (refused today, so always `None` from [`parse_request`]; here
    /// for when sluice keeps responses).
    pub previous_response_id: Option<Value>,
    /// The tool namespaces the request declared (`{"type": "namespace"}`): their functions go
    /// to the model as `{namespace}__{name}`, and a call to one is answered with its
    /// `namespace` and plain `name` again.
    pub namespaces: Vec<String>,
    /// Whether the answer is kept for later retrieval (`store`, true unless the request says
    /// `false`): the gateway keeps it, whatever provider answers.
    pub store: bool,
}

/// The separator of a namespace and a function's name in the name the model sees (tool names
/// take letters, digits, `_` and `-` at every provider).
const NAMESPACED: &str = "__";

/// A call's namespace (one of those the request declared) and its function's name, from the
/// name the model used.
fn split_call<'n>(namespaces: &[String], name: &'n str) -> (Option<&'n str>, &'n str) {
    for ns in namespaces {
        if let Some(rest) = name
            .strip_prefix(ns.as_str())
            .and_then(|r| r.strip_prefix(NAMESPACED))
        {
            return (Some(&name[..ns.len()]), rest);
        }
    }
    (None, name)
}

impl Echo {
    /// The settings members of a `response` object, with OpenAI's defaults for those the
    /// request left out (the SDK's model requires `tools`, `tool_choice` and
    /// `parallel_tool_calls`).
    fn settings(&self) -> Map<String, Value> {
        let or = |v: &Option<Value>, default: Value| v.clone().unwrap_or(default);
        let mut m = Map::new();
        m.insert("instructions".into(), or(&self.instructions, Value::Null));
        m.insert("tools".into(), Value::Array(self.tools.clone()));
        m.insert("tool_choice".into(), or(&self.tool_choice, json!("auto")));
        m.insert(
            "parallel_tool_calls".into(),
            or(&self.parallel_tool_calls, json!(true)),
        );
        m.insert("temperature".into(), or(&self.temperature, Value::Null));
        m.insert("top_p".into(), or(&self.top_p, Value::Null));
        m.insert(
            "max_output_tokens".into(),
            or(&self.max_output_tokens, Value::Null),
        );
        m.insert(
            "max_tool_calls".into(),
            or(&self.max_tool_calls, Value::Null),
        );
        m.insert("metadata".into(), or(&self.metadata, json!({})));
        m.insert(
            "reasoning".into(),
            or(&self.reasoning, json!({"effort": null, "summary": null})),
        );
        m.insert(
            "text".into(),
            or(&self.text, json!({"format": {"type": "text"}})),
        );
        // `truncation: auto` is noted as dropped: what the answer was made with is `disabled`.
        m.insert("truncation".into(), json!("disabled"));
        m.insert("user".into(), or(&self.user, Value::Null));
        m.insert(
            "safety_identifier".into(),
            or(&self.safety_identifier, Value::Null),
        );
        m.insert(
            "previous_response_id".into(),
            or(&self.previous_response_id, Value::Null),
        );
        m.insert("store".into(), self.store.into());
        m.insert("background".into(), false.into());
        m
    }
}

/// Members that name state sluice does not keep (a stored response, a conversation, a stored
/// prompt) or ask to be answered later: refused even with `drop_params`, since the request
/// without them is a different request.
const STATEFUL: [&str; 4] = [
    "previous_response_id",
    "conversation",
    "prompt",
    "background",
];

/// A top-level Responses key the reader does not carry: LiteLLM's routing and cache fields and
/// the stream's options are sluice's; `truncation: disabled` is what every target does;
/// log-probabilities are what no translated target gives (meaning); everything else
/// (`store: true`, `prompt_cache_key`, `service_tier`, `truncation: auto`, future fields) is a
/// hint.
pub fn responses_key(key: &str, value: &Value) -> Key {
    match key {
        "fallbacks" | "num_retries" | "timeout" | "cache" | "stream_options" => Key::Carried,
        // The gateway keeps the answer (`store`, OpenAI's default), whatever serves it.
        "store" => Key::Carried,
        "truncation" if value == "disabled" => Key::Carried,
        "top_logprobs" => Key::Meaning,
        _ => Key::Hint,
    }
}

/// `include` values: encrypted reasoning is always given; log-probabilities cannot be; the
/// rest concern built-in tools or inputs, and are hints.
fn include(value: Value, params: &mut Params) -> Result<(), TranslateError> {
    let Value::Array(values) = value else {
        return Err(TranslateError::invalid("include", "expected a list"));
    };
    for v in values {
        match v.as_str() {
            Some("reasoning.encrypted_content") => {}
            Some("message.output_text.logprobs") => {
                params.meaning("include.message.output_text.logprobs")?;
            }
            Some(other) => params.hint(format!("include.{other}")),
            None => return Err(TranslateError::invalid("include", "expected strings")),
        }
    }
    Ok(())
}

/// Read an OpenAI Responses request into a chat request and the settings its answer repeats.
/// Keys it does not carry are noted as hints or refused by `params` (see [`responses_key`]).
pub fn parse_request(
    body: &[u8],
    params: &mut Params,
) -> Result<(ChatRequest, Echo), TranslateError> {
    let mut raw: Map<String, Value> =
        serde_json::from_slice(body).map_err(TranslateError::bad_request)?;
    for key in STATEFUL {
        if raw.get(key).is_some_and(|v| !asks_nothing(v)) {
            return Err(TranslateError::Unsupported(key.to_owned()));
        }
        raw.remove(key);
    }
    let model = match raw.remove("model") {
        Some(Value::String(m)) => m,
        Some(_) => return Err(TranslateError::invalid("model", "expected a string")),
        None => return Err(TranslateError::BadRequest("missing field `model`".into())),
    };
    let mut req = ChatRequest {
        model,
        ..ChatRequest::default()
    };
    let mut echo = Echo {
        store: raw.get("store").is_none_or(|v| v != false),
        ..Echo::default()
    };

    if let Some(v) = take(&mut raw, "instructions") {
        let Value::String(s) = &v else {
            return Err(TranslateError::invalid("instructions", "expected a string"));
        };
        if !s.is_empty() {
            req.system.push(Text::plain(s.clone()));
        }
        echo.instructions = Some(v);
    }
    if let Some(v) = take(&mut raw, "max_output_tokens") {
        req.max_tokens = Some(
            v.as_u64()
                .ok_or_else(|| TranslateError::invalid("max_output_tokens", "expected a count"))?,
        );
        echo.max_output_tokens = Some(v);
    }
    if let Some(v) = take(&mut raw, "temperature") {
        req.temperature = Some(number(&v, "temperature")?);
        echo.temperature = Some(v);
    }
    if let Some(v) = take(&mut raw, "top_p") {
        req.top_p = Some(number(&v, "top_p")?);
        echo.top_p = Some(v);
    }
    if let Some(v) = take(&mut raw, "stream") {
        req.stream = boolean(&v, "stream")?;
    }
    if let Some(v) = take(&mut raw, "parallel_tool_calls") {
        req.parallel_tool_calls = Some(boolean(&v, "parallel_tool_calls")?);
        echo.parallel_tool_calls = Some(v);
    }
    // `safety_identifier` replaces `user`; either is the end user's id.
    let user = take(&mut raw, "user");
    let safety = take(&mut raw, "safety_identifier");
    for (v, name) in [(&user, "user"), (&safety, "safety_identifier")] {
        if let Some(v) = v {
            let s = v
                .as_str()
                .ok_or_else(|| TranslateError::invalid(name, "expected a string"))?;
            if req.user.is_none() {
                req.user = Some(s.to_owned());
            }
        }
    }
    echo.user = user;
    echo.safety_identifier = safety;
    echo.metadata = take(&mut raw, "metadata");
    echo.max_tool_calls = take(&mut raw, "max_tool_calls");
    if let Some(v) = take(&mut raw, "include") {
        include(v, params)?;
    }
    if let Some(v) = take(&mut raw, "reasoning") {
        req.thinking = reasoning(&v, params)?;
        echo.reasoning = Some(v);
    }
    if let Some(v) = take(&mut raw, "text") {
        req.response_format = text_format(&v, params)?;
        echo.text = Some(v);
    }
    match take(&mut raw, "tools") {
        None => {}
        Some(Value::Array(tools)) => {
            for t in tools {
                if let Some(ns_tool) = t
                    .as_object()
                    .filter(|o| o.get("type").and_then(Value::as_str) == Some("namespace"))
                {
                    let ns = string(ns_tool, "name", "tools")?;
                    let inner = ns_tool.get("tools").and_then(Value::as_array);
                    for f in inner.into_iter().flatten() {
                        if let Some(mut tool) = read_tool(f, params)? {
                            tool.name = format!("{ns}{NAMESPACED}{}", tool.name);
                            req.tools.push(tool);
                        }
                    }
                    echo.namespaces.push(ns);
                    echo.tools.push(t);
                } else if let Some(tool) = read_tool(&t, params)? {
                    req.tools.push(tool);
                    echo.tools.push(t);
                }
            }
        }
        Some(_) => return Err(TranslateError::invalid("tools", "expected a list")),
    }
    if let Some(v) = take(&mut raw, "tool_choice") {
        req.tool_choice = tool_choice(&v, params)?;
        if req.tool_choice.is_some() {
            echo.tool_choice = Some(v);
        }
    }
    if let Some(input) = take(&mut raw, "input") {
        read_input(&mut req, input, params)?;
    }
    for (key, value) in raw {
        params.unread(key, &value, responses_key)?;
    }
    Ok((req, echo))
}

/// Remove `key`; `null` is as good as absent.
fn take(raw: &mut Map<String, Value>, key: &str) -> Option<Value> {
    raw.remove(key).filter(|v| !v.is_null())
}

fn number(v: &Value, param: &'static str) -> Result<f64, TranslateError> {
    v.as_f64()
        .ok_or_else(|| TranslateError::invalid(param, "expected a number"))
}

fn boolean(v: &Value, param: &'static str) -> Result<bool, TranslateError> {
    v.as_bool()
        .ok_or_else(|| TranslateError::invalid(param, "expected a boolean"))
}

/// A string member of an object, or an error naming `param` and what was expected.
fn string(
    obj: &Map<String, Value>,
    key: &str,
    param: &'static str,
) -> Result<String, TranslateError> {
    obj.get(key)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| TranslateError::invalid(param, &format!("`{key}` must be a string")))
}

/// `reasoning`: its `effort` is the thinking asked for; a summary's style and the other
/// settings only tune the provider (hints).
fn reasoning(v: &Value, params: &mut Params) -> Result<Option<Thinking>, TranslateError> {
    let Value::Object(r) = v else {
        return Err(TranslateError::invalid("reasoning", "expected an object"));
    };
    let mut thinking = None;
    for (key, value) in r {
        if value.is_null() {
            continue;
        }
        match key.as_str() {
            "effort" => match value.as_str().and_then(Effort::parse) {
                Some(e) => thinking = Some(Thinking::Effort(e)),
                None => params.hint("reasoning.effort"),
            },
            "summary" | "generate_summary" => params.hint("reasoning.summary"),
            other => params.hint(format!("reasoning.{other}")),
        }
    }
    Ok(thinking)
}

/// `text`: its `format` is structured output; `verbosity` only tunes the provider (a hint).
fn text_format(v: &Value, params: &mut Params) -> Result<Option<ResponseFormat>, TranslateError> {
    let Value::Object(t) = v else {
        return Err(TranslateError::invalid("text", "expected an object"));
    };
    let mut format = None;
    for (key, value) in t {
        if value.is_null() {
            continue;
        }
        match key.as_str() {
            "format" => {
                format = match value["type"].as_str() {
                    Some("text") => None,
                    Some("json_object") => Some(ResponseFormat::Json),
                    Some("json_schema") => Some(ResponseFormat::Schema {
                        name: value["name"].as_str().unwrap_or_default().to_owned(),
                        schema: value.get("schema").cloned().unwrap_or_else(|| json!({})),
                        strict: value["strict"].as_bool(),
                    }),
                    _ => {
                        return Err(TranslateError::invalid(
                            "text.format",
                            &format!("unknown format {}", value["type"]),
                        ))
                    }
                };
            }
            other => params.hint(format!("text.{other}")),
        }
    }
    Ok(format)
}

/// A tool: a function becomes an internal tool; a built-in tool (web or file search, code
/// interpreter, computer use, image generation, MCP, shell, custom grammar tools, ...) runs
/// only at OpenAI, so the answer would depend on what no translated target can do. Web
/// search is the exception: agents (Codex CLI) offer it with every request, and the model
/// answers without it as it would when it chose not to search, so it is a hint (forcing it
/// with `tool_choice` is still refused).
fn read_tool(t: &Value, params: &mut Params) -> Result<Option<Tool>, TranslateError> {
    let Value::Object(obj) = t else {
        return Err(TranslateError::invalid("tools", "a tool must be an object"));
    };
    match obj.get("type").and_then(Value::as_str) {
        Some("function") => {
            if obj.get("strict").and_then(Value::as_bool) == Some(true) {
                params.hint("tools.strict");
            }
            Ok(Some(Tool {
                name: string(obj, "name", "tools")?,
                description: obj
                    .get("description")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                parameters: obj
                    .get("parameters")
                    .filter(|p| !p.is_null())
                    .cloned()
                    .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
                cache_control: None,
            }))
        }
        Some(kind) if kind.starts_with("web_search") => {
            params.hint(format!("tools.{kind}"));
            Ok(None)
        }
        Some(kind) => {
            params.meaning(format!("tools.{kind}"))?;
            Ok(None)
        }
        None => Err(TranslateError::invalid("tools", "a tool without `type`")),
    }
}

/// `tool_choice`: the modes and a named function; a list of allowed tools or a built-in tool
/// cannot be carried (refused, or dropped to the model's own choice with `drop_params`).
fn tool_choice(v: &Value, params: &mut Params) -> Result<Option<ToolChoice>, TranslateError> {
    match v {
        Value::String(s) => match s.as_str() {
            "auto" => Ok(Some(ToolChoice::Auto)),
            "required" => Ok(Some(ToolChoice::Any)),
            "none" => Ok(Some(ToolChoice::None)),
            _ => Err(TranslateError::invalid("tool_choice", s)),
        },
        Value::Object(o) => match o.get("type").and_then(Value::as_str) {
            Some("function") => Ok(Some(ToolChoice::Tool(string(o, "name", "tool_choice")?))),
            Some(kind) => {
                params.meaning(format!("tool_choice.{kind}"))?;
                Ok(None)
            }
            None => Err(TranslateError::invalid("tool_choice", &v.to_string())),
        },
        _ => Err(TranslateError::invalid("tool_choice", &v.to_string())),
    }
}

/// A turn from an item; an item with no parts adds none.
fn push(req: &mut ChatRequest, role: Role, parts: Vec<Part>) {
    if !parts.is_empty() {
        req.push_turn(role, parts);
    }
}

/// `input`: a string is one user turn; a list holds items.
fn read_input(
    req: &mut ChatRequest,
    input: Value,
    params: &mut Params,
) -> Result<(), TranslateError> {
    match input {
        Value::String(s) => {
            if !s.is_empty() {
                push(req, Role::User, vec![Part::Text(Text::plain(s))]);
            }
            Ok(())
        }
        Value::Array(items) => {
            for item in items {
                read_item(req, item, params)?;
            }
            Ok(())
        }
        _ => Err(TranslateError::invalid(
            "input",
            "expected a string or a list of items",
        )),
    }
}

/// One input item.
fn read_item(
    req: &mut ChatRequest,
    item: Value,
    params: &mut Params,
) -> Result<(), TranslateError> {
    let Value::Object(mut item) = item else {
        return Err(TranslateError::invalid(
            "input",
            "an item must be an object",
        ));
    };
    let kind = match item.get("type").and_then(Value::as_str) {
        Some(k) => k.to_owned(),
        // A message may leave out its type; an item reference is `{id}` alone.
        None if item.contains_key("role") => "message".to_owned(),
        None if item.contains_key("id") => "item_reference".to_owned(),
        None => return Err(TranslateError::invalid("input", "an item without `type`")),
    };
    match kind.as_str() {
        "message" => {
            let role = string(&item, "role", "input")?;
            let parts = read_parts(item.remove("content").unwrap_or(Value::Null), params)?;
            match role.as_str() {
                "system" | "developer" => {
                    for p in parts {
                        match p {
                            Part::Text(t) => req.system.push(t),
                            _ => params.meaning("input_image")?,
                        }
                    }
                }
                "user" => push(req, Role::User, parts),
                "assistant" => push(req, Role::Assistant, parts),
                other => {
                    return Err(TranslateError::invalid(
                        "input",
                        &format!("unknown role `{other}`"),
                    ))
                }
            }
        }
        "function_call" => {
            let name = string(&item, "name", "input")?;
            let call = ToolCall {
                id: string(&item, "call_id", "input")?,
                name: match item.get("namespace").and_then(Value::as_str) {
                    Some(ns) => format!("{ns}{NAMESPACED}{name}"),
                    None => name,
                },
                arguments: item
                    .get("arguments")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
            };
            push(req, Role::Assistant, vec![Part::ToolCall(call)]);
        }
        "function_call_output" => {
            let id = string(&item, "call_id", "input")?;
            let content = read_parts(item.remove("output").unwrap_or(Value::Null), params)?;
            push(
                req,
                Role::User,
                vec![Part::ToolResult {
                    id,
                    content,
                    is_error: false,
                    cache_control: None,
                }],
            );
        }
        "reasoning" => {
            if let Some(part) = read_reasoning(&item) {
                push(req, Role::Assistant, vec![part]);
            }
        }
        // A reference to a stored item: state sluice does not keep.
        "item_reference" => return Err(TranslateError::Unsupported("input.item_reference".into())),
        // Built-in tools' calls and outputs, MCP items, custom tool calls, compaction, ...:
        // history only OpenAI can read.
        other => params.meaning(format!("input.{other}"))?,
    }
    Ok(())
}

/// A reasoning item as thinking: its text (the reasoning text when given, else the summaries)
/// with `encrypted_content` as the signature; with no text at all, the encrypted content is
/// redacted thinking. Nothing to send back: `None`.
fn read_reasoning(item: &Map<String, Value>) -> Option<Part> {
    let texts = |key: &str| -> Option<Vec<&str>> {
        let list = item.get(key)?.as_array()?;
        Some(list.iter().filter_map(|s| s["text"].as_str()).collect())
    };
    let summary = texts("summary").unwrap_or_default();
    let content = texts("content").unwrap_or_default();
    let encrypted = item
        .get("encrypted_content")
        .and_then(Value::as_str)
        .filter(|e| !e.is_empty())
        .map(str::to_owned);
    let text = if content.is_empty() { summary } else { content };
    if text.is_empty() {
        return encrypted.map(Part::RedactedThinking);
    }
    Some(Part::Thinking {
        text: text.join("\n\n"),
        signature: encrypted,
    })
}

/// A message's content or a tool's output: a string, or a list of parts.
fn read_parts(content: Value, params: &mut Params) -> Result<Vec<Part>, TranslateError> {
    match content {
        Value::Null => Ok(Vec::new()),
        Value::String(s) if s.is_empty() => Ok(Vec::new()),
        Value::String(s) => Ok(vec![Part::Text(Text::plain(s))]),
        Value::Array(parts) => {
            let mut out = Vec::with_capacity(parts.len());
            for p in parts {
                if let Some(p) = read_part(p, params)? {
                    out.push(p);
                }
            }
            Ok(out)
        }
        _ => Err(TranslateError::invalid(
            "input",
            "content must be a string or a list of parts",
        )),
    }
}

/// A `prompt_cache_breakpoint` marks the end of a reusable prefix, as Anthropic's
/// `cache_control` on a block does.
fn cache_marker(part: &Map<String, Value>) -> Option<Value> {
    part.get("prompt_cache_breakpoint")
        .filter(|b| !b.is_null())
        .map(|_| json!({"type": "ephemeral"}))
}

/// One content part. Text (input, output, a refusal the model gave) and images by URL are
/// read; an image by file id (OpenAI's files), a file or audio cannot be sent on.
fn read_part(p: Value, params: &mut Params) -> Result<Option<Part>, TranslateError> {
    let Value::Object(p) = p else {
        return Err(TranslateError::invalid(
            "input",
            "a content part must be an object",
        ));
    };
    let kind = p
        .get("type")
        .and_then(Value::as_str)
        .ok_or_else(|| TranslateError::invalid("input", "a content part without `type`"))?;
    match kind {
        "input_text" | "output_text" => Ok(Some(Part::Text(Text {
            text: string(&p, "text", "input")?,
            cache_control: cache_marker(&p),
        }))),
        "refusal" => Ok(Some(Part::Text(Text::plain(string(
            &p, "refusal", "input",
        )?)))),
        "input_image" => {
            if let Some(url) = p.get("image_url").and_then(Value::as_str) {
                return Ok(Some(Part::Image {
                    source: ImageSource::from_url(url.to_owned()),
                    cache_control: cache_marker(&p),
                }));
            }
            if p.get("file_id").is_some_and(|f| !f.is_null()) {
                params.meaning("input_image.file_id")?;
                return Ok(None);
            }
            Err(TranslateError::invalid(
                "input",
                "an input_image without image_url or file_id",
            ))
        }
        other => {
            params.meaning(other.to_owned())?;
            Ok(None)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Answers

/// One output item as the writers keep it.
#[derive(Debug, Clone)]
enum Item {
    /// An assistant message: its text parts, and whether the last one is still streaming.
    Message {
        id: String,
        parts: Vec<String>,
        open: bool,
    },
    /// Reasoning: the thinking text (one summary part) and its signature; redacted thinking
    /// has no summary and its data as the encrypted content.
    Reasoning {
        id: String,
        text: String,
        encrypted: Option<String>,
        redacted: bool,
    },
    /// A function call.
    Call {
        id: String,
        call_id: String,
        /// The namespace the function is declared in, if any.
        namespace: Option<String>,
        name: String,
        arguments: String,
    },
}

/// An output item and its status (`in_progress`, `completed`, `incomplete`).
#[derive(Debug, Clone)]
struct Output {
    item: Item,
    status: &'static str,
}

fn output_text(text: &str) -> Value {
    json!({"type": "output_text", "text": text, "annotations": [], "logprobs": []})
}

fn summary_text(text: &str) -> Value {
    json!({"type": "summary_text", "text": text})
}

impl Output {
    fn id(&self) -> &str {
        match &self.item {
            Item::Message { id, .. } | Item::Reasoning { id, .. } | Item::Call { id, .. } => id,
        }
    }

    fn json(&self) -> Value {
        match &self.item {
            Item::Message { id, parts, .. } => json!({
                "id": id, "type": "message", "status": self.status, "role": "assistant",
                "content": parts.iter().map(|t| output_text(t)).collect::<Vec<_>>(),
            }),
            Item::Reasoning {
                id,
                text,
                encrypted,
                redacted,
            } => {
                // Redacted thinking has no summary; a reasoning item just added has none yet.
                let summary = if *redacted || (self.status == "in_progress" && text.is_empty()) {
                    Vec::new()
                } else {
                    vec![summary_text(text)]
                };
                let mut v = json!({"id": id, "type": "reasoning", "summary": summary});
                if let Some(e) = encrypted {
                    v["encrypted_content"] = e.clone().into();
                }
                v
            }
            Item::Call {
                id,
                call_id,
                namespace,
                name,
                arguments,
            } => {
                let mut v = json!({
                    "id": id, "type": "function_call", "status": self.status,
                    "call_id": call_id, "name": name, "arguments": arguments,
                });
                if let Some(ns) = namespace {
                    v["namespace"] = ns.as_str().into();
                }
                v
            }
        }
    }
}

/// The answer's id without the prefixes providers and OpenAI put on theirs, for the
/// `resp_`, `msg_` and `rs_` ids made from it; a clock reading when the provider gave none.
fn base_id(id: &str, created: u64) -> String {
    let base = ["resp_", "msg_", "chatcmpl-"]
        .iter()
        .find_map(|p| id.strip_prefix(p))
        .unwrap_or(id);
    if base.is_empty() {
        format!("{created:x}")
    } else {
        base.to_owned()
    }
}

fn message_id(base: &str, at: usize) -> String {
    format!("msg_{base}_{at}")
}

fn reasoning_id(base: &str, at: usize) -> String {
    format!("rs_{base}_{at}")
}

fn call_id(call: &str) -> String {
    format!("fc_{call}")
}

/// The status an answer ending for `stop` has, and the `incomplete_details.reason`.
fn outcome(stop: StopReason) -> (&'static str, Option<&'static str>) {
    match stop {
        StopReason::MaxTokens | StopReason::ContextWindow => {
            ("incomplete", Some("max_output_tokens"))
        }
        StopReason::ContentFilter => ("incomplete", Some("content_filter")),
        StopReason::EndTurn
        | StopReason::StopSequence
        | StopReason::ToolUse
        | StopReason::PauseTurn => ("completed", None),
    }
}

/// The Responses API's `usage`: input tokens include the cached ones, as sluice's do.
pub(crate) fn usage_json(u: &Usage) -> Value {
    json!({
        "input_tokens": u.prompt_tokens,
        "input_tokens_details": {
            "cached_tokens": u.cached_tokens,
            "cache_write_tokens": u.cache_creation_tokens,
        },
        "output_tokens": u.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": u.reasoning_tokens},
        "total_tokens": u.prompt_tokens + u.completion_tokens,
    })
}

/// What a `response` object states besides its settings.
struct Head<'a> {
    id: &'a str,
    created: u64,
    model: &'a str,
    status: &'static str,
}

/// A `response` object: the settings, the head, the output, usage and how it ended.
fn response_json(
    settings: &Map<String, Value>,
    head: &Head<'_>,
    output: &[Output],
    usage: Option<&Usage>,
    incomplete: Option<&str>,
    error: Option<Value>,
) -> Value {
    let mut o = settings.clone();
    o.insert("id".into(), head.id.into());
    o.insert("object".into(), "response".into());
    o.insert("created_at".into(), head.created.into());
    o.insert("status".into(), head.status.into());
    o.insert(
        "completed_at".into(),
        if head.status == "completed" {
            now().into()
        } else {
            Value::Null
        },
    );
    o.insert("model".into(), head.model.into());
    o.insert(
        "output".into(),
        Value::Array(output.iter().map(Output::json).collect()),
    );
    o.insert("usage".into(), usage.map_or(Value::Null, usage_json));
    o.insert("error".into(), error.unwrap_or(Value::Null));
    o.insert(
        "incomplete_details".into(),
        incomplete.map_or(Value::Null, |r| json!({ "reason": r })),
    );
    Value::Object(o)
}

/// The output items of a whole answer, in its order: consecutive text parts are one message
/// (a part each), thinking a reasoning item, each tool call a function call.
fn output_of(r: &ChatResponse, base: &str, echo: &Echo) -> Vec<Output> {
    let mut out: Vec<Output> = Vec::new();
    for p in &r.content {
        let at = out.len();
        let item = match p {
            Part::Text(t) => {
                if let Some(Output {
                    item: Item::Message { parts, .. },
                    ..
                }) = out.last_mut()
                {
                    parts.push(t.text.clone());
                    continue;
                }
                Item::Message {
                    id: message_id(base, at),
                    parts: vec![t.text.clone()],
                    open: false,
                }
            }
            Part::Thinking { text, signature } => Item::Reasoning {
                id: reasoning_id(base, at),
                text: text.clone(),
                encrypted: signature.clone(),
                redacted: false,
            },
            Part::RedactedThinking(data) => Item::Reasoning {
                id: reasoning_id(base, at),
                text: String::new(),
                encrypted: Some(data.clone()),
                redacted: true,
            },
            Part::ToolCall(c) => {
                let (namespace, name) = split_call(&echo.namespaces, &c.name);
                Item::Call {
                    id: call_id(&c.id),
                    call_id: c.id.clone(),
                    namespace: namespace.map(str::to_owned),
                    name: name.to_owned(),
                    arguments: c.arguments.clone(),
                }
            }
            // An answer holds neither.
            Part::Image { .. } | Part::ToolResult { .. } => continue,
        };
        out.push(Output {
            item,
            status: "completed",
        });
    }
    out
}

/// Write a whole answer as a Responses `response` object, repeating `echo`'s settings. An
/// answer cut by its token limit or filtered is `incomplete`, its last item too.
pub fn write_response(r: &ChatResponse, echo: &Echo) -> Vec<u8> {
    let base = base_id(&r.id, r.created);
    let (status, incomplete) = outcome(r.stop);
    let mut output = output_of(r, &base, echo);
    if status == "incomplete" {
        if let Some(last) = output.last_mut() {
            last.status = "incomplete";
        }
    }
    let head = Head {
        id: &format!("resp_{base}"),
        created: r.created,
        model: &r.model,
        status,
    };
    to_json(&response_json(
        &echo.settings(),
        &head,
        &output,
        Some(&r.usage),
        incomplete,
        None,
    ))
}

// ---------------------------------------------------------------------------------------------
// Streams

/// A block of the internal stream that is open: its number, the output item it writes and,
/// for text, the content part.
#[derive(Debug, Clone, Copy)]
struct Open {
    block: usize,
    at: usize,
    part: usize,
}

/// Writes stream events as the Responses API's SSE events (`event: <type>`, every event
/// numbered by `sequence_number`): `response.created` and `response.in_progress` first, then
/// each block as an output item (text a message's content part, thinking a reasoning item's
/// summary part, a tool call a function call), and at the end `response.completed` or
/// `response.incomplete` with the whole response. Blocks may interleave (parallel tool calls):
/// each is kept by its number, and `output_index` is its item's place in `output`.
#[derive(Debug)]
pub struct EventWriter {
    settings: Map<String, Value>,
    /// The request's tool namespaces, to name calls as the client declared them.
    namespaces: Vec<String>,
    seq: u64,
    started: bool,
    /// The end (completed, incomplete or failed) was written: nothing more goes out.
    ended: bool,
    id: String,
    base: String,
    model: String,
    created: u64,
    output: Vec<Output>,
    open: Vec<Open>,
    /// The last output item, a message whose text parts are all done: a text block that
    /// follows at once is another part of it, anything else closes it first.
    pending: Option<usize>,
    stop: Option<StopReason>,
    usage: Usage,
}

impl Default for EventWriter {
    fn default() -> Self {
        Self::new(Echo::default())
    }
}

fn event(name: &str, data: &Value, out: &mut Vec<u8>) {
    out.extend_from_slice(b"event: ");
    out.extend_from_slice(name.as_bytes());
    out.push(b'\n');
    super::sse_data(data, out);
}

/// An upstream error's kind as a `ResponseError.code` (a closed list in OpenAI's SDK).
fn error_code(kind: &str) -> &'static str {
    if kind.contains("rate_limit") {
        "rate_limit_exceeded"
    } else {
        "server_error"
    }
}

impl EventWriter {
    /// A writer whose response objects repeat `echo`'s settings.
    pub fn new(echo: Echo) -> Self {
        Self {
            settings: echo.settings(),
            namespaces: echo.namespaces,
            seq: 0,
            started: false,
            ended: false,
            id: String::new(),
            base: String::new(),
            model: String::new(),
            created: 0,
            output: Vec::new(),
            open: Vec::new(),
            pending: None,
            stop: None,
            usage: Usage::default(),
        }
    }

    /// One event: `fields` with its `type` and the next `sequence_number`.
    fn emit(&mut self, kind: &str, mut fields: Value, out: &mut Vec<u8>) {
        if let Value::Object(o) = &mut fields {
            o.insert("type".into(), kind.into());
            o.insert("sequence_number".into(), self.seq.into());
        }
        self.seq += 1;
        event(kind, &fields, out);
    }

    fn response(&self, status: &'static str, usage: Option<&Usage>) -> Value {
        self.response_with(status, usage, None, None)
    }

    fn response_with(
        &self,
        status: &'static str,
        usage: Option<&Usage>,
        incomplete: Option<&str>,
        error: Option<Value>,
    ) -> Value {
        let head = Head {
            id: &self.id,
            created: self.created,
            model: &self.model,
            status,
        };
        response_json(
            &self.settings,
            &head,
            &self.output,
            usage,
            incomplete,
            error,
        )
    }

    /// `response.created` and `response.in_progress`, once, before anything else.
    fn start(&mut self, out: &mut Vec<u8>) {
        if self.started {
            return;
        }
        self.started = true;
        self.created = now();
        self.base = base_id(&self.id, self.created);
        self.id = format!("resp_{}", self.base);
        for kind in ["response.created", "response.in_progress"] {
            let response = self.response("in_progress", None);
            self.emit(kind, json!({ "response": response }), out);
        }
    }

    /// `response.output_item.done` for the item at `at`, which ends as `status`.
    fn item_done(&mut self, at: usize, status: &'static str, out: &mut Vec<u8>) {
        let Some(o) = self.output.get_mut(at) else {
            return;
        };
        o.status = status;
        if let Item::Message { open, .. } = &mut o.item {
            *open = false;
        }
        let item = o.json();
        self.emit(
            "response.output_item.done",
            json!({"output_index": at, "item": item}),
            out,
        );
    }

    /// Close the pending message, if any.
    fn flush(&mut self, status: &'static str, out: &mut Vec<u8>) {
        if let Some(at) = self.pending.take() {
            self.item_done(at, status, out);
        }
    }

    /// Add an output item (the pending message is done first): `response.output_item.added`.
    fn add(&mut self, item: Item, out: &mut Vec<u8>) -> usize {
        self.flush("completed", out);
        let at = self.output.len();
        self.output.push(Output {
            item,
            status: "in_progress",
        });
        let item = self.output[at].json();
        self.emit(
            "response.output_item.added",
            json!({"output_index": at, "item": item}),
            out,
        );
        at
    }

    fn find(&self, block: usize) -> Option<Open> {
        self.open.iter().find(|o| o.block == block).copied()
    }

    /// The open text block `block`, opened (as a new part of the pending message, or a new
    /// message) when it is new. `None` when the block is open as something else.
    fn text_block(&mut self, block: usize, out: &mut Vec<u8>) -> Option<Open> {
        if let Some(o) = self.find(block) {
            return matches!(self.output[o.at].item, Item::Message { .. }).then_some(o);
        }
        let at = match self.pending.take() {
            Some(at) => at,
            None => {
                let id = message_id(&self.base, self.output.len());
                self.add(
                    Item::Message {
                        id,
                        parts: Vec::new(),
                        open: false,
                    },
                    out,
                )
            }
        };
        let Item::Message { parts, open, .. } = &mut self.output[at].item else {
            return None;
        };
        parts.push(String::new());
        *open = true;
        let part = parts.len() - 1;
        let o = Open { block, at, part };
        self.open.push(o);
        let item_id = self.output[at].id().to_owned();
        self.emit(
            "response.content_part.added",
            json!({"item_id": item_id, "output_index": at, "content_index": part,
                "part": output_text("")}),
            out,
        );
        Some(o)
    }

    /// The open thinking block `block`, opened as a reasoning item with one summary part when
    /// it is new. `None` when the block is open as something else.
    fn thinking_block(&mut self, block: usize, out: &mut Vec<u8>) -> Option<Open> {
        if let Some(o) = self.find(block) {
            return matches!(self.output[o.at].item, Item::Reasoning { .. }).then_some(o);
        }
        let id = reasoning_id(&self.base, self.output.len());
        let at = self.add(
            Item::Reasoning {
                id: id.clone(),
                text: String::new(),
                encrypted: None,
                redacted: false,
            },
            out,
        );
        let o = Open { block, at, part: 0 };
        self.open.push(o);
        self.emit(
            "response.reasoning_summary_part.added",
            json!({"item_id": id, "output_index": at, "summary_index": 0,
                "part": summary_text("")}),
            out,
        );
        Some(o)
    }

    /// The open block `block`'s events up to its item's end, which ends as `status`.
    fn close(&mut self, block: usize, status: &'static str, out: &mut Vec<u8>) {
        let Some(pos) = self.open.iter().position(|o| o.block == block) else {
            return;
        };
        let Open { at, part, .. } = self.open.remove(pos);
        let item_id = self.output[at].id().to_owned();
        match self.output[at].item.clone() {
            Item::Message { parts, .. } => {
                let text = parts.get(part).map_or("", String::as_str);
                self.emit(
                    "response.output_text.done",
                    json!({"item_id": item_id, "output_index": at, "content_index": part,
                        "text": text, "logprobs": []}),
                    out,
                );
                self.emit(
                    "response.content_part.done",
                    json!({"item_id": item_id, "output_index": at, "content_index": part,
                        "part": output_text(text)}),
                    out,
                );
                if let Item::Message { open, .. } = &mut self.output[at].item {
                    *open = false;
                }
                if at + 1 == self.output.len() {
                    // A text block may follow: it would be the next part of this message.
                    self.pending = Some(at);
                } else {
                    self.item_done(at, status, out);
                }
            }
            Item::Reasoning { text, .. } => {
                self.emit(
                    "response.reasoning_summary_text.done",
                    json!({"item_id": item_id, "output_index": at, "summary_index": 0,
                        "text": text}),
                    out,
                );
                self.emit(
                    "response.reasoning_summary_part.done",
                    json!({"item_id": item_id, "output_index": at, "summary_index": 0,
                        "part": summary_text(&text)}),
                    out,
                );
                self.item_done(at, status, out);
            }
            Item::Call {
                name, arguments, ..
            } => {
                self.emit(
                    "response.function_call_arguments.done",
                    json!({"item_id": item_id, "output_index": at, "name": name,
                        "arguments": arguments}),
                    out,
                );
                self.item_done(at, status, out);
            }
        }
    }

    /// The end: open blocks and the pending message closed, then the whole response.
    fn finish(&mut self, out: &mut Vec<u8>) {
        let (status, incomplete) = outcome(self.stop.unwrap_or(StopReason::EndTurn));
        let item_status = if status == "incomplete" {
            "incomplete"
        } else {
            "completed"
        };
        let mut blocks: Vec<Open> = self.open.clone();
        blocks.sort_by_key(|o| o.at);
        for o in blocks {
            self.close(o.block, item_status, out);
        }
        self.flush(item_status, out);
        let response = self.response_with(status, Some(&self.usage), incomplete, None);
        let kind = if status == "incomplete" {
            "response.incomplete"
        } else {
            "response.completed"
        };
        self.emit(kind, json!({ "response": response }), out);
        self.ended = true;
    }

    /// Append the events for one internal event to `out`. Nothing follows the end; a stream
    /// that stops before its `Done` gets no `response.completed` (as an OpenAI chat client gets
    /// no `[DONE]`).
    pub fn write(&mut self, ev: StreamEvent, out: &mut Vec<u8>) {
        if self.ended {
            return;
        }
        match ev {
            StreamEvent::Start { id, model, usage } => {
                if !self.started {
                    self.id = id;
                    self.model = model;
                }
                self.usage = self.usage.merge(usage);
                self.start(out);
            }
            StreamEvent::Text { index, text } => {
                self.start(out);
                let Some(o) = self.text_block(index, out) else {
                    return;
                };
                if let Item::Message { parts, .. } = &mut self.output[o.at].item {
                    if let Some(p) = parts.get_mut(o.part) {
                        p.push_str(&text);
                    }
                }
                let item_id = self.output[o.at].id().to_owned();
                self.emit(
                    "response.output_text.delta",
                    json!({"item_id": item_id, "output_index": o.at, "content_index": o.part,
                        "delta": text, "logprobs": []}),
                    out,
                );
            }
            StreamEvent::Thinking { index, text } => {
                self.start(out);
                let Some(o) = self.thinking_block(index, out) else {
                    return;
                };
                if let Item::Reasoning { text: t, .. } = &mut self.output[o.at].item {
                    t.push_str(&text);
                }
                let item_id = self.output[o.at].id().to_owned();
                self.emit(
                    "response.reasoning_summary_text.delta",
                    json!({"item_id": item_id, "output_index": o.at, "summary_index": 0,
                        "delta": text}),
                    out,
                );
            }
            StreamEvent::Signature { index, signature } => {
                self.start(out);
                let Some(o) = self.thinking_block(index, out) else {
                    return;
                };
                if let Item::Reasoning { encrypted, .. } = &mut self.output[o.at].item {
                    encrypted
                        .get_or_insert_with(String::new)
                        .push_str(&signature);
                }
            }
            StreamEvent::ToolStart { index, id, name } => {
                self.start(out);
                if self.find(index).is_some() {
                    return;
                }
                let (namespace, plain) = split_call(&self.namespaces, &name);
                let item = Item::Call {
                    id: call_id(&id),
                    call_id: id.clone(),
                    namespace: namespace.map(str::to_owned),
                    name: plain.to_owned(),
                    arguments: String::new(),
                };
                let at = self.add(item, out);
                self.open.push(Open {
                    block: index,
                    at,
                    part: 0,
                });
            }
            StreamEvent::ToolArgs { index, json } => {
                // Arguments of a block that is no function call (an Anthropic server tool)
                // have nowhere to go.
                let Some(o) = self.find(index) else { return };
                let Item::Call { id, arguments, .. } = &mut self.output[o.at].item else {
                    return;
                };
                arguments.push_str(&json);
                let item_id = id.clone();
                self.emit(
                    "response.function_call_arguments.delta",
                    json!({"item_id": item_id, "output_index": o.at, "delta": json}),
                    out,
                );
            }
            StreamEvent::BlockStop { index } => self.close(index, "completed", out),
            StreamEvent::Stop { reason, .. } => self.stop = Some(reason),
            StreamEvent::Usage(u) => self.usage = self.usage.merge(u),
            StreamEvent::Done => {
                self.start(out);
                self.finish(out);
            }
            StreamEvent::Error { kind, message } => {
                self.start(out);
                self.emit(
                    "error",
                    json!({"code": kind, "message": message, "param": null}),
                    out,
                );
                let error = json!({"code": error_code(&kind), "message": message});
                let response = self.response_with("failed", Some(&self.usage), None, Some(error));
                self.emit("response.failed", json!({ "response": response }), out);
                self.ended = true;
            }
            StreamEvent::Ping => out.extend_from_slice(b": ping\n\n"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::Message;
    use crate::testing::{dropped_names, dropping, json_of, strict};

    fn parse(body: Value, params: &mut Params) -> Result<(ChatRequest, Echo), TranslateError> {
        parse_request(&serde_json::to_vec(&body).unwrap(), params)
    }

    fn refused(body: Value, params: &mut Params) -> String {
        match parse(body, params) {
            Err(TranslateError::Unsupported(name)) => name,
            other => panic!("not refused: {other:?}"),
        }
    }

    fn text(t: &str) -> Part {
        Part::Text(Text::plain(t))
    }

    fn call(id: &str, name: &str, arguments: &str) -> Part {
        Part::ToolCall(ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        })
    }

    /// The (name, data) pairs of a Responses SSE text, checked for form: every event named
    /// as its type, numbered in order.
    fn events_of(out: &[u8]) -> Vec<(String, Value)> {
        let sse = std::str::from_utf8(out).unwrap();
        let mut seen = Vec::new();
        for block in sse.split("\n\n").filter(|b| !b.is_empty()) {
            if block.starts_with(':') {
                continue;
            }
            let (name, data) = block.split_once('\n').unwrap();
            let name = name.strip_prefix("event: ").unwrap().to_owned();
            let data: Value = serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap();
            assert_eq!(data["type"], name.as_str());
            assert_eq!(data["sequence_number"], seen.len());
            seen.push((name, data));
        }
        seen
    }

    fn names(events: &[(String, Value)]) -> Vec<&str> {
        events.iter().map(|(n, _)| n.as_str()).collect()
    }

    fn write_all(evs: Vec<StreamEvent>) -> Vec<(String, Value)> {
        let mut w = EventWriter::new(Echo::default());
        let mut out = Vec::new();
        for ev in evs {
            w.write(ev, &mut out);
        }
        events_of(&out)
    }

    #[test]
    fn a_string_input_and_the_settings() {
        let mut p = strict();
        let (req, echo) = parse(
            json!({"model": "claude", "input": "Hi", "instructions": "Be brief",
                "max_output_tokens": 100, "temperature": 0.5, "top_p": 0.9, "stream": true,
                "parallel_tool_calls": false, "user": "u1", "safety_identifier": "s1",
                "metadata": {"k": "v"}, "reasoning": {"effort": "high"}, "store": false,
                "max_tool_calls": 3, "fallbacks": ["x"], "stream_options": {},
                "truncation": "disabled", "previous_response_id": null}),
            &mut p,
        )
        .unwrap();
        assert_eq!(req.model, "claude");
        assert_eq!(req.system, [Text::plain("Be brief")]);
        assert_eq!(
            req.messages,
            [Message {
                role: Role::User,
                content: vec![text("Hi")]
            }]
        );
        assert_eq!(req.max_tokens, Some(100));
        assert_eq!((req.temperature, req.top_p), (Some(0.5), Some(0.9)));
        assert!(req.stream);
        assert_eq!(req.parallel_tool_calls, Some(false));
        assert_eq!(req.user.as_deref(), Some("u1"));
        assert_eq!(req.thinking, Some(Thinking::Effort(Effort::High)));
        assert_eq!(p.dropped().len(), 0, "{:?}", p.dropped());
        assert_eq!(echo.instructions, Some(json!("Be brief")));
        assert_eq!(echo.metadata, Some(json!({"k": "v"})));
        assert_eq!(echo.max_tool_calls, Some(json!(3)));
        assert_eq!(echo.safety_identifier, Some(json!("s1")));
        assert_eq!(echo.reasoning, Some(json!({"effort": "high"})));
        assert!(!echo.store);
        // Only a safety identifier: it is the end user.
        let (req, _) = parse(
            json!({"model": "m", "input": "x", "safety_identifier": "s1"}),
            &mut p,
        )
        .unwrap();
        assert_eq!(req.user.as_deref(), Some("s1"));
    }

    #[test]
    fn items_become_turns() {
        let mut p = strict();
        let (req, _) = parse(
            json!({"model": "m", "instructions": "inst", "input": [
                {"role": "developer", "content": "dev rules"},
                {"type": "message", "role": "user", "content": [
                    {"type": "input_text", "text": "look",
                        "prompt_cache_breakpoint": {"mode": "explicit"}},
                    {"type": "input_image", "image_url": "data:image/png;base64,AAA",
                        "detail": "auto"},
                    {"type": "input_image", "image_url": "https://x/y.png", "file_id": null},
                ]},
                {"type": "reasoning", "id": "rs_1",
                    "summary": [{"type": "summary_text", "text": "thought"}],
                    "encrypted_content": "sig"},
                {"type": "reasoning", "id": "rs_2", "summary": [],
                    "encrypted_content": "redacted-data"},
                {"type": "reasoning", "id": "rs_3", "summary": [],
                    "content": [{"type": "reasoning_text", "text": "raw"}]},
                {"type": "message", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": "calling", "annotations": []},
                        {"type": "refusal", "refusal": "not that"}]},
                {"type": "function_call", "call_id": "c1", "name": "get",
                    "arguments": "{\"a\":1}", "id": "fc_1", "status": "completed"},
                {"type": "function_call", "call_id": "c2", "name": "get", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": "one"},
                {"type": "function_call_output", "call_id": "c2", "output": [
                    {"type": "input_text", "text": "two"},
                    {"type": "input_image", "image_url": "https://x/z.png"}]},
                {"role": "user", "content": "thanks"},
                {"role": "system", "content": [{"type": "input_text", "text": "sys later"}]},
                {"role": "assistant", "content": "sure"},
            ]}),
            &mut p,
        )
        .unwrap();
        assert_eq!(
            req.system
                .iter()
                .map(|t| t.text.as_str())
                .collect::<Vec<_>>(),
            ["inst", "dev rules", "sys later"]
        );
        let look = Part::Text(Text {
            text: "look".into(),
            cache_control: Some(json!({"type": "ephemeral"})),
        });
        let image = |url: &str| Part::Image {
            source: ImageSource::from_url(url.into()),
            cache_control: None,
        };
        assert_eq!(
            req.messages,
            [
                Message {
                    role: Role::User,
                    content: vec![
                        look,
                        image("data:image/png;base64,AAA"),
                        image("https://x/y.png")
                    ],
                },
                Message {
                    role: Role::Assistant,
                    content: vec![
                        Part::Thinking {
                            text: "thought".into(),
                            signature: Some("sig".into())
                        },
                        Part::RedactedThinking("redacted-data".into()),
                        Part::Thinking {
                            text: "raw".into(),
                            signature: None
                        },
                        text("calling"),
                        text("not that"),
                        call("c1", "get", "{\"a\":1}"),
                        call("c2", "get", "{}"),
                    ],
                },
                Message {
                    role: Role::User,
                    content: vec![
                        Part::ToolResult {
                            id: "c1".into(),
                            content: vec![text("one")],
                            is_error: false,
                            cache_control: None,
                        },
                        Part::ToolResult {
                            id: "c2".into(),
                            content: vec![text("two"), image("https://x/z.png")],
                            is_error: false,
                            cache_control: None,
                        },
                        text("thanks"),
                    ],
                },
                Message {
                    role: Role::Assistant,
                    content: vec![text("sure")],
                },
            ]
        );
        assert!(p.dropped().is_empty());
    }

    #[test]
    fn tools_tool_choice_and_formats() {
        let mut p = strict();
        let weather = json!({"type": "function", "name": "weather", "description": "Weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            "strict": true});
        let (req, echo) = parse(
            json!({"model": "m", "input": "x",
                "tools": [weather, {"type": "function", "name": "now", "strict": false}],
                "tool_choice": {"type": "function", "name": "weather"},
                "text": {"format": {"type": "json_schema", "name": "out",
                    "schema": {"type": "object"}, "strict": true}, "verbosity": "low"}}),
            &mut p,
        )
        .unwrap();
        assert_eq!(
            req.tools,
            [
                Tool {
                    name: "weather".into(),
                    description: Some("Weather".into()),
                    parameters: weather["parameters"].clone(),
                    cache_control: None,
                },
                Tool {
                    name: "now".into(),
                    description: None,
                    parameters: json!({"type": "object", "properties": {}}),
                    cache_control: None,
                },
            ]
        );
        assert_eq!(req.tool_choice, Some(ToolChoice::Tool("weather".into())));
        assert_eq!(
            req.response_format,
            Some(ResponseFormat::Schema {
                name: "out".into(),
                schema: json!({"type": "object"}),
                strict: Some(true)
            })
        );
        assert_eq!(echo.tools.len(), 2);
        assert_eq!(echo.tools[0], weather);
        assert_eq!(
            echo.tool_choice,
            Some(json!({"type": "function", "name": "weather"}))
        );
        assert_eq!(dropped_names(&p), ["text.verbosity", "tools.strict"]);
        for (choice, want) in [
            ("auto", ToolChoice::Auto),
            ("required", ToolChoice::Any),
            ("none", ToolChoice::None),
        ] {
            let (req, _) = parse(
                json!({"model": "m", "input": "x", "tool_choice": choice,
                    "text": {"format": {"type": "json_object"}}}),
                &mut p,
            )
            .unwrap();
            assert_eq!(req.tool_choice, Some(want));
            assert_eq!(req.response_format, Some(ResponseFormat::Json));
        }
        let (req, _) = parse(
            json!({"model": "m", "input": "x", "text": {"format": {"type": "text"}}}),
            &mut p,
        )
        .unwrap();
        assert_eq!(req.response_format, None);
    }

    #[test]
    fn what_cannot_be_carried_is_refused_by_name() {
        let base = |extra: Value| {
            let mut b = json!({"model": "m", "input": "x"});
            for (k, v) in extra.as_object().unwrap() {
                b[k] = v.clone();
            }
            b
        };
        let user = |part: Value| json!({"input": [{"role": "user", "content": [part]}]});
        for (extra, name) in [
            (
                json!({"tools": [{"type": "file_search", "vector_store_ids": ["v"]}]}),
                "tools.file_search",
            ),
            (
                json!({"tools": [{"type": "mcp", "server_label": "s"}]}),
                "tools.mcp",
            ),
            (
                json!({"input": [{"type": "computer_call_output", "call_id": "c"}]}),
                "input.computer_call_output",
            ),
            (
                json!({"input": [{"type": "web_search_call", "id": "w"}]}),
                "input.web_search_call",
            ),
            (
                json!({"input": [{"type": "custom_tool_call", "call_id": "c"}]}),
                "input.custom_tool_call",
            ),
            (
                user(json!({"type": "input_file", "file_id": "f"})),
                "input_file",
            ),
            (
                user(json!({"type": "input_image", "file_id": "f"})),
                "input_image.file_id",
            ),
            (
                json!({"input": [{"role": "system", "content": [
                {"type": "input_image", "image_url": "https://x"}]}]}),
                "input_image",
            ),
            (
                json!({"tool_choice": {"type": "allowed_tools", "mode": "auto", "tools": []}}),
                "tool_choice.allowed_tools",
            ),
            (
                json!({"tool_choice": {"type": "web_search_preview"}}),
                "tool_choice.web_search_preview",
            ),
            (
                json!({"include": ["message.output_text.logprobs"]}),
                "include.message.output_text.logprobs",
            ),
            (json!({"top_logprobs": 3}), "top_logprobs"),
        ] {
            assert_eq!(refused(base(extra.clone()), &mut strict()), name, "{extra}");
            let mut d = dropping();
            parse(base(extra.clone()), &mut d).unwrap();
            assert_eq!(dropped_names(&d), [name], "{extra}");
        }
        // State sluice does not keep: refused even when dropping.
        for (extra, name) in [
            (
                json!({"previous_response_id": "resp_1"}),
                "previous_response_id",
            ),
            (json!({"conversation": "conv_1"}), "conversation"),
            (json!({"prompt": {"id": "pmpt_1"}}), "prompt"),
            (json!({"background": true}), "background"),
            (
                json!({"input": [{"type": "item_reference", "id": "msg_1"}]}),
                "input.item_reference",
            ),
            (json!({"input": [{"id": "msg_1"}]}), "input.item_reference"),
        ] {
            assert_eq!(refused(base(extra.clone()), &mut strict()), name);
            assert_eq!(refused(base(extra), &mut dropping()), name);
        }
        // Web search, which agents offer with every request, is a hint.
        let mut p = strict();
        parse(
            base(json!({"tools": [{"type": "web_search", "external_web_access": true}]})),
            &mut p,
        )
        .unwrap();
        assert_eq!(dropped_names(&p), ["tools.web_search"]);
        // A dropped built-in tool is not repeated in the answer.
        let mut d = dropping();
        let (req, echo) = parse(
            base(json!({"tools": [{"type": "web_search"},
                {"type": "function", "name": "f"}]})),
            &mut d,
        )
        .unwrap();
        assert_eq!(req.tools.len(), 1);
        assert_eq!(echo.tools, [json!({"type": "function", "name": "f"})]);
    }

    #[test]
    fn hints_are_noted_and_sluices_own_fields_carried() {
        let mut p = strict();
        parse(
            json!({"model": "m", "input": "x", "store": true, "prompt_cache_key": "k",
                "service_tier": "flex", "truncation": "auto",
                "reasoning": {"effort": "low", "summary": "auto"},
                "text": {"verbosity": "high"},
                "include": ["reasoning.encrypted_content", "file_search_call.results"],
                "some_future_field": {"a": 1}, "fallbacks": ["y"], "num_retries": 2,
                "stream_options": {"include_obfuscation": false}, "user": null}),
            &mut p,
        )
        .unwrap();
        assert_eq!(
            dropped_names(&p),
            [
                "include.file_search_call.results",
                "prompt_cache_key",
                "reasoning.summary",
                "service_tier",
                "some_future_field",
                "text.verbosity",
                "truncation"
            ]
        );
        let mut p = strict();
        let (req, _) = parse(
            json!({"model": "m", "input": "x", "reasoning": {"effort": "extreme"}}),
            &mut p,
        )
        .unwrap();
        assert_eq!(req.thinking, None);
        assert_eq!(dropped_names(&p), ["reasoning.effort"]);
    }

    #[test]
    fn bodies_that_do_not_fit_are_bad_requests() {
        let mut p = strict();
        for body in [
            json!({"input": "x"}),
            json!({"model": 1, "input": "x"}),
            json!({"model": "m", "input": 5}),
            json!({"model": "m", "input": [{"role": "tool", "content": "x"}]}),
            json!({"model": "m", "input": [{"type": "function_call", "name": "f"}]}),
            json!({"model": "m", "input": [{"content": "x"}]}),
            json!({"model": "m", "input": [{"role": "user", "content": [{"text": "x"}]}]}),
            json!({"model": "m", "input": "x", "instructions": ["a"]}),
            json!({"model": "m", "input": "x", "temperature": "hot"}),
            json!({"model": "m", "input": "x", "tool_choice": "sometimes"}),
            json!({"model": "m", "input": "x", "text": {"format": {"type": "yaml"}}}),
        ] {
            assert!(
                matches!(
                    parse(body.clone(), &mut p),
                    Err(TranslateError::BadRequest(_) | TranslateError::Invalid { .. })
                ),
                "{body}"
            );
        }
        assert!(matches!(
            parse_request(b"{", &mut p),
            Err(TranslateError::BadRequest(_))
        ));
    }

    fn answer(content: Vec<Part>, stop: StopReason) -> ChatResponse {
        ChatResponse {
            id: "msg_01".into(),
            model: "claude-x".into(),
            content,
            stop,
            stop_sequence: None,
            usage: Usage {
                prompt_tokens: 100,
                completion_tokens: 50,
                cached_tokens: 20,
                cache_creation_tokens: 5,
                reasoning_tokens: 10,
                ..Usage::default()
            },
            created: 1_700_000_000,
        }
    }

    #[test]
    fn namespaced_tools_reach_the_model_and_come_back_in_their_namespace() {
        // Codex CLI groups its sub-agent functions in a namespace.
        let ns = json!({"type": "namespace", "name": "agents", "description": "Sub-agents",
            "tools": [{"type": "function", "name": "spawn", "parameters": {"type": "object"}}]});
        let (req, echo) = parse(
            json!({"model": "m", "tools": [ns.clone(), {"type": "function", "name": "shell"}],
                "input": [
                    {"role": "user", "content": "go"},
                    {"type": "function_call", "call_id": "c0", "namespace": "agents",
                     "name": "spawn", "arguments": "{}"},
                    {"type": "function_call_output", "call_id": "c0", "output": "ok"}]}),
            &mut strict(),
        )
        .unwrap();
        let names: Vec<&str> = req.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["agents__spawn", "shell"]);
        assert_eq!(echo.tools[0], ns, "the namespace is repeated as sent");
        let Part::ToolCall(c) = &req.messages[1].content[0] else {
            panic!("{:?}", req.messages[1]);
        };
        assert_eq!(c.name, "agents__spawn");
        // Whole: the call is named in its namespace; other calls are as they were.
        let whole = answer(
            vec![call("c1", "agents__spawn", "{}"), call("c2", "shell", "{}")],
            StopReason::ToolUse,
        );
        let v = json_of(&write_response(&whole, &echo));
        assert_eq!(v["output"][0]["namespace"], "agents");
        assert_eq!(v["output"][0]["name"], "spawn");
        assert!(v["output"][1].get("namespace").is_none());
        assert_eq!(v["output"][1]["name"], "shell");
        // Streamed: the same.
        let mut w = EventWriter::new(echo);
        let mut out = Vec::new();
        for ev in [
            StreamEvent::ToolStart {
                index: 0,
                id: "c1".into(),
                name: "agents__spawn".into(),
            },
            StreamEvent::BlockStop { index: 0 },
            StreamEvent::Stop {
                reason: StopReason::ToolUse,
                stop_sequence: None,
            },
            StreamEvent::Done,
        ] {
            w.write(ev, &mut out);
        }
        let events = events_of(&out);
        let (_, done) = events.last().unwrap();
        assert_eq!(done["response"]["output"][0]["namespace"], "agents");
        assert_eq!(done["response"]["output"][0]["name"], "spawn");
    }

    fn full_content() -> Vec<Part> {
        vec![
            Part::Thinking {
                text: "hmm".into(),
                signature: Some("sig".into()),
            },
            Part::RedactedThinking("zzz".into()),
            text("Hello "),
            text("world"),
            call("c1", "get", "{\"a\":1}"),
            call("c2", "put", "{}"),
        ]
    }

    #[test]
    fn a_whole_answer() {
        let echo = Echo {
            instructions: Some(json!("Be brief")),
            tools: vec![json!({"type": "function", "name": "get"})],
            temperature: Some(json!(0.5)),
            ..Echo::default()
        };
        let v = json_of(&write_response(
            &answer(full_content(), StopReason::ToolUse),
            &echo,
        ));
        assert_eq!(v["id"], "resp_01");
        assert_eq!(v["object"], "response");
        assert_eq!(v["created_at"], 1_700_000_000);
        assert_eq!(v["status"], "completed");
        assert_eq!(v["model"], "claude-x");
        assert_eq!(v["error"], Value::Null);
        assert_eq!(v["incomplete_details"], Value::Null);
        assert_eq!(v["instructions"], "Be brief");
        assert_eq!(v["temperature"], 0.5);
        assert_eq!(v["tools"], json!([{"type": "function", "name": "get"}]));
        assert_eq!(v["tool_choice"], "auto");
        assert_eq!(v["parallel_tool_calls"], true);
        assert_eq!(v["store"], false);
        assert_eq!(
            v["output"],
            json!([
                {"id": "rs_01_0", "type": "reasoning",
                    "summary": [{"type": "summary_text", "text": "hmm"}],
                    "encrypted_content": "sig"},
                {"id": "rs_01_1", "type": "reasoning", "summary": [],
                    "encrypted_content": "zzz"},
                {"id": "msg_01_2", "type": "message", "status": "completed", "role": "assistant",
                    "content": [
                        {"type": "output_text", "text": "Hello ", "annotations": [],
                            "logprobs": []},
                        {"type": "output_text", "text": "world", "annotations": [],
                            "logprobs": []}]},
                {"id": "fc_c1", "type": "function_call", "status": "completed",
                    "call_id": "c1", "name": "get", "arguments": "{\"a\":1}"},
                {"id": "fc_c2", "type": "function_call", "status": "completed",
                    "call_id": "c2", "name": "put", "arguments": "{}"},
            ])
        );
        assert_eq!(
            v["usage"],
            json!({"input_tokens": 100,
                "input_tokens_details": {"cached_tokens": 20, "cache_write_tokens": 5},
                "output_tokens": 50, "output_tokens_details": {"reasoning_tokens": 10},
                "total_tokens": 150})
        );
        // sluice's own usage reader reads it back.
        let u = sluice_core::usage::usage_from_value(&v["usage"]).unwrap();
        assert_eq!(
            (
                u.prompt_tokens,
                u.completion_tokens,
                u.cached_tokens,
                u.reasoning_tokens
            ),
            (100, 50, 20, 10)
        );
    }

    #[test]
    fn a_cut_or_filtered_answer_is_incomplete() {
        for (stop, reason) in [
            (StopReason::MaxTokens, "max_output_tokens"),
            (StopReason::ContextWindow, "max_output_tokens"),
            (StopReason::ContentFilter, "content_filter"),
        ] {
            let v = json_of(&write_response(
                &answer(vec![text("Hel")], stop),
                &Echo::default(),
            ));
            assert_eq!(v["status"], "incomplete");
            assert_eq!(v["incomplete_details"], json!({ "reason": reason }));
            assert_eq!(v["output"][0]["status"], "incomplete");
            assert_eq!(v["completed_at"], Value::Null);
        }
    }

    /// The output items sent back as input give the provider its own blocks again.
    #[test]
    fn output_items_sent_back_are_the_same_turn() {
        let v = json_of(&write_response(
            &answer(full_content(), StopReason::ToolUse),
            &Echo::default(),
        ));
        let mut input = vec![json!({"role": "user", "content": "go"})];
        input.extend(v["output"].as_array().unwrap().iter().cloned());
        let (req, _) = parse(json!({"model": "m", "input": input}), &mut strict()).unwrap();
        assert_eq!(req.messages[1].role, Role::Assistant);
        assert_eq!(req.messages[1].content, full_content());
        // A thinking block with no text keeps its signature as thinking, not redacted.
        let v = json_of(&write_response(
            &answer(
                vec![Part::Thinking {
                    text: String::new(),
                    signature: Some("s".into()),
                }],
                StopReason::EndTurn,
            ),
            &Echo::default(),
        ));
        let (req, _) = parse(
            json!({"model": "m", "input": [v["output"][0].clone()]}),
            &mut strict(),
        )
        .unwrap();
        assert_eq!(
            req.messages[0].content,
            [Part::Thinking {
                text: String::new(),
                signature: Some("s".into())
            }]
        );
    }

    fn stream_events() -> Vec<StreamEvent> {
        vec![
            StreamEvent::Start {
                id: "msg_9".into(),
                model: "claude".into(),
                usage: Usage {
                    prompt_tokens: 10,
                    ..Usage::default()
                },
            },
            StreamEvent::Thinking {
                index: 0,
                text: "let me ".into(),
            },
            StreamEvent::Thinking {
                index: 0,
                text: "think".into(),
            },
            StreamEvent::Signature {
                index: 0,
                signature: "sig".into(),
            },
            StreamEvent::BlockStop { index: 0 },
            StreamEvent::Text {
                index: 1,
                text: "Hi".into(),
            },
            StreamEvent::Ping,
            StreamEvent::Text {
                index: 1,
                text: " there".into(),
            },
            StreamEvent::BlockStop { index: 1 },
            StreamEvent::ToolStart {
                index: 2,
                id: "c1".into(),
                name: "get".into(),
            },
            StreamEvent::ToolStart {
                index: 3,
                id: "c2".into(),
                name: "put".into(),
            },
            StreamEvent::ToolArgs {
                index: 2,
                json: "{\"a\"".into(),
            },
            StreamEvent::ToolArgs {
                index: 3,
                json: "{}".into(),
            },
            StreamEvent::ToolArgs {
                index: 2,
                json: ":1}".into(),
            },
            StreamEvent::BlockStop { index: 3 },
            StreamEvent::BlockStop { index: 2 },
            StreamEvent::Stop {
                reason: StopReason::ToolUse,
                stop_sequence: None,
            },
            StreamEvent::Usage(Usage {
                completion_tokens: 7,
                ..Usage::default()
            }),
            StreamEvent::Done,
        ]
    }

    #[test]
    fn a_stream_with_thinking_text_and_parallel_calls() {
        let evs = write_all(stream_events());
        assert_eq!(
            names(&evs),
            [
                "response.created",
                "response.in_progress",
                "response.output_item.added",
                "response.reasoning_summary_part.added",
                "response.reasoning_summary_text.delta",
                "response.reasoning_summary_text.delta",
                "response.reasoning_summary_text.done",
                "response.reasoning_summary_part.done",
                "response.output_item.done",
                "response.output_item.added",
                "response.content_part.added",
                "response.output_text.delta",
                "response.output_text.delta",
                "response.output_text.done",
                "response.content_part.done",
                "response.output_item.done",
                "response.output_item.added",
                "response.output_item.added",
                "response.function_call_arguments.delta",
                "response.function_call_arguments.delta",
                "response.function_call_arguments.delta",
                "response.function_call_arguments.done",
                "response.output_item.done",
                "response.function_call_arguments.done",
                "response.output_item.done",
                "response.completed",
            ]
        );
        let created = &evs[0].1["response"];
        assert_eq!(created["id"], "resp_9");
        assert_eq!(created["status"], "in_progress");
        assert_eq!(created["output"], json!([]));
        assert_eq!(created["usage"], Value::Null);
        assert_eq!(
            evs[2].1["item"],
            json!({"id": "rs_9_0", "type": "reasoning", "summary": []})
        );
        assert_eq!(evs[4].1["delta"], "let me ");
        assert_eq!(evs[6].1["text"], "let me think");
        assert_eq!(evs[8].1["item"]["encrypted_content"], "sig");
        assert_eq!(
            evs[9].1["item"],
            json!({"id": "msg_9_1", "type": "message", "status": "in_progress",
                "role": "assistant", "content": []})
        );
        assert_eq!(
            (
                &evs[11].1["item_id"],
                &evs[11].1["output_index"],
                &evs[11].1["content_index"]
            ),
            (&json!("msg_9_1"), &json!(1), &json!(0))
        );
        assert_eq!(evs[13].1["text"], "Hi there");
        assert_eq!(evs[15].1["item"]["status"], "completed");
        assert_eq!(
            evs[16].1["item"],
            json!({"id": "fc_c1", "type": "function_call", "status": "in_progress",
                "call_id": "c1", "name": "get", "arguments": ""})
        );
        assert_eq!(evs[17].1["output_index"], 3);
        assert_eq!(
            [
                &evs[18].1["output_index"],
                &evs[19].1["output_index"],
                &evs[20].1["output_index"]
            ],
            [&json!(2), &json!(3), &json!(2)]
        );
        assert_eq!(evs[21].1["arguments"], "{}");
        assert_eq!(evs[21].1["name"], "put");
        assert_eq!(evs[22].1["output_index"], 3);
        assert_eq!(evs[23].1["arguments"], "{\"a\":1}");
        let done = &evs[25].1["response"];
        assert_eq!(done["status"], "completed");
        let output = done["output"].as_array().unwrap();
        assert_eq!(
            output
                .iter()
                .map(|o| o["type"].as_str().unwrap())
                .collect::<Vec<_>>(),
            ["reasoning", "message", "function_call", "function_call"]
        );
        assert_eq!(output[0]["summary"][0]["text"], "let me think");
        assert_eq!(output[1]["content"][0]["text"], "Hi there");
        assert_eq!(output[2]["arguments"], "{\"a\":1}");
        assert_eq!(output[3]["arguments"], "{}");
        assert_eq!(done["usage"]["input_tokens"], 10);
        assert_eq!(done["usage"]["output_tokens"], 7);
        assert_eq!(done["usage"]["total_tokens"], 17);
        // Each item in the final response is as its `output_item.done` told it.
        for (_, e) in evs.iter().filter(|(n, _)| n == "response.output_item.done") {
            let at = e["output_index"].as_u64().unwrap() as usize;
            assert_eq!(output[at], e["item"]);
        }
    }

    #[test]
    fn consecutive_text_blocks_are_parts_of_one_message() {
        let evs = write_all(vec![
            StreamEvent::Text {
                index: 0,
                text: "a".into(),
            },
            StreamEvent::BlockStop { index: 0 },
            StreamEvent::Text {
                index: 1,
                text: "b".into(),
            },
            StreamEvent::BlockStop { index: 1 },
            StreamEvent::Done,
        ]);
        assert_eq!(
            names(&evs),
            [
                "response.created",
                "response.in_progress",
                "response.output_item.added",
                "response.content_part.added",
                "response.output_text.delta",
                "response.output_text.done",
                "response.content_part.done",
                "response.content_part.added",
                "response.output_text.delta",
                "response.output_text.done",
                "response.content_part.done",
                "response.output_item.done",
                "response.completed",
            ]
        );
        assert_eq!(evs[8].1["content_index"], 1);
        assert_eq!(evs[8].1["output_index"], 0);
        let content = &evs[12].1["response"]["output"][0]["content"];
        assert_eq!(content[0]["text"], "a");
        assert_eq!(content[1]["text"], "b");
    }

    #[test]
    fn a_stream_cut_by_its_limit_is_incomplete() {
        let evs = write_all(vec![
            StreamEvent::Start {
                id: "x".into(),
                model: "m".into(),
                usage: Usage::default(),
            },
            StreamEvent::Text {
                index: 0,
                text: "abc".into(),
            },
            StreamEvent::Stop {
                reason: StopReason::MaxTokens,
                stop_sequence: None,
            },
            StreamEvent::Done,
        ]);
        let n = names(&evs);
        assert_eq!(
            &n[n.len() - 5..],
            [
                "response.output_text.delta",
                "response.output_text.done",
                "response.content_part.done",
                "response.output_item.done",
                "response.incomplete",
            ]
        );
        let end = &evs.last().unwrap().1["response"];
        assert_eq!(end["status"], "incomplete");
        assert_eq!(end["incomplete_details"]["reason"], "max_output_tokens");
        assert_eq!(end["output"][0]["status"], "incomplete");
    }

    #[test]
    fn an_error_ends_the_stream() {
        let evs = write_all(vec![
            StreamEvent::Start {
                id: "x".into(),
                model: "m".into(),
                usage: Usage::default(),
            },
            StreamEvent::Text {
                index: 0,
                text: "a".into(),
            },
            StreamEvent::Error {
                kind: "overloaded_error".into(),
                message: "busy".into(),
            },
            StreamEvent::Text {
                index: 0,
                text: "b".into(),
            },
            StreamEvent::Done,
        ]);
        let n = names(&evs);
        assert_eq!(
            &n[n.len() - 3..],
            ["response.output_text.delta", "error", "response.failed"]
        );
        let error = &evs[evs.len() - 2].1;
        assert_eq!(
            (&error["code"], &error["message"]),
            (&json!("overloaded_error"), &json!("busy"))
        );
        let failed = &evs[evs.len() - 1].1["response"];
        assert_eq!(failed["status"], "failed");
        assert_eq!(
            failed["error"],
            json!({"code": "server_error", "message": "busy"})
        );
        assert_eq!(failed["output"][0]["content"][0]["text"], "a");
    }

    /// What sluice itself reads of a Responses stream (the SSE tap's usage and end, the
    /// assembled answer for spend logs) it reads of this writer's.
    #[test]
    fn sluices_own_readers_read_the_stream() {
        let mut w = EventWriter::default();
        let mut out = Vec::new();
        for ev in stream_events() {
            w.write(ev, &mut out);
        }
        let out = bytes::Bytes::from(out);
        let mut tap = crate::sse::SseTap::new(false);
        tap.feed(out.clone()).unwrap();
        tap.finish();
        assert!(tap.finished());
        let u = tap.usage().unwrap();
        assert_eq!((u.prompt_tokens, u.completion_tokens), (10, 7));
        let answer = crate::assemble::stream_answer(&[out]).unwrap();
        assert_eq!(answer["status"], "completed");
        assert_eq!(answer["output"].as_array().unwrap().len(), 4);
    }

    /// As an OpenAI chat client gets no `[DONE]` from a stream that stopped short.
    #[test]
    fn no_done_no_completed() {
        let evs = write_all(vec![StreamEvent::Text {
            index: 0,
            text: "a".into(),
        }]);
        assert_eq!(
            names(&evs),
            [
                "response.created",
                "response.in_progress",
                "response.output_item.added",
                "response.content_part.added",
                "response.output_text.delta",
            ]
        );
    }

    /// Through the frame-by-frame translator, from an OpenAI chat stream.
    #[test]
    fn a_translated_chat_stream() {
        let chunks = [
            r#"{"id":"chatcmpl-7","model":"gpt","choices":[{"delta":{"role":"assistant","content":"Hel"}}]}"#,
            r#"{"id":"chatcmpl-7","model":"gpt","choices":[{"delta":{"content":"lo"},"finish_reason":"stop"}]}"#,
            r#"{"id":"chatcmpl-7","model":"gpt","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}"#,
            "[DONE]",
        ];
        let upstream: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
        let mut t = crate::stream::Translator::responses(
            crate::openai::ChunkReader::default(),
            Echo::default(),
        );
        let mut out = t.feed(upstream.as_bytes());
        out.extend(t.finish());
        let evs = events_of(&out);
        let (name, last) = evs.last().unwrap();
        assert_eq!(name, "response.completed");
        let r = &last["response"];
        assert_eq!(r["id"], "resp_7");
        assert_eq!(r["model"], "gpt");
        assert_eq!(r["output"][0]["content"][0]["text"], "Hello");
        assert_eq!(r["usage"]["input_tokens"], 3);
        assert_eq!(r["usage"]["output_tokens"], 2);
    }
}
