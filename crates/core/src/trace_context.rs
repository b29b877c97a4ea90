//! W3C trace context (`traceparent` / `tracestate`): read from the client so sluice's request
//! span joins the caller's trace, and written on each upstream attempt so the provider's spans
//! (if it traces) hang under sluice's attempt span. Fixed-size ids, no allocation to parse.

use http::header::{HeaderName, HeaderValue};
use http::HeaderMap;

/// `traceparent`.
pub static TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");
/// `tracestate`.
pub static TRACESTATE: HeaderName = HeaderName::from_static("tracestate");

/// A span id: 8 random bytes (never all zero).
pub type SpanId = [u8; 8];

/// The trace a request belongs to and where its span hangs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    /// The trace (the client's, or a fresh one).
    pub trace_id: [u8; 16],
    /// The client's span, parent of the request span (`None` when sluice started the trace).
    pub parent: Option<SpanId>,
    /// The request span sluice reports.
    pub span_id: SpanId,
    /// The trace flags (bit 0: sampled) as the client sent them.
    pub flags: u8,
    /// The client's `tracestate`, passed on untouched.
    pub state: Option<HeaderValue>,
}

impl TraceContext {
    /// The client's context when its `traceparent` is valid, else a new trace (sampled).
    pub fn from_headers(headers: &HeaderMap) -> Self {
        let parsed = headers
            .get(&TRACEPARENT)
            .and_then(|v| parse_traceparent(v.as_bytes()));
        match parsed {
            Some((trace_id, parent, flags)) => Self {
                trace_id,
                parent: Some(parent),
                span_id: new_span_id(),
                flags,
                state: headers.get(&TRACESTATE).cloned(),
            },
            None => Self {
                trace_id: new_trace_id(),
                parent: None,
                span_id: new_span_id(),
                flags: 1,
                state: None,
            },
        }
    }

    /// The `traceparent` an upstream attempt carries: same trace, the attempt's span as parent.
    pub fn traceparent_for(&self, attempt: SpanId) -> HeaderValue {
        let mut buf = [0u8; 55];
        buf[..3].copy_from_slice(b"00-");
        hex_into(&self.trace_id, &mut buf[3..35]);
        buf[35] = b'-';
        hex_into(&attempt, &mut buf[36..52]);
        buf[52] = b'-';
        hex_into(&[self.flags], &mut buf[53..55]);
        HeaderValue::from_bytes(&buf).unwrap_or(HeaderValue::from_static(""))
    }
}

/// A fresh span id (fast thread-local RNG; ids need uniqueness, not secrecy).
pub fn new_span_id() -> SpanId {
    loop {
        let id = fastrand::u64(..).to_be_bytes();
        if id != [0; 8] {
            return id;
        }
    }
}

fn new_trace_id() -> [u8; 16] {
    loop {
        let id = fastrand::u128(..).to_be_bytes();
        if id != [0; 16] {
            return id;
        }
    }
}

/// `version-traceid-parentid-flags`, version 00 (later versions: read the same prefix, as the
/// spec asks). All-zero ids are invalid.
fn parse_traceparent(v: &[u8]) -> Option<([u8; 16], SpanId, u8)> {
    if v.len() < 55 || v[2] != b'-' || v[35] != b'-' || v[52] != b'-' {
        return None;
    }
    let version = unhex::<1>(&v[0..2])?[0];
    if version == 0xff || (version == 0 && v.len() != 55) || (v.len() > 55 && v[55] != b'-') {
        return None;
    }
    let trace = unhex::<16>(&v[3..35])?;
    let parent = unhex::<8>(&v[36..52])?;
    let flags = unhex::<1>(&v[53..55])?[0];
    if trace == [0; 16] || parent == [0; 8] {
        return None;
    }
    Some((trace, parent, flags))
}

/// `N` bytes from `2 × N` lower-case hex digits (the only case W3C trace context and sluice's
/// own key digests use); anything else is `None`.
pub fn unhex<const N: usize>(s: &[u8]) -> Option<[u8; N]> {
    fn nibble(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        }
    }
    if s.len() != 2 * N {
        return None;
    }
    let mut out = [0u8; N];
    for (i, o) in out.iter_mut().enumerate() {
        *o = (nibble(s[2 * i])? << 4) | nibble(s[2 * i + 1])?;
    }
    Some(out)
}

fn hex_into(bytes: &[u8], out: &mut [u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for (i, b) in bytes.iter().enumerate() {
        out[2 * i] = HEX[usize::from(b >> 4)];
        out[2 * i + 1] = HEX[usize::from(b & 15)];
    }
}

/// Lower-case hex of an id, for JSON payloads (off the request path).
pub fn hex(bytes: &[u8]) -> String {
    let mut out = vec![0u8; bytes.len() * 2];
    hex_into(bytes, &mut out);
    String::from_utf8(out).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TP: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    fn headers(tp: &str, ts: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(&TRACEPARENT, HeaderValue::from_str(tp).unwrap());
        if let Some(ts) = ts {
            h.insert(&TRACESTATE, HeaderValue::from_str(ts).unwrap());
        }
        h
    }

    #[test]
    fn the_clients_trace_is_joined_and_passed_on() {
        let ctx = TraceContext::from_headers(&headers(TP, Some("congo=t61rcWkgMzE")));
        assert_eq!(hex(&ctx.trace_id), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(
            ctx.parent.map(|p| hex(&p)).as_deref(),
            Some("00f067aa0ba902b7")
        );
        assert_ne!(ctx.span_id, ctx.parent.unwrap());
        assert_eq!(ctx.state.unwrap(), "congo=t61rcWkgMzE");
        let attempt = [1, 2, 3, 4, 5, 6, 7, 8];
        let ctx = TraceContext::from_headers(&headers(TP, None));
        assert_eq!(
            ctx.traceparent_for(attempt),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0102030405060708-01"
        );
    }

    #[test]
    fn invalid_parents_start_a_new_trace() {
        for bad in [
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
        ] {
            let ctx = TraceContext::from_headers(&headers(bad, Some("a=b")));
            assert_eq!(ctx.parent, None, "{bad}");
            assert_eq!(ctx.state, None, "{bad}");
            assert_ne!(ctx.trace_id, [0; 16]);
        }
        // A future version may append fields after a dash.
        let future = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what";
        assert!(TraceContext::from_headers(&headers(future, None))
            .parent
            .is_some());
    }
}
