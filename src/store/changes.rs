//! What changed since a moment: the auth directory's poll. Rows whose `updated_at` moved
//! (created, edited, blocked, budget window restarted) and tombstones of deleted ones.

use time::OffsetDateTime;

use super::{col, from_ms, to_ms, EndUserRow, KeyRow, Store, StoreError, TeamRow, UserRow};

/// Everything that changed after a moment.
#[derive(Debug, Default)]
pub struct Changes {
    /// Keys created or changed.
    pub keys: Vec<KeyRow>,
    /// Teams created or changed.
    pub teams: Vec<TeamRow>,
    /// Users created or changed.
    pub users: Vec<UserRow>,
    /// End users created or changed.
    pub end_users: Vec<EndUserRow>,
    /// Deleted rows: table name (`keys`, `teams`, `users`, `end_users`) and id.
    pub deleted: Vec<(String, String)>,
    /// The latest change seen (where the next poll starts).
    pub latest: Option<OffsetDateTime>,
}

impl Store {
    /// Everything changed after `since`.
    pub async fn changes_since(&self, since: OffsetDateTime) -> Result<Changes, StoreError> {
        let mut c = Changes {
            keys: self.changed(since).await?,
            teams: self.changed(since).await?,
            users: self.changed(since).await?,
            end_users: self.changed(since).await?,
            ..Changes::default()
        };
        let rows = sqlx::query("SELECT kind, id, deleted_at FROM deletions WHERE deleted_at > $1")
            .bind(to_ms(since))
            .fetch_all(self.pool())
            .await?;
        let mut latest: Option<OffsetDateTime> = None;
        let mut see = |t: OffsetDateTime| latest = Some(latest.map_or(t, |l| l.max(t)));
        for r in &rows {
            c.deleted.push((col(r, "kind")?, col(r, "id")?));
            see(from_ms("deleted_at", col(r, "deleted_at")?)?);
        }
        c.keys.iter().for_each(|k| see(k.accounting.updated_at));
        c.teams.iter().for_each(|t| see(t.accounting.updated_at));
        c.users.iter().for_each(|u| see(u.accounting.updated_at));
        c.end_users
            .iter()
            .for_each(|e| see(e.accounting.updated_at));
        c.latest = latest;
        Ok(c)
    }

    /// Every key, team, user and end user (the directory's first fill).
    pub async fn everything(&self) -> Result<Changes, StoreError> {
        Ok(Changes {
            keys: self.all().await?,
            teams: self.all().await?,
            users: self.all().await?,
            end_users: self.all().await?,
            ..Changes::default()
        })
    }
}
