//! `sluice bench`: the overhead benchmark. It starts the mock upstream and sluice (or takes
//! running gateways), then measures every workload, body size and concurrency level directly
//! against the mock and through each gateway in the same run, interleaved, so that the
//! difference is the gateway's own cost on the same machine at the same moment.

mod args;
mod chart;
mod floor;
mod load;
mod procs;
mod report;
mod sink;
mod spawn;
mod workload;

pub use args::BenchArgs;
pub use report::Report;
pub use workload::{BodySize, Workload};

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use http::Uri;
use indicatif::{ProgressBar, ProgressStyle};

use load::{Drive, LoadClient, Measured, Shot, Stop};
use report::{Hold, Machine, Percentiles, Rest, Row};
use spawn::Spawned;

/// Why a benchmark run could not go on.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A child process did not start.
    #[error("cannot start {0}: {1}")]
    Spawn(String, String),
    /// A URL given on the command line does not parse.
    #[error("invalid URL {0:?}: {1}")]
    Url(String, String),
    /// Another option is unusable.
    #[error("{0}")]
    Args(String),
    /// Results could not be written.
    #[error("cannot write {}: {reason}", path.display())]
    Write {
        /// The file or folder.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

/// A gateway (or the mock itself) being measured.
#[derive(Debug)]
struct Target {
    name: String,
    base: String,
    pid: Option<u32>,
    client: LoadClient,
}

/// What a finished run leaves behind.
#[derive(Debug)]
pub struct Outcome {
    /// The results.
    pub report: Report,
    /// The folder holding report.json, report.md and the charts.
    pub dir: PathBuf,
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// Run the benchmark described by `args`.
pub async fn run(args: BenchArgs, command: String) -> Result<Outcome, BenchError> {
    let now = time::OffsetDateTime::now_utc();
    let stamp = now
        .format(&time::macros::format_description!(
            "[year][month][day]-[hour][minute][second]"
        ))
        .unwrap_or_else(|_| "run".into());
    let dir = args.out.join(&stamp);
    std::fs::create_dir_all(&dir).map_err(|e| BenchError::Write {
        path: dir.clone(),
        reason: e.to_string(),
    })?;
    let workers: Vec<String> = args
        .workers
        .map(|w| vec!["--workers".to_owned(), w.to_string()])
        .unwrap_or_default();

    // The upstream: a given mock, or `sluice mock` started here.
    let mut keep: Vec<Spawned> = Vec::new();
    let (mock_base, mock_pid) = match &args.mock_url {
        Some(url) => (
            url.trim_end_matches('/').trim_end_matches("/v1").to_owned(),
            None,
        ),
        None => {
            let mut a = vec![
                "mock".to_owned(),
                "--chunks".to_owned(),
                args.chunks.to_string(),
            ];
            a.extend(workers.iter().cloned());
            let m = spawn::start("mock", &a, &[], &dir)?;
            let out = (format!("http://{}", m.addr), Some(m.pid));
            keep.push(m);
            out
        }
    };

    let mut targets = Vec::new();
    if !args.no_direct {
        targets.push(Target {
            name: "direct".into(),
            base: mock_base.clone(),
            pid: mock_pid,
            client: load::client(),
        });
    }
    let mut rest = Vec::new();
    let mut sluice_pid = None;
    let mut received = None;
    if !args.no_sluice {
        let slow = if args.hold_streams > 0 {
            let a = vec![
                "mock".to_owned(),
                "--chunks".to_owned(),
                "20".to_owned(),
                "--chunk-interval-ms".to_owned(),
                "100".to_owned(),
            ];
            let m = spawn::start("mock-slow", &a, &[], &dir)?;
            let url = format!("http://{}", m.addr);
            keep.push(m);
            Some(url)
        } else {
            None
        };
        let models =
            spawn::gateway_config(&mock_base, slow.as_deref(), args.models, args.upstream_h2c);
        let cache = args.workloads.iter().any(|w| w.cached());
        let mut plain = models.clone();
        if cache {
            plain.push_str("litellm_settings:\n");
            plain.push_str(spawn::CACHE_SETTINGS);
        }
        if args.workloads.iter().any(|w| w.guarded()) {
            plain.push_str(spawn::PII_GUARDRAIL);
        }
        let g = start_gateway("sluice", "sluice.yaml", &plain, &workers, &dir)?;
        tokio::time::sleep(Duration::from_millis(300)).await;
        if let Some(r) = procs::read(g.pid) {
            rest.push(Rest {
                target: "sluice".into(),
                when: "before load",
                rss_mb: mb(r.rss),
            });
        }
        sluice_pid = Some(g.pid);
        targets.push(target_of("sluice", &g));
        keep.push(g);
        if args.callbacks {
            let (addr, got) = sink::start().await?;
            received = Some(got);
            let mut yaml = models;
            yaml.push_str(&sink::callbacks_config(&addr.to_string(), cache));
            let g = start_gateway(
                report::WITH_CALLBACKS,
                "sluice-callbacks.yaml",
                &yaml,
                &workers,
                &dir,
            )?;
            targets.push(target_of(report::WITH_CALLBACKS, &g));
            keep.push(g);
            // The same gateway as `sluice`, measured after `sluice+cb`: what two identical
            // runs differ by is the noise the callbacks' difference is judged against.
            let g = start_gateway(report::AGAIN, "sluice.yaml", &plain, &workers, &dir)?;
            targets.push(target_of(report::AGAIN, &g));
            keep.push(g);
        }
    }
    let mut floor_note = None;
    if !args.no_sluice && !args.no_floor {
        match floor::find(args.nginx.as_deref()) {
            Some(nginx) => {
                let workers = args.workers.unwrap_or_else(|| {
                    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
                });
                let n = floor::start(&nginx, &mock_base, workers, &dir)?;
                if let Some(r) = procs::read(n.pid) {
                    rest.push(Rest {
                        target: floor::NAME.into(),
                        when: "before load",
                        rss_mb: mb(r.rss),
                    });
                }
                targets.push(target_of(floor::NAME, &n));
                keep.push(n);
            }
            None => {
                let why = "nginx is not installed (Debian: apt-get install nginx-light), so the \
                           floor was not measured";
                eprintln!("sluice bench: {why}");
                floor_note = Some(why.to_owned());
            }
        }
    }
    for (name, url) in &args.targets {
        let pid = args
            .target_pids
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, p)| *p);
        if let Some(r) = pid.and_then(procs::read) {
            rest.push(Rest {
                target: name.clone(),
                when: "before load",
                rss_mb: mb(r.rss),
            });
        }
        targets.push(Target {
            name: name.clone(),
            base: url.trim_end_matches('/').trim_end_matches("/v1").to_owned(),
            pid,
            client: load::client(),
        });
    }

    // Held streams first, on a fresh process, so that its memory figure is not inflated by
    // what earlier levels left in allocator caches.
    let hold = match (sluice_pid, targets.iter().find(|t| t.name == "sluice")) {
        (Some(pid), Some(t)) if args.hold_streams > 0 => {
            Some(hold_streams(t, pid, args.hold_streams, args.upstream_h2c).await?)
        }
        _ => None,
    };
    let stop = match args.duration_secs {
        Some(s) => Stop::Time(Duration::from_secs_f64(s)),
        None => Stop::Requests(args.requests),
    };
    let levels = args.workloads.len() * args.sizes.len() * args.concurrency.len() * targets.len();
    let progress = progress_bar(&args, levels as u64, stop);
    let prompts: Vec<(BodySize, String)> = args.sizes.iter().map(|s| (*s, s.prompt())).collect();
    let auth = match &args.api_key {
        Some(k) => Some(
            http::HeaderValue::from_str(&format!("Bearer {k}"))
                .map_err(|_| BenchError::Args("--api-key is not valid in an HTTP header".into()))?,
        ),
        None => None,
    };
    let mut rows = Vec::new();
    for w in &args.workloads {
        for (size, prompt) in &prompts {
            let model = if *w == Workload::Embeddings {
                "bench-embed"
            } else {
                "bench"
            };
            let body = w.body(model, prompt);
            for &c in &args.concurrency {
                for t in &targets {
                    if let Some(p) = &progress {
                        p.set_message(format!("{} {} c={c} → {}", w.name(), size.name(), t.name));
                    }
                    let shot = Arc::new(Shot {
                        url: parse_uri(&format!("{}{}", t.base, w.path()))?,
                        body: body.clone(),
                        end_marker: end_marker(*w),
                        auth: auth.clone(),
                    });
                    let row = level(t, &shot, *w, *size, c, stop, &args, progress.as_ref()).await;
                    rows.push(row);
                }
            }
        }
    }
    if let Some(p) = &progress {
        p.finish_and_clear();
    }
    added_over_direct(&mut rows);

    tokio::time::sleep(Duration::from_millis(500)).await;
    for t in &targets {
        if t.name == "direct" {
            continue;
        }
        if let Some(r) = t.pid.and_then(procs::read) {
            rest.push(Rest {
                target: t.name.clone(),
                when: "after load",
                rss_mb: mb(r.rss),
            });
        }
    }

    let report = Report {
        started: now
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default(),
        version: env!("CARGO_PKG_VERSION"),
        machine: Machine::detect(),
        command,
        rest,
        rows,
        hold,
        floor_note,
        callbacks: received.map(|r| report::CallbackDeliveries {
            requests: r.requests.load(std::sync::atomic::Ordering::Relaxed),
            bytes: r.bytes.load(std::sync::atomic::Ordering::Relaxed),
        }),
    };
    write(&dir, &report)?;
    drop(keep);
    Ok(Outcome { report, dir })
}

fn parse_uri(s: &str) -> Result<Uri, BenchError> {
    s.parse()
        .map_err(|e: http::uri::InvalidUri| BenchError::Url(s.to_owned(), e.to_string()))
}

fn end_marker(w: Workload) -> Option<&'static [u8]> {
    match w {
        Workload::ChatStream | Workload::ChatStreamCached | Workload::ChatStreamPii => {
            Some(b"[DONE]")
        }
        Workload::ResponsesStream => Some(b"response.completed"),
        Workload::Chat
        | Workload::Responses
        | Workload::Embeddings
        | Workload::ChatCached
        | Workload::ChatPii => None,
    }
}

fn progress_bar(args: &BenchArgs, levels: u64, stop: Stop) -> Option<ProgressBar> {
    if args.quiet {
        return None;
    }
    let (len, template) = match stop {
        Stop::Requests(n) => (
            levels * (n + args.warmup),
            "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} requests · {msg}",
        ),
        Stop::Time(_) => (
            levels,
            "{spinner} [{elapsed_precise}] {wide_bar} level {pos}/{len} · {msg}",
        ),
    };
    let bar = ProgressBar::new(len);
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style);
    }
    Some(bar)
}

#[allow(clippy::too_many_arguments)]
async fn level(
    t: &Target,
    shot: &Arc<Shot>,
    w: Workload,
    size: BodySize,
    concurrency: usize,
    stop: Stop,
    args: &BenchArgs,
    progress: Option<&ProgressBar>,
) -> Row {
    let timeout = Duration::from_secs(60);
    let counted = matches!(stop, Stop::Requests(_))
        .then_some(progress)
        .flatten();
    if args.warmup > 0 {
        let warm = Drive {
            concurrency,
            stop: Stop::Requests(args.warmup.max(concurrency as u64)),
            rate: None,
            timeout,
        };
        let _ = load::run(&t.client, shot, warm, None).await;
        if let Some(p) = counted {
            p.inc(args.warmup);
        }
    }
    let sampler = t
        .pid
        .map(|pid| procs::PeakSampler::start(pid, Duration::from_millis(100)));
    let before = t.pid.and_then(procs::read);
    let drive = Drive {
        concurrency,
        stop,
        rate: args.rate,
        timeout,
    };
    let m: Measured = load::run(&t.client, shot, drive, counted).await;
    let after = t.pid.and_then(procs::read);
    let peak = match sampler {
        Some(s) => Some(s.finish().await),
        None => None,
    };
    if let (Some(p), Stop::Time(_)) = (progress, stop) {
        p.inc(1);
    }
    let total = m.total().max(1);
    Row {
        target: t.name.clone(),
        workload: w.name(),
        size: size.name(),
        body_bytes: shot.body.len(),
        concurrency,
        ok: m.ok,
        errors: m.errors.clone(),
        elapsed_s: m.elapsed.as_secs_f64(),
        rps: m.ok as f64 / m.elapsed.as_secs_f64().max(1e-9),
        latency_us: Percentiles::of(&m.latency),
        ttfb_us: Percentiles::of(&m.ttfb),
        added_us: None,
        added_ttfb_us: None,
        cpu_s_per_1k: match (before, after) {
            (Some(b), Some(a)) => {
                Some(a.cpu.saturating_sub(b.cpu).as_secs_f64() * 1000.0 / total as f64)
            }
            _ => None,
        },
        rss_peak_mb: peak.map(mb),
    }
}

/// Fill in each gateway row's latency over the direct row of the same level.
fn added_over_direct(rows: &mut [Row]) {
    let direct: Vec<Row> = rows
        .iter()
        .filter(|r| r.target == "direct")
        .cloned()
        .collect();
    for r in rows.iter_mut().filter(|r| r.target != "direct") {
        let Some(d) = direct.iter().find(|d| {
            d.workload == r.workload && d.size == r.size && d.concurrency == r.concurrency
        }) else {
            continue;
        };
        r.added_us = r.latency_us.zip(d.latency_us).map(|(g, d)| g.minus(&d));
        r.added_ttfb_us = r.ttfb_us.zip(d.ttfb_us).map(|(g, d)| g.minus(&d));
    }
}

/// Open `n` slow streams through sluice at once and read its peak memory meanwhile.
async fn hold_streams(t: &Target, pid: u32, n: usize, h2c: bool) -> Result<Hold, BenchError> {
    let shot = Arc::new(Shot {
        url: parse_uri(&format!("{}/v1/chat/completions", t.base))?,
        body: Workload::ChatStream.body("bench-slow", "hold"),
        end_marker: Some(b"[DONE]"),
        auth: None,
    });
    let sampler = procs::PeakSampler::start(pid, Duration::from_millis(50));
    let drive = Drive {
        concurrency: n,
        stop: Stop::Requests(n as u64),
        rate: None,
        timeout: Duration::from_secs(60),
    };
    let m = load::run(&load::client(), &shot, drive, None).await;
    let peak = sampler.finish().await;
    Ok(Hold {
        streams: n,
        ok: m.ok,
        errors: m.errors,
        rss_peak_mb: mb(peak),
        upstream: if h2c { "h2c" } else { "HTTP/1.1" },
        ttfb_max_ms: m.ttfb.max() as f64 / 1e6,
        seconds: m.elapsed.as_secs_f64(),
    })
}

/// Write `yaml` to `file` in the run's folder and start `sluice serve` on it (request logging
/// off, as for the peers).
fn start_gateway(
    name: &str,
    file: &str,
    yaml: &str,
    workers: &[String],
    dir: &std::path::Path,
) -> Result<Spawned, BenchError> {
    let config = dir.join(file);
    std::fs::write(&config, yaml).map_err(|e| BenchError::Write {
        path: config.clone(),
        reason: e.to_string(),
    })?;
    let mut args = vec![
        "serve".to_owned(),
        "--config".to_owned(),
        config.display().to_string(),
    ];
    args.extend(workers.iter().cloned());
    spawn::start(name, &args, &[("SLUICE_LOG", "warn")], dir)
}

/// A started gateway as a target to measure.
fn target_of(name: &str, g: &Spawned) -> Target {
    Target {
        name: name.into(),
        base: format!("http://{}", g.addr),
        pid: Some(g.pid),
        client: load::client(),
    }
}

fn write(dir: &std::path::Path, report: &Report) -> Result<(), BenchError> {
    let put = |name: &str, bytes: &[u8]| {
        let p = dir.join(name);
        std::fs::write(&p, bytes).map_err(|e| BenchError::Write {
            path: p,
            reason: e.to_string(),
        })
    };
    let json = serde_json::to_vec_pretty(report).unwrap_or_default();
    put("report.json", &json)?;
    put("report.md", report.markdown().as_bytes())?;
    chart::write_all(report, dir).map_err(|e| BenchError::Write {
        path: dir.to_owned(),
        reason: e,
    })?;
    Ok(())
}
