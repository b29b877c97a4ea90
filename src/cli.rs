//! Command-line interface: `sluice serve`, `sluice check-config`, `sluice mock`,
//! `sluice bench`, `sluice healthcheck`, `sluice import`.

use std::net::IpAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

#[cfg(feature = "bench")]
use sluice_bench::BenchArgs;
use sluice_telemetry::LogFormat;

/// What `sluice --version` prints after the name: the crate version and the git commit the
/// binary was built from (`build.rs`; `unknown` outside git), so that a running container or
/// package can be traced back to its source.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("SLUICE_GIT_COMMIT"),
    ")"
);

/// sluice: a small, fast LLM gateway speaking the OpenAI API.
#[derive(Debug, Parser)]
#[command(
    name = "sluice",
    version = VERSION,
    about,
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    /// What to run; without one, `sluice --config FILE` serves (as `litellm --config` does).
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Serve options when no subcommand is given.
    #[command(flatten)]
    pub serve: ServeArgs,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Start the gateway.
    Serve(ServeArgs),
    /// Validate a config file and print the resolved model list (secrets masked).
    CheckConfig {
        /// The config file (LiteLLM `config.yaml` format).
        file: PathBuf,
    },
    /// Run the built-in mock provider as a standalone OpenAI-compatible server.
    #[cfg(feature = "mock")]
    Mock(MockArgs),
    /// Measure the latency sluice adds over calling the upstream directly, its throughput,
    /// CPU and memory, side by side with other gateways.
    #[cfg(feature = "bench")]
    Bench(BenchArgs),
    /// Ask a running gateway whether it is alive: exit 0 on a 2xx from its liveness route,
    /// 1 otherwise. For container HEALTHCHECKs and exec probes where there is no curl.
    Healthcheck(HealthcheckArgs),
    /// Bring another gateway's database into sluice's store (keys keep working unchanged).
    #[command(subcommand)]
    Import(ImportFrom),
}

/// The gateways `sluice import` reads.
#[derive(Debug, Subcommand)]
pub enum ImportFrom {
    /// A LiteLLM proxy's PostgreSQL database: keys, teams, users, organizations, budgets, end
    /// users, stored deployments, MCP servers, guardrails and spend logs. Re-runnable; with
    /// --follow, keeps importing while both gateways serve the same keys.
    Litellm(LitellmImportArgs),
}

/// Options of `sluice import litellm`.
#[derive(Debug, Args)]
pub struct LitellmImportArgs {
    /// LiteLLM's database (postgres://...).
    #[arg(long, env = "LITELLM_DATABASE_URL", hide_env_values = true)]
    pub database_url: String,
    /// sluice's config: names the store written to (general_settings.database_url, else
    /// DATABASE_URL, else sluice.db in --data-dir) and the master key.
    #[arg(short, long, env = "SLUICE_CONFIG")]
    pub config: PathBuf,
    /// Where the embedded SQLite store lives when no database_url is configured (as for
    /// `serve`).
    #[arg(long, default_value = ".", env = "SLUICE_DATA_DIR")]
    pub data_dir: PathBuf,
    /// Print what would be imported and what cannot be carried over; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// After the first pass, import again every this many seconds (new keys, blocks,
    /// deletions, spend) until SIGINT or SIGTERM: for a canary where both gateways serve.
    #[arg(long, value_name = "SECONDS")]
    pub follow: Option<f64>,
    /// Which spend logs to import: `all`, `none`, or those since a date (`2026-01-31`) or
    /// time (RFC 3339).
    #[arg(long, default_value = "all", value_parser = SpendLogsArg::parse)]
    pub spend_logs: SpendLogsArg,
    /// Where to write the MCP servers and guardrails stored in LiteLLM's database, as a
    /// config file to `include:` (default: litellm-import.yaml beside --config).
    #[arg(long)]
    pub config_out: Option<PathBuf>,
    /// The key LiteLLM encrypted its stored secrets with: its LITELLM_SALT_KEY, else its
    /// master key (default: LITELLM_SALT_KEY, else this config's master_key).
    #[arg(long, env = "LITELLM_SALT_KEY", hide_env_values = true)]
    pub litellm_salt_key: Option<String>,
    /// Print each pass's report as one line of JSON.
    #[arg(long)]
    pub json: bool,
}

/// `--spend-logs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpendLogsArg {
    /// Every spend log.
    All,
    /// None.
    None,
    /// Those that started at or after this time.
    Since(time::OffsetDateTime),
}

impl SpendLogsArg {
    fn parse(s: &str) -> Result<Self, String> {
        match s {
            "all" => Ok(Self::All),
            "none" => Ok(Self::None),
            _ => {
                use time::format_description::well_known::Rfc3339;
                if let Ok(t) = time::OffsetDateTime::parse(s, &Rfc3339) {
                    return Ok(Self::Since(t));
                }
                let day = time::macros::format_description!("[year]-[month]-[day]");
                time::Date::parse(s, &day)
                    .map(|d| Self::Since(d.midnight().assume_utc()))
                    .map_err(|_| {
                        format!("`{s}` is not all, none, a date (2026-01-31) or an RFC 3339 time")
                    })
            }
        }
    }
}

/// Options of `sluice healthcheck`. By default it asks the address `serve` would listen on,
/// read from the same flags' environment variables, so one `-e SLUICE_PORT=…` serves both.
#[derive(Debug, Args)]
pub struct HealthcheckArgs {
    /// The URL to GET (plain http); default `http://<host>:<port>/health/liveliness`.
    #[arg(long, env = "SLUICE_HEALTHCHECK_URL")]
    pub url: Option<String>,
    /// The gateway's listen address; a wildcard (0.0.0.0, ::) is asked on loopback.
    #[arg(long, default_value = "127.0.0.1", env = "SLUICE_HOST")]
    pub host: IpAddr,
    /// The gateway's port.
    #[arg(short, long, default_value_t = 4000, env = "SLUICE_PORT")]
    pub port: u16,
    /// Seconds to wait for the answer, connection included.
    #[arg(long, default_value_t = 3.0)]
    pub timeout_secs: f64,
}

/// Options of `sluice serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The config file (LiteLLM `config.yaml` format).
    #[arg(short, long, env = "SLUICE_CONFIG")]
    pub config: Option<PathBuf>,
    /// Address to listen on. Only loopback unless you ask for more.
    #[arg(long, default_value = "127.0.0.1", env = "SLUICE_HOST")]
    pub host: IpAddr,
    /// Port to listen on (0 picks a free one and logs it).
    #[arg(short, long, default_value_t = 4000, env = "SLUICE_PORT")]
    pub port: u16,
    /// Log line format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text, env = "SLUICE_LOG_FORMAT")]
    pub log_format: LogFormat,
    /// Seconds to let in-flight requests and streams finish after SIGTERM/SIGINT. Whatever
    /// stops sluice (Docker's stop timeout, Kubernetes' terminationGracePeriodSeconds,
    /// systemd's TimeoutStopSec) should wait longer than this.
    #[arg(long, default_value_t = 30.0, env = "SLUICE_SHUTDOWN_GRACE_SECS")]
    pub shutdown_grace_secs: f64,
    /// Write the bound address to this file once listening (for scripts and tests using port 0).
    #[arg(long)]
    pub ready_file: Option<PathBuf>,
    /// Worker threads, each accepting and serving its own connections (default: one per core).
    #[arg(long, env = "SLUICE_WORKERS")]
    pub workers: Option<usize>,
    /// Where the embedded SQLite store (`sluice.db`) and the spend spool live, when no
    /// `database_url` is configured.
    #[arg(long, default_value = ".", env = "SLUICE_DATA_DIR")]
    pub data_dir: PathBuf,
    /// Serve HTTPS (ALPN h2 and http/1.1) with this PEM certificate chain; needs --tls-key.
    /// Overrides general_settings.ssl_certfile_path.
    #[arg(long, env = "SLUICE_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key (PKCS#8, PKCS#1 or SEC1) of --tls-cert.
    /// Overrides general_settings.ssl_keyfile_path.
    #[arg(long, env = "SLUICE_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
}

/// Options of `sluice mock`.
#[cfg(feature = "mock")]
#[derive(Debug, Args)]
pub struct MockArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: IpAddr,
    /// Port to listen on (0 picks a free one).
    #[arg(short, long, default_value_t = 4010)]
    pub port: u16,
    /// Milliseconds before each answer starts.
    #[arg(long, default_value_t = 0)]
    pub latency_ms: u64,
    /// Milliseconds between stream chunks.
    #[arg(long, default_value_t = 0)]
    pub chunk_interval_ms: u64,
    /// Content chunks per stream.
    #[arg(long, default_value_t = 8)]
    pub chunks: u32,
    /// Completion tokens (words) per answer.
    #[arg(long, default_value_t = 16)]
    pub response_tokens: u32,
    /// Length of embedding vectors.
    #[arg(long, default_value_t = 16)]
    pub embedding_dims: u32,
    /// Answer with this HTTP error status (fault injection; see --failure-rate).
    #[arg(long)]
    pub fail_status: Option<u16>,
    /// Share of requests (0–1) that get --fail-status or --reset (default: all).
    #[arg(long)]
    pub failure_rate: Option<f64>,
    /// `Retry-After` seconds sent with injected errors.
    #[arg(long)]
    pub retry_after: Option<f64>,
    /// Break the connection after the response head instead of answering.
    #[arg(long)]
    pub reset: bool,
    /// Pause streams for --stall-ms after this many chunks.
    #[arg(long)]
    pub stall_after_chunks: Option<usize>,
    /// Length of the stream pause, in milliseconds; without --stall-after-chunks, hold back
    /// whole answers this long (for the --failure-rate share of requests).
    #[arg(long, default_value_t = 0)]
    pub stall_ms: u64,
    /// Break streams off after this many chunks.
    #[arg(long)]
    pub cut_after_chunks: Option<usize>,
    /// Answer 200 with a body that is not JSON (for the --failure-rate share of requests).
    #[arg(long)]
    pub garbage: bool,
    /// Answer a valid chat completion padded to about this many bytes.
    #[arg(long)]
    pub huge_bytes: Option<usize>,
    /// AWS access key id the Bedrock paths check SigV4 signatures against (with
    /// --aws-secret-access-key); unset, signatures are not checked.
    #[arg(long, env = "SLUICE_MOCK_AWS_ACCESS_KEY_ID")]
    pub aws_access_key_id: Option<String>,
    /// The secret for --aws-access-key-id.
    #[arg(
        long,
        env = "SLUICE_MOCK_AWS_SECRET_ACCESS_KEY",
        hide_env_values = true
    )]
    pub aws_secret_access_key: Option<String>,
    /// The API key the OpenAI, Anthropic, Azure, Gemini and Cohere paths require (a 401
    /// otherwise); unset, keys are not checked.
    #[arg(long, env = "SLUICE_MOCK_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// Keep the newest 512 inference requests received (method, path, query, headers with
    /// credentials redacted, JSON body) for `GET /mock/requests`; `DELETE /mock/requests`
    /// clears them. Off by default, so benchmarks pay nothing for it.
    #[arg(long)]
    pub record: bool,
    /// Write the bound address to this file once listening.
    #[arg(long)]
    pub ready_file: Option<PathBuf>,
    /// Worker threads, each accepting and serving its own connections (default: one per core).
    #[arg(long)]
    pub workers: Option<usize>,
    /// Serve HTTPS with this PEM certificate chain (needs --tls-key), as hosted providers do.
    #[arg(long, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Require a client certificate issued by a CA in this PEM file (mutual TLS, as OpenAI's
    /// mTLS endpoints do); needs --tls-cert.
    #[arg(long, requires = "tls_cert")]
    pub tls_client_ca: Option<PathBuf>,
}
