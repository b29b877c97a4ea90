//! `/spend/*`'s answers: one spend-log record as `GET /spend/logs` lists it, a daily rollup
//! row of `GET /spend/daily`. (`GET /spend/tags` answers the store's `TagSpend` rows, whose
//! serde names are LiteLLM's.)

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::iso;
use sluice_store::{AttemptLog, DailySpend, KeyHash, SpendLog, SpendStatus};

/// One request's record, with LiteLLM's spend-log names (`startTime`, `model_group`,
/// `api_key`, `messages`, `response`, ...) plus sluice's token breakdown, its own time and
/// the attempts. The fields are declared in the byte order of their names, the order a
/// [`Value`]'s map keeps: `GET /spend/logs` serialises the records straight to the response
/// (`admin::call_bytes`), and the bytes are the ones the list built as a [`Value`] gave.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct SpendLogEntry {
    /// The virtual key's hash; `None` for the master key.
    pub api_key: Option<String>,
    /// Every upstream attempt, in start order; empty for the usual single one.
    pub attempts: Vec<AttemptEntry>,
    /// Input tokens written to the provider's prompt cache.
    pub cache_creation_tokens: u64,
    /// Served from the response cache, as LiteLLM writes it (`"True"`, `"False"`).
    #[serde(with = "python_bool")]
    pub cache_hit: bool,
    /// Cached input tokens.
    pub cached_tokens: u64,
    /// LiteLLM's field: what the row records when it is not a model request.
    pub call_type: Option<String>,
    /// Output tokens.
    pub completion_tokens: u64,
    /// That deployment's provider.
    pub custom_llm_provider: Option<String>,
    /// When its answer ended (ISO 8601).
    #[serde(rename = "endTime")]
    pub end_time: Option<String>,
    /// The request's `user` (the end user).
    pub end_user: Option<String>,
    /// Why it failed: the HTTP status and error code the client got (`429
    /// rpm_limit_exceeded`).
    pub error: Option<String>,
    /// A failure's message as the client got it.
    pub error_message: Option<String>,
    /// A failure's error type as the client got it (`rate_limit_error`, ...).
    pub error_type: Option<String>,
    /// Fallback groups moved to.
    pub fallbacks: u32,
    /// Hedged second attempts.
    pub hedges: u32,
    /// The HTTP status the client got (unknown for rows written before it was kept).
    pub http_status: Option<u16>,
    /// The record's own id.
    pub id: String,
    /// The request's messages, when one record is asked for and prompts are kept: JSON, or
    /// text when cut at the size cap.
    pub messages: Option<Value>,
    /// The model group that served it.
    pub model_group: String,
    /// The deployment that served it.
    pub model_id: Option<String>,
    /// sluice's own time in the request.
    pub overhead_ms: Option<f64>,
    /// Input tokens (cached included).
    pub prompt_tokens: u64,
    /// Output tokens spent reasoning.
    pub reasoning_tokens: u64,
    /// The whole request, start to end (LiteLLM's field).
    pub request_duration_ms: f64,
    /// The request id the client saw.
    pub request_id: String,
    /// The request's tags.
    pub request_tags: Vec<String>,
    /// The model group asked for (a fallback serves another).
    pub requested_model: String,
    /// The answer, likewise.
    pub response: Option<Value>,
    /// Attempts retried on another deployment.
    pub retries: u32,
    /// What a cache hit saved, in USD.
    pub saved_spend: f64,
    /// Cost in USD.
    pub spend: f64,
    /// When it arrived (ISO 8601).
    #[serde(rename = "startTime")]
    pub start_time: Option<String>,
    /// `success` or `failure`.
    pub status: SpendStatus,
    /// The key's team.
    pub team_id: Option<String>,
    /// Input plus output tokens.
    pub total_tokens: u64,
    /// Time to the answer's first byte, for a stream.
    pub ttfb_ms: Option<u64>,
    /// The key's user.
    pub user: Option<String>,
}

/// One upstream attempt of a request; fields in name order, as [`SpendLogEntry`]'s.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct AttemptEntry {
    /// Its provider.
    pub custom_llm_provider: String,
    /// How long it ran (`None`: still open when recorded).
    pub duration_ms: Option<f64>,
    /// Started as a hedge of a slow first attempt.
    pub hedge: bool,
    /// A failed attempt's error message.
    pub message: Option<String>,
    /// Its model group.
    pub model_group: String,
    /// The deployment called.
    pub model_id: String,
    /// `ok`, `cancelled`, `open`, or the failure kind.
    pub result: String,
    /// When it started, after the request arrived.
    pub start_ms: f64,
    /// A failed attempt's HTTP status.
    pub status: Option<u16>,
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

    /// `GET /spend/logs` serialises its records straight to bytes (`admin::call_bytes`);
    /// every other answer goes through a `Value`, whose map sorts the keys. The two must be
    /// the same bytes: a field declared out of name order, or one serialised unlike a `Value`
    /// would (a float, a nested list), shows here.
    #[test]
    fn a_record_serialises_as_its_value_does() {
        let at = time::macros::datetime!(2026-03-01 12:00:00.123 UTC);
        let bare = SpendLog::new("bare".into(), "m".into(), at);
        let mut full = SpendLog::new("req".into(), "gpt-4o".into(), at);
        full.api_key = Some(KeyHash::of("sk-x"));
        full.team_id = Some("t \"quoted\" é".into());
        full.user_id = Some("u".into());
        full.end_user = Some("e".into());
        full.deployment_id = Some("d".into());
        full.provider = Some("openai".into());
        full.usage.prompt_tokens = 10;
        full.usage.completion_tokens = 5;
        full.usage.cached_tokens = 2;
        full.usage.cache_creation_tokens = 1;
        full.usage.reasoning_tokens = 3;
        full.spend = 0.1 + 0.2;
        full.saved_spend = 1.5e-7;
        full.status = SpendStatus::Failure;
        full.end_time = at + time::Duration::milliseconds(250);
        full.ttfb_ms = Some(40);
        full.cache_hit = true;
        full.requested_model = Some("gpt-4".into());
        full.overhead_us = Some(1_234);
        full.retries = 1;
        full.fallbacks = 1;
        full.hedges = 1;
        full.attempts = vec![AttemptLog {
            deployment: "d0".into(),
            model_group: "gpt-4".into(),
            provider: "azure".into(),
            hedge: true,
            start_us: 1_500,
            duration_us: Some(2_000),
            result: "timeout".into(),
            status: Some(504),
            message: Some("slow".into()),
        }];
        full.messages = Some(r#"[{"role":"user","content":"hi","z":1,"a":[2.5]}]"#.into());
        full.response = Some("cut".into());
        full.call_type = Some("call_mcp_tool".into());
        full.error = Some("429 rpm_limit_exceeded".into());
        full.http_status = Some(429);
        full.error_type = Some("rate_limit_error".into());
        full.error_message = Some("limit".into());
        full.request_tags = vec!["prod".into(), "b".into(), "a".into()];
        let list: Vec<SpendLogEntry> = [&bare, &full].into_iter().map(SpendLogEntry::of).collect();
        let direct = serde_json::to_string(&list).unwrap();
        let via_value = serde_json::to_string(&serde_json::to_value(&list).unwrap()).unwrap();
        assert_eq!(direct, via_value);
    }
}
