//! The cache's management routes (`/cache/ping`, `/cache/delete`, `/cache/flushall`, as
//! LiteLLM has them), its lines in `/metrics` and its state in `/health/readiness`.

use std::sync::atomic::Ordering::Relaxed;

use http::header::{HeaderValue, CONTENT_TYPE};
use http::{Response, StatusCode};

use sluice_cache::{CacheKey, CacheType};
use sluice_core::error::ApiError;

use super::ResponseCache;
use crate::http::ResponseBody;

/// `GET /metrics` lines for the cache.
pub(crate) fn metrics(cache: &ResponseCache, out: &mut String) {
    use std::fmt::Write;
    let s = &cache.core.stats;
    let bytes = cache.core.store.as_ref().map_or(0, |st| st.bytes());
    let entries = cache.core.store.as_ref().map_or(0, |st| st.len());
    let _ = write!(
        out,
        "# HELP sluice_cache_hits Answers served from the response cache.\n\
         # TYPE sluice_cache_hits counter\nsluice_cache_hits_total {}\n\
         # HELP sluice_cache_misses Cache lookups that found nothing.\n\
         # TYPE sluice_cache_misses counter\nsluice_cache_misses_total {}\n\
         # HELP sluice_cache_coalesced Requests answered by an identical request in flight.\n\
         # TYPE sluice_cache_coalesced counter\nsluice_cache_coalesced_total {}\n\
         # HELP sluice_cache_evictions Answers dropped to stay within the cache's bytes.\n\
         # TYPE sluice_cache_evictions counter\nsluice_cache_evictions_total {}\n\
         # HELP sluice_cache_saved_dollars Upstream cost the cache hits did not incur.\n\
         # TYPE sluice_cache_saved_dollars counter\nsluice_cache_saved_dollars_total {}\n\
         # HELP sluice_cache_bytes Bytes of answers the cache holds.\n\
         # TYPE sluice_cache_bytes gauge\nsluice_cache_bytes {bytes}\n\
         # HELP sluice_cache_entries Answers the cache holds.\n\
         # TYPE sluice_cache_entries gauge\nsluice_cache_entries {entries}\n",
        s.hits.load(Relaxed),
        s.misses.load(Relaxed),
        s.coalesced.load(Relaxed),
        s.evictions.load(Relaxed),
        s.saved_nanos.load(Relaxed) as f64 / 1e9,
    );
    // Exported (as 0) without a semantic cache too, as every counter above.
    let _ = write!(
            out,
            "# HELP sluice_cache_semantic_hits Hits answered with a close prompt's answer (counted in sluice_cache_hits_total too).\n\
             # TYPE sluice_cache_semantic_hits counter\nsluice_cache_semantic_hits_total {}\n\
             # HELP sluice_cache_embedding_errors Prompt embeddings for the semantic cache that failed or timed out.\n\
             # TYPE sluice_cache_embedding_errors counter\nsluice_cache_embedding_errors_total {}\n",
            s.semantic_hits.load(Relaxed),
            s.embedding_errors.load(Relaxed),
        );
    if let Some(shared) = &cache.shared {
        let _ = write!(
            out,
            "# HELP sluice_cache_redis_hits Hits served from the cache's Redis (counted in sluice_cache_hits_total too).\n\
             # TYPE sluice_cache_redis_hits counter\nsluice_cache_redis_hits_total {}\n\
             # HELP sluice_cache_redis_errors Calls to the cache's Redis that failed or timed out.\n\
             # TYPE sluice_cache_redis_errors counter\nsluice_cache_redis_errors_total {}\n\
             # HELP sluice_cache_redis_up Whether the cache's Redis answered its last call.\n\
             # TYPE sluice_cache_redis_up gauge\nsluice_cache_redis_up {}\n",
            s.shared_hits.load(Relaxed),
            s.shared_errors.load(Relaxed),
            u8::from(shared.is_up()),
        );
    }
}

/// The cache's part of `/health/readiness`. A Redis that does not answer leaves the instance
/// ready: it caches in its own memory meanwhile.
pub(crate) fn readiness(cache: Option<&ResponseCache>) -> serde_json::Value {
    let Some(cache) = cache else {
        return serde_json::json!("disabled");
    };
    match &cache.shared {
        None => serde_json::json!({"type": "local"}),
        Some(s) => serde_json::json!({
            "type": "redis",
            "redis": if s.is_up() {
                "connected"
            } else {
                "unreachable: answers are cached in this instance's memory alone"
            },
        }),
    }
}

/// The cache's management routes, as LiteLLM names them (master key).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheOp {
    /// `GET /cache/ping`: the cache's state.
    Ping,
    /// `POST /cache/delete` with `{"keys": [...]}`: drop those answers.
    Delete,
    /// `POST /cache/flushall`: drop every answer.
    FlushAll,
}

impl CacheOp {
    /// The operation a path (without `/v1`) names.
    pub fn of(path: &str) -> Option<Self> {
        match path {
            "/cache/ping" => Some(Self::Ping),
            "/cache/delete" => Some(Self::Delete),
            "/cache/flushall" => Some(Self::FlushAll),
            _ => None,
        }
    }

    /// The method it is called with.
    pub fn method(self) -> http::Method {
        match self {
            Self::Ping => http::Method::GET,
            Self::Delete | Self::FlushAll => http::Method::POST,
        }
    }

    /// Its route label for records and metrics.
    pub fn label(self) -> &'static str {
        match self {
            Self::Ping => "/cache/ping",
            Self::Delete => "/cache/delete",
            Self::FlushAll => "/cache/flushall",
        }
    }
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct DeleteBody {
    keys: Vec<String>,
}

/// Serve a management route (the caller is the master key). With a shared store, a Redis
/// that fails makes `ping` a 503 (as LiteLLM's does) and `delete`/`flushall` an error after
/// this instance's memory was cleared.
pub(crate) async fn manage(
    op: CacheOp,
    cache: Option<&ResponseCache>,
    body: &[u8],
) -> Result<Response<ResponseBody>, ApiError> {
    let Some(cache) = cache else {
        return Err(ApiError::InvalidParam {
            param: "cache",
            message: "the cache is off: set litellm_settings.cache: true".into(),
        });
    };
    let answer = match op {
        CacheOp::Ping => {
            let core = &cache.core;
            let (entries, bytes) = core.store.as_ref().map_or((0, 0), |s| (s.len(), s.bytes()));
            let redis = match &cache.shared {
                None => None,
                Some(s) => Some(s.ping().await.map_err(|e| unavailable(&e))?),
            };
            serde_json::json!({
                "status": "healthy",
                "cache_type": match (&core.settings.kind, cache.semantic.is_some()) {
                    (CacheType::Local, false) => "local",
                    (CacheType::Redis(_), false) => "redis",
                    (CacheType::Local, true) => "local-semantic",
                    (CacheType::Redis(_), true) => "redis-semantic",
                },
                "ping_response": redis.map(|()| true),
                "store": core.store.is_some(),
                "dedupe_in_flight": core.settings.dedupe,
                "entries": entries,
                "bytes": bytes,
                "in_flight": core.flights.len(),
            })
        }
        CacheOp::Delete => {
            let req: DeleteBody =
                serde_json::from_slice(body).map_err(|e| ApiError::InvalidParam {
                    param: "keys",
                    message: format!("expected {{\"keys\": [\"<x-sluice-cache-key>\", ...]}}: {e}"),
                })?;
            let keys = req
                .keys
                .iter()
                .map(|k| {
                    CacheKey::from_hex(k).ok_or_else(|| ApiError::InvalidParam {
                        param: "keys",
                        message: format!(
                            "not a cache key: {:?}",
                            k.chars().take(64).collect::<String>()
                        ),
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            let mut deleted = 0u64;
            for key in &keys {
                if cache.core.store.as_ref().is_some_and(|s| s.remove(*key)) {
                    deleted += 1;
                }
            }
            if let Some(s) = &cache.shared {
                deleted = deleted.max(s.delete(&keys).await.map_err(|e| unavailable(&e))?);
            }
            serde_json::json!({"status": "success", "deleted": deleted})
        }
        CacheOp::FlushAll => {
            if let Some(s) = &cache.core.store {
                s.clear();
            }
            if let Some(s) = &cache.semantic {
                s.clear();
            }
            let removed = match &cache.shared {
                Some(s) => Some(s.flush().await.map_err(|e| unavailable(&e))?),
                None => None,
            };
            serde_json::json!({"status": "success", "redis_keys_removed": removed})
        }
    };
    let mut resp = Response::new(ResponseBody::full(answer.to_string()));
    *resp.status_mut() = StatusCode::OK;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Ok(resp)
}

/// A failed Redis call as the client sees it: 503, the cause without the address.
fn unavailable(e: &super::shared::SharedError) -> ApiError {
    ApiError::CacheUnavailable(e.to_string())
}
