//! Logs and request records: `tracing` with a non-blocking writer (a dedicated thread does the
//! I/O, so a slow terminal or pipe never stalls a request), and a recorder task that turns each
//! finished request into one log line, Prometheus metrics, and (fanned out from that task, never
//! from a request) OpenTelemetry traces and logging callbacks.

pub mod callbacks;
pub mod mcp;
pub mod metrics;
pub mod otel;
mod recorder;

pub use metrics::Metrics;
pub use recorder::{finish_worker, LogSink, Recorder, QUEUE_CAPACITY};
pub use sluice_core::poll::{Poller, POLL_EVERY};
pub use sluice_core::record::{
    ms, AttemptEnd, AttemptSpan, Attempts, Content, Outcome, RecordSink, RequestRecord,
    StreamFrames, MAX_STREAM_KEPT,
};
pub use sluice_core::trace_context::{self, new_span_id, SpanId, TraceContext};
use tracing_appender::non_blocking::WorkerGuard;
use tracing_subscriber::EnvFilter;

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line, for log shippers.
    Json,
}

/// Install the global subscriber. Keep the guard alive for the process's life: dropping it
/// flushes and stops the writer thread. The filter comes from `SLUICE_LOG` (then `RUST_LOG`),
/// default `info`.
pub fn init(format: LogFormat) -> WorkerGuard {
    let filter = std::env::var("SLUICE_LOG")
        .or_else(|_| std::env::var("RUST_LOG"))
        .ok()
        .and_then(|f| EnvFilter::try_new(f).ok())
        .unwrap_or_else(|| EnvFilter::new("info"));
    let (writer, guard) = tracing_appender::non_blocking(std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer)
        .with_target(false);
    let result = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
    if let Err(e) = result {
        eprintln!("sluice: logging already initialised: {e}");
    }
    guard
}
