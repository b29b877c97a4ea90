//! `/budget/*`: budgets as objects (LiteLLM's `BudgetNewRequest`). Keys, teams, end users and
//! organizations name one with `budget_id` and take its limits; `/budget/update` changes them
//! for every holder at once (the store rewrites the holders' copies, `Store::update_budget`).

use serde::Deserialize;
use serde_json::{json, Map, Value};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use super::fields::set;
use super::{body, body_object, from_map, iso, iso_opt, query_pairs, store_error};
use super::{AdminRequest, AdminResult};
use sluice_core::error::ApiError;
use sluice_store::{BudgetRow, Limits, Page, Store, StoreError};

/// A budget's own fields (`budget_id` apart), as LiteLLM's `BudgetNewRequest` names them.
pub(super) const BUDGET_FIELDS: &[&str] = &[
    "max_budget",
    "soft_budget",
    "max_parallel_requests",
    "tpm_limit",
    "rpm_limit",
    "budget_duration",
    "model_max_budget",
];

/// A budget's fields in one request: absent stays, `null` clears, a value sets.
#[derive(Debug, Default, Deserialize)]
pub(super) struct BudgetPatch {
    #[serde(default, deserialize_with = "set")]
    max_budget: Option<Option<f64>>,
    #[serde(default, deserialize_with = "set")]
    soft_budget: Option<Option<f64>>,
    #[serde(default, deserialize_with = "set")]
    max_parallel_requests: Option<Option<u64>>,
    #[serde(default, deserialize_with = "set")]
    tpm_limit: Option<Option<u64>>,
    #[serde(default, deserialize_with = "set")]
    rpm_limit: Option<Option<u64>>,
    #[serde(default, deserialize_with = "set")]
    budget_duration: Option<Option<String>>,
    #[serde(default, deserialize_with = "set")]
    model_max_budget: Option<Option<Map<String, Value>>>,
    #[serde(default, deserialize_with = "set")]
    budget_reset_at: Option<Option<String>>,
}

/// USD amounts: finite and not negative.
fn dollars(param: &'static str, v: Option<f64>) -> Result<Option<f64>, ApiError> {
    match v {
        Some(d) if !d.is_finite() || d < 0.0 => Err(ApiError::InvalidParam {
            param,
            message: "must be a number of USD, 0 or more".into(),
        }),
        v => Ok(v),
    }
}

impl BudgetPatch {
    /// Whether the request sets none of a budget's fields.
    pub(super) fn is_empty(&self) -> bool {
        self.max_budget.is_none()
            && self.soft_budget.is_none()
            && self.max_parallel_requests.is_none()
            && self.tpm_limit.is_none()
            && self.rpm_limit.is_none()
            && self.budget_duration.is_none()
            && self.model_max_budget.is_none()
            && self.budget_reset_at.is_none()
    }

    /// Applies the fields present; a new duration starts a new window at `now` unless the
    /// request names the window's end itself (`budget_reset_at`).
    pub(super) fn apply(self, b: &mut BudgetRow, now: OffsetDateTime) -> Result<(), ApiError> {
        if let Some(v) = self.max_budget {
            b.max_budget = dollars("max_budget", v)?;
        }
        if let Some(v) = self.soft_budget {
            b.soft_budget = dollars("soft_budget", v)?;
        }
        if let Some(v) = self.max_parallel_requests {
            b.max_parallel_requests = v;
        }
        if let Some(v) = self.tpm_limit {
            b.tpm_limit = v;
        }
        if let Some(v) = self.rpm_limit {
            b.rpm_limit = v;
        }
        if let Some(v) = self.model_max_budget {
            b.model_max_budget = v;
        }
        if let Some(d) = self.budget_duration {
            super::fields::set_duration(d, &mut b.budget_duration, &mut b.budget_reset_at)?;
        }
        if let Some(at) = self.budget_reset_at {
            b.budget_reset_at = at
                .map(|t| OffsetDateTime::parse(&t, &Rfc3339))
                .transpose()
                .map_err(|e| ApiError::InvalidParam {
                    param: "budget_reset_at",
                    message: format!("not an ISO 8601 time: {e}"),
                })?;
        }
        b.schedule(now);
        b.updated_at = now;
        Ok(())
    }
}

/// A budget as LiteLLM shows it (`litellm_budget_table`, `/budget/info`).
pub(super) fn budget_json(b: &BudgetRow) -> Value {
    json!({
        "budget_id": b.budget_id,
        "max_budget": b.max_budget,
        "soft_budget": b.soft_budget,
        "max_parallel_requests": b.max_parallel_requests,
        "tpm_limit": b.tpm_limit,
        "rpm_limit": b.rpm_limit,
        "model_max_budget": b.model_max_budget,
        "budget_duration": b.budget_duration.map(|d| d.to_string()),
        "budget_reset_at": iso_opt(b.reset_at(OffsetDateTime::now_utc())),
        "created_at": iso(b.created_at),
        "updated_at": iso(b.updated_at),
    })
}

/// The budget with this id; a missing one is a 400 naming `budget_id` (the field that named
/// it), as LiteLLM refuses an unknown budget.
pub(super) async fn named(store: &Store, id: &str) -> Result<BudgetRow, ApiError> {
    store
        .budget(id)
        .await
        .map_err(store_error)?
        .ok_or_else(|| ApiError::InvalidParam {
            param: "budget_id",
            message: format!("no budget `{id}`"),
        })
}

/// Refuses a request that names a budget and sets a budget's fields too (which would be
/// ignored, or change a budget others share without saying so).
pub(super) fn either(budget_id: Option<&str>, patch: &BudgetPatch) -> Result<(), ApiError> {
    if budget_id.is_some() && !patch.is_empty() {
        return Err(ApiError::InvalidParam {
            param: "budget_id",
            message: "set either budget_id or the budget's fields (max_budget, ...), not both"
                .into(),
        });
    }
    Ok(())
}

/// The budget a holder that keeps its limits in a budget object (an organization, a tag) has
/// after an update: the one the request names, else its own, changed by the request's budget
/// fields; a holder without one gets a new one when the fields set anything. The flag says the
/// budget changed: save it with `Store::update_budget` once the holder is saved.
pub(super) async fn updated(
    store: &Store,
    asked: Option<&str>,
    own: Option<&str>,
    patch: BudgetPatch,
    now: OffsetDateTime,
) -> Result<(Option<BudgetRow>, bool), ApiError> {
    let mut budget = match asked.or(own) {
        Some(b) => Some(named(store, b).await?),
        None => None,
    };
    if patch.is_empty() {
        return Ok((budget, false));
    }
    let b = match budget.as_mut() {
        Some(b) => b,
        None => {
            let b = BudgetRow::new(sluice_core::random::uuid_v4().to_string(), now);
            store.create_budget(&b).await.map_err(store_error)?;
            budget.insert(b)
        }
    };
    patch.apply(b, now)?;
    Ok((budget, true))
}

/// Make `limits` a copy of the budget they name, if any: what keys, teams and end users call
/// after applying their request's fields.
pub(super) async fn follow(
    store: &Store,
    limits: &mut Limits,
    now: OffsetDateTime,
) -> Result<(), ApiError> {
    if let Some(id) = limits.budget_id.clone() {
        named(store, &id).await?.copy_into(limits, now);
    }
    Ok(())
}

async fn existing(store: &Store, id: &str) -> Result<BudgetRow, ApiError> {
    store
        .budget(id)
        .await
        .map_err(store_error)?
        .ok_or_else(|| ApiError::NotFound {
            what: "budget",
            id: id.to_owned(),
        })
}

#[derive(Deserialize)]
struct Named {
    budget_id: Option<String>,
}

/// The request's `budget_id` and budget fields.
fn read(req: &AdminRequest<'_>) -> Result<(Option<String>, BudgetPatch), ApiError> {
    let map = body_object(req, &[&["budget_id", "budget_reset_at"], BUDGET_FIELDS])?;
    let named: Named = from_map(map.clone())?;
    Ok((named.budget_id, from_map(map)?))
}

/// `POST /budget/new`: `budget_id` is generated (a UUID) when not given.
pub(super) async fn new(store: &Store, req: AdminRequest<'_>) -> AdminResult {
    let (id, patch) = read(&req)?;
    let now = OffsetDateTime::now_utc();
    let mut b = BudgetRow::new(
        id.unwrap_or_else(|| sluice_core::random::uuid_v4().to_string()),
        now,
    );
    patch.apply(&mut b, now)?;
    store.create_budget(&b).await.map_err(|e| match e {
        StoreError::Conflict(_) => ApiError::Conflict(format!("budget `{}`", b.budget_id)),
        other => store_error(other),
    })?;
    Ok(budget_json(&b))
}

/// `POST /budget/update`: only the fields sent change, for the budget and every key, team,
/// end user and organization that names it.
pub(super) async fn update(store: &Store, req: AdminRequest<'_>) -> AdminResult {
    let (id, patch) = read(&req)?;
    let id = id.ok_or(ApiError::MissingParam("budget_id"))?;
    let now = OffsetDateTime::now_utc();
    let mut b = existing(store, &id).await?;
    patch.apply(&mut b, now)?;
    store.update_budget(&b, now).await.map_err(store_error)?;
    Ok(budget_json(&b))
}

#[derive(Deserialize)]
struct Info {
    budgets: Vec<String>,
}

/// `POST /budget/info` with `{"budgets": [ids]}`: those that exist.
pub(super) async fn info(store: &Store, req: AdminRequest<'_>) -> AdminResult {
    let i: Info = body(&req, &[&["budgets"]])?;
    if i.budgets.is_empty() {
        return Err(ApiError::InvalidParam {
            param: "budgets",
            message: "name at least one budget id".into(),
        });
    }
    let mut out = Vec::with_capacity(i.budgets.len());
    for id in &i.budgets {
        if let Some(b) = store.budget(id).await.map_err(store_error)? {
            out.push(budget_json(&b));
        }
    }
    Ok(Value::Array(out))
}

/// `GET /budget/list`: every budget.
pub(super) async fn list(store: &Store, req: AdminRequest<'_>) -> AdminResult {
    query_pairs(&req, &[])?;
    let all = Page {
        offset: 0,
        limit: 100_000,
    };
    let budgets = store.list_budgets(all).await.map_err(store_error)?;
    Ok(Value::Array(budgets.iter().map(budget_json).collect()))
}

#[derive(Deserialize)]
struct Delete {
    id: String,
}

/// `POST /budget/delete` with `{"id"}`. A budget still named by a key, team, user, end user
/// or organization is kept (a 400 saying by what): their limits would silently stop
/// following anything.
pub(super) async fn delete(store: &Store, req: AdminRequest<'_>) -> AdminResult {
    let d: Delete = body(&req, &[&["id"]])?;
    let b = existing(store, &d.id).await?;
    let users = store.budget_users(&d.id).await.map_err(store_error)?;
    if !users.is_empty() {
        return Err(ApiError::InvalidParam {
            param: "id",
            message: format!(
                "budget `{}` is still named by {}; give them another budget_id first",
                d.id,
                users.join(", ")
            ),
        });
    }
    store.delete_budget(&d.id).await.map_err(store_error)?;
    Ok(budget_json(&b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    fn patch(v: Value) -> BudgetPatch {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_patch_sets_clears_and_schedules() {
        let now = datetime!(2026-11-29 10:00 UTC);
        let mut b = BudgetRow::new("b".into(), now);
        assert!(patch(json!({})).is_empty());
        patch(json!({"max_budget": 5.0, "rpm_limit": 3, "budget_duration": "1d"}))
            .apply(&mut b, now)
            .unwrap();
        assert_eq!(b.max_budget, Some(5.0));
        assert_eq!(b.budget_reset_at, Some(datetime!(2026-11-30 10:00 UTC)));
        patch(json!({"rpm_limit": null, "budget_duration": null}))
            .apply(&mut b, now)
            .unwrap();
        assert_eq!((b.rpm_limit, b.budget_reset_at), (None, None));
        let bad = patch(json!({"soft_budget": -1.0})).apply(&mut b, now);
        assert!(matches!(
            bad,
            Err(ApiError::InvalidParam {
                param: "soft_budget",
                ..
            })
        ));
        let bad = patch(json!({"budget_reset_at": "tomorrow"})).apply(&mut b, now);
        assert!(bad.is_err());
    }
}
