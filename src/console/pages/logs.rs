//! Request logs from the spend log (`/spend/logs`), newest first, narrowed by request id, key
//! (hash or alias), team, model group, status and time (the store's SQL does the filtering),
//! and one request's detail: routing, attempts, timings, tokens, cost, and the prompt and answer
//! when `store_prompts_in_spend_logs` keeps them. An internal user sees only the requests made
//! with their keys, whatever the filters say.

use maud::{html, Markup};
use serde_json::Value;

use super::{or_empty, query, read, short, store, usd};
use crate::admin::answers::spend::SpendLogEntry;
use crate::console::{Form, Viewer};
use crate::server::{AppState, Snapshot};
use sluice_core::error::ApiError;
use sluice_store::SpendStatus;

/// Rows read per page.
const ROWS: &str = "200";

/// The filters a `/ui/logs` query names, as the form shows them back.
#[derive(Debug, Default, PartialEq)]
struct Filters<'q> {
    request_id: Option<&'q str>,
    key: Option<&'q str>,
    team: Option<&'q str>,
    model: Option<&'q str>,
    status: Option<&'static str>,
    start: Option<&'q str>,
    end: Option<&'q str>,
}

impl<'q> Filters<'q> {
    fn of(q: &'q Form) -> Self {
        let status = match q.filled("status") {
            Some("success") => Some("success"),
            Some("failure") => Some("failure"),
            // The older link for failed requests.
            _ => q.filled("failed").map(|_| "failure"),
        };
        Self {
            request_id: q.filled("request_id"),
            key: q.filled("key"),
            team: q.filled("team"),
            model: q.filled("model"),
            status,
            start: q.filled("start"),
            end: q.filled("end"),
        }
    }

    /// `/spend/logs` parameters: a key given as a hash (64 hex digits) or as `sk-…` is the
    /// key itself, anything else its alias. `scope` narrows an internal user to their own
    /// requests and a team admin to their team's (whatever team the form names).
    fn pairs(&self, scope: Option<(&'static str, &'q str)>) -> Vec<(&'static str, &'q str)> {
        let mut pairs = vec![("limit", ROWS)];
        if let Some(k) = self.key {
            let is_key =
                k.starts_with("sk-") || (k.len() == 64 && k.bytes().all(|b| b.is_ascii_hexdigit()));
            pairs.push((if is_key { "api_key" } else { "key_alias" }, k));
        }
        for (name, value) in [
            ("request_id", self.request_id),
            (
                "team_id",
                self.team
                    .filter(|_| scope.is_none_or(|(n, _)| n != "team_id")),
            ),
            ("model_group", self.model),
            ("status", self.status),
            ("start_date", self.start),
            ("end_date", self.end),
        ] {
            if let Some(v) = value {
                pairs.push((name, v));
            }
        }
        pairs.extend(scope);
        pairs
    }
}

/// The model groups the config serves, for the filter's choices.
fn groups(snap: &Snapshot) -> Vec<String> {
    let mut names: Vec<String> = crate::server::health::deployments(&snap.router)
        .into_iter()
        .map(|d| d.model_name.to_string())
        .collect();
    names.sort();
    names.dedup();
    names
}

/// `GET /ui/logs?request_id=&key=&team=&model=&status=&start=&end=`.
pub(super) async fn page(
    state: &AppState,
    snap: &Snapshot,
    viewer: &Viewer,
    q: &Form,
) -> Result<Markup, ApiError> {
    let f = Filters::of(q);
    let q = query(&f.pairs(viewer.scope_pair()));
    let logs = crate::admin::spend::logs(store(state)?, read(&q)).await?;
    let mut models = groups(snap);
    if let Some(m) = f.model.filter(|m| !models.iter().any(|g| g == m)) {
        models.push(m.to_owned());
    }
    Ok(html! {
        form.filters method="get" action="/ui/logs" {
            label for="request_id" { "Request id" }
            input #request_id name="request_id" value=(f.request_id.unwrap_or_default()) size="30";
            label for="key" { "Key" }
            input #key name="key" value=(f.key.unwrap_or_default()) placeholder="alias or hash" size="16";
            label for="team" { "Team" }
            input #team name="team" value=(f.team.unwrap_or_default()) size="10";
            label for="model" { "Model group" }
            select #model name="model" {
                option value="" { "any" }
                @for m in &models {
                    option value=(m) selected[f.model == Some(m.as_str())] { (m) }
                }
            }
            label for="status" { "Status" }
            select #status name="status" {
                option value="" { "any" }
                @for s in ["success", "failure"] {
                    option value=(s) selected[f.status == Some(s)] { (s) }
                }
            }
            label for="start" { "From (UTC)" }
            input #start type="datetime-local" name="start" value=(f.start.unwrap_or_default());
            label for="end" { "to" }
            input #end type="datetime-local" name="end" value=(f.end.unwrap_or_default());
            button.quiet type="submit" { "Filter" }
            a href="/ui/logs" { "clear" }
        }
        @if logs.is_empty() {
            p.muted { "No requests match." }
        } @else {
            table #logs {
                thead { tr {
                    th { "Started" } th { "Request id" } th { "Status" } th { "Model group" } th { "Deployment" }
                    th { "Key" } th { "Team" } th.num { "Tokens in / out" } th.num { "Spend" } th.num { "Duration" } th.num { "TTFB" } th { "" }
                } }
                tbody {
                    @for l in &logs {
                        @let status = l.status.as_str();
                        tr {
                            td { (or_empty(&l.start_time)) }
                            td.mono { a href={ "/ui/logs?request_id=" (l.request_id) } { (l.request_id) } }
                            td class={ "state-" (status) } { (status) }
                            td { (l.model_group) }
                            td.mono { (or_empty(&l.model_id)) }
                            td.mono { (short(or_empty(&l.api_key))) }
                            td { (or_empty(&l.team_id)) }
                            td.num { (l.prompt_tokens) " / " (l.completion_tokens) }
                            td.num { (usd(l.spend)) }
                            td.num { (millis(Some(l.request_duration_ms))) }
                            td.num { (first_byte(l)) }
                            td { a.detail href={ "/ui/logs/detail?id=" (l.id) } { "detail" } }
                        }
                    }
                }
            }
        }
        p.muted { "From the spend log: requests reach it when the spend writer's batch lands (proxy_batch_write_at). Times are UTC." }
    })
}

/// Milliseconds as the detail shows them.
/// When the client had the answer's first byte: a stream's recorded time; a whole answer's
/// first byte leaves with its last, so its duration (said so). None for a request that failed
/// without a stream.
fn first_byte(l: &SpendLogEntry) -> String {
    if let Some(ms) = l.ttfb_ms {
        return millis(Some(ms as f64));
    }
    if l.status == SpendStatus::Success {
        return format!("{} (whole answer)", millis(Some(l.request_duration_ms)));
    }
    "—".to_owned()
}

fn millis(v: Option<f64>) -> String {
    match v {
        Some(ms) if ms < 10.0 => format!("{ms:.2} ms"),
        Some(ms) => format!("{ms:.1} ms"),
        None => "—".to_owned(),
    }
}

/// Prompt or answer JSON, indented for reading.
fn pretty(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => serde_json::to_string_pretty(other).unwrap_or_default(),
    }
}

/// `GET /ui/logs/detail?id=`: one spend log (an internal user's own only; another's is "not
/// found", as if it did not exist).
pub(super) async fn detail(
    state: &AppState,
    viewer: &Viewer,
    q: &Form,
) -> Result<Markup, ApiError> {
    let id = q.filled("id").unwrap_or_default();
    let not_found = || ApiError::NotFound {
        what: "request",
        id: id.chars().take(80).collect(),
    };
    if id.is_empty() {
        return Err(not_found());
    }
    let mut pairs = vec![("id", id), ("limit", "1")];
    if let Some(p) = viewer.scope_pair() {
        pairs.push(p);
    }
    let found = crate::admin::spend::logs(store(state)?, read(&query(&pairs))).await?;
    let l = found.first().ok_or_else(not_found)?;
    let status = l.status.as_str();
    let requested = &l.requested_model;
    let served = &l.model_group;
    let attempts = &l.attempts;
    let facts: [(&str, String); 13] = [
        ("Started", or_empty(&l.start_time).to_owned()),
        ("Ended", or_empty(&l.end_time).to_owned()),
        ("Key", or_empty(&l.api_key).to_owned()),
        ("Team", or_empty(&l.team_id).to_owned()),
        ("User", or_empty(&l.user).to_owned()),
        ("End user", or_empty(&l.end_user).to_owned()),
        ("Deployment", or_empty(&l.model_id).to_owned()),
        ("Provider", or_empty(&l.custom_llm_provider).to_owned()),
        (
            "Error (status and code)",
            l.error.clone().unwrap_or_else(|| "—".to_owned()),
        ),
        ("Duration", millis(Some(l.request_duration_ms))),
        ("Time to first byte", first_byte(l)),
        ("sluice's overhead", millis(l.overhead_ms)),
        (
            "Cache hit",
            if l.cache_hit { "yes" } else { "no" }.to_owned(),
        ),
    ];
    Ok(html! {
        p { a href="/ui/logs" { "← all requests" } }
        h2 { "Request " span.mono #request-id { (l.request_id) } " · " span #status class={ "state-" (status) } { (status) } }
        div.cards {
            div.card { div.label { "Model group asked for" } div.value #requested { (requested) } }
            div.card { div.label { "Served by" } div.value #served { (served) }
                @if requested != served { div.muted { "fallback" } } }
            div.card { div.label { "Retries / fallbacks / hedges" } div.value #routing {
                (l.retries) " / " (l.fallbacks) " / " (l.hedges) } }
            div.card { div.label { "Spend" } div.value #spend { (usd(l.spend)) }
                @if l.saved_spend > 0.0 { div.muted { (usd(l.saved_spend)) " saved by the cache" } } }
        }
        table.facts #facts {
            tbody {
                @for (name, value) in &facts {
                    tr { th { (name) } td.mono { (value) } }
                }
                tr { th { "Tokens" } td #tokens {
                    (l.prompt_tokens) " in (" (l.cached_tokens) " cached) · "
                    (l.completion_tokens) " out (" (l.reasoning_tokens) " reasoning)"
                } }
            }
        }
        h2 { "Attempts" }
        @if attempts.is_empty() && !or_empty(&l.model_id).is_empty() && !l.cache_hit {
            // The usual request: one attempt that answered (the spend log keeps no list).
            table #attempts {
                thead { tr { th { "#" } th { "Deployment" } th { "Model group" } th { "Provider" } th { "Kind" } th.num { "Took (less sluice's overhead)" } th { "Ended" } } }
                tbody { tr {
                    td.num { "1" }
                    td.mono { (or_empty(&l.model_id)) }
                    td { (served) }
                    td { (or_empty(&l.custom_llm_provider)) }
                    td { "attempt" }
                    td.num { (upstream_time(l)) }
                    td.state-success { "ok" }
                } }
            }
        } @else if attempts.is_empty() {
            p.muted { "No upstream call (answered from the cache, or refused before one)." }
        } @else {
            table #attempts {
                thead { tr { th { "#" } th { "Deployment" } th { "Model group" } th { "Provider" } th { "Kind" } th.num { "Started after" } th.num { "Took" } th { "Ended" } } }
                tbody {
                    @for (i, a) in attempts.iter().enumerate() {
                        @let result = &a.result;
                        tr {
                            td.num { (i + 1) }
                            td.mono { (a.model_id) }
                            td { (a.model_group) }
                            td { (a.custom_llm_provider) }
                            td { @if a.hedge { "hedge" } @else { "attempt" } }
                            td.num { (millis(Some(a.start_ms))) }
                            td.num { (millis(a.duration_ms)) }
                            td class={ "state-" (if result == "ok" { "success" } else { "failure" }) } { (result) }
                        }
                    }
                }
            }
        }
        h2 { "Prompt" }
        @match &l.messages {
            None => p.muted #no-content { "Not kept: prompts and answers are stored only with general_settings.store_prompts_in_spend_logs." },
            Some(messages) => {
                pre.answer #messages { (pretty(messages)) }
                h2 { "Answer" }
                pre.answer #response { (pretty(l.response.as_ref().unwrap_or(&Value::Null))) }
            }
        }
    })
}

/// The upstream's share of a request: its duration less sluice's overhead, as the detail shows
/// for the one attempt of a plain request.
fn upstream_time(l: &SpendLogEntry) -> String {
    match l.overhead_ms {
        Some(overhead) => format!("{:.1} ms", (l.request_duration_ms - overhead).max(0.0)),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_requests_attempt_took_its_time_less_the_overhead() {
        let at = time::macros::datetime!(2026-03-01 12:00 UTC);
        let mut row = sluice_store::SpendLog::new("r".into(), "m".into(), at);
        row.end_time = at + time::Duration::microseconds(12_500);
        row.overhead_us = Some(250);
        assert_eq!(upstream_time(&SpendLogEntry::of(&row)), "12.2 ms");
        row.overhead_us = None;
        assert_eq!(
            upstream_time(&SpendLogEntry::of(&row)),
            "",
            "no overhead recorded"
        );
    }

    #[test]
    fn filters_name_a_key_by_hash_or_alias_and_keep_the_user() {
        let q = Form::parse(b"key=app-one&team=t1&status=failure&start=2026-03-01T10:00&model=");
        let f = Filters::of(&q);
        assert_eq!(
            f.pairs(Some(("user_id", "ana"))),
            [
                ("limit", ROWS),
                ("key_alias", "app-one"),
                ("team_id", "t1"),
                ("status", "failure"),
                ("start_date", "2026-03-01T10:00"),
                ("user_id", "ana"),
            ]
        );
        // A team admin's own team, whatever the form names.
        assert_eq!(
            f.pairs(Some(("team_id", "t2")))
                .iter()
                .filter(|(n, _)| *n == "team_id")
                .collect::<Vec<_>>(),
            [&("team_id", "t2")]
        );
        let hash = "ab".repeat(32);
        let raw = format!("key={hash}&failed=1");
        let q = Form::parse(raw.as_bytes());
        let f = Filters::of(&q);
        assert_eq!(
            f.pairs(None),
            [
                ("limit", ROWS),
                ("api_key", hash.as_str()),
                ("status", "failure")
            ]
        );
    }
}
