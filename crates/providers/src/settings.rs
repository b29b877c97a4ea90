//! A deployment's upstream, as its `litellm_params` describe it: which provider serves
//! `model`, the base URL and keys (given, else from the provider's environment variables and
//! defaults), extra headers, and the provider's own keys read by its module. Every problem is
//! recorded with its exact path; a deployment with one gets `None`.

use http::{HeaderName, HeaderValue};
use sluice_core::settings::{Env, Params, Problems};
use sluice_core::Secret;
use std::sync::Arc;

use sluice_net::tls::UpstreamTls;
use sluice_net::{Connect, UpstreamHttp};

use crate::registry::Provider;
use crate::ProviderConfig;

/// One upstream key of a deployment and its share of the deployment's requests.
#[derive(Debug, Clone)]
pub struct ApiKey {
    /// The key.
    pub key: Secret,
    /// Relative share (`api_key: [{key: ..., weight: 3}, ...]`; default 1).
    pub weight: f64,
}

/// Everything it takes to call one deployment's upstream, validated.
#[derive(Debug, Clone)]
pub struct UpstreamConfig {
    /// Which provider serves it.
    pub provider: Provider,
    /// The model name the provider knows (after `provider/`; for Azure, the deployment).
    pub model: String,
    /// Base URL of the upstream API, normalised (no trailing `/`, no endpoint path, the
    /// provider's suffix). `None` only for providers with no HTTP upstream (the mock).
    pub api_base: Option<String>,
    /// API keys (given, else the provider's usual environment variable); may be empty.
    pub api_keys: Vec<ApiKey>,
    /// The provider's own hosted API expects a key and none is configured: neither `api_key`
    /// nor its environment variable (a deployment given its own `api_base`, a server of the
    /// operator's, may need none). Its requests would go without a key and be refused, so
    /// the console shows it as not configured rather than healthy.
    pub key_missing: bool,
    /// `extra_headers`, sent on every upstream request. Values may carry credentials.
    pub extra_headers: Vec<(String, Secret)>,
    /// How sluice connects to the upstream: HTTP version (`http2_prior_knowledge`), TLS
    /// (`ssl_verify`, `ssl_certificate`), and for a request's own base the address check.
    pub connect: Connect,
    /// What only its provider reads.
    pub specific: ProviderConfig,
    /// `region_name` (LiteLLM's label of where a deployment runs, e.g. `eu`): shown in
    /// `/model/info` and carried on the deployment's record info, so answers can name it.
    pub region_name: Option<String>,
}

/// The common upstream keys of one `litellm_params`, as the configuration typed them.
#[derive(Debug, Clone, Default)]
pub struct Given {
    /// `model` (`provider/name`, or a bare well-known name).
    pub model: Option<String>,
    /// `custom_llm_provider`.
    pub custom_llm_provider: Option<String>,
    /// `api_base`, else `base_url`.
    pub api_base: Option<String>,
    /// `api_key`, one or a weighted list.
    pub api_keys: Vec<ApiKey>,
    /// `extra_headers` as written.
    pub extra_headers: Vec<(String, String)>,
    /// `http2_prior_knowledge`.
    pub http2_prior_knowledge: Option<bool>,
    /// `ssl_verify` / `ssl_certificate` (or `litellm_settings`'), loaded; `None`: defaults.
    pub tls: Option<Arc<UpstreamTls>>,
    /// `region_name`: where the deployment runs, as the operator labels it.
    pub region_name: Option<String>,
}

/// What a provider module reads its config from.
pub struct Reading<'a> {
    /// The provider named by `model`.
    pub provider: Provider,
    /// The model group (`model_name`), for messages.
    pub model_name: &'a str,
    /// The provider's own keys of this deployment.
    pub params: &'a Params,
    /// The environment.
    pub env: &'a dyn Env,
    /// Where problems go.
    pub problems: &'a mut Problems,
}

/// Read a deployment's upstream. `params` holds the keys only providers read, at
/// `model_list[i].litellm_params`.
pub fn read(
    model_name: &str,
    given: Given,
    params: &Params,
    env: &dyn Env,
    p: &mut Problems,
) -> Option<UpstreamConfig> {
    let lp = params.at();
    let (mut provider, model) = which(lp, model_name, &given, p)?;
    let extra_headers = headers(lp, given.extra_headers, p);
    if let Some(mock) = instead_of(provider, params, p) {
        provider = mock;
    }
    let mut cx = Reading {
        provider,
        model_name,
        params,
        env,
        problems: p,
    };
    let specific = provider.family().config(&mut cx)?;
    let mut upstream = UpstreamConfig {
        provider,
        model,
        api_base: None,
        api_keys: Vec::new(),
        key_missing: false,
        extra_headers,
        connect: Connect {
            http: match given.http2_prior_knowledge {
                Some(true) => UpstreamHttp::PriorKnowledge,
                Some(false) | None => UpstreamHttp::Negotiate,
            },
            tls: given.tls,
            guard: None,
        },
        specific,
        region_name: given.region_name,
    };
    if !provider.family().http() {
        return Some(upstream);
    }
    let spec = provider.spec();
    let implied = upstream.specific.base();
    // A base the user gave (in the deployment or the provider's environment variable) may
    // lack the provider's path suffix; the built-in defaults already carry it.
    let given_base = given.api_base.or(implied.given).or_else(|| {
        spec.base_env
            .iter()
            .find_map(|v| env.var(v).filter(|s| !s.is_empty()))
    });
    let base = given_base
        .clone()
        .or_else(|| spec.default_base.map(str::to_owned).or(implied.default));
    let base_path = format!("{lp}.api_base");
    let Some(base) = base else {
        let from_env = if spec.base_env.is_empty() {
            String::new()
        } else {
            format!(" (or set {})", spec.base_env.join(" or "))
        };
        p.error(
            base_path,
            format!("required for {}/ models{from_env}", spec.prefix),
        );
        return None;
    };
    let suffix = given_base.is_some().then_some(spec.base_suffix).flatten();
    match normalise_base(&base, suffix) {
        Ok(b) => upstream.api_base = Some(b),
        Err(why) => p.error(base_path, why),
    }
    upstream.api_keys = given.api_keys;
    if upstream.api_keys.is_empty() {
        upstream.api_keys = spec
            .key_env
            .iter()
            .find_map(|v| env.var(v).filter(|s| !s.is_empty()))
            .map(|k| ApiKey {
                key: Secret::new(k),
                weight: 1.0,
            })
            .into_iter()
            .collect();
    }
    upstream.key_missing = upstream.api_keys.is_empty() && spec.hosted && given_base.is_none();
    let key_path = format!("{lp}.api_key");
    let already_warned = p.warnings.iter().any(|w| w.path == key_path);
    if upstream.api_keys.is_empty() && spec.hosted && !already_warned {
        let vars = spec.key_env.join(" or ");
        p.warn(
            key_path,
            format!(
                "not set and neither is {vars}; requests to \"{model_name}\" will go without a key"
            ),
        );
    }
    if upstream.connect.http == UpstreamHttp::PriorKnowledge
        && upstream
            .api_base
            .as_deref()
            .is_none_or(|b| !b.starts_with("http://"))
    {
        p.warn(
            format!("{lp}.http2_prior_knowledge"),
            "only for http:// upstreams (https:// ones negotiate HTTP/2 already); ignored",
        );
        upstream.connect.http = UpstreamHttp::Negotiate;
    }
    Some(upstream)
}

/// Which provider serves `litellm_params.model`, and the model name it knows. An Azure
/// deployment written `azure/` (its name elsewhere, as LiteLLM's image examples do) is the
/// model group's name, the name LiteLLM then sends.
fn which(
    lp: &str,
    model_name: &str,
    given: &Given,
    p: &mut Problems,
) -> Option<(Provider, String)> {
    let Some(model) = given.model.clone() else {
        p.error(
            format!("{lp}.model"),
            "required, as provider/model (e.g. openai/gpt-4o)",
        );
        return None;
    };
    let unknown = |prefix: &str| {
        if !cfg!(feature = "mock") && prefix == "mock" {
            return "the mock provider is not in this build (the container image leaves it out; \
                    a default `cargo build` has it)"
                .to_owned();
        }
        let hint = match Provider::suggest(prefix) {
            Some(s) => format!(" (did you mean \"{s}\"?)"),
            None => format!(
                "; known: {}",
                Provider::all()
                    .map(Provider::name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        format!("unknown provider \"{prefix}\"{hint}")
    };
    if let Some(custom) = &given.custom_llm_provider {
        let Some(provider) = Provider::from_prefix(custom) else {
            p.error(format!("{lp}.custom_llm_provider"), unknown(custom));
            return None;
        };
        let rest = match model.split_once('/') {
            Some((pre, rest)) if Provider::from_prefix(pre) == Some(provider) => rest.to_owned(),
            _ => model,
        };
        return Some((provider, rest));
    }
    let (provider, rest) = match model.split_once('/') {
        Some((prefix, rest)) => match Provider::from_prefix(prefix) {
            Some(provider) => (provider, rest.to_owned()),
            None => {
                p.error(format!("{lp}.model"), unknown(prefix));
                return None;
            }
        },
        None => match Provider::infer_from_model(&model) {
            Some(provider) => (provider, model.clone()),
            None if given.api_base.is_some() => (
                Provider::new(&crate::openai_compatible::CUSTOM_OPENAI),
                model.clone(),
            ),
            None => {
                p.error(
                    format!("{lp}.model"),
                    format!(
                        "cannot tell which provider serves \"{model}\"; write it as provider/model, e.g. openai/{model}"
                    ),
                );
                return None;
            }
        },
    };
    if rest.trim().is_empty() && provider.family() == crate::Family::Azure && !model_name.is_empty()
    {
        return Some((provider, model_name.to_owned()));
    }
    if rest.trim().is_empty() {
        p.error(
            format!("{lp}.model"),
            format!("\"{model}\" names no model after the provider"),
        );
        return None;
    }
    Some((provider, rest))
}

/// `mock_response` on another provider's deployment: LiteLLM answers it with the mock, and so
/// does sluice (with a warning).
#[cfg(feature = "mock")]
fn instead_of(provider: Provider, params: &Params, p: &mut Problems) -> Option<Provider> {
    if provider.family() == crate::Family::Mock || !params.has("mock_response") {
        return None;
    }
    p.warn(
        params.path("mock_response"),
        format!(
            "set on a {} deployment: the built-in mock answers instead of the provider",
            provider.name()
        ),
    );
    Some(Provider::new(&crate::mock::SPECS[0]))
}

/// Without the mock provider, `mock_response` is a key nobody reads.
#[cfg(not(feature = "mock"))]
fn instead_of(_: Provider, _: &Params, _: &mut Problems) -> Option<Provider> {
    None
}

/// `extra_headers`, each a valid HTTP header (the value is kept as a secret).
fn headers(lp: &str, raw: Vec<(String, String)>, p: &mut Problems) -> Vec<(String, Secret)> {
    let mut out = Vec::with_capacity(raw.len());
    for (name, value) in raw {
        let name_ok = HeaderName::from_bytes(name.as_bytes()).is_ok();
        if !name_ok || HeaderValue::from_str(&value).is_err() {
            p.error(
                format!("{lp}.extra_headers.{name}"),
                if name_ok {
                    "the value is not a valid HTTP header value"
                } else {
                    "not a valid HTTP header name"
                },
            );
            continue;
        }
        out.push((name, Secret::new(value)));
    }
    out
}

/// A request's own `api_base` (`general_settings.allow_client_side_credentials`) in the form
/// `provider`'s targets expect, as a configured `api_base` would be.
pub fn client_api_base(provider: Provider, base: &str) -> Result<String, String> {
    normalise_base(base, provider.spec().base_suffix)
}

/// Check an `api_base` and put it in the one form the targets expect: no trailing `/`, no
/// endpoint path a user copied along, the provider's path suffix when it lacks one.
fn normalise_base(base: &str, suffix: Option<&str>) -> Result<String, String> {
    let shown = if base.contains('@') {
        "(a URL with credentials)".to_owned()
    } else {
        format!("{base:?}")
    };
    let uri: http::Uri = base
        .trim()
        .parse()
        .map_err(|e| format!("not a valid URL {shown}: {e}"))?;
    match uri.scheme_str() {
        Some("http" | "https") if uri.authority().is_some() => {}
        _ => return Err(format!("expected an http:// or https:// URL, got {shown}")),
    }
    let mut b = base.trim().trim_end_matches('/').to_owned();
    for endpoint in [
        "/chat/completions",
        "/completions",
        "/embeddings",
        "/responses",
        "/messages",
    ] {
        if let Some(stripped) = b.strip_suffix(endpoint) {
            b = stripped.to_owned();
            break;
        }
    }
    if let Some(s) = suffix {
        if !b.ends_with(s) {
            b.push_str(s);
        }
    }
    Ok(b)
}
