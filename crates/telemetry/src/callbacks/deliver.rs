//! How a sink delivers a batch, whatever the sink: the clients it sends with, one HTTP exchange
//! within the delivery timeout, the body encodings (JSON, a JSON array of records, NDJSON) into
//! the sink's reused buffer, and the errors a delivery ends with. Never holds a URL or a header
//! value in an error: they may carry credentials.

use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use http::header::{HeaderName, HeaderValue, CONTENT_TYPE};
use http::{HeaderMap, Method, Request, Uri};
use http_body_util::BodyExt;
use sluice_config::Secret;
use sluice_net::client::{error_chain, HttpClient, UpstreamClient};
use sluice_net::SegmentsBody;

use super::payload::CallbackRecord;

/// Longest one delivery may take before it counts as failed.
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a batch was not delivered. Never holds a URL or header (they may carry credentials).
#[derive(Debug, thiserror::Error)]
pub enum DeliverError {
    /// Connection or protocol failure.
    #[error("transport: {0}")]
    Transport(String),
    /// The sink answered with an error status.
    #[error("the sink answered {status}")]
    Status {
        /// HTTP status.
        status: u16,
    },
    /// A gRPC error status.
    #[error("grpc-status {0}")]
    Grpc(String),
    /// No answer in time.
    #[error("no answer within {}s", DELIVERY_TIMEOUT.as_secs())]
    Timeout,
    /// The request could not be built.
    #[error("bad request: {0}")]
    Build(String),
    /// No access token for the sink (GCS's OAuth exchange failed).
    #[error("credentials: {0}")]
    Auth(String),
}

/// The clients sinks send with: the pooled HTTP/1.1 + ALPN client, and an HTTP/2-only one for
/// OTLP/gRPC (h2c on `http://`).
#[derive(Debug, Clone)]
pub struct Http {
    /// HTTP/1.1 (HTTP/2 over TLS when offered).
    pub client: HttpClient,
    /// HTTP/2 with prior knowledge.
    pub h2: HttpClient,
    /// The pools of `client`, as the Google token source takes them.
    pub upstream: UpstreamClient,
}

/// A finished exchange.
#[derive(Debug)]
pub struct Answer {
    /// Status.
    pub status: http::StatusCode,
    /// Headers.
    pub headers: HeaderMap,
    /// Trailers (gRPC status).
    pub trailers: Option<HeaderMap>,
    /// Body.
    pub body: Bytes,
}

/// Send one request and read the whole answer within the delivery timeout.
pub async fn send(
    client: &HttpClient,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Answer, DeliverError> {
    let mut req = Request::builder()
        .method(method)
        .uri(uri)
        .body(SegmentsBody::new(vec![body]))
        .map_err(|e| DeliverError::Build(e.to_string()))?;
    *req.headers_mut() = headers;
    let exchange = async {
        let resp = client
            .request(req)
            .await
            .map_err(|e| DeliverError::Transport(error_chain(e.to_string(), &e)))?;
        let (parts, body) = resp.into_parts();
        let collected = body
            .collect()
            .await
            .map_err(|e| DeliverError::Transport(e.to_string()))?;
        let trailers = collected.trailers().cloned();
        Ok(Answer {
            status: parts.status,
            headers: parts.headers,
            trailers,
            body: collected.to_bytes(),
        })
    };
    tokio::time::timeout(DELIVERY_TIMEOUT, exchange)
        .await
        .unwrap_or(Err(DeliverError::Timeout))
}

/// POST JSON and expect a 2xx.
pub async fn post_json(
    client: &HttpClient,
    uri: &Uri,
    mut headers: HeaderMap,
    body: Bytes,
) -> Result<(), DeliverError> {
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    let a = send(client, Method::POST, uri.clone(), headers, body).await?;
    ok_status(&a)
}

/// Encode `value` as JSON into the sink's buffer and split it off as the body to send. Once
/// the send is done and the body dropped, the buffer's next use reclaims the same allocation.
pub fn json_body<T: serde::Serialize + ?Sized>(
    buf: &mut BytesMut,
    value: &T,
) -> Result<Bytes, DeliverError> {
    buf.clear();
    serde_json::to_writer((&mut *buf).writer(), value)
        .map_err(|e| DeliverError::Build(e.to_string()))?;
    Ok(buf.split().freeze())
}

/// A batch as one JSON array of records (the body of a webhook POST and of an object-store
/// object), each record's JSON encoded once however many sinks send it.
pub fn json_array(
    buf: &mut BytesMut,
    batch: &[Arc<CallbackRecord>],
) -> Result<Bytes, DeliverError> {
    json_body(buf, &batch.iter().map(|r| r.json()).collect::<Vec<_>>())
}

/// As [`json_body`], one JSON document per line (NDJSON).
pub fn ndjson_body<T: serde::Serialize>(
    buf: &mut BytesMut,
    values: impl IntoIterator<Item = T>,
) -> Result<Bytes, DeliverError> {
    buf.clear();
    for v in values {
        serde_json::to_writer((&mut *buf).writer(), &v)
            .map_err(|e| DeliverError::Build(e.to_string()))?;
        buf.put_u8(b'\n');
    }
    Ok(buf.split().freeze())
}

/// A 2xx, or the status as an error.
pub fn ok_status(a: &Answer) -> Result<(), DeliverError> {
    if a.status.is_success() {
        Ok(())
    } else {
        Err(DeliverError::Status {
            status: a.status.as_u16(),
        })
    }
}

/// A URI from a validated URL.
pub fn parse_uri(url: &str) -> Result<Uri, DeliverError> {
    url.parse::<Uri>()
        .map_err(|_| DeliverError::Build("the sink URL does not parse".into()))
}

/// Configured headers as a header map (values marked sensitive).
pub fn header_map(headers: &[(String, Secret)]) -> Result<HeaderMap, DeliverError> {
    let mut map = HeaderMap::with_capacity(headers.len());
    for (k, v) in headers {
        let name = HeaderName::from_bytes(k.as_bytes())
            .map_err(|_| DeliverError::Build(format!("header name {k:?} is invalid")))?;
        let mut value = HeaderValue::from_str(v.expose())
            .map_err(|_| DeliverError::Build(format!("header {k:?} has an invalid value")))?;
        value.set_sensitive(true);
        map.append(name, value);
    }
    Ok(map)
}
