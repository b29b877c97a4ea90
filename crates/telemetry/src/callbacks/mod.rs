//! Logging callbacks and trace export, fanned out from the recorder task (never from a
//! request): each finished record becomes one shared [`CallbackRecord`], offered to every sink
//! that wants it (success and/or failure) through the sink's bounded queue. One batching task
//! per sink delivers, retries with backoff and spills while the sink is down
//! ([`batcher`]). A full queue spills too, so nothing is lost until the spill's bound.
//!
//! A config reload with different callback settings starts a new [`Hub`]; the old one's tasks
//! finish their queues and end.

pub mod batcher;
pub mod deliver;
mod disk_spill;
mod gcs;
mod langfuse;
mod langsmith;
pub mod payload;
mod s3;
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
use self::deliver::Http;
pub use self::disk_spill::DiskSpill;
use self::payload::CallbackRecord;
use self::stats::{SinkStats, SinkStatus};
use self::target::Target;
use super::metrics::Metrics;
use sluice_config::{CallbackSettings, SinkSettings};
use sluice_core::poll::Poller;
use sluice_core::record::RequestRecord;
use sluice_net::client::ClientRegistry;

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
    sinks: Arc<[Sink]>,
    /// Records on their way to the fan-out task on the sinks' runtime.
    intake: Option<mpsc::Sender<RequestRecord>>,
    tasks: TaskTracker,
}

/// Niceness of the callbacks thread when the kernel refuses `SCHED_IDLE` (request workers run
/// at the process's own, usually 0).
const CALLBACK_NICE: i32 = 10;

/// Put the calling thread (the callbacks') behind every request worker: `SCHED_IDLE`, which the
/// kernel preempts as soon as a normal thread wakes, so a batch being encoded never delays a
/// request by a time slice (a nice value alone let a 512-record encode hold a core for up to
/// a slice: +1 ms at p99 in `sluice bench --callbacks --rate 5000`). Falls back to nice 10.
pub fn yield_to_workers() {
    use thread_priority::{
        set_thread_priority_and_policy, thread_native_id, NormalThreadSchedulePolicy,
        ThreadPriority, ThreadSchedulePolicy,
    };
    let idle = ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Idle);
    if let Err(e) = set_thread_priority_and_policy(thread_native_id(), ThreadPriority::Min, idle) {
        tracing::debug!(error = ?e, "no SCHED_IDLE for the callback thread; using nice");
        if let Err(e) = rustix::process::setpriority_process(None, CALLBACK_NICE) {
            tracing::debug!(error = %e, "could not lower the callback thread's priority");
        }
    }
}

/// Records waiting for the fan-out task before the recorder fans them out itself.
const INTAKE_CAPACITY: usize = 16 * 1024;

/// Most records the fan-out task takes from its intake at once.
const FAN_OUT_BATCH: usize = 256;

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
            sinks: Arc::new([]),
            intake: None,
            tasks: TaskTracker::new(),
        }
    }

    fn start(
        settings: &CallbackSettings,
        metrics: &Metrics,
        runtime: &Runtime,
        spills: &SpillFactory,
    ) -> Self {
        let http = &runtime.http;
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
            runtime.spawn_tracked(&tasks, batcher.run(rx));
            sinks.push(Sink {
                on_success: s.on_success,
                on_failure: s.on_failure,
                content: s.message_logging,
                tx,
                spill,
                stats,
            });
        }
        let sinks: Arc<[Sink]> = sinks.into();
        let intake = (!sinks.is_empty()).then(|| {
            let (tx, rx) = mpsc::channel::<RequestRecord>(INTAKE_CAPACITY);
            let to = sinks.clone();
            runtime.spawn_tracked(&tasks, async move {
                // Polled, never parked on: the workers handing records over are never woken
                // for it (`telemetry::Poller`). What has arrived goes in one go: one spill
                // write (if any) per drain, not per record.
                let mut intake = Poller::new(rx);
                let mut records = Vec::with_capacity(FAN_OUT_BATCH);
                while intake.next(&mut records, FAN_OUT_BATCH).await {
                    fan_out(&to, &records);
                    records.clear();
                }
            });
            tx
        });
        tasks.close();
        Self {
            settings: settings.clone(),
            sinks,
            intake,
            tasks,
        }
    }

    /// Hand a finished request to the fan-out task; if its queue is full, fan it out here
    /// (on the recorder task) rather than lose it.
    fn offer(&self, record: RequestRecord) {
        // Inference requests and MCP tool calls only: health checks and scrapes are not calls
        // to log.
        let Some(intake) = &self.intake else {
            return;
        };
        if record.endpoint.is_none() && record.tool.is_none() {
            return;
        }
        if let Err(mpsc::error::TrySendError::Full(r) | mpsc::error::TrySendError::Closed(r)) =
            intake.try_send(record)
        {
            fan_out(&self.sinks, std::slice::from_ref(&r));
        }
    }

    /// Close the queues and wait (bounded) for the sinks to deliver what they hold.
    async fn close(self) {
        let Self {
            sinks,
            intake,
            tasks,
            ..
        } = self;
        drop(intake);
        drop(sinks);
        let _ = tokio::time::timeout(CLOSE_WAIT, tasks.wait()).await;
    }
}

/// Offer finished requests to every sink that wants them, each as one shared record (two at
/// most: with and without content). What a full queue refuses goes to that sink's spill in
/// one push per call, so a backlog costs one spill write per drain, not one per record.
fn fan_out(sinks: &[Sink], records: &[RequestRecord]) {
    let mut overflow: Vec<Vec<Arc<CallbackRecord>>> = Vec::new();
    for record in records {
        let success = record.succeeded();
        // At most two shapes: with and without content.
        let mut plain: Option<Arc<CallbackRecord>> = None;
        let mut full: Option<Arc<CallbackRecord>> = None;
        for (i, sink) in sinks.iter().enumerate() {
            if !(if success {
                sink.on_success
            } else {
                sink.on_failure
            }) {
                continue;
            }
            let slot = if sink.content { &mut full } else { &mut plain };
            let rec = slot
                .get_or_insert_with(|| Arc::new(CallbackRecord::from_record(record, sink.content)))
                .clone();
            if let Err(mpsc::error::TrySendError::Full(r) | mpsc::error::TrySendError::Closed(r)) =
                sink.tx.try_send(rec)
            {
                if overflow.is_empty() {
                    overflow.resize_with(sinks.len(), Vec::new);
                }
                if let Some(o) = overflow.get_mut(i) {
                    o.push(r);
                }
            }
        }
    }
    for (i, sink) in sinks.iter().enumerate() {
        if let Some(o) = overflow.get_mut(i).filter(|o| !o.is_empty()) {
            let n = o.len();
            let dropped = with_spill(&sink.spill, |s| s.push(std::mem::take(o)));
            sink.stats.spilled(n);
            sink.stats.dropped(dropped);
        }
        sink.stats
            .set_queue(sink.tx.max_capacity() - sink.tx.capacity());
    }
}

/// The sinks' own runtime: one thread, so that encoding a batch (milliseconds for hundreds of
/// records) or a slow sink never holds a request's worker thread. It stops when the
/// `Callbacks` that owns it is dropped.
struct Runtime {
    /// `None` if the thread could not start: the sinks then share the caller's runtime.
    handle: Option<tokio::runtime::Handle>,
    http: Http,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl Runtime {
    fn start() -> Self {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (tx, rx) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("sluice-callbacks".into())
            .spawn(move || {
                yield_to_workers();
                match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => {
                        let _ = tx.send(Some(rt.handle().clone()));
                        rt.block_on(async {
                            let _ = stopped.await;
                        });
                    }
                    Err(e) => {
                        tracing::error!(error = %e, "callback runtime did not start");
                        let _ = tx.send(None);
                    }
                }
            });
        let handle = spawned.ok().and_then(|_| rx.recv().ok()).flatten();
        let upstream = ClientRegistry::default().get(Duration::from_secs(5));
        Self {
            handle,
            http: Http {
                client: upstream.shared().clone(),
                h2: sluice_net::client::h2_only(Duration::from_secs(5)),
                upstream,
            },
            _stop: stop,
        }
    }

    fn spawn_tracked(
        &self,
        tasks: &TaskTracker,
        f: impl std::future::Future<Output = ()> + Send + 'static,
    ) {
        match &self.handle {
            Some(h) => drop(tasks.spawn_on(f, h)),
            None => drop(tasks.spawn(f)),
        }
    }

    fn spawn(&self, f: impl std::future::Future<Output = ()> + Send + 'static) {
        match &self.handle {
            Some(h) => drop(h.spawn(f)),
            None => drop(tokio::spawn(f)),
        }
    }
}

/// The callbacks as the recorder holds them: the current hub, swapped on reload.
pub struct Callbacks {
    hub: ArcSwap<Hub>,
    runtime: Runtime,
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
        Self::with_spill(Arc::new(|s: &SinkSettings| -> Box<dyn Spill> {
            Box::new(MemorySpill::new(s.spill_limit))
        }))
    }
}

impl Callbacks {
    /// Callbacks whose sinks keep undelivered records in the spills `spills` makes (the disk
    /// spool plugs in here; the default is the bounded in-memory spill).
    pub fn with_spill(spills: SpillFactory) -> Self {
        Self {
            hub: ArcSwap::from_pointee(Hub::empty()),
            runtime: Runtime::start(),
            spills,
            tracing: AtomicBool::new(false),
            content: AtomicBool::new(false),
        }
    }

    /// Start the sinks of `settings` unless they are the ones running. Needs a tokio runtime.
    pub fn configure(&self, settings: &CallbackSettings, metrics: &Metrics) {
        if self.hub.load().settings == *settings {
            return;
        }
        let hub = Hub::start(settings, metrics, &self.runtime, &self.spills);
        self.tracing.store(settings.tracing(), Ordering::Relaxed);
        self.content.store(settings.content(), Ordering::Relaxed);
        let old = self.hub.swap(Arc::new(hub));
        // The old sinks finish their queues in the background.
        if let Ok(old) = Arc::try_unwrap(old) {
            if !old.sinks.is_empty() {
                self.runtime.spawn(old.close());
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

    /// Offer a finished request to the sinks (recorder task only; the record is moved on,
    /// never cloned).
    pub fn offer(&self, record: RequestRecord) {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts the pushes it gets, to show a backlog is spilled in one write per drain.
    struct CountingSpill {
        pushes: Arc<std::sync::atomic::AtomicUsize>,
        inner: MemorySpill,
    }

    impl Spill for CountingSpill {
        fn push(&mut self, records: Vec<Arc<CallbackRecord>>) -> usize {
            self.pushes.fetch_add(1, Ordering::Relaxed);
            self.inner.push(records)
        }
        fn take(&mut self, max: usize) -> Vec<Arc<CallbackRecord>> {
            self.inner.take(max)
        }
        fn unshift(&mut self, records: Vec<Arc<CallbackRecord>>) -> usize {
            self.inner.unshift(records)
        }
        fn len(&self) -> usize {
            self.inner.len()
        }
    }

    fn record(id: u32) -> RequestRecord {
        let mut r = RequestRecord::sample(&id.to_string());
        r.status = 200;
        r
    }

    #[test]
    fn a_full_queue_spills_the_rest_of_a_drain_in_one_push_and_in_order() {
        let metrics = Metrics::default();
        let pushes = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (tx, mut rx) = mpsc::channel(2);
        let spill: SharedSpill = Arc::new(Mutex::new(Box::new(CountingSpill {
            pushes: pushes.clone(),
            inner: MemorySpill::new(100),
        })));
        let sinks = [Sink {
            on_success: true,
            on_failure: true,
            content: false,
            tx,
            spill: spill.clone(),
            stats: Arc::new(metrics.callback_stats("hook")),
        }];
        let records: Vec<RequestRecord> = (1..=5).map(record).collect();
        fan_out(&sinks, &records);
        // Two fit the queue; the other three went to the spill together, oldest first.
        assert_eq!(rx.try_recv().unwrap().request_id, "1");
        assert_eq!(rx.try_recv().unwrap().request_id, "2");
        assert_eq!(pushes.load(Ordering::Relaxed), 1);
        let spilled = with_spill(&spill, |s| s.take(10));
        let ids: Vec<&str> = spilled.iter().map(|r| r.request_id.as_str()).collect();
        assert_eq!(ids, ["3", "4", "5"]);
    }
}
