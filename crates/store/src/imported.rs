//! What an import from another gateway's database (`sluice import litellm`) wrote, so that it
//! can run again, and keep running beside the source (`--follow`), without doing anything
//! twice: per object the digest of the fields it wrote and the source's spend at the time, and
//! per incremental read the point it reached.

use std::collections::HashMap;

use time::OffsetDateTime;

use super::{col, to_ms, Store, StoreError};

/// One object an import wrote, as it was at the source then.
#[derive(Debug, Clone, PartialEq)]
pub struct Imported {
    /// A digest of the fields written (the importer's choice of digest): equal means unchanged.
    pub fingerprint: String,
    /// The source's spend for the object when it was written.
    pub spend: f64,
}

impl Store {
    /// Every object of `kind` imported from `source`, by the source's id.
    pub async fn imported(
        &self,
        source: &str,
        kind: &str,
    ) -> Result<HashMap<String, Imported>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, fingerprint, spend FROM imported WHERE source = $1 AND kind = $2",
        )
        .bind(source.to_owned())
        .bind(kind.to_owned())
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|r| {
                Ok((
                    col(r, "id")?,
                    Imported {
                        fingerprint: col(r, "fingerprint")?,
                        spend: col(r, "spend")?,
                    },
                ))
            })
            .collect()
    }

    /// Records that `id` of `kind` was written from `source` as `what`.
    pub async fn record_imported(
        &self,
        source: &str,
        kind: &str,
        id: &str,
        what: &Imported,
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO imported (source, kind, id, fingerprint, spend, imported_at) \
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (source, kind, id) DO UPDATE SET \
             fingerprint = excluded.fingerprint, spend = excluded.spend, \
             imported_at = excluded.imported_at",
        )
        .bind(source.to_owned())
        .bind(kind.to_owned())
        .bind(id.to_owned())
        .bind(what.fingerprint.clone())
        .bind(what.spend)
        .bind(to_ms(now))
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// Forgets an imported object (it was deleted at the source and here).
    pub async fn forget_imported(
        &self,
        source: &str,
        kind: &str,
        id: &str,
    ) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM imported WHERE source = $1 AND kind = $2 AND id = $3")
            .bind(source.to_owned())
            .bind(kind.to_owned())
            .bind(id.to_owned())
            .execute(self.pool())
            .await?;
        Ok(())
    }

    /// Where the incremental read `name` from `source` stands, if it ever ran.
    pub async fn import_cursor(&self, source: &str, name: &str) -> Result<Option<i64>, StoreError> {
        let row = sqlx::query("SELECT value FROM import_cursors WHERE source = $1 AND name = $2")
            .bind(source.to_owned())
            .bind(name.to_owned())
            .fetch_optional(self.pool())
            .await?;
        row.map(|r| col(&r, "value")).transpose()
    }

    /// Moves the incremental read `name` from `source` to `value`.
    pub async fn set_import_cursor(
        &self,
        source: &str,
        name: &str,
        value: i64,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO import_cursors (source, name, value) VALUES ($1, $2, $3) \
             ON CONFLICT (source, name) DO UPDATE SET value = excluded.value",
        )
        .bind(source.to_owned())
        .bind(name.to_owned())
        .bind(value)
        .execute(self.pool())
        .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::every_backend;
    use crate::TeamRow;
    use sluice_core::limits::SubjectKind;

    #[tokio::test]
    async fn imports_are_remembered_and_spend_moves_but_not_below_zero() {
        for t in every_backend().await {
            remembered_and_moved(&t.store).await;
        }
    }

    async fn remembered_and_moved(store: &Store) {
        let now = OffsetDateTime::now_utc();
        assert!(store.imported("litellm", "key").await.unwrap().is_empty());
        let what = Imported {
            fingerprint: "f1".into(),
            spend: 2.5,
        };
        store
            .record_imported("litellm", "key", "abc", &what, now)
            .await
            .unwrap();
        let again = Imported {
            fingerprint: "f2".into(),
            spend: 3.0,
        };
        store
            .record_imported("litellm", "key", "abc", &again, now)
            .await
            .unwrap();
        let seen = store.imported("litellm", "key").await.unwrap();
        assert_eq!(seen.len(), 1);
        assert_eq!(seen["abc"], again);
        assert!(store.imported("litellm", "team").await.unwrap().is_empty());
        store
            .forget_imported("litellm", "key", "abc")
            .await
            .unwrap();
        assert!(store.imported("litellm", "key").await.unwrap().is_empty());

        assert_eq!(
            store.import_cursor("litellm", "spend_logs").await.unwrap(),
            None
        );
        store
            .set_import_cursor("litellm", "spend_logs", 7)
            .await
            .unwrap();
        store
            .set_import_cursor("litellm", "spend_logs", 9)
            .await
            .unwrap();
        assert_eq!(
            store.import_cursor("litellm", "spend_logs").await.unwrap(),
            Some(9)
        );

        let mut team = TeamRow::new("t".into(), now);
        team.accounting.spend = 1.0;
        store.create_team(&team).await.unwrap();
        store
            .add_spend(SubjectKind::Team, "t", 0.5, now)
            .await
            .unwrap();
        let spend = |s: Option<TeamRow>| s.map(|t| t.accounting.spend);
        assert_eq!(spend(store.team("t").await.unwrap()), Some(1.5));
        store
            .add_spend(SubjectKind::Team, "t", -4.0, now)
            .await
            .unwrap();
        assert_eq!(spend(store.team("t").await.unwrap()), Some(0.0));
        assert!(matches!(
            store
                .add_spend(SubjectKind::Team, "missing", 1.0, now)
                .await,
            Err(StoreError::NotFound("team"))
        ));
    }
}
