//! gzip for the console's whole answers (pages, the stylesheet, the spend CSV) when the
//! browser's `Accept-Encoding` asks for it: a keys or logs page is tens of kilobytes of
//! repetitive HTML that shrinks about tenfold. A streamed answer (the playground's) is left
//! alone: compressing it would hold its deltas back until a block fills.

use std::io::Write as _;

use bytes::Bytes;
use flate2::write::GzEncoder;
use flate2::Compression;
use http::header::{HeaderValue, ACCEPT_ENCODING, CONTENT_ENCODING, CONTENT_LENGTH, VARY};
use http::{HeaderMap, Response};
use http_body_util::BodyExt as _;

use crate::http::ResponseBody;

/// Bodies smaller than this go as they are: gzip's header and trailer would eat the gain.
const MIN_SIZE: usize = 512;

/// Whether `Accept-Encoding` accepts gzip: named (or `*`) without `q=0`. A `gzip;q=0` after
/// a `*` refuses it, as the header's rules say (the named coding wins over the wildcard).
pub(super) fn accepts_gzip(headers: &HeaderMap) -> bool {
    let mut star = None;
    for value in headers.get_all(ACCEPT_ENCODING) {
        let Ok(value) = value.to_str() else { continue };
        for item in value.split(',') {
            let mut parts = item.split(';');
            let coding = parts.next().unwrap_or_default().trim();
            let refused = parts.any(|p| {
                p.trim()
                    .strip_prefix("q=")
                    .and_then(|q| q.trim().parse::<f32>().ok())
                    .is_some_and(|q| q <= 0.0)
            });
            if coding.eq_ignore_ascii_case("gzip") || coding.eq_ignore_ascii_case("x-gzip") {
                return !refused;
            }
            if coding == "*" {
                star = Some(!refused);
            }
        }
    }
    star.unwrap_or(false)
}

/// `resp` gzipped when `gzip` (the client accepts it) and its body is whole and big enough;
/// every whole answer says it varies by `Accept-Encoding`, so a cache keeps both.
pub(super) async fn maybe_gzip(gzip: bool, resp: Response<ResponseBody>) -> Response<ResponseBody> {
    if !matches!(resp.body(), ResponseBody::Full(_)) {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    parts
        .headers
        .insert(VARY, HeaderValue::from_static("accept-encoding"));
    // A whole body is one frame already in memory: collecting it cannot wait or fail.
    let bytes = body
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    let body = match (gzip, bytes.len() >= MIN_SIZE) {
        (true, true) => match gzipped(&bytes) {
            Some(z) => {
                parts
                    .headers
                    .insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
                parts.headers.remove(CONTENT_LENGTH);
                z
            }
            None => bytes,
        },
        _ => bytes,
    };
    Response::from_parts(parts, ResponseBody::full(body))
}

/// `bytes` gzipped at the default level (a few hundred microseconds for a large page).
fn gzipped(bytes: &[u8]) -> Option<Bytes> {
    let mut z = GzEncoder::new(Vec::with_capacity(bytes.len() / 4), Compression::default());
    z.write_all(bytes).ok()?;
    z.finish().ok().map(Bytes::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read as _;

    fn asks(v: &str) -> bool {
        let mut h = HeaderMap::new();
        h.insert(ACCEPT_ENCODING, HeaderValue::from_str(v).unwrap());
        accepts_gzip(&h)
    }

    #[test]
    fn gzip_is_used_only_when_the_client_accepts_it() {
        assert!(asks("gzip, deflate, br, zstd"));
        assert!(asks("br;q=1.0, GZIP;q=0.5"));
        assert!(asks("*"));
        assert!(!asks("gzip;q=0"));
        assert!(
            !asks("*, gzip;q=0"),
            "the named coding wins over the wildcard"
        );
        assert!(!asks("br, deflate"));
        assert!(!asks("identity"));
        assert!(!accepts_gzip(&HeaderMap::new()));
    }

    #[tokio::test]
    async fn a_whole_page_is_gzipped_and_a_small_one_is_not() {
        let page = "<tr><td>a row of a table</td></tr>".repeat(200);
        let resp = Response::new(ResponseBody::full(page.clone()));
        let z = maybe_gzip(true, resp).await;
        assert_eq!(z.headers()[CONTENT_ENCODING], "gzip");
        assert_eq!(z.headers()[VARY], "accept-encoding");
        let bytes = z.into_body().collect().await.unwrap().to_bytes();
        assert!(bytes.len() < page.len() / 10, "{} bytes", bytes.len());
        let mut back = String::new();
        flate2::read::GzDecoder::new(&bytes[..])
            .read_to_string(&mut back)
            .unwrap();
        assert_eq!(back, page);

        let plain = maybe_gzip(false, Response::new(ResponseBody::full(page.clone()))).await;
        assert!(plain.headers().get(CONTENT_ENCODING).is_none());
        assert_eq!(plain.headers()[VARY], "accept-encoding");
        let small = maybe_gzip(true, Response::new(ResponseBody::full("short"))).await;
        assert!(small.headers().get(CONTENT_ENCODING).is_none());
    }
}
