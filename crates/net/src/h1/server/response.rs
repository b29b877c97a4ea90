//! An answer's head and body framing as sluice's own path writes them (RFC 9112 §6): a known
//! length as `content-length`, else `transfer-encoding: chunked`; no body for `HEAD`, 1xx,
//! 204 and 304. The head and a body that is already there go out in one write.

use std::cell::RefCell;
use std::time::{Duration, SystemTime};

use http::header::{CONNECTION, CONTENT_LENGTH, DATE, TRANSFER_ENCODING};
use http::{HeaderMap, StatusCode};

/// How the body is delimited on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    /// Nothing follows the head.
    None,
    /// This many bytes follow.
    Length(u64),
    /// Chunks follow, then `0\r\n\r\n`.
    Chunked,
}

/// The framing of an answer with this status, these headers and this body size, to a request
/// that was (or was not) `HEAD`. A length the handler wrote serves when the body does not say
/// its own; a body that says its size is believed over a header that disagrees.
pub(crate) fn framing(
    head_request: bool,
    status: StatusCode,
    headers: &HeaderMap,
    exact: Option<u64>,
) -> (Framing, Option<u64>) {
    // The handler's header is read only when the body does not know its size.
    let len = exact.or_else(|| {
        headers
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
    });
    if status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
    {
        return (Framing::None, None);
    }
    if head_request {
        // The length of the body a GET would have had, when known.
        return (Framing::None, len);
    }
    match len {
        Some(n) => (Framing::Length(n), Some(n)),
        None => (Framing::Chunked, None),
    }
}

/// Write the status line and headers into `out`: the handler's headers (less any framing
/// header of its own), `date` unless it set one, the framing, and `connection: close` when the
/// connection ends after this answer.
pub(crate) fn encode_head(
    out: &mut Vec<u8>,
    status: StatusCode,
    headers: &HeaderMap,
    (framing, length): (Framing, Option<u64>),
    close: bool,
) {
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(status.canonical_reason().unwrap_or("").as_bytes());
    out.extend_from_slice(b"\r\n");
    for (name, value) in headers {
        if name == CONTENT_LENGTH || name == TRANSFER_ENCODING || (close && name == CONNECTION) {
            continue;
        }
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if !headers.contains_key(DATE) {
        out.extend_from_slice(b"date: ");
        now(|d| out.extend_from_slice(d));
        out.extend_from_slice(b"\r\n");
    }
    match (framing, length) {
        (Framing::Chunked, _) => out.extend_from_slice(b"transfer-encoding: chunked\r\n"),
        (_, Some(n)) => {
            out.extend_from_slice(b"content-length: ");
            out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        (_, None) => {}
    }
    if close {
        out.extend_from_slice(b"connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// Whether the handler's answer asks for the connection to end after it (`connection:
/// close`), as hyper honours it.
pub(crate) fn says_close(headers: &HeaderMap) -> bool {
    headers.get_all(CONNECTION).iter().any(|v| {
        v.as_bytes()
            .split(|&b| b == b',')
            .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"close"))
    })
}

/// A chunk's size line (`<hex>\r\n`) into `out`.
pub(crate) fn chunk_size(out: &mut Vec<u8>, n: usize) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut digits = [0u8; 16];
    let mut i = digits.len();
    let mut v = n;
    loop {
        i -= 1;
        digits[i] = HEX[v & 0xf];
        v >>= 4;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
    out.extend_from_slice(b"\r\n");
}

thread_local! {
    /// The `date` value of the current second (formatted once a second per thread).
    static DATE_NOW: RefCell<(u64, [u8; 29])> = const { RefCell::new((u64::MAX, [0; 29])) };
}

/// Call `f` with the current time as an HTTP date.
fn now(f: impl FnOnce(&[u8])) {
    let t = SystemTime::now();
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs();
    DATE_NOW.with(|d| {
        let mut d = d.borrow_mut();
        if d.0 != secs {
            let text = httpdate::fmt_http_date(t);
            let n = text.len().min(29);
            d.1[..n].copy_from_slice(&text.as_bytes()[..n]);
            d.0 = secs;
        }
        f(&d.1);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framing_follows_rfc_9112() {
        let none = HeaderMap::new();
        let ok = StatusCode::OK;
        assert_eq!(
            framing(false, ok, &none, Some(5)),
            (Framing::Length(5), Some(5))
        );
        assert_eq!(framing(false, ok, &none, None), (Framing::Chunked, None));
        assert_eq!(framing(true, ok, &none, Some(5)), (Framing::None, Some(5)));
        assert_eq!(
            framing(false, StatusCode::NO_CONTENT, &none, Some(0)),
            (Framing::None, None)
        );
        assert_eq!(
            framing(false, StatusCode::NOT_MODIFIED, &none, None),
            (Framing::None, None)
        );
        let mut said = HeaderMap::new();
        said.insert(CONTENT_LENGTH, "7".parse().unwrap());
        assert_eq!(
            framing(false, ok, &said, None),
            (Framing::Length(7), Some(7))
        );
        assert_eq!(
            framing(false, ok, &said, Some(3)),
            (Framing::Length(3), Some(3))
        );
    }

    #[test]
    fn a_head_has_one_framing_header_and_a_date() {
        let mut h = HeaderMap::new();
        h.insert(CONTENT_LENGTH, "99".parse().unwrap());
        h.insert(TRANSFER_ENCODING, "gzip".parse().unwrap());
        h.insert("x-a", "b".parse().unwrap());
        let mut out = Vec::new();
        encode_head(
            &mut out,
            StatusCode::OK,
            &h,
            (Framing::Length(2), Some(2)),
            true,
        );
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.starts_with("HTTP/1.1 200 OK\r\nx-a: b\r\ndate: "),
            "{text}"
        );
        assert!(
            text.ends_with(" GMT\r\ncontent-length: 2\r\nconnection: close\r\n\r\n"),
            "{text}"
        );
        assert!(!text.contains("99") && !text.contains("gzip"), "{text}");
    }

    #[test]
    fn chunk_sizes_are_lowercase_hex() {
        for (n, s) in [
            (0, "0"),
            (1, "1"),
            (255, "ff"),
            (4096, "1000"),
            (usize::MAX, "ffffffffffffffff"),
        ] {
            let mut out = Vec::new();
            chunk_size(&mut out, n);
            assert_eq!(out, format!("{s}\r\n").into_bytes());
        }
    }
}
