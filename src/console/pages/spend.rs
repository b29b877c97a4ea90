//! Spend by team, model group and key over a period, summed from the daily rollups the spend
//! writer keeps (what `/spend/daily` answers): the same rows the spend log adds up to, drawn
//! per day as charts (by team, model group, key, and provider: the rollups have no provider,
//! so a group's spend goes to the providers of its deployments in the running config) and
//! summed in tables; and, for a viewer who sees all spend, spend by request tag
//! (`/spend/tags`), by user and by end user (`/spend/groups`). The period is the last 1 to 90
//! days, or a range of dates (from, to). Keys, teams and users are shown by name (`names`).
//! An internal user sees their team's rows (their own keys' when they have no team).

use std::collections::{BTreeMap, HashSet};

use maud::{html, Markup};

use super::chart::{daily_bars, Daily};
use super::names::{Names, Wanted};
use super::{query, read, store, team_of, usd};
use crate::admin::answers::spend::DailySpendRow;
use crate::console::{Form, Viewer};
use crate::server::{AppState, Snapshot};
use sluice_core::error::ApiError;

/// The periods offered, in days.
const PERIODS: &[(&str, &str)] = &[
    ("1", "today"),
    ("7", "7 days"),
    ("30", "30 days"),
    ("90", "90 days"),
];

#[derive(Default)]
struct Sum {
    requests: u64,
    failed: u64,
    tokens: u64,
    spend: f64,
}

/// Most days a period spans.
const MAX_DAYS: i64 = 366;

/// The period a query asks for: `from` and `to` (`YYYY-MM-DD`, both included; either alone
/// runs to today or from a week before `to`), else `days` (1 to 366, default 7) up to today.
/// Its length in days, first and last day (UTC), and whether it is a range of dates.
fn period(q: &Form) -> (i64, time::Date, time::Date, bool) {
    let date = |name: &str| {
        q.filled(name).and_then(|d| {
            time::Date::parse(d, time::macros::format_description!("[year]-[month]-[day]")).ok()
        })
    };
    let today = time::OffsetDateTime::now_utc().date();
    let (from, to) = (date("from"), date("to"));
    if from.is_some() || to.is_some() {
        let end = to.unwrap_or(today);
        let start = from.unwrap_or(end - time::Duration::days(6)).min(end);
        let start = start.max(end - time::Duration::days(MAX_DAYS - 1));
        return ((end - start).whole_days() + 1, start, end, true);
    }
    let days: i64 = q
        .filled("days")
        .and_then(|d| d.parse().ok())
        .filter(|d| (1..=MAX_DAYS).contains(d))
        .unwrap_or(7);
    (days, today - time::Duration::days(days - 1), today, false)
}

/// The period as a query string, for the CSV link.
fn period_query(days: i64, start: time::Date, end: time::Date, range: bool) -> String {
    if range {
        query(&[("from", &start.to_string()), ("to", &end.to_string())])
    } else {
        query(&[("days", &days.to_string())])
    }
}

/// The daily rollup rows of `start..=end` the viewer may see.
async fn rows(
    state: &AppState,
    viewer: &Viewer,
    start: time::Date,
    end: time::Date,
) -> Result<Vec<DailySpendRow>, ApiError> {
    let q = query(&[
        ("start_date", &start.to_string()),
        ("end_date", &end.to_string()),
    ]);
    let rows = crate::admin::spend::daily(store(state)?, read(&q)).await?;
    let scope = Scope::of(state, viewer).await?;
    Ok(rows.into_iter().filter(|r| scope.includes(r)).collect())
}

/// Columns of the CSV export (`/spend/daily`'s names, but `day` for its `date`), then the
/// names of the key (its alias and `sk-...abcd`) and of the team.
const CSV_COLUMNS: [&str; 12] = [
    "day",
    "team_id",
    "api_key",
    "model_group",
    "requests",
    "failed_requests",
    "prompt_tokens",
    "completion_tokens",
    "spend",
    "key_alias",
    "key_name",
    "team_alias",
];

/// One row's cells, in [`CSV_COLUMNS`]' order; the spend as its JSON answer writes it.
fn csv_row(r: &DailySpendRow, names: &Names) -> [String; 12] {
    let (alias, key_name) = names.key_parts(&r.api_key);
    [
        csv_cell(&r.date),
        csv_cell(&r.team_id),
        csv_cell(&r.api_key),
        csv_cell(&r.model_group),
        r.requests.to_string(),
        r.failed_requests.to_string(),
        r.prompt_tokens.to_string(),
        r.completion_tokens.to_string(),
        super::figure(Some(r.spend)),
        csv_cell(alias),
        csv_cell(key_name),
        csv_cell(names.team_alias(&r.team_id)),
    ]
}

/// The names of the keys and teams `rows` name: one read.
async fn names_of(state: &AppState, rows: &[DailySpendRow]) -> Names {
    let mut wanted = Wanted::default();
    for r in rows {
        wanted.key(&r.api_key).team(&r.team_id);
    }
    Names::of(state, &wanted).await
}

/// `GET /ui/spend.csv?days=` (or `?from=&to=`): the rows the page sums, one per day, team,
/// key and model group.
pub(super) async fn csv(state: &AppState, viewer: &Viewer, q: &Form) -> Result<String, ApiError> {
    let (_, start, end, _) = period(q);
    let rows = rows(state, viewer, start, end).await?;
    let names = names_of(state, &rows).await;
    let mut out = CSV_COLUMNS.join(",");
    out.push('\n');
    for r in &rows {
        out.push_str(&csv_row(r, &names).join(","));
        out.push('\n');
    }
    Ok(out)
}

/// A text cell: quoted when it holds a comma, quote or line break (RFC 4180), and a leading
/// `=`, `+`, `-` or `@` escaped so that a spreadsheet does not run it as a formula.
fn csv_cell(s: &str) -> String {
    let s = if s.starts_with(['=', '+', '-', '@']) {
        format!("'{s}")
    } else {
        s.to_owned()
    };
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s
    }
}

/// Each model group's provider(s) in the running config (`openai`, `azure + openai` for a
/// group over both); a group no longer configured is "(not configured)".
fn providers(snap: &Snapshot) -> BTreeMap<String, String> {
    let mut by: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for d in crate::server::health::deployments(&snap.router) {
        let list = by.entry(d.model_name.to_owned()).or_default();
        if !list.contains(&d.provider) {
            list.push(d.provider);
        }
    }
    by.into_iter()
        .map(|(group, mut list)| {
            list.sort_unstable();
            (group, list.join(" + "))
        })
        .collect()
}

/// The rows' spend per day, broken down four ways: team, model group, key, provider.
fn daily(
    rows: &[DailySpendRow],
    providers: &BTreeMap<String, String>,
    names: &Names,
) -> [Daily; 4] {
    let mut by: [Daily; 4] = Default::default();
    for r in rows {
        let provider = providers
            .get(&r.model_group)
            .cloned()
            .unwrap_or_else(|| "(not configured)".to_owned());
        let names = [
            team_name(&r.team_id, names),
            r.model_group.clone(),
            names.key(&r.api_key),
            provider,
        ];
        for (map, name) in by.iter_mut().zip(names) {
            *map.entry(name)
                .or_default()
                .entry(r.date.clone())
                .or_default() += r.spend;
        }
    }
    by
}

fn team_name(t: &str, names: &Names) -> String {
    if t.is_empty() {
        "(no team)".into()
    } else {
        names.team(t)
    }
}

/// The spend by tag, by user and by end user of the period (viewers who see all spend).
struct Usage {
    tags: Vec<sluice_store::TagSpend>,
    users: Vec<sluice_store::GroupSpend>,
    end_users: Vec<sluice_store::GroupSpend>,
}

impl Usage {
    async fn of(state: &AppState, start: time::Date, end: time::Date) -> Result<Self, ApiError> {
        let (start, end) = (start.to_string(), end.to_string());
        let range = [("start_date", start.as_str()), ("end_date", end.as_str())];
        let s = store(state)?;
        let by = |group: &'static str| {
            let q = query(&[range[0], range[1], ("group_by", group)]);
            async move { crate::admin::spend::groups(s, read(&q)).await }
        };
        Ok(Self {
            tags: crate::admin::spend::tags(s, read(&query(&range))).await?,
            users: by("user").await?,
            end_users: by("end_user").await?,
        })
    }
}

/// `GET /ui/spend?days=` or `?from=&to=`.
pub(super) async fn page(
    state: &AppState,
    snap: &Snapshot,
    viewer: &Viewer,
    q: &Form,
) -> Result<Markup, ApiError> {
    let (days, start, end, range) = period(q);
    let rows = rows(state, viewer, start, end).await?;
    // Tags, users and end users cross teams: only a viewer who sees all spend sees them.
    let usage = match viewer.session.role.sees_all() {
        true => Some(Usage::of(state, start, end).await?),
        false => None,
    };
    let mut wanted = Wanted::default();
    for r in &rows {
        wanted.key(&r.api_key).team(&r.team_id);
    }
    for u in usage.iter().flat_map(|u| &u.users) {
        wanted.user(&u.name);
    }
    let names = Names::of(state, &wanted).await;
    let dates: Vec<String> = (0..days)
        .map(|i| (start + time::Duration::days(i)).to_string())
        .collect();
    let [by_team, by_model, by_key, by_provider] = daily(&rows, &providers(snap), &names);
    let mut by: [BTreeMap<String, Sum>; 3] = Default::default();
    let mut total = Sum::default();
    for r in &rows {
        for (map, name) in by.iter_mut().zip([&r.team_id, &r.model_group, &r.api_key]) {
            add(map.entry(name.clone()).or_default(), r);
        }
        add(&mut total, r);
    }
    let [teams, models, keys] = &by;
    let csv = period_query(days, start, end, range);
    Ok(html! {
        form.filters method="get" action="/ui/spend" {
            label for="days" { "Period" }
            select #days name="days" {
                @for (value, label) in PERIODS {
                    option value=(value) selected[!range && value.parse::<i64>().ok() == Some(days)] { (label) }
                }
            }
            button.quiet type="submit" { "Show" }
        }
        form.filters method="get" action="/ui/spend" {
            label for="from" { "or from" }
            input #from type="date" name="from" value=(if range { start.to_string() } else { String::new() });
            label for="to" { "to" }
            input #to type="date" name="to" value=(if range { end.to_string() } else { String::new() });
            button.quiet #range type="submit" { "Show dates" }
        }
        p.muted #period { (start.to_string()) " to " (end.to_string()) " (UTC) · " (usd(total.spend)) " · " (total.requests) " requests · " a #csv href={ "/ui/spend.csv?" (csv) } { "CSV" } }
        div.charts #charts {
            div { h2 { "Daily spend by team" } (daily_bars("Daily spend by team", &dates, &by_team)) }
            div { h2 { "Daily spend by model group" } (daily_bars("Daily spend by model group", &dates, &by_model)) }
            div { h2 { "Daily spend by key" } (daily_bars("Daily spend by key", &dates, &by_key)) }
            div { h2 { "Daily spend by provider" } (daily_bars("Daily spend by provider", &dates, &by_provider)) }
        }
        h2 { "By team" } (table("Team", teams, |t| html! { @if t.is_empty() { "(no team)" } @else { (names.team_link(t, viewer)) } }))
        h2 { "By model group" } (table("Model group", models, |m| html! { (m) }))
        h2 { "By key" } (table("Key", keys, |k| names.key_link(k)))
        @if let Some(u) = &usage {
            h2 { "By tag" }
            p.muted { "A request counts under each of its tags (the request's, its key's and its team's); untagged requests are in no row." }
            table #tags {
                thead { tr { th { "Tag" } th.num { "Spend" } th.num { "Requests" } th.num { "Tokens" } } }
                tbody {
                    @for t in &u.tags {
                        tr {
                            td { (t.tag) }
                            td.num { (usd(t.spend)) }
                            td.num { (t.requests) }
                            td.num { (t.total_tokens) }
                        }
                    }
                }
            }
            h2 { "By user" }
            p.muted { "The user of the key that made each request." }
            (groups_table("users", "User", &u.users, |id| names.user_link(id, viewer)))
            h2 { "By end user" }
            p.muted { "The request's own user field (customers)." }
            (groups_table("end-users", "End user", &u.end_users, |id| html! {
                a href={ "/ui/customers/edit?" (query(&[("user_id", id)])) } { (id) }
            }))
        }
    })
}

/// A table of [`sluice_store::GroupSpend`] rows, each named by `name` ("(none)" for rows
/// without one).
fn groups_table(
    id: &str,
    what: &str,
    rows: &[sluice_store::GroupSpend],
    name: impl Fn(&str) -> Markup,
) -> Markup {
    html! {
        table id=(id) {
            thead { tr { th { (what) } th.num { "Spend" } th.num { "Requests" } th.num { "Tokens" } } }
            tbody {
                @for g in rows {
                    tr {
                        td { @if g.name.is_empty() { span.muted { "(none)" } } @else { (name(&g.name)) } }
                        td.num { (usd(g.spend)) }
                        td.num { (g.requests) }
                        td.num { (g.total_tokens) }
                    }
                }
            }
        }
        @if rows.is_empty() { p.muted { "No requests in the period." } }
    }
}

fn add(sum: &mut Sum, r: &DailySpendRow) {
    sum.requests += r.requests;
    sum.failed += r.failed_requests;
    sum.tokens += r.prompt_tokens + r.completion_tokens;
    sum.spend += r.spend;
}

fn table(what: &str, rows: &BTreeMap<String, Sum>, name: impl Fn(&str) -> Markup) -> Markup {
    let mut sorted: Vec<_> = rows.iter().collect();
    sorted.sort_by(|a, b| b.1.spend.total_cmp(&a.1.spend));
    html! {
        table {
            thead { tr { th { (what) } th.num { "Spend" } th.num { "Requests" } th.num { "Failed" } th.num { "Tokens" } } }
            tbody {
                @for (k, s) in sorted {
                    tr { td { (name(k)) } td.num { (usd(s.spend)) } td.num { (s.requests) } td.num { (s.failed) } td.num { (s.tokens) } }
                }
            }
        }
    }
}

/// Which rollup rows a viewer may see.
enum Scope {
    All,
    Team(String),
    Keys(HashSet<String>),
}

impl Scope {
    async fn of(state: &AppState, viewer: &Viewer) -> Result<Self, ApiError> {
        if viewer.session.role.sees_all() {
            return Ok(Self::All);
        }
        if let Some(team) = team_of(state, &viewer.session.user).await? {
            return Ok(Self::Team(team));
        }
        let q = query(&[("user_id", &viewer.session.user), ("size", "1000")]);
        let list = crate::admin::keys::list(store(state)?, read(&q)).await?;
        Ok(Self::Keys(
            list.keys.iter().map(|k| k.token().to_owned()).collect(),
        ))
    }

    fn includes(&self, r: &DailySpendRow) -> bool {
        match self {
            Self::All => true,
            Self::Team(t) => r.team_id == *t,
            Self::Keys(keys) => keys.contains(&r.api_key),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_cells_are_quoted_and_never_formulas() {
        assert_eq!(csv_cell("team-a"), "team-a");
        assert_eq!(csv_cell("a,b"), "\"a,b\"");
        assert_eq!(csv_cell("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_cell("=HYPERLINK(1)"), "'=HYPERLINK(1)");
        assert_eq!(csv_cell("-1,2"), "\"'-1,2\"");
    }
}
