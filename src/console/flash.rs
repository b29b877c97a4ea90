//! What a form post leaves for the page its redirect leads to (post/redirect/get): a line
//! saying what was done, a new key's plaintext to show once, a reload's warnings. Every
//! successful post answers `303 See Other`, so Back and reload never post again; what the next
//! page must say travels beside the redirect, never in its URL.
//!
//! It travels in a cookie, sealed (ChaCha20-Poly1305 under a key derived from the master key)
//! and bound to the session it was made for (the session token's SHA-256 is the associated
//! data): unreadable in the browser, useless to another session, good for five minutes, and
//! removed by the first page that reads it. A cookie rather than a table or this instance's
//! memory: the redirect may land on another instance of a fleet, or after a reload, and a key
//! made must still be shown.

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, CHACHA20_POLY1305, NONCE_LEN};
use serde::{Deserialize, Serialize};

use crate::auth::MasterKey;

/// The cookie.
pub(super) const FLASH_COOKIE: &str = "sluice_flash";

/// How long a flash waits for its page.
pub(super) const LIFETIME_S: u64 = 300;

/// What the next page shows.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Flash {
    /// What was done ("Team search created.").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notice: Option<String>,
    /// A key made or regenerated, shown once on `/ui/keys/created`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<Revealed>,
    /// Warnings to list under the notice (a reloaded config's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl Flash {
    /// A flash that only says what was done.
    pub(crate) fn notice(text: impl Into<String>) -> Self {
        Self {
            notice: Some(text.into()),
            ..Self::default()
        }
    }
}

/// A new key's plaintext and what names it (its `Debug` never shows the key).
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Revealed {
    /// The key itself.
    pub key: String,
    /// Its hash, as the lists show it.
    pub token: String,
    /// Its alias.
    pub alias: Option<String>,
    /// Made anew for a key that existed (`/key/regenerate`), not a new key.
    pub regenerated: bool,
}

impl std::fmt::Debug for Revealed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Revealed")
            .field("key", &"*****")
            .field("token", &self.token)
            .field("alias", &self.alias)
            .field("regenerated", &self.regenerated)
            .finish()
    }
}

/// Seals and opens flashes for one master key.
pub(super) struct Sealer(LessSafeKey);

impl Sealer {
    /// The sealer for this master key (its own derived key: a flash cannot pass for a session
    /// or a CSRF token).
    pub(super) fn new(master: &MasterKey) -> Option<Self> {
        let key = master.derive(b"sluice console flash v1");
        UnboundKey::new(&CHACHA20_POLY1305, &key)
            .ok()
            .map(|k| Self(LessSafeKey::new(k)))
    }

    /// The cookie value carrying `flash` for the session `token`, good until `now` plus
    /// [`LIFETIME_S`]: `base64(nonce ‖ sealed(expiry ‖ JSON))`.
    pub(super) fn seal(&self, token: &str, flash: &Flash, now: u64) -> Option<String> {
        let mut nonce = [0u8; NONCE_LEN];
        sluice_core::random::fill(&mut nonce).ok()?;
        let mut data = (now + LIFETIME_S).to_be_bytes().to_vec();
        data.extend(serde_json::to_vec(flash).ok()?);
        self.0
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(bound(token)),
                &mut data,
            )
            .ok()?;
        let mut out = nonce.to_vec();
        out.extend(data);
        Some(B64.encode(out))
    }

    /// The flash in a cookie value, if it was sealed for the session `token` and has not
    /// expired.
    pub(super) fn open(&self, token: &str, value: &str, now: u64) -> Option<Flash> {
        let raw = B64.decode(value).ok()?;
        if raw.len() < NONCE_LEN {
            return None;
        }
        let (nonce, sealed) = raw.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut sealed = sealed.to_vec();
        let plain = self
            .0
            .open_in_place(nonce, Aad::from(bound(token)), &mut sealed)
            .ok()?;
        let (expiry, json) = plain.split_at_checked(8)?;
        let expiry = u64::from_be_bytes(expiry.try_into().ok()?);
        (expiry > now)
            .then(|| serde_json::from_slice(json).ok())
            .flatten()
    }
}

/// What binds a flash to its session: the SHA-256 of the session token.
fn bound(token: &str) -> [u8; 32] {
    let d = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::Secret;

    fn sealer(master: &str) -> Sealer {
        Sealer::new(&MasterKey::new(&Secret::new(master.to_owned()))).unwrap()
    }

    #[test]
    fn a_flash_opens_only_for_its_session_before_it_expires() {
        let s = sealer("sk-master");
        let flash = Flash {
            key: Some(Revealed {
                key: "sk-plain".into(),
                token: "hash".into(),
                alias: Some("billing".into()),
                regenerated: false,
            }),
            ..Flash::notice("done")
        };
        let sealed = s.seal("session-a", &flash, 1000).unwrap();
        assert!(!sealed.contains("sk-plain"));
        assert!(
            !format!("{flash:?}").contains("sk-plain"),
            "Debug never shows the key"
        );
        assert_eq!(s.open("session-a", &sealed, 1000), Some(flash.clone()));
        assert_eq!(
            s.open("session-b", &sealed, 1000),
            None,
            "another session's"
        );
        assert_eq!(
            s.open("session-a", &sealed, 1000 + LIFETIME_S),
            None,
            "expired"
        );
        assert_eq!(sealer("sk-other").open("session-a", &sealed, 1000), None);
        let mut forged = B64.decode(&sealed).unwrap();
        *forged.last_mut().unwrap() ^= 1;
        assert_eq!(s.open("session-a", &B64.encode(forged), 1000), None);
        assert_eq!(s.open("session-a", "not base64!", 1000), None);
        assert_eq!(s.open("session-a", "", 1000), None);
    }
}
