//! What sluice notes about each request once it is over: the log line today, the spend record
//! and metrics later. Built along the pipeline, emitted exactly once when the response ends.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http::{HeaderValue, Method};
use smallvec::SmallVec;
use tokio::sync::mpsc;

use crate::endpoint::Endpoint;
use crate::limits::Nanos;
use crate::trace_context::{SpanId, TraceContext};
use crate::usage::Usage;

/// Who a deployment is, for records and traces: built once per deployment at config load and
/// shared (one `Arc`) by its call target and every record of a request it served.
#[derive(Debug)]
pub struct DeploymentInfo {
    /// Stable deployment id (`x-sluice-model-id`).
    pub id: Arc<str>,
    /// The model group.
    pub model_name: Arc<str>,
    /// The model name the provider knows.
    pub upstream_model: Arc<str>,
    /// The provider's LiteLLM prefix (`openai`, `bedrock`, ...).
    pub provider: &'static str,
    /// `litellm_params.region_name` (`eu`, ...): where the deployment runs, for answers that
    /// name the serving region (`x-litellm-model-region`) and for records.
    pub region: Option<Arc<str>>,
}

/// Which virtual key made a request, for spend logs and callbacks: the parts of a key that a
/// record names. Shared (one `Arc`) by the key directory's entry and every record of the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyInfo {
    /// Hex digest: the key's identity in records, spend logs and the admin API.
    pub hash: Arc<str>,
    /// `key_alias`.
    pub alias: Option<Arc<str>>,
    /// Owning team.
    pub team_id: Option<Arc<str>>,
    /// Owning user.
    pub user_id: Option<Arc<str>>,
}

/// How one upstream attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptEnd {
    /// Still running when the record was taken (should not be seen).
    Open,
    /// Answered (this attempt served the request).
    Ok,
    /// Failed; the failure kind's name (`routing::FailureKind::name`).
    Failed(&'static str),
    /// A hedge race lost: dropped when the other attempt answered first.
    Cancelled,
}

/// One upstream attempt, for the trace: which deployment, when, and how it ended. Filled in
/// by `routing::dispatch`; exported as a CLIENT span off the request path. Kept small (one
/// `Arc` for the deployment): it lives inline in the request's futures, which are moved by
/// value, so every byte here is copied several times per request.
#[derive(Debug, Clone)]
pub struct AttemptSpan {
    /// The span id, also sent upstream as the `traceparent` parent.
    pub span_id: SpanId,
    /// The deployment called (its id, group, provider and upstream model).
    pub target: Arc<DeploymentInfo>,
    /// Started as a hedge of a slow first attempt.
    pub hedge: bool,
    /// When it started.
    pub start: Instant,
    /// When it ended.
    pub end: Option<Instant>,
    /// How it ended.
    pub result: AttemptEnd,
    /// A failed attempt's status and message, for the request's log (boxed: one word, and
    /// only failures allocate it).
    pub error: Option<Box<ErrorNote>>,
}

/// What an error answer told its client: its HTTP status, the error's type and message. The
/// request's log keeps it for the request (what the client got) and for each failed attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorNote {
    /// The HTTP status.
    pub status: u16,
    /// The error's type (`rate_limit_error`, `server_error`, Google's `status`, ...); empty
    /// when the body named none.
    pub kind: String,
    /// The message, at most [`ErrorNote::MAX_MESSAGE`] bytes.
    pub message: String,
}

impl ErrorNote {
    /// Most bytes of a message kept: a provider's message is a sentence or two; an HTML page
    /// from a proxy in between is cut.
    pub const MAX_MESSAGE: usize = 1024;

    /// The note of sluice's own error, as its answer words it.
    pub fn of_error(e: &crate::error::ApiError) -> Self {
        Self {
            status: e.status().as_u16(),
            kind: e.kind().to_owned(),
            message: capped(&e.to_string()),
        }
    }

    /// The note of an error answer's body: `error.type` (or Google's `error.status`) and
    /// `error.message` of OpenAI's, Anthropic's and Google's shapes, Bedrock's `message`;
    /// a body that is none of them is its first bytes as text.
    pub fn of_body(status: u16, body: &[u8]) -> Self {
        #[derive(serde::Deserialize)]
        struct Outer {
            error: Option<serde_json::Value>,
            message: Option<String>,
            #[serde(rename = "type")]
            kind: Option<String>,
        }
        let text = |v: Option<&serde_json::Value>| v.and_then(|v| v.as_str()).map(str::to_owned);
        let (kind, message) = match serde_json::from_slice::<Outer>(body) {
            Ok(Outer {
                error: Some(serde_json::Value::Object(e)),
                ..
            }) => (
                text(e.get("type")).or_else(|| text(e.get("status"))),
                text(e.get("message")),
            ),
            Ok(Outer {
                error: Some(serde_json::Value::String(m)),
                kind,
                ..
            }) => (kind, Some(m)),
            Ok(Outer { message, kind, .. }) => (kind, message),
            Err(_) => (None, None),
        };
        let message = message.unwrap_or_else(|| String::from_utf8_lossy(body).trim().to_owned());
        Self {
            status,
            kind: kind.unwrap_or_default(),
            message: capped(&message),
        }
    }
}

/// `text` cut to [`ErrorNote::MAX_MESSAGE`] bytes (at a character boundary), marked as cut.
fn capped(text: &str) -> String {
    if text.len() <= ErrorNote::MAX_MESSAGE {
        return text.to_owned();
    }
    let mut end = ErrorNote::MAX_MESSAGE;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// An attempt's error as the request's log notes it: what `routing::dispatch` asks of the
/// error each failed attempt carries.
pub trait Explain {
    /// Its status, type and message; `None` when it says nothing worth keeping.
    fn explain(&self) -> Option<ErrorNote>;
}

impl Explain for crate::error::ApiError {
    fn explain(&self) -> Option<ErrorNote> {
        Some(ErrorNote::of_error(self))
    }
}

impl Explain for crate::error::RouteError {
    fn explain(&self) -> Option<ErrorNote> {
        Some(ErrorNote::of_error(&crate::error::ApiError::NoDeployment(
            self.clone(),
        )))
    }
}

/// A request's attempts; inline for the common single attempt (no allocation).
pub type Attempts = SmallVec<[AttemptSpan; 1]>;

/// Prompt and completion bodies, kept only when the operator opted in to content logging
/// (reference-counted slices of buffers sluice already holds; never copied on the path).
#[derive(Debug, Clone, Default)]
pub struct Content {
    /// The client's request body.
    pub request: Bytes,
    /// The answer's body (non-stream answers only).
    pub response: Option<Bytes>,
    /// A stream's frames as the upstream sent them, assembled into an answer off the path.
    pub stream: StreamFrames,
}

/// Most stream bytes kept for content logging; past it the answer is logged as truncated.
pub const MAX_STREAM_KEPT: usize = 1024 * 1024;

/// A stream's frames, each a reference-counted handle on the upstream's buffer (a clone is a
/// refcount bump: no copy, no parse), up to [`MAX_STREAM_KEPT`] bytes.
#[derive(Debug, Clone, Default)]
pub struct StreamFrames {
    /// The frames kept, in order.
    pub frames: Vec<Bytes>,
    /// Their total length.
    pub bytes: usize,
    /// A frame did not fit: the answer is incomplete.
    pub truncated: bool,
}

impl Content {
    /// Keep one stream frame (the relay calls this only when content logging is on).
    pub fn keep(&mut self, frame: &Bytes) {
        let s = &mut self.stream;
        if s.truncated || frame.is_empty() {
            return;
        }
        if s.bytes + frame.len() > MAX_STREAM_KEPT {
            s.truncated = true;
            return;
        }
        s.bytes += frame.len();
        s.frames.push(frame.clone());
    }
}

/// How a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Answered (whatever the status).
    Done,
    /// The stream reached its proper end.
    StreamComplete,
    /// The upstream ended or broke the stream before its end marker.
    StreamCut,
    /// The client went away before the answer was complete.
    ClientGone,
}

impl Outcome {
    fn name(self) -> &'static str {
        match self {
            Self::Done => "done",
            Self::StreamComplete => "complete",
            Self::StreamCut => "upstream_cut",
            Self::ClientGone => "client_gone",
        }
    }
}

/// One request's facts.
#[derive(Debug, Clone)]
pub struct RequestRecord {
    /// `x-request-id`.
    pub request_id: HeaderValue,
    /// HTTP method.
    pub method: Method,
    /// Route label (the path pattern, never a raw path with ids).
    pub route: &'static str,
    /// Model group.
    pub model: Option<Arc<str>>,
    /// Deployment id.
    pub deployment: Option<Arc<str>>,
    /// Provider prefix.
    pub provider: Option<&'static str>,
    /// Status sent to the client.
    pub status: u16,
    /// Streaming request.
    pub stream: bool,
    /// When the request arrived.
    pub start: Instant,
    /// Time spent in sluice itself (before the upstream send, and relaying the answer).
    pub overhead: Duration,
    /// Time to the first byte of the answer, for streams.
    pub ttfb: Option<Duration>,
    /// Tokens used.
    pub usage: Option<Usage>,
    /// How it ended.
    pub outcome: Outcome,
    /// Error code when sluice itself failed the request.
    pub error: Option<&'static str>,
    /// What the client of a failed request was told: status, error type and message (boxed:
    /// one word, and only failures allocate it). See [`RequestRecord::fail_with`].
    pub error_note: Option<Box<ErrorNote>>,
    /// Kind of the upstream failure that ended the request, if one did.
    pub failure: Option<&'static str>,
    /// Retried attempts.
    pub retries: u32,
    /// Fallback groups moved to.
    pub fallbacks: u32,
    /// Hedged second attempts.
    pub hedges: u32,
    /// The whole request's time, noted when the record is handed to the recorder.
    pub duration: Option<Duration>,
    /// Wall-clock arrival time (spans and callback records need calendar time).
    pub started_at: SystemTime,
    /// The operation, for inference routes.
    pub endpoint: Option<Endpoint>,
    /// The model group the client asked for (`model` may become a fallback's group).
    pub requested_model: Option<Arc<str>>,
    /// Trace ids, when tracing is on (boxed: most requests are not traced, and the record
    /// travels by value).
    pub trace: Option<Box<TraceContext>>,
    /// Every upstream attempt, in start order.
    pub attempts: Attempts,
    /// Prompt/completion bodies, only with content logging opted in.
    pub content: Option<Box<Content>>,
    /// The virtual key that made the request: its hash, alias, team and user (shared with the
    /// key directory's entry, so one refcount per request).
    pub key: Option<Arc<KeyInfo>>,
    /// The client's end user (`user` in the body).
    pub end_user: Option<Arc<str>>,
    /// Its tags: the request's (`tags`, `metadata.tags`, `x-litellm-tags`), its key's and its
    /// team's (LiteLLM's `request_tags`, summed by `/spend/tags`).
    pub tags: Option<Arc<[Arc<str>]>>,
    /// What the request cost, when its usage and the deployment's price are known.
    pub cost: Option<Nanos>,
    /// Answered from sluice's cache.
    pub cache_hit: bool,
    /// What a cache hit did not spend: the upstream cost of the stored answer it replayed.
    pub saved: Option<Nanos>,
    /// Each guardrail that ran, with its verdict (boxed: most requests run none).
    pub guardrails: Option<Box<Vec<GuardrailRun>>>,
    /// Set when this record is an MCP tool call rather than a request: one per call, made
    /// where the call ended (`/mcp` or a model call's tool loop), so the call goes to the same
    /// sinks as requests (spend log, callbacks, traces) with its key, time, cost and (with
    /// content logging) its arguments and result in `content`.
    pub tool: Option<Box<ToolCall>>,
    /// Set once the record's spend line is in the per-request journal (`RecordJournal`): the
    /// stored row keeps the line's id, so a replay after a crash counts it once, and the
    /// journal file is kept until the row is written. Boxed: one word, not three, in every
    /// request's future (which holds its record).
    pub journaled: Option<Box<Journaled>>,
}

/// A record's line in the spend journal: its id and a hold on the file that has it.
#[derive(Debug, Clone)]
pub struct Journaled {
    /// The spend log's id (a UUID's two halves), the same in the journal and the store.
    pub id: [u64; 2],
    /// Keeps the journal file until every record in it is stored.
    pub hold: JournalHold,
}

/// A reference on one journal file: the file may be removed once no hold on it is left, so a
/// record carries one until its row is written (or spooled). Cloning it is a refcount bump.
#[derive(Debug, Clone)]
pub struct JournalHold {
    /// Only counted (by the watch), never read.
    _file: Arc<()>,
}

impl JournalHold {
    /// A new file's hold, with the watch that tells when every clone of it is gone.
    pub fn new() -> (Self, JournalWatch) {
        let hold = Arc::new(());
        let watch = JournalWatch(Arc::downgrade(&hold));
        (Self { _file: hold }, watch)
    }
}

/// Holds compare equal: they carry no data, only keep a file (records compare by content).
impl PartialEq for JournalHold {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

/// Watches the holds of one journal file, without being one.
#[derive(Debug)]
pub struct JournalWatch(std::sync::Weak<()>);

impl JournalWatch {
    /// True once no hold is left: the file's records are all stored, and no new hold can be
    /// made.
    pub fn released(&self) -> bool {
        self.0.strong_count() == 0
    }
}

/// How an MCP exchange ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallStatus {
    /// The server answered with a result.
    Ok,
    /// The tool ran and reported a failure (a result marked `isError`).
    ToolError,
    /// The server answered with a JSON-RPC error (an unknown tool, bad arguments, ...).
    RpcError,
    /// The caller may not use this server or tool: refused before reaching it.
    Refused,
    /// The server could not be reached, timed out, or answered nonsense.
    Failed,
    /// The client cancelled it (or left) before the answer; the server was told.
    Cancelled,
}

impl CallStatus {
    /// Whether the server answered with a result, so the name the call used is one of its
    /// tools: only then is the name a metric label (else a client could grow the series), and
    /// only then is a priced tool charged.
    pub fn names_a_tool(self) -> bool {
        matches!(self, Self::Ok | Self::ToolError)
    }

    /// Its label.
    pub fn label(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::ToolError => "tool_error",
            Self::RpcError => "rpc_error",
            Self::Refused => "refused",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    /// The HTTP status its record carries, so that every sink splits successes from
    /// failures as for requests: only a tool that ran and answered is a success.
    pub fn http_status(self) -> u16 {
        match self {
            Self::Ok => 200,
            Self::ToolError | Self::RpcError => 422,
            Self::Refused => 403,
            Self::Failed => 502,
            Self::Cancelled => 499,
        }
    }
}

/// One MCP exchange that named a tool server: which server, method and tool, and how it
/// ended. Boxed in its [`RequestRecord`], which holds what a call shares with a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    /// The server's name (a configured one, or what the caller named when refused).
    pub server: Arc<str>,
    /// The MCP method (`tools/call`, `resources/read`, ...).
    pub method: &'static str,
    /// The tool (or resource, or prompt) the call named, as the server knows it.
    pub name: Option<String>,
    /// How it ended.
    pub status: CallStatus,
    /// Why it failed or was refused (never a credential).
    pub error: Option<String>,
}

impl ToolCall {
    /// The name clients see on the aggregated `/mcp` (`<server>-<tool>`): what the spend log
    /// and callbacks show where a request shows its model group.
    pub fn qualified_name(&self) -> String {
        match &self.name {
            Some(n) => format!("{}-{n}", self.server),
            None => self.server.to_string(),
        }
    }

    /// What the spend log and callbacks call it: LiteLLM's `call_mcp_tool` for a tool call,
    /// `mcp_<method>` for another exchange (`mcp_resources_read`).
    pub fn call_type(&self) -> String {
        match self.method {
            "tools/call" => "call_mcp_tool".to_owned(),
            m => format!("mcp_{}", m.replace('/', "_")),
        }
    }

    /// How it failed, for a record: the status, and why when known; `None` for success.
    pub fn failure(&self) -> Option<String> {
        (self.status != CallStatus::Ok).then(|| match &self.error {
            Some(e) => format!("{}: {e}", self.status.label()),
            None => self.status.label().to_owned(),
        })
    }
}

/// Where a guardrail ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuardrailStage {
    /// On the request, before the upstream was called (`pre_call`, `during_call`).
    Request,
    /// On the answer (`post_call`).
    Answer,
}

/// What a guardrail decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuardrailVerdict {
    /// Nothing found.
    Passed,
    /// Values replaced by placeholders; the request (or answer) went on.
    Masked,
    /// Refused.
    Blocked,
}

impl GuardrailVerdict {
    /// Metric label.
    pub fn name(self) -> &'static str {
        match self {
            Self::Passed => "passed",
            Self::Masked => "masked",
            Self::Blocked => "blocked",
        }
    }
}

impl GuardrailStage {
    /// Metric label.
    pub fn name(self) -> &'static str {
        match self {
            Self::Request => "request",
            Self::Answer => "answer",
        }
    }
}

/// One guardrail's run on a request or its answer: the verdict, how long it took, and what it
/// masked or blocked on — kinds and counts, never a value.
#[derive(Debug, Clone, PartialEq)]
pub struct GuardrailRun {
    /// `guardrail_name`.
    pub name: Arc<str>,
    /// Request or answer.
    pub stage: GuardrailStage,
    /// The decision.
    pub verdict: GuardrailVerdict,
    /// Time spent checking.
    pub duration: Duration,
    /// (entity or pattern label, count) masked; for a block, the label it blocked on, count 1.
    pub found: Vec<(Arc<str>, u32)>,
}

impl RequestRecord {
    /// Note that sluice answered the request with `e`: its code, and its status, type and
    /// message as the client gets them.
    pub fn fail_with(&mut self, e: &crate::error::ApiError) {
        self.error = Some(e.code());
        self.error_note = Some(Box::new(ErrorNote::of_error(e)));
    }

    /// A chat request with this id that has just arrived, for tests.
    pub fn sample(id: &str) -> Self {
        let id = HeaderValue::from_str(id).unwrap_or(HeaderValue::from_static("-"));
        Self::new(id, Method::POST, "/v1/chat/completions", Instant::now())
    }

    /// A record for a request that just arrived.
    pub fn new(
        request_id: HeaderValue,
        method: Method,
        route: &'static str,
        start: Instant,
    ) -> Self {
        Self::at(request_id, method, route, start, SystemTime::now())
    }

    fn at(
        request_id: HeaderValue,
        method: Method,
        route: &'static str,
        start: Instant,
        started_at: SystemTime,
    ) -> Self {
        Self {
            request_id,
            method,
            route,
            model: None,
            deployment: None,
            provider: None,
            status: 0,
            stream: false,
            start,
            overhead: Duration::ZERO,
            ttfb: None,
            usage: None,
            outcome: Outcome::Done,
            error: None,
            error_note: None,
            failure: None,
            retries: 0,
            fallbacks: 0,
            hedges: 0,
            duration: None,
            started_at,
            endpoint: None,
            requested_model: None,
            trace: None,
            attempts: Attempts::new(),
            content: None,
            key: None,
            end_user: None,
            tags: None,
            cost: None,
            cache_hit: false,
            saved: None,
            guardrails: None,
            tool: None,
            journaled: None,
        }
    }

    /// The record of an MCP exchange that began at `start` and has just ended, carried by the
    /// request `request_id` on `route`.
    pub fn tool_call(
        request_id: HeaderValue,
        route: &'static str,
        start: Instant,
        call: ToolCall,
    ) -> Self {
        let started_at = SystemTime::now()
            .checked_sub(start.elapsed())
            .unwrap_or_else(SystemTime::now);
        let mut r = Self::at(request_id, Method::POST, route, start, started_at);
        r.status = call.status.http_status();
        if call.status != CallStatus::Ok {
            r.error = Some(call.status.label());
        }
        r.tool = Some(Box::new(call));
        r
    }

    /// An empty record with the same id, left behind when a record is moved out of a struct
    /// that is being dropped (cheaper than cloning the whole record).
    pub fn clone_shell(&self) -> Self {
        Self::at(
            self.request_id.clone(),
            self.method.clone(),
            self.route,
            self.start,
            self.started_at,
        )
    }

    /// Whether the request succeeded (the split between `success_callback` and
    /// `failure_callback`).
    pub fn succeeded(&self) -> bool {
        (200..400).contains(&self.status)
            && self.error.is_none()
            && self.outcome != Outcome::StreamCut
    }

    /// Name of how it ended.
    pub fn outcome_name(&self) -> &'static str {
        self.outcome.name()
    }

    /// Calendar time of a moment of this request.
    pub fn wall(&self, at: Instant) -> SystemTime {
        self.started_at + at.saturating_duration_since(self.start)
    }

    /// Write the request's (or tool call's) log line (no bodies, no keys).
    pub fn emit(&self) {
        if let Some(t) = &self.tool {
            return self.emit_tool(t);
        }
        let usage = self.usage.unwrap_or_default();
        tracing::info!(
            request_id = self.request_id.to_str().unwrap_or("-"),
            method = %self.method,
            route = self.route,
            model = self.model.as_deref().unwrap_or("-"),
            deployment = self.deployment.as_deref().unwrap_or("-"),
            provider = self.provider.unwrap_or("-"),
            status = self.status,
            stream = self.stream,
            outcome = self.outcome.name(),
            error = self.error.or(self.failure).unwrap_or("-"),
            retries = self.retries,
            fallbacks = self.fallbacks,
            duration_ms = ms(self.start.elapsed()),
            overhead_ms = ms(self.overhead),
            ttfb_ms = self.ttfb.map(ms),
            prompt_tokens = usage.prompt_tokens,
            completion_tokens = usage.completion_tokens,
            cached_tokens = usage.cached_tokens,
            "request"
        );
    }
}

impl RequestRecord {
    /// A tool call's log line (target `sluice::mcp`), with the key and team.
    fn emit_tool(&self, t: &ToolCall) {
        let key = self.key.as_deref();
        tracing::info!(
            target: "sluice::mcp",
            request_id = self.request_id.to_str().unwrap_or("-"),
            key_hash = key.map_or("", |k| &*k.hash),
            key_alias = key.and_then(|k| k.alias.as_deref()).unwrap_or(""),
            team_id = key.and_then(|k| k.team_id.as_deref()).unwrap_or(""),
            server = %t.server,
            method = t.method,
            tool = t.name.as_deref().unwrap_or(""),
            duration_ms = self.duration.map(ms),
            status = t.status.label(),
            cost = self.cost.map(crate::limits::dollars),
            error = t.error.as_deref().unwrap_or(""),
            "mcp call"
        );
    }
}

/// Milliseconds with microsecond precision, for logs and headers.
pub fn ms(d: Duration) -> f64 {
    (d.as_micros() as f64) / 1000.0
}

/// A consumer of finished request records (the log writer, a test observer, ...).
pub trait RecordSink: Send + Sync + 'static {
    /// Take one record. Runs on a recorder task (any worker's), never on a request.
    fn accept(&self, record: &RequestRecord);

    /// The journal this sink wants records written to on the request's own thread, before
    /// they are queued (the spend writer's per-request journal); the recorder asks once.
    fn journal(&self) -> Option<Arc<dyn RecordJournal>> {
        None
    }
}

/// A shared sink is a sink (the metrics registry is fed by every recorder task).
impl<T: RecordSink + ?Sized> RecordSink for std::sync::Arc<T> {
    fn accept(&self, record: &RequestRecord) {
        (**self).accept(record);
    }

    fn journal(&self) -> Option<Arc<dyn RecordJournal>> {
        (**self).journal()
    }
}

/// Writes what must survive the process being killed, on the request's thread, when its
/// record is handed over (before the last byte of its answer leaves): one append, no `fsync`.
pub trait RecordJournal: Send + Sync + std::fmt::Debug + 'static {
    /// Journal `record` (setting [`RequestRecord::journaled`]) if it has anything to keep.
    fn journal(&self, record: &mut RequestRecord);
}

/// Forwards records to a channel (for tests and embedders that want to see every record).
impl RecordSink for mpsc::UnboundedSender<RequestRecord> {
    fn accept(&self, record: &RequestRecord) {
        let _ = self.send(record.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_body_gives_its_type_and_message_in_each_providers_shape() {
        let note = |body: &str| {
            let n = ErrorNote::of_body(429, body.as_bytes());
            (n.kind, n.message)
        };
        let openai = r#"{"error":{"message":"slow down","type":"rate_limit_error","code":"x"}}"#;
        assert_eq!(
            note(openai),
            ("rate_limit_error".into(), "slow down".into())
        );
        let anthropic = r#"{"type":"error","error":{"type":"overloaded_error","message":"busy"}}"#;
        assert_eq!(note(anthropic), ("overloaded_error".into(), "busy".into()));
        let google = r#"{"error":{"code":429,"message":"quota","status":"RESOURCE_EXHAUSTED"}}"#;
        assert_eq!(note(google), ("RESOURCE_EXHAUSTED".into(), "quota".into()));
        let bedrock = r#"{"message":"throttled"}"#;
        assert_eq!(note(bedrock), (String::new(), "throttled".into()));
        assert_eq!(
            note("<html>bad gateway</html>").1,
            "<html>bad gateway</html>"
        );
        let long = "é".repeat(ErrorNote::MAX_MESSAGE);
        let cut = ErrorNote::of_body(500, long.as_bytes()).message;
        assert!(cut.len() <= ErrorNote::MAX_MESSAGE + 3 && cut.ends_with('…'));
    }

    #[test]
    fn sluices_own_error_is_noted_as_its_answer_words_it() {
        let mut r = RequestRecord::sample("r");
        let e = crate::error::ApiError::KeyRefused(crate::error::KeyRefusal::Blocked);
        r.fail_with(&e);
        assert_eq!(r.error, Some("key_blocked"));
        let note = r.error_note.as_deref().unwrap();
        assert_eq!(
            (note.status, note.kind.as_str()),
            (401, "authentication_error")
        );
        assert_eq!(note.message, e.to_string());
    }
}
