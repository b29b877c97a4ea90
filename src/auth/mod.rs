//! Who may call the gateway: the master key from `general_settings.master_key` (checked in
//! constant time) and virtual keys, looked up in the in-memory [`Directory`] that the sync
//! task keeps in step with the store.

mod access;
pub mod addresses;
mod aliases;
mod directory;
mod gate;
pub mod jwt;
pub mod password;
pub mod per_model;
mod route_groups;
mod sync;

pub use access::{ModelAccess, Wanted};
pub use aliases::Aliases;
pub use directory::{
    digest, Above, AlertFacts, Alias, Budgeted, Caller, Directory, Holder, KeyDigest, KeyEntry,
    Stored,
};
pub use gate::{Gate, KeyLoader, LoadFailed, LoadFuture, Loaded};
pub use sluice_core::error::KeyRefusal;
pub use sync::{Sync, POLL_EVERY};

use http::HeaderMap;
use subtle::ConstantTimeEq;

use sluice_core::error::ApiError;
use sluice_core::Secret;

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
            digest: digest(secret.expose()),
        }
    }

    /// Whether `presented` is the master key. Hashing first makes the comparison constant-time
    /// in the key's length as well as its content.
    pub fn matches(&self, presented: &str) -> bool {
        self.matches_digest(&digest(presented))
    }

    /// A secret for one purpose (`label`), derived from the master key: HMAC-SHA256 keyed by
    /// its digest. Every instance of a fleet derives the same one, and a new master key
    /// retires whatever was signed with the old (the console's sessions).
    pub fn derive(&self, label: &[u8]) -> [u8; 32] {
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &self.digest);
        let mut out = [0u8; 32];
        out.copy_from_slice(ring::hmac::sign(&key, label).as_ref());
        out
    }

    /// Whether a presented key's digest is the master key's, in constant time.
    pub fn matches_digest(&self, d: &KeyDigest) -> bool {
        d.ct_eq(&self.digest).into()
    }
}

/// The key a client presented: `Authorization: Bearer …`, `x-api-key` or `api-key` (the
/// OpenAI, Anthropic and Azure SDKs' headers respectively).
pub fn presented_key(headers: &HeaderMap) -> Option<&str> {
    if let Some(v) = headers.get(http::header::AUTHORIZATION) {
        return without_bearer(v);
    }
    ["x-api-key", "api-key"]
        .iter()
        .find_map(|h| headers.get(*h))
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|k| !k.is_empty())
}

/// LiteLLM's `x-litellm-api-key`, which routes whose `Authorization` carries a provider's own
/// credential (pass-through, MCP) read first; LiteLLM's docs send it with and without `Bearer `.
pub fn litellm_key(headers: &HeaderMap) -> Option<&str> {
    headers.get("x-litellm-api-key").and_then(without_bearer)
}

/// A header's key, without a `Bearer ` prefix; `None` when empty or not text.
fn without_bearer(v: &http::HeaderValue) -> Option<&str> {
    let v = v.to_str().ok()?.trim();
    let key = v
        .strip_prefix("Bearer ")
        .or_else(|| v.strip_prefix("bearer "))
        .unwrap_or(v)
        .trim();
    (!key.is_empty()).then_some(key)
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
