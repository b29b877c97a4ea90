//! sluice's own HTTP/1.1 client for plain `http://` upstreams (self-hosted servers, the mock),
//! used instead of hyper-util's where it can be (issue 44's engine spike, the upstream side).
//!
//! Why: per proxied request hyper-util's client spends ~12k instructions (its pool hashes the
//! key, a dispatch task per connection with a request channel, the request encoded through
//! generic buffers), and a held stream keeps that task, its channel and two 8 KiB buffers. Here
//! a request is one head written with the body's segments in one vectored write, the answer's
//! head is parsed by `httparse` in place (header values share its bytes), and the body is
//! decoded out of the read buffer without copying. A connection has no task of its own: the
//! answer's body owns it while it is read and puts it back in its worker's pool when the body
//! ends cleanly. While a stream waits for its next event, it holds no read buffer.
//!
//! HTTPS, HTTP/2 (negotiated or prior knowledge), client-chosen upstreams (their SSRF-checked
//! resolver) and bodies of unknown length stay on hyper-util's client ([`crate::client`]).

mod framing;
mod head;
mod pool;
pub mod server;

/// The fuzz target over the answer parser and body framing (fuzz/README.md); not an API.
#[doc(hidden)]
pub mod fuzz;

use std::io::IoSlice;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::{Method, Request, Response, Uri};
use http_body::{Body, Frame, SizeHint};
use tokio::io::AsyncWriteExt as _;
use tokio::net::TcpStream;

pub use framing::FramingError;
pub(crate) use pool::Pool;

use framing::Step;
use head::{encode_request, parse_response};
use pool::{Conn, Key};

/// Why a request on sluice's own HTTP/1.1 client failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No connection could be opened (resolution, refusal, the connect timeout).
    #[error("connection failed: {0}")]
    Connect(std::io::Error),
    /// Reading or writing the connection failed.
    #[error("connection error: {0}")]
    Io(#[from] std::io::Error),
    /// The upstream closed the connection before its answer's head was whole.
    #[error("the upstream closed the connection before answering")]
    Closed,
    /// The answer's head is not HTTP/1.x.
    #[error("the upstream's answer is not valid HTTP/1.1: {0}")]
    Parse(httparse::Error),
    /// The answer's head is larger than sluice reads.
    #[error("the upstream's answer head is too large")]
    HeadTooLarge,
    /// The answer has more headers than sluice reads.
    #[error("the upstream's answer has too many headers")]
    TooManyHeaders,
    /// The answer's body is framed in a way sluice refuses.
    #[error("the upstream's answer is framed badly: {0}")]
    Framing(&'static str),
    /// The body broke its framing.
    #[error("the upstream's answer body is framed badly: {0}")]
    Body(#[from] FramingError),
}

impl Error {
    /// Whether the failure was in opening the connection (nothing was sent).
    pub fn is_connect(&self) -> bool {
        matches!(self, Self::Connect(_))
    }
}

/// Whether this request can go over sluice's own client: `http://` with a body of known length.
pub(crate) fn fits(uri: &Uri) -> bool {
    uri.scheme() == Some(&http::uri::Scheme::HTTP) && uri.host().is_some()
}

/// Send `req` (its body `segments`, `len` bytes in all) over a pooled connection of `pool`,
/// or a new one. A connection taken from the pool that turns out to be closed when the request
/// is written is replaced once by a new connection (nothing reached the upstream).
pub(crate) async fn send(
    pool: Arc<Pool>,
    connect_timeout: Duration,
    req: Request<()>,
    segments: Vec<Bytes>,
    len: u64,
) -> Result<Response<AnswerBody>, Error> {
    let (parts, ()) = req.into_parts();
    let key = Key::of(&parts.uri).ok_or(Error::Framing("the URI has no host"))?;
    let mut head = Vec::with_capacity(256 + parts.headers.len() * 64);
    encode_request(&parts.method, &parts.uri, &parts.headers, len, &mut head);
    // A kept connection the upstream had closed fails the write: nothing of the request was
    // taken, so a new connection carries it instead.
    let kept = match pool.checkout(&key) {
        Some(mut conn) => write(&mut conn.stream, &head, &segments)
            .await
            .is_ok()
            .then_some(conn),
        None => None,
    };
    let mut conn = match kept {
        Some(conn) => conn,
        None => {
            let mut fresh = Conn::open(&key, connect_timeout).await?;
            write(&mut fresh.stream, &head, &segments).await?;
            fresh
        }
    };
    drop(head);
    drop(segments);
    let head_request = parts.method == Method::HEAD;
    let answer = loop {
        if let Some(answer) = parse_response(&mut conn.buf, head_request)? {
            break answer;
        }
        conn.buf.reserve(READ_SIZE);
        let n = tokio::io::AsyncReadExt::read_buf(&mut conn.stream, &mut conn.buf).await?;
        if n == 0 {
            return Err(Error::Closed);
        }
    };
    conn.framing = answer.framing;
    conn.reusable = answer.reusable;
    conn.read_size = READ_SIZE;
    let mut body = AnswerBody {
        conn: Some(conn),
        pool,
    };
    // No body at all (204, 304, `HEAD`, a zero length): the connection is free already.
    if body
        .conn
        .as_ref()
        .is_some_and(|c| c.framing.exact() == Some(0))
    {
        body.finish();
    }
    let mut resp = Response::new(body);
    *resp.status_mut() = answer.status;
    *resp.headers_mut() = answer.headers;
    Ok(resp)
}

/// What a read asks room for at first: the size hyper starts with too.
const READ_SIZE: usize = 8 * 1024;
/// The most a read asks room for, once reads keep filling what they had.
const MAX_READ: usize = crate::server::MAX_CONN_BUF;

/// Write the head and the body's segments, as few writes as the socket takes.
async fn write(stream: &mut TcpStream, head: &[u8], segments: &[Bytes]) -> std::io::Result<()> {
    // Where the write is: `part` 0 is the head, then the segments; `at` bytes into it.
    let parts = segments.len() + 1;
    let part_at = |i: usize| if i == 0 { head } else { &segments[i - 1][..] };
    let (mut part, mut at) = (0usize, 0usize);
    while part < parts {
        let mut slices = [IoSlice::new(&[]); 8];
        let mut n = 0;
        for (i, slot) in (part..parts).zip(slices.iter_mut()) {
            let bytes = part_at(i);
            *slot = IoSlice::new(if i == part { &bytes[at..] } else { bytes });
            n += 1;
        }
        let mut wrote = stream.write_vectored(&slices[..n]).await?;
        if wrote == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        while part < parts && wrote > 0 {
            let left = part_at(part).len() - at;
            if wrote >= left {
                wrote -= left;
                part += 1;
                at = 0;
            } else {
                at += wrote;
                wrote = 0;
            }
        }
        // Empty parts are passed over.
        while part < parts && part_at(part).len() == at {
            part += 1;
            at = 0;
        }
    }
    Ok(())
}

/// An answer's body read off sluice's own connection. It owns the connection until the body
/// ends; a body that ends cleanly on a reusable connection puts it back in the pool, one
/// dropped before its end closes it.
pub struct AnswerBody {
    conn: Option<Box<Conn>>,
    pool: Arc<Pool>,
}

impl std::fmt::Debug for AnswerBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnswerBody")
            .field("framing", &self.conn.as_ref().map(|c| &c.framing))
            .finish_non_exhaustive()
    }
}

impl AnswerBody {
    /// The body has ended: the connection goes back to the pool when it can carry another
    /// request (nothing left over in its buffer).
    fn finish(&mut self) {
        if let Some(conn) = self.conn.take() {
            if conn.reusable && conn.buf.is_empty() {
                self.pool.put(conn);
            }
        }
    }
}

impl Body for AnswerBody {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        let this = self.get_mut();
        loop {
            let Some(conn) = this.conn.as_mut() else {
                return Poll::Ready(None);
            };
            let conn = &mut **conn;
            match conn.framing.decode(&mut conn.buf)? {
                Step::Data(data) => {
                    // A known length read to its end gives the connection back now: a reader
                    // that stops at `is_end_stream` does not poll again.
                    if conn.framing.exact() == Some(0) {
                        this.finish();
                    }
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                Step::End => {
                    this.finish();
                    return Poll::Ready(None);
                }
                Step::More => {}
            }
            if conn.stream.poll_read_ready(cx).is_pending() {
                // Waiting (a stream between events): hold no buffer meanwhile.
                if conn.buf.is_empty() && conn.buf.capacity() > 0 {
                    conn.buf = BytesMut::new();
                }
                return Poll::Pending;
            }
            if conn.buf.capacity() - conn.buf.len() < READ_SIZE / 8 {
                conn.buf.reserve(conn.read_size);
            }
            let room = conn.buf.capacity() - conn.buf.len();
            match conn.stream.try_read_buf(&mut conn.buf) {
                Ok(0) => {
                    // Cut short unless the framing ends at the close; never kept either way.
                    let end = conn.framing.at_close();
                    this.conn = None;
                    end?;
                    return Poll::Ready(None);
                }
                // A read that filled its room asks for twice as much next time (a large
                // answer in fewer reads), up to the most a head may take.
                Ok(n) if n == room => conn.read_size = (conn.read_size * 2).min(MAX_READ),
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => {
                    this.conn = None;
                    return Poll::Ready(Some(Err(Error::Io(e))));
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.conn.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        match self.conn.as_ref().map(|c| c.framing.exact()) {
            None => SizeHint::with_exact(0),
            Some(Some(n)) => SizeHint::with_exact(n),
            Some(None) => SizeHint::default(),
        }
    }
}

#[cfg(test)]
mod tests;
