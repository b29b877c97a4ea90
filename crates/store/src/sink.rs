//! Finished inference requests become spend-log records for the writer. Runs on the recorder
//! task, never on a request.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use time::OffsetDateTime;

use super::spend_logs::{AttemptLog, MAX_CONTENT};
use super::writer::SpendSender;
use super::{KeyHash, SpendLog, SpendStatus};
use sluice_core::limits::dollars;
use sluice_core::record::{
    AttemptEnd, CallStatus, Content, Outcome, RecordJournal, RecordSink, RequestRecord,
};
use sluice_core::usage::Usage;

/// Feeds the spend-log writer.
#[derive(Debug)]
pub struct SpendSink {
    sender: SpendSender,
    /// `store_prompts_in_spend_logs`, shared with the state so that a reload can turn it.
    prompts: Arc<AtomicBool>,
}

impl SpendSink {
    /// A sink feeding `sender`; prompts and answers are kept while `prompts` is set. With
    /// `spend_journal: per_request` the sender carries the journal the recorder writes each
    /// record to on the request's thread.
    pub fn new(sender: SpendSender, prompts: Arc<AtomicBool>) -> Self {
        Self { sender, prompts }
    }
}

/// The spend log of a finished request; `None` for requests that never named a model group
/// (health checks, unknown routes, refused credentials). Its id is the journal line's when the
/// record was journaled, so the row and the line are one record.
pub fn spend_log(r: &RequestRecord, now: OffsetDateTime) -> Option<SpendLog> {
    Line::of(r, now).map(Line::into_log)
}

/// A finished request's spend log, borrowed from its record: what the per-request journal
/// writes (the same members as [`SpendLog`]'s serialisation, which reads it back), and what
/// [`spend_log`] turns into an owned log. Journaling the usual request allocates nothing. The
/// prompt and answer are not in it (the recorder task adds them to the stored row).
#[derive(Debug, Serialize)]
pub(crate) struct Line<'a> {
    #[serde(serialize_with = "uuid_text")]
    id: uuid::Uuid,
    request_id: &'a str,
    api_key: Option<Cow<'a, str>>,
    team_id: Option<&'a str>,
    user_id: Option<&'a str>,
    end_user: Option<&'a str>,
    model_group: Cow<'a, str>,
    deployment_id: Option<Cow<'a, str>>,
    provider: Option<&'a str>,
    usage: Usage,
    spend: f64,
    status: SpendStatus,
    #[serde(serialize_with = "millis")]
    start_time: OffsetDateTime,
    #[serde(serialize_with = "millis")]
    end_time: OffsetDateTime,
    ttfb_ms: Option<u64>,
    cache_hit: bool,
    saved_spend: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    requested_model: Option<&'a str>,
    overhead_us: Option<u64>,
    #[serde(skip_serializing_if = "is_zero")]
    retries: u32,
    #[serde(skip_serializing_if = "is_zero")]
    fallbacks: u32,
    #[serde(skip_serializing_if = "is_zero")]
    hedges: u32,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    attempts: Vec<AttemptLog>,
    #[serde(skip_serializing_if = "Option::is_none")]
    call_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    http_status: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error_type: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error_message: Option<&'a str>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    request_tags: &'a [Arc<str>],
}

fn uuid_text<S: serde::Serializer>(id: &uuid::Uuid, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&id.hyphenated())
}

fn millis<S: serde::Serializer>(t: &OffsetDateTime, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_i64(super::to_ms(*t))
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl<'a> Line<'a> {
    /// `r`'s line as of `now`; `None` when it names no model group (and is no tool call).
    pub(crate) fn of(r: &'a RequestRecord, now: OffsetDateTime) -> Option<Self> {
        let id = r
            .journaled
            .as_ref()
            .map_or_else(sluice_core::random::uuid_v4, |j| {
                uuid::Uuid::from_u64_pair(j.id[0], j.id[1])
            });
        let (model_group, start) = match &r.tool {
            Some(t) => (
                Cow::Owned(t.qualified_name()),
                now - r.duration.unwrap_or_else(|| r.start.elapsed()),
            ),
            None => (Cow::Borrowed(r.model.as_deref()?), now - r.start.elapsed()),
        };
        let key = r.key.as_deref();
        let mut l = Line {
            id,
            request_id: r.request_id.to_str().unwrap_or("-"),
            api_key: key.and_then(|k| key_hash(&k.hash)),
            team_id: key.and_then(|k| k.team_id.as_deref()),
            user_id: key.and_then(|k| k.user_id.as_deref()),
            end_user: None,
            model_group,
            deployment_id: None,
            provider: None,
            usage: Usage::default(),
            spend: r.cost.map_or(0.0, dollars),
            status: SpendStatus::Failure,
            start_time: start,
            end_time: now,
            ttfb_ms: None,
            cache_hit: false,
            saved_spend: 0.0,
            requested_model: None,
            overhead_us: None,
            retries: 0,
            fallbacks: 0,
            hedges: 0,
            attempts: Vec::new(),
            call_type: None,
            error: None,
            http_status: None,
            error_type: None,
            error_message: None,
            request_tags: r.tags.as_deref().unwrap_or(&[]),
        };
        if let Some(t) = &r.tool {
            // An MCP exchange's row: the tool's qualified name where a request has its model
            // group, the server as its deployment, `mcp` as its provider, the configured
            // price as its spend.
            l.deployment_id = Some(Cow::Owned(t.server.to_string()));
            l.provider = Some("mcp");
            if t.status == CallStatus::Ok {
                l.status = SpendStatus::Success;
            }
            l.call_type = Some(t.call_type());
            l.error = t.failure();
            return Some(l);
        }
        l.end_user = r.end_user.as_deref();
        l.deployment_id = r.deployment.as_deref().map(Cow::Borrowed);
        l.provider = r.provider;
        l.usage = r.usage.unwrap_or_default();
        if (200..300).contains(&r.status)
            && matches!(r.outcome, Outcome::Done | Outcome::StreamComplete)
        {
            l.status = SpendStatus::Success;
        } else if r.status >= 400 {
            // What the client got: the HTTP status and the error code (sluice's own, else the
            // kind of upstream failure that ended it). Only failures pay for the string.
            let code = r.error.or(r.failure).unwrap_or("error");
            l.error = Some(format!("{} {code}", r.status));
            if let Some(note) = &r.error_note {
                l.error_type = Some(note.kind.as_str()).filter(|k| !k.is_empty());
                l.error_message = Some(note.message.as_str());
            }
        }
        l.http_status = Some(r.status).filter(|s| *s != 0);
        l.ttfb_ms = r.ttfb.map(|t| t.as_millis() as u64);
        l.cache_hit = r.cache_hit;
        l.saved_spend = r.saved.map_or(0.0, dollars);
        l.requested_model = r
            .requested_model
            .as_deref()
            .filter(|m| Some(*m) != r.model.as_deref());
        l.overhead_us = Some(u64::try_from(r.overhead.as_micros()).unwrap_or(u64::MAX));
        l.retries = r.retries;
        l.fallbacks = r.fallbacks;
        l.hedges = r.hedges;
        // The usual request, one attempt that answered, keeps no list: the detail shows it
        // from `deployment_id` and the timings (see `SpendLog::attempts`).
        let plain = r.retries == 0
            && r.fallbacks == 0
            && r.hedges == 0
            && matches!(r.attempts.as_slice(), [a] if a.result == AttemptEnd::Ok && !a.hedge);
        if !plain {
            l.attempts = r
                .attempts
                .iter()
                .map(|a| AttemptLog {
                    deployment: a.target.id.to_string(),
                    model_group: a.target.model_name.to_string(),
                    provider: a.target.provider.to_owned(),
                    hedge: a.hedge,
                    start_us: micros(a.start.saturating_duration_since(r.start)),
                    duration_us: a.end.map(|e| micros(e.saturating_duration_since(a.start))),
                    result: match a.result {
                        AttemptEnd::Open => "open",
                        AttemptEnd::Ok => "ok",
                        AttemptEnd::Failed(kind) => kind,
                        AttemptEnd::Cancelled => "cancelled",
                    }
                    .to_owned(),
                    status: a.error.as_ref().map(|e| e.status),
                    message: a.error.as_ref().map(|e| e.message.clone()),
                })
                .collect();
        }
        Some(l)
    }

    /// The line's id, for the record that was journaled with it.
    pub(crate) fn id(&self) -> uuid::Uuid {
        self.id
    }

    /// The owned spend log this line stands for (no prompt or answer yet).
    pub(crate) fn into_log(self) -> SpendLog {
        let mut l = SpendLog::new(
            self.request_id.to_owned(),
            self.model_group.into_owned(),
            self.start_time,
        );
        l.id = self.id.hyphenated().to_string();
        l.api_key = self.api_key.as_deref().and_then(KeyHash::from_hex);
        l.team_id = self.team_id.map(str::to_owned);
        l.user_id = self.user_id.map(str::to_owned);
        l.end_user = self.end_user.map(str::to_owned);
        l.deployment_id = self.deployment_id.map(Cow::into_owned);
        l.provider = self.provider.map(str::to_owned);
        l.usage = self.usage;
        l.spend = self.spend;
        l.status = self.status;
        l.end_time = self.end_time;
        l.ttfb_ms = self.ttfb_ms;
        l.cache_hit = self.cache_hit;
        l.saved_spend = self.saved_spend;
        l.requested_model = self.requested_model.map(str::to_owned);
        l.overhead_us = self.overhead_us;
        l.retries = self.retries;
        l.fallbacks = self.fallbacks;
        l.hedges = self.hedges;
        l.attempts = self.attempts;
        l.call_type = self.call_type;
        l.error = self.error;
        l.http_status = self.http_status;
        l.error_type = self.error_type.map(str::to_owned);
        l.error_message = self.error_message.map(str::to_owned);
        l.request_tags = self.request_tags.iter().map(|t| t.to_string()).collect();
        l
    }
}

/// A key's hash as the store keeps it (lowercase hex), borrowed when it already is.
fn key_hash(hex: &str) -> Option<Cow<'_, str>> {
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    Some(if hex.bytes().any(|b| b.is_ascii_uppercase()) {
        Cow::Owned(hex.to_ascii_lowercase())
    } else {
        Cow::Borrowed(hex)
    })
}

fn micros(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// The members of a request body that hold its prompt (read borrowed: nothing else is built).
#[derive(Deserialize)]
struct Prompt<'a> {
    #[serde(borrow)]
    messages: Option<&'a RawValue>,
    #[serde(borrow)]
    input: Option<&'a RawValue>,
    #[serde(borrow)]
    prompt: Option<&'a RawValue>,
}

/// The prompt (`messages`, else `input`, else `prompt`, as the client sent it) and the answer
/// (a stream's frames put back together), each cut to [`MAX_CONTENT`] bytes.
pub fn content_texts(c: &Content) -> (Option<String>, Option<String>) {
    let prompt = serde_json::from_slice::<Prompt<'_>>(&c.request)
        .ok()
        .and_then(|p| p.messages.or(p.input).or(p.prompt))
        .map(|v| capped(v.get()));
    texts(prompt, c)
}

/// A tool call's arguments and result, as the call carried them, each cut to the cap.
pub fn tool_texts(c: &Content) -> (Option<String>, Option<String>) {
    let arguments = (!c.request.is_empty()).then(|| capped(&String::from_utf8_lossy(&c.request)));
    texts(arguments, c)
}

fn texts(prompt: Option<String>, c: &Content) -> (Option<String>, Option<String>) {
    let answer = match &c.response {
        Some(b) => Some(capped(&String::from_utf8_lossy(b))),
        None => sluice_translate::assemble::stream_answer(&c.stream.frames)
            .map(|v| capped(&v.to_string())),
    };
    (prompt, answer)
}

/// `text` cut at a character boundary at most [`MAX_CONTENT`] bytes in, marked when cut.
fn capped(text: &str) -> String {
    if text.len() <= MAX_CONTENT {
        return text.to_owned();
    }
    let mut end = MAX_CONTENT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… (cut at {} KB)", &text[..end], MAX_CONTENT / 1024)
}

impl RecordSink for SpendSink {
    fn journal(&self) -> Option<Arc<dyn RecordJournal>> {
        self.sender
            .journal()
            .map(|j| Arc::new(j) as Arc<dyn RecordJournal>)
    }

    fn accept(&self, record: &RequestRecord) {
        if let Some(mut l) = spend_log(record, OffsetDateTime::now_utc()) {
            l.journal = record.journaled.as_ref().map(|j| j.hold.clone());
            if let Some(c) = record.content.as_deref() {
                if self.prompts.load(Ordering::Relaxed) {
                    (l.messages, l.response) = if record.tool.is_some() {
                        tool_texts(c)
                    } else {
                        content_texts(c)
                    };
                }
            }
            self.sender.send(l);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use sluice_core::record::{
        AttemptSpan, DeploymentInfo, ErrorNote, JournalHold, Journaled, KeyInfo, ToolCall,
    };
    use std::time::{Duration, Instant};

    /// Records of every shape a spend log takes: a keyed answer, a retried stream cut short
    /// with a fallback group and an uppercase key hash, a tool call, an unkeyed failure.
    fn shapes() -> Vec<RequestRecord> {
        let mut plain = RequestRecord::sample("plain");
        plain.model = Some(Arc::from("gpt-4o"));
        plain.deployment = Some(Arc::from("d-1"));
        plain.provider = Some("openai");
        plain.status = 200;
        plain.usage = Some(Usage {
            prompt_tokens: 7,
            completion_tokens: 3,
            cached_tokens: 2,
            ..Usage::default()
        });
        plain.cost = Some(sluice_core::limits::nanos(0.0123));
        plain.ttfb = Some(Duration::from_millis(12));
        plain.overhead = Duration::from_micros(42);
        plain.end_user = Some(Arc::from("end-user"));
        plain.key = Some(Arc::new(KeyInfo {
            hash: Arc::from("ab".repeat(32).as_str()),
            alias: None,
            team_id: Some(Arc::from("t")),
            user_id: Some(Arc::from("u")),
        }));

        let mut retried = plain.clone();
        retried.request_id = RequestRecord::sample("retried").request_id;
        retried.outcome = Outcome::StreamCut;
        retried.requested_model = Some(Arc::from("big"));
        retried.retries = 1;
        retried.fallbacks = 1;
        retried.key = Some(Arc::new(KeyInfo {
            hash: Arc::from("AB".repeat(32).as_str()),
            alias: None,
            team_id: None,
            user_id: None,
        }));
        let target = Arc::new(DeploymentInfo {
            id: Arc::from("d-0"),
            model_name: Arc::from("big"),
            upstream_model: Arc::from("big-1"),
            provider: "anthropic",
            region: None,
        });
        let start = retried.start;
        retried.attempts.push(AttemptSpan {
            span_id: [1; 8],
            target: target.clone(),
            hedge: false,
            start,
            end: Some(start + Duration::from_millis(3)),
            result: AttemptEnd::Failed("timeout"),
            error: Some(Box::new(ErrorNote {
                status: 504,
                kind: "timeout".into(),
                message: "no answer within 3ms".into(),
            })),
        });
        retried.attempts.push(AttemptSpan {
            span_id: [2; 8],
            target,
            hedge: true,
            start: start + Duration::from_millis(4),
            end: None,
            result: AttemptEnd::Open,
            error: None,
        });

        let mut tool = RequestRecord::tool_call(
            RequestRecord::sample("tool").request_id,
            "/mcp",
            Instant::now(),
            ToolCall {
                server: Arc::from("github"),
                method: "tools/call",
                name: Some("search".into()),
                status: CallStatus::Ok,
                error: None,
            },
        );
        tool.cost = Some(sluice_core::limits::nanos(0.5));
        tool.duration = Some(Duration::from_millis(9));

        let mut failed = RequestRecord::sample("failed");
        failed.model = Some(Arc::from("gpt-4o"));
        failed.status = 502;
        failed.error_note = Some(Box::new(ErrorNote::of_body(
            502,
            br#"{"error":{"message":"upstream down","type":"server_error"}}"#,
        )));
        vec![plain, retried, tool, failed]
    }

    #[test]
    fn the_journal_line_serialises_as_the_log_it_stands_for() {
        for mut r in shapes() {
            r.journaled = Some(Box::new(Journaled {
                id: [7, 9],
                hold: JournalHold::new().0,
            }));
            let now = OffsetDateTime::now_utc();
            let line = serde_json::to_value(Line::of(&r, now).unwrap()).unwrap();
            let log = spend_log(&r, now).unwrap();
            // Each reads the request's elapsed time itself: the start may fall a millisecond
            // apart between the two readings; everything else is the same.
            let (mut a, mut b) = (line.clone(), serde_json::to_value(&log).unwrap());
            let starts = [&mut a, &mut b].map(|v| {
                v.as_object_mut()
                    .and_then(|o| o.remove("start_time"))
                    .and_then(|t| t.as_i64())
                    .unwrap_or_default()
            });
            assert!((starts[0] - starts[1]).abs() <= 1, "{starts:?}");
            assert_eq!(a, b, "{r:?}");
            assert_eq!(log.id, uuid::Uuid::from_u64_pair(7, 9).to_string());
            // And the store reads it back as that log (times to the millisecond).
            let back: SpendLog = serde_json::from_value(line.clone()).unwrap();
            assert_eq!(serde_json::to_value(&back).unwrap(), line);
        }
        // A failure keeps what the client got: its status and error code.
        let mut failed = shapes().pop().unwrap();
        let log = spend_log(&failed, OffsetDateTime::now_utc()).unwrap();
        assert_eq!(log.error.as_deref(), Some("502 error"));
        // ... and the error's type and message as its body gave them.
        assert_eq!(log.http_status, Some(502));
        assert_eq!(log.error_type.as_deref(), Some("server_error"));
        assert_eq!(log.error_message.as_deref(), Some("upstream down"));
        let retried = spend_log(&shapes()[1], OffsetDateTime::now_utc()).unwrap();
        assert_eq!(retried.attempts[0].status, Some(504));
        assert_eq!(
            retried.attempts[0].message.as_deref(),
            Some("no answer within 3ms")
        );
        assert_eq!(retried.attempts[1].message, None);
        failed.error = Some("rpm_limit_exceeded");
        failed.status = 429;
        let log = spend_log(&failed, OffsetDateTime::now_utc()).unwrap();
        assert_eq!(log.error.as_deref(), Some("429 rpm_limit_exceeded"));
        assert_eq!(
            spend_log(&shapes()[0], OffsetDateTime::now_utc())
                .unwrap()
                .error,
            None
        );
        let plain = &shapes()[0];
        let a = spend_log(plain, OffsetDateTime::now_utc()).unwrap();
        let b = spend_log(plain, OffsetDateTime::now_utc()).unwrap();
        assert_ne!(
            a.id, b.id,
            "an unjournaled record gets a fresh id each time"
        );
    }

    #[test]
    fn content_is_the_prompt_and_answer_cut_to_the_cap() {
        let c = Content {
            request: Bytes::from_static(
                br#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#,
            ),
            response: Some(Bytes::from_static(br#"{"choices":[]}"#)),
            ..Content::default()
        };
        let (p, a) = content_texts(&c);
        assert_eq!(p.as_deref(), Some(r#"[{"role":"user","content":"hi"}]"#));
        assert_eq!(a.as_deref(), Some(r#"{"choices":[]}"#));
        let long = "é".repeat(MAX_CONTENT);
        let cut = capped(&long);
        assert!(
            cut.len() < MAX_CONTENT + 32 && cut.ends_with("(cut at 64 KB)"),
            "{}",
            cut.len()
        );
    }
}
