//! Reports (LiteLLM's `spend_reports` and `daily_reports`): spend by team, tag, model and key
//! over each `spend_report_frequency` window and each calendar month, read from the spend
//! logs; and the deployments with the most failed requests and the slowest, every
//! `alerting_args.daily_report_frequency`. Windows are aligned to the epoch (UTC), so every
//! instance of a fleet names a window alike and the fleet claims it once.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;

use sluice_routing::Router;
use sluice_store::{SpendBy, Store};
use time::OffsetDateTime;

use crate::auth::Directory;
use sluice_core::limits::SubjectKind;
use sluice_core::trace_context::unhex;

/// A report due every `period_ms`, on the epoch's grid: each window is reported once, after
/// it ends. The window under way when the task starts is reported when it ends; earlier ones
/// are not (a restart does not resend them).
#[derive(Debug, Clone)]
pub struct Periodic {
    period_ms: u64,
    /// The index of the last window ended (reported, or before the start).
    last: u64,
}

impl Periodic {
    /// Windows of `period_ms`, the first due at the end of the one under way at `now_ms`.
    pub fn new(period_ms: u64, now_ms: u64) -> Self {
        let period_ms = period_ms.max(1);
        Self {
            period_ms,
            last: now_ms / period_ms,
        }
    }

    /// The window that ended since the last call, as (start, end) ms, if one did.
    pub fn due(&mut self, now_ms: u64) -> Option<(u64, u64)> {
        let current = now_ms / self.period_ms;
        if current <= self.last {
            return None;
        }
        self.last = current;
        Some(((current - 1) * self.period_ms, current * self.period_ms))
    }
}

/// Calendar months (UTC): the month that ended since the last call.
#[derive(Debug, Clone)]
pub struct Monthly {
    last: (i32, u8),
}

fn month_of(ms: u64) -> (i32, u8) {
    let t = at(ms);
    (t.year(), u8::from(t.month()))
}

fn at(ms: u64) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .unwrap_or(OffsetDateTime::UNIX_EPOCH)
}

impl Monthly {
    /// Months, the first due when the one under way at `now_ms` ends.
    pub fn new(now_ms: u64) -> Self {
        Self {
            last: month_of(now_ms),
        }
    }

    /// The month that ended since the last call, as (start, end) ms and its `YYYY-MM` name.
    pub fn due(&mut self, now_ms: u64) -> Option<(u64, u64, String)> {
        let now = month_of(now_ms);
        if now == self.last {
            return None;
        }
        let (y, m) = self.last;
        self.last = now;
        let start = time::Date::from_calendar_date(y, time::Month::try_from(m).ok()?, 1).ok()?;
        let end =
            time::Date::from_calendar_date(now.0, time::Month::try_from(now.1).ok()?, 1).ok()?;
        let ms = |d: time::Date| {
            u64::try_from(d.midnight().assume_utc().unix_timestamp()).unwrap_or(0) * 1000
        };
        Some((ms(start), ms(end), format!("{y}-{m:02}")))
    }
}

/// A window as `YYYY-MM-DD HH:MM` UTC.
fn when(ms: u64) -> String {
    let t = at(ms);
    format!(
        "{}-{:02}-{:02} {:02}:{:02}",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute()
    )
}

/// How many rows each table of a report lists.
const TOP: usize = 10;

/// The spend report of `start..end` (ms), or `None` when nothing was spent (LiteLLM sends
/// none then either). Teams and keys are named by their aliases where they have one.
pub async fn spend(
    store: &Store,
    dir: &Directory,
    (start, end): (u64, u64),
    title: &str,
) -> Option<String> {
    let (from, to) = (at(start), at(end));
    let read = |by| store.spend_grouped(from, to, by);
    let (teams, models, keys) = (
        read(SpendBy::Team).await,
        read(SpendBy::Model).await,
        read(SpendBy::Key).await,
    );
    let tags = store.spend_by_tag(Some(from), Some(to)).await;
    let (Ok(teams), Ok(models), Ok(keys), Ok(tags)) = (teams, models, keys, tags) else {
        tracing::warn!("spend report not made: the spend logs could not be read");
        return None;
    };
    let total: f64 = models.iter().map(|m| m.spend).sum();
    let requests: u64 = models.iter().map(|m| m.requests).sum();
    if requests == 0 {
        return None;
    }
    let mut text = format!(
        "*💸 {title} for `{} – {}` UTC*\nTotal: `${}` over {requests} requests\n",
        when(start),
        when(end),
        round(total)
    );
    let alias = |kind, id: &str| {
        dir.holder(kind, id)
            .and_then(|h| h.alerts.alias.clone())
            .unwrap_or_else(|| id.to_owned())
    };
    let _ = write!(text, "\n*Team Spend Report:*\n");
    for t in teams.iter().take(TOP) {
        let name = if t.name.is_empty() {
            "(no team)".to_owned()
        } else {
            alias(SubjectKind::Team, &t.name)
        };
        let _ = writeln!(text, "Team: `{name}` | Spend: `${}`", round(t.spend));
    }
    if !tags.is_empty() {
        let _ = write!(text, "\n*Tag Spend Report:*\n");
        for t in tags.iter().take(TOP) {
            let _ = writeln!(text, "Tag: `{}` | Spend: `${}`", t.tag, round(t.spend));
        }
    }
    let _ = write!(text, "\n*Model Spend Report:*\n");
    for m in models.iter().take(TOP) {
        let _ = writeln!(
            text,
            "Model: `{}` | Spend: `${}` | Requests: {}",
            m.name,
            round(m.spend),
            m.requests
        );
    }
    let _ = write!(text, "\n*Top Keys:*\n");
    for k in keys.iter().filter(|k| !k.name.is_empty()).take(TOP) {
        let shown = unhex::<32>(k.name.as_bytes())
            .and_then(|d| dir.key(&d))
            .and_then(|e| e.info.alias.as_deref().map(str::to_owned))
            .unwrap_or_else(|| format!("{}…", k.name.chars().take(8).collect::<String>()));
        let _ = writeln!(text, "Key: `{shown}` | Spend: `${}`", round(k.spend));
    }
    Some(text)
}

fn round(usd: f64) -> f64 {
    (usd * 10_000.0).round() / 10_000.0
}

/// Failures seen per deployment when the last deployment report was made.
pub type Seen = HashMap<Arc<str>, u64>;

/// The deployment report (LiteLLM's `daily_reports`): the five deployments with the most
/// failed requests since the last report and the five slowest, from this instance's routing
/// state; `None` when no deployment failed or answered.
pub fn deployments(router: &Router, seen: &mut Seen) -> Option<String> {
    let mut failed = Vec::new();
    let mut slow = Vec::new();
    for g in router.models.groups() {
        for m in g.members() {
            let id = &m.target.info.id;
            let (_, failures, _) = m.health.totals();
            let before = seen.insert(id.clone(), failures).unwrap_or(0);
            let new = failures.saturating_sub(before);
            if new > 0 {
                failed.push((new, &g.name, id.clone()));
            }
            if let Some(l) = m.health.latency() {
                slow.push((l, &g.name, id.clone()));
            }
        }
    }
    if failed.is_empty() && slow.is_empty() {
        return None;
    }
    failed.sort_by_key(|f| std::cmp::Reverse(f.0));
    slow.sort_by_key(|s| std::cmp::Reverse(s.0));
    let mut text = String::from("*📈 Deployment report*\n\n*❗️ Most failed requests:*\n");
    if failed.is_empty() {
        text.push_str("None\n");
    }
    for (i, (n, group, id)) in failed.iter().take(5).enumerate() {
        let _ = writeln!(
            text,
            "{}. Model group `{group}`, deployment `{id}`: {n} failed requests",
            i + 1
        );
    }
    text.push_str("\n*😅 Slowest:*\n");
    for (i, (l, group, id)) in slow.iter().take(5).enumerate() {
        let _ = writeln!(
            text,
            "{}. Model group `{group}`, deployment `{id}`: {:.0} ms",
            i + 1,
            l.as_secs_f64() * 1e3
        );
    }
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_window_is_due_once_after_it_ends() {
        let mut p = Periodic::new(1_000, 10_500);
        assert_eq!(p.due(10_999), None, "the window under way is not over");
        assert_eq!(p.due(11_000), Some((10_000, 11_000)));
        assert_eq!(p.due(11_500), None, "once");
        assert_eq!(p.due(13_200), Some((12_000, 13_000)), "the last one ended");
    }

    #[test]
    fn a_month_is_due_when_it_ends() {
        // 2026-11-30 12:00 UTC, then 2026-12-01 00:00:01 UTC.
        let nov = 1_796_040_000_000;
        let dec = 1_796_083_201_000;
        let mut m = Monthly::new(nov);
        assert_eq!(m.due(nov + 1_000), None);
        let (start, end, name) = m.due(dec).expect("November ended");
        assert_eq!(name, "2026-11");
        assert_eq!(when(start), "2026-11-01 00:00");
        assert_eq!(when(end), "2026-12-01 00:00");
        assert_eq!(m.due(dec + 1), None);
    }
}
