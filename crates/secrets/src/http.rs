//! One request to a manager on net's pooled client, its answer read whole (bounded).

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Request, StatusCode};
use http_body_util::{BodyExt, Limited};
use sluice_core::Secret;
use sluice_net::{ClientRegistry, SegmentsBody, UpstreamClient};

use crate::error::{excerpt, ReadError};

/// Largest answer read from a manager (a secret is at most 64 KiB in AWS, 25 KiB in Azure).
const MAX_BODY: usize = 1024 * 1024;
/// How long one read may take, connect to last byte.
const TIMEOUT: Duration = Duration::from_secs(15);

/// The client every manager sends on.
#[derive(Debug, Clone)]
pub(crate) struct Http {
    client: UpstreamClient,
}

impl Http {
    /// A client of its own: managers are read at startup, before the gateway's clients exist,
    /// and then by one background task.
    pub(crate) fn new() -> Self {
        Self {
            client: ClientRegistry::new(0).get(Duration::from_secs(5)),
        }
    }

    /// The pooled client itself (for net's Google token source).
    pub(crate) fn client(&self) -> &UpstreamClient {
        &self.client
    }

    /// Send `req`; the status and body, or why there is none.
    pub(crate) async fn send(
        &self,
        req: Request<SegmentsBody>,
    ) -> Result<(StatusCode, Bytes), ReadError> {
        let call = async {
            let resp = self.client.request(req).await.map_err(|e| {
                ReadError::Failed(sluice_net::client::error_chain("request failed".into(), &e))
            })?;
            let status = resp.status();
            let body = Limited::new(resp.into_body(), MAX_BODY)
                .collect()
                .await
                .map_err(|e| ReadError::Failed(format!("reading the answer: {e}")))?
                .to_bytes();
            Ok((status, body))
        };
        tokio::time::timeout(TIMEOUT, call)
            .await
            .map_err(|_| ReadError::Failed(format!("no answer within {}s", TIMEOUT.as_secs())))?
    }

    /// [`Http::send`], with the usual meanings of a failed status: 404 is not found, 401 and
    /// 403 denied, anything else not 2xx a failure quoting the body.
    pub(crate) async fn send_ok(&self, req: Request<SegmentsBody>) -> Result<Bytes, ReadError> {
        let (status, body) = self.send(req).await?;
        match status {
            s if s.is_success() => Ok(body),
            StatusCode::NOT_FOUND => Err(ReadError::NotFound),
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => Err(ReadError::Denied(format!(
                "status {status}: {}",
                excerpt(&body)
            ))),
            _ => Err(ReadError::Failed(format!(
                "status {status}: {}",
                excerpt(&body)
            ))),
        }
    }
}

impl Http {
    /// `GET url` with one credential header; the body of a 2xx answer.
    pub(crate) async fn get(
        &self,
        url: &str,
        name: &http::HeaderName,
        credential_value: &str,
    ) -> Result<Bytes, ReadError> {
        let mut req = request(http::Method::GET, url, Bytes::new())?;
        req.headers_mut()
            .insert(name.clone(), credential(credential_value)?);
        self.send_ok(req).await
    }

    /// `POST url` of a login or token request (`step`, named in its errors): `body` of
    /// `content_type`, with `extra` headers; the body of a 2xx answer.
    pub(crate) async fn post(
        &self,
        step: &str,
        url: &str,
        content_type: &'static str,
        body: String,
        extra: &[(&http::HeaderName, &str)],
    ) -> Result<Bytes, ReadError> {
        let mut req = request(http::Method::POST, url, Bytes::from(body))?;
        req.headers_mut().insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static(content_type),
        );
        for (name, value) in extra {
            req.headers_mut()
                .insert((*name).clone(), credential(value)?);
        }
        self.send_ok(req).await.map_err(|e| e.during(step))
    }
}

/// A request with `body` (empty for a GET).
pub(crate) fn request(
    method: http::Method,
    url: &str,
    body: Bytes,
) -> Result<Request<SegmentsBody>, ReadError> {
    Request::builder()
        .method(method)
        .uri(url)
        .body(SegmentsBody::new(if body.is_empty() {
            Vec::new()
        } else {
            vec![body]
        }))
        .map_err(|e| ReadError::Failed(format!("bad request URL {url:?}: {e}")))
}

/// A header value holding a credential, marked sensitive so that no debug output shows it.
pub(crate) fn credential(value: &str) -> Result<HeaderValue, ReadError> {
    let mut v = HeaderValue::from_str(value)
        .map_err(|_| ReadError::Failed("a credential is not a valid header value".into()))?;
    v.set_sensitive(true);
    Ok(v)
}

/// The string member `name` of a JSON object answer (a token, a value), as a secret.
pub(crate) fn member(body: &[u8], name: &str, what: &str) -> Result<Secret, ReadError> {
    let object: serde_json::Map<String, serde_json::Value> = parse(body, what)?;
    match object.get(name) {
        Some(serde_json::Value::String(s)) => Ok(Secret::new(s.as_str())),
        _ => Err(ReadError::Failed(format!(
            "the answer is not {what}: no string `{name}`"
        ))),
    }
}

/// A JSON answer parsed, or a failure naming what was expected (never quoting the body: a
/// successful answer holds the secret).
pub(crate) fn parse<T: serde::de::DeserializeOwned>(
    body: &[u8],
    what: &str,
) -> Result<T, ReadError> {
    serde_json::from_slice(body).map_err(|e| {
        ReadError::Failed(format!(
            "the answer is not {what} (line {}, column {})",
            e.line(),
            e.column()
        ))
    })
}
