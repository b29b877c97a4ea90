//! The disk spill: a down sink's records go to the store's append-only spool file
//! (`sluice-spool/callback-<sink>.jsonl` in the data directory), so a long outage costs disk,
//! not memory, and a restart keeps them. Records taken for a delivery attempt and put back
//! after a failure wait in a small in-memory front (at most one batch), ahead of the file.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::Arc;

use super::batcher::Spill;
use super::payload::CallbackRecord;
use sluice_store::{Spool, SpoolError};

/// A spill backed by a spool file.
#[derive(Debug)]
pub struct DiskSpill {
    front: VecDeque<Arc<CallbackRecord>>,
    spool: Spool<CallbackRecord>,
    /// Records in the file not yet taken (counted, so `len` costs no read).
    on_disk: usize,
    /// Records lost because the file could not be written or was full.
    lost: usize,
}

/// Roughly what one record takes on disk, to turn `spill_limit` into a byte bound.
const RECORD_BYTES: u64 = 2048;

impl DiskSpill {
    /// Open (or reopen) the spill for `sink` under `dir`, bounded to about `limit` records.
    pub fn open(dir: &Path, sink: &str, limit: usize) -> Result<Self, SpoolError> {
        let name: String = sink
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let path = dir.join(format!("callback-{name}.jsonl"));
        let mut spool = Spool::open(&path, (limit as u64).saturating_mul(RECORD_BYTES))?;
        // Count what an earlier run left (replayed first, in order).
        let mut on_disk = 0;
        if !spool.is_empty() {
            let all = spool.peek(usize::MAX)?;
            on_disk = all.records.len();
        }
        Ok(Self {
            front: VecDeque::new(),
            spool,
            on_disk,
            lost: 0,
        })
    }
}

impl Spill for DiskSpill {
    fn push(&mut self, records: Vec<Arc<CallbackRecord>>) -> usize {
        let n = records.len();
        let owned: Vec<CallbackRecord> = records.iter().map(|r| (**r).clone()).collect();
        match self.spool.append(&owned) {
            Ok(()) => {
                self.on_disk += n;
                0
            }
            Err(e) => {
                self.lost += n;
                tracing::error!(error = %e, lost = n, "callback spool: records lost");
                n
            }
        }
    }

    fn take(&mut self, max: usize) -> Vec<Arc<CallbackRecord>> {
        let mut out: Vec<Arc<CallbackRecord>> = Vec::with_capacity(max.min(1024));
        while out.len() < max {
            match self.front.pop_front() {
                Some(r) => out.push(r),
                None => break,
            }
        }
        if out.len() < max && self.on_disk > 0 {
            match self.spool.peek(max - out.len()) {
                Ok(p) => {
                    let taken = p.records.len() + p.unreadable;
                    if self.spool.confirm(&p).is_ok() {
                        self.on_disk = self.on_disk.saturating_sub(taken);
                        out.extend(p.records.into_iter().map(Arc::new));
                    }
                }
                Err(e) => tracing::error!(error = %e, "callback spool unreadable"),
            }
            if self.spool.is_empty() {
                self.on_disk = 0;
            }
        }
        out
    }

    fn unshift(&mut self, records: Vec<Arc<CallbackRecord>>) -> usize {
        for r in records.into_iter().rev() {
            self.front.push_front(r);
        }
        0
    }

    fn len(&self) -> usize {
        self.front.len() + self.on_disk
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_order_across_failures_and_restarts() {
        let dir =
            std::env::temp_dir().join(format!("sluice-spill-{}", sluice_core::random::uuid_v4()));
        {
            let mut s = DiskSpill::open(&dir, "web hook", 100).unwrap();
            assert_eq!(
                s.push(vec![
                    CallbackRecord::sample("1"),
                    CallbackRecord::sample("2"),
                    CallbackRecord::sample("3")
                ]),
                0
            );
            assert_eq!(s.len(), 3);
            let first = s.take(2);
            assert_eq!(first.len(), 2);
            // Delivery failed: back at the front, ahead of the file.
            s.unshift(first);
            assert_eq!(s.len(), 3);
            let again: Vec<String> = s.take(10).iter().map(|r| r.request_id.clone()).collect();
            assert_eq!(again, ["1", "2", "3"]);
            assert!(s.is_empty());
            s.push(vec![
                CallbackRecord::sample("4"),
                CallbackRecord::sample("5"),
            ]);
        }
        // A restart: what was on disk is still there, in order.
        let mut s = DiskSpill::open(&dir, "web hook", 100).unwrap();
        assert_eq!(s.len(), 2);
        let ids: Vec<String> = s.take(10).iter().map(|r| r.request_id.clone()).collect();
        assert_eq!(ids, ["4", "5"]);
        let _ = std::fs::remove_dir_all(dir);
    }
}
