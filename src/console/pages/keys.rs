//! Virtual keys: the list (an internal user's own only, a team admin's team's), a form to make
//! one, an edit page (proxy admins and team admins), and block, unblock, regenerate and
//! delete, each through the management API's own `/key/*` handler.

use http::{Response, StatusCode};
use maud::{html, Markup};
use serde_json::{json, Map, Value};

use super::{change, change_as, figure, or_empty, query, read, short, store, team_of, usd};
use crate::admin::answers::keys::{IssuedKey, KeyInfo};
use crate::console::layout::{self, csrf_field, redirect, respond};
use crate::console::{Form, Viewer};
use crate::http::ResponseBody;
use crate::server::AppState;
use sluice_core::error::ApiError;

/// Keys on one page.
const PAGE_SIZE: &str = "100";

/// `GET /ui/keys`.
pub(super) async fn page(state: &AppState, viewer: &Viewer, q: &Form) -> Result<Markup, ApiError> {
    let s = &viewer.session;
    let page_no = q.filled("page").unwrap_or("1");
    let mut pairs = vec![
        ("return_full_object", "true"),
        ("size", PAGE_SIZE),
        ("page", page_no),
    ];
    if let Some(p) = viewer.scope_pair() {
        pairs.push(p);
    }
    let list = crate::admin::keys::list(store(state)?, read(&query(&pairs))).await?;
    // Asked for whole keys (`return_full_object`), so every one is.
    let keys: Vec<&KeyInfo> = list.keys.iter().filter_map(|k| k.full()).collect();
    let may_change = s.role.may_change();
    Ok(html! {
        @let current = list.current_page;
        @let pages = list.total_pages.max(1);
        p.muted {
            (list.total_count) " keys · page " (current) " of " (pages)
            @if current > 1 { " · " a href={ "/ui/keys?page=" (current - 1) } { "previous" } }
            @if current < pages { " · " a href={ "/ui/keys?page=" (current + 1) } { "next" } }
        }
        table #keys {
            thead { tr {
                th { "Alias" } th { "Key (hash)" } th { "Team" } th { "User" } th { "Models" }
                th.num { "Spend" } th.num { "Budget" } th.num { "RPM" } th { "Status" }
                @if may_change { th { "" } }
            } }
            tbody {
                @for k in keys {
                    @let token = &k.token;
                    tr {
                        td { (or_empty(&k.key_alias)) }
                        td.mono title=(token) { (short(token)) "…" }
                        td { (or_empty(&k.team_id)) }
                        td { (or_empty(&k.user_id)) }
                        td { (models(k)) }
                        td.num { (usd(k.accounting.spend)) }
                        td.num { (k.limits.max_budget.map(usd).unwrap_or_default()) }
                        td.num { (figure(k.limits.rpm_limit)) }
                        td { @if k.blocked { span.error { "blocked" } } @else { "active" } }
                        @if may_change {
                            td {
                                @if edits(viewer, k) {
                                    a.quiet href={ "/ui/keys/edit?" (query(&[("key", token)])) } { "edit" }
                                    " "
                                }
                                (action(viewer, if k.blocked { "unblock" } else { "block" }, token, "quiet"))
                                (action(viewer, "regenerate", token, "quiet"))
                                (action(viewer, "delete", token, "danger"))
                            }
                        }
                    }
                }
            }
        }
        @if may_change {
            h2 { "New key" }
            form.stack method="post" action="/ui/keys/new" {
                (csrf_field(&viewer.csrf))
                @for (name, label, hint) in NEW_KEY_FIELDS {
                    @if s.role.sees_all() || !matches!(*name, "team_id" | "user_id") {
                        label for=(name) { (label) }
                        input id=(name) name=(name) placeholder=(hint);
                    } @else if *name == "user_id" && viewer.team_admin.is_some() {
                        label for=(name) { "For member" }
                        input id=(name) name=(name) placeholder="a member of your team; empty: you";
                    }
                }
                button type="submit" { "Create key" }
            }
        }
    })
}

/// The new-key form's fields: name (as `/key/generate` names it), label, hint. Team and user
/// are for admins; an internal user's keys are always their own.
const NEW_KEY_FIELDS: &[(&str, &str, &str)] = &[
    ("key_alias", "Alias", "e.g. billing-service"),
    ("team_id", "Team", ""),
    ("user_id", "User", ""),
    ("models", "Models", "comma-separated; empty for all"),
    ("max_budget", "Budget (USD)", "no budget"),
    ("budget_duration", "Budget period", "none; or 1d, 30d"),
    ("rpm_limit", "Requests per minute", "no limit"),
    ("tpm_limit", "Tokens per minute", "no limit"),
    ("duration", "Expires after", "never; or 30d, 12h"),
];

fn models(k: &KeyInfo) -> String {
    if k.models.is_empty() {
        "all".to_owned()
    } else {
        k.models.join(", ")
    }
}

/// One key's action button: a form of its own, with the CSRF token.
fn action(viewer: &Viewer, what: &str, token: &str, class: &str) -> Markup {
    html! {
        form.inline method="post" action={ "/ui/keys/" (what) } {
            (csrf_field(&viewer.csrf))
            input type="hidden" name="key" value=(token);
            button class=(class) type="submit" { (what) }
        }
    }
}

/// `POST /ui/keys/{new,block,unblock,regenerate,delete}`.
pub(super) async fn act(
    state: &AppState,
    viewer: &Viewer,
    action: &str,
    form: &Form,
) -> Result<Response<ResponseBody>, ApiError> {
    if action == "new" {
        return create(state, viewer, form).await;
    }
    if action == "update" {
        return update(state, viewer, form).await;
    }
    let key = form.filled("key").ok_or(ApiError::MissingParam("key"))?;
    if !viewer.session.role.sees_all() {
        own_key(state, viewer, key).await?;
    }
    match action {
        "block" | "unblock" => {
            let path = if action == "block" {
                "/key/block"
            } else {
                "/key/unblock"
            };
            change(state, &viewer.session.user, path, &json!({ "key": key })).await?;
        }
        "delete" => {
            change(
                state,
                &viewer.session.user,
                "/key/delete",
                &json!({ "keys": [key] }),
            )
            .await?;
        }
        "regenerate" => {
            let made: IssuedKey = change_as(
                state,
                &viewer.session.user,
                "/key/regenerate",
                &json!({ "key": key }),
            )
            .await?;
            return Ok(issued(viewer, "Key regenerated", &made));
        }
        _ => {
            return Err(ApiError::RouteNotFound {
                method: "POST".into(),
                path: "/ui/keys/…".into(),
            })
        }
    }
    Ok(redirect("/ui/keys"))
}

/// Whether `viewer` may change `key`'s alias, models, budget, limits and expiry: a proxy admin
/// any key, a team admin their team's (an internal user may not lift their own key's limits).
fn edits(viewer: &Viewer, key: &KeyInfo) -> bool {
    let s = &viewer.session;
    (s.role.sees_all() && s.role.may_change())
        || viewer
            .team_admin
            .as_deref()
            .is_some_and(|t| key.team_id.as_deref() == Some(t))
}

/// A key from `/key/info`'s handler.
async fn key_info(state: &AppState, key: &str) -> Result<KeyInfo, ApiError> {
    let q = query(&[("key", key)]);
    Ok(crate::admin::keys::info(store(state)?, read(&q))
        .await?
        .info)
}

/// A key `viewer` may edit, from `/key/info`; any other is not found.
async fn editable(state: &AppState, viewer: &Viewer, key: &str) -> Result<KeyInfo, ApiError> {
    let k = key_info(state, key).await?;
    if edits(viewer, &k) {
        Ok(k)
    } else {
        Err(ApiError::NotFound {
            what: "key",
            id: String::new(),
        })
    }
}

/// `GET /ui/keys/edit?key=<hash>`: one key's alias, models, budget and period, limits and
/// expiry to change (team and user too for proxy admins).
pub(super) async fn edit_page(
    state: &AppState,
    viewer: &Viewer,
    q: &Form,
) -> Result<Markup, ApiError> {
    let key = q.filled("key").ok_or(ApiError::MissingParam("key"))?;
    let k = editable(state, viewer, key).await?;
    let all = viewer.session.role.sees_all();
    Ok(html! {
        p.muted { "Key " span.mono { (k.token) } " · spend " (usd(k.accounting.spend))
            " · " @match &k.expires { None => "never expires", Some(at) => { "expires " (at) } } }
        form.stack method="post" action="/ui/keys/update" {
            (csrf_field(&viewer.csrf))
            input type="hidden" name="key" value=(k.token);
            label for="key_alias" { "Alias" }
            input #key_alias name="key_alias" value=(or_empty(&k.key_alias));
            @if all {
                label for="team_id" { "Team" }
                input #team_id name="team_id" value=(or_empty(&k.team_id)) placeholder="none";
                label for="user_id" { "User" }
                input #user_id name="user_id" value=(or_empty(&k.user_id)) placeholder="none";
            }
            label for="models" { "Models" }
            input #models name="models" value=(k.models.join(", ")) placeholder="comma-separated; empty for all";
            label for="max_budget" { "Budget (USD)" }
            input #max_budget name="max_budget" value=(figure(k.limits.max_budget)) placeholder="no budget";
            label for="budget_duration" { "Budget period" }
            input #budget_duration name="budget_duration" value=(or_empty(&k.limits.budget_duration)) placeholder="none; or 1d, 30d";
            label for="rpm_limit" { "Requests per minute" }
            input #rpm_limit name="rpm_limit" value=(figure(k.limits.rpm_limit)) placeholder="no limit";
            label for="tpm_limit" { "Tokens per minute" }
            input #tpm_limit name="tpm_limit" value=(figure(k.limits.tpm_limit)) placeholder="no limit";
            label for="duration" { "Expires after (from now)" }
            input #duration name="duration" placeholder="empty: unchanged; or 30d, 12h";
            label { input name="no_expiry" type="checkbox" value="1"; " Never expires" }
            button type="submit" { "Save key" }
        }
    })
}

/// `POST /ui/keys/update`: the edit form through `/key/update`; blank fields clear their
/// limit (no budget, no limit, all models).
async fn update(
    state: &AppState,
    viewer: &Viewer,
    form: &Form,
) -> Result<Response<ResponseBody>, ApiError> {
    let key = form.filled("key").ok_or(ApiError::MissingParam("key"))?;
    editable(state, viewer, key).await?;
    let mut body = Map::new();
    body.insert("key".into(), key.into());
    let mut fields = vec!["key_alias", "budget_duration"];
    if viewer.session.role.sees_all() {
        fields.extend(["team_id", "user_id"]);
    }
    for f in fields {
        body.insert(f.into(), form.filled(f).map_or(Value::Null, Into::into));
    }
    let models: Vec<Value> = form
        .filled("models")
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .map(Value::from)
        .collect();
    body.insert("models".into(), models.into());
    for f in ["max_budget", "rpm_limit", "tpm_limit"] {
        body.insert(f.into(), super::number(form, f)?);
    }
    if form.get("no_expiry") == Some("1") {
        body.insert("duration".into(), Value::Null);
    } else if let Some(d) = form.filled("duration") {
        body.insert("duration".into(), d.into());
    }
    change(
        state,
        &viewer.session.user,
        "/key/update",
        &Value::Object(body),
    )
    .await?;
    Ok(redirect("/ui/keys"))
}

/// An internal user may act only on their own keys, a team admin on their team's.
async fn own_key(state: &AppState, viewer: &Viewer, key: &str) -> Result<(), ApiError> {
    let info = key_info(state, key).await?;
    let team_admin = viewer
        .team_admin
        .as_deref()
        .is_some_and(|t| info.team_id.as_deref() == Some(t));
    if team_admin || info.user_id.as_deref() == Some(viewer.session.user.as_str()) {
        Ok(())
    } else {
        Err(ApiError::NotFound {
            what: "key",
            id: String::new(),
        })
    }
}

/// Makes a key from the form through `/key/generate`; an internal user's key is theirs and
/// their team's, whatever the form says; a team admin's is their team's, for a member of it.
async fn create(
    state: &AppState,
    viewer: &Viewer,
    form: &Form,
) -> Result<Response<ResponseBody>, ApiError> {
    let mut body = Map::new();
    for field in ["key_alias", "duration", "budget_duration"] {
        if let Some(v) = form.filled(field) {
            body.insert(field.into(), v.into());
        }
    }
    if viewer.session.role.sees_all() {
        for field in ["team_id", "user_id"] {
            if let Some(v) = form.filled(field) {
                body.insert(field.into(), v.into());
            }
        }
    } else if let Some(team) = &viewer.team_admin {
        let member = form.filled("user_id").unwrap_or(&viewer.session.user);
        let members = state
            .store()
            .ok_or(ApiError::StoreUnavailable)?
            .store
            .team_members(team)
            .await
            .map_err(|_| ApiError::StoreUnavailable)?;
        if member != viewer.session.user && !members.iter().any(|m| m.user_id == member) {
            return Err(ApiError::InvalidParam {
                param: "user_id",
                message: format!("`{member}` is not a member of team {team}"),
            });
        }
        body.insert("user_id".into(), member.into());
        body.insert("team_id".into(), team.clone().into());
    } else {
        body.insert("user_id".into(), viewer.session.user.clone().into());
        if let Some(team) = team_of(state, &viewer.session.user).await? {
            body.insert("team_id".into(), team.into());
        }
    }
    if let Some(m) = form.filled("models") {
        let list: Vec<Value> = m
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(Value::from)
            .collect();
        body.insert("models".into(), Value::Array(list));
    }
    if let Some(b) = form.filled("max_budget") {
        let n: f64 = b.parse().map_err(|_| ApiError::InvalidParam {
            param: "max_budget",
            message: format!("`{b}` is not a number"),
        })?;
        body.insert("max_budget".into(), n.into());
    }
    for (field, name) in [("rpm_limit", "rpm_limit"), ("tpm_limit", "tpm_limit")] {
        if let Some(v) = form.filled(field) {
            let n: u64 = v.parse().map_err(|_| ApiError::InvalidParam {
                param: name,
                message: format!("`{v}` is not a whole number"),
            })?;
            body.insert(field.into(), n.into());
        }
    }
    let made: IssuedKey = change_as(
        state,
        &viewer.session.user,
        "/key/generate",
        &Value::Object(body),
    )
    .await?;
    Ok(issued(viewer, "Key created", &made))
}

/// The page that shows a new key's plaintext, the one time it is shown.
fn issued(viewer: &Viewer, title: &str, made: &IssuedKey) -> Response<ResponseBody> {
    let body = html! {
        p { "Copy the key now: sluice keeps only its hash and will not show it again." }
        p.secret.mono #new-key { (made.key) }
        p { "Alias: " (or_empty(&made.info.key_alias)) " · hash " span.mono { (made.info.token) } }
        p { a href="/ui/keys" { "Back to keys" } }
    };
    respond(StatusCode::OK, layout::page(title, Some(viewer), body))
}
