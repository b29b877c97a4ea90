//! Tags as budget holders (LiteLLM's `LiteLLM_TagTable`, `/tag/*`): a cost centre, project or
//! feature named in requests' tags. A tag's limits are a copy of its budget object's (as an
//! organization's are), its spend grows with every request that carries it
//! (`write_spend_batch`), and a deleted tag leaves a tombstone so that every instance stops
//! holding requests to its limits.

use serde_json::{Map, Value};
use sqlx::any::AnyRow;
use time::OffsetDateTime;

use super::entity::{Accounting, AnyQuery, Entity};
use sluice_core::limits::SubjectKind;

use super::{col, json_col, to_json, Limits, Page, Store, StoreError};

/// One tag.
#[derive(Debug, Clone, PartialEq)]
pub struct TagRow {
    /// The tag as requests carry it.
    pub tag_name: String,
    /// What it stands for.
    pub description: Option<String>,
    /// The names of the deployments in `limits.models` that are ids (LiteLLM's `model_info`:
    /// model id to model name).
    pub model_info: Map<String, Value>,
    /// Who made it (a user id), when known.
    pub created_by: Option<String>,
    /// `models`: the model groups or deployment ids the tag routes to; its budget and limits.
    pub limits: Limits,
    /// Spend of every request that carried it, and timestamps.
    pub accounting: Accounting,
}

impl TagRow {
    /// A new tag created at `now`, without limits.
    pub fn new(tag_name: String, now: OffsetDateTime) -> Self {
        Self {
            tag_name,
            description: None,
            model_info: Map::new(),
            created_by: None,
            limits: Limits::default(),
            accounting: Accounting::new(now),
        }
    }
}

impl TagRow {
    /// Keep its budget's soft budget in its metadata, where the budget alerts read it (a tag's
    /// other limits are columns, copied by `BudgetRow::copy_into`).
    pub fn set_soft_budget(&mut self, soft: Option<f64>) {
        match soft {
            Some(s) => self.limits.metadata.insert("soft_budget".into(), s.into()),
            None => self.limits.metadata.remove("soft_budget"),
        };
    }
}

impl Entity for TagRow {
    const TABLE: &'static str = "tags";
    const ID: &'static str = "tag_name";
    const WHAT: &'static str = "tag";
    const KIND: sluice_core::limits::SubjectKind = sluice_core::limits::SubjectKind::Tag;
    const OWN: &'static [&'static str] = &["description", "model_info", "created_by"];

    fn id(&self) -> &str {
        &self.tag_name
    }
    fn limits(&self) -> &Limits {
        &self.limits
    }
    fn accounting(&self) -> &Accounting {
        &self.accounting
    }
    fn bind_own<'q>(&self, q: AnyQuery<'q>) -> AnyQuery<'q> {
        q.bind(self.description.clone())
            .bind(to_json(&self.model_info))
            .bind(self.created_by.clone())
    }
    fn decode(row: &AnyRow, limits: Limits, accounting: Accounting) -> Result<Self, StoreError> {
        Ok(Self {
            tag_name: col(row, "tag_name")?,
            description: col(row, "description")?,
            model_info: json_col(row, "model_info")?,
            created_by: col(row, "created_by")?,
            limits,
            accounting,
        })
    }
}

impl Store {
    /// Stores a new tag. `Conflict` if the name is taken.
    pub async fn create_tag(&self, t: &TagRow) -> Result<(), StoreError> {
        self.insert(t).await
    }

    /// The tag with this name, if any.
    pub async fn tag(&self, name: &str) -> Result<Option<TagRow>, StoreError> {
        self.get(name).await
    }

    /// Saves an edited tag (everything but its spend and creation time).
    pub async fn update_tag(&self, t: &TagRow) -> Result<(), StoreError> {
        self.update(t).await
    }

    /// Removes a tag and leaves a tombstone for the directories of every instance.
    pub async fn delete_tag(&self, name: &str, now: OffsetDateTime) -> Result<(), StoreError> {
        let mut tx = self.pool().begin().await?;
        let done = sqlx::query("DELETE FROM tags WHERE tag_name = $1")
            .bind(name.to_owned())
            .execute(&mut *tx)
            .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound("tag"));
        }
        super::entity::tombstone(&mut tx, SubjectKind::Tag, name, now).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Tags, in name order.
    pub async fn list_tags(&self, page: Page) -> Result<Vec<TagRow>, StoreError> {
        self.list(None, page).await
    }
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::*;
    use crate::testing::every_backend;
    use crate::{BudgetRow, SpendLog};

    #[tokio::test]
    async fn tags_round_trip_take_spend_reset_and_leave_tombstones() {
        let now = datetime!(2026-11-30 10:00 UTC);
        for db in every_backend().await {
            let s = &db.store;
            let mut b = BudgetRow::new("b-eng".into(), now);
            b.max_budget = Some(5.0);
            b.rpm_limit = Some(10);
            b.budget_duration = Some("1d".parse().unwrap());
            s.create_budget(&b).await.unwrap();
            let mut t = TagRow::new("engineering".into(), now);
            t.description = Some("Engineering's cost centre".into());
            t.limits.models = vec!["gpt-4o".into()];
            t.created_by = Some("ana".into());
            b.copy_into(&mut t.limits, now);
            s.create_tag(&t).await.unwrap();
            assert!(matches!(
                s.create_tag(&t).await,
                Err(StoreError::Conflict("tag"))
            ));
            assert_eq!(s.tag("engineering").await.unwrap(), Some(t.clone()));
            assert_eq!(
                t.limits.budget_reset_at,
                Some(datetime!(2026-12-01 10:00 UTC))
            );

            // A budget update reaches the tag.
            b.max_budget = Some(7.0);
            let later = datetime!(2026-11-30 11:00 UTC);
            assert_eq!(s.update_budget(&b, later).await.unwrap(), 1);
            assert_eq!(s.budget_users("b-eng").await.unwrap(), ["tags"]);
            let got = s.tag("engineering").await.unwrap().unwrap();
            assert_eq!(got.limits.max_budget, Some(7.0));

            // Every request carrying the tag adds to its spend; unknown tags are only counted.
            let mut log = SpendLog::new("r1".into(), "gpt-4o".into(), later);
            log.spend = 0.25;
            log.request_tags = vec!["engineering".into(), "adhoc".into()];
            let mut other = SpendLog::new("r2".into(), "gpt-4o".into(), later);
            other.spend = 0.5;
            other.request_tags = vec!["engineering".into()];
            s.write_spend_batch(&[log, other]).await.unwrap();
            let got = s.tag("engineering").await.unwrap().unwrap();
            assert!((got.accounting.spend - 0.75).abs() < 1e-9);

            // The window ends: spend back to zero, next window a day on.
            let next_day = datetime!(2026-12-01 10:00:01 UTC);
            assert_eq!(s.reset_budgets(next_day).await.unwrap(), 1);
            let got = s.tag("engineering").await.unwrap().unwrap();
            assert_eq!(got.accounting.spend, 0.0);
            assert_eq!(
                got.limits.budget_reset_at,
                Some(datetime!(2026-12-02 10:00 UTC))
            );

            // Deleted: gone from the list, a tombstone in the changes (applied before the rows,
            // so a tag made again within one poll starts afresh).
            let c = s.changed_since(now).await.unwrap();
            assert_eq!(c.tags.len(), 1);
            s.delete_tag("engineering", next_day).await.unwrap();
            assert!(s.list_tags(Page::default()).await.unwrap().is_empty());
            let c = s.changed_since(later).await.unwrap();
            assert_eq!(
                c.deleted_holders,
                [(SubjectKind::Tag, "engineering".to_owned())]
            );
            assert!(matches!(
                s.delete_tag("engineering", next_day).await,
                Err(StoreError::NotFound("tag"))
            ));
            s.create_tag(&TagRow::new("engineering".into(), next_day))
                .await
                .unwrap();
            let c = s.changed_since(later).await.unwrap();
            assert_eq!(c.deleted_holders.len(), 1);
            assert_eq!(c.tags.len(), 1);
        }
    }
}
