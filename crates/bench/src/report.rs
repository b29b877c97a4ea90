//! The benchmark's results and their three renderings: a terminal table, `report.json` and
//! `report.md` (the charts are in `chart.rs`).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use hdrhistogram::Histogram;
use serde::Serialize;

/// Latency percentiles in microseconds.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Percentiles {
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest.
    pub max: f64,
    /// Mean.
    pub mean: f64,
}

impl Percentiles {
    /// From a nanosecond histogram; `None` when it is empty.
    pub fn of(h: &Histogram<u64>) -> Option<Self> {
        if h.is_empty() {
            return None;
        }
        let us = |ns: u64| ns as f64 / 1000.0;
        Some(Self {
            p50: us(h.value_at_quantile(0.50)),
            p90: us(h.value_at_quantile(0.90)),
            p99: us(h.value_at_quantile(0.99)),
            p999: us(h.value_at_quantile(0.999)),
            max: us(h.max()),
            mean: h.mean() / 1000.0,
        })
    }

    /// `self - base` at each percentile: the latency a gateway adds over calling directly.
    pub fn minus(&self, base: &Self) -> Self {
        Self {
            p50: self.p50 - base.p50,
            p90: self.p90 - base.p90,
            p99: self.p99 - base.p99,
            p999: self.p999 - base.p999,
            max: self.max - base.max,
            mean: self.mean - base.mean,
        }
    }
}

/// One measured level: a target, a workload, a body size, a concurrency.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// `direct` (the mock itself), `sluice`, or a peer's name.
    pub target: String,
    /// Workload name.
    pub workload: &'static str,
    /// Body size class.
    pub size: &'static str,
    /// Exact request body length.
    pub body_bytes: usize,
    /// Requests in flight.
    pub concurrency: usize,
    /// Requests that succeeded.
    pub ok: u64,
    /// Failures by kind.
    pub errors: BTreeMap<String, u64>,
    /// Wall time, seconds.
    pub elapsed_s: f64,
    /// Successful requests per second.
    pub rps: f64,
    /// Latency to the last byte.
    pub latency_us: Option<Percentiles>,
    /// Time to first byte (streams).
    pub ttfb_us: Option<Percentiles>,
    /// Latency added over `direct` at each percentile.
    pub added_us: Option<Percentiles>,
    /// Time to first byte added over `direct`.
    pub added_ttfb_us: Option<Percentiles>,
    /// CPU seconds the target used per 1,000 requests.
    pub cpu_s_per_1k: Option<f64>,
    /// Highest resident memory during the level, MB.
    pub rss_peak_mb: Option<f64>,
}

/// Memory of a target when idle.
#[derive(Debug, Clone, Serialize)]
pub struct Rest {
    /// Target name.
    pub target: String,
    /// Before any load / after all of it.
    pub when: &'static str,
    /// Resident memory, MB.
    pub rss_mb: f64,
}

/// The held-streams test: many slow streams open at once through sluice.
#[derive(Debug, Clone, Serialize)]
pub struct Hold {
    /// Streams opened together.
    pub streams: usize,
    /// That completed.
    pub ok: u64,
    /// Failures by kind.
    pub errors: BTreeMap<String, u64>,
    /// Peak resident memory while holding them, MB.
    pub rss_peak_mb: f64,
    /// The protocol sluice spoke to the mock: `HTTP/1.1` (a connection per stream) or `h2c`
    /// (streams multiplexed on one connection per worker, `--upstream-h2c`).
    pub upstream: &'static str,
    /// Slowest time to a stream's first byte, ms: far below a stream's length (2 s) when every
    /// stream really ran at once, not queued behind an upstream's stream limit.
    pub ttfb_max_ms: f64,
    /// Wall time from the first stream opened to the last one finished, s.
    pub seconds: f64,
}

/// The machine the run was on.
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    /// CPU model.
    pub cpu: String,
    /// Logical CPUs.
    pub cpus: usize,
    /// Kernel release.
    pub kernel: String,
    /// Total memory, GB.
    pub memory_gb: f64,
}

impl Machine {
    /// Read from `/proc`.
    pub fn detect() -> Self {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split(':').nth(1))
            .map_or_else(|| "unknown".to_owned(), |s| s.trim().to_owned());
        let mem_kb: f64 = std::fs::read_to_string("/proc/meminfo")
            .unwrap_or_default()
            .lines()
            .find(|l| l.starts_with("MemTotal:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|s| s.parse().ok())
            .unwrap_or(0.0);
        Self {
            cpu,
            cpus: std::thread::available_parallelism().map_or(1, usize::from),
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map_or_else(|_| "unknown".to_owned(), |s| s.trim().to_owned()),
            memory_gb: (mem_kb / 1024.0 / 1024.0 * 10.0).round() / 10.0,
        }
    }
}

/// Everything one `sluice bench` run measured.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// UTC start time.
    pub started: String,
    /// sluice version.
    pub version: &'static str,
    /// Where it ran.
    pub machine: Machine,
    /// The command line that produced it.
    pub command: String,
    /// Idle memory readings.
    pub rest: Vec<Rest>,
    /// Every level.
    pub rows: Vec<Row>,
    /// Held streams, when run.
    pub hold: Option<Hold>,
    /// Why the floor (nginx) is missing from a run that would have measured it.
    pub floor_note: Option<String>,
    /// What the callback receiver got, with `--callbacks`.
    pub callbacks: Option<CallbackDeliveries>,
}

/// Deliveries the `--callbacks` receiver counted during the run.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct CallbackDeliveries {
    /// Batches, exports and objects received.
    pub requests: u64,
    /// Their body bytes.
    pub bytes: u64,
}

/// Name of the floor's target (nginx), as `floor::NAME` in the run.
pub const FLOOR: &str = "nginx";

/// Whether a level meets the floor target that applies to it: the first byte of a stream, the
/// added p50 at c=1 of a whole answer, req/s at c=64; `-` where none applies or a figure is
/// missing.
fn floor_verdict(
    sluice: &Row,
    p50_ratio: Option<f64>,
    ttfb: Option<(f64, f64)>,
    rps_ratio: Option<f64>,
) -> &'static str {
    let met = |ok: bool| if ok { "met" } else { "not met" };
    match (sluice.concurrency, ttfb, p50_ratio, rps_ratio) {
        (1, Some((s, n)), _, _) => met(s <= n + 20.0),
        (1, None, Some(r), _) => met(r <= 1.25),
        (64, _, _, Some(r)) => met(r >= 0.90),
        _ => "-",
    }
}

/// Name of the target with every callback on.
pub const WITH_CALLBACKS: &str = "sluice+cb";

/// With `--callbacks`: a second plain sluice, measured after `sluice+cb`, for the noise floor.
pub const AGAIN: &str = "sluice-again";

fn f(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{v:.digits$}"))
}

fn errors(e: &BTreeMap<String, u64>) -> String {
    if e.is_empty() {
        "0".to_owned()
    } else {
        e.iter()
            .map(|(k, v)| format!("{k}:{v}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// One row's figures formatted for display, shared by the terminal table and the Markdown.
struct Cells {
    rps: String,
    p50: String,
    p90: String,
    p99: String,
    p999: String,
    added_p50: String,
    added_p99: String,
    ttfb_p50: String,
    added_ttfb_p50: String,
    cpu: String,
    rss: String,
    errors: String,
}

impl Row {
    fn cells(&self) -> Cells {
        let l = self.latency_us.as_ref();
        let a = self.added_us.as_ref();
        Cells {
            rps: format!("{:.0}", self.rps),
            p50: f(l.map(|p| p.p50), 0),
            p90: f(l.map(|p| p.p90), 0),
            p99: f(l.map(|p| p.p99), 0),
            p999: f(l.map(|p| p.p999), 0),
            added_p50: f(a.map(|p| p.p50), 1),
            added_p99: f(a.map(|p| p.p99), 1),
            ttfb_p50: f(self.ttfb_us.as_ref().map(|p| p.p50), 0),
            added_ttfb_p50: f(self.added_ttfb_us.as_ref().map(|p| p.p50), 1),
            cpu: f(self.cpu_s_per_1k, 3),
            rss: f(self.rss_peak_mb, 1),
            errors: errors(&self.errors),
        }
    }
}

impl Hold {
    /// One sentence: how many streams over which upstream protocol, how many completed,
    /// errors, peak memory, and whether they really ran at once.
    fn summary(&self) -> String {
        format!(
            "{} concurrent streams through sluice ({} upstream): {} complete, errors {}, peak RSS {:.1} MB; slowest first byte {:.0} ms, all done in {:.1} s",
            self.streams,
            self.upstream,
            self.ok,
            errors(&self.errors),
            self.rss_peak_mb,
            self.ttfb_max_ms,
            self.seconds,
        )
    }
}

impl Report {
    /// The results as a terminal table.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:<16} {:>5} {:>5} {:<10} {:>9} {:>9} {:>9} {:>9} {:>10} {:>10} {:>9} {:>7} {:>7}  errors",
            "workload", "size", "conc", "target", "req/s", "p50 µs", "p99 µs", "p99.9 µs",
            "+p50 µs", "+p99 µs", "ttfb µs", "cpu/1k", "rss MB"
        );
        for r in &self.rows {
            let c = r.cells();
            let _ = writeln!(
                out,
                "{:<16} {:>5} {:>5} {:<10} {:>9} {:>9} {:>9} {:>9} {:>10} {:>10} {:>9} {:>7} {:>7}  {}",
                r.workload,
                r.size,
                r.concurrency,
                r.target,
                c.rps,
                c.p50,
                c.p99,
                c.p999,
                c.added_p50,
                c.added_p99,
                c.ttfb_p50,
                c.cpu,
                c.rss,
                c.errors
            );
        }
        for rest in &self.rest {
            let _ = writeln!(
                out,
                "rss at rest ({}, {}): {:.1} MB",
                rest.target, rest.when, rest.rss_mb
            );
        }
        if let Some(h) = &self.hold {
            let _ = writeln!(out, "held {}", h.summary());
        }
        out.push_str(&self.floor_section());
        out.push_str(&self.callbacks_section());
        out
    }

    /// sluice beside the floor at every level both ran: what each adds over direct, their
    /// ratio, and the targets (added p50 at c=1 at most 1.25 × nginx's, a stream's
    /// first byte at most 20 µs after nginx's, req/s at c=64 at least 90 % of nginx's).
    fn floor_section(&self) -> String {
        if let Some(note) = &self.floor_note {
            return format!("\n## sluice ÷ nginx (the floor)\n\nNot measured: {note}.\n");
        }
        let pairs: Vec<(&Row, &Row)> = self
            .rows
            .iter()
            .filter(|r| r.target == "sluice")
            .filter_map(|s| {
                let n = self.rows.iter().find(|n| {
                    n.target == FLOOR
                        && n.workload == s.workload
                        && n.size == s.size
                        && n.concurrency == s.concurrency
                })?;
                Some((s, n))
            })
            .collect();
        if pairs.is_empty() {
            return String::new();
        }
        let mut out = String::from(
            "\n## sluice ÷ nginx (the floor)\n\nnginx as a keep-alive reverse proxy to the same mock, \
             measured in the same run (`+` = added over direct, µs). Ratio = sluice ÷ nginx; \
             a ratio is shown only where nginx adds at least 1 µs. Targets: +p50 ratio ≤ 1.25 at \
             c=1; stream +ttfb at most 20 µs over nginx's; req/s at c=64 ≥ 90 % of nginx's.\n\n\
             | workload | size | conc | +p50 sluice | +p50 nginx | ratio | +p99 sluice | +p99 nginx | +ttfb sluice | +ttfb nginx | req/s sluice ÷ nginx | cpu/1k sluice ÷ nginx | target |\n\
             |---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n",
        );
        for (s, n) in pairs {
            let p50 = |r: &Row| r.added_us.map(|a| a.p50);
            let p99 = |r: &Row| r.added_us.map(|a| a.p99);
            let ttfb = |r: &Row| r.added_ttfb_us.map(|a| a.p50);
            let ratio = match (p50(s), p50(n)) {
                (Some(a), Some(b)) if b >= 1.0 => Some(a / b),
                _ => None,
            };
            let rps = (n.rps > 0.0).then(|| s.rps / n.rps);
            let cpu = match (s.cpu_s_per_1k, n.cpu_s_per_1k) {
                (Some(a), Some(b)) if b > 0.0 => Some(a / b),
                _ => None,
            };
            let verdict = floor_verdict(s, ratio, ttfb(s).zip(ttfb(n)), rps);
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                s.workload,
                s.size,
                s.concurrency,
                f(p50(s), 1),
                f(p50(n), 1),
                f(ratio, 2),
                f(p99(s), 1),
                f(p99(n), 1),
                f(ttfb(s), 1),
                f(ttfb(n), 1),
                f(rps, 2),
                f(cpu, 2),
                verdict
            );
        }
        out
    }

    /// Callbacks on vs off: the latency `sluice+cb` adds over `sluice` at each level (both
    /// measured in the same run, interleaved), next to what a second identical sluice
    /// (`sluice-again`) differs by, and whether the callbacks' difference is within that noise.
    fn callbacks_section(&self) -> String {
        let Some(d) = self.callbacks else {
            return String::new();
        };
        let mut out = format!(
            "\n## Callbacks on vs off\n\nEvery callback on (otel, webhook, langfuse, langsmith, s3) against \
             a loopback receiver, which got {} deliveries ({:.1} MB). Δ = `{WITH_CALLBACKS}` minus \
             `sluice`; noise = `{AGAIN}` (the same gateway as `sluice`, measured after \
             `{WITH_CALLBACKS}`) minus `sluice`; µs. Within noise: each Δ is at most its noise's \
             size (or negative).\n\n| workload | size | conc | p50 off | p50 on | Δp50 | noise p50 | p99 off | p99 on | Δp99 | noise p99 | within noise | cpu/1k off | cpu/1k on |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|\n",
            d.requests,
            d.bytes as f64 / 1e6
        );
        let find = |target: &str, like: &Row| {
            self.rows.iter().find(|r| {
                r.target == target
                    && r.workload == like.workload
                    && r.size == like.size
                    && r.concurrency == like.concurrency
            })
        };
        for on in self.rows.iter().filter(|r| r.target == WITH_CALLBACKS) {
            let Some(off) = find("sluice", on) else {
                continue;
            };
            let (Some(a), Some(b)) = (off.latency_us, on.latency_us) else {
                continue;
            };
            let again = find(AGAIN, on).and_then(|r| r.latency_us);
            let noise = again.map(|n| (n.p50 - a.p50, n.p99 - a.p99));
            let (d50, d99) = (b.p50 - a.p50, b.p99 - a.p99);
            let verdict = match noise {
                Some((n50, n99)) if d50 <= n50.abs() && d99 <= n99.abs() => "yes",
                Some(_) => "no",
                None => "-",
            };
            let show = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:+.0}"));
            let _ = writeln!(
                out,
                "| {} | {} | {} | {:.0} | {:.0} | {:+.0} | {} | {:.0} | {:.0} | {:+.0} | {} | {} | {} | {} |",
                on.workload,
                on.size,
                on.concurrency,
                a.p50,
                b.p50,
                d50,
                show(noise.map(|n| n.0)),
                a.p99,
                b.p99,
                d99,
                show(noise.map(|n| n.1)),
                verdict,
                f(off.cpu_s_per_1k, 2),
                f(on.cpu_s_per_1k, 2)
            );
        }
        out
    }

    /// The results as Markdown, for `docs/benchmarks.md`.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        let m = &self.machine;
        let _ = writeln!(out, "# sluice bench {}\n", self.started);
        let _ = writeln!(
            out,
            "sluice {} on {} ({} CPUs, {} GB, Linux {}).\n\n`{}`\n",
            self.version, m.cpu, m.cpus, m.memory_gb, m.kernel, self.command
        );
        let _ = writeln!(
            out,
            "Latencies in µs; `+p50`/`+p99` are the latency added over calling the mock directly \
             in the same run; CPU is the target's CPU seconds per 1,000 requests; RSS its peak \
             resident memory during the level.\n"
        );
        out.push_str(&self.floor_section());
        let mut current = ("", "");
        for r in &self.rows {
            if (r.workload, r.size) != current {
                current = (r.workload, r.size);
                let _ = writeln!(
                    out,
                    "\n## {} · {} body ({} bytes)\n\n| conc | target | req/s | p50 | p90 | p99 | p99.9 | +p50 | +p99 | ttfb p50 | +ttfb p50 | cpu s/1k | rss MB | errors |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
                    r.workload, r.size, r.body_bytes
                );
            }
            let c = r.cells();
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                r.concurrency,
                r.target,
                c.rps,
                c.p50,
                c.p90,
                c.p99,
                c.p999,
                c.added_p50,
                c.added_p99,
                c.ttfb_p50,
                c.added_ttfb_p50,
                c.cpu,
                c.rss,
                c.errors
            );
        }
        if !self.rest.is_empty() {
            let _ = writeln!(
                out,
                "\n## Memory at rest\n\n| target | when | RSS MB |\n|---|---|---:|"
            );
            for r in &self.rest {
                let _ = writeln!(out, "| {} | {} | {:.1} |", r.target, r.when, r.rss_mb);
            }
        }
        if let Some(h) = &self.hold {
            let _ = writeln!(out, "\n## Held streams\n\n{}.", h.summary());
        }
        out.push_str(&self.callbacks_section());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn level(target: &str, conc: usize, p50: f64, p99: f64) -> Row {
        Row {
            target: target.into(),
            workload: "chat",
            size: "1k",
            body_bytes: 1000,
            concurrency: conc,
            ok: 1,
            errors: BTreeMap::new(),
            elapsed_s: 1.0,
            rps: 1.0,
            latency_us: Some(Percentiles {
                p50,
                p90: p50,
                p99,
                p999: p99,
                max: p99,
                mean: p50,
            }),
            ttfb_us: None,
            added_us: None,
            added_ttfb_us: None,
            cpu_s_per_1k: Some(0.03),
            rss_peak_mb: None,
        }
    }

    /// A report of `rows` and nothing else.
    fn report_of(rows: Vec<Row>) -> Report {
        Report {
            started: String::new(),
            version: "test",
            machine: Machine::detect(),
            command: String::new(),
            rest: Vec::new(),
            rows,
            hold: None,
            floor_note: None,
            callbacks: None,
        }
    }

    #[test]
    fn callbacks_are_judged_against_what_two_identical_gateways_differ_by() {
        let rows = vec![
            // c=1: on is 5 µs slower at p50, the A/A pair differs by 8: within noise.
            level("sluice", 1, 50.0, 100.0),
            level(WITH_CALLBACKS, 1, 55.0, 104.0),
            level(AGAIN, 1, 42.0, 110.0),
            // c=8: on is 40 µs slower, the A/A pair 3: not within noise.
            level("sluice", 8, 300.0, 900.0),
            level(WITH_CALLBACKS, 8, 340.0, 900.0),
            level(AGAIN, 8, 303.0, 905.0),
        ];
        let report = Report {
            callbacks: Some(CallbackDeliveries {
                requests: 1,
                bytes: 1,
            }),
            ..report_of(rows)
        };
        let section = report.callbacks_section();
        let verdicts: Vec<&str> = section
            .lines()
            .filter(|l| l.starts_with("| chat"))
            .map(|l| l.split('|').nth(12).unwrap_or("").trim())
            .collect();
        assert_eq!(verdicts, ["yes", "no"], "{section}");
    }

    #[test]
    fn sluice_is_stated_as_a_ratio_to_the_floor_and_judged_by_its_targets() {
        let added = |mut r: Row, p50: f64| {
            r.added_us = r.latency_us.map(|l| Percentiles { p50, ..l });
            r
        };
        let mut fast = added(level(FLOOR, 64, 90.0, 200.0), 40.0);
        fast.rps = 1000.0;
        let mut slow = added(level("sluice", 64, 95.0, 220.0), 50.0);
        slow.rps = 850.0;
        let rows = vec![
            added(level("sluice", 1, 70.0, 100.0), 60.0),
            added(level(FLOOR, 1, 60.0, 100.0), 50.0),
            slow,
            fast,
        ];
        let report = report_of(rows);
        let section = report.floor_section();
        let cells: Vec<Vec<&str>> = section
            .lines()
            .filter(|l| l.starts_with("| chat"))
            .map(|l| l.split('|').map(str::trim).collect())
            .collect();
        // c=1: 60 ÷ 50 = 1.20, within 1.25; c=64: 850 ÷ 1000 req/s, below 90 %.
        assert_eq!(cells[0][6], "1.20", "{section}");
        assert_eq!(cells[0][13], "met", "{section}");
        assert_eq!(cells[1][11], "0.85", "{section}");
        assert_eq!(cells[1][13], "not met", "{section}");

        let missing = Report {
            floor_note: Some("nginx is not installed".into()),
            ..report
        };
        assert!(missing
            .markdown()
            .contains("Not measured: nginx is not installed"));
    }

    #[test]
    fn percentiles_and_differences() {
        let mut h = Histogram::<u64>::new_with_bounds(1_000, 60_000_000_000, 3).unwrap();
        for v in 1..=1000u64 {
            h.record(v * 1000).unwrap();
        }
        let p = Percentiles::of(&h).unwrap();
        assert!((p.p50 - 500.0).abs() < 1.0, "{p:?}");
        assert!((p.p99 - 990.0).abs() < 1.0);
        let d = p.minus(&p);
        assert_eq!(d.p50, 0.0);
        assert!(Percentiles::of(&Histogram::<u64>::new(3).unwrap()).is_none());
    }
}
