//! What changed since the last poll, so the auth cache stays current without reloading every
//! key: rows whose `updated_at` moved (admin edits, blocks, budget resets) and keys that were
//! deleted or regenerated (`deleted_keys`). Both are index range scans.
//!
//! Times come from the clock of whichever instance wrote the row, so a poller should ask from a
//! little before its last answer (a few seconds of overlap); applying a change twice is harmless.

use time::OffsetDateTime;

use sluice_core::limits::SubjectKind;

use super::entity::{kind_named, Entity};
use super::UserRow;
use super::{col, from_ms, to_ms, EndUserRow, KeyHash, KeyRow, Store, StoreError, TeamRow};
use super::{OrganizationRow, TagRow};

/// Everything that changed after a point in time.
#[derive(Debug, Clone, PartialEq)]
pub struct Changes {
    /// Keys created or edited (including blocked and budget-reset ones).
    pub keys: Vec<KeyRow>,
    /// Keys that no longer exist: deleted, or replaced by `/key/regenerate`.
    pub deleted_keys: Vec<KeyHash>,
    /// Teams created or edited.
    pub teams: Vec<TeamRow>,
    /// Users created or edited.
    pub users: Vec<UserRow>,
    /// End users created or edited.
    pub end_users: Vec<EndUserRow>,
    /// Organizations created or edited.
    pub organizations: Vec<OrganizationRow>,
    /// Tags created or edited.
    pub tags: Vec<TagRow>,
    /// Teams, users, end users, organizations and tags that no longer exist (a holder made
    /// again under the same id is also in its list: apply these first).
    pub deleted_holders: Vec<(SubjectKind, String)>,
    /// The latest change time seen (or the `since` asked for when nothing changed): the next
    /// poll's starting point, minus the caller's overlap.
    pub watermark: OffsetDateTime,
}

impl Changes {
    /// No change yet, as of `watermark`.
    pub fn none(watermark: OffsetDateTime) -> Self {
        Self {
            keys: Vec::new(),
            deleted_keys: Vec::new(),
            teams: Vec::new(),
            users: Vec::new(),
            end_users: Vec::new(),
            organizations: Vec::new(),
            tags: Vec::new(),
            deleted_holders: Vec::new(),
            watermark,
        }
    }

    /// True when nothing changed.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
            && self.deleted_keys.is_empty()
            && self.teams.is_empty()
            && self.users.is_empty()
            && self.end_users.is_empty()
            && self.organizations.is_empty()
            && self.tags.is_empty()
            && self.deleted_holders.is_empty()
    }
}

impl Store {
    /// Rows changed and keys removed strictly after `since`.
    pub async fn changed_since(&self, since: OffsetDateTime) -> Result<Changes, StoreError> {
        let mut watermark = since;
        let keys: Vec<KeyRow> = self.updated_after(since).await?;
        let teams: Vec<TeamRow> = self.updated_after(since).await?;
        let users: Vec<UserRow> = self.updated_after(since).await?;
        let end_users: Vec<EndUserRow> = self.updated_after(since).await?;
        let organizations: Vec<OrganizationRow> = self.updated_after(since).await?;
        let tags: Vec<TagRow> = self.updated_after(since).await?;
        for t in keys
            .iter()
            .map(|k| k.accounting.updated_at)
            .chain(teams.iter().map(|t| t.accounting.updated_at))
            .chain(users.iter().map(|u| u.accounting.updated_at))
            .chain(end_users.iter().map(|e| e.accounting.updated_at))
            .chain(organizations.iter().map(|o| o.accounting.updated_at))
            .chain(tags.iter().map(|t| t.accounting.updated_at))
        {
            watermark = watermark.max(t);
        }
        let rows = sqlx::query(
            "SELECT token, deleted_at FROM deleted_keys WHERE deleted_at > $1 ORDER BY deleted_at",
        )
        .bind(to_ms(since))
        .fetch_all(self.pool())
        .await?;
        let mut deleted_keys = Vec::with_capacity(rows.len());
        for row in &rows {
            watermark = watermark.max(from_ms("deleted_at", col(row, "deleted_at")?)?);
            if let Some(hash) = KeyHash::from_hex(&col::<String>(row, "token")?) {
                deleted_keys.push(hash);
            }
        }
        let rows = sqlx::query(
            "SELECT kind, id, deleted_at FROM deleted_holders WHERE deleted_at > $1 \
             ORDER BY deleted_at",
        )
        .bind(to_ms(since))
        .fetch_all(self.pool())
        .await?;
        let mut deleted_holders = Vec::with_capacity(rows.len());
        for row in &rows {
            watermark = watermark.max(from_ms("deleted_at", col(row, "deleted_at")?)?);
            if let Some(kind) = kind_named(&col::<String>(row, "kind")?) {
                deleted_holders.push((kind, col(row, "id")?));
            }
        }
        Ok(Changes {
            keys,
            deleted_keys,
            teams,
            users,
            end_users,
            organizations,
            tags,
            deleted_holders,
            watermark,
        })
    }

    async fn updated_after<E: Entity>(&self, since: OffsetDateTime) -> Result<Vec<E>, StoreError> {
        let sql = format!(
            "SELECT * FROM {} WHERE updated_at > $1 ORDER BY updated_at",
            E::TABLE
        );
        let rows = sqlx::query(&sql)
            .bind(to_ms(since))
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(super::entity::decode).collect()
    }
}
