//! A deployment made ready to call: its URLs, headers and encoded model name are built once
//! at config load, so a request only clones them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, AUTHORIZATION, CONTENT_TYPE, USER_AGENT};
use http::{HeaderMap, Uri};

use super::client::{ClientRegistry, UpstreamClient};
use super::kind::{KeyHeader, Provider, Wire};
use super::native::Native;
use crate::config::{Deployment, Secret};
use crate::mock::MockSettings;
use sluice_core::endpoint::Endpoint;
use sluice_core::price::Price;
use sluice_core::record::DeploymentInfo;

/// Upstream call timeout when neither the deployment nor the router sets one (LiteLLM's 600 s).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);
/// Longest time to open a connection to an upstream.
pub const MAX_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a deployment could not be made ready (a startup error, reported with its model name).
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// A URL built from `api_base` does not parse.
    #[error("deployment {id} ({model}): invalid upstream URL {url:?}: {reason}")]
    BadUrl {
        /// Deployment id.
        id: String,
        /// Model group.
        model: String,
        /// The URL (base URLs never carry keys in sluice's config model).
        url: String,
        /// Parser message.
        reason: String,
    },
    /// Native URLs or credentials (a service-account key) that cannot be used.
    #[error("deployment {id} ({model}): {reason}")]
    Credentials {
        /// Deployment id.
        id: String,
        /// Model group.
        model: String,
        /// Why (never the key itself).
        reason: String,
    },
    /// A header name or value is not valid HTTP.
    #[error("deployment {id} ({model}): invalid header {name:?}")]
    BadHeader {
        /// Deployment id.
        id: String,
        /// Model group.
        model: String,
        /// Header name (the value is never printed: it may be a credential).
        name: String,
    },
}

/// How a deployment is reached.
#[derive(Debug)]
pub enum TargetKind {
    /// Answered in process by the mock provider.
    Mock(MockSettings),
    /// An HTTP upstream: the OpenAI wire (OpenAI, Azure, the compatible family) or
    /// Anthropic's Messages API (`HttpTarget::wire` says which).
    Http(Box<HttpTarget>),
    /// Known provider without a translator yet.
    Unsupported,
}

/// Everything needed to send one request to an HTTP upstream.
#[derive(Debug)]
pub struct HttpTarget {
    /// Pooled client (one pool per server worker thread).
    pub client: UpstreamClient,
    /// The wire format the upstream speaks (decides pass-through or translation).
    pub wire: Wire,
    /// `drop_params`: parameters the provider cannot take are dropped, not refused.
    pub drop_params: bool,
    /// Full URL per endpoint, in [`Endpoint`] order.
    urls: [Uri; ENDPOINTS.len()],
    /// Headers sent on every request (auth, organization, extra headers), one set per key.
    pub headers: KeyRing,
    /// The upstream model name encoded as a JSON string, spliced into the body.
    pub model_json: Bytes,
    /// `upstream_model` contains `*`: the client's model fills it in per request.
    pub wildcard: Option<Box<str>>,
    /// Gemini, Bedrock and Vertex AI: URLs naming the model and mode, and per-request
    /// credentials (SigV4 signer, OAuth tokens).
    pub native: Option<Box<Native>>,
}

/// How long one attempt on a deployment may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// The whole call, non-stream (`timeout`).
    pub total: Duration,
    /// Until a stream's first chunk (`stream_timeout`).
    pub first_chunk: Duration,
    /// Longest gap between two chunks of a stream (`stream_idle_timeout`).
    pub idle: Option<Duration>,
}

impl Timeouts {
    /// A deployment's timeouts, defaulted as LiteLLM does.
    pub fn of(d: &Deployment) -> Self {
        let total = d.timeout.unwrap_or(DEFAULT_TIMEOUT);
        Self {
            total,
            first_chunk: d.stream_timeout.unwrap_or(total),
            idle: d.stream_idle_timeout,
        }
    }
}

/// A deployment's header sets, one per API key, and the weighted choice among them
/// (several keys per deployment spread load over the provider's per-key limits).
#[derive(Debug)]
pub struct KeyRing {
    sets: Box<[HeaderMap]>,
    /// Cumulative weights, same length as `sets`.
    cumulative: Box<[f64]>,
    counter: AtomicU64,
}

impl KeyRing {
    fn new(sets: Vec<(HeaderMap, f64)>) -> Self {
        let mut total = 0.0;
        let cumulative = sets
            .iter()
            .map(|(_, w)| {
                total += w;
                total
            })
            .collect();
        Self {
            sets: sets.into_iter().map(|(h, _)| h).collect(),
            cumulative,
            counter: AtomicU64::new(0),
        }
    }

    /// The headers for the next request: weighted over the keys by a golden-ratio sequence
    /// (even spread, no random numbers); a single key costs nothing.
    pub fn next(&self) -> &HeaderMap {
        if self.sets.len() <= 1 {
            return &self.sets[0];
        }
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let total = self.cumulative.last().copied().unwrap_or(1.0);
        let x = ((n as f64) * 0.618_033_988_749_895).fract() * total;
        let i = self
            .cumulative
            .iter()
            .position(|c| x < *c)
            .unwrap_or(self.sets.len() - 1);
        &self.sets[i]
    }
}

impl HttpTarget {
    /// The URL for one endpoint.
    pub fn url(&self, endpoint: Endpoint) -> &Uri {
        &self.urls[endpoint_index(endpoint)]
    }
}

const fn endpoint_index(e: Endpoint) -> usize {
    match e {
        Endpoint::ChatCompletions => 0,
        Endpoint::Completions => 1,
        Endpoint::Embeddings => 2,
        Endpoint::Responses => 3,
        Endpoint::Messages => 4,
        Endpoint::CountTokens => 5,
    }
}

const ENDPOINTS: [Endpoint; 6] = [
    Endpoint::ChatCompletions,
    Endpoint::Completions,
    Endpoint::Embeddings,
    Endpoint::Responses,
    Endpoint::Messages,
    Endpoint::CountTokens,
];

/// A deployment ready to serve, shared by the routing table.
#[derive(Debug)]
pub struct DeploymentTarget {
    /// Its id, group, upstream model and provider name (shared with the records of its
    /// requests).
    pub info: Arc<DeploymentInfo>,
    /// `x-sluice-model-id` header value, prebuilt.
    pub id_header: HeaderValue,
    /// The provider.
    pub provider: Provider,
    /// How to reach it.
    pub kind: TargetKind,
    /// How long an attempt may take.
    pub timeouts: Timeouts,
    /// What its tokens cost (resolved at config load; zero when nothing prices it).
    pub price: Price,
}

impl DeploymentTarget {
    /// Prepare a validated deployment. `drop_params` is `litellm_settings.drop_params`.
    pub fn build(
        d: &Deployment,
        clients: &ClientRegistry,
        drop_params: bool,
    ) -> Result<Self, TargetError> {
        let kind = match d.provider.spec().wire {
            Wire::Mock => TargetKind::Mock(d.mock.clone()),
            Wire::NotYetSupported => TargetKind::Unsupported,
            Wire::OpenAiCompatible
            | Wire::Azure
            | Wire::Anthropic
            | Wire::Gemini
            | Wire::Bedrock
            | Wire::Vertex => TargetKind::Http(Box::new(build_http(d, clients, drop_params)?)),
        };
        let id_header = HeaderValue::from_str(&d.id).map_err(|_| TargetError::BadHeader {
            id: d.id.clone(),
            model: d.model_name.clone(),
            name: "x-sluice-model-id".into(),
        })?;
        Ok(Self {
            info: Arc::new(DeploymentInfo {
                id: Arc::from(d.id.as_str()),
                model_name: Arc::from(d.model_name.as_str()),
                upstream_model: Arc::from(d.upstream_model.as_str()),
                provider: d.provider.name(),
            }),
            id_header,
            provider: d.provider,
            kind,
            timeouts: Timeouts::of(d),
            price: d.price,
        })
    }
}

#[cfg(test)]
impl DeploymentTarget {
    /// An in-process mock deployment for unit tests.
    pub(crate) fn mock_for_tests(group: &str, id: &str) -> Self {
        Self {
            info: Arc::new(DeploymentInfo {
                id: Arc::from(id),
                model_name: Arc::from(group),
                upstream_model: Arc::from(group),
                provider: Provider::Mock.name(),
            }),
            id_header: HeaderValue::from_static("x"),
            provider: Provider::Mock,
            kind: TargetKind::Mock(MockSettings::default()),
            timeouts: Timeouts {
                total: DEFAULT_TIMEOUT,
                first_chunk: DEFAULT_TIMEOUT,
                idle: None,
            },
            price: Price::default(),
        }
    }
}

fn build_http(
    d: &Deployment,
    clients: &ClientRegistry,
    drop_params: bool,
) -> Result<HttpTarget, TargetError> {
    let base = d
        .api_base
        .as_deref()
        .unwrap_or_default()
        .trim_end_matches('/');
    let azure = d.provider.spec().wire == Wire::Azure;
    let mut urls = Vec::with_capacity(ENDPOINTS.len());
    for endpoint in ENDPOINTS {
        let url = if azure {
            azure_url(base, &d.upstream_model, d.api_version.as_deref(), endpoint)
        } else {
            format!("{base}{}", endpoint.path())
        };
        let uri: Uri = url
            .parse()
            .map_err(|e: http::uri::InvalidUri| TargetError::BadUrl {
                id: d.id.clone(),
                model: d.model_name.clone(),
                url: url.clone(),
                reason: e.to_string(),
            })?;
        urls.push(uri);
    }
    let urls: [Uri; ENDPOINTS.len()] = urls.try_into().map_err(|_| TargetError::BadUrl {
        id: d.id.clone(),
        model: d.model_name.clone(),
        url: base.to_owned(),
        reason: "internal: endpoint count".into(),
    })?;
    let headers = if d.api_keys.is_empty() {
        KeyRing::new(vec![(build_headers(d, None)?, 1.0)])
    } else {
        let mut sets = Vec::with_capacity(d.api_keys.len());
        for k in &d.api_keys {
            sets.push((build_headers(d, Some(&k.key))?, k.weight));
        }
        KeyRing::new(sets)
    };
    let timeout = Timeouts::of(d).total;
    let client = clients.get_for(timeout.min(MAX_CONNECT_TIMEOUT), d.http);
    let native = Native::build(d, base, &client)
        .map_err(|reason| TargetError::Credentials {
            id: d.id.clone(),
            model: d.model_name.clone(),
            reason,
        })?
        .map(Box::new);
    let wildcard = d
        .upstream_model
        .contains('*')
        .then(|| d.upstream_model.clone().into());
    Ok(HttpTarget {
        client,
        wire: d.provider.spec().wire,
        drop_params,
        urls,
        headers,
        model_json: encode_model(&d.upstream_model),
        wildcard,
        native,
    })
}

/// A model name as a JSON string literal.
pub fn encode_model(model: &str) -> Bytes {
    Bytes::from(serde_json::to_vec(model).unwrap_or_else(|_| b"\"\"".to_vec()))
}

fn azure_url(base: &str, deployment: &str, version: Option<&str>, e: Endpoint) -> String {
    let version = version.unwrap_or(crate::config::DEFAULT_AZURE_API_VERSION);
    match e {
        Endpoint::Responses => format!("{base}/openai/responses?api-version={version}"),
        Endpoint::ChatCompletions
        | Endpoint::Completions
        | Endpoint::Embeddings
        | Endpoint::Messages
        | Endpoint::CountTokens => format!(
            "{base}/openai/deployments/{deployment}{}?api-version={version}",
            e.path()
        ),
    }
}

fn build_headers(d: &Deployment, key: Option<&Secret>) -> Result<HeaderMap, TargetError> {
    let bad = |name: &str| TargetError::BadHeader {
        id: d.id.clone(),
        model: d.model_name.clone(),
        name: name.to_owned(),
    };
    let mut h = HeaderMap::with_capacity(4 + d.extra_headers.len());
    h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    h.insert(
        USER_AGENT,
        HeaderValue::from_static(concat!("sluice/", env!("CARGO_PKG_VERSION"))),
    );
    let header = key.and_then(|key| match d.provider.spec().key_header {
        KeyHeader::Bearer => Some((AUTHORIZATION, format!("Bearer {}", key.expose()))),
        KeyHeader::AzureApiKey => {
            Some((HeaderName::from_static("api-key"), key.expose().to_owned()))
        }
        KeyHeader::XApiKey => Some((
            HeaderName::from_static("x-api-key"),
            key.expose().to_owned(),
        )),
        KeyHeader::XGoogApiKey => Some((
            HeaderName::from_static("x-goog-api-key"),
            key.expose().to_owned(),
        )),
        // Authenticated per request (`Native::authorize`): a configured `api_key` is not sent.
        KeyHeader::Signed => None,
    });
    if let Some((name, value)) = header {
        let mut v = HeaderValue::from_str(&value).map_err(|_| bad(name.as_str()))?;
        v.set_sensitive(true);
        h.insert(name, v);
    }
    if d.provider.spec().wire == Wire::Anthropic {
        h.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(crate::translate::anthropic::API_VERSION),
        );
    }
    if let Some(org) = &d.organization {
        let v = HeaderValue::from_str(org).map_err(|_| bad("OpenAI-Organization"))?;
        h.insert(HeaderName::from_static("openai-organization"), v);
    }
    for (name, value) in &d.extra_headers {
        let n = HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad(name))?;
        let mut v = HeaderValue::from_str(value.expose()).map_err(|_| bad(name))?;
        v.set_sensitive(true);
        h.insert(n, v);
    }
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn azure_urls() {
        assert_eq!(
            azure_url("https://r.openai.azure.com", "gpt4o", Some("2024-06-01"), Endpoint::ChatCompletions),
            "https://r.openai.azure.com/openai/deployments/gpt4o/chat/completions?api-version=2024-06-01"
        );
        assert_eq!(
            azure_url("https://r.openai.azure.com", "x", None, Endpoint::Responses),
            "https://r.openai.azure.com/openai/responses?api-version=2024-10-21"
        );
    }

    #[test]
    fn key_ring_spreads_by_weight() {
        let set = |k: &'static str| {
            let mut h = HeaderMap::new();
            h.insert(AUTHORIZATION, HeaderValue::from_static(k));
            (h, 0.0)
        };
        let ring = KeyRing::new(vec![(set("a").0, 3.0), (set("b").0, 1.0)]);
        let a = (0..4000)
            .filter(|_| ring.next().get(AUTHORIZATION).unwrap() == "a")
            .count();
        assert!((2950..3050).contains(&a), "{a}");
        let one = KeyRing::new(vec![set("only")]);
        assert_eq!(one.next().get(AUTHORIZATION).unwrap(), "only");
    }

    #[test]
    fn model_encoding_escapes() {
        assert_eq!(&encode_model("a\"b")[..], br#""a\"b""#);
    }
}
