//! The semantic caches (`type: local-semantic`, `redis-semantic`): on an exact miss, the
//! leader of a request embeds its prompt text (`sluice_cache::semantic::prompt_text`) with the
//! configured embedding model group and looks for a stored answer to a close enough prompt of
//! the same context (the exact key without the prompt, `CacheKey::context_of`). Its own answer
//! is indexed under the same vector when it is stored, without a second embedding.
//!
//! The embedding is one of sluice's internal calls (`server::internal::call`): routed as a
//! client's request would be, but with no caller, so its cost is not charged to the key whose
//! request caused it (it is part of what the cache costs, see docs/cache.md). It never fails a
//! request: an error or a timeout is a plain miss, counted in `embedding_errors`.
//!
//! `local-semantic` keeps its vectors in `sluice_cache::semantic::SemanticIndex`, pointing at
//! answers in this instance's memory. `redis-semantic` keeps them in a RediSearch vector index
//! of the cache's Redis, one hash per answer (`<namespace>:sem:<hex key>`: `ctx`, `vec`,
//! `entry` in `SLC1` form), so that every instance of a fleet finds the others' answers.
//! Redis away or slow is a miss, as for the shared store.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue};
use http::HeaderMap;

use sluice_cache::semantic::{prompt_text, SemanticIndex};
use sluice_cache::settings::{SemanticIndexKind, SemanticSettings};
use sluice_cache::{CacheKey, CacheStats, Entry};
use sluice_core::cache_control::CacheControl;
use sluice_core::endpoint::Endpoint;
use sluice_core::limits::wall_ms;
use sluice_routing::Router;

use super::shared::SharedStore;
use super::ResponseCache;
use crate::fleet::RedisLink;

static X_CACHE_SIMILARITY: HeaderName = HeaderName::from_static("x-sluice-cache-similarity");

/// A cache's semantic part.
pub(crate) struct Semantic {
    settings: SemanticSettings,
    index: Index,
}

enum Index {
    /// Boxed: the graph's bookkeeping is several hundred bytes.
    Local(Box<SemanticIndex>),
    Redis(RedisIndex),
}

impl std::fmt::Debug for Semantic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Semantic")
            .field("threshold", &self.settings.threshold)
            .field("embedding_model", &self.settings.embedding_model)
            .field(
                "index",
                &match &self.index {
                    Index::Local(i) => format!("local, {} vectors", i.len()),
                    Index::Redis(r) => format!("redis {}", r.name),
                },
            )
            .finish()
    }
}

/// What a leader computed for the semantic cache, kept until its answer is stored so that
/// the answer is indexed under it.
pub(crate) struct Probe {
    context: CacheKey,
    vector: Vec<f32>,
}

impl Semantic {
    /// The semantic part `settings` describe; a Redis index lives in `shared`'s Redis (none:
    /// no semantic cache, which the config does not allow).
    pub(crate) fn new(
        settings: &SemanticSettings,
        shared: Option<&SharedStore>,
        stats: Arc<CacheStats>,
    ) -> Option<Self> {
        let index = match &settings.index {
            SemanticIndexKind::Local { max_entries } => {
                Index::Local(Box::new(SemanticIndex::new(*max_entries)))
            }
            SemanticIndexKind::Redis { index_name } => {
                let (link, prefix, timeout) = shared?.parts();
                Index::Redis(RedisIndex {
                    link,
                    name: index_name.clone(),
                    prefix: format!("{prefix}sem:"),
                    timeout,
                    stats,
                    created: Arc::default(),
                })
            }
        };
        Some(Self {
            settings: settings.clone(),
            index,
        })
    }

    /// Forget every local vector (`/cache/flushall`; Redis's go with the namespace's keys).
    pub(crate) fn clear(&self) {
        if let Index::Local(i) = &self.index {
            i.clear();
        }
    }
}

/// Embed the prompt of a request that leads its key, unless the semantic cache has nothing
/// to do with it (no semantic cache, another endpoint, nothing to look up or store).
pub(crate) async fn probe(
    cache: &ResponseCache,
    router: &Router,
    endpoint: Endpoint,
    (group, namespace): (&str, Option<&str>),
    body: &[u8],
    control: &CacheControl,
) -> Option<Probe> {
    let s = cache.semantic.as_ref()?;
    if !cache.core.settings.store || (control.no_cache && control.no_store) {
        return None;
    }
    let text = prompt_text(endpoint, body)?;
    let context = CacheKey::context_of(cache.core.seed, namespace, endpoint, group, body)?;
    let Some(vector) = embed(router, &s.settings, text).await else {
        CacheStats::count(&cache.core.stats.embedding_errors, 1);
        return None;
    };
    // A zero vector (no words a model knows) has no direction: it is close to nothing.
    vector
        .iter()
        .any(|x| *x != 0.0)
        .then_some(Probe { context, vector })
}

/// The embedding of `text` by the configured model group; `None` when it fails or is late.
async fn embed(router: &Router, s: &SemanticSettings, text: String) -> Option<Vec<f32>> {
    #[derive(serde::Deserialize)]
    struct Answer {
        data: Vec<Item>,
    }
    #[derive(serde::Deserialize)]
    struct Item {
        embedding: Vec<f32>,
    }
    let body = serde_json::json!({"model": s.embedding_model, "input": text}).to_string();
    let call = crate::server::internal::call(
        router,
        Endpoint::Embeddings,
        Bytes::from(body),
        s.embedding_timeout,
    );
    // The whole call (retries included) is bounded, not only each attempt.
    let answer = tokio::time::timeout(s.embedding_timeout, call)
        .await
        .ok()?
        .map_err(|e| tracing::debug!(reason = %e, "semantic cache: no embedding"))
        .ok()?;
    let answer: Answer = serde_json::from_slice(&answer).ok()?;
    Some(answer.data.into_iter().next()?.embedding)
}

/// The stored answer to the prompt closest to the probe's, if close enough, counted as a
/// hit; with its similarity.
pub(crate) async fn hit(
    cache: &ResponseCache,
    probe: Option<&Probe>,
    control: &CacheControl,
) -> Option<(Arc<Entry>, f32)> {
    let (s, probe) = (cache.semantic.as_ref()?, probe?);
    if control.no_cache {
        return None;
    }
    let threshold = control.similarity_threshold.unwrap_or(s.settings.threshold);
    let found = match &s.index {
        Index::Local(index) => {
            let near = index.find(
                cache.core.store.as_ref()?,
                probe.context,
                &probe.vector,
                threshold,
                control.max_age,
            )?;
            (near.entry, near.similarity)
        }
        Index::Redis(r) => {
            let (e, similarity) = r.find(probe).await?;
            if similarity < threshold || control.max_age.is_some_and(|a| e.stored.elapsed() > a) {
                return None;
            }
            (Arc::new(e), similarity)
        }
    };
    let stats = &cache.core.stats;
    CacheStats::count(&stats.hits, 1);
    CacheStats::count(&stats.semantic_hits, 1);
    CacheStats::count(&stats.saved_nanos, found.0.cost.unwrap_or(0));
    Some(found)
}

/// Index a leader's stored answer (under `key`) by its probe.
pub(crate) fn index(cache: &ResponseCache, probe: &Probe, key: CacheKey, entry: &Entry) {
    match cache.semantic.as_ref().map(|s| &s.index) {
        Some(Index::Local(i)) => i.insert(probe.context, key, &probe.vector),
        Some(Index::Redis(r)) => r.put(probe, key, entry),
        None => {}
    }
}

/// Say how close the prompt of a semantic hit's answer was.
pub(crate) fn mark(h: &mut HeaderMap, similarity: f32) {
    if let Ok(v) = HeaderValue::from_str(&format!("{similarity:.4}")) {
        h.insert(X_CACHE_SIMILARITY.clone(), v);
    }
}

/// `redis-semantic`'s index: a RediSearch HNSW index over the hashes of the namespace's
/// semantic entries, made at the first store (when the vectors' length is known).
struct RedisIndex {
    link: Arc<RedisLink>,
    name: String,
    /// `<namespace>:sem:`: the hashes the index covers.
    prefix: String,
    timeout: Duration,
    stats: Arc<CacheStats>,
    /// Whether this instance made (or found) the index.
    created: Arc<AtomicBool>,
}

impl RedisIndex {
    /// The nearest entry of the probe's context and its similarity (1 − cosine distance).
    async fn find(&self, probe: &Probe) -> Option<(Entry, f32)> {
        let mut con = self.link.connection()?;
        let query = format!("(@ctx:{{{}}})=>[KNN 1 @vec $v AS d]", probe.context.hex());
        let mut search = redis::cmd("FT.SEARCH");
        search
            .arg(&self.name)
            .arg(query)
            .arg("PARAMS")
            .arg(2)
            .arg("v")
            .arg(bytes_of(&probe.vector))
            .arg("RETURN")
            .arg(2)
            .arg("d")
            .arg("entry")
            .arg("DIALECT")
            .arg(2);
        let search = search.query_async::<redis::Value>(&mut con);
        let reply = match tokio::time::timeout(self.timeout, search).await {
            Ok(Ok(v)) => v,
            Ok(Err(e)) if no_index(&e) => return None,
            Ok(Err(_)) | Err(_) => {
                CacheStats::count(&self.stats.shared_errors, 1);
                self.link.mark(false);
                return None;
            }
        };
        self.link.mark(true);
        let (distance, entry) = first_hit(reply)?;
        let e = Entry::decode(Bytes::from(entry), wall_ms(), Instant::now())?;
        Some((e, 1.0 - distance))
    }

    /// Store `entry` (under `key`) with the probe's context and vector for its TTL, off the
    /// request path; the index is made first if this instance has not seen it yet.
    fn put(&self, probe: &Probe, key: CacheKey, entry: &Entry) {
        let Some(mut con) = self.link.connection() else {
            return;
        };
        let name = format!("{}{}", self.prefix, key.hex());
        let ttl_ms = u64::try_from(entry.ttl.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        let mut write = redis::pipe();
        write
            .atomic()
            .cmd("HSET")
            .arg(&name)
            .arg("ctx")
            .arg(probe.context.hex())
            .arg("vec")
            .arg(bytes_of(&probe.vector))
            .arg("entry")
            .arg(entry.encode(wall_ms()))
            .ignore()
            .cmd("PEXPIRE")
            .arg(&name)
            .arg(ttl_ms)
            .ignore();
        let create = (!self.created.load(Relaxed)).then(|| {
            let mut c = redis::cmd("FT.CREATE");
            c.arg(&self.name)
                .arg("ON")
                .arg("HASH")
                .arg("PREFIX")
                .arg(1)
                .arg(&self.prefix)
                .arg("SCHEMA")
                .arg("ctx")
                .arg("TAG")
                .arg("vec")
                .arg("VECTOR")
                .arg("HNSW")
                .arg(6)
                .arg("TYPE")
                .arg("FLOAT32")
                .arg("DIM")
                .arg(probe.vector.len())
                .arg("DISTANCE_METRIC")
                .arg("COSINE");
            c
        });
        let (stats, link, timeout) = (self.stats.clone(), self.link.clone(), self.timeout * 10);
        let created = Arc::clone(&self.created);
        tokio::spawn(async move {
            let made = match create {
                None => true,
                Some(c) => match tokio::time::timeout(timeout, c.query_async::<()>(&mut con)).await
                {
                    Ok(Ok(())) => true,
                    Ok(Err(e)) => e.to_string().to_lowercase().contains("already exists"),
                    Err(_) => false,
                },
            };
            // Until it is made, each store tries again.
            created.fetch_or(made, Relaxed);
            let ok = made
                && matches!(
                    tokio::time::timeout(timeout, write.query_async::<()>(&mut con)).await,
                    Ok(Ok(()))
                );
            if !ok {
                CacheStats::count(&stats.shared_errors, 1);
            }
            link.mark(ok);
        });
    }
}

/// A vector as RediSearch's FLOAT32 blob: little-endian `f32`s.
fn bytes_of(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Whether a search failed only because nothing was stored yet (no index).
fn no_index(e: &redis::RedisError) -> bool {
    let m = e.to_string().to_lowercase();
    m.contains("no such index") || m.contains("unknown index")
}

/// The distance and entry bytes of an `FT.SEARCH ... RETURN 2 d entry` reply's first
/// document: `[total, id, [field, value, ...], ...]`.
fn first_hit(reply: redis::Value) -> Option<(f32, Vec<u8>)> {
    use redis::Value;
    let Value::Array(items) = reply else {
        return None;
    };
    let Some(Value::Array(fields)) = items.into_iter().nth(2) else {
        return None;
    };
    let (mut distance, mut entry) = (None, None);
    let mut it = fields.into_iter();
    while let (Some(Value::BulkString(name)), Some(value)) = (it.next(), it.next()) {
        match (name.as_slice(), value) {
            (b"d", Value::BulkString(d)) => {
                distance = std::str::from_utf8(&d).ok()?.parse::<f32>().ok();
            }
            (b"entry", Value::BulkString(b)) => entry = Some(b),
            _ => {}
        }
    }
    Some((distance?, entry?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::Value;

    #[test]
    fn a_search_reply_reads_as_distance_and_entry() {
        let bulk = |s: &[u8]| Value::BulkString(s.to_vec());
        let reply = Value::Array(vec![
            Value::Int(1),
            bulk(b"ns:sem:ab"),
            Value::Array(vec![
                bulk(b"d"),
                bulk(b"0.25"),
                bulk(b"entry"),
                bulk(b"SLC1x"),
            ]),
        ]);
        assert_eq!(first_hit(reply), Some((0.25, b"SLC1x".to_vec())));
        assert_eq!(first_hit(Value::Array(vec![Value::Int(0)])), None);
        let no_entry = Value::Array(vec![
            Value::Int(1),
            bulk(b"k"),
            Value::Array(vec![bulk(b"d"), bulk(b"0.1")]),
        ]);
        assert_eq!(first_hit(no_entry), None);
        assert_eq!(bytes_of(&[1.0]), 1f32.to_le_bytes().to_vec());
    }
}
