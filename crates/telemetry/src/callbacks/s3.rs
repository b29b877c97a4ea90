//! Any S3-compatible store: each batch is one JSON-array object,
//! `{s3_path}{YYYY-MM-DD}/{unix-ms}-{first request id}-{n}.json`, PUT path-style and signed with
//! SigV4.

use std::sync::Arc;
use std::time::SystemTime;

use bytes::BytesMut;
use http::header::{HeaderValue, CONTENT_TYPE};
use http::{HeaderMap, Method, Uri};

use super::deliver::{json_array, ok_status, parse_uri, send, DeliverError, Http};
use super::payload::{batch_object_name, CallbackRecord};
use sluice_config::SinkKind;
use sluice_net::sigv4::{uri_encode, Credentials, Signer};

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
        let body = json_array(buf, batch)?;
        let now = SystemTime::now();
        let key = batch_object_name(&self.prefix, batch, now);
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
}
