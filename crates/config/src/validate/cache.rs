//! `litellm_settings.cache`, `cache_params` and `dedupe_in_flight` → the response cache's
//! settings. A cache type sluice does not have is an error naming it, never a silent
//! in-memory cache in its place.

use std::time::Duration;

use sluice_cache::settings::{
    call_type, RedisCache, SemanticIndexKind, SemanticSettings, CACHEABLE,
    DEFAULT_EMBEDDING_TIMEOUT, DEFAULT_MAX_BYTES, DEFAULT_REDIS_TIMEOUT, DEFAULT_SEMANTIC_ENTRIES,
    DEFAULT_SEMANTIC_INDEX, DEFAULT_TTL,
};
use sluice_cache::{CacheSettings, CacheType};
use sluice_core::settings::read::number;
use sluice_core::settings::read::{boolean, seconds, text, whole};
use sluice_core::settings::{did_you_mean, Env, Problems, Scalar};
use sluice_core::{RedisTarget, Secret};

use crate::model::RedisAddress;
use crate::raw::{OneOrMany, RawCacheParams};

const PARAMS: &str = "litellm_settings.cache_params";

/// The cache types sluice has: LiteLLM's, and its own in-process semantic cache.
const TYPES: [&str; 4] = ["local", "redis", "redis-semantic", "local-semantic"];

/// LiteLLM's cache types that sluice does not have yet.
const NOT_YET: [&str; 5] = ["s3", "gcs", "azure-blob", "disk", "redis-cluster"];

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
    let mut semantic_settings = None;
    let kind = match text(params.kind.take()).as_deref().map(str::trim) {
        None | Some("local") => {
            local_only(&params, p);
            CacheType::Local
        }
        Some(t @ ("redis" | "redis-semantic")) => {
            let kind = redis(t, &mut params, fleet_redis, env, p);
            if t == "redis-semantic" {
                let index_name = text(params.redis_semantic_cache_index_name.take())
                    .unwrap_or_else(|| DEFAULT_SEMANTIC_INDEX.to_owned());
                let index = SemanticIndexKind::Redis { index_name };
                semantic_settings = semantic(t, &mut params, index, p);
            }
            kind
        }
        Some(t @ "local-semantic") => {
            local_only(&params, p);
            let max_entries = whole(
                &format!("{PARAMS}.max_entries"),
                params.max_entries.take(),
                p,
            )
            .filter(|n: &usize| *n > 0)
            .unwrap_or(DEFAULT_SEMANTIC_ENTRIES);
            let index = SemanticIndexKind::Local { max_entries };
            semantic_settings = semantic(t, &mut params, index, p);
            CacheType::Local
        }
        Some("qdrant-semantic") => {
            p.error(
                format!("{PARAMS}.type"),
                "cache type \"qdrant-semantic\" is not available in sluice: it has no Qdrant \
                 client, since no Qdrant server can be run in its tests; use \"redis-semantic\" \
                 (Redis Stack) or \"local-semantic\" (this instance's memory)",
            );
            CacheType::Local
        }
        Some(t) if NOT_YET.contains(&t) => {
            p.error(
                format!("{PARAMS}.type"),
                format!("cache type \"{t}\" is not available in sluice yet; use \"local\" (this instance's memory) or \"redis\" (shared by a fleet), or a semantic cache (\"local-semantic\", \"redis-semantic\")"),
            );
            CacheType::Local
        }
        Some(t) => {
            let known = TYPES.into_iter().chain(NOT_YET).chain(["qdrant-semantic"]);
            p.error(
                format!("{PARAMS}.type"),
                format!("unknown cache type \"{t}\"{}", did_you_mean(t, known)),
            );
            CacheType::Local
        }
    };
    for (key, v) in [
        ("similarity_threshold", &params.similarity_threshold),
        (
            "redis_semantic_cache_embedding_model",
            &params.redis_semantic_cache_embedding_model,
        ),
        (
            "semantic_cache_embedding_model",
            &params.semantic_cache_embedding_model,
        ),
        (
            "redis_semantic_cache_index_name",
            &params.redis_semantic_cache_index_name,
        ),
        ("max_entries", &params.max_entries),
    ] {
        if v.is_some() {
            p.warn(
                format!("{PARAMS}.{key}"),
                "only the semantic cache types use it; ignored",
            );
        }
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
        semantic: semantic_settings,
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

/// A semantic cache's threshold and embedding model (taken from `params`, so that what is
/// left is warned about as unused). The model is checked against the config's groups later.
fn semantic(
    kind: &str,
    params: &mut RawCacheParams,
    index: SemanticIndexKind,
    p: &mut Problems,
) -> Option<SemanticSettings> {
    let path = format!("{PARAMS}.similarity_threshold");
    let threshold = match params.similarity_threshold.take() {
        None => {
            p.error(
                &path,
                format!("type \"{kind}\" needs a similarity_threshold from 0 to 1 (e.g. 0.9)"),
            );
            None
        }
        Some(v) => match number(&path, Some(v), false, p) {
            Some(t) if t <= 1.0 => Some(t as f32),
            Some(t) => {
                p.error(&path, format!("expected a number from 0 to 1, got {t}"));
                None
            }
            None => None,
        },
    };
    // LiteLLM's key; sluice's own cache takes a name without "redis" in it as well.
    let redis_key = "redis_semantic_cache_embedding_model";
    let (key, model) = match (
        text(params.redis_semantic_cache_embedding_model.take()),
        text(params.semantic_cache_embedding_model.take()),
    ) {
        (Some(m), None) => (redis_key, Some(m)),
        (None, Some(m)) if kind == "local-semantic" => ("semantic_cache_embedding_model", Some(m)),
        (Some(_), Some(_)) if kind == "local-semantic" => {
            p.error(
                format!("{PARAMS}.semantic_cache_embedding_model"),
                "given twice: also as redis_semantic_cache_embedding_model; keep one",
            );
            (redis_key, None)
        }
        (m, _) => (redis_key, m),
    };
    let Some(model) = model else {
        p.error(
            format!("{PARAMS}.{key}"),
            format!("type \"{kind}\" needs the model group that embeds prompts (an embedding model of model_list)"),
        );
        return None;
    };
    Some(SemanticSettings {
        threshold: threshold?,
        embedding_model: model,
        embedding_model_key: key,
        embedding_timeout: DEFAULT_EMBEDDING_TIMEOUT,
        index,
    })
}

/// `type: redis` (and `redis-semantic`): where the Redis is, and how long to wait for it.
fn redis(
    kind: &str,
    params: &mut RawCacheParams,
    fleet: &RedisAddress,
    env: &dyn Env,
    p: &mut Problems,
) -> CacheType {
    let mut own = RedisAddress {
        url: text(params.url.take().or(params.redis_url.take())).map(Secret::new),
        host: text(params.host.take()),
        port: whole(&format!("{PARAMS}.port"), params.port.take(), p),
        username: text(params.username.take()),
        password: text(params.password.take()).map(Secret::new),
        ..RedisAddress::default()
    };
    let ha = super::redis::RawHa {
        startup_nodes: params.redis_startup_nodes.take(),
        service_name: params.service_name.take(),
        sentinel_nodes: params.sentinel_nodes.take(),
        sentinel_password: params.sentinel_password.take(),
    };
    super::redis::read(PARAMS, "url", ha, &mut own, p);
    let mut from_env = RedisAddress {
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
        ..RedisAddress::default()
    };
    // The environment's Cluster or Sentinel wins over its one server, as in LiteLLM.
    super::redis::from_env(PARAMS, env, &mut from_env, p);
    if from_env.is_fleet_of_servers() {
        from_env.url = None;
        from_env.host = None;
    }
    // A section that names a Cluster or Sentinel takes its credentials from the environment
    // when it gives none, as LiteLLM merges REDIS_PASSWORD into its keys.
    if own.is_fleet_of_servers() && own.password.is_none() && own.username.is_none() {
        own.password.clone_from(&from_env.password);
        own.username.clone_from(&from_env.username);
    }
    let target = own
        .target()
        .or_else(|| from_env.target())
        .or_else(|| fleet.target());
    let Some(target) = target else {
        p.error(
            format!("{PARAMS}.host"),
            format!(
                "type \"{kind}\" needs a Redis: cache_params.host (with port, password) or url, \
                 redis_startup_nodes (a Redis Cluster), sentinel_nodes with service_name (Redis \
                 Sentinel), REDIS_HOST, REDIS_URL, REDIS_CLUSTER_NODES or REDIS_SENTINEL_NODES \
                 in the environment, or router_settings.redis_host"
            ),
        );
        return CacheType::Local;
    };
    if let RedisTarget::Single(url) = &target {
        if url.expose().starts_with("rediss://") {
            p.error(
                format!("{PARAMS}.url"),
                "TLS to Redis (rediss://) is not available in sluice yet; use redis://",
            );
        }
    }
    if kind == "redis-semantic" && matches!(target, RedisTarget::Cluster { .. }) {
        p.error(
            format!("{PARAMS}.redis_startup_nodes"),
            "type \"redis-semantic\" needs the search module's vector index, which a Redis \
             Cluster does not hold across its nodes; use one server or Sentinel for it",
        );
    }
    CacheType::Redis(RedisCache {
        target,
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
