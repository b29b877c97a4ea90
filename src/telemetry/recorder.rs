//! Where finished requests go: a bounded channel to one background task that writes the log
//! line (and, later, spend records, metrics and callbacks). The request only pays for a
//! `try_send`; if the queue is ever full the record is logged inline rather than dropped.

use std::sync::Arc;

use tokio::sync::mpsc;

use super::callbacks::Callbacks;
use super::metrics::Metrics;
use super::record::RequestRecord;

/// Records waiting for the writer before requests start logging inline.
pub const QUEUE_CAPACITY: usize = 16 * 1024;

/// A consumer of finished request records (the log writer, a test observer, ...).
pub trait RecordSink: Send + 'static {
    /// Take one record. Runs on the recorder task, never on a request.
    fn accept(&mut self, record: &RequestRecord);
}

/// Writes each record as a log line.
#[derive(Debug, Default)]
pub struct LogSink;

impl RecordSink for LogSink {
    fn accept(&mut self, record: &RequestRecord) {
        record.emit();
    }
}

/// Forwards records to a channel (for tests and embedders that want to see every record).
impl RecordSink for mpsc::UnboundedSender<RequestRecord> {
    fn accept(&mut self, record: &RequestRecord) {
        let _ = self.send(record.clone());
    }
}

/// The request side of the recorder: cheap to clone, never blocks.
#[derive(Debug, Clone)]
pub struct Recorder {
    tx: mpsc::Sender<RequestRecord>,
    metrics: Arc<Metrics>,
    callbacks: Arc<Callbacks>,
}

impl Recorder {
    /// Start the recorder task with these sinks (the Prometheus metrics are always fed). The
    /// task ends when every `Recorder` clone is dropped, after draining the queue.
    pub fn start(sinks: Vec<Box<dyn RecordSink>>) -> (Self, tokio::task::JoinHandle<()>) {
        Self::start_with(sinks, Callbacks::default())
    }

    /// As [`Recorder::start`], with callbacks built by the caller (e.g. with a disk spool as
    /// their spill, [`Callbacks::with_spill`]).
    pub fn start_with(
        mut sinks: Vec<Box<dyn RecordSink>>,
        callbacks: Callbacks,
    ) -> (Self, tokio::task::JoinHandle<()>) {
        let (tx, mut rx) = mpsc::channel::<RequestRecord>(QUEUE_CAPACITY);
        let metrics = Arc::new(Metrics::default());
        let callbacks = Arc::new(callbacks);
        sinks.insert(0, Box::new(metrics.clone()));
        let fan_out = callbacks.clone();
        let task = tokio::spawn(async move {
            while let Some(record) = rx.recv().await {
                for sink in &mut sinks {
                    sink.accept(&record);
                }
                fan_out.offer(record);
            }
            // Every request is recorded: let the callbacks deliver what they hold.
            fan_out.close().await;
        });
        (
            Self {
                tx,
                metrics,
                callbacks,
            },
            task,
        )
    }

    /// Start (or keep) the logging callbacks and trace export of a config.
    pub fn configure(&self, config: &crate::config::CallbackSettings) {
        self.callbacks.configure(config, &self.metrics);
    }

    /// The callbacks: whether tracing and content logging are on, and each sink's status.
    pub fn callbacks(&self) -> &Callbacks {
        &self.callbacks
    }

    /// The metrics the recorder keeps, for `/metrics`.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Records waiting for the recorder task.
    pub fn queue_depth(&self) -> usize {
        self.tx.max_capacity() - self.tx.capacity()
    }

    /// Hand a finished request's record over.
    pub fn record(&self, mut record: RequestRecord) {
        record.duration = Some(record.start.elapsed());
        match self.tx.try_send(record) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(r) | mpsc::error::TrySendError::Closed(r)) => {
                r.emit();
                // Overload only: the callbacks still get it (a try_send into their own queue).
                self.callbacks.offer(r);
            }
        }
    }
}
