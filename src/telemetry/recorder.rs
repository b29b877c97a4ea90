//! Where finished requests go: a bounded channel to one background task that writes the log
//! line (and, later, spend records, metrics and callbacks). The request only pays for a
//! `try_send`; if the queue is ever full the record is logged inline rather than dropped.

use std::sync::Arc;

use tokio::sync::mpsc;

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
}

impl Recorder {
    /// Start the recorder task with these sinks (the Prometheus metrics are always fed). The
    /// task ends when every `Recorder` clone is dropped, after draining the queue.
    pub fn start(mut sinks: Vec<Box<dyn RecordSink>>) -> (Self, tokio::task::JoinHandle<()>) {
        let (tx, mut rx) = mpsc::channel::<RequestRecord>(QUEUE_CAPACITY);
        let metrics = Arc::new(Metrics::default());
        sinks.insert(0, Box::new(metrics.clone()));
        let task = tokio::spawn(async move {
            while let Some(record) = rx.recv().await {
                for sink in &mut sinks {
                    sink.accept(&record);
                }
            }
        });
        (Self { tx, metrics }, task)
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
    pub fn record(&self, record: RequestRecord) {
        match self.tx.try_send(record) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(r) | mpsc::error::TrySendError::Closed(r)) => {
                r.emit();
            }
        }
    }
}
