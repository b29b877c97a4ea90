//! LiteLLM's `x-litellm-*` headers, both ways, so that a client or dashboard written against
//! LiteLLM reads the same facts from sluice: each answer carries LiteLLM's names beside
//! sluice's own (the same values, shared, not formatted twice), and the request headers
//! LiteLLM reads (`x-litellm-timeout`, `x-litellm-num-retries`) set what the body's
//! `timeout` and `num_retries` would, when the body does not.

use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue};

use sluice_translate::envelope::RequestRouting;

/// sluice's header and LiteLLM's name for the same fact.
const MIRRORED: [(HeaderName, HeaderName); 8] = [
    (
        HeaderName::from_static("x-request-id"),
        HeaderName::from_static("x-litellm-call-id"),
    ),
    (
        HeaderName::from_static("x-sluice-model-id"),
        HeaderName::from_static("x-litellm-model-id"),
    ),
    (
        HeaderName::from_static("x-sluice-overhead-duration-ms"),
        HeaderName::from_static("x-litellm-overhead-duration-ms"),
    ),
    (
        HeaderName::from_static("x-sluice-response-duration-ms"),
        HeaderName::from_static("x-litellm-response-duration-ms"),
    ),
    (
        HeaderName::from_static("x-sluice-attempted-retries"),
        HeaderName::from_static("x-litellm-attempted-retries"),
    ),
    (
        HeaderName::from_static("x-sluice-attempted-fallbacks"),
        HeaderName::from_static("x-litellm-attempted-fallbacks"),
    ),
    (
        HeaderName::from_static("x-sluice-response-cost"),
        HeaderName::from_static("x-litellm-response-cost"),
    ),
    (
        HeaderName::from_static("x-sluice-key-spend"),
        HeaderName::from_static("x-litellm-key-spend"),
    ),
];

/// The model group that served the request (LiteLLM's name only: sluice had none).
pub static MODEL_GROUP: HeaderName = HeaderName::from_static("x-litellm-model-group");
/// The serving deployment's `region_name`.
pub static MODEL_REGION: HeaderName = HeaderName::from_static("x-litellm-model-region");
/// How many retries the request was allowed.
pub static MAX_RETRIES: HeaderName = HeaderName::from_static("x-litellm-max-retries");
/// The per-attempt timeout the request ran under, in seconds.
pub static TIMEOUT: HeaderName = HeaderName::from_static("x-litellm-timeout");

/// Adds LiteLLM's name for each sluice header the answer carries, growing the map once.
pub fn mirror(headers: &mut HeaderMap) {
    headers.reserve(MIRRORED.len());
    for (ours, theirs) in &MIRRORED {
        if let Some(v) = headers.get(ours) {
            let v = v.clone();
            headers.insert(theirs.clone(), v);
        }
    }
}

/// A retry count as a header value: the usual ones are static (no allocation per request).
pub fn count(n: u32) -> HeaderValue {
    const SMALL: [&str; 11] = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10"];
    match SMALL.get(n as usize) {
        Some(s) => HeaderValue::from_static(s),
        None => HeaderValue::from(n),
    }
}

/// LiteLLM's request headers: `x-litellm-timeout` (seconds) and `x-litellm-num-retries`
/// fill `routing` where the body left them unset. A value that is not a number is a 400
/// naming the header, as a bad body field is.
pub fn read(
    headers: &HeaderMap,
    routing: &mut RequestRouting,
) -> Result<(), sluice_core::ApiError> {
    let bad = |param: &'static str| sluice_core::ApiError::InvalidParam {
        param,
        message: "expected a number".into(),
    };
    if routing.timeout.is_none() {
        if let Some(v) = headers.get("x-litellm-timeout") {
            let secs: f64 = v
                .to_str()
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .filter(|s: &f64| s.is_finite() && *s > 0.0)
                .ok_or_else(|| bad("x-litellm-timeout"))?;
            routing.timeout = Some(Duration::from_secs_f64(secs.min(86_400.0)));
        }
    }
    if routing.num_retries.is_none() {
        if let Some(v) = headers.get("x-litellm-num-retries") {
            let n: u32 = v
                .to_str()
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .ok_or_else(|| bad("x-litellm-num-retries"))?;
            routing.num_retries = Some(n);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mirrors_the_headers_present() {
        let mut h = HeaderMap::new();
        h.insert("x-request-id", HeaderValue::from_static("req-1"));
        h.insert("x-sluice-response-cost", HeaderValue::from_static("0.01"));
        mirror(&mut h);
        assert_eq!(h["x-litellm-call-id"], "req-1");
        assert_eq!(h["x-litellm-response-cost"], "0.01");
        assert!(!h.contains_key("x-litellm-model-id"));
    }

    #[test]
    fn request_headers_fill_what_the_body_left_unset() {
        let mut h = HeaderMap::new();
        h.insert("x-litellm-timeout", HeaderValue::from_static("2.5"));
        h.insert("x-litellm-num-retries", HeaderValue::from_static("3"));
        let mut r = RequestRouting::default();
        read(&h, &mut r).unwrap();
        assert_eq!(r.timeout, Some(Duration::from_millis(2500)));
        assert_eq!(r.num_retries, Some(3));
        let mut set = RequestRouting {
            num_retries: Some(1),
            ..RequestRouting::default()
        };
        read(&h, &mut set).unwrap();
        assert_eq!(set.num_retries, Some(1));
        h.insert("x-litellm-timeout", HeaderValue::from_static("soon"));
        let e = read(&h, &mut RequestRouting::default()).unwrap_err();
        assert_eq!(e.status(), http::StatusCode::BAD_REQUEST);
    }
}
