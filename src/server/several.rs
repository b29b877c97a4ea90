//! LiteLLM's several-models request: `"model": "a,b"` on `/chat/completions` or
//! `/completions` asks each model the same thing and answers with the list of their answers
//! (LiteLLM's batch completion across models). Each model's call is a request of its own
//! through the whole pipeline: its own access check, limits, spend record and headers.

use std::future::Future;
use std::pin::Pin;

use bytes::{Bytes, BytesMut};
use http::request::Parts;
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;

use sluice_core::error::ApiError;

use super::state::AppState;
use crate::http::ResponseBody;

/// Most models one request may name, so one request cannot become hundreds.
pub const MAX_MODELS: usize = 10;

/// The models of a several-models request, or `None` when `model` names one.
pub fn models(model: &str) -> Option<Vec<&str>> {
    if !model.contains(',') {
        return None;
    }
    let list: Vec<&str> = model
        .split(',')
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .collect();
    (list.len() > 1).then_some(list)
}

/// What [`answer`] returns: a boxed future whose type names `Send`, so that the request
/// pipeline awaiting it (whose own future contains this one's) need not look inside.
pub type Answer<'a> =
    Pin<Box<dyn Future<Output = Result<Response<ResponseBody>, ApiError>> + Send + 'a>>;

/// Asks each model with the same body (its `model` replaced) and answers with a JSON list of
/// the answers, in the order named; a model's failure is its error object in the list.
pub fn answer<'a>(
    state: &'a AppState,
    parts: &'a Parts,
    body: &'a Bytes,
    model_range: std::ops::Range<usize>,
    models: &'a [&'a str],
) -> Answer<'a> {
    Box::pin(ask_each(state, parts, body, model_range, models))
}

async fn ask_each(
    state: &AppState,
    parts: &Parts,
    body: &Bytes,
    model_range: std::ops::Range<usize>,
    models: &[&str],
) -> Result<Response<ResponseBody>, ApiError> {
    if models.len() > MAX_MODELS {
        return Err(ApiError::InvalidParam {
            param: "model",
            message: format!("at most {MAX_MODELS} models in one request"),
        });
    }
    let calls = models.iter().map(|m| {
        let req = sub_request(parts, body, model_range.clone(), m);
        async move {
            let resp = super::pipeline::handle(state, req).await;
            let status = resp.status();
            let bytes = resp
                .into_body()
                .collect()
                .await
                .map(http_body_util::Collected::to_bytes)
                .unwrap_or_default();
            (status, bytes)
        }
    });
    let answers = futures_util::future::join_all(calls).await;
    let mut out = BytesMut::from(&b"["[..]);
    for (i, (_, bytes)) in answers.iter().enumerate() {
        if i > 0 {
            out.extend_from_slice(b",");
        }
        if bytes.is_empty() {
            out.extend_from_slice(b"null");
        } else {
            out.extend_from_slice(bytes);
        }
    }
    out.extend_from_slice(b"]");
    let status = if answers.iter().any(|(s, _)| s.is_success()) {
        StatusCode::OK
    } else {
        answers.first().map_or(StatusCode::OK, |(s, _)| *s)
    };
    let mut resp = Response::new(ResponseBody::full(out.freeze()));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    Ok(resp)
}

/// The same request for one model: the client's method, path and headers, the body with its
/// `model` value replaced.
fn sub_request(
    parts: &Parts,
    body: &Bytes,
    range: std::ops::Range<usize>,
    model: &str,
) -> Request<http_body_util::Full<Bytes>> {
    let name = serde_json::to_string(model).unwrap_or_else(|_| "\"\"".into());
    let mut b = BytesMut::with_capacity(body.len() + name.len());
    b.extend_from_slice(&body[..range.start]);
    b.extend_from_slice(name.as_bytes());
    b.extend_from_slice(&body[range.end..]);
    let mut req = Request::new(http_body_util::Full::new(b.freeze()));
    *req.method_mut() = parts.method.clone();
    *req.uri_mut() = parts.uri.clone();
    *req.headers_mut() = parts.headers.clone();
    req.headers_mut().remove("x-request-id");
    req.headers_mut().remove(http::header::CONTENT_LENGTH);
    // The client's address, for the allow-lists its key and team may have.
    if let Some(c) = parts.extensions.get::<crate::auth::addresses::ClientAddr>() {
        req.extensions_mut().insert(*c);
    }
    req
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_list_of_two_or_more_is_several() {
        assert_eq!(models("a, b"), Some(vec!["a", "b"]));
        assert_eq!(models("a"), None);
        assert_eq!(models("a,"), None);
    }

    #[test]
    fn each_request_names_one_model() {
        let body = Bytes::from_static(br#"{"model":"a,b","messages":[]}"#);
        let (parts, ()) = Request::post("/v1/chat/completions")
            .body(())
            .unwrap()
            .into_parts();
        let req = sub_request(&parts, &body, 9..14, "b");
        let bytes = futures_util::FutureExt::now_or_never(req.into_body().collect())
            .unwrap()
            .unwrap()
            .to_bytes();
        assert_eq!(&bytes[..], br#"{"model":"b","messages":[]}"#);
    }
}
