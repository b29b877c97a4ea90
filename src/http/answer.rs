//! Answers as responses: JSON, sluice's errors in the client's dialect, an upstream's
//! buffered answer or stream head.

use bytes::Bytes;
use http::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderMap, Response, StatusCode};

use sluice_core::endpoint::Dialect;
use sluice_core::error::ApiError;
use sluice_core::limits::Exceeded;
use sluice_core::record::RequestRecord;
use sluice_providers::exchange::DroppedParams;

use super::body::ResponseBody;
use super::headers::{
    JSON, X_ACCEL, X_LIMIT_REQUESTS, X_LIMIT_TOKENS, X_REMAINING_REQUESTS, X_REMAINING_TOKENS,
};

/// An upstream's buffered answer, relayed with its status and content type.
pub fn upstream_answer(
    resp: Response<Bytes>,
    record: &mut RequestRecord,
) -> Response<ResponseBody> {
    let (parts, bytes) = resp.into_parts();
    record.status = parts.status.as_u16();
    if !parts.status.is_success() {
        // What the client is told, for the request's log (only error answers pay for it).
        record.error_note = Some(Box::new(sluice_core::record::ErrorNote::of_body(
            record.status,
            &bytes,
        )));
    }
    let mut out = Response::new(ResponseBody::full(bytes));
    *out.status_mut() = parts.status;
    let ct = parts
        .headers
        .get(CONTENT_TYPE)
        .cloned()
        .unwrap_or(JSON.clone());
    out.headers_mut().insert(CONTENT_TYPE, ct);
    if let Some(ra) = parts.headers.get(RETRY_AFTER) {
        out.headers_mut().insert(RETRY_AFTER, ra.clone());
    }
    DroppedParams::copy(&parts.extensions, out.headers_mut());
    out
}

/// The response head of a relayed stream.
pub fn stream_response(parts: http::response::Parts, body: ResponseBody) -> Response<ResponseBody> {
    let mut resp = Response::new(body);
    *resp.status_mut() = parts.status;
    let h = resp.headers_mut();
    h.insert(
        CONTENT_TYPE,
        parts
            .headers
            .get(CONTENT_TYPE)
            .cloned()
            .unwrap_or(HeaderValue::from_static("text/event-stream")),
    );
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(X_ACCEL.clone(), HeaderValue::from_static("no"));
    DroppedParams::copy(&parts.extensions, h);
    resp
}

/// sluice's own error in the client's dialect, with `Retry-After` when it knows one.
pub fn error_response(e: &ApiError, dialect: Dialect) -> Response<ResponseBody> {
    let mut resp = json(e.status(), e.body_in(dialect));
    let h = resp.headers_mut();
    sluice_core::error::mark_aws_error(dialect, e.status(), h);
    if let Some(wait) = e.retry_after() {
        let secs = wait.as_secs_f64().ceil().max(1.0) as u64;
        h.insert(RETRY_AFTER, HeaderValue::from(secs));
    }
    if let ApiError::Limited(r) = e {
        let names = match r.exceeded {
            Exceeded::Requests => Some((&X_LIMIT_REQUESTS, &X_REMAINING_REQUESTS)),
            Exceeded::Tokens => Some((&X_LIMIT_TOKENS, &X_REMAINING_TOKENS)),
            Exceeded::Parallel | Exceeded::Budget => None,
        };
        if let Some((limit, remaining)) = names {
            h.insert(limit.clone(), HeaderValue::from(r.limit));
            h.insert(remaining.clone(), HeaderValue::from_static("0"));
        }
    }
    resp
}

/// False when an answer declares a JSON content type but does not start like JSON (an HTML
/// page from a middlebox, a corrupted body): it becomes a 502 the router may retry elsewhere,
/// instead of a 200 the client cannot parse. Only the first byte is looked at, so a 10 MB
/// answer costs nothing more.
pub fn json_as_declared(headers: &HeaderMap, body: &[u8]) -> bool {
    let declared = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.trim_start().starts_with("application/json"));
    !declared
        || matches!(
            body.iter().find(|b| !b.is_ascii_whitespace()),
            Some(b'{' | b'[') | None
        )
}

/// A `303 See Other` to `location` (LiteLLM's `/login` goes to the console's sign-in page).
pub fn see_other(location: &'static str) -> Response<ResponseBody> {
    let mut resp = Response::new(ResponseBody::full(Bytes::new()));
    *resp.status_mut() = StatusCode::SEE_OTHER;
    resp.headers_mut()
        .insert(http::header::LOCATION, HeaderValue::from_static(location));
    resp
}

/// A JSON answer.
pub fn json(status: StatusCode, body: Bytes) -> Response<ResponseBody> {
    let mut resp = Response::new(ResponseBody::full(body));
    *resp.status_mut() = status;
    resp.headers_mut().insert(CONTENT_TYPE, JSON.clone());
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_declared_json_must_start_like_json() {
        let mut h = HeaderMap::new();
        assert!(
            json_as_declared(&h, b"<html>"),
            "no content type: not judged"
        );
        h.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/json; charset=utf-8"),
        );
        assert!(json_as_declared(&h, b" \n{\"id\":1}"));
        assert!(json_as_declared(&h, b"[1]"));
        assert!(
            json_as_declared(&h, b""),
            "an empty body is left to the caller"
        );
        assert!(!json_as_declared(&h, b"<html><body>502</body></html>"));
        assert!(!json_as_declared(&h, b"\x00\xff{"));
        h.insert(CONTENT_TYPE, HeaderValue::from_static("audio/mpeg"));
        assert!(json_as_declared(&h, b"\xff\xfb"));
    }
}
