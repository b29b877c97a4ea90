//! Deployments kept in the database (`store_model_in_db`): LiteLLM's `LiteLLM_ProxyModelTable`.
//! The store keeps `litellm_params` as the opaque text it is given (sluice seals it first: it
//! holds provider keys) and `model_info` as JSON. Every write draws a new `etag`, so an
//! instance learns of another's change by comparing `(model_id, etag)` pairs, a read of two
//! short columns.

use serde_json::Value;
use time::OffsetDateTime;

use super::{col, from_ms, to_json, to_ms, Store, StoreError};

/// One stored deployment.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelRow {
    /// Its deployment id (`model_info.id`).
    pub model_id: String,
    /// The model group it serves.
    pub model_name: String,
    /// `litellm_params`, sealed by the caller.
    pub litellm_params: String,
    /// `model_info` (without `id`, which is `model_id`).
    pub model_info: Value,
    /// Changes with every write.
    pub etag: String,
    /// When it was added.
    pub created_at: OffsetDateTime,
    /// Who added it.
    pub created_by: String,
    /// When it last changed.
    pub updated_at: OffsetDateTime,
    /// Who changed it last.
    pub updated_by: String,
}

impl ModelRow {
    fn decode(row: &sqlx::any::AnyRow) -> Result<Self, StoreError> {
        let info: String = col(row, "model_info")?;
        Ok(Self {
            model_id: col(row, "model_id")?,
            model_name: col(row, "model_name")?,
            litellm_params: col(row, "litellm_params")?,
            model_info: serde_json::from_str(&info).map_err(|e| StoreError::Corrupt {
                column: "model_info",
                why: e.to_string(),
            })?,
            etag: col(row, "etag")?,
            created_at: from_ms("created_at", col(row, "created_at")?)?,
            created_by: col(row, "created_by")?,
            updated_at: from_ms("updated_at", col(row, "updated_at")?)?,
            updated_by: col(row, "updated_by")?,
        })
    }
}

impl Store {
    /// Every stored deployment, in id order.
    pub async fn models(&self) -> Result<Vec<ModelRow>, StoreError> {
        sqlx::query("SELECT * FROM proxy_models ORDER BY model_id")
            .fetch_all(self.pool())
            .await?
            .iter()
            .map(ModelRow::decode)
            .collect()
    }

    /// One stored deployment.
    pub async fn model(&self, model_id: &str) -> Result<Option<ModelRow>, StoreError> {
        let row = sqlx::query("SELECT * FROM proxy_models WHERE model_id = $1")
            .bind(model_id.to_owned())
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(ModelRow::decode).transpose()
    }

    /// `(model_id, etag)` of every stored deployment, in id order: what a poll compares.
    pub async fn model_etags(&self) -> Result<Vec<(String, String)>, StoreError> {
        sqlx::query("SELECT model_id, etag FROM proxy_models ORDER BY model_id")
            .fetch_all(self.pool())
            .await?
            .iter()
            .map(|r| Ok((col(r, "model_id")?, col(r, "etag")?)))
            .collect()
    }

    /// Add a deployment; a taken id is a `Conflict`.
    pub async fn insert_model(&self, m: &ModelRow) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO proxy_models (model_id, model_name, litellm_params, model_info, etag, \
             created_at, created_by, updated_at, updated_by) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(m.model_id.clone())
        .bind(m.model_name.clone())
        .bind(m.litellm_params.clone())
        .bind(to_json(&m.model_info))
        .bind(m.etag.clone())
        .bind(to_ms(m.created_at))
        .bind(m.created_by.clone())
        .bind(to_ms(m.updated_at))
        .bind(m.updated_by.clone())
        .execute(self.pool())
        .await
        .map_err(StoreError::on_write("model"))?;
        Ok(())
    }

    /// Save an edited deployment (everything but its creation); a missing one is `NotFound`.
    pub async fn update_model(&self, m: &ModelRow) -> Result<(), StoreError> {
        let done = sqlx::query(
            "UPDATE proxy_models SET model_name = $2, litellm_params = $3, model_info = $4, \
             etag = $5, updated_at = $6, updated_by = $7 WHERE model_id = $1",
        )
        .bind(m.model_id.clone())
        .bind(m.model_name.clone())
        .bind(m.litellm_params.clone())
        .bind(to_json(&m.model_info))
        .bind(m.etag.clone())
        .bind(to_ms(m.updated_at))
        .bind(m.updated_by.clone())
        .execute(self.pool())
        .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound("model"));
        }
        Ok(())
    }

    /// Remove a deployment; a missing one is `NotFound`.
    pub async fn delete_model(&self, model_id: &str) -> Result<(), StoreError> {
        let done = sqlx::query("DELETE FROM proxy_models WHERE model_id = $1")
            .bind(model_id.to_owned())
            .execute(self.pool())
            .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound("model"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::*;
    use crate::testing::every_backend;

    fn row(id: &str, etag: &str) -> ModelRow {
        let at = datetime!(2026-11-27 10:00 UTC);
        ModelRow {
            model_id: id.into(),
            model_name: "gpt-db".into(),
            litellm_params: "sealed".into(),
            model_info: serde_json::json!({"mode": "chat"}),
            etag: etag.into(),
            created_at: at,
            created_by: "admin".into(),
            updated_at: at,
            updated_by: "admin".into(),
        }
    }

    #[tokio::test]
    async fn models_round_trip_and_etags_change_with_each_write() {
        for db in every_backend().await {
            let s = &db.store;
            assert!(s.models().await.unwrap().is_empty());
            let mut a = row("a", "e1");
            s.insert_model(&a).await.unwrap();
            s.insert_model(&row("b", "e2")).await.unwrap();
            assert!(matches!(
                s.insert_model(&a).await,
                Err(StoreError::Conflict("model"))
            ));
            assert_eq!(s.model("a").await.unwrap().as_ref(), Some(&a));
            a.model_name = "gpt-other".into();
            a.etag = "e3".into();
            a.updated_by = "ana".into();
            s.update_model(&a).await.unwrap();
            assert_eq!(s.models().await.unwrap()[0], a);
            assert_eq!(
                s.model_etags().await.unwrap(),
                vec![("a".into(), "e3".into()), ("b".into(), "e2".into())]
            );
            s.delete_model("b").await.unwrap();
            assert!(matches!(
                s.delete_model("b").await,
                Err(StoreError::NotFound("model"))
            ));
            assert!(matches!(
                s.update_model(&row("b", "e4")).await,
                Err(StoreError::NotFound("model"))
            ));
            assert_eq!(s.models().await.unwrap().len(), 1);
        }
    }
}
