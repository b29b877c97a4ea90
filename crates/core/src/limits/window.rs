//! A sliding one-minute window over a counter, lock-free and exact for admission: the
//! estimate is the current fixed window's count plus the previous window's count weighted by
//! how much of it still overlaps the sliding minute (the approximation Cloudflare and Redis
//! rate limiters use; it never lets a burst at a window edge double the rate).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

const COUNT_BITS: u32 = 40;
const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;
const INDEX_MASK: u64 = (1 << (64 - COUNT_BITS)) - 1;

/// Two fixed windows (current and previous), each one atomic word: window index in the high
/// bits, count in the low 40.
#[derive(Debug)]
pub struct Window {
    slots: [AtomicU64; 2],
    len_ms: u64,
}

impl Window {
    /// A window of `len_ms` milliseconds (60,000 for per-minute limits).
    pub fn new(len_ms: u64) -> Self {
        Self {
            slots: [AtomicU64::new(0), AtomicU64::new(0)],
            len_ms: len_ms.max(1),
        }
    }

    fn split(&self, now_ms: u64) -> (u64, f64) {
        let idx = now_ms / self.len_ms;
        let into = (now_ms % self.len_ms) as f64 / self.len_ms as f64;
        (idx, into)
    }

    fn slot_count(&self, idx: u64) -> u64 {
        let v = self.slots[(idx % 2) as usize].load(Relaxed);
        if v >> COUNT_BITS == idx & INDEX_MASK {
            v & COUNT_MASK
        } else {
            0
        }
    }

    /// The previous window's weight in the sliding minute ending now.
    fn carried(&self, idx: u64, into: f64) -> f64 {
        match idx.checked_sub(1) {
            Some(prev) => self.slot_count(prev) as f64 * (1.0 - into),
            None => 0.0,
        }
    }

    /// The sliding count now.
    pub fn estimate(&self, now_ms: u64) -> u64 {
        let (idx, into) = self.split(now_ms);
        (self.carried(idx, into) + self.slot_count(idx) as f64).ceil() as u64
    }

    /// Add `n` if the sliding count stays within `limit` (`None`: always); returns whether it
    /// was added. Exact under concurrency: the check and the add are one compare-and-swap.
    pub fn try_add(&self, now_ms: u64, n: u64, limit: Option<u64>) -> bool {
        let (idx, into) = self.split(now_ms);
        let carried = self.carried(idx, into);
        let slot = &self.slots[(idx % 2) as usize];
        let tag = (idx & INDEX_MASK) << COUNT_BITS;
        let mut cur = slot.load(Relaxed);
        loop {
            let count = if cur >> COUNT_BITS == idx & INDEX_MASK {
                cur & COUNT_MASK
            } else {
                0
            };
            let next = count.saturating_add(n);
            if let Some(limit) = limit {
                if (carried + next as f64).ceil() as u64 > limit {
                    return false;
                }
            }
            match slot.compare_exchange_weak(cur, tag | next.min(COUNT_MASK), Relaxed, Relaxed) {
                Ok(_) => return true,
                Err(actual) => cur = actual,
            }
        }
    }

    /// Take back `n` added in the current window (a request admitted by this subject but
    /// refused by another).
    pub fn remove(&self, now_ms: u64, n: u64) {
        let (idx, _) = self.split(now_ms);
        let slot = &self.slots[(idx % 2) as usize];
        let mut cur = slot.load(Relaxed);
        while cur >> COUNT_BITS == idx & INDEX_MASK {
            let next = (cur & !COUNT_MASK) | (cur & COUNT_MASK).saturating_sub(n);
            match slot.compare_exchange_weak(cur, next, Relaxed, Relaxed) {
                Ok(_) => return,
                Err(actual) => cur = actual,
            }
        }
    }

    /// Add `n` unconditionally (tokens, known only when a request ends).
    pub fn add(&self, now_ms: u64, n: u64) {
        self.try_add(now_ms, n, None);
    }

    /// Milliseconds until the sliding count has room for `n` more under `limit` (an upper
    /// bound: the end of the current window when the previous one alone does not free it).
    pub fn wait_for_room(&self, now_ms: u64, n: u64, limit: u64) -> u64 {
        let (idx, into) = self.split(now_ms);
        let cur = self.slot_count(idx);
        let prev = idx.checked_sub(1).map_or(0, |p| self.slot_count(p));
        let left = self.len_ms - now_ms % self.len_ms;
        if cur + n > limit || prev == 0 {
            return left;
        }
        // Room appears when prev * (1 - into') <= limit - cur - n.
        let room = (limit - cur - n) as f64;
        let need_into = 1.0 - room / prev as f64;
        let wait = ((need_into - into) * self.len_ms as f64).ceil().max(1.0) as u64;
        wait.min(left)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn counts_within_a_window_then_slides() {
        let w = Window::new(60_000);
        for _ in 0..10 {
            assert!(w.try_add(1_000, 1, Some(10)));
        }
        assert!(
            !w.try_add(59_000, 1, Some(10)),
            "full within the same minute"
        );
        // A quarter into the next window, 75 % of the previous one still counts.
        assert_eq!(w.estimate(75_000), 8);
        assert!(w.try_add(75_000, 2, Some(10)));
        assert!(!w.try_add(75_000, 1, Some(10)));
        // Two windows later nothing is carried.
        assert_eq!(w.estimate(180_000), 0);
    }

    #[test]
    fn wait_for_room_points_at_when_it_frees() {
        let w = Window::new(60_000);
        for _ in 0..10 {
            w.add(0, 1);
        }
        let now = 60_000; // the previous window counts fully
        let wait = w.wait_for_room(now, 1, 10);
        assert!(wait > 0 && wait <= 6_000, "{wait}");
        assert!(w.try_add(now + wait, 1, Some(10)));
    }

    #[test]
    fn concurrent_adds_never_pass_the_limit() {
        let w = std::sync::Arc::new(Window::new(60_000));
        let admitted = std::sync::Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (w, admitted) = (w.clone(), admitted.clone());
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        if w.try_add(30_000, 1, Some(777)) {
                            admitted.fetch_add(1, Relaxed);
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(admitted.load(Relaxed), 777);
    }

    proptest! {
        /// Whatever the arrival times, the requests admitted in any sliding minute never exceed
        /// the limit by the window estimate, and a request is refused only when admitting it
        /// would pass the limit.
        #[test]
        fn admitted_never_exceed_the_sliding_limit(
            gaps in proptest::collection::vec(0u64..5_000, 1..400),
            limit in 1u64..50,
        ) {
            let w = Window::new(60_000);
            let mut now = 0;
            let mut admitted: Vec<u64> = Vec::new();
            for g in gaps {
                now += g;
                let before = w.estimate(now);
                let ok = w.try_add(now, 1, Some(limit));
                if ok {
                    admitted.push(now);
                    prop_assert!(w.estimate(now) <= limit);
                } else {
                    prop_assert!(before + 1 > limit, "refused with room: {before} of {limit}");
                }
                // The estimate never undercounts the fixed window we are in.
                let in_window = admitted.iter().filter(|t| **t / 60_000 == now / 60_000).count() as u64;
                prop_assert!(w.estimate(now) >= in_window);
            }
            // No fixed window ever holds more than the limit.
            let mut per_window = std::collections::HashMap::new();
            for t in &admitted {
                *per_window.entry(t / 60_000).or_insert(0u64) += 1;
            }
            prop_assert!(per_window.values().all(|n| *n <= limit));
        }
    }
}
