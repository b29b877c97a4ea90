//! Amazon Bedrock's Converse API ⇄ the internal representation: requests written, answers and
//! ConverseStream events read (the binary framing is `sluice_translate::eventstream`'s job;
//! this module sees each event's type and JSON payload).
//!
//! Anthropic's `cache_control` becomes a `cachePoint` block after the marked block; thinking
//! and `top_k` go in `additionalModelRequestFields` (what Anthropic models on Bedrock read).
//! Bedrock cannot fetch image URLs: inline bytes only, other images refused (400 naming the
//! part) or dropped with `drop_params`.

use serde::Deserialize;
use serde_json::{json, Map, Value};

use sluice_core::usage::Usage;
use sluice_translate::ir::{
    ChatRequest, ChatResponse, ImageSource, Part, ResponseFormat, Role, StopReason, StreamEvent, Text,
    ToolCall, ToolChoice,
};
use sluice_translate::stream::{Event, Framing, StreamRead};
use sluice_translate::converse::image_format;
use sluice_translate::params::Setting;
use sluice_translate::{now, to_json, tool_input, Codec, Params, TranslateError};

/// Bedrock's Converse API as an upstream chat format.
#[derive(Debug, Clone, Copy, Default)]
pub struct Converse;

impl Codec for Converse {
    type Reader = EventReader;

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

    fn reader(&self, id: &str, model: &str) -> EventReader {
        EventReader::new(id.to_owned(), model.to_owned())
    }

    fn parse_error(&self, body: &[u8]) -> Option<(String, String)> {
        parse_error(body)
    }

    /// Converse answers carry no id: AWS's request id stands in.
    fn answer_id<'h>(&self, headers: &'h http::HeaderMap) -> Option<&'h str> {
        headers
            .get("x-amzn-requestid")
            .and_then(|v| v.to_str().ok())
    }
}

// ---------------------------------------------------------------------------------------------
// Requests

/// Write a Converse request body (the model and the stream mode are in the URL). Converse has
/// no end-user field (a hint); a JSON schema goes in `outputConfig.textFormat` for a model the
/// registry says answers in one natively, else through a forced tool (`json_tool::forced_json`).
pub fn write_request(req: &ChatRequest, params: &mut Params) -> Result<Vec<u8>, TranslateError> {
    // A model without structured output is asked for the schema as its one tool.
    if let Some(forced) = sluice_translate::json_tool::forced_json(req, params.rules()) {
        return write_request(&forced, params);
    }
    let mut output = Map::new();
    match (&req.response_format, params.rules().native_structured_output) {
        (None, _) => {}
        (Some(ResponseFormat::Schema { name, schema, .. }), true) => {
            // botocore's `JsonSchemaDefinition.schema` is the schema as a string.
            output.insert(
                "textFormat".into(),
                json!({"type": "json_schema", "structure": {"jsonSchema": {
                    "schema": schema.to_string(), "name": name}}}),
            );
        }
        (Some(_), _) => params.meaning_setting(Setting::ResponseFormat)?,
    }
    if req.user.is_some() {
        params.hint_setting(Setting::User);
    }
    let mut body = Map::new();
    let mut messages: Vec<Value> = Vec::with_capacity(req.messages.len());
    let mut has_tool_blocks = false;
    for (i, m) in req.messages.iter().enumerate() {
        let mut blocks = Vec::with_capacity(m.content.len());
        for (j, p) in m.content.iter().enumerate() {
            has_tool_blocks |= matches!(p, Part::ToolCall(_) | Part::ToolResult { .. });
            write_part(
                p,
                params,
                &format!("messages[{i}].content[{j}]"),
                &mut blocks,
            )?;
        }
        if blocks.is_empty() {
            continue;
        }
        let role = match m.role {
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        // Converse wants alternating turns: merge consecutive ones of one role.
        if let Some(prev) = messages.last_mut().filter(|c| c["role"] == role) {
            if let Some(Value::Array(a)) = prev.get_mut("content") {
                a.extend(blocks);
                continue;
            }
        }
        messages.push(json!({"role": role, "content": blocks}));
    }
    body.insert("messages".into(), Value::Array(messages));
    if !req.system.is_empty() {
        let mut system = Vec::with_capacity(req.system.len());
        for t in &req.system {
            text_block(t, &mut system);
        }
        body.insert("system".into(), Value::Array(system));
    }
    let mut inference = Map::new();
    if let Some(n) = req.max_tokens {
        inference.insert("maxTokens".into(), n.into());
    }
    if let Some(t) = req.temperature {
        inference.insert("temperature".into(), t.into());
    }
    if let Some(p) = req.top_p {
        inference.insert("topP".into(), p.into());
    }
    if !req.stop.is_empty() {
        inference.insert("stopSequences".into(), req.stop.clone().into());
    }
    if !inference.is_empty() {
        body.insert("inferenceConfig".into(), Value::Object(inference));
    }
    let mut extra = Map::new();
    if let Some(k) = req.top_k {
        extra.insert("top_k".into(), k.into());
    }
    if let Some(t) = req.thinking {
        sluice_translate::anthropic::Shape::of(t, params.rules()).write(&mut extra);
        // Converse carries the effort itself (`outputConfig.effort`, botocore's model).
        if let Some(Value::Object(mut config)) = extra.remove("output_config") {
            if let Some(effort) = config.remove("effort") {
                output.insert("effort".into(), effort);
            }
            if !config.is_empty() {
                extra.insert("output_config".into(), Value::Object(config));
            }
        }
    }
    if !output.is_empty() {
        body.insert("outputConfig".into(), Value::Object(output));
    }
    if !extra.is_empty() {
        body.insert("additionalModelRequestFields".into(), Value::Object(extra));
    }
    // Converse has no "none" choice: the tools are left out, unless the conversation already
    // holds tool blocks (then Bedrock requires the tool definitions).
    let no_tools = req.tool_choice == Some(ToolChoice::None) && !has_tool_blocks;
    if !req.tools.is_empty() && !no_tools {
        let tools: Vec<Value> = req
            .tools
            .iter()
            .flat_map(|t| {
                let mut spec = json!({"name": t.name, "inputSchema": {"json": t.parameters}});
                if let Some(d) = &t.description {
                    spec["description"] = d.clone().into();
                }
                let cache = t
                    .cache_control
                    .as_ref()
                    .map(|_| json!({"cachePoint": {"type": "default"}}));
                std::iter::once(json!({ "toolSpec": spec })).chain(cache)
            })
            .collect();
        let mut config = json!({ "tools": tools });
        match &req.tool_choice {
            None | Some(ToolChoice::None) => {}
            Some(ToolChoice::Auto) => config["toolChoice"] = json!({"auto": {}}),
            Some(ToolChoice::Any) => config["toolChoice"] = json!({"any": {}}),
            Some(ToolChoice::Tool(name)) => {
                config["toolChoice"] = json!({"tool": {"name": name}});
            }
        }
        body.insert("toolConfig".into(), config);
    }
    if req.parallel_tool_calls == Some(false) {
        params.meaning_setting(Setting::ParallelToolCalls)?;
    }
    Ok(to_json(&Value::Object(body)))
}

fn cache_point(cache_control: &Option<Value>, out: &mut Vec<Value>) {
    if cache_control.is_some() {
        out.push(json!({"cachePoint": {"type": "default"}}));
    }
}

fn text_block(t: &Text, out: &mut Vec<Value>) {
    out.push(json!({"text": t.text}));
    cache_point(&t.cache_control, out);
}

fn image(
    source: &ImageSource,
    params: &mut Params,
    at: &str,
) -> Result<Option<Value>, TranslateError> {
    let name = Setting::Image.name(params.client());
    let mut refuse = |why: &str| {
        params
            .meaning_or(name, || TranslateError::Invalid {
                param: "messages",
                message: format!("{at}: {why}"),
            })
            .map(|()| None)
    };
    match source {
        ImageSource::Base64 { media_type, data } => match image_format(media_type) {
            Some(format) => Ok(Some(
                json!({"image": {"format": format, "source": {"bytes": data}}}),
            )),
            None => refuse("Bedrock takes png, jpeg, gif and webp images"),
        },
        ImageSource::Url(_) => {
            refuse("Bedrock cannot fetch image URLs; send the image inline (a data: URL)")
        }
    }
}

fn write_part(
    p: &Part,
    params: &mut Params,
    at: &str,
    out: &mut Vec<Value>,
) -> Result<(), TranslateError> {
    match p {
        Part::Text(t) => text_block(t, out),
        Part::Image {
            source,
            cache_control,
        } => {
            if let Some(v) = image(source, params, at)? {
                out.push(v);
                cache_point(cache_control, out);
            }
        }
        Part::ToolCall(c) => out.push(json!({"toolUse": {
            "toolUseId": c.id, "name": c.name, "input": tool_input(&c.arguments),
        }})),
        Part::ToolResult {
            id,
            content,
            is_error,
            cache_control,
        } => {
            let mut inner = Vec::with_capacity(content.len());
            for c in content {
                match c {
                    Part::Text(t) => inner.push(json!({"text": t.text})),
                    Part::Image { source, .. } => inner.extend(image(source, params, at)?),
                    _ => {}
                }
            }
            let mut v = json!({"toolUseId": id, "content": inner});
            if *is_error {
                v["status"] = "error".into();
            }
            out.push(json!({ "toolResult": v }));
            cache_point(cache_control, out);
        }
        Part::Thinking { text, signature } => {
            // Reasoning without its signature cannot be sent back; Bedrock would refuse it.
            if let Some(s) = signature {
                out.push(json!({"reasoningContent": {
                    "reasoningText": {"text": text, "signature": s},
                }}));
            }
        }
        Part::RedactedThinking(data) => {
            out.push(json!({"reasoningContent": {"redactedContent": data}}));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Answers

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawResponse {
    #[serde(default)]
    output: Option<RawOutput>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Option<RawUsage>,
}

#[derive(Deserialize)]
struct RawOutput {
    #[serde(default)]
    message: Option<RawMessage>,
}

#[derive(Deserialize)]
struct RawMessage {
    #[serde(default)]
    content: Vec<RawBlock>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawBlock {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    tool_use: Option<RawToolUse>,
    #[serde(default)]
    reasoning_content: Option<RawReasoning>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawToolUse {
    tool_use_id: String,
    name: String,
    #[serde(default)]
    input: Value,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawReasoning {
    #[serde(default)]
    reasoning_text: Option<RawReasoningText>,
    #[serde(default)]
    redacted_content: Option<String>,
}

#[derive(Deserialize)]
struct RawReasoningText {
    #[serde(default)]
    text: String,
    #[serde(default)]
    signature: Option<String>,
}

/// Converse's `usage`: `inputTokens` excludes cache reads and writes (as Anthropic's does).
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RawUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    #[serde(default)]
    cache_read_input_tokens: u64,
    #[serde(default)]
    cache_write_input_tokens: u64,
}

impl From<RawUsage> for Usage {
    fn from(u: RawUsage) -> Self {
        Usage {
            prompt_tokens: u.input_tokens + u.cache_read_input_tokens + u.cache_write_input_tokens,
            completion_tokens: u.output_tokens,
            cached_tokens: u.cache_read_input_tokens,
            cache_creation_tokens: u.cache_write_input_tokens,
            reasoning_tokens: 0,
            ..Usage::default()
        }
    }
}

/// Converse's `stopReason`.
fn stop_reason(s: &str) -> StopReason {
    match s {
        "tool_use" => StopReason::ToolUse,
        "max_tokens" => StopReason::MaxTokens,
        "model_context_window_exceeded" => StopReason::ContextWindow,
        "stop_sequence" => StopReason::StopSequence,
        "guardrail_intervened" | "content_filtered" => StopReason::ContentFilter,
        _ => StopReason::EndTurn,
    }
}

/// Read a Converse answer. Bedrock sends no id or model in the body: the caller fills them in.
pub fn parse_response(body: &[u8]) -> Result<ChatResponse, TranslateError> {
    let raw: RawResponse = serde_json::from_slice(body).map_err(TranslateError::bad_answer)?;
    let blocks = raw
        .output
        .and_then(|o| o.message)
        .map(|m| m.content)
        .unwrap_or_default();
    let mut content = Vec::with_capacity(blocks.len());
    for b in blocks {
        if let Some(t) = b.text {
            content.push(Part::Text(Text::plain(t)));
        } else if let Some(u) = b.tool_use {
            content.push(Part::ToolCall(ToolCall {
                id: u.tool_use_id,
                name: u.name,
                arguments: if u.input.is_null() {
                    "{}".to_owned()
                } else {
                    u.input.to_string()
                },
            }));
        } else if let Some(r) = b.reasoning_content {
            if let Some(t) = r.reasoning_text {
                content.push(Part::Thinking {
                    text: t.text,
                    signature: t.signature,
                });
            } else if let Some(d) = r.redacted_content {
                content.push(Part::RedactedThinking(d));
            }
        }
    }
    Ok(ChatResponse {
        id: String::new(),
        model: String::new(),
        content,
        stop: raw
            .stop_reason
            .as_deref()
            .map_or(StopReason::EndTurn, stop_reason),
        stop_sequence: None,
        usage: raw.usage.map(Usage::from).unwrap_or_default(),
        created: now(),
    })
}

// ---------------------------------------------------------------------------------------------
// Streams

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawEvent {
    #[serde(default)]
    content_block_index: usize,
    #[serde(default)]
    start: Option<RawStart>,
    #[serde(default)]
    delta: Option<RawDelta>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Option<RawUsage>,
    #[serde(default)]
    message: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawStart {
    #[serde(default)]
    tool_use: Option<RawToolStart>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawToolStart {
    tool_use_id: String,
    name: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawDelta {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    tool_use: Option<RawToolDelta>,
    #[serde(default)]
    reasoning_content: Option<RawReasoningDelta>,
}

#[derive(Deserialize)]
struct RawToolDelta {
    #[serde(default)]
    input: String,
}

#[derive(Deserialize)]
struct RawReasoningDelta {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    signature: Option<String>,
}

/// Turns ConverseStream events into stream events. The stream's proper end is `messageStop`
/// (then `metadata` with usage).
#[derive(Debug)]
pub struct EventReader {
    id: String,
    model: String,
    stopped: bool,
    done: bool,
}

impl EventReader {
    /// A reader for one answer; Bedrock's events name neither, so the id and model are given.
    pub fn new(id: String, model: String) -> Self {
        Self {
            id,
            model,
            stopped: false,
            done: false,
        }
    }

    /// Read one event: its `:event-type` (or `:exception-type` when `exception`) and payload.
    pub fn read_message(
        &mut self,
        kind: &str,
        exception: bool,
        payload: &[u8],
        out: &mut Vec<StreamEvent>,
    ) {
        let Ok(ev) = serde_json::from_slice::<RawEvent>(payload) else {
            return;
        };
        if exception {
            out.push(StreamEvent::Error {
                kind: error_kind(kind).to_owned(),
                message: ev.message.unwrap_or_else(|| kind.to_owned()),
            });
            self.done = true;
            return;
        }
        let index = ev.content_block_index;
        match kind {
            "messageStart" => out.push(StreamEvent::Start {
                id: std::mem::take(&mut self.id),
                model: std::mem::take(&mut self.model),
                usage: Usage::default(),
            }),
            "contentBlockStart" => {
                if let Some(t) = ev.start.and_then(|s| s.tool_use) {
                    out.push(StreamEvent::ToolStart {
                        index,
                        id: t.tool_use_id,
                        name: t.name,
                    });
                }
            }
            "contentBlockDelta" => {
                let Some(d) = ev.delta else { return };
                if let Some(text) = d.text {
                    out.push(StreamEvent::Text { index, text });
                }
                if let Some(t) = d.tool_use.filter(|t| !t.input.is_empty()) {
                    out.push(StreamEvent::ToolArgs {
                        index,
                        json: t.input,
                    });
                }
                if let Some(r) = d.reasoning_content {
                    if let Some(text) = r.text {
                        out.push(StreamEvent::Thinking { index, text });
                    }
                    if let Some(signature) = r.signature {
                        out.push(StreamEvent::Signature { index, signature });
                    }
                }
            }
            "contentBlockStop" => out.push(StreamEvent::BlockStop { index }),
            "messageStop" => {
                self.stopped = true;
                out.push(StreamEvent::Stop {
                    reason: ev
                        .stop_reason
                        .as_deref()
                        .map_or(StopReason::EndTurn, stop_reason),
                    stop_sequence: None,
                });
            }
            "metadata" => {
                if let Some(u) = ev.usage {
                    out.push(StreamEvent::Usage(u.into()));
                }
                if self.stopped && !self.done {
                    self.done = true;
                    out.push(StreamEvent::Done);
                }
            }
            _ => {}
        }
    }

    /// At the end of the body: the stream's end if `messageStop` came (and `metadata` did
    /// not), an error if the stream broke off.
    fn finish(&mut self, out: &mut Vec<StreamEvent>) {
        if self.done {
            return;
        }
        self.done = true;
        if self.stopped {
            out.push(StreamEvent::Done);
        } else {
            out.push(StreamEvent::Error {
                kind: "api_error".into(),
                message: "the upstream stream ended before messageStop".into(),
            });
        }
    }
}

impl StreamRead for EventReader {
    const FRAMING: Framing = Framing::EventStream;

    fn read(&mut self, event: Event<'_>, out: &mut Vec<StreamEvent>) {
        if let Event::Message {
            kind,
            exception,
            payload,
        } = event
        {
            self.read_message(kind, exception, payload, out);
        }
    }

    fn end(&mut self, out: &mut Vec<StreamEvent>) {
        self.finish(out);
    }
}

/// Anthropic's error type for a Bedrock exception (what both client formats understand).
pub fn error_kind(exception: &str) -> &'static str {
    let lower = exception.to_ascii_lowercase();
    if lower.starts_with("throttling") || lower.starts_with("toomanyrequests") {
        "rate_limit_error"
    } else if lower.starts_with("serviceunavailable") || lower.starts_with("modelnotready") {
        "overloaded_error"
    } else if lower.starts_with("validation") {
        "invalid_request_error"
    } else if lower.starts_with("accessdenied") {
        "permission_error"
    } else if lower.starts_with("resourcenotfound") {
        "not_found_error"
    } else {
        "api_error"
    }
}

/// Bedrock's error body `{"message": ...}` (the type travels in `x-amzn-ErrorType`; some
/// answers carry `__type`).
pub fn parse_error(body: &[u8]) -> Option<(String, String)> {
    #[derive(Deserialize)]
    struct Raw {
        #[serde(default, alias = "Message")]
        message: String,
        #[serde(default, rename = "__type")]
        kind: Option<String>,
    }
    let raw: Raw = serde_json::from_slice(body).ok()?;
    let kind = raw
        .kind
        .as_deref()
        .map(|k| error_kind(k.rsplit('#').next().unwrap_or(k)).to_owned())
        .unwrap_or_default();
    Some((kind, raw.message))
}
