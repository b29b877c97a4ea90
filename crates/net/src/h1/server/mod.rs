//! sluice's own HTTP/1.1 server connection (issue 44's engine spike, the client side), used
//! for plain-TCP HTTP/1.1 in place of hyper's server connection where it can be.
//!
//! Why: hyper's server connection keeps a 16 KiB read and an 8 KiB write buffer for the
//! connection's life, a held stream's too, and spends ~13k instructions a request. Here a
//! request's head is parsed by `httparse` and copied out with its body (known length, already
//! arrived) in one allocation that header values and body share, the answer's head and the body
//! frames that are ready go out in one write, and the connection keeps one small read buffer,
//! never shared, so reused for good (a shared one churned allocator pages under concurrency:
//! docs/benchmarks.md, "The engine, client side"). 1,000 held streams: 55 → 43 MB.
//!
//! What this path takes is narrow on purpose ([`request`]): anything else — a malformed or
//! oversized head, chunked or large or slow uploads, `Expect`, upgrades, HTTP/1.0 — hands the
//! connection with the bytes read so far to hyper ([`Rewind`]), which serves it from there as
//! it served every connection before. HTTP/2, h2c and TLS stay on hyper.

mod body;
mod request;
mod response;
mod rewind;

#[cfg(test)]
mod tests;

/// The fuzz target over the request check (fuzz/README.md); not an API.
#[doc(hidden)]
pub mod fuzz;

use std::future::Future;
use std::io::IoSlice;
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use bytes::{Buf as _, Bytes, BytesMut};
use http::{Method, Request, Response};
use http_body::Body;
use http_body_util::BodyExt as _;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub use body::RequestBody;
pub use rewind::Rewind;

use request::Parsed;
use response::Framing;

/// The largest request body this path reads before calling the handler (larger: hyper's,
/// which streams it).
pub const MAX_BODY: usize = 64 * 1024;

/// How long the rest of a body may take to arrive after its head before the request goes to
/// hyper (whose body reading the handler bounds with its own timeout and limit, as before).
pub const BODY_WAIT: Duration = Duration::from_millis(250);

/// Bytes read at a time.
const READ_CHUNK: usize = 4 * 1024;

/// A read or write buffer kept between requests is let go of above this size.
const KEEP_BUF: usize = 16 * 1024;

/// Body frames up to this size are copied behind their chunk header into one write; larger
/// ones are written from where they are.
const COPY_FRAME: usize = 8 * 1024;

/// Gathered frames are written once they reach this many bytes, ready or not.
const FLUSH_AT: usize = 32 * 1024;

/// The limits a connection is served under (`ConnLimits`' share of them).
#[derive(Debug, Clone)]
pub struct Options {
    /// Longest wait for a whole request head, idle time before it included.
    pub header_read_timeout: Duration,
    /// Most header fields of a request.
    pub max_headers: usize,
    /// Most bytes of a request head.
    pub max_head_bytes: usize,
}

/// How a connection's time on this path ended.
#[derive(Debug)]
pub enum Ended {
    /// Closed (by either side, a timeout, an error, or shutdown).
    Closed,
    /// Declined: hyper serves the connection from these bytes on.
    Handoff(Rewind),
}

/// Serve HTTP/1.1 requests on `io` until it closes, `stop` is cancelled (the answer in
/// progress is finished first), or a request is for hyper. `tag` adds what the accept loop
/// knows to each request (the peer's address).
pub async fn serve<H, F, B>(
    io: TcpStream,
    handler: &H,
    opts: &Options,
    stop: &CancellationToken,
    tag: impl Fn(&mut Request<RequestBody>),
) -> Ended
where
    H: Fn(Request<RequestBody>) -> F,
    F: Future<Output = Response<B>>,
    B: Body<Data = Bytes>,
{
    let mut conn = Conn {
        io,
        buf: BytesMut::new(),
        out: Vec::new(),
    };
    loop {
        let checked = match conn.read_head(opts, stop).await {
            Next::Head(c) => c,
            Next::Closed => return Ended::Closed,
            Next::Handoff => return conn.handoff(),
        };
        if !conn.read_body(checked.len + checked.body).await {
            return conn.handoff();
        }
        // The request's bytes are copied out (one small allocation) rather than shared: a
        // read buffer shared with a request that outlives it is reallocated for the next one
        // and freed with the request, and with many connections that churn emptied whole
        // allocator pages (a `madvise` each, then page faults): 1,254 of them per 5,000
        // requests at c=64, 25–40 % more CPU per request than hyper. Unshared, the read
        // buffer is reused for good.
        let whole = Bytes::copy_from_slice(&conn.buf[..checked.len + checked.body]);
        let Some(head) = request::build(&whole, &checked) else {
            return conn.handoff();
        };
        conn.buf.advance(checked.len + checked.body);
        let body = whole.slice(checked.len..);
        let head_request = head.method == Method::HEAD;
        let mut req = Request::new(RequestBody::Whole((!body.is_empty()).then_some(body)));
        *req.method_mut() = head.method;
        *req.uri_mut() = head.uri;
        *req.headers_mut() = head.headers;
        tag(&mut req);
        let Some(answer) = conn.watching(handler(req), opts.max_head_bytes).await else {
            return Ended::Closed;
        };
        let close = checked.close || stop.is_cancelled() || response::says_close(answer.headers());
        if !conn
            .answer(answer, (head_request, close), opts.max_head_bytes)
            .await
            || close
        {
            let _ = conn.io.shutdown().await;
            return Ended::Closed;
        }
        if conn.out.capacity() > KEEP_BUF {
            conn.out = Vec::new();
        }
        // The read buffer is kept (once the request's head and body are dropped its space is
        // reused without allocating), unless a large body grew it.
        if conn.buf.is_empty() && conn.buf.capacity() > KEEP_BUF {
            conn.buf = BytesMut::new();
        }
    }
}

/// What reading a head came to (large for the reason [`Parsed`] is).
#[allow(clippy::large_enum_variant)]
enum Next {
    Head(request::Checked),
    Closed,
    Handoff,
}

struct Conn {
    io: TcpStream,
    /// Bytes read and not yet taken: the next request's, or a pipelined one's.
    buf: BytesMut,
    /// The answer's head (and small frames), reused between answers.
    out: Vec<u8>,
}

impl Conn {
    fn handoff(self) -> Ended {
        Ended::Handoff(Rewind::new(self.buf.freeze(), self.io))
    }

    /// Read until the buffer holds a whole head (or it is not for this path), within the
    /// header read timeout; an idle connection closes when `stop` is cancelled.
    async fn read_head(&mut self, opts: &Options, stop: &CancellationToken) -> Next {
        let mut deadline = None;
        loop {
            if !self.buf.is_empty() {
                match request::check(&self.buf, opts.max_headers, opts.max_head_bytes, MAX_BODY) {
                    Parsed::Head(c) => return Next::Head(c),
                    Parsed::Handoff => return Next::Handoff,
                    Parsed::Partial => {}
                }
            }
            let until = *deadline.get_or_insert_with(|| Instant::now() + opts.header_read_timeout);
            self.buf.reserve(READ_CHUNK);
            tokio::select! {
                biased;
                read = self.io.read_buf(&mut self.buf) => match read {
                    Ok(0) | Err(_) => return Next::Closed,
                    Ok(_) => {}
                },
                () = stop.cancelled(), if self.buf.is_empty() => return Next::Closed,
                () = tokio::time::sleep_until(until) => return Next::Closed,
            }
        }
    }

    /// Read until `want` bytes are buffered; `false` if they do not come within
    /// [`BODY_WAIT`] (the request is then hyper's) or the connection ends (hyper finds that
    /// out too).
    async fn read_body(&mut self, want: usize) -> bool {
        if self.buf.len() >= want {
            return true;
        }
        self.buf.reserve(want - self.buf.len());
        let until = Instant::now() + BODY_WAIT;
        while self.buf.len() < want {
            tokio::select! {
                read = self.io.read_buf(&mut self.buf) => match read {
                    Ok(0) | Err(_) => return false,
                    Ok(_) => {}
                },
                () = tokio::time::sleep_until(until) => return false,
            }
        }
        true
    }

    /// Run `work` while watching the connection: a client that closes it (or breaks it)
    /// cancels the work, as hyper does; bytes it sends meanwhile (a pipelined request) are
    /// kept, up to `cap`.
    async fn watching<T>(&mut self, work: impl Future<Output = T>, cap: usize) -> Option<T> {
        let mut work = pin!(work);
        let mut watch = self.buf.len() < cap;
        loop {
            tokio::select! {
                biased;
                out = &mut work => return Some(out),
                ready = self.io.readable(), if watch => {
                    if ready.is_err() {
                        return None;
                    }
                    self.buf.reserve(512);
                    match self.io.try_read_buf(&mut self.buf) {
                        Ok(0) => return None,
                        Ok(_) => watch = self.buf.len() < cap,
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                        Err(_) => return None,
                    }
                }
            }
        }
    }

    /// Write an answer: its head, then its body in its framing, watching the connection while
    /// the body waits (bytes it sends are kept up to `cap`). `false`: the connection cannot
    /// carry another request (the client went away, a write failed, or the body broke off or
    /// overran its length).
    async fn answer<B: Body<Data = Bytes>>(
        &mut self,
        answer: Response<B>,
        (head_request, close): (bool, bool),
        cap: usize,
    ) -> bool {
        let (parts, body) = answer.into_parts();
        let mut body = pin!(body);
        let (framing, length) = response::framing(
            head_request,
            parts.status,
            &parts.headers,
            body.size_hint().exact(),
        );
        self.out.clear();
        response::encode_head(
            &mut self.out,
            parts.status,
            &parts.headers,
            (framing, length),
            close,
        );
        if framing == Framing::None {
            return self.io.write_all(&self.out).await.is_ok();
        }
        let mut left = match framing {
            Framing::Length(n) => Some(n),
            _ => None,
        };
        // Frames that are ready are gathered behind the head and written together (a whole
        // JSON answer goes out with its head in one write); when the body has nothing ready,
        // what is gathered goes out, so a stream's head and events reach the client at once.
        let mut wait = false;
        loop {
            let step = if wait {
                match self.watching(body.frame(), cap).await {
                    Some(f) => Step::of(f),
                    None => return false,
                }
            } else {
                let polled =
                    std::future::poll_fn(|cx| Poll::Ready(body.as_mut().poll_frame(cx))).await;
                match polled {
                    Poll::Ready(f) => Step::of(f),
                    Poll::Pending => Step::NotYet,
                }
            };
            wait = false;
            let data = match step {
                Step::Data(d) => d,
                Step::Skip => continue,
                Step::End => break,
                Step::NotYet => {
                    if !self.flush_out().await {
                        return false;
                    }
                    wait = true;
                    continue;
                }
                Step::Broken => {
                    // The body broke off: the answer cannot be finished, so the client must
                    // see the connection end rather than a complete-looking answer.
                    let _ = self.flush_out().await;
                    return false;
                }
            };
            if let Some(l) = &mut left {
                let n = data.len() as u64;
                if n > *l {
                    // More than the length said: what fits, then no reuse.
                    let fit = data.slice(..usize::try_from(*l).unwrap_or(0));
                    let _ = self.add_data(fit, Framing::Length(0)).await;
                    let _ = self.flush_out().await;
                    return false;
                }
                *l -= n;
            }
            if !self.add_data(data, framing).await {
                return false;
            }
            if body.is_end_stream() {
                break;
            }
        }
        if framing == Framing::Chunked {
            self.out.extend_from_slice(b"0\r\n\r\n");
        }
        self.flush_out().await && left.is_none_or(|l| l == 0)
    }

    /// Add a body frame in its framing behind what `out` holds: copied when small (written
    /// once `out` is large), else written with it at once in one vectored write.
    async fn add_data(&mut self, data: Bytes, framing: Framing) -> bool {
        let chunked = framing == Framing::Chunked;
        if chunked {
            response::chunk_size(&mut self.out, data.len());
        }
        if data.len() <= COPY_FRAME {
            self.out.extend_from_slice(&data);
            if chunked {
                self.out.extend_from_slice(b"\r\n");
            }
            if self.out.len() >= FLUSH_AT {
                return self.flush_out().await;
            }
            return true;
        }
        let tail: &[u8] = if chunked { b"\r\n" } else { b"" };
        let ok = write_all_vectored(&mut self.io, &mut [&self.out[..], &data[..], tail]).await;
        self.out.clear();
        ok
    }

    /// Write what `out` holds.
    async fn flush_out(&mut self) -> bool {
        if self.out.is_empty() {
            return true;
        }
        let ok = self.io.write_all(&self.out).await.is_ok();
        self.out.clear();
        ok
    }
}

/// A body frame as the writer needs it: built at once from what the body gave, so that
/// nothing of the frame (whose error type need not be `Send`) is held across a write.
enum Step {
    Data(Bytes),
    /// A frame with nothing to write (trailers, an empty chunk).
    Skip,
    End,
    /// The body failed.
    Broken,
    /// Nothing yet: the body waits (a stream).
    NotYet,
}

impl Step {
    fn of<E>(frame: Option<Result<http_body::Frame<Bytes>, E>>) -> Self {
        match frame {
            None => Self::End,
            Some(Err(_)) => Self::Broken,
            Some(Ok(f)) => match f.into_data() {
                Ok(d) if !d.is_empty() => Self::Data(d),
                _ => Self::Skip,
            },
        }
    }
}

/// Write every byte of `parts`, in as few system calls as the socket takes them.
async fn write_all_vectored(io: &mut TcpStream, parts: &mut [&[u8]]) -> bool {
    let mut first = 0;
    while first < parts.len() {
        if parts[first].is_empty() {
            first += 1;
            continue;
        }
        let slices: smallvec::SmallVec<[IoSlice<'_>; 4]> =
            parts[first..].iter().map(|p| IoSlice::new(p)).collect();
        let mut n = match io.write_vectored(&slices).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => n,
        };
        while n > 0 && first < parts.len() {
            let take = n.min(parts[first].len());
            parts[first] = &parts[first][take..];
            n -= take;
            if parts[first].is_empty() {
                first += 1;
            }
        }
    }
    true
}
