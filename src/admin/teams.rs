//! `/team/*`: teams, whose budget and limits every key of the team shares.

use serde::Deserialize;
use serde_json::{json, Map, Value};
use time::OffsetDateTime;

use super::fields::{accounting_json, limits_json, set, LimitsPatch};
use super::keys::keys_json;
use super::{
    body, body_with_limits, page, query_pairs, query_value, store_error, AdminRequest, AdminResult,
};
use sluice_core::error::ApiError;
use sluice_store::{KeyFilter, Store, TeamRow};

const OWN_FIELDS: &[&str] = &["team_id", "team_alias", "blocked"];

fn team_json(t: &TeamRow) -> Value {
    let mut out = Map::new();
    out.insert("team_id".into(), t.team_id.clone().into());
    out.insert("team_alias".into(), t.team_alias.clone().into());
    out.insert("blocked".into(), t.blocked.into());
    limits_json(&t.limits, &mut out);
    accounting_json(&t.accounting, &mut out);
    Value::Object(out)
}

async fn existing(store: &Store, id: &str) -> Result<TeamRow, ApiError> {
    store
        .team(id)
        .await
        .map_err(store_error)?
        .ok_or_else(|| ApiError::NotFound {
            what: "team",
            id: id.to_owned(),
        })
}

#[derive(Deserialize)]
struct New {
    team_id: Option<String>,
    team_alias: Option<String>,
    #[serde(default)]
    blocked: bool,
}

/// `POST /team/new`: `team_id` is generated (a UUID) when not given.
pub(super) async fn new(store: &Store, req: AdminRequest<'_>) -> AdminResult {
    let (n, limits): (New, LimitsPatch) = body_with_limits(&req, OWN_FIELDS)?;
    let now = OffsetDateTime::now_utc();
    let id = n
        .team_id
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let mut team = TeamRow::new(id, now);
    team.team_alias = n.team_alias;
    team.blocked = n.blocked;
    limits.apply(&mut team.limits, now)?;
    store.create_team(&team).await.map_err(|e| match e {
        sluice_store::StoreError::Conflict(_) => {
            ApiError::Conflict(format!("team `{}`", team.team_id))
        }
        other => store_error(other),
    })?;
    Ok(team_json(&team))
}

#[derive(Deserialize)]
struct Update {
    team_id: String,
    #[serde(default, deserialize_with = "set")]
    team_alias: Option<Option<String>>,
    blocked: Option<bool>,
}

/// `POST /team/update`: only the fields sent change.
pub(super) async fn update(store: &Store, req: AdminRequest<'_>) -> AdminResult {
    let (u, limits): (Update, LimitsPatch) = body_with_limits(&req, OWN_FIELDS)?;
    let now = OffsetDateTime::now_utc();
    let mut team = existing(store, &u.team_id).await?;
    if let Some(alias) = u.team_alias {
        team.team_alias = alias;
    }
    if let Some(b) = u.blocked {
        team.blocked = b;
    }
    limits.apply(&mut team.limits, now)?;
    team.accounting.updated_at = now;
    store.update_team(&team).await.map_err(store_error)?;
    Ok(team_json(&team))
}

#[derive(Deserialize)]
struct Delete {
    team_ids: Vec<String>,
}

/// `POST /team/delete` with `team_ids`. Every team must exist, or nothing is deleted. The
/// teams' keys stay, without a team budget (as in LiteLLM, delete the keys to revoke them).
pub(super) async fn delete(store: &Store, req: AdminRequest<'_>) -> AdminResult {
    let d: Delete = body(&req, &[&["team_ids"]])?;
    for id in &d.team_ids {
        existing(store, id).await?;
    }
    for id in &d.team_ids {
        store.delete_team(id).await.map_err(store_error)?;
    }
    Ok(json!({ "deleted_teams": d.team_ids }))
}

/// `GET /team/info?team_id=`: `{"team_id", "team_info", "keys"}`.
pub(super) async fn info(store: &Store, req: AdminRequest<'_>) -> AdminResult {
    let q = query_pairs(&req, &["team_id"])?;
    let id = query_value(&q, "team_id").ok_or(ApiError::MissingParam("team_id"))?;
    let team = existing(store, id).await?;
    let keys = keys_json(store, KeyFilter::Team(id)).await?;
    Ok(json!({
        "team_id": id,
        "team_info": team_json(&team),
        "keys": keys,
    }))
}

/// `GET /team/list`: a list of teams, as LiteLLM answers it.
pub(super) async fn list(store: &Store, req: AdminRequest<'_>) -> AdminResult {
    let q = query_pairs(&req, &["page", "page_size"])?;
    let (_, page) = page(&q, "page_size")?;
    let teams = store.list_teams(page).await.map_err(store_error)?;
    Ok(Value::Array(teams.iter().map(team_json).collect()))
}
