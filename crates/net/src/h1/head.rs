//! The two heads sluice's own HTTP/1.1 client handles: the request head it writes (built in one
//! buffer, the body's exact length stated) and the answer head it reads (parsed by `httparse`,
//! the parser hyper uses, with the framing of the body decided here by RFC 9112's rules).

use bytes::{Bytes, BytesMut};
use http::header::{HeaderName, HeaderValue, CONNECTION, CONTENT_LENGTH, HOST, TRANSFER_ENCODING};
use http::{HeaderMap, Method, StatusCode, Uri, Version};

use super::framing::Framing;
use super::Error;

/// The most headers an answer may have; past it the answer is refused (as hyper's default).
pub(crate) const MAX_HEADERS: usize = crate::client::MAX_UPSTREAM_HEADERS;

/// The most bytes an answer's head may take (the same bound as hyper's read buffer).
pub(crate) const MAX_HEAD_BYTES: usize = crate::server::MAX_CONN_BUF;

/// Write the request head for `method uri` with `headers` and a body of `len` bytes into `out`.
/// The length is stated by sluice (a `content-length` or `transfer-encoding` among `headers` is
/// left out: the body's own length is the one that is true); `host` comes from the URI unless
/// `headers` has one.
pub(crate) fn encode_request(
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    len: u64,
    out: &mut Vec<u8>,
) {
    out.extend_from_slice(method.as_str().as_bytes());
    out.push(b' ');
    match uri.path_and_query() {
        Some(pq) if !pq.as_str().is_empty() => out.extend_from_slice(pq.as_str().as_bytes()),
        _ => out.push(b'/'),
    }
    out.extend_from_slice(b" HTTP/1.1\r\n");
    if !headers.contains_key(HOST) {
        if let Some(host) = uri.host() {
            out.extend_from_slice(b"host: ");
            out.extend_from_slice(host.as_bytes());
            if let Some(port) = uri.port_u16().filter(|&p| p != 80) {
                out.push(b':');
                out.extend_from_slice(itoa(u64::from(port), &mut [0; 20]));
            }
            out.extend_from_slice(b"\r\n");
        }
    }
    for (name, value) in headers {
        if name == CONTENT_LENGTH || name == TRANSFER_ENCODING {
            continue;
        }
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    // As hyper does: a body's length always for methods that carry one, otherwise only when
    // there is a body.
    let carries = !matches!(
        *method,
        Method::GET | Method::HEAD | Method::DELETE | Method::OPTIONS | Method::CONNECT
    );
    if len > 0 || carries {
        out.extend_from_slice(b"content-length: ");
        out.extend_from_slice(itoa(len, &mut [0; 20]));
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// `n` in decimal, written into `buf`.
fn itoa(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    &buf[i..]
}

/// An answer's head as sluice's client read it.
#[derive(Debug)]
pub(crate) struct Head {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub framing: Framing,
    /// Whether the connection may carry another request once this answer's body is read.
    pub reusable: bool,
}

/// Parse an answer head from the front of `buf`. `Ok(None)`: not all of it has arrived (more
/// must be read); the head's bytes are taken off `buf` once it is whole. Informational answers
/// (1xx other than 101) are skipped. `head_request`: the request was `HEAD`, so no body follows
/// whatever the head says.
pub(crate) fn parse_response(
    buf: &mut BytesMut,
    head_request: bool,
) -> Result<Option<Head>, Error> {
    loop {
        // Left uninitialised until parsed into: 3.2 KB not written per answer.
        let mut slots =
            [const { std::mem::MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
        let mut parsed = httparse::Response::new(&mut []);
        let n = match httparse::ParserConfig::default().parse_response_with_uninit_headers(
            &mut parsed,
            buf,
            &mut slots,
        ) {
            // A head is bounded however its bytes arrived: whole, or read by read.
            Ok(httparse::Status::Complete(n)) if n > MAX_HEAD_BYTES => {
                return Err(Error::HeadTooLarge)
            }
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) if buf.len() >= MAX_HEAD_BYTES => {
                return Err(Error::HeadTooLarge)
            }
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(httparse::Error::TooManyHeaders) => return Err(Error::TooManyHeaders),
            Err(e) => return Err(Error::Parse(e)),
        };
        let code = parsed.code.unwrap_or(0);
        let status =
            StatusCode::from_u16(code).map_err(|_| Error::Parse(httparse::Error::Status))?;
        let version = match parsed.version {
            Some(1) => Version::HTTP_11,
            _ => Version::HTTP_10,
        };
        if status.is_informational() {
            if status == StatusCode::SWITCHING_PROTOCOLS {
                return Err(Error::Framing(
                    "101 Switching Protocols to a request that asked none",
                ));
            }
            let _ = buf.split_to(n);
            continue;
        }
        // Where each header sits in the head, so that its value can share the head's bytes.
        let base = buf.as_ptr() as usize;
        let places: smallvec::SmallVec<[(usize, usize, usize, usize); 40]> = parsed
            .headers
            .iter()
            .map(|h| {
                let name = h.name.as_ptr() as usize - base;
                let value = h.value.as_ptr() as usize - base;
                (name, name + h.name.len(), value, value + h.value.len())
            })
            .collect();
        let head: Bytes = super::framing::take(buf, n);
        let mut headers = HeaderMap::with_capacity(places.len());
        for &(ns, ne, vs, ve) in &places {
            let name = HeaderName::from_bytes(&head[ns..ne])
                .map_err(|_| Error::Parse(httparse::Error::HeaderName))?;
            let value = HeaderValue::from_maybe_shared(head.slice(vs..ve))
                .map_err(|_| Error::Parse(httparse::Error::HeaderValue))?;
            headers.append(name, value);
        }
        return framing(status, version, headers, head_request).map(Some);
    }
}

/// RFC 9112 §6.3: how the body of an answer with this status and these headers is delimited,
/// and whether the connection can be used again after it.
fn framing(
    status: StatusCode,
    version: Version,
    headers: HeaderMap,
    head_request: bool,
) -> Result<Head, Error> {
    let coded = headers.contains_key(TRANSFER_ENCODING);
    // A length beside a transfer coding is ignored, and the connection not trusted again,
    // whatever the status: where one answer ends is in doubt.
    let mut reusable = version == Version::HTTP_11
        && !has_token(&headers, CONNECTION, "close")
        && !(coded && headers.contains_key(CONTENT_LENGTH));
    let framing = if head_request {
        Framing::Empty
    } else if status == StatusCode::NO_CONTENT || status == StatusCode::NOT_MODIFIED {
        // No body, whatever the headers say; one that says there is one may send it anyway,
        // and its bytes must not be read as the next answer.
        if coded || content_length(&headers)?.is_some_and(|n| n > 0) {
            reusable = false;
        }
        Framing::Empty
    } else if coded {
        if last_coding_is_chunked(&headers) {
            Framing::chunked()
        } else {
            reusable = false;
            Framing::UntilClose
        }
    } else if let Some(len) = content_length(&headers)? {
        Framing::Length(len)
    } else {
        reusable = false;
        Framing::UntilClose
    };
    Ok(Head {
        status,
        headers,
        framing,
        reusable,
    })
}

/// The answer's `content-length`: every value (over repeated headers and comma lists) must be
/// the same run of digits; anything else is a malformed answer, not a guess.
fn content_length(headers: &HeaderMap) -> Result<Option<u64>, Error> {
    let mut found: Option<u64> = None;
    for value in headers.get_all(CONTENT_LENGTH) {
        for part in value.as_bytes().split(|&b| b == b',') {
            let digits = part.trim_ascii();
            if digits.is_empty() || digits.len() > 19 || !digits.iter().all(u8::is_ascii_digit) {
                return Err(Error::Framing("content-length is not a number"));
            }
            let n = digits
                .iter()
                .fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
            if found.is_some_and(|f| f != n) {
                return Err(Error::Framing("content-length values differ"));
            }
            found = Some(n);
        }
    }
    Ok(found)
}

/// Whether the last transfer coding named (over every `transfer-encoding` header) is `chunked`.
fn last_coding_is_chunked(headers: &HeaderMap) -> bool {
    headers
        .get_all(TRANSFER_ENCODING)
        .iter()
        .next_back()
        .and_then(|v| v.as_bytes().rsplit(|&b| b == b',').next())
        .is_some_and(|c| c.trim_ascii().eq_ignore_ascii_case(b"chunked"))
}

/// Whether a comma-separated header has `token` (case-insensitive) among its values.
fn has_token(headers: &HeaderMap, name: HeaderName, token: &str) -> bool {
    headers.get_all(name).iter().any(|v| {
        v.as_bytes()
            .split(|&b| b == b',')
            .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Option<Head>, Error> {
        parse_response(&mut BytesMut::from(text), false)
    }

    #[test]
    fn a_request_head_states_host_and_the_bodys_length() {
        let mut headers = HeaderMap::new();
        headers.insert("authorization", HeaderValue::from_static("Bearer k"));
        headers.insert(CONTENT_LENGTH, HeaderValue::from_static("999"));
        let uri: Uri = "http://127.0.0.1:8080/v1/chat/completions?x=1"
            .parse()
            .unwrap();
        let mut out = Vec::new();
        encode_request(&Method::POST, &uri, &headers, 12, &mut out);
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            "POST /v1/chat/completions?x=1 HTTP/1.1\r\nhost: 127.0.0.1:8080\r\n\
             authorization: Bearer k\r\ncontent-length: 12\r\n\r\n"
        );
        let mut out = Vec::new();
        let uri: Uri = "http://example.com/models".parse().unwrap();
        encode_request(&Method::GET, &uri, &HeaderMap::new(), 0, &mut out);
        assert_eq!(out, b"GET /models HTTP/1.1\r\nhost: example.com\r\n\r\n");
        let mut out = Vec::new();
        encode_request(&Method::POST, &uri, &HeaderMap::new(), 0, &mut out);
        assert!(out.ends_with(b"content-length: 0\r\n\r\n"));
    }

    #[test]
    fn an_answer_head_is_parsed_with_its_framing() {
        let mut buf = BytesMut::from(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 5\r\n\r\nhello",
        );
        let head = parse_response(&mut buf, false).unwrap().unwrap();
        assert_eq!(head.status, 200);
        assert_eq!(head.headers["content-type"], "application/json");
        assert!(matches!(head.framing, Framing::Length(5)));
        assert!(head.reusable);
        assert_eq!(&buf[..], b"hello", "the body stays in the buffer");

        let head = parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(matches!(head.framing, Framing::Chunked(_)));
        let head = parse("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(!head.reusable);
        let head = parse("HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(!head.reusable, "HTTP/1.0 closes unless it says otherwise");
        let head = parse("HTTP/1.1 200 OK\r\n\r\n").unwrap().unwrap();
        assert!(matches!(head.framing, Framing::UntilClose) && !head.reusable);
        let head = parse("HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(matches!(head.framing, Framing::Empty) && head.reusable);
        let head = parse("HTTP/1.1 204 No Content\r\nContent-Length: 7\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(matches!(head.framing, Framing::Empty));
        assert!(
            !head.reusable,
            "a 204 that says it has a body is not trusted again"
        );
    }

    #[test]
    fn a_length_beside_a_coding_is_ignored_and_the_connection_not_reused() {
        let head =
            parse("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n")
                .unwrap()
                .unwrap();
        assert!(matches!(head.framing, Framing::Chunked(_)));
        assert!(!head.reusable);
        let head = parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(matches!(head.framing, Framing::UntilClose) && !head.reusable);
    }

    #[test]
    fn conflicting_or_odd_lengths_are_refused() {
        for bad in [
            "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 3, 4\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: +3\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 0x3\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n",
        ] {
            assert!(matches!(parse(bad), Err(Error::Framing(_))), "{bad}");
        }
        let same = parse("HTTP/1.1 200 OK\r\nContent-Length: 3, 3\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(matches!(same.framing, Framing::Length(3)));
    }

    #[test]
    fn informational_answers_are_skipped_and_partial_heads_wait() {
        let mut buf = BytesMut::from(
            "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n",
        );
        let head = parse_response(&mut buf, false).unwrap().unwrap();
        assert_eq!(head.status, 201);
        assert!(buf.is_empty());
        assert!(parse("HTTP/1.1 200 OK\r\nContent-Le").unwrap().is_none());
        assert!(matches!(
            parse("HTTP/1.1 101 Switching Protocols\r\n\r\n"),
            Err(Error::Framing(_))
        ));
    }

    #[test]
    fn heads_past_the_limits_are_refused() {
        let many: String = (0..=MAX_HEADERS).map(|i| format!("x-{i}: v\r\n")).collect();
        assert!(matches!(
            parse(&format!("HTTP/1.1 200 OK\r\n{many}\r\n")),
            Err(Error::TooManyHeaders)
        ));
        let long = format!("HTTP/1.1 200 OK\r\nx: {}", "a".repeat(MAX_HEAD_BYTES));
        assert!(matches!(parse(&long), Err(Error::HeadTooLarge)));
        assert!(matches!(
            parse("HTTP/1.1 2000 OK\r\n\r\n"),
            Err(Error::Parse(_))
        ));
        assert!(matches!(
            parse("HTTP/1.1 200 OK\r\nbad header\r\n\r\n"),
            Err(Error::Parse(_))
        ));
    }
}
