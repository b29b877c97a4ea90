//! Teams and users (admins only): lists from `/team/list` and `/user/list`, forms that make
//! them through `/team/new` and `/user/new` (a user's password and role for console sign-in),
//! and an edit page each that changes (`/team/update`, `/user/update`) or deletes
//! (`/team/delete`, `/user/delete`) one.

use http::Response;
use maud::{html, Markup};
use serde_json::{Map, Value};

use super::{change, figure, number, or_empty, query, read, removal, status_select, store, usd};
use crate::console::layout::{csrf_field, redirect};
use crate::console::{Form, Role, Viewer};
use crate::http::ResponseBody;
use crate::server::AppState;
use sluice_core::error::ApiError;

/// The roles a user can be given here.
const ROLES: [Role; 4] = [
    Role::InternalUser,
    Role::InternalUserViewer,
    Role::ProxyAdminViewer,
    Role::ProxyAdmin,
];

/// `POST /ui/teams/new` and `/ui/users/new`: the form's filled fields as the management API's
/// body (the budget as a number); then back to the list.
pub(super) async fn create(
    state: &AppState,
    viewer: &Viewer,
    sub: &str,
    form: &Form,
) -> Result<Response<ResponseBody>, ApiError> {
    let (path, fields, back): (&str, &[&str], &'static str) = if sub == "/teams/new" {
        ("/team/new", &["team_id", "team_alias"], "/ui/teams")
    } else {
        (
            "/user/new",
            &["user_id", "user_email", "user_role", "team_id", "password"],
            "/ui/users",
        )
    };
    let mut body = Map::new();
    for f in fields {
        if let Some(v) = form.filled(f) {
            body.insert((*f).into(), v.into());
        }
    }
    if let Some(b) = form.filled("max_budget") {
        let n: f64 = b.parse().map_err(|_| ApiError::InvalidParam {
            param: "max_budget",
            message: format!("`{b}` is not a number"),
        })?;
        body.insert("max_budget".into(), n.into());
    }
    if path == "/user/new" {
        body.insert("auto_create_key".into(), false.into());
    }
    change(state, &viewer.session.user, path, &Value::Object(body)).await?;
    Ok(redirect(back))
}

/// `GET /ui/teams`.
pub(super) async fn teams(state: &AppState, viewer: &Viewer) -> Result<Markup, ApiError> {
    let teams = crate::admin::teams::list(store(state)?, read("page_size=1000")).await?;
    Ok(html! {
        table #teams {
            thead { tr { th { "Team" } th { "Alias" } th.num { "Spend" } th.num { "Budget" } th.num { "RPM" } th { "Status" } } }
            tbody {
                @for t in &teams {
                    tr {
                        td { a href={ "/ui/teams/edit?" (query(&[("team_id", &t.team_id)])) } { (t.team_id) } }
                        td { (or_empty(&t.team_alias)) }
                        td.num { (usd(t.accounting.spend)) }
                        td.num { (t.limits.max_budget.map(usd).unwrap_or_default()) }
                        td.num { (figure(t.limits.rpm_limit)) }
                        td { @if t.blocked { span.error { "blocked" } } @else { "active" } }
                    }
                }
            }
        }
        @if viewer.session.role.may_change() {
            h2 { "New team" }
            form.stack method="post" action="/ui/teams/new" {
                (csrf_field(&viewer.csrf))
                label for="team_id" { "Team id" }
                input #team_id name="team_id" placeholder="generated when empty";
                label for="team_alias" { "Alias" }
                input #team_alias name="team_alias";
                label for="max_budget" { "Budget (USD)" }
                input #max_budget name="max_budget" placeholder="no budget";
                button type="submit" { "Create team" }
            }
        }
    })
}

/// `GET /ui/users`.
pub(super) async fn users(state: &AppState, viewer: &Viewer) -> Result<Markup, ApiError> {
    let list = crate::admin::users::list(store(state)?, read("page_size=1000")).await?;
    Ok(html! {
        table #users {
            thead { tr { th { "User" } th { "Email" } th { "Role" } th { "Team" } th.num { "Spend" } th.num { "Budget" } } }
            tbody {
                @for u in &list.users {
                    tr {
                        td { a href={ "/ui/users/edit?" (query(&[("user_id", &u.user_id)])) } { (u.user_id) } }
                        td { (or_empty(&u.user_email)) }
                        td { (or_empty(&u.user_role)) }
                        td { (or_empty(&u.team_id)) }
                        td.num { (usd(u.accounting.spend)) }
                        td.num { (u.limits.max_budget.map(usd).unwrap_or_default()) }
                    }
                }
            }
        }
        @if viewer.session.role.may_change() {
            h2 { "New user" }
            form.stack method="post" action="/ui/users/new" {
                (csrf_field(&viewer.csrf))
                label for="user_id" { "User id" }
                input #user_id name="user_id" required;
                label for="user_email" { "Email" }
                input #user_email name="user_email" type="email";
                label for="user_role" { "Role" }
                select #user_role name="user_role" {
                    @for r in ROLES { option value=(r.name()) { (r.name()) } }
                }
                label for="team_id" { "Team" }
                input #team_id name="team_id";
                label for="password" { "Console password" }
                input #password name="password" type="password" autocomplete="new-password" placeholder="8 characters or more; empty: no sign-in";
                label for="max_budget" { "Budget (USD)" }
                input #max_budget name="max_budget" placeholder="no budget";
                button type="submit" { "Create user" }
            }
        }
    })
}

/// `GET /ui/teams/edit?team_id=`: the team's fields to change, and its deletion.
pub(super) async fn team_edit(
    state: &AppState,
    viewer: &Viewer,
    q: &Form,
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
    Ok(html! {
        p { "Spend " (usd(t.accounting.spend)) " · " (keys) " keys" }
        h2 { "Members" }
        table #members {
            thead { tr { th { "User" } th { "Role in the team" } @if manages { th { "" } } } }
            tbody {
                @for m in members {
                    @let user = &m.user_id;
                    @let role = &m.role;
                    tr {
                        td { (user) }
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
        @if manages {
            form.stack method="post" action="/ui/teams/members/add" {
                (csrf_field(&viewer.csrf))
                input type="hidden" name="team_id" value=(id);
                label for="member_user_id" { "Add a member (user id; a new one is made)" }
                input #member_user_id name="user_id" required;
                label for="member_role" { "Role in the team" }
                select #member_role name="role" {
                    option value="user" { "user: their own keys, the team's usage" }
                    option value="admin" { "admin: the team's keys and members" }
                }
                button type="submit" { "Add member" }
            }
        }
        @if viewer.session.role.sees_all() && viewer.session.role.may_change() {
            h2 { "Settings" }
            form.stack method="post" action="/ui/teams/update" {
                (csrf_field(&viewer.csrf))
                input type="hidden" name="team_id" value=(id);
                label for="team_alias" { "Alias" }
                input #team_alias name="team_alias" value=(or_empty(&t.team_alias));
                label for="max_budget" { "Budget (USD)" }
                input #max_budget name="max_budget" value=(figure(t.limits.max_budget)) placeholder="no budget";
                label for="rpm_limit" { "Requests per minute" }
                input #rpm_limit name="rpm_limit" value=(figure(t.limits.rpm_limit)) placeholder="no limit";
                label for="tpm_limit" { "Tokens per minute" }
                input #tpm_limit name="tpm_limit" value=(figure(t.limits.tpm_limit)) placeholder="no limit";
                (status_select(t.blocked, "its keys are"))
                button type="submit" { "Save team" }
            }
            (removal(viewer, "Delete", "/ui/teams/delete", ("team_id", id), "delete-team", "Delete team"))
        }
    })
}

/// `GET /ui/users/edit?user_id=`: the user's fields to change (a new console password too),
/// and their deletion.
pub(super) async fn user_edit(
    state: &AppState,
    viewer: &Viewer,
    q: &Form,
) -> Result<Markup, ApiError> {
    let id = q
        .filled("user_id")
        .ok_or(ApiError::MissingParam("user_id"))?;
    let q = query(&[("user_id", id)]);
    let info = crate::admin::users::info(store(state)?, read(&q)).await?;
    let u = &info.user_info;
    let role = or_empty(&u.user_role);
    Ok(html! {
        p { "Spend " (usd(u.accounting.spend)) }
        @if viewer.session.role.may_change() {
            form.stack method="post" action="/ui/users/update" {
                (csrf_field(&viewer.csrf))
                input type="hidden" name="user_id" value=(id);
                label for="user_email" { "Email" }
                input #user_email name="user_email" type="email" value=(or_empty(&u.user_email));
                label for="user_role" { "Role" }
                select #user_role name="user_role" {
                    @for r in ROLES { option value=(r.name()) selected[r.name() == role] { (r.name()) } }
                }
                label for="team_id" { "Team" }
                input #team_id name="team_id" value=(or_empty(&u.team_id)) placeholder="none";
                label for="max_budget" { "Budget (USD)" }
                input #max_budget name="max_budget" value=(figure(u.limits.max_budget)) placeholder="no budget";
                label for="password" { "New console password" }
                input #password name="password" type="password" autocomplete="new-password" placeholder="empty: unchanged";
                label { input name="no_password" type="checkbox" value="1"; " Remove the console password" }
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
) -> Result<Response<ResponseBody>, ApiError> {
    let team = form
        .filled("team_id")
        .ok_or(ApiError::MissingParam("team_id"))?;
    if !viewer.manages_team(team) {
        return Err(ApiError::NotFound {
            what: "team",
            id: team.chars().take(128).collect(),
        });
    }
    let user = form
        .filled("user_id")
        .ok_or(ApiError::MissingParam("user_id"))?;
    let role = form.filled("role").unwrap_or("user");
    let (path, body) = match sub {
        "/teams/members/add" => (
            "/team/member_add",
            serde_json::json!({"team_id": team, "member": {"user_id": user, "role": role}}),
        ),
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
    let back = format!("/ui/teams/edit?{}", query(&[("team_id", team)]));
    Ok(redirect(&back))
}

/// `POST /ui/teams/update|delete` and `/ui/users/update|delete`: the form as the management
/// API's body; then back to the list.
pub(super) async fn edit(
    state: &AppState,
    viewer: &Viewer,
    sub: &str,
    form: &Form,
) -> Result<Response<ResponseBody>, ApiError> {
    let mut body = Map::new();
    let (path, back): (&str, &'static str) = match sub {
        "/teams/update" => {
            let id = form
                .filled("team_id")
                .ok_or(ApiError::MissingParam("team_id"))?;
            body.insert("team_id".into(), id.into());
            body.insert(
                "team_alias".into(),
                form.filled("team_alias").map_or(Value::Null, Into::into),
            );
            for f in ["max_budget", "rpm_limit", "tpm_limit"] {
                body.insert(f.into(), number(form, f)?);
            }
            body.insert(
                "blocked".into(),
                (form.get("blocked") == Some("true")).into(),
            );
            ("/team/update", "/ui/teams")
        }
        "/teams/delete" => {
            let id = form
                .filled("team_id")
                .ok_or(ApiError::MissingParam("team_id"))?;
            body.insert("team_ids".into(), vec![Value::from(id)].into());
            ("/team/delete", "/ui/teams")
        }
        "/users/update" => {
            let id = form
                .filled("user_id")
                .ok_or(ApiError::MissingParam("user_id"))?;
            body.insert("user_id".into(), id.into());
            for f in ["user_email", "user_role", "team_id"] {
                body.insert(f.into(), form.filled(f).map_or(Value::Null, Into::into));
            }
            body.insert("max_budget".into(), number(form, "max_budget")?);
            if form.get("no_password") == Some("1") {
                body.insert("password".into(), Value::Null);
            } else if let Some(p) = form.get("password").filter(|p| !p.is_empty()) {
                body.insert("password".into(), p.into());
            }
            ("/user/update", "/ui/users")
        }
        "/users/delete" => {
            let id = form
                .filled("user_id")
                .ok_or(ApiError::MissingParam("user_id"))?;
            body.insert("user_ids".into(), vec![Value::from(id)].into());
            ("/user/delete", "/ui/users")
        }
        _ => {
            return Err(ApiError::RouteNotFound {
                method: "POST".into(),
                path: format!("/ui{sub}"),
            })
        }
    };
    change(state, &viewer.session.user, path, &Value::Object(body)).await?;
    Ok(redirect(back))
}
