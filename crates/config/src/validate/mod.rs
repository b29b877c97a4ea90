//! Raw config → validated [`Config`], one section per module: every value checked and
//! defaulted, each problem recorded with its exact path, so the rest of sluice never sees an
//! invalid state. A deployment's upstream is validated by its provider's module
//! (`sluice_providers::settings`); `deployments` hands it the keys only providers read.

mod alerting;
mod cache;
mod callbacks;
mod custom_routes;
mod deployments;
mod general;
mod guardrails;
mod jwt;
mod litellm;
mod mcp;
mod passthrough;
mod redis;
mod router;
mod search_tools;
pub(crate) mod secrets;
mod tls;
mod vendors;

use sluice_core::settings::{did_you_mean, Env, Problems};

use crate::model::{Config, Deployment};
use crate::raw::{OneOrMany, RawCallback, RawConfig};
pub use router::ROUTING_STRATEGIES;

/// Validate the whole config, recording every problem.
pub(crate) fn validate(raw: RawConfig, env: &dyn Env, p: &mut Problems) -> Config {
    let general = general::general(raw.general_settings.unwrap_or_default(), env, p);
    let mut litellm_raw = raw.litellm_settings.unwrap_or_default();
    let s3_params = litellm_raw.s3_callback_params.take();
    let gcs_params = RawCallback {
        gcs_bucket_name: litellm_raw.gcs_bucket_name.take(),
        gcs_path_service_account: litellm_raw.gcs_path_service_account.take(),
        ..Default::default()
    };
    let tls = tls::TlsKeys::global(
        litellm_raw.ssl_verify.take(),
        litellm_raw.ssl_certificate.take(),
        litellm_raw.ssl_certificate_key.take(),
        env,
    );
    let mut router_raw = raw.router_settings.unwrap_or_default();
    let alias_sections = [
        ("router_settings", router_raw.model_group_alias.take()),
        ("litellm_settings", litellm_raw.model_group_alias.take()),
    ];
    let mut router = router::router(router_raw, p);
    let litellm = litellm::litellm(litellm_raw, &mut router, env, p);
    let mut callbacks = callbacks::callbacks(
        &litellm,
        raw.callback_settings.unwrap_or_default(),
        s3_params,
        gcs_params,
        env,
        p,
    );
    callbacks.spend_log_content =
        general.store_prompts_in_spend_logs && !litellm.turn_off_message_logging;
    let defaults = deployments::Defaults {
        total: router.timeout.or(litellm.request_timeout),
        first_chunk: router.stream_timeout,
        idle: router.stream_idle_timeout,
        tls,
    };

    let deployments: Vec<Deployment> =
        deployments::deployments(raw.model_list.unwrap_or_default(), &defaults, env, p);

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
        litellm::check_fallbacks(section, list, &names, p);
    }
    router.model_group_alias = router::aliases(
        alias_sections,
        &names,
        |name| litellm::model_exists(name, &names),
        p,
    );
    for (j, to) in router.default_fallbacks.iter().enumerate() {
        litellm::check_model(
            format!("router_settings.default_fallbacks[{j}]"),
            to,
            &names,
            p,
        );
    }
    // A semantic cache's embedding model is a group of this config.
    if let Some(s) = litellm.cache.as_ref().and_then(|c| c.semantic.as_ref()) {
        litellm::check_model(
            format!("litellm_settings.cache_params.{}", s.embedding_model_key),
            &s.embedding_model,
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
    let pass_through = passthrough::pass_through(&deployments, &router, &litellm, env, p);
    let mcp = mcp::mcp_servers(raw.mcp_servers, p);
    // A moderation guardrail's `model` is a group of this config.
    for (i, g) in raw.guardrails.iter().flatten().enumerate() {
        let Some(params) = &g.litellm_params else {
            continue;
        };
        let kind = sluice_core::settings::read::text(params.guardrail.clone());
        if kind.as_deref() != Some("openai_moderation") {
            continue;
        }
        if let Some(model) = sluice_core::settings::read::text(params.model.clone()) {
            if !model.trim().is_empty() && !names.contains(&model.as_str()) {
                p.error(
                    format!("guardrails[{i}].litellm_params.model"),
                    format!(
                        "no model group is named \"{model}\"{}",
                        did_you_mean(&model, names.iter().copied())
                    ),
                );
            }
        }
    }
    let guardrails = guardrails::guardrails(raw.guardrails, env, p);
    let search_tools = search_tools::search_tools(raw.search_tools, &pass_through.prices, env, p);
    Config {
        deployments,
        general,
        router,
        litellm,
        callbacks,
        pass_through,
        mcp,
        guardrails,
        search_tools,
    }
}

/// A list of entries at `at` (LiteLLM's `pass_through_endpoints`, `search_tools`): each typed
/// as `R` and made by `make` (given its own path, `at[i]`), its problems named by entry and
/// field; an entry whose `name` (at `name_field`) an earlier one has is refused.
pub(super) fn entries<R: serde::de::DeserializeOwned, T>(
    raw: Option<serde_yaml_ng::Value>,
    (at, expected): (&str, &str),
    p: &mut Problems,
    mut make: impl FnMut(R, &str, &mut Problems) -> Option<T>,
    (name_field, name): (&str, fn(&T) -> &str),
) -> Vec<T> {
    let Some(raw) = raw.filter(|v| !v.is_null()) else {
        return Vec::new();
    };
    let serde_yaml_ng::Value::Sequence(items) = raw else {
        p.error(at, format!("expected a list of {expected}"));
        return Vec::new();
    };
    let mut out: Vec<T> = Vec::new();
    for (i, item) in items.into_iter().enumerate() {
        let here = format!("{at}[{i}]");
        let r: R = match serde_yaml_ng::from_value(item) {
            Ok(r) => r,
            Err(e) => {
                p.error(&here, e.to_string());
                continue;
            }
        };
        let Some(made) = make(r, &here, p) else {
            continue;
        };
        if out.iter().any(|o| name(o) == name(&made)) {
            p.error(
                format!("{here}.{name_field}"),
                format!("{} is declared twice", name(&made)),
            );
            continue;
        }
        out.push(made);
    }
    out
}

/// Every text of a string-or-list value.
pub(crate) fn texts(v: Option<OneOrMany>) -> Vec<String> {
    v.map(|v| v.texts()).unwrap_or_default()
}
