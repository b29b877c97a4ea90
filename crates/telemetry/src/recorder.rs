//! Where finished requests go: a bounded queue to a task that feeds the sinks (log line,
//! metrics, spend log, callbacks). The request only pays for a `try_send`; if a queue is ever
//! full the record is handled inline rather than dropped.
//!
//! Each worker thread (a single-threaded runtime, see `server::serve_threads`) gets its own
//! queue and recorder task, started by its first record: handing a record over then wakes a
//! task on the same thread, with no system call. One queue to a task on the main runtime
//! cost a cross-thread wake-up (eventfd write, context switch) per request: 0.72 context
//! switches and 4 µs of the main thread's CPU per request at concurrency 64. Records made
//! anywhere else (a multi-threaded runtime, a worker that has finished) take the shared queue.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::runtime::{Handle, RuntimeFlavor};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::callbacks::Callbacks;
use super::metrics::Metrics;
use sluice_core::record::{RecordJournal, RecordSink, RequestRecord};

/// Records waiting in one queue before requests start handling them inline.
pub const QUEUE_CAPACITY: usize = 16 * 1024;

/// Most records a recorder task takes from its queue at once.
const DRAIN_BATCH: usize = 256;

/// Writes each record as a log line.
#[derive(Debug, Default)]
pub struct LogSink;

impl RecordSink for LogSink {
    fn accept(&self, record: &RequestRecord) {
        record.emit();
    }
}

/// What every recorder task feeds: the sinks (metrics first) and the callbacks.
struct Fanout {
    sinks: Vec<Box<dyn RecordSink>>,
    callbacks: Arc<Callbacks>,
}

impl Fanout {
    fn take(&self, mut record: RequestRecord) {
        for sink in &self.sinks {
            sink.accept(&record);
        }
        // The spend log has its own hold on the journal file now; a record the callbacks keep
        // a while must not keep the file too.
        record.journaled = None;
        self.callbacks.offer(record);
    }
}

/// Feed the sinks from one queue until every sender is gone.
async fn drain(mut rx: mpsc::Receiver<RequestRecord>, fanout: Arc<Fanout>) {
    let mut batch = Vec::with_capacity(DRAIN_BATCH);
    while rx.recv_many(&mut batch, DRAIN_BATCH).await > 0 {
        for record in batch.drain(..) {
            fanout.take(record);
        }
    }
}

/// One worker thread's queue for one recorder.
struct Local {
    recorder: u64,
    tx: mpsc::Sender<RequestRecord>,
    task: JoinHandle<()>,
}

/// This thread's queues, and whether it has finished (its runtime is going away: later records
/// take the shared queue).
#[derive(Default)]
struct Thread {
    queues: Vec<Local>,
    finished: bool,
}

thread_local! {
    static THREAD: RefCell<Thread> = RefCell::new(Thread::default());
}

/// Tells recorders apart in a thread's queues (tests run several in one process).
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// The request side of the recorder: cheap to clone, never blocks.
#[derive(Clone)]
pub struct Recorder {
    id: u64,
    /// The shared queue, to the task on the runtime that started the recorder.
    tx: mpsc::Sender<RequestRecord>,
    fanout: Arc<Fanout>,
    metrics: Arc<Metrics>,
    /// Every worker queue, for the queue depth.
    locals: Arc<Mutex<Vec<mpsc::WeakSender<RequestRecord>>>>,
    /// A sink's per-request journal (the spend writer's): written on the request's thread
    /// before the record is queued.
    journal: Option<Arc<dyn RecordJournal>>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder").field("id", &self.id).finish()
    }
}

impl Recorder {
    /// Start the recorder with these sinks (the Prometheus metrics are always fed). The
    /// returned task ends when every `Recorder` clone is dropped, after draining the shared
    /// queue; worker queues drain in [`finish_worker`].
    pub fn start(sinks: Vec<Box<dyn RecordSink>>) -> (Self, JoinHandle<()>) {
        Self::start_with(sinks, Callbacks::default())
    }

    /// As [`Recorder::start`], with callbacks built by the caller (e.g. with a disk spool as
    /// their spill, [`Callbacks::with_spill`]).
    pub fn start_with(
        mut sinks: Vec<Box<dyn RecordSink>>,
        callbacks: Callbacks,
    ) -> (Self, JoinHandle<()>) {
        let (tx, rx) = mpsc::channel::<RequestRecord>(QUEUE_CAPACITY);
        let journal = sinks.iter().find_map(|s| s.journal());
        let metrics = Arc::new(Metrics::default());
        sinks.insert(0, Box::new(metrics.clone()));
        let fanout = Arc::new(Fanout {
            sinks,
            callbacks: Arc::new(callbacks),
        });
        let shared = fanout.clone();
        let task = tokio::spawn(async move {
            drain(rx, shared.clone()).await;
            // Every request is recorded: let the callbacks deliver what they hold.
            shared.callbacks.close().await;
        });
        (
            Self {
                id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
                tx,
                fanout,
                metrics,
                locals: Arc::default(),
                journal,
            },
            task,
        )
    }

    /// Start (or keep) the logging callbacks and trace export of a config.
    pub fn configure(&self, config: &sluice_config::CallbackSettings) {
        self.fanout.callbacks.configure(config, &self.metrics);
    }

    /// The callbacks: whether tracing and content logging are on, and each sink's status.
    pub fn callbacks(&self) -> &Callbacks {
        &self.fanout.callbacks
    }

    /// The metrics the recorder keeps, for `/metrics`.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Records waiting for a recorder task, all queues together.
    pub fn queue_depth(&self) -> usize {
        let depth = |tx: &mpsc::Sender<RequestRecord>| tx.max_capacity() - tx.capacity();
        let locals = match self.locals.lock() {
            Ok(l) => l,
            Err(p) => p.into_inner(),
        };
        depth(&self.tx)
            + locals
                .iter()
                .filter_map(mpsc::WeakSender::upgrade)
                .map(|tx| depth(&tx))
                .sum::<usize>()
    }

    /// A finished MCP call (a record with `tool` set): counted in `sluice_mcp_*` at once, then
    /// queued like a request's record for its log line, spend log, callbacks and span.
    pub fn record_tool(&self, mut record: RequestRecord) {
        record.duration = Some(record.start.elapsed());
        if let Some(t) = &record.tool {
            let cost = record.cost.map(sluice_core::limits::dollars);
            self.metrics
                .mcp()
                .observe(t, record.duration.unwrap_or_default(), cost);
        }
        self.record(record);
    }

    /// Journal `record` now, when it is handed over only later (a stream's record, when its
    /// relay is dropped) but its answer's last byte is about to leave. Nothing without a
    /// per-request spend journal, or when the record is journaled already.
    pub fn journal(&self, record: &mut RequestRecord) {
        if let Some(j) = &self.journal {
            j.journal(record);
        }
    }

    /// Hand a finished request's record over. With a per-request spend journal, the record's
    /// line is appended to it here, on the caller's thread, before the record is queued:
    /// callers hand the record over before the last byte of the answer leaves.
    pub fn record(&self, mut record: RequestRecord) {
        record.duration = Some(record.start.elapsed());
        self.journal(&mut record);
        let Some(record) = self.send_local(record) else {
            return;
        };
        match self.tx.try_send(record) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(r) | mpsc::error::TrySendError::Closed(r)) => {
                // Overload only: handled here rather than lost.
                self.fanout.take(r);
            }
        }
    }

    /// Queue the record on this worker thread's own queue, starting it with the thread's
    /// first record. Gives the record back where there is no such queue: not on a
    /// single-threaded runtime, the worker finished, or the queue full.
    fn send_local(&self, record: RequestRecord) -> Option<RequestRecord> {
        THREAD.with(|t| {
            let Ok(mut t) = t.try_borrow_mut() else {
                return Some(record);
            };
            if t.finished {
                return Some(record);
            }
            let at = match t.queues.iter().position(|q| q.recorder == self.id) {
                Some(i) => i,
                None => {
                    let Ok(handle) = Handle::try_current() else {
                        return Some(record);
                    };
                    if handle.runtime_flavor() != RuntimeFlavor::CurrentThread {
                        return Some(record);
                    }
                    let (tx, rx) = mpsc::channel(QUEUE_CAPACITY);
                    let task = handle.spawn(drain(rx, self.fanout.clone()));
                    if let Ok(mut l) = self.locals.lock() {
                        l.retain(|w| w.strong_count() > 0);
                        l.push(tx.downgrade());
                    }
                    t.queues.push(Local {
                        recorder: self.id,
                        tx,
                        task,
                    });
                    t.queues.len() - 1
                }
            };
            match t.queues[at].tx.try_send(record) {
                Ok(()) => None,
                Err(mpsc::error::TrySendError::Full(r)) => Some(r),
                Err(mpsc::error::TrySendError::Closed(r)) => {
                    // The runtime that ran this queue's task is gone (a test's, say).
                    t.queues.swap_remove(at);
                    Some(r)
                }
            }
        })
    }
}

/// End this worker thread's recorder queues: close them and wait until their tasks have fed
/// every record to the sinks. Call at the end of a worker's runtime (`server::serve_threads`)
/// so that no record is lost with it; records made on this thread afterwards (streams dropped
/// with the runtime) take the shared queue.
pub async fn finish_worker() {
    let queues = THREAD.with(|t| {
        let mut t = t.borrow_mut();
        t.finished = true;
        std::mem::take(&mut t.queues)
    });
    for Local { tx, task, .. } in queues {
        drop(tx);
        let _ = task.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str) -> RequestRecord {
        RequestRecord::sample(id)
    }

    #[tokio::test]
    async fn a_worker_thread_feeds_its_own_queue_and_loses_nothing_at_the_end() {
        let (seen_tx, mut seen) = mpsc::unbounded_channel();
        let (recorder, shared_task) = Recorder::start(vec![Box::new(seen_tx)]);
        for id in ["a", "b", "c"] {
            recorder.record(record(id));
        }
        // On this (single-threaded) runtime the records went to a local queue.
        assert_eq!(THREAD.with(|t| t.borrow().queues.len()), 1);
        finish_worker().await;
        let ids: Vec<String> = std::iter::from_fn(|| seen.try_recv().ok())
            .map(|r| r.request_id.to_str().unwrap().to_owned())
            .collect();
        assert_eq!(ids, ["a", "b", "c"]);
        // After the worker finished, records take the shared queue.
        recorder.record(record("d"));
        drop(recorder);
        shared_task.await.unwrap();
        assert_eq!(seen.recv().await.unwrap().request_id, "d");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_multi_threaded_runtime_uses_the_shared_queue() {
        let (seen_tx, mut seen) = mpsc::unbounded_channel();
        let (recorder, task) = Recorder::start(vec![Box::new(seen_tx)]);
        recorder.record(record("x"));
        assert!(THREAD.with(|t| t.borrow().queues.is_empty()));
        drop(recorder);
        task.await.unwrap();
        assert_eq!(seen.recv().await.unwrap().request_id, "x");
    }
}
