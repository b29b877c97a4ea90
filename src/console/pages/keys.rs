//! Virtual keys: the list (an internal user's own only, a team admin's team's), a form to make
//! one, an edit page (proxy admins and team admins), and block, unblock, regenerate and
//! delete, each through the management API's own `/key/*` handler.
//!
//! A new or regenerated key's plaintext is shown once, on `/ui/keys/created`: the post answers
//! with a redirect there (so Back and reload never make another key), and the key goes with it
//! in the sealed flash cookie (`crate::console::flash`), never in a URL.

use http::Response;
use maud::{html, Markup};
use serde_json::{json, Map, Value};

use super::fields::{self, count, field, period, pick, text, usd as usd_field, Draft, Reader};
use super::names::{Names, Wanted};
use super::{
    change, change_as, figure, or_empty, pickers, query, read, refused_by, store, team_of, usd,
    Refused,
};
use crate::admin::answers::keys::{IssuedKey, KeyInfo};
use crate::console::flash::{Flash, Revealed};
use crate::console::layout::{csrf_field, redirect_with};
use crate::console::{Form, Viewer};
use crate::http::ResponseBody;
use crate::server::{AppState, Snapshot};
use sluice_core::error::ApiError;

/// Keys on one page.
const PAGE_SIZE: &str = "100";

/// `GET /ui/keys`.
pub(super) async fn page(
    state: &AppState,
    snap: &Snapshot,
    viewer: &Viewer,
    q: &Form,
    draft: &Draft<'_>,
) -> Result<Markup, ApiError> {
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
    let mut wanted = Wanted::default();
    for k in &keys {
        wanted.team(or_empty(&k.team_id)).user(or_empty(&k.user_id));
    }
    let names = Names::of(state, &wanted).await;
    let may_change = s.role.may_change();
    Ok(html! {
        @let current = list.current_page;
        @let pages = list.total_pages.max(1);
        @if keys.is_empty() && current <= 1 {
            p.muted #empty {
                "No keys yet. "
                @if may_change { "Make one with the form below: it is shown once, then only its hash is kept." }
                @else { "Your role may not make keys: ask an admin for one." }
            }
        } @else {
            p.muted {
                (list.total_count) " keys · page " (current) " of " (pages)
                @if current > 1 { " · " a href={ "/ui/keys?page=" (current - 1) } { "previous" } }
                @if current < pages { " · " a href={ "/ui/keys?page=" (current + 1) } { "next" } }
            }
            table #keys {
                thead { tr {
                    th { "Alias" } th { "Key" } th { "Team" } th { "User" } th { "Models" }
                    th.num { "Spend" } th.num { "Budget" } th.num { "RPM" } th { "Status" }
                    @if may_change { th { "" } }
                } }
                tbody {
                    @for k in keys {
                        @let token = &k.token;
                        tr {
                            td { (name(or_empty(&k.key_alias))) }
                            td.mono title=(token) { (k.key_name) }
                            td { (names.team_link(or_empty(&k.team_id), viewer)) }
                            td { (names.user_link(or_empty(&k.user_id), viewer)) }
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
        }
        @if may_change {
            h2 #new { "New key" }
            (new_form(state, snap, viewer, &draft.for_form("/keys/new")).await?)
        }
    })
}

/// A name in a table cell: cut to its column when long, whole in its title.
pub(super) fn name(v: &str) -> Markup {
    html! { span.name title=(v) { (v) } }
}

/// The new-key form. Team and user are the admins' to pick; a team admin picks one of their
/// team's members; an internal user's keys are always their own.
async fn new_form(
    state: &AppState,
    snap: &Snapshot,
    viewer: &Viewer,
    d: &Draft<'_>,
) -> Result<Markup, ApiError> {
    let all = viewer.session.role.sees_all();
    let (teams, users) = if all {
        (pickers::teams(state).await?, pickers::users(state).await?)
    } else {
        (Vec::new(), Vec::new())
    };
    let members = match &viewer.team_admin {
        Some(team) if !all => pickers::members(state, team).await?,
        _ => Vec::new(),
    };
    let offered = pickers::models(snap);
    Ok(html! {
        form.stack method="post" action="/ui/keys/new" {
            (d.summary())
            (csrf_field(&viewer.csrf))
            (text(d, field("key_alias", "Alias").hint("e.g. billing-service"), ""))
            @if all {
                (pick(d, field("team_id", "Team"), &teams, "", Some("none")))
                (pick(d, field("user_id", "User"), &users, "", Some("none")))
            } @else if viewer.team_admin.is_some() {
                (pick(d, field("user_id", "For member"), &members, "", Some("you")))
            }
            (fields::models(d, field("models", "Models"), &offered, &[]))
            (usd_field(d, field("max_budget", "Budget (USD)").hint("no budget"), ""))
            (period(d, field("budget_duration", "Budget period").hint("none; or 1d, 30d, 1mo"), ""))
            (count(d, field("rpm_limit", "Requests per minute").hint("no limit"), ""))
            (count(d, field("tpm_limit", "Tokens per minute").hint("no limit"), ""))
            (text(d, field("duration", "Expires after").hint("never; or 30d, 12h"), ""))
            button type="submit" { "Create key" }
        }
    })
}

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

/// `POST /ui/keys/{new,update,block,unblock,regenerate,delete}`.
pub(super) async fn act(
    state: &AppState,
    viewer: &Viewer,
    action: &str,
    form: &Form,
) -> Result<Response<ResponseBody>, Refused> {
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
    let by = &viewer.session.user;
    let done = match action {
        "block" => {
            change(state, by, "/key/block", &json!({ "key": key })).await?;
            "Key blocked: its requests are refused until it is unblocked."
        }
        "unblock" => {
            change(state, by, "/key/unblock", &json!({ "key": key })).await?;
            "Key unblocked."
        }
        "delete" => {
            change(state, by, "/key/delete", &json!({ "keys": [key] })).await?;
            "Key deleted."
        }
        "regenerate" => {
            let made: IssuedKey =
                change_as(state, by, "/key/regenerate", &json!({ "key": key })).await?;
            return Ok(issued(&made, true));
        }
        _ => {
            return Err(ApiError::RouteNotFound {
                method: "POST".into(),
                path: "/ui/keys/…".into(),
            }
            .into())
        }
    };
    Ok(redirect_with("/ui/keys", Flash::notice(done)))
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
    snap: &Snapshot,
    viewer: &Viewer,
    q: &Form,
    draft: &Draft<'_>,
) -> Result<Markup, ApiError> {
    let key = q.filled("key").ok_or(ApiError::MissingParam("key"))?;
    let k = editable(state, viewer, key).await?;
    let all = viewer.session.role.sees_all();
    let (teams, users) = if all {
        (pickers::teams(state).await?, pickers::users(state).await?)
    } else {
        (Vec::new(), Vec::new())
    };
    let offered = pickers::models(snap);
    let d = &draft.for_form("/keys/update");
    Ok(html! {
        p.muted { "Key " span.mono { (k.token) } " · spend " (usd(k.accounting.spend))
            " · " @match &k.expires { None => "never expires", Some(at) => { "expires " (at) } } }
        form.stack method="post" action="/ui/keys/update" {
            (d.summary())
            (csrf_field(&viewer.csrf))
            input type="hidden" name="key" value=(k.token);
            (text(d, field("key_alias", "Alias"), or_empty(&k.key_alias)))
            @if all {
                (pick(d, field("team_id", "Team"), &teams, or_empty(&k.team_id), Some("none")))
                (pick(d, field("user_id", "User"), &users, or_empty(&k.user_id), Some("none")))
            }
            (fields::models(d, field("models", "Models"), &offered, &k.models))
            (usd_field(d, field("max_budget", "Budget (USD)").hint("no budget"), &figure(k.limits.max_budget)))
            (period(d, field("budget_duration", "Budget period").hint("none; or 1d, 30d, 1mo"), or_empty(&k.limits.budget_duration)))
            (count(d, field("rpm_limit", "Requests per minute").hint("no limit"), &figure(k.limits.rpm_limit)))
            (count(d, field("tpm_limit", "Tokens per minute").hint("no limit"), &figure(k.limits.tpm_limit)))
            (text(d, field("duration", "Expires after (from now)").hint("empty: unchanged; or 30d, 12h"), ""))
            label.wide { input name="no_expiry" type="checkbox" value="1" checked[d.checked("no_expiry", false)]; " Never expires" }
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
) -> Result<Response<ResponseBody>, Refused> {
    let key = form.filled("key").ok_or(ApiError::MissingParam("key"))?;
    editable(state, viewer, key).await?;
    let mut r = Reader::new(form);
    let mut body = Map::new();
    body.insert("key".into(), key.into());
    body.insert("key_alias".into(), r.text_or_null("key_alias"));
    if viewer.session.role.sees_all() {
        for f in ["team_id", "user_id"] {
            body.insert(f.into(), r.text_or_null(f));
        }
    }
    body.insert("models".into(), r.models("models").into());
    body.insert("max_budget".into(), r.usd("max_budget"));
    body.insert("budget_duration".into(), r.period("budget_duration"));
    for f in ["rpm_limit", "tpm_limit"] {
        body.insert(f.into(), r.count(f));
    }
    if form.get("no_expiry") == Some("1") {
        body.insert("duration".into(), Value::Null);
    } else if let Some(d) = r.filled("duration") {
        body.insert("duration".into(), d.into());
    }
    r.finish()?;
    change(
        state,
        &viewer.session.user,
        "/key/update",
        &Value::Object(body),
    )
    .await
    .map_err(refused_by("key_alias"))?;
    Ok(redirect_with("/ui/keys", Flash::notice("Key saved.")))
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
) -> Result<Response<ResponseBody>, Refused> {
    let mut r = Reader::new(form);
    let mut body = Map::new();
    for f in ["key_alias", "duration"] {
        if let Some(v) = r.filled(f) {
            body.insert(f.into(), v.into());
        }
    }
    if viewer.session.role.sees_all() {
        for f in ["team_id", "user_id"] {
            if let Some(v) = r.filled(f) {
                body.insert(f.into(), v.into());
            }
        }
    } else if let Some(team) = &viewer.team_admin {
        let member = r.filled("user_id").unwrap_or(&viewer.session.user);
        let members = store(state)?
            .team_members(team)
            .await
            .map_err(|_| ApiError::StoreUnavailable)?;
        if member != viewer.session.user && !members.iter().any(|m| m.user_id == member) {
            r.problem(
                "user_id",
                format!("`{member}` is not a member of team {team}"),
            );
        }
        body.insert("user_id".into(), member.into());
        body.insert("team_id".into(), team.clone().into());
    } else {
        body.insert("user_id".into(), viewer.session.user.clone().into());
        if let Some(team) = team_of(state, &viewer.session.user).await? {
            body.insert("team_id".into(), team.into());
        }
    }
    let models = r.models("models");
    if !models.is_empty() {
        body.insert("models".into(), models.into());
    }
    let limits = [
        ("max_budget", r.usd("max_budget")),
        ("budget_duration", r.period("budget_duration")),
        ("rpm_limit", r.count("rpm_limit")),
        ("tpm_limit", r.count("tpm_limit")),
    ];
    fields::given(&mut body, limits);
    r.finish()?;
    let made: IssuedKey = change_as(
        state,
        &viewer.session.user,
        "/key/generate",
        &Value::Object(body),
    )
    .await
    .map_err(refused_by("key_alias"))?;
    Ok(issued(&made, false))
}

/// Off to the page that shows a new key's plaintext, the key sealed in the flash beside the
/// redirect.
fn issued(made: &IssuedKey, regenerated: bool) -> Response<ResponseBody> {
    let flash = Flash {
        key: Some(Revealed {
            key: made.key.clone(),
            token: made.info.token.clone(),
            alias: made.info.key_alias.clone(),
            regenerated,
        }),
        ..Flash::default()
    };
    redirect_with("/ui/keys/created", flash)
}

/// `GET /ui/keys/created`: the key the post before made, the one time it is shown; after
/// that (a reload, Back and forward again), a page that says it was shown.
pub(super) fn created(made: Option<&Revealed>) -> (&'static str, Markup) {
    let Some(made) = made else {
        return (
            "Key shown once",
            html! {
                p #shown { "This page showed a new key once; sluice keeps only its hash and cannot show it again." }
                p { "If it was not copied, regenerate the key from the list: the new one is shown here once." }
                p { a #back href="/ui/keys" { "Back to keys" } }
            },
        );
    };
    let title = if made.regenerated {
        "Key regenerated"
    } else {
        "Key created"
    };
    (
        title,
        html! {
            p { "Copy the key now: sluice keeps only its hash and will not show it again (not on reload either)." }
            p.secret.mono #new-key { (made.key) }
            p { "Alias: " (made.alias.as_deref().unwrap_or_default()) " · hash " span.mono { (made.token) } }
            p { a #back href="/ui/keys" { "Back to keys" } }
        },
    )
}
