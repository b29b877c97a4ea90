//! OpenAI's Conversations API over the store: a conversation's items are kept sealed, in
//! order; a Responses request naming the conversation gets them before its input, and its
//! input and answer are added to them.

use serde_json::{json, Value};
use time::OffsetDateTime;

use sluice_core::error::ApiError;
use sluice_store::{ConversationItem, ConversationRow, Store};

use super::items::{self, Query};
use super::kept::{not_found, store_error, Keeping, Owner, MAX_CONVERSATION_ITEMS};

/// Most items one create or add call takes (OpenAI's limit).
const MAX_ADDED: usize = 20;
/// Most metadata members (OpenAI's limit).
const MAX_METADATA: usize = 16;

/// A conversation the caller may read (another key's is not found).
async fn owned(store: &Store, owner: &Owner, id: &str) -> Result<ConversationRow, ApiError> {
    store
        .conversation(id)
        .await
        .map_err(store_error)?
        .filter(|c| owner.reads(c.owner_key.as_deref()))
        .ok_or_else(|| not_found("conversation", id))
}

/// Every item of a conversation, oldest first, opened.
pub(super) async fn items_of(
    keeping: &Keeping,
    store: &Store,
    owner: &Owner,
    id: &str,
) -> Result<Vec<Value>, ApiError> {
    owned(store, owner, id).await?;
    let kept = store
        .conversation_items(id, None, false, MAX_CONVERSATION_ITEMS)
        .await
        .map_err(store_error)?;
    let mut items = kept
        .iter()
        .map(|i| keeping.open(&i.sealed))
        .collect::<Result<Vec<_>, _>>()?;
    // Items this instance is still writing follow, unless the store has them already.
    for p in keeping.pending.items(id) {
        if !kept
            .iter()
            .any(|k| p.get("id").and_then(Value::as_str) == Some(&k.id))
        {
            items.push(p);
        }
    }
    Ok(items)
}

/// Add items (whole, with ids) to a conversation.
pub(super) async fn append(
    keeping: &Keeping,
    store: &Store,
    id: &str,
    added: &[Value],
    now: OffsetDateTime,
) -> Result<Vec<ConversationItem>, ApiError> {
    let mut sealed = Vec::with_capacity(added.len());
    for item in added {
        let item_id = item
            .get("id")
            .and_then(Value::as_str)
            .map_or_else(|| items::fresh_id("message"), str::to_owned);
        sealed.push((item_id, keeping.seal(item)?));
    }
    store
        .add_conversation_items(id, &sealed, now)
        .await
        .map_err(store_error)
}

/// The conversation object.
fn object(c: &ConversationRow) -> Value {
    let metadata: Value = serde_json::from_str(&c.metadata).unwrap_or_else(|_| json!({}));
    json!({
        "id": c.id,
        "object": "conversation",
        "created_at": c.created_at.unix_timestamp(),
        "metadata": metadata,
    })
}

/// `metadata`: at most 16 string values (OpenAI's rule), as JSON text.
fn metadata(v: Option<&Value>) -> Result<String, ApiError> {
    let bad = |message: &str| ApiError::InvalidParam {
        param: "metadata",
        message: message.into(),
    };
    match v {
        None | Some(Value::Null) => Ok("{}".into()),
        Some(Value::Object(m)) => {
            if m.len() > MAX_METADATA {
                return Err(bad("at most 16 keys"));
            }
            if !m.values().all(Value::is_string) {
                return Err(bad("values must be strings"));
            }
            Ok(Value::Object(m.clone()).to_string())
        }
        Some(_) => Err(bad("expected an object")),
    }
}

/// The `items` of a create or add body, made whole.
fn given_items(body: &Value) -> Result<Vec<Value>, ApiError> {
    let items = items::input_items(body.get("items"))?;
    if items.len() > MAX_ADDED {
        return Err(ApiError::InvalidParam {
            param: "items",
            message: format!("at most {MAX_ADDED} items at once"),
        });
    }
    Ok(items)
}

/// `POST /v1/conversations`.
pub(super) async fn create(
    keeping: &Keeping,
    store: &Store,
    owner: &Owner,
    body: &Value,
) -> Result<Value, ApiError> {
    let now = OffsetDateTime::now_utc();
    let row = ConversationRow {
        id: format!("conv_{}", sluice_core::random::uuid_v4().simple()),
        owner_key: owner.key.clone(),
        team_id: owner.team.clone(),
        created_at: now,
        metadata: metadata(body.get("metadata"))?,
    };
    let items = given_items(body)?;
    store.create_conversation(&row).await.map_err(store_error)?;
    if !items.is_empty() {
        append(keeping, store, &row.id, &items, now).await?;
    }
    Ok(object(&row))
}

/// `GET /v1/conversations/{id}`.
pub(super) async fn get(store: &Store, owner: &Owner, id: &str) -> Result<Value, ApiError> {
    Ok(object(&owned(store, owner, id).await?))
}

/// `POST /v1/conversations/{id}`: new metadata.
pub(super) async fn update(
    store: &Store,
    owner: &Owner,
    id: &str,
    body: &Value,
) -> Result<Value, ApiError> {
    let mut row = owned(store, owner, id).await?;
    row.metadata = metadata(body.get("metadata"))?;
    store
        .set_conversation_metadata(id, &row.metadata)
        .await
        .map_err(store_error)?;
    Ok(object(&row))
}

/// `DELETE /v1/conversations/{id}`.
pub(super) async fn delete(store: &Store, owner: &Owner, id: &str) -> Result<Value, ApiError> {
    owned(store, owner, id).await?;
    store.delete_conversation(id).await.map_err(store_error)?;
    Ok(json!({"id": id, "object": "conversation.deleted", "deleted": true}))
}

/// `GET /v1/conversations/{id}/items`.
pub(super) async fn list(
    keeping: &Keeping,
    store: &Store,
    owner: &Owner,
    id: &str,
    query: &Query,
) -> Result<Value, ApiError> {
    let all = items_of(keeping, store, owner, id).await?;
    Ok(items::page(all, query))
}

/// `POST /v1/conversations/{id}/items`.
pub(super) async fn add(
    keeping: &Keeping,
    store: &Store,
    owner: &Owner,
    id: &str,
    body: &Value,
) -> Result<Value, ApiError> {
    owned(store, owner, id).await?;
    let items = given_items(body)?;
    append(keeping, store, id, &items, OffsetDateTime::now_utc()).await?;
    let ascending = Query {
        limit: items.len().max(1),
        descending: false,
        after: None,
    };
    Ok(items::page(items, &ascending))
}

/// `GET /v1/conversations/{id}/items/{item}`.
pub(super) async fn item(
    keeping: &Keeping,
    store: &Store,
    owner: &Owner,
    id: &str,
    item: &str,
) -> Result<Value, ApiError> {
    owned(store, owner, id).await?;
    let kept = store
        .conversation_item(id, item)
        .await
        .map_err(store_error)?
        .ok_or_else(|| not_found("item", item))?;
    keeping.open(&kept.sealed)
}

/// `DELETE /v1/conversations/{id}/items/{item}`: the conversation is answered.
pub(super) async fn delete_item(
    store: &Store,
    owner: &Owner,
    id: &str,
    item: &str,
) -> Result<Value, ApiError> {
    let row = owned(store, owner, id).await?;
    if !store
        .delete_conversation_item(id, item)
        .await
        .map_err(store_error)?
    {
        return Err(not_found("item", item));
    }
    Ok(object(&row))
}
