//! `GET /spend/logs`: the spend log, filtered as LiteLLM filters it (`api_key`, `user_id`,
//! `request_id`, `start_date`/`end_date` as `YYYY-MM-DD`, both days included, or to the minute
//! as `YYYY-MM-DDTHH:MM`, UTC) and by `key_alias`, `team_id`, `model_group`, `status` and `id`,
//! newest first. Prompt and answer only when one request is asked for (`id`, `request_id`).
//! `GET /spend/daily`: the daily rollups per key, team and model group, for dashboards.
//! `GET /spend/groups`: spend summed by team, key, model group, user or end user over days.

use time::macros::format_description;
use time::{Date, OffsetDateTime};

use super::answers::spend::{DailySpendRow, SpendLogEntry};
use super::{query_pairs, query_value, store_error, AdminRequest};
use sluice_core::error::ApiError;
use sluice_store::{
    Cursor, GroupSpend, KeyHash, LogPosition, Page, SpendBy, SpendLogFilter, SpendStatus, Store,
    TagSpend,
};

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

/// `GET /spend/logs`: a list of records.
pub(crate) async fn logs(
    store: &Store,
    req: AdminRequest<'_>,
) -> Result<Vec<SpendLogEntry>, ApiError> {
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
            "before",
            "after",
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
    let cursor = match (query_value(&q, "before"), query_value(&q, "after")) {
        (Some(c), _) => Some(Cursor::Before(position(c, "before")?)),
        (None, Some(c)) => Some(Cursor::After(position(c, "after")?)),
        (None, None) => None,
    };
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
        cursor,
        page: Page { offset: 0, limit },
    };
    let logs = store.spend_logs(&filter).await.map_err(store_error)?;
    Ok(logs.iter().map(SpendLogEntry::of).collect())
}

/// A page's cursor (`before`, `after`): a row's place as a log page's links carry it.
fn position(value: &str, param: &'static str) -> Result<LogPosition, ApiError> {
    LogPosition::parse(value).ok_or_else(|| ApiError::InvalidParam {
        param,
        message: format!("`{value}` is not a row's place in the log (<milliseconds>.<id>)"),
    })
}

/// `GET /spend/groups?group_by=&start_date=&end_date=` (`YYYY-MM-DD`, both included; default:
/// the last 30 days): spend, requests and tokens summed by `team`, `key`, `model`, `user` (the
/// key's) or `end_user` (the request's `user`), most spend first; requests without one are the
/// row named "". sluice's own: LiteLLM has no one route for it.
pub(crate) async fn groups(
    store: &Store,
    req: AdminRequest<'_>,
) -> Result<Vec<GroupSpend>, ApiError> {
    let q = query_pairs(&req, &["group_by", "start_date", "end_date"])?;
    let by = match query_value(&q, "group_by") {
        Some("team") => SpendBy::Team,
        Some("key") => SpendBy::Key,
        Some("model") => SpendBy::Model,
        Some("user") => SpendBy::User,
        Some("end_user") => SpendBy::EndUser,
        other => {
            return Err(ApiError::InvalidParam {
                param: "group_by",
                message: format!(
                    "`{}` is not one of team, key, model, user, end_user",
                    other.unwrap_or_default()
                ),
            })
        }
    };
    let (start, end) = days(&q)?;
    store
        .spend_grouped(start, end + time::Duration::days(1), by)
        .await
        .map_err(store_error)
}

/// `start_date` and `end_date` (`YYYY-MM-DD`, both included) as their first moments; by
/// default the 30 days before today, and today.
fn days(q: &[(String, String)]) -> Result<(OffsetDateTime, OffsetDateTime), ApiError> {
    let end = match query_value(q, "end_date") {
        Some(d) => day(d, "end_date")?,
        None => OffsetDateTime::now_utc().date().midnight().assume_utc(),
    };
    let start = match query_value(q, "start_date") {
        Some(d) => day(d, "start_date")?,
        None => end - time::Duration::days(30),
    };
    Ok((start, end))
}

/// `GET /spend/tags?start_date=&end_date=` (`YYYY-MM-DD`, both included, either open):
/// LiteLLM's spend per request tag, `[{individual_request_tag, log_count, total_spend}]`
/// (plus `total_tokens`), most spend first. LiteLLM takes the dates and ignores them.
pub(crate) async fn tags(store: &Store, req: AdminRequest<'_>) -> Result<Vec<TagSpend>, ApiError> {
    let q = query_pairs(&req, &["start_date", "end_date"])?;
    let start = query_value(&q, "start_date")
        .map(|d| day(d, "start_date"))
        .transpose()?;
    let end = query_value(&q, "end_date")
        .map(|d| day(d, "end_date").map(|t| t + time::Duration::days(1)))
        .transpose()?;
    store.spend_by_tag(start, end).await.map_err(store_error)
}

/// `GET /spend/daily?start_date=&end_date=` (`YYYY-MM-DD`, both included; default: the last 30
/// days): one row per UTC day, key hash, team and model group.
pub(crate) async fn daily(
    store: &Store,
    req: AdminRequest<'_>,
) -> Result<Vec<DailySpendRow>, ApiError> {
    let q = query_pairs(&req, &["start_date", "end_date"])?;
    let fmt = format_description!("[year]-[month]-[day]");
    let (start, end) = days(&q)?;
    let (start, end) = (start.date(), end.date());
    let text = |d: Date| d.format(fmt).map_err(|_| ApiError::Internal("date format"));
    let rows = store
        .daily_spend(&text(start)?, &text(end)?)
        .await
        .map_err(store_error)?;
    Ok(rows.iter().map(DailySpendRow::of).collect())
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
