//! LiteLLM's keys, teams, users, organizations, budgets, end users and memberships as
//! sluice's rows. Pure functions of the rows read (and the few lookups a row points at), so
//! each mapping is tested without a database.

use std::collections::HashMap;

use serde_json::{Map, Value};
use time::OffsetDateTime;

use sluice_store::{
    Accounting, BudgetRow, EndUserRow, KeyHash, KeyRow, Limits, OrgMember, OrgRole,
    OrganizationRow, TagRow, TeamRole, TeamRow, UserRow,
};

use super::columns::{self, fingerprint, Columns};
use super::report::{Report, RowError};
use super::source::Row;

/// One object read from LiteLLM, as sluice will store it.
#[derive(Debug, Clone)]
pub struct Incoming<T> {
    /// Its id (LiteLLM's, kept).
    pub id: String,
    /// The row to write.
    pub row: T,
    /// LiteLLM's spend for it.
    pub spend: f64,
    /// What a re-run compares to know whether it changed.
    pub fingerprint: String,
}

/// A team's members: (user, role), each with its own id (team, then user).
pub type TeamMembers = Vec<Incoming<(String, TeamRole)>>;

/// What rows point at in other tables, read first.
#[derive(Debug, Default)]
pub struct Lookups {
    /// `LiteLLM_BudgetTable`, by id.
    pub budgets: HashMap<String, BudgetRow>,
    /// `LiteLLM_ObjectPermissionTable`, by id, already in sluice's `object_permission` form.
    pub permissions: HashMap<String, Value>,
    /// `LiteLLM_ModelTable.aliases` (a team's model aliases), by id.
    pub team_aliases: HashMap<String, Value>,
    /// MCP server ids to the names sluice's config gives them.
    pub mcp_names: HashMap<String, String>,
}

impl Lookups {
    /// `LiteLLM_ObjectPermissionTable` rows in sluice's `object_permission` form: MCP servers
    /// by the names they have in sluice's config (LiteLLM names them by id); the rest kept.
    pub fn permission(&self, row: &Row) -> Value {
        let mut out = Map::new();
        for (column, value) in row.fields() {
            if column == "object_permission_id" || columns::says_nothing(value) {
                continue;
            }
            let value = if column == "mcp_servers" {
                let names: Vec<Value> = value
                    .as_array()
                    .map(|ids| {
                        ids.iter()
                            .filter_map(Value::as_str)
                            .map(|id| self.mcp_names.get(id).map_or(id, String::as_str).into())
                            .collect()
                    })
                    .unwrap_or_default();
                Value::Array(names)
            } else {
                value.clone()
            };
            out.insert(column.clone(), value);
        }
        Value::Object(out)
    }
}

/// The limit columns every holder shares, the budget it names (its limits fill those the row
/// leaves unset, as sluice's budgets do), its object permission and its kept columns.
fn limits(
    r: &Row,
    spec: &Columns,
    lookups: &Lookups,
    report: &mut Report,
    now: OffsetDateTime,
) -> Result<Limits, RowError> {
    let mut metadata = r.object("metadata")?;
    let mut l = Limits {
        models: r.list("models")?,
        max_budget: r.float("max_budget")?,
        budget_duration: r.duration("budget_duration")?,
        budget_reset_at: r.time("budget_reset_at")?,
        rpm_limit: r.count("rpm_limit")?,
        tpm_limit: r.count("tpm_limit")?,
        max_parallel_requests: r.count("max_parallel_requests")?,
        metadata: Map::new(),
        budget_id: None,
    };
    if let Some(id) = r.text("budget_id")? {
        match lookups.budgets.get(&id) {
            Some(b) => {
                l.max_budget = l.max_budget.or(b.max_budget);
                l.rpm_limit = l.rpm_limit.or(b.rpm_limit);
                l.tpm_limit = l.tpm_limit.or(b.tpm_limit);
                l.max_parallel_requests = l.max_parallel_requests.or(b.max_parallel_requests);
                if l.budget_duration.is_none() {
                    l.budget_duration = b.budget_duration;
                    l.budget_reset_at = l.budget_reset_at.or(b.budget_reset_at);
                }
                l.budget_id = Some(id);
            }
            None => report.not_carried(
                r.table,
                &r.id,
                "budget_id",
                format!("budget `{id}` is not in LiteLLM_BudgetTable"),
            ),
        }
    }
    if let Some(id) = r.text("object_permission_id")? {
        match lookups.permissions.get(&id) {
            Some(p) if !columns::says_nothing(p) => {
                metadata.insert("object_permission".into(), p.clone());
            }
            Some(_) => {}
            None => report.not_carried(
                r.table,
                &r.id,
                "object_permission_id",
                format!("permission `{id}` is not in LiteLLM_ObjectPermissionTable"),
            ),
        }
    }
    spec.extras(r, &mut metadata, report);
    l.metadata = metadata;
    l.schedule(now);
    Ok(l)
}

fn accounting(r: &Row, now: OffsetDateTime) -> Result<(f64, Accounting), RowError> {
    let spend = r.float("spend")?.unwrap_or(0.0);
    Ok((
        spend,
        Accounting {
            spend,
            created_at: r.time("created_at")?.unwrap_or(now),
            updated_at: now,
        },
    ))
}

/// The lookups a row's limits read, for its fingerprint (a budget or permission edited in
/// LiteLLM changes the rows that name it).
fn context(r: &Row, lookups: &Lookups) -> Vec<Value> {
    let mut out = Vec::new();
    if let Ok(Some(b)) = r.text("budget_id") {
        if let Some(b) = lookups.budgets.get(&b) {
            out.push(budget_digest(b));
        }
    }
    if let Ok(Some(p)) = r.text("object_permission_id") {
        out.extend(lookups.permissions.get(&p).cloned());
    }
    out
}

/// A budget's limits as fingerprint context: not its times, which the import itself sets.
fn budget_digest(b: &BudgetRow) -> Value {
    Value::String(format!(
        "{:?}",
        (
            b.max_budget,
            b.soft_budget,
            b.max_parallel_requests,
            b.tpm_limit,
            b.rpm_limit,
            b.budget_duration,
        )
    ))
}

fn incoming<T>(r: &Row, row: T, spend: f64, lookups: &Lookups, extra: &[&Value]) -> Incoming<T> {
    let ctx = context(r, lookups);
    let all: Vec<&Value> = ctx.iter().chain(extra.iter().copied()).collect();
    Incoming {
        id: r.id.clone(),
        row,
        spend,
        fingerprint: fingerprint(r, &all),
    }
}

/// A `LiteLLM_VerificationToken` row: its `token` is already the SHA-256 of the key, so the
/// key itself keeps working.
pub fn key(
    r: &Row,
    lookups: &Lookups,
    report: &mut Report,
    now: OffsetDateTime,
) -> Result<Incoming<KeyRow>, RowError> {
    let token = KeyHash::from_hex(&r.id).ok_or_else(|| {
        r.error(
            "token",
            "not a SHA-256 hex digest (LiteLLM stores every key hashed)",
        )
    })?;
    let limits = limits(r, &columns::KEY, lookups, report, now)?;
    let (spend, accounting) = accounting(r, now)?;
    let row = KeyRow {
        key_name: r
            .text("key_name")?
            .unwrap_or_else(|| format!("sk-...{}", &token.as_str()[..4])),
        token,
        key_alias: r.text("key_alias")?,
        expires: r.time("expires")?,
        user_id: r.text("user_id")?,
        team_id: r.text("team_id")?,
        organization_id: r.text("organization_id")?,
        blocked: r.flag("blocked")?,
        limits,
        accounting,
    };
    Ok(incoming(r, row, spend, lookups, &[]))
}

/// A `LiteLLM_TeamTable` row, and its members (`members_with_roles`).
pub fn team(
    r: &Row,
    lookups: &Lookups,
    report: &mut Report,
    now: OffsetDateTime,
) -> Result<(Incoming<TeamRow>, TeamMembers), RowError> {
    let mut limits = limits(r, &columns::TEAM, lookups, report, now)?;
    let aliases = match r.get("model_id") {
        Some(id) => {
            let id = id.as_str().map_or_else(|| id.to_string(), str::to_owned);
            match lookups.team_aliases.get(&id) {
                Some(a) => Some(a.clone()),
                None => {
                    report.not_carried(
                        r.table,
                        &r.id,
                        "model_id",
                        format!("model aliases `{id}` are not in LiteLLM_ModelTable"),
                    );
                    None
                }
            }
        }
        None => None,
    };
    if let Some(a) = aliases.as_ref().filter(|a| !columns::says_nothing(a)) {
        limits
            .metadata
            .entry("model_aliases")
            .or_insert_with(|| a.clone());
    }
    let (spend, accounting) = accounting(r, now)?;
    let row = TeamRow {
        team_id: r.id.clone(),
        team_alias: r.text("team_alias")?,
        blocked: r.flag("blocked")?,
        organization_id: r.text("organization_id")?,
        limits,
        accounting,
    };
    let mut members = Vec::new();
    let listed = match r.get("members_with_roles") {
        None => Vec::new(),
        Some(Value::Array(m)) => m.clone(),
        Some(Value::Object(o)) if o.is_empty() => Vec::new(),
        Some(v) => {
            return Err(r.error(
                "members_with_roles",
                format!("expected a list of members, found {v}"),
            ))
        }
    };
    for m in &listed {
        let Some(user) = m
            .get("user_id")
            .and_then(Value::as_str)
            .filter(|u| !u.is_empty())
        else {
            report.not_carried(
                r.table,
                &r.id,
                "members_with_roles",
                format!("a member with no user_id ({m}): sluice's members are users"),
            );
            continue;
        };
        let role = m.get("role").and_then(Value::as_str).unwrap_or("user");
        let Ok(role) = role.parse::<TeamRole>() else {
            report.not_carried(
                r.table,
                &r.id,
                "members_with_roles",
                format!(
                    "member `{user}` has role `{role}`; sluice's team roles are admin and user"
                ),
            );
            continue;
        };
        members.push(Incoming {
            id: format!("{}\u{1f}{user}", r.id),
            row: (user.to_owned(), role),
            spend: 0.0,
            fingerprint: role.name().to_owned(),
        });
    }
    let extra = aliases.unwrap_or(Value::Null);
    Ok((incoming(r, row, spend, lookups, &[&extra]), members))
}

/// A `LiteLLM_UserTable` row.
pub fn user(
    r: &Row,
    lookups: &Lookups,
    report: &mut Report,
    now: OffsetDateTime,
) -> Result<Incoming<UserRow>, RowError> {
    let limits = limits(r, &columns::USER, lookups, report, now)?;
    let (spend, accounting) = accounting(r, now)?;
    let row = UserRow {
        user_id: r.id.clone(),
        user_alias: r.text("user_alias")?,
        user_email: r.text("user_email")?,
        user_role: r.text("user_role")?,
        team_id: r.text("team_id")?,
        password_hash: None,
        limits,
        accounting,
    };
    Ok(incoming(r, row, spend, lookups, &[]))
}

/// A `LiteLLM_BudgetTable` row.
pub fn budget(
    r: &Row,
    report: &mut Report,
    now: OffsetDateTime,
) -> Result<Incoming<BudgetRow>, RowError> {
    let mut ignored = Map::new();
    columns::BUDGET.extras(r, &mut ignored, report);
    let model_max_budget = r.object("model_max_budget")?;
    let mut b = BudgetRow {
        budget_id: r.id.clone(),
        max_budget: r.float("max_budget")?,
        soft_budget: r.float("soft_budget")?,
        max_parallel_requests: r.count("max_parallel_requests")?,
        tpm_limit: r.count("tpm_limit")?,
        rpm_limit: r.count("rpm_limit")?,
        budget_duration: r.duration("budget_duration")?,
        budget_reset_at: r.time("budget_reset_at")?,
        model_max_budget: (!model_max_budget.is_empty()).then_some(model_max_budget),
        created_at: r.time("created_at")?.unwrap_or(now),
        updated_at: now,
    };
    b.schedule(now);
    Ok(Incoming {
        id: r.id.clone(),
        fingerprint: fingerprint(r, &[]),
        row: b,
        spend: 0.0,
    })
}

/// A `LiteLLM_OrganizationTable` row: its limits are its budget's.
pub fn organization(
    r: &Row,
    lookups: &Lookups,
    report: &mut Report,
    now: OffsetDateTime,
) -> Result<Incoming<OrganizationRow>, RowError> {
    let limits = limits(r, &columns::ORGANIZATION, lookups, report, now)?;
    let (spend, accounting) = accounting(r, now)?;
    let row = OrganizationRow {
        organization_id: r.id.clone(),
        organization_alias: r.text("organization_alias")?,
        limits,
        accounting,
    };
    Ok(incoming(r, row, spend, lookups, &[]))
}

/// A `LiteLLM_TagTable` row: its limits are its budget's, and the budget's soft budget goes
/// where `/tag/new` keeps it (its metadata, for the budget alerts).
pub fn tag(
    r: &Row,
    lookups: &Lookups,
    report: &mut Report,
    now: OffsetDateTime,
) -> Result<Incoming<TagRow>, RowError> {
    let limits = limits(r, &columns::TAG, lookups, report, now)?;
    let soft = limits
        .budget_id
        .as_ref()
        .and_then(|b| lookups.budgets.get(b))
        .and_then(|b| b.soft_budget);
    let (spend, accounting) = accounting(r, now)?;
    let mut row = TagRow {
        tag_name: r.id.clone(),
        description: r.text("description")?,
        model_info: r.object("model_info")?,
        created_by: r.text("created_by")?,
        limits,
        accounting,
    };
    row.set_soft_budget(soft);
    Ok(incoming(r, row, spend, lookups, &[]))
}

/// A `LiteLLM_OrganizationMembership` row (its id: organization, then user).
pub fn org_member(
    r: &Row,
    lookups: &Lookups,
    report: &mut Report,
    now: OffsetDateTime,
) -> Result<Incoming<OrgMember>, RowError> {
    let mut ignored = Map::new();
    columns::ORG_MEMBER.extras(r, &mut ignored, report);
    let user_id = r
        .text("user_id")?
        .ok_or_else(|| r.error("user_id", "missing"))?;
    let organization_id = r
        .text("organization_id")?
        .ok_or_else(|| r.error("organization_id", "missing"))?;
    let role = r
        .text("user_role")?
        .unwrap_or_else(|| "internal_user".into());
    let role: OrgRole = role.parse().map_err(|()| {
        r.error("user_role", format!("`{role}`: sluice's organization roles are org_admin, internal_user and internal_user_viewer"))
    })?;
    let budget = r.text("budget_id")?.and_then(|b| lookups.budgets.get(&b));
    let created_at = r.time("created_at")?.unwrap_or(now);
    let member = OrgMember {
        organization_id: organization_id.clone(),
        user_id: user_id.clone(),
        role,
        max_budget_in_organization: budget.and_then(|b| b.max_budget),
        created_at,
        updated_at: now,
    };
    Ok(Incoming {
        id: format!("{organization_id}\u{1f}{user_id}"),
        fingerprint: fingerprint(r, &[&budget.map_or(Value::Null, budget_digest)]),
        row: member,
        spend: 0.0,
    })
}

/// A `LiteLLM_EndUserTable` row: its limits are its budget's.
pub fn end_user(
    r: &Row,
    lookups: &Lookups,
    report: &mut Report,
    now: OffsetDateTime,
) -> Result<Incoming<EndUserRow>, RowError> {
    let limits = limits(r, &columns::END_USER, lookups, report, now)?;
    let spend = r.float("spend")?.unwrap_or(0.0);
    let row = EndUserRow {
        user_id: r.id.clone(),
        alias: r.text("alias")?,
        blocked: r.flag("blocked")?,
        limits,
        accounting: Accounting {
            spend,
            created_at: now,
            updated_at: now,
        },
    };
    Ok(incoming(r, row, spend, lookups, &[]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn now() -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(1_780_000_000).unwrap()
    }

    #[test]
    fn a_key_keeps_its_hash_limits_budget_and_kept_fields() {
        let hash = KeyHash::of("sk-litellm-key");
        let mut lookups = Lookups::default();
        let mut b = BudgetRow::new("b1".into(), now());
        b.rpm_limit = Some(7);
        b.max_budget = Some(99.0);
        lookups.budgets.insert("b1".into(), b);
        let r = Row::from_json(
            "LiteLLM_VerificationToken",
            hash.as_str(),
            json!({
                "token": hash.as_str(), "key_name": "sk-...-key", "key_alias": "ci",
                "spend": 9.5, "max_budget": 10.0, "budget_duration": "30d",
                "budget_reset_at": "2026-12-01T00:00:00", "models": ["gpt-4o"],
                "blocked": null, "expires": "2027-01-01T00:00:00", "team_id": "t1",
                "metadata": {"tags": ["x"]}, "aliases": {"fast": "gpt-4o"}, "budget_id": "b1",
                "model_spend": {"gpt-4o": 9.5}, "created_at": "2026-01-01T00:00:00",
                "password": "not a key column"
            }),
        );
        let mut report = Report::new(false);
        let k = key(&r, &lookups, &mut report, now()).unwrap();
        assert_eq!(k.row.token, hash);
        assert_eq!(k.spend, 9.5);
        assert_eq!(k.row.accounting.spend, 9.5);
        assert_eq!(
            k.row.limits.max_budget,
            Some(10.0),
            "the key's own budget wins"
        );
        assert_eq!(
            k.row.limits.rpm_limit,
            Some(7),
            "the budget fills what the key leaves unset"
        );
        assert_eq!(k.row.limits.budget_id.as_deref(), Some("b1"));
        assert_eq!(k.row.limits.metadata["aliases"], json!({"fast": "gpt-4o"}));
        assert_eq!(k.row.limits.metadata["tags"], json!(["x"]));
        assert_eq!(k.row.limits.budget_reset_at.unwrap().year(), 2026);
        assert!(!k.row.blocked);
        assert_eq!(k.row.team_id.as_deref(), Some("t1"));
        assert_eq!(k.row.accounting.created_at.year(), 2026);
        assert_eq!(report.not_carried.len(), 1, "{:?}", report.not_carried);
        assert_eq!(report.not_carried[0].field, "password");
    }

    #[test]
    fn a_bad_value_names_its_column_and_a_bad_hash_is_refused() {
        let mut report = Report::new(false);
        let r = Row::from_json(
            "LiteLLM_VerificationToken",
            "nothex",
            json!({"token": "nothex"}),
        );
        assert_eq!(
            key(&r, &Lookups::default(), &mut report, now())
                .unwrap_err()
                .column,
            "token"
        );
        let hash = KeyHash::of("k");
        let r = Row::from_json(
            "LiteLLM_VerificationToken",
            hash.as_str(),
            json!({"budget_duration": "soon"}),
        );
        let e = key(&r, &Lookups::default(), &mut report, now()).unwrap_err();
        assert_eq!(
            (e.table, e.column.as_str()),
            ("LiteLLM_VerificationToken", "budget_duration")
        );
    }

    #[test]
    fn team_members_and_aliases_come_along() {
        let mut lookups = Lookups::default();
        lookups
            .team_aliases
            .insert("3".into(), json!({"fast": "gpt-4o-mini"}));
        let r = Row::from_json(
            "LiteLLM_TeamTable",
            "t1",
            json!({"team_id": "t1", "blocked": true, "model_id": 3, "spend": 4.0,
                   "members_with_roles": [{"user_id": "u1", "role": "admin"},
                                          {"user_id": "u2", "role": "user", "user_email": null},
                                          {"user_email": "x@y", "role": "user"}]}),
        );
        let mut report = Report::new(false);
        let (t, members) = team(&r, &lookups, &mut report, now()).unwrap();
        assert!(t.row.blocked);
        assert_eq!(
            t.row.limits.metadata["model_aliases"],
            json!({"fast": "gpt-4o-mini"})
        );
        let m: Vec<(&str, TeamRole)> = members
            .iter()
            .map(|m| (m.row.0.as_str(), m.row.1))
            .collect();
        assert_eq!(m, [("u1", TeamRole::Admin), ("u2", TeamRole::User)]);
        assert_eq!(report.not_carried.len(), 1, "the member without a user id");
    }

    #[test]
    fn an_end_user_and_an_organization_take_their_budgets() {
        let mut lookups = Lookups::default();
        let mut b = BudgetRow::new("b".into(), now());
        b.max_budget = Some(3.0);
        b.budget_duration = Some("1d".parse().unwrap());
        lookups.budgets.insert("b".into(), b);
        let mut report = Report::new(false);
        let r = Row::from_json(
            "LiteLLM_EndUserTable",
            "cust",
            json!({"user_id": "cust", "budget_id": "b", "spend": 1.0, "allowed_model_region": "eu", "default_model": "m"}),
        );
        let e = end_user(&r, &lookups, &mut report, now()).unwrap();
        assert_eq!(e.row.limits.max_budget, Some(3.0));
        assert!(e.row.limits.budget_reset_at.is_some(), "a window starts");
        assert_eq!(e.row.limits.metadata["allowed_model_region"], "eu");
        assert_eq!(
            report.not_enforced.len(),
            1,
            "default_model is kept, not acted on"
        );
        let r = Row::from_json(
            "LiteLLM_OrganizationTable",
            "o",
            json!({"organization_id": "o", "budget_id": "b", "models": ["m"]}),
        );
        let o = organization(&r, &lookups, &mut report, now()).unwrap();
        assert_eq!(o.row.limits.max_budget, Some(3.0));
        assert_eq!(o.row.limits.models, ["m"]);
    }

    #[test]
    fn fingerprints_follow_the_budget_a_row_names() {
        let mut lookups = Lookups::default();
        lookups
            .budgets
            .insert("b".into(), BudgetRow::new("b".into(), now()));
        let hash = KeyHash::of("k");
        let r = Row::from_json(
            "LiteLLM_VerificationToken",
            hash.as_str(),
            json!({"budget_id": "b"}),
        );
        let mut report = Report::new(false);
        let before = key(&r, &lookups, &mut report, now()).unwrap().fingerprint;
        if let Some(b) = lookups.budgets.get_mut("b") {
            b.max_budget = Some(1.0);
        }
        assert_ne!(
            key(&r, &lookups, &mut report, now()).unwrap().fingerprint,
            before
        );
    }
}
