//! The ids sluice hands out for files, batches, videos and vector stores: the upstream's id with the deployment that
//! holds it and the key that created it encoded in, and a MAC over all three, so that any
//! instance of a fleet, before or after a restart, sends later calls to the same upstream
//! without a table, and knows whose object it is without trusting the client.
//! `file-sluice-<base64url>`, `batch_sluice-<base64url>`, `video_sluice-…` and `vs_sluice-…`, like LiteLLM's managed ids: opaque
//! to clients, readable (not secret: only the owner and the master key are shown them) but not
//! forgeable. The base64 holds `deployment \n creator \n upstream` followed by the first 16
//! bytes of HMAC-SHA256 over the kind's prefix and that text, keyed by [`IdKey`] (derived from
//! the master key). An id whose MAC does not match, or that was altered in any byte, decodes to
//! nothing, and the caller answers 404.
//!
//! With no master key the gateway is open and has no tenants: ids are signed with a fixed,
//! public key, so anyone could mint one, which grants nothing an open gateway does not already
//! grant. Setting (or changing) the master key retires every id signed before, as it retires
//! the console's sessions.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use ring::hmac;
use subtle::ConstantTimeEq as _;

use crate::auth::MasterKey;

/// Prefix of a file id sluice issued.
const FILE: &str = "file-sluice-";
/// Prefix of a batch id sluice issued.
const BATCH: &str = "batch_sluice-";
/// Prefix of a video id sluice issued.
const VIDEO: &str = "video_sluice-";
/// Prefix of a vector store id sluice issued.
const VECTOR_STORE: &str = "vs_sluice-";
/// Longest id sluice decodes (deployment ids and upstream ids are short).
const MAX_ID: usize = 2048;
/// Bytes of the MAC kept in an id (128 bits: forging one is a 2^-128 guess per request).
const TAG: usize = 16;
/// What the id key is derived for (`MasterKey::derive`).
const LABEL: &[u8] = b"sluice files and batches ids v1";

/// The key ids are signed with: derived from the master key, so every instance of a fleet
/// signs and checks alike.
#[derive(Clone)]
pub struct IdKey(hmac::Key);

impl std::fmt::Debug for IdKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("IdKey(*****)")
    }
}

impl IdKey {
    /// The key for a gateway with this master key; with none (an open gateway), a fixed key.
    pub fn new(master: Option<&MasterKey>) -> Self {
        let secret = master.map_or([0u8; 32], |m| m.derive(LABEL));
        Self(hmac::Key::new(hmac::HMAC_SHA256, &secret))
    }

    fn tag(&self, kind: Kind, text: &[u8]) -> [u8; TAG] {
        let mut ctx = hmac::Context::with_key(&self.0);
        ctx.update(kind.prefix().as_bytes());
        ctx.update(text);
        let full = ctx.sign();
        let mut out = [0u8; TAG];
        // HMAC-SHA256 gives 32 bytes; the first 16 are kept.
        out.copy_from_slice(&full.as_ref()[..TAG]);
        out
    }
}

/// What a sluice id stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    /// The deployment that holds the object.
    pub deployment: String,
    /// The hex hash of the key that created it (`None`: the master key or an open gateway).
    pub creator: Option<String>,
    /// The upstream's own id.
    pub upstream: String,
}

/// What kind of object an id names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `file-sluice-...`
    File,
    /// `batch_sluice-...`
    Batch,
    /// `video_sluice-...`
    Video,
    /// `vs_sluice-...`
    VectorStore,
}

impl Kind {
    fn prefix(self) -> &'static str {
        match self {
            Self::File => FILE,
            Self::Batch => BATCH,
            Self::Video => VIDEO,
            Self::VectorStore => VECTOR_STORE,
        }
    }

    /// The word OpenAI's 404 uses.
    pub fn noun(self) -> &'static str {
        match self {
            Self::File => "file",
            Self::Batch => "batch",
            Self::Video => "video",
            Self::VectorStore => "vector store",
        }
    }

    /// The upstream path of its collection (`/files`).
    pub fn collection(self) -> &'static str {
        match self {
            Self::File => "/files",
            Self::Batch => "/batches",
            Self::Video => "/videos",
            Self::VectorStore => "/vector_stores",
        }
    }

    /// The API a provider without it is refused for.
    pub fn api(self) -> &'static str {
        match self {
            Self::File => "files",
            Self::Batch => "batches",
            Self::Video => "videos",
            Self::VectorStore => "vector_stores",
        }
    }

    /// The store's name for the same kind.
    pub fn stored(self) -> sluice_store::ObjectKind {
        match self {
            Self::File => sluice_store::ObjectKind::File,
            Self::Batch => sluice_store::ObjectKind::Batch,
            Self::Video => sluice_store::ObjectKind::Video,
            Self::VectorStore => sluice_store::ObjectKind::VectorStore,
        }
    }
}

/// The id sluice shows for an upstream object held by `deployment`, created by `creator`.
pub fn encode(
    key: &IdKey,
    kind: Kind,
    deployment: &str,
    creator: Option<&str>,
    upstream: &str,
) -> String {
    let mut raw = format!("{deployment}\n{}\n{upstream}", creator.unwrap_or_default()).into_bytes();
    let tag = key.tag(kind, &raw);
    raw.extend_from_slice(&tag);
    format!("{}{}", kind.prefix(), URL_SAFE_NO_PAD.encode(raw))
}

/// Read an id sluice issued and check its MAC; `None` for anything else (the caller answers
/// 404).
pub fn decode(key: &IdKey, kind: Kind, id: &str) -> Option<Decoded> {
    if id.len() > MAX_ID {
        return None;
    }
    let raw = URL_SAFE_NO_PAD
        .decode(id.strip_prefix(kind.prefix())?)
        .ok()?;
    let split = raw.len().checked_sub(TAG)?;
    let (text, tag) = raw.split_at(split);
    if !bool::from(key.tag(kind, text).ct_eq(tag)) {
        return None;
    }
    let text = std::str::from_utf8(text).ok()?;
    let mut fields = text.splitn(3, '\n');
    let (deployment, creator, upstream) = (fields.next()?, fields.next()?, fields.next()?);
    if deployment.is_empty() || upstream.is_empty() {
        return None;
    }
    Some(Decoded {
        deployment: deployment.to_owned(),
        creator: (!creator.is_empty()).then(|| creator.to_owned()),
        upstream: upstream.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::Secret;

    fn key(master: &str) -> IdKey {
        IdKey::new(Some(&MasterKey::new(&Secret::new(master.to_owned()))))
    }

    #[test]
    fn ids_round_trip_and_refuse_strangers() {
        let k = key("sk-master");
        let id = encode(&k, Kind::Batch, "dep-1", Some("ab12"), "batch_abc");
        assert!(id.starts_with("batch_sluice-"));
        assert_eq!(
            decode(&k, Kind::Batch, &id),
            Some(Decoded {
                deployment: "dep-1".into(),
                creator: Some("ab12".into()),
                upstream: "batch_abc".into(),
            })
        );
        let f = encode(&k, Kind::File, "d", None, "file-x");
        assert_eq!(decode(&k, Kind::File, &f).unwrap().creator, None);
        assert_eq!(
            decode(&k, Kind::Batch, &f),
            None,
            "a file id is no batch id"
        );
        assert_eq!(decode(&k, Kind::File, "file-abc"), None);
        assert_eq!(decode(&k, Kind::File, "file-sluice-!!"), None);
        assert_eq!(decode(&k, Kind::File, "file-sluice-"), None);
        assert_eq!(
            decode(&k, Kind::File, &encode(&k, Kind::File, "", None, "x")),
            None
        );
    }

    #[test]
    fn forged_and_altered_ids_are_refused() {
        let k = key("sk-master");
        let id = encode(&k, Kind::Batch, "dep-1", Some("aa"), "batch_abc");
        // Signed with another master key (or none): not ours.
        assert_eq!(decode(&key("sk-other"), Kind::Batch, &id), None);
        assert_eq!(decode(&IdKey::new(None), Kind::Batch, &id), None);
        // The old unsigned form, with another creator or none.
        for text in ["dep-1\nbb\nbatch_abc", "dep-1\n\nbatch_abc"] {
            let unsigned = format!("{BATCH}{}", URL_SAFE_NO_PAD.encode(text));
            assert_eq!(decode(&k, Kind::Batch, &unsigned), None, "{text}");
        }
        // Every byte altered, one at a time.
        let raw = URL_SAFE_NO_PAD
            .decode(id.strip_prefix(BATCH).unwrap())
            .unwrap();
        for i in 0..raw.len() {
            let mut bad = raw.clone();
            bad[i] ^= 1;
            let forged = format!("{BATCH}{}", URL_SAFE_NO_PAD.encode(&bad));
            assert_eq!(decode(&k, Kind::Batch, &forged), None, "byte {i}");
        }
        // The same text with the tag of another text.
        let other = encode(&k, Kind::Batch, "dep-1", Some("bb"), "batch_abc");
        let other_raw = URL_SAFE_NO_PAD
            .decode(other.strip_prefix(BATCH).unwrap())
            .unwrap();
        let mut spliced = raw[..raw.len() - TAG].to_vec();
        spliced.extend_from_slice(&other_raw[other_raw.len() - TAG..]);
        let spliced = format!("{BATCH}{}", URL_SAFE_NO_PAD.encode(spliced));
        assert_eq!(decode(&k, Kind::Batch, &spliced), None);
    }
}
