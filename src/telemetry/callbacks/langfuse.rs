//! Langfuse's ingestion API (`POST {host}/api/public/ingestion`, Basic auth with the project's
//! public and secret keys): per request, a `trace-create` event and a `generation-create`
//! event carrying model, usage, timings and status.

use std::sync::Arc;

use base64::Engine as _;
use http::header::{HeaderValue, AUTHORIZATION};
use http::{HeaderMap, Uri};
use serde_json::json;

use super::payload::CallbackRecord;
use super::target::{parse_uri, post_json, DeliverError, Http};
use crate::config::Secret;

/// A Langfuse sink.
#[derive(Debug)]
pub struct Langfuse {
    uri: Uri,
    headers: HeaderMap,
    http: Http,
}

impl Langfuse {
    /// A sink for this Langfuse host and key pair.
    pub fn new(
        host: &str,
        public_key: &Secret,
        secret_key: &Secret,
        http: &Http,
    ) -> Result<Self, DeliverError> {
        let basic = base64::engine::general_purpose::STANDARD.encode(format!(
            "{}:{}",
            public_key.expose(),
            secret_key.expose()
        ));
        let mut auth = HeaderValue::from_str(&format!("Basic {basic}")).map_err(|_| {
            DeliverError::Build("the Langfuse keys are not valid header text".into())
        })?;
        auth.set_sensitive(true);
        let mut headers = HeaderMap::new();
        headers.insert(AUTHORIZATION, auth);
        Ok(Self {
            uri: parse_uri(&format!("{host}/api/public/ingestion"))?,
            headers,
            http: http.clone(),
        })
    }

    /// Send one batch of events.
    pub async fn deliver(&self, batch: &[Arc<CallbackRecord>]) -> Result<(), DeliverError> {
        let events: Vec<serde_json::Value> = batch.iter().flat_map(|r| events(r)).collect();
        let body = serde_json::to_vec(&json!({ "batch": events }))
            .map_err(|e| DeliverError::Build(e.to_string()))?;
        post_json(&self.http.client, &self.uri, self.headers.clone(), body).await
    }
}

/// The two ingestion events of one request.
fn events(r: &CallbackRecord) -> [serde_json::Value; 2] {
    let trace_id = r
        .trace
        .as_ref()
        .map_or_else(|| r.request_id.clone(), |t| t.trace_id.clone());
    let name = format!("sluice-{}", r.call_type.as_deref().unwrap_or("request"));
    let metadata = r.metadata();
    let model = r.upstream_model.clone().or_else(|| r.model_group.clone());
    let completion_start = r.ttfb_ms.map(|_| r.end_time.clone());
    [
        json!({
            "id": format!("{}-trace", r.request_id),
            "timestamp": r.start_time,
            "type": "trace-create",
            "body": {
                "id": trace_id,
                "timestamp": r.start_time,
                "name": name,
                "userId": r.end_user.clone().or_else(|| r.user_id.clone()),
                "input": r.messages,
                "output": r.response,
                "tags": [format!("model_group:{}", r.model_group.as_deref().unwrap_or("-"))],
                "metadata": { "request_id": r.request_id, "key_alias": r.key_alias, "team_id": r.team_id },
            }
        }),
        json!({
            "id": format!("{}-generation", r.request_id),
            "timestamp": r.end_time,
            "type": "generation-create",
            "body": {
                "id": r.request_id,
                "traceId": trace_id,
                "name": name,
                "startTime": r.start_time,
                "endTime": r.end_time,
                "completionStartTime": completion_start,
                "model": model,
                "input": r.messages,
                "output": r.response,
                "usage": {
                    "input": r.usage.prompt_tokens,
                    "output": r.usage.completion_tokens,
                    "total": r.usage.total_tokens,
                    "unit": "TOKENS",
                },
                "usageDetails": {
                    "input": r.usage.prompt_tokens,
                    "output": r.usage.completion_tokens,
                    "total": r.usage.total_tokens,
                    "cache_read_input_tokens": r.usage.cached_tokens,
                },
                "costDetails": r.cost.map(|c| json!({ "total": c })),
                "level": if r.success() { "DEFAULT" } else { "ERROR" },
                "statusMessage": r.error,
                "metadata": metadata,
            }
        }),
    ]
}
