//! A deployment made ready to call: its provider's target (URLs, headers, credentials built
//! once at config load, so a request only clones them), its timeouts and its price.

use std::sync::Arc;
use std::time::Duration;

use http::header::HeaderValue;
use http::Response;
use sluice_core::error::ApiError;
use sluice_core::price::{ImagePrices, Price};
use sluice_core::record::DeploymentInfo;
use sluice_core::rules::{ModelRules, RuleBook};
use sluice_net::ClientRegistry;

use crate::body::UpstreamBody;
use crate::call::Call;
use crate::registry::Provider;
use crate::settings::UpstreamConfig;
use crate::UpstreamTarget;

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
    pub fn new(
        total: Option<Duration>,
        first_chunk: Option<Duration>,
        idle: Option<Duration>,
    ) -> Self {
        let total = total.unwrap_or(DEFAULT_TIMEOUT);
        Self {
            total,
            first_chunk: first_chunk.unwrap_or(total),
            idle,
        }
    }
}

impl Default for Timeouts {
    fn default() -> Self {
        Self::new(None, None, None)
    }
}

/// What a deployment is made ready from.
#[derive(Debug, Clone, Copy)]
pub struct DeploymentSpec<'a> {
    /// Stable deployment id.
    pub id: &'a str,
    /// The model group.
    pub model_name: &'a str,
    /// Its upstream.
    pub upstream: &'a UpstreamConfig,
    /// How long an attempt may take.
    pub timeouts: Timeouts,
    /// What its tokens cost.
    pub price: Price,
    /// Its image prices by quality and size.
    pub image_prices: &'a ImagePrices,
    /// `num_retries` of the deployment, over the router's.
    pub num_retries: Option<u32>,
    /// What its upstream model accepts.
    pub rules: ModelRules,
    /// For a wildcard deployment, the rules of each model it is asked for.
    pub rule_book: Option<&'a RuleBook>,
}

/// What a provider module builds its target from.
#[derive(Debug)]
pub struct Prepared<'a> {
    /// The deployment's id and names (for errors).
    pub info: &'a DeploymentInfo,
    /// Its upstream.
    pub upstream: &'a UpstreamConfig,
    /// Upstream connection pools.
    pub clients: &'a ClientRegistry,
    /// How long an attempt may take (the connect timeout follows it).
    pub timeouts: Timeouts,
    /// `litellm_settings.drop_params`: parameters the provider cannot take are dropped.
    pub drop_params: bool,
    /// What the upstream model accepts.
    pub rules: ModelRules,
    /// For a wildcard deployment, the rules of each model it is asked for.
    pub rule_book: Option<RuleBook>,
}

impl Prepared<'_> {
    /// A bad URL, for this deployment.
    pub fn bad_url(&self, url: &str, reason: impl ToString) -> TargetError {
        TargetError::BadUrl {
            id: self.info.id.to_string(),
            model: self.info.model_name.to_string(),
            url: url.to_owned(),
            reason: reason.to_string(),
        }
    }

    /// Unusable credentials, for this deployment.
    pub fn bad_credentials(&self, reason: impl ToString) -> TargetError {
        TargetError::Credentials {
            id: self.info.id.to_string(),
            model: self.info.model_name.to_string(),
            reason: reason.to_string(),
        }
    }

    /// A header that is not valid HTTP, for this deployment.
    pub fn bad_header(&self, name: &str) -> TargetError {
        TargetError::BadHeader {
            id: self.info.id.to_string(),
            model: self.info.model_name.to_string(),
            name: name.to_owned(),
        }
    }
}

/// A deployment ready to serve, shared by the routing table.
#[derive(Debug)]
pub struct DeploymentTarget {
    /// Its id, group, upstream model and provider name (shared with the records of its
    /// requests).
    pub info: Arc<DeploymentInfo>,
    /// `x-sluice-model-id` header value, prebuilt.
    pub id_header: HeaderValue,
    /// Its group's name as a header value (`x-litellm-model-group`), prebuilt; `None` for a
    /// name a header cannot carry.
    pub group_header: Option<HeaderValue>,
    /// Its `region_name` as a header value (`x-litellm-model-region`), prebuilt.
    pub region_header: Option<HeaderValue>,
    /// Its whole-call timeout in seconds as a header value (`x-litellm-timeout`), prebuilt.
    pub timeout_header: HeaderValue,
    /// The provider.
    pub provider: Provider,
    /// How to reach it.
    pub upstream: UpstreamTarget,
    /// How long an attempt may take.
    pub timeouts: Timeouts,
    /// What its tokens cost (resolved at config load; zero when nothing prices it).
    pub price: Price,
    /// Its image prices by quality and size (a request's `quality` and `size` pick one).
    pub image_prices: ImagePrices,
    /// `litellm_params.num_retries`: retries a failure of this deployment gets, in place of
    /// the router's `num_retries` (LiteLLM's per-deployment setting; a request's own wins).
    pub num_retries: Option<u32>,
    /// Its provider's hosted API expects a key and none is configured
    /// ([`UpstreamConfig::key_missing`](crate::settings::UpstreamConfig::key_missing)).
    pub key_missing: bool,
}

impl DeploymentTarget {
    /// Prepare a validated deployment. `drop_params` is `litellm_settings.drop_params`.
    pub fn build(
        d: DeploymentSpec<'_>,
        clients: &ClientRegistry,
        drop_params: bool,
    ) -> Result<Self, TargetError> {
        let info = Arc::new(DeploymentInfo {
            id: Arc::from(d.id),
            model_name: Arc::from(d.model_name),
            upstream_model: Arc::from(d.upstream.model.as_str()),
            provider: d.upstream.provider.name(),
            region: d.upstream.region_name.as_deref().map(Arc::from),
        });
        let prepared = Prepared {
            info: &info,
            upstream: d.upstream,
            clients,
            timeouts: d.timeouts,
            drop_params,
            rules: d.rules,
            rule_book: d.rule_book.cloned(),
        };
        let upstream = d.upstream.specific.target(&prepared)?;
        let id_header =
            HeaderValue::from_str(d.id).map_err(|_| prepared.bad_header("x-sluice-model-id"))?;
        Ok(Self {
            group_header: HeaderValue::from_str(d.model_name).ok(),
            region_header: info
                .region
                .as_deref()
                .and_then(|r| HeaderValue::from_str(r).ok()),
            timeout_header: seconds_header(d.timeouts.total),
            info,
            id_header,
            provider: d.upstream.provider,
            upstream,
            timeouts: d.timeouts,
            price: d.price,
            image_prices: d.image_prices.clone(),
            num_retries: d.num_retries,
            key_missing: d.upstream.key_missing,
        })
    }

    /// Send one call to this deployment; resolves when the upstream's answer head arrives
    /// (for a translated whole answer, when it is translated). The answer is in the client's
    /// dialect.
    pub async fn send(&self, call: &Call<'_>) -> Result<Response<UpstreamBody>, ApiError> {
        self.upstream.send(call).await
    }

    /// List the provider's models with this deployment's key, where the provider has such a
    /// call (`None` otherwise): what a health check asks first, since it costs nothing.
    pub async fn list_models(&self) -> Option<Result<Response<UpstreamBody>, ApiError>> {
        let (http, uri) = self.upstream.model_list()?;
        Some(http.get(uri.clone()).await)
    }
}

/// Seconds as a header value: `600`, or `2.5` for a fraction.
pub fn seconds_header(d: std::time::Duration) -> HeaderValue {
    if d.subsec_nanos() == 0 {
        HeaderValue::from(d.as_secs())
    } else {
        HeaderValue::from_str(&d.as_secs_f64().to_string()).unwrap_or(HeaderValue::from_static("0"))
    }
}

/// Test deployments, for the crates that route over them.
#[cfg(feature = "mock")]
impl DeploymentTarget {
    /// An in-process mock deployment of `group` with this id.
    pub fn mock_for_tests(group: &str, id: &str) -> Self {
        Self {
            info: Arc::new(DeploymentInfo {
                id: Arc::from(id),
                model_name: Arc::from(group),
                upstream_model: Arc::from(group),
                provider: "mock",
                region: None,
            }),
            id_header: HeaderValue::from_static("x"),
            group_header: HeaderValue::from_str(group).ok(),
            region_header: None,
            timeout_header: HeaderValue::from_static("600"),
            provider: Provider::new(&crate::mock::SPECS[0]),
            upstream: UpstreamTarget::Mock(crate::mock::Target::default()),
            timeouts: Timeouts::default(),
            price: Price::default(),
            image_prices: ImagePrices::default(),
            num_retries: None,
            key_missing: false,
        }
    }
}
