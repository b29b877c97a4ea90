//! `sluice bench`'s options.

use std::path::PathBuf;

use clap::Args;

use crate::workload::{BodySize, Workload};

/// Options of `sluice bench`.
#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// Workloads to run, comma-separated.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = Workload::ALL)]
    pub workloads: Vec<Workload>,
    /// Request body sizes, comma-separated.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [BodySize::Small, BodySize::Medium, BodySize::Large])]
    pub sizes: Vec<BodySize>,
    /// Concurrency levels, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [1, 8, 64, 256])]
    pub concurrency: Vec<usize>,
    /// Measured requests per level (ignored with --duration-secs).
    #[arg(long, default_value_t = 2000)]
    pub requests: u64,
    /// Measure each level for this many seconds instead of a request count.
    #[arg(long)]
    pub duration_secs: Option<f64>,
    /// Warm-up requests before each level (not measured).
    #[arg(long, default_value_t = 200)]
    pub warmup: u64,
    /// Send at this fixed rate (requests/s) instead of closed loop; latency then counts from
    /// each request's intended send time.
    #[arg(long)]
    pub rate: Option<f64>,
    /// Use this running mock upstream instead of starting `sluice mock`.
    #[arg(long)]
    pub mock_url: Option<String>,
    /// Another gateway to measure in the same run, as NAME=URL. It must serve `bench` (chat,
    /// responses) and `bench-embed` (embeddings) from the same mock, without a key.
    #[arg(long = "target", value_parser = parse_named::<String>)]
    pub targets: Vec<(String, String)>,
    /// A peer's process id, as NAME=PID, for its CPU and memory (its child processes count).
    #[arg(long = "target-pid", value_parser = parse_named::<u32>)]
    pub target_pids: Vec<(String, u32)>,
    /// Do not start sluice (measure only the direct path and the --target gateways).
    #[arg(long)]
    pub no_sluice: bool,
    /// Do not measure the floor: nginx as a plain reverse proxy to the same mock, which runs
    /// beside sluice by default whenever nginx is installed.
    #[arg(long)]
    pub no_floor: bool,
    /// The nginx binary for the floor (default: `nginx` on PATH, else /usr/sbin/nginx).
    #[arg(long)]
    pub nginx: Option<PathBuf>,
    /// Do not measure the mock directly (a soak run only needs the gateway's own figures).
    #[arg(long)]
    pub no_direct: bool,
    /// Worker threads for the sluice and mock processes the benchmark starts.
    #[arg(long)]
    pub workers: Option<usize>,
    /// Model groups in the generated sluice config (memory is measured with them loaded).
    #[arg(long, default_value_t = 50)]
    pub models: usize,
    /// Concurrent slow streams to hold open through sluice to measure its memory (0: skip).
    #[arg(long, default_value_t = 1000)]
    pub hold_streams: usize,
    /// sluice speaks HTTP/2 with prior knowledge (h2c) to the mocks instead of HTTP/1.1
    /// (`http2_prior_knowledge: true` on every benchmark deployment).
    #[arg(long)]
    pub upstream_h2c: bool,
    /// Also measure a second sluice with every logging callback and the OTLP exporter on
    /// (pointed at a loopback receiver this run starts), and report the difference.
    #[arg(long)]
    pub callbacks: bool,
    /// Stream chunks per mock answer.
    #[arg(long, default_value_t = 8)]
    pub chunks: u32,
    /// Send this key as `Authorization: Bearer` to every target (a virtual key, to measure
    /// auth, limits and spend on the request path).
    #[arg(long, env = "SLUICE_BENCH_API_KEY")]
    pub api_key: Option<String>,
    /// Folder for report.json, report.md and the charts (a timestamped folder inside it).
    #[arg(long, default_value = "bench-results")]
    pub out: PathBuf,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
}

fn parse_named<T: std::str::FromStr>(s: &str) -> Result<(String, T), String>
where
    T::Err: std::fmt::Display,
{
    let (name, value) = s
        .split_once('=')
        .ok_or_else(|| format!("expected NAME=VALUE, got {s:?}"))?;
    if name.is_empty() || name == "direct" || name == "sluice" {
        return Err(format!("{name:?} is not a usable target name"));
    }
    let value = value.parse::<T>().map_err(|e| format!("{value:?}: {e}"))?;
    Ok((name.to_owned(), value))
}
