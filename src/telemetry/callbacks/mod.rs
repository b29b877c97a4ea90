//! Logging callbacks and trace export, fanned out from the recorder task (never from a
//! request): each finished record becomes one shared [`CallbackRecord`], offered to every sink
//! that wants it (success and/or failure) through the sink's bounded queue. One batching task
//! per sink delivers, retries with backoff and spills while the sink is down
//! ([`batcher`]). A full queue spills too, so nothing is lost until the spill's bound.
//!
//! A config reload with different callback settings starts a new [`Hub`]; the old one's tasks
//! finish their queues and end.

pub mod batcher;
mod langfuse;
mod langsmith;
pub mod payload;
mod s3;
mod sigv4;
pub mod stats;
pub mod target;
mod webhook;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;
use tokio::sync::mpsc;
use tokio_util::task::TaskTracker;

use self::batcher::{with_spill, Batcher, MemorySpill, SharedSpill, Spill};
use self::payload::CallbackRecord;
use self::stats::{SinkStats, SinkStatus};
use self::target::{Http, Target};
use super::metrics::Metrics;
use super::record::RequestRecord;
use crate::config::{CallbackSettings, SinkSettings};
use crate::providers::client::ClientRegistry;

pub use self::batcher::Spill as SpillSeam;

/// How a new sink's spill is made: the in-memory one by default; the lead plugs the disk
/// spool in here.
pub type SpillFactory = Arc<dyn Fn(&SinkSettings) -> Box<dyn Spill> + Send + Sync>;

/// Longest a closing hub waits for its sinks to deliver what they hold.
const CLOSE_WAIT: Duration = Duration::from_secs(5);

struct Sink {
    on_success: bool,
    on_failure: bool,
    content: bool,
    tx: mpsc::Sender<Arc<CallbackRecord>>,
    spill: SharedSpill,
    stats: Arc<SinkStats>,
}

/// The running sinks of one callback configuration.
pub struct Hub {
    settings: CallbackSettings,
    sinks: Vec<Sink>,
    tasks: TaskTracker,
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub")
            .field("sinks", &self.sinks.len())
            .finish()
    }
}

impl Hub {
    fn empty() -> Self {
        Self {
            settings: CallbackSettings::default(),
            sinks: Vec::new(),
            tasks: TaskTracker::new(),
        }
    }

    fn start(
        settings: &CallbackSettings,
        metrics: &Metrics,
        http: &Http,
        spills: &SpillFactory,
    ) -> Self {
        let tasks = TaskTracker::new();
        let mut sinks = Vec::new();
        for s in &settings.sinks {
            let target = match Target::build(s, http) {
                Ok(t) => t,
                Err(e) => {
                    tracing::error!(sink = %s.name, error = %e, "callback not started");
                    continue;
                }
            };
            let (tx, rx) = mpsc::channel(s.max_queue);
            let spill: SharedSpill = Arc::new(Mutex::new(spills(s)));
            let stats = Arc::new(metrics.callback_stats(&s.name));
            let batcher = Batcher {
                target,
                batch_size: s.batch_size,
                flush_interval: s.flush_interval,
                spill: spill.clone(),
                stats: stats.clone(),
            };
            tasks.spawn(batcher.run(rx));
            sinks.push(Sink {
                on_success: s.on_success,
                on_failure: s.on_failure,
                content: s.message_logging,
                tx,
                spill,
                stats,
            });
        }
        tasks.close();
        Self {
            settings: settings.clone(),
            sinks,
            tasks,
        }
    }

    /// Offer a finished request to every sink that wants it (on the recorder task).
    fn offer(&self, record: &RequestRecord) {
        if self.sinks.is_empty() {
            return;
        }
        let success = record.succeeded();
        let wanted = |s: &&Sink| if success { s.on_success } else { s.on_failure };
        // At most two shapes: with and without content.
        let mut plain: Option<Arc<CallbackRecord>> = None;
        let mut full: Option<Arc<CallbackRecord>> = None;
        for sink in self.sinks.iter().filter(wanted) {
            let slot = if sink.content { &mut full } else { &mut plain };
            let rec = slot
                .get_or_insert_with(|| Arc::new(CallbackRecord::from_record(record, sink.content)))
                .clone();
            match sink.tx.try_send(rec) {
                Ok(()) => {}
                Err(mpsc::error::TrySendError::Full(r) | mpsc::error::TrySendError::Closed(r)) => {
                    let dropped = with_spill(&sink.spill, |s| s.push(vec![r]));
                    sink.stats.spilled(1);
                    sink.stats.dropped(dropped);
                }
            }
            sink.stats
                .set_queue(sink.tx.max_capacity() - sink.tx.capacity());
        }
    }

    /// Close the queues and wait (bounded) for the sinks to deliver what they hold.
    async fn close(self) {
        let Self { sinks, tasks, .. } = self;
        drop(sinks);
        let _ = tokio::time::timeout(CLOSE_WAIT, tasks.wait()).await;
    }
}

/// The callbacks as the recorder holds them: the current hub, swapped on reload.
pub struct Callbacks {
    hub: ArcSwap<Hub>,
    http: Http,
    spills: SpillFactory,
    tracing: AtomicBool,
    content: AtomicBool,
}

impl std::fmt::Debug for Callbacks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Callbacks")
            .field("hub", &self.hub.load())
            .finish()
    }
}

impl Default for Callbacks {
    fn default() -> Self {
        let registry = ClientRegistry::default();
        Self {
            hub: ArcSwap::from_pointee(Hub::empty()),
            http: Http {
                client: registry.get(Duration::from_secs(5)),
                h2: crate::providers::client::h2_only(Duration::from_secs(5)),
            },
            spills: Arc::new(|s: &SinkSettings| -> Box<dyn Spill> {
                Box::new(MemorySpill::new(s.spill_limit))
            }),
            tracing: AtomicBool::new(false),
            content: AtomicBool::new(false),
        }
    }
}

impl Callbacks {
    /// Start the sinks of `settings` unless they are the ones running. Needs a tokio runtime.
    pub fn configure(&self, settings: &CallbackSettings, metrics: &Metrics) {
        if self.hub.load().settings == *settings {
            return;
        }
        let hub = Hub::start(settings, metrics, &self.http, &self.spills);
        self.tracing.store(settings.tracing(), Ordering::Relaxed);
        self.content.store(settings.content(), Ordering::Relaxed);
        let old = self.hub.swap(Arc::new(hub));
        // The old sinks finish their queues in the background.
        if let Ok(old) = Arc::try_unwrap(old) {
            if !old.sinks.is_empty() {
                tokio::spawn(old.close());
            }
        }
    }

    /// Whether requests should carry trace ids (an otel sink is on). One relaxed load.
    pub fn tracing(&self) -> bool {
        self.tracing.load(Ordering::Relaxed)
    }

    /// Whether requests should keep their bodies for content logging. One relaxed load.
    pub fn content(&self) -> bool {
        self.content.load(Ordering::Relaxed)
    }

    /// Offer a finished request to the sinks (recorder task only).
    pub fn offer(&self, record: &RequestRecord) {
        self.hub.load().offer(record);
    }

    /// Every sink's state, for `/health/readiness`.
    pub fn status(&self) -> Vec<SinkStatus> {
        self.hub
            .load()
            .sinks
            .iter()
            .map(|s| s.stats.status())
            .collect()
    }

    /// Stop taking records and wait (bounded) for the sinks to deliver what they hold.
    pub async fn close(&self) {
        let old = self.hub.swap(Arc::new(Hub::empty()));
        if let Ok(old) = Arc::try_unwrap(old) {
            old.close().await;
        }
    }
}
