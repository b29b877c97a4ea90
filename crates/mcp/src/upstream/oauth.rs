//! `auth_type: oauth2`: the bearer token sluice obtains for a tool server with the OAuth 2
//! `client_credentials` grant (RFC 6749 §4.4) — a form POST to the token endpoint over
//! sluice's pooled client, bounded in time and size. The token is kept until shortly before
//! its `expires_in` runs out; however many calls wait, one request fetches the next (the
//! cache's lock is held across the fetch), and a token the tool server refuses (`401`) is
//! replaced once by whichever caller notices first. Neither the secret nor a token ever
//! appears in an error.

use std::time::Duration;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use bytes::Bytes;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use http::{HeaderValue, Method, Request};
use http_body_util::BodyExt;
use serde::Deserialize;
use sluice_net::client::{error_chain, UpstreamClient};
use sluice_net::SegmentsBody;
use tokio::sync::Mutex;
use tokio::time::Instant;

use super::UpstreamError;
use crate::settings::{ClientAuth, OAuthClient};

/// The largest token endpoint answer read: a token answer is small.
const MAX_ANSWER_BYTES: usize = 64 << 10;

/// How long before its expiry a token is replaced, at most (a tenth of a short lifetime).
const EARLY: Duration = Duration::from_secs(30);

/// The longest one token request may take (the exchange that waits for it is bounded by the
/// server's `timeout` as well).
const TOKEN_TIMEOUT: Duration = Duration::from_secs(30);

/// A tool server's token, obtained and kept by sluice.
pub(super) struct TokenSource {
    client: OAuthClient,
    http: UpstreamClient,
    cache: TokenCache,
}

impl std::fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenSource").finish_non_exhaustive()
    }
}

impl TokenSource {
    /// A source for `client`, asking over `http`.
    pub(super) fn new(client: OAuthClient, http: UpstreamClient) -> Self {
        Self {
            client,
            http,
            cache: TokenCache::default(),
        }
    }

    /// The `Authorization` value to send now (fetched when none is fresh).
    pub(super) async fn header(&self) -> Result<HeaderValue, UpstreamError> {
        self.cache.current(|| self.fetch()).await
    }

    /// A new value after the server refused `stale`, unless another caller replaced it already.
    pub(super) async fn renew(&self, stale: &HeaderValue) -> Result<HeaderValue, UpstreamError> {
        self.cache.replace(stale, || self.fetch()).await
    }

    /// One token request, bounded in time.
    async fn fetch(&self) -> Result<Fresh, UpstreamError> {
        tokio::time::timeout(TOKEN_TIMEOUT, self.exchange())
            .await
            .map_err(|_| {
                UpstreamError::Unavailable(format!(
                    "the token endpoint did not answer within {TOKEN_TIMEOUT:?}"
                ))
            })?
    }

    async fn exchange(&self) -> Result<Fresh, UpstreamError> {
        let c = &self.client;
        let mut req = Request::builder()
            .method(Method::POST)
            .uri(c.token_url.clone())
            .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(ACCEPT, "application/json")
            .body(SegmentsBody::new(vec![Bytes::from(form(c))]))
            .map_err(|_| unavailable("the token request could not be built"))?;
        if c.client_auth == ClientAuth::Basic {
            req.headers_mut().insert(
                AUTHORIZATION,
                basic(&c.client_id, c.client_secret.expose())?,
            );
        }
        let resp = self.http.request(req).await.map_err(|e| {
            UpstreamError::Unavailable(error_chain("the token endpoint is unreachable".into(), &e))
        })?;
        let status = resp.status();
        let mut body = resp.into_body();
        let mut answer = Vec::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|_| unavailable("the token endpoint's answer was cut"))?;
            if let Ok(data) = frame.into_data() {
                if answer.len() + data.len() > MAX_ANSWER_BYTES {
                    return Err(unavailable("the token endpoint's answer is too large"));
                }
                answer.extend_from_slice(&data);
            }
        }
        if !status.is_success() {
            return Err(UpstreamError::Unavailable(format!(
                "the token endpoint answered HTTP {}{}",
                status.as_u16(),
                error_code(&answer).map_or_else(String::new, |c| format!(" ({c})"))
            )));
        }
        Fresh::parse(&answer, Instant::now())
    }
}

/// The token request's form body (RFC 6749 §4.4.2).
fn form(c: &OAuthClient) -> String {
    let mut form = form_urlencoded::Serializer::new(String::new());
    form.append_pair("grant_type", "client_credentials");
    if !c.scopes.is_empty() {
        form.append_pair("scope", &c.scopes.join(" "));
    }
    if c.client_auth == ClientAuth::Post {
        form.append_pair("client_id", &c.client_id);
        form.append_pair("client_secret", c.client_secret.expose());
    }
    form.finish()
}

fn unavailable(why: &str) -> UpstreamError {
    UpstreamError::Unavailable(why.to_owned())
}

/// `Basic base64(id:secret)`, both form-encoded first (RFC 6749 §2.3.1).
fn basic(id: &str, secret: &str) -> Result<HeaderValue, UpstreamError> {
    let enc = |s: &str| form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
    let pair = STANDARD.encode(format!("{}:{}", enc(id), enc(secret)));
    let mut v = HeaderValue::from_str(&format!("Basic {pair}"))
        .map_err(|_| unavailable("the client credentials do not fit in a header"))?;
    v.set_sensitive(true);
    Ok(v)
}

/// The error code of a refusal (RFC 6749 §5.2: `invalid_client` and the like), when it is
/// one: short lowercase words only, since a server's free text may echo what was sent.
fn error_code(answer: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct Refusal {
        error: String,
    }
    let code = serde_json::from_slice::<Refusal>(answer).ok()?.error;
    let plain = !code.is_empty()
        && code.len() <= 40
        && code.bytes().all(|b| b.is_ascii_lowercase() || b == b'_');
    plain.then_some(code)
}

/// A token just obtained: its header value and when to replace it (`None`: when refused).
#[derive(Debug)]
struct Fresh {
    header: HeaderValue,
    until: Option<Instant>,
}

impl Fresh {
    /// A successful token answer (RFC 6749 §5.1), received at `now`.
    fn parse(answer: &[u8], now: Instant) -> Result<Self, UpstreamError> {
        #[derive(Deserialize)]
        struct Answer {
            access_token: String,
            token_type: Option<String>,
            expires_in: Option<Lifetime>,
        }
        /// Some servers send `expires_in` as a string.
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Lifetime {
            Number(f64),
            Text(String),
        }
        let a: Answer = serde_json::from_slice(answer)
            .map_err(|_| unavailable("the token endpoint's answer has no access_token"))?;
        if let Some(t) = a.token_type.as_deref() {
            if !t.eq_ignore_ascii_case("bearer") {
                return Err(unavailable(
                    "the token endpoint issued a token that is not a bearer token",
                ));
            }
        }
        let mut header = HeaderValue::from_str(&format!("Bearer {}", a.access_token))
            .ok()
            .filter(|_| !a.access_token.is_empty())
            .ok_or_else(|| unavailable("the token endpoint issued an unusable access_token"))?;
        header.set_sensitive(true);
        let seconds = match a.expires_in {
            Some(Lifetime::Number(n)) => Some(n),
            Some(Lifetime::Text(t)) => t.trim().parse().ok(),
            None => None,
        };
        let until = seconds
            .filter(|s| s.is_finite() && *s > 0.0)
            .map(|s| Duration::from_secs_f64(s.min(1e9)))
            .map(|life| now + life - EARLY.min(life / 10));
        Ok(Self { header, until })
    }

    fn fresh(&self, now: Instant) -> bool {
        self.until.is_none_or(|u| now < u)
    }
}

/// The token kept for one server. Its lock is held while a token is fetched, so callers that
/// arrive meanwhile wait for that one answer instead of asking again.
#[derive(Debug, Default)]
struct TokenCache {
    slot: Mutex<Option<Fresh>>,
}

impl TokenCache {
    /// The kept token while fresh, else one from `fetch`.
    async fn current<F, Fut>(&self, fetch: F) -> Result<HeaderValue, UpstreamError>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<Fresh, UpstreamError>>,
    {
        let mut slot = self.slot.lock().await;
        if let Some(t) = slot.as_ref().filter(|t| t.fresh(Instant::now())) {
            return Ok(t.header.clone());
        }
        Self::store(&mut slot, fetch).await
    }

    /// A token other than `stale`: the kept one if another caller has replaced it already,
    /// else one from `fetch`.
    async fn replace<F, Fut>(
        &self,
        stale: &HeaderValue,
        fetch: F,
    ) -> Result<HeaderValue, UpstreamError>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<Fresh, UpstreamError>>,
    {
        let mut slot = self.slot.lock().await;
        if let Some(t) = slot
            .as_ref()
            .filter(|t| t.header != *stale && t.fresh(Instant::now()))
        {
            return Ok(t.header.clone());
        }
        Self::store(&mut slot, fetch).await
    }

    async fn store<F, Fut>(slot: &mut Option<Fresh>, fetch: F) -> Result<HeaderValue, UpstreamError>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<Fresh, UpstreamError>>,
    {
        // A failed fetch leaves nothing kept: the next caller asks again.
        *slot = None;
        let fresh = fetch().await?;
        let header = fresh.header.clone();
        *slot = Some(fresh);
        Ok(header)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    fn token(n: usize, life: u64) -> Fresh {
        let answer =
            format!(r#"{{"access_token":"t{n}","token_type":"Bearer","expires_in":{life}}}"#);
        Fresh::parse(answer.as_bytes(), Instant::now()).unwrap()
    }

    /// A fetch that counts its calls and takes a while, as a real endpoint does.
    async fn counting(calls: &AtomicUsize, life: u64) -> Result<Fresh, UpstreamError> {
        let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
        Ok(token(n, life))
    }

    #[test]
    fn token_answers_read() {
        let now = Instant::now();
        let t = Fresh::parse(
            br#"{"access_token":"abc","token_type":"bearer","expires_in":"100"}"#,
            now,
        )
        .unwrap();
        assert_eq!(t.header, "Bearer abc");
        assert!(t.header.is_sensitive());
        // Replaced 10 s early (a tenth of 100 s).
        assert_eq!(t.until, Some(now + Duration::from_secs(90)));
        let t = Fresh::parse(br#"{"access_token":"abc","expires_in":3600}"#, now).unwrap();
        assert_eq!(t.until, Some(now + Duration::from_secs(3570)));
        let t = Fresh::parse(br#"{"access_token":"abc"}"#, now).unwrap();
        assert_eq!(t.until, None);
        assert!(t.fresh(now + Duration::from_secs(1 << 30)));
        for bad in [
            &br#"{"token_type":"bearer"}"#[..],
            br#"{"access_token":"a","token_type":"mac"}"#,
            br#"{"access_token":""}"#,
            br#"{"access_token":"a\nb"}"#,
            b"<html>",
        ] {
            let e = Fresh::parse(bad, now).unwrap_err();
            assert!(matches!(e, UpstreamError::Unavailable(_)), "{e:?}");
        }
    }

    #[test]
    fn refusals_name_only_their_code() {
        assert_eq!(
            error_code(br#"{"error":"invalid_client","error_description":"bad secret s3cr3t"}"#),
            Some("invalid_client".into())
        );
        assert_eq!(error_code(br#"{"error":"wrong secret s3cr3t"}"#), None);
        assert_eq!(error_code(b"s3cr3t"), None);
    }

    #[test]
    fn basic_credentials_are_form_encoded_and_sensitive() {
        let v = basic("id:1", "p w").unwrap();
        assert!(v.is_sensitive());
        let pair = STANDARD
            .decode(v.to_str().unwrap().strip_prefix("Basic ").unwrap())
            .unwrap();
        assert_eq!(pair, b"id%3A1:p+w");
    }

    #[tokio::test(start_paused = true)]
    async fn kept_until_shortly_before_expiry() {
        let cache = TokenCache::default();
        let calls = AtomicUsize::new(0);
        let first = cache.current(|| counting(&calls, 100)).await.unwrap();
        assert_eq!(first, "Bearer t1");
        tokio::time::advance(Duration::from_secs(80)).await;
        assert_eq!(
            cache.current(|| counting(&calls, 100)).await.unwrap(),
            first
        );
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        // 90 s of 100: replaced before the server would refuse it.
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(
            cache.current(|| counting(&calls, 100)).await.unwrap(),
            "Bearer t2"
        );
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn one_fetch_however_many_wait() {
        let cache = Arc::new(TokenCache::default());
        let calls = Arc::new(AtomicUsize::new(0));
        let waiting: Vec<_> = (0..20)
            .map(|_| {
                let (cache, calls) = (Arc::clone(&cache), Arc::clone(&calls));
                tokio::spawn(async move { cache.current(|| counting(&calls, 100)).await })
            })
            .collect();
        for w in waiting {
            assert_eq!(w.await.unwrap().unwrap(), "Bearer t1");
        }
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        // A refused token is replaced once, however many callers saw it refused.
        let stale = HeaderValue::from_static("Bearer t1");
        let renewing: Vec<_> = (0..20)
            .map(|_| {
                let (cache, calls, stale) = (Arc::clone(&cache), Arc::clone(&calls), stale.clone());
                tokio::spawn(async move { cache.replace(&stale, || counting(&calls, 100)).await })
            })
            .collect();
        for r in renewing {
            assert_eq!(r.await.unwrap().unwrap(), "Bearer t2");
        }
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_fetch_is_not_kept() {
        let cache = TokenCache::default();
        let e = cache
            .current(|| async { Err(unavailable("the token endpoint answered HTTP 401")) })
            .await
            .unwrap_err();
        assert!(e.to_string().contains("401"));
        let calls = AtomicUsize::new(0);
        assert_eq!(
            cache.current(|| counting(&calls, 100)).await.unwrap(),
            "Bearer t1"
        );
    }
}
