//! Guardrails that ask a service: LiteLLM's Generic Guardrail API (`generic_guardrail_api`).
//! sluice POSTs the texts it would check (and, on a request, its tools and who is calling) to
//! `{api_base}/beta/litellm_basic_guardrail_api`; the service answers `NONE`, `BLOCKED` with a
//! reason, or `GUARDRAIL_INTERVENED` with replacement texts. A check is bounded by the
//! guardrail's `timeout`; a service that fails follows its `on_error`.

use std::time::Duration;

use bytes::Bytes;
use http::header::{AUTHORIZATION, CONTENT_TYPE};
use http::{HeaderValue, Method, Request, Uri};
use http_body_util::{BodyExt, Limited};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;
use sluice_core::record::RequestRecord;
use sluice_guardrails::{ExternalSettings, OnError};
use sluice_net::{ClientRegistry, SegmentsBody, UpstreamClient};

/// The path LiteLLM's contract names.
const PATH: &str = "/beta/litellm_basic_guardrail_api";

/// Most bytes of a service's answer read (replacement texts included).
const MAX_ANSWER: usize = 16 * 1024 * 1024;

/// A service, ready to ask.
#[derive(Debug)]
pub(crate) struct External {
    uri: Uri,
    auth: Option<HeaderValue>,
    params: Box<RawValue>,
    timeout: Duration,
    /// What a failure to ask means.
    pub(crate) on_error: OnError,
    client: UpstreamClient,
}

/// What the service decided.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// `NONE`.
    Pass,
    /// `BLOCKED`, with the service's reason.
    Block(String),
    /// `GUARDRAIL_INTERVENED`: the texts to use instead, in the order they were sent.
    Replace(Vec<String>),
}

#[derive(Deserialize)]
struct Reply {
    action: String,
    #[serde(default)]
    blocked_reason: Option<String>,
    #[serde(default)]
    texts: Option<Vec<String>>,
}

impl External {
    /// The service of `s`, on a pooled client. The error says what is wrong with the URL.
    pub(crate) fn build(s: &ExternalSettings, clients: &ClientRegistry) -> Result<Self, String> {
        let uri: Uri = format!("{}{PATH}", s.api_base)
            .parse()
            .map_err(|e| format!("api_base is not a URL: {e}"))?;
        let auth = match &s.api_key {
            None => None,
            Some(k) => {
                let mut v = HeaderValue::from_str(&format!("Bearer {}", k.expose()))
                    .map_err(|_| "api_key is not a valid header value".to_owned())?;
                v.set_sensitive(true);
                Some(v)
            }
        };
        let params = RawValue::from_string(s.params.clone())
            .map_err(|e| format!("additional_provider_specific_params: {e}"))?;
        Ok(Self {
            uri,
            auth,
            params,
            timeout: s.timeout,
            on_error: s.on_error,
            client: clients.get(s.timeout),
        })
    }

    /// Ask about `texts` (`input_type`: `request` or `response`), with the request's `tools`
    /// when checking a request. `Err` says why the service could not be asked (no address).
    pub(crate) async fn check(
        &self,
        texts: &[&mut String],
        tools: Option<&Value>,
        input_type: &str,
        record: &RequestRecord,
    ) -> Result<Verdict, String> {
        let body = self.question(texts, tools, input_type, record)?;
        self.ask(body, texts.len()).await
    }

    /// The body of a question about `texts` (built now, so it can be sent later while the
    /// request goes on: `during_call`).
    pub(crate) fn question(
        &self,
        texts: &[&mut String],
        tools: Option<&Value>,
        input_type: &str,
        record: &RequestRecord,
    ) -> Result<Bytes, String> {
        let key = record.key.as_deref();
        let body = serde_json::json!({
            "texts": texts.iter().map(|t| t.as_str()).collect::<Vec<_>>(),
            "tools": tools,
            "request_data": {
                "user_api_key_hash": key.map(|k| &*k.hash),
                "user_api_key_alias": key.and_then(|k| k.alias.as_deref()),
                "user_api_key_user_id": key.and_then(|k| k.user_id.as_deref()),
                "user_api_key_team_id": key.and_then(|k| k.team_id.as_deref()),
                "user_api_key_end_user_id": record.end_user.as_deref(),
            },
            "input_type": input_type,
            "litellm_call_id": record.request_id.to_str().unwrap_or_default(),
            "additional_provider_specific_params": &self.params,
        });
        serde_json::to_vec(&body)
            .map(Bytes::from)
            .map_err(|e| e.to_string())
    }

    /// Send a question about `sent` texts and read the verdict, within the timeout.
    pub(crate) async fn ask(&self, body: Bytes, sent: usize) -> Result<Verdict, String> {
        let mut req = Request::builder()
            .method(Method::POST)
            .uri(self.uri.clone())
            .header(CONTENT_TYPE, "application/json")
            .body(SegmentsBody::new(vec![body]))
            .map_err(|e| e.to_string())?;
        if let Some(a) = &self.auth {
            req.headers_mut().insert(AUTHORIZATION, a.clone());
        }
        let exchange = async {
            let resp = self
                .client
                .request(req)
                .await
                .map_err(|e| format!("the service could not be reached: {e}"))?;
            let status = resp.status();
            let bytes = Limited::new(resp.into_body(), MAX_ANSWER)
                .collect()
                .await
                .map_err(|e| format!("the answer could not be read: {e}"))?
                .to_bytes();
            if !status.is_success() {
                return Err(format!("the service answered {status}"));
            }
            let reply: Reply = serde_json::from_slice(&bytes)
                .map_err(|e| format!("the service's answer is not the contract's JSON: {e}"))?;
            match reply.action.as_str() {
                "NONE" => Ok(Verdict::Pass),
                "BLOCKED" => {
                    Ok(Verdict::Block(reply.blocked_reason.unwrap_or_else(|| {
                        "blocked by the guardrail service".into()
                    })))
                }
                "GUARDRAIL_INTERVENED" => match reply.texts {
                    Some(t) if t.len() == sent => Ok(Verdict::Replace(t)),
                    Some(t) => Err(format!(
                        "the service gave back {} texts for {sent} sent",
                        t.len()
                    )),
                    None => Ok(Verdict::Pass),
                },
                other => Err(format!("unknown action {other:?}")),
            }
        };
        tokio::time::timeout(self.timeout, exchange)
            .await
            .unwrap_or_else(|_| Err(format!("no answer within {:?}", self.timeout)))
    }
}
