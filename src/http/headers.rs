//! The response headers sluice names, and their values written without allocating.

use std::sync::Arc;
use std::time::Duration;

use http::header::{HeaderName, HeaderValue};
use http::HeaderMap;

use sluice_core::limits::Nanos;

/// The request's id: the client's, else a fresh UUID.
pub static X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
/// The deployment that answered.
pub static X_MODEL_ID: HeaderName = HeaderName::from_static("x-sluice-model-id");
/// Time sluice spent before and after the upstream call.
pub static X_OVERHEAD: HeaderName = HeaderName::from_static("x-sluice-overhead-duration-ms");
/// Time from accepting the request to its response head.
pub static X_DURATION: HeaderName = HeaderName::from_static("x-sluice-response-duration-ms");
/// Tells a proxy in front of sluice (nginx) not to hold a stream back.
pub static X_ACCEL: HeaderName = HeaderName::from_static("x-accel-buffering");
/// Retries the router made.
pub static X_RETRIES: HeaderName = HeaderName::from_static("x-sluice-attempted-retries");
/// Fallback groups the router tried.
pub static X_FALLBACKS: HeaderName = HeaderName::from_static("x-sluice-attempted-fallbacks");
/// Fallback groups skipped because the caller may not use them.
pub static X_FALLBACKS_REFUSED: HeaderName = HeaderName::from_static("x-sluice-fallbacks-refused");
/// Hedged requests sent beside the first.
pub static X_HEDGES: HeaderName = HeaderName::from_static("x-sluice-hedged-requests");
/// What the answer cost, in dollars.
pub static X_RESPONSE_COST: HeaderName = HeaderName::from_static("x-sluice-response-cost");
/// The key's spend so far, in dollars.
pub static X_KEY_SPEND: HeaderName = HeaderName::from_static("x-sluice-key-spend");
/// LiteLLM's name: the tightest requests-per-minute limit.
pub static X_LIMIT_REQUESTS: HeaderName = HeaderName::from_static("x-ratelimit-limit-requests");
/// What is left of it.
pub static X_REMAINING_REQUESTS: HeaderName =
    HeaderName::from_static("x-ratelimit-remaining-requests");
/// LiteLLM's name: the tightest tokens-per-minute limit.
pub static X_LIMIT_TOKENS: HeaderName = HeaderName::from_static("x-ratelimit-limit-tokens");
/// What is left of it.
pub static X_REMAINING_TOKENS: HeaderName = HeaderName::from_static("x-ratelimit-remaining-tokens");
/// `application/json`.
pub static JSON: HeaderValue = HeaderValue::from_static("application/json");

/// The client's `x-request-id` when it is a sane token, else a fresh UUID.
pub fn request_id(headers: &HeaderMap) -> HeaderValue {
    headers
        .get(&X_REQUEST_ID)
        .filter(|v| {
            let b = v.as_bytes();
            !b.is_empty() && b.len() <= 128 && b.iter().all(|c| c.is_ascii_graphic())
        })
        .cloned()
        .unwrap_or_else(|| {
            let mut buf = [0u8; uuid::fmt::Hyphenated::LENGTH];
            let s = sluice_core::random::uuid_v4()
                .hyphenated()
                .encode_lower(&mut buf);
            HeaderValue::from_str(s).unwrap_or(HeaderValue::from_static("-"))
        })
}

/// Milliseconds with three decimals, formatted on the stack from integers (no `String` per
/// header; `{:.3}` on an `f64` cost ~900 instructions a header).
pub fn duration_value(d: Duration) -> HeaderValue {
    use std::io::Write as _;
    let mut buf = [0u8; 32];
    let mut rest = &mut buf[..];
    let us = d.as_micros();
    let len = match write!(rest, "{}.{:03}", us / 1000, us % 1000) {
        Ok(()) => 32 - rest.len(),
        Err(_) => return HeaderValue::from_static("0"),
    };
    HeaderValue::from_bytes(&buf[..len]).unwrap_or(HeaderValue::from_static("0"))
}

/// Dollars as a header value, exact to the nano-dollar with trailing zeros trimmed (`0.00015`),
/// written from integers on the stack: formatting the `f64` cost ~600 instructions and a
/// `String` per keyed request.
pub fn usd_value(n: Nanos) -> HeaderValue {
    use std::io::Write as _;
    let mut buf = [0u8; 32];
    let mut rest = &mut buf[..];
    let (whole, frac) = (n / 1_000_000_000, n % 1_000_000_000);
    let written = if frac == 0 {
        write!(rest, "{whole}")
    } else {
        write!(rest, "{whole}.{frac:09}")
    };
    let Ok(()) = written else {
        return HeaderValue::from_static("0");
    };
    let mut len = 32 - rest.len();
    if frac != 0 {
        while buf[len - 1] == b'0' {
            len -= 1;
        }
    }
    HeaderValue::from_bytes(&buf[..len]).unwrap_or(HeaderValue::from_static("0"))
}

/// `x-sluice-fallbacks-refused`: the fallback groups skipped because the caller may not use
/// them, so that a client sees why its fallback was not tried.
pub fn refused_header(refused: &[Arc<str>], h: &mut HeaderMap) {
    let list = refused.iter().map(|n| &**n).collect::<Vec<_>>().join(", ");
    if let Ok(v) = HeaderValue::from_str(&list) {
        h.insert(X_FALLBACKS_REFUSED.clone(), v);
    }
}

/// A small count as a header value; the common ones are static (no allocation per request).
pub fn count_value(n: u32) -> HeaderValue {
    const DIGITS: [&str; 4] = ["0", "1", "2", "3"];
    match DIGITS.get(n as usize) {
        Some(d) => HeaderValue::from_static(d),
        None => HeaderValue::from(n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::limits::dollars;

    #[test]
    fn durations_are_milliseconds_with_three_decimals() {
        let v = |us| duration_value(Duration::from_micros(us));
        assert_eq!(v(0), "0.000");
        assert_eq!(v(34), "0.034");
        assert_eq!(v(1_234_567), "1234.567");
        assert_eq!(duration_value(Duration::from_nanos(999)), "0.000");
    }

    #[test]
    fn dollars_are_exact_and_trimmed_like_the_float_they_stand_for() {
        for n in [
            0u64,
            1,
            150_000,
            1_000_000_000,
            2_500_000_000,
            123_456_789,
            7_000_000_001,
        ] {
            let shown = usd_value(n);
            let text = shown.to_str().unwrap();
            assert_eq!(text.parse::<f64>().unwrap(), dollars(n), "{n} -> {text}");
            assert!(!text.contains('.') || !text.ends_with('0'), "{text}");
        }
        assert_eq!(usd_value(150_000), "0.00015");
        assert_eq!(usd_value(3_000_000_000), "3");
    }
}
