//! `/team/*`: teams, whose budget and limits every key of the team shares, and their members
//! with roles (LiteLLM's `members_with_roles`, `/team/member_add|update|delete`): a team
//! `admin` manages the team's keys and members in the console.

use serde::Deserialize;
use serde_json::{json, Map, Value};
use time::OffsetDateTime;

use super::fields::{accounting_json, limits_json, set, LimitsPatch};
use super::keys::keys_json;
use super::{
    body, body_with_limits, page, query_pairs, query_value, store_error, AdminRequest, AdminResult,
};
use sluice_core::error::ApiError;
use sluice_store::{KeyFilter, Store, TeamMember, TeamRole, TeamRow, UserRow};

const OWN_FIELDS: &[&str] = &["team_id", "team_alias", "blocked", "organization_id"];

fn team_json(t: &TeamRow, members: &[TeamMember]) -> Value {
    let mut out = Map::new();
    out.insert("team_id".into(), t.team_id.clone().into());
    out.insert("team_alias".into(), t.team_alias.clone().into());
    out.insert("blocked".into(), t.blocked.into());
    out.insert("organization_id".into(), t.organization_id.clone().into());
    out.insert(
        "members_with_roles".into(),
        members
            .iter()
            .filter(|m| m.team_id == t.team_id)
            .map(|m| json!({ "user_id": m.user_id, "role": m.role.name() }))
            .collect(),
    );
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
    organization_id: Option<String>,
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
    team.organization_id = super::organizations::placed(store, n.organization_id).await?;
    limits.apply(&mut team.limits, now)?;
    super::budgets::follow(store, &mut team.limits, now).await?;
    store.create_team(&team).await.map_err(|e| match e {
        sluice_store::StoreError::Conflict(_) => {
            ApiError::Conflict(format!("team `{}`", team.team_id))
        }
        other => store_error(other),
    })?;
    Ok(team_json(&team, &[]))
}

#[derive(Deserialize)]
struct Update {
    team_id: String,
    #[serde(default, deserialize_with = "set")]
    team_alias: Option<Option<String>>,
    #[serde(default, deserialize_with = "set")]
    organization_id: Option<Option<String>>,
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
    if let Some(org) = u.organization_id {
        team.organization_id = super::organizations::placed(store, org).await?;
    }
    limits.apply(&mut team.limits, now)?;
    super::budgets::follow(store, &mut team.limits, now).await?;
    team.accounting.updated_at = now;
    store.update_team(&team).await.map_err(store_error)?;
    answer(store, &team).await
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
    let members = store.team_members(id).await.map_err(store_error)?;
    let keys = keys_json(store, KeyFilter::Team(id)).await?;
    Ok(json!({
        "team_id": id,
        "team_info": team_json(&team, &members),
        "keys": keys,
    }))
}

/// `GET /team/list`: a list of teams, as LiteLLM answers it.
pub(super) async fn list(store: &Store, req: AdminRequest<'_>) -> AdminResult {
    let q = query_pairs(&req, &["page", "page_size"])?;
    let (_, page) = page(&q, "page_size")?;
    let teams = store.list_teams(page).await.map_err(store_error)?;
    let members = store.all_team_members().await.map_err(store_error)?;
    Ok(Value::Array(
        teams.iter().map(|t| team_json(t, &members)).collect(),
    ))
}

/// A team with its members, as the member routes answer.
async fn answer(store: &Store, team: &TeamRow) -> AdminResult {
    let members = store
        .team_members(&team.team_id)
        .await
        .map_err(store_error)?;
    Ok(team_json(team, &members))
}

/// One member as LiteLLM's bodies name it: `user_id` (required here) and `role`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Member {
    user_id: Option<String>,
    #[serde(default)]
    user_email: Option<String>,
    #[serde(default = "user_role")]
    role: String,
}

fn user_role() -> String {
    "user".into()
}

/// `member`: one or a list, as LiteLLM takes it.
#[derive(Deserialize)]
#[serde(untagged)]
enum Members {
    One(Member),
    Many(Vec<Member>),
}

#[derive(Deserialize)]
struct MemberAdd {
    team_id: String,
    member: Members,
}

fn team_role(role: &str) -> Result<TeamRole, ApiError> {
    role.parse().map_err(|()| ApiError::InvalidParam {
        param: "role",
        message: format!("`{role}` is not a team role: `admin` or `user`"),
    })
}

/// `POST /team/member_add`: `{"team_id", "member": {"user_id", "role"} | [...]}`. A user who
/// does not exist yet is made (an `internal_user`, as LiteLLM does); one without a team gets
/// this one as theirs, so the console shows them its usage.
pub(super) async fn member_add(store: &Store, req: AdminRequest<'_>) -> AdminResult {
    let m: MemberAdd = body(&req, &[&["team_id", "member"]])?;
    let team = existing(store, &m.team_id).await?;
    let list = match m.member {
        Members::One(one) => vec![one],
        Members::Many(many) => many,
    };
    let now = OffsetDateTime::now_utc();
    let mut checked = Vec::with_capacity(list.len());
    for member in list {
        let user = member
            .user_id
            .filter(|u| !u.trim().is_empty())
            .ok_or(ApiError::MissingParam("user_id"))?;
        checked.push((user, member.user_email, team_role(&member.role)?));
    }
    for (user, email, role) in checked {
        match store.user(&user).await.map_err(store_error)? {
            Some(mut row) if row.team_id.is_none() => {
                row.team_id = Some(team.team_id.clone());
                row.accounting.updated_at = now;
                store.update_user(&row).await.map_err(store_error)?;
            }
            Some(_) => {}
            None => {
                let mut row = UserRow::new(user.clone(), now);
                row.user_role = Some("internal_user".into());
                row.user_email = email;
                row.team_id = Some(team.team_id.clone());
                store.create_user(&row).await.map_err(store_error)?;
            }
        }
        store
            .set_team_member(&team.team_id, &user, role, now)
            .await
            .map_err(store_error)?;
    }
    answer(store, &team).await
}

#[derive(Deserialize)]
struct MemberUpdate {
    team_id: String,
    user_id: String,
    role: String,
}

/// `POST /team/member_update`: `{"team_id", "user_id", "role"}` for an existing member.
pub(super) async fn member_update(store: &Store, req: AdminRequest<'_>) -> AdminResult {
    let m: MemberUpdate = body(&req, &[&["team_id", "user_id", "role"]])?;
    let team = existing(store, &m.team_id).await?;
    let role = team_role(&m.role)?;
    let members = store
        .team_members(&team.team_id)
        .await
        .map_err(store_error)?;
    if !members.iter().any(|x| x.user_id == m.user_id) {
        return Err(ApiError::NotFound {
            what: "team member",
            id: m.user_id,
        });
    }
    let now = OffsetDateTime::now_utc();
    store
        .set_team_member(&team.team_id, &m.user_id, role, now)
        .await
        .map_err(store_error)?;
    answer(store, &team).await
}

#[derive(Deserialize)]
struct MemberDelete {
    team_id: String,
    user_id: String,
}

/// `POST /team/member_delete`: `{"team_id", "user_id"}`. A user whose team this was is left
/// without one.
pub(super) async fn member_delete(store: &Store, req: AdminRequest<'_>) -> AdminResult {
    let m: MemberDelete = body(&req, &[&["team_id", "user_id"]])?;
    let team = existing(store, &m.team_id).await?;
    store
        .remove_team_member(&team.team_id, &m.user_id)
        .await
        .map_err(store_error)?;
    if let Some(mut row) = store.user(&m.user_id).await.map_err(store_error)? {
        if row.team_id.as_deref() == Some(team.team_id.as_str()) {
            row.team_id = None;
            row.accounting.updated_at = OffsetDateTime::now_utc();
            store.update_user(&row).await.map_err(store_error)?;
        }
    }
    answer(store, &team).await
}
