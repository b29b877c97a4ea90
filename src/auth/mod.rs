//! Who may call the gateway. Today: the master key from `general_settings.master_key`,
//! checked in constant time. Virtual keys will join it here, looked up in an in-memory snapshot.

use http::HeaderMap;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::config::Secret;
use crate::error::ApiError;

/// The master key, kept only as a SHA-256 digest so its bytes never sit in request state.
#[derive(Clone)]
pub struct MasterKey {
    digest: [u8; 32],
}

impl std::fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MasterKey(*****)")
    }
}

impl MasterKey {
    /// Digest the configured key.
    pub fn new(secret: &Secret) -> Self {
        Self {
            digest: Sha256::digest(secret.expose().as_bytes()).into(),
        }
    }

    /// Whether `presented` is the master key. Hashing first makes the comparison constant-time
    /// in the key's length as well as its content.
    pub fn matches(&self, presented: &str) -> bool {
        let d: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        d.ct_eq(&self.digest).into()
    }
}

/// The key a client presented: `Authorization: Bearer …`, `x-api-key` or `api-key` (the
/// OpenAI, Anthropic and Azure SDKs' headers respectively).
pub fn presented_key(headers: &HeaderMap) -> Option<&str> {
    if let Some(v) = headers.get(http::header::AUTHORIZATION) {
        let v = v.to_str().ok()?.trim();
        let key = v
            .strip_prefix("Bearer ")
            .or_else(|| v.strip_prefix("bearer "))
            .unwrap_or(v)
            .trim();
        return (!key.is_empty()).then_some(key);
    }
    ["x-api-key", "api-key"]
        .iter()
        .find_map(|h| headers.get(*h))
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|k| !k.is_empty())
}

/// Check a request's credentials. `None` master key: the gateway is open.
pub fn authorize(master: Option<&MasterKey>, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(master) = master else {
        return Ok(());
    };
    match presented_key(headers) {
        None => Err(ApiError::Unauthorized(
            "no API key provided; pass it as 'Authorization: Bearer <key>'",
        )),
        Some(k) if master.matches(k) => Ok(()),
        Some(_) => Err(ApiError::Unauthorized("invalid API key")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(name: &'static str, value: &'static str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(name, HeaderValue::from_static(value));
        h
    }

    #[test]
    fn accepts_each_header_style() {
        let m = MasterKey::new(&Secret::new("sk-1234"));
        assert!(authorize(Some(&m), &headers("authorization", "Bearer sk-1234")).is_ok());
        assert!(authorize(Some(&m), &headers("x-api-key", "sk-1234")).is_ok());
        assert!(authorize(Some(&m), &headers("api-key", "sk-1234")).is_ok());
        assert!(authorize(Some(&m), &headers("authorization", "Bearer sk-12345")).is_err());
        assert!(authorize(Some(&m), &HeaderMap::new()).is_err());
        assert!(authorize(None, &HeaderMap::new()).is_ok());
    }

    #[test]
    fn debug_hides_key() {
        let m = MasterKey::new(&Secret::new("sk-1234"));
        assert!(!format!("{m:?}").contains("1234"));
    }
}
