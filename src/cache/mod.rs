//! Step 6½ of the pipeline, the response cache (`sluice_cache`): after admission (so keys,
//! model access and rate limits apply to hits too), a request whose answer is stored is
//! answered from the store; one identical to a request in flight waits for that request's
//! answer; any other goes upstream as the leader of its key, and its answer is published to
//! the requests that wait and stored for those that come later.
//!
//! A leader's stream is read upstream by a task of its own and every client, the leader's
//! included, reads it from the flight: a client that leaves stops nobody else's answer.
//!
//! With `type: redis` (`shared.rs`) this instance's memory stands in front of a store the
//! fleet shares: a leader looks there before calling upstream, and answers are written to
//! both. `manage.rs` serves `/cache/*` and the cache's metrics. With a semantic cache
//! (`semantic.rs`) a leader that misses also looks for the answer to a close prompt.

pub(crate) mod embeddings;
mod manage;
mod semantic;
mod shared;

pub use manage::CacheOp;
pub(crate) use manage::{manage, metrics, readiness};

use std::sync::Arc;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use futures_util::stream;
use http::header::{HeaderName, HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use http::{HeaderMap, Response, StatusCode};
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};

use sluice_cache::{
    Cache, CacheKey, CacheSettings, CacheStats, CacheType, Entry, Flights, Follower, Head, Join,
    Leader, Next, Shape,
};
use sluice_core::cache_control::CacheControl;
use sluice_core::endpoint::Endpoint;
use sluice_core::limits::Nanos;
use sluice_core::record::RequestRecord;
use sluice_core::usage::Usage;

use crate::fleet::BadRedisUrl;
use crate::http::X_RESPONSE_COST;
use crate::http::{RelayError, ResponseBody};
use crate::server::StreamRelay;
use shared::SharedStore;

static X_CACHE_HIT: HeaderName = HeaderName::from_static("x-sluice-cache-hit");
static X_CACHE_KEY: HeaderName = HeaderName::from_static("x-sluice-cache-key");
static X_LITELLM_CACHE_KEY: HeaderName = HeaderName::from_static("x-litellm-cache-key");

/// The response cache of a config: the in-process parts (`sluice_cache`) and, with
/// `type: redis`, the store the fleet shares.
#[derive(Debug)]
pub struct ResponseCache {
    /// Settings, in-process store, flights, counters.
    pub core: Cache,
    shared: Option<SharedStore>,
    semantic: Option<semantic::Semantic>,
}

impl crate::server::Part for ResponseCache {
    /// The cache `cache_params` describe, or the running one when they are as they were (it
    /// keeps its entries and its Redis connection).
    fn build(
        config: &sluice_config::Config,
        _with: &crate::server::Building<'_>,
        before: Option<&Arc<Self>>,
    ) -> Result<Option<Arc<Self>>, String> {
        let Some(settings) = &config.litellm.cache else {
            return Ok(None);
        };
        if let Some(old) = before.filter(|old| old.core.settings == *settings) {
            return Ok(Some(Arc::clone(old)));
        }
        Self::start(settings.clone(), config.general.master_key.as_ref())
            .map(Some)
            .map_err(|e| format!("litellm_settings.cache_params: {e}"))
    }
}

impl ResponseCache {
    /// The cache `settings` describe; a Redis store connects in the background (must run
    /// inside the runtime). `fleet_secret` (the master key) seeds a shared cache's keys.
    fn start(
        settings: CacheSettings,
        fleet_secret: Option<&sluice_core::Secret>,
    ) -> Result<Arc<Self>, BadRedisUrl> {
        let core = Cache::new(settings, fleet_secret);
        let shared = match &core.settings.kind {
            CacheType::Local => None,
            CacheType::Redis(r) => Some(SharedStore::start(
                r,
                core.settings.namespace.as_deref(),
                Arc::clone(&core.stats),
            )?),
        };
        let semantic = core
            .settings
            .semantic
            .as_ref()
            .and_then(|s| semantic::Semantic::new(s, shared.as_ref(), Arc::clone(&core.stats)));
        let cache = Arc::new(Self {
            core,
            shared,
            semantic,
        });
        if let Some(s) = &cache.shared {
            s.hear_invalidations(Arc::downgrade(&cache));
        }
        Ok(cache)
    }

    /// The config's namespace (`cache_params.namespace`): what a virtual key's scope wraps
    /// when its request names none.
    pub(crate) fn namespace(&self) -> Option<&str> {
        self.core.settings.namespace.as_deref()
    }

    /// Whether a request to `endpoint` with the body's `cache` object uses the cache at all:
    /// the pipeline asks before it builds a lookup (`mode: default_off` leaves requests that
    /// do not ask as if there were no cache).
    pub(crate) fn applies(&self, endpoint: Endpoint, from_body: Option<&CacheControl>) -> bool {
        let s = &self.core.settings;
        s.caches(endpoint) && (!s.default_off || from_body.is_some_and(|c| c.use_cache))
    }
}

/// Where a request stands after the cache was asked.
pub(crate) enum Lookup {
    /// Answered: from the store, or by an identical request that was in flight.
    Answered(Response<ResponseBody>),
    /// Call the upstream; with `Some`, the answer is published and stored.
    Call(Option<Pending>),
}

/// A cacheable request on its way upstream, leading its key.
pub(crate) struct Pending {
    cache: Arc<ResponseCache>,
    key: CacheKey,
    shape: Shape,
    control: CacheControl,
    leader: Leader,
    /// The prompt's vector and context, to index the answer by (semantic caches).
    probe: Option<semantic::Probe>,
}

/// Ask the cache about a request to `endpoint` for `group` with `body`, wanting its answer in
/// `shape`; `from_body` is the body's `cache` object, `headers` the client's
/// (`Cache-Control`); `router` embeds the prompt for a semantic cache.
#[allow(clippy::too_many_arguments)] // the pipeline's facts, passed through as they are
pub(crate) async fn lookup(
    cache: &Arc<ResponseCache>,
    router: &sluice_routing::Router,
    endpoint: Endpoint,
    group: &str,
    body: &[u8],
    shape: Shape,
    from_body: Option<&CacheControl>,
    headers: &HeaderMap,
    record: &mut RequestRecord,
) -> Lookup {
    let control = controls(from_body, headers);
    let s = &cache.core.settings;
    let namespace = control.namespace.as_deref().or(s.namespace.as_deref());
    let Some(key) = CacheKey::of(cache.core.seed, namespace, endpoint, group, body) else {
        return Lookup::Call(None);
    };
    let stats = &cache.core.stats;
    let mut counted = false;
    loop {
        if let Some(store) = cache.core.store.as_ref().filter(|_| !control.no_cache) {
            if let Some(e) = store
                .get(key, control.max_age)
                .and_then(|e| in_shape(endpoint, &e, shape))
            {
                CacheStats::count(&stats.hits, 1);
                CacheStats::count(&stats.saved_nanos, e.cost.unwrap_or(0));
                return Lookup::Answered(hit(&e, key, record));
            }
            if !counted {
                CacheStats::count(&stats.misses, 1);
                counted = true;
            }
        }
        let flight = key.flight(shape);
        let join = if s.dedupe && !control.no_cache {
            cache.core.flights.join(flight)
        } else {
            // A flight of its own: nobody follows it, but the answer is read the same way.
            Arc::new(Flights::default()).join(flight)
        };
        match join {
            Join::Lead(leader) => {
                if let Some(e) = shared_hit(cache, key, &control, endpoint, shape).await {
                    publish(leader, &e);
                    return Lookup::Answered(hit(&e, key, record));
                }
                let at = (group, namespace);
                let probe = semantic::probe(cache, router, endpoint, at, body, &control).await;
                // A close prompt's answer, in this request's shape.
                if let Some((e, similarity)) = semantic::hit(cache, probe.as_ref(), &control)
                    .await
                    .and_then(|(e, sim)| Some((in_shape(endpoint, &e, shape)?, sim)))
                {
                    publish(leader, &e);
                    let mut resp = hit(&e, key, record);
                    semantic::mark(resp.headers_mut(), similarity);
                    return Lookup::Answered(resp);
                }
                return Lookup::Call(Some(Pending {
                    cache: Arc::clone(cache),
                    key,
                    shape,
                    control,
                    leader,
                    probe,
                }));
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

/// What a request asks of the cache: its body's `cache` object (with its key's and team's
/// policies applied) and its `Cache-Control` header.
pub(crate) fn controls(from_body: Option<&CacheControl>, headers: &HeaderMap) -> CacheControl {
    let mut control = from_body.cloned().unwrap_or_default();
    if let Some(h) = headers.get(CACHE_CONTROL).and_then(|v| v.to_str().ok()) {
        control.add_header(h);
    }
    control
}

/// Give a stored answer to the followers too, as if it had come from upstream.
fn publish(leader: Leader, e: &Entry) {
    leader.head(Head {
        status: e.status,
        content_type: e.content_type.clone(),
        stream: e.shape.is_stream(),
        cost: e.cost,
    });
    leader.push(e.body.clone());
    leader.finish();
}

/// An answer from the shared store, kept in this instance's memory from now on and counted
/// as a hit.
async fn shared_hit(
    cache: &ResponseCache,
    key: CacheKey,
    control: &CacheControl,
    endpoint: Endpoint,
    shape: Shape,
) -> Option<Arc<Entry>> {
    let shared = (cache.core.settings.store && !control.no_cache)
        .then_some(cache.shared.as_ref())
        .flatten()?;
    let e = Arc::new(shared.get(key).await?);
    if control.max_age.is_some_and(|age| e.stored.elapsed() > age) {
        return None;
    }
    if let Some(store) = &cache.core.store {
        store.put_shared(key, Arc::clone(&e));
    }
    let e = in_shape(endpoint, &e, shape)?;
    let stats = &cache.core.stats;
    CacheStats::count(&stats.hits, 1);
    CacheStats::count(&stats.shared_hits, 1);
    CacheStats::count(&stats.saved_nanos, e.cost.unwrap_or(0));
    Some(e)
}

/// A stored answer in the shape the request wants: as stored, or told again as a stream or
/// put together from one (`sluice_translate::replay`). `None` when it cannot be (an answer of
/// a shape the endpoint does not have): a miss.
fn in_shape(endpoint: Endpoint, e: &Arc<Entry>, want: Shape) -> Option<Arc<Entry>> {
    use sluice_translate::replay::{stream_of, whole_of};
    if e.shape == want {
        return Some(Arc::clone(e));
    }
    let body = match (e.shape, want) {
        (Shape::Whole, Shape::Stream { usage }) => stream_of(endpoint, &e.body, usage)?,
        (Shape::Stream { .. }, Shape::Whole) => whole_of(endpoint, &e.body, e.usage.as_ref())?,
        (Shape::Stream { .. }, Shape::Stream { usage }) => {
            let whole = whole_of(endpoint, &e.body, e.usage.as_ref())?;
            stream_of(endpoint, &whole, usage)?
        }
        (Shape::Whole, Shape::Whole) => return Some(Arc::clone(e)),
    };
    Some(Arc::new(Entry {
        status: e.status,
        content_type: want.content_type(),
        body: body.into(),
        shape: want,
        usage: e.usage,
        cost: e.cost,
        stored: e.stored,
        ttl: e.ttl,
    }))
}

/// A stored answer, as the client gets it: free, and marked as a hit.
fn hit(e: &Entry, key: CacheKey, record: &mut RequestRecord) -> Response<ResponseBody> {
    record.cache_hit = true;
    record.status = e.status;
    record.stream = e.shape.is_stream();
    record.usage = e.usage;
    record.cost = Some(0);
    record.saved = e.cost;
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
        ResponseBody::shared(flight_body(f))
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
    record.saved = head.cost;
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

/// A flight's chunks as a body, as they arrive.
fn flight_body(
    f: Follower,
) -> impl http_body::Body<Data = Bytes, Error = RelayError> + Send + 'static {
    let chunks = stream::unfold(Some(f), |f| async move {
        let mut f = f?;
        match f.next().await {
            Next::Chunk(c) => Some((Ok(Frame::data(c)), Some(f))),
            Next::End => None,
            Next::Failed => Some((Err(RelayError("the upstream stream broke".into())), None)),
        }
    });
    StreamBody::new(chunks)
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
                shape: Shape::Whole,
                usage,
                cost,
                stored: Instant::now(),
                ttl: self.control.ttl.unwrap_or(self.cache.core.settings.ttl),
            });
        }
        self.leader.head(Head {
            status: status.as_u16(),
            content_type,
            stream: false,
            cost: cost.filter(|_| status.is_success()),
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
            // Known when the stream ends, after the followers began reading it.
            cost: None,
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
                    shape: self.shape,
                    usage,
                    cost,
                    stored: Instant::now(),
                    ttl: self.control.ttl.unwrap_or(self.cache.core.settings.ttl),
                });
            }
            self.leader.finish();
        });
        // The leader's relay records the request when its stream ends (on the task above): the
        // pipeline must not record it a second time.
        ResponseBody::relay(flight_body(mine))
    }

    fn storing(&self) -> bool {
        self.cache.core.store.is_some() && !self.control.no_store
    }

    fn store(&self, entry: Entry) {
        if self.control.no_store || !self.cache.core.settings.store {
            return;
        }
        if let Some(shared) = &self.cache.shared {
            shared.put(self.key, &entry);
        }
        if let Some(probe) = &self.probe {
            semantic::index(&self.cache, probe, self.key, &entry);
        }
        if let Some(store) = &self.cache.core.store {
            store.put(self.key, entry);
        }
    }
}
