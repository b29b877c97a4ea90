//! Command-line interface: `sluice serve`, `sluice check-config`, `sluice mock`.

use std::net::IpAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::telemetry::LogFormat;

/// sluice: a small, fast LLM gateway speaking the OpenAI API.
#[derive(Debug, Parser)]
#[command(
    name = "sluice",
    version,
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
    Mock(MockArgs),
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
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Seconds to let in-flight requests and streams finish after SIGTERM/SIGINT.
    #[arg(long, default_value_t = 30.0)]
    pub shutdown_grace_secs: f64,
    /// Write the bound address to this file once listening (for scripts and tests using port 0).
    #[arg(long)]
    pub ready_file: Option<PathBuf>,
    /// Worker threads (default: one per core).
    #[arg(long, env = "SLUICE_WORKERS")]
    pub workers: Option<usize>,
}

/// Options of `sluice mock`.
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
    /// Write the bound address to this file once listening.
    #[arg(long)]
    pub ready_file: Option<PathBuf>,
    /// Worker threads (default: one per core).
    #[arg(long)]
    pub workers: Option<usize>,
}
