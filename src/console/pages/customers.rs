//! Customers, the end users a request names in its `user` field (admins only): the list from
//! `/customer/list`, a form that makes one through `/customer/new`, and an edit page that
//! changes (`/customer/update`) or deletes (`/customer/delete`) one. Their spend and budgets
//! are the pipeline's to enforce; this page only reads and sets them.

use http::Response;
use maud::{html, Markup};
use serde_json::{Map, Value};

use super::{change, figure, number, or_empty, query, read, removal, status_select, store, usd};
use crate::admin::answers::LimitFields;
use crate::console::layout::{csrf_field, redirect};
use crate::console::{Form, Viewer};
use crate::http::ResponseBody;
use crate::server::AppState;
use sluice_core::error::ApiError;

/// The limits an end user's form sets, each a number where blank is no limit.
const NUMBERS: [&str; 3] = ["max_budget", "rpm_limit", "tpm_limit"];

/// `GET /ui/customers`.
pub(super) async fn list(state: &AppState, viewer: &Viewer) -> Result<Markup, ApiError> {
    let customers = crate::admin::customers::list(store(state)?, read("page_size=1000")).await?;
    Ok(html! {
        table #customers {
            thead { tr {
                th { "End user" } th { "Alias" } th.num { "Spend" } th.num { "Budget" }
                th { "Period" } th.num { "RPM" } th.num { "TPM" } th { "Status" }
            } }
            tbody {
                @for c in &customers {
                    @let b = &c.litellm_budget_table.limits;
                    tr {
                        td { a href={ "/ui/customers/edit?" (query(&[("user_id", &c.user_id)])) } { (c.user_id) } }
                        td { (or_empty(&c.alias)) }
                        td.num { (usd(c.accounting.spend)) }
                        td.num { (b.max_budget.map(usd).unwrap_or_default()) }
                        td { (or_empty(&b.budget_duration)) }
                        td.num { (figure(b.rpm_limit)) }
                        td.num { (figure(b.tpm_limit)) }
                        td { @if c.blocked { span.error { "blocked" } } @else { "active" } }
                    }
                }
            }
        }
        @if viewer.session.role.may_change() {
            h2 { "New end user" }
            form.stack method="post" action="/ui/customers/new" {
                (csrf_field(&viewer.csrf))
                label for="user_id" { "End user id (the request's " code { "user" } ")" }
                input #user_id name="user_id" required;
                label for="alias" { "Alias" }
                input #alias name="alias";
                (limit_fields(&LimitFields::default()))
                button type="submit" { "Create end user" }
            }
        }
    })
}

/// The budget, period, rpm and tpm inputs, filled from `budget` (LiteLLM's
/// `litellm_budget_table`; empty for a new end user).
fn limit_fields(budget: &LimitFields) -> Markup {
    html! {
        label for="max_budget" { "Budget (USD)" }
        input #max_budget name="max_budget" value=(figure(budget.max_budget)) placeholder="no budget";
        label for="budget_duration" { "Budget period" }
        input #budget_duration name="budget_duration" value=(or_empty(&budget.budget_duration)) placeholder="none; or 1d, 30d, 1mo";
        label for="rpm_limit" { "Requests per minute" }
        input #rpm_limit name="rpm_limit" value=(figure(budget.rpm_limit)) placeholder="no limit";
        label for="tpm_limit" { "Tokens per minute" }
        input #tpm_limit name="tpm_limit" value=(figure(budget.tpm_limit)) placeholder="no limit";
    }
}

/// `GET /ui/customers/edit?user_id=`: the end user's fields to change, and its deletion.
pub(super) async fn edit_page(
    state: &AppState,
    viewer: &Viewer,
    q: &Form,
) -> Result<Markup, ApiError> {
    let id = q
        .filled("user_id")
        .ok_or(ApiError::MissingParam("user_id"))?;
    let q = query(&[("end_user_id", id)]);
    let c = crate::admin::customers::info(store(state)?, read(&q)).await?;
    let b = &c.litellm_budget_table.limits;
    Ok(html! {
        p #spend {
            "Spend " (usd(c.accounting.spend))
            " · budget " (b.max_budget.map(usd).unwrap_or_else(|| "none".into()))
            @if let Some(d) = &b.budget_duration { " per " (d) }
            " · " @if c.blocked { span.error { "blocked" } } @else { "active" }
        }
        @if viewer.session.role.may_change() {
            form.stack method="post" action="/ui/customers/update" {
                (csrf_field(&viewer.csrf))
                input type="hidden" name="user_id" value=(id);
                label for="alias" { "Alias" }
                input #alias name="alias" value=(or_empty(&c.alias));
                (limit_fields(b))
                (status_select(c.blocked, "its requests are"))
                button type="submit" { "Save end user" }
            }
            (removal(viewer, "Delete", "/ui/customers/delete", ("user_id", id), "delete-customer", "Delete end user"))
        }
    })
}

/// `POST /ui/customers/new|update|delete`: the form as the management API's body; then back
/// to the list. A blank limit or period is none (`null`), so clearing a field removes it.
pub(super) async fn act(
    state: &AppState,
    viewer: &Viewer,
    sub: &str,
    form: &Form,
) -> Result<Response<ResponseBody>, ApiError> {
    let id = form
        .filled("user_id")
        .ok_or(ApiError::MissingParam("user_id"))?;
    let mut body = Map::new();
    let path = match sub {
        "/customers/new" | "/customers/update" => {
            body.insert("user_id".into(), id.into());
            body.insert(
                "alias".into(),
                form.filled("alias").map_or(Value::Null, Into::into),
            );
            for f in NUMBERS {
                body.insert(f.into(), number(form, f)?);
            }
            body.insert(
                "budget_duration".into(),
                form.filled("budget_duration")
                    .map_or(Value::Null, Into::into),
            );
            if sub == "/customers/new" {
                "/customer/new"
            } else {
                body.insert(
                    "blocked".into(),
                    (form.get("blocked") == Some("true")).into(),
                );
                "/customer/update"
            }
        }
        "/customers/delete" => {
            body.insert("user_ids".into(), vec![Value::from(id)].into());
            "/customer/delete"
        }
        _ => {
            return Err(ApiError::RouteNotFound {
                method: "POST".into(),
                path: format!("/ui{sub}"),
            })
        }
    };
    change(state, &viewer.session.user, path, &Value::Object(body)).await?;
    Ok(redirect("/ui/customers"))
}
