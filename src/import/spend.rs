//! LiteLLM's spend logs, streamed: read a page at a time in `(startTime, request_id)` order
//! and written a page per transaction, so memory stays bounded whatever the table holds. Each
//! row keeps an id made from LiteLLM's request id, so a row imported twice is stored once;
//! the daily rollups are built from the rows actually inserted; the holders' spend is not
//! touched (their own spend columns, imported with them, already count these requests).

use serde_json::Value;
use time::OffsetDateTime;

use sluice_store::{KeyHash, SpendLog, SpendStatus, MAX_CONTENT};

use super::error::ImportError;
use super::report::{Report, RowError};
use super::source::{Row, Source};
use super::write::{Writer, SOURCE};

/// Rows per page (and per transaction).
const PAGE: i64 = 1000;

/// How far before the newest log already imported a later run reads again: LiteLLM writes its
/// spend logs in batches, some time after the requests started, so a row can arrive with a
/// start time earlier than one already read. Rows read twice are skipped by their id.
const LAG: time::Duration = time::Duration::minutes(5);

/// The import's cursor name in the store.
const CURSOR: &str = "spend_logs";

/// Which spend logs to bring over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Since {
    /// None of them.
    Nothing,
    /// Every one.
    Everything,
    /// Those that started at or after this time.
    From(OffsetDateTime),
}

/// Imports the spend logs `since` asks for (after the first run, from a little before the
/// newest one imported).
pub async fn import(
    source: &Source,
    w: &Writer<'_>,
    since: Since,
    report: &mut Report,
) -> Result<(), ImportError> {
    report.counts("spend_logs");
    let floor = match since {
        Since::Nothing => return Ok(()),
        Since::Everything => None,
        Since::From(t) => Some(t),
    };
    let cursor = w.store.import_cursor(SOURCE, CURSOR).await?;
    let start = match (cursor.and_then(from_ms), floor) {
        (Some(c), Some(f)) => Some((c - LAG).max(f)),
        (Some(c), None) => Some(c - LAG),
        (None, f) => f,
    };
    if w.dry_run {
        let n = source.count_spend_logs(start).await?;
        report.counts("spend_logs").new = n;
        report.notes.push(format!(
            "spend logs: {n} rows at LiteLLM to read; rows already imported are skipped when written"
        ));
        return Ok(());
    }
    let mut after: Option<(String, String)> = None;
    let mut newest: Option<OffsetDateTime> = None;
    loop {
        let rows = source.spend_logs(start, after.as_ref(), PAGE).await?;
        let Some(last) = rows.last() else {
            break;
        };
        after = Some((
            last.text("startTime").ok().flatten().unwrap_or_default(),
            last.id.clone(),
        ));
        let mut logs = Vec::with_capacity(rows.len());
        for r in &rows {
            match spend_log(r) {
                Ok(l) => {
                    newest = newest.max(Some(l.start_time));
                    logs.push(l);
                }
                Err(e) => report.errors.push(e),
            }
        }
        let done = w.store.import_spend_batch(&logs).await?;
        let c = report.counts("spend_logs");
        c.new += done.inserted;
        c.unchanged += done.duplicates;
        if rows.len() < usize::try_from(PAGE).unwrap_or(usize::MAX) {
            break;
        }
    }
    if let Some(t) = newest {
        let ms = i64::try_from(t.unix_timestamp_nanos() / 1_000_000).unwrap_or(i64::MAX);
        if cursor.is_none_or(|c| ms > c) {
            w.store.set_import_cursor(SOURCE, CURSOR, ms).await?;
        }
    }
    Ok(())
}

fn from_ms(ms: i64) -> Option<OffsetDateTime> {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000).ok()
}

/// One `LiteLLM_SpendLogs` row as sluice's spend log.
pub fn spend_log(r: &Row) -> Result<SpendLog, RowError> {
    if r.id.is_empty() {
        return Err(r.error("request_id", "missing"));
    }
    let start = r
        .time("startTime")?
        .ok_or_else(|| r.error("startTime", "missing"))?;
    let model_group = match r.text("model_group")? {
        Some(g) => g,
        None => r.text("model")?.unwrap_or_default(),
    };
    let mut l = SpendLog::new(r.id.clone(), model_group, start);
    l.id = format!("litellm:{}", r.id);
    l.api_key = r.text("api_key")?.and_then(|k| KeyHash::from_hex(&k));
    l.team_id = r.text("team_id")?;
    l.user_id = r.text("user")?;
    l.end_user = r.text("end_user")?;
    l.deployment_id = r.text("model_id")?;
    l.provider = r.text("custom_llm_provider")?;
    l.usage.prompt_tokens = r.count("prompt_tokens")?.unwrap_or(0);
    l.usage.completion_tokens = r.count("completion_tokens")?.unwrap_or(0);
    l.spend = r.float("spend")?.unwrap_or(0.0);
    l.status = match r.text("status")?.as_deref() {
        Some("failure") => SpendStatus::Failure,
        _ => SpendStatus::Success,
    };
    l.end_time = r.time("endTime")?.unwrap_or(start).max(start);
    l.ttfb_ms = r
        .time("completionStartTime")?
        .map(|first| u64::try_from((first - start).whole_milliseconds()).unwrap_or(0));
    l.cache_hit = r
        .text("cache_hit")?
        .is_some_and(|c| c.eq_ignore_ascii_case("true"));
    l.call_type = r.text("call_type")?.filter(|c| c == "call_mcp_tool");
    l.request_tags = request_tags(r)?;
    l.messages = content(r, "messages");
    l.response = content(r, "response");
    Ok(l)
}

/// `request_tags` (`jsonb`, default `[]`): a list of tags. LiteLLM has also written it as a
/// JSON string holding the list (its spend-log payload keeps it as JSON text); that is read
/// too. NULL, empty text and `null` are no tags; NULL elements are skipped.
fn request_tags(r: &Row) -> Result<Vec<String>, RowError> {
    const COLUMN: &str = "request_tags";
    let parsed;
    let list = match r.get(COLUMN) {
        None => return Ok(Vec::new()),
        Some(Value::String(s)) if s.trim().is_empty() => return Ok(Vec::new()),
        Some(Value::String(s)) => {
            parsed = serde_json::from_str::<Value>(s)
                .map_err(|_| r.error(COLUMN, "expected a JSON list of tags, found text"))?;
            &parsed
        }
        Some(v) => v,
    };
    match list {
        Value::Null => Ok(Vec::new()),
        Value::Array(items) => items
            .iter()
            .filter(|v| !v.is_null())
            .map(|v| {
                v.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| r.error(COLUMN, format!("expected a list of tags, found {v}")))
            })
            .collect(),
        v => Err(r.error(COLUMN, format!("expected a list of tags, found {v}"))),
    }
}

/// A prompt or answer column as JSON text, when LiteLLM kept one, cut to sluice's limit.
fn content(r: &Row, column: &str) -> Option<String> {
    let v = r.get(column).filter(|v| !super::columns::says_nothing(v))?;
    let mut text = v.to_string();
    if text.len() > MAX_CONTENT {
        let mut cut = MAX_CONTENT;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_litellm_spend_log_becomes_sluices() {
        let key = KeyHash::of("sk-1");
        let r = Row::from_json(
            "LiteLLM_SpendLogs",
            "req-1",
            json!({"request_id": "req-1", "api_key": key.as_str(), "spend": 0.25,
                   "prompt_tokens": 10, "completion_tokens": 5, "startTime": "2026-03-01T10:00:00",
                   "endTime": "2026-03-01T10:00:02", "completionStartTime": "2026-03-01T10:00:00.400",
                   "model": "gpt-4o-2024-08-06", "model_group": "gpt-4o", "user": "u1",
                   "team_id": "t1", "end_user": "", "cache_hit": "False", "status": "success",
                   "messages": {}, "response": {"id": "x"}, "call_type": "acompletion"}),
        );
        let l = spend_log(&r).unwrap();
        assert_eq!(l.id, "litellm:req-1");
        assert_eq!(l.request_id, "req-1");
        assert_eq!(l.api_key, Some(key));
        assert_eq!(l.model_group, "gpt-4o");
        assert_eq!((l.usage.prompt_tokens, l.usage.completion_tokens), (10, 5));
        assert_eq!(l.ttfb_ms, Some(400));
        assert_eq!((l.end_time - l.start_time).whole_seconds(), 2);
        assert_eq!(l.end_user, None);
        assert_eq!(l.messages, None);
        assert_eq!(l.response.as_deref(), Some(r#"{"id":"x"}"#));
        assert_eq!(l.call_type, None);
        assert!(!l.cache_hit);
        assert!(l.request_tags.is_empty(), "no column, no tags");
        let bad = Row::from_json("LiteLLM_SpendLogs", "req-2", json!({"request_id": "req-2"}));
        assert_eq!(spend_log(&bad).unwrap_err().column, "startTime");
    }

    #[test]
    fn request_tags_come_over_as_a_list_or_as_json_text() {
        let row = |tags: serde_json::Value| {
            Row::from_json(
                "LiteLLM_SpendLogs",
                "req-1",
                json!({"request_id": "req-1", "startTime": "2026-03-01T10:00:00",
                       "request_tags": tags}),
            )
        };
        let tags = |v| spend_log(&row(v)).map(|l| l.request_tags);
        assert_eq!(tags(json!(["prod", "team-a"])).unwrap(), ["prod", "team-a"]);
        assert_eq!(tags(json!(r#"["prod"]"#)).unwrap(), ["prod"]);
        assert_eq!(tags(json!([])).unwrap(), Vec::<String>::new());
        assert_eq!(tags(json!(null)).unwrap(), Vec::<String>::new());
        assert_eq!(tags(json!("")).unwrap(), Vec::<String>::new());
        assert_eq!(tags(json!("null")).unwrap(), Vec::<String>::new());
        assert_eq!(tags(json!(["a", null])).unwrap(), ["a"]);
        for bad in [json!([1]), json!({"a": 1}), json!("not json"), json!(7)] {
            let e = tags(bad.clone()).unwrap_err();
            assert_eq!(e.column, "request_tags", "{bad}");
        }
    }
}
