//! The response cache (LiteLLM's `cache: true`): an answer stored under a hash of what
//! determines it and served again without calling the upstream, and identical requests in
//! flight at the same moment collapsed into one upstream call.
//!
//! - [`key`]: the key, hashed from the body bytes the request already holds;
//! - [`store`]: the in-process store, bounded in bytes, entries expiring by their TTL;
//! - [`flight`]: in-flight de-duplication, with streams fanned out as chunks arrive;
//! - [`settings`]: what `litellm_settings.cache_params` configures;
//! - [`semantic`]: the prompt text a semantic cache compares, and its in-process index;
//! - [`wire`]: an answer as bytes, for a store shared by a fleet (Redis).

pub mod flight;
/// The fuzz target over the wire format (fuzz/README.md); not an API.
#[doc(hidden)]
#[allow(clippy::expect_used)] // a broken promise must crash the fuzz target
pub mod fuzz;
pub mod key;
pub mod semantic;
pub mod settings;
pub mod shape;
pub mod store;
pub mod wire;

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use sluice_core::Secret;

pub use flight::{Flights, Follower, Head, Join, Leader, Next};
pub use key::CacheKey;
pub use settings::{CacheSettings, CacheType};
pub use shape::Shape;
pub use store::{Entry, LocalCache};

/// The cache of one gateway: its settings, its store and its flights, and the counters the
/// metrics read.
#[derive(Debug)]
pub struct Cache {
    /// What the config asked for.
    pub settings: CacheSettings,
    /// Stored answers (none when only de-duplication is on).
    pub store: Option<LocalCache>,
    /// Requests in flight, by key.
    pub flights: Arc<Flights>,
    /// Counters for `/metrics`.
    pub stats: Arc<CacheStats>,
    /// The key hash's secret (see [`key`]).
    pub seed: u64,
}

impl Cache {
    /// A cache as `settings` describe it. A cache shared by a fleet seeds its keys with a
    /// secret every instance has (`fleet_secret`, the master key), so that they compute the
    /// same keys; an instance's own cache with a secret of the process.
    pub fn new(settings: CacheSettings, fleet_secret: Option<&Secret>) -> Self {
        let stats = Arc::new(CacheStats::default());
        let store = settings
            .store
            .then(|| LocalCache::new(settings.max_bytes, Arc::clone(&stats)));
        let seed = match settings.kind {
            CacheType::Redis(_) => xxhash_rust::xxh3::xxh3_64_with_seed(
                fleet_secret.map_or(&b""[..], |s| s.expose().as_bytes()),
                0x5c_ac4e,
            ),
            // Hashing nothing with std's randomly keyed hasher.
            CacheType::Local => std::hash::BuildHasher::hash_one(
                &std::collections::hash_map::RandomState::new(),
                0u8,
            ),
        };
        Self {
            settings,
            store,
            flights: Arc::new(Flights::default()),
            stats,
            seed,
        }
    }
}

/// What the cache did, counted since start.
#[derive(Debug, Default)]
pub struct CacheStats {
    /// Answers served from the store.
    pub hits: AtomicU64,
    /// Lookups that found nothing (the request went upstream).
    pub misses: AtomicU64,
    /// Requests answered by another identical request's upstream call.
    pub coalesced: AtomicU64,
    /// Hits that came from the shared store (Redis), counted in `hits` too.
    pub shared_hits: AtomicU64,
    /// Hits of the semantic cache (a close prompt's answer), counted in `hits` too.
    pub semantic_hits: AtomicU64,
    /// Embeddings for the semantic cache that failed or timed out (plain misses).
    pub embedding_errors: AtomicU64,
    /// Calls to the shared store that failed or timed out.
    pub shared_errors: AtomicU64,
    /// Entries dropped to stay within the byte bound.
    pub evictions: AtomicU64,
    /// Upstream cost the hits did not incur (what their stored answers cost), in nano-dollars.
    pub saved_nanos: AtomicU64,
}

impl CacheStats {
    /// Count one of the counters above.
    pub fn count(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Relaxed);
    }
}
