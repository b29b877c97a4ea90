//! `/tag/*`: tags as budget holders (LiteLLM's `TagNewRequest`, `TagUpdateRequest`). A tag's
//! budget and limits hold every request that carries it, whoever sends it
//! (`auth::Directory::tag_subjects`), and its spend grows with each of them. As in LiteLLM a
//! tag's limits live in a budget object: one is made from the request's budget fields when it
//! names none, and `/tag/update`'s budget fields change that budget. `/tag/list` also lists the
//! tags requests carried that no record describes ("dynamic" tags, from the spend logs).

use serde::Deserialize;
use serde_json::{json, Map, Value};
use time::OffsetDateTime;

use super::budgets::{budget_json, either, named, updated, BudgetPatch, BUDGET_FIELDS};
use super::fields::set;
use super::{body, body_object, from_map, iso, iso_opt, query_pairs, query_value, store_error};
use super::{AdminRequest, AdminResult};
use sluice_core::error::ApiError;
use sluice_core::limits::SubjectKind;
use sluice_store::{BudgetRow, Page, Store, StoreError, TagRow};

/// The fields of `/tag/new` and `/tag/update` besides the budget's.
const OWN_FIELDS: &[&str] = &[
    "name",
    "description",
    "models",
    "model_info",
    "budget_id",
    "spend",
];

/// Every tag a list shows at most.
const ALL: Page = Page {
    offset: 0,
    limit: 100_000,
};

/// What LiteLLM says of a tag only requests have named.
const DYNAMIC: &str = "This is just a spend tag that was passed dynamically in a request. It \
                       does not control any LLM models.";

/// The fields a tag request sets besides the budget's.
#[derive(Deserialize)]
struct Fields {
    name: String,
    #[serde(default, deserialize_with = "set")]
    description: Option<Option<String>>,
    #[serde(default, deserialize_with = "set")]
    models: Option<Option<Vec<String>>>,
    /// LiteLLM's clients may send it back; sluice works it out from `models`.
    #[serde(rename = "model_info")]
    _model_info: Option<Value>,
    budget_id: Option<String>,
    spend: Option<f64>,
}

/// The request's own fields and its budget fields, from one checked object.
fn read(req: &AdminRequest<'_>) -> Result<(Fields, BudgetPatch), ApiError> {
    let map = body_object(req, &[OWN_FIELDS, BUDGET_FIELDS])?;
    let f: Fields = from_map(map.clone())?;
    if f.name.trim().is_empty() || f.name.len() > sluice_translate::envelope::MAX_TAG_LEN {
        return Err(ApiError::InvalidParam {
            param: "name",
            message: format!(
                "a tag is 1 to {} bytes",
                sluice_translate::envelope::MAX_TAG_LEN
            ),
        });
    }
    Ok((f, from_map(map)?))
}

/// The ids among `models` that name a stored deployment, with its model group (LiteLLM's
/// `model_info`).
async fn model_info(store: &Store, models: &[String]) -> Result<Map<String, Value>, ApiError> {
    let mut out = Map::new();
    for m in models {
        if let Some(row) = store.model(m).await.map_err(store_error)? {
            out.insert(m.clone(), row.model_name.into());
        }
    }
    Ok(out)
}

/// Applies description and models; a budget's soft budget is kept in the tag's metadata,
/// where the budget alerts read it.
async fn apply(store: &Store, f: &Fields, t: &mut TagRow) -> Result<(), ApiError> {
    if let Some(d) = &f.description {
        t.description.clone_from(d);
    }
    if let Some(m) = &f.models {
        t.limits.models = m.clone().unwrap_or_default();
        t.model_info = model_info(store, &t.limits.models).await?;
    }
    Ok(())
}

/// Make the tag's limits a copy of `budget`'s, its soft budget included.
fn follow(t: &mut TagRow, budget: &BudgetRow, now: OffsetDateTime) {
    budget.copy_into(&mut t.limits, now);
    t.set_soft_budget(budget.soft_budget);
}

/// A tag as LiteLLM's `TagConfig` shows it, plus its spend and (for info and list) its
/// budget as `litellm_budget_table`.
fn tag_json(t: &TagRow, budget: Option<&BudgetRow>) -> Value {
    let mut out = json!({
        "name": t.tag_name,
        "description": t.description,
        "models": t.limits.models,
        "model_info": t.model_info,
        "spend": t.accounting.spend,
        "budget_id": t.limits.budget_id,
        "budget_reset_at": iso_opt(t.limits.budget_reset_at),
        "created_at": iso(t.accounting.created_at),
        "updated_at": iso(t.accounting.updated_at),
        "created_by": t.created_by,
    });
    if let (Some(b), Some(o)) = (budget, out.as_object_mut()) {
        o.insert("litellm_budget_table".into(), budget_json(b));
    }
    out
}

async fn budget_of(store: &Store, t: &TagRow) -> Result<Option<BudgetRow>, ApiError> {
    match &t.limits.budget_id {
        Some(id) => store.budget(id).await.map_err(store_error),
        None => Ok(None),
    }
}

async fn existing(store: &Store, name: &str) -> Result<TagRow, ApiError> {
    store
        .tag(name)
        .await
        .map_err(store_error)?
        .ok_or_else(|| ApiError::NotFound {
            what: "tag",
            id: name.to_owned(),
        })
}

/// `POST /tag/new`: `name` is required and unique. Without a `budget_id`, a budget is made
/// from the request's budget fields (`max_budget`, `budget_duration`, `rpm_limit`, ...).
pub(super) async fn new(store: &Store, req: AdminRequest<'_>) -> AdminResult {
    let (f, patch) = read(&req)?;
    if f.spend.is_some() {
        return Err(ApiError::UnknownParam("spend".into()));
    }
    either(f.budget_id.as_deref(), &patch)?;
    let now = OffsetDateTime::now_utc();
    let mut tag = TagRow::new(f.name.trim().to_owned(), now);
    apply(store, &f, &mut tag).await?;
    let budget = match &f.budget_id {
        Some(id) => Some(named(store, id).await?),
        None if !patch.is_empty() => {
            let mut b = BudgetRow::new(sluice_core::random::uuid_v4().to_string(), now);
            patch.apply(&mut b, now)?;
            Some(b)
        }
        None => None,
    };
    if store
        .tag(&tag.tag_name)
        .await
        .map_err(store_error)?
        .is_some()
    {
        return Err(ApiError::Conflict(format!("tag `{}`", tag.tag_name)));
    }
    if let Some(b) = &budget {
        if f.budget_id.is_none() {
            store.create_budget(b).await.map_err(store_error)?;
        }
        follow(&mut tag, b, now);
    }
    store.create_tag(&tag).await.map_err(|e| match e {
        StoreError::Conflict(_) => ApiError::Conflict(format!("tag `{}`", tag.tag_name)),
        other => store_error(other),
    })?;
    Ok(json!({
        "message": format!("Tag {} created successfully", tag.tag_name),
        "tag": tag_json(&tag, budget.as_ref()),
    }))
}

/// `POST /tag/update`: only the fields sent change (LiteLLM clears `description` and `models`
/// when they are left out). Budget fields change the tag's budget (and so every holder that
/// shares it), or make one; a `budget_id` moves the tag to another budget; `spend` sets its
/// spend in the current window.
pub(super) async fn update(store: &Store, req: AdminRequest<'_>) -> AdminResult {
    let (f, patch) = read(&req)?;
    if f.spend.is_some_and(|s| !s.is_finite() || s < 0.0) {
        return Err(ApiError::InvalidParam {
            param: "spend",
            message: "must be a number of USD, 0 or more".into(),
        });
    }
    let now = OffsetDateTime::now_utc();
    let mut tag = existing(store, f.name.trim()).await?;
    apply(store, &f, &mut tag).await?;
    let (budget, changes_budget) = updated(
        store,
        f.budget_id.as_deref(),
        tag.limits.budget_id.as_deref(),
        patch,
        now,
    )
    .await?;
    if let Some(b) = &budget {
        follow(&mut tag, b, now);
    }
    tag.accounting.updated_at = now;
    store.update_tag(&tag).await.map_err(store_error)?;
    if let Some(b) = budget.as_ref().filter(|_| changes_budget) {
        store.update_budget(b, now).await.map_err(store_error)?;
    }
    if let Some(spend) = f.spend {
        store
            .set_spend(SubjectKind::Tag, &tag.tag_name, spend, now)
            .await
            .map_err(store_error)?;
        tag.accounting.spend = spend;
    }
    Ok(json!({
        "message": format!("Tag {} updated successfully", tag.tag_name),
        "tag": tag_json(&tag, budget.as_ref()),
    }))
}

#[derive(Deserialize)]
struct Info {
    names: Vec<String>,
}

/// `POST /tag/info` with `{"names": [...]}`: each tag by name, with its budget. Every one
/// must exist (a 404 names those that do not).
pub(super) async fn info(store: &Store, req: AdminRequest<'_>) -> AdminResult {
    let i: Info = body(&req, &[&["names"]])?;
    let mut out = Map::new();
    let mut missing = Vec::new();
    for name in &i.names {
        match store.tag(name).await.map_err(store_error)? {
            Some(t) => {
                let b = budget_of(store, &t).await?;
                out.insert(name.clone(), tag_json(&t, b.as_ref()));
            }
            None => missing.push(name.clone()),
        }
    }
    if !missing.is_empty() {
        return Err(ApiError::NotFound {
            what: "tags",
            id: missing.join(", "),
        });
    }
    Ok(Value::Object(out))
}

/// `GET /tag/list[?start_date=&end_date=]`: every stored tag with its budget, then the tags
/// requests carried that none describes (in the dates, when given: `YYYY-MM-DD`, both).
pub(super) async fn list(store: &Store, req: AdminRequest<'_>) -> AdminResult {
    let q = query_pairs(&req, &["start_date", "end_date"])?;
    let (start, end) = match (query_value(&q, "start_date"), query_value(&q, "end_date")) {
        (None, None) => (None, None),
        (Some(s), Some(e)) => {
            let s = super::spend::day(s, "start_date")?;
            let e = super::spend::day(e, "end_date")?;
            if s > e {
                return Err(ApiError::InvalidParam {
                    param: "start_date",
                    message: "must be on or before end_date".into(),
                });
            }
            (Some(s), Some(e + time::Duration::days(1)))
        }
        (None, Some(_)) => return Err(ApiError::MissingParam("start_date")),
        (Some(_), None) => return Err(ApiError::MissingParam("end_date")),
    };
    let stored = store.list_tags(ALL).await.map_err(store_error)?;
    let mut out = Vec::with_capacity(stored.len());
    for t in &stored {
        let b = budget_of(store, t).await?;
        out.push(tag_json(t, b.as_ref()));
    }
    let seen = store.spend_by_tag(start, end).await.map_err(store_error)?;
    let mut dynamic: Vec<_> = seen
        .iter()
        .filter(|s| !stored.iter().any(|t| t.tag_name == s.tag))
        .collect();
    dynamic.sort_by(|a, b| a.tag.cmp(&b.tag));
    out.extend(dynamic.into_iter().map(|s| {
        json!({
            "name": s.tag,
            "description": DYNAMIC,
            "models": null,
            "spend": s.spend,
            "created_at": iso_opt(s.first_seen),
            "updated_at": iso_opt(s.last_seen),
        })
    }));
    Ok(Value::Array(out))
}

#[derive(Deserialize)]
struct Delete {
    name: String,
}

/// `POST /tag/delete` with `{"name": ...}`: its limits stop holding requests on every
/// instance (a tombstone, as for keys). Its budget object stays (`/budget/delete`).
pub(super) async fn delete(store: &Store, req: AdminRequest<'_>) -> AdminResult {
    let d: Delete = body(&req, &[&["name"]])?;
    store
        .delete_tag(&d.name, OffsetDateTime::now_utc())
        .await
        .map_err(store_error)?;
    Ok(json!({"message": format!("Tag {} deleted successfully", d.name)}))
}
