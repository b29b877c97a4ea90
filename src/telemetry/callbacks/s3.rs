//! Any S3-compatible store: each batch is one JSON-array object,
//! `{s3_path}{YYYY-MM-DD}/{unix-ms}-{first request id}-{n}.json`, PUT path-style and signed with
//! SigV4.

use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, CONTENT_TYPE};
use http::{HeaderMap, Method, Uri};

use super::payload::CallbackRecord;
use super::sigv4::{sign, Credentials};
use super::target::{ok_status, parse_uri, send, DeliverError, Http};
use crate::config::{Secret, SinkKind};

/// An S3 sink.
#[derive(Debug)]
pub struct S3 {
    endpoint: String,
    host: String,
    bucket: String,
    region: String,
    access_key: Secret,
    secret_key: Secret,
    session_token: Option<Secret>,
    prefix: String,
    http: Http,
}

impl S3 {
    /// A sink from validated S3 settings.
    pub fn new(kind: &SinkKind, http: &Http) -> Result<Self, DeliverError> {
        let SinkKind::S3 {
            bucket,
            region,
            endpoint,
            access_key,
            secret_key,
            session_token,
            prefix,
        } = kind
        else {
            return Err(DeliverError::Build("not S3 settings".into()));
        };
        let uri = parse_uri(endpoint)?;
        let host = uri
            .authority()
            .map(|a| a.as_str().to_owned())
            .ok_or_else(|| DeliverError::Build("the S3 endpoint has no host".into()))?;
        Ok(Self {
            endpoint: endpoint.clone(),
            host,
            bucket: bucket.clone(),
            region: region.clone(),
            access_key: access_key.clone(),
            secret_key: secret_key.clone(),
            session_token: session_token.clone(),
            prefix: prefix.clone(),
            http: http.clone(),
        })
    }

    /// PUT one batch as one object.
    pub async fn deliver(&self, batch: &[Arc<CallbackRecord>]) -> Result<(), DeliverError> {
        let body = serde_json::to_vec(
            &batch
                .iter()
                .map(AsRef::as_ref)
                .collect::<Vec<&CallbackRecord>>(),
        )
        .map_err(|e| DeliverError::Build(e.to_string()))?;
        let now = SystemTime::now();
        let key = self.object_key(batch, now);
        let path = format!("/{}/{}", encode(&self.bucket), encode(&key));
        let uri: Uri = parse_uri(&format!("{}{path}", self.endpoint))?;
        let creds = Credentials {
            access_key: self.access_key.expose(),
            secret_key: self.secret_key.expose(),
            session_token: self.session_token.as_ref().map(Secret::expose),
            region: &self.region,
            service: "s3",
        };
        let signed = sign(
            &creds,
            "PUT",
            &path,
            &[("host", &self.host), ("content-type", "application/json")],
            &body,
            now,
        );
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        for (k, v) in signed {
            let mut value = HeaderValue::from_str(&v)
                .map_err(|_| DeliverError::Build("a signed header is not valid text".into()))?;
            value.set_sensitive(true);
            headers.insert(HeaderName::from_static(k), value);
        }
        let a = send(
            &self.http.client,
            Method::PUT,
            uri,
            headers,
            Bytes::from(body),
        )
        .await?;
        ok_status(&a)
    }

    fn object_key(&self, batch: &[Arc<CallbackRecord>], now: SystemTime) -> String {
        let day = super::payload::rfc3339(now)
            .get(..10)
            .unwrap_or("0000-00-00")
            .to_owned();
        let ms = super::payload::unix_nanos(now) / 1_000_000;
        let first: String = batch
            .first()
            .map(|r| {
                r.request_id
                    .chars()
                    .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
                    .take(64)
                    .collect()
            })
            .unwrap_or_default();
        format!("{}{day}/{ms}-{first}-{}.json", self.prefix, batch.len())
    }
}

/// URI-encode a path for SigV4 (unreserved characters and `/` kept).
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~' | b'/') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
