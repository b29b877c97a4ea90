//! Finished inference requests become spend-log records for the writer. Runs on the recorder
//! task, never on a request.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde::Deserialize;
use serde_json::value::RawValue;
use time::OffsetDateTime;

use super::spend_logs::{AttemptLog, MAX_CONTENT};
use super::writer::SpendSender;
use super::{KeyHash, SpendLog, SpendStatus};
use sluice_core::limits::dollars;
use sluice_core::record::{
    AttemptEnd, CallStatus, Content, Outcome, RecordSink, RequestRecord, ToolCall,
};

/// Feeds the spend-log writer.
#[derive(Debug)]
pub struct SpendSink {
    sender: SpendSender,
    /// `store_prompts_in_spend_logs`, shared with the state so that a reload can turn it.
    prompts: Arc<AtomicBool>,
}

impl SpendSink {
    /// A sink feeding `sender`; prompts and answers are kept while `prompts` is set.
    pub fn new(sender: SpendSender, prompts: Arc<AtomicBool>) -> Self {
        Self { sender, prompts }
    }
}

/// The spend log of a finished request; `None` for requests that never named a model group
/// (health checks, unknown routes, refused credentials).
pub fn spend_log(r: &RequestRecord, now: OffsetDateTime) -> Option<SpendLog> {
    if let Some(t) = &r.tool {
        return Some(tool_log(r, t, now));
    }
    let model = r.model.as_deref()?;
    let start = now - r.start.elapsed();
    let mut l = SpendLog::new(
        r.request_id.to_str().unwrap_or("-").to_owned(),
        model.to_owned(),
        start,
    );
    if let Some(k) = &r.key {
        l.api_key = KeyHash::from_hex(&k.hash);
        l.team_id = k.team_id.as_deref().map(str::to_owned);
        l.user_id = k.user_id.as_deref().map(str::to_owned);
    }
    l.end_user = r.end_user.as_deref().map(str::to_owned);
    l.deployment_id = r.deployment.as_deref().map(str::to_owned);
    l.provider = r.provider.map(str::to_owned);
    l.usage = r.usage.unwrap_or_default();
    l.spend = r.cost.map_or(0.0, dollars);
    l.status = if (200..300).contains(&r.status)
        && matches!(r.outcome, Outcome::Done | Outcome::StreamComplete)
    {
        SpendStatus::Success
    } else {
        SpendStatus::Failure
    };
    l.end_time = now;
    l.ttfb_ms = r.ttfb.map(|t| t.as_millis() as u64);
    l.cache_hit = r.cache_hit;
    l.saved_spend = r.saved.map_or(0.0, dollars);
    l.requested_model = r
        .requested_model
        .as_deref()
        .filter(|m| *m != model)
        .map(str::to_owned);
    l.overhead_us = Some(u64::try_from(r.overhead.as_micros()).unwrap_or(u64::MAX));
    l.retries = r.retries;
    l.fallbacks = r.fallbacks;
    l.hedges = r.hedges;
    // The usual request, one attempt that answered, keeps no list: the detail shows it from
    // `deployment_id` and the timings (see `SpendLog::attempts`).
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
            })
            .collect();
    }
    Some(l)
}

/// An MCP exchange's row: the tool's qualified name where a request has its model group,
/// the server as its deployment, `mcp` as its provider, the configured price as its spend.
fn tool_log(r: &RequestRecord, t: &ToolCall, now: OffsetDateTime) -> SpendLog {
    let start = now - r.duration.unwrap_or_else(|| r.start.elapsed());
    let mut l = SpendLog::new(
        r.request_id.to_str().unwrap_or("-").to_owned(),
        t.qualified_name(),
        start,
    );
    if let Some(k) = &r.key {
        l.api_key = KeyHash::from_hex(&k.hash);
        l.team_id = k.team_id.as_deref().map(str::to_owned);
        l.user_id = k.user_id.as_deref().map(str::to_owned);
    }
    l.deployment_id = Some(t.server.to_string());
    l.provider = Some("mcp".to_owned());
    l.spend = r.cost.map_or(0.0, dollars);
    l.status = if t.status == CallStatus::Ok {
        SpendStatus::Success
    } else {
        SpendStatus::Failure
    };
    l.end_time = now;
    l.call_type = Some(t.call_type());
    l.error = t.failure();
    l
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
    fn accept(&self, record: &RequestRecord) {
        if let Some(mut l) = spend_log(record, OffsetDateTime::now_utc()) {
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
