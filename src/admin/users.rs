//! `/user/*`: internal users, each with a budget across all of their keys. Like LiteLLM,
//! `/user/new` also issues the user a key unless `auto_create_key` is false.

use serde::Deserialize;
use serde_json::json;
use time::OffsetDateTime;

use super::answers::teams::TeamInfo;
use super::answers::users::{Membership, NewUser, UserInfo, UserInfoAnswer, UserList, UserTeam};
use super::fields::{set, LimitsPatch, KEPT_USER};
use super::keys::{keys_of, new_key};
use super::{
    body, body_with_limits, page, query_pairs, query_value, store_error, total_pages, AdminRequest,
    AdminResult,
};
use sluice_core::error::ApiError;
use sluice_core::limits::SubjectKind;
use sluice_store::{KeyFilter, KeyRow, Store, TeamRole, UserRow};

const OWN_FIELDS: &[&str] = &[
    "user_id",
    "user_alias",
    "user_email",
    "user_role",
    "team_id",
    "password",
    "auto_create_key",
    "key_alias",
    "duration",
    "teams",
    "spend",
];

/// `teams` on `/user/new`: team ids, or LiteLLM's `{"team_id", "max_budget_in_team",
/// "user_role"}` objects.
#[derive(Deserialize)]
#[serde(untagged)]
enum TeamRef {
    Id(String),
    Object {
        team_id: String,
        #[serde(default)]
        user_role: Option<String>,
        // LiteLLM's `max_budget_in_team` is accepted here and not acted on yet.
    },
}

impl TeamRef {
    /// The team it names.
    fn id(&self) -> &str {
        match self {
            Self::Id(id) | Self::Object { team_id: id, .. } => id,
        }
    }
}

/// LiteLLM's roles; anything else is refused rather than stored and misread later.
const ROLES: &[&str] = &[
    "proxy_admin",
    "proxy_admin_viewer",
    "internal_user",
    "internal_user_viewer",
    "team",
    "customer",
];

/// The stored form of a console password (`password` on `/user/new` and `/user/update`, as
/// LiteLLM takes it); `null` on update removes it. Never shown by any call.
fn password_hash(password: &str) -> Result<String, ApiError> {
    if password.chars().count() < crate::auth::password::MIN_LEN {
        return Err(ApiError::InvalidParam {
            param: "password",
            message: format!(
                "must be at least {} characters",
                crate::auth::password::MIN_LEN
            ),
        });
    }
    crate::auth::password::hash(password).ok_or(ApiError::Internal("password hashing"))
}

fn check_role(role: Option<&str>) -> Result<(), ApiError> {
    match role {
        Some(r) if !ROLES.contains(&r) => Err(ApiError::InvalidParam {
            param: "user_role",
            message: format!("`{r}` is not one of {}", ROLES.join(", ")),
        }),
        _ => Ok(()),
    }
}

async fn existing(store: &Store, id: &str) -> Result<UserRow, ApiError> {
    store
        .user(id)
        .await
        .map_err(store_error)?
        .ok_or_else(|| ApiError::NotFound {
            what: "user",
            id: id.to_owned(),
        })
}

#[derive(Deserialize)]
struct New {
    user_id: Option<String>,
    user_alias: Option<String>,
    user_email: Option<String>,
    user_role: Option<String>,
    team_id: Option<String>,
    password: Option<String>,
    auto_create_key: Option<bool>,
    /// The issued key's alias and lifetime (LiteLLM passes them on to that key).
    key_alias: Option<String>,
    duration: Option<String>,
    #[serde(default)]
    teams: Option<Vec<TeamRef>>,
    spend: Option<f64>,
}

/// `POST /user/new`: the user, plus a new key for them (`key`) unless `auto_create_key: false`.
pub(super) async fn new(store: &Store, req: AdminRequest<'_>) -> Result<NewUser, ApiError> {
    let (n, limits): (New, LimitsPatch) = body_with_limits(&req, OWN_FIELDS, KEPT_USER)?;
    check_role(n.user_role.as_deref())?;
    let now = OffsetDateTime::now_utc();
    let aliases = limits.kept.get("aliases").filter(|v| !v.is_null()).cloned();
    let expires = super::keys::expires(n.duration.as_deref(), now)?;
    let spend = super::keys::checked_spend(n.spend)?;
    let teams = n.teams.unwrap_or_default();
    for t in &teams {
        let (id, role) = match t {
            TeamRef::Id(id) => (id, None),
            TeamRef::Object {
                team_id, user_role, ..
            } => (team_id, user_role.as_deref()),
        };
        if let Some(r) = role {
            r.parse::<TeamRole>().map_err(|()| ApiError::InvalidParam {
                param: "teams",
                message: format!("`{r}` is not a team role: `admin` or `user`"),
            })?;
        }
        if store.team(id).await.map_err(store_error)?.is_none() {
            return Err(ApiError::InvalidParam {
                param: "teams",
                message: format!("no team `{id}`"),
            });
        }
    }
    let id = n
        .user_id
        .unwrap_or_else(|| sluice_core::random::uuid_v4().to_string());
    let mut user = UserRow::new(id, now);
    user.user_alias = n.user_alias;
    user.user_email = n.user_email;
    user.user_role = n.user_role;
    if let Some(t) = &n.team_id {
        if store.team(t).await.map_err(store_error)?.is_none() {
            return Err(ApiError::InvalidParam {
                param: "team_id",
                message: format!("no team `{t}`"),
            });
        }
    }
    user.team_id = n.team_id.clone();
    user.password_hash = n.password.as_deref().map(password_hash).transpose()?;
    user.accounting.spend = spend.unwrap_or(0.0);
    if user.team_id.is_none() {
        user.team_id = teams.first().map(|t| match t {
            TeamRef::Id(id) | TeamRef::Object { team_id: id, .. } => id.clone(),
        });
    }
    limits.apply(&mut user.limits, now)?;
    super::budgets::follow(store, &mut user.limits, now).await?;
    store.create_user(&user).await.map_err(|e| match e {
        sluice_store::StoreError::Conflict(_) => {
            ApiError::Conflict(format!("user `{}`", user.user_id))
        }
        other => store_error(other),
    })?;
    // `team_id` makes the user a member too, as in LiteLLM.
    let own_team = n
        .team_id
        .as_ref()
        .filter(|t| !teams.iter().any(|r| r.id() == t.as_str()));
    if let Some(t) = own_team {
        store
            .set_team_member(t, &user.user_id, TeamRole::User, now)
            .await
            .map_err(store_error)?;
    }
    for t in &teams {
        let (id, role) = match t {
            TeamRef::Id(id) => (id, TeamRole::User),
            TeamRef::Object {
                team_id, user_role, ..
            } => (
                team_id,
                user_role
                    .as_deref()
                    .and_then(|r| r.parse().ok())
                    .unwrap_or(TeamRole::User),
            ),
        };
        store
            .set_team_member(id, &user.user_id, role, now)
            .await
            .map_err(store_error)?;
    }
    let mut out = NewUser {
        user: UserInfo::of(&user),
        key: None,
        token: None,
    };
    if n.auto_create_key != Some(false) {
        let plaintext = new_key()?;
        let mut key = KeyRow::new(&plaintext, now);
        key.user_id = Some(user.user_id.clone());
        key.team_id = user.team_id.clone();
        key.key_alias = n.key_alias;
        key.expires = expires;
        if let Some(a) = aliases {
            key.limits.metadata.insert("aliases".into(), a);
        }
        store.create_key(&key).await.map_err(store_error)?;
        out.key = Some(plaintext);
        out.token = Some(key.token.as_str().to_owned());
    }
    Ok(out)
}

#[derive(Deserialize)]
struct Update {
    user_id: String,
    #[serde(default, deserialize_with = "set")]
    user_alias: Option<Option<String>>,
    #[serde(default, deserialize_with = "set")]
    user_email: Option<Option<String>>,
    #[serde(default, deserialize_with = "set")]
    user_role: Option<Option<String>>,
    #[serde(default, deserialize_with = "set")]
    team_id: Option<Option<String>>,
    #[serde(default, deserialize_with = "set")]
    password: Option<Option<String>>,
    spend: Option<f64>,
}

/// `POST /user/update`: only the fields sent change. A user that does not exist is made, as
/// LiteLLM's update does (its clients reset `litellm-proxy-budget`'s spend this way).
pub(super) async fn update(store: &Store, req: AdminRequest<'_>) -> Result<UserInfo, ApiError> {
    let fields: Vec<&str> = OWN_FIELDS
        .iter()
        .copied()
        .filter(|f| !matches!(*f, "auto_create_key" | "teams"))
        .collect();
    let (u, limits): (Update, LimitsPatch) = body_with_limits(&req, &fields, KEPT_USER)?;
    let now = OffsetDateTime::now_utc();
    let spend = super::keys::checked_spend(u.spend)?;
    let mut user = match store.user(&u.user_id).await.map_err(store_error)? {
        Some(user) => user,
        None => {
            let user = UserRow::new(u.user_id.clone(), now);
            store.create_user(&user).await.map_err(store_error)?;
            user
        }
    };
    if let Some(v) = u.user_alias {
        user.user_alias = v;
    }
    if let Some(v) = u.user_email {
        user.user_email = v;
    }
    if let Some(v) = u.user_role {
        check_role(v.as_deref())?;
        user.user_role = v;
    }
    // A new team makes the user a member of it too, as `/user/new`'s `team_id` does, so the
    // user's team and the team's members agree (a member already keeps their role).
    let joined = match u.team_id {
        Some(Some(t)) if user.team_id.as_deref() != Some(t.as_str()) => {
            if store.team(&t).await.map_err(store_error)?.is_none() {
                return Err(ApiError::InvalidParam {
                    param: "team_id",
                    message: format!("no team `{t}`"),
                });
            }
            user.team_id = Some(t.clone());
            Some(t)
        }
        Some(v) => {
            user.team_id = v;
            None
        }
        None => None,
    };
    if let Some(v) = u.password {
        user.password_hash = v.as_deref().map(password_hash).transpose()?;
    }
    limits.apply(&mut user.limits, now)?;
    super::budgets::follow(store, &mut user.limits, now).await?;
    user.accounting.updated_at = now;
    store.update_user(&user).await.map_err(store_error)?;
    if let Some(t) = joined {
        let member = store
            .memberships(&user.user_id)
            .await
            .map_err(store_error)?
            .iter()
            .any(|m| m.team_id == t);
        if !member {
            store
                .set_team_member(&t, &user.user_id, TeamRole::User, now)
                .await
                .map_err(store_error)?;
        }
    }
    if let Some(spend) = spend {
        store
            .set_spend(SubjectKind::User, &user.user_id, spend, now)
            .await
            .map_err(store_error)?;
        user.accounting.spend = spend;
    }
    Ok(UserInfo::of(&user))
}

#[derive(Deserialize)]
struct Delete {
    user_ids: Vec<String>,
}

/// `POST /user/delete` with `user_ids`. Every user must exist, or nothing is deleted.
pub(super) async fn delete(store: &Store, req: AdminRequest<'_>) -> AdminResult {
    let d: Delete = body(&req, &[&["user_ids"]])?;
    for id in &d.user_ids {
        existing(store, id).await?;
    }
    for id in &d.user_ids {
        store.delete_user(id).await.map_err(store_error)?;
    }
    Ok(json!({ "deleted_users": d.user_ids }))
}

/// `GET /user/info?user_id=`: `{"user_id", "user_info", "keys"}`.
pub(crate) async fn info(store: &Store, req: AdminRequest<'_>) -> Result<UserInfoAnswer, ApiError> {
    let q = query_pairs(&req, &["user_id"])?;
    let id = query_value(&q, "user_id").ok_or(ApiError::MissingParam("user_id"))?;
    let user = existing(store, id).await?;
    let keys = keys_of(store, KeyFilter::User(id)).await?;
    // The teams the user is a member of, with the membership (LiteLLM's `teams`).
    let memberships: Vec<_> = store
        .all_team_members()
        .await
        .map_err(store_error)?
        .into_iter()
        .filter(|m| m.user_id == id)
        .collect();
    let mut teams = Vec::with_capacity(memberships.len());
    for m in &memberships {
        if let Some(t) = store.team(&m.team_id).await.map_err(store_error)? {
            teams.push(UserTeam {
                team_memberships: vec![Membership {
                    user_id: id.to_owned(),
                    team_id: t.team_id.clone(),
                    role: m.role.name().to_owned(),
                }],
                team: TeamInfo::of(&t, None),
            });
        }
    }
    Ok(UserInfoAnswer {
        user_id: id.to_owned(),
        user_info: UserInfo::of(&user),
        keys,
        teams,
    })
}

/// `GET /user/list`: `{"users", "total", "page", "page_size", "total_pages"}`.
pub(crate) async fn list(store: &Store, req: AdminRequest<'_>) -> Result<UserList, ApiError> {
    let q = query_pairs(&req, &["page", "page_size"])?;
    let (current, page) = page(&q, "page_size")?;
    let total = store.count_users().await.map_err(store_error)?;
    let users = store.list_users(page).await.map_err(store_error)?;
    Ok(UserList {
        users: users.iter().map(UserInfo::of).collect(),
        total,
        page: current,
        page_size: page.limit,
        total_pages: total_pages(total, page.limit),
    })
}
