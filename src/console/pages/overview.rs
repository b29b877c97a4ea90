//! The overview: requests and errors from the Prometheus counter `/metrics` serves (the page
//! encodes the same counter family and sums it, so the two cannot disagree), requests per
//! second from samples of that counter the page keeps as it is viewed (nothing on the request
//! path), the deployments' live health, and today's spend, top keys and top model groups from
//! the store's daily rollups (what `/spend/daily` reads).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use maud::{html, Markup};

use super::health::{self, Health, Tally};
use super::names::{Names, Wanted};
use super::{query, read, store, usd};
use crate::admin::answers::spend::DailySpendRow;
use crate::console::Viewer;
use crate::server::{AppState, Snapshot};
use sluice_core::error::ApiError;

/// The stretch requests per second are averaged over, at least.
const RATE_WINDOW: Duration = Duration::from_secs(60);

/// Samples kept at most (a page viewed every second keeps a little over a minute).
const RATE_SAMPLES: usize = 128;

/// Samples of the request counter, taken when the overview is drawn: the rate is the counter's
/// rise since the newest sample at least [`RATE_WINDOW`] old (or the oldest there is). Kept by
/// the console (per snapshot: a reload starts afresh), so counting costs requests nothing.
#[derive(Debug, Default)]
pub(in crate::console) struct RequestRate {
    samples: Mutex<VecDeque<(Instant, u64)>>,
}

impl RequestRate {
    /// Note `total` at `now`; requests per second and the stretch it covers, `None` until the
    /// samples span a second.
    pub(super) fn sample(&self, now: Instant, total: u64) -> Option<(f64, Duration)> {
        // A panic elsewhere while holding it leaves plain numbers: still good to read.
        let mut s = sluice_core::lock::lock(&self.samples);
        s.push_back((now, total));
        while s.len() > RATE_SAMPLES
            || (s.len() > 2 && now.saturating_duration_since(s[1].0) >= RATE_WINDOW)
        {
            s.pop_front();
        }
        let &(at, then) = s.front()?;
        let span = now.saturating_duration_since(at);
        (span >= Duration::from_secs(1))
            .then(|| (total.saturating_sub(then) as f64 / span.as_secs_f64(), span))
    }
}

/// Requests summed from `sluice_requests_total`.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Counts {
    /// Requests that named a model group (inference, pass-through, files, realtime).
    pub total: u64,
    /// Of which answered with a 4xx or 5xx, or cut.
    pub errors: u64,
    /// Requests to model routes refused before a model group was known (no or a wrong key,
    /// a bad body); the console's own pages, health and management calls are not counted.
    pub refused: u64,
    /// Per model group: requests and errors.
    pub by_model: BTreeMap<String, (u64, u64)>,
}

/// Sums the request counter of a Prometheus exposition.
pub(super) fn counts(exposition: &str) -> Counts {
    let mut c = Counts::default();
    for line in exposition.lines() {
        let Some(rest) = line.strip_prefix("sluice_requests_total{") else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        let n = value.trim().parse::<f64>().unwrap_or(0.0) as u64;
        let label = |name: &str| label(labels, name).unwrap_or_default();
        let failed = matches!(label("status_class").as_str(), "4xx" | "5xx")
            || !label("error").is_empty()
            || label("outcome") == "upstream_cut";
        let model = label("model");
        if model.is_empty() {
            if failed && label("route").starts_with("/v1/") {
                c.refused += n;
            }
            continue;
        }
        let e = if failed { n } else { 0 };
        c.total += n;
        c.errors += e;
        let m = c.by_model.entry(model).or_default();
        m.0 += n;
        m.1 += e;
    }
    c
}

/// A histogram family summed over its label sets: `(upper bound, cumulative count)` per
/// bucket, in bound order (`+Inf` last).
fn buckets(exposition: &str, family: &str) -> Vec<(f64, f64)> {
    let prefix = format!("{family}_bucket{{");
    let mut by_bound: Vec<(f64, f64)> = Vec::new();
    for line in exposition.lines() {
        let Some(rest) = line.strip_prefix(prefix.as_str()) else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        let Some(le) = label(labels, "le") else {
            continue;
        };
        let bound = if le == "+Inf" {
            f64::INFINITY
        } else {
            le.parse().unwrap_or(f64::INFINITY)
        };
        let n: f64 = value.trim().parse().unwrap_or(0.0);
        match by_bound.iter_mut().find(|(b, _)| *b == bound) {
            Some(slot) => slot.1 += n,
            None => by_bound.push((bound, n)),
        }
    }
    by_bound.sort_by(|a, b| a.0.total_cmp(&b.0));
    by_bound
}

/// The `q` quantile of cumulative `buckets`, interpolated within its bucket as Prometheus's
/// `histogram_quantile` does; `None` with no observations (or past the last finite bound).
fn quantile(buckets: &[(f64, f64)], q: f64) -> Option<f64> {
    let total = buckets.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let rank = q * total;
    let (mut lower, mut below) = (0.0, 0.0);
    for &(bound, count) in buckets {
        if count >= rank {
            if !bound.is_finite() {
                return Some(lower);
            }
            let within = count - below;
            let frac = if within > 0.0 {
                (rank - below) / within
            } else {
                1.0
            };
            return Some(lower + (bound - lower) * frac);
        }
        (lower, below) = (bound, count);
    }
    None
}

/// A counter family summed over the label sets whose `kind` is `kind`.
fn tokens(exposition: &str, kind: &str) -> u64 {
    exposition
        .lines()
        .filter_map(|l| l.strip_prefix("sluice_tokens_total{"))
        .filter_map(|rest| rest.rsplit_once("} "))
        .filter(|(labels, _)| label(labels, "kind").as_deref() == Some(kind))
        .map(|(_, v)| v.trim().parse::<f64>().unwrap_or(0.0) as u64)
        .sum()
}

/// Milliseconds as the overview shows them.
fn ms(seconds: Option<f64>) -> String {
    match seconds {
        Some(s) if s < 0.01 => format!("{:.2} ms", s * 1000.0),
        Some(s) => format!("{:.1} ms", s * 1000.0),
        None => "—".to_owned(),
    }
}

/// One label's value in `a="x",b="y\"z"` (escapes undone).
fn label(labels: &str, name: &str) -> Option<String> {
    let mut rest = labels;
    loop {
        let (key, after) = rest.split_once("=\"")?;
        let mut value = String::new();
        let mut chars = after.char_indices();
        let mut end = after.len();
        while let Some((i, ch)) = chars.next() {
            match ch {
                '\\' => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, other)) => value.push(other),
                    None => {}
                },
                '"' => {
                    end = i + 1;
                    break;
                }
                other => value.push(other),
            }
        }
        if key.trim_start_matches(',') == name {
            return Some(value);
        }
        rest = after.get(end..)?;
    }
}

/// Today's rollup rows (UTC) a viewer may see: everyone's for admins, their team's for others.
async fn today_rows(
    state: &AppState,
    viewer: &Viewer,
    today: &str,
) -> Result<Vec<DailySpendRow>, ApiError> {
    let sees_all = viewer.session.role.sees_all();
    let q = query(&[("start_date", today), ("end_date", today)]);
    let daily = crate::admin::spend::daily(store(state)?, read(&q)).await?;
    let team = if sees_all {
        None
    } else {
        super::team_of(state, &viewer.session.user).await?
    };
    Ok(daily
        .into_iter()
        .filter(|r| sees_all || team.as_deref() == Some(r.team_id.as_str()))
        .collect())
}

/// The `n` largest spenders among `rows` by the member `by` picks: (name, spend, requests).
fn top(
    rows: &[DailySpendRow],
    by: fn(&DailySpendRow) -> &str,
    n: usize,
) -> Vec<(String, f64, u64)> {
    let mut sums: BTreeMap<&str, (f64, u64)> = BTreeMap::new();
    for r in rows {
        let s = sums.entry(by(r)).or_default();
        s.0 += r.spend;
        s.1 += r.requests;
    }
    let mut list: Vec<(String, f64, u64)> = sums
        .into_iter()
        .map(|(k, (spend, requests))| (k.to_owned(), spend, requests))
        .collect();
    list.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.2.cmp(&a.2)));
    list.truncate(n);
    list
}

/// The response cache's figures since start, from the counters `/metrics` exports.
#[derive(Debug, PartialEq)]
pub(super) struct CacheFigures {
    /// Hits over hits and misses, in percent (a batch's inputs counted one by one).
    pub hit_rate: f64,
    /// Requests answered from the store, and by an identical request in flight.
    pub hits: u64,
    /// Requests collapsed into another's upstream call.
    pub coalesced: u64,
    /// What the hits did not spend, in USD.
    pub saved: f64,
}

impl CacheFigures {
    fn of(stats: &sluice_cache::CacheStats) -> Self {
        use std::sync::atomic::Ordering::Relaxed;
        let hits = stats.hits.load(Relaxed);
        let misses = stats.misses.load(Relaxed);
        Self {
            hit_rate: if hits + misses == 0 {
                0.0
            } else {
                100.0 * hits as f64 / (hits + misses) as f64
            },
            hits,
            coalesced: stats.coalesced.load(Relaxed),
            saved: sluice_core::limits::dollars(stats.saved_nanos.load(Relaxed)),
        }
    }
}

/// `GET /ui/`.
pub(super) async fn page(
    state: &AppState,
    snap: &Snapshot,
    viewer: &Viewer,
) -> Result<Markup, ApiError> {
    let deps = health::all(state, snap);
    let tally = Tally::of(deps.iter().map(|(_, h, _)| *h));
    let sees_all = viewer.session.role.sees_all();
    // The whole exposition, as a /metrics scrape renders it (not on the request path).
    let recorder = state.recorder();
    let exposition = sees_all.then(|| {
        recorder
            .metrics()
            .render(&snap.router, recorder.queue_depth(), |_| {})
    });
    let counts = exposition.as_deref().map(counts);
    let cache = snap
        .features
        .cache
        .as_ref()
        .filter(|_| sees_all)
        .map(|c| CacheFigures::of(&c.core.stats));
    let rate = counts.as_ref().and_then(|c| {
        snap.features
            .console
            .as_ref()
            .and_then(|s| s.live.rate.sample(Instant::now(), c.total))
    });
    let today = time::OffsetDateTime::now_utc().date().to_string();
    // The store may be down; the live figures above do not need it, so the page still shows.
    let rows = today_rows(state, viewer, &today).await.ok();
    let spend = rows
        .as_deref()
        .map(|r| r.iter().map(|r| r.spend).sum::<f64>());
    let (top_keys, top_models) = rows
        .as_deref()
        .map(|r| (top(r, |r| &r.api_key, 5), top(r, |r| &r.model_group, 5)))
        .unwrap_or_default();
    let mut wanted = Wanted::default();
    for (k, _, _) in &top_keys {
        wanted.key(k);
    }
    let names = match top_keys.is_empty() {
        true => Names::default(),
        false => Names::of(state, &wanted).await,
    };
    Ok(html! {
        div.cards {
            @if let Some(c) = &counts {
                div.card { div.label { "Model requests (since start)" } div.value #requests { (c.total) } }
                div.card { div.label { "Requests per second" } div.value #rps {
                    @if let Some((r, _)) = rate { (format!("{r:.2}")) } @else { "—" } }
                    div.muted { @if let Some((_, over)) = rate { "over the last " (over.as_secs()) " s" } @else { "open the page again in a second" } }
                }
                div.card { div.label { "Failed" } div.value #errors { (c.errors) } }
                div.card { div.label { "Refused before a model" } div.value #refused { (c.refused) } }
            }
            div.card { div.label { @if sees_all { "Spend today (UTC)" } @else { "Your team's spend today" } } div.value #spend {
                @if let Some(s) = spend { (usd(s)) } @else { span.muted { "database unavailable" } }
            } }
            div.card {
                div.label { "Deployments healthy" }
                div.value #healthy { (tally.healthy) " / " (tally.total) }
                div.muted {
                    @if tally.not_configured > 0 { a href="/ui/models" { (tally.not_configured) " not configured" } " · " }
                    (tally.untried) " no requests yet"
                }
            }
            @if let Some(c) = &cache {
                div.card {
                    div.label { "Cache hit rate" }
                    div.value #cache-hit-rate { (format!("{:.1} %", c.hit_rate)) }
                    div.muted { (c.hits) " hits · " (c.coalesced) " coalesced · " (usd(c.saved)) " saved" }
                }
            }
        }
        @if let (Some(c), Some(x)) = (&counts, exposition.as_deref()) {
            @let duration = buckets(x, "sluice_request_duration_seconds");
            @let overhead = buckets(x, "sluice_overhead_seconds");
            div.cards {
                div.card { div.label { "Error rate" } div.value #error-rate {
                    @if c.total > 0 { (format!("{:.1} %", 100.0 * c.errors as f64 / c.total as f64)) } @else { "—" }
                } }
                // With no requests there is nothing to measure: no figures, not zeros.
                @if c.total > 0 {
                    div.card { div.label { "Latency p50 / p99" } div.value #latency { (ms(quantile(&duration, 0.5))) " / " (ms(quantile(&duration, 0.99))) } }
                    div.card { div.label { "sluice's overhead p50 / p99" } div.value #overhead { (ms(quantile(&overhead, 0.5))) " / " (ms(quantile(&overhead, 0.99))) } }
                } @else {
                    div.card #no-requests { div.label { "Latency and sluice's overhead" } div.muted { "No requests yet: send one (the Playground, or any OpenAI client with a key from Keys) and they show here." } }
                }
                div.card { div.label { "Tokens in / out" } div.value #tokens { (tokens(x, "input")) " / " (tokens(x, "output")) } }
            }
        }
        @if !top_keys.is_empty() {
            div.tops {
                div {
                    h2 { "Top keys today" }
                    table #top-keys {
                        thead { tr { th { "Key" } th.num { "Spend" } th.num { "Requests" } } }
                        tbody { @for (k, spend, n) in &top_keys { tr {
                            td { @if k.is_empty() { span.muted { "master key" } } @else {
                                a href={ "/ui/logs?" (query(&[("key", k)])) } title=(k) { (names.key(k)) } } }
                            td.num { (usd(*spend)) } td.num { (n) }
                        } } }
                    }
                }
                div {
                    h2 { "Top model groups today" }
                    table #top-models {
                        thead { tr { th { "Model group" } th.num { "Spend" } th.num { "Requests" } } }
                        tbody { @for (m, spend, n) in &top_models { tr {
                            td { a href={ "/ui/logs?model=" (m) } { (m) } }
                            td.num { (usd(*spend)) } td.num { (n) }
                        } } }
                    }
                }
            }
        }
        @if let Some(c) = &counts {
            h2 { "By model group" }
            @if c.by_model.is_empty() {
                p.muted #no-model-requests { "No requests have reached a model group since this instance started." }
            } @else {
                table {
                    thead { tr { th { "Model group" } th.num { "Requests" } th.num { "Errors" } } }
                    tbody {
                        @for (model, (n, e)) in &c.by_model {
                            tr { td { (model) } td.num { (n) } td.num { (e) } }
                        }
                    }
                }
            }
            p.muted { "Counted by this instance since it started, from the counters /metrics exports." }
        }
        @let unwell: Vec<_> = deps.iter().filter(|(_, h, _)| !matches!(h, Health::Healthy | Health::Untried)).collect();
        @if !unwell.is_empty() {
            h2 { "Not healthy" }
            ul #unhealthy {
                @for (d, h, _) in unwell {
                    li { (d.model_name) " · " span.mono { (d.model_id) } " · " span class=(h.class()) { (h.name()) } }
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_the_request_counter_by_model_and_failure() {
        let text = "# TYPE sluice_requests counter\n\
sluice_requests_total{route=\"/v1/chat/completions\",model=\"a\",deployment=\"d\",provider=\"openai\",status_class=\"2xx\",outcome=\"done\",error=\"\"} 3\n\
sluice_requests_total{route=\"/v1/chat/completions\",model=\"a\",deployment=\"d\",provider=\"openai\",status_class=\"5xx\",outcome=\"done\",error=\"upstream\"} 2\n\
sluice_requests_total{route=\"/health\",model=\"\",deployment=\"\",provider=\"\",status_class=\"2xx\",outcome=\"done\",error=\"\"} 1\n\
sluice_requests_total{route=\"/v1/chat/completions\",model=\"\",deployment=\"\",provider=\"\",status_class=\"4xx\",outcome=\"done\",error=\"invalid_api_key\"} 4\n\
sluice_requests_total{route=\"/ui\",model=\"\",deployment=\"\",provider=\"\",status_class=\"4xx\",outcome=\"done\",error=\"\"} 7\n\
sluice_requests_created{route=\"x\"} 12.5\n";
        let c = counts(text);
        assert_eq!(c.total, 5);
        assert_eq!(c.errors, 2);
        assert_eq!(c.refused, 4);
        assert_eq!(c.by_model.get("a"), Some(&(5, 2)));
        assert_eq!(c.by_model.len(), 1);
    }

    #[test]
    fn quantiles_come_from_the_summed_buckets() {
        let text = "sluice_overhead_seconds_bucket{model=\"a\",le=\"0.001\"} 5\n\
sluice_overhead_seconds_bucket{model=\"a\",le=\"0.002\"} 10\n\
sluice_overhead_seconds_bucket{model=\"a\",le=\"+Inf\"} 10\n\
sluice_overhead_seconds_bucket{model=\"b\",le=\"0.001\"} 0\n\
sluice_overhead_seconds_bucket{model=\"b\",le=\"0.002\"} 10\n\
sluice_overhead_seconds_bucket{model=\"b\",le=\"+Inf\"} 10\n\
sluice_tokens_total{model=\"a\",deployment=\"d\",kind=\"input\"} 7\n\
sluice_tokens_total{model=\"b\",deployment=\"d\",kind=\"input\"} 3\n\
sluice_tokens_total{model=\"b\",deployment=\"d\",kind=\"output\"} 4\n";
        let b = buckets(text, "sluice_overhead_seconds");
        assert_eq!(b, vec![(0.001, 5.0), (0.002, 20.0), (f64::INFINITY, 20.0)]);
        // The 10th of 20: halfway through the second bucket's 15.
        let p50 = quantile(&b, 0.5).unwrap();
        assert!((p50 - (0.001 + 0.001 * 5.0 / 15.0)).abs() < 1e-12, "{p50}");
        assert_eq!(quantile(&[], 0.5), None);
        assert_eq!(tokens(text, "input"), 10);
        assert_eq!(tokens(text, "output"), 4);
    }

    #[test]
    fn requests_per_second_span_at_least_a_minute() {
        let r = RequestRate::default();
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        assert_eq!(r.sample(t0, 0), None, "one sample is no rate");
        assert_eq!(r.sample(at(0), 5), None, "nor less than a second");
        assert_eq!(r.sample(at(10), 20), Some((2.0, Duration::from_secs(10))));
        // 70 s in: the newest sample a minute old is the one at 10 s.
        assert_eq!(r.sample(at(70), 140), Some((2.0, Duration::from_secs(60))));
        assert_eq!(
            r.sample(at(75), 140),
            Some((120.0 / 65.0, Duration::from_secs(65)))
        );
        let kept = r.samples.lock().unwrap().len();
        assert!(kept <= 3, "{kept}");
    }

    #[test]
    fn top_spenders_sum_their_rows() {
        let row = |key: &str, spend: f64, requests: u64| DailySpendRow {
            api_key: key.into(),
            spend,
            requests,
            ..DailySpendRow::default()
        };
        let rows = [
            row("a", 1.0, 2),
            row("b", 3.0, 1),
            row("a", 2.5, 4),
            row("c", 0.1, 9),
        ];
        assert_eq!(
            top(&rows, |r| &r.api_key, 2),
            [("a".to_owned(), 3.5, 6), ("b".to_owned(), 3.0, 1)]
        );
    }

    #[test]
    fn label_values_are_unescaped() {
        assert_eq!(label(r#"a="x\"y",b="z""#, "b").as_deref(), Some("z"));
        assert_eq!(label(r#"a="x\"y",b="z""#, "a").as_deref(), Some("x\"y"));
        assert_eq!(label(r#"a="x""#, "c"), None);
    }
}
