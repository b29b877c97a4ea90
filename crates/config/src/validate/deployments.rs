//! `model_list`: each entry's group name, limits, timeouts and prices here; its upstream by
//! its provider's module (`sluice_providers::settings::read`), handed the keys only providers
//! read. Keys nobody reads are warnings that name them; ids are made unique; every deployment
//! is priced once.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use ring::digest::{Context, SHA256};
use serde_yaml_ng::Value;
use sluice_core::settings::read::{boolean, number, seconds, text, whole};
use sluice_core::settings::{did_you_mean, Env, Params, Problems, Scalar};
use sluice_core::Secret;
use sluice_providers::{provider_keys, settings, ApiKey, Given};

use crate::model::{Deployment, HealthCheckInfo, ModelInfo, UnitCosts};
use crate::prices::{PriceSource, PriceTable, COST_MAP_ENV};
use crate::raw::{RawKey, RawKeys, RawModel, PARAM_KEYS};
use sluice_core::rules::RuleBook;

/// Router-wide timeout defaults a deployment inherits.
pub(super) struct Defaults {
    /// `timeout`.
    pub total: Option<Duration>,
    /// `stream_timeout`.
    pub first_chunk: Option<Duration>,
    /// `stream_idle_timeout`.
    pub idle: Option<Duration>,
    /// `litellm_settings`' upstream TLS keys.
    pub tls: super::tls::TlsKeys,
}

/// Validate every entry of `model_list`, then make ids unique and price each deployment.
pub(super) fn deployments(
    entries: Vec<RawModel>,
    defaults: &Defaults,
    env: &dyn Env,
    p: &mut Problems,
) -> Vec<Deployment> {
    if entries.is_empty() {
        p.warn(
            "model_list",
            "no models configured; every inference request will answer 404",
        );
    }
    let mut indexed = Vec::with_capacity(entries.len());
    for (i, entry) in entries.into_iter().enumerate() {
        if let Some(d) = deployment(i, entry, defaults, env, p) {
            indexed.push((i, d));
        }
    }
    unique_ids(&mut indexed, p);
    price_all(&mut indexed, env, p);
    indexed.into_iter().map(|(_, d)| d).collect()
}

fn deployment(
    i: usize,
    raw: RawModel,
    defaults: &Defaults,
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
    let mut model_info = model_info(&at, raw.model_info.unwrap_or_default(), p);
    let model = params.model.as_ref().map(Scalar::text).unwrap_or_default();
    let at_key = |key: &str| format!("{lp}.{key}");
    let rpm = whole(&at_key("rpm"), params.rpm, p);
    let tpm = whole(&at_key("tpm"), params.tpm, p);
    let weight = number(&at_key("weight"), params.weight, true, p);
    let timeout = seconds(&at_key("timeout"), params.timeout, p).or(defaults.total);
    let stream_timeout =
        seconds(&at_key("stream_timeout"), params.stream_timeout, p).or(defaults.first_chunk);
    let stream_idle_timeout = seconds(
        &at_key("stream_idle_timeout"),
        params.stream_idle_timeout,
        p,
    )
    .or(defaults.idle);
    let max_retries = whole(&at_key("max_retries"), params.max_retries, p);
    let num_retries = whole(&at_key("num_retries"), params.num_retries, p);
    let input_cost_per_token = number(
        &at_key("input_cost_per_token"),
        params.input_cost_per_token,
        false,
        p,
    );
    let output_cost_per_token = number(
        &at_key("output_cost_per_token"),
        params.output_cost_per_token,
        false,
        p,
    );
    let cost =
        |key: &str, value: Option<Scalar>, p: &mut Problems| number(&at_key(key), value, false, p);
    let unit_costs = UnitCosts {
        per_image: cost("output_cost_per_image", params.output_cost_per_image, p),
        per_pixel: cost("input_cost_per_pixel", params.input_cost_per_pixel, p),
        per_second: match (
            cost("input_cost_per_second", params.input_cost_per_second, p),
            cost("output_cost_per_second", params.output_cost_per_second, p),
        ) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
        },
        per_character: cost(
            "input_cost_per_character",
            params.input_cost_per_character,
            p,
        ),
        per_query: cost("input_cost_per_query", params.input_cost_per_query, p),
        per_page: cost("ocr_cost_per_page", params.ocr_cost_per_page, p),
    };
    let tags = tags(&lp, params.tags.as_ref(), p);
    let use_in_pass_through = boolean(
        &at_key("use_in_pass_through"),
        params.use_in_pass_through,
        p,
    )
    .unwrap_or(false);
    let given = Given {
        model: text(params.model),
        custom_llm_provider: text(params.custom_llm_provider),
        api_base: text(params.api_base).or_else(|| text(params.base_url)),
        api_keys: api_keys(&lp, params.api_key, p),
        extra_headers: params
            .extra_headers
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.text()))
            .collect(),
        http2_prior_knowledge: boolean(
            &at_key("http2_prior_knowledge"),
            params.http2_prior_knowledge,
            p,
        ),
        tls: super::tls::TlsKeys::at(
            &lp,
            params.ssl_verify,
            params.ssl_certificate,
            params.ssl_certificate_key,
        )
        .over(&defaults.tls)
        .load(p),
        region_name: text(params.region_name).filter(|r| !r.trim().is_empty()),
    };
    let provider_params = provider_params(&lp, params.rest, p);
    let model_name = model_name.unwrap_or_default();
    let upstream = settings::read(&model_name, given, &provider_params, env, p)?;
    // LiteLLM's `/health` takes a text-completion model for one without being told.
    if model_info.mode.is_none() && upstream.provider.name() == "text-completion-openai" {
        model_info.mode = Some("completion".to_owned());
    }
    let mut d = Deployment {
        id: String::new(),
        upstream,
        rpm,
        tpm,
        weight,
        timeout,
        stream_timeout,
        stream_idle_timeout,
        max_retries,
        num_retries,
        input_cost_per_token,
        output_cost_per_token,
        unit_costs,
        price: sluice_core::price::Price::default(),
        image_prices: sluice_core::price::ImagePrices::default(),
        rules: sluice_core::rules::ModelRules::default(),
        rule_book: None,
        model_info,
        model_name,
        use_in_pass_through,
        tags,
    };
    d.id = d
        .model_info
        .id
        .clone()
        .unwrap_or_else(|| derived_id(&d, &model));
    (!d.model_name.is_empty()).then_some(d)
}

/// The keys of `litellm_params` the configuration does not read: a provider's (handed to its
/// module as written), or nobody's (a warning naming the key).
fn provider_params(lp: &str, rest: BTreeMap<String, Value>, p: &mut Problems) -> Params {
    let mut values = BTreeMap::new();
    for (key, value) in rest {
        if !provider_keys().any(|k| k == key) {
            let known = PARAM_KEYS.iter().copied().chain(provider_keys());
            p.warn(
                format!("{lp}.{key}"),
                format!("not used by sluice; ignored{}", did_you_mean(&key, known)),
            );
            continue;
        }
        if value.is_null() {
            continue;
        }
        match serde_yaml_ng::from_value::<Scalar>(value) {
            Ok(v) => {
                values.insert(key, v);
            }
            Err(e) => p.error(format!("{lp}.{key}"), e.to_string()),
        }
    }
    Params::new(lp, values)
}

/// `model_info`: strings (a number is taken as its text).
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
        db_model: matches!(raw.get("db_model"), Some(Value::Bool(true))),
        access_groups: access_groups(at, raw.get("access_groups"), p),
        health_check: health_check(at, &raw, p),
    }
}

/// `model_info.health_check_*`: what LiteLLM's background health checks read of a deployment.
fn health_check(at: &str, raw: &BTreeMap<String, Value>, p: &mut Problems) -> HealthCheckInfo {
    let scalar = |key: &str| {
        raw.get(key)
            .and_then(|v| serde_yaml_ng::from_value::<Scalar>(v.clone()).ok())
    };
    let path = |key: &str| format!("{at}.model_info.{key}");
    HealthCheckInfo {
        model: text(scalar("health_check_model")),
        timeout: seconds(
            &path("health_check_timeout"),
            scalar("health_check_timeout"),
            p,
        ),
        disabled: boolean(
            &path("disable_background_health_check"),
            scalar("disable_background_health_check"),
            p,
        )
        .unwrap_or(false),
        max_tokens: whole(
            &path("health_check_max_tokens"),
            scalar("health_check_max_tokens"),
            p,
        ),
    }
}

/// `model_info.access_groups`: a list of non-empty names (one name alone is taken as a list of
/// one, as YAML authors write it).
fn access_groups(at: &str, raw: Option<&Value>, p: &mut Problems) -> Vec<Arc<str>> {
    let path = format!("{at}.model_info.access_groups");
    let one = |v: &Value, p: &mut Problems| match v {
        Value::String(s) if !s.trim().is_empty() => Some(Arc::from(s.trim())),
        _ => {
            p.error(path.clone(), "expected a list of non-empty names");
            None
        }
    };
    match raw {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Sequence(items)) => items.iter().filter_map(|v| one(v, p)).collect(),
        Some(v) => one(v, p).into_iter().collect(),
    }
}

/// `litellm_params.tags`: a list of non-empty strings, kept as written (LiteLLM compares them
/// exactly); one string alone is taken as a list of one, as `access_groups` is. A bad element
/// is an error naming its index, so a typo cannot quietly leave a deployment out of its tier.
fn tags(lp: &str, raw: Option<&Value>, p: &mut Problems) -> Arc<[Arc<str>]> {
    let path = format!("{lp}.tags");
    let one = |at: String, v: &Value, p: &mut Problems| match v {
        Value::String(s) if !s.trim().is_empty() => Some(Arc::from(s.as_str())),
        Value::String(_) => {
            p.error(at, "expected a non-empty tag");
            None
        }
        other => {
            p.error(
                at,
                format!("expected a tag (a string), got {}", yaml_kind(other)),
            );
            None
        }
    };
    match raw {
        None | Some(Value::Null) => Arc::new([]),
        Some(Value::Sequence(items)) => items
            .iter()
            .enumerate()
            .filter_map(|(i, v)| one(format!("{path}[{i}]"), v, p))
            .collect(),
        Some(v @ Value::String(_)) => one(path, v, p).into_iter().collect(),
        Some(other) => {
            p.error(
                path,
                format!("expected a list of tags, got {}", yaml_kind(other)),
            );
            Arc::new([])
        }
    }
}

/// What kind of YAML value `v` is, for messages.
fn yaml_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Sequence(_) => "a list",
        Value::Mapping(_) => "a mapping",
        Value::Tagged(_) => "a tagged value",
    }
}

/// A stable id for a deployment without `model_info.id`: the same entry gets the same id on
/// every load and every instance of a fleet.
fn derived_id(d: &Deployment, model: &str) -> String {
    let mut h = Context::new(&SHA256);
    for part in [
        d.model_name.as_str(),
        model,
        d.upstream.api_base.as_deref().unwrap_or_default(),
        d.upstream
            .api_keys
            .first()
            .map(|k| k.key.expose())
            .unwrap_or_default(),
    ] {
        h.update(part.as_bytes());
        h.update(&[0]);
    }
    h.finish().as_ref()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Resolves every deployment's price once, from the embedded table or the LiteLLM-format file
/// named by `LITELLM_MODEL_COST_MAP_URL`; a deployment nothing prices is worth a warning, since
/// its spend would silently read 0.
fn price_all(deployments: &mut [(usize, Deployment)], env: &dyn Env, p: &mut Problems) {
    let table = match PriceTable::from_location(env.var(COST_MAP_ENV).as_deref()) {
        Ok(t) => t,
        Err(e) => {
            p.error(COST_MAP_ENV, e.to_string());
            PriceTable::embedded()
        }
    };
    for (i, d) in deployments.iter_mut() {
        let resolved = table.resolve(d);
        d.price = resolved.price;
        d.image_prices = resolved.images;
        d.rules = resolved.rules;
        if d.upstream.model.contains('*') {
            let (table, prefix) = (table.clone(), d.provider().name());
            d.rule_book = Some(RuleBook::new(move |model| table.rules_for(prefix, model)));
        }
        if resolved.source == PriceSource::Unknown && d.provider().priced() {
            p.warn(
                format!("model_list[{i}].litellm_params.model"),
                format!(
                    "no price known for {}/{}: its requests will cost 0 (set \
                     model_info.base_model, or input_cost_per_token and output_cost_per_token)",
                    d.provider().name(),
                    d.upstream.model
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
