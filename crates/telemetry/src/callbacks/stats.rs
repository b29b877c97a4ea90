//! How each sink is doing, as Prometheus metrics (`sluice_callback_*`, labelled by sink name,
//! a config-bounded label) and as the status `/health/readiness` shows. The counters are the
//! registry's own handles, so a sink updates them directly from its task.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde::Serialize;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SinkLabels {
    sink: String,
}

/// The `sluice_callback_*` families.
#[derive(Debug, Default)]
pub struct CallbackMetrics {
    up: Family<SinkLabels, Gauge>,
    queue: Family<SinkLabels, Gauge>,
    spill: Family<SinkLabels, Gauge>,
    delivered: Family<SinkLabels, Counter>,
    failures: Family<SinkLabels, Counter>,
    spilled: Family<SinkLabels, Counter>,
    dropped: Family<SinkLabels, Counter>,
}

impl CallbackMetrics {
    /// Register every family.
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        registry.register(
            "sluice_callback_up",
            "1 while a callback sink accepts deliveries, 0 while it is failing",
            m.up.clone(),
        );
        registry.register(
            "sluice_callback_queue_depth",
            "Records waiting for a callback sink's batching task",
            m.queue.clone(),
        );
        registry.register(
            "sluice_callback_spill_depth",
            "Records held for a callback sink that is down",
            m.spill.clone(),
        );
        registry.register(
            "sluice_callback_delivered_records",
            "Records a callback sink accepted",
            m.delivered.clone(),
        );
        registry.register(
            "sluice_callback_failed_deliveries",
            "Batch deliveries a callback sink refused or did not answer",
            m.failures.clone(),
        );
        registry.register(
            "sluice_callback_spilled_records",
            "Records put in a sink's spill (sink down or its queue full)",
            m.spilled.clone(),
        );
        registry.register(
            "sluice_callback_dropped_records",
            "Records dropped because a sink's spill was full",
            m.dropped.clone(),
        );
        m
    }

    /// The handles for one sink.
    pub fn sink(&self, name: &str) -> SinkStats {
        let l = SinkLabels {
            sink: name.to_owned(),
        };
        let stats = SinkStats {
            name: name.to_owned(),
            up: self.up.get_or_create(&l).clone(),
            queue: self.queue.get_or_create(&l).clone(),
            spill: self.spill.get_or_create(&l).clone(),
            delivered: self.delivered.get_or_create(&l).clone(),
            failures: self.failures.get_or_create(&l).clone(),
            spilled: self.spilled.get_or_create(&l).clone(),
            dropped: self.dropped.get_or_create(&l).clone(),
        };
        stats.up.set(1);
        stats
    }
}

/// One sink's live numbers.
#[derive(Debug)]
pub struct SinkStats {
    /// The sink's configured name.
    pub name: String,
    up: Gauge,
    queue: Gauge,
    spill: Gauge,
    delivered: Counter,
    failures: Counter,
    spilled: Counter,
    dropped: Counter,
}

/// A sink's state for `/health/readiness`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SinkStatus {
    /// Configured name.
    pub name: String,
    /// Accepting deliveries.
    pub up: bool,
    /// Records queued.
    pub queue_depth: u64,
    /// Records held while down.
    pub spill_depth: u64,
    /// Records delivered.
    pub delivered: u64,
    /// Records spilled.
    pub spilled: u64,
    /// Records dropped (spill full).
    pub dropped: u64,
}

fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl SinkStats {
    pub(super) fn set_up(&self, up: bool) {
        self.up.set(i64::from(up));
    }
    pub(super) fn set_queue(&self, n: usize) {
        self.queue.set(count(n));
    }
    pub(super) fn set_spill(&self, n: usize) {
        self.spill.set(count(n));
    }
    pub(super) fn delivered(&self, n: usize) {
        self.delivered.inc_by(n as u64);
    }
    pub(super) fn failed(&self) {
        self.failures.inc();
    }
    pub(super) fn spilled(&self, n: usize) {
        self.spilled.inc_by(n as u64);
    }
    pub(super) fn dropped(&self, n: usize) {
        if n > 0 {
            self.dropped.inc_by(n as u64);
        }
    }

    /// The current state.
    pub fn status(&self) -> SinkStatus {
        SinkStatus {
            name: self.name.clone(),
            up: self.up.get() == 1,
            queue_depth: self.queue.get().max(0) as u64,
            spill_depth: self.spill.get().max(0) as u64,
            delivered: self.delivered.get(),
            spilled: self.spilled.get(),
            dropped: self.dropped.get(),
        }
    }
}
