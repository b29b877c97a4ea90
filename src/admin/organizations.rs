//! `/organization/*`: organizations (LiteLLM's `NewOrganizationRequest`), the level above
//! teams and keys. An organization's `models` bind every key and team under it and its budget
//! caps their spend together (`auth::Directory::subjects`). As in LiteLLM every organization has
//! a budget object: one is made from the request's budget fields when it names none, and
//! `/organization/update`'s budget fields change that budget. Members have an organization role
//! (`org_admin`, `internal_user`, `internal_user_viewer`). LiteLLM's methods (`PATCH` update,
//! `DELETE` delete) and the older `POST` spellings are both served.

use serde::Deserialize;
use serde_json::{json, Map, Value};
use time::OffsetDateTime;

use super::budgets::{budget_json, either, named, updated, BudgetPatch, BUDGET_FIELDS};
use super::fields::{accounting_json, check_object_permission, limits_json, set};
use super::{body, body_object, from_map, iso, query_pairs, query_value, store_error};
use super::{AdminRequest, AdminResult};
use sluice_core::error::ApiError;
use sluice_store::{
    BudgetRow, OrgMember, OrgRole, OrganizationRow, Page, Store, StoreError, TeamRow, UserRow,
};

/// The fields of `/organization/new` and `/organization/update` besides the budget's.
const OWN_FIELDS: &[&str] = &[
    "organization_id",
    "organization_alias",
    "models",
    "budget_id",
    "metadata",
    "model_rpm_limit",
    "model_tpm_limit",
    "object_permission",
];

/// Most teams an organization answer lists.
const TEAMS_SHOWN: Page = Page {
    offset: 0,
    limit: 1000,
};

/// The organization a key or team is put under: `None` stays `None`, an id must exist (a 400
/// naming `organization_id` otherwise). Called by `/key/*` and `/team/*`.
pub(super) async fn placed(store: &Store, id: Option<String>) -> Result<Option<String>, ApiError> {
    let Some(id) = id else {
        return Ok(None);
    };
    match store.organization(&id).await.map_err(store_error)? {
        Some(_) => Ok(Some(id)),
        None => Err(ApiError::InvalidParam {
            param: "organization_id",
            message: format!("no organization `{id}`"),
        }),
    }
}

async fn existing(store: &Store, id: &str) -> Result<OrganizationRow, ApiError> {
    store
        .organization(id)
        .await
        .map_err(store_error)?
        .ok_or_else(|| ApiError::NotFound {
            what: "organization",
            id: id.to_owned(),
        })
}

fn member_json(m: &OrgMember) -> Value {
    json!({
        "user_id": m.user_id,
        "organization_id": m.organization_id,
        "user_role": m.role.name(),
        "spend": 0.0,
        "budget_id": null,
        "max_budget_in_organization": m.max_budget_in_organization,
        "litellm_budget_table": m.max_budget_in_organization.map(|b| json!({"max_budget": b})),
        "created_at": iso(m.created_at),
        "updated_at": iso(m.updated_at),
    })
}

fn team_json(t: &TeamRow) -> Value {
    let mut out = Map::new();
    out.insert("team_id".into(), t.team_id.clone().into());
    out.insert("team_alias".into(), t.team_alias.clone().into());
    out.insert("organization_id".into(), t.organization_id.clone().into());
    out.insert("blocked".into(), t.blocked.into());
    out.insert("budget_id".into(), t.limits.budget_id.clone().into());
    limits_json(&t.limits, &mut out);
    accounting_json(&t.accounting, &mut out);
    Value::Object(out)
}

/// An organization as LiteLLM answers it: its row, `litellm_budget_table`, and (for info and
/// list) `members` and `teams`.
fn org_json(
    o: &OrganizationRow,
    budget: Option<&BudgetRow>,
    members: Option<&[OrgMember]>,
    teams: Option<&[TeamRow]>,
) -> Value {
    let mut out = Map::new();
    out.insert("organization_id".into(), o.organization_id.clone().into());
    out.insert(
        "organization_alias".into(),
        o.organization_alias.clone().into(),
    );
    out.insert("budget_id".into(), o.limits.budget_id.clone().into());
    out.insert("models".into(), Value::from(o.limits.models.clone()));
    out.insert("metadata".into(), Value::Object(o.limits.metadata.clone()));
    out.insert(
        "object_permission".into(),
        o.limits
            .metadata
            .get("object_permission")
            .cloned()
            .unwrap_or(Value::Null),
    );
    out.insert("created_by".into(), "litellm-proxy-admin".into());
    out.insert("updated_by".into(), "litellm-proxy-admin".into());
    accounting_json(&o.accounting, &mut out);
    out.insert(
        "litellm_budget_table".into(),
        budget.map_or(Value::Null, budget_json),
    );
    if let Some(m) = members {
        out.insert("members".into(), m.iter().map(member_json).collect());
        out.insert("users".into(), Value::Null);
    }
    if let Some(t) = teams {
        out.insert("teams".into(), t.iter().map(team_json).collect());
    }
    Value::Object(out)
}

/// The organization with its budget, members and teams.
async fn full_json(store: &Store, o: &OrganizationRow) -> AdminResult {
    let budget = match &o.limits.budget_id {
        Some(id) => store.budget(id).await.map_err(store_error)?,
        None => None,
    };
    let members = store
        .organization_members(&o.organization_id)
        .await
        .map_err(store_error)?;
    let teams = store
        .organization_teams(&o.organization_id, TEAMS_SHOWN)
        .await
        .map_err(store_error)?;
    Ok(org_json(o, budget.as_ref(), Some(&members), Some(&teams)))
}

/// The fields an organization request sets besides the budget's.
#[derive(Deserialize)]
struct Fields {
    organization_id: Option<String>,
    #[serde(default, deserialize_with = "set")]
    organization_alias: Option<Option<String>>,
    #[serde(default, deserialize_with = "set")]
    models: Option<Option<Vec<String>>>,
    budget_id: Option<String>,
    metadata: Option<Map<String, Value>>,
    model_rpm_limit: Option<Map<String, Value>>,
    model_tpm_limit: Option<Map<String, Value>>,
    object_permission: Option<Map<String, Value>>,
}

impl Fields {
    /// Applies alias, models and metadata; `metadata` is merged into what is there (as LiteLLM
    /// merges it), and `model_rpm_limit` / `model_tpm_limit` / `object_permission` are kept in
    /// it, where LiteLLM keeps them.
    fn apply(self, o: &mut OrganizationRow) -> Result<(), ApiError> {
        if let Some(a) = self.organization_alias {
            o.organization_alias = a;
        }
        if let Some(m) = self.models {
            o.limits.models = m.unwrap_or_default();
        }
        if let Some(m) = self.metadata {
            o.limits.metadata.extend(m);
        }
        for (name, v) in [
            ("model_rpm_limit", self.model_rpm_limit),
            ("model_tpm_limit", self.model_tpm_limit),
        ] {
            if let Some(v) = v {
                o.limits.metadata.insert(name.into(), Value::Object(v));
            }
        }
        if let Some(op) = self.object_permission {
            check_object_permission(&op)?;
            o.limits
                .metadata
                .insert("object_permission".into(), Value::Object(op));
        }
        Ok(())
    }
}

/// The request's own fields and its budget fields, from one checked object.
fn read(req: &AdminRequest<'_>) -> Result<(Fields, BudgetPatch), ApiError> {
    let map = body_object(req, &[OWN_FIELDS, BUDGET_FIELDS])?;
    Ok((from_map(map.clone())?, from_map(map)?))
}

/// `POST /organization/new`: `organization_alias` is required (it need not be unique);
/// `organization_id` is generated (a UUID) when not given. Without a `budget_id`, a budget is
/// made from the request's budget fields.
pub(super) async fn new(store: &Store, req: AdminRequest<'_>) -> AdminResult {
    let (f, patch) = read(&req)?;
    if !matches!(f.organization_alias, Some(Some(_))) {
        return Err(ApiError::MissingParam("organization_alias"));
    }
    either(f.budget_id.as_deref(), &patch)?;
    let now = OffsetDateTime::now_utc();
    let budget = match &f.budget_id {
        Some(id) => named(store, id).await?,
        None => {
            let mut b = BudgetRow::new(sluice_core::random::uuid_v4().to_string(), now);
            patch.apply(&mut b, now)?;
            store.create_budget(&b).await.map_err(store_error)?;
            b
        }
    };
    let id = f
        .organization_id
        .clone()
        .unwrap_or_else(|| sluice_core::random::uuid_v4().to_string());
    let mut org = OrganizationRow::new(id, now);
    f.apply(&mut org)?;
    budget.copy_into(&mut org.limits, now);
    store.create_organization(&org).await.map_err(|e| match e {
        StoreError::Conflict(_) => {
            ApiError::Conflict(format!("organization `{}`", org.organization_id))
        }
        other => store_error(other),
    })?;
    Ok(org_json(&org, Some(&budget), None, None))
}

/// `PATCH` (or `POST`) `/organization/update`: only the fields sent change. Budget fields
/// change the organization's budget (and so every holder that shares it); a `budget_id`
/// moves the organization to another budget.
pub(super) async fn update(store: &Store, req: AdminRequest<'_>) -> AdminResult {
    let (f, patch) = read(&req)?;
    let id = f
        .organization_id
        .clone()
        .ok_or(ApiError::MissingParam("organization_id"))?;
    let now = OffsetDateTime::now_utc();
    let mut org = existing(store, &id).await?;
    let budget_id = f.budget_id.clone();
    f.apply(&mut org)?;
    let (budget, changes_budget) = updated(
        store,
        budget_id.as_deref(),
        org.limits.budget_id.as_deref(),
        patch,
        now,
    )
    .await?;
    if let Some(b) = &budget {
        b.copy_into(&mut org.limits, now);
    }
    org.accounting.updated_at = now;
    store.update_organization(&org).await.map_err(store_error)?;
    if let Some(b) = budget.as_ref().filter(|_| changes_budget) {
        store.update_budget(b, now).await.map_err(store_error)?;
    }
    full_json(store, &org).await
}

#[derive(Deserialize)]
struct Delete {
    organization_ids: Vec<String>,
}

/// `DELETE` (or `POST`) `/organization/delete` with `organization_ids`: every one must exist,
/// or nothing is deleted. The answer lists them as they were. Their keys and teams stay, no
/// longer under an organization (LiteLLM deletes them; revoke keys with `/key/delete`).
pub(super) async fn delete(store: &Store, req: AdminRequest<'_>) -> AdminResult {
    let d: Delete = body(&req, &[&["organization_ids"]])?;
    let mut gone = Vec::with_capacity(d.organization_ids.len());
    for id in &d.organization_ids {
        let o = existing(store, id).await?;
        gone.push(full_json(store, &o).await?);
    }
    let now = OffsetDateTime::now_utc();
    for id in &d.organization_ids {
        store
            .delete_organization(id, now)
            .await
            .map_err(store_error)?;
    }
    Ok(Value::Array(gone))
}

/// `GET /organization/info?organization_id=`: one organization with its budget, members and
/// teams.
pub(super) async fn info(store: &Store, req: AdminRequest<'_>) -> AdminResult {
    let q = query_pairs(&req, &["organization_id"])?;
    let id = query_value(&q, "organization_id").ok_or(ApiError::MissingParam("organization_id"))?;
    let o = existing(store, id).await?;
    full_json(store, &o).await
}

#[derive(Deserialize)]
struct Several {
    organizations: Vec<String>,
}

/// `POST /organization/info` with `{"organizations": [ids]}` (LiteLLM's older spelling): those
/// that exist, each with its budget.
pub(super) async fn info_many(store: &Store, req: AdminRequest<'_>) -> AdminResult {
    let s: Several = body(&req, &[&["organizations"]])?;
    if s.organizations.is_empty() {
        return Err(ApiError::InvalidParam {
            param: "organizations",
            message: "name at least one organization id".into(),
        });
    }
    let mut out = Vec::with_capacity(s.organizations.len());
    for id in &s.organizations {
        if let Some(o) = store.organization(id).await.map_err(store_error)? {
            let budget = match &o.limits.budget_id {
                Some(b) => store.budget(b).await.map_err(store_error)?,
                None => None,
            };
            out.push(org_json(&o, budget.as_ref(), None, None));
        }
    }
    Ok(Value::Array(out))
}

/// `GET` (or `POST`, as older clients call it) `/organization/list`: every organization with
/// its budget, members and teams.
pub(super) async fn list(store: &Store, req: AdminRequest<'_>) -> AdminResult {
    query_pairs(&req, &[])?;
    body_object(&req, &[])?;
    let all = Page {
        offset: 0,
        limit: 100_000,
    };
    let orgs = store.list_organizations(all).await.map_err(store_error)?;
    let mut out = Vec::with_capacity(orgs.len());
    for o in &orgs {
        out.push(full_json(store, o).await?);
    }
    Ok(Value::Array(out))
}

/// One member as a request names them: by id or by email, with a role.
#[derive(Deserialize)]
struct Member {
    user_id: Option<String>,
    user_email: Option<String>,
    role: Option<String>,
}

/// LiteLLM's `member`: one member or a list.
#[derive(Deserialize)]
#[serde(untagged)]
enum Members {
    One(Member),
    Many(Vec<Member>),
}

fn role(name: &str) -> Result<OrgRole, ApiError> {
    name.parse().map_err(|()| ApiError::InvalidParam {
        param: "role",
        message: format!(
            "`{name}` is not an organization role (org_admin, internal_user, internal_user_viewer)"
        ),
    })
}

/// The user a member names: by id (made when new), else by email (made, with a generated id,
/// when no user has it). Returns the user and whether it was made.
async fn user_of(store: &Store, m: &Member, now: OffsetDateTime) -> Result<UserRow, ApiError> {
    let found = match (&m.user_id, &m.user_email) {
        (Some(id), _) => store.user(id).await.map_err(store_error)?,
        (None, Some(email)) => store.user_by_email(email).await.map_err(store_error)?,
        (None, None) => return Err(ApiError::MissingParam("user_id")),
    };
    if let Some(u) = found {
        return Ok(u);
    }
    let id = m
        .user_id
        .clone()
        .unwrap_or_else(|| sluice_core::random::uuid_v4().to_string());
    let mut u = UserRow::new(id, now);
    u.user_email = m.user_email.clone();
    u.user_role = m.role.clone();
    store.create_user(&u).await.map_err(store_error)?;
    Ok(u)
}

#[derive(Deserialize)]
struct MemberAdd {
    organization_id: String,
    member: Members,
    max_budget_in_organization: Option<f64>,
}

/// `POST /organization/member_add`: `member` is one `{user_id | user_email, role}` or a list;
/// users not known yet are made. Answers LiteLLM's `OrganizationAddMemberResponse`.
pub(super) async fn member_add(store: &Store, req: AdminRequest<'_>) -> AdminResult {
    let a: MemberAdd = body(
        &req,
        &[&["organization_id", "member", "max_budget_in_organization"]],
    )?;
    existing(store, &a.organization_id).await?;
    let members = match a.member {
        Members::One(m) => vec![m],
        Members::Many(ms) => ms,
    };
    let now = OffsetDateTime::now_utc();
    let mut users = Vec::with_capacity(members.len());
    let mut memberships = Vec::with_capacity(members.len());
    for m in &members {
        let r = role(m.role.as_deref().ok_or(ApiError::MissingParam("role"))?)?;
        let u = user_of(store, m, now).await?;
        let membership = OrgMember {
            organization_id: a.organization_id.clone(),
            user_id: u.user_id.clone(),
            role: r,
            max_budget_in_organization: a.max_budget_in_organization,
            created_at: now,
            updated_at: now,
        };
        store
            .set_organization_member(&membership)
            .await
            .map_err(store_error)?;
        users.push(json!({
            "user_id": u.user_id,
            "user_email": u.user_email,
            "user_role": u.user_role,
        }));
        memberships.push(member_json(&membership));
    }
    Ok(json!({
        "organization_id": a.organization_id,
        "updated_users": users,
        "updated_organization_memberships": memberships,
    }))
}

#[derive(Deserialize)]
struct MemberChange {
    organization_id: String,
    user_id: Option<String>,
    user_email: Option<String>,
    role: Option<String>,
    #[serde(default, deserialize_with = "set")]
    max_budget_in_organization: Option<Option<f64>>,
}

/// The membership a change names, by user id or email; 404 when there is none.
async fn membership(store: &Store, c: &MemberChange) -> Result<OrgMember, ApiError> {
    existing(store, &c.organization_id).await?;
    let user_id =
        super::fields::user_named(store, c.user_id.clone(), c.user_email.as_deref(), "user")
            .await?;
    store
        .organization_members(&c.organization_id)
        .await
        .map_err(store_error)?
        .into_iter()
        .find(|m| m.user_id == user_id)
        .ok_or(ApiError::NotFound {
            what: "organization member",
            id: user_id,
        })
}

const MEMBER_FIELDS: &[&str] = &[
    "organization_id",
    "user_id",
    "user_email",
    "role",
    "max_budget_in_organization",
];

/// `PATCH` (or `POST`) `/organization/member_update`: a member's role and
/// `max_budget_in_organization`.
pub(super) async fn member_update(store: &Store, req: AdminRequest<'_>) -> AdminResult {
    let c: MemberChange = body(&req, &[MEMBER_FIELDS])?;
    let mut m = membership(store, &c).await?;
    if let Some(r) = &c.role {
        m.role = role(r)?;
    }
    if let Some(b) = c.max_budget_in_organization {
        m.max_budget_in_organization = b;
    }
    m.updated_at = OffsetDateTime::now_utc();
    store
        .set_organization_member(&m)
        .await
        .map_err(store_error)?;
    Ok(member_json(&m))
}

/// `DELETE` (or `POST`) `/organization/member_delete`: removes a member (LiteLLM's request
/// carries a `team_id` too, which is not needed here and ignored).
pub(super) async fn member_delete(store: &Store, req: AdminRequest<'_>) -> AdminResult {
    let c: MemberChange = body(
        &req,
        &[&["organization_id", "user_id", "user_email", "team_id"]],
    )?;
    let m = membership(store, &c).await?;
    store
        .remove_organization_member(&m.organization_id, &m.user_id)
        .await
        .map_err(store_error)?;
    Ok(member_json(&m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_are_litellms_organization_roles() {
        assert_eq!(role("org_admin").unwrap(), OrgRole::Admin);
        assert_eq!(role("internal_user_viewer").unwrap(), OrgRole::Viewer);
        assert!(matches!(
            role("admin"),
            Err(ApiError::InvalidParam { param: "role", .. })
        ));
    }

    #[test]
    fn a_budget_id_with_budget_fields_is_refused() {
        let p: BudgetPatch = serde_json::from_value(json!({"max_budget": 1.0})).unwrap();
        assert!(either(Some("b"), &p).is_err());
        assert!(either(None, &p).is_ok());
        assert!(either(Some("b"), &BudgetPatch::default()).is_ok());
    }
}
