//! LangSmith's runs batch API (`POST {endpoint}/runs/batch`, `x-api-key`): one `llm` run per
//! request, in the configured project.

use std::sync::Arc;

use http::header::{HeaderName, HeaderValue};
use http::{HeaderMap, Uri};
use serde::Serialize;

use serde_json::value::RawValue;

use super::deliver::{json_body, parse_uri, post_json, DeliverError, Http};
use super::payload::{CallbackRecord, UsageRecord};
use sluice_core::Secret;

static X_API_KEY: HeaderName = HeaderName::from_static("x-api-key");

/// A LangSmith sink.
#[derive(Debug)]
pub struct LangSmith {
    uri: Uri,
    headers: HeaderMap,
    project: String,
    http: Http,
}

impl LangSmith {
    /// A sink for this endpoint, key and project.
    pub fn new(
        endpoint: &str,
        api_key: &Secret,
        project: &str,
        http: &Http,
    ) -> Result<Self, DeliverError> {
        let mut key = HeaderValue::from_str(api_key.expose()).map_err(|_| {
            DeliverError::Build("the LangSmith key is not valid header text".into())
        })?;
        key.set_sensitive(true);
        let mut headers = HeaderMap::new();
        headers.insert(X_API_KEY.clone(), key);
        Ok(Self {
            uri: parse_uri(&format!("{endpoint}/runs/batch"))?,
            headers,
            project: project.to_owned(),
            http: http.clone(),
        })
    }

    /// Send one batch of runs.
    pub async fn deliver(
        &self,
        batch: &[Arc<CallbackRecord>],
        buf: &mut bytes::BytesMut,
    ) -> Result<(), DeliverError> {
        let runs: Vec<Run<'_>> = batch.iter().map(|r| self.run(r)).collect();
        let body = json_body(buf, &Post { post: runs })?;
        post_json(&self.http.client, &self.uri, self.headers.clone(), body).await
    }

    fn run<'a>(&'a self, r: &'a CallbackRecord) -> Run<'a> {
        let id = run_id(&r.request_id);
        // `dotted_order`: start time (compact, microseconds) + 'Z' + run id, for a root run.
        let compact: String = r
            .start_time
            .chars()
            .filter(|c| c.is_ascii_digit() || *c == 'T')
            .collect();
        Run {
            dotted_order: format!("{compact}Z{id}"),
            trace_id: id.clone(),
            id,
            name: format!("sluice-{}", r.call_type.as_deref().unwrap_or("request")),
            run_type: "llm",
            session_name: &self.project,
            start_time: &r.start_time,
            end_time: &r.end_time,
            inputs: Inputs {
                model: r.requested_model.as_deref(),
                messages: r.messages.as_ref(),
            },
            outputs: Outputs {
                choices: r.response.as_ref(),
                usage: r.usage,
            },
            error: (!r.success()).then(|| {
                r.error
                    .clone()
                    .unwrap_or_else(|| format!("status {}", r.status))
            }),
            extra: Extra {
                metadata: r.metadata_json(),
                invocation_params: Invocation {
                    model: r.upstream_model.as_deref(),
                },
            },
        }
    }
}

#[derive(Serialize)]
struct Post<'a> {
    post: Vec<Run<'a>>,
}

#[derive(Serialize)]
struct Run<'a> {
    id: String,
    trace_id: String,
    dotted_order: String,
    name: String,
    run_type: &'static str,
    session_name: &'a str,
    start_time: &'a str,
    end_time: &'a str,
    inputs: Inputs<'a>,
    outputs: Outputs<'a>,
    error: Option<String>,
    extra: Extra<'a>,
}

#[derive(Serialize)]
struct Inputs<'a> {
    model: Option<&'a str>,
    messages: Option<&'a serde_json::Value>,
}

#[derive(Serialize)]
struct Outputs<'a> {
    choices: Option<&'a serde_json::Value>,
    usage: UsageRecord,
}

#[derive(Serialize)]
struct Extra<'a> {
    metadata: &'a RawValue,
    invocation_params: Invocation<'a>,
}

#[derive(Serialize)]
struct Invocation<'a> {
    model: Option<&'a str>,
}

/// LangSmith wants a UUID run id: the request id when it is one, else a UUID derived from it.
fn run_id(request_id: &str) -> String {
    match uuid::Uuid::parse_str(request_id) {
        Ok(u) => u.hyphenated().to_string(),
        Err(_) => {
            let h = ring::digest::digest(&ring::digest::SHA256, request_id.as_bytes());
            let mut b = [0u8; 16];
            b.copy_from_slice(&h.as_ref()[..16]);
            uuid::Builder::from_random_bytes(b)
                .into_uuid()
                .hyphenated()
                .to_string()
        }
    }
}
