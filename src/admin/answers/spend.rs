//! `/spend/*`'s answers: one spend-log record as `GET /spend/logs` lists it, a daily rollup
//! row of `GET /spend/daily`. (`GET /spend/tags` answers the store's `TagSpend` rows, whose
//! serde names are LiteLLM's.)

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::iso;
use sluice_store::{AttemptLog, DailySpend, KeyHash, SpendLog, SpendStatus};

/// One request's record, with LiteLLM's spend-log names (`startTime`, `model_group`,
/// `api_key`, `messages`, `response`, ...) plus sluice's token breakdown, its own time and
/// the attempts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct SpendLogEntry {
    /// The record's own id.
    pub id: String,
    /// The request id the client saw.
    pub request_id: String,
    /// The virtual key's hash; `None` for the master key.
    pub api_key: Option<String>,
    /// The key's team.
    pub team_id: Option<String>,
    /// The key's user.
    pub user: Option<String>,
    /// The request's `user` (the end user).
    pub end_user: Option<String>,
    /// The model group that served it.
    pub model_group: String,
    /// The deployment that served it.
    pub model_id: Option<String>,
    /// That deployment's provider.
    pub custom_llm_provider: Option<String>,
    /// Cost in USD.
    pub spend: f64,
    /// Input tokens (cached included).
    pub prompt_tokens: u64,
    /// Output tokens.
    pub completion_tokens: u64,
    /// Input plus output tokens.
    pub total_tokens: u64,
    /// Cached input tokens.
    pub cached_tokens: u64,
    /// Input tokens written to the provider's prompt cache.
    pub cache_creation_tokens: u64,
    /// Output tokens spent reasoning.
    pub reasoning_tokens: u64,
    /// `success` or `failure`.
    pub status: SpendStatus,
    /// When it arrived (ISO 8601).
    #[serde(rename = "startTime")]
    pub start_time: Option<String>,
    /// When its answer ended (ISO 8601).
    #[serde(rename = "endTime")]
    pub end_time: Option<String>,
    /// Time to the answer's first byte, for a stream.
    pub ttfb_ms: Option<u64>,
    /// The whole request, start to end (LiteLLM's field).
    pub request_duration_ms: f64,
    /// Served from the response cache, as LiteLLM writes it (`"True"`, `"False"`).
    #[serde(with = "python_bool")]
    pub cache_hit: bool,
    /// What a cache hit saved, in USD.
    pub saved_spend: f64,
    /// The model group asked for (a fallback serves another).
    pub requested_model: String,
    /// The request's tags.
    pub request_tags: Vec<String>,
    /// sluice's own time in the request.
    pub overhead_ms: Option<f64>,
    /// Attempts retried on another deployment.
    pub retries: u32,
    /// Fallback groups moved to.
    pub fallbacks: u32,
    /// Hedged second attempts.
    pub hedges: u32,
    /// Every upstream attempt, in start order; empty for the usual single one.
    pub attempts: Vec<AttemptEntry>,
    /// The request's messages, when one record is asked for and prompts are kept: JSON, or
    /// text when cut at the size cap.
    pub messages: Option<Value>,
    /// The answer, likewise.
    pub response: Option<Value>,
    /// LiteLLM's field: what the row records when it is not a model request.
    pub call_type: Option<String>,
    /// Why it failed: the HTTP status and error code the client got (`429
    /// rpm_limit_exceeded`).
    pub error: Option<String>,
    /// The HTTP status the client got (unknown for rows written before it was kept).
    pub http_status: Option<u16>,
    /// A failure's error type as the client got it (`rate_limit_error`, ...).
    pub error_type: Option<String>,
    /// A failure's message as the client got it.
    pub error_message: Option<String>,
}

/// One upstream attempt of a request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct AttemptEntry {
    /// The deployment called.
    pub model_id: String,
    /// Its model group.
    pub model_group: String,
    /// Its provider.
    pub custom_llm_provider: String,
    /// Started as a hedge of a slow first attempt.
    pub hedge: bool,
    /// When it started, after the request arrived.
    pub start_ms: f64,
    /// How long it ran (`None`: still open when recorded).
    pub duration_ms: Option<f64>,
    /// `ok`, `cancelled`, `open`, or the failure kind.
    pub result: String,
    /// A failed attempt's HTTP status.
    pub status: Option<u16>,
    /// A failed attempt's error message.
    pub message: Option<String>,
}

impl SpendLogEntry {
    /// The stored record as shown.
    pub(crate) fn of(l: &SpendLog) -> Self {
        let u = &l.usage;
        // Stored as JSON text; one cut at the size cap is no longer JSON and stays text.
        let content = |t: &Option<String>| {
            t.as_deref().map(|t| {
                serde_json::from_str::<Value>(t).unwrap_or_else(|_| Value::String(t.to_owned()))
            })
        };
        Self {
            id: l.id.clone(),
            request_id: l.request_id.clone(),
            api_key: l.api_key.as_ref().map(|k| KeyHash::as_str(k).to_owned()),
            team_id: l.team_id.clone(),
            user: l.user_id.clone(),
            end_user: l.end_user.clone(),
            model_group: l.model_group.clone(),
            model_id: l.deployment_id.clone(),
            custom_llm_provider: l.provider.clone(),
            spend: l.spend,
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
            total_tokens: u.prompt_tokens + u.completion_tokens,
            cached_tokens: u.cached_tokens,
            cache_creation_tokens: u.cache_creation_tokens,
            reasoning_tokens: u.reasoning_tokens,
            status: l.status,
            start_time: iso(l.start_time),
            end_time: iso(l.end_time),
            ttfb_ms: l.ttfb_ms,
            request_duration_ms: (l.end_time - l.start_time).whole_microseconds() as f64 / 1000.0,
            cache_hit: l.cache_hit,
            saved_spend: l.saved_spend,
            requested_model: l
                .requested_model
                .clone()
                .unwrap_or_else(|| l.model_group.clone()),
            request_tags: l.request_tags.clone(),
            overhead_ms: l.overhead_us.map(|us| us as f64 / 1000.0),
            retries: l.retries,
            fallbacks: l.fallbacks,
            hedges: l.hedges,
            attempts: l.attempts.iter().map(AttemptEntry::of).collect(),
            messages: content(&l.messages),
            response: content(&l.response),
            call_type: l.call_type.clone(),
            error: l.error.clone(),
            http_status: l.http_status,
            error_type: l.error_type.clone(),
            error_message: l.error_message.clone(),
        }
    }
}

impl AttemptEntry {
    fn of(a: &AttemptLog) -> Self {
        Self {
            model_id: a.deployment.clone(),
            model_group: a.model_group.clone(),
            custom_llm_provider: a.provider.clone(),
            hedge: a.hedge,
            start_ms: a.start_us as f64 / 1000.0,
            duration_ms: a.duration_us.map(|us| us as f64 / 1000.0),
            result: a.result.clone(),
            status: a.status,
            message: a.message.clone(),
        }
    }
}

/// A boolean as LiteLLM's spend logs write it: `"True"` or `"False"`.
mod python_bool {
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(v: &bool, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(if *v { "True" } else { "False" })
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
        Ok(String::deserialize(d)? == "True")
    }
}

/// One row of `GET /spend/daily`: a UTC day's requests for one key, team and model group.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct DailySpendRow {
    /// `YYYY-MM-DD`, UTC.
    pub date: String,
    /// Key hash, empty for requests without a virtual key.
    pub api_key: String,
    /// Team, empty for none.
    pub team_id: String,
    /// Model group.
    pub model_group: String,
    /// Requests counted.
    pub requests: u64,
    /// Of which failed.
    pub failed_requests: u64,
    /// Input tokens (cached included).
    pub prompt_tokens: u64,
    /// Output tokens.
    pub completion_tokens: u64,
    /// Cached input tokens.
    pub cached_tokens: u64,
    /// Input tokens written to the provider's prompt cache.
    pub cache_creation_tokens: u64,
    /// USD.
    pub spend: f64,
}

impl DailySpendRow {
    /// The store's rollup row as shown.
    pub(crate) fn of(r: &DailySpend) -> Self {
        Self {
            date: r.day.clone(),
            api_key: r.api_key.clone(),
            team_id: r.team_id.clone(),
            model_group: r.model_group.clone(),
            requests: r.requests,
            failed_requests: r.failed_requests,
            prompt_tokens: r.prompt_tokens,
            completion_tokens: r.completion_tokens,
            cached_tokens: r.cached_tokens,
            cache_creation_tokens: r.cache_creation_tokens,
            spend: r.spend,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admin::answers::tests::names_and_round_trip;

    #[test]
    fn a_record_keeps_litellms_names_and_reads_back() {
        let at = time::macros::datetime!(2026-03-01 12:00 UTC);
        let mut l = SpendLog::new("req".into(), "gpt-4o".into(), at);
        l.cache_hit = true;
        l.messages = Some("[1, 2]".into());
        l.response = Some("cut".into());
        let e = SpendLogEntry::of(&l);
        assert_eq!(e.messages, Some(serde_json::json!([1, 2])));
        assert_eq!(e.response, Some(Value::from("cut")));
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["cache_hit"], "True");
        assert_eq!(v["status"], "success");
        assert!(v["startTime"].is_string() && v.get("start_time").is_none());
        assert_eq!(serde_json::from_value::<SpendLogEntry>(v).unwrap(), e);
        let row = DailySpend {
            day: "2026-03-01".into(),
            api_key: String::new(),
            team_id: "t1".into(),
            model_group: "gpt-4o".into(),
            requests: 2,
            failed_requests: 1,
            prompt_tokens: 10,
            completion_tokens: 5,
            cached_tokens: 0,
            cache_creation_tokens: 0,
            spend: 0.5,
        };
        names_and_round_trip(
            &DailySpendRow::of(&row),
            &[&[
                "date",
                "api_key",
                "team_id",
                "model_group",
                "requests",
                "failed_requests",
                "prompt_tokens",
                "completion_tokens",
                "cached_tokens",
                "cache_creation_tokens",
                "spend",
            ]],
        );
    }
}
