//! `litellm_settings.cache`, `cache_params` and `dedupe_in_flight` → the response cache's
//! settings. A cache type sluice does not have is an error naming it, never a silent
//! in-memory cache in its place.

use std::time::Duration;

use sluice_cache::settings::{call_type, CACHEABLE, DEFAULT_MAX_BYTES, DEFAULT_TTL};
use sluice_cache::{CacheSettings, CacheType};
use sluice_core::settings::read::{boolean, seconds, text, whole};
use sluice_core::settings::{did_you_mean, Problems, Scalar};

use crate::raw::{OneOrMany, RawCacheParams};

const PARAMS: &str = "litellm_settings.cache_params";

/// LiteLLM's cache types that sluice does not have yet.
const NOT_YET: [&str; 8] = [
    "redis",
    "redis-semantic",
    "qdrant-semantic",
    "s3",
    "gcs",
    "azure-blob",
    "disk",
    "redis-cluster",
];

/// The cache's settings, or `None` when neither caching nor de-duplication is on.
pub(super) fn cache(
    on: Option<Scalar>,
    params: Option<RawCacheParams>,
    dedupe: Option<Scalar>,
    p: &mut Problems,
) -> Option<CacheSettings> {
    let store = boolean("litellm_settings.cache", on, p).unwrap_or(false);
    let dedupe = boolean("litellm_settings.dedupe_in_flight", dedupe, p);
    let params = params.unwrap_or_default();
    if !store && dedupe != Some(true) {
        return None;
    }
    let kind = match text(params.kind).as_deref().map(str::trim) {
        None | Some("local") => CacheType::Local,
        Some(t) if NOT_YET.contains(&t) => {
            p.error(
                format!("{PARAMS}.type"),
                format!("cache type \"{t}\" is not available in sluice yet; use \"local\" (this instance's memory)"),
            );
            CacheType::Local
        }
        Some(t) => {
            let known = ["local"].into_iter().chain(NOT_YET);
            p.error(
                format!("{PARAMS}.type"),
                format!("unknown cache type \"{t}\"{}", did_you_mean(t, known)),
            );
            CacheType::Local
        }
    };
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
    if params.similarity_threshold.is_some() {
        p.warn(
            format!("{PARAMS}.similarity_threshold"),
            "only semantic caches use it; ignored by the local cache",
        );
    }
    for (key, v) in [
        ("host", &params.host),
        ("port", &params.port),
        ("password", &params.password),
    ] {
        if v.is_some() {
            p.warn(
                format!("{PARAMS}.{key}"),
                "only Redis caches use it; ignored by the local cache",
            );
        }
    }
    Some(CacheSettings {
        kind,
        store,
        ttl: seconds(&format!("{PARAMS}.ttl"), params.ttl, p)
            .filter(|t| *t > Duration::ZERO)
            .unwrap_or(DEFAULT_TTL),
        namespace: text(params.namespace),
        call_types: call_types(params.supported_call_types, p),
        default_off,
        max_bytes: whole(&format!("{PARAMS}.max_bytes"), params.max_bytes, p)
            .unwrap_or(DEFAULT_MAX_BYTES),
        dedupe: dedupe.unwrap_or(true),
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
