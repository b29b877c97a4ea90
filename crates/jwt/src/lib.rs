//! JWT verification for API calls (LiteLLM's `general_settings.enable_jwt_auth`), pure: no I/O,
//! no clock read inside (`now`, Unix seconds, is passed in), so every rule is a deterministic
//! test and the gateway decides when to fetch keys.
//!
//! # What is checked
//! - The token is a compact JWS (`header.payload.signature`, base64url without padding, at most
//!   [`MAX_TOKEN_LEN`] bytes).
//! - The header's `alg` is asymmetric and one sluice verifies ([`Alg`]: RS256/384/512,
//!   PS256/384/512, ES256, ES384, EdDSA). `none` and `HS*` are refused by name: the keys come
//!   from a public JWK Set, so an HMAC key would be public. A header with `crit` is refused, and
//!   so is an ID-JAG (`typ: oauth-id-jag+jwt`, a grant, not a bearer token, as in LiteLLM); keys
//!   a header carries (`jwk`, `jku`, `x5u`, `x5c`) are ignored.
//! - The key is picked by `kid`, and must be of the algorithm's type (and, if its JWK names an
//!   `alg`, that one): no RSA/EC confusion. A token without `kid` may use the set's only key,
//!   never one of several.
//! - The signature, with ring.
//! - The claims, like PyJWT (which LiteLLM uses): `exp` refused once `now >= exp + leeway`
//!   (required unless [`Validation::require_exp`] is off), `nbf` and `iat` refused when later
//!   than `now + leeway`; `aud` (string or array) must name a configured audience when any is
//!   (`JWT_AUDIENCE`); `iss` must equal the configured issuer when set (`JWT_ISSUER`).
//!
//! Claims come back whole as a shared [`serde_json::Map`] ([`Claims`]); mapping them to teams,
//! users and scopes is the gateway's.
//!
//! # The cache
//! [`Keys::verify`] keeps verified tokens by SHA-256 of the token string, so a token seen
//! before costs one digest and one lock-free read (`papaya`). An entry is served only while
//! `now < exp + leeway` (exactly when a fresh verification would still pass), only under the key
//! set it was verified with, and only while that set is not stale. Without `exp` (when allowed)
//! an entry lives until the key set changes. The cache holds at most
//! [`KeySettings::cache_capacity`] tokens (10,000 by default); an insert into a full cache
//! first drops expired entries and entries from older key sets, and if that frees less than a
//! quarter, drops everything, so a full cache costs each live token one re-verification.
//!
//! # Key rotation and its bounds
//! [`Keys`] holds the current [`Jwks`] and when it was fetched. Installing a set whose keys
//! differ empties the cache and moves the set to a new generation: no verification that starts
//! after [`Keys::install`] returns is answered from one made under the old set (each cache entry
//! carries its generation, so even an insert that raced the swap is never served), so a token
//! signed with a removed key is refused as soon as the IdP's new set is installed.
//! The keys themselves are trusted for `public_key_ttl` (refresh due, [`Keys::refresh_due`]),
//! then for `public_key_stale_ttl` more while refreshes fail, then verification fails closed
//! ([`JwtError::KeysStale`]), as LiteLLM's stale-JWKS bound does. So a key the IdP removed is
//! accepted at most `public_key_ttl + public_key_stale_ttl` after the last successful fetch
//! (600 s + 3600 s by default), and at most `public_key_ttl` plus fetch time while the IdP
//! answers. A token naming an unknown `kid` (a key the IdP just added) may trigger a fetch, at
//! most one per [`KeySettings::min_refresh_interval_secs`] ([`Keys::claim_unknown_kid_refresh`]).
//!
//! # Not supported, and why
//! - PEM or DER public keys and X.509 certificates (LiteLLM accepts a PEM certificate as the
//!   key): ring reads RSA keys only as raw modulus and exponent or PKCS#1, not
//!   SubjectPublicKeyInfo, and certificate parsing is a crate of its own. JWK Sets cover every
//!   OIDC IdP.
//! - ES512 (P-521) and Ed448: ring has neither.
//! - HMAC (`HS*`) and `none`: refused on purpose, see above.
//! - Encrypted tokens (JWE), and `b64: false` payloads (refused through `crit`).
//! - A negative cache: a token with a bad signature is checked again each time it comes (an
//!   RSA or ECDSA verification, tens of microseconds); a made-up `kid` is refused after a map
//!   lookup, without a signature check.
//!
//! # Use from the gateway
//! ```
//! use sluice_jwt::{JwtError, Keys, KeySettings, Validation};
//!
//! let keys = Keys::new(
//!     Validation { audiences: vec!["sluice".into()], ..Validation::default() },
//!     KeySettings::default(),
//! );
//! let now = sluice_jwt::unix_now();
//! # let fetched_jwks_body: &[u8] = br#"{"keys":[{"kty":"EC","crv":"P-256","kid":"k",
//! #   "x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
//! #   "y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}]}"#;
//! // Whoever wins the claim fetches JWT_PUBLIC_KEY_URL and hands over the body.
//! if keys.claim_refresh(now) {
//!     match keys.install(fetched_jwks_body, now) {
//!         Ok(installed) => assert_eq!(installed.keys, 1),
//!         Err(e) => eprintln!("JWKS refused, keeping the previous set: {e}"),
//!     }
//! }
//! // Per request, with the token from `Authorization: Bearer <token>`.
//! # let token = "not.a.token";
//! match keys.verify(token, now) {
//!     Ok(claims) => { let _team = claims.get("team_id"); }
//!     Err(JwtError::UnknownKid) if keys.claim_unknown_kid_refresh(now) => {
//!         // fetch, `keys.install(..)`, then `keys.verify(token, now)` once more
//!     }
//!     Err(e) if e.is_unavailable() => { /* 503, e.to_string() */ }
//!     Err(e) => { /* 401, e.to_string() is safe to send */ let _ = e; }
//! }
//! ```

mod alg;
mod cache;
mod error;
mod jwks;
mod keys;
mod verify;

#[cfg(test)]
mod test_keys;
#[cfg(test)]
mod timing;

pub use alg::{Alg, AlgRefusal, Family};
pub use error::{JwksError, JwtError};
pub use jwks::{Jwk, Jwks, SkipReason, SkippedKey};
pub use keys::{Installed, KeySettings, Keys};
pub use verify::{verify, Claims, Validation, MAX_TOKEN_LEN};

/// The system clock in Unix seconds, for callers to pass as `now`; nothing in this crate reads
/// the clock itself, so tests choose the time. A clock before 1970 reads as 0.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
