//! Request logs from the spend log (`/spend/logs`), newest first, narrowed by request id, key
//! (hash or alias), team, model group, status and dates (the store's SQL does the filtering),
//! a page at a time by keyset (the next page is the rows older than this page's last, so a
//! deep page costs what the first does); and one request's detail: what the client got (its
//! status, error type and message), every attempt's error, routing, timings, tokens, cost, and
//! the prompt and answer when `store_prompts_in_spend_logs` keeps them. Keys, teams and users
//! are shown by name (`names`). An internal user sees only the requests made with their keys,
//! whatever the filters say.

use maud::{html, Markup};
use serde_json::Value;

use super::names::{Names, Wanted};
use super::{or_empty, query, read, store, usd};
use crate::admin::answers::spend::SpendLogEntry;
use crate::console::{Form, Viewer};
use crate::server::{AppState, Snapshot};
use sluice_core::error::ApiError;
use sluice_store::{LogPosition, SpendStatus};

/// Rows a page shows.
const ROWS: usize = 200;
/// Rows read per page: one more than shown, to know whether there is a next page.
const READ: &str = "201";

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

/// Which page: the newest, or the one older (`before`) or newer (`after`) than a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side<'q> {
    Newest,
    Before(&'q str),
    After(&'q str),
}

impl<'q> Side<'q> {
    fn of(q: &'q Form) -> Self {
        match (q.filled("before"), q.filled("after")) {
            (Some(c), _) => Self::Before(c),
            (None, Some(c)) => Self::After(c),
            (None, None) => Self::Newest,
        }
    }

    fn pair(self) -> Option<(&'static str, &'q str)> {
        match self {
            Self::Newest => None,
            Self::Before(c) => Some(("before", c)),
            Self::After(c) => Some(("after", c)),
        }
    }
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
        let mut pairs = vec![("limit", READ)];
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

    /// The page's own query with `side`: the filters as the form sent them, so that a page
    /// link keeps them.
    fn link(&self, side: Option<(&'static str, &str)>) -> String {
        let mut pairs: Vec<(&str, &str)> = [
            ("request_id", self.request_id),
            ("key", self.key),
            ("team", self.team),
            ("model", self.model),
            ("status", self.status),
            ("start", self.start),
            ("end", self.end),
        ]
        .into_iter()
        .filter_map(|(n, v)| v.map(|v| (n, v)))
        .collect();
        pairs.extend(side);
        format!("/ui/logs?{}", query(&pairs))
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

/// A row's place in the log, for the page links around it.
fn position(l: &SpendLogEntry) -> Option<String> {
    let at = l.start_time.as_deref()?;
    let t = time::OffsetDateTime::parse(at, &time::format_description::well_known::Rfc3339).ok()?;
    let start_ms = i64::try_from(t.unix_timestamp_nanos() / 1_000_000).ok()?;
    Some(
        LogPosition {
            start_ms,
            id: l.id.clone(),
        }
        .to_text(),
    )
}

/// The links to the newer and the older page, when there is one.
fn page_links(f: &Filters<'_>, side: Side<'_>, logs: &[SpendLogEntry], more: bool) -> Markup {
    // Read past `before`, the page has newer rows above it; past `after`, older ones below.
    let newer = match side {
        Side::Newest => false,
        Side::Before(_) => true,
        Side::After(_) => more,
    };
    let older = match side {
        Side::After(_) => true,
        Side::Newest | Side::Before(_) => more,
    };
    let prev = logs
        .first()
        .and_then(position)
        .filter(|_| newer)
        .map(|p| f.link(Some(("after", &p))));
    let next = logs
        .last()
        .and_then(position)
        .filter(|_| older)
        .map(|p| f.link(Some(("before", &p))));
    if prev.is_none() && next.is_none() && side == Side::Newest {
        return html! {};
    }
    html! {
        nav.pages {
            @if let Some(href) = &prev { a #newer href=(href) { "← newer" } }
            @if side != Side::Newest { a #newest href=(f.link(None)) { "newest" } }
            @if let Some(href) = &next { a #older href=(href) { "older →" } }
        }
    }
}

/// `GET /ui/logs?request_id=&key=&team=&model=&status=&start=&end=&before=&after=`.
pub(super) async fn page(
    state: &AppState,
    snap: &Snapshot,
    viewer: &Viewer,
    q: &Form,
) -> Result<Markup, ApiError> {
    let f = Filters::of(q);
    let side = Side::of(q);
    let mut pairs = f.pairs(viewer.scope_pair());
    pairs.extend(side.pair());
    let mut logs = crate::admin::spend::logs(store(state)?, read(&query(&pairs))).await?;
    // One row more than shown was read: whether there is a page beyond. Past `after` the
    // rows run newest first, so the extra one is the first (the newest).
    let more = logs.len() > ROWS;
    if more {
        match side {
            Side::After(_) => {
                logs.remove(0);
            }
            Side::Newest | Side::Before(_) => logs.truncate(ROWS),
        }
    }
    let mut wanted = Wanted::default();
    for l in &logs {
        wanted.key(or_empty(&l.api_key)).team(or_empty(&l.team_id));
    }
    let names = Names::of(state, &wanted).await;
    let mut models = groups(snap);
    if let Some(m) = f.model.filter(|m| !models.iter().any(|g| g == m)) {
        models.push(m.to_owned());
    }
    // A day as the date inputs show it: the first ten characters of what was sent.
    let day = |v: Option<&str>| v.and_then(|v| v.get(..10)).unwrap_or_default().to_owned();
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
            input #start type="date" name="start" value=(day(f.start));
            label for="end" { "to" }
            input #end type="date" name="end" value=(day(f.end));
            button.quiet type="submit" { "Filter" }
            a href="/ui/logs" { "clear" }
        }
        @if logs.is_empty() {
            p.muted { "No requests match." }
        } @else {
            table #logs .compact {
                thead { tr {
                    th { "Started (UTC)" } th { "Request" } th { "Status" } th { "Model group" } th { "Deployment" }
                    th { "Key" } th { "Team" } th.num { "Tokens in / out" } th.num { "Spend" } th.num { "Duration" } th.num { "TTFB" } th { "" }
                } }
                tbody {
                    @for l in &logs {
                        @let status = l.status.as_str();
                        @let started = or_empty(&l.start_time);
                        tr {
                            td.nowrap title=(started) { (when(started)) }
                            td.mono.nowrap { a href={ "/ui/logs?" (query(&[("request_id", &l.request_id)])) } title=(l.request_id) { (brief(&l.request_id)) } }
                            td class={ "state-" (status) } { (status) @if let Some(code) = l.http_status { "\u{a0}" span.muted { (code) } } }
                            td { (l.model_group) }
                            td.mono { (or_empty(&l.model_id)) }
                            td { (names.key_link(or_empty(&l.api_key))) }
                            td { (names.team_link(or_empty(&l.team_id), viewer)) }
                            td.num { (l.prompt_tokens) " / " (l.completion_tokens) }
                            td.num { (usd(l.spend)) }
                            td.num.nowrap { (millis(Some(l.request_duration_ms))) }
                            td.num.nowrap { (first_byte(l)) }
                            td { a.detail href={ "/ui/logs/detail?id=" (l.id) } { "detail" } }
                        }
                    }
                }
            }
            (page_links(&f, side, &logs, more))
        }
        p.muted { "From the spend log: requests reach it when the spend writer's batch lands (proxy_batch_write_at). Times are UTC; a whole answer's first byte leaves with its last (its TTFB is its duration)." }
    })
}

/// A start time on one line: `2026-03-01 12:00:05` of `2026-03-01T12:00:05.123Z`.
fn when(iso: &str) -> String {
    iso.get(..19).unwrap_or(iso).replacen('T', " ", 1)
}

/// A request id shortened for a table (the whole id is the cell's title).
fn brief(id: &str) -> String {
    match id.char_indices().nth(8) {
        Some((at, _)) => format!("{}…", &id[..at]),
        None => id.to_owned(),
    }
}

/// When the client had the answer's first byte: a stream's recorded time; a whole answer's
/// first byte (an error's too) leaves with its last, so its duration (said so).
fn first_byte(l: &SpendLogEntry) -> String {
    match l.ttfb_ms {
        Some(ms) => millis(Some(ms as f64)),
        None => format!("{} (whole answer)", millis(Some(l.request_duration_ms))),
    }
}

/// Milliseconds as the pages show them.
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
    let (key, team, user) = (
        or_empty(&l.api_key),
        or_empty(&l.team_id),
        or_empty(&l.user),
    );
    let names = Names::of(state, Wanted::default().key(key).team(team).user(user)).await;
    let status = l.status.as_str();
    let ok = l.status == SpendStatus::Success;
    let requested = &l.requested_model;
    // Which deployment answered: none when the request failed (the spend log's deployment is
    // then the last one tried), or was answered from the cache or refused before a call.
    let answered = or_empty(&l.model_id);
    let answered = Some(answered).filter(|d| ok && !d.is_empty() && !l.cache_hit);
    let served = if ok { l.model_group.as_str() } else { "none" };
    let attempts = &l.attempts;
    let facts: [(&str, String); 8] = [
        ("Started", or_empty(&l.start_time).to_owned()),
        ("Ended", or_empty(&l.end_time).to_owned()),
        ("End user", or_empty(&l.end_user).to_owned()),
        ("Provider", or_empty(&l.custom_llm_provider).to_owned()),
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
            div.card { div.label { "HTTP status" } div.value #http-status { (http_status(l)) } }
            div.card { div.label { "Model group asked for" } div.value #requested { (requested) } }
            div.card { div.label { "Served by (model group)" } div.value #served { (served) }
                @if ok && requested != &l.model_group { div.muted { "fallback" } } }
            div.card { div.label { "Deployment that answered" } div.value.mono #deployment { (answered.unwrap_or("none")) }
                @if l.cache_hit { div.muted { "answered from the cache" } }
                @else if answered.is_none() && !answered_nothing(l) { div.muted { "last tried: " (or_empty(&l.model_id)) } } }
            div.card { div.label { "Duration / first byte" } div.value #duration { (millis(Some(l.request_duration_ms))) }
                div.muted { "first byte: " (first_byte(l)) } }
            div.card { div.label { "Retries / fallbacks / hedges" } div.value #routing {
                (l.retries) " / " (l.fallbacks) " / " (l.hedges) } }
            div.card { div.label { "Spend" } div.value #spend { (usd(l.spend)) }
                @if l.saved_spend > 0.0 { div.muted { (usd(l.saved_spend)) " saved by the cache" } } }
        }
        @if !ok {
            h2 { "What the client got" }
            table.facts #error {
                tbody {
                    tr { th { "Status and code" } td.mono #error-code { (l.error.as_deref().unwrap_or("—")) } }
                    tr { th { "Error type" } td.mono #error-type { (l.error_type.as_deref().unwrap_or("—")) } }
                    tr { th { "Message" } td #error-message { (l.error_message.as_deref().unwrap_or("— (not kept for this request)")) } }
                }
            }
        }
        table.facts #facts {
            tbody {
                tr { th { "Key" } td #key { (names.key_link(key)) } }
                tr { th { "Team" } td #team { (names.team_link(team, viewer)) } }
                tr { th { "User" } td #user { (names.user_link(user, viewer)) } }
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
        @if attempts.is_empty() && answered.is_some() {
            // The usual request: one attempt that answered (the spend log keeps no list).
            table #attempts {
                thead { tr { th { "#" } th { "Deployment" } th { "Model group" } th { "Provider" } th { "Kind" } th.num { "Took (less sluice's overhead)" } th { "Ended" } } }
                tbody { tr {
                    td.num { "1" }
                    td.mono { (answered.unwrap_or_default()) }
                    td { (l.model_group) }
                    td { (or_empty(&l.custom_llm_provider)) }
                    td { "attempt" }
                    td.num { (upstream_time(l)) }
                    td.state-success { "ok" }
                } }
            }
        } @else if attempts.is_empty() {
            p.muted #no-attempts { "No upstream call (answered from the cache, or refused before one)." }
        } @else {
            table #attempts {
                thead { tr { th { "#" } th { "Deployment" } th { "Model group" } th { "Provider" } th { "Kind" } th.num { "Started after" } th.num { "Took" } th { "Ended" } th { "Status" } th { "Error" } } }
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
                            td.num { @if let Some(s) = a.status { (s) } }
                            td.attempt-error { (a.message.as_deref().unwrap_or_default()) }
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

/// The HTTP status the client got: as kept, else the first word of the error (rows written
/// before the status was kept), else "200" for a success of that time.
fn http_status(l: &SpendLogEntry) -> String {
    if let Some(s) = l.http_status {
        return s.to_string();
    }
    match (&l.error, l.status) {
        (Some(e), _) => e.split(' ').next().unwrap_or_default().to_owned(),
        (None, SpendStatus::Success) => "200".to_owned(),
        (None, SpendStatus::Failure) => "—".to_owned(),
    }
}

/// A request no deployment was asked to answer: refused before a call, or from the cache.
fn answered_nothing(l: &SpendLogEntry) -> bool {
    l.model_id.is_none() || l.cache_hit
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
                ("limit", READ),
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
                ("limit", READ),
                ("api_key", hash.as_str()),
                ("status", "failure")
            ]
        );
    }

    #[test]
    fn page_links_keep_the_filters_and_go_past_the_edge_rows() {
        let q = Form::parse(b"model=m1&status=failure&start=2026-03-01&before=1.x");
        let f = Filters::of(&q);
        let at = time::macros::datetime!(2026-03-01 12:00 UTC);
        let row = |id: &str, ms: i64| {
            let mut r = sluice_store::SpendLog::new("r".into(), "m1".into(), at);
            r.id = id.into();
            r.start_time = at + time::Duration::milliseconds(ms);
            SpendLogEntry::of(&r)
        };
        let logs = [row("b", 5), row("a", 2)];
        let html = page_links(&f, Side::of(&q), &logs, true).into_string();
        let start = at.unix_timestamp() * 1000;
        let keep = "model=m1&amp;status=failure&amp;start=2026-03-01";
        assert!(
            html.contains(&format!(
                r#"id="newer" href="/ui/logs?{keep}&amp;after={}.b""#,
                start + 5
            )),
            "{html}"
        );
        assert!(
            html.contains(&format!(
                r#"id="older" href="/ui/logs?{keep}&amp;before={}.a""#,
                start + 2
            )),
            "{html}"
        );
        // The newest page has no newer; a page with nothing beyond has no older.
        let html = page_links(&f, Side::Newest, &logs, false).into_string();
        assert!(!html.contains("newer") && !html.contains("older"), "{html}");
    }

    #[test]
    fn rows_are_compact() {
        assert_eq!(when("2026-03-01T12:00:05.123Z"), "2026-03-01 12:00:05");
        assert_eq!(brief("0b7e6c1a-9f2d-4c1e"), "0b7e6c1a…");
        assert_eq!(brief("short"), "short");
    }
}
