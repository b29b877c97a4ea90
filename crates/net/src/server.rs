//! The accept side, shared by the gateway and the mock provider's server: one listening socket
//! per worker thread (`SO_REUSEPORT`), one single-threaded runtime per worker, and the accept
//! loop (HTTP/1.1 and h2c on one port, or HTTPS with ALPN h2 and http/1.1; graceful drain).

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::{Request, Response};
use http_body::Body;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::h1;
use crate::h1::server::Ended;
pub use crate::h1::server::RequestBody;

/// Largest read buffer per connection (hyper's minimum is 8 KiB).
pub const MAX_CONN_BUF: usize = 64 * 1024;

/// Streams an HTTP/2 client may open at once on one connection (hyper's default is 200). A
/// gateway speaking h2c to an upstream multiplexes every stream of a worker on one connection,
/// and streams past the server's limit wait for a free one; the mock serves through this
/// loop too, so its limit must not be what a benchmark with 1,000 held streams measures.
pub const MAX_H2_STREAMS: u32 = 4096;

/// Longest a client may take to finish the TLS handshake: a connection that opens and stalls
/// holds nothing longer than this.
pub const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// TLS for a listener (`sluice serve --tls-cert/--tls-key`): rustls with the ring provider,
/// ALPN `h2` then `http/1.1`. Cheap to clone (one shared config).
#[derive(Clone)]
pub struct Tls(TlsAcceptor);

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tls")
    }
}

/// A request extension the accept loop adds to every request that came over TLS (the console
/// marks its cookies `Secure` then).
#[derive(Debug, Clone, Copy)]
pub struct ServedOverTls;

/// A request extension: the address of the connection's peer, added while
/// [`ConnLimits::peer_addresses`] is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerAddr(pub IpAddr);

/// Why a listener's certificate or key cannot be used; the caller names the flag or key.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The certificate chain file: unreadable, or no PEM certificate in it.
    #[error("{0}")]
    Cert(String),
    /// The private key file: unreadable, or no PEM private key in it.
    #[error("{0}")]
    Key(String),
    /// rustls refused the pair (a key that does not match the certificate, an unsupported key).
    #[error("{0}")]
    Pair(String),
}

impl Tls {
    /// Read a PEM certificate chain and a PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub fn from_pem_files(cert: &Path, key: &Path) -> Result<Self, TlsError> {
        let cert_pem = std::fs::read(cert).map_err(|e| TlsError::Cert(e.to_string()))?;
        let key_pem = std::fs::read(key).map_err(|e| TlsError::Key(e.to_string()))?;
        Self::from_pem(&cert_pem, &key_pem)
    }

    /// The same from PEM text in memory.
    pub fn from_pem(cert_pem: &[u8], key_pem: &[u8]) -> Result<Self, TlsError> {
        Self::build(cert_pem, key_pem, None)
    }

    /// The same, and every client must present a certificate issued by one in `client_ca_pem`
    /// (mutual TLS; the mock provider's `--tls-client-ca`, standing in for an upstream such
    /// as OpenAI's mTLS endpoints).
    pub fn from_pem_requiring_client(
        cert_pem: &[u8],
        key_pem: &[u8],
        client_ca_pem: &[u8],
    ) -> Result<Self, TlsError> {
        Self::build(cert_pem, key_pem, Some(client_ca_pem))
    }

    fn build(
        cert_pem: &[u8],
        key_pem: &[u8],
        client_ca_pem: Option<&[u8]>,
    ) -> Result<Self, TlsError> {
        let certs = CertificateDer::pem_slice_iter(cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| TlsError::Cert(format!("not a PEM certificate chain: {e}")))?;
        if certs.is_empty() {
            return Err(TlsError::Cert("no PEM certificate in it".into()));
        }
        let key = PrivateKeyDer::from_pem_slice(key_pem)
            .map_err(|e| TlsError::Key(format!("no PEM private key in it: {e}")))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Pair(e.to_string()))?;
        let builder = match client_ca_pem {
            None => builder.with_no_client_auth(),
            Some(pem) => {
                let mut roots = rustls::RootCertStore::empty();
                for ca in CertificateDer::pem_slice_iter(pem) {
                    let ca = ca.map_err(|e| TlsError::Cert(format!("client CA: {e}")))?;
                    roots
                        .add(ca)
                        .map_err(|e| TlsError::Cert(format!("client CA: {e}")))?;
                }
                let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                    Arc::new(roots),
                    provider,
                )
                .build()
                .map_err(|e| TlsError::Cert(format!("client CA: {e}")))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let mut config = builder
            .with_single_cert(certs, key)
            .map_err(|e| TlsError::Pair(e.to_string()))?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Self(TlsAcceptor::from(Arc::new(config))))
    }
}

/// What a client may make a connection carry, and how many connections it may hold: the
/// limits against hostile clients that sit below any request (`general_settings` in
/// docs/configuration.md). The default is what the accept loop always did, so the mock and
/// the benchmark's helpers keep their behaviour.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnLimits {
    /// Longest a client may take to send a request's headers (and, on a fresh connection, the
    /// bytes that tell HTTP/1.1 from h2c); then the connection is closed (slowloris).
    pub header_read_timeout: Duration,
    /// Most header fields in one HTTP/1.1 request; more is refused with 431.
    pub max_headers: usize,
    /// Most bytes of headers: HTTP/1.1's read buffer (request line and headers must fit, else
    /// 431; also the largest body frame read at once) and HTTP/2's `SETTINGS_MAX_HEADER_LIST_SIZE`.
    pub max_header_bytes: usize,
    /// Most open connections on this accept loop; at the limit it stops accepting and new
    /// connections wait in the kernel's backlog until one closes. `None`: no limit.
    pub max_connections: Option<usize>,
    /// Most new connections one client address may open per second on this accept loop; the
    /// excess is closed at once. `None`: no limit.
    pub max_connection_rate_per_ip: Option<u32>,
    /// Whether each request carries its peer's address ([`PeerAddr`]).
    pub peer_addresses: PeerAddresses,
}

/// The switch that makes each request carry its peer's address. Off until something reads it
/// (an address allow-list): a request's first extension costs an allocation. Shared, so that
/// the gateway can turn it on while it serves; a switch, not a setting, so any two compare
/// equal. Requests to one path the gateway names ([`PeerAddresses::always_for`]) carry it
/// whatever the switch says.
#[derive(Debug, Clone, Default)]
pub struct PeerAddresses {
    on: Arc<AtomicBool>,
    always: Option<&'static str>,
}

impl PeerAddresses {
    /// From now on, every request carries its peer's address.
    pub fn turn_on(&self) {
        self.on.store(true, Ordering::Relaxed);
    }

    /// Whether requests carry their peer's address.
    pub fn on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// The same switch, and requests to `path` always carry the peer (one comparison per
    /// request).
    #[must_use]
    pub fn always_for(mut self, path: &'static str) -> Self {
        self.always = Some(path);
        self
    }

    /// Whether a request to `path` carries its peer's address.
    fn tags(&self, path: &str) -> bool {
        self.on() || self.always == Some(path)
    }
}

impl PartialEq for PeerAddresses {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for PeerAddresses {}

impl Default for ConnLimits {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(30),
            max_headers: 100,
            max_header_bytes: MAX_CONN_BUF,
            max_connections: None,
            max_connection_rate_per_ip: None,
            peer_addresses: PeerAddresses::default(),
        }
    }
}

impl ConnLimits {
    /// The share of one of `workers` accept loops: a connection cap is split evenly (rounded
    /// up); the per-address rate is per loop, as the kernel spreads one client's connections
    /// over the loops.
    fn per_worker(&self, workers: usize) -> Self {
        Self {
            max_connections: self
                .max_connections
                .map(|n| n.div_ceil(workers.max(1)).max(1)),
            ..self.clone()
        }
    }
}

/// HTTP/2 streams a client may reset before the server has answered them, at once, before the
/// connection is closed (the rapid-reset attack, CVE-2023-44487; hyper's default is 20).
const MAX_PENDING_RESETS: usize = 20;

/// Streams the server may reset for a client's protocol errors on one connection before it
/// closes the connection (hyper's default 1024, said here so that it is a decision).
const MAX_LOCAL_RESETS: usize = 1024;

/// HTTP/2's connection preface: a fresh connection is h2c exactly when it starts with it.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Bind `workers` listening sockets to `addr`, all on one port (`--port 0`: the port the first
/// one got). With `SO_REUSEPORT` the kernel spreads new connections over them, so each worker
/// accepts its own; where that is unavailable every worker shares one socket instead.
///
/// A plain bind comes first so that a port another process holds is refused as before: two
/// processes that both set `SO_REUSEPORT` would otherwise share the port silently.
pub async fn bind_workers(
    addr: SocketAddr,
    workers: usize,
) -> std::io::Result<Vec<std::net::TcpListener>> {
    let workers = workers.max(1);
    let probe = std::net::TcpListener::bind(addr)?;
    let addr = probe.local_addr()?;
    drop(probe);
    match reuseport_group(addr, workers) {
        Ok(group) => Ok(group),
        Err(e) => {
            tracing::info!(error = %e, "no SO_REUSEPORT; the workers share one listening socket");
            let shared = std::net::TcpListener::bind(addr)?;
            shared.set_nonblocking(true)?;
            (0..workers).map(|_| shared.try_clone()).collect()
        }
    }
}

/// `workers` sockets bound to `addr` with `SO_REUSEPORT`, listening.
fn reuseport_group(
    addr: SocketAddr,
    workers: usize,
) -> std::io::Result<Vec<std::net::TcpListener>> {
    (0..workers)
        .map(|_| {
            let socket = match addr {
                SocketAddr::V4(_) => TcpSocket::new_v4()?,
                SocketAddr::V6(_) => TcpSocket::new_v6()?,
            };
            socket.set_reuseaddr(true)?;
            set_reuseport(&socket)?;
            socket.bind(addr)?;
            socket.listen(LISTEN_BACKLOG)?.into_std()
        })
        .collect()
}

#[cfg(all(unix, not(any(target_os = "solaris", target_os = "illumos"))))]
fn set_reuseport(socket: &TcpSocket) -> std::io::Result<()> {
    socket.set_reuseport(true)
}

#[cfg(not(all(unix, not(any(target_os = "solaris", target_os = "illumos")))))]
fn set_reuseport(_: &TcpSocket) -> std::io::Result<()> {
    Err(std::io::ErrorKind::Unsupported.into())
}

/// Pending connections each listening socket queues.
const LISTEN_BACKLOG: u32 = 1024;

/// Run one worker thread per listener, each a single-threaded tokio runtime with its own accept
/// loop ([`serve_with`]), so that a request is accepted, proxied and answered on one thread with
/// no cross-thread wake-up. Shared by the gateway and the mock provider. When `shutdown`
/// resolves every worker stops accepting and drains for at most `grace`, then runs
/// `at_worker_end` on its runtime; this returns when all have ended. `limits` are the whole
/// server's; each worker gets its share ([`ConnLimits`]).
pub async fn serve_threads<H, F, B, W, WF>(
    listeners: Vec<std::net::TcpListener>,
    tls: Option<Tls>,
    handler: H,
    shutdown: impl Future<Output = ()>,
    grace: Duration,
    at_worker_end: W,
    limits: ConnLimits,
) -> std::io::Result<()>
where
    W: Fn() -> WF + Clone + Send + 'static,
    WF: Future<Output = ()>,
    H: Fn(Request<RequestBody>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<B>> + Send + 'static,
    B: Body<Data = bytes::Bytes> + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    // Every runtime first: a failure then leaves no thread behind.
    let runtimes = listeners
        .iter()
        .map(|_| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
        })
        .collect::<std::io::Result<Vec<_>>>()?;
    let stop = CancellationToken::new();
    let limits = limits.per_worker(listeners.len());
    let mut threads = Vec::with_capacity(listeners.len());
    for (index, (listener, runtime)) in listeners.into_iter().zip(runtimes).enumerate() {
        let handler = handler.clone();
        let tls = tls.clone();
        let at_end = at_worker_end.clone();
        let stopped = stop.clone().cancelled_owned();
        let limits = limits.clone();
        let thread = std::thread::Builder::new()
            .name(format!("sluice-worker-{index}"))
            .spawn(move || {
                crate::client::enter_worker(index);
                runtime.block_on(async move {
                    let pacer = tokio::spawn(keep_a_timer_armed());
                    match TcpListener::from_std(listener) {
                        Ok(l) => serve_on(l, tls, handler, stopped, grace, limits).await,
                        Err(e) => tracing::error!(worker = index, error = %e, "cannot listen"),
                    }
                    // What the caller's worker must finish before its runtime goes (the
                    // gateway: every record of its recorder queue to the sinks).
                    at_end().await;
                    pacer.abort();
                });
            });
        match thread {
            Ok(t) => threads.push(t),
            Err(e) => {
                stop.cancel();
                join(threads).await;
                return Err(e);
            }
        }
    }
    shutdown.await;
    stop.cancel();
    join(threads).await;
    Ok(())
}

/// How often a worker's standing timer fires.
const PACER: Duration = Duration::from_secs(1);

/// Keep a timer due within [`PACER`] in the worker's timer wheel. tokio's time driver writes
/// its own eventfd whenever a timer is registered earlier than the wake-up it last planned,
/// and a worker that parked with no timer planned none: every request's upstream timeout then
/// cost a `write(2)` to wake a thread that was already awake (one per request, seen with
/// strace and perf). With a timer always due within a second, request timeouts (seconds to
/// minutes) are never the earliest.
async fn keep_a_timer_armed() {
    loop {
        tokio::time::sleep(PACER).await;
    }
}

/// Wait for worker threads without blocking the calling runtime.
async fn join(threads: Vec<std::thread::JoinHandle<()>>) {
    let joined = tokio::task::spawn_blocking(move || {
        for t in threads {
            let _ = t.join();
        }
    });
    let _ = joined.await;
}

/// The accept loop shared by the gateway and the mock provider's server: HTTP/1.1 and h2c on
/// one port, `TCP_NODELAY`, graceful drain on shutdown; the default [`ConnLimits`].
pub async fn serve_with<H, F, B>(
    listener: TcpListener,
    handler: H,
    shutdown: impl Future<Output = ()>,
    grace: Duration,
) where
    H: Fn(Request<RequestBody>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<B>> + Send + 'static,
    B: Body<Data = bytes::Bytes> + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    serve_on(
        listener,
        None,
        handler,
        shutdown,
        grace,
        ConnLimits::default(),
    )
    .await;
}

/// [`serve_with`] under `limits` (header count, size and read time, open connections and new
/// connections per client address, HTTP/2's stream and reset limits), over TLS when `tls` is
/// given: each TLS connection's handshake runs in its own task (bounded by
/// [`TLS_HANDSHAKE_TIMEOUT`]) and its requests carry [`ServedOverTls`]; the plain path is
/// untouched by the TLS branch.
pub async fn serve_on<H, F, B>(
    listener: TcpListener,
    tls: Option<Tls>,
    handler: H,
    shutdown: impl Future<Output = ()>,
    grace: Duration,
    limits: ConnLimits,
) where
    H: Fn(Request<RequestBody>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<B>> + Send + 'static,
    B: Body<Data = bytes::Bytes> + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        // Cap each connection's read buffer: hyper grows it to the largest read and keeps it
        // while the connection lives, so 500 KB bodies on hundreds of keep-alive connections
        // would otherwise pin hundreds of MB. Bodies arrive in 64 KB frames instead. Headers
        // that do not fit are refused with 431 (hyper's minimum is 8 KiB).
        .max_buf_size(limits.max_header_bytes.max(8 * 1024))
        .max_headers(limits.max_headers)
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    builder
        .http2()
        .max_concurrent_streams(MAX_H2_STREAMS)
        .max_header_list_size(u32::try_from(limits.max_header_bytes).unwrap_or(u32::MAX))
        .max_pending_accept_reset_streams(MAX_PENDING_RESETS)
        .max_local_error_reset_streams(MAX_LOCAL_RESETS)
        .timer(TokioTimer::new());
    // Shared by the connection tasks (`into_owned` copies what a connection keeps).
    let builder = Arc::new(builder);
    let graceful = GracefulShutdown::new();
    let tracker = TaskTracker::new();
    let slots = limits.max_connections.map(|n| Arc::new(Semaphore::new(n)));
    let mut rate = limits.max_connection_rate_per_ip.map(RateWindow::new);
    let preface_timeout = limits.header_read_timeout;
    // Plain HTTP/1.1 on sluice's own connection (`h1::server`) unless `SLUICE_HTTP1=hyper`.
    let own_h1 = (std::env::var_os("SLUICE_HTTP1").is_none_or(|v| v != "hyper")).then(|| {
        Arc::new(h1::server::Options {
            header_read_timeout: limits.header_read_timeout,
            max_headers: limits.max_headers,
            max_head_bytes: limits.max_header_bytes.max(8 * 1024),
        })
    });
    // Tells connections on the own path to finish their answer and close.
    let stop = CancellationToken::new();
    tokio::pin!(shutdown);
    loop {
        // At the connection limit, stop accepting: new connections wait in the backlog.
        let slot = match &slots {
            None => None,
            Some(s) => tokio::select! {
                permit = s.clone().acquire_owned() => permit.ok(),
                () = &mut shutdown => break,
            },
        };
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(conn) => conn,
                    Err(e) => {
                        // Out of file descriptors and the like: back off instead of spinning.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                if let Some(r) = rate.as_mut() {
                    if !r.admit(peer.ip()) {
                        tracing::debug!(peer = %peer.ip(), "connection rate limit: closed");
                        continue;
                    }
                }
                let _ = stream.set_nodelay(true);
                let handler = handler.clone();
                let tagged = (limits.peer_addresses.clone(), peer.ip());
                if let Some(tls) = &tls {
                    tracker.spawn(serve_tls_conn(
                        tls.0.clone(),
                        stream,
                        builder.clone(),
                        graceful.watcher(),
                        handler,
                        (slot, tagged),
                    ));
                    continue;
                }
                let builder = builder.clone();
                let graceful = graceful.watcher();
                let stop = stop.clone();
                let own = own_h1.clone();
                tracker.spawn(async move {
                    let _slot = slot;
                    // hyper's header timeout starts once it knows the protocol; a client that
                    // sends nothing (or a trickle of the h2 preface) is cut here.
                    let h2 = match tokio::time::timeout(preface_timeout, protocol_known(&stream)).await {
                        Ok(Ok(h2)) => h2,
                        Ok(Err(e)) => {
                            tracing::debug!(error = %e, "connection failed before a request");
                            return;
                        }
                        Err(_) => {
                            tracing::debug!("no request within the header read timeout: closed");
                            return;
                        }
                    };
                    let Some(opts) = own.filter(|_| !h2) else {
                        return hyper_conn(&builder, stream, handler, (tagged, false), graceful).await;
                    };
                    let tag = |req: &mut Request<RequestBody>| tag_peer(req, &tagged);
                    match h1::server::serve(stream, &handler, &opts, &stop, tag).await {
                        Ended::Closed => {}
                        Ended::Handoff(io) => hyper_conn(&builder, io, handler, (tagged, false), graceful).await,
                    }
                });
            }
            () = &mut shutdown => break,
        }
    }
    drop(listener);
    tracing::info!(
        grace_secs = grace.as_secs_f64(),
        "shutting down: draining in-flight requests"
    );
    stop.cancel();
    tracker.close();
    let drained = async {
        graceful.shutdown().await;
        tracker.wait().await;
    };
    tokio::select! {
        () = drained => tracing::info!("all connections closed"),
        () = tokio::time::sleep(grace) => tracing::warn!("grace period over; closing remaining connections"),
    }
}

/// Serve a connection on hyper (HTTP/1.1 with upgrades, or h2c), from its first bytes or from
/// where sluice's own path handed it over; `tls`: its requests carry [`ServedOverTls`].
async fn hyper_conn<I, H, F, B>(
    builder: &auto::Builder<TokioExecutor>,
    io: I,
    handler: H,
    (tagged, tls): ((PeerAddresses, IpAddr), bool),
    graceful: hyper_util::server::graceful::Watcher,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    H: Fn(Request<RequestBody>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<B>> + Send + 'static,
    B: Body<Data = bytes::Bytes> + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let service = service_fn(move |req: Request<Incoming>| {
        let mut req = req.map(RequestBody::Hyper);
        if tls {
            req.extensions_mut().insert(ServedOverTls);
        }
        tag_peer(&mut req, &tagged);
        let answer = handler(req);
        async move { Ok::<_, Infallible>(answer.await) }
    });
    let conn = builder.serve_connection_with_upgrades(TokioIo::new(io), service);
    if let Err(e) = graceful.watch(conn.into_owned()).await {
        tracing::debug!(error = %e, "connection ended with an error");
    }
}

/// One TLS connection: the handshake (bounded in time), then the same server as plain
/// connections, each request marked [`ServedOverTls`].
async fn serve_tls_conn<H, F, B>(
    acceptor: TlsAcceptor,
    stream: TcpStream,
    builder: Arc<auto::Builder<TokioExecutor>>,
    watcher: hyper_util::server::graceful::Watcher,
    handler: H,
    (slot, tagged): (
        Option<tokio::sync::OwnedSemaphorePermit>,
        (PeerAddresses, IpAddr),
    ),
) where
    H: Fn(Request<RequestBody>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<B>> + Send + 'static,
    B: Body<Data = bytes::Bytes> + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let _slot = slot;
    let stream = match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "TLS handshake failed");
            return;
        }
        Err(_) => {
            tracing::debug!("TLS handshake timed out");
            return;
        }
    };
    hyper_conn(&builder, stream, handler, (tagged, true), watcher).await;
}

/// Add the peer's address to a request while [`ConnLimits::peer_addresses`] is on, and always
/// to a request to its [`PeerAddresses::always_for`] path.
fn tag_peer<B>(req: &mut Request<B>, (switch, peer): &(PeerAddresses, IpAddr)) {
    if switch.tags(req.uri().path()) {
        req.extensions_mut().insert(PeerAddr(*peer));
    }
}

/// Wait until the connection's first bytes tell HTTP/1.1 from h2c (or it closed): hyper-util
/// reads them with no time limit of its own. `true`: h2c's preface.
async fn protocol_known(stream: &TcpStream) -> std::io::Result<bool> {
    let mut head = [0u8; H2_PREFACE.len()];
    loop {
        let n = stream.peek(&mut head).await?;
        if n == 0 || n == head.len() || head[..n] != H2_PREFACE[..n] {
            return Ok(head[..n] == *H2_PREFACE);
        }
        // A part of the preface: its data stays readable, so wait a moment before looking again.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// New connections per client address in the current second (a fixed window, cleared each
/// second, so it holds at most one second's addresses).
struct RateWindow {
    limit: u32,
    start: Instant,
    second: u64,
    seen: HashMap<IpAddr, u32>,
}

impl RateWindow {
    fn new(limit: u32) -> Self {
        Self {
            limit,
            start: Instant::now(),
            second: 0,
            seen: HashMap::new(),
        }
    }

    /// Count a connection from `ip`; false when it is over the limit.
    fn admit(&mut self, ip: IpAddr) -> bool {
        let now = self.start.elapsed().as_secs();
        if now != self.second {
            self.second = now;
            self.seen.clear();
        }
        let n = self.seen.entry(ip).or_insert(0);
        *n = n.saturating_add(1);
        *n <= self.limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::Full;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    const LOOPBACK: &str = "127.0.0.1:0";

    #[tokio::test]
    async fn workers_listen_on_one_port_and_a_held_port_is_refused() {
        let listeners = bind_workers(LOOPBACK.parse().unwrap(), 3).await.unwrap();
        assert_eq!(listeners.len(), 3);
        let addr = listeners[0].local_addr().unwrap();
        for l in &listeners {
            assert_eq!(l.local_addr().unwrap(), addr);
        }
        let again = bind_workers(addr, 2).await;
        assert!(again.is_err(), "a second server took a port in use");
    }

    /// One request on a fresh connection; the answer's body.
    async fn get(addr: SocketAddr) -> String {
        let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
        conn.write_all(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut out = String::new();
        conn.read_to_string(&mut out).await.unwrap();
        out.rsplit("\r\n\r\n").next().unwrap_or_default().to_owned()
    }

    #[tokio::test]
    async fn http1_and_h2c_share_the_port() {
        let listener = TcpListener::bind(LOOPBACK).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let handler = |req: Request<RequestBody>| async move {
            Response::new(Full::new(bytes::Bytes::from(format!(
                "{:?}",
                req.version()
            ))))
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve_with(
            listener,
            handler,
            async {
                let _ = stopped.await;
            },
            Duration::from_secs(1),
        ));
        assert_eq!(get(addr).await, "HTTP/1.1");

        let conn = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (mut send, h2) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(conn))
                .await
                .unwrap();
        tokio::spawn(h2);
        let req = Request::get(format!("http://{addr}/"))
            .body(http_body_util::Empty::<bytes::Bytes>::new())
            .unwrap();
        let resp = send.send_request(req).await.unwrap();
        let body = http_body_util::BodyExt::collect(resp.into_body())
            .await
            .unwrap();
        assert_eq!(body.to_bytes(), "HTTP/2.0");

        // A client that sends one byte at a time is still told apart.
        let mut slow = tokio::net::TcpStream::connect(addr).await.unwrap();
        slow.write_all(b"P").await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        slow.write_all(
            b"OST / HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
        )
        .await
        .unwrap();
        let mut out = String::new();
        slow.read_to_string(&mut out).await.unwrap();
        assert!(out.ends_with("HTTP/1.1"), "{out}");

        stop.send(()).unwrap();
        server.await.unwrap();
    }

    #[tokio::test]
    async fn each_worker_serves_on_its_own_thread_until_shutdown() {
        let listeners = bind_workers(LOOPBACK.parse().unwrap(), 2).await.unwrap();
        let addr = listeners[0].local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let handler = |_req: Request<RequestBody>| async {
            let who = crate::client::worker_index().map_or("none".to_owned(), |i| i.to_string());
            Response::new(Full::new(bytes::Bytes::from(who)))
        };
        let server = tokio::spawn(serve_threads(
            listeners,
            None,
            handler,
            async {
                let _ = stopped.await;
            },
            Duration::from_secs(1),
            || async {},
            ConnLimits::default(),
        ));
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..40 {
            seen.insert(get(addr).await);
        }
        assert!(
            seen.iter().all(|w| w == "0" || w == "1"),
            "answered off a worker thread: {seen:?}"
        );
        stop.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(5), server)
            .await
            .expect("workers ended")
            .unwrap()
            .unwrap();
        assert!(tokio::net::TcpStream::connect(addr).await.is_err());
    }
}
