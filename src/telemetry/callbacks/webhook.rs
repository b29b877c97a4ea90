//! The generic HTTP JSON sink (`webhook`, LiteLLM's `generic_api`): each batch POSTed as one
//! JSON array of records, or as newline-delimited JSON (`log_format: ndjson`).

use std::sync::Arc;

use http::{HeaderMap, Uri};

use super::payload::{json_array, CallbackRecord};
use super::target::{post_json, DeliverError, Http};

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
    pub async fn deliver(&self, batch: &[Arc<CallbackRecord>]) -> Result<(), DeliverError> {
        let body = if self.ndjson {
            let mut out = Vec::new();
            for r in batch {
                serde_json::to_writer(&mut out, r.as_ref())
                    .map_err(|e| DeliverError::Build(e.to_string()))?;
                out.push(b'\n');
            }
            out
        } else {
            json_array(batch).map_err(|e| DeliverError::Build(e.to_string()))?
        };
        post_json(&self.http.client, &self.uri, self.headers.clone(), body).await
    }
}
