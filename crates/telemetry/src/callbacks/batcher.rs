//! One task per sink: gather records into batches (`batch_size`, or whatever arrived within
//! `flush_interval`), deliver, and when delivery fails keep the records in the spill and retry
//! with exponential backoff (0.5 s doubling to 30 s) until the sink is back, oldest first.
//! Lossless up to the spill's bound; beyond it the oldest records are dropped and counted.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::BytesMut;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::payload::CallbackRecord;
use super::stats::SinkStats;
use super::target::Target;

/// First retry delay after a failed delivery.
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// Longest wait between two retries of a down sink.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Where a sink's undelivered records wait. The seam for the disk spool (`store::Spool`):
/// an implementation only has to keep records in order within its bound.
pub trait Spill: Send + 'static {
    /// Keep these records (after any already held). Returns how many of the oldest were
    /// dropped to stay within the bound.
    fn push(&mut self, records: Vec<Arc<CallbackRecord>>) -> usize;
    /// Take up to `max` of the oldest records.
    fn take(&mut self, max: usize) -> Vec<Arc<CallbackRecord>>;
    /// Put records that could not be delivered back at the front, in order.
    fn unshift(&mut self, records: Vec<Arc<CallbackRecord>>) -> usize;
    /// Records held.
    fn len(&self) -> usize;
    /// Nothing held.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The in-memory spill: at most `limit` records (see docs/observability.md for the bound).
#[derive(Debug, Default)]
pub struct MemorySpill {
    records: VecDeque<Arc<CallbackRecord>>,
    limit: usize,
}

impl MemorySpill {
    /// A spill holding at most `limit` records.
    pub fn new(limit: usize) -> Self {
        Self {
            records: VecDeque::new(),
            limit,
        }
    }

    fn trim_front(&mut self) -> usize {
        let over = self.records.len().saturating_sub(self.limit);
        self.records.drain(..over);
        over
    }
}

impl Spill for MemorySpill {
    fn push(&mut self, records: Vec<Arc<CallbackRecord>>) -> usize {
        self.records.extend(records);
        self.trim_front()
    }

    fn take(&mut self, max: usize) -> Vec<Arc<CallbackRecord>> {
        let n = max.min(self.records.len());
        self.records.drain(..n).collect()
    }

    fn unshift(&mut self, records: Vec<Arc<CallbackRecord>>) -> usize {
        for r in records.into_iter().rev() {
            self.records.push_front(r);
        }
        // Over the bound, the newest still go first into the bin: drop from the front anyway,
        // so the sink catches up with recent records rather than ancient ones.
        self.trim_front()
    }

    fn len(&self) -> usize {
        self.records.len()
    }
}

/// The spill shared by the recorder side (queue full) and the sink's task.
pub type SharedSpill = Arc<Mutex<Box<dyn Spill>>>;

/// Run `f` on the spill (a poisoned lock still holds valid records).
pub fn with_spill<R>(spill: &SharedSpill, f: impl FnOnce(&mut dyn Spill) -> R) -> R {
    let mut guard = match spill.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    };
    f(guard.as_mut())
}

/// A sink's batching task.
pub struct Batcher {
    /// Where to send.
    pub target: Target,
    /// Records per batch.
    pub batch_size: usize,
    /// Longest a record waits for its batch.
    pub flush_interval: Duration,
    /// Undelivered records.
    pub spill: SharedSpill,
    /// Counters and gauges.
    pub stats: Arc<SinkStats>,
}

impl Batcher {
    /// Run until the queue closes, then try once more to deliver what is left.
    pub async fn run(self, mut rx: mpsc::Receiver<Arc<CallbackRecord>>) {
        // One encode buffer for the sink's life: each batch reuses its allocation.
        let mut buf = BytesMut::new();
        let mut backoff = FIRST_BACKOFF;
        let mut retry_at: Option<Instant> = None;
        let mut open = true;
        while open {
            // Gather a batch: wait for the first record (or the next retry), then fill until
            // the batch is full or the flush interval has passed.
            let mut batch = Vec::with_capacity(self.batch_size.min(1024));
            let wake = retry_at.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
            tokio::select! {
                r = rx.recv() => match r {
                    Some(rec) => batch.push(rec),
                    None => open = false,
                },
                () = tokio::time::sleep_until(wake) => {}
            }
            if !batch.is_empty() {
                let deadline = Instant::now() + self.flush_interval;
                while batch.len() < self.batch_size {
                    tokio::select! {
                        r = rx.recv() => match r {
                            Some(rec) => batch.push(rec),
                            None => { open = false; break; }
                        },
                        () = tokio::time::sleep_until(deadline) => break,
                    }
                }
            }
            self.stats.set_queue(rx.len());
            // While the sink is down, new batches join the spill behind the older records.
            let down = retry_at.is_some();
            if down && !batch.is_empty() {
                self.spill_batch(batch);
                batch = Vec::new();
            }
            let fresh = batch.len();
            if retry_at.is_some_and(|t| t <= Instant::now()) || (!open && down) {
                batch = with_spill(&self.spill, |s| s.take(self.batch_size));
            }
            if batch.is_empty() {
                continue;
            }
            match self.target.deliver(&batch, &mut buf).await {
                Ok(()) => {
                    self.stats.delivered(batch.len());
                    backoff = FIRST_BACKOFF;
                    // Back up: replay the spill at once, oldest first.
                    let more = with_spill(&self.spill, |s| !s.is_empty());
                    retry_at = more.then(Instant::now);
                    self.stats.set_up(true);
                }
                Err(e) => {
                    self.stats.failed();
                    tracing::warn!(sink = %self.stats.name, error = %e, records = batch.len(),
                        retry_in_ms = backoff.as_millis() as u64, "callback delivery failed");
                    if fresh > 0 {
                        self.stats.spilled(fresh);
                    }
                    let dropped = with_spill(&self.spill, |s| s.unshift(batch));
                    self.stats.dropped(dropped);
                    self.stats.set_up(false);
                    retry_at = Some(Instant::now() + backoff);
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
            self.stats.set_spill(with_spill(&self.spill, |s| s.len()));
        }
        // Closing (reload or shutdown): one pass over the spill while the sink answers; what
        // it refuses stays in the spill (a disk spool keeps it for the next start).
        loop {
            let batch = with_spill(&self.spill, |s| s.take(self.batch_size));
            if batch.is_empty() {
                break;
            }
            let n = batch.len();
            if self.target.deliver(&batch, &mut buf).await.is_err() {
                with_spill(&self.spill, |s| s.unshift(batch));
                break;
            }
            self.stats.delivered(n);
        }
        self.stats.set_spill(with_spill(&self.spill, |s| s.len()));
    }

    fn spill_batch(&self, batch: Vec<Arc<CallbackRecord>>) {
        let n = batch.len();
        let dropped = with_spill(&self.spill, |s| s.push(batch));
        self.stats.spilled(n);
        self.stats.dropped(dropped);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(i: u32) -> Arc<CallbackRecord> {
        CallbackRecord::sample(&i.to_string())
    }

    #[test]
    fn the_memory_spill_is_bounded_and_keeps_order() {
        let mut s = MemorySpill::new(3);
        assert_eq!(s.push(vec![rec(1), rec(2)]), 0);
        assert_eq!(s.push(vec![rec(3), rec(4)]), 1);
        let ids = |v: &[Arc<CallbackRecord>]| -> Vec<String> {
            v.iter().map(|r| r.request_id.clone()).collect()
        };
        let first = s.take(2);
        assert_eq!(ids(&first), ["2", "3"]);
        assert_eq!(s.unshift(first), 0);
        assert_eq!(ids(&s.take(10)), ["2", "3", "4"]);
        assert!(s.is_empty());
    }
}
