//! The load generator: N workers over a pooled hyper client, each sending the same request
//! until the level's count or time is used up. Closed loop by default; with a rate, each
//! request has an intended send time and its latency counts from then, so a stalled server
//! cannot hide its stall by slowing the sender (no coordinated omission).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use http::header::CONTENT_TYPE;
use http::{HeaderValue, Request, Uri};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use indicatif::ProgressBar;

/// The HTTP client the benchmark sends with (plain HTTP/1.1 on loopback, connections reused).
pub type LoadClient = Client<HttpConnector, Full<Bytes>>;

/// A client whose pool keeps every connection the workers open.
pub fn client() -> LoadClient {
    let mut http = HttpConnector::new();
    http.set_nodelay(true);
    Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(usize::MAX)
        .pool_idle_timeout(Duration::from_secs(90))
        .build(http)
}

/// One request, sent over and over.
#[derive(Debug, Clone)]
pub struct Shot {
    /// Full URL.
    pub url: Uri,
    /// JSON body.
    pub body: Bytes,
    /// The answer is SSE; it must end with this marker to count as complete.
    pub end_marker: Option<&'static [u8]>,
    /// `Authorization` to send, if any.
    pub auth: Option<HeaderValue>,
}

/// When a level stops.
#[derive(Debug, Clone, Copy)]
pub enum Stop {
    /// After this many requests.
    Requests(u64),
    /// After this long.
    Time(Duration),
}

/// How one level is driven.
#[derive(Debug, Clone, Copy)]
pub struct Drive {
    /// Requests in flight at once.
    pub concurrency: usize,
    /// When to stop.
    pub stop: Stop,
    /// Fixed send rate (requests/s) instead of closed loop.
    pub rate: Option<f64>,
    /// Give up on a request after this long.
    pub timeout: Duration,
}

/// What one level measured.
#[derive(Debug)]
pub struct Measured {
    /// Whole-request latency in nanoseconds (to the last byte).
    pub latency: Histogram<u64>,
    /// Time to the first body byte in nanoseconds (streams).
    pub ttfb: Histogram<u64>,
    /// Successful requests.
    pub ok: u64,
    /// Failures by kind.
    pub errors: BTreeMap<String, u64>,
    /// Wall time of the level.
    pub elapsed: Duration,
}

#[expect(
    clippy::expect_used,
    reason = "constant bounds that hdrhistogram accepts"
)]
fn histogram() -> Histogram<u64> {
    // 1 µs .. 120 s at 3 significant digits.
    Histogram::new_with_bounds(1_000, 120_000_000_000, 3).expect("valid histogram bounds")
}

impl Measured {
    fn empty() -> Self {
        Self {
            latency: histogram(),
            ttfb: histogram(),
            ok: 0,
            errors: BTreeMap::new(),
            elapsed: Duration::ZERO,
        }
    }

    fn merge(&mut self, other: Self) {
        let _ = self.latency.add(&other.latency);
        let _ = self.ttfb.add(&other.ttfb);
        self.ok += other.ok;
        for (k, v) in other.errors {
            *self.errors.entry(k).or_default() += v;
        }
    }

    /// All requests sent, good or bad.
    pub fn total(&self) -> u64 {
        self.ok + self.errors.values().sum::<u64>()
    }
}

/// Run one level and return what it measured.
pub async fn run(
    client: &LoadClient,
    shot: &Arc<Shot>,
    drive: Drive,
    progress: Option<&ProgressBar>,
) -> Measured {
    let next = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut workers = Vec::with_capacity(drive.concurrency);
    for _ in 0..drive.concurrency.max(1) {
        let client = client.clone();
        let shot = shot.clone();
        let next = next.clone();
        let progress = progress.cloned();
        workers.push(tokio::spawn(async move {
            let mut m = Measured::empty();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let intended = match drive.stop {
                    Stop::Requests(n) if i >= n => break,
                    Stop::Time(d) if start.elapsed() >= d => break,
                    _ => match drive.rate {
                        Some(rate) if rate > 0.0 => {
                            let at = start + Duration::from_secs_f64(i as f64 / rate);
                            tokio::time::sleep_until(at.into()).await;
                            at
                        }
                        _ => Instant::now(),
                    },
                };
                one(&client, &shot, intended, drive.timeout, &mut m).await;
                if let Some(p) = &progress {
                    p.inc(1);
                }
            }
            m
        }));
    }
    let mut all = Measured::empty();
    for w in workers {
        match w.await {
            Ok(m) => all.merge(m),
            Err(_) => *all.errors.entry("worker_panicked".into()).or_default() += 1,
        }
    }
    all.elapsed = start.elapsed();
    all
}

async fn one(
    client: &LoadClient,
    shot: &Shot,
    intended: Instant,
    timeout: Duration,
    m: &mut Measured,
) {
    let result = tokio::time::timeout(timeout, exchange(client, shot, intended)).await;
    match result {
        Ok(Ok((ttfb, total))) => {
            m.ok += 1;
            let _ = m.latency.record(total.as_nanos().max(1) as u64);
            if let Some(t) = ttfb {
                let _ = m.ttfb.record(t.as_nanos().max(1) as u64);
            }
        }
        Ok(Err(kind)) => *m.errors.entry(kind).or_default() += 1,
        Err(_) => *m.errors.entry("timeout".into()).or_default() += 1,
    }
}

/// Send one request and read the whole answer: (time to first byte for streams, total).
async fn exchange(
    client: &LoadClient,
    shot: &Shot,
    intended: Instant,
) -> Result<(Option<Duration>, Duration), String> {
    let mut req = Request::post(shot.url.clone())
        .body(Full::new(shot.body.clone()))
        .map_err(|e| format!("bad_request: {e}"))?;
    req.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if let Some(a) = &shot.auth {
        req.headers_mut()
            .insert(http::header::AUTHORIZATION, a.clone());
    }
    let resp = client.request(req).await.map_err(|e| {
        if e.is_connect() {
            "connect".to_owned()
        } else {
            "request".to_owned()
        }
    })?;
    let status = resp.status();
    let mut body = resp.into_body();
    let mut ttfb = None;
    let mut complete = shot.end_marker.is_none();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|_| "body_cut".to_owned())?;
        if let Ok(data) = frame.into_data() {
            if ttfb.is_none() && shot.end_marker.is_some() {
                ttfb = Some(intended.elapsed());
            }
            if let Some(marker) = shot.end_marker {
                complete |= memchr::memmem::find(&data, marker).is_some();
            }
        }
    }
    let total = intended.elapsed();
    if !status.is_success() {
        return Err(format!("http_{}", status.as_u16()));
    }
    if !complete {
        return Err("stream_incomplete".to_owned());
    }
    Ok((ttfb, total))
}
