//! Teams and users (admins only): lists from `/team/list` and `/user/list`, forms that make
//! them through `/team/new` and `/user/new` (a user's password and role for console sign-in),
//! and an edit page each that changes (`/team/update`, `/user/update`) or deletes
//! (`/team/delete`, `/user/delete`) one. A team's members and a user's teams are read from
//! the same memberships, so the two pages agree whichever side made the change.

use std::collections::BTreeMap;

use http::Response;
use maud::{html, Markup};
use serde_json::{Map, Value};

use super::fields::{
    self, count, email, field, password, pick, required, text, usd as usd_field, Choice, Draft,
    Reader,
};
use super::keys::name;
use super::names::{Names, Wanted};
use super::{
    change, figure, not_found, or_empty, pickers, query, read, refused_by, removal, status_select,
    store, submit, usd, Refused,
};
use crate::console::flash::Flash;
use crate::console::layout::{csrf_field, redirect, redirect_with};
use crate::console::{Form, Role, Viewer};
use crate::http::ResponseBody;
use crate::server::{AppState, Snapshot};
use sluice_core::error::ApiError;

/// The roles a user can be given here.
const ROLES: [Role; 4] = [
    Role::InternalUser,
    Role::InternalUserViewer,
    Role::ProxyAdminViewer,
    Role::ProxyAdmin,
];

/// The roles as select choices.
fn roles() -> Vec<Choice> {
    ROLES
        .iter()
        .map(|r| (r.name().to_owned(), r.name().to_owned()))
        .collect()
}

/// `POST /ui/teams/new` and `/ui/users/new`: the form's fields as the management API's body;
/// then back to the list, which says what was made.
pub(super) async fn create(
    state: &AppState,
    viewer: &Viewer,
    sub: &str,
    form: &Form,
) -> Result<Response<ResponseBody>, Refused> {
    let mut r = Reader::new(form);
    let mut body = Map::new();
    let (path, named_by, back) = if sub == "/teams/new" {
        for f in ["team_id", "team_alias"] {
            if let Some(v) = r.filled(f) {
                body.insert(f.into(), v.into());
            }
        }
        let models = r.models("models");
        if !models.is_empty() {
            body.insert("models".into(), models.into());
        }
        ("/team/new", "team_id", "/ui/teams")
    } else {
        r.required("user_id");
        for f in ["user_id", "user_email", "user_role", "team_id"] {
            if let Some(v) = r.filled(f) {
                body.insert(f.into(), v.into());
            }
        }
        if let Some(p) = r.password("password") {
            body.insert("password".into(), p.into());
        }
        body.insert("auto_create_key".into(), false.into());
        ("/user/new", "user_id", "/ui/users")
    };
    let limits = [
        ("max_budget", r.usd("max_budget")),
        ("rpm_limit", r.count("rpm_limit")),
        ("tpm_limit", r.count("tpm_limit")),
    ];
    fields::given(&mut body, limits);
    r.finish()?;
    let made = change(state, &viewer.session.user, path, &Value::Object(body))
        .await
        .map_err(refused_by(named_by))?;
    let id = made[named_by].as_str().unwrap_or_default();
    let what = if path == "/team/new" { "Team" } else { "User" };
    Ok(redirect_with(
        back,
        Flash::notice(format!("{what} {id} created.")),
    ))
}

/// `GET /ui/teams`.
pub(super) async fn teams(
    state: &AppState,
    snap: &Snapshot,
    viewer: &Viewer,
    draft: &Draft<'_>,
) -> Result<Markup, ApiError> {
    let teams = crate::admin::teams::list(store(state)?, read("page_size=1000")).await?;
    let d = &draft.for_form("/teams/new");
    let offered = pickers::models(snap);
    Ok(html! {
        @if teams.is_empty() {
            p.muted #empty { "No teams yet. A team shares one budget and rate limit among its keys, and its admins manage its keys and members: make one below, then add members on its page." }
        } @else {
            table #teams {
                thead { tr { th { "Team" } th { "Alias" } th.num { "Members" } th { "Models" } th.num { "Spend" } th.num { "Budget" } th.num { "RPM" } th { "Status" } } }
                tbody {
                    @for t in &teams {
                        tr {
                            td { a href={ "/ui/teams/edit?" (query(&[("team_id", &t.team_id)])) } { (name(&t.team_id)) } }
                            td { (name(or_empty(&t.team_alias))) }
                            td.num { (t.members_with_roles.as_ref().map_or(0, Vec::len)) }
                            td { @if t.models.is_empty() { "all" } @else { (t.models.join(", ")) } }
                            td.num { (usd(t.accounting.spend)) }
                            td.num { (t.limits.max_budget.map(usd).unwrap_or_default()) }
                            td.num { (figure(t.limits.rpm_limit)) }
                            td { @if t.blocked { span.error { "blocked" } } @else { "active" } }
                        }
                    }
                }
            }
        }
        @if viewer.session.role.may_change() {
            h2 #new { "New team" }
            form.stack method="post" action="/ui/teams/new" {
                (d.summary())
                (csrf_field(&viewer.csrf))
                (text(d, field("team_id", "Team id").hint("generated when empty"), ""))
                (text(d, field("team_alias", "Alias"), ""))
                (fields::models(d, field("models", "Models"), &offered, &[]))
                (usd_field(d, field("max_budget", "Budget (USD)").hint("no budget"), ""))
                (count(d, field("rpm_limit", "Requests per minute").hint("no limit"), ""))
                (count(d, field("tpm_limit", "Tokens per minute").hint("no limit"), ""))
                button type="submit" { "Create team" }
            }
        }
    })
}

/// Every user's teams (each with whether they are its admin), from the memberships the team
/// pages read too.
async fn teams_of_users(
    state: &AppState,
) -> Result<BTreeMap<String, Vec<(String, bool)>>, ApiError> {
    let all = store(state)?
        .all_team_members()
        .await
        .map_err(|_| ApiError::StoreUnavailable)?;
    let mut by_user: BTreeMap<String, Vec<(String, bool)>> = BTreeMap::new();
    for m in all {
        let admin = m.role == sluice_store::TeamRole::Admin;
        by_user
            .entry(m.user_id)
            .or_default()
            .push((m.team_id, admin));
    }
    Ok(by_user)
}

/// `GET /ui/users`.
pub(super) async fn users(
    state: &AppState,
    viewer: &Viewer,
    draft: &Draft<'_>,
) -> Result<Markup, ApiError> {
    let list = crate::admin::users::list(store(state)?, read("page_size=1000")).await?;
    let memberships = teams_of_users(state).await?;
    let mut wanted = Wanted::default();
    for (team, _) in memberships.values().flatten() {
        wanted.team(team);
    }
    let names = Names::of(state, &wanted).await;
    let teams = pickers::teams(state).await?;
    let d = &draft.for_form("/users/new");
    Ok(html! {
        @if list.users.is_empty() {
            p.muted #empty { "No users yet. Make one below with a role and a console password, and they can sign in here; or add members on a team's page." }
        } @else {
            table #users {
                thead { tr { th { "User" } th { "Email" } th { "Role" } th { "Teams" } th.num { "Spend" } th.num { "Budget" } } }
                tbody {
                    @for u in &list.users {
                        tr {
                            td { a href={ "/ui/users/edit?" (query(&[("user_id", &u.user_id)])) } { (name(&u.user_id)) } }
                            td { (name(or_empty(&u.user_email))) }
                            td { (or_empty(&u.user_role)) }
                            td {
                                @for (i, (team, admin)) in memberships.get(&u.user_id).into_iter().flatten().enumerate() {
                                    @if i > 0 { ", " }
                                    (names.team_link(team, viewer))
                                    @if *admin { " (admin)" }
                                }
                            }
                            td.num { (usd(u.accounting.spend)) }
                            td.num { (u.limits.max_budget.map(usd).unwrap_or_default()) }
                        }
                    }
                }
            }
        }
        @if viewer.session.role.may_change() {
            h2 #new { "New user" }
            form.stack method="post" action="/ui/users/new" {
                (d.summary())
                (csrf_field(&viewer.csrf))
                (required(d, field("user_id", "User id"), ""))
                (email(d, field("user_email", "Email"), ""))
                (pick(d, field("user_role", "Role"), &roles(), Role::InternalUser.name(), None))
                (pick(d, field("team_id", "Team"), &teams, "", Some("none")))
                (password(d, field("password", "Console password").hint("8 characters or more; empty: no sign-in")))
                (usd_field(d, field("max_budget", "Budget (USD)").hint("no budget"), ""))
                button type="submit" { "Create user" }
            }
        }
    })
}

/// `GET /ui/teams/edit?team_id=`: the team's members, its fields to change, and its deletion.
pub(super) async fn team_edit(
    state: &AppState,
    snap: &Snapshot,
    viewer: &Viewer,
    q: &Form,
    draft: &Draft<'_>,
) -> Result<Markup, ApiError> {
    let id = q
        .filled("team_id")
        .ok_or(ApiError::MissingParam("team_id"))?;
    let q = query(&[("team_id", id)]);
    let info = crate::admin::teams::info(store(state)?, read(&q)).await?;
    let t = &info.team_info;
    let keys = info.keys.len();
    let members = t.members_with_roles.as_deref().unwrap_or_default();
    let manages = viewer.manages_team(id) && viewer.session.role.may_change();
    let admin = viewer.session.role.sees_all() && viewer.session.role.may_change();
    // Users who could join: every user for a proxy admin (a team admin types a new one's id).
    let candidates: Vec<Choice> = if admin {
        pickers::users(state)
            .await?
            .into_iter()
            .filter(|(u, _)| !members.iter().any(|m| m.user_id == *u))
            .collect()
    } else {
        Vec::new()
    };
    let mut wanted = Wanted::default();
    for m in members {
        wanted.user(&m.user_id);
    }
    let names = Names::of(state, &wanted).await;
    let add = &draft.for_form("/teams/members/add");
    let settings = &draft.for_form("/teams/update");
    let offered = pickers::models(snap);
    Ok(html! {
        p #about { span.mono { (id) } @if let Some(a) = &t.team_alias { " (" (a) ")" }
            " · spend " (usd(t.accounting.spend)) " · " (keys) " keys" }
        h2 { "Members" }
        @if members.is_empty() {
            p.muted #no-members { "No members yet."
                @if manages { " Add one below: a user who does not exist yet is made, an internal user of this team." } }
        } @else {
            table #members {
                thead { tr { th { "User" } th { "Role in the team" } @if manages { th { "" } } } }
                tbody {
                    @for m in members {
                        @let user = &m.user_id;
                        @let role = &m.role;
                        tr {
                            td { (names.user_link(user, viewer)) }
                            td { (role) }
                            @if manages {
                                td {
                                    form.inline method="post" action="/ui/teams/members/role" {
                                        (csrf_field(&viewer.csrf))
                                        input type="hidden" name="team_id" value=(id);
                                        input type="hidden" name="user_id" value=(user);
                                        input type="hidden" name="role" value=(if role == "admin" { "user" } else { "admin" });
                                        button.quiet type="submit" { @if role == "admin" { "make member" } @else { "make admin" } }
                                    }
                                    form.inline method="post" action="/ui/teams/members/remove" {
                                        (csrf_field(&viewer.csrf))
                                        input type="hidden" name="team_id" value=(id);
                                        input type="hidden" name="user_id" value=(user);
                                        button.danger type="submit" { "remove" }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        @if manages {
            form.stack #add-member method="post" action="/ui/teams/members/add" {
                (add.summary())
                (csrf_field(&viewer.csrf))
                input type="hidden" name="team_id" value=(id);
                @if admin {
                    (pick(add, field("member_user_id", "Add a user"), &candidates, "", Some("a new user (type the id below)")))
                }
                (text(add, field("new_user_id", if admin { "or a new user's id" } else { "Add a member (user id; a new one is made)" }), ""))
                (pick(add, field("role", "Role in the team"), &[
                    ("user".to_owned(), "user: their own keys, the team's usage".to_owned()),
                    ("admin".to_owned(), "admin: the team's keys and members".to_owned()),
                ], "user", None))
                button type="submit" { "Add member" }
            }
        }
        @if admin {
            h2 { "Settings" }
            form.stack method="post" action="/ui/teams/update" {
                (settings.summary())
                (csrf_field(&viewer.csrf))
                input type="hidden" name="team_id" value=(id);
                (text(settings, field("team_alias", "Alias"), or_empty(&t.team_alias)))
                (fields::models(settings, field("models", "Models"), &offered, &t.models))
                (usd_field(settings, field("max_budget", "Budget (USD)").hint("no budget"), &figure(t.limits.max_budget)))
                (count(settings, field("rpm_limit", "Requests per minute").hint("no limit"), &figure(t.limits.rpm_limit)))
                (count(settings, field("tpm_limit", "Tokens per minute").hint("no limit"), &figure(t.limits.tpm_limit)))
                (status_select(settings, t.blocked, "its keys are"))
                button type="submit" { "Save team" }
            }
            (removal(viewer, "Delete", "/ui/teams/delete", ("team_id", id), "delete-team", "Delete team"))
        }
    })
}

/// `GET /ui/users/edit?user_id=`: the user's fields to change (a new console password too),
/// their teams, and their deletion.
pub(super) async fn user_edit(
    state: &AppState,
    viewer: &Viewer,
    q: &Form,
    draft: &Draft<'_>,
) -> Result<Markup, ApiError> {
    let id = q
        .filled("user_id")
        .ok_or(ApiError::MissingParam("user_id"))?;
    let q = query(&[("user_id", id)]);
    let info = crate::admin::users::info(store(state)?, read(&q)).await?;
    let u = &info.user_info;
    let teams = pickers::teams(state).await?;
    let d = &draft.for_form("/users/update");
    Ok(html! {
        p #about { span.mono { (id) } " · spend " (usd(u.accounting.spend))
            " · teams: "
            @if info.teams.is_empty() { "none" }
            @for (i, t) in info.teams.iter().enumerate() {
                @if i > 0 { ", " }
                a href={ "/ui/teams/edit?" (query(&[("team_id", &t.team.team_id)])) } { (t.team.team_id) }
                @if let Some(m) = t.team_memberships.first().filter(|m| m.role == "admin") { " (" (m.role) ")" }
            }
        }
        @if viewer.session.role.may_change() {
            form.stack method="post" action="/ui/users/update" {
                (d.summary())
                (csrf_field(&viewer.csrf))
                input type="hidden" name="user_id" value=(id);
                (email(d, field("user_email", "Email"), or_empty(&u.user_email)))
                (pick(d, field("user_role", "Role"), &roles(), or_empty(&u.user_role), None))
                (pick(d, field("team_id", "Team"), &teams, or_empty(&u.team_id), Some("none")))
                (usd_field(d, field("max_budget", "Budget (USD)").hint("no budget"), &figure(u.limits.max_budget)))
                (password(d, field("password", "New console password").hint("empty: unchanged")))
                label.wide { input name="no_password" type="checkbox" value="1" checked[d.checked("no_password", false)]; " Remove the console password" }
                button type="submit" { "Save user" }
            }
            (removal(viewer, "Delete", "/ui/users/delete", ("user_id", id), "delete-user", "Delete user"))
        }
    })
}

/// `POST /ui/teams/members/add|remove|role`, for a proxy admin or the team's admin: through
/// `/team/member_add`, `/team/member_delete`, `/team/member_update`; then back to the team.
pub(super) async fn members(
    state: &AppState,
    viewer: &Viewer,
    sub: &str,
    form: &Form,
) -> Result<Response<ResponseBody>, Refused> {
    let team = form
        .filled("team_id")
        .ok_or(ApiError::MissingParam("team_id"))?;
    if !viewer.manages_team(team) {
        return Err(ApiError::NotFound {
            what: "team",
            id: team.chars().take(128).collect(),
        }
        .into());
    }
    let role = form.filled("role").unwrap_or("user");
    let back = format!("/ui/teams/edit?{}", query(&[("team_id", team)]));
    if sub == "/teams/members/add" {
        let mut r = Reader::new(form);
        let user = r
            .filled("new_user_id")
            .or(r.filled("member_user_id"))
            .or(r.filled("user_id"));
        if user.is_none() {
            r.problem("new_user_id", "pick a user or type a new one's id");
        }
        r.finish()?;
        let user = user.unwrap_or_default();
        let body = serde_json::json!({"team_id": team, "member": {"user_id": user, "role": role}});
        change(state, &viewer.session.user, "/team/member_add", &body)
            .await
            .map_err(|e| match e {
                ApiError::InvalidParam { message, .. } => {
                    Refused::Form(single("new_user_id", message))
                }
                other => Refused::Form(fields::Problems::from_api(&other, "new_user_id")),
            })?;
        return Ok(redirect_with(
            &back,
            Flash::notice(format!("{user} added to the team as {role}.")),
        ));
    }
    let user = form
        .filled("user_id")
        .ok_or(ApiError::MissingParam("user_id"))?;
    let (path, body) = match sub {
        "/teams/members/role" => (
            "/team/member_update",
            serde_json::json!({"team_id": team, "user_id": user, "role": role}),
        ),
        _ => (
            "/team/member_delete",
            serde_json::json!({"team_id": team, "user_id": user}),
        ),
    };
    change(state, &viewer.session.user, path, &body).await?;
    Ok(redirect(&back))
}

/// One problem with one field.
fn single(field: &str, message: String) -> fields::Problems {
    let mut p = fields::Problems::default();
    p.add(field, message);
    p
}

/// `POST /ui/teams/update|delete` and `/ui/users/update|delete`: the form as the management
/// API's body; then back to the list, which says what was done.
pub(super) async fn edit(
    state: &AppState,
    viewer: &Viewer,
    sub: &str,
    form: &Form,
) -> Result<Response<ResponseBody>, Refused> {
    let mut r = Reader::new(form);
    let mut body = Map::new();
    let (path, back, done): (&str, &'static str, &str) = match sub {
        "/teams/update" => {
            let id = form
                .filled("team_id")
                .ok_or(ApiError::MissingParam("team_id"))?;
            body.insert("team_id".into(), id.into());
            body.insert("team_alias".into(), r.text_or_null("team_alias"));
            body.insert("models".into(), r.models("models").into());
            body.insert("max_budget".into(), r.usd("max_budget"));
            for f in ["rpm_limit", "tpm_limit"] {
                body.insert(f.into(), r.count(f));
            }
            body.insert(
                "blocked".into(),
                (form.get("blocked") == Some("true")).into(),
            );
            ("/team/update", "/ui/teams", "Team saved.")
        }
        "/teams/delete" => {
            let id = form
                .filled("team_id")
                .ok_or(ApiError::MissingParam("team_id"))?;
            body.insert("team_ids".into(), vec![Value::from(id)].into());
            ("/team/delete", "/ui/teams", "Team deleted.")
        }
        "/users/update" => {
            let id = form
                .filled("user_id")
                .ok_or(ApiError::MissingParam("user_id"))?;
            body.insert("user_id".into(), id.into());
            for f in ["user_email", "user_role", "team_id"] {
                body.insert(f.into(), r.text_or_null(f));
            }
            body.insert("max_budget".into(), r.usd("max_budget"));
            if form.get("no_password") == Some("1") {
                body.insert("password".into(), Value::Null);
            } else if let Some(p) = r.password("password") {
                body.insert("password".into(), p.into());
            }
            ("/user/update", "/ui/users", "User saved.")
        }
        "/users/delete" => {
            let id = form
                .filled("user_id")
                .ok_or(ApiError::MissingParam("user_id"))?;
            body.insert("user_ids".into(), vec![Value::from(id)].into());
            ("/user/delete", "/ui/users", "User deleted.")
        }
        _ => return Err(not_found("POST", sub).into()),
    };
    r.finish()?;
    submit(state, viewer, (path, body), (back, done.to_owned()), "").await
}
