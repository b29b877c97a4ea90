//! Embeddings cached per input: a batch (`"input": [...]`) is looked up item by item, each
//! under the key of the same request asking for that input alone (`CacheKey::of_inputs`), so
//! only the inputs not stored go upstream, and each vector the upstream sends back is stored
//! on its own. A batch whose inputs are all stored is a hit; one with some stored is sent
//! upstream with the others only, and its answer is put back together in the client's order.
//!
//! A stored item is the answer a request for that input alone gets (`data` of one embedding
//! at index 0), so an input asked alone and in a batch share an entry. The upstream's usage
//! and cost are shared among the inputs it embedded in proportion to their length.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::{HeaderMap, Response, StatusCode};
use serde_json::value::RawValue;
use serde_json::{json, Value};

use sluice_cache::{CacheKey, CacheStats, Entry, Shape};
use sluice_core::cache_control::CacheControl;
use sluice_core::limits::Nanos;
use sluice_core::record::RequestRecord;
use sluice_core::usage::Usage;

use super::{mark, ResponseCache};
use crate::http::ResponseBody;

/// Where an embeddings batch stands after the store was asked.
pub(crate) enum BatchLookup {
    /// Not a batch the store can split (one input, a body it cannot read): the whole-request
    /// path applies.
    NotBatch,
    /// Every input was stored: the answer, free.
    Answered(Response<ResponseBody>),
    /// Send `body` (the inputs not stored) upstream, then [`Batch::finish`] its answer.
    Call {
        /// The request with only the missing inputs; `None` when none was stored (the
        /// client's body goes as it is).
        body: Option<Bytes>,
        /// What to put back together.
        batch: Batch,
    },
}

/// A batch on its way upstream with the inputs the store did not have.
pub(crate) struct Batch {
    cache: Arc<ResponseCache>,
    control: CacheControl,
    /// What the inputs found in the store cost when they were fetched.
    pub(crate) saved: Nanos,
    /// Per input, in the client's order: its key, its length (for sharing usage) and the
    /// stored embedding object, if any.
    items: Vec<Item>,
}

struct Item {
    key: CacheKey,
    len: usize,
    stored: Option<Arc<Entry>>,
}

/// Look an embeddings request's inputs up one by one: in memory, then those missing there in
/// the fleet's store (one round trip).
pub(crate) async fn lookup(
    cache: &Arc<ResponseCache>,
    group: &str,
    body: &[u8],
    control: CacheControl,
    record: &mut RequestRecord,
) -> BatchLookup {
    let namespace = control
        .namespace
        .as_deref()
        .or(cache.core.settings.namespace.as_deref());
    let Some(inputs) = CacheKey::of_inputs(cache.core.seed, namespace, group, body) else {
        return BatchLookup::NotBatch;
    };
    let Some(store) = cache.core.store.as_ref() else {
        return BatchLookup::NotBatch;
    };
    let mut items: Vec<Item> = inputs
        .iter()
        .map(|(key, raw)| Item {
            key: *key,
            len: raw.get().len(),
            stored: (!control.no_cache)
                .then(|| store.get(*key, control.max_age))
                .flatten()
                .filter(|e| e.shape == Shape::Whole),
        })
        .collect();
    if let Some(shared) = cache.shared.as_ref().filter(|_| !control.no_cache) {
        let absent: Vec<usize> = (0..items.len())
            .filter(|i| items[*i].stored.is_none())
            .collect();
        if !absent.is_empty() {
            let keys: Vec<CacheKey> = absent.iter().map(|i| items[*i].key).collect();
            let found = shared.get_many(&keys).await;
            for (i, e) in absent.into_iter().zip(found) {
                let Some(e) = e.filter(|e| {
                    e.shape == Shape::Whole
                        && control.max_age.is_none_or(|age| e.stored.elapsed() <= age)
                }) else {
                    continue;
                };
                let e = Arc::new(e);
                store.put_shared(items[i].key, Arc::clone(&e));
                CacheStats::count(&cache.core.stats.shared_hits, 1);
                items[i].stored = Some(e);
            }
        }
    }
    let stats = &cache.core.stats;
    let missing: Vec<&RawValue> = inputs
        .iter()
        .zip(&items)
        .filter(|(_, i)| i.stored.is_none())
        .map(|((_, raw), _)| *raw)
        .collect();
    CacheStats::count(&stats.hits, (items.len() - missing.len()) as u64);
    CacheStats::count(&stats.misses, missing.len() as u64);
    let saved = items
        .iter()
        .filter_map(|i| i.stored.as_ref().and_then(|e| e.cost))
        .sum();
    CacheStats::count(&stats.saved_nanos, saved);
    let batch = Batch {
        cache: Arc::clone(cache),
        control,
        saved,
        items,
    };
    if missing.is_empty() {
        return match batch.merge(None) {
            Some((answer, usage)) => {
                record.cache_hit = true;
                record.status = 200;
                record.usage = Some(usage);
                record.cost = Some(0);
                record.saved = Some(saved);
                record.ttfb = Some(record.start.elapsed());
                let mut resp = Response::new(ResponseBody::full(answer));
                resp.headers_mut().insert(
                    http::header::CONTENT_TYPE,
                    http::HeaderValue::from_static("application/json"),
                );
                mark(resp.headers_mut(), batch.items[0].key, true);
                BatchLookup::Answered(resp)
            }
            None => BatchLookup::NotBatch,
        };
    }
    if missing.len() == batch.items.len() {
        return BatchLookup::Call { body: None, batch };
    }
    match with_inputs(body, &missing) {
        Some(body) => BatchLookup::Call {
            body: Some(body),
            batch,
        },
        None => BatchLookup::NotBatch,
    }
}

/// `body` with `input` set to `missing`, every other member as the client wrote it.
fn with_inputs(body: &[u8], missing: &[&RawValue]) -> Option<Bytes> {
    let members: std::collections::BTreeMap<String, &RawValue> =
        serde_json::from_slice(body).ok()?;
    let mut out = Vec::with_capacity(body.len());
    out.push(b'{');
    for (i, (name, value)) in members.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut out, name).ok()?;
        out.push(b':');
        if name == "input" {
            out.push(b'[');
            for (j, m) in missing.iter().enumerate() {
                if j > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(m.get().as_bytes());
            }
            out.push(b']');
        } else {
            out.extend_from_slice(value.get().as_bytes());
        }
    }
    out.push(b'}');
    Some(out.into())
}

impl Batch {
    /// Mark the answer with the batch's first key (the key a lone first input has).
    pub(crate) fn mark(&self, h: &mut HeaderMap) {
        if let Some(first) = self.items.first() {
            mark(h, first.key, false);
        }
    }

    /// The upstream's answer for the missing inputs (`status`, `body`, with what it cost):
    /// each new vector stored on its own, and the answer the client asked for put together
    /// in its order. An answer that is not a success, or that does not read as embeddings,
    /// is given back unchanged and nothing is stored.
    pub(crate) fn finish(mut self, status: StatusCode, body: Bytes, cost: Option<Nanos>) -> Bytes {
        if !status.is_success() {
            return body;
        }
        let Ok(answer) = serde_json::from_slice::<Value>(&body) else {
            return body;
        };
        let Some(data) = answer.get("data").and_then(Value::as_array) else {
            return body;
        };
        let missing: Vec<usize> = (0..self.items.len())
            .filter(|i| self.items[*i].stored.is_none())
            .collect();
        if data.len() != missing.len() {
            return body;
        }
        let usage = answer.get("usage");
        let tokens = |k: &str| {
            usage
                .and_then(|u| u.get(k))
                .and_then(Value::as_u64)
                .unwrap_or(0)
        };
        let (prompt, total) = (tokens("prompt_tokens"), tokens("total_tokens"));
        let lens: Vec<usize> = missing.iter().map(|i| self.items[*i].len).collect();
        let all: usize = lens.iter().sum::<usize>().max(1);
        let share = |n: u64, at: usize| -> u64 {
            // The last input takes what rounding left, so the shares add up.
            if at + 1 == lens.len() {
                n - (0..at)
                    .map(|j| n * lens[j] as u64 / all as u64)
                    .sum::<u64>()
            } else {
                n * lens[at] as u64 / all as u64
            }
        };
        let ttl = self.control.ttl.unwrap_or(self.cache.core.settings.ttl);
        let storing = self.cache.core.settings.store && !self.control.no_store;
        for (at, d) in data.iter().enumerate() {
            let index = d
                .get("index")
                .and_then(Value::as_u64)
                .map_or(at, |i| i as usize);
            let Some(&item) = missing.get(index) else {
                return body;
            };
            let mut one = d.clone();
            one["index"] = json!(0);
            let p = share(prompt, index);
            let single = json!({
                "object": "list",
                "data": [one],
                "model": answer.get("model"),
                "usage": {"prompt_tokens": p, "total_tokens": share(total, index).max(p)},
            });
            let Ok(bytes) = serde_json::to_vec(&single) else {
                return body;
            };
            let entry = Entry {
                status: 200,
                content_type: Shape::Whole.content_type(),
                body: bytes.into(),
                shape: Shape::Whole,
                usage: Some(Usage {
                    prompt_tokens: p,
                    ..Usage::default()
                }),
                cost: cost.map(|c| share(c, index)),
                stored: Instant::now(),
                ttl,
            };
            let entry = Arc::new(entry);
            if storing {
                if let Some(store) = &self.cache.core.store {
                    store.put_shared(self.items[item].key, Arc::clone(&entry));
                }
                if let Some(shared) = &self.cache.shared {
                    shared.put(self.items[item].key, &entry);
                }
            }
            self.items[item].stored = Some(entry);
        }
        match self.merge(Some(&answer)) {
            Some((merged, _)) => merged,
            None => body,
        }
    }

    /// The client's answer from every item's stored entry, in its order, with the stored
    /// usage added up (the upstream's `answer` names the model when there is one).
    fn merge(&self, answer: Option<&Value>) -> Option<(Bytes, Usage)> {
        let mut data = Vec::with_capacity(self.items.len());
        let mut usage = Usage::default();
        let mut model = answer.and_then(|a| a.get("model")).cloned();
        for (index, item) in self.items.iter().enumerate() {
            let e = item.stored.as_ref()?;
            let v: Value = serde_json::from_slice(&e.body).ok()?;
            let mut d = v.get("data")?.get(0)?.clone();
            d["index"] = json!(index);
            data.push(d);
            if model.is_none() {
                model = v.get("model").cloned();
            }
            usage.prompt_tokens += e.usage.map_or(0, |u| u.prompt_tokens);
        }
        let merged = json!({
            "object": "list",
            "data": data,
            "model": model,
            "usage": {"prompt_tokens": usage.prompt_tokens, "total_tokens": usage.prompt_tokens},
        });
        Some((serde_json::to_vec(&merged).ok()?.into(), usage))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_keeps_every_member_but_the_inputs() {
        let body = br#"{"model":"e","input":["a","b","c"],"dimensions":8}"#;
        let b: Value = serde_json::from_slice(body).unwrap();
        let items: Vec<&RawValue> = serde_json::from_str(b["input"].to_string().leak()).unwrap();
        let out = with_inputs(body, &[items[0], items[2]]).unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            v,
            json!({"model": "e", "input": ["a", "c"], "dimensions": 8})
        );
    }
}
