//! Web search APIs, mocked in each vendor's wire format, so that a gateway's search tools can
//! be tested against a real socket without a vendor account: Perplexity's Search API
//! (`POST /search`), Tavily's (`POST /tavily/search`, for an api_base of `<mock>/tavily`) and
//! Exa's (`POST /exa/search`, for `<mock>/exa`).
//!
//! Each requires its key where the vendor reads it (`Authorization: Bearer` for Perplexity
//! and Tavily, `x-api-key` for Exa; the mock's own key when it has one) and validates what
//! the vendor validates (the query, the result count's range). The results are made from the
//! query, deterministically: result `i` is titled `Result i for <query>` at
//! `https://<domain>/<slug>-i`, where the domain is the first allowed one the request names
//! (else `example.com`), so a test can check which parameters reached the vendor. Latency and
//! injected faults apply as to inference requests; errors are in OpenAI's shape.

use std::ops::RangeInclusive;

use http::header::{HeaderValue, ALLOW};
use http::{HeaderMap, Method, Response, StatusCode};
use serde_json::{json, Value};

use crate::objects::{answer, Refusal};
use crate::{error, MockBody, MockSettings};

/// The domain results are on when the request names none.
const DEFAULT_DOMAIN: &str = "example.com";

/// What Exa reports one search cost, in dollars.
const EXA_COST: f64 = 0.005;

/// A search vendor the mock plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Vendor {
    /// Perplexity's Search API.
    Perplexity,
    /// Tavily's search.
    Tavily,
    /// Exa's search.
    Exa,
}

/// The vendor whose search `path` is, if it is one.
pub(crate) fn route(path: &str) -> Option<Vendor> {
    match path {
        "/search" => Some(Vendor::Perplexity),
        "/tavily/search" => Some(Vendor::Tavily),
        "/exa/search" => Some(Vendor::Exa),
        _ => None,
    }
}

/// Answer a search as `vendor` would: a 405 for a method other than POST, a 401 without the
/// key, a 400 for a request the vendor refuses, else the results.
pub(crate) async fn respond(
    vendor: Vendor,
    method: &Method,
    headers: &HeaderMap,
    body: &[u8],
    settings: &MockSettings,
) -> Response<MockBody> {
    if method != Method::POST {
        return not_allowed(method);
    }
    if let Some(denied) = refused(vendor, headers, settings) {
        return denied;
    }
    if let Some(fault) = crate::openai_fault(headers, settings).await {
        return fault;
    }
    let req = match serde_json::from_slice::<Value>(body) {
        Ok(v) if v.is_object() => v,
        _ => {
            return error(
                StatusCode::BAD_REQUEST,
                "the request body must be a JSON object",
                None,
                "invalid_json",
            )
        }
    };
    answer(match vendor {
        Vendor::Perplexity => perplexity(&req),
        Vendor::Tavily => tavily(&req),
        Vendor::Exa => exa(&req),
    })
}

/// The 405 for a method other than POST, with `Allow: POST`.
fn not_allowed(method: &Method) -> Response<MockBody> {
    let mut resp = error(
        StatusCode::METHOD_NOT_ALLOWED,
        &format!("{method} is not allowed here: searches are POSTed"),
        None,
        "method_not_allowed",
    );
    resp.headers_mut()
        .insert(ALLOW, HeaderValue::from_static("POST"));
    resp
}

/// The 401 when the request lacks the vendor's key (or, when the mock has a key, carries
/// another).
fn refused(
    vendor: Vendor,
    headers: &HeaderMap,
    settings: &MockSettings,
) -> Option<Response<MockBody>> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let (presented, place) = match vendor {
        Vendor::Perplexity | Vendor::Tavily => (
            header("authorization").and_then(|v| v.strip_prefix("Bearer ")),
            "an `Authorization: Bearer` header",
        ),
        Vendor::Exa => (header("x-api-key"), "an `x-api-key` header"),
    };
    let presented = presented.map(str::trim).filter(|k| !k.is_empty());
    let accepted = match (presented, settings.api_key.as_deref()) {
        (None, _) => false,
        (Some(_), None) => true,
        (Some(p), Some(want)) => sluice_net::secret_eq(p.as_bytes(), want.as_bytes()),
    };
    (!accepted).then(|| {
        error(
            StatusCode::UNAUTHORIZED,
            &format!("Missing or incorrect API key: send it in {place}."),
            None,
            "invalid_api_key",
        )
    })
}

/// A 400 naming `field`.
fn invalid(field: &str, message: &str) -> Refusal {
    Refusal::new(
        StatusCode::BAD_REQUEST,
        message,
        Some(field),
        "invalid_value",
    )
}

/// The query: a non-empty string, or (where `arrays`) a non-empty array of them.
fn queries(req: &Value, arrays: bool) -> Result<Vec<&str>, Refusal> {
    let found = match &req["query"] {
        Value::String(q) => vec![q.as_str()],
        Value::Array(items) if arrays => items.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let all_strings = req["query"]
        .as_array()
        .is_none_or(|a| a.len() == found.len());
    if found.is_empty() || !all_strings || found.iter().any(|q| q.trim().is_empty()) {
        let what = if arrays {
            "a non-empty string or array of strings"
        } else {
            "a non-empty string"
        };
        return Err(invalid(
            "query",
            &format!("'query' is required and must be {what}"),
        ));
    }
    Ok(found)
}

/// An optional integer `field` within `range` (else `default`).
fn count(
    req: &Value,
    field: &str,
    range: RangeInclusive<u64>,
    default: u64,
) -> Result<usize, Refusal> {
    let n = match &req[field] {
        Value::Null => default,
        v => v.as_u64().filter(|n| range.contains(n)).ok_or_else(|| {
            invalid(
                field,
                &format!(
                    "'{field}' must be an integer from {} to {}",
                    range.start(),
                    range.end()
                ),
            )
        })?,
    };
    Ok(usize::try_from(n).unwrap_or(usize::MAX))
}

/// An optional array of strings `field` (empty when absent).
fn strings<'a>(req: &'a Value, field: &str) -> Result<Vec<&'a str>, Refusal> {
    match &req[field] {
        Value::Null => Ok(Vec::new()),
        Value::Array(items) => items
            .iter()
            .map(|i| i.as_str().ok_or(()))
            .collect::<Result<_, _>>()
            .map_err(|()| invalid(field, &format!("'{field}' must be an array of strings"))),
        _ => Err(invalid(
            field,
            &format!("'{field}' must be an array of strings"),
        )),
    }
}

/// Whether an optional field asks for something: `true`, or a non-empty mode string
/// (Tavily's `include_answer: "advanced"`).
fn asks(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::String(s) => !s.is_empty() && s != "false",
        Value::Object(_) => true,
        _ => false,
    }
}

/// One made-up result: its 1-based rank, title, page and snippet.
struct Hit {
    rank: usize,
    title: String,
    url: String,
    snippet: String,
}

impl Hit {
    /// `2025-01-0N`-style date of the page (day = rank, so within January).
    fn date(&self) -> String {
        format!("2025-01-{:02}", self.rank.min(31))
    }

    /// The page's longer text (Exa's `text`, Tavily's `raw_content`).
    fn text(&self) -> String {
        format!(
            "{}\n\n{} This page is made up by sluice's mock search; its content is the same \
             for the same query.",
            self.title, self.snippet
        )
    }

    /// Relevance, from 0.96 down by 0.04 a rank (one result in 25 fits in 0..1).
    fn score(&self) -> f64 {
        let rank = u32::try_from(self.rank).unwrap_or(u32::MAX).min(24);
        1.0 - f64::from(rank) * 0.04
    }
}

/// `n` results for `queries` (taken in turn when there are several), on `domain`.
fn hits(queries: &[&str], domain: &str, n: usize) -> Vec<Hit> {
    (1..=n)
        .map(|rank| {
            let query = queries
                .get((rank - 1) % queries.len().max(1))
                .copied()
                .unwrap_or_default();
            Hit {
                rank,
                title: format!("Result {rank} for {query}"),
                url: format!("https://{domain}/{}-{rank}", slug(query)),
                snippet: format!("Mock search result {rank} for \"{query}\"."),
            }
        })
        .collect()
}

/// The query as a URL path segment: its lower-cased words joined by `-` (at most 60 bytes).
fn slug(query: &str) -> String {
    let words: Vec<String> = query
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase)
        .collect();
    let mut slug = words.join("-");
    slug.truncate(60);
    let slug = slug.trim_end_matches('-');
    if slug.is_empty() {
        "result".to_owned()
    } else {
        slug.to_owned()
    }
}

/// The domain results go on: the first allowed of `domains` (Perplexity marks a denied domain
/// with a leading `-`), else [`DEFAULT_DOMAIN`].
fn domain<'a>(domains: &[&'a str]) -> &'a str {
    domains
        .iter()
        .map(|d| d.trim())
        .find(|d| !d.is_empty() && !d.starts_with('-'))
        .unwrap_or(DEFAULT_DOMAIN)
}

/// A random UUID-shaped request id.
fn request_id() -> String {
    let hex = format!("{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..));
    let part = |r: std::ops::Range<usize>| hex.get(r).unwrap_or_default();
    format!(
        "{}-{}-{}-{}-{}",
        part(0..8),
        part(8..12),
        part(12..16),
        part(16..20),
        part(20..32)
    )
}

/// Perplexity's `POST /search`: `{"id", "results": [{title, url, snippet, date,
/// last_updated}]}`, `max_results` (1..=20, default 10) of them.
fn perplexity(req: &Value) -> Result<Value, Refusal> {
    let queries = queries(req, true)?;
    let n = count(req, "max_results", 1..=20, 10)?;
    let domains = strings(req, "search_domain_filter")?;
    let results: Vec<Value> = hits(&queries, domain(&domains), n)
        .iter()
        .map(|h| {
            json!({
                "title": h.title, "url": h.url, "snippet": h.snippet, "date": h.date(),
                "last_updated": format!("2025-02-{:02}", h.rank.min(28)),
            })
        })
        .collect();
    Ok(json!({"id": request_id(), "results": results}))
}

/// Tavily's `POST /search`: `max_results` (0..=20, default 5) results on the first of
/// `include_domains`, with an `answer`, `images`, `raw_content` and `favicon` when asked for.
fn tavily(req: &Value) -> Result<Value, Refusal> {
    let queries = queries(req, false)?;
    let query = queries.first().copied().unwrap_or_default();
    let n = count(req, "max_results", 0..=20, 5)?;
    let domains = strings(req, "include_domains")?;
    // Checked, not applied: no result lands on an excluded domain unless it is also included.
    strings(req, "exclude_domains")?;
    let news = req["topic"] == "news";
    let results: Vec<Value> = hits(&queries, domain(&domains), n)
        .iter()
        .map(|h| {
            let mut r = json!({
                "title": h.title, "url": h.url, "content": h.snippet, "score": h.score(),
                "raw_content": asks(&req["include_raw_content"]).then(|| h.text()),
            });
            if asks(&req["include_favicon"]) {
                r["favicon"] = json!(format!("https://{}/favicon.ico", domain(&domains)));
            }
            if news {
                r["published_date"] = json!(format!("{}T00:00:00Z", h.date()));
            }
            r
        })
        .collect();
    let images: Vec<Value> = if asks(&req["include_images"]) {
        let url = format!("https://{}/{}.png", domain(&domains), slug(query));
        if asks(&req["include_image_descriptions"]) {
            vec![json!({"url": url, "description": format!("An image for {query}")})]
        } else {
            vec![json!(url)]
        }
    } else {
        Vec::new()
    };
    let answer = asks(&req["include_answer"]).then(|| format!("Mock answer for \"{query}\"."));
    Ok(json!({
        "query": query, "follow_up_questions": null, "answer": answer, "images": images,
        "results": results, "response_time": 0.01, "request_id": request_id(),
    }))
}

/// Exa's `POST /search`: `numResults` (1..=100, default 10) results on the first of
/// `includeDomains`, with `text`, `highlights` and `summary` when `contents` asks for them.
fn exa(req: &Value) -> Result<Value, Refusal> {
    let queries = queries(req, false)?;
    let n = count(req, "numResults", 1..=100, 10)?;
    let domains = strings(req, "includeDomains")?;
    // Checked, not applied, as Tavily's `exclude_domains`.
    strings(req, "excludeDomains")?;
    let contents = &req["contents"];
    let max_chars = contents["text"]["maxCharacters"]
        .as_u64()
        .and_then(|m| usize::try_from(m).ok());
    let results: Vec<Value> = hits(&queries, domain(&domains), n)
        .iter()
        .map(|h| {
            let mut r = json!({
                "id": h.url, "title": h.title, "url": h.url,
                "publishedDate": format!("{}T00:00:00.000Z", h.date()),
                "author": null, "score": h.score(),
            });
            if asks(&contents["text"]) {
                let text = h.text();
                r["text"] = json!(match max_chars {
                    Some(m) => text.chars().take(m).collect(),
                    None => text,
                });
            }
            if asks(&contents["highlights"]) {
                r["highlights"] = json!([h.snippet]);
                r["highlightScores"] = json!([h.score()]);
            }
            if asks(&contents["summary"]) {
                r["summary"] = json!(format!("A summary of {}.", h.title));
            }
            r
        })
        .collect();
    let resolved = if req["type"] == "keyword" {
        "keyword"
    } else {
        "neural"
    };
    Ok(json!({
        "requestId": request_id(), "resolvedSearchType": resolved, "results": results,
        "costDollars": {"total": EXA_COST},
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    async fn call(
        vendor: Vendor,
        method: Method,
        headers: &[(&str, &str)],
        body: Value,
        settings: &MockSettings,
    ) -> (u16, Value) {
        let mut h = HeaderMap::new();
        for (k, v) in headers {
            h.insert(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        let body = body.to_string();
        let resp = respond(vendor, &method, &h, body.as_bytes(), settings).await;
        let status = resp.status().as_u16();
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    async fn post(vendor: Vendor, headers: &[(&str, &str)], body: Value) -> (u16, Value) {
        call(
            vendor,
            Method::POST,
            headers,
            body,
            &MockSettings::default(),
        )
        .await
    }

    const BEARER: (&str, &str) = ("authorization", "Bearer k");

    #[test]
    fn routes_each_vendor() {
        assert_eq!(route("/search"), Some(Vendor::Perplexity));
        assert_eq!(route("/tavily/search"), Some(Vendor::Tavily));
        assert_eq!(route("/exa/search"), Some(Vendor::Exa));
        assert_eq!(route("/v1/search/x"), None);
    }

    #[test]
    fn slugs_and_domains() {
        assert_eq!(slug("Rust: async I/O?"), "rust-async-i-o");
        assert_eq!(slug("¿¡"), "result");
        assert_eq!(domain(&["-bad.com", "good.org"]), "good.org");
        assert_eq!(domain(&[]), DEFAULT_DOMAIN);
        assert_eq!(request_id().len(), 36);
    }

    #[tokio::test]
    async fn perplexity_answers_max_results_on_the_first_domain() {
        let body = json!({"query": "rust web", "max_results": 3,
            "search_domain_filter": ["docs.rs", "crates.io"], "country": "US",
            "max_tokens_per_page": 512});
        let (s, v) = post(Vendor::Perplexity, &[BEARER], body).await;
        assert_eq!(s, 200, "{v}");
        let results = v["results"].as_array().unwrap();
        assert_eq!(results.len(), 3);
        assert_eq!(results[0]["title"], "Result 1 for rust web");
        assert_eq!(results[2]["url"], "https://docs.rs/rust-web-3");
        assert_eq!(results[1]["date"], "2025-01-02");
        assert!(results[0]["snippet"].as_str().unwrap().contains("rust web"));
        assert!(results[0]["last_updated"].is_string());
        assert!(v["id"].is_string());
        let (_, v) = post(Vendor::Perplexity, &[BEARER], json!({"query": ["a", "b"]})).await;
        assert_eq!(v["results"].as_array().unwrap().len(), 10);
        assert_eq!(v["results"][1]["url"], "https://example.com/b-2");
    }

    #[tokio::test]
    async fn perplexity_refuses_what_perplexity_refuses() {
        for body in [
            json!({}),
            json!({"query": ""}),
            json!({"query": []}),
            json!({"query": [1]}),
            json!({"query": "q", "max_results": 21}),
            json!({"query": "q", "max_results": 0}),
            json!({"query": "q", "search_domain_filter": "docs.rs"}),
        ] {
            let (s, v) = post(Vendor::Perplexity, &[BEARER], body.clone()).await;
            assert_eq!(s, 400, "{body}: {v}");
            assert!(v["error"]["message"].is_string());
        }
        let (s, v) = post(Vendor::Perplexity, &[], json!({"query": "q"})).await;
        assert_eq!(
            (s, v["error"]["code"].as_str()),
            (401, Some("invalid_api_key"))
        );
        let (s, _) = call(
            Vendor::Perplexity,
            Method::GET,
            &[BEARER],
            json!({}),
            &MockSettings::default(),
        )
        .await;
        assert_eq!(s, 405);
    }

    #[tokio::test]
    async fn the_mocks_own_key_must_match() {
        let keyed = MockSettings {
            api_key: Some("right".into()),
            ..MockSettings::default()
        };
        let q = json!({"query": "q"});
        let (s, _) = call(Vendor::Tavily, Method::POST, &[BEARER], q.clone(), &keyed).await;
        assert_eq!(s, 401);
        let right = [("authorization", "Bearer right")];
        let (s, _) = call(Vendor::Tavily, Method::POST, &right, q.clone(), &keyed).await;
        assert_eq!(s, 200);
        let (s, _) = call(Vendor::Exa, Method::POST, &right, q.clone(), &keyed).await;
        assert_eq!(s, 401, "Exa reads x-api-key");
        let exa_key = [("x-api-key", "right")];
        let (s, _) = call(Vendor::Exa, Method::POST, &exa_key, q, &keyed).await;
        assert_eq!(s, 200);
    }

    #[tokio::test]
    async fn tavily_answers_in_its_shape() {
        let (s, v) = post(Vendor::Tavily, &[BEARER], json!({"query": "sluice"})).await;
        assert_eq!(s, 200, "{v}");
        assert_eq!(v["query"], "sluice");
        assert_eq!(v["results"].as_array().unwrap().len(), 5);
        assert_eq!(
            v["results"][0]["content"],
            "Mock search result 1 for \"sluice\"."
        );
        assert_eq!(v["results"][0]["raw_content"], Value::Null);
        assert_eq!(v["answer"], Value::Null);
        assert_eq!(v["follow_up_questions"], Value::Null);
        assert_eq!(v["images"], json!([]));
        assert!(v["response_time"].is_f64() && v["request_id"].is_string());
        let body = json!({"query": "sluice", "max_results": 2, "include_domains": ["a.io"],
            "exclude_domains": ["b.io"], "topic": "news", "search_depth": "advanced",
            "include_answer": "basic", "include_raw_content": true, "include_images": true,
            "country": "france"});
        let (_, v) = post(Vendor::Tavily, &[BEARER], body).await;
        assert_eq!(v["results"][1]["url"], "https://a.io/sluice-2");
        assert!(v["results"][0]["raw_content"]
            .as_str()
            .unwrap()
            .contains("sluice"));
        assert!(v["results"][0]["published_date"].is_string());
        assert!(v["answer"].is_string());
        assert_eq!(v["images"], json!(["https://a.io/sluice.png"]));
        let (_, v) = post(
            Vendor::Tavily,
            &[BEARER],
            json!({"query": "q", "max_results": 0}),
        )
        .await;
        assert_eq!(v["results"], json!([]));
        for body in [
            json!({"query": ["a"]}),
            json!({"query": "q", "max_results": 21}),
        ] {
            let (s, _) = post(Vendor::Tavily, &[BEARER], body).await;
            assert_eq!(s, 400);
        }
    }

    #[tokio::test]
    async fn exa_answers_in_its_shape() {
        let key = [("x-api-key", "k")];
        let (s, v) = post(Vendor::Exa, &key, json!({"query": "sluice"})).await;
        assert_eq!(s, 200, "{v}");
        let results = v["results"].as_array().unwrap();
        assert_eq!(results.len(), 10);
        assert_eq!(results[0]["id"], results[0]["url"]);
        assert_eq!(results[0]["publishedDate"], "2025-01-01T00:00:00.000Z");
        assert_eq!(results[0]["author"], Value::Null);
        assert!(results[0].get("text").is_none(), "no text unless asked for");
        assert_eq!(v["resolvedSearchType"], "neural");
        assert_eq!(v["costDollars"]["total"], EXA_COST);
        assert!(v["requestId"].is_string());
        let body = json!({"query": "sluice", "numResults": 2, "includeDomains": ["x.dev"],
            "type": "keyword", "userLocation": "US",
            "contents": {"text": {"maxCharacters": 12}, "highlights": true}});
        let (_, v) = post(Vendor::Exa, &key, body).await;
        assert_eq!(v["results"][1]["url"], "https://x.dev/sluice-2");
        assert_eq!(v["results"][0]["text"], "Result 1 for");
        assert!(v["results"][0]["highlights"].is_array());
        assert_eq!(v["resolvedSearchType"], "keyword");
        let (_, v) = post(
            Vendor::Exa,
            &key,
            json!({"query": "q", "contents": {"text": true}}),
        )
        .await;
        assert!(v["results"][0]["text"]
            .as_str()
            .unwrap()
            .contains("Result 1 for q"));
        for body in [
            json!({}),
            json!({"query": "q", "numResults": 0}),
            json!({"query": "q", "numResults": 101}),
        ] {
            let (s, _) = post(Vendor::Exa, &key, body).await;
            assert_eq!(s, 400);
        }
        let (s, _) = post(Vendor::Exa, &[BEARER], json!({"query": "q"})).await;
        assert_eq!(s, 401);
    }
}
