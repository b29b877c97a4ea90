//! Spend by team, model group and key over a period, summed from the daily rollups the spend
//! writer keeps (what `/spend/daily` answers): the same rows the spend log adds up to. An
//! internal user sees their team's rows (their own keys' when they have no team).

use std::collections::{BTreeMap, HashSet};

use http::Method;
use maud::{html, Markup};
use serde_json::Value;

use super::{admin, query, short, team_of, usd};
use crate::console::{Form, Viewer};
use crate::server::AppState;
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

/// `GET /ui/spend?days=`.
pub(super) async fn page(state: &AppState, viewer: &Viewer, q: &Form) -> Result<Markup, ApiError> {
    let days: i64 = q
        .filled("days")
        .and_then(|d| d.parse().ok())
        .filter(|d| (1..=366).contains(d))
        .unwrap_or(7);
    let end = time::OffsetDateTime::now_utc().date();
    let start = end - time::Duration::days(days - 1);
    let rows = admin(
        state,
        Method::GET,
        "/spend/daily",
        &query(&[
            ("start_date", &start.to_string()),
            ("end_date", &end.to_string()),
        ]),
        &Value::Null,
    )
    .await?;
    let rows = rows.as_array().map(Vec::as_slice).unwrap_or_default();
    let scope = Scope::of(state, viewer).await?;
    let mut by: [BTreeMap<String, Sum>; 3] = Default::default();
    let mut total = Sum::default();
    for r in rows.iter().filter(|r| scope.includes(r)) {
        let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        for (map, name) in
            by.iter_mut()
                .zip([s(&r["team_id"]), s(&r["model_group"]), s(&r["api_key"])])
        {
            add(map.entry(name).or_default(), r);
        }
        add(&mut total, r);
    }
    let [teams, models, keys] = &by;
    Ok(html! {
        form.filters method="get" action="/ui/spend" {
            label for="days" { "Period" }
            select #days name="days" {
                @for (value, label) in PERIODS {
                    option value=(value) selected[value.parse::<i64>().ok() == Some(days)] { (label) }
                }
            }
            button.quiet type="submit" { "Show" }
            span.muted { (start.to_string()) " to " (end.to_string()) " (UTC) · " (usd(total.spend)) " · " (total.requests) " requests" }
        }
        h2 { "By team" } (table("Team", teams, |t| if t.is_empty() { "(no team)".into() } else { t.to_owned() }))
        h2 { "By model group" } (table("Model group", models, str::to_owned))
        h2 { "By key" } (table("Key (hash)", keys, |k| if k.is_empty() { "(master key)".into() } else { format!("{}…", short(k)) }))
    })
}

fn add(sum: &mut Sum, r: &Value) {
    let n = |f: &str| r[f].as_u64().unwrap_or(0);
    sum.requests += n("requests");
    sum.failed += n("failed_requests");
    sum.tokens += n("prompt_tokens") + n("completion_tokens");
    sum.spend += r["spend"].as_f64().unwrap_or(0.0);
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
        let list = admin(
            state,
            Method::GET,
            "/key/list",
            &query(&[("user_id", &viewer.session.user), ("size", "1000")]),
            &Value::Null,
        )
        .await?;
        Ok(Self::Keys(
            list["keys"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or_default()
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
        ))
    }

    fn includes(&self, r: &Value) -> bool {
        match self {
            Self::All => true,
            Self::Team(t) => r["team_id"].as_str() == Some(t.as_str()),
            Self::Keys(keys) => r["api_key"].as_str().is_some_and(|k| keys.contains(k)),
        }
    }
}
