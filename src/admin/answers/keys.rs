//! `/key/*`'s answers: a key as `/key/info`, `/key/list`, `/key/update` and the block routes
//! show it, and as `/key/generate` and `/key/regenerate` issue it (with its plaintext, once).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{iso, Accounting, LimitFields, Shown};
use sluice_store::KeyRow;

/// A virtual key as every `/key/*` answer shows it (never its plaintext).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct KeyInfo {
    /// The key's SHA-256 (hex), which every call but the issuing one names it by.
    pub token: String,
    /// The key abbreviated for display (`sk-...abcd`).
    pub key_name: String,
    /// Its unique, human-chosen name.
    pub key_alias: Option<String>,
    /// When it stops working (ISO 8601); `None`: never.
    pub expires: Option<String>,
    /// Its user.
    pub user_id: Option<String>,
    /// Its team.
    pub team_id: Option<String>,
    /// Its organization.
    pub organization_id: Option<String>,
    /// A blocked key is refused but kept.
    pub blocked: bool,
    /// Model groups it may call; empty: all.
    pub models: Vec<String>,
    /// The caller's own `metadata`.
    #[serde(default)]
    pub metadata: Map<String, Value>,
    /// Budget and limits.
    #[serde(flatten)]
    pub limits: LimitFields,
    /// Spend and timestamps.
    #[serde(flatten)]
    pub accounting: Accounting,
    /// LiteLLM's key fields kept in `metadata` and shown beside it (`aliases`,
    /// `soft_budget`, `allowed_cache_controls`, ...), free-form.
    #[serde(flatten)]
    pub kept: Map<String, Value>,
}

impl KeyInfo {
    /// The key's own field names (beside [`LimitFields`] and [`Accounting`]).
    const NAMES: &'static [&'static str] = &[
        "token",
        "key_name",
        "key_alias",
        "expires",
        "user_id",
        "team_id",
        "organization_id",
        "blocked",
        "models",
        "metadata",
    ];

    /// The stored key as shown.
    pub(crate) fn of(k: &KeyRow) -> Self {
        let shown = Shown::of(
            &k.limits,
            &[Self::NAMES, Accounting::NAMES, IssuedKey::NAMES],
        );
        Self {
            token: k.token.as_str().to_owned(),
            key_name: k.key_name.clone(),
            key_alias: k.key_alias.clone(),
            expires: k.expires.and_then(iso),
            user_id: k.user_id.clone(),
            team_id: k.team_id.clone(),
            organization_id: k.organization_id.clone(),
            blocked: k.blocked,
            models: shown.models,
            metadata: shown.metadata,
            limits: shown.limits,
            accounting: Accounting::of(&k.accounting),
            kept: shown.kept,
        }
    }
}

/// `/key/generate` and `/key/regenerate`: the key, plus its plaintext, shown this once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct IssuedKey {
    /// The plaintext `sk-…`.
    pub key: String,
    /// LiteLLM's name for the hash, beside `token`.
    pub token_id: String,
    /// The key as every other answer shows it.
    #[serde(flatten)]
    pub info: KeyInfo,
}

impl IssuedKey {
    /// The issued key's own field names.
    const NAMES: &'static [&'static str] = &["key", "token_id"];

    /// `k`, just issued as `plaintext`.
    pub(crate) fn of(plaintext: String, k: &KeyRow) -> Self {
        Self {
            key: plaintext,
            token_id: k.token.as_str().to_owned(),
            info: KeyInfo::of(k),
        }
    }
}

/// `GET /key/info`: the key as asked for and what it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct KeyInfoAnswer {
    /// The key as the query named it (plaintext or hash).
    pub key: String,
    /// The key.
    pub info: KeyInfo,
}

/// `GET /key/list`: one page of keys.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct KeyList {
    /// The page's keys: hashes, or whole keys with `return_full_object=true`.
    pub keys: Vec<ListedKey>,
    /// Keys in the whole list.
    pub total_count: u64,
    /// This page's number, from 1.
    pub current_page: u64,
    /// Pages in the whole list.
    pub total_pages: u64,
}

/// One key of a list: its hash, or all of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub(crate) enum ListedKey {
    /// The hash (`token`) alone, LiteLLM's default.
    Hash(String),
    /// The whole key (`return_full_object=true`).
    Full(Box<KeyInfo>),
}

impl ListedKey {
    /// The key's hash, either way.
    pub(crate) fn token(&self) -> &str {
        match self {
            Self::Hash(t) => t,
            Self::Full(k) => &k.token,
        }
    }

    /// The whole key, when listed whole.
    pub(crate) fn full(&self) -> Option<&KeyInfo> {
        match self {
            Self::Hash(_) => None,
            Self::Full(k) => Some(k),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admin::answers::tests::names_and_round_trip;

    fn row() -> KeyRow {
        let now = time::macros::datetime!(2026-03-01 12:00 UTC);
        let mut k = KeyRow::new("sk-answers-fixture", now);
        k.key_alias = Some("app".into());
        k.limits.max_budget = Some(2.5);
        k.limits.metadata.insert("owner".into(), "ops".into());
        k
    }

    #[test]
    fn a_key_shows_its_names_and_reads_back() {
        let k = KeyInfo::of(&row());
        names_and_round_trip(&k, &[KeyInfo::NAMES, LimitFields::NAMES, Accounting::NAMES]);
        let issued = IssuedKey::of("sk-answers-fixture".into(), &row());
        names_and_round_trip(
            &issued,
            &[
                IssuedKey::NAMES,
                KeyInfo::NAMES,
                LimitFields::NAMES,
                Accounting::NAMES,
            ],
        );
    }

    #[test]
    fn kept_fields_stand_beside_metadata_unless_the_key_has_the_name() {
        let mut r = row();
        let m = &mut r.limits.metadata;
        m.insert("aliases".into(), serde_json::json!({"fast": "gpt-4o"}));
        m.insert("tags".into(), serde_json::json!(["blue"]));
        // A user's kept field, in a key's metadata: the key's own `blocked` stands.
        m.insert("blocked".into(), true.into());
        let k = KeyInfo::of(&r);
        assert_eq!(k.kept.keys().collect::<Vec<_>>(), ["aliases"]);
        assert!(k.metadata.contains_key("tags") && !k.metadata.contains_key("blocked"));
        let v = serde_json::to_value(&k).unwrap();
        assert_eq!(v["blocked"], false);
        assert_eq!(v["aliases"]["fast"], "gpt-4o");
        assert_eq!(serde_json::from_value::<KeyInfo>(v).unwrap(), k);
    }
}
