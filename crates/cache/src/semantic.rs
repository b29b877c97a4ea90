//! The semantic cache's in-process parts: the prompt text a request is compared by, and
//! `local-semantic`'s index of prompt vectors.
//!
//! The index is a flat scan: the stored prompts' vectors, normalised to unit length, side by
//! side in one `Vec<f32>`, and a lookup takes the dot product of the (normalised) query with
//! each vector of its context, which is their cosine similarity. At the default bound (10,000
//! vectors) that is exact, needs no graph, no thread pool and no random numbers, and measured
//! faster than the HNSW graph (`hnsw_rs`) it replaced (docs/cache.md). Each vector points at
//! the exact [`CacheKey`] of its answer in the [`LocalCache`]: the answer itself lives (and
//! expires, and is evicted) there alone, and a neighbour whose answer is gone is skipped. Only
//! vectors of the same context (the key without the prompt, [`CacheKey::context_of`]) are
//! compared.
//!
//! The bound is a ring: once `max_entries` vectors are held, each insert overwrites the
//! oldest.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use sluice_core::endpoint::Endpoint;

use crate::{CacheKey, Entry, LocalCache};

/// Neighbours a lookup looks at, best first, for one whose answer is still stored.
const CANDIDATES: usize = 4;
/// Vectors' room reserved at first: the index grows in steps up to its bound, so that a small
/// cache of wide vectors does not hold `max_entries` of them from the start.
const FIRST_ROOM: usize = 256;

/// The text of a request's prompt, as the semantic cache compares it: the text content of
/// the messages joined by newlines (chat, and Messages with its `system` first), a
/// completion's `prompt`, a response's `instructions` and `input`. `None` for any other
/// endpoint, a body that is not JSON, or no text at all.
pub fn prompt_text(endpoint: Endpoint, body: &[u8]) -> Option<String> {
    let members: &[&str] = match endpoint {
        Endpoint::ChatCompletions => &["messages"],
        Endpoint::Completions => &["prompt"],
        Endpoint::Responses => &["instructions", "input"],
        Endpoint::Messages => &["system", "messages"],
        _ => return None,
    };
    let body: Value = serde_json::from_slice(body).ok()?;
    let mut out = String::new();
    for m in members {
        if let Some(v) = body.get(m) {
            texts(v, &mut out);
        }
    }
    (!out.is_empty()).then_some(out)
}

/// Every text under `v`: strings, and the `content` / `text` of objects (messages and their
/// parts), in order.
fn texts(v: &Value, out: &mut String) {
    match v {
        Value::String(s) => {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(s);
        }
        Value::Array(items) => items.iter().for_each(|i| texts(i, out)),
        Value::Object(o) => {
            for k in ["content", "text"] {
                if let Some(inner) = o.get(k) {
                    texts(inner, out);
                }
            }
        }
        _ => {}
    }
}

/// Cosine similarity of two vectors of the same length; 0 when either is zero.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let (mut dot, mut na, mut nb) = (0f32, 0f32, 0f32);
    for (x, y) in a.iter().zip(b) {
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na.sqrt() * nb.sqrt())
    }
}

/// Lanes of [`dot`]'s independent sums: the compiler turns them into SIMD adds (one sum would
/// be a chain of dependent float adds it may not reorder).
const LANES: usize = 8;

/// The dot product of two vectors of the same length.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut sums = [0f32; LANES];
    let (a_chunks, b_chunks) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let tail: f32 = a_chunks
        .remainder()
        .iter()
        .zip(b_chunks.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in a_chunks.zip(b_chunks) {
        for i in 0..LANES {
            sums[i] += x[i] * y[i];
        }
    }
    sums.iter().sum::<f32>() + tail
}

/// `v` scaled to unit length; `None` for an empty or zero vector (it has no direction, and
/// would be "equal" to anything), or one whose length is not finite.
fn normalised(v: &[f32]) -> Option<Vec<f32>> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    (norm > 0.0 && norm.is_finite()).then(|| v.iter().map(|x| x / norm).collect())
}

/// The vectors, side by side, and what each points at.
#[derive(Default)]
struct Vectors {
    /// The vectors' length: the first one's; a vector of another length resets the index
    /// (the embedding model changed).
    dims: usize,
    /// Unit vectors, `dims` floats each: slot `i` is `data[i * dims..(i + 1) * dims]`.
    data: Vec<f32>,
    /// `(context, key of the answer)` of each slot.
    points: Vec<(CacheKey, CacheKey)>,
    /// The slot the next insert overwrites once the index is full: the oldest.
    oldest: usize,
}

impl Vectors {
    /// Up to [`CANDIDATES`] slots of `context` whose similarity to the unit vector `query` is
    /// at least `threshold`, best first: `(key, similarity)`.
    fn near(&self, context: CacheKey, query: &[f32], threshold: f32) -> Vec<(CacheKey, f32)> {
        let mut best: Vec<(CacheKey, f32)> = Vec::with_capacity(CANDIDATES + 1);
        let slots = self.data.chunks_exact(self.dims.max(1));
        for ((ctx, key), v) in self.points.iter().zip(slots) {
            if *ctx != context {
                continue;
            }
            let similarity = dot(query, v);
            let floor = if best.len() < CANDIDATES {
                threshold
            } else {
                best.last().map_or(threshold, |b| b.1)
            };
            if similarity >= floor {
                let at = best.partition_point(|b| b.1 >= similarity);
                best.insert(at, (*key, similarity));
                best.truncate(CANDIDATES);
            }
        }
        best
    }
}

/// `local-semantic`'s index: prompt vectors by context, pointing at answers in the store.
pub struct SemanticIndex {
    max_entries: usize,
    inner: Mutex<Vectors>,
}

impl std::fmt::Debug for SemanticIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SemanticIndex")
            .field("max_entries", &self.max_entries)
            .field("len", &self.len())
            .finish()
    }
}

/// A semantic hit: the stored answer, its key and how similar its prompt was.
#[derive(Debug)]
pub struct Near {
    /// The answer.
    pub entry: Arc<Entry>,
    /// The exact key it is stored under.
    pub key: CacheKey,
    /// Cosine similarity of the two prompts.
    pub similarity: f32,
}

impl SemanticIndex {
    /// An empty index of at most `max_entries` vectors (at least 1).
    pub fn new(max_entries: usize) -> Self {
        Self {
            max_entries: max_entries.max(1),
            inner: Mutex::new(Vectors::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vectors> {
        // A panic while holding the lock leaves vectors that are still readable.
        sluice_core::lock::lock(&self.inner)
    }

    /// Index the prompt `vector` of the answer stored under `key`, in `context`.
    pub fn insert(&self, context: CacheKey, key: CacheKey, vector: &[f32]) {
        let Some(unit) = normalised(vector) else {
            return;
        };
        let mut g = self.lock();
        if g.dims != unit.len() {
            *g = Vectors {
                dims: unit.len(),
                ..Vectors::default()
            };
        }
        if g.points.len() < self.max_entries {
            if g.data.len() == g.data.capacity() {
                // Double the room, within the bound.
                let room = g
                    .points
                    .len()
                    .max(FIRST_ROOM)
                    .min(self.max_entries - g.points.len());
                let extra = room * g.dims;
                g.data.reserve_exact(extra);
                g.points.reserve_exact(room);
            }
            g.data.extend_from_slice(&unit);
            g.points.push((context, key));
        } else {
            let (slot, dims) = (g.oldest, g.dims);
            g.data[slot * dims..(slot + 1) * dims].copy_from_slice(&unit);
            g.points[slot] = (context, key);
            g.oldest = (slot + 1) % self.max_entries;
        }
    }

    /// The stored answer whose prompt is nearest `vector` in `context`, if its similarity is
    /// at least `threshold` and it is still in `store` (and no older than `max_age`).
    pub fn find(
        &self,
        store: &LocalCache,
        context: CacheKey,
        vector: &[f32],
        threshold: f32,
        max_age: Option<Duration>,
    ) -> Option<Near> {
        let query = normalised(vector)?;
        let near = {
            let g = self.lock();
            if g.dims != query.len() {
                return None;
            }
            g.near(context, &query, threshold)
        };
        near.into_iter().find_map(|(key, similarity)| {
            let entry = store.get(key, max_age)?;
            Some(Near {
                entry,
                key,
                similarity,
            })
        })
    }

    /// Vectors held.
    pub fn len(&self) -> usize {
        self.lock().points.len()
    }

    /// Whether no vector is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forget every vector (`/cache/flushall`), and the room they took.
    pub fn clear(&self) {
        *self.lock() = Vectors::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::tests::entry;

    #[test]
    fn the_prompt_text_of_each_endpoint() {
        let chat = br#"{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"What is"},{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":"Paris?"}]}],"temperature":0}"#;
        assert_eq!(
            prompt_text(Endpoint::ChatCompletions, chat).as_deref(),
            Some("Be brief.\nWhat is\nParis?")
        );
        let completion = br#"{"model":"m","prompt":["a","b"]}"#;
        assert_eq!(
            prompt_text(Endpoint::Completions, completion).as_deref(),
            Some("a\nb")
        );
        let responses = br#"{"model":"m","instructions":"i","input":[{"role":"user","content":[{"type":"input_text","text":"q"}]}]}"#;
        assert_eq!(
            prompt_text(Endpoint::Responses, responses).as_deref(),
            Some("i\nq")
        );
        let messages = br#"{"model":"m","system":[{"type":"text","text":"s"}],"messages":[{"role":"user","content":"q"}]}"#;
        assert_eq!(
            prompt_text(Endpoint::Messages, messages).as_deref(),
            Some("s\nq")
        );
        assert_eq!(prompt_text(Endpoint::Embeddings, br#"{"input":"x"}"#), None);
        assert_eq!(
            prompt_text(Endpoint::ChatCompletions, br#"{"messages":[]}"#),
            None
        );
        assert_eq!(prompt_text(Endpoint::ChatCompletions, b"not json"), None);
    }

    #[test]
    fn the_nearest_live_answer_of_the_same_context_above_the_threshold() {
        let store = LocalCache::new(1 << 20, Arc::default());
        let index = SemanticIndex::new(100);
        let (ctx, other_ctx) = (CacheKey(1), CacheKey(2));
        store.put(CacheKey(10), entry(b"paris", Duration::from_secs(60)));
        store.put(CacheKey(11), entry(b"rome", Duration::from_secs(60)));
        store.put(CacheKey(12), entry(b"other", Duration::from_secs(60)));
        index.insert(ctx, CacheKey(10), &[1.0, 0.0, 0.0]);
        index.insert(ctx, CacheKey(11), &[0.0, 1.0, 0.0]);
        index.insert(other_ctx, CacheKey(12), &[0.9, 0.1, 0.0]);
        let hit = index
            .find(&store, ctx, &[0.95, 0.05, 0.0], 0.9, None)
            .unwrap();
        assert_eq!(hit.key, CacheKey(10));
        assert_eq!(&hit.entry.body[..], b"paris");
        let expected = cosine(&[0.95, 0.05, 0.0], &[1.0, 0.0, 0.0]);
        assert!(
            (hit.similarity - expected).abs() < 1e-4,
            "{}",
            hit.similarity
        );
        // Below the threshold: nothing.
        assert!(index
            .find(&store, ctx, &[0.7, 0.7, 0.0], 0.9, None)
            .is_none());
        // Another context never answers, however close.
        let hit = index
            .find(&store, other_ctx, &[1.0, 0.0, 0.0], 0.5, None)
            .unwrap();
        assert_eq!(hit.key, CacheKey(12));
        assert!(index
            .find(&store, CacheKey(3), &[1.0, 0.0, 0.0], 0.0, None)
            .is_none());
        // An answer no longer stored is skipped; the next one above the threshold answers.
        store.remove(CacheKey(10));
        assert!(index
            .find(&store, ctx, &[1.0, 0.0, 0.0], 0.9, None)
            .is_none());
        let hit = index
            .find(&store, ctx, &[0.8, 0.6, 0.0], 0.5, None)
            .unwrap();
        assert_eq!(hit.key, CacheKey(11));
        // max-age: too old.
        assert!(index
            .find(&store, ctx, &[0.0, 1.0, 0.0], 0.5, Some(Duration::ZERO))
            .is_none());
        // A zero vector is neither indexed nor close to anything.
        index.insert(ctx, CacheKey(11), &[0.0, 0.0, 0.0]);
        assert!(index
            .find(&store, ctx, &[0.0, 0.0, 0.0], 0.0, None)
            .is_none());
        // A vector of another length (another model) finds nothing, and resets the index.
        assert!(index.find(&store, ctx, &[1.0, 0.0], 0.0, None).is_none());
        index.insert(ctx, CacheKey(11), &[0.0, 1.0]);
        assert_eq!(index.len(), 1);
        index.clear();
        assert!(index.is_empty());
    }

    #[test]
    fn the_nearest_above_the_threshold_answers_and_the_bound_evicts_the_oldest() {
        let store = LocalCache::new(1 << 20, Arc::default());
        let index = SemanticIndex::new(3);
        let ctx = CacheKey(1);
        for k in 10..14 {
            store.put(CacheKey(k), entry(b"x", Duration::from_secs(60)));
        }
        // Not unit length: the index normalises (cosine, not raw dot products).
        index.insert(ctx, CacheKey(10), &[2.0, 0.0, 0.0]);
        index.insert(ctx, CacheKey(11), &[0.6, 0.8, 0.0]);
        index.insert(ctx, CacheKey(12), &[0.0, 0.0, 5.0]);
        // Both 10 and 11 are above 0.5; the nearer one answers, with its exact similarity.
        let q = [0.8, 0.6, 0.0];
        let hit = index.find(&store, ctx, &q, 0.5, None).unwrap();
        assert_eq!(hit.key, CacheKey(11));
        assert!((hit.similarity - 0.96).abs() < 1e-6, "{}", hit.similarity);
        // The nearest is below the threshold: no answer.
        assert!(index.find(&store, ctx, &q, 0.97, None).is_none());
        // Full (3): the next insert replaces the oldest, 10, and only it.
        index.insert(ctx, CacheKey(13), &[0.0, -1.0, 0.0]);
        assert_eq!(index.len(), 3);
        assert!(index
            .find(&store, ctx, &[1.0, 0.0, 0.0], 0.99, None)
            .is_none());
        for (v, k) in [
            ([0.6, 0.8, 0.0], 11),
            ([0.0, 0.0, 1.0], 12),
            ([0.0, -1.0, 0.0], 13),
        ] {
            let hit = index.find(&store, ctx, &v, 0.99, None).unwrap();
            assert_eq!(hit.key, CacheKey(k));
        }
        // Then 11, the oldest left.
        index.insert(ctx, CacheKey(10), &[1.0, 0.0, 0.0]);
        assert!(index
            .find(&store, ctx, &[0.6, 0.8, 0.0], 0.99, None)
            .is_none());
        assert_eq!(
            index
                .find(&store, ctx, &[1.0, 0.0, 0.0], 0.99, None)
                .unwrap()
                .key,
            CacheKey(10)
        );
    }

    #[test]
    fn the_lane_wise_dot_product_is_the_plain_one() {
        for len in [1usize, 7, 8, 9, 256, 1539] {
            let a: Vec<f32> = (0..len).map(|i| (i as f32 * 0.37).sin()).collect();
            let b: Vec<f32> = (0..len).map(|i| (i as f32 * 0.11).cos()).collect();
            let plain: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
            assert!((dot(&a, &b) - plain).abs() < 1e-3, "length {len}");
        }
    }

    #[test]
    fn an_expired_answer_is_not_a_hit() {
        let store = LocalCache::new(1 << 20, Arc::default());
        let index = SemanticIndex::new(10);
        store.put(CacheKey(10), entry(b"x", Duration::from_millis(20)));
        index.insert(CacheKey(1), CacheKey(10), &[1.0, 0.0]);
        assert!(index
            .find(&store, CacheKey(1), &[1.0, 0.0], 0.9, None)
            .is_some());
        std::thread::sleep(Duration::from_millis(50));
        assert!(index
            .find(&store, CacheKey(1), &[1.0, 0.0], 0.9, None)
            .is_none());
    }

    #[test]
    fn the_index_never_holds_more_than_its_bound() {
        let store = LocalCache::new(1 << 20, Arc::default());
        let index = SemanticIndex::new(10);
        for i in 0..50u32 {
            let key = CacheKey(u128::from(i));
            store.put(key, entry(b"x", Duration::from_secs(60)));
            let angle = i as f32 * 0.03;
            index.insert(CacheKey(1), key, &[angle.cos(), angle.sin()]);
            assert!(index.len() <= 10, "{} after {i}", index.len());
        }
        // The newest are still found, the oldest forgotten.
        let newest = 49f32 * 0.03;
        let hit = index
            .find(
                &store,
                CacheKey(1),
                &[newest.cos(), newest.sin()],
                0.999,
                None,
            )
            .unwrap();
        assert_eq!(hit.key, CacheKey(49));
        let hit = index
            .find(&store, CacheKey(1), &[1.0, 0.0], 0.0, None)
            .unwrap();
        assert!(hit.key.0 >= 40, "key {} was forgotten", hit.key.0);
    }

    /// Unit vectors from a fixed xorshift sequence: reproducible without a random crate.
    fn unit_vectors(n: usize, dims: usize) -> Vec<Vec<f32>> {
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        };
        (0..n)
            .map(|_| {
                let v: Vec<f32> = (0..dims).map(|_| next()).collect();
                let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
                v.into_iter().map(|x| x / norm).collect()
            })
            .collect()
    }

    /// The cost of one lookup in a full default-sized index (10,000 vectors, one context) at
    /// the mock's 256 dimensions and OpenAI's 1536. A measurement, not a check: run it with
    /// `cargo test --release -p sluice-cache lookup_timing -- --ignored --nocapture`.
    #[test]
    #[ignore = "a measurement; run by hand in a release build"]
    fn lookup_timing() {
        for dims in [256usize, 1536] {
            let store = LocalCache::new(1 << 24, Arc::default());
            let index = SemanticIndex::new(10_000);
            let vectors = unit_vectors(10_000 + 200, dims);
            let started = std::time::Instant::now();
            for (i, v) in vectors[..10_000].iter().enumerate() {
                let key = CacheKey(i as u128);
                store.put(key, entry(b"x", Duration::from_secs(600)));
                index.insert(CacheKey(1), key, v);
            }
            let fill = started.elapsed();
            // Queries: stored vectors nudged by a fresh one (hits), and fresh ones (misses).
            let queries: Vec<Vec<f32>> = vectors[10_000..]
                .iter()
                .enumerate()
                .map(|(i, fresh)| {
                    if i % 2 == 0 {
                        let base = &vectors[i * 37 % 10_000];
                        base.iter().zip(fresh).map(|(b, f)| b + 0.05 * f).collect()
                    } else {
                        fresh.clone()
                    }
                })
                .collect();
            let started = std::time::Instant::now();
            let mut hits = 0;
            for q in &queries {
                hits += usize::from(index.find(&store, CacheKey(1), q, 0.95, None).is_some());
            }
            let per_lookup = started.elapsed() / queries.len() as u32;
            println!(
                "dims {dims}: fill 10,000 in {fill:?}, one lookup {per_lookup:?}, hits {hits}/{}",
                queries.len()
            );
        }
    }
}
