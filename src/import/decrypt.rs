//! LiteLLM's encryption of the secrets it stores (a stored deployment's `litellm_params`
//! values, MCP credentials, guardrail keys), opened so that sluice can seal them its own way.
//!
//! LiteLLM derives one 32-byte key, SHA-256 of `LITELLM_SALT_KEY` (else of the master key), and
//! writes each value in one of two forms (`proxy/common_utils/encrypt_decrypt_utils.py`):
//! NaCl's secretbox (XSalsa20-Poly1305), `base64url(nonce ‖ tag ‖ ciphertext)`, its default;
//! or, with `encryption_algorithm: aes-256-gcm`, `"v2:gcm:" + base64url(nonce ‖ ciphertext ‖
//! tag)`. Both are authenticated, so a value either opens under the key or it does not: a value
//! that is not a ciphertext is never mistaken for one.

use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine as _;
use crypto_secretbox::aead::{Aead, KeyInit};
use crypto_secretbox::XSalsa20Poly1305;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM};
use ring::digest::{digest, SHA256};
use serde_json::{Map, Value};

/// The marker of LiteLLM's AES-256-GCM form.
const GCM_PREFIX: &str = "v2:gcm:";

/// The marker LiteLLM puts before a sealed value in a guardrail's or callback's settings
/// (`CALLBACK_VAR_ENCRYPTED_PREFIX`): the value after it is in one of the two forms.
const ENC_PREFIX: &str = "litellm_enc::";

/// Base64 as Python's decoders read it here: padding optional.
const LENIENT: GeneralPurposeConfig =
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent);
const URL_SAFE: GeneralPurpose = GeneralPurpose::new(&alphabet::URL_SAFE, LENIENT);
const STANDARD: GeneralPurpose = GeneralPurpose::new(&alphabet::STANDARD, LENIENT);

/// Nonce and tag of a secretbox: the shortest ciphertext.
const SECRETBOX_OVERHEAD: usize = 24 + 16;

/// LiteLLM's key for its stored secrets.
pub struct LiteLlmKey {
    key: [u8; 32],
}

impl std::fmt::Debug for LiteLlmKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LiteLlmKey(..)")
    }
}

/// What became of one stored value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Opened {
    /// It was a ciphertext under the key: here is the text.
    Plain(String),
    /// It is a ciphertext, but not under this key (a different `LITELLM_SALT_KEY` or master
    /// key), or damaged.
    WrongKey,
    /// It is not a ciphertext at all (LiteLLM left it as written).
    NotSealed,
}

impl LiteLlmKey {
    /// The key LiteLLM derives from `signing_key` (`LITELLM_SALT_KEY`, else the master key).
    pub fn new(signing_key: &str) -> Self {
        let mut key = [0u8; 32];
        key.copy_from_slice(digest(&SHA256, signing_key.as_bytes()).as_ref());
        Self { key }
    }

    /// Opens one stored value.
    pub fn open(&self, value: &str) -> Opened {
        if let Some(inner) = value.strip_prefix(ENC_PREFIX) {
            return match self.open(inner) {
                Opened::NotSealed => Opened::WrongKey,
                opened => opened,
            };
        }
        if let Some(b64) = value.strip_prefix(GCM_PREFIX) {
            return match URL_SAFE.decode(b64) {
                Ok(sealed) => self
                    .open_gcm(sealed)
                    .map_or(Opened::WrongKey, Opened::Plain),
                Err(_) => Opened::WrongKey,
            };
        }
        let Some(sealed) = URL_SAFE
            .decode(value)
            .or_else(|_| STANDARD.decode(value))
            .ok()
            .filter(|b| b.len() >= SECRETBOX_OVERHEAD)
        else {
            return Opened::NotSealed;
        };
        match self.open_secretbox(&sealed) {
            Some(plain) => Opened::Plain(plain),
            // Base64 of at least a nonce and a tag that does not open: a ciphertext under
            // another key. Plain settings are never that long and base64-clean by chance
            // except for opaque tokens, which is why this is reported, not assumed.
            None => Opened::WrongKey,
        }
    }

    fn open_secretbox(&self, sealed: &[u8]) -> Option<String> {
        let (nonce, body) = sealed.split_at(24);
        let cipher = XSalsa20Poly1305::new(&self.key.into());
        let plain = cipher.decrypt(nonce.into(), body).ok()?;
        String::from_utf8(plain).ok()
    }

    fn open_gcm(&self, mut sealed: Vec<u8>) -> Option<String> {
        if sealed.len() < 12 + 16 {
            return None;
        }
        let body = sealed.split_off(12);
        let nonce = Nonce::try_assume_unique_for_key(&sealed).ok()?;
        let key = LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &self.key).ok()?);
        let mut body = body;
        let plain = key.open_in_place(nonce, Aad::empty(), &mut body).ok()?;
        String::from_utf8(plain.to_vec()).ok()
    }

    /// Opens every string value of `params` that is a ciphertext (as LiteLLM reads a stored
    /// deployment back: each value on its own, others left as they are). Returns the names
    /// of values sealed under another key; those are left as they were.
    pub fn open_values(&self, params: &mut Map<String, Value>) -> Vec<String> {
        let mut wrong = Vec::new();
        for (name, value) in params.iter_mut() {
            if let Value::String(s) = value {
                match self.open(s) {
                    Opened::Plain(p) => *s = p,
                    Opened::WrongKey => wrong.push(name.clone()),
                    Opened::NotSealed => {}
                }
            }
        }
        wrong
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Written by PyNaCl's `SecretBox(sha256(key)).encrypt(..., nonce=bytes(range(24)))` and
    /// `cryptography`'s `AESGCM(sha256(key)).encrypt(bytes(range(12)), ...)`, base64url'd as
    /// LiteLLM does, under the signing key `sk-litellm-master-1234`.
    const LEGACY: &str =
        "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXqTKON1cPKR_UjN-_KQsOL7v5B-oaLwIH9gKY551vL25o6w==";
    const LEGACY_STANDARD: &str =
        "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXqTKON1cPKR/UjN+/KQsOL7v5B+oaLwIH9gKY551vL25o6w==";
    const GCM: &str =
        "v2:gcm:AAECAwQFBgcICQoLa-EqyPPCwjutB5S87AYpF6ivb6UrXVBpJYw2Z7Ck7xB_NywyU66SeIQK";
    const EMPTY: &str = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAjKAmX4IoMjDzJbNqsOAFDw==";

    #[test]
    fn opens_both_of_litellms_forms() {
        let k = LiteLlmKey::new("sk-litellm-master-1234");
        assert_eq!(k.open(LEGACY), Opened::Plain("sk-upstream-secret".into()));
        assert_eq!(
            k.open(LEGACY_STANDARD),
            Opened::Plain("sk-upstream-secret".into())
        );
        assert_eq!(
            k.open(GCM),
            Opened::Plain("https://api.example.com/v1".into())
        );
        assert_eq!(k.open(EMPTY), Opened::Plain(String::new()));
        assert_eq!(
            k.open(LEGACY.trim_end_matches('=')),
            Opened::Plain("sk-upstream-secret".into())
        );
    }

    #[test]
    fn another_key_and_plain_values_are_told_apart() {
        let other = LiteLlmKey::new("sk-another");
        assert_eq!(other.open(LEGACY), Opened::WrongKey);
        assert_eq!(other.open(GCM), Opened::WrongKey);
        let k = LiteLlmKey::new("sk-litellm-master-1234");
        for plain in [
            "openai/gpt-4o",
            "https://api.openai.com/v1",
            "",
            "2024-02-01",
            "sk-abc",
        ] {
            assert_eq!(k.open(plain), Opened::NotSealed, "{plain}");
        }
        let mut params: Map<String, Value> = serde_json::from_value(serde_json::json!({
            "model": "openai/gpt-4o", "api_key": LEGACY, "api_base": GCM, "rpm": 10,
        }))
        .unwrap();
        assert!(k.open_values(&mut params).is_empty());
        assert_eq!(params["api_key"], "sk-upstream-secret");
        assert_eq!(params["api_base"], "https://api.example.com/v1");
        assert_eq!(params["model"], "openai/gpt-4o");
        assert_eq!(params["rpm"], 10);
        let mut params: Map<String, Value> =
            serde_json::from_value(serde_json::json!({"api_key": LEGACY})).unwrap();
        assert_eq!(other.open_values(&mut params), ["api_key"]);
    }
}
