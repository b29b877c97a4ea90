//! `/customer/*` (also `/end_user/*`): end users, the `user` field of a request, with their
//! own budget. LiteLLM nests the budget in `litellm_budget_table`; sluice answers the same way.

use serde::Deserialize;
use serde_json::json;
use time::OffsetDateTime;

use super::answers::customers::{BlockedCustomers, CustomerInfo};
use super::fields::{set, LimitsPatch, KEPT_CUSTOMER};
use super::{
    body, body_with_limits, page, query_pairs, query_value, store_error, AdminRequest, AdminResult,
};
use sluice_core::error::ApiError;
use sluice_store::{EndUserRow, Store};

const OWN_FIELDS: &[&str] = &["user_id", "alias", "blocked", "spend"];

async fn existing(store: &Store, id: &str) -> Result<EndUserRow, ApiError> {
    store
        .end_user(id)
        .await
        .map_err(store_error)?
        .ok_or_else(|| ApiError::NotFound {
            what: "end user",
            id: id.to_owned(),
        })
}

#[derive(Deserialize)]
struct New {
    user_id: String,
    alias: Option<String>,
    #[serde(default)]
    blocked: bool,
    spend: Option<f64>,
}

/// `POST /customer/new`.
pub(super) async fn new(store: &Store, req: AdminRequest<'_>) -> Result<CustomerInfo, ApiError> {
    let (n, limits): (New, LimitsPatch) = body_with_limits(&req, OWN_FIELDS, KEPT_CUSTOMER)?;
    let now = OffsetDateTime::now_utc();
    let mut end_user = EndUserRow::new(n.user_id, now);
    end_user.accounting.spend = super::keys::checked_spend(n.spend)?.unwrap_or(0.0);
    end_user.alias = n.alias;
    end_user.blocked = n.blocked;
    limits.apply(&mut end_user.limits, now)?;
    super::budgets::follow(store, &mut end_user.limits, now).await?;
    store
        .create_end_user(&end_user)
        .await
        .map_err(|e| match e {
            sluice_store::StoreError::Conflict(_) => {
                ApiError::Conflict(format!("customer `{}`", end_user.user_id))
            }
            other => store_error(other),
        })?;
    Ok(CustomerInfo::of(&end_user))
}

#[derive(Deserialize)]
struct Update {
    user_id: String,
    #[serde(default, deserialize_with = "set")]
    alias: Option<Option<String>>,
    blocked: Option<bool>,
}

/// `POST /customer/update`: only the fields sent change.
pub(super) async fn update(store: &Store, req: AdminRequest<'_>) -> Result<CustomerInfo, ApiError> {
    let fields = &OWN_FIELDS[..3];
    let (u, limits): (Update, LimitsPatch) = body_with_limits(&req, fields, KEPT_CUSTOMER)?;
    let now = OffsetDateTime::now_utc();
    let mut end_user = existing(store, &u.user_id).await?;
    if let Some(a) = u.alias {
        end_user.alias = a;
    }
    if let Some(b) = u.blocked {
        end_user.blocked = b;
    }
    limits.apply(&mut end_user.limits, now)?;
    super::budgets::follow(store, &mut end_user.limits, now).await?;
    end_user.accounting.updated_at = now;
    store
        .update_end_user(&end_user)
        .await
        .map_err(store_error)?;
    Ok(CustomerInfo::of(&end_user))
}

#[derive(Deserialize)]
struct Ids {
    user_ids: Vec<String>,
}

/// `POST /customer/delete` with `user_ids`. Every end user must exist, or nothing is deleted.
pub(super) async fn delete(store: &Store, req: AdminRequest<'_>) -> AdminResult {
    let d: Ids = body(&req, &[&["user_ids"]])?;
    for id in &d.user_ids {
        existing(store, id).await?;
    }
    for id in &d.user_ids {
        store.delete_end_user(id).await.map_err(store_error)?;
    }
    Ok(json!({ "deleted_customers": d.user_ids }))
}

/// `GET /customer/info?end_user_id=`.
pub(crate) async fn info(store: &Store, req: AdminRequest<'_>) -> Result<CustomerInfo, ApiError> {
    let q = query_pairs(&req, &["end_user_id"])?;
    let id = query_value(&q, "end_user_id").ok_or(ApiError::MissingParam("end_user_id"))?;
    Ok(CustomerInfo::of(&existing(store, id).await?))
}

/// `GET /customer/list`: a list of end users.
pub(crate) async fn list(
    store: &Store,
    req: AdminRequest<'_>,
) -> Result<Vec<CustomerInfo>, ApiError> {
    let q = query_pairs(&req, &["page", "page_size"])?;
    let (_, page) = page(&q, "page_size")?;
    let all = store.list_end_users(page).await.map_err(store_error)?;
    Ok(all.iter().map(CustomerInfo::of).collect())
}

/// Blocks or unblocks each end user, creating unknown ones (LiteLLM's upsert), so an abusive
/// `user` can be blocked before its first request.
async fn set_blocked(
    store: &Store,
    req: AdminRequest<'_>,
    blocked: bool,
) -> Result<BlockedCustomers, ApiError> {
    let d: Ids = body(&req, &[&["user_ids"]])?;
    let now = OffsetDateTime::now_utc();
    let mut out = Vec::with_capacity(d.user_ids.len());
    for id in d.user_ids {
        let mut e = match store.end_user(&id).await.map_err(store_error)? {
            Some(e) => e,
            None => {
                let e = EndUserRow::new(id, now);
                store.create_end_user(&e).await.map_err(store_error)?;
                e
            }
        };
        e.blocked = blocked;
        e.accounting.updated_at = now;
        store.update_end_user(&e).await.map_err(store_error)?;
        out.push(CustomerInfo::of(&e));
    }
    Ok(BlockedCustomers { blocked_users: out })
}

/// `POST /customer/block` with `user_ids`.
pub(super) async fn block(
    store: &Store,
    req: AdminRequest<'_>,
) -> Result<BlockedCustomers, ApiError> {
    set_blocked(store, req, true).await
}

/// `POST /customer/unblock` with `user_ids`.
pub(super) async fn unblock(
    store: &Store,
    req: AdminRequest<'_>,
) -> Result<BlockedCustomers, ApiError> {
    set_blocked(store, req, false).await
}
