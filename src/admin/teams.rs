//! `/team/*`: teams, whose budget and limits every key of the team shares, and their members
//! with roles (LiteLLM's `members_with_roles`, `/team/member_add|update|delete`): a team
//! `admin` manages the team's keys and members in the console.

use serde::Deserialize;
use serde_json::{json, Map, Value};
use time::OffsetDateTime;

use super::answers::teams::{Emails, TeamInfo, TeamInfoAnswer, TeamUpdated};
use super::fields::{set, LimitsPatch, KEPT_TEAM};
use super::keys::keys_of;
use super::{
    body, body_with_limits, page, query_pairs, query_value, store_error, AdminRequest, AdminResult,
};
use sluice_core::error::ApiError;
use sluice_store::{KeyFilter, Store, TeamMember, TeamRole, TeamRow, UserRow};

const OWN_FIELDS: &[&str] = &[
    "team_id",
    "team_alias",
    "blocked",
    "members_with_roles",
    "admins",
    "members",
    "organization_id",
];

/// The emails of these members, from their user records.
async fn emails(store: &Store, members: &[TeamMember]) -> Result<Emails, ApiError> {
    let mut out = Emails::new();
    for m in members {
        if let Some(email) = store
            .user(&m.user_id)
            .await
            .map_err(store_error)?
            .and_then(|u| u.user_email)
        {
            out.insert(m.user_id.clone(), email);
        }
    }
    Ok(out)
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
    #[serde(flatten)]
    roster: Roster,
}

/// The members a team is made or updated with, in LiteLLM's three spellings:
/// `members_with_roles` (`[{"user_id" | "user_email", "role"}]`), and the older `admins` and
/// `members` (lists of user ids).
#[derive(Deserialize, Default)]
struct Roster {
    #[serde(default)]
    members_with_roles: Option<Vec<Member>>,
    #[serde(default)]
    admins: Option<Vec<String>>,
    #[serde(default)]
    members: Option<Vec<String>>,
}

impl Roster {
    fn into_members(self) -> Vec<Member> {
        let named = |ids: Option<Vec<String>>, role: &'static str| {
            ids.unwrap_or_default().into_iter().map(move |id| Member {
                user_id: Some(id),
                user_email: None,
                role: role.to_owned(),
            })
        };
        let mut all = self.members_with_roles.unwrap_or_default();
        all.extend(named(self.admins, "admin"));
        all.extend(named(self.members, "user"));
        all
    }
}

/// `POST /team/new`: `team_id` is generated (a UUID) when not given.
pub(super) async fn new(store: &Store, req: AdminRequest<'_>) -> Result<TeamInfo, ApiError> {
    let (n, limits): (New, LimitsPatch) = body_with_limits(&req, OWN_FIELDS, KEPT_TEAM)?;
    let roster = n.roster.into_members();
    let checked = checked_members(roster)?;
    let now = OffsetDateTime::now_utc();
    let id = n
        .team_id
        .unwrap_or_else(|| sluice_core::random::uuid_v4().to_string());
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
    add_members(store, &team, checked).await?;
    answer(store, &team).await
}

#[derive(Deserialize)]
struct Update {
    team_id: String,
    #[serde(default, deserialize_with = "set")]
    team_alias: Option<Option<String>>,
    #[serde(default, deserialize_with = "set")]
    organization_id: Option<Option<String>>,
    blocked: Option<bool>,
    #[serde(flatten)]
    roster: Roster,
}

/// `POST /team/update`: only the fields sent change; members named are added (or their role
/// changed), none removed (that is `/team/member_delete`). LiteLLM answers `{"data": team}`.
pub(super) async fn update(store: &Store, req: AdminRequest<'_>) -> Result<TeamUpdated, ApiError> {
    let (u, limits): (Update, LimitsPatch) = body_with_limits(&req, OWN_FIELDS, KEPT_TEAM)?;
    let now = OffsetDateTime::now_utc();
    let checked = checked_members(u.roster.into_members())?;
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
    add_members(store, &team, checked).await?;
    Ok(TeamUpdated {
        team_id: u.team_id,
        data: answer(store, &team).await?,
    })
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
pub(crate) async fn info(store: &Store, req: AdminRequest<'_>) -> Result<TeamInfoAnswer, ApiError> {
    let q = query_pairs(&req, &["team_id"])?;
    let id = query_value(&q, "team_id").ok_or(ApiError::MissingParam("team_id"))?;
    let team = existing(store, id).await?;
    let members = store.team_members(id).await.map_err(store_error)?;
    let emails = emails(store, &members).await?;
    Ok(TeamInfoAnswer {
        team_id: id.to_owned(),
        team_info: TeamInfo::of(&team, Some((&members, &emails))),
        keys: keys_of(store, KeyFilter::Team(id)).await?,
    })
}

/// `GET /team/list`: a list of teams, as LiteLLM answers it.
pub(crate) async fn list(store: &Store, req: AdminRequest<'_>) -> Result<Vec<TeamInfo>, ApiError> {
    let q = query_pairs(&req, &["page", "page_size"])?;
    let (_, page) = page(&q, "page_size")?;
    let teams = store.list_teams(page).await.map_err(store_error)?;
    let members = store.all_team_members().await.map_err(store_error)?;
    Ok(teams
        .iter()
        .map(|t| TeamInfo::of(t, Some((&members, &Emails::new()))))
        .collect())
}

/// A team with its members, as the member routes answer.
async fn answer(store: &Store, team: &TeamRow) -> Result<TeamInfo, ApiError> {
    let members = store
        .team_members(&team.team_id)
        .await
        .map_err(store_error)?;
    let emails = emails(store, &members).await?;
    Ok(TeamInfo::of(team, Some((&members, &emails))))
}

/// One member as LiteLLM's bodies name it: `user_id` or `user_email`, and `role`.
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
    /// LiteLLM's per-member budget in the team: kept in the team's
    /// `metadata.max_budget_in_team` (user id → USD), not acted on yet.
    max_budget_in_team: Option<f64>,
}

fn team_role(role: &str) -> Result<TeamRole, ApiError> {
    role.parse().map_err(|()| ApiError::InvalidParam {
        param: "role",
        message: format!("`{role}` is not a team role: `admin` or `user`"),
    })
}

/// A member to add: who (an id, an email or both) and the role.
struct Checked {
    user_id: Option<String>,
    user_email: Option<String>,
    role: TeamRole,
}

/// Every member named by an id or an email, with a known role: all checked before any is
/// added, so a bad one changes nothing.
fn checked_members(list: Vec<Member>) -> Result<Vec<Checked>, ApiError> {
    list.into_iter()
        .map(|m| {
            let user_id = m.user_id.filter(|u| !u.trim().is_empty());
            let user_email = m.user_email.filter(|e| !e.trim().is_empty());
            if user_id.is_none() && user_email.is_none() {
                return Err(ApiError::MissingParam("user_id"));
            }
            Ok(Checked {
                user_id,
                user_email,
                role: team_role(&m.role)?,
            })
        })
        .collect()
}

/// The user a member names: by id (made when missing, an `internal_user` as LiteLLM does),
/// or by email (the user with it, or a new one with a fresh id). One without a team gets
/// this one as theirs, so the console shows them its usage.
async fn member_user(
    store: &Store,
    team: &TeamRow,
    m: &Checked,
    now: OffsetDateTime,
) -> Result<String, ApiError> {
    let found = match (&m.user_id, &m.user_email) {
        (Some(id), _) => store.user(id).await.map_err(store_error)?,
        (None, Some(email)) => store.user_by_email(email).await.map_err(store_error)?,
        (None, None) => None,
    };
    match found {
        Some(mut row) => {
            if row.team_id.is_none() {
                row.team_id = Some(team.team_id.clone());
                row.accounting.updated_at = now;
                store.update_user(&row).await.map_err(store_error)?;
            }
            Ok(row.user_id)
        }
        None => {
            let id = m
                .user_id
                .clone()
                .unwrap_or_else(|| sluice_core::random::uuid_v4().to_string());
            let mut row = UserRow::new(id, now);
            row.user_role = Some("internal_user".into());
            row.user_email = m.user_email.clone();
            row.team_id = Some(team.team_id.clone());
            match store.create_user(&row).await {
                // Made meanwhile by a concurrent call naming the same member: theirs stands.
                Ok(()) | Err(sluice_store::StoreError::Conflict(_)) => Ok(row.user_id),
                Err(e) => Err(store_error(e)),
            }
        }
    }
}

/// Adds (or re-roles) each member; returns their user ids.
async fn add_members(
    store: &Store,
    team: &TeamRow,
    members: Vec<Checked>,
) -> Result<Vec<String>, ApiError> {
    let now = OffsetDateTime::now_utc();
    let mut ids = Vec::with_capacity(members.len());
    for m in &members {
        let user = member_user(store, team, m, now).await?;
        store
            .set_team_member(&team.team_id, &user, m.role, now)
            .await
            .map_err(store_error)?;
        ids.push(user);
    }
    Ok(ids)
}

/// Records `max_budget_in_team` for these members in the team's metadata.
async fn member_budgets(
    store: &Store,
    team: &mut TeamRow,
    users: &[String],
    budget: Option<f64>,
) -> Result<(), ApiError> {
    let Some(budget) = budget else { return Ok(()) };
    let budgets = team
        .limits
        .metadata
        .entry("max_budget_in_team")
        .or_insert_with(|| Value::Object(Map::new()));
    if !budgets.is_object() {
        *budgets = Value::Object(Map::new());
    }
    if let Value::Object(b) = budgets {
        for u in users {
            b.insert(u.clone(), budget.into());
        }
    }
    team.accounting.updated_at = OffsetDateTime::now_utc();
    store.update_team(team).await.map_err(store_error)
}

/// `POST /team/member_add`: `{"team_id", "member": {"user_id" | "user_email", "role"} | [...],
/// "max_budget_in_team"}`.
pub(super) async fn member_add(store: &Store, req: AdminRequest<'_>) -> Result<TeamInfo, ApiError> {
    let m: MemberAdd = body(&req, &[&["team_id", "member", "max_budget_in_team"]])?;
    let mut team = existing(store, &m.team_id).await?;
    let list = match m.member {
        Members::One(one) => vec![one],
        Members::Many(many) => many,
    };
    let users = add_members(store, &team, checked_members(list)?).await?;
    member_budgets(store, &mut team, &users, m.max_budget_in_team).await?;
    answer(store, &team).await
}

#[derive(Deserialize)]
struct MemberUpdate {
    team_id: String,
    user_id: Option<String>,
    user_email: Option<String>,
    role: Option<String>,
    max_budget_in_team: Option<f64>,
    // LiteLLM's per-member `tpm_limit` and `rpm_limit` are accepted (the allowed names below)
    // and not acted on yet.
}

/// The member a member call names by `user_id` or `user_email`, or a 404.
async fn named_member(
    store: &Store,
    team: &TeamRow,
    user_id: Option<String>,
    user_email: Option<&str>,
) -> Result<String, ApiError> {
    let user = super::fields::user_named(store, user_id, user_email, "team member").await?;
    let members = store
        .team_members(&team.team_id)
        .await
        .map_err(store_error)?;
    // LiteLLM answers 400 for a user who is not a member.
    match members.into_iter().find(|x| x.user_id == user) {
        Some(_) => Ok(user),
        None => Err(ApiError::InvalidParam {
            param: "user_id",
            message: format!("`{user}` is not a member of team `{}`", team.team_id),
        }),
    }
}

/// `POST /team/member_update`: `{"team_id", "user_id" | "user_email", "role",
/// "max_budget_in_team"}` for an existing member.
pub(super) async fn member_update(
    store: &Store,
    req: AdminRequest<'_>,
) -> Result<TeamInfo, ApiError> {
    let m: MemberUpdate = body(
        &req,
        &[&[
            "team_id",
            "user_id",
            "user_email",
            "role",
            "max_budget_in_team",
            "tpm_limit",
            "rpm_limit",
        ]],
    )?;
    let mut team = existing(store, &m.team_id).await?;
    let role = m.role.as_deref().map(team_role).transpose()?;
    let user = named_member(store, &team, m.user_id, m.user_email.as_deref()).await?;
    if let Some(role) = role {
        let now = OffsetDateTime::now_utc();
        store
            .set_team_member(&team.team_id, &user, role, now)
            .await
            .map_err(store_error)?;
    }
    member_budgets(store, &mut team, &[user], m.max_budget_in_team).await?;
    answer(store, &team).await
}

#[derive(Deserialize)]
struct MemberDelete {
    team_id: String,
    user_id: Option<String>,
    user_email: Option<String>,
}

/// `POST /team/member_delete`: `{"team_id", "user_id" | "user_email"}`. A user whose team this
/// was is left without one.
pub(super) async fn member_delete(
    store: &Store,
    req: AdminRequest<'_>,
) -> Result<TeamInfo, ApiError> {
    let m: MemberDelete = body(&req, &[&["team_id", "user_id", "user_email"]])?;
    let team = existing(store, &m.team_id).await?;
    let user = named_member(store, &team, m.user_id, m.user_email.as_deref()).await?;
    store
        .remove_team_member(&team.team_id, &user)
        .await
        .map_err(store_error)?;
    if let Some(mut row) = store.user(&user).await.map_err(store_error)? {
        if row.team_id.as_deref() == Some(team.team_id.as_str()) {
            row.team_id = None;
            row.accounting.updated_at = OffsetDateTime::now_utc();
            store.update_user(&row).await.map_err(store_error)?;
        }
    }
    answer(store, &team).await
}
