//! Step 6½ of the pipeline, the response cache (`sluice_cache`): after admission (so keys,
//! model access and rate limits apply to hits too), a request whose answer is stored is
//! answered from the store; one identical to a request in flight waits for that request's
//! answer; any other goes upstream as the leader of its key, and its answer is published to
//! the requests that wait and stored for those that come later.
//!
//! A leader's stream is read upstream by a task of its own and every client, the leader's
//! included, reads it from the flight: a client that leaves stops nobody else's answer.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use futures_util::stream;
use http::header::{HeaderName, HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use http::{HeaderMap, Response, StatusCode};
use http_body::Frame;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, StreamBody};

use sluice_cache::{
    Cache, CacheKey, CacheStats, Entry, Flights, Follower, Head, Join, Leader, Next,
};
use sluice_core::cache_control::CacheControl;
use sluice_core::endpoint::Endpoint;
use sluice_core::error::ApiError;
use sluice_core::limits::Nanos;
use sluice_core::record::RequestRecord;
use sluice_core::usage::Usage;

use crate::server::{RelayError, ResponseBody, StreamRelay};

static X_CACHE_HIT: HeaderName = HeaderName::from_static("x-sluice-cache-hit");
static X_CACHE_KEY: HeaderName = HeaderName::from_static("x-sluice-cache-key");
static X_LITELLM_CACHE_KEY: HeaderName = HeaderName::from_static("x-litellm-cache-key");
static X_RESPONSE_COST: HeaderName = HeaderName::from_static("x-sluice-response-cost");

/// Where a request stands after the cache was asked.
pub(crate) enum Lookup {
    /// Answered: from the store, or by an identical request that was in flight.
    Answered(Response<ResponseBody>),
    /// Call the upstream; with `Some`, the answer is published and stored.
    Call(Option<Pending>),
}

/// A cacheable request on its way upstream, leading its key.
pub(crate) struct Pending {
    cache: Arc<Cache>,
    key: CacheKey,
    control: CacheControl,
    leader: Leader,
}

/// Ask the cache about a request to `endpoint` for `group` with `body`; `from_body` is the
/// body's `cache` object, `headers` the client's (`Cache-Control`).
pub(crate) async fn lookup(
    cache: &Arc<Cache>,
    endpoint: Endpoint,
    group: &str,
    body: &[u8],
    from_body: Option<&CacheControl>,
    headers: &HeaderMap,
    record: &mut RequestRecord,
) -> Lookup {
    let mut control = from_body.cloned().unwrap_or_default();
    if let Some(h) = headers.get(CACHE_CONTROL).and_then(|v| v.to_str().ok()) {
        control.add_header(h);
    }
    let s = &cache.settings;
    if s.default_off && !control.use_cache {
        return Lookup::Call(None);
    }
    let namespace = control.namespace.as_deref().or(s.namespace.as_deref());
    let Some(key) = CacheKey::of(cache.seed, namespace, endpoint, group, body) else {
        return Lookup::Call(None);
    };
    let stats = &cache.stats;
    let mut counted = false;
    loop {
        if let Some(store) = cache.store.as_ref().filter(|_| !control.no_cache) {
            if let Some(e) = store.get(key, control.max_age) {
                CacheStats::count(&stats.hits, 1);
                CacheStats::count(&stats.saved_nanos, e.cost.unwrap_or(0));
                return Lookup::Answered(hit(&e, key, record));
            }
            if !counted {
                CacheStats::count(&stats.misses, 1);
                counted = true;
            }
        }
        let join = if s.dedupe && !control.no_cache {
            cache.flights.join(key)
        } else {
            // A flight of its own: nobody follows it, but the answer is read the same way.
            Arc::new(Flights::default()).join(key)
        };
        match join {
            Join::Lead(leader) => {
                return Lookup::Call(Some(Pending {
                    cache: Arc::clone(cache),
                    key,
                    control,
                    leader,
                }))
            }
            Join::Follow(f) => {
                if let Some(resp) = follow(f, key, record).await {
                    CacheStats::count(&stats.coalesced, 1);
                    return Lookup::Answered(resp);
                }
                // The leader failed before answering: look again, and lead if nobody does.
            }
        }
    }
}

/// A stored answer, as the client gets it: free, and marked as a hit.
fn hit(e: &Entry, key: CacheKey, record: &mut RequestRecord) -> Response<ResponseBody> {
    record.cache_hit = true;
    record.status = e.status;
    record.stream = e.stream;
    record.usage = e.usage;
    record.cost = Some(0);
    record.ttfb = Some(record.start.elapsed());
    let mut resp = Response::new(ResponseBody::full(e.body.clone()));
    *resp.status_mut() = StatusCode::from_u16(e.status).unwrap_or(StatusCode::OK);
    resp.headers_mut()
        .insert(CONTENT_TYPE, e.content_type.clone());
    mark(resp.headers_mut(), key, true);
    resp
}

/// Wait for the leader's answer; `None` when it failed before it had one.
async fn follow(
    mut f: Follower,
    key: CacheKey,
    record: &mut RequestRecord,
) -> Option<Response<ResponseBody>> {
    let head = f.head().await?;
    let body = if head.stream {
        shared(f)
    } else {
        let mut all = BytesMut::new();
        loop {
            match f.next().await {
                Next::Chunk(c) => all.extend_from_slice(&c),
                Next::End => break,
                Next::Failed => return None,
            }
        }
        ResponseBody::full(all.freeze())
    };
    record.cache_hit = true;
    record.status = head.status;
    record.stream = head.stream;
    record.cost = Some(0);
    record.ttfb = Some(record.start.elapsed());
    let mut resp = Response::new(body);
    *resp.status_mut() = StatusCode::from_u16(head.status).unwrap_or(StatusCode::OK);
    resp.headers_mut().insert(CONTENT_TYPE, head.content_type);
    mark(resp.headers_mut(), key, true);
    Some(resp)
}

/// The headers that say whether an answer came from the cache, and under which key.
fn mark(h: &mut HeaderMap, key: CacheKey, hit: bool) {
    h.insert(
        X_CACHE_HIT.clone(),
        HeaderValue::from_static(if hit { "true" } else { "false" }),
    );
    if let Ok(v) = HeaderValue::from_str(&key.hex()) {
        h.insert(X_CACHE_KEY.clone(), v.clone());
        h.insert(X_LITELLM_CACHE_KEY.clone(), v);
    }
    if hit {
        h.insert(X_RESPONSE_COST.clone(), HeaderValue::from_static("0"));
    }
}

/// A flight's chunks as a response body, as they arrive.
fn shared(f: Follower) -> ResponseBody {
    let chunks = stream::unfold(Some(f), |f| async move {
        let mut f = f?;
        match f.next().await {
            Next::Chunk(c) => Some((Ok(Frame::data(c)), Some(f))),
            Next::End => None,
            Next::Failed => Some((Err(RelayError("the upstream stream broke".into())), None)),
        }
    });
    ResponseBody::Shared(UnsyncBoxBody::new(StreamBody::new(chunks)))
}

impl Pending {
    /// Mark a miss's answer with its key.
    pub(crate) fn mark(&self, h: &mut HeaderMap) {
        mark(h, self.key, false);
    }

    /// A whole answer: published to the requests that wait, stored when it succeeded.
    pub(crate) fn whole(
        self,
        status: StatusCode,
        content_type: Option<&HeaderValue>,
        body: &Bytes,
        usage: Option<Usage>,
        cost: Option<Nanos>,
    ) {
        let content_type = content_type
            .cloned()
            .unwrap_or(HeaderValue::from_static("application/json"));
        if status.is_success() {
            self.store(Entry {
                status: status.as_u16(),
                content_type: content_type.clone(),
                body: body.clone(),
                stream: false,
                usage,
                cost,
                stored: Instant::now(),
                ttl: self.control.ttl.unwrap_or(self.cache.settings.ttl),
            });
        }
        self.leader.head(Head {
            status: status.as_u16(),
            content_type,
            stream: false,
        });
        self.leader.push(body.clone());
        self.leader.finish();
    }

    /// A stream: read upstream by a task of its own, published chunk by chunk and stored
    /// whole when it completes; the client's body reads it from the flight.
    pub(crate) fn stream(
        self,
        status: StatusCode,
        content_type: HeaderValue,
        relay: StreamRelay,
    ) -> ResponseBody {
        self.leader.head(Head {
            status: status.as_u16(),
            content_type: content_type.clone(),
            stream: true,
        });
        let mine = self.leader.follower();
        tokio::spawn(async move {
            let (tx, rx) = tokio::sync::oneshot::channel();
            let mut relay = Box::pin(relay.report_to(tx));
            let keep = self.storing();
            let mut all = BytesMut::new();
            while let Some(frame) = relay.frame().await {
                let Ok(frame) = frame else {
                    // Broken: the leader goes unfinished, and its readers see the failure.
                    return;
                };
                if let Ok(data) = frame.into_data() {
                    if keep {
                        all.extend_from_slice(&data);
                    }
                    self.leader.push(data);
                }
            }
            drop(relay);
            let (usage, cost) = rx.await.unwrap_or((None, None));
            if keep && status.is_success() {
                self.store(Entry {
                    status: status.as_u16(),
                    content_type,
                    body: all.freeze(),
                    stream: true,
                    usage,
                    cost,
                    stored: Instant::now(),
                    ttl: self.control.ttl.unwrap_or(self.cache.settings.ttl),
                });
            }
            self.leader.finish();
        });
        shared(mine)
    }

    fn storing(&self) -> bool {
        self.cache.store.is_some() && !self.control.no_store
    }

    fn store(&self, entry: Entry) {
        if let Some(store) = self.cache.store.as_ref().filter(|_| !self.control.no_store) {
            store.put(self.key, entry);
        }
    }
}

/// `GET /metrics` lines for the cache.
pub(crate) fn metrics(cache: &Cache, out: &mut String) {
    use std::fmt::Write;
    let s = &cache.stats;
    let bytes = cache.store.as_ref().map_or(0, |st| st.bytes());
    let entries = cache.store.as_ref().map_or(0, |st| st.len());
    let _ = write!(
        out,
        "# HELP sluice_cache_hits_total Answers served from the response cache.\n\
         # TYPE sluice_cache_hits_total counter\nsluice_cache_hits_total {}\n\
         # HELP sluice_cache_misses_total Cache lookups that found nothing.\n\
         # TYPE sluice_cache_misses_total counter\nsluice_cache_misses_total {}\n\
         # HELP sluice_cache_coalesced_total Requests answered by an identical request in flight.\n\
         # TYPE sluice_cache_coalesced_total counter\nsluice_cache_coalesced_total {}\n\
         # HELP sluice_cache_evictions_total Answers dropped to stay within the cache's bytes.\n\
         # TYPE sluice_cache_evictions_total counter\nsluice_cache_evictions_total {}\n\
         # HELP sluice_cache_saved_dollars_total Upstream cost the hits and coalesced requests did not incur.\n\
         # TYPE sluice_cache_saved_dollars_total counter\nsluice_cache_saved_dollars_total {}\n\
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

/// Serve a management route (the caller is the master key).
pub(crate) fn manage(
    op: CacheOp,
    cache: Option<&Cache>,
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
            let (entries, bytes) = cache
                .store
                .as_ref()
                .map_or((0, 0), |s| (s.len(), s.bytes()));
            serde_json::json!({
                "status": "healthy",
                "cache_type": "local",
                "store": cache.store.is_some(),
                "dedupe_in_flight": cache.settings.dedupe,
                "entries": entries,
                "bytes": bytes,
                "in_flight": cache.flights.len(),
            })
        }
        CacheOp::Delete => {
            let req: DeleteBody =
                serde_json::from_slice(body).map_err(|e| ApiError::InvalidParam {
                    param: "keys",
                    message: format!("expected {{\"keys\": [\"<x-sluice-cache-key>\", ...]}}: {e}"),
                })?;
            let mut deleted = 0;
            for k in &req.keys {
                let key = CacheKey::from_hex(k).ok_or_else(|| ApiError::InvalidParam {
                    param: "keys",
                    message: format!(
                        "not a cache key: {:?}",
                        k.chars().take(64).collect::<String>()
                    ),
                })?;
                if cache.store.as_ref().is_some_and(|s| s.remove(key)) {
                    deleted += 1;
                }
            }
            serde_json::json!({"status": "success", "deleted": deleted})
        }
        CacheOp::FlushAll => {
            if let Some(s) = &cache.store {
                s.clear();
            }
            serde_json::json!({"status": "success"})
        }
    };
    let mut resp = Response::new(ResponseBody::full(answer.to_string()));
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Ok(resp)
}
