//! The console's pages, one file each, and the small helpers they share. A page reads the
//! management API's answers as their structs (`crate::admin::answers`), by calling the read's
//! own handler as a function; it changes things through `crate::admin::call` (the same
//! checks, audit log and fleet refresh as the API), reading back an answer it shows as its
//! struct too. Or it reads the live routing and metrics state; none keeps data of its own.

mod audit;
mod chart;
mod config;
mod customers;
mod keys;
mod logs;
mod models;
mod names;
mod overview;
mod people;
mod playground;
mod spend;

pub(super) use overview::RequestRate;

use http::{Method, Response, StatusCode};
use maud::html;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::layout::{page, respond};
use super::{Form, Viewer};
use crate::admin::AdminRequest;
use crate::http::ResponseBody;
use crate::server::{AppState, Snapshot};
use sluice_core::error::ApiError;
use sluice_store::Store;

/// Pages only proxy admins (or, for a team's page, its admin) open: another viewer is told
/// so (403), not that the page does not exist.
const ADMIN_PAGES: &[&str] = &[
    "/models/edit",
    "/teams",
    "/teams/edit",
    "/users",
    "/users/edit",
    "/audit",
    "/config",
    "/customers",
    "/customers/edit",
];

/// A `GET` page.
pub(super) async fn get(
    state: &AppState,
    snap: &Snapshot,
    viewer: &Viewer,
    sub: &str,
    query: &Form,
) -> Result<Response<ResponseBody>, ApiError> {
    if sub == "/spend.csv" {
        let text = spend::csv(state, viewer, query).await?;
        return Ok(super::layout::respond_text(
            "text/csv; charset=utf-8",
            "attachment; filename=\"sluice-spend.csv\"",
            text,
        ));
    }
    let (title, body) = match sub {
        "/" => ("Overview", overview::page(state, snap, viewer).await?),
        "/keys" => ("Virtual keys", keys::page(state, viewer, query).await?),
        "/keys/edit" => ("Key", keys::edit_page(state, viewer, query).await?),
        "/models" => ("Models and deployments", models::page(state, snap, viewer)?),
        "/models/edit" if viewer.session.role.sees_all() && viewer.session.role.may_change() => {
            ("Deployment", models::edit_page(state, viewer, query).await?)
        }
        "/spend" => ("Spend", spend::page(state, snap, viewer, query).await?),
        "/logs" => (
            "Request logs",
            logs::page(state, snap, viewer, query).await?,
        ),
        "/logs/detail" => ("Request", logs::detail(state, viewer, query).await?),
        "/playground" => ("Playground", playground::page_get(snap, viewer)),
        "/teams" if viewer.session.role.sees_all() => {
            ("Teams", people::teams(state, viewer).await?)
        }
        "/users" if viewer.session.role.sees_all() => {
            ("Users", people::users(state, viewer).await?)
        }
        "/audit" if viewer.session.role.sees_all() => {
            ("Audit log", audit::page(state, viewer, query).await?)
        }
        "/config" if viewer.session.role.sees_all() => {
            ("Config", config::page(state, snap, viewer))
        }
        "/teams/edit"
            if viewer.session.role.sees_all()
                || query.filled("team_id") == viewer.team_admin.as_deref() =>
        {
            ("Team", people::team_edit(state, viewer, query).await?)
        }
        "/users/edit" if viewer.session.role.sees_all() => {
            ("User", people::user_edit(state, viewer, query).await?)
        }
        "/customers" if viewer.session.role.sees_all() => {
            ("Customers", customers::list(state, viewer).await?)
        }
        "/customers/edit" if viewer.session.role.sees_all() => (
            "Customer",
            customers::edit_page(state, viewer, query).await?,
        ),
        _ if ADMIN_PAGES.contains(&sub) => {
            return Err(ApiError::NotPermitted(
                "This page is for proxy admins: your role may not open it. The pages in the \
                 menu are the ones you can use.",
            ))
        }
        _ => return Err(not_found("GET", sub)),
    };
    Ok(respond(StatusCode::OK, page(title, Some(viewer), body)))
}

/// Actions that cannot be taken back, with what the confirmation page says and where Cancel
/// goes. Their first post only asks (a second form, no script needed); the post that carries
/// `confirmed=yes` acts.
const CONFIRMED: &[(&str, &str, &str)] = &[
    (
        "/keys/delete",
        "Delete this key? Requests made with it are refused at once. This cannot be undone.",
        "/ui/keys",
    ),
    (
        "/keys/regenerate",
        "Regenerate this key? The key in use stops working at once; the new one is shown once.",
        "/ui/keys",
    ),
    (
        "/keys/block",
        "Block this key? Its requests are refused until it is unblocked.",
        "/ui/keys",
    ),
    (
        "/teams/delete",
        "Delete this team? Its keys stay, no longer held to the team's limits.",
        "/ui/teams",
    ),
    (
        "/teams/members/remove",
        "Remove this member from the team?",
        "/ui/teams",
    ),
    (
        "/users/delete",
        "Delete this user? They can no longer sign in.",
        "/ui/users",
    ),
    (
        "/customers/delete",
        "Delete this customer and their budget?",
        "/ui/customers",
    ),
    (
        "/models/delete",
        "Remove this deployment? Requests stop reaching it on every instance.",
        "/ui/models",
    ),
];

/// The page that asks before an action in [`CONFIRMED`], or `None` to go on (not such an
/// action, or already confirmed). It carries the form's fields again, with a fresh CSRF token.
fn confirmation(viewer: &Viewer, sub: &str, form: &Form) -> Option<Response<ResponseBody>> {
    let (_, question, back) = CONFIRMED.iter().find(|(p, _, _)| *p == sub)?;
    if form.get("confirmed") == Some("yes") {
        return None;
    }
    let fields: Vec<(&str, &str)> = form
        .fields()
        .filter(|(k, _)| !matches!(*k, "csrf" | "confirmed"))
        .collect();
    let body = html! {
        p { (question) }
        dl {
            @for (k, v) in &fields {
                dt { (k) }
                dd { (v) }
            }
        }
        form.inline method="post" action=(format!("/ui{sub}")) {
            input type="hidden" name="csrf" value=(viewer.csrf);
            @for (k, v) in &fields {
                input type="hidden" name=(k) value=(v);
            }
            input type="hidden" name="confirmed" value="yes";
            button.danger #confirm type="submit" { "Yes, go on" }
        }
        " "
        a href=(back) { "Cancel" }
    };
    Some(respond(StatusCode::OK, page("Confirm", Some(viewer), body)))
}

/// A form post (CSRF and role already checked).
pub(super) async fn post(
    state: &AppState,
    snap: &Snapshot,
    viewer: &Viewer,
    sub: &str,
    form: &Form,
) -> Result<Response<ResponseBody>, ApiError> {
    if sub == "/playground" {
        return playground::send(state, snap, viewer, form).await;
    }
    if sub == "/config/reload" && viewer.session.role.sees_all() {
        let (ok, body) = config::reload(state).await;
        let status = if ok {
            StatusCode::OK
        } else {
            StatusCode::BAD_REQUEST
        };
        return Ok(respond(status, page("Config", Some(viewer), body)));
    }
    if matches!(sub, "/teams/new" | "/users/new") {
        // Teams and users are the admins'.
        if !viewer.session.role.sees_all() {
            return Err(not_found("POST", sub));
        }
        return people::create(state, viewer, sub, form).await;
    }
    if matches!(
        sub,
        "/teams/members/add" | "/teams/members/remove" | "/teams/members/role"
    ) {
        if let Some(ask) = confirmation(viewer, sub, form) {
            return Ok(ask);
        }
        // The team's admin or a proxy admin (`members` checks which team).
        return people::members(state, viewer, sub, form).await;
    }
    if matches!(
        sub,
        "/teams/update" | "/teams/delete" | "/users/update" | "/users/delete"
    ) {
        if !viewer.session.role.sees_all() {
            return Err(not_found("POST", sub));
        }
        if let Some(ask) = confirmation(viewer, sub, form) {
            return Ok(ask);
        }
        return people::edit(state, viewer, sub, form).await;
    }
    if matches!(
        sub,
        "/customers/new" | "/customers/update" | "/customers/delete"
    ) {
        // End users are the admins'.
        if !viewer.session.role.sees_all() {
            return Err(not_found("POST", sub));
        }
        if let Some(ask) = confirmation(viewer, sub, form) {
            return Ok(ask);
        }
        return customers::act(state, viewer, sub, form).await;
    }
    if matches!(sub, "/models/new" | "/models/update" | "/models/delete") {
        if !viewer.session.role.sees_all() {
            return Err(not_found("POST", sub));
        }
        if let Some(ask) = confirmation(viewer, sub, form) {
            return Ok(ask);
        }
        return models::act(state, viewer, sub, form).await;
    }
    if let Some(ask) = confirmation(viewer, sub, form) {
        return Ok(ask);
    }
    match sub.strip_prefix("/keys/") {
        Some(action) => keys::act(state, viewer, action, form).await,
        None => Err(not_found("POST", sub)),
    }
}

fn not_found(method: &str, sub: &str) -> ApiError {
    ApiError::RouteNotFound {
        method: method.to_owned(),
        path: format!("/ui{}", sub.chars().take(200).collect::<String>()),
    }
}

/// A management API change made from the console by `by` (the signed-in user), through
/// `crate::admin::call`: audited as theirs.
pub(super) async fn change(
    state: &AppState,
    by: &str,
    path: &str,
    body: &Value,
) -> Result<Value, ApiError> {
    let bytes = if body.is_null() {
        Vec::new()
    } else {
        serde_json::to_vec(body).map_err(|_| ApiError::Internal("console request"))?
    };
    crate::admin::call(state, &Method::POST, path, "", &bytes, by).await
}

/// The store the management API's handlers read: the console calls a read's handler as a
/// function and reads its answer struct (`crate::admin::answers`), with no JSON between.
fn store(state: &AppState) -> Result<&Store, ApiError> {
    state
        .store()
        .map(|s| &s.store)
        .ok_or(ApiError::StoreUnavailable)
}

/// A read's request to a management API handler: `query`, no body.
fn read(query: &str) -> AdminRequest<'_> {
    AdminRequest { query, body: b"" }
}

/// A management API change whose answer the console reads, as the struct the handler
/// serialised it from.
async fn change_as<T: DeserializeOwned>(
    state: &AppState,
    by: &str,
    path: &str,
    body: &Value,
) -> Result<T, ApiError> {
    let answer = change(state, by, path, body).await?;
    serde_json::from_value(answer).map_err(|e| {
        tracing::warn!(error = %e, path, "console: an admin answer is not its struct");
        ApiError::Internal("admin answer")
    })
}

/// An optional text field as the console shows it ("" for none).
fn or_empty(v: &Option<String>) -> &str {
    v.as_deref().unwrap_or_default()
}

/// An optional figure as the forms show it: as the JSON answer writes it (`10.0`, `60`), ""
/// for none.
fn figure<T: Into<Value>>(v: Option<T>) -> String {
    match v.map(Into::into) {
        None | Some(Value::Null) => String::new(),
        Some(v) => v.to_string(),
    }
}

/// A query string from pairs, each value encoded.
fn query(pairs: &[(&str, &str)]) -> String {
    let mut q = form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs {
        q.append_pair(k, v);
    }
    q.finish()
}

/// A number field of an edit form: blank is `null` (no limit), anything else must be a number.
fn number(form: &Form, field: &'static str) -> Result<Value, ApiError> {
    amount(form, field, field != "max_budget", "number")
}

/// A number of 0 or more from `field` (blank: `null`): whole (a count) or not (USD); `noun`
/// names what it should have been in the error.
fn amount(form: &Form, field: &'static str, whole: bool, noun: &str) -> Result<Value, ApiError> {
    let Some(v) = form.filled(field) else {
        return Ok(Value::Null);
    };
    v.parse::<f64>()
        .ok()
        .filter(|n| n.is_finite() && *n >= 0.0)
        .and_then(|n| {
            if whole {
                Some(Value::from(n as u64))
            } else {
                serde_json::Number::from_f64(n).map(Value::Number)
            }
        })
        .ok_or_else(|| ApiError::InvalidParam {
            param: field,
            message: format!("`{v}` is not a {noun}, 0 or more"),
        })
}

/// USD as the console shows it.
fn usd(v: f64) -> String {
    // A sum of nothing is -0.0, which would print as "$-0.00".
    let v = v + 0.0;
    if v != 0.0 && v.abs() < 0.01 {
        format!("${v:.6}")
    } else {
        format!("${v:.2}")
    }
}

/// The team of a user, from their record (internal users see their team's usage).
async fn team_of(state: &AppState, user: &str) -> Result<Option<String>, ApiError> {
    let q = query(&[("user_id", user)]);
    match crate::admin::users::info(store(state)?, read(&q)).await {
        Ok(info) => Ok(info.user_info.team_id),
        Err(ApiError::NotFound { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// A short key hash for tables.
fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

/// The section that deletes one thing: a heading, and a form of its own posting `field=id`
/// with the CSRF token to `action`, its button (`#button_id`) naming what goes.
fn removal(
    viewer: &Viewer,
    heading: &str,
    action: &str,
    (field, id): (&str, &str),
    button_id: &str,
    label: &str,
) -> maud::Markup {
    maud::html! {
        h2 { (heading) }
        form method="post" action=(action) {
            (super::layout::csrf_field(&viewer.csrf))
            input type="hidden" name=(field) value=(id);
            button.danger id=(button_id) type="submit" { (label) " " (id) }
        }
    }
}

/// A blocked/active choice for an edit form (`blocked`: `true` or `false`); `refused` says what
/// a block refuses.
fn status_select(blocked: bool, refused: &str) -> maud::Markup {
    maud::html! {
        label for="blocked" { "Status" }
        select #blocked name="blocked" {
            option value="false" selected[!blocked] { "active" }
            option value="true" selected[blocked] { "blocked (" (refused) " refused)" }
        }
    }
}
