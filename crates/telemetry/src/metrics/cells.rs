//! The series one kind of request updates, found with one hash of the record's labels in a
//! cache of the recorder thread's own. A family finds a series by hashing an owned label set
//! (SipHash) under its lock; a record touches up to eleven series, so finding each per request
//! cost about 5,000 instructions and seven copies of the model's and deployment's names
//! (callgrind, docs/benchmarks.md). A handle shares its series with the family (counters and
//! histograms are `Arc`s inside), so what a cached handle counts is what `/metrics` shows.

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::Histogram;
use xxhash_rust::xxh3::Xxh3Default;

use sluice_core::record::{Outcome, RequestRecord};

/// The labels of `sluice_requests_total`, which decide every other series a record touches.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Key<'a> {
    pub route: &'static str,
    pub model: Option<&'a str>,
    pub deployment: Option<&'a str>,
    pub provider: &'static str,
    pub status_class: &'static str,
    pub outcome: &'static str,
    pub error: &'static str,
}

impl<'a> Key<'a> {
    /// The key of a record.
    pub fn of(r: &'a RequestRecord) -> Self {
        Key {
            route: r.route,
            model: r.model.as_deref(),
            deployment: r.deployment.as_deref(),
            provider: r.provider.unwrap_or(""),
            status_class: super::status_class(r.status),
            outcome: match r.outcome {
                Outcome::Done => "done",
                Outcome::StreamComplete => "complete",
                Outcome::StreamCut => "upstream_cut",
                Outcome::ClientGone => "client_gone",
            },
            error: r.error.or(r.failure).unwrap_or(""),
        }
    }

    /// One hash of every label and the metrics instance (tests run several in a process).
    fn hash(&self, metrics: u64) -> u64 {
        let mut h = Xxh3Default::new();
        h.write_u64(metrics);
        for part in [
            self.route,
            self.model.unwrap_or("\u{0}"),
            self.deployment.unwrap_or("\u{0}"),
            self.provider,
            self.status_class,
            self.outcome,
            self.error,
        ] {
            h.write(part.as_bytes());
            h.write_u8(0xff);
        }
        h.finish()
    }
}

/// A key kept in the cache: the record's names shared, not copied.
#[derive(Debug)]
struct Owned {
    metrics: u64,
    route: &'static str,
    model: Option<Arc<str>>,
    deployment: Option<Arc<str>>,
    provider: &'static str,
    status_class: &'static str,
    outcome: &'static str,
    error: &'static str,
}

impl Owned {
    fn matches(&self, metrics: u64, k: &Key<'_>) -> bool {
        self.metrics == metrics
            && Key {
                route: self.route,
                model: self.model.as_deref(),
                deployment: self.deployment.as_deref(),
                provider: self.provider,
                status_class: self.status_class,
                outcome: self.outcome,
                error: self.error,
            } == *k
    }
}

/// The handles of one key's series; those that not every record touches are taken from their
/// family the first time one does (a family creates a series when asked for it, and `/metrics`
/// should not show series nothing counted).
#[derive(Debug)]
pub(super) struct Cells {
    pub requests: Counter,
    pub overhead: Histogram,
    pub duration: Option<Histogram>,
    pub upstream: Option<Histogram>,
    pub ttft: Option<Histogram>,
    /// Input, output, cached, cache_write, reasoning.
    pub tokens: [Option<Counter>; 5],
    /// Retries, fallbacks, hedges.
    pub counts: [Option<Counter>; 3],
}

/// The hash is the key's own (`Key::hash`): the map need not hash it again.
#[derive(Default)]
struct Prehashed(u64);

impl Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

type Table = HashMap<u64, Vec<(Owned, Cells)>, BuildHasherDefault<Prehashed>>;

thread_local! {
    static CELLS: RefCell<Table> = RefCell::new(Table::default());
}

/// Run `update` on the cells of `r`'s key for the metrics instance `metrics`, made by `make`
/// the first time this thread sees the key.
pub(super) fn with(
    metrics: u64,
    r: &RequestRecord,
    make: impl FnOnce(&Key<'_>) -> Cells,
    update: impl FnOnce(&mut Cells),
) {
    let key = Key::of(r);
    let hash = key.hash(metrics);
    CELLS.with(|table| {
        let mut table = table.borrow_mut();
        let bucket = table.entry(hash).or_default();
        let at = match bucket.iter().position(|(k, _)| k.matches(metrics, &key)) {
            Some(at) => at,
            None => {
                let cells = make(&key);
                let owned = Owned {
                    metrics,
                    route: key.route,
                    model: r.model.clone(),
                    deployment: r.deployment.clone(),
                    provider: key.provider,
                    status_class: key.status_class,
                    outcome: key.outcome,
                    error: key.error,
                };
                bucket.push((owned, cells));
                bucket.len() - 1
            }
        };
        if let Some((_, cells)) = bucket.get_mut(at) {
            update(cells);
        }
    });
}
