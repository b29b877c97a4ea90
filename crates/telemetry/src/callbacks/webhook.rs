//! The generic HTTP JSON sink (`webhook`, LiteLLM's `generic_api`): each batch POSTed as one
//! JSON array of records, or as newline-delimited JSON (`log_format: ndjson`).

use std::sync::Arc;

use bytes::BytesMut;
use http::{HeaderMap, Uri};

use super::deliver::{json_array, ndjson_body, post_json, DeliverError, Http};
use super::payload::CallbackRecord;

/// A webhook sink.
#[derive(Debug)]
pub struct Webhook {
    /// Where to POST.
    pub uri: Uri,
    /// Configured headers.
    pub headers: HeaderMap,
    /// One JSON object per line instead of an array.
    pub ndjson: bool,
    /// Clients.
    pub http: Http,
}

impl Webhook {
    /// POST one batch.
    pub async fn deliver(
        &self,
        batch: &[Arc<CallbackRecord>],
        buf: &mut BytesMut,
    ) -> Result<(), DeliverError> {
        let body = if self.ndjson {
            ndjson_body(buf, batch.iter().map(|r| r.json()))?
        } else {
            json_array(buf, batch)?
        };
        post_json(&self.http.client, &self.uri, self.headers.clone(), body).await
    }
}
