//! Google service-account credentials for Vertex AI and the `gcs_bucket` callback: the key
//! file's private key signs an RS256 JWT, exchanged at the key file's `token_uri` for an OAuth
//! access token (RFC 7523), which is cached and sent as `Authorization: Bearer`.
//!
//! The request path reads the cached header (one atomic load). A token is refreshed five
//! minutes before it expires by the first request that sees it due, while concurrent requests
//! keep using the current one (single flight); only the very first request, or one after the
//! token lapsed unused, waits for the exchange. That is at most one exchange per token
//! lifetime (an hour), never one per request.
//!
//! RS256 comes from `ring`, already in the tree through rustls; no JWT crate is needed for one
//! signature over two small JSON objects.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwapOption;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_TYPE};
use http::{Request, Uri};
use http_body_util::{BodyExt, Limited};
use ring::rand::SystemRandom;
use ring::signature::{RsaKeyPair, RSA_PKCS1_SHA256};
use serde::Deserialize;
use sluice_core::settings::Problems;
use sluice_core::Secret;

use crate::body::SegmentsBody;
use crate::client::UpstreamClient;

/// The OAuth scope Vertex AI calls and GCS uploads need.
const SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";
/// Refresh this long before the token expires.
const REFRESH_EARLY: Duration = Duration::from_secs(300);
/// The JWT's lifetime (Google's maximum).
const JWT_LIFETIME: u64 = 3600;
/// Largest token answer read.
const MAX_TOKEN_BODY: usize = 64 * 1024;

/// A Google service-account key file, given inline (JSON) or as a path, read and checked at
/// load (Vertex AI credentials, the GCS callback): the JSON as a secret, and parsed.
pub fn read_key_file(
    path: &str,
    given: &str,
    p: &mut Problems,
) -> Option<(Secret, serde_json::Value)> {
    let json = if given.trim_start().starts_with('{') {
        given.to_owned()
    } else {
        match std::fs::read_to_string(given) {
            Ok(t) => t,
            Err(e) => {
                p.error(path, format!("cannot read {given:?}: {e}"));
                return None;
            }
        }
    };
    let key: serde_json::Value = match serde_json::from_str(&json) {
        Ok(v) => v,
        Err(e) => {
            p.error(path, format!("not a service-account key file: {e}"));
            return None;
        }
    };
    for field in ["client_email", "private_key", "token_uri"] {
        if !key[field].is_string() {
            p.error(path, format!("the key file has no `{field}`"));
            return None;
        }
    }
    Some((Secret::new(json), key))
}

/// Why a service-account key cannot be used (a startup error) or a token not obtained (a
/// request error, without the key's details).
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// The credentials JSON does not parse or lacks a field.
    #[error("service-account credentials: {0}")]
    BadKeyFile(String),
    /// The private key is not an RSA PKCS#8 key.
    #[error("service-account private key is not a usable RSA key (PKCS#8 PEM expected)")]
    BadKey,
    /// The token endpoint failed or answered something else.
    #[error("fetching a Google access token failed: {0}")]
    Token(String),
}

#[derive(Deserialize)]
struct KeyFile {
    client_email: String,
    private_key: String,
    #[serde(default)]
    private_key_id: Option<String>,
    token_uri: String,
}

#[derive(Deserialize)]
struct TokenAnswer {
    access_token: String,
    #[serde(default)]
    expires_in: Option<u64>,
}

#[derive(Debug)]
struct Cached {
    header: HeaderValue,
    refresh_at: Instant,
    expires_at: Instant,
}

/// Access tokens for one service account, cached.
pub struct TokenSource {
    email: String,
    key_id: Option<String>,
    key: RsaKeyPair,
    token_uri: Uri,
    client: UpstreamClient,
    cached: ArcSwapOption<Cached>,
    refreshing: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenSource")
            .field("email", &self.email)
            .field("token_uri", &self.token_uri)
            .finish_non_exhaustive()
    }
}

/// The DER bytes inside a PEM block.
fn pem_der(pem: &str) -> Option<Vec<u8>> {
    let body: String = pem
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with("-----") && !l.is_empty())
        .collect();
    STANDARD.decode(body).ok()
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl TokenSource {
    /// Read a service-account key file's JSON.
    pub fn new(json: &str, client: UpstreamClient) -> Result<Self, AuthError> {
        let kf: KeyFile =
            serde_json::from_str(json).map_err(|e| AuthError::BadKeyFile(e.to_string()))?;
        let der = pem_der(&kf.private_key).ok_or(AuthError::BadKey)?;
        let key = RsaKeyPair::from_pkcs8(&der).map_err(|_| AuthError::BadKey)?;
        let token_uri = kf
            .token_uri
            .parse()
            .map_err(|e: http::uri::InvalidUri| AuthError::BadKeyFile(format!("token_uri: {e}")))?;
        Ok(Self {
            email: kf.client_email,
            key_id: kf.private_key_id,
            key,
            token_uri,
            client,
            cached: ArcSwapOption::empty(),
            refreshing: tokio::sync::Mutex::new(()),
        })
    }

    /// The signed JWT assertion for a token request issued at `iat` (Unix seconds).
    pub fn assertion(&self, iat: u64) -> Result<String, AuthError> {
        let mut header = serde_json::json!({"alg": "RS256", "typ": "JWT"});
        if let Some(kid) = &self.key_id {
            header["kid"] = kid.clone().into();
        }
        let claims = serde_json::json!({
            "iss": self.email,
            "scope": SCOPE,
            "aud": self.token_uri.to_string(),
            "iat": iat,
            "exp": iat + JWT_LIFETIME,
        });
        let mut jwt = URL_SAFE_NO_PAD.encode(header.to_string());
        jwt.push('.');
        jwt.push_str(&URL_SAFE_NO_PAD.encode(claims.to_string()));
        let mut sig = vec![0; self.key.public().modulus_len()];
        self.key
            .sign(
                &RSA_PKCS1_SHA256,
                // ring's RSA signing takes a random source of its own type (for blinding):
                // the one place sluice's code draws randomness outside sluice_core::random.
                &SystemRandom::new(),
                jwt.as_bytes(),
                &mut sig,
            )
            .map_err(|_| AuthError::Token("signing the assertion failed".into()))?;
        jwt.push('.');
        jwt.push_str(&URL_SAFE_NO_PAD.encode(sig));
        Ok(jwt)
    }

    /// The public key (DER `RSAPublicKey`), for verifying assertions in tests.
    pub fn public_key(&self) -> &[u8] {
        self.key.public().as_ref()
    }

    /// `Authorization: Bearer <token>`, from the cache or freshly fetched.
    pub async fn header(&self) -> Result<HeaderValue, AuthError> {
        let now = Instant::now();
        if let Some(c) = self.cached.load().as_ref() {
            if now < c.refresh_at {
                return Ok(c.header.clone());
            }
            if now < c.expires_at {
                // Due for refresh but still valid: one request refreshes, the others go on.
                if let Ok(_guard) = self.refreshing.try_lock() {
                    if let Ok(fresh) = self.fetch().await {
                        return Ok(fresh);
                    }
                }
                return Ok(c.header.clone());
            }
        }
        let _guard = self.refreshing.lock().await;
        // Another request may have fetched one while this one waited.
        if let Some(c) = self.cached.load().as_ref() {
            if Instant::now() < c.expires_at {
                return Ok(c.header.clone());
            }
        }
        self.fetch().await
    }

    async fn fetch(&self) -> Result<HeaderValue, AuthError> {
        let assertion = self.assertion(unix_now())?;
        let form = format!(
            "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion={assertion}"
        );
        let mut req = Request::post(self.token_uri.clone())
            .body(SegmentsBody::new(vec![Bytes::from(form)]))
            .map_err(|e| AuthError::Token(e.to_string()))?;
        req.headers_mut().insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/x-www-form-urlencoded"),
        );
        let started = Instant::now();
        let resp = self
            .client
            .request(req)
            .await
            .map_err(|e| AuthError::Token(e.to_string()))?;
        let status = resp.status();
        let body = Limited::new(resp.into_body(), MAX_TOKEN_BODY)
            .collect()
            .await
            .map_err(|e| AuthError::Token(e.to_string()))?
            .to_bytes();
        if !status.is_success() {
            let text: String = String::from_utf8_lossy(&body).chars().take(300).collect();
            return Err(AuthError::Token(format!("status {status}: {text}")));
        }
        let answer: TokenAnswer =
            serde_json::from_slice(&body).map_err(|e| AuthError::Token(e.to_string()))?;
        let mut header = HeaderValue::from_str(&format!("Bearer {}", answer.access_token))
            .map_err(|_| AuthError::Token("the access token is not a header value".into()))?;
        header.set_sensitive(true);
        let lifetime = Duration::from_secs(answer.expires_in.unwrap_or(JWT_LIFETIME));
        self.cached.store(Some(Arc::new(Cached {
            header: header.clone(),
            refresh_at: started + lifetime.saturating_sub(REFRESH_EARLY),
            expires_at: started + lifetime,
        })));
        Ok(header)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::ClientRegistry;
    use ring::signature::{UnparsedPublicKey, RSA_PKCS1_2048_8192_SHA256};

    fn key_file() -> String {
        let path = format!(
            "{}/../../tests/fixtures/vertex/service_account.json",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read_to_string(path).unwrap()
    }

    #[tokio::test]
    async fn assertions_are_rs256_signed_with_the_right_claims() {
        let client = ClientRegistry::default().get(Duration::from_secs(1));
        let src = TokenSource::new(&key_file(), client).unwrap();
        let jwt = src.assertion(1_700_000_000).unwrap();
        let parts: Vec<&str> = jwt.split('.').collect();
        assert_eq!(parts.len(), 3);
        let header: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[0]).unwrap()).unwrap();
        assert_eq!(header["alg"], "RS256");
        assert_eq!(header["kid"], "test-key-1");
        let claims: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
        assert_eq!(
            claims["iss"],
            "sluice-test@sluice-test.iam.gserviceaccount.com"
        );
        assert_eq!(claims["aud"], "https://oauth2.googleapis.com/token");
        assert_eq!(claims["scope"], SCOPE);
        assert_eq!(claims["exp"], 1_700_003_600);
        let sig = URL_SAFE_NO_PAD.decode(parts[2]).unwrap();
        let signed = format!("{}.{}", parts[0], parts[1]);
        let public = UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, src.public_key());
        public.verify(signed.as_bytes(), &sig).unwrap();
        assert!(public.verify(b"other", &sig).is_err());
    }

    #[test]
    fn bad_key_files_are_named() {
        let client = ClientRegistry::default().get(Duration::from_secs(1));
        assert!(matches!(
            TokenSource::new("{}", client.clone()),
            Err(AuthError::BadKeyFile(_))
        ));
        let bad = r#"{"client_email":"a","private_key":"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n","token_uri":"http://x/token"}"#;
        assert!(matches!(
            TokenSource::new(bad, client),
            Err(AuthError::BadKey)
        ));
    }
}
