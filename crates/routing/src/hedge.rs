//! Hedged requests: when a group's first attempt has not answered (first byte) after a delay,
//! a second goes to another deployment and the first to answer wins. The delay is fixed or a
//! percentile of the group's observed time to first byte, kept in a small lock-free histogram.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// `router_settings.hedge_after_ms.<group>`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum HedgeAfter {
    /// A fixed delay.
    Fixed(Duration),
    /// This percentile (0–100) of the group's time to first byte, e.g. `"p95"`.
    Percentile(f64),
}

impl HedgeAfter {
    /// Parse `50` (milliseconds) or `"p95"`; `None` for anything else.
    pub fn parse(text: &str) -> Option<Self> {
        let t = text.trim();
        if let Some(p) = t.strip_prefix('p').or_else(|| t.strip_prefix('P')) {
            let p: f64 = p.parse().ok()?;
            return (p > 0.0 && p < 100.0).then_some(Self::Percentile(p));
        }
        let ms: f64 = t.parse().ok()?;
        (ms.is_finite() && ms >= 0.0).then(|| Self::Fixed(Duration::from_secs_f64(ms / 1000.0)))
    }

    /// The delay for the next request, if there is one yet (a percentile needs samples).
    pub fn delay(&self, ttfb: &TtfbHistogram) -> Option<Duration> {
        match self {
            Self::Fixed(d) => Some(*d),
            Self::Percentile(p) => ttfb.percentile(*p),
        }
    }
}

/// Sub-buckets per power of two (2 bits: about 19 % resolution).
const SUB_BITS: u32 = 2;
const BUCKETS: usize = 64 << SUB_BITS;
/// Samples before a percentile is trusted.
const MIN_SAMPLES: u64 = 20;
/// Halve every count after this many samples, so the estimate follows recent traffic.
const DECAY_EVERY: u64 = 4096;

/// Time-to-first-byte counts in log-spaced microsecond buckets.
#[derive(Debug)]
pub struct TtfbHistogram {
    buckets: Box<[AtomicU64]>,
    samples: AtomicU64,
}

impl Default for TtfbHistogram {
    fn default() -> Self {
        Self {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            samples: AtomicU64::new(0),
        }
    }
}

fn bucket_of(us: u64) -> usize {
    let v = us.max(1);
    let msb = 63 - v.leading_zeros();
    if msb < SUB_BITS {
        return v as usize;
    }
    let sub = (v >> (msb - SUB_BITS)) & ((1 << SUB_BITS) - 1);
    (((msb - SUB_BITS + 1) << SUB_BITS) as usize | sub as usize).min(BUCKETS - 1)
}

/// The largest value that falls in bucket `i`.
fn upper_bound(i: usize) -> u64 {
    let block = (i >> SUB_BITS) as u32;
    let sub = (i & ((1 << SUB_BITS) - 1)) as u64;
    if block == 0 {
        return sub;
    }
    let msb = block + SUB_BITS - 1;
    let base = 1u64 << msb;
    let step = base >> SUB_BITS;
    base + step * (sub + 1) - 1
}

impl TtfbHistogram {
    /// Add one observation.
    pub fn record(&self, ttfb: Duration) {
        let us = u64::try_from(ttfb.as_micros()).unwrap_or(u64::MAX);
        self.buckets[bucket_of(us)].fetch_add(1, Relaxed);
        let n = self.samples.fetch_add(1, Relaxed) + 1;
        if n % DECAY_EVERY == 0 {
            for b in self.buckets.iter() {
                let v = b.load(Relaxed);
                b.fetch_sub(v / 2, Relaxed);
            }
        }
    }

    /// The `p`th percentile, once there are enough samples.
    pub fn percentile(&self, p: f64) -> Option<Duration> {
        if self.samples.load(Relaxed) < MIN_SAMPLES {
            return None;
        }
        let total: u64 = self.buckets.iter().map(|b| b.load(Relaxed)).sum();
        if total == 0 {
            return None;
        }
        let rank = ((p / 100.0) * total as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, b) in self.buckets.iter().enumerate() {
            seen += b.load(Relaxed);
            if seen >= rank {
                return Some(Duration::from_micros(upper_bound(i)));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_fixed_and_percentile() {
        assert_eq!(
            HedgeAfter::parse("50"),
            Some(HedgeAfter::Fixed(Duration::from_millis(50)))
        );
        assert_eq!(HedgeAfter::parse("p95"), Some(HedgeAfter::Percentile(95.0)));
        assert_eq!(HedgeAfter::parse("p100"), None);
        assert_eq!(HedgeAfter::parse("soon"), None);
        assert_eq!(HedgeAfter::parse("-1"), None);
    }

    #[test]
    fn buckets_cover_values_within_a_fifth() {
        for v in [1u64, 3, 4, 7, 100, 1_000, 12_345, 999_999, 5_000_000_000] {
            let i = bucket_of(v);
            let hi = upper_bound(i);
            assert!(hi >= v, "{v} above its bucket's bound {hi}");
            assert!(
                hi as f64 <= v as f64 * 1.26 + 1.0,
                "{v}: bound {hi} too loose"
            );
            assert!(i == 0 || upper_bound(i - 1) < v, "{v} belongs lower");
        }
    }

    #[test]
    fn percentile_needs_samples_then_tracks_them() {
        let h = TtfbHistogram::default();
        for _ in 0..10 {
            h.record(Duration::from_millis(1));
        }
        assert_eq!(h.percentile(95.0), None);
        for _ in 0..80 {
            h.record(Duration::from_millis(1));
        }
        for _ in 0..10 {
            h.record(Duration::from_millis(100));
        }
        let p50 = h.percentile(50.0).unwrap();
        assert!(p50 >= Duration::from_millis(1) && p50 < Duration::from_micros(1300));
        let p95 = h.percentile(95.0).unwrap();
        assert!(p95 >= Duration::from_millis(100) && p95 < Duration::from_millis(126));
    }
}
