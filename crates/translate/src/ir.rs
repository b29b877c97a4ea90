//! The one internal representation of a chat request, a chat answer and a stream event. Every
//! wire format translates to and from these types, so N formats need N translators, not N×N.
//! Only what a provider can act on is modelled; values sluice never interprets (JSON schemas,
//! `cache_control`, tool inputs) stay as JSON.

use serde_json::Value;

use sluice_core::usage::Usage;

/// A chat request, whichever API it came in on.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChatRequest {
    /// The model name to send upstream.
    pub model: String,
    /// System prompt parts, in order (Anthropic's `system`, OpenAI's system/developer messages).
    pub system: Vec<Text>,
    /// The conversation. Tool results live in user turns, as Anthropic has them.
    pub messages: Vec<Message>,
    /// Output token limit (`max_tokens`, `max_completion_tokens`).
    pub max_tokens: Option<u64>,
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Nucleus sampling.
    pub top_p: Option<f64>,
    /// Top-k sampling (Anthropic only).
    pub top_k: Option<u64>,
    /// Stop sequences.
    pub stop: Vec<String>,
    /// Whether the answer streams.
    pub stream: bool,
    /// Tools the model may call.
    pub tools: Vec<Tool>,
    /// How the model must use them.
    pub tool_choice: Option<ToolChoice>,
    /// `false` asks for at most one tool call per turn.
    pub parallel_tool_calls: Option<bool>,
    /// End-user id for the provider's abuse monitoring.
    pub user: Option<String>,
    /// Extended thinking / reasoning.
    pub thinking: Option<Thinking>,
    /// Structured output (OpenAI's `response_format`).
    pub response_format: Option<ResponseFormat>,
}

impl ChatRequest {
    /// Appends a turn, joining it to the last one when the same role speaks (consecutive
    /// tool results join the user turn; a reasoning block and the calls after it, the
    /// assistant's), as every format's reader builds the conversation.
    pub fn push_turn(&mut self, role: Role, mut parts: Vec<Part>) {
        match self.messages.last_mut() {
            Some(last) if last.role == role => last.content.append(&mut parts),
            _ => self.messages.push(Message {
                role,
                content: parts,
            }),
        }
    }

    /// Whether any block or tool carries Anthropic's `cache_control`, which formats without
    /// inline cache markers drop as a hint.
    pub fn has_cache_control(&self) -> bool {
        self.system.iter().any(|t| t.cache_control.is_some())
            || self.tools.iter().any(|t| t.cache_control.is_some())
            || self
                .messages
                .iter()
                .flat_map(|m| &m.content)
                .any(Part::has_cache_control)
    }
}

/// Structured output the client asked for.
#[derive(Debug, Clone, PartialEq)]
pub enum ResponseFormat {
    /// Any JSON object (`json_object`).
    Json,
    /// JSON matching a schema (`json_schema`): its name, the schema, `strict`.
    Schema {
        /// The schema's name.
        name: String,
        /// The JSON schema.
        schema: Value,
        /// OpenAI's `strict`.
        strict: Option<bool>,
    },
}

impl ResponseFormat {
    /// The schema, when there is one.
    pub fn schema(&self) -> Option<&Value> {
        match self {
            Self::Json => None,
            Self::Schema { schema, .. } => Some(schema),
        }
    }
}

/// Who speaks a turn. System prompts are apart, tool results are user content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The caller (and tool results).
    User,
    /// The model.
    Assistant,
}

/// One turn of the conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// Who speaks.
    pub role: Role,
    /// What was said, in order.
    pub content: Vec<Part>,
}

/// A text block with its prompt-caching marker, if any.
#[derive(Debug, Clone, PartialEq)]
pub struct Text {
    /// The text.
    pub text: String,
    /// Anthropic's `cache_control`, passed through untouched.
    pub cache_control: Option<Value>,
}

impl Text {
    /// Plain text without a cache marker.
    pub fn plain(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            cache_control: None,
        }
    }
}

/// One piece of a turn.
#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    /// Text.
    Text(Text),
    /// An image.
    Image {
        /// Where its bytes are.
        source: ImageSource,
        /// Anthropic's `cache_control`.
        cache_control: Option<Value>,
    },
    /// The model calls a tool.
    ToolCall(ToolCall),
    /// The caller answers a tool call.
    ToolResult {
        /// The call's id.
        id: String,
        /// The answer (text and images).
        content: Vec<Part>,
        /// The tool failed.
        is_error: bool,
        /// Anthropic's `cache_control`.
        cache_control: Option<Value>,
    },
    /// The model's visible reasoning, with the signature that lets it be sent back.
    Thinking {
        /// The reasoning text.
        text: String,
        /// Anthropic's signature over it.
        signature: Option<String>,
    },
    /// Reasoning the provider encrypted; only ever sent back as is.
    RedactedThinking(String),
}

impl Part {
    /// Whether this part, or a part inside it, carries `cache_control`.
    fn has_cache_control(&self) -> bool {
        match self {
            Self::Text(t) => t.cache_control.is_some(),
            Self::Image { cache_control, .. } => cache_control.is_some(),
            Self::ToolResult {
                content,
                cache_control,
                ..
            } => cache_control.is_some() || content.iter().any(Self::has_cache_control),
            Self::ToolCall(_) | Self::Thinking { .. } | Self::RedactedThinking(_) => false,
        }
    }
}

/// Where an image's bytes are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageSource {
    /// A URL the provider fetches.
    Url(String),
    /// Inline bytes.
    Base64 {
        /// `image/png`, `image/jpeg`, ...
        media_type: String,
        /// Base64 text.
        data: String,
    },
}

impl ImageSource {
    /// Read an OpenAI `image_url.url`: a `data:` URL becomes inline bytes.
    pub fn from_url(url: String) -> Self {
        if let Some(rest) = url.strip_prefix("data:") {
            if let Some((media_type, data)) = rest.split_once(";base64,") {
                return Self::Base64 {
                    media_type: media_type.to_owned(),
                    data: data.to_owned(),
                };
            }
        }
        Self::Url(url)
    }

    /// As an OpenAI `image_url.url` (inline bytes become a `data:` URL).
    pub fn to_url(&self) -> String {
        match self {
            Self::Url(u) => u.clone(),
            Self::Base64 { media_type, data } => format!("data:{media_type};base64,{data}"),
        }
    }
}

/// A tool call made by the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    /// The call's id, echoed by the result.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments as JSON text (OpenAI's form; Anthropic's `input` object serialised).
    pub arguments: String,
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq)]
pub struct Tool {
    /// Its name.
    pub name: String,
    /// What it does.
    pub description: Option<String>,
    /// JSON schema of its arguments.
    pub parameters: Value,
    /// Anthropic's `cache_control`.
    pub cache_control: Option<Value>,
}

/// How the model must use the tools.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolChoice {
    /// The model decides.
    Auto,
    /// The model must call some tool (OpenAI's `required`).
    Any,
    /// The model must not call tools.
    None,
    /// The model must call this tool.
    Tool(String),
}

/// Extended thinking as the client asked for it; [`crate::fit`] then makes it what the
/// target model takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Thinking {
    /// A budget of thinking tokens (Anthropic's `thinking: {type: enabled, budget_tokens}`).
    Budget(u64),
    /// A level of effort (OpenAI's `reasoning_effort`); [`Effort::None`] turns thinking off
    /// (Anthropic's `thinking: {type: disabled}` too).
    Effort(Effort),
    /// Anthropic's adaptive thinking (`thinking: {type: adaptive}`): the model decides how
    /// much, guided by `output_config.effort` when given.
    Adaptive(Option<Effort>),
}

impl Thinking {
    /// The level of effort it stands for, where a target takes a level (`None`: adaptive
    /// with no level given, the model's own default).
    pub const fn effort(self) -> Option<Effort> {
        match self {
            Self::Budget(b) => Some(Effort::from_budget(b)),
            Self::Effort(e) => Some(e),
            Self::Adaptive(e) => e,
        }
    }

    /// The budget it stands for, where a target takes a budget (`None`: thinking off).
    pub const fn budget(self) -> Option<u64> {
        match self {
            Self::Budget(b) => Some(b),
            Self::Effort(Effort::None) => None,
            Self::Effort(e) | Self::Adaptive(Some(e)) => Some(e.budget()),
            Self::Adaptive(None) => Some(Effort::Medium.budget()),
        }
    }
}

pub use sluice_core::rules::Effort;

/// Why the model stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// Natural end of the turn.
    EndTurn,
    /// A stop sequence matched.
    StopSequence,
    /// The output token limit was reached.
    MaxTokens,
    /// The model called tools and waits for their results.
    ToolUse,
    /// The provider refused or filtered the answer.
    ContentFilter,
    /// The prompt and the answer filled the model's context window (Anthropic's and Bedrock's
    /// `model_context_window_exceeded`; OpenAI's clients see `length`).
    ContextWindow,
    /// A long turn paused by the server, to be continued by sending the answer back
    /// (Anthropic's `pause_turn`; OpenAI's clients see `stop`).
    PauseTurn,
}

impl StopReason {
    /// OpenAI's `finish_reason`.
    pub const fn openai(self) -> &'static str {
        match self {
            Self::EndTurn | Self::StopSequence => "stop",
            Self::MaxTokens | Self::ContextWindow => "length",
            Self::ToolUse => "tool_calls",
            Self::ContentFilter => "content_filter",
            Self::PauseTurn => "stop",
        }
    }

    /// Read OpenAI's `finish_reason` (`function_call` is the legacy tool spelling).
    pub fn from_openai(s: &str) -> Self {
        match s {
            "length" => Self::MaxTokens,
            "tool_calls" | "function_call" => Self::ToolUse,
            "content_filter" => Self::ContentFilter,
            _ => Self::EndTurn,
        }
    }

    /// Anthropic's `stop_reason`.
    pub const fn anthropic(self) -> &'static str {
        match self {
            Self::EndTurn => "end_turn",
            Self::StopSequence => "stop_sequence",
            Self::MaxTokens => "max_tokens",
            Self::ToolUse => "tool_use",
            Self::ContentFilter => "refusal",
            Self::ContextWindow => "model_context_window_exceeded",
            Self::PauseTurn => "pause_turn",
        }
    }

    /// Read Anthropic's `stop_reason` (every value its SDK's `StopReason` lists).
    pub fn from_anthropic(s: &str) -> Self {
        match s {
            "stop_sequence" => Self::StopSequence,
            "max_tokens" => Self::MaxTokens,
            "model_context_window_exceeded" => Self::ContextWindow,
            "tool_use" => Self::ToolUse,
            "refusal" => Self::ContentFilter,
            "pause_turn" => Self::PauseTurn,
            _ => Self::EndTurn,
        }
    }
}

/// A whole (non-stream) answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatResponse {
    /// The provider's id for it.
    pub id: String,
    /// The model that answered.
    pub model: String,
    /// Text, thinking and tool calls, in order.
    pub content: Vec<Part>,
    /// Why it ended.
    pub stop: StopReason,
    /// The stop sequence that matched, when one did.
    pub stop_sequence: Option<String>,
    /// Normalised usage.
    pub usage: Usage,
    /// Unix seconds (OpenAI's `created`).
    pub created: u64,
}

/// One stream event. Content arrives in blocks numbered from 0 in order of appearance; a block
/// is text, thinking or one tool call.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// The answer begins.
    Start {
        /// The provider's id.
        id: String,
        /// The model that answers.
        model: String,
        /// Usage known at the start (Anthropic reports input tokens here).
        usage: Usage,
    },
    /// Text for block `index`.
    Text {
        /// Block number.
        index: usize,
        /// The new text.
        text: String,
    },
    /// Reasoning text for block `index`.
    Thinking {
        /// Block number.
        index: usize,
        /// The new text.
        text: String,
    },
    /// The signature closing a thinking block.
    Signature {
        /// Block number.
        index: usize,
        /// Signature.
        signature: String,
    },
    /// A tool call starts in block `index`.
    ToolStart {
        /// Block number.
        index: usize,
        /// Call id.
        id: String,
        /// Tool name.
        name: String,
    },
    /// More argument JSON for the tool call in block `index`.
    ToolArgs {
        /// Block number.
        index: usize,
        /// A fragment of the arguments' JSON text.
        json: String,
    },
    /// Block `index` is complete.
    BlockStop {
        /// Block number.
        index: usize,
    },
    /// Why the answer ends (more usage may follow).
    Stop {
        /// Reason.
        reason: StopReason,
        /// The matching stop sequence.
        stop_sequence: Option<String>,
    },
    /// Usage so far (cumulative; later reports supersede earlier ones field by field).
    Usage(Usage),
    /// The stream's proper end.
    Done,
    /// The provider reported an error mid-stream.
    Error {
        /// The provider's error type (`overloaded_error`, ...).
        kind: String,
        /// The provider's message.
        message: String,
    },
    /// Keep-alive.
    Ping,
}
