//! The Responses API's state: answers kept for `previous_response_id` and retrieval
//! (`stored_responses`), and the Conversations API's conversations and their items. The store
//! holds the content as the gateway sealed it (`sealed`, opaque here); who may read a row is
//! decided by the caller from `owner_key`. Expired answers are never returned, and are removed
//! by [`Store::purge_responses`].

use time::OffsetDateTime;

use super::{col, from_ms, to_ms, Store, StoreError};

/// One kept answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredResponse {
    /// The response's id (`resp_…`).
    pub id: String,
    /// The hex hash of the key that made it; `None` for the master key.
    pub owner_key: Option<String>,
    /// That key's team.
    pub team_id: Option<String>,
    /// The model group asked for.
    pub model: String,
    /// The response it continued (`previous_response_id`).
    pub previous_id: Option<String>,
    /// The conversation it was part of.
    pub conversation_id: Option<String>,
    /// When it was made.
    pub created_at: OffsetDateTime,
    /// When it is forgotten (`None`: kept until deleted).
    pub expires_at: Option<OffsetDateTime>,
    /// Its request's input items and the response object, sealed.
    pub sealed: String,
}

/// A conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConversationRow {
    /// Its id (`conv_…`).
    pub id: String,
    /// The hex hash of the key that made it; `None` for the master key.
    pub owner_key: Option<String>,
    /// That key's team.
    pub team_id: Option<String>,
    /// When it was made.
    pub created_at: OffsetDateTime,
    /// The client's metadata, a JSON object (tags, not content: not sealed).
    pub metadata: String,
}

/// One item of a conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConversationItem {
    /// Its place in the conversation (increasing).
    pub seq: i64,
    /// The item's id.
    pub id: String,
    /// When it was added.
    pub created_at: OffsetDateTime,
    /// The item, sealed.
    pub sealed: String,
}

/// How many times adding items retries when another instance took the same places.
const ADD_ATTEMPTS: usize = 4;

fn response_of(row: &sqlx::any::AnyRow) -> Result<StoredResponse, StoreError> {
    Ok(StoredResponse {
        id: col(row, "id")?,
        owner_key: col(row, "owner_key")?,
        team_id: col(row, "team_id")?,
        model: col(row, "model")?,
        previous_id: col(row, "previous_id")?,
        conversation_id: col(row, "conversation_id")?,
        created_at: from_ms("created_at", col(row, "created_at")?)?,
        expires_at: col::<Option<i64>>(row, "expires_at")?
            .map(|ms| from_ms("expires_at", ms))
            .transpose()?,
        sealed: col(row, "sealed")?,
    })
}

fn item_of(row: &sqlx::any::AnyRow) -> Result<ConversationItem, StoreError> {
    Ok(ConversationItem {
        seq: col(row, "seq")?,
        id: col(row, "id")?,
        created_at: from_ms("created_at", col(row, "created_at")?)?,
        sealed: col(row, "sealed")?,
    })
}

impl Store {
    /// Keep an answer (a second write of the same id replaces it).
    pub async fn put_response(&self, r: &StoredResponse) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO stored_responses (id, owner_key, team_id, model, previous_id, \
             conversation_id, created_at, expires_at, sealed) VALUES ($1, $2, $3, $4, $5, $6, \
             $7, $8, $9) ON CONFLICT (id) DO UPDATE SET owner_key = excluded.owner_key, \
             team_id = excluded.team_id, model = excluded.model, previous_id = \
             excluded.previous_id, conversation_id = excluded.conversation_id, created_at = \
             excluded.created_at, expires_at = excluded.expires_at, sealed = excluded.sealed",
        )
        .bind(r.id.clone())
        .bind(r.owner_key.clone())
        .bind(r.team_id.clone())
        .bind(r.model.clone())
        .bind(r.previous_id.clone())
        .bind(r.conversation_id.clone())
        .bind(to_ms(r.created_at))
        .bind(r.expires_at.map(to_ms))
        .bind(r.sealed.clone())
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// A kept answer, unless it expired by `now`.
    pub async fn response(
        &self,
        id: &str,
        now: OffsetDateTime,
    ) -> Result<Option<StoredResponse>, StoreError> {
        let row = sqlx::query(
            "SELECT * FROM stored_responses WHERE id = $1 AND (expires_at IS NULL OR \
             expires_at > $2)",
        )
        .bind(id.to_owned())
        .bind(to_ms(now))
        .fetch_optional(self.pool())
        .await?;
        row.as_ref().map(response_of).transpose()
    }

    /// Forget an answer; returns whether there was one.
    pub async fn delete_response(&self, id: &str) -> Result<bool, StoreError> {
        let done = sqlx::query("DELETE FROM stored_responses WHERE id = $1")
            .bind(id.to_owned())
            .execute(self.pool())
            .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Remove the answers that expired by `now`; returns how many.
    pub async fn purge_responses(&self, now: OffsetDateTime) -> Result<u64, StoreError> {
        let done = sqlx::query("DELETE FROM stored_responses WHERE expires_at <= $1")
            .bind(to_ms(now))
            .execute(self.pool())
            .await?;
        Ok(done.rows_affected())
    }

    /// Make a conversation.
    pub async fn create_conversation(&self, c: &ConversationRow) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO conversations (id, owner_key, team_id, created_at, metadata) VALUES \
             ($1, $2, $3, $4, $5)",
        )
        .bind(c.id.clone())
        .bind(c.owner_key.clone())
        .bind(c.team_id.clone())
        .bind(to_ms(c.created_at))
        .bind(c.metadata.clone())
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// A conversation.
    pub async fn conversation(&self, id: &str) -> Result<Option<ConversationRow>, StoreError> {
        let row = sqlx::query("SELECT * FROM conversations WHERE id = $1")
            .bind(id.to_owned())
            .fetch_optional(self.pool())
            .await?;
        row.map(|row| {
            Ok(ConversationRow {
                id: col(&row, "id")?,
                owner_key: col(&row, "owner_key")?,
                team_id: col(&row, "team_id")?,
                created_at: from_ms("created_at", col(&row, "created_at")?)?,
                metadata: col(&row, "metadata")?,
            })
        })
        .transpose()
    }

    /// Replace a conversation's metadata; returns whether it exists.
    pub async fn set_conversation_metadata(
        &self,
        id: &str,
        metadata: &str,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query("UPDATE conversations SET metadata = $2 WHERE id = $1")
            .bind(id.to_owned())
            .bind(metadata.to_owned())
            .execute(self.pool())
            .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Forget a conversation and its items; returns whether it existed.
    pub async fn delete_conversation(&self, id: &str) -> Result<bool, StoreError> {
        let mut tx = self.pool().begin().await?;
        sqlx::query("DELETE FROM conversation_items WHERE conversation_id = $1")
            .bind(id.to_owned())
            .execute(&mut *tx)
            .await?;
        let done = sqlx::query("DELETE FROM conversations WHERE id = $1")
            .bind(id.to_owned())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(done.rows_affected() > 0)
    }

    /// Append items (`(id, sealed)`, in order) to a conversation, after every item it has;
    /// returns them with their places. Instances of a fleet appending at once each get places
    /// of their own (a taken place is retried after the new last one).
    pub async fn add_conversation_items(
        &self,
        conversation: &str,
        items: &[(String, String)],
        now: OffsetDateTime,
    ) -> Result<Vec<ConversationItem>, StoreError> {
        let mut last_error = None;
        for _ in 0..ADD_ATTEMPTS {
            match self.try_add_items(conversation, items, now).await {
                Ok(added) => return Ok(added),
                Err(StoreError::Query(e)) if is_conflict(&e) => last_error = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last_error.map_or(
            StoreError::Conflict("a conversation item"),
            StoreError::Query,
        ))
    }

    async fn try_add_items(
        &self,
        conversation: &str,
        items: &[(String, String)],
        now: OffsetDateTime,
    ) -> Result<Vec<ConversationItem>, StoreError> {
        // Each place is taken by the statement that writes it (no read first, so SQLite's
        // transaction is a writer from its first statement and waits for another's, and
        // PostgreSQL's unique key refuses a place two instances computed at once: retried).
        let mut tx = self.pool().begin().await?;
        let mut added = Vec::with_capacity(items.len());
        for (id, sealed) in items {
            let row = sqlx::query(
                "INSERT INTO conversation_items (conversation_id, seq, id, created_at, sealed) \
                 SELECT $1, COALESCE(MAX(seq), 0) + 1, $2, $3, $4 FROM conversation_items \
                 WHERE conversation_id = $1 RETURNING seq",
            )
            .bind(conversation.to_owned())
            .bind(id.clone())
            .bind(to_ms(now))
            .bind(sealed.clone())
            .fetch_one(&mut *tx)
            .await?;
            let seq: i64 = col(&row, "seq")?;
            added.push(ConversationItem {
                seq,
                id: id.clone(),
                created_at: now,
                sealed: sealed.clone(),
            });
        }
        tx.commit().await?;
        Ok(added)
    }

    /// A conversation's items in order (`descending`: newest first), after the item
    /// `after` (an item id) when given, at most `limit`.
    pub async fn conversation_items(
        &self,
        conversation: &str,
        after: Option<&str>,
        descending: bool,
        limit: u32,
    ) -> Result<Vec<ConversationItem>, StoreError> {
        let (cmp, order) = if descending {
            ("<", "DESC")
        } else {
            (">", "ASC")
        };
        let from = match after {
            None => None,
            Some(id) => match self.conversation_item(conversation, id).await? {
                Some(item) => Some(item.seq),
                None => return Ok(Vec::new()),
            },
        };
        let sql = match from {
            Some(_) => format!(
                "SELECT * FROM conversation_items WHERE conversation_id = $1 AND seq {cmp} $2 \
                 ORDER BY seq {order} LIMIT $3"
            ),
            None => format!(
                "SELECT * FROM conversation_items WHERE conversation_id = $1 AND $2 = $2 \
                 ORDER BY seq {order} LIMIT $3"
            ),
        };
        let rows = sqlx::query(&sql)
            .bind(conversation.to_owned())
            .bind(from.unwrap_or(0))
            .bind(i64::from(limit))
            .fetch_all(self.pool())
            .await?;
        rows.iter().map(item_of).collect()
    }

    /// One item of a conversation.
    pub async fn conversation_item(
        &self,
        conversation: &str,
        id: &str,
    ) -> Result<Option<ConversationItem>, StoreError> {
        let row =
            sqlx::query("SELECT * FROM conversation_items WHERE conversation_id = $1 AND id = $2")
                .bind(conversation.to_owned())
                .bind(id.to_owned())
                .fetch_optional(self.pool())
                .await?;
        row.as_ref().map(item_of).transpose()
    }

    /// Remove one item; returns whether it was there.
    pub async fn delete_conversation_item(
        &self,
        conversation: &str,
        id: &str,
    ) -> Result<bool, StoreError> {
        let done =
            sqlx::query("DELETE FROM conversation_items WHERE conversation_id = $1 AND id = $2")
                .bind(conversation.to_owned())
                .bind(id.to_owned())
                .execute(self.pool())
                .await?;
        Ok(done.rows_affected() > 0)
    }
}

/// A unique-key violation (another instance took the place, or an item id is repeated), or
/// SQLite's busy answer to a transaction that lost a race to write: worth another try.
fn is_conflict(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Database(d) => {
            d.is_unique_violation()
                || matches!(d.code().as_deref(), Some("5" | "517" | "SQLITE_BUSY"))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::every_backend;

    fn at(ms: i64) -> OffsetDateTime {
        from_ms("t", ms).unwrap()
    }

    #[tokio::test]
    async fn answers_are_kept_until_they_expire_or_are_deleted() {
        for db in every_backend().await {
            answers_kept(&db.store).await;
        }
    }

    async fn answers_kept(store: &Store) {
        let r = StoredResponse {
            id: "resp_1".into(),
            owner_key: Some("abc".into()),
            team_id: None,
            model: "g".into(),
            previous_id: None,
            conversation_id: None,
            created_at: at(1_000),
            expires_at: Some(at(5_000)),
            sealed: "sealed:v1:x".into(),
        };
        store.put_response(&r).await.unwrap();
        assert_eq!(
            store.response("resp_1", at(2_000)).await.unwrap(),
            Some(r.clone())
        );
        assert_eq!(store.response("resp_1", at(5_000)).await.unwrap(), None);
        let kept = StoredResponse {
            id: "resp_2".into(),
            expires_at: None,
            ..r.clone()
        };
        store.put_response(&kept).await.unwrap();
        assert_eq!(store.purge_responses(at(9_000)).await.unwrap(), 1);
        assert!(store.response("resp_2", at(9_000)).await.unwrap().is_some());
        assert!(store.delete_response("resp_2").await.unwrap());
        assert!(!store.delete_response("resp_2").await.unwrap());
    }

    #[tokio::test]
    async fn conversation_items_keep_their_order_and_page() {
        for db in every_backend().await {
            conversation_items(&db.store).await;
        }
    }

    async fn conversation_items(store: &Store) {
        let c = ConversationRow {
            id: "conv_1".into(),
            owner_key: None,
            team_id: None,
            created_at: at(1),
            metadata: "{}".into(),
        };
        store.create_conversation(&c).await.unwrap();
        assert_eq!(store.conversation("conv_1").await.unwrap(), Some(c));
        let items: Vec<(String, String)> = (1..=5)
            .map(|i| (format!("msg_{i}"), format!("s{i}")))
            .collect();
        let added = store
            .add_conversation_items("conv_1", &items[..3], at(2))
            .await
            .unwrap();
        assert_eq!(added.iter().map(|i| i.seq).collect::<Vec<_>>(), [1, 2, 3]);
        store
            .add_conversation_items("conv_1", &items[3..], at(3))
            .await
            .unwrap();
        let ids = |v: Vec<ConversationItem>| v.into_iter().map(|i| i.id).collect::<Vec<_>>();
        let all = store
            .conversation_items("conv_1", None, false, 10)
            .await
            .unwrap();
        assert_eq!(ids(all), ["msg_1", "msg_2", "msg_3", "msg_4", "msg_5"]);
        let page = store
            .conversation_items("conv_1", Some("msg_2"), false, 2)
            .await
            .unwrap();
        assert_eq!(ids(page), ["msg_3", "msg_4"]);
        let newest = store
            .conversation_items("conv_1", None, true, 2)
            .await
            .unwrap();
        assert_eq!(ids(newest), ["msg_5", "msg_4"]);
        // A repeated item id is refused.
        assert!(store
            .add_conversation_items("conv_1", &items[..1], at(4))
            .await
            .is_err());
        assert!(store
            .delete_conversation_item("conv_1", "msg_1")
            .await
            .unwrap());
        assert!(store
            .conversation_item("conv_1", "msg_1")
            .await
            .unwrap()
            .is_none());
        assert!(store
            .set_conversation_metadata("conv_1", r#"{"a":"b"}"#)
            .await
            .unwrap());
        assert!(store.delete_conversation("conv_1").await.unwrap());
        assert!(store
            .conversation_items("conv_1", None, false, 10)
            .await
            .unwrap()
            .is_empty());
    }
}
