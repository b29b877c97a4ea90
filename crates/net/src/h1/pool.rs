//! Kept-alive connections of sluice's own HTTP/1.1 client, one pool per server worker (as
//! hyper-util's pools are), so a connection is only ever used on the thread that opened it.
//! The pool is a short list searched from its newest end: a worker talks to a handful of
//! upstreams, so no key is hashed.

use std::sync::Mutex;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use http::Uri;
use tokio::net::TcpStream;

use super::framing::Framing;
use super::Error;

/// How long an idle connection is kept (hyper-util's pools keep them as long).
const IDLE_FOR: Duration = Duration::from_secs(90);

/// TCP keep-alive on upstream connections (as the hyper-util connector sets it).
const TCP_KEEPALIVE: Duration = Duration::from_secs(60);

/// Which upstream a connection goes to: host and port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Key {
    host: http::uri::Authority,
    port: u16,
}

impl Key {
    /// The key of an `http://` URI (port 80 unless it names one).
    pub(crate) fn of(uri: &Uri) -> Option<Self> {
        let host = uri.authority()?.clone();
        let port = uri.port_u16().unwrap_or(80);
        Some(Self { host, port })
    }
}

/// An open connection to an upstream, what has been read from it but not yet used, and where
/// the answer being read on it is. Boxed once when it opens, so that the answer body that owns
/// it while a request runs is a pointer wide.
#[derive(Debug)]
pub(crate) struct Conn {
    pub stream: TcpStream,
    pub buf: BytesMut,
    /// The upstream it goes to (its pool's key).
    pub key: Key,
    /// How the current answer's body ends.
    pub framing: Framing,
    /// Whether it can carry another request after the current answer.
    pub reusable: bool,
    /// The room the next read of the current answer's body asks for.
    pub read_size: usize,
}

impl Conn {
    /// Open a connection to `key`'s host (every address it resolves to, in turn), within
    /// `timeout` for each.
    pub(crate) async fn open(key: &Key, timeout: Duration) -> Result<Box<Self>, Error> {
        let host = key.host.host();
        let addrs =
            tokio::net::lookup_host((host.trim_start_matches('[').trim_end_matches(']'), key.port))
                .await
                .map_err(Error::Connect)?;
        let mut last = None;
        for addr in addrs {
            match tokio::time::timeout(timeout, TcpStream::connect(addr)).await {
                Ok(Ok(stream)) => {
                    stream.set_nodelay(true).map_err(Error::Connect)?;
                    let keepalive = socket2::TcpKeepalive::new().with_time(TCP_KEEPALIVE);
                    // Keep-alive is a nicety: a socket that refuses it still works.
                    let _ = socket2::SockRef::from(&stream).set_tcp_keepalive(&keepalive);
                    return Ok(Box::new(Self {
                        stream,
                        buf: BytesMut::new(),
                        key: key.clone(),
                        framing: Framing::Empty,
                        reusable: false,
                        read_size: 0,
                    }));
                }
                Ok(Err(e)) => last = Some(e),
                Err(_) => {
                    last = Some(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "connect timed out",
                    ))
                }
            }
        }
        Err(Error::Connect(last.unwrap_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "the host resolved to no address",
            )
        })))
    }

    /// Whether the connection still looks open: the upstream has sent nothing (an idle
    /// connection's only news is its close). Costs no system call unless the socket has news.
    fn is_open(&self) -> bool {
        let mut cx = Context::from_waker(Waker::noop());
        match self.stream.poll_read_ready(&mut cx) {
            Poll::Pending => true,
            Poll::Ready(Err(_)) => false,
            Poll::Ready(Ok(())) => {
                let mut probe = [0u8; 1];
                matches!(self.stream.try_read(&mut probe), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
            }
        }
    }
}

/// One worker's idle connections.
#[derive(Debug)]
pub(crate) struct Pool {
    idle: Mutex<Vec<(Instant, Box<Conn>)>>,
    /// The most idle connections kept per upstream.
    max_idle: usize,
}

impl Pool {
    /// An empty pool keeping at most `max_idle` idle connections per upstream.
    pub(crate) fn new(max_idle: usize) -> Self {
        Self {
            idle: Mutex::new(Vec::new()),
            max_idle,
        }
    }

    fn idle(&self) -> std::sync::MutexGuard<'_, Vec<(Instant, Box<Conn>)>> {
        match self.idle.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// The most recently used idle connection to `key` that is still open, if any.
    pub(crate) fn checkout(&self, key: &Key) -> Option<Box<Conn>> {
        let mut idle = self.idle();
        let now = Instant::now();
        while let Some(i) = idle.iter().rposition(|(_, c)| c.key == *key) {
            let (since, conn) = idle.remove(i);
            if now.duration_since(since) < IDLE_FOR && conn.is_open() {
                return Some(conn);
            }
        }
        None
    }

    /// Keep `conn` for the next request to its upstream; the oldest to that upstream goes past the
    /// limit, and any kept past their time go too.
    pub(crate) fn put(&self, mut conn: Box<Conn>) {
        // An idle connection keeps a small read buffer (never shared: answers are copied out
        // of it), so the next answer is read without allocating; a large one goes.
        if conn.buf.capacity() > super::framing::COPY_MAX {
            conn.buf = BytesMut::new();
        }
        let now = Instant::now();
        let mut idle = self.idle();
        // Kept in the order they were put, so the first is the oldest.
        if idle
            .first()
            .is_some_and(|(since, _)| now.duration_since(*since) >= IDLE_FOR)
        {
            idle.retain(|(since, _)| now.duration_since(*since) < IDLE_FOR);
        }
        if idle.len() >= self.max_idle
            && idle.iter().filter(|(_, c)| c.key == conn.key).count() >= self.max_idle
        {
            if let Some(oldest) = idle.iter().position(|(_, c)| c.key == conn.key) {
                idle.remove(oldest);
            }
        }
        idle.push((now, conn));
    }

    /// Idle connections kept now (for tests and the pool's own bound).
    #[cfg(test)]
    pub(crate) fn idle_count(&self) -> usize {
        self.idle().len()
    }
}
