//! What sluice notes about each request once it is over: the log line today, the spend record
//! and metrics later. Built along the pipeline, emitted exactly once when the response ends.

use std::sync::Arc;
use std::time::{Duration, Instant};

use http::{HeaderValue, Method};

use crate::spend::Usage;

/// How a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Answered (whatever the status).
    Done,
    /// The stream reached its proper end.
    StreamComplete,
    /// The upstream ended or broke the stream before its end marker.
    StreamCut,
    /// The client went away before the answer was complete.
    ClientGone,
}

impl Outcome {
    fn name(self) -> &'static str {
        match self {
            Self::Done => "done",
            Self::StreamComplete => "complete",
            Self::StreamCut => "upstream_cut",
            Self::ClientGone => "client_gone",
        }
    }
}

/// One request's facts.
#[derive(Debug, Clone)]
pub struct RequestRecord {
    /// `x-request-id`.
    pub request_id: HeaderValue,
    /// HTTP method.
    pub method: Method,
    /// Route label (the path pattern, never a raw path with ids).
    pub route: &'static str,
    /// Model group.
    pub model: Option<Arc<str>>,
    /// Deployment id.
    pub deployment: Option<Arc<str>>,
    /// Provider prefix.
    pub provider: Option<&'static str>,
    /// Status sent to the client.
    pub status: u16,
    /// Streaming request.
    pub stream: bool,
    /// When the request arrived.
    pub start: Instant,
    /// Time spent in sluice itself (before the upstream send, and relaying the answer).
    pub overhead: Duration,
    /// Time to the first byte of the answer, for streams.
    pub ttfb: Option<Duration>,
    /// Tokens used.
    pub usage: Option<Usage>,
    /// How it ended.
    pub outcome: Outcome,
    /// Error code when sluice itself failed the request.
    pub error: Option<&'static str>,
    /// Kind of the upstream failure that ended the request, if one did.
    pub failure: Option<&'static str>,
    /// Retried attempts.
    pub retries: u32,
    /// Fallback groups moved to.
    pub fallbacks: u32,
    /// Hedged second attempts.
    pub hedges: u32,
}

impl RequestRecord {
    /// A record for a request that just arrived.
    pub fn new(
        request_id: HeaderValue,
        method: Method,
        route: &'static str,
        start: Instant,
    ) -> Self {
        Self {
            request_id,
            method,
            route,
            model: None,
            deployment: None,
            provider: None,
            status: 0,
            stream: false,
            start,
            overhead: Duration::ZERO,
            ttfb: None,
            usage: None,
            outcome: Outcome::Done,
            error: None,
            failure: None,
            retries: 0,
            fallbacks: 0,
            hedges: 0,
        }
    }

    /// An empty record with the same id, left behind when a record is moved out of a struct
    /// that is being dropped (cheaper than cloning the whole record).
    pub fn clone_shell(&self) -> Self {
        Self::new(
            self.request_id.clone(),
            self.method.clone(),
            self.route,
            self.start,
        )
    }

    /// Write the request's log line (no bodies, no keys).
    pub fn emit(&self) {
        let usage = self.usage.unwrap_or_default();
        tracing::info!(
            request_id = self.request_id.to_str().unwrap_or("-"),
            method = %self.method,
            route = self.route,
            model = self.model.as_deref().unwrap_or("-"),
            deployment = self.deployment.as_deref().unwrap_or("-"),
            provider = self.provider.unwrap_or("-"),
            status = self.status,
            stream = self.stream,
            outcome = self.outcome.name(),
            error = self.error.or(self.failure).unwrap_or("-"),
            retries = self.retries,
            fallbacks = self.fallbacks,
            duration_ms = ms(self.start.elapsed()),
            overhead_ms = ms(self.overhead),
            ttfb_ms = self.ttfb.map(ms),
            prompt_tokens = usage.prompt_tokens,
            completion_tokens = usage.completion_tokens,
            cached_tokens = usage.cached_tokens,
            "request"
        );
    }
}

/// Milliseconds with microsecond precision, for logs and headers.
pub fn ms(d: Duration) -> f64 {
    (d.as_micros() as f64) / 1000.0
}
