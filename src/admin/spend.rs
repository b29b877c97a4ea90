//! `GET /spend/logs`: the spend log, filtered as LiteLLM filters it (`api_key`, `user_id`,
//! `request_id`, `start_date`/`end_date` as `YYYY-MM-DD`, both days included), newest first.
//! `GET /spend/daily`: the daily rollups per key, team and model group, for dashboards.

use serde_json::{json, Value};
use time::macros::format_description;
use time::{Date, OffsetDateTime};

use super::{iso, query_pairs, query_value, store_error, AdminRequest, AdminResult};
use sluice_core::error::ApiError;
use sluice_store::{KeyHash, Page, SpendLog, SpendLogFilter, SpendStatus, Store};

/// Rows one call returns at most (`limit` may ask for fewer).
const MAX_ROWS: u64 = 10_000;

fn day(value: &str, param: &'static str) -> Result<OffsetDateTime, ApiError> {
    Date::parse(value, format_description!("[year]-[month]-[day]"))
        .map(|d| d.midnight().assume_utc())
        .map_err(|_| ApiError::InvalidParam {
            param,
            message: format!("`{value}` is not a date like 2026-03-01"),
        })
}

/// One record with LiteLLM's spend-log names (`startTime`, `model_group`, `api_key`, ...) plus
/// sluice's token breakdown.
fn log_json(l: &SpendLog) -> Value {
    let u = &l.usage;
    json!({
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
        "status": match l.status { SpendStatus::Success => "success", SpendStatus::Failure => "failure" },
        "startTime": iso(l.start_time),
        "endTime": iso(l.end_time),
        "ttfb_ms": l.ttfb_ms,
        "cache_hit": if l.cache_hit { "True" } else { "False" },
        "saved_spend": l.saved_spend,
    })
}

/// `GET /spend/logs`: a list of records.
pub(super) async fn logs(store: &Store, req: AdminRequest<'_>) -> AdminResult {
    let q = query_pairs(
        &req,
        &[
            "api_key",
            "user_id",
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
        .map(|d| day(d, "start_date"))
        .transpose()?;
    let end = query_value(&q, "end_date")
        .map(|d| day(d, "end_date").map(|t| t + time::Duration::days(1)))
        .transpose()?;
    let limit = super::query_number(&q, "limit", MAX_ROWS)?.clamp(1, MAX_ROWS);
    let filter = SpendLogFilter {
        api_key,
        user_id: query_value(&q, "user_id").map(str::to_owned),
        request_id: query_value(&q, "request_id").map(str::to_owned),
        start,
        end,
        page: Page { offset: 0, limit },
    };
    let logs = store.spend_logs(&filter).await.map_err(store_error)?;
    Ok(Value::Array(logs.iter().map(log_json).collect()))
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
