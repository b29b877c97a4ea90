//! Google Cloud Storage (`gcs_bucket`): each batch is one JSON-array object, named as the S3
//! sink names its objects, uploaded with one request of the JSON API's simple upload
//! (`POST {api_base}/upload/storage/v1/b/{bucket}/o?uploadType=media&name={object}`). The
//! bearer token comes from the service account through the same cached
//! [`TokenSource`](sluice_net::google_auth::TokenSource) Vertex AI uses: one token
//! exchange an hour, never one per batch.

use std::sync::Arc;
use std::time::SystemTime;

use bytes::{Bytes, BytesMut};
use http::header::{HeaderValue, AUTHORIZATION, CONTENT_TYPE};
use http::{HeaderMap, Method, Uri};

use super::deliver::{json_array, ok_status, parse_uri, send, DeliverError, Http};
use super::payload::{batch_object_name, CallbackRecord};
use sluice_core::Secret;
use sluice_net::google_auth::TokenSource;
use sluice_net::sigv4::uri_encode;

/// A GCS sink.
#[derive(Debug)]
pub struct Gcs {
    /// `{api_base}/upload/storage/v1/b/{bucket}/o`, the object name goes in the query.
    upload: String,
    prefix: String,
    /// Boxed: the key pair is large and the other sinks are small.
    tokens: Box<TokenSource>,
    http: Http,
}

/// One upload, built (and testable) apart from sending it.
#[derive(Debug)]
struct Upload {
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
}

impl Gcs {
    /// A sink from validated settings; the key file was checked at config load.
    pub fn new(
        bucket: &str,
        prefix: &str,
        credentials: &Secret,
        api_base: &str,
        http: &Http,
    ) -> Result<Self, DeliverError> {
        let tokens = TokenSource::new(credentials.expose(), http.upstream.clone())
            .map_err(|e| DeliverError::Build(e.to_string()))?;
        let tokens = Box::new(tokens);
        let upload = format!(
            "{api_base}/upload/storage/v1/b/{}/o",
            uri_encode(bucket, false)
        );
        // Fail at start, not at the first batch, if the base does not make a URL.
        parse_uri(&upload)?;
        Ok(Self {
            upload,
            prefix: prefix.to_owned(),
            tokens,
            http: http.clone(),
        })
    }

    /// Upload one batch as one object.
    pub async fn deliver(
        &self,
        batch: &[Arc<CallbackRecord>],
        buf: &mut BytesMut,
    ) -> Result<(), DeliverError> {
        let auth = self
            .tokens
            .header()
            .await
            .map_err(|e| DeliverError::Auth(e.to_string()))?;
        let Upload { uri, headers, body } = self.upload(batch, SystemTime::now(), auth, buf)?;
        let a = send(&self.http.client, Method::POST, uri, headers, body).await?;
        ok_status(&a)
    }

    fn upload(
        &self,
        batch: &[Arc<CallbackRecord>],
        now: SystemTime,
        auth: HeaderValue,
        buf: &mut BytesMut,
    ) -> Result<Upload, DeliverError> {
        let body = json_array(buf, batch)?;
        let name = batch_object_name(&self.prefix, batch, now);
        let uri = parse_uri(&format!(
            "{}?uploadType=media&name={}",
            self.upload,
            uri_encode(&name, false)
        ))?;
        let mut headers = HeaderMap::with_capacity(2);
        headers.insert(AUTHORIZATION, auth);
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        Ok(Upload { uri, headers, body })
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;
    use sluice_net::client::{h2_only, ClientRegistry};

    fn http() -> Http {
        let upstream = ClientRegistry::default().get(Duration::from_secs(1));
        Http {
            client: upstream.shared().clone(),
            h2: h2_only(Duration::from_secs(1)),
            upstream,
        }
    }

    fn key_file() -> Secret {
        let path = format!(
            "{}/../../tests/fixtures/vertex/service_account.json",
            env!("CARGO_MANIFEST_DIR")
        );
        Secret::new(std::fs::read_to_string(path).unwrap())
    }

    #[test]
    fn a_batch_is_one_dated_object_posted_with_the_token() {
        let gcs = Gcs::new(
            "logs",
            "team/a/",
            &key_file(),
            "http://127.0.0.1:9",
            &http(),
        )
        .unwrap();
        let batch = [
            CallbackRecord::sample("req-1"),
            CallbackRecord::sample("req-2"),
        ];
        // 2026-11-23T10:00:00.123Z
        let now = UNIX_EPOCH + Duration::from_millis(1_795_428_000_123);
        let up = gcs
            .upload(
                &batch,
                now,
                HeaderValue::from_static("Bearer tok"),
                &mut BytesMut::new(),
            )
            .unwrap();
        assert_eq!(
            up.uri.to_string(),
            "http://127.0.0.1:9/upload/storage/v1/b/logs/o?uploadType=media\
             &name=team%2Fa%2F2026-11-23%2F1795428000123-req-1-2.json"
        );
        assert_eq!(up.headers[AUTHORIZATION], "Bearer tok");
        assert_eq!(up.headers[CONTENT_TYPE], "application/json");
        let sent: Vec<CallbackRecord> = serde_json::from_slice(&up.body).unwrap();
        let ids: Vec<&str> = sent.iter().map(|r| r.request_id.as_str()).collect();
        assert_eq!(ids, ["req-1", "req-2"]);
    }

    #[test]
    fn a_bad_key_file_stops_the_sink_at_start() {
        let err = Gcs::new(
            "logs",
            "",
            &Secret::new("{}"),
            "http://127.0.0.1:9",
            &http(),
        )
        .unwrap_err();
        assert!(matches!(err, DeliverError::Build(_)), "{err}");
    }
}
