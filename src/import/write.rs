//! Writing what was read into sluice's store, once: each object is created, rewritten only
//! when it changed at the source, given only the spend the source added since the last run,
//! and deleted when the source no longer has it. A dry run reads and decides the same way
//! and writes nothing.

use std::collections::HashSet;

use time::OffsetDateTime;

use sluice_core::limits::SubjectKind;
use sluice_store::{
    BudgetRow, EndUserRow, Imported, KeyHash, KeyRow, Limits, ModelRow, OrgMember, OrganizationRow,
    Store, StoreError, TagRow, TeamRole, TeamRow, UserRow,
};

use super::holders::Incoming;
use super::report::{Report, RowError};

/// The name the import's bookkeeping goes under in the store.
pub const SOURCE: &str = "litellm";

/// Spend differences smaller than this are rounding, not spend.
const SPEND_EPSILON: f64 = 1e-12;

/// Where, and whether, to write.
pub struct Writer<'a> {
    /// sluice's store.
    pub store: &'a Store,
    /// Decide, but write nothing.
    pub dry_run: bool,
    /// The time every written row is stamped with (so running gateways see it change).
    pub now: OffsetDateTime,
}

/// One kind of object sluice stores, as the import writes it.
pub trait Kind: Sized {
    /// Its name in the import's bookkeeping.
    const KIND: &'static str;
    /// Its name in the report.
    const REPORT: &'static str;
    /// LiteLLM's table, for messages.
    const TABLE: &'static str;
    /// The spend holder it is, if it holds spend.
    const SUBJECT: Option<SubjectKind>;

    /// Whether sluice has it (`None`: writes are upserts, so it does not matter).
    fn exists(
        store: &Store,
        id: &str,
    ) -> impl std::future::Future<Output = Result<Option<bool>, StoreError>> + Send;
    /// Stores it for the first time (with the source's spend).
    fn create(
        &self,
        store: &Store,
        now: OffsetDateTime,
    ) -> impl std::future::Future<Output = Result<(), StoreError>> + Send;
    /// Rewrites it (its spend untouched).
    fn update(
        &self,
        store: &Store,
        now: OffsetDateTime,
    ) -> impl std::future::Future<Output = Result<(), StoreError>> + Send;
    /// Removes it.
    fn delete(
        store: &Store,
        id: &str,
        now: OffsetDateTime,
    ) -> impl std::future::Future<Output = Result<(), StoreError>> + Send;
    /// The column a store conflict is about.
    fn conflict_column() -> &'static str {
        "id"
    }
}

impl Writer<'_> {
    /// Writes `incoming` (every object of the kind the source has that could be read) and
    /// deletes what an earlier run imported that is not in `present` (every id the source
    /// has, read or not: a row that failed to read is not a deleted row).
    pub async fn apply<T: Kind + Sync>(
        &self,
        incoming: Vec<Incoming<T>>,
        present: &HashSet<String>,
        report: &mut Report,
    ) -> Result<(), StoreError> {
        let seen = self.store.imported(SOURCE, T::KIND).await?;
        report.counts(T::REPORT);
        for item in incoming {
            let prev = seen.get(&item.id);
            let exists = match T::exists(self.store, &item.id).await? {
                Some(e) => e,
                None => prev.is_some(),
            };
            let result = match (exists, prev) {
                (false, _) => self.create(&item).await.map(|()| Change::New),
                // There before the import (made in sluice, or an earlier run's row): its
                // fields are the source's now, and the source's whole spend is added.
                (true, None) => self
                    .rewrite(&item, item.spend)
                    .await
                    .map(|()| Change::Updated),
                (true, Some(p)) => {
                    let delta = item.spend - p.spend;
                    let changed = p.fingerprint != item.fingerprint;
                    if !changed && delta.abs() < SPEND_EPSILON {
                        Ok(Change::Unchanged)
                    } else {
                        self.touch(&item, changed, delta)
                            .await
                            .map(|()| Change::Updated)
                    }
                }
            };
            match result {
                Ok(change) => {
                    let c = report.counts(T::REPORT);
                    match change {
                        Change::New => c.new += 1,
                        Change::Updated => c.updated += 1,
                        Change::Unchanged => c.unchanged += 1,
                    }
                    if change != Change::Unchanged {
                        self.remember(T::KIND, &item.id, &item.fingerprint, item.spend)
                            .await?;
                    }
                }
                Err(StoreError::Conflict(what)) => report.errors.push(RowError {
                    table: T::TABLE,
                    id: item.id.clone(),
                    column: T::conflict_column().to_owned(),
                    why: format!("another {what} in sluice already has this value"),
                }),
                Err(e) => return Err(e),
            }
        }
        for id in seen.keys().filter(|id| !present.contains(*id)) {
            if !self.dry_run {
                match T::delete(self.store, id, self.now).await {
                    Ok(()) | Err(StoreError::NotFound(_)) => {}
                    Err(e) => return Err(e),
                }
                self.store.forget_imported(SOURCE, T::KIND, id).await?;
            }
            report.counts(T::REPORT).deleted += 1;
        }
        Ok(())
    }

    async fn create<T: Kind>(&self, item: &Incoming<T>) -> Result<(), StoreError> {
        if self.dry_run {
            return Ok(());
        }
        item.row.create(self.store, self.now).await
    }

    async fn rewrite<T: Kind>(&self, item: &Incoming<T>, add: f64) -> Result<(), StoreError> {
        if self.dry_run {
            return Ok(());
        }
        item.row.update(self.store, self.now).await?;
        self.add_spend::<T>(&item.id, add).await
    }

    async fn touch<T: Kind>(
        &self,
        item: &Incoming<T>,
        changed: bool,
        delta: f64,
    ) -> Result<(), StoreError> {
        if self.dry_run {
            return Ok(());
        }
        if changed {
            item.row.update(self.store, self.now).await?;
        }
        if delta.abs() >= SPEND_EPSILON {
            self.add_spend::<T>(&item.id, delta).await?;
        }
        Ok(())
    }

    async fn add_spend<T: Kind>(&self, id: &str, delta: f64) -> Result<(), StoreError> {
        match T::SUBJECT {
            Some(kind) if delta.abs() >= SPEND_EPSILON => {
                self.store.add_spend(kind, id, delta, self.now).await
            }
            _ => Ok(()),
        }
    }

    async fn remember(
        &self,
        kind: &str,
        id: &str,
        fingerprint: &str,
        spend: f64,
    ) -> Result<(), StoreError> {
        if self.dry_run {
            return Ok(());
        }
        let what = Imported {
            fingerprint: fingerprint.to_owned(),
            spend,
        };
        self.store
            .record_imported(SOURCE, kind, id, &what, self.now)
            .await
    }
}

/// A budget window LiteLLM has not restarted yet (its reset time has passed) must not make
/// sluice restart its own a second time: when the source's reset time is past and sluice's row
/// already has a later one (sluice reset it), sluice's window stays.
fn keep_later_window(incoming: &mut Limits, current: Option<&Limits>, now: OffsetDateTime) {
    let Some(cur) = current.and_then(|c| c.budget_reset_at) else {
        return;
    };
    match incoming.budget_reset_at {
        Some(at) if at <= now && cur > at && incoming.budget_duration.is_some() => {
            incoming.budget_reset_at = Some(cur);
        }
        _ => {}
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Change {
    New,
    Updated,
    Unchanged,
}

impl Kind for KeyRow {
    const KIND: &'static str = "key";
    const REPORT: &'static str = "keys";
    const TABLE: &'static str = "LiteLLM_VerificationToken";
    const SUBJECT: Option<SubjectKind> = Some(SubjectKind::Key);

    async fn exists(store: &Store, id: &str) -> Result<Option<bool>, StoreError> {
        let Some(h) = KeyHash::from_hex(id) else {
            return Ok(Some(false));
        };
        Ok(Some(store.key(&h).await?.is_some()))
    }
    async fn create(&self, store: &Store, _: OffsetDateTime) -> Result<(), StoreError> {
        store.create_key(self).await
    }
    async fn update(&self, store: &Store, now: OffsetDateTime) -> Result<(), StoreError> {
        let mut row = self.clone();
        let current = store.key(&self.token).await?;
        keep_later_window(&mut row.limits, current.as_ref().map(|c| &c.limits), now);
        store.update_key(&row).await
    }
    async fn delete(store: &Store, id: &str, now: OffsetDateTime) -> Result<(), StoreError> {
        match KeyHash::from_hex(id) {
            Some(h) => store.delete_key(&h, now).await,
            None => Ok(()),
        }
    }
    fn conflict_column() -> &'static str {
        "key_alias"
    }
}

impl Kind for TeamRow {
    const KIND: &'static str = "team";
    const REPORT: &'static str = "teams";
    const TABLE: &'static str = "LiteLLM_TeamTable";
    const SUBJECT: Option<SubjectKind> = Some(SubjectKind::Team);

    async fn exists(store: &Store, id: &str) -> Result<Option<bool>, StoreError> {
        Ok(Some(store.team(id).await?.is_some()))
    }
    async fn create(&self, store: &Store, _: OffsetDateTime) -> Result<(), StoreError> {
        store.create_team(self).await
    }
    async fn update(&self, store: &Store, now: OffsetDateTime) -> Result<(), StoreError> {
        let mut row = self.clone();
        let current = store.team(&self.team_id).await?;
        keep_later_window(&mut row.limits, current.as_ref().map(|c| &c.limits), now);
        store.update_team(&row).await
    }
    async fn delete(store: &Store, id: &str, _: OffsetDateTime) -> Result<(), StoreError> {
        store.delete_team(id).await
    }
}

impl Kind for UserRow {
    const KIND: &'static str = "user";
    const REPORT: &'static str = "users";
    const TABLE: &'static str = "LiteLLM_UserTable";
    const SUBJECT: Option<SubjectKind> = Some(SubjectKind::User);

    async fn exists(store: &Store, id: &str) -> Result<Option<bool>, StoreError> {
        Ok(Some(store.user(id).await?.is_some()))
    }
    async fn create(&self, store: &Store, _: OffsetDateTime) -> Result<(), StoreError> {
        store.create_user(self).await
    }
    async fn update(&self, store: &Store, _: OffsetDateTime) -> Result<(), StoreError> {
        // A password set in sluice since (LiteLLM's cannot be carried) is kept.
        let mut row = self.clone();
        row.password_hash = store
            .user(&self.user_id)
            .await?
            .and_then(|u| u.password_hash);
        store.update_user(&row).await
    }
    async fn delete(store: &Store, id: &str, _: OffsetDateTime) -> Result<(), StoreError> {
        store.delete_user(id).await
    }
    fn conflict_column() -> &'static str {
        "user_email"
    }
}

impl Kind for EndUserRow {
    const KIND: &'static str = "end_user";
    const REPORT: &'static str = "end_users";
    const TABLE: &'static str = "LiteLLM_EndUserTable";
    const SUBJECT: Option<SubjectKind> = Some(SubjectKind::EndUser);

    async fn exists(store: &Store, id: &str) -> Result<Option<bool>, StoreError> {
        Ok(Some(store.end_user(id).await?.is_some()))
    }
    async fn create(&self, store: &Store, _: OffsetDateTime) -> Result<(), StoreError> {
        store.create_end_user(self).await
    }
    async fn update(&self, store: &Store, now: OffsetDateTime) -> Result<(), StoreError> {
        let mut row = self.clone();
        let current = store.end_user(&self.user_id).await?;
        keep_later_window(&mut row.limits, current.as_ref().map(|c| &c.limits), now);
        store.update_end_user(&row).await
    }
    async fn delete(store: &Store, id: &str, _: OffsetDateTime) -> Result<(), StoreError> {
        store.delete_end_user(id).await
    }
}

impl Kind for OrganizationRow {
    const KIND: &'static str = "organization";
    const REPORT: &'static str = "organizations";
    const TABLE: &'static str = "LiteLLM_OrganizationTable";
    const SUBJECT: Option<SubjectKind> = Some(SubjectKind::Organization);

    async fn exists(store: &Store, id: &str) -> Result<Option<bool>, StoreError> {
        Ok(Some(store.organization(id).await?.is_some()))
    }
    async fn create(&self, store: &Store, _: OffsetDateTime) -> Result<(), StoreError> {
        store.create_organization(self).await
    }
    async fn update(&self, store: &Store, now: OffsetDateTime) -> Result<(), StoreError> {
        let mut row = self.clone();
        let current = store.organization(&self.organization_id).await?;
        keep_later_window(&mut row.limits, current.as_ref().map(|c| &c.limits), now);
        store.update_organization(&row).await
    }
    async fn delete(store: &Store, id: &str, now: OffsetDateTime) -> Result<(), StoreError> {
        store.delete_organization(id, now).await
    }
}

impl Kind for TagRow {
    const KIND: &'static str = "tag";
    const REPORT: &'static str = "tags";
    const TABLE: &'static str = "LiteLLM_TagTable";
    const SUBJECT: Option<SubjectKind> = Some(SubjectKind::Tag);

    async fn exists(store: &Store, id: &str) -> Result<Option<bool>, StoreError> {
        Ok(Some(store.tag(id).await?.is_some()))
    }
    async fn create(&self, store: &Store, _: OffsetDateTime) -> Result<(), StoreError> {
        store.create_tag(self).await
    }
    async fn update(&self, store: &Store, now: OffsetDateTime) -> Result<(), StoreError> {
        let mut row = self.clone();
        let current = store.tag(&self.tag_name).await?;
        keep_later_window(&mut row.limits, current.as_ref().map(|c| &c.limits), now);
        store.update_tag(&row).await
    }
    async fn delete(store: &Store, id: &str, now: OffsetDateTime) -> Result<(), StoreError> {
        store.delete_tag(id, now).await
    }
}

impl Kind for BudgetRow {
    const KIND: &'static str = "budget";
    const REPORT: &'static str = "budgets";
    const TABLE: &'static str = "LiteLLM_BudgetTable";
    const SUBJECT: Option<SubjectKind> = None;

    async fn exists(store: &Store, id: &str) -> Result<Option<bool>, StoreError> {
        Ok(Some(store.budget(id).await?.is_some()))
    }
    async fn create(&self, store: &Store, _: OffsetDateTime) -> Result<(), StoreError> {
        store.create_budget(self).await
    }
    async fn update(&self, store: &Store, now: OffsetDateTime) -> Result<(), StoreError> {
        store.update_budget(self, now).await.map(|_| ())
    }
    async fn delete(store: &Store, id: &str, _: OffsetDateTime) -> Result<(), StoreError> {
        store.delete_budget(id).await
    }
}

impl Kind for ModelRow {
    const KIND: &'static str = "model";
    const REPORT: &'static str = "models";
    const TABLE: &'static str = "LiteLLM_ProxyModelTable";
    const SUBJECT: Option<SubjectKind> = None;

    async fn exists(store: &Store, id: &str) -> Result<Option<bool>, StoreError> {
        Ok(Some(store.model(id).await?.is_some()))
    }
    async fn create(&self, store: &Store, _: OffsetDateTime) -> Result<(), StoreError> {
        store.insert_model(self).await
    }
    async fn update(&self, store: &Store, _: OffsetDateTime) -> Result<(), StoreError> {
        store.update_model(self).await
    }
    async fn delete(store: &Store, id: &str, _: OffsetDateTime) -> Result<(), StoreError> {
        store.delete_model(id).await
    }
}

/// A team membership: (team, user) in its id, (user, role) as the row.
pub struct TeamMembership {
    /// The team.
    pub team_id: String,
    /// The user and their role.
    pub member: (String, TeamRole),
}

impl Kind for TeamMembership {
    const KIND: &'static str = "team_member";
    const REPORT: &'static str = "team_members";
    const TABLE: &'static str = "LiteLLM_TeamTable";
    const SUBJECT: Option<SubjectKind> = None;

    async fn exists(_: &Store, _: &str) -> Result<Option<bool>, StoreError> {
        Ok(None)
    }
    async fn create(&self, store: &Store, now: OffsetDateTime) -> Result<(), StoreError> {
        store
            .set_team_member(&self.team_id, &self.member.0, self.member.1, now)
            .await
    }
    async fn update(&self, store: &Store, now: OffsetDateTime) -> Result<(), StoreError> {
        self.create(store, now).await
    }
    async fn delete(store: &Store, id: &str, _: OffsetDateTime) -> Result<(), StoreError> {
        let Some((team, user)) = id.split_once('\u{1f}') else {
            return Ok(());
        };
        store.remove_team_member(team, user).await
    }
}

impl Kind for OrgMember {
    const KIND: &'static str = "organization_member";
    const REPORT: &'static str = "organization_members";
    const TABLE: &'static str = "LiteLLM_OrganizationMembership";
    const SUBJECT: Option<SubjectKind> = None;

    async fn exists(_: &Store, _: &str) -> Result<Option<bool>, StoreError> {
        Ok(None)
    }
    async fn create(&self, store: &Store, _: OffsetDateTime) -> Result<(), StoreError> {
        store.set_organization_member(self).await
    }
    async fn update(&self, store: &Store, now: OffsetDateTime) -> Result<(), StoreError> {
        self.create(store, now).await
    }
    async fn delete(store: &Store, id: &str, _: OffsetDateTime) -> Result<(), StoreError> {
        let Some((org, user)) = id.split_once('\u{1f}') else {
            return Ok(());
        };
        store.remove_organization_member(org, user).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_sluice_already_restarted_is_not_restarted_again() {
        let now = OffsetDateTime::from_unix_timestamp(1_780_000_000).unwrap();
        let day = time::Duration::days(1);
        let limits = |at| Limits {
            budget_duration: Some("1d".parse().unwrap()),
            budget_reset_at: Some(at),
            ..Limits::default()
        };
        // LiteLLM's window ended an hour ago and it has not reset; sluice has.
        let mut incoming = limits(now - time::Duration::hours(1));
        keep_later_window(&mut incoming, Some(&limits(now + day)), now);
        assert_eq!(incoming.budget_reset_at, Some(now + day));
        // LiteLLM's window is current: it is the source.
        let mut incoming = limits(now + day * 2);
        keep_later_window(&mut incoming, Some(&limits(now + day)), now);
        assert_eq!(incoming.budget_reset_at, Some(now + day * 2));
        // A past window that sluice has not moved on either stays (the reset job runs it).
        let mut incoming = limits(now - day);
        keep_later_window(&mut incoming, Some(&limits(now - day)), now);
        assert_eq!(incoming.budget_reset_at, Some(now - day));
    }
}
