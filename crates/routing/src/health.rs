//! The live state of one deployment: requests in flight, latency, recent failures, cooldown
//! (a circuit breaker with a half-open probe) and this minute's usage. All atomics: every
//! request reads it and most write it, so it must never take a lock.
//!
//! State outlives config reloads ([`HealthRegistry`] hands the same cell to a deployment with
//! the same id), so a reload neither forgets a cooldown nor resets the latency estimate.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use super::failure::FailureKind;

/// Milliseconds since the process's first use of the routing clock. Cooldowns and usage
/// windows are stored as these, so that they fit in one atomic.
pub fn now_ms() -> u64 {
    static BASE: OnceLock<Instant> = OnceLock::new();
    let base = *BASE.get_or_init(Instant::now);
    // Offset by one so that 0 can mean "never".
    base.elapsed().as_millis() as u64 + 1
}

/// How a deployment may be used right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Availability {
    /// Healthy.
    Ready,
    /// Its cooldown is over: the next request is a probe that decides whether it is back.
    Probe,
    /// Cooling down for this much longer.
    Cooling(Duration),
}

/// When a deployment is taken out, and for how long (from `router_settings`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Breaker {
    /// Failures allowed per minute, per kind, before a cooldown (`allowed_fails`,
    /// `allowed_fails_policy`).
    pub allowed_fails: [u32; FailureKind::ALL.len()],
    /// How long a deployment stays out (`cooldown_time`).
    pub cooldown: Duration,
    /// `disable_cooldowns`.
    pub disabled: bool,
}

impl Default for Breaker {
    fn default() -> Self {
        Self {
            allowed_fails: [DEFAULT_ALLOWED_FAILS; FailureKind::ALL.len()],
            cooldown: DEFAULT_COOLDOWN,
            disabled: false,
        }
    }
}

/// LiteLLM's default `allowed_fails`.
pub const DEFAULT_ALLOWED_FAILS: u32 = 3;
/// LiteLLM's default `cooldown_time`.
pub const DEFAULT_COOLDOWN: Duration = Duration::from_secs(5);

/// Smoothing of the latency estimate: each sample moves it by a fifth.
const EWMA_WEIGHT: f64 = 0.2;
const WINDOW_MS: u64 = 60_000;
const COUNT_BITS: u32 = 40;
const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;

/// One deployment's live state.
#[derive(Debug, Default)]
pub struct Health {
    in_flight: AtomicU32,
    /// Latency estimate in microseconds, as `f64` bits; 0 until the first success.
    latency_us: AtomicU64,
    /// Failures this minute: window index in the high bits, count in the low [`COUNT_BITS`].
    fails: AtomicU64,
    /// [`now_ms`] until which the deployment is out; 0 when it never was or is back.
    cooled_until: AtomicU64,
    /// A probe request is under way after a cooldown.
    probing: AtomicBool,
    /// Requests this minute (packed like `fails`).
    requests: AtomicU64,
    /// Tokens this minute (packed like `fails`).
    tokens: AtomicU64,
    successes: AtomicU64,
    failures: AtomicU64,
    /// Kind of the last failure, as index + 1 (0: none yet).
    last_failure: AtomicU8,
    /// Its deployment id and where to announce its cooldowns (the fleet, when there is one).
    announce: Option<(Arc<str>, Arc<OnceLock<CooldownNews>>)>,
}

/// Where a deployment's cooldowns are announced: the fleet tells the other instances, so a
/// deployment that fails on one is skipped by all.
pub type CooldownNews = tokio::sync::mpsc::UnboundedSender<Cooled>;

/// A deployment went into cooldown for `span`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cooled {
    /// Deployment id.
    pub id: Arc<str>,
    /// For how long.
    pub span: Duration,
}

/// Add `by` to a per-minute counter, starting over when the minute changed; returns the new
/// count.
fn bump(cell: &AtomicU64, now: u64, by: u64) -> u64 {
    let window = now / WINDOW_MS;
    let mut cur = cell.load(Relaxed);
    loop {
        let count = if cur >> COUNT_BITS == window {
            (cur & COUNT_MASK) + by
        } else {
            by
        };
        let next = (window << COUNT_BITS) | count.min(COUNT_MASK);
        match cell.compare_exchange_weak(cur, next, Relaxed, Relaxed) {
            Ok(_) => return count,
            Err(actual) => cur = actual,
        }
    }
}

/// This minute's value of a per-minute counter.
fn read(cell: &AtomicU64, now: u64) -> u64 {
    let cur = cell.load(Relaxed);
    if cur >> COUNT_BITS == now / WINDOW_MS {
        cur & COUNT_MASK
    } else {
        0
    }
}

impl Health {
    /// Whether the deployment may take a request now.
    pub fn availability(&self, now: u64) -> Availability {
        let until = self.cooled_until.load(Relaxed);
        if until == 0 {
            Availability::Ready
        } else if now < until {
            Availability::Cooling(Duration::from_millis(until - now))
        } else {
            Availability::Probe
        }
    }

    /// Claim the one probe allowed after a cooldown; false when another request has it.
    pub fn claim_probe(&self) -> bool {
        self.probing
            .compare_exchange(false, true, Relaxed, Relaxed)
            .is_ok()
    }

    /// Requests in flight.
    pub fn in_flight(&self) -> u32 {
        self.in_flight.load(Relaxed)
    }

    /// Latency estimate (time to first byte for streams), if any request has succeeded yet.
    pub fn latency(&self) -> Option<Duration> {
        let us = f64::from_bits(self.latency_us.load(Relaxed));
        (us > 0.0).then(|| Duration::from_secs_f64(us / 1e6))
    }

    /// Requests and tokens this minute.
    pub fn usage(&self, now: u64) -> (u64, u64) {
        (read(&self.requests, now), read(&self.tokens, now))
    }

    /// Count tokens a finished request used, for usage-based routing.
    pub fn add_tokens(&self, tokens: u64) {
        if tokens > 0 {
            bump(&self.tokens, now_ms(), tokens);
        }
    }

    /// Totals since start: successes, failures, and the last failure's kind.
    pub fn totals(&self) -> (u64, u64, Option<FailureKind>) {
        let last = self.last_failure.load(Relaxed);
        (
            self.successes.load(Relaxed),
            self.failures.load(Relaxed),
            last.checked_sub(1)
                .and_then(|i| FailureKind::ALL.get(usize::from(i)).copied()),
        )
    }

    /// Start an attempt: counted in flight and in this minute's requests until the guard goes.
    pub fn begin(self: &Arc<Self>, probe: bool) -> InFlight {
        self.in_flight.fetch_add(1, Relaxed);
        bump(&self.requests, now_ms(), 1);
        InFlight {
            health: self.clone(),
            probe,
        }
    }

    fn succeeded(&self, latency: Duration, probe: bool) {
        self.successes.fetch_add(1, Relaxed);
        let sample = latency.as_secs_f64() * 1e6;
        let old = f64::from_bits(self.latency_us.load(Relaxed));
        let new = if old > 0.0 {
            old + EWMA_WEIGHT * (sample - old)
        } else {
            sample.max(1.0)
        };
        self.latency_us.store(new.to_bits(), Relaxed);
        if probe || self.cooled_until.load(Relaxed) != 0 {
            self.cooled_until.store(0, Relaxed);
            self.fails.store(0, Relaxed);
        }
        if probe {
            self.probing.store(false, Relaxed);
        }
    }

    /// Record a failure; returns whether the deployment is now cooling down.
    fn failed(
        &self,
        kind: FailureKind,
        retry_after: Option<Duration>,
        probe: bool,
        breaker: &Breaker,
    ) -> bool {
        self.failures.fetch_add(1, Relaxed);
        self.last_failure.store(kind.index() as u8 + 1, Relaxed);
        let cool = if breaker.disabled || !kind.counts_against_deployment() {
            false
        } else {
            let now = now_ms();
            let count = bump(&self.fails, now, 1);
            probe
                || kind.cools_down_at_once()
                || count > u64::from(breaker.allowed_fails[kind.index()])
        };
        if cool {
            let span = retry_after.map_or(breaker.cooldown, |r| r.max(breaker.cooldown));
            self.cooled_until
                .store(now_ms() + span.as_millis() as u64, Relaxed);
            if let Some((id, news)) = &self.announce {
                if let Some(tx) = news.get() {
                    let _ = tx.send(Cooled {
                        id: id.clone(),
                        span,
                    });
                }
            }
        }
        if probe {
            self.probing.store(false, Relaxed);
        }
        cool
    }
}

/// An attempt in flight on a deployment. Dropped without an outcome (the request was
/// cancelled or lost a hedge) it only leaves the in-flight count and frees the probe.
#[derive(Debug)]
pub struct InFlight {
    health: Arc<Health>,
    probe: bool,
}

impl InFlight {
    /// The deployment answered: fold `latency` (total, or time to first chunk for streams) into
    /// its estimate and close its breaker.
    pub fn succeed(&mut self, latency: Duration) {
        self.health.succeeded(latency, self.probe);
        self.probe = false;
    }

    /// The deployment failed; returns whether it is now cooling down.
    pub fn fail(
        &mut self,
        kind: FailureKind,
        retry_after: Option<Duration>,
        breaker: &Breaker,
    ) -> bool {
        let cooled = self.health.failed(kind, retry_after, self.probe, breaker);
        self.probe = false;
        cooled
    }

    /// Tokens the request used (known at its end), for usage-based routing.
    pub fn add_tokens(&self, tokens: u64) {
        self.health.add_tokens(tokens);
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.health.in_flight.fetch_sub(1, Relaxed);
        if self.probe {
            self.health.probing.store(false, Relaxed);
        }
    }
}

impl Health {
    /// Another instance saw this deployment fail: keep it out for `span` here too (unless a
    /// longer cooldown is already running).
    pub fn cool_for(&self, span: Duration) {
        self.cooled_until
            .fetch_max(now_ms() + span.as_millis() as u64, Relaxed);
    }

    /// An active health check found it answering again after a failed one: back in service
    /// now, not when its cooldown ends.
    pub fn recover(&self) {
        self.cooled_until.store(0, Relaxed);
        self.fails.store(0, Relaxed);
    }
}

/// Health cells by deployment id, shared by every config snapshot.
#[derive(Debug, Default)]
pub struct HealthRegistry {
    cells: Mutex<HashMap<String, Weak<Health>>>,
    news: Arc<OnceLock<CooldownNews>>,
}

impl HealthRegistry {
    /// The cell for deployment `id`: the existing one if a live snapshot still uses it.
    /// Called at config load only.
    pub fn cell(&self, id: &str) -> Arc<Health> {
        let mut cells = match self.cells.lock() {
            Ok(c) => c,
            Err(poisoned) => poisoned.into_inner(),
        };
        cells.retain(|_, w| w.strong_count() > 0);
        if let Some(h) = cells.get(id).and_then(Weak::upgrade) {
            return h;
        }
        let h = Arc::new(Health {
            announce: Some((id.into(), self.news.clone())),
            ..Health::default()
        });
        cells.insert(id.to_owned(), Arc::downgrade(&h));
        h
    }

    /// Announce every cooldown from now on through `tx` (set once, by the fleet).
    pub fn announce_cooldowns(&self, tx: CooldownNews) {
        let _ = self.news.set(tx);
    }

    /// Apply a cooldown another instance announced, if this instance has that deployment.
    pub fn cool(&self, id: &str, span: Duration) {
        let cell = match self.cells.lock() {
            Ok(c) => c.get(id).and_then(Weak::upgrade),
            Err(poisoned) => poisoned.into_inner().get(id).and_then(Weak::upgrade),
        };
        if let Some(h) = cell {
            h.cool_for(span);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn breaker(allowed: u32, cooldown_ms: u64) -> Breaker {
        Breaker {
            allowed_fails: [allowed; FailureKind::ALL.len()],
            cooldown: Duration::from_millis(cooldown_ms),
            disabled: false,
        }
    }

    #[test]
    fn cools_after_allowed_fails_then_probes_back_in() {
        let h = Arc::new(Health::default());
        let b = breaker(1, 40);
        let mut a = h.begin(false);
        assert!(
            !a.fail(FailureKind::Server, None, &b),
            "first failure is allowed"
        );
        drop(a);
        let mut a = h.begin(false);
        assert!(
            a.fail(FailureKind::Server, None, &b),
            "second one exceeds allowed_fails"
        );
        drop(a);
        assert!(matches!(h.availability(now_ms()), Availability::Cooling(_)));
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(h.availability(now_ms()), Availability::Probe);
        assert!(h.claim_probe());
        assert!(!h.claim_probe(), "one probe at a time");
        let mut probe = h.begin(true);
        probe.succeed(Duration::from_millis(3));
        drop(probe);
        assert_eq!(h.availability(now_ms()), Availability::Ready);
        assert!(h.claim_probe(), "probe flag released");
    }

    #[test]
    fn failed_probe_cools_again_and_cancelled_probe_frees_the_slot() {
        let h = Arc::new(Health::default());
        let b = breaker(5, 30);
        let mut a = h.begin(false);
        assert!(
            a.fail(FailureKind::RateLimit, None, &b),
            "429 cools at once"
        );
        drop(a);
        std::thread::sleep(Duration::from_millis(40));
        assert!(h.claim_probe());
        drop(h.begin(true));
        assert!(h.claim_probe(), "a cancelled probe gives the slot back");
        let mut p = h.begin(true);
        assert!(
            p.fail(FailureKind::Server, None, &b),
            "a failed probe cools again"
        );
        assert!(matches!(h.availability(now_ms()), Availability::Cooling(_)));
    }

    #[test]
    fn client_errors_never_cool_and_retry_after_extends() {
        let h = Arc::new(Health::default());
        let b = breaker(0, 10);
        let mut a = h.begin(false);
        assert!(!a.fail(FailureKind::BadRequest, None, &b));
        assert!(!a.fail(FailureKind::ContextWindowExceeded, None, &b));
        assert_eq!(h.availability(now_ms()), Availability::Ready);
        assert!(a.fail(FailureKind::RateLimit, Some(Duration::from_secs(30)), &b));
        match h.availability(now_ms()) {
            Availability::Cooling(d) => assert!(d > Duration::from_secs(29)),
            other => panic!("expected cooling, got {other:?}"),
        }
        let (ok, failed, last) = h.totals();
        assert_eq!((ok, failed, last), (0, 3, Some(FailureKind::RateLimit)));
    }

    #[test]
    fn in_flight_latency_and_usage() {
        let h = Arc::new(Health::default());
        let mut a = h.begin(false);
        let b = h.begin(false);
        assert_eq!(h.in_flight(), 2);
        a.succeed(Duration::from_millis(10));
        a.add_tokens(120);
        drop(a);
        drop(b);
        assert_eq!(h.in_flight(), 0);
        assert_eq!(h.latency(), Some(Duration::from_millis(10)));
        assert_eq!(h.usage(now_ms()), (2, 120));
        let mut c = h.begin(false);
        c.succeed(Duration::from_millis(20));
        let l = h.latency().unwrap().as_secs_f64() * 1e3;
        assert!(
            (l - 12.0).abs() < 0.01,
            "ewma moved a fifth of the way: {l}"
        );
    }

    #[test]
    fn registry_keeps_state_across_reloads() {
        let r = HealthRegistry::default();
        let a = r.cell("d1");
        a.add_tokens(5);
        let b = r.cell("d1");
        assert!(Arc::ptr_eq(&a, &b));
        drop((a, b));
        let c = r.cell("d1");
        assert_eq!(
            c.usage(now_ms()).1,
            0,
            "a cell no snapshot holds is forgotten"
        );
    }

    #[test]
    fn disabled_breaker_never_cools() {
        let h = Arc::new(Health::default());
        let b = Breaker {
            disabled: true,
            ..breaker(0, 10)
        };
        let mut a = h.begin(false);
        assert!(!a.fail(FailureKind::RateLimit, None, &b));
        assert_eq!(h.availability(now_ms()), Availability::Ready);
    }
}
