//! Web search providers behind `/v1/search/{tool}` (LiteLLM's `search_tools`): one request
//! shape for every provider, Perplexity's Search API (`query`, `max_results`,
//! `search_domain_filter`, `country`, `max_tokens_per_page`), written in each provider's own
//! wire format, and each answer read back into one shape,
//! `{"object": "search", "results": [{"title", "url", "snippet", "date", "last_updated"}]}`.
//! A provider's own parameters (Tavily's `topic`, Exa's `type`) pass through as the client
//! sent them.

use http::header::{HeaderName, HeaderValue, AUTHORIZATION, CONTENT_TYPE};
use http::HeaderMap;
use serde_json::{json, Map, Value};

use sluice_core::error::ApiError;

/// A web search API sluice speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchProvider {
    /// Perplexity's Search API (`POST https://api.perplexity.ai/search`).
    Perplexity,
    /// Tavily (`POST https://api.tavily.com/search`).
    Tavily,
    /// Exa (`POST https://api.exa.ai/search`).
    Exa,
}

/// The unified request's own parameters, which each provider spells its way.
const UNIFIED: [&str; 5] = [
    "query",
    "max_results",
    "search_domain_filter",
    "country",
    "max_tokens_per_page",
];

impl SearchProvider {
    /// The names a config may give (`search_provider`), LiteLLM's first.
    pub const NAMES: [&'static str; 3] = ["perplexity", "tavily", "exa_ai"];

    /// The provider a config names (`perplexity`, `tavily`, `exa_ai`; `exa` too).
    pub fn of(name: &str) -> Option<Self> {
        match name.trim().to_ascii_lowercase().as_str() {
            "perplexity" | "perplexityai" => Some(Self::Perplexity),
            "tavily" => Some(Self::Tavily),
            "exa_ai" | "exa" => Some(Self::Exa),
            _ => None,
        }
    }

    /// LiteLLM's name, which its price map keys by (`{name}/search`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Perplexity => "perplexity",
            Self::Tavily => "tavily",
            Self::Exa => "exa_ai",
        }
    }

    /// The public API's base URL.
    pub fn default_base(self) -> &'static str {
        match self {
            Self::Perplexity => "https://api.perplexity.ai",
            Self::Tavily => "https://api.tavily.com",
            Self::Exa => "https://api.exa.ai",
        }
    }

    /// The environment variables its key is read from when the config gives none.
    pub fn key_env(self) -> &'static [&'static str] {
        match self {
            Self::Perplexity => &["PERPLEXITYAI_API_KEY", "PERPLEXITY_API_KEY"],
            Self::Tavily => &["TAVILY_API_KEY"],
            Self::Exa => &["EXA_API_KEY"],
        }
    }

    /// The environment variable that moves its base URL.
    pub fn base_env(self) -> &'static str {
        match self {
            Self::Perplexity => "PERPLEXITY_API_BASE",
            Self::Tavily => "TAVILY_API_BASE",
            Self::Exa => "EXA_API_BASE",
        }
    }

    /// The search URL below a base (`{base}/search`, unless the base already ends there).
    pub fn url(self, base: &str) -> String {
        let base = base.trim_end_matches('/');
        if base.ends_with("/search") {
            base.to_owned()
        } else {
            format!("{base}/search")
        }
    }

    /// The headers of a call: the key where the provider reads it, marked sensitive.
    pub fn headers(self, key: Option<&str>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let value = key.and_then(|k| match self {
            Self::Perplexity | Self::Tavily => HeaderValue::from_str(&format!("Bearer {k}")).ok(),
            Self::Exa => HeaderValue::from_str(k).ok(),
        });
        if let Some(mut v) = value {
            v.set_sensitive(true);
            let name = match self {
                Self::Perplexity | Self::Tavily => AUTHORIZATION,
                Self::Exa => HeaderName::from_static("x-api-key"),
            };
            headers.insert(name, v);
        }
        headers
    }

    /// The provider's request body for a unified request. `query` is required: a string, or
    /// a list of strings (joined for providers that take one).
    pub fn request(self, req: &Map<String, Value>) -> Result<Value, ApiError> {
        let query = match req.get("query") {
            Some(Value::String(q)) if !q.trim().is_empty() => Value::String(q.clone()),
            Some(Value::Array(qs))
                if !qs.is_empty()
                    && qs
                        .iter()
                        .all(|q| q.as_str().is_some_and(|s| !s.trim().is_empty())) =>
            {
                Value::Array(qs.clone())
            }
            None => return Err(ApiError::MissingParam("query")),
            Some(_) => {
                return Err(ApiError::InvalidParam {
                    param: "query",
                    message: "expected a non-empty string or a list of them".into(),
                })
            }
        };
        let max_results = match req.get("max_results") {
            None | Some(Value::Null) => None,
            Some(v) => Some(
                v.as_u64()
                    .filter(|n| *n >= 1)
                    .ok_or(ApiError::InvalidParam {
                        param: "max_results",
                        message: "expected a positive integer".into(),
                    })?,
            ),
        };
        if self == Self::Perplexity {
            // The unified request is Perplexity's own.
            return Ok(Value::Object(req.clone()));
        }
        // One query string for the providers that take one.
        let query = match query {
            Value::Array(qs) => Value::String(
                qs.iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(" "),
            ),
            q => q,
        };
        let mut out = Map::new();
        out.insert("query".into(), query);
        let domains = req.get("search_domain_filter").cloned();
        let country = req.get("country").and_then(Value::as_str);
        match self {
            Self::Tavily => {
                if let Some(n) = max_results {
                    out.insert("max_results".into(), n.into());
                }
                if let Some(d) = domains {
                    out.insert("include_domains".into(), d);
                }
                if let Some(c) = country {
                    out.insert("country".into(), c.to_ascii_lowercase().into());
                }
            }
            Self::Exa => {
                if let Some(n) = max_results {
                    out.insert("numResults".into(), n.into());
                }
                if let Some(d) = domains {
                    out.insert("includeDomains".into(), d);
                }
                if let Some(c) = country {
                    out.insert("userLocation".into(), c.into());
                }
            }
            Self::Perplexity => {}
        }
        for (k, v) in req {
            if !UNIFIED.contains(&k.as_str()) && !out.contains_key(k) {
                out.insert(k.clone(), v.clone());
            }
        }
        // Exa returns no text unless asked: the snippet is the point.
        if self == Self::Exa && !out.contains_key("contents") {
            out.insert("contents".into(), json!({"text": true}));
        }
        Ok(Value::Object(out))
    }

    /// The unified answer of a provider's answer.
    pub fn answer(self, upstream: &Value) -> Value {
        let results = upstream
            .get("results")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let text = |r: &Value, k: &str| r.get(k).and_then(Value::as_str).map(str::to_owned);
        let results: Vec<Value> = results
            .iter()
            .map(|r| {
                let (snippet, date, updated) = match self {
                    Self::Perplexity => {
                        (text(r, "snippet"), text(r, "date"), text(r, "last_updated"))
                    }
                    Self::Tavily => (text(r, "content"), None, None),
                    Self::Exa => (text(r, "text"), text(r, "publishedDate"), None),
                };
                json!({
                    "title": text(r, "title").unwrap_or_default(),
                    "url": text(r, "url").unwrap_or_default(),
                    "snippet": snippet.unwrap_or_default(),
                    "date": date,
                    "last_updated": updated,
                })
            })
            .collect();
        json!({ "object": "search", "results": results })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(v: Value) -> Map<String, Value> {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn each_provider_gets_its_own_spelling() {
        let unified = req(json!({
            "query": ["ai", "news"], "max_results": 3, "search_domain_filter": ["arxiv.org"],
            "country": "US", "topic": "news",
        }));
        let p = SearchProvider::Perplexity.request(&unified).unwrap();
        assert_eq!(p, Value::Object(unified.clone()));
        let t = SearchProvider::Tavily.request(&unified).unwrap();
        assert_eq!(
            t,
            json!({"query": "ai news", "max_results": 3, "include_domains": ["arxiv.org"],
                   "country": "us", "topic": "news"})
        );
        let e = SearchProvider::Exa.request(&unified).unwrap();
        assert_eq!(e["numResults"], 3);
        assert_eq!(e["includeDomains"], json!(["arxiv.org"]));
        assert_eq!(e["userLocation"], "US");
        assert_eq!(e["contents"], json!({"text": true}));
        assert!(e.get("max_results").is_none());
    }

    #[test]
    fn bad_requests_name_the_field() {
        let p = SearchProvider::Tavily;
        assert!(matches!(
            p.request(&req(json!({}))),
            Err(ApiError::MissingParam("query"))
        ));
        for bad in [
            json!({"query": ""}),
            json!({"query": 3}),
            json!({"query": ["a", 1]}),
        ] {
            assert!(matches!(
                p.request(&req(bad)),
                Err(ApiError::InvalidParam { param: "query", .. })
            ));
        }
        assert!(matches!(
            p.request(&req(json!({"query": "a", "max_results": 0}))),
            Err(ApiError::InvalidParam {
                param: "max_results",
                ..
            })
        ));
    }

    #[test]
    fn answers_become_one_shape() {
        let tavily =
            json!({"results": [{"title": "T", "url": "https://a", "content": "c", "score": 0.9}]});
        assert_eq!(
            SearchProvider::Tavily.answer(&tavily),
            json!({"object": "search", "results": [
                {"title": "T", "url": "https://a", "snippet": "c", "date": null, "last_updated": null}
            ]})
        );
        let exa = json!({"results": [{"title": "E", "url": "https://e", "text": "t", "publishedDate": "2025-01-01"}]});
        assert_eq!(
            SearchProvider::Exa.answer(&exa)["results"][0]["date"],
            "2025-01-01"
        );
        let pplx = json!({"results": [{"title": "P", "url": "u", "snippet": "s", "date": "d", "last_updated": "l"}]});
        assert_eq!(
            SearchProvider::Perplexity.answer(&pplx)["results"][0]["last_updated"],
            "l"
        );
        assert_eq!(SearchProvider::Exa.answer(&json!({}))["results"], json!([]));
    }

    #[test]
    fn keys_and_urls() {
        let h = SearchProvider::Exa.headers(Some("k"));
        assert_eq!(h["x-api-key"], "k");
        assert!(h["x-api-key"].is_sensitive());
        assert_eq!(
            SearchProvider::Tavily.headers(Some("k"))[AUTHORIZATION],
            "Bearer k"
        );
        assert_eq!(
            SearchProvider::Perplexity.url("http://h/"),
            "http://h/search"
        );
        assert_eq!(
            SearchProvider::Exa.url("http://h/search"),
            "http://h/search"
        );
        assert_eq!(SearchProvider::of("EXA"), Some(SearchProvider::Exa));
        assert_eq!(SearchProvider::of("bing"), None);
    }
}
