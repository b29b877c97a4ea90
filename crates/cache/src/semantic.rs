//! The semantic cache's in-process parts: the prompt text a request is compared by, and
//! `local-semantic`'s index of prompt vectors.
//!
//! The index is an HNSW graph (`hnsw_rs`, cosine distance) over the vectors of stored
//! prompts. Each vector points at the exact [`CacheKey`] of its answer in the [`LocalCache`]:
//! the answer itself lives (and expires, and is evicted) there alone, and a neighbour whose
//! answer is gone is skipped. Only neighbours of the same context (the key without the
//! prompt, [`CacheKey::context_of`]) are considered.
//!
//! HNSW has no removal, so the bound is kept by generations: inserts go to the current graph
//! until it holds half of `max_entries`, then it becomes the previous one (the one before is
//! dropped) and a new graph starts. A lookup searches both: the index never holds more than
//! `max_entries` vectors, and forgets the oldest half at a time.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use hnsw_rs::prelude::{DistCosine, Hnsw};
use serde_json::Value;
use sluice_core::endpoint::Endpoint;

use crate::{CacheKey, Entry, LocalCache};

/// Links per node and layer; HNSW's usual value for small graphs.
const LINKS: usize = 16;
/// Layers of the graph.
const LAYERS: usize = 16;
/// Candidates explored while inserting.
const EF_CONSTRUCTION: usize = 100;
/// Candidates explored while searching (more than one: neighbours of other contexts or with
/// expired answers are filtered out).
const EF_SEARCH: usize = 64;
/// Neighbours a lookup looks at, best first, for one whose answer is still stored.
const CANDIDATES: usize = 4;

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

/// Whether a vector can be compared: not empty, not zero (cosine distance would call a zero
/// vector equal to anything).
fn has_direction(v: &[f32]) -> bool {
    v.iter().any(|x| *x != 0.0)
}

/// One graph and what each of its vectors points at (by insertion order).
struct Generation {
    graph: Hnsw<'static, f32, DistCosine>,
    /// `(context, key of the answer)` of each vector, the graph's data id being the index.
    points: Vec<(CacheKey, CacheKey)>,
}

impl Generation {
    fn new(capacity: usize) -> Self {
        Self {
            graph: Hnsw::new(LINKS, capacity, LAYERS, EF_CONSTRUCTION, DistCosine {}),
            points: Vec::with_capacity(capacity.min(1024)),
        }
    }

    /// Neighbours of `vector` in `context`: `(key, similarity)`.
    fn near(&self, context: CacheKey, vector: &[f32]) -> Vec<(CacheKey, f32)> {
        if self.points.is_empty() {
            return Vec::new();
        }
        let same_context = |id: &usize| self.points.get(*id).is_some_and(|p| p.0 == context);
        self.graph
            .search_filter(vector, CANDIDATES, EF_SEARCH, Some(&same_context))
            .into_iter()
            .filter_map(|n| {
                let (_, key) = self.points.get(n.d_id)?;
                Some((*key, 1.0 - n.distance))
            })
            .collect()
    }
}

struct Generations {
    current: Generation,
    previous: Option<Generation>,
    /// The vectors' length: the first one's; a vector of another length resets the index
    /// (the embedding model changed).
    dims: usize,
}

/// `local-semantic`'s index: prompt vectors by context, pointing at answers in the store.
pub struct SemanticIndex {
    half: usize,
    inner: Mutex<Generations>,
}

impl std::fmt::Debug for SemanticIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SemanticIndex")
            .field("max_entries", &(self.half * 2))
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
    /// An empty index of at most `max_entries` vectors (at least 2).
    pub fn new(max_entries: usize) -> Self {
        let half = (max_entries / 2).max(1);
        Self {
            half,
            inner: Mutex::new(Generations {
                current: Generation::new(half),
                previous: None,
                dims: 0,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Generations> {
        // A panic while holding the lock leaves a graph that is still readable.
        sluice_core::lock::lock(&self.inner)
    }

    /// Index the prompt `vector` of the answer stored under `key`, in `context`.
    pub fn insert(&self, context: CacheKey, key: CacheKey, vector: &[f32]) {
        if !has_direction(vector) {
            return;
        }
        let mut g = self.lock();
        if g.dims != vector.len() {
            if g.dims != 0 {
                g.previous = None;
                g.current = Generation::new(self.half);
            }
            g.dims = vector.len();
        }
        if g.current.points.len() >= self.half {
            let full = std::mem::replace(&mut g.current, Generation::new(self.half));
            g.previous = Some(full);
        }
        let id = g.current.points.len();
        g.current.points.push((context, key));
        g.current.graph.insert((vector, id));
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
        if !has_direction(vector) {
            return None;
        }
        let mut near = {
            let g = self.lock();
            if g.dims != vector.len() {
                return None;
            }
            let mut near = g.current.near(context, vector);
            if let Some(p) = &g.previous {
                near.extend(p.near(context, vector));
            }
            near
        };
        near.sort_by(|a, b| b.1.total_cmp(&a.1));
        near.into_iter()
            .take_while(|(_, similarity)| *similarity >= threshold)
            .find_map(|(key, similarity)| {
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
        let g = self.lock();
        g.current.points.len() + g.previous.as_ref().map_or(0, |p| p.points.len())
    }

    /// Whether no vector is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forget every vector (`/cache/flushall`).
    pub fn clear(&self) {
        let mut g = self.lock();
        g.previous = None;
        g.current = Generation::new(self.half);
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
}
