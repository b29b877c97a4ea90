//! Virtual keys. Only the SHA-256 of an `sk-…` key is stored (LiteLLM's `token` column holds
//! the same hex digest), so a copy of the database hands out no usable key.

use std::fmt;

use ring::digest::{digest, SHA256};

use sluice_core::trace_context::hex;
use sqlx::any::AnyRow;
use time::OffsetDateTime;

use super::entity::{Accounting, AnyQuery, Entity};
use super::{col, time_col, to_ms, Limits, Page, Store, StoreError};

/// The stored identity of a key: lowercase hex SHA-256 of the key text.
#[derive(Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct KeyHash(String);

impl KeyHash {
    /// Hashes a key as presented by a client.
    pub fn of(key: &str) -> Self {
        Self(hex(digest(&SHA256, key.as_bytes()).as_ref()))
    }

    /// A digest given back by the admin API (`/key/info?key=<hash>`): 64 hex digits.
    pub fn from_hex(hex: &str) -> Option<Self> {
        (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| Self(hex.to_ascii_lowercase()))
    }

    /// The hex digest.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A digest is not secret, but printing a short prefix is enough to tell keys apart in logs.
impl fmt::Debug for KeyHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KeyHash({}…)", self.0.get(..12).unwrap_or(&self.0))
    }
}

/// One virtual key.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyRow {
    /// SHA-256 of the key.
    pub token: KeyHash,
    /// Unique, human-chosen name.
    pub key_alias: Option<String>,
    /// The key abbreviated for display (`sk-...abcd`), as LiteLLM shows it.
    pub key_name: String,
    /// After this time the key is refused.
    pub expires: Option<OffsetDateTime>,
    /// Owning user.
    pub user_id: Option<String>,
    /// Owning team.
    pub team_id: Option<String>,
    /// The organization it belongs to (else its team's, if any).
    pub organization_id: Option<String>,
    /// A blocked key is refused but kept (and its spend with it).
    pub blocked: bool,
    /// Budget and limits.
    pub limits: Limits,
    /// Spend and timestamps.
    pub accounting: Accounting,
}

impl KeyRow {
    /// A new, unblocked key with no owner, created at `now`.
    pub fn new(key: &str, now: OffsetDateTime) -> Self {
        Self {
            token: KeyHash::of(key),
            key_alias: None,
            key_name: abbreviate(key),
            expires: None,
            user_id: None,
            team_id: None,
            organization_id: None,
            blocked: false,
            limits: Limits::default(),
            accounting: Accounting::new(now),
        }
    }
}

/// `sk-...abcd`: enough to recognise a key, useless to use it.
pub fn abbreviate(key: &str) -> String {
    let tail: String = key
        .chars()
        .rev()
        .take(4)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    format!("sk-...{tail}")
}

impl Entity for KeyRow {
    const TABLE: &'static str = "keys";
    const ID: &'static str = "token";
    const WHAT: &'static str = "key";
    const KIND: sluice_core::limits::SubjectKind = sluice_core::limits::SubjectKind::Key;
    const OWN: &'static [&'static str] = &[
        "key_alias",
        "key_name",
        "expires",
        "user_id",
        "team_id",
        "blocked",
        "organization_id",
    ];

    fn id(&self) -> &str {
        self.token.as_str()
    }
    fn limits(&self) -> &Limits {
        &self.limits
    }
    fn accounting(&self) -> &Accounting {
        &self.accounting
    }
    fn bind_own<'q>(&self, q: AnyQuery<'q>) -> AnyQuery<'q> {
        q.bind(self.key_alias.clone())
            .bind(self.key_name.clone())
            .bind(self.expires.map(to_ms))
            .bind(self.user_id.clone())
            .bind(self.team_id.clone())
            .bind(i64::from(self.blocked))
            .bind(self.organization_id.clone())
    }
    fn decode(row: &AnyRow, limits: Limits, accounting: Accounting) -> Result<Self, StoreError> {
        Ok(Self {
            token: KeyHash(col(row, "token")?),
            key_alias: col(row, "key_alias")?,
            key_name: col(row, "key_name")?,
            expires: time_col(row, "expires")?,
            user_id: col(row, "user_id")?,
            team_id: col(row, "team_id")?,
            blocked: col::<i64>(row, "blocked")? != 0,
            organization_id: col(row, "organization_id")?,
            limits,
            accounting,
        })
    }
}

/// Which keys `/key/list` wants.
#[derive(Debug, Clone, Copy, Default)]
pub enum KeyFilter<'a> {
    /// Every key.
    #[default]
    All,
    /// Keys of one team.
    Team(&'a str),
    /// Keys of one user.
    User(&'a str),
    /// Keys that name one organization themselves.
    Organization(&'a str),
}

impl<'a> KeyFilter<'a> {
    fn column(self) -> Option<(&'static str, &'a str)> {
        match self {
            Self::All => None,
            Self::Team(t) => Some(("team_id", t)),
            Self::User(u) => Some(("user_id", u)),
            Self::Organization(o) => Some(("organization_id", o)),
        }
    }
}

impl Store {
    /// Stores a new key. `Conflict` if the hash or the alias is taken.
    pub async fn create_key(&self, key: &KeyRow) -> Result<(), StoreError> {
        self.insert(key).await
    }

    /// The key with this hash, if any.
    pub async fn key(&self, token: &KeyHash) -> Result<Option<KeyRow>, StoreError> {
        self.get(token.as_str()).await
    }

    /// The key with this alias, if any.
    pub async fn key_by_alias(&self, alias: &str) -> Result<Option<KeyRow>, StoreError> {
        let mut rows = self
            .list(Some(("key_alias", alias)), Page::default())
            .await?;
        Ok(rows.pop())
    }

    /// Saves an edited key (everything but its spend and creation time).
    pub async fn update_key(&self, key: &KeyRow) -> Result<(), StoreError> {
        self.update(key).await
    }

    /// Removes a key for good (its spend logs stay) and records the removal for
    /// [`Store::changed_since`], in one transaction.
    pub async fn delete_key(&self, token: &KeyHash, now: OffsetDateTime) -> Result<(), StoreError> {
        let mut tx = self.pool().begin().await?;
        let done = sqlx::query("DELETE FROM keys WHERE token = $1")
            .bind(token.as_str().to_owned())
            .execute(&mut *tx)
            .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound("key"));
        }
        tombstone(&mut tx, token, now).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Keys, in hash order.
    pub async fn list_keys(
        &self,
        filter: KeyFilter<'_>,
        page: Page,
    ) -> Result<Vec<KeyRow>, StoreError> {
        self.list(filter.column(), page).await
    }

    /// How many keys `list_keys` would page through.
    pub async fn count_keys(&self, filter: KeyFilter<'_>) -> Result<u64, StoreError> {
        self.count::<KeyRow>(filter.column()).await
    }

    /// Swaps a key's hash for a new key's, keeping alias, limits and spend (`/key/regenerate`).
    pub async fn rehash_key(
        &self,
        old: &KeyHash,
        new_key: &str,
        now: OffsetDateTime,
    ) -> Result<KeyHash, StoreError> {
        let new = KeyHash::of(new_key);
        let mut tx = self.pool().begin().await?;
        let done = sqlx::query(
            "UPDATE keys SET token = $1, key_name = $2, updated_at = $3 WHERE token = $4",
        )
        .bind(new.as_str().to_owned())
        .bind(abbreviate(new_key))
        .bind(to_ms(now))
        .bind(old.as_str().to_owned())
        .execute(&mut *tx)
        .await
        .map_err(StoreError::on_write("key"))?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound("key"));
        }
        tombstone(&mut tx, old, now).await?;
        tx.commit().await?;
        Ok(new)
    }

    /// Starts new budget windows for keys, teams, users, end users, organizations and tags whose
    /// window has ended.
    pub async fn reset_budgets(&self, now: OffsetDateTime) -> Result<u64, StoreError> {
        Ok(self.reset_due::<KeyRow>(now).await?
            + self.reset_due::<super::TeamRow>(now).await?
            + self.reset_due::<super::UserRow>(now).await?
            + self.reset_due::<super::EndUserRow>(now).await?
            + self.reset_due::<super::OrganizationRow>(now).await?
            + self.reset_due::<super::TagRow>(now).await?)
    }
}

/// Records that `token` stopped being a valid key at `now`. A key regenerated back to an old
/// hash (practically impossible, but cheap to handle) just moves the tombstone's time.
async fn tombstone(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    token: &KeyHash,
    now: OffsetDateTime,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO deleted_keys (token, deleted_at) VALUES ($1, $2) \
         ON CONFLICT (token) DO UPDATE SET deleted_at = excluded.deleted_at",
    )
    .bind(token.as_str().to_owned())
    .bind(to_ms(now))
    .execute(&mut **tx)
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_the_one_litellm_stores() {
        // hashlib.sha256(b"sk-1234").hexdigest(): a stored key hash never changes with the
        // SHA-256 implementation.
        assert_eq!(
            KeyHash::of("sk-1234").as_str(),
            "88dc28d0f030c55ed4ab77ed8faf098196cb1c05df778539800c9f1243fe6b4b"
        );
    }

    #[test]
    fn hash_is_sha256_hex_and_debug_is_short() {
        // SHA-256("sk-1234"), the digest LiteLLM stores for that key.
        let h = KeyHash::of("sk-1234");
        assert_eq!(h.as_str().len(), 64);
        assert_eq!(
            KeyHash::from_hex(&h.as_str().to_uppercase()),
            Some(h.clone())
        );
        assert_eq!(KeyHash::from_hex("abc"), None);
        assert!(!format!("{h:?}").contains(&h.as_str()[12..]));
        assert_eq!(abbreviate("sk-abcdefgh"), "sk-...efgh");
    }
}
