//! The pooled upstream HTTP client: keep-alive connections per upstream authority, HTTP/2 when
//! the upstream offers it over TLS (ALPN), rustls with the platform's root certificates.
//!
//! Each server worker thread (see `server::serve_threads`) has its own pool. hyper-util's client
//! runs a connection's task on the runtime that opened it, so a pool shared by several
//! single-threaded runtimes would wake another thread for every request; with one pool per
//! worker a request never leaves the thread that accepted it. A thread that is not a worker
//! (tests, embedders on a multi-threaded runtime) uses one extra, shared pool.

use std::cell::Cell;
use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use http::{Request, Response};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::connect::dns::{GaiResolver, Name};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::{Client, ResponseFuture};
use hyper_util::rt::{TokioExecutor, TokioTimer};

use crate::body::SegmentsBody;
use crate::h1;
use crate::ssrf::{self, Allowlist};
use crate::tls::UpstreamTls;

/// The HTTP version sluice uses towards a deployment's upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum UpstreamHttp {
    /// HTTP/1.1 on `http://`; on `https://` HTTP/2 when the server offers it (ALPN), as every
    /// hosted provider does.
    #[default]
    Negotiate,
    /// HTTP/2 with prior knowledge (h2c) on `http://`, for self-hosted servers that speak it:
    /// every stream to the upstream shares one connection per worker instead of holding a
    /// connection each (`http2_prior_knowledge: true`). The server must accept h2c.
    PriorKnowledge,
}

/// How sluice opens connections to one upstream. The registry keeps one set of pools per
/// distinct value, so deployments that connect the same way share warm connections.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Connect {
    /// HTTP version.
    pub http: UpstreamHttp,
    /// TLS other than the platform's defaults (`ssl_verify`, `ssl_certificate`).
    pub tls: Option<Arc<UpstreamTls>>,
    /// Set for upstreams a request chose (client-side `api_base`): every address a name
    /// resolves to is checked when the connection is opened, and the connection goes to the
    /// checked addresses, so a name that answers differently the second time (DNS
    /// rebinding) cannot slip an internal address past the check.
    pub guard: Option<Arc<Allowlist>>,
}

/// Name resolution for upstream connections: the system's resolver, with the SSRF check on
/// the answer when the connection is for a client-chosen upstream ([`Connect::guard`]).
#[derive(Clone)]
pub struct Resolver {
    gai: GaiResolver,
    guard: Option<Arc<Allowlist>>,
}

impl tower_service::Service<Name> for Resolver {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = std::io::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.gai.poll_ready(cx)
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let resolving = self.gai.call(name.clone());
        let guard = self.guard.clone();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> = resolving.await?.collect();
            if let Some(allow) = guard {
                let ips: Vec<std::net::IpAddr> = addrs.iter().map(SocketAddr::ip).collect();
                ssrf::check_resolved(name.as_str(), &ips, &allow).map_err(|refusal| {
                    std::io::Error::new(std::io::ErrorKind::PermissionDenied, refusal)
                })?;
            }
            Ok(addrs.into_iter())
        })
    }
}

/// `first`, then every cause of `e` after it (`: `-separated): what a transport failure says,
/// without the request (its URL may carry credentials).
pub fn error_chain(first: String, e: &(dyn std::error::Error + 'static)) -> String {
    let mut msg = first;
    let mut source = e.source();
    while let Some(s) = source {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        source = s.source();
    }
    msg
}

/// A pooled client. Cloning shares the pool.
pub type HttpClient = Client<HttpsConnector<HttpConnector<Resolver>>, SegmentsBody>;

/// Marks a thread that is not a server worker: it uses the shared pool.
const NOT_A_WORKER: usize = usize::MAX;

thread_local! {
    static WORKER: Cell<usize> = const { Cell::new(NOT_A_WORKER) };
}

/// Mark the current thread as server worker `index`: from now on it uses that worker's pools.
/// Called once when a worker thread starts.
pub fn enter_worker(index: usize) {
    WORKER.with(|w| w.set(index));
}

/// The current thread's worker index, if it is a worker.
pub fn worker_index() -> Option<usize> {
    Some(WORKER.with(Cell::get)).filter(|&i| i != NOT_A_WORKER)
}

/// One upstream client per worker thread plus a shared one, all with the same settings.
/// Cloning shares the pools.
#[derive(Clone)]
pub struct UpstreamClient {
    /// `pools[i]` for worker `i`; the last one for every other thread.
    pools: Arc<[HttpClient]>,
    /// sluice's own HTTP/1.1 pools, the same way round, where this client may use them
    /// (negotiated HTTP on an upstream sluice's config chose): plain `http://` requests with a
    /// body of known length go there ([`crate::h1`]).
    own: Option<Arc<[Arc<h1::Pool>]>>,
    connect_timeout: Duration,
}

/// An upstream answer's body, from whichever client carried it.
#[derive(Debug)]
pub enum Answer {
    /// hyper-util's client (HTTPS, HTTP/2, uploads of unknown length).
    Hyper(hyper::body::Incoming),
    /// sluice's own HTTP/1.1 client.
    Own(h1::AnswerBody),
}

/// Why an upstream answer's body broke off.
#[derive(Debug, thiserror::Error)]
pub enum AnswerError {
    /// On hyper-util's client.
    #[error("{0}")]
    Hyper(#[from] hyper::Error),
    /// On sluice's own client.
    #[error("{0}")]
    Own(#[from] h1::Error),
}

impl http_body::Body for Answer {
    type Data = bytes::Bytes;
    type Error = AnswerError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<bytes::Bytes>, AnswerError>>> {
        match self.get_mut() {
            Self::Hyper(b) => Pin::new(b).poll_frame(cx).map_err(AnswerError::Hyper),
            Self::Own(b) => Pin::new(b).poll_frame(cx).map_err(AnswerError::Own),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Self::Hyper(b) => b.is_end_stream(),
            Self::Own(b) => b.is_end_stream(),
        }
    }

    fn size_hint(&self) -> http_body::SizeHint {
        match self {
            Self::Hyper(b) => b.size_hint(),
            Self::Own(b) => b.size_hint(),
        }
    }
}

/// Why a request to an upstream got no answer.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// On hyper-util's client.
    #[error("{0}")]
    Hyper(#[from] hyper_util::client::legacy::Error),
    /// On sluice's own client.
    #[error("{0}")]
    Own(#[from] h1::Error),
}

impl SendError {
    /// Whether no connection could be opened (so nothing reached the upstream).
    pub fn is_connect(&self) -> bool {
        match self {
            Self::Hyper(e) => e.is_connect(),
            Self::Own(e) => e.is_connect(),
        }
    }
}

impl std::fmt::Debug for UpstreamClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "UpstreamClient({} pools)", self.pools.len())
    }
}

impl UpstreamClient {
    /// The pool of the calling thread (a thread-local read, no lock).
    pub fn pool(&self) -> &HttpClient {
        &self.pools[slot(WORKER.with(Cell::get), self.pools.len())]
    }

    /// The pool shared by threads that are not server workers (the callbacks' own thread).
    pub fn shared(&self) -> &HttpClient {
        &self.pools[self.pools.len() - 1]
    }

    /// Send `req` on the calling thread's pool of hyper-util's client.
    pub fn request(&self, req: Request<SegmentsBody>) -> ResponseFuture {
        self.pool().request(req)
    }

    /// Send `req` on the calling thread's pool: sluice's own HTTP/1.1 client where it fits
    /// (plain `http://`, a body of known length, a client that may use it), hyper-util's
    /// otherwise. The request path's one way to call an upstream.
    pub fn send(&self, req: Request<SegmentsBody>) -> Sending {
        let Some(own) = self.own.as_ref().filter(|_| h1::fits(req.uri())) else {
            return Sending::Hyper(self.pool().request(req));
        };
        let (parts, body) = req.into_parts();
        match body.into_segments() {
            Ok((segments, len)) => {
                let pool = Arc::clone(&own[slot(WORKER.with(Cell::get), own.len())]);
                let req = Request::from_parts(parts, ());
                // Boxed, as hyper-util's answer future is: whoever awaits it keeps a pointer.
                Sending::Own(Box::pin(h1::send(
                    pool,
                    self.connect_timeout,
                    req,
                    segments,
                    len,
                )))
            }
            Err(body) => Sending::Hyper(self.pool().request(Request::from_parts(parts, body))),
        }
    }
}

/// An upstream answer on its way, from whichever client carries the request.
pub enum Sending {
    /// hyper-util's client.
    Hyper(ResponseFuture),
    /// sluice's own HTTP/1.1 client.
    Own(Pin<Box<dyn Future<Output = Result<Response<h1::AnswerBody>, h1::Error>> + Send>>),
}

impl std::fmt::Debug for Sending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Hyper(_) => "Sending::Hyper",
            Self::Own(_) => "Sending::Own",
        })
    }
}

impl Future for Sending {
    type Output = Result<Response<Answer>, SendError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            Self::Hyper(f) => Pin::new(f).poll(cx).map(|r| {
                r.map(|resp| resp.map(Answer::Hyper))
                    .map_err(SendError::Hyper)
            }),
            Self::Own(f) => f
                .as_mut()
                .poll(cx)
                .map(|r| r.map(|resp| resp.map(Answer::Own)).map_err(SendError::Own)),
        }
    }
}

/// The pool index for worker `worker` among `len` pools (`len - 1` is the shared one; a worker
/// the registry was not sized for shares it too).
fn slot(worker: usize, len: usize) -> usize {
    worker.min(len - 1)
}

/// Hands out clients, one set of pools per connect timeout and way of connecting, reused
/// across config reloads so that warm connections survive a reload.
#[derive(Default)]
pub struct ClientRegistry {
    workers: usize,
    clients: Mutex<HashMap<(Duration, Connect), UpstreamClient>>,
}

impl std::fmt::Debug for ClientRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ClientRegistry({} workers)", self.workers)
    }
}

impl ClientRegistry {
    /// A registry whose clients have one pool for each of `workers` server threads.
    pub fn new(workers: usize) -> Self {
        Self {
            workers,
            clients: Mutex::default(),
        }
    }

    /// The client for this connect timeout, negotiating the HTTP version (built on first use;
    /// config-load time only).
    pub fn get(&self, connect_timeout: Duration) -> UpstreamClient {
        self.get_for(connect_timeout, &Connect::default())
    }

    /// The client for this connect timeout and way of connecting (config-load time, or a
    /// request that names its own upstream). A TLS setting rustls refuses (checked when the
    /// config was loaded, so not expected here) falls back to the platform's defaults, logged.
    pub fn get_for(&self, connect_timeout: Duration, connect: &Connect) -> UpstreamClient {
        let mut map = match self.clients.lock() {
            Ok(m) => m,
            Err(poisoned) => poisoned.into_inner(),
        };
        map.entry((connect_timeout, connect.clone()))
            .or_insert_with(|| {
                let connector = connector(connect_timeout, connect);
                // The workers share the process's idle-connection budget.
                let idle = MAX_IDLE_PER_HOST.div_ceil(self.workers.max(1));
                // sluice's own HTTP/1.1 client serves negotiated upstreams the config named;
                // one a request chose keeps the SSRF-checked resolver of hyper-util's.
                let own = (connect.http == UpstreamHttp::Negotiate && connect.guard.is_none())
                    .then(|| {
                        (0..=self.workers)
                            .map(|_| Arc::new(h1::Pool::new(idle)))
                            .collect()
                    });
                UpstreamClient {
                    pools: (0..=self.workers)
                        .map(|_| pool(connector.clone(), idle, connect.http))
                        .collect(),
                    own,
                    connect_timeout,
                }
            })
            .clone()
    }
}

/// The connector, built once per connect timeout and way of connecting (loading the root
/// certificates is the costly part) and cloned into every pool.
fn connector(
    connect_timeout: Duration,
    connect: &Connect,
) -> HttpsConnector<HttpConnector<Resolver>> {
    let mut http = HttpConnector::new_with_resolver(Resolver {
        gai: GaiResolver::new(),
        guard: connect.guard.clone(),
    });
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(Some(connect_timeout));
    http.set_keepalive(Some(Duration::from_secs(60)));
    let custom = connect.tls.as_ref().and_then(|tls| match tls.client_config() {
        Ok(config) => Some(config),
        Err(e) => {
            tracing::error!(error = %e, "upstream TLS setting unusable; using the platform's defaults");
            None
        }
    });
    let builder = match custom {
        Some(config) => HttpsConnectorBuilder::new().with_tls_config(config),
        None => match HttpsConnectorBuilder::new().with_native_roots() {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(error = %e, "no platform root certificates; using the bundled webpki roots");
                HttpsConnectorBuilder::new().with_webpki_roots()
            }
        },
    };
    builder
        .https_or_http()
        .enable_http1()
        .enable_http2()
        .wrap_connector(http)
}

/// An HTTP/2-only client (prior knowledge on `http://`), for gRPC exports from the callbacks'
/// own thread.
pub fn h2_only(connect_timeout: Duration) -> HttpClient {
    Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(90))
        .pool_timer(TokioTimer::new())
        .timer(TokioTimer::new())
        .http2_only(true)
        .build(connector(connect_timeout, &Connect::default()))
}

/// Idle keep-alive connections kept per upstream host, over all worker pools together (each
/// holds a task and hyper's buffers, ~26 KB).
const MAX_IDLE_PER_HOST: usize = 1024;

/// The most headers an upstream's answer may have (HTTP/1.1; hyper's own default, stated so
/// that it is a decision): providers send 20 to 40. Past it the answer is a failed attempt.
pub const MAX_UPSTREAM_HEADERS: usize = 100;

/// The most bytes of headers an upstream's HTTP/2 answer may have, the same as an HTTP/1.1
/// answer's header block may fill ([`crate::server::MAX_CONN_BUF`], its read buffer).
pub const MAX_UPSTREAM_HEADER_BYTES: u32 = 64 * 1024;

fn pool(
    connector: HttpsConnector<HttpConnector<Resolver>>,
    max_idle: usize,
    http: UpstreamHttp,
) -> HttpClient {
    let mut builder = Client::builder(TokioExecutor::new());
    builder
        .pool_idle_timeout(Duration::from_secs(90))
        .pool_max_idle_per_host(max_idle)
        .http1_max_buf_size(crate::server::MAX_CONN_BUF)
        .http1_max_headers(MAX_UPSTREAM_HEADERS)
        .http2_max_header_list_size(MAX_UPSTREAM_HEADER_BYTES)
        .pool_timer(TokioTimer::new())
        .timer(TokioTimer::new());
    match http {
        UpstreamHttp::Negotiate => {}
        // One multiplexed connection per worker and upstream: a held stream costs an h2 stream
        // (a few hundred bytes) instead of a connection with its own task and buffers.
        UpstreamHttp::PriorKnowledge => {
            builder.http2_only(true);
        }
    }
    builder.build(connector)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_get_their_own_pool_and_others_share_the_last() {
        assert_eq!(slot(0, 3), 0);
        assert_eq!(slot(1, 3), 1);
        assert_eq!(slot(NOT_A_WORKER, 3), 2);
        assert_eq!(slot(7, 3), 2, "a worker beyond the registry's size shares");
        assert_eq!(slot(NOT_A_WORKER, 1), 0);
    }

    #[test]
    fn a_registry_builds_one_pool_per_worker_plus_a_shared_one() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let registry = ClientRegistry::new(2);
        let client = registry.get(Duration::from_secs(1));
        assert_eq!(client.pools.len(), 3);
        assert!(Arc::ptr_eq(
            &client.pools,
            &registry.get(Duration::from_secs(1)).pools
        ));
        let h2c = registry.get_for(
            Duration::from_secs(1),
            &Connect {
                http: UpstreamHttp::PriorKnowledge,
                ..Connect::default()
            },
        );
        assert!(!Arc::ptr_eq(&client.pools, &h2c.pools));
    }

    /// The SSRF check runs on the addresses the connection is opened to: a name that resolves
    /// to loopback is refused at connect time (nothing reaches the listener), even though
    /// nothing checked it before; an allow-listed block lets it through.
    #[tokio::test]
    async fn a_guarded_client_checks_the_addresses_it_connects_to() {
        use http_body_util::BodyExt as _;
        use std::sync::atomic::{AtomicUsize, Ordering};
        let _ = rustls::crypto::ring::default_provider().install_default();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let seen = accepted.clone();
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                seen.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
                    let mut buf = [0u8; 4096];
                    let _ = sock.read(&mut buf).await;
                    let _ = sock
                        .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                        .await;
                });
            }
        });
        let registry = ClientRegistry::new(0);
        let get = |client: UpstreamClient| async move {
            let req = Request::get(format!("http://localhost:{port}/"))
                .body(SegmentsBody::new(Vec::new()))
                .unwrap();
            match client.request(req).await {
                Ok(resp) => Ok(resp.into_body().collect().await.unwrap().to_bytes()),
                Err(e) => Err(error_chain(e.to_string(), &e)),
            }
        };
        let guarded = Connect {
            guard: Some(Arc::new(Allowlist::default())),
            ..Connect::default()
        };
        let refused = get(registry.get_for(Duration::from_secs(2), &guarded))
            .await
            .unwrap_err();
        assert!(refused.contains("loopback"), "{refused}");
        assert_eq!(accepted.load(Ordering::SeqCst), 0, "nothing connected");

        let allowed = Connect {
            guard: Some(Arc::new(Allowlist::parse(&["127.0.0.0/8", "::1"]).unwrap())),
            ..Connect::default()
        };
        let body = get(registry.get_for(Duration::from_secs(2), &allowed))
            .await
            .unwrap();
        assert_eq!(&body[..], b"ok");
        let plain = get(registry.get(Duration::from_secs(2))).await.unwrap();
        assert_eq!(&plain[..], b"ok");
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn entering_a_worker_is_per_thread() {
        std::thread::spawn(|| {
            assert_eq!(worker_index(), None);
            enter_worker(1);
            assert_eq!(worker_index(), Some(1));
        })
        .join()
        .unwrap();
        assert_eq!(worker_index(), None);
    }
}
