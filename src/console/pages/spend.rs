//! Spend by team, model group and key over a period, summed from the daily rollups the spend
//! writer keeps (what `/spend/daily` answers): the same rows the spend log adds up to, drawn
//! per day as charts (by team, model group, key, and provider: the rollups have no provider,
//! so a group's spend goes to the providers of its deployments in the running config) and
//! summed in tables; and, for a viewer who sees all spend, spend by request tag
//! (`/spend/tags`). An internal user sees their team's rows (their own keys' when they have
//! no team).

use std::collections::{BTreeMap, HashSet};

use maud::{html, Markup};

use super::chart::{daily_bars, Daily};
use super::{query, read, short, store, team_of, usd};
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

/// The period a query asks for (`days`, 1 to 366, default 7): its first and last day (UTC).
fn period(q: &Form) -> (i64, time::Date, time::Date) {
    let days: i64 = q
        .filled("days")
        .and_then(|d| d.parse().ok())
        .filter(|d| (1..=366).contains(d))
        .unwrap_or(7);
    let end = time::OffsetDateTime::now_utc().date();
    (days, end - time::Duration::days(days - 1), end)
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

/// Columns of the CSV export (`/spend/daily`'s names, but `day` for its `date`).
const CSV_COLUMNS: [&str; 9] = [
    "day",
    "team_id",
    "api_key",
    "model_group",
    "requests",
    "failed_requests",
    "prompt_tokens",
    "completion_tokens",
    "spend",
];

/// One row's cells, in [`CSV_COLUMNS`]' order; the spend as its JSON answer writes it.
fn csv_row(r: &DailySpendRow) -> [String; 9] {
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
    ]
}

/// `GET /ui/spend.csv?days=`: the rows the page sums, one per day, team, key and model group.
pub(super) async fn csv(state: &AppState, viewer: &Viewer, q: &Form) -> Result<String, ApiError> {
    let (_, start, end) = period(q);
    let mut out = CSV_COLUMNS.join(",");
    out.push('\n');
    for r in rows(state, viewer, start, end).await? {
        out.push_str(&csv_row(&r).join(","));
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
fn daily(rows: &[DailySpendRow], providers: &BTreeMap<String, String>) -> [Daily; 4] {
    let mut by: [Daily; 4] = Default::default();
    for r in rows {
        let provider = providers
            .get(&r.model_group)
            .cloned()
            .unwrap_or_else(|| "(not configured)".to_owned());
        let names = [
            team_name(&r.team_id),
            r.model_group.clone(),
            key_name(&r.api_key),
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

fn team_name(t: &str) -> String {
    if t.is_empty() {
        "(no team)".into()
    } else {
        t.to_owned()
    }
}

fn key_name(k: &str) -> String {
    if k.is_empty() {
        "(master key)".into()
    } else {
        format!("{}…", short(k))
    }
}

/// `GET /ui/spend?days=`.
pub(super) async fn page(
    state: &AppState,
    snap: &Snapshot,
    viewer: &Viewer,
    q: &Form,
) -> Result<Markup, ApiError> {
    let (days, start, end) = period(q);
    let rows = rows(state, viewer, start, end).await?;
    let dates: Vec<String> = (0..days)
        .map(|i| (start + time::Duration::days(i)).to_string())
        .collect();
    let [by_team, by_model, by_key, by_provider] = daily(&rows, &providers(snap));
    let mut by: [BTreeMap<String, Sum>; 3] = Default::default();
    let mut total = Sum::default();
    for r in &rows {
        for (map, name) in by.iter_mut().zip([&r.team_id, &r.model_group, &r.api_key]) {
            add(map.entry(name.clone()).or_default(), r);
        }
        add(&mut total, r);
    }
    let [teams, models, keys] = &by;
    // Tags cross teams: only a viewer who sees all spend sees them.
    let tags = if viewer.session.role.sees_all() {
        let range = query(&[
            ("start_date", &start.to_string()),
            ("end_date", &end.to_string()),
        ]);
        Some(crate::admin::spend::tags(store(state)?, read(&range)).await?)
    } else {
        None
    };
    Ok(html! {
        form.filters method="get" action="/ui/spend" {
            label for="days" { "Period" }
            select #days name="days" {
                @for (value, label) in PERIODS {
                    option value=(value) selected[value.parse::<i64>().ok() == Some(days)] { (label) }
                }
            }
            button.quiet type="submit" { "Show" }
            span.muted { (start.to_string()) " to " (end.to_string()) " (UTC) · " (usd(total.spend)) " · " (total.requests) " requests · " a #csv href={ "/ui/spend.csv?days=" (days) } { "CSV" } }
        }
        div.charts #charts {
            div { h2 { "Daily spend by team" } (daily_bars("Daily spend by team", &dates, &by_team)) }
            div { h2 { "Daily spend by model group" } (daily_bars("Daily spend by model group", &dates, &by_model)) }
            div { h2 { "Daily spend by key" } (daily_bars("Daily spend by key", &dates, &by_key)) }
            div { h2 { "Daily spend by provider" } (daily_bars("Daily spend by provider", &dates, &by_provider)) }
        }
        h2 { "By team" } (table("Team", teams, team_name))
        h2 { "By model group" } (table("Model group", models, str::to_owned))
        h2 { "By key" } (table("Key (hash)", keys, key_name))
        @if let Some(tags) = &tags {
            h2 { "By tag" }
            p.muted { "A request counts under each of its tags (the request's, its key's and its team's); untagged requests are in no row." }
            table #tags {
                thead { tr { th { "Tag" } th.num { "Spend" } th.num { "Requests" } th.num { "Tokens" } } }
                tbody {
                    @for t in tags {
                        tr {
                            td { (t.tag) }
                            td.num { (usd(t.spend)) }
                            td.num { (t.requests) }
                            td.num { (t.total_tokens) }
                        }
                    }
                }
            }
        }
    })
}

fn add(sum: &mut Sum, r: &DailySpendRow) {
    sum.requests += r.requests;
    sum.failed += r.failed_requests;
    sum.tokens += r.prompt_tokens + r.completion_tokens;
    sum.spend += r.spend;
}

fn table(what: &str, rows: &BTreeMap<String, Sum>, name: impl Fn(&str) -> String) -> Markup {
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
