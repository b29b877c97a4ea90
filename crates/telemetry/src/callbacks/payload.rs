//! The record every sink receives: one owned, serialisable copy of a finished request, built
//! once on the recorder task and shared (`Arc`) by every sink. It holds ids, names, counts and
//! timings; never a key (the virtual key appears only as its hash).

use std::sync::{Arc, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::super::ms;
use super::super::trace_context::hex;
use sluice_core::record::{AttemptEnd, RequestRecord};

/// One finished request, as the callbacks send it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallbackRecord {
    /// `x-request-id`.
    pub request_id: String,
    /// Arrival, RFC 3339 UTC.
    pub start_time: String,
    /// End, RFC 3339 UTC.
    pub end_time: String,
    /// Arrival, Unix nanoseconds.
    pub start_unix_nano: u64,
    /// End, Unix nanoseconds.
    pub end_unix_nano: u64,
    /// The operation (`chat_completions`, `embeddings`, ...), for inference routes.
    pub call_type: Option<String>,
    /// The route pattern.
    pub route: String,
    /// The model group that answered (a fallback's after a fallback).
    pub model_group: Option<String>,
    /// The model group the client asked for.
    pub requested_model: Option<String>,
    /// Deployment id of the last attempt.
    pub deployment: Option<String>,
    /// Provider prefix of the last attempt.
    pub provider: Option<String>,
    /// Model name at the provider, of the last attempt.
    pub upstream_model: Option<String>,
    /// Virtual key alias.
    pub key_alias: Option<String>,
    /// Hash of the virtual key.
    pub key_hash: Option<String>,
    /// Team.
    pub team_id: Option<String>,
    /// User.
    pub user_id: Option<String>,
    /// End user (`user` in the body).
    pub end_user: Option<String>,
    /// Status sent to the client.
    pub status: u16,
    /// `success` or `failure` (what decides `success_callback` vs `failure_callback`).
    pub status_text: String,
    /// How the response ended (`done`, `complete`, `upstream_cut`, `client_gone`).
    pub outcome: String,
    /// sluice's error code, or the upstream failure kind.
    pub error: Option<String>,
    /// Streaming request.
    pub stream: bool,
    /// Tokens.
    pub usage: UsageRecord,
    /// Cost in USD, when known.
    pub cost: Option<f64>,
    /// Answered from cache.
    pub cache_hit: bool,
    /// What a cache hit saved: the stored answer's upstream cost in USD.
    pub saved_cost: Option<f64>,
    /// Whole request, milliseconds.
    pub latency_ms: f64,
    /// Time to first byte (streams), milliseconds.
    pub ttfb_ms: Option<f64>,
    /// sluice's own time, milliseconds.
    pub overhead_ms: f64,
    /// Retried attempts.
    pub retries: u32,
    /// Fallbacks.
    pub fallbacks: u32,
    /// Hedged attempts.
    pub hedges: u32,
    /// Trace ids, when tracing is on.
    pub trace: Option<TraceIds>,
    /// Every upstream attempt.
    pub attempts: Vec<AttemptRecord>,
    /// The request's `messages` (or `input` / `prompt`), only with `message_logging`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub messages: Option<serde_json::Value>,
    /// The answer's `choices` (or `content` / `output`), only with `message_logging`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response: Option<serde_json::Value>,
    /// The MCP exchange this record is, when it is one (`call_type` `call_mcp_tool`):
    /// `messages` then holds the call's arguments and `response` its result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp: Option<McpRecord>,
    /// The stream was longer than content logging keeps: `response` is its beginning.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub response_truncated: bool,
    /// The record's JSON and its metadata's, encoded at most once however many sinks send
    /// them (webhook and s3 send the record; Langfuse and LangSmith embed the metadata).
    #[serde(skip)]
    pub encoded: Encoded,
}

/// JSON encodings of a record, made on first use (on the sinks' thread) and then shared. A
/// cache of the record's fields, not a field: two records compare equal whatever it holds.
#[derive(Debug, Clone, Default)]
pub struct Encoded {
    record: OnceLock<Box<RawValue>>,
    metadata: OnceLock<Box<RawValue>>,
}

impl PartialEq for Encoded {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

/// `value` as raw JSON (`null` in the impossible case that it does not serialise: every
/// field is a string, number, bool or struct of them).
fn raw<T: Serialize + ?Sized>(value: &T) -> Box<RawValue> {
    serde_json::value::to_raw_value(value).unwrap_or_else(|_| RawValue::NULL.to_owned())
}

/// A record's routing and timing facts, borrowed from it.
#[derive(Debug, Serialize)]
#[allow(missing_docs)]
pub struct Metadata<'a> {
    pub request_id: &'a str,
    pub call_type: Option<&'a str>,
    pub model_group: Option<&'a str>,
    pub requested_model: Option<&'a str>,
    pub deployment: Option<&'a str>,
    pub provider: Option<&'a str>,
    pub key_alias: Option<&'a str>,
    pub key_hash: Option<&'a str>,
    pub team_id: Option<&'a str>,
    pub user_id: Option<&'a str>,
    pub end_user: Option<&'a str>,
    pub status: u16,
    pub outcome: &'a str,
    pub error: Option<&'a str>,
    pub stream: bool,
    pub usage: UsageRecord,
    pub cost: Option<f64>,
    pub cache_hit: bool,
    pub saved_cost: Option<f64>,
    pub latency_ms: f64,
    pub ttfb_ms: Option<f64>,
    pub overhead_ms: f64,
    pub retries: u32,
    pub fallbacks: u32,
    pub hedges: u32,
    pub trace_id: Option<&'a str>,
}

/// Token counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageRecord {
    /// Input tokens, cached ones included.
    pub prompt_tokens: u64,
    /// Output tokens.
    pub completion_tokens: u64,
    /// Sum.
    pub total_tokens: u64,
    /// Input read from the provider's cache.
    pub cached_tokens: u64,
    /// Input written to the provider's cache.
    pub cache_creation_tokens: u64,
    /// Reasoning tokens.
    pub reasoning_tokens: u64,
}

/// Hex trace ids.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceIds {
    /// 32 hex digits.
    pub trace_id: String,
    /// The request span, 16 hex digits.
    pub span_id: String,
    /// The client's span, if it sent a `traceparent`.
    pub parent_span_id: Option<String>,
    /// The client's `tracestate`.
    pub trace_state: Option<String>,
}

/// One upstream attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttemptRecord {
    /// Its span id, 16 hex digits.
    pub span_id: String,
    /// Model group.
    pub group: String,
    /// Deployment id.
    pub deployment: String,
    /// Model at the provider.
    pub upstream_model: String,
    /// Provider.
    pub provider: String,
    /// A hedge of a slow first attempt.
    pub hedge: bool,
    /// Start, Unix nanoseconds.
    pub start_unix_nano: u64,
    /// End, Unix nanoseconds.
    pub end_unix_nano: u64,
    /// `ok`, `cancelled`, `open`, or the failure kind.
    pub result: String,
}

/// An MCP exchange's own facts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpRecord {
    /// The tool server.
    pub server: String,
    /// The MCP method.
    pub method: String,
    /// The tool (prompt, resource) as the server knows it.
    pub tool: Option<String>,
    /// `ok`, `tool_error`, `rpc_error`, `refused`, `failed` or `cancelled`.
    pub status: String,
    /// Why it failed or was refused.
    pub error: Option<String>,
}

impl CallbackRecord {
    /// [`RequestRecord::sample`] as the callbacks send it, for tests.
    #[cfg(test)]
    pub(crate) fn sample(id: &str) -> Arc<Self> {
        Arc::new(Self::from_record(&RequestRecord::sample(id), false))
    }

    /// Build from a finished request (on the recorder task). `content` asks for the prompt
    /// and completion when the record carries them.
    pub fn from_record(r: &RequestRecord, content: bool) -> Self {
        let end = r.start + r.duration.unwrap_or_else(|| r.start.elapsed());
        let start_wall = r.started_at;
        let end_wall = r.wall(end);
        let usage = r.usage.unwrap_or_default();
        let last = r.attempts.last();
        let key = r.key.as_deref();
        let (messages, response, response_truncated) = match (&r.content, content) {
            // A tool call's arguments and result, as they are.
            (Some(c), true) if r.tool.is_some() => (
                serde_json::from_slice(&c.request).ok(),
                c.response
                    .as_ref()
                    .and_then(|b| serde_json::from_slice(b).ok()),
                false,
            ),
            (Some(c), true) => {
                // A whole answer's body, or a stream's frames put back together.
                let answer = match &c.response {
                    Some(b) => serde_json::from_slice(b).ok(),
                    None => sluice_translate::assemble::stream_answer(&c.stream.frames),
                };
                (
                    serde_json::from_slice(&c.request)
                        .ok()
                        .and_then(|v| pick(v, &["messages", "input", "prompt"])),
                    answer.and_then(|v| pick(v, &["choices", "content", "output", "data"])),
                    c.stream.truncated,
                )
            }
            _ => (None, None, false),
        };
        Self {
            request_id: r.request_id.to_str().unwrap_or("-").to_owned(),
            start_time: rfc3339(start_wall),
            end_time: rfc3339(end_wall),
            start_unix_nano: unix_nanos(start_wall),
            end_unix_nano: unix_nanos(end_wall),
            call_type: match &r.tool {
                Some(t) => Some(t.call_type()),
                None => r.endpoint.map(|e| e.name().to_owned()),
            },
            route: r.route.to_owned(),
            model_group: match &r.tool {
                Some(t) => Some(t.qualified_name()),
                None => r.model.as_deref().map(str::to_owned),
            },
            requested_model: r.requested_model.as_deref().map(str::to_owned),
            deployment: match &r.tool {
                Some(t) => Some(t.server.to_string()),
                None => r.deployment.as_deref().map(str::to_owned),
            },
            provider: match &r.tool {
                Some(_) => Some("mcp".to_owned()),
                None => r.provider.map(str::to_owned),
            },
            upstream_model: last.map(|a| a.target.upstream_model.to_string()),
            key_alias: key.and_then(|k| k.alias.as_deref()).map(str::to_owned),
            key_hash: key.map(|k| k.hash.to_string()),
            team_id: key.and_then(|k| k.team_id.as_deref()).map(str::to_owned),
            user_id: key.and_then(|k| k.user_id.as_deref()).map(str::to_owned),
            end_user: r.end_user.as_deref().map(str::to_owned),
            status: r.status,
            status_text: if r.succeeded() { "success" } else { "failure" }.to_owned(),
            outcome: r.outcome_name().to_owned(),
            error: r.error.or(r.failure).map(str::to_owned),
            stream: r.stream,
            usage: UsageRecord {
                prompt_tokens: usage.prompt_tokens,
                completion_tokens: usage.completion_tokens,
                total_tokens: usage.prompt_tokens + usage.completion_tokens,
                cached_tokens: usage.cached_tokens,
                cache_creation_tokens: usage.cache_creation_tokens,
                reasoning_tokens: usage.reasoning_tokens,
            },
            cost: r.cost.map(sluice_core::limits::dollars),
            cache_hit: r.cache_hit,
            saved_cost: r.saved.map(sluice_core::limits::dollars),
            latency_ms: ms(end - r.start),
            ttfb_ms: r.ttfb.map(ms),
            overhead_ms: ms(r.overhead),
            retries: r.retries,
            fallbacks: r.fallbacks,
            hedges: r.hedges,
            trace: r.trace.as_ref().map(|t| TraceIds {
                trace_id: hex(&t.trace_id),
                span_id: hex(&t.span_id),
                parent_span_id: t.parent.map(|p| hex(&p)),
                trace_state: t
                    .state
                    .as_ref()
                    .and_then(|s| s.to_str().ok())
                    .map(str::to_owned),
            }),
            attempts: r
                .attempts
                .iter()
                .map(|a| AttemptRecord {
                    span_id: hex(&a.span_id),
                    group: a.target.model_name.to_string(),
                    deployment: a.target.id.to_string(),
                    upstream_model: a.target.upstream_model.to_string(),
                    provider: a.target.provider.to_owned(),
                    hedge: a.hedge,
                    start_unix_nano: unix_nanos(r.wall(a.start)),
                    end_unix_nano: unix_nanos(r.wall(a.end.unwrap_or(end))),
                    result: match a.result {
                        AttemptEnd::Open => "open".into(),
                        AttemptEnd::Ok => "ok".into(),
                        AttemptEnd::Cancelled => "cancelled".into(),
                        AttemptEnd::Failed(kind) => kind.into(),
                    },
                })
                .collect(),
            messages,
            response,
            mcp: r.tool.as_deref().map(|t| McpRecord {
                server: t.server.to_string(),
                method: t.method.to_owned(),
                tool: t.name.clone(),
                status: t.status.label().to_owned(),
                error: t.error.clone(),
            }),
            response_truncated,
            encoded: Encoded::default(),
        }
    }

    /// The whole record as JSON, encoded once.
    pub fn json(&self) -> &RawValue {
        self.encoded.record.get_or_init(|| raw(self))
    }

    /// [`CallbackRecord::metadata`] as JSON, encoded once.
    pub fn metadata_json(&self) -> &RawValue {
        self.encoded.metadata.get_or_init(|| raw(&self.metadata()))
    }

    /// The routing and timing facts (the metadata of Langfuse and LangSmith events; the
    /// prompt, answer and attempt list are not repeated in it). Borrowed, serialised directly.
    pub fn metadata(&self) -> Metadata<'_> {
        Metadata {
            request_id: &self.request_id,
            call_type: self.call_type.as_deref(),
            model_group: self.model_group.as_deref(),
            requested_model: self.requested_model.as_deref(),
            deployment: self.deployment.as_deref(),
            provider: self.provider.as_deref(),
            key_alias: self.key_alias.as_deref(),
            key_hash: self.key_hash.as_deref(),
            team_id: self.team_id.as_deref(),
            user_id: self.user_id.as_deref(),
            end_user: self.end_user.as_deref(),
            status: self.status,
            outcome: &self.outcome,
            error: self.error.as_deref(),
            stream: self.stream,
            usage: self.usage,
            cost: self.cost,
            cache_hit: self.cache_hit,
            saved_cost: self.saved_cost,
            latency_ms: self.latency_ms,
            ttfb_ms: self.ttfb_ms,
            overhead_ms: self.overhead_ms,
            retries: self.retries,
            fallbacks: self.fallbacks,
            hedges: self.hedges,
            trace_id: self.trace.as_ref().map(|t| t.trace_id.as_str()),
        }
    }

    /// When the first byte of a stream arrived, RFC 3339.
    pub fn first_byte_time(&self) -> Option<String> {
        let ttfb = std::time::Duration::from_secs_f64(self.ttfb_ms? / 1000.0);
        Some(rfc3339(
            UNIX_EPOCH + std::time::Duration::from_nanos(self.start_unix_nano) + ttfb,
        ))
    }

    /// Whether it succeeded.
    pub fn success(&self) -> bool {
        self.status_text == "success"
    }
}

/// The object a batch is stored as in a bucket (S3, GCS):
/// `{prefix}{YYYY-MM-DD}/{unix-ms}-{first request id}-{n}.json`. Dated like LiteLLM's objects,
/// but one per batch; the time and first id keep names unique and sortable.
pub fn batch_object_name(prefix: &str, batch: &[Arc<CallbackRecord>], now: SystemTime) -> String {
    let stamp = rfc3339(now);
    let day = stamp.get(..10).unwrap_or("0000-00-00");
    let ms = unix_nanos(now) / 1_000_000;
    let first: String = batch
        .first()
        .map(|r| {
            r.request_id
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
                .take(64)
                .collect()
        })
        .unwrap_or_default();
    format!("{prefix}{day}/{ms}-{first}-{}.json", batch.len())
}

/// The first of these top-level fields of a JSON body (parsed off the request path).
fn pick(body: serde_json::Value, keys: &[&str]) -> Option<serde_json::Value> {
    let serde_json::Value::Object(mut map) = body else {
        return None;
    };
    keys.iter().find_map(|k| map.remove(*k))
}

/// Unix nanoseconds of a wall-clock time.
pub fn unix_nanos(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// RFC 3339 UTC with microseconds.
pub fn rfc3339(t: SystemTime) -> String {
    let nanos = i128::from(unix_nanos(t));
    time::OffsetDateTime::from_unix_timestamp_nanos(nanos)
        .ok()
        .and_then(|d| {
            d.format(time::macros::format_description!(
                "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:6]Z"
            ))
            .ok()
        })
        .unwrap_or_default()
}
