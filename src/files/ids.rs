//! The ids sluice hands out for files and batches: the upstream's id with the deployment that
//! holds it (and, for a batch, the key that created it) encoded in, so that any instance of a
//! fleet, before or after a restart, sends later calls to the same upstream without a table.
//! `file-sluice-<base64url>` and `batch_sluice-<base64url>`, like LiteLLM's managed ids: opaque
//! to clients, not secret (a key's hash is what spend logs show already).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;

/// Prefix of a file id sluice issued.
const FILE: &str = "file-sluice-";
/// Prefix of a batch id sluice issued.
const BATCH: &str = "batch_sluice-";
/// Longest id sluice decodes (deployment ids and upstream ids are short).
const MAX_ID: usize = 2048;

/// What a sluice id stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    /// The deployment that holds the object.
    pub deployment: String,
    /// The hex hash of the key that created it (batches made with a virtual key).
    pub creator: Option<String>,
    /// The upstream's own id.
    pub upstream: String,
}

/// Whether an id names a file or a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `file-sluice-...`
    File,
    /// `batch_sluice-...`
    Batch,
}

impl Kind {
    fn prefix(self) -> &'static str {
        match self {
            Self::File => FILE,
            Self::Batch => BATCH,
        }
    }

    /// The word OpenAI's 404 uses.
    pub fn noun(self) -> &'static str {
        match self {
            Self::File => "file",
            Self::Batch => "batch",
        }
    }
}

/// The id sluice shows for an upstream object held by `deployment`.
pub fn encode(kind: Kind, deployment: &str, creator: Option<&str>, upstream: &str) -> String {
    let raw = format!("{deployment}\n{}\n{upstream}", creator.unwrap_or_default());
    format!("{}{}", kind.prefix(), URL_SAFE_NO_PAD.encode(raw))
}

/// Read an id sluice issued; `None` for anything else (the caller answers 404).
pub fn decode(kind: Kind, id: &str) -> Option<Decoded> {
    if id.len() > MAX_ID {
        return None;
    }
    let raw = URL_SAFE_NO_PAD
        .decode(id.strip_prefix(kind.prefix())?)
        .ok()?;
    let text = String::from_utf8(raw).ok()?;
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

    #[test]
    fn ids_round_trip_and_refuse_strangers() {
        let id = encode(Kind::Batch, "dep-1", Some("ab12"), "batch_abc");
        assert!(id.starts_with("batch_sluice-"));
        assert_eq!(
            decode(Kind::Batch, &id),
            Some(Decoded {
                deployment: "dep-1".into(),
                creator: Some("ab12".into()),
                upstream: "batch_abc".into(),
            })
        );
        let f = encode(Kind::File, "d", None, "file-x");
        assert_eq!(decode(Kind::File, &f).unwrap().creator, None);
        assert_eq!(decode(Kind::Batch, &f), None, "a file id is no batch id");
        assert_eq!(decode(Kind::File, "file-abc"), None);
        assert_eq!(decode(Kind::File, "file-sluice-!!"), None);
        assert_eq!(decode(Kind::File, &encode(Kind::File, "", None, "x")), None);
    }
}
