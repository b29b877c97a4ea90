//! Guardrails that ask a service, behind one interface whatever the vendor: LiteLLM's Generic
//! Guardrail API (`generic_guardrail_api`) and the vendors' own APIs (Presidio, Lakera, Azure
//! AI Content Safety, AWS Bedrock Guardrails), one adapter each under `vendors/`. An adapter
//! turns the texts to check into a [`Question`] (built when the request is read, so that a
//! `during_call` check can be sent later) and reads its service's reply into a [`Verdict`].
//! A check is bounded by the guardrail's `timeout`; a service that fails follows its
//! `on_error`; the pipeline (`mod.rs`) treats every vendor alike.

use std::time::Duration;

use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::{HeaderMap, HeaderValue, Method, Request, Uri};
use http_body_util::{BodyExt, Limited};
use serde_json::Value;
use sluice_core::record::RequestRecord;
use sluice_guardrails::{ExternalSettings, OnError, Vendor as Settings};
use sluice_net::{ClientRegistry, SegmentsBody, UpstreamClient};

use sluice_core::endpoint::Endpoint;
use sluice_routing::Router;

use super::vendors::{azure, bedrock, generic, lakera, moderation, presidio};

/// Most bytes of a service's answer read (replacement texts included).
const MAX_ANSWER: usize = 16 * 1024 * 1024;

/// A service, ready to ask.
#[derive(Debug)]
pub(crate) struct External {
    vendor: Vendor,
    timeout: Duration,
    /// What a failure to ask means.
    pub(crate) on_error: OnError,
    client: UpstreamClient,
}

/// The adapters, one per vendor: an exhaustive match, so a new one decides everything.
#[derive(Debug)]
enum Vendor {
    Generic(generic::Generic),
    Presidio(presidio::Presidio),
    Lakera(lakera::Lakera),
    Azure(azure::Azure),
    Bedrock(bedrock::Bedrock),
    Moderation(moderation::Moderation),
}

/// What the service decided.
#[derive(Debug, PartialEq)]
pub(crate) enum Verdict {
    /// Nothing to object to.
    Pass,
    /// Refused, with the service's reason (a policy, category or entity name; never the text).
    Block(String),
    /// The texts to use instead, in the order they were sent.
    Replace(Vec<String>),
    /// Spans of each text (byte ranges and their labels) to mask with this request's own
    /// placeholders, so `output_parse_pii` can give them back (Presidio with
    /// `output_parse_pii`).
    Mask(Vec<Vec<(usize, usize, String)>>),
    /// Objected to, but the guardrail only watches (Lakera's `on_flagged: monitor`): the text
    /// passes and the run is recorded with the reason.
    Flagged(String),
}

/// Which way the texts go: a request's (LiteLLM's `input_type: request`, Bedrock's `INPUT`)
/// or an answer's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direction {
    /// The request's texts.
    Request,
    /// The answer's texts.
    Answer,
}

/// A question prepared from the texts when they were read, to be asked now or later.
#[derive(Debug)]
pub(crate) struct Question {
    pub(super) payload: Payload,
    pub(super) direction: Direction,
}

/// What a vendor sends: one body, or the texts themselves when each is asked on its own
/// (Presidio, Azure text moderation).
#[derive(Debug)]
pub(super) enum Payload {
    /// One JSON body, sent once.
    Body(Bytes),
    /// The texts, each asked about.
    Texts(Vec<String>),
}

impl Question {
    /// The one JSON body of a `vendor` that sends one (`Payload::Body`).
    pub(super) fn into_body(self, vendor: &str) -> Result<Bytes, String> {
        match self.payload {
            Payload::Body(body) => Ok(body),
            Payload::Texts(_) => Err(format!("not a {vendor} question")),
        }
    }
}

impl Payload {
    /// One JSON body.
    pub(super) fn json(body: &Value) -> Result<Self, String> {
        serde_json::to_vec(body)
            .map(|b| Payload::Body(Bytes::from(b)))
            .map_err(|e| e.to_string())
    }
}

impl External {
    /// The service of `s`, on a pooled client. The error says what is wrong with the URL.
    pub(crate) fn build(s: &ExternalSettings, clients: &ClientRegistry) -> Result<Self, String> {
        let vendor = match &s.vendor {
            Settings::Generic => Vendor::Generic(generic::Generic::build(s)?),
            Settings::Presidio(p) => Vendor::Presidio(presidio::Presidio::build(s, p)?),
            Settings::Lakera(l) => Vendor::Lakera(lakera::Lakera::build(s, l)?),
            Settings::AzurePromptShield { api_version } => {
                Vendor::Azure(azure::Azure::shield(s, api_version)?)
            }
            Settings::AzureTextModeration(t) => Vendor::Azure(azure::Azure::text(s, t)?),
            Settings::Bedrock(b) => Vendor::Bedrock(bedrock::Bedrock::build(s, b)?),
            Settings::OpenAiModeration(m) => Vendor::Moderation(moderation::Moderation::build(m)),
        };
        Ok(Self {
            vendor,
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
        router: &Router,
    ) -> Result<Verdict, String> {
        let question = self.question(texts, tools, input_type, record)?;
        self.ask(question, texts.len(), router).await
    }

    /// A question about `texts` (built now, so it can be sent later while the request goes
    /// on: `during_call`).
    pub(crate) fn question(
        &self,
        texts: &[&mut String],
        tools: Option<&Value>,
        input_type: &str,
        record: &RequestRecord,
    ) -> Result<Question, String> {
        let direction = if input_type == "response" {
            Direction::Answer
        } else {
            Direction::Request
        };
        let plain: Vec<&str> = texts.iter().map(|t| t.as_str()).collect();
        let payload = match &self.vendor {
            Vendor::Generic(g) => g.question(&plain, tools, input_type, record)?,
            Vendor::Presidio(_) => Payload::Texts(plain.iter().map(|t| (*t).to_owned()).collect()),
            Vendor::Lakera(l) => l.question(&plain, direction)?,
            Vendor::Azure(a) => a.question(&plain),
            Vendor::Bedrock(b) => b.question(&plain, direction)?,
            Vendor::Moderation(m) => m.question(&plain)?,
        };
        Ok(Question { payload, direction })
    }

    /// Send a question about `sent` texts and read the verdict, within the timeout. `router`
    /// carries the questions of a guardrail that asks one of the config's model groups.
    pub(crate) async fn ask(
        &self,
        question: Question,
        sent: usize,
        router: &Router,
    ) -> Result<Verdict, String> {
        let call = Call {
            client: &self.client,
            router,
            timeout: self.timeout,
        };
        let exchange = async {
            match &self.vendor {
                Vendor::Generic(g) => g.ask(&call, question, sent).await,
                Vendor::Presidio(p) => p.ask(&call, question).await,
                Vendor::Lakera(l) => l.ask(&call, question).await,
                Vendor::Azure(a) => a.ask(&call, question).await,
                Vendor::Bedrock(b) => b.ask(&call, question, sent).await,
                Vendor::Moderation(m) => m.ask(&call, question, sent).await,
            }
        };
        tokio::time::timeout(self.timeout, exchange)
            .await
            .unwrap_or_else(|_| Err(format!("no answer within {:?}", self.timeout)))
    }
}

/// One POST to a service over sluice's pooled client: what every adapter sends through.
pub(super) struct Call<'a> {
    client: &'a UpstreamClient,
    router: &'a Router,
    timeout: Duration,
}

impl Call<'_> {
    /// POST `body` (naming a model group) to the config's own `/v1/moderations` through the
    /// router; the whole answer when a deployment served it.
    pub(super) async fn route(&self, body: Bytes) -> Result<Bytes, String> {
        crate::server::internal::call(self.router, Endpoint::Moderations, body, self.timeout).await
    }

    /// POST `body` (JSON) to `uri` with `headers`; the answer's bytes when it is a 2xx. The
    /// error names neither the address nor what the service said (it may echo the text).
    pub(super) async fn post(
        &self,
        uri: &Uri,
        headers: HeaderMap,
        body: Bytes,
    ) -> Result<Bytes, String> {
        let mut req = Request::builder()
            .method(Method::POST)
            .uri(uri.clone())
            .body(SegmentsBody::new(vec![body]))
            .map_err(|e| e.to_string())?;
        *req.headers_mut() = headers;
        req.headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
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
        Ok(bytes)
    }
}

/// Why an answer is not the JSON a vendor's contract says: where it went wrong, never the
/// value (serde's message can quote it, and it may be the user's text).
pub(super) fn not_json(vendor: &str, e: &serde_json::Error) -> String {
    format!(
        "the service's answer is not {vendor}'s JSON (line {}, column {})",
        e.line(),
        e.column()
    )
}
