//! What one request asks of the response cache: LiteLLM's `cache` object in the body
//! (`{"no-cache": true, "no-store": true, "ttl": 600, "s-maxage": 60, "namespace": "…",
//! "use-cache": true, "similarity_threshold": 0.9}`) and the HTTP `Cache-Control` header (`no-cache`, `no-store`,
//! `max-age=60`). Read by the envelope and the pipeline, obeyed by the cache.

use std::time::Duration;

use serde::Deserialize;

/// One request's cache controls; the default asks nothing special.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CacheControl {
    /// Do not answer from the cache (the answer may still be stored).
    pub no_cache: bool,
    /// Do not store this answer.
    pub no_store: bool,
    /// How long to keep this answer, instead of the configured `ttl`.
    pub ttl: Option<Duration>,
    /// Accept only a cached answer at most this old (`s-maxage`, `max-age`).
    pub max_age: Option<Duration>,
    /// A namespace of its own: entries of one namespace never answer another's requests.
    pub namespace: Option<String>,
    /// Use the cache for this request when the cache is `mode: default_off`.
    pub use_cache: bool,
    /// A semantic cache's least similarity for this request, instead of the configured one
    /// (0..=1).
    pub similarity_threshold: Option<f32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawControl {
    #[serde(default, rename = "no-cache")]
    no_cache: Option<bool>,
    #[serde(default, rename = "no-store")]
    no_store: Option<bool>,
    #[serde(default)]
    ttl: Option<f64>,
    #[serde(default, rename = "s-maxage")]
    s_maxage: Option<f64>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default, rename = "use-cache")]
    use_cache: Option<bool>,
    #[serde(default)]
    similarity_threshold: Option<f64>,
}

/// Seconds as a duration; `None` for a negative or non-finite number.
fn seconds(s: f64) -> Option<Duration> {
    (s.is_finite() && s >= 0.0).then(|| Duration::from_secs_f64(s.min(31_536_000.0)))
}

impl CacheControl {
    /// The body's `cache` object (its JSON text). An error names what is wrong with it.
    pub fn from_body(json: &str) -> Result<Self, String> {
        let raw: RawControl = serde_json::from_str(json).map_err(|e| {
            format!(
                "expected an object of no-cache, no-store, ttl, s-maxage, namespace, use-cache, similarity_threshold: {e}"
            )
        })?;
        let time = |name: &str, v: Option<f64>| match v {
            None => Ok(None),
            Some(s) => seconds(s)
                .map(Some)
                .ok_or_else(|| format!("{name}: expected seconds ≥ 0")),
        };
        Ok(Self {
            no_cache: raw.no_cache.unwrap_or(false),
            no_store: raw.no_store.unwrap_or(false),
            ttl: time("ttl", raw.ttl)?,
            max_age: time("s-maxage", raw.s_maxage)?,
            namespace: raw.namespace.filter(|n| !n.is_empty()),
            use_cache: raw.use_cache.unwrap_or(false),
            similarity_threshold: match raw.similarity_threshold {
                None => None,
                Some(t) if (0.0..=1.0).contains(&t) => Some(t as f32),
                Some(_) => return Err("similarity_threshold: expected a number from 0 to 1".into()),
            },
        })
    }

    /// A key's or team's `metadata.cache` (LiteLLM's per-key cache controls, the same
    /// members as the body's `cache`), as a policy to [`apply`](Self::apply).
    pub fn from_metadata(v: &serde_json::Value) -> Result<Self, String> {
        if !v.is_object() {
            return Err(
                "expected an object of no-cache, no-store, ttl, s-maxage, namespace, use-cache"
                    .into(),
            );
        }
        Self::from_body(&v.to_string())
    }

    /// Apply a key's or team's policy over what the request asked: the policy wins where it
    /// says something (a key set to `no-store` is not stored whatever the request says; a
    /// team's `namespace` keeps its entries apart from every other team's), and the request
    /// decides the rest, as LiteLLM's key-level `cache` replaces the request's.
    pub fn apply(&mut self, policy: &Self) {
        self.no_cache |= policy.no_cache;
        self.no_store |= policy.no_store;
        self.use_cache |= policy.use_cache;
        if policy.ttl.is_some() {
            self.ttl = policy.ttl;
        }
        if policy.max_age.is_some() {
            self.max_age = policy.max_age;
        }
        if policy.namespace.is_some() {
            self.namespace.clone_from(&policy.namespace);
        }
    }

    /// Add what a `Cache-Control` header value asks (`no-cache`, `no-store`, `max-age=N`);
    /// directives it does not know are ignored, as HTTP caches do.
    pub fn add_header(&mut self, value: &str) {
        for directive in value.split(',') {
            let (name, arg) = match directive.split_once('=') {
                Some((n, a)) => (n.trim(), Some(a.trim().trim_matches('"'))),
                None => (directive.trim(), None),
            };
            if name.eq_ignore_ascii_case("no-cache") {
                self.no_cache = true;
            } else if name.eq_ignore_ascii_case("no-store") {
                self.no_store = true;
            } else if name.eq_ignore_ascii_case("max-age") || name.eq_ignore_ascii_case("s-maxage")
            {
                if let Some(age) = arg.and_then(|a| a.parse::<f64>().ok()).and_then(seconds) {
                    self.max_age = Some(age);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_and_header_controls() {
        let c = CacheControl::from_body(
            r#"{"no-cache":true,"ttl":600,"s-maxage":60,"namespace":"team-a","use-cache":true}"#,
        )
        .unwrap();
        assert!(c.no_cache && !c.no_store && c.use_cache);
        assert_eq!(c.ttl, Some(Duration::from_secs(600)));
        assert_eq!(c.max_age, Some(Duration::from_secs(60)));
        assert_eq!(c.namespace.as_deref(), Some("team-a"));
        assert!(CacheControl::from_body(r#"{"no_cache":true}"#)
            .unwrap_err()
            .contains("no_cache"));
        assert!(CacheControl::from_body(r#"{"ttl":-1}"#)
            .unwrap_err()
            .contains("ttl"));
        let t = CacheControl::from_body(r#"{"similarity_threshold":0.999}"#).unwrap();
        assert_eq!(t.similarity_threshold, Some(0.999));
        for bad in [
            r#"{"similarity_threshold":1.5}"#,
            r#"{"similarity_threshold":-0.1}"#,
        ] {
            assert!(CacheControl::from_body(bad)
                .unwrap_err()
                .contains("similarity_threshold"));
        }
        assert!(
            CacheControl::from_body(r#"{"similarity_threshold":"high"}"#)
                .unwrap_err()
                .contains("similarity_threshold")
        );
        let mut h = CacheControl::default();
        h.add_header("No-Store, max-age=30, private");
        assert!(h.no_store && !h.no_cache);
        assert_eq!(h.max_age, Some(Duration::from_secs(30)));
    }

    #[test]
    fn a_key_policy_wins_where_it_speaks() {
        let mut asked =
            CacheControl::from_body(r#"{"ttl":5,"s-maxage":9,"namespace":"mine"}"#).unwrap();
        let policy = CacheControl::from_metadata(
            &serde_json::json!({"no-store": true, "ttl": 60, "namespace": "team-a"}),
        )
        .unwrap();
        asked.apply(&policy);
        assert!(asked.no_store && !asked.no_cache);
        assert_eq!(asked.ttl, Some(Duration::from_secs(60)));
        assert_eq!(asked.max_age, Some(Duration::from_secs(9)), "the request's");
        assert_eq!(asked.namespace.as_deref(), Some("team-a"));
        assert!(CacheControl::from_metadata(&serde_json::json!(true)).is_err());
        assert!(CacheControl::from_metadata(&serde_json::json!({"ttl": "x"})).is_err());
    }
}
