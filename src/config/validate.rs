//! Raw config → validated [`Config`]: every value checked and defaulted here, each problem
//! recorded with its exact path, so the rest of sluice never sees an invalid state.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use serde_yaml_ng::Value;
use sha2::{Digest, Sha256};

use super::env::Env;
use super::model::{
    ApiKey, AwsSettings, Config, Deployment, GeneralSettings, LitellmSettings, ModelInfo,
    RouterSettings, UpstreamHttp, VertexSettings,
};
use super::problems::{did_you_mean, Problems};
use super::raw::{
    OneOrMany, RawConfig, RawFallbacks, RawKey, RawKeys, RawModel, RawParams, RawRouter, Scalar,
};
use crate::mock::{Faults, MockSettings, MockWire};
use crate::providers::{KeyHeader, Provider, Wire};
use crate::routing::{FailureKind, HedgeAfter, OnDisconnect, Strategy};
use sluice_core::Secret;

/// Azure OpenAI API version used when neither the deployment nor `AZURE_API_VERSION` sets one.
pub const DEFAULT_AZURE_API_VERSION: &str = "2024-10-21";

/// LiteLLM's routing strategies.
pub const ROUTING_STRATEGIES: [&str; 6] = [
    "simple-shuffle",
    "least-busy",
    "latency-based-routing",
    "usage-based-routing",
    "usage-based-routing-v2",
    "cost-based-routing",
];

/// Validate the whole config, recording every problem.
pub(super) fn validate(raw: RawConfig, env: &dyn Env, p: &mut Problems) -> Config {
    let general = general(raw.general_settings.unwrap_or_default(), env, p);
    let mut litellm_raw = raw.litellm_settings.unwrap_or_default();
    let s3_params = litellm_raw.s3_callback_params.take();
    let gcs_params = super::raw::RawCallback {
        gcs_bucket_name: litellm_raw.gcs_bucket_name.take(),
        gcs_path_service_account: litellm_raw.gcs_path_service_account.take(),
        ..Default::default()
    };
    let mut router = router(raw.router_settings.unwrap_or_default(), p);
    let litellm = litellm(litellm_raw, &mut router, p);
    let callbacks = super::callbacks::callbacks(
        &litellm,
        raw.callback_settings.unwrap_or_default(),
        s3_params,
        gcs_params,
        env,
        p,
    );
    let defaults = Timeouts {
        total: router.timeout.or(litellm.request_timeout),
        first_chunk: router.stream_timeout,
        idle: router.stream_idle_timeout,
    };

    let entries = raw.model_list.unwrap_or_default();
    if entries.is_empty() {
        p.warn(
            "model_list",
            "no models configured; every inference request will answer 404",
        );
    }
    let mut indexed = Vec::with_capacity(entries.len());
    for (i, entry) in entries.into_iter().enumerate() {
        if let Some(d) = deployment(i, entry, &defaults, env, p) {
            indexed.push((i, d));
        }
    }
    unique_ids(&mut indexed, p);
    price_all(&mut indexed, env, p);
    let deployments: Vec<Deployment> = indexed.into_iter().map(|(_, d)| d).collect();

    let names: Vec<&str> = deployments.iter().map(|d| d.model_name.as_str()).collect();
    for (section, list) in [
        ("router_settings.fallbacks", &router.fallbacks),
        (
            "router_settings.context_window_fallbacks",
            &router.context_window_fallbacks,
        ),
        (
            "router_settings.content_policy_fallbacks",
            &router.content_policy_fallbacks,
        ),
        ("litellm_settings.fallbacks", &litellm.fallbacks),
    ] {
        check_fallbacks(section, list, &names, p);
    }
    for (j, to) in router.default_fallbacks.iter().enumerate() {
        check_model(
            format!("router_settings.default_fallbacks[{j}]"),
            to,
            &names,
            p,
        );
    }
    for (group, _) in &router.hedge_after {
        if !names.contains(&group.as_str()) {
            p.error(
                format!("router_settings.hedge_after_ms.{group}"),
                format!(
                    "no model group is named \"{group}\"{}",
                    did_you_mean(group, names.iter().copied())
                ),
            );
        }
    }
    Config {
        deployments,
        general,
        router,
        litellm,
        callbacks,
    }
}

// ---- leaf conversions -------------------------------------------------------------------

pub(super) fn text(v: Option<Scalar>) -> Option<String> {
    v.map(|s| s.text()).filter(|s| !s.trim().is_empty())
}

pub(super) fn whole<T: TryFrom<i128>>(
    path: &str,
    v: Option<Scalar>,
    p: &mut Problems,
) -> Option<T> {
    let v = v?;
    match v.integer().and_then(|i| T::try_from(i).ok()) {
        Some(n) => Some(n),
        None => {
            p.error(
                path,
                format!("expected a whole number ≥ 0, got {:?}", v.text()),
            );
            None
        }
    }
}

pub(super) fn number(
    path: &str,
    v: Option<Scalar>,
    min_exclusive: bool,
    p: &mut Problems,
) -> Option<f64> {
    let v = v?;
    match v.number().filter(|n| n.is_finite()) {
        Some(n) if n > 0.0 || (!min_exclusive && n == 0.0) => Some(n),
        _ => {
            let want = if min_exclusive { "> 0" } else { "≥ 0" };
            p.error(
                path,
                format!("expected a number {want}, got {:?}", v.text()),
            );
            None
        }
    }
}

pub(super) fn seconds(path: &str, v: Option<Scalar>, p: &mut Problems) -> Option<Duration> {
    number(path, v, true, p).map(Duration::from_secs_f64)
}

fn millis(path: &str, v: Option<Scalar>, p: &mut Problems) -> Option<Duration> {
    whole::<u64>(path, v, p).map(Duration::from_millis)
}

pub(super) fn boolean(path: &str, v: Option<Scalar>, p: &mut Problems) -> Option<bool> {
    let v = v?;
    let b = v.boolean();
    if b.is_none() {
        p.error(path, format!("expected true or false, got {:?}", v.text()));
    }
    b
}

pub(super) fn texts(v: Option<OneOrMany>) -> Vec<String> {
    v.map(|v| v.texts()).unwrap_or_default()
}

// ---- sections ---------------------------------------------------------------------------

fn general(raw: super::raw::RawGeneral, env: &dyn Env, p: &mut Problems) -> GeneralSettings {
    let mut g = GeneralSettings {
        master_key: text(raw.master_key).map(Secret::new),
        database_url: text(raw.database_url)
            .or_else(|| env.var("DATABASE_URL").filter(|s| !s.is_empty()))
            .map(Secret::new),
        proxy_batch_write_at: seconds(
            "general_settings.proxy_batch_write_at",
            raw.proxy_batch_write_at,
            p,
        ),
        ..GeneralSettings::default()
    };
    if let Some(mb) = number(
        "general_settings.max_request_size_mb",
        raw.max_request_size_mb,
        true,
        p,
    ) {
        g.max_request_body_bytes = (mb * 1024.0 * 1024.0) as usize;
    }
    g
}

fn router(raw: RawRouter, p: &mut Problems) -> RouterSettings {
    let routing_strategy = text(raw.routing_strategy).and_then(|s| {
        let strategy = Strategy::from_name(&s);
        if strategy.is_none() {
            p.error(
                "router_settings.routing_strategy",
                format!(
                    "unknown routing strategy \"{s}\"{}; one of: {}",
                    did_you_mean(&s, ROUTING_STRATEGIES),
                    ROUTING_STRATEGIES.join(", ")
                ),
            );
        }
        strategy
    });
    let on_client_disconnect = match text(raw.on_client_disconnect).as_deref() {
        None | Some("cancel") => OnDisconnect::Cancel,
        Some("finish") => OnDisconnect::Finish,
        Some(other) => {
            p.error(
                "router_settings.on_client_disconnect",
                format!("expected \"cancel\" or \"finish\", got {other:?}"),
            );
            OnDisconnect::Cancel
        }
    };
    RouterSettings {
        routing_strategy,
        num_retries: whole("router_settings.num_retries", raw.num_retries, p),
        retry_policy: per_kind("retry_policy", "Retries", raw.retry_policy, p),
        retry_after: number("router_settings.retry_after", raw.retry_after, false, p)
            .map(Duration::from_secs_f64),
        retry_backoff: millis("router_settings.retry_backoff_ms", raw.retry_backoff_ms, p),
        timeout: seconds("router_settings.timeout", raw.timeout, p),
        stream_timeout: seconds("router_settings.stream_timeout", raw.stream_timeout, p),
        stream_idle_timeout: seconds(
            "router_settings.stream_idle_timeout",
            raw.stream_idle_timeout,
            p,
        ),
        allowed_fails: whole("router_settings.allowed_fails", raw.allowed_fails, p),
        allowed_fails_policy: per_kind(
            "allowed_fails_policy",
            "AllowedFails",
            raw.allowed_fails_policy,
            p,
        ),
        cooldown_time: number("router_settings.cooldown_time", raw.cooldown_time, false, p)
            .map(Duration::from_secs_f64),
        disable_cooldowns: boolean(
            "router_settings.disable_cooldowns",
            raw.disable_cooldowns,
            p,
        )
        .unwrap_or(false),
        max_fallbacks: whole("router_settings.max_fallbacks", raw.max_fallbacks, p),
        hedge_after: hedges(raw.hedge_after_ms, p),
        on_client_disconnect,
        redis_host: text(raw.redis_host),
        redis_port: whole("router_settings.redis_port", raw.redis_port, p),
        redis_password: text(raw.redis_password).map(Secret::new),
        redis_url: text(raw.redis_url).map(Secret::new),
        fallbacks: fallbacks(raw.fallbacks),
        context_window_fallbacks: fallbacks(raw.context_window_fallbacks),
        content_policy_fallbacks: fallbacks(raw.content_policy_fallbacks),
        default_fallbacks: texts(raw.default_fallbacks),
    }
}

/// LiteLLM's per-kind maps: `retry_policy: {RateLimitErrorRetries: 3}`,
/// `allowed_fails_policy: {TimeoutErrorAllowedFails: 5}`.
fn per_kind(
    section: &str,
    suffix: &str,
    raw: Option<BTreeMap<String, Scalar>>,
    p: &mut Problems,
) -> Vec<(FailureKind, u32)> {
    let mut out = Vec::new();
    for (key, value) in raw.unwrap_or_default() {
        let path = format!("router_settings.{section}.{key}");
        let kind = FailureKind::ALL
            .into_iter()
            .find(|k| key.strip_suffix(suffix) == Some(k.litellm_name()));
        let Some(kind) = kind else {
            let known: Vec<String> = FailureKind::ALL
                .iter()
                .map(|k| format!("{}{suffix}", k.litellm_name()))
                .collect();
            p.error(
                path,
                format!(
                    "unknown key{}; one of: {}",
                    did_you_mean(&key, known.iter().map(String::as_str)),
                    known.join(", ")
                ),
            );
            continue;
        };
        if let Some(n) = whole::<u32>(&path, Some(value), p) {
            out.push((kind, n));
        }
    }
    out
}

/// `hedge_after_ms: {group: 50}` or `{group: "p95"}`.
fn hedges(raw: Option<BTreeMap<String, Scalar>>, p: &mut Problems) -> Vec<(String, HedgeAfter)> {
    let mut out = Vec::new();
    for (group, value) in raw.unwrap_or_default() {
        match HedgeAfter::parse(&value.text()) {
            Some(h) => out.push((group, h)),
            None => p.error(
                format!("router_settings.hedge_after_ms.{group}"),
                format!(
                    "expected milliseconds (e.g. 50) or a percentile of time to first byte (e.g. \"p95\"), got {:?}",
                    value.text()
                ),
            ),
        }
    }
    out
}

fn litellm(
    raw: super::raw::RawLitellm,
    router: &mut RouterSettings,
    p: &mut Problems,
) -> LitellmSettings {
    // LiteLLM accepts these in either section; the router's own setting wins.
    if router.context_window_fallbacks.is_empty() {
        router.context_window_fallbacks = fallbacks(raw.context_window_fallbacks);
    }
    if router.default_fallbacks.is_empty() {
        router.default_fallbacks = texts(raw.default_fallbacks);
    }
    LitellmSettings {
        drop_params: boolean("litellm_settings.drop_params", raw.drop_params, p).unwrap_or(false),
        num_retries: whole("litellm_settings.num_retries", raw.num_retries, p),
        request_timeout: seconds("litellm_settings.request_timeout", raw.request_timeout, p),
        json_logs: boolean("litellm_settings.json_logs", raw.json_logs, p).unwrap_or(false),
        success_callback: texts(raw.success_callback),
        failure_callback: texts(raw.failure_callback),
        callbacks: texts(raw.callbacks),
        turn_off_message_logging: boolean(
            "litellm_settings.turn_off_message_logging",
            raw.turn_off_message_logging,
            p,
        )
        .unwrap_or(false),
        require_auth_for_metrics_endpoint: boolean(
            "litellm_settings.require_auth_for_metrics_endpoint",
            raw.require_auth_for_metrics_endpoint,
            p,
        )
        .unwrap_or(false),
        fallbacks: fallbacks(raw.fallbacks),
    }
}

fn fallbacks(raw: Option<RawFallbacks>) -> Vec<(String, Vec<String>)> {
    raw.unwrap_or_default()
        .into_iter()
        .flat_map(|m| m.into_iter().map(|(k, v)| (k, v.texts())))
        .collect()
}

fn check_fallbacks(
    section: &str,
    list: &[(String, Vec<String>)],
    names: &[&str],
    p: &mut Problems,
) {
    for (i, (from, to)) in list.iter().enumerate() {
        check_model(format!("{section}[{i}].{from}"), from, names, p);
        for (j, t) in to.iter().enumerate() {
            check_model(format!("{section}[{i}].{from}[{j}]"), t, names, p);
        }
    }
}

/// A model a setting refers to must be served by some group.
fn check_model(path: String, name: &str, names: &[&str], p: &mut Problems) {
    if !model_exists(name, names) {
        p.error(
            path,
            format!(
                "unknown model \"{name}\"{}",
                did_you_mean(name, names.iter().copied())
            ),
        );
    }
}

/// Whether a model name is served: a group of that name, or a wildcard group matching it.
fn model_exists(name: &str, names: &[&str]) -> bool {
    names.iter().any(|n| match n.split_once('*') {
        None => *n == name,
        Some((pre, suf)) => {
            *n == name
                || (name.len() >= pre.len() + suf.len()
                    && name.starts_with(pre)
                    && name.ends_with(suf))
        }
    })
}

// ---- deployments ------------------------------------------------------------------------

/// Router-wide timeout defaults a deployment inherits.
struct Timeouts {
    total: Option<Duration>,
    first_chunk: Option<Duration>,
    idle: Option<Duration>,
}

fn deployment(
    i: usize,
    raw: RawModel,
    defaults: &Timeouts,
    env: &dyn Env,
    p: &mut Problems,
) -> Option<Deployment> {
    let at = format!("model_list[{i}]");
    let model_name = text(raw.model_name);
    if model_name.is_none() {
        p.error(format!("{at}.model_name"), "required");
    }
    let Some(params) = raw.litellm_params else {
        p.error(
            format!("{at}.litellm_params"),
            "required (with at least `model`)",
        );
        return None;
    };
    let lp = format!("{at}.litellm_params");
    let model_info = model_info(&at, raw.model_info.unwrap_or_default(), p);
    let (provider, upstream_model) = provider(&lp, &params, p)?;
    let name_missing = model_name.is_none();
    let model_name = model_name.unwrap_or_default();
    let model = params.model.as_ref().map(Scalar::text).unwrap_or_default();
    let mut d = Deployment {
        id: String::new(),
        provider,
        upstream_model,
        api_base: None,
        api_keys: Vec::new(),
        api_version: text(params.api_version.clone()),
        organization: text(params.organization.clone()),
        extra_headers: Vec::new(),
        rpm: whole(&format!("{lp}.rpm"), params.rpm.clone(), p),
        tpm: whole(&format!("{lp}.tpm"), params.tpm.clone(), p),
        weight: number(&format!("{lp}.weight"), params.weight.clone(), true, p),
        timeout: seconds(&format!("{lp}.timeout"), params.timeout.clone(), p).or(defaults.total),
        stream_timeout: seconds(
            &format!("{lp}.stream_timeout"),
            params.stream_timeout.clone(),
            p,
        )
        .or(defaults.first_chunk),
        stream_idle_timeout: seconds(
            &format!("{lp}.stream_idle_timeout"),
            params.stream_idle_timeout.clone(),
            p,
        )
        .or(defaults.idle),
        http: match boolean(
            &format!("{lp}.http2_prior_knowledge"),
            params.http2_prior_knowledge.clone(),
            p,
        ) {
            Some(true) => UpstreamHttp::PriorKnowledge,
            Some(false) | None => UpstreamHttp::Negotiate,
        },
        max_retries: whole(&format!("{lp}.max_retries"), params.max_retries.clone(), p),
        input_cost_per_token: number(
            &format!("{lp}.input_cost_per_token"),
            params.input_cost_per_token.clone(),
            false,
            p,
        ),
        output_cost_per_token: number(
            &format!("{lp}.output_cost_per_token"),
            params.output_cost_per_token.clone(),
            false,
            p,
        ),
        mock: mock_settings(&lp, &params, p),
        aws: None,
        vertex: None,
        price: sluice_core::price::Price::default(),
        model_info,
        model_name,
    };
    if d.provider != Provider::Mock && params.mock_response.is_some() {
        p.warn(
            format!("{lp}.mock_response"),
            format!(
                "set on a {} deployment: the built-in mock answers instead of the provider",
                d.provider.name()
            ),
        );
        d.provider = Provider::Mock;
    }
    upstream(&lp, &mut d, params, env, p);
    if d.http == UpstreamHttp::PriorKnowledge
        && d.api_base
            .as_deref()
            .is_none_or(|b| !b.starts_with("http://"))
    {
        p.warn(
            format!("{lp}.http2_prior_knowledge"),
            "only for http:// upstreams (https:// ones negotiate HTTP/2 already); ignored",
        );
        d.http = UpstreamHttp::Negotiate;
    }
    d.id = d
        .model_info
        .id
        .clone()
        .unwrap_or_else(|| derived_id(&d, &model));
    (!name_missing).then_some(d)
}

/// Which provider serves `litellm_params.model`, and the model name it knows.
fn provider(lp: &str, params: &RawParams, p: &mut Problems) -> Option<(Provider, String)> {
    let Some(model) = text(params.model.clone()) else {
        p.error(
            format!("{lp}.model"),
            "required, as provider/model (e.g. openai/gpt-4o)",
        );
        return None;
    };
    let unknown = |prefix: &str| {
        let hint = match Provider::suggest(prefix) {
            Some(s) => format!(" (did you mean \"{s}\"?)"),
            None => format!("; known: {}", Provider::ALL.map(Provider::name).join(", ")),
        };
        format!("unknown provider \"{prefix}\"{hint}")
    };
    if let Some(custom) = text(params.custom_llm_provider.clone()) {
        let Some(provider) = Provider::from_prefix(&custom) else {
            p.error(format!("{lp}.custom_llm_provider"), unknown(&custom));
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
            None if params.api_base.is_some() || params.base_url.is_some() => {
                (Provider::CustomOpenAi, model.clone())
            }
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
    if rest.trim().is_empty() {
        p.error(
            format!("{lp}.model"),
            format!("\"{model}\" names no model after the provider"),
        );
        return None;
    }
    Some((provider, rest))
}

/// Base URL, key, API version and headers: given, else from the environment, else defaults.
fn upstream(lp: &str, d: &mut Deployment, params: RawParams, env: &dyn Env, p: &mut Problems) {
    let spec = d.provider.spec();
    for (name, value) in params.extra_headers.clone().unwrap_or_default() {
        let value = value.text();
        let name_ok = http::HeaderName::from_bytes(name.as_bytes()).is_ok();
        if !name_ok || http::HeaderValue::from_str(&value).is_err() {
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
        d.extra_headers.push((name, Secret::new(value)));
    }
    if spec.wire == Wire::Mock || spec.wire == Wire::NotYetSupported {
        if spec.wire == Wire::NotYetSupported {
            p.warn(
                format!("{lp}.model"),
                format!(
                    "sluice cannot call {} yet; requests to \"{}\" will answer 501",
                    spec.prefix, d.model_name
                ),
            );
        }
        return;
    }
    let region = (spec.wire == Wire::Bedrock).then(|| aws_region(&params, env));
    if let Some(region) = &region {
        d.aws = aws_settings(lp, &params, region, env, p);
    }
    if spec.wire == Wire::Vertex {
        d.vertex = vertex_settings(lp, &params, env, p);
        if d.vertex.is_none() {
            // The problem is reported; the URL would only add a follow-on error.
            return;
        }
    }
    let vertex_base = d.vertex.as_ref().map(|v| match v.location.as_str() {
        "global" => "https://aiplatform.googleapis.com".to_owned(),
        l => format!("https://{l}-aiplatform.googleapis.com"),
    });
    let given = text(params.api_base)
        .or_else(|| text(params.base_url))
        .or_else(|| text(params.aws_bedrock_runtime_endpoint));
    let base_path = format!("{lp}.api_base");
    let base = match &given {
        Some(b) => Some(b.clone()),
        None => spec
            .base_env
            .iter()
            .find_map(|v| env.var(v).filter(|s| !s.is_empty()))
            .or_else(|| spec.default_base.map(str::to_owned))
            .or_else(|| {
                region
                    .as_ref()
                    .map(|r| format!("https://bedrock-runtime.{r}.amazonaws.com"))
            })
            .or(vertex_base),
    };
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
        return;
    };
    match normalise_base(&base, given.is_some().then_some(spec.base_suffix).flatten()) {
        Ok(b) => d.api_base = Some(b),
        Err(why) => p.error(base_path, why),
    }
    d.api_keys = api_keys(lp, params.api_key, p);
    if d.api_keys.is_empty() {
        d.api_keys = spec
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
    let hosted = spec.default_base.is_some_and(|b| b.starts_with("https://"))
        || spec.key_header == KeyHeader::AzureApiKey;
    let key_path = format!("{lp}.api_key");
    let already_warned = p.warnings.iter().any(|w| w.path == key_path);
    if d.api_keys.is_empty() && hosted && !already_warned {
        let vars = spec.key_env.join(" or ");
        p.warn(
            format!("{lp}.api_key"),
            format!(
                "not set and neither is {vars}; requests to \"{}\" will go without a key",
                d.model_name
            ),
        );
    }
    if spec.wire == Wire::Azure && d.api_version.is_none() {
        d.api_version = Some(
            env.var("AZURE_API_VERSION")
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| DEFAULT_AZURE_API_VERSION.to_owned()),
        );
    }
}

/// AWS credentials and region for a Bedrock deployment: `litellm_params`, else the standard
/// AWS environment variables. Without a key pair requests would go unsigned: a warning, and
/// `None` (the deployment answers AWS's 403).
fn aws_settings(
    lp: &str,
    params: &RawParams,
    region: &str,
    env: &dyn Env,
    p: &mut Problems,
) -> Option<AwsSettings> {
    let pick = |given: &Option<Scalar>, var: &str| {
        text(given.clone()).or_else(|| env.var(var).filter(|s| !s.is_empty()))
    };
    if !region
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-')
    {
        p.error(
            format!("{lp}.aws_region_name"),
            format!("not an AWS region: {region:?}"),
        );
        return None;
    }
    let key = pick(&params.aws_access_key_id, "AWS_ACCESS_KEY_ID");
    let secret = pick(&params.aws_secret_access_key, "AWS_SECRET_ACCESS_KEY");
    let (Some(key), Some(secret)) = (key, secret) else {
        p.warn(
            format!("{lp}.aws_access_key_id"),
            "aws_access_key_id and aws_secret_access_key are not set and neither are \
             AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; requests will go unsigned",
        );
        return None;
    };
    Some(AwsSettings {
        access_key_id: Secret::new(key),
        secret_access_key: Secret::new(secret),
        session_token: pick(&params.aws_session_token, "AWS_SESSION_TOKEN").map(Secret::new),
        region: region.to_owned(),
    })
}

/// A Google service-account key file, given inline (JSON) or as a path, read and checked at
/// load (Vertex AI credentials, the GCS callback): the JSON as a secret, and parsed.
pub(super) fn service_account_key(
    path: &str,
    given: &str,
    p: &mut Problems,
) -> Option<(Secret, serde_json::Value)> {
    let json = if given.trim_start().starts_with('{') {
        given.to_owned()
    } else {
        match std::fs::read_to_string(given) {
            Ok(t) => t,
            Err(e) => {
                p.error(path, format!("cannot read {given:?}: {e}"));
                return None;
            }
        }
    };
    let key: serde_json::Value = match serde_json::from_str(&json) {
        Ok(v) => v,
        Err(e) => {
            p.error(path, format!("not a service-account key file: {e}"));
            return None;
        }
    };
    for field in ["client_email", "private_key", "token_uri"] {
        if !key[field].is_string() {
            p.error(path, format!("the key file has no `{field}`"));
            return None;
        }
    }
    Some((Secret::new(json), key))
}

/// Project, location and service-account key of a Vertex AI deployment. The key is read at
/// load (a path or inline JSON); without one requests go unauthenticated (a warning; Google
/// answers 401).
fn vertex_settings(
    lp: &str,
    params: &RawParams,
    env: &dyn Env,
    p: &mut Problems,
) -> Option<VertexSettings> {
    let pick = |given: &Option<Scalar>, vars: &[&str]| {
        text(given.clone()).or_else(|| {
            vars.iter()
                .find_map(|v| env.var(v).filter(|s| !s.is_empty()))
        })
    };
    let path = format!("{lp}.vertex_credentials");
    let mut key = serde_json::Value::Null;
    let credentials = match pick(
        &params.vertex_credentials,
        &["GOOGLE_APPLICATION_CREDENTIALS"],
    ) {
        None => {
            p.warn(
                &path,
                "not set and neither is GOOGLE_APPLICATION_CREDENTIALS; requests will go without \
                 a token (application-default credentials are not read)",
            );
            None
        }
        Some(given) => {
            let (json, parsed) = service_account_key(&path, &given, p)?;
            key = parsed;
            Some(json)
        }
    };
    let project = pick(
        &params.vertex_project,
        &["VERTEXAI_PROJECT", "GOOGLE_CLOUD_PROJECT"],
    )
    .or_else(|| key["project_id"].as_str().map(str::to_owned));
    let Some(project) = project else {
        p.error(
            format!("{lp}.vertex_project"),
            "required (or set VERTEXAI_PROJECT)",
        );
        return None;
    };
    let location = pick(&params.vertex_location, &["VERTEXAI_LOCATION"])
        .unwrap_or_else(|| "us-central1".to_owned());
    let safe = |s: &str| s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    if !safe(&project) || !safe(&location) {
        p.error(
            format!("{lp}.vertex_project"),
            "project and location must be plain names",
        );
        return None;
    }
    Some(VertexSettings {
        project,
        location,
        credentials,
    })
}

/// `aws_region_name`, else `AWS_REGION` / `AWS_DEFAULT_REGION`, else `us-east-1`.
fn aws_region(params: &RawParams, env: &dyn Env) -> String {
    text(params.aws_region_name.clone())
        .or_else(|| {
            ["AWS_REGION", "AWS_DEFAULT_REGION"]
                .iter()
                .find_map(|v| env.var(v).filter(|s| !s.is_empty()))
        })
        .unwrap_or_else(|| "us-east-1".to_owned())
}

/// `api_key` as one key or a weighted list; empty values are left out (an unset environment
/// reference already warned).
fn api_keys(lp: &str, raw: Option<RawKeys>, p: &mut Problems) -> Vec<ApiKey> {
    let entries = match raw {
        None => return Vec::new(),
        Some(RawKeys::One(k)) => vec![RawKey::Plain(k)],
        Some(RawKeys::Many(list)) => list,
    };
    let mut keys = Vec::with_capacity(entries.len());
    for (i, entry) in entries.into_iter().enumerate() {
        let (key, weight) = match entry {
            RawKey::Plain(k) => (k, None),
            RawKey::Weighted { key, weight } => (key, weight),
        };
        let weight = number(&format!("{lp}.api_key[{i}].weight"), weight, true, p);
        if let Some(key) = text(Some(key)) {
            keys.push(ApiKey {
                key: Secret::new(key),
                weight: weight.unwrap_or(1.0),
            });
        }
    }
    keys
}

/// Check an `api_base` and put it in the one form the target builder expects: no trailing
/// `/`, no endpoint path a user copied along, the provider's path suffix when it lacks one.
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

fn mock_settings(lp: &str, params: &RawParams, p: &mut Problems) -> MockSettings {
    let d = MockSettings::default();
    let positive = |name: &str, v: &Option<Scalar>, p: &mut Problems, default: u32| {
        let path = format!("{lp}.{name}");
        match whole::<u32>(&path, v.clone(), p) {
            Some(0) => {
                p.error(path, "expected a whole number ≥ 1, got \"0\"");
                default
            }
            Some(n) => n,
            None => default,
        }
    };
    MockSettings {
        response: params.mock_response.as_ref().map(Scalar::text),
        latency: millis(
            &format!("{lp}.mock_latency_ms"),
            params.mock_latency_ms.clone(),
            p,
        )
        .unwrap_or(d.latency),
        chunk_interval: millis(
            &format!("{lp}.mock_chunk_interval_ms"),
            params.mock_chunk_interval_ms.clone(),
            p,
        )
        .unwrap_or(d.chunk_interval),
        chunks: positive("mock_chunks", &params.mock_chunks, p, d.chunks),
        response_tokens: positive(
            "mock_response_tokens",
            &params.mock_response_tokens,
            p,
            d.response_tokens,
        ),
        embedding_dims: positive(
            "mock_embedding_dims",
            &params.mock_embedding_dims,
            p,
            d.embedding_dims,
        ),
        faults: mock_faults(lp, params, p),
        // In-process mock deployments are never signed.
        aws: None,
        wire: text(params.mock_wire.clone()).and_then(|w| {
            let wire = MockWire::parse(&w);
            if wire.is_none() {
                p.error(
                    format!("{lp}.mock_wire"),
                    format!("expected gemini or bedrock, got {w:?}"),
                );
            }
            wire
        }),
    }
}

fn mock_faults(lp: &str, params: &RawParams, p: &mut Problems) -> Faults {
    let at = |name: &str| format!("{lp}.{name}");
    let status = whole::<u16>(&at("mock_status"), params.mock_status.clone(), p);
    if let Some(s) = status.filter(|s| !(400..=599).contains(s)) {
        p.error(
            at("mock_status"),
            format!("expected an HTTP error status (400–599), got {s}"),
        );
    }
    let failure_rate = number(
        &at("mock_failure_rate"),
        params.mock_failure_rate.clone(),
        false,
        p,
    );
    if failure_rate.is_some_and(|r| r > 1.0) {
        p.error(at("mock_failure_rate"), "expected a share between 0 and 1");
    }
    Faults {
        status: status.filter(|s| (400..=599).contains(s)),
        failure_rate: failure_rate.map(|r| r.min(1.0)),
        retry_after: number(
            &at("mock_retry_after"),
            params.mock_retry_after.clone(),
            false,
            p,
        ),
        reset: boolean(&at("mock_reset"), params.mock_reset.clone(), p).unwrap_or(false),
        stall_after_chunks: whole(
            &at("mock_stall_after_chunks"),
            params.mock_stall_after_chunks.clone(),
            p,
        ),
        stall: millis(&at("mock_stall_ms"), params.mock_stall_ms.clone(), p).unwrap_or_default(),
        cut_after_chunks: whole(
            &at("mock_cut_after_chunks"),
            params.mock_cut_after_chunks.clone(),
            p,
        ),
    }
}

fn model_info(at: &str, raw: BTreeMap<String, Value>, p: &mut Problems) -> ModelInfo {
    let field = |key: &str, p: &mut Problems| match raw.get(key) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if !s.trim().is_empty() => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        Some(_) => {
            p.error(format!("{at}.model_info.{key}"), "expected a string");
            None
        }
    };
    ModelInfo {
        id: field("id", p),
        mode: field("mode", p),
        base_model: field("base_model", p),
    }
}

/// A stable id for a deployment without `model_info.id`: the same entry gets the same id on
/// every load and every instance of a fleet.
fn derived_id(d: &Deployment, model: &str) -> String {
    let mut h = Sha256::new();
    for part in [
        d.model_name.as_str(),
        model,
        d.api_base.as_deref().unwrap_or_default(),
        d.api_keys
            .first()
            .map(|k| k.key.expose())
            .unwrap_or_default(),
    ] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    h.finalize()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Resolves every deployment's price once, from the embedded table or the LiteLLM-format file
/// named by `LITELLM_MODEL_COST_MAP_URL`; a deployment nothing prices is worth a warning, since
/// its spend would silently read 0.
fn price_all(deployments: &mut [(usize, Deployment)], env: &dyn Env, p: &mut Problems) {
    use crate::spend::{PriceSource, PriceTable, COST_MAP_ENV};
    let table = match PriceTable::from_location(env.var(COST_MAP_ENV).as_deref()) {
        Ok(t) => t,
        Err(e) => {
            p.error(COST_MAP_ENV, e.to_string());
            PriceTable::embedded()
        }
    };
    for (i, d) in deployments.iter_mut() {
        let (price, source) = table.resolve(d);
        d.price = price;
        if source == PriceSource::Unknown && d.provider != Provider::Mock {
            p.warn(
                format!("model_list[{i}].litellm_params.model"),
                format!(
                    "no price known for {}/{}: its requests will cost 0 (set \
                     model_info.base_model, or input_cost_per_token and output_cost_per_token)",
                    d.provider.name(),
                    d.upstream_model
                ),
            );
        }
    }
}

/// Ids given in `model_info.id` must be unique; derived ids of identical entries get a suffix.
fn unique_ids(deployments: &mut [(usize, Deployment)], p: &mut Problems) {
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (i, d) in deployments.iter_mut() {
        let id = d.id.clone();
        if let Some(first) = seen.get(&id).copied() {
            if d.model_info.id.is_some() {
                p.error(
                    format!("model_list[{i}].model_info.id"),
                    format!("duplicate deployment id \"{id}\" (also model_list[{first}])"),
                );
                continue;
            }
            let mut n = 2;
            while seen.contains_key(&format!("{id}-{n}")) {
                n += 1;
            }
            d.id = format!("{id}-{n}");
        }
        seen.insert(d.id.clone(), *i);
    }
}
