//! `litellm_settings.cache`, `cache_params` and `dedupe_in_flight` → the response cache's
//! settings. A cache type sluice does not have is an error naming it, never a silent
//! in-memory cache in its place.

use std::time::Duration;

use sluice_cache::settings::{
    call_type, RedisCache, CACHEABLE, DEFAULT_MAX_BYTES, DEFAULT_REDIS_TIMEOUT, DEFAULT_TTL,
};
use sluice_cache::{CacheSettings, CacheType};
use sluice_core::settings::read::{boolean, seconds, text, whole};
use sluice_core::settings::{did_you_mean, Env, Problems, Scalar};
use sluice_core::Secret;

use crate::model::RedisAddress;
use crate::raw::{OneOrMany, RawCacheParams};

const PARAMS: &str = "litellm_settings.cache_params";

/// LiteLLM's cache types that sluice does not have yet.
const NOT_YET: [&str; 7] = [
    "redis-semantic",
    "qdrant-semantic",
    "s3",
    "gcs",
    "azure-blob",
    "disk",
    "redis-cluster",
];

/// The cache's settings, or `None` when neither caching nor de-duplication is on. A Redis
/// cache's address comes from `cache_params` (`url`, or `host`/`port`/`username`/`password`),
/// else from `REDIS_URL` / `REDIS_HOST`... in the environment as LiteLLM reads them, else from
/// the fleet's own Redis (`router_settings`).
pub(super) fn cache(
    on: Option<Scalar>,
    params: Option<RawCacheParams>,
    dedupe: Option<Scalar>,
    fleet_redis: &RedisAddress,
    env: &dyn Env,
    p: &mut Problems,
) -> Option<CacheSettings> {
    let store = boolean("litellm_settings.cache", on, p).unwrap_or(false);
    let dedupe = boolean("litellm_settings.dedupe_in_flight", dedupe, p);
    let mut params = params.unwrap_or_default();
    if !store && dedupe != Some(true) {
        return None;
    }
    let kind = match text(params.kind.take()).as_deref().map(str::trim) {
        None | Some("local") => {
            local_only(&params, p);
            CacheType::Local
        }
        Some("redis") => redis(&mut params, fleet_redis, env, p),
        Some(t) if NOT_YET.contains(&t) => {
            p.error(
                format!("{PARAMS}.type"),
                format!("cache type \"{t}\" is not available in sluice yet; use \"local\" (this instance's memory) or \"redis\" (shared by a fleet)"),
            );
            CacheType::Local
        }
        Some(t) => {
            let known = ["local", "redis"].into_iter().chain(NOT_YET);
            p.error(
                format!("{PARAMS}.type"),
                format!("unknown cache type \"{t}\"{}", did_you_mean(t, known)),
            );
            CacheType::Local
        }
    };
    if params.similarity_threshold.is_some() {
        p.warn(
            format!("{PARAMS}.similarity_threshold"),
            "only semantic caches use it; ignored",
        );
    }
    let ttl = seconds(&format!("{PARAMS}.ttl"), params.ttl, p);
    let redis_ttl = seconds(
        &format!("{PARAMS}.default_in_redis_ttl"),
        params.default_in_redis_ttl,
        p,
    );
    let default_off = match text(params.mode).as_deref().map(str::trim) {
        None | Some("default_on") => false,
        Some("default_off") => true,
        Some(m) => {
            p.error(
                format!("{PARAMS}.mode"),
                format!("expected default_on or default_off, got \"{m}\""),
            );
            false
        }
    };
    Some(CacheSettings {
        store,
        ttl: match kind {
            CacheType::Redis(_) => redis_ttl.or(ttl),
            CacheType::Local => ttl,
        }
        .filter(|t| *t > Duration::ZERO)
        .unwrap_or(DEFAULT_TTL),
        namespace: text(params.namespace),
        call_types: call_types(params.supported_call_types, p),
        default_off,
        max_bytes: whole(&format!("{PARAMS}.max_bytes"), params.max_bytes, p)
            .unwrap_or(DEFAULT_MAX_BYTES),
        dedupe: dedupe.unwrap_or(true),
        kind,
    })
}

/// Redis keys given to a local cache: warned about, since nothing reads them.
fn local_only(params: &RawCacheParams, p: &mut Problems) {
    for (key, v) in [
        ("host", &params.host),
        ("port", &params.port),
        ("password", &params.password),
        ("username", &params.username),
        ("url", &params.url),
        ("redis_url", &params.redis_url),
        ("socket_timeout", &params.socket_timeout),
        ("default_in_redis_ttl", &params.default_in_redis_ttl),
        ("default_in_memory_ttl", &params.default_in_memory_ttl),
    ] {
        if v.is_some() {
            p.warn(
                format!("{PARAMS}.{key}"),
                "only Redis caches use it; ignored by the local cache",
            );
        }
    }
}

/// `type: redis`: where the Redis is, and how long to wait for it.
fn redis(
    params: &mut RawCacheParams,
    fleet: &RedisAddress,
    env: &dyn Env,
    p: &mut Problems,
) -> CacheType {
    let own = RedisAddress {
        url: text(params.url.take().or(params.redis_url.take())).map(Secret::new),
        host: text(params.host.take()),
        port: whole(&format!("{PARAMS}.port"), params.port.take(), p),
        username: text(params.username.take()),
        password: text(params.password.take()).map(Secret::new),
    };
    let from_env = || RedisAddress {
        url: env
            .var("REDIS_URL")
            .filter(|u| !u.is_empty())
            .map(Secret::new),
        host: env.var("REDIS_HOST").filter(|h| !h.is_empty()),
        port: env.var("REDIS_PORT").and_then(|v| v.trim().parse().ok()),
        username: env.var("REDIS_USERNAME").filter(|u| !u.is_empty()),
        password: env
            .var("REDIS_PASSWORD")
            .filter(|v| !v.is_empty())
            .map(Secret::new),
    };
    let url = own
        .url()
        .or_else(|| from_env().url())
        .or_else(|| fleet.url());
    let Some(url) = url else {
        p.error(
            format!("{PARAMS}.host"),
            "type \"redis\" needs a Redis: cache_params.host (with port, password) or url, \
             REDIS_HOST or REDIS_URL in the environment, or router_settings.redis_host",
        );
        return CacheType::Local;
    };
    if url.expose().starts_with("rediss://") {
        p.error(
            format!("{PARAMS}.url"),
            "TLS to Redis (rediss://) is not available in sluice yet; use redis://",
        );
    }
    CacheType::Redis(RedisCache {
        url,
        timeout: seconds(
            &format!("{PARAMS}.socket_timeout"),
            params.socket_timeout.take(),
            p,
        )
        .filter(|t| *t > Duration::ZERO)
        .unwrap_or(DEFAULT_REDIS_TIMEOUT),
        memory_ttl: seconds(
            &format!("{PARAMS}.default_in_memory_ttl"),
            params.default_in_memory_ttl.take(),
            p,
        )
        .filter(|t| *t > Duration::ZERO),
    })
}

/// `supported_call_types` (LiteLLM's names) → endpoints; every cacheable one by default.
fn call_types(raw: Option<OneOrMany>, p: &mut Problems) -> Vec<sluice_core::endpoint::Endpoint> {
    let Some(raw) = raw else {
        return CACHEABLE.to_vec();
    };
    let mut out = Vec::new();
    for (i, name) in raw.texts().iter().enumerate() {
        let path = format!("{PARAMS}.supported_call_types[{i}]");
        match call_type(name) {
            Some(Some(e)) => {
                if !out.contains(&e) {
                    out.push(e);
                }
            }
            Some(None) => p.warn(
                path,
                format!("\"{name}\" answers are not cached by sluice (uploads and media); ignored"),
            ),
            None => p.error(
                path,
                format!(
                    "unknown call type \"{name}\"{}",
                    did_you_mean(
                        name,
                        [
                            "completion",
                            "acompletion",
                            "text_completion",
                            "atext_completion",
                            "embedding",
                            "aembedding",
                            "responses",
                            "aresponses",
                            "anthropic_messages",
                            "rerank",
                            "arerank",
                            "moderation",
                            "amoderation",
                        ]
                    )
                ),
            ),
        }
    }
    out
}
