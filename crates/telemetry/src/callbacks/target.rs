//! Where a sink sends a batch: one enum over the sink types (a new one does not compile until
//! it can deliver), one HTTP helper on the project's pooled hyper client.

use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use http::header::{HeaderName, HeaderValue, CONTENT_TYPE};
use http::{HeaderMap, Method, Request, Uri};
use http_body_util::BodyExt;

use super::payload::CallbackRecord;
use super::{gcs, langfuse, langsmith, s3, webhook};
use crate::otel;
use sluice_config::{Secret, SinkKind, SinkSettings};
use sluice_net::client::{HttpClient, UpstreamClient};
use sluice_net::SegmentsBody;

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

/// A sink, ready to send.
#[derive(Debug)]
pub enum Target {
    /// Generic HTTP JSON.
    Webhook(webhook::Webhook),
    /// Langfuse ingestion.
    Langfuse(langfuse::Langfuse),
    /// LangSmith runs batch.
    LangSmith(langsmith::LangSmith),
    /// S3-compatible object per batch.
    S3(s3::S3),
    /// Google Cloud Storage object per batch.
    Gcs(gcs::Gcs),
    /// OTLP traces.
    Otel(otel::Exporter),
}

impl Target {
    /// Prepare a sink from its settings.
    pub fn build(s: &SinkSettings, http: &Http) -> Result<Self, DeliverError> {
        Ok(match &s.kind {
            SinkKind::Webhook {
                url,
                headers,
                ndjson,
            } => Self::Webhook(webhook::Webhook {
                uri: parse_uri(url)?,
                headers: header_map(headers)?,
                ndjson: *ndjson,
                http: http.clone(),
            }),
            SinkKind::Langfuse {
                host,
                public_key,
                secret_key,
            } => Self::Langfuse(langfuse::Langfuse::new(host, public_key, secret_key, http)?),
            SinkKind::LangSmith {
                endpoint,
                api_key,
                project,
            } => Self::LangSmith(langsmith::LangSmith::new(endpoint, api_key, project, http)?),
            SinkKind::S3 { .. } => Self::S3(s3::S3::new(&s.kind, http)?),
            SinkKind::Gcs {
                bucket,
                prefix,
                credentials,
                api_base,
            } => Self::Gcs(gcs::Gcs::new(bucket, prefix, credentials, api_base, http)?),
            SinkKind::Otel {
                endpoint,
                grpc,
                headers,
                service_name,
            } => Self::Otel(otel::Exporter {
                uri: parse_uri(endpoint)?,
                grpc: *grpc,
                headers: header_map(headers)?,
                service_name: service_name.clone(),
                http: http.clone(),
            }),
        })
    }

    /// Send one batch, encoded into `buf`: the sink's own buffer, kept across batches so that
    /// encoding reuses one allocation instead of growing (and page-faulting) a fresh one each
    /// time.
    pub async fn deliver(
        &self,
        batch: &[Arc<CallbackRecord>],
        buf: &mut BytesMut,
    ) -> Result<(), DeliverError> {
        match self {
            Self::Webhook(t) => t.deliver(batch, buf).await,
            Self::Langfuse(t) => t.deliver(batch, buf).await,
            Self::LangSmith(t) => t.deliver(batch, buf).await,
            Self::S3(t) => t.deliver(batch, buf).await,
            Self::Gcs(t) => t.deliver(batch, buf).await,
            Self::Otel(t) => t.deliver(batch, buf).await,
        }
    }
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
            .map_err(|e| DeliverError::Transport(transport(&e)))?;
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

/// The error chain of a transport failure (the URL is not part of it).
fn transport(e: &hyper_util::client::legacy::Error) -> String {
    use std::error::Error as _;
    let mut msg = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        source = s.source();
    }
    msg
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
