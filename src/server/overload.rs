//! The overload manager: past a bound on requests in flight (per worker) or a memory
//! watermark, the newest requests are shed with 503 and `Retry-After` before latency grows for
//! everyone, and readiness turns false so that a load balancer steers away until it recovers.
//!
//! On the request path this is one atomic add and, when the response ends, one subtract (per
//! worker, on a cache line of its own), plus one relaxed load when a memory watermark is set.
//! Resident memory is read by a thread of its own every 100 ms (`VmRSS` of `/proc/self/status`,
//! in KiB, so no page size is needed), never by a request.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use sluice_core::error::ApiError;

/// How often resident memory is read.
const MEMORY_TICK: Duration = Duration::from_millis(100);

/// One worker's requests in flight, alone on its cache line so workers do not contend.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Count(AtomicUsize);

/// The in-flight counters, the memory reading and the count of shed requests.
#[derive(Debug)]
pub struct Overload {
    /// Requests in flight allowed per worker; `None`: not counted at all.
    per_worker: Option<usize>,
    counts: Box<[Count]>,
    /// Shed past this many resident bytes; `None`: memory is not watched.
    memory_limit: Option<u64>,
    /// Resident bytes at the last tick.
    rss: AtomicU64,
    shed_in_flight: AtomicU64,
    shed_memory: AtomicU64,
}

/// A request's place in its worker's in-flight count, given back when the response ends.
#[derive(Debug)]
pub struct Slot {
    overload: Arc<Overload>,
    worker: usize,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(c) = self.overload.counts.get(self.worker) {
            c.0.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl Overload {
    /// `max_in_flight` over the whole instance, split over `workers` (0: one shared count);
    /// `memory_limit` in bytes. With a watermark a thread reads resident memory every 100 ms
    /// for as long as this lives.
    pub fn start(
        max_in_flight: Option<usize>,
        memory_limit: Option<u64>,
        workers: usize,
    ) -> Arc<Self> {
        let workers = workers.max(1);
        let overload = Arc::new(Self {
            per_worker: max_in_flight.map(|n| n.div_ceil(workers).max(1)),
            counts: (0..workers).map(|_| Count::default()).collect(),
            memory_limit,
            rss: AtomicU64::new(0),
            shed_in_flight: AtomicU64::new(0),
            shed_memory: AtomicU64::new(0),
        });
        if memory_limit.is_some() {
            let weak = Arc::downgrade(&overload);
            let started = std::thread::Builder::new()
                .name("sluice-memory".into())
                .spawn(move || watch_memory(&weak));
            if let Err(e) = started {
                tracing::error!(error = %e, "cannot start the memory watermark's thread");
            }
        }
        overload
    }

    /// Admit a request, or shed it. `Ok(None)` when nothing is counted (no limit set).
    pub fn admit(self: &Arc<Self>) -> Result<Option<Slot>, ApiError> {
        if self.over_memory() {
            self.shed_memory.fetch_add(1, Ordering::Relaxed);
            return Err(ApiError::Overloaded { reason: "memory" });
        }
        let Some(limit) = self.per_worker else {
            return Ok(None);
        };
        let worker = sluice_net::client::worker_index().unwrap_or(0) % self.counts.len();
        let count = &self.counts[worker].0;
        if count.fetch_add(1, Ordering::Relaxed) >= limit {
            count.fetch_sub(1, Ordering::Relaxed);
            self.shed_in_flight.fetch_add(1, Ordering::Relaxed);
            return Err(ApiError::Overloaded {
                reason: "in_flight",
            });
        }
        Ok(Some(Slot {
            overload: self.clone(),
            worker,
        }))
    }

    fn over_memory(&self) -> bool {
        self.memory_limit
            .is_some_and(|limit| self.rss.load(Ordering::Relaxed) > limit)
    }

    /// Why the instance is shedding now, if it is: readiness answers 503 meanwhile.
    pub fn shedding(&self) -> Option<&'static str> {
        if self.over_memory() {
            return Some("memory");
        }
        let limit = self.per_worker?;
        self.counts
            .iter()
            .any(|c| c.0.load(Ordering::Relaxed) >= limit)
            .then_some("in_flight")
    }

    /// Prometheus lines: requests shed by reason, and requests in flight.
    pub fn metrics(&self, out: &mut String) {
        use std::fmt::Write as _;
        let in_flight: usize = self
            .counts
            .iter()
            .map(|c| c.0.load(Ordering::Relaxed))
            .sum();
        let _ = write!(
            out,
            "# HELP sluice_shed_requests Requests refused with 503 by the overload manager.\n\
             # TYPE sluice_shed_requests counter\n\
             sluice_shed_requests_total{{reason=\"in_flight\"}} {}\n\
             sluice_shed_requests_total{{reason=\"memory\"}} {}\n\
             # HELP sluice_in_flight_requests Requests in flight (counted when max_in_flight_requests is set).\n\
             # TYPE sluice_in_flight_requests gauge\n\
             sluice_in_flight_requests {in_flight}\n",
            self.shed_in_flight.load(Ordering::Relaxed),
            self.shed_memory.load(Ordering::Relaxed),
        );
    }
}

/// Read resident memory every [`MEMORY_TICK`] while the manager lives.
fn watch_memory(overload: &Weak<Overload>) {
    loop {
        let Some(o) = overload.upgrade() else {
            return;
        };
        if let Some(kib) = resident_kib() {
            o.rss.store(kib * 1024, Ordering::Relaxed);
        }
        drop(o);
        std::thread::sleep(MEMORY_TICK);
    }
}

/// Resident memory in KiB (`VmRSS:` of `/proc/self/status`); `None` where there is none.
fn resident_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_sheds_the_newest_and_a_finished_request_frees_its_slot() {
        let o = Overload::start(Some(2), None, 0);
        let a = o.admit().unwrap();
        let b = o.admit().unwrap();
        assert!(a.is_some() && b.is_some());
        assert!(matches!(
            o.admit(),
            Err(ApiError::Overloaded {
                reason: "in_flight"
            })
        ));
        assert_eq!(o.shedding(), Some("in_flight"));
        drop(a);
        assert_eq!(o.shedding(), None);
        assert!(o.admit().unwrap().is_some());
        let mut text = String::new();
        o.metrics(&mut text);
        assert!(
            text.contains("sluice_shed_requests_total{reason=\"in_flight\"} 1"),
            "{text}"
        );
    }

    #[test]
    fn without_limits_nothing_is_counted() {
        let o = Overload::start(None, None, 4);
        assert!(o.admit().unwrap().is_none());
        assert_eq!(o.shedding(), None);
    }

    #[test]
    fn a_watermark_below_resident_memory_sheds() {
        let o = Overload::start(None, Some(1), 1);
        for _ in 0..100 {
            if o.shedding().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(o.shedding(), Some("memory"));
        assert!(matches!(
            o.admit(),
            Err(ApiError::Overloaded { reason: "memory" })
        ));
    }
}
