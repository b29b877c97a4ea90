//! The store a fleet shares (`cache_params.type: redis`): answers written to Redis off the
//! request path, read back when this instance's memory has none, and removals told to every
//! instance so that an answer deleted on one is gone from the memory of all.
//!
//! Redis is never allowed to fail a request: a lookup waits at most `socket_timeout`
//! (100 ms by default) and counts anything else as a miss; while Redis is away the instance
//! caches in its own memory and says so in `/health/readiness`.

use std::sync::{Arc, Weak};
use std::time::Instant;

use bytes::Bytes;
use redis::AsyncCommands;

use sluice_cache::settings::RedisCache;
use sluice_cache::{CacheKey, CacheStats, Entry};
use sluice_core::limits::wall_ms;

use crate::fleet::{BadRedisUrl, RedisLink};

/// The channel removals are told on: a key in hex, or `*` for all.
const INVALIDATIONS: &str = "sluice:cache-invalidations";

/// Keys are `<prefix><hex key>`; the prefix is the namespace (LiteLLM's `namespace:<hash>`).
const DEFAULT_PREFIX: &str = "sluice:cache";

/// How many keys one `SCAN` step asks for while flushing.
const SCAN_COUNT: usize = 1000;

/// Why a management call on the shared store failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SharedError {
    /// Redis is not connected.
    #[error("the cache's Redis is unreachable")]
    Unreachable,
    /// Redis answered with an error or not in time.
    #[error("the cache's Redis failed: {0}")]
    Failed(String),
}

/// The shared store of one cache.
pub(crate) struct SharedStore {
    link: Arc<RedisLink>,
    settings: RedisCache,
    prefix: String,
    stats: Arc<CacheStats>,
}

impl std::fmt::Debug for SharedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedStore")
            .field("up", &self.link.is_up())
            .field("prefix", &self.prefix)
            .finish()
    }
}

impl SharedStore {
    /// Connect (in the background) to the Redis `settings` name; keys under `namespace`.
    pub(crate) fn start(
        settings: &RedisCache,
        namespace: Option<&str>,
        stats: Arc<CacheStats>,
    ) -> Result<Self, BadRedisUrl> {
        let link = RedisLink::start(
            &settings.target,
            settings.timeout,
            (
                "cached answers are shared by the fleet",
                "answers are cached in this instance's memory alone",
            ),
        )?;
        Ok(Self {
            link,
            settings: settings.clone(),
            prefix: format!("{}:", namespace.unwrap_or(DEFAULT_PREFIX)),
            stats,
        })
    }

    /// Remove from `local` what any instance removes from the shared store, for as long as
    /// the cache `local` belongs to lives.
    pub(crate) fn hear_invalidations(&self, local: Weak<super::ResponseCache>) {
        self.link.listen(&[INVALIDATIONS], move |_, payload| {
            let Some(cache) = local.upgrade() else {
                return false;
            };
            if let Some(store) = &cache.core.store {
                if payload == "*" {
                    store.clear();
                } else if let Some(key) = CacheKey::from_hex(payload) {
                    store.remove(key);
                }
            }
            true
        });
    }

    /// Whether Redis answered the last call.
    pub(crate) fn is_up(&self) -> bool {
        self.link.is_up()
    }

    /// The Redis link, the key prefix and the lookup timeout, for the semantic index kept in
    /// the same Redis.
    pub(super) fn parts(&self) -> (Arc<RedisLink>, &str, std::time::Duration) {
        (Arc::clone(&self.link), &self.prefix, self.settings.timeout)
    }

    fn name(&self, key: CacheKey) -> String {
        format!("{}{}", self.prefix, key.hex())
    }

    /// The answer stored under `key`, with its age and time left; `None` on a miss, and when
    /// Redis fails or is slower than the timeout.
    pub(crate) async fn get(&self, key: CacheKey) -> Option<Entry> {
        let mut con = self.link.connection()?;
        let got = tokio::time::timeout(
            self.settings.timeout,
            con.get::<_, Option<Vec<u8>>>(self.name(key)),
        )
        .await;
        match got {
            Ok(Ok(bytes)) => {
                self.link.mark(true);
                let mut e = Entry::decode(Bytes::from(bytes?), wall_ms(), Instant::now())?;
                if let Some(most) = self.settings.memory_ttl {
                    e.ttl = e.ttl.min(most);
                }
                Some(e)
            }
            Ok(Err(_)) | Err(_) => {
                CacheStats::count(&self.stats.shared_errors, 1);
                self.link.mark(false);
                None
            }
        }
    }

    /// The answers stored under `keys`, in one round trip (`MGET`): an embeddings batch's
    /// inputs. All `None` when Redis fails or is slower than the timeout.
    pub(crate) async fn get_many(&self, keys: &[CacheKey]) -> Vec<Option<Entry>> {
        let none = || keys.iter().map(|_| None).collect();
        let Some(mut con) = self.link.connection() else {
            return none();
        };
        let names: Vec<String> = keys.iter().map(|k| self.name(*k)).collect();
        let mut cmd = redis::cmd("MGET");
        cmd.arg(&names);
        let got = tokio::time::timeout(
            self.settings.timeout,
            cmd.query_async::<Vec<Option<Vec<u8>>>>(&mut con),
        )
        .await;
        match got {
            Ok(Ok(values)) if values.len() == keys.len() => {
                self.link.mark(true);
                let (now_ms, now) = (wall_ms(), Instant::now());
                values
                    .into_iter()
                    .map(|v| {
                        let mut e = Entry::decode(Bytes::from(v?), now_ms, now)?;
                        if let Some(most) = self.settings.memory_ttl {
                            e.ttl = e.ttl.min(most);
                        }
                        Some(e)
                    })
                    .collect()
            }
            _ => {
                CacheStats::count(&self.stats.shared_errors, 1);
                self.link.mark(false);
                none()
            }
        }
    }

    /// Store `entry` under `key` for its TTL, off the request path.
    pub(crate) fn put(&self, key: CacheKey, entry: &Entry) {
        let Some(mut con) = self.link.connection() else {
            return;
        };
        let bytes = entry.encode(wall_ms());
        let ttl_ms = u64::try_from(entry.ttl.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        let name = self.name(key);
        let link = self.link.clone();
        let stats = self.stats.clone();
        let timeout = self.settings.timeout * 10;
        tokio::spawn(async move {
            let set = con.pset_ex::<_, _, ()>(name, bytes, ttl_ms);
            let ok = matches!(tokio::time::timeout(timeout, set).await, Ok(Ok(())));
            if !ok {
                CacheStats::count(&stats.shared_errors, 1);
            }
            link.mark(ok);
        });
    }

    /// Remove `keys` from Redis and from every instance's memory; how many Redis held.
    pub(crate) async fn delete(&self, keys: &[CacheKey]) -> Result<u64, SharedError> {
        let mut con = self.link.connection().ok_or(SharedError::Unreachable)?;
        let names: Vec<String> = keys.iter().map(|k| self.name(*k)).collect();
        let deleted: u64 = self.call(con.del(names)).await?;
        // The answers' semantic entries (`redis-semantic`), if any.
        let semantic: Vec<String> = keys
            .iter()
            .map(|k| format!("{}sem:{}", self.prefix, k.hex()))
            .collect();
        let _: u64 = self.call(con.del(semantic)).await?;
        for k in keys {
            self.tell(&k.hex()).await?;
        }
        Ok(deleted)
    }

    /// Remove every answer under this cache's prefix (semantic entries included), from Redis and from every instance's
    /// memory; how many Redis held. Other data in the same Redis is left alone.
    pub(crate) async fn flush(&self) -> Result<u64, SharedError> {
        let mut con = self.link.connection().ok_or(SharedError::Unreachable)?;
        let pattern = format!("{}*", self.prefix);
        let mut removed = 0u64;
        // One walk per server: the one, or each primary of a cluster.
        for node in self.call(con.scan_nodes()).await? {
            let mut cursor = 0u64;
            loop {
                let (next, names) = self
                    .call(con.scan_step(&node, cursor, &pattern, SCAN_COUNT))
                    .await?;
                if !names.is_empty() {
                    let n: u64 = self.call(con.unlink(names)).await?;
                    removed += n;
                }
                if next == 0 {
                    break;
                }
                cursor = next;
            }
        }
        self.tell("*").await?;
        Ok(removed)
    }

    /// `PING`: whether Redis answers now.
    pub(crate) async fn ping(&self) -> Result<(), SharedError> {
        let mut con = self.link.connection().ok_or(SharedError::Unreachable)?;
        let pong: String = self.call(redis::cmd("PING").query_async(&mut con)).await?;
        if pong == "PONG" {
            Ok(())
        } else {
            Err(SharedError::Failed(format!("PING answered {pong:?}")))
        }
    }

    async fn tell(&self, what: &str) -> Result<(), SharedError> {
        let mut con = self.link.connection().ok_or(SharedError::Unreachable)?;
        let _: i64 = self.call(con.publish(INVALIDATIONS, what)).await?;
        Ok(())
    }

    /// One management call, bounded by ten lookups' time.
    async fn call<T>(
        &self,
        f: impl std::future::Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, SharedError> {
        match tokio::time::timeout(self.settings.timeout * 10, f).await {
            Ok(Ok(v)) => {
                self.link.mark(true);
                Ok(v)
            }
            Ok(Err(e)) => {
                self.link.mark(false);
                Err(SharedError::Failed(format!("{:?}", e.kind())))
            }
            Err(_) => {
                self.link.mark(false);
                Err(SharedError::Failed("no answer in time".into()))
            }
        }
    }
}
