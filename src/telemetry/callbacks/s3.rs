//! Any S3-compatible store: each batch is one JSON-array object,
//! `{s3_path}{YYYY-MM-DD}/{unix-ms}-{first request id}-{n}.json`, PUT path-style and signed with
//! SigV4.

use std::sync::Arc;
use std::time::SystemTime;

use bytes::BytesMut;
use http::header::{HeaderValue, CONTENT_TYPE};
use http::{HeaderMap, Method, Uri};

use super::payload::CallbackRecord;
use super::target::{json_body, ok_status, parse_uri, send, DeliverError, Http};
use crate::config::SinkKind;
use crate::providers::sigv4::{uri_encode, Credentials, Signer};

/// An S3 sink.
#[derive(Debug)]
pub struct S3 {
    endpoint: String,
    bucket: String,
    signer: Signer,
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
        if uri.authority().is_none() {
            return Err(DeliverError::Build("the S3 endpoint has no host".into()));
        }
        let credentials = Credentials {
            access_key_id: access_key.clone(),
            secret_access_key: secret_key.clone(),
            session_token: session_token.clone(),
        };
        Ok(Self {
            endpoint: endpoint.clone(),
            bucket: bucket.clone(),
            signer: Signer::new(credentials, region.clone(), "s3"),
            prefix: prefix.clone(),
            http: http.clone(),
        })
    }

    /// PUT one batch as one object.
    pub async fn deliver(
        &self,
        batch: &[Arc<CallbackRecord>],
        buf: &mut BytesMut,
    ) -> Result<(), DeliverError> {
        let body = json_body(buf, &batch.iter().map(|r| r.json()).collect::<Vec<_>>())?;
        let now = SystemTime::now();
        let key = self.object_key(batch, now);
        let path = format!(
            "/{}/{}",
            uri_encode(&self.bucket, true),
            uri_encode(&key, true)
        );
        let uri: Uri = parse_uri(&format!("{}{path}", self.endpoint))?;
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        self.signer
            .sign_method("PUT", &uri, &mut headers, &body, now);
        let a = send(&self.http.client, Method::PUT, uri, headers, body).await?;
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
