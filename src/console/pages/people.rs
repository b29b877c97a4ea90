//! Teams and users (admins only): lists from `/team/list` and `/user/list`, and forms that make
//! them through `/team/new` and `/user/new` (a user's password and role for console sign-in).

use http::{Method, Response};
use maud::{html, Markup};
use serde_json::{Map, Value};

use super::{admin, text, usd};
use crate::console::layout::{csrf_field, redirect};
use crate::console::{Form, Role, Viewer};
use crate::server::{AppState, ResponseBody};
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
    admin(state, Method::POST, path, "", &Value::Object(body)).await?;
    Ok(redirect(back))
}

/// `GET /ui/teams`.
pub(super) async fn teams(state: &AppState, viewer: &Viewer) -> Result<Markup, ApiError> {
    let list = admin(
        state,
        Method::GET,
        "/team/list",
        "page_size=1000",
        &Value::Null,
    )
    .await?;
    let teams = list.as_array().map(Vec::as_slice).unwrap_or_default();
    Ok(html! {
        table #teams {
            thead { tr { th { "Team" } th { "Alias" } th.num { "Spend" } th.num { "Budget" } th.num { "RPM" } th { "Status" } } }
            tbody {
                @for t in teams {
                    tr {
                        td { (text(t, "team_id")) }
                        td { (text(t, "team_alias")) }
                        td.num { (usd(t["spend"].as_f64().unwrap_or(0.0))) }
                        td.num { (t["max_budget"].as_f64().map(usd).unwrap_or_default()) }
                        td.num { (text(t, "rpm_limit")) }
                        td { @if t["blocked"] == true { span.error { "blocked" } } @else { "active" } }
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
    let list = admin(
        state,
        Method::GET,
        "/user/list",
        "page_size=1000",
        &Value::Null,
    )
    .await?;
    let users = list["users"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    Ok(html! {
        table #users {
            thead { tr { th { "User" } th { "Email" } th { "Role" } th { "Team" } th.num { "Spend" } th.num { "Budget" } } }
            tbody {
                @for u in users {
                    tr {
                        td { (text(u, "user_id")) }
                        td { (text(u, "user_email")) }
                        td { (text(u, "user_role")) }
                        td { (text(u, "team_id")) }
                        td.num { (usd(u["spend"].as_f64().unwrap_or(0.0))) }
                        td.num { (u["max_budget"].as_f64().map(usd).unwrap_or_default()) }
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
