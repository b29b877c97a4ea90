//! `GET /spend/logs`: the spend log, filtered as LiteLLM filters it (`api_key`, `user_id`,
//! `request_id`, `start_date`/`end_date` as `YYYY-MM-DD`, both days included, or to the minute
//! as `YYYY-MM-DDTHH:MM`, UTC) and by `key_alias`, `team_id`, `model_group`, `status` and `id`,
//! newest first. Prompt and answer only when one request is asked for (`id`, `request_id`).
//! `GET /spend/daily`: the daily rollups per key, team and model group, for dashboards.

use serde_json::{json, Value};
use time::macros::format_description;
use time::{Date, OffsetDateTime};

use super::{iso, query_pairs, query_value, store_error, AdminRequest, AdminResult};
use sluice_core::error::ApiError;
use sluice_store::{KeyHash, Page, SpendLog, SpendLogFilter, SpendStatus, Store};

/// Rows one call returns at most (`limit` may ask for fewer).
const MAX_ROWS: u64 = 10_000;

/// A `start_date` / `end_date`: a day (`end` then means the end of that day) or a UTC moment
/// to the minute or second, as a `datetime-local` input sends it.
fn moment(value: &str, param: &'static str, end: bool) -> Result<OffsetDateTime, ApiError> {
    if value.len() == 10 {
        let d = day(value, param)?;
        return Ok(if end { d + time::Duration::days(1) } else { d });
    }
    let value = value.trim_end_matches('Z');
    let minutes = format_description!("[year]-[month]-[day]T[hour]:[minute]");
    let seconds = format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]");
    let normal = value.replacen(' ', "T", 1);
    time::PrimitiveDateTime::parse(&normal, seconds)
        .or_else(|_| time::PrimitiveDateTime::parse(&normal, minutes))
        .map(time::PrimitiveDateTime::assume_utc)
        .map_err(|_| ApiError::InvalidParam {
            param,
            message: format!("`{value}` is not a date like 2026-03-01 or 2026-03-01T14:30"),
        })
}

pub(super) fn day(value: &str, param: &'static str) -> Result<OffsetDateTime, ApiError> {
    Date::parse(value, format_description!("[year]-[month]-[day]"))
        .map(|d| d.midnight().assume_utc())
        .map_err(|_| ApiError::InvalidParam {
            param,
            message: format!("`{value}` is not a date like 2026-03-01"),
        })
}

/// One record with LiteLLM's spend-log names (`startTime`, `model_group`, `api_key`,
/// `messages`, `response`, ...) plus sluice's token breakdown, its own time and the attempts.
fn log_json(l: &SpendLog) -> Value {
    let u = &l.usage;
    // Stored as JSON text; one cut at the size cap is no longer JSON and stays text.
    let content = |t: &Option<String>| {
        t.as_deref().map(|t| {
            serde_json::from_str::<Value>(t).unwrap_or_else(|_| Value::String(t.to_owned()))
        })
    };
    json!({
        "id": l.id,
        "request_id": l.request_id,
        "api_key": l.api_key.as_ref().map(KeyHash::as_str),
        "team_id": l.team_id,
        "user": l.user_id,
        "end_user": l.end_user,
        "model_group": l.model_group,
        "model_id": l.deployment_id,
        "custom_llm_provider": l.provider,
        "spend": l.spend,
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "total_tokens": u.prompt_tokens + u.completion_tokens,
        "cached_tokens": u.cached_tokens,
        "cache_creation_tokens": u.cache_creation_tokens,
        "reasoning_tokens": u.reasoning_tokens,
        "status": l.status.as_str(),
        "startTime": iso(l.start_time),
        "endTime": iso(l.end_time),
        "ttfb_ms": l.ttfb_ms,
        // LiteLLM's field: the whole request, start to end.
        "request_duration_ms": (l.end_time - l.start_time).whole_microseconds() as f64 / 1000.0,
        "cache_hit": if l.cache_hit { "True" } else { "False" },
        "saved_spend": l.saved_spend,
        "requested_model": l.requested_model.as_deref().unwrap_or(&l.model_group),
        "request_tags": l.request_tags,
        "overhead_ms": l.overhead_us.map(|us| us as f64 / 1000.0),
        "retries": l.retries,
        "fallbacks": l.fallbacks,
        "hedges": l.hedges,
        "attempts": l.attempts.iter().map(|a| json!({
            "model_id": a.deployment,
            "model_group": a.model_group,
            "custom_llm_provider": a.provider,
            "hedge": a.hedge,
            "start_ms": a.start_us as f64 / 1000.0,
            "duration_ms": a.duration_us.map(|us| us as f64 / 1000.0),
            "result": a.result,
        })).collect::<Vec<_>>(),
        "messages": content(&l.messages),
        "response": content(&l.response),
        // LiteLLM's field; a model request's is its route's operation, unknown to the row.
        "call_type": l.call_type,
        "error": l.error,
    })
}

/// `GET /spend/logs`: a list of records.
pub(super) async fn logs(store: &Store, req: AdminRequest<'_>) -> AdminResult {
    let q = query_pairs(
        &req,
        &[
            "id",
            "api_key",
            "key_alias",
            "user_id",
            "team_id",
            "model_group",
            "status",
            "request_id",
            "start_date",
            "end_date",
            "limit",
        ],
    )?;
    let api_key = query_value(&q, "api_key").map(|k| {
        if k.starts_with("sk-") {
            KeyHash::of(k)
        } else {
            KeyHash::from_hex(k).unwrap_or_else(|| KeyHash::of(k))
        }
    });
    let start = query_value(&q, "start_date")
        .map(|d| moment(d, "start_date", false))
        .transpose()?;
    let end = query_value(&q, "end_date")
        .map(|d| moment(d, "end_date", true))
        .transpose()?;
    let status = query_value(&q, "status")
        .map(|s| {
            SpendStatus::parse(s).ok_or(ApiError::InvalidParam {
                param: "status",
                message: "`status` is success or failure".to_owned(),
            })
        })
        .transpose()?;
    let text = |name: &str| query_value(&q, name).map(str::to_owned);
    let limit = super::query_number(&q, "limit", MAX_ROWS)?.clamp(1, MAX_ROWS);
    let filter = SpendLogFilter {
        id: text("id"),
        api_key,
        key_alias: text("key_alias"),
        user_id: text("user_id"),
        team_id: text("team_id"),
        model_group: text("model_group"),
        status,
        request_id: text("request_id"),
        start,
        end,
        content: query_value(&q, "id").is_some() || query_value(&q, "request_id").is_some(),
        page: Page { offset: 0, limit },
    };
    let logs = store.spend_logs(&filter).await.map_err(store_error)?;
    Ok(Value::Array(logs.iter().map(log_json).collect()))
}

/// `GET /spend/tags?start_date=&end_date=` (`YYYY-MM-DD`, both included, either open):
/// LiteLLM's spend per request tag, `[{individual_request_tag, log_count, total_spend}]`
/// (plus `total_tokens`), most spend first. LiteLLM takes the dates and ignores them.
pub(super) async fn tags(store: &Store, req: AdminRequest<'_>) -> AdminResult {
    let q = query_pairs(&req, &["start_date", "end_date"])?;
    let start = query_value(&q, "start_date")
        .map(|d| day(d, "start_date"))
        .transpose()?;
    let end = query_value(&q, "end_date")
        .map(|d| day(d, "end_date").map(|t| t + time::Duration::days(1)))
        .transpose()?;
    let rows = store.spend_by_tag(start, end).await.map_err(store_error)?;
    serde_json::to_value(rows).map_err(|_| ApiError::Internal("spend by tag"))
}

/// `GET /spend/daily?start_date=&end_date=` (`YYYY-MM-DD`, both included; default: the last 30
/// days): one row per UTC day, key hash, team and model group.
pub(super) async fn daily(store: &Store, req: AdminRequest<'_>) -> AdminResult {
    let q = query_pairs(&req, &["start_date", "end_date"])?;
    let today = OffsetDateTime::now_utc().date();
    let fmt = format_description!("[year]-[month]-[day]");
    let end = match query_value(&q, "end_date") {
        Some(d) => day(d, "end_date")?.date(),
        None => today,
    };
    let start = match query_value(&q, "start_date") {
        Some(d) => day(d, "start_date")?.date(),
        None => end - time::Duration::days(30),
    };
    let text = |d: Date| d.format(fmt).map_err(|_| ApiError::Internal("date format"));
    let rows = store
        .daily_spend(&text(start)?, &text(end)?)
        .await
        .map_err(store_error)?;
    Ok(Value::Array(
        rows.iter()
            .map(|r| {
                json!({
                    "date": r.day,
                    "api_key": r.api_key,
                    "team_id": r.team_id,
                    "model_group": r.model_group,
                    "requests": r.requests,
                    "failed_requests": r.failed_requests,
                    "prompt_tokens": r.prompt_tokens,
                    "completion_tokens": r.completion_tokens,
                    "cached_tokens": r.cached_tokens,
                    "cache_creation_tokens": r.cache_creation_tokens,
                    "spend": r.spend,
                })
            })
            .collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_whole_days_or_moments() {
        let at = |v: &str, end: bool| moment(v, "start_date", end).map(|t| t.to_string());
        assert_eq!(
            at("2026-03-01", false).unwrap(),
            "2026-03-01 0:00:00.0 +00:00:00"
        );
        assert_eq!(
            at("2026-03-01", true).unwrap(),
            "2026-03-02 0:00:00.0 +00:00:00"
        );
        assert_eq!(
            at("2026-03-01T14:30", true).unwrap(),
            "2026-03-01 14:30:00.0 +00:00:00"
        );
        assert_eq!(
            at("2026-03-01 14:30:05", false).unwrap(),
            "2026-03-01 14:30:05.0 +00:00:00"
        );
        assert!(at("yesterday", false).is_err());
    }
}
