//! The in-process store: moka's concurrent cache (TinyLFU admission, LRU eviction), weighed
//! in bytes so that its bound is memory, not a count of entries, each entry expiring after
//! its own TTL.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::HeaderValue;
use moka::notification::RemovalCause;
use moka::sync::Cache as Moka;
use moka::Expiry;
use sluice_core::limits::Nanos;
use sluice_core::usage::Usage;

use crate::{CacheKey, CacheStats};

/// A stored answer: what the client got, and what it cost upstream.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The answer's status (2xx only are stored).
    pub status: u16,
    /// Its content type (`application/json`, `text/event-stream`).
    pub content_type: HeaderValue,
    /// Its body: a JSON document, or a whole stream's bytes as the client got them.
    pub body: Bytes,
    /// Whether the body is a stream (replayed as `text/event-stream`), and with which usage.
    pub shape: crate::Shape,
    /// The usage the upstream reported.
    pub usage: Option<Usage>,
    /// What the upstream call cost: what each hit saves.
    pub cost: Option<Nanos>,
    /// When it was stored.
    pub stored: Instant,
    /// How long it is kept.
    pub ttl: Duration,
}

/// Bytes an entry is weighed at: its body and a fixed overhead for the rest.
fn weight(entry: &Entry) -> u32 {
    u32::try_from(entry.body.len() + 256).unwrap_or(u32::MAX)
}

struct ByTtl;

impl Expiry<u128, Arc<Entry>> for ByTtl {
    fn expire_after_create(&self, _: &u128, entry: &Arc<Entry>, _: Instant) -> Option<Duration> {
        Some(entry.ttl)
    }
}

/// The in-process store.
pub struct LocalCache {
    entries: Moka<u128, Arc<Entry>>,
}

impl std::fmt::Debug for LocalCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalCache")
            .field("entries", &self.entries.entry_count())
            .field("bytes", &self.entries.weighted_size())
            .finish()
    }
}

impl LocalCache {
    /// A store of at most `max_bytes` of answers; evictions are counted in `stats`.
    pub fn new(max_bytes: u64, stats: Arc<CacheStats>) -> Self {
        let entries = Moka::builder()
            .max_capacity(max_bytes)
            .weigher(|_: &u128, e: &Arc<Entry>| weight(e))
            .expire_after(ByTtl)
            .eviction_listener(move |_, _, cause| {
                if cause == RemovalCause::Size {
                    CacheStats::count(&stats.evictions, 1);
                }
            })
            .build();
        Self { entries }
    }

    /// The answer stored under `key`, if it is no older than `max_age`.
    pub fn get(&self, key: CacheKey, max_age: Option<Duration>) -> Option<Arc<Entry>> {
        let e = self.entries.get(&key.0)?;
        match max_age {
            Some(age) if e.stored.elapsed() > age => None,
            _ => Some(e),
        }
    }

    /// Store an answer under `key`.
    pub fn put(&self, key: CacheKey, entry: Entry) {
        self.entries.insert(key.0, Arc::new(entry));
    }

    /// Store an answer already shared (read from the fleet's store) under `key`.
    pub fn put_shared(&self, key: CacheKey, entry: Arc<Entry>) {
        self.entries.insert(key.0, entry);
    }

    /// Drop the answer under `key`; whether there was one.
    pub fn remove(&self, key: CacheKey) -> bool {
        self.entries.remove(&key.0).is_some()
    }

    /// Drop every answer.
    pub fn clear(&self) {
        self.entries.invalidate_all();
        self.entries.run_pending_tasks();
    }

    /// Bytes held (bodies and overhead), after pending bookkeeping.
    pub fn bytes(&self) -> u64 {
        self.entries.run_pending_tasks();
        self.entries.weighted_size()
    }

    /// Entries held, after pending bookkeeping.
    pub fn len(&self) -> u64 {
        self.entries.run_pending_tasks();
        self.entries.entry_count()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A 200 JSON answer with `body`, stored now for `ttl`.
    pub(crate) fn entry(body: &'static [u8], ttl: Duration) -> Entry {
        Entry {
            status: 200,
            content_type: HeaderValue::from_static("application/json"),
            body: Bytes::from_static(body),
            shape: crate::Shape::Whole,
            usage: None,
            cost: None,
            stored: Instant::now(),
            ttl,
        }
    }

    #[test]
    fn get_put_remove_age_and_the_byte_bound() {
        let stats = Arc::new(CacheStats::default());
        let store = LocalCache::new(10_000, Arc::clone(&stats));
        store.put(CacheKey(1), entry(b"{\"a\":1}", Duration::from_secs(60)));
        assert_eq!(
            &store.get(CacheKey(1), None).unwrap().body[..],
            b"{\"a\":1}"
        );
        assert!(store.get(CacheKey(2), None).is_none());
        assert!(
            store.get(CacheKey(1), Some(Duration::ZERO)).is_none(),
            "too old for max-age 0"
        );
        assert!(store.remove(CacheKey(1)));
        assert!(store.get(CacheKey(1), None).is_none());
        // 100 entries of ~1.3 KB in a 10 KB store: most are evicted, the bound holds.
        static BIG: [u8; 1024] = [b'x'; 1024];
        for k in 0..100 {
            store.put(CacheKey(k), entry(&BIG, Duration::from_secs(60)));
        }
        assert!(store.bytes() <= 10_000, "{}", store.bytes());
        assert!(stats.evictions.load(std::sync::atomic::Ordering::Relaxed) > 0);
        store.clear();
        assert_eq!(store.bytes(), 0);
    }

    #[test]
    fn entries_expire_after_their_ttl() {
        let store = LocalCache::new(10_000, Arc::default());
        store.put(CacheKey(1), entry(b"x", Duration::from_millis(30)));
        assert!(store.get(CacheKey(1), None).is_some());
        std::thread::sleep(Duration::from_millis(60));
        assert!(store.get(CacheKey(1), None).is_none());
    }
}
