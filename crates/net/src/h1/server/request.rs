//! A request head, read by `httparse` and taken on sluice's own path only when nothing about
//! its framing is in doubt: HTTP/1.1, an origin-form target, at most one plain decimal
//! `Content-Length` (no `Transfer-Encoding`), no `Upgrade` or `Expect`, within the limits.
//! Anything else, malformed or merely unusual, is handed to hyper with its bytes untouched,
//! so every refusal (400, 431, ...) and every rarer feature (chunked uploads, upgrades,
//! `100-continue`, HTTP/1.0) is hyper's, as before. What is accepted here is a subset of what
//! hyper accepts, read the same way: two parsers never disagree on where a request ends.

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue};
use http::{HeaderMap, Method, Uri};

/// The most header fields a request may have on this path (more: hyper's, which answers 431
/// past `max_headers`).
pub(crate) const MAX_HEADERS: usize = 128;

/// The longest `Content-Length` value read here (19 digits fit in a u64).
const MAX_LENGTH_DIGITS: usize = 19;

/// What the front of the read buffer holds. Large (a head's header places inline) and kept
/// so: it lives on the stack for one request, where boxing it would cost an allocation each.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub(crate) enum Parsed {
    /// Not a whole head yet: read more.
    Partial,
    /// Not for this path: hand the connection, bytes and all, to hyper.
    Handoff,
    /// A head this path serves.
    Head(Checked),
}

/// A head that passed, before its bytes are taken off the buffer: where its parts sit, so
/// that they are not parsed twice.
#[derive(Debug)]
pub(crate) struct Checked {
    /// Bytes of the head.
    pub len: usize,
    /// The body's length (`Content-Length`, else 0).
    pub body: usize,
    /// The client asked to close the connection after this request.
    pub close: bool,
    method: (usize, usize),
    path: (usize, usize),
    places: Places,
}

/// A request ready for the handler.
#[derive(Debug)]
pub(crate) struct Head {
    pub method: Method,
    pub uri: Uri,
    pub headers: HeaderMap,
}

/// Where a header's name and value sit in the head.
type Places = smallvec::SmallVec<[(usize, usize, usize, usize); 32]>;

/// Look at the front of `buf` (nothing is taken off it). `max_headers` and `max_head` are the
/// connection limits; `max_body` the largest body this path reads before calling the handler.
pub(crate) fn check(buf: &[u8], max_headers: usize, max_head: usize, max_body: usize) -> Parsed {
    let mut slots =
        [const { std::mem::MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut []);
    let len = match httparse::ParserConfig::default()
        .parse_request_with_uninit_headers(&mut req, buf, &mut slots)
    {
        Ok(httparse::Status::Complete(n)) if n <= max_head => n,
        Ok(httparse::Status::Partial) if buf.len() < max_head => return Parsed::Partial,
        _ => return Parsed::Handoff,
    };
    if req.version != Some(1)
        || req.headers.len() > max_headers
        || !req.path.is_some_and(|p| p.starts_with('/'))
        || req.method.is_none_or(|m| m == "CONNECT")
    {
        return Parsed::Handoff;
    }
    let mut body = None;
    let mut close = false;
    for h in req.headers.iter() {
        let name = h.name.as_bytes();
        if name.eq_ignore_ascii_case(b"content-length") {
            match (body, length(h.value)) {
                (None, Some(n)) => body = Some(n),
                _ => return Parsed::Handoff,
            }
        } else if name.eq_ignore_ascii_case(b"transfer-encoding")
            || name.eq_ignore_ascii_case(b"upgrade")
            || name.eq_ignore_ascii_case(b"expect")
        {
            return Parsed::Handoff;
        } else if name.eq_ignore_ascii_case(b"connection") {
            for token in h.value.split(|&b| b == b',') {
                let token = token.trim_ascii();
                if token.eq_ignore_ascii_case(b"close") {
                    close = true;
                } else if token.eq_ignore_ascii_case(b"upgrade") {
                    return Parsed::Handoff;
                }
            }
        }
    }
    let body = body.unwrap_or(0);
    if body > max_body {
        return Parsed::Handoff;
    }
    let base = buf.as_ptr() as usize;
    let span = |s: &[u8]| {
        let at = s.as_ptr() as usize - base;
        (at, at + s.len())
    };
    let (Some(method), Some(path)) = (req.method, req.path) else {
        return Parsed::Handoff;
    };
    Parsed::Head(Checked {
        len,
        body,
        close,
        method: span(method.as_bytes()),
        path: span(path.as_bytes()),
        places: req
            .headers
            .iter()
            .map(|h| {
                let (n, v) = (span(h.name.as_bytes()), span(h.value));
                (n.0, n.1, v.0, v.1)
            })
            .collect(),
    })
}

/// A `Content-Length` value this path takes: decimal digits only (no sign, space, list or
/// leading `+`), small enough for a usize.
fn length(v: &[u8]) -> Option<usize> {
    if v.is_empty() || v.len() > MAX_LENGTH_DIGITS || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}

/// Build a checked head's request parts out of `head` (the head's bytes first), its header
/// values sharing those bytes. `None` (rare: a name or value `http` refuses that `httparse`
/// let through): the connection goes to hyper, whose answer that is.
pub(crate) fn build(head: &Bytes, c: &Checked) -> Option<Head> {
    let method = Method::from_bytes(&head[c.method.0..c.method.1]).ok()?;
    let uri = Uri::from_maybe_shared(head.slice(c.path.0..c.path.1)).ok()?;
    let mut headers = HeaderMap::with_capacity(c.places.len());
    for &(ns, ne, vs, ve) in &c.places {
        let name = HeaderName::from_bytes(&head[ns..ne]).ok()?;
        let value = HeaderValue::from_maybe_shared(head.slice(vs..ve)).ok()?;
        headers.append(name, value);
    }
    Some(Head {
        method,
        uri,
        headers,
    })
}
