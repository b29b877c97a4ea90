//! `litellm_settings` (its fallbacks may also stand in the router's section), and the checks
//! that every model a fallback names is served.

use sluice_core::settings::read::{boolean, number, seconds, text, whole};
use sluice_core::settings::{did_you_mean, Env, Problems};

use super::texts;
use crate::model::{KeyBounds, LitellmSettings, RouterSettings};
use crate::raw::{RawFallbacks, RawKeyBounds, RawLitellm};

/// Validate `litellm_settings`.
pub(super) fn litellm(
    raw: RawLitellm,
    router: &mut RouterSettings,
    env: &dyn Env,
    p: &mut Problems,
) -> LitellmSettings {
    // LiteLLM accepts these in either section; the router's own setting wins.
    if router.context_window_fallbacks.is_empty() {
        router.context_window_fallbacks = fallbacks(raw.context_window_fallbacks);
    }
    if router.default_fallbacks.is_empty() {
        router.default_fallbacks = texts(raw.default_fallbacks);
    }
    let cache = super::cache::cache(
        raw.cache,
        raw.cache_params,
        raw.dedupe_in_flight,
        &router.redis,
        env,
        p,
    );
    LitellmSettings {
        cache,
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
        key_bounds: key_bounds(raw.upperbound_key_generate_params, p),
    }
}

/// `upperbound_key_generate_params`, each value checked as its key field is.
fn key_bounds(raw: Option<RawKeyBounds>, p: &mut Problems) -> KeyBounds {
    let Some(raw) = raw else {
        return KeyBounds::default();
    };
    const AT: &str = "litellm_settings.upperbound_key_generate_params";
    KeyBounds {
        max_budget: number(&format!("{AT}.max_budget"), raw.max_budget, false, p),
        budget_duration: text(raw.budget_duration),
        duration: text(raw.duration),
        max_parallel_requests: whole(
            &format!("{AT}.max_parallel_requests"),
            raw.max_parallel_requests,
            p,
        ),
        tpm_limit: whole(&format!("{AT}.tpm_limit"), raw.tpm_limit, p),
        rpm_limit: whole(&format!("{AT}.rpm_limit"), raw.rpm_limit, p),
    }
}

/// Fallback lists as (group, [groups]).
pub(super) fn fallbacks(raw: Option<RawFallbacks>) -> Vec<(String, Vec<String>)> {
    raw.unwrap_or_default()
        .into_iter()
        .flat_map(|m| m.into_iter().map(|(k, v)| (k, v.texts())))
        .collect()
}

/// Every group a fallback list names must be served.
pub(super) fn check_fallbacks(
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
pub(super) fn check_model(path: String, name: &str, names: &[&str], p: &mut Problems) {
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
pub(super) fn model_exists(name: &str, names: &[&str]) -> bool {
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
