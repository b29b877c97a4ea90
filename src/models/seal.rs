//! Provider keys at rest: a stored deployment's `litellm_params` (which holds its `api_key`,
//! AWS secrets, ...) is sealed with ChaCha20-Poly1305 before it reaches the database, under a
//! key derived from LiteLLM's `LITELLM_SALT_KEY` when set, else from the master key. A
//! database dump or backup then holds no usable provider key. Changing the master key without
//! a salt key makes stored deployments unreadable (they are skipped and logged), as in LiteLLM.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, CHACHA20_POLY1305, NONCE_LEN};

use sluice_core::Secret;

/// What sealed text starts with (and the scheme's version).
const PREFIX: &str = "sealed:v1:";

/// Why stored parameters could not be opened.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SealError {
    /// Not text this scheme wrote.
    #[error("not sealed by this version of sluice")]
    Format,
    /// Sealed under another key (the master key or `LITELLM_SALT_KEY` changed), or altered.
    #[error("cannot be opened with this gateway's key (was the master key or LITELLM_SALT_KEY changed?)")]
    Key,
    /// The system's random source failed.
    #[error("no randomness available")]
    Random,
    /// The cipher refused the derived key (it is always 32 bytes: not expected).
    #[error("the sealing key cannot be made")]
    Unusable,
}

/// The sealing key.
pub struct Seal {
    key: LessSafeKey,
}

impl std::fmt::Debug for Seal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Seal(..)")
    }
}

impl Seal {
    /// The key for `salt` (`LITELLM_SALT_KEY`) if given, else for the master key.
    pub fn new(salt: Option<&str>, master: &Secret) -> Result<Self, SealError> {
        Self::keyed(salt, master, b"sluice stored deployment params v1")
    }

    /// The key that seals kept Responses answers and conversations: from the same secret as
    /// [`Seal::new`], for another use (a key for one use opens nothing of the other).
    pub fn for_responses(salt: Option<&str>, master: &Secret) -> Result<Self, SealError> {
        Self::keyed(salt, master, b"sluice responses and conversations v1")
    }

    fn keyed(salt: Option<&str>, master: &Secret, purpose: &[u8]) -> Result<Self, SealError> {
        let secret = salt.unwrap_or_else(|| master.expose());
        let hmac = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret.as_bytes());
        let tag = ring::hmac::sign(&hmac, purpose);
        let key =
            UnboundKey::new(&CHACHA20_POLY1305, tag.as_ref()).map_err(|_| SealError::Unusable)?;
        Ok(Self {
            key: LessSafeKey::new(key),
        })
    }

    /// `plain` sealed under a fresh random nonce, as text for a TEXT column.
    pub fn seal(&self, plain: &[u8]) -> Result<String, SealError> {
        let mut nonce = [0u8; NONCE_LEN];
        sluice_core::random::fill(&mut nonce).map_err(|_| SealError::Random)?;
        let mut buf = plain.to_vec();
        self.key
            .seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::empty(), &mut buf)
            .map_err(|_| SealError::Random)?;
        let mut out = Vec::with_capacity(NONCE_LEN + buf.len());
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&buf);
        Ok(format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(out)))
    }

    /// What [`Seal::seal`] sealed.
    pub fn open(&self, sealed: &str) -> Result<Vec<u8>, SealError> {
        let raw = sealed
            .strip_prefix(PREFIX)
            .and_then(|b| URL_SAFE_NO_PAD.decode(b).ok())
            .filter(|r| r.len() >= NONCE_LEN)
            .ok_or(SealError::Format)?;
        let (nonce, body) = raw.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| SealError::Format)?;
        let mut body = body.to_vec();
        let plain = self
            .key
            .open_in_place(nonce, Aad::empty(), &mut body)
            .map_err(|_| SealError::Key)?;
        Ok(plain.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_params_open_with_the_same_key_only() {
        let master = Secret::new("sk-master-1");
        let s = Seal::new(None, &master).unwrap();
        let plain = br#"{"model":"openai/gpt-4o","api_key":"sk-provider-secret"}"#;
        let sealed = s.seal(plain).unwrap();
        assert!(sealed.starts_with(PREFIX));
        assert!(!sealed.contains("sk-provider-secret"));
        assert_ne!(sealed, s.seal(plain).unwrap(), "a fresh nonce each time");
        assert_eq!(s.open(&sealed).unwrap(), plain);

        let other = Seal::new(None, &Secret::new("sk-master-2")).unwrap();
        assert_eq!(other.open(&sealed), Err(SealError::Key));
        // A salt key decides, whatever the master key.
        let salted = Seal::new(Some("salt"), &master)
            .unwrap()
            .seal(plain)
            .unwrap();
        assert_eq!(
            Seal::new(Some("salt"), &Secret::new("sk-other"))
                .unwrap()
                .open(&salted)
                .unwrap(),
            plain
        );
        assert_eq!(s.open("{\"model\": \"x\"}"), Err(SealError::Format));
        let mut edited = sealed.clone();
        edited.pop();
        edited.push(if sealed.ends_with('A') { 'B' } else { 'A' });
        assert!(s.open(&edited).is_err());
    }
}
