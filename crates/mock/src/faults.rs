//! Fault injection: the mock fails the way providers do, so that retries, fallbacks, cooldowns,
//! timeouts and hedging are tested against real sockets. Faults come from the deployment's or
//! server's settings (`mock_status`, ... / `sluice mock --fail-status ...`), then per request
//! from `x-mock-*` headers (in-process mock) or a `mock_fault` object in the body (which
//! sluice passes through untouched, so it reaches a standalone `sluice mock` too).

use std::time::Duration;

use http::HeaderMap;
use serde::Deserialize;

/// How a mock answer goes wrong.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Faults {
    /// Answer with this HTTP error status (OpenAI's error body for it).
    pub status: Option<u16>,
    /// Share of requests (0–1) that get the fault; all when unset.
    pub failure_rate: Option<f64>,
    /// `Retry-After` seconds sent with the error.
    pub retry_after: Option<f64>,
    /// Send the head, then break the connection instead of a body.
    pub reset: bool,
    /// A stream pauses for [`Faults::stall`] after this many chunks.
    pub stall_after_chunks: Option<usize>,
    /// How long a stream pauses; without `stall_after_chunks`, how long the whole answer is
    /// held back (a stalling deployment, for the share `failure_rate` of requests).
    pub stall: Duration,
    /// A stream breaks off after this many chunks.
    pub cut_after_chunks: Option<usize>,
    /// Answer 200 with bytes that are not JSON (a proxy's HTML page, a corrupted body).
    pub garbage: bool,
    /// Answer a valid OpenAI chat completion padded to about this many bytes (an upstream
    /// that sends far more than anyone expects).
    pub huge_bytes: Option<usize>,
}

/// The `mock_fault` object a request body may carry.
#[derive(Debug, Default, Deserialize)]
pub(super) struct BodyFault {
    status: Option<u16>,
    failure_rate: Option<f64>,
    retry_after: Option<f64>,
    reset: Option<bool>,
    latency_ms: Option<u64>,
    stall_after_chunks: Option<usize>,
    stall_ms: Option<u64>,
    cut_after_chunks: Option<usize>,
    garbage: Option<bool>,
    huge_bytes: Option<usize>,
}

impl BodyFault {
    /// The latency this request asks for.
    pub(super) fn latency(&self) -> Option<Duration> {
        self.latency_ms.map(Duration::from_millis)
    }
}

impl Faults {
    /// Apply `x-mock-status`, `x-mock-failure-rate`, `x-mock-retry-after`, `x-mock-reset`,
    /// `x-mock-stall-after-chunks`, `x-mock-stall-ms`, `x-mock-cut-after-chunks`,
    /// `x-mock-garbage` and `x-mock-huge-bytes`.
    pub(super) fn with_headers(mut self, headers: &HeaderMap) -> Self {
        let get = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::trim)
        };
        let num = |name: &str| get(name).and_then(|s| s.parse::<f64>().ok());
        let whole = |name: &str| get(name).and_then(|s| s.parse::<usize>().ok());
        if let Some(s) = get("x-mock-status").and_then(|s| s.parse().ok()) {
            self.status = Some(s);
        }
        self.failure_rate = num("x-mock-failure-rate").or(self.failure_rate);
        self.retry_after = num("x-mock-retry-after").or(self.retry_after);
        let flag = |v: &str| v == "1" || v.eq_ignore_ascii_case("true");
        if let Some(r) = get("x-mock-reset") {
            self.reset = flag(r);
        }
        if let Some(g) = get("x-mock-garbage") {
            self.garbage = flag(g);
        }
        self.huge_bytes = whole("x-mock-huge-bytes").or(self.huge_bytes);
        self.stall_after_chunks = whole("x-mock-stall-after-chunks").or(self.stall_after_chunks);
        if let Some(ms) = whole("x-mock-stall-ms") {
            self.stall = Duration::from_millis(ms as u64);
        }
        self.cut_after_chunks = whole("x-mock-cut-after-chunks").or(self.cut_after_chunks);
        self
    }

    /// Apply a request body's `mock_fault`.
    pub(super) fn with_body(mut self, f: &BodyFault) -> Self {
        self.status = f.status.or(self.status);
        self.failure_rate = f.failure_rate.or(self.failure_rate);
        self.retry_after = f.retry_after.or(self.retry_after);
        self.reset = f.reset.unwrap_or(self.reset);
        self.stall_after_chunks = f.stall_after_chunks.or(self.stall_after_chunks);
        if let Some(ms) = f.stall_ms {
            self.stall = Duration::from_millis(ms);
        }
        self.cut_after_chunks = f.cut_after_chunks.or(self.cut_after_chunks);
        self.garbage = f.garbage.unwrap_or(self.garbage);
        self.huge_bytes = f.huge_bytes.or(self.huge_bytes);
        self
    }

    /// Whether this request gets the status, reset, stall, garbage or huge-answer fault
    /// (drawn per request).
    pub(super) fn fires(&self) -> bool {
        (self.status.is_some()
            || self.reset
            || self.stalls_answer()
            || self.garbage
            || self.huge_bytes.is_some())
            && fastrand::f64() < self.failure_rate.unwrap_or(1.0)
    }

    /// The whole answer is held back (rather than a stream paused midway).
    pub(super) fn stalls_answer(&self) -> bool {
        !self.stall.is_zero() && self.stall_after_chunks.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_apply_in_order() {
        let base = Faults {
            status: Some(500),
            failure_rate: Some(0.0),
            ..Faults::default()
        };
        assert!(!base.fires(), "rate 0 never fires");
        let mut h = HeaderMap::new();
        h.insert("x-mock-failure-rate", "1".parse().unwrap());
        h.insert("x-mock-retry-after", "2".parse().unwrap());
        let f = base.clone().with_headers(&h);
        assert!(f.fires());
        assert_eq!(f.retry_after, Some(2.0));
        let body: BodyFault =
            serde_json::from_str(r#"{"status":429,"stall_after_chunks":2,"stall_ms":30}"#).unwrap();
        let f = f.with_body(&body);
        assert_eq!(f.status, Some(429));
        assert_eq!(f.stall_after_chunks, Some(2));
        assert_eq!(f.stall, Duration::from_millis(30));
        assert!(!Faults::default().fires());
        let body: BodyFault =
            serde_json::from_str(r#"{"garbage":true,"huge_bytes":1000}"#).unwrap();
        let f = Faults::default().with_body(&body);
        assert!(f.fires() && f.garbage);
        assert_eq!(f.huge_bytes, Some(1000));
        let mut h = HeaderMap::new();
        h.insert("x-mock-garbage", "0".parse().unwrap());
        h.insert("x-mock-huge-bytes", "5".parse().unwrap());
        let f = f.with_headers(&h);
        assert!(!f.garbage);
        assert_eq!(f.huge_bytes, Some(5));
    }

    #[test]
    fn failure_rate_is_a_share() {
        let f = Faults {
            status: Some(503),
            failure_rate: Some(0.3),
            ..Faults::default()
        };
        let fired = (0..10_000).filter(|_| f.fires()).count();
        assert!((2_700..3_300).contains(&fired), "{fired}");
    }
}
