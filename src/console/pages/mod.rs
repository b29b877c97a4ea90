//! The console's pages, one file each, and the small helpers they share. A page reads the
//! management API's answers as their structs (`crate::admin::answers`), by calling the read's
//! own handler as a function; it changes things through `crate::admin::call` (the same
//! checks, audit log and fleet refresh as the API), reading back an answer it shows as its
//! struct too. Or it reads the live routing and metrics state; none keeps data of its own.

mod audit;
mod chart;
mod config;
mod customers;
mod fields;
mod health;
mod keys;
mod logs;
mod models;
mod names;
mod overview;
mod people;
mod pickers;
mod playground;
mod spend;

pub(super) use overview::RequestRate;
pub(super) use playground::PlaygroundKeys;

use http::{Method, Response, StatusCode};
use maud::{html, Markup};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::flash::Flash;
use super::layout::{page, problem_back, respond};
use super::{Form, Viewer};
use crate::admin::AdminRequest;
use crate::http::ResponseBody;
use crate::server::{AppState, Snapshot};
use fields::{Draft, Problems};
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

/// A `GET` page, with what the post before it left to say (`flash`).
pub(super) async fn get(
    state: &AppState,
    snap: &Snapshot,
    viewer: &Viewer,
    sub: &str,
    query: &Form,
    flash: Option<Flash>,
) -> Result<Response<ResponseBody>, ApiError> {
    if sub == "/spend.csv" {
        let text = spend::csv(state, viewer, query).await?;
        return Ok(super::layout::respond_text(
            "text/csv; charset=utf-8",
            "attachment; filename=\"sluice-spend.csv\"",
            text,
        ));
    }
    let (title, body) = if sub == "/keys/created" {
        keys::created(flash.as_ref().and_then(|f| f.key.as_ref()))
    } else {
        render(state, snap, viewer, sub, query, &Draft::fresh()).await?
    };
    let body = html! {
        @if let Some(f) = flash.as_ref().filter(|f| f.notice.is_some() || !f.warnings.is_empty()) {
            div.notice #notice role="status" {
                @if let Some(n) = &f.notice { (n) }
                @if !f.warnings.is_empty() {
                    ul #warnings { @for w in &f.warnings { li { (w) } } }
                }
            }
        }
        (body)
    };
    Ok(respond(StatusCode::OK, page(title, Some(viewer), body)))
}

/// A page's title and body; a form on it shows `draft` (a refused post's fields and problems).
async fn render(
    state: &AppState,
    snap: &Snapshot,
    viewer: &Viewer,
    sub: &str,
    query: &Form,
    draft: &Draft<'_>,
) -> Result<(&'static str, Markup), ApiError> {
    let role = viewer.session.role;
    Ok(match sub {
        "/" => ("Overview", overview::page(state, snap, viewer).await?),
        "/keys" => (
            "Virtual keys",
            keys::page(state, snap, viewer, query, draft).await?,
        ),
        "/keys/edit" => (
            "Key",
            keys::edit_page(state, snap, viewer, query, draft).await?,
        ),
        "/models" => (
            "Models and deployments",
            models::page(state, snap, viewer, draft)?,
        ),
        "/models/edit" if role.sees_all() && role.may_change() => (
            "Deployment",
            models::edit_page(state, viewer, query, draft).await?,
        ),
        "/spend" => ("Spend", spend::page(state, snap, viewer, query).await?),
        "/logs" => (
            "Request logs",
            logs::page(state, snap, viewer, query).await?,
        ),
        "/logs/detail" => ("Request", logs::detail(state, viewer, query).await?),
        "/playground" => ("Playground", playground::page_get(snap, viewer)),
        "/teams" if role.sees_all() => ("Teams", people::teams(state, snap, viewer, draft).await?),
        "/users" if role.sees_all() => ("Users", people::users(state, viewer, draft).await?),
        "/audit" if role.sees_all() => ("Audit log", audit::page(state, viewer, query).await?),
        "/config" if role.sees_all() => ("Config", config::page(state, snap, viewer)),
        "/teams/edit"
            if role.sees_all() || query.filled("team_id") == viewer.team_admin.as_deref() =>
        {
            (
                "Team",
                people::team_edit(state, snap, viewer, query, draft).await?,
            )
        }
        "/users/edit" if role.sees_all() => (
            "User",
            people::user_edit(state, viewer, query, draft).await?,
        ),
        "/customers" if role.sees_all() => {
            ("Customers", customers::list(state, viewer, draft).await?)
        }
        "/customers/edit" if role.sees_all() => (
            "Customer",
            customers::edit_page(state, viewer, query, draft).await?,
        ),
        _ if ADMIN_PAGES.contains(&sub) => {
            return Err(ApiError::NotPermitted(
                "This page is for proxy admins: your role may not open it. The pages in the \
                 menu are the ones you can use.",
            ))
        }
        _ => return Err(not_found("GET", sub)),
    })
}

/// The page a form posted to `sub` is on, and its query: where a refused form is shown again
/// and where an error page's Back goes.
fn origin(sub: &str, form: &Form) -> (&'static str, String) {
    let by = |page: &'static str, field: &str| {
        (page, query(&[(field, form.get(field).unwrap_or_default())]))
    };
    match sub {
        "/keys/update" => by("/keys/edit", "key"),
        "/teams/update"
        | "/teams/members/add"
        | "/teams/members/remove"
        | "/teams/members/role" => by("/teams/edit", "team_id"),
        "/users/update" => by("/users/edit", "user_id"),
        "/customers/update" => by("/customers/edit", "user_id"),
        "/models/update" => by("/models/edit", "id"),
        _ => (section(sub), String::new()),
    }
}

/// The list page a path belongs to (`/keys/edit` → `/keys`); the overview for anything else.
fn section(sub: &str) -> &'static str {
    let first = sub
        .trim_start_matches('/')
        .split('/')
        .next()
        .unwrap_or_default();
    [
        "/keys",
        "/models",
        "/spend",
        "/logs",
        "/playground",
        "/teams",
        "/users",
        "/customers",
        "/audit",
        "/config",
    ]
    .into_iter()
    .find(|s| s[1..] == *first)
    .unwrap_or("/")
}

/// Where an error page's Back leads: for a post, the page of its form; for a page that
/// failed, its list (the overview for a list).
pub(super) fn way_back(sub: &str, form: &Form, posted: bool) -> String {
    let (page, q) = if posted {
        origin(sub, form)
    } else {
        let s = section(sub);
        (if s == sub { "/" } else { s }, String::new())
    };
    let page = if page == "/" {
        "/ui/".to_owned()
    } else {
        format!("/ui{page}")
    };
    if q.is_empty() {
        page
    } else {
        format!("{page}?{q}")
    }
}

/// Why a form post did not go through.
#[derive(Debug)]
pub(super) enum Refused {
    /// What was typed: the form is shown again, each problem beside its field.
    Form(Problems),
    /// Anything else: an error page with a way back.
    Error(ApiError),
}

impl From<ApiError> for Refused {
    fn from(e: ApiError) -> Self {
        Self::Error(e)
    }
}

impl From<Problems> for Refused {
    fn from(p: Problems) -> Self {
        Self::Form(p)
    }
}

/// A management API refusal of a form's values, shown beside the form's fields; "already
/// exists" beside `named_by`.
fn refused_by(named_by: &'static str) -> impl Fn(ApiError) -> Refused {
    move |e| Refused::Form(Problems::from_api(&e, named_by))
}

/// Sends a form's change to the management API at `path`, then back to `to`, which says
/// `done`. A deletion's refusal is an error page; any other's is shown beside the form's
/// fields ("already exists" beside `named_by`).
async fn submit(
    state: &AppState,
    viewer: &Viewer,
    (path, body): (&str, serde_json::Map<String, Value>),
    (to, done): (&str, String),
    named_by: &'static str,
) -> Result<Response<ResponseBody>, Refused> {
    match change(state, &viewer.session.user, path, &Value::Object(body)).await {
        Ok(_) => Ok(super::layout::redirect_with(to, Flash::notice(done))),
        Err(e) if path.ends_with("/delete") => Err(Refused::Error(e)),
        Err(e) => Err(refused_by(named_by)(e)),
    }
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

/// A form post (CSRF and role already checked): a redirect when it went through; when its
/// values were refused, its page again (400) with what was typed and every problem beside its
/// field.
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
    let problems = match act(state, viewer, sub, form).await {
        Ok(resp) => return Ok(resp),
        Err(Refused::Error(e)) => return Err(e),
        Err(Refused::Form(p)) => p,
    };
    let (page_sub, q) = origin(sub, form);
    let q = Form::parse(q.as_bytes());
    let draft = Draft::refused(sub, form, problems);
    match render(state, snap, viewer, page_sub, &q, &draft).await {
        Ok((title, body)) => Ok(respond(
            StatusCode::BAD_REQUEST,
            page(title, Some(viewer), body),
        )),
        // The form's page cannot be drawn (the thing edited is gone): say what was wrong.
        Err(_) => Ok(problem_back(
            StatusCode::BAD_REQUEST,
            Some(viewer),
            &draft.plain(),
            &way_back(sub, form, true),
        )),
    }
}

/// The post's action, once confirmed where it must be.
async fn act(
    state: &AppState,
    viewer: &Viewer,
    sub: &str,
    form: &Form,
) -> Result<Response<ResponseBody>, Refused> {
    let role = viewer.session.role;
    if sub == "/config/reload" && role.sees_all() {
        return config::reload(state, viewer).await;
    }
    let members = matches!(
        sub,
        "/teams/members/add" | "/teams/members/remove" | "/teams/members/role"
    );
    let key = sub.strip_prefix("/keys/");
    // Teams, users, end users and deployments are the admins'; keys and a team's members are
    // also their owners' (checked by `keys` and `members`).
    if !members && key.is_none() && !role.sees_all() {
        return Err(not_found("POST", sub).into());
    }
    if let Some(ask) = confirmation(viewer, sub, form) {
        return Ok(ask);
    }
    if members {
        return people::members(state, viewer, sub, form).await;
    }
    if let Some(action) = key {
        return keys::act(state, viewer, action, form).await;
    }
    match sub {
        "/teams/new" | "/users/new" => people::create(state, viewer, sub, form).await,
        "/teams/update" | "/teams/delete" | "/users/update" | "/users/delete" => {
            people::edit(state, viewer, sub, form).await
        }
        "/customers/new" | "/customers/update" | "/customers/delete" => {
            customers::act(state, viewer, sub, form).await
        }
        "/models/new" | "/models/update" | "/models/delete" => {
            models::act(state, viewer, sub, form).await
        }
        _ => Err(not_found("POST", sub).into()),
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

/// A blocked/active choice for an edit form (`blocked`: `true` or `false`), as stored or as
/// typed; `refused` says what a block refuses.
fn status_select(d: &Draft<'_>, blocked: bool, refused: &str) -> maud::Markup {
    let blocked = d.value("blocked", if blocked { "true" } else { "false" }) == "true";
    maud::html! {
        label for="blocked" { "Status" }
        select #blocked name="blocked" {
            option value="false" selected[!blocked] { "active" }
            option value="true" selected[blocked] { "blocked (" (refused) " refused)" }
        }
    }
}
