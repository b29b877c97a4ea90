//! Langfuse's ingestion API (`POST {host}/api/public/ingestion`, Basic auth with the project's
//! public and secret keys): per request, a `trace-create` event and a `generation-create`
//! event carrying model, usage, timings and status.

use std::sync::Arc;

use base64::Engine as _;
use http::header::{HeaderValue, AUTHORIZATION};
use http::{HeaderMap, Uri};
use serde::Serialize;

use serde_json::value::RawValue;

use super::deliver::{json_body, parse_uri, post_json, DeliverError, Http};
use super::payload::CallbackRecord;
use sluice_core::Secret;

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
    pub async fn deliver(
        &self,
        batch: &[Arc<CallbackRecord>],
        buf: &mut bytes::BytesMut,
    ) -> Result<(), DeliverError> {
        let mut events = Vec::with_capacity(batch.len() * 2);
        for r in batch {
            let [t, g] = events_of(r);
            events.push(t);
            events.push(g);
        }
        let body = json_body(buf, &Batch { batch: events })?;
        post_json(&self.http.client, &self.uri, self.headers.clone(), body).await
    }
}

#[derive(Serialize)]
struct Batch<'a> {
    batch: Vec<Event<'a>>,
}

#[derive(Serialize)]
struct Event<'a> {
    id: String,
    timestamp: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    body: Body<'a>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum Body<'a> {
    Trace(TraceBody<'a>),
    Generation(GenerationBody<'a>),
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TraceBody<'a> {
    id: &'a str,
    timestamp: &'a str,
    name: String,
    user_id: Option<&'a str>,
    input: Option<&'a serde_json::Value>,
    output: Option<&'a serde_json::Value>,
    tags: [String; 1],
    metadata: &'a RawValue,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GenerationBody<'a> {
    id: &'a str,
    trace_id: &'a str,
    name: String,
    start_time: &'a str,
    end_time: &'a str,
    completion_start_time: Option<String>,
    model: Option<&'a str>,
    input: Option<&'a serde_json::Value>,
    output: Option<&'a serde_json::Value>,
    usage: Usage,
    usage_details: UsageDetails,
    cost_details: Option<Cost>,
    level: &'static str,
    status_message: Option<&'a str>,
    metadata: &'a RawValue,
}

#[derive(Serialize)]
struct Usage {
    input: u64,
    output: u64,
    total: u64,
    unit: &'static str,
}

#[derive(Serialize)]
struct UsageDetails {
    input: u64,
    output: u64,
    total: u64,
    cache_read_input_tokens: u64,
}

#[derive(Serialize)]
struct Cost {
    total: f64,
}

/// The two ingestion events of one request: the trace and its generation.
fn events_of(r: &CallbackRecord) -> [Event<'_>; 2] {
    let trace_id = r
        .trace
        .as_ref()
        .map_or(r.request_id.as_str(), |t| t.trace_id.as_str());
    let name = format!("sluice-{}", r.call_type.as_deref().unwrap_or("request"));
    let u = &r.usage;
    [
        Event {
            id: format!("{}-trace", r.request_id),
            timestamp: &r.start_time,
            kind: "trace-create",
            body: Body::Trace(TraceBody {
                id: trace_id,
                timestamp: &r.start_time,
                name: name.clone(),
                user_id: r.end_user.as_deref().or(r.user_id.as_deref()),
                input: r.messages.as_ref(),
                output: r.response.as_ref(),
                tags: [format!(
                    "model_group:{}",
                    r.model_group.as_deref().unwrap_or("-")
                )],
                metadata: r.metadata_json(),
            }),
        },
        Event {
            id: format!("{}-generation", r.request_id),
            timestamp: &r.end_time,
            kind: "generation-create",
            body: Body::Generation(GenerationBody {
                id: &r.request_id,
                trace_id,
                name,
                start_time: &r.start_time,
                end_time: &r.end_time,
                completion_start_time: r.first_byte_time(),
                model: r.upstream_model.as_deref().or(r.model_group.as_deref()),
                input: r.messages.as_ref(),
                output: r.response.as_ref(),
                usage: Usage {
                    input: u.prompt_tokens,
                    output: u.completion_tokens,
                    total: u.total_tokens,
                    unit: "TOKENS",
                },
                usage_details: UsageDetails {
                    input: u.prompt_tokens,
                    output: u.completion_tokens,
                    total: u.total_tokens,
                    cache_read_input_tokens: u.cached_tokens,
                },
                cost_details: r.cost.map(|total| Cost { total }),
                level: if r.success() { "DEFAULT" } else { "ERROR" },
                status_message: r.error.as_deref(),
                metadata: r.metadata_json(),
            }),
        },
    ]
}
