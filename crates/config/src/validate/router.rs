//! `router_settings`: strategy, retries, timeouts, cooldowns, hedging, Redis, fallbacks.

use std::collections::BTreeMap;
use std::time::Duration;

use sluice_core::settings::read::{boolean, millis, number, seconds, text, whole};
use sluice_core::settings::{did_you_mean, Problems, Scalar};
use sluice_core::Secret;
use sluice_routing::{FailureKind, HedgeAfter, OnDisconnect, Strategy, TagFiltering};

use super::litellm::fallbacks;
use super::texts;
use crate::model::{GroupAlias, RedisAddress, RouterSettings};
use crate::raw::{RawAlias, RawAliases, RawRouter};

/// LiteLLM's routing strategies.
pub const ROUTING_STRATEGIES: [&str; 6] = [
    "simple-shuffle",
    "least-busy",
    "latency-based-routing",
    "usage-based-routing",
    "usage-based-routing-v2",
    "cost-based-routing",
];

/// Largest `fleet_lease`: beyond a quarter of a limit per instance the early refusals it
/// allows (one slice per instance) stop being a small bound.
const MAX_LEASE: f64 = 0.25;

/// `fleet_lease`: a fraction in [0, 0.25].
fn lease(v: Option<Scalar>, p: &mut Problems) -> Option<f64> {
    let path = "router_settings.fleet_lease";
    let n = number(path, v, false, p)?;
    if n > MAX_LEASE {
        p.error(
            path,
            format!("expected a fraction of each limit from 0 to {MAX_LEASE}, got {n}"),
        );
        return None;
    }
    Some(n)
}

/// Validate `router_settings`.
pub(super) fn router(mut raw: RawRouter, p: &mut Problems) -> RouterSettings {
    let mut redis = RedisAddress {
        url: text(raw.redis_url.take()).map(Secret::new),
        host: text(raw.redis_host.take()),
        port: whole("router_settings.redis_port", raw.redis_port.take(), p),
        username: None,
        password: text(raw.redis_password.take()).map(Secret::new),
        ..RedisAddress::default()
    };
    let ha = super::redis::RawHa {
        startup_nodes: raw.redis_startup_nodes.take(),
        service_name: raw.service_name.take(),
        sentinel_nodes: raw.sentinel_nodes.take(),
        sentinel_password: raw.sentinel_password.take(),
    };
    super::redis::read("router_settings", "redis_url", ha, &mut redis, p);
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
        redis,
        fleet_lease: lease(raw.fleet_lease, p),
        fallbacks: fallbacks(raw.fallbacks),
        context_window_fallbacks: fallbacks(raw.context_window_fallbacks),
        content_policy_fallbacks: fallbacks(raw.content_policy_fallbacks),
        default_fallbacks: texts(raw.default_fallbacks),
        // Filled by `aliases` once the model groups are known.
        model_group_alias: Vec::new(),
        tag_filtering: TagFiltering {
            enabled: boolean(
                "router_settings.enable_tag_filtering",
                raw.enable_tag_filtering,
                p,
            )
            .unwrap_or(false),
            match_any: boolean(
                "router_settings.tag_filtering_match_any",
                raw.tag_filtering_match_any,
                p,
            )
            .unwrap_or(true),
        },
    }
}

/// `model_group_alias` of `router_settings` and `litellm_settings` (`sections`, in order:
/// an alias the first declares is not taken again from the second). Each must name a served
/// model (`served`); an alias that is itself a group's name is that group, and says so.
pub(super) fn aliases(
    sections: [(&str, Option<RawAliases>); 2],
    names: &[&str],
    served: impl Fn(&str) -> bool,
    p: &mut Problems,
) -> Vec<GroupAlias> {
    let mut out: Vec<GroupAlias> = Vec::new();
    for (section, raw) in sections {
        for (alias, value) in raw.unwrap_or_default() {
            let path = format!("{section}.model_group_alias.{alias}");
            let (group, hidden) = match value {
                RawAlias::Group(g) => (text(Some(g)), false),
                RawAlias::Item { model, hidden } => (
                    text(model),
                    boolean(&format!("{path}.hidden"), hidden, p).unwrap_or(false),
                ),
            };
            let Some(group) = group.filter(|g| !g.trim().is_empty()) else {
                p.error(
                    path,
                    "expected a model group's name, or {model: <group>, hidden: <bool>}",
                );
                continue;
            };
            if !served(&group) {
                p.error(
                    path,
                    format!(
                        "no model group is named \"{group}\"{}",
                        did_you_mean(&group, names.iter().copied())
                    ),
                );
                continue;
            }
            if names.contains(&alias.as_str()) {
                p.warn(
                    path,
                    format!("\"{alias}\" is a model group's own name, which wins; ignored"),
                );
                continue;
            }
            if out.iter().any(|a| a.alias == alias) {
                p.warn(path, "also set in router_settings, which wins; ignored");
                continue;
            }
            out.push(GroupAlias {
                alias,
                group,
                hidden,
            });
        }
    }
    out
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
