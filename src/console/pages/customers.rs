//! Customers, the end users a request names in its `user` field (admins only): the list from
//! `/customer/list`, a form that makes one through `/customer/new`, and an edit page that
//! changes (`/customer/update`) or deletes (`/customer/delete`) one. Their spend and budgets
//! are the pipeline's to enforce; this page only reads and sets them.

use http::Response;
use maud::{html, Markup};
use serde_json::{Map, Value};

use super::fields::{count, field, period, required, text, usd as usd_field, Draft, Reader};
use super::keys::name;
use super::{
    figure, not_found, or_empty, query, read, removal, status_select, store, submit, usd, Refused,
};
use crate::admin::answers::LimitFields;
use crate::console::layout::csrf_field;
use crate::console::{Form, Viewer};
use crate::http::ResponseBody;
use crate::server::AppState;
use sluice_core::error::ApiError;

/// `GET /ui/customers`.
pub(super) async fn list(
    state: &AppState,
    viewer: &Viewer,
    draft: &Draft<'_>,
) -> Result<Markup, ApiError> {
    let customers = crate::admin::customers::list(store(state)?, read("page_size=1000")).await?;
    let d = &draft.for_form("/customers/new");
    Ok(html! {
        @if customers.is_empty() {
            p.muted #empty { "No end users yet. They are the " code { "user" } " a request names: give one a budget or rate limit below, and requests made for them with a virtual key are held to it." }
        } @else {
        table #customers {
            thead { tr {
                th { "End user" } th { "Alias" } th.num { "Spend" } th.num { "Budget" }
                th { "Period" } th.num { "RPM" } th.num { "TPM" } th { "Status" }
            } }
            tbody {
                @for c in &customers {
                    @let b = &c.litellm_budget_table.limits;
                    tr {
                        td { a href={ "/ui/customers/edit?" (query(&[("user_id", &c.user_id)])) } { (name(&c.user_id)) } }
                        td { (name(or_empty(&c.alias))) }
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
        }
        @if viewer.session.role.may_change() {
            h2 #new { "New end user" }
            form.stack method="post" action="/ui/customers/new" {
                (d.summary())
                (csrf_field(&viewer.csrf))
                (required(d, field("user_id", "End user id (the request's user)"), ""))
                (text(d, field("alias", "Alias"), ""))
                (limit_fields(d, &LimitFields::default()))
                button type="submit" { "Create end user" }
            }
        }
    })
}

/// The budget, period, rpm and tpm inputs, filled from `budget` (LiteLLM's
/// `litellm_budget_table`; empty for a new end user) or as typed.
fn limit_fields(d: &Draft<'_>, budget: &LimitFields) -> Markup {
    html! {
        (usd_field(d, field("max_budget", "Budget (USD)").hint("no budget"), &figure(budget.max_budget)))
        (period(d, field("budget_duration", "Budget period").hint("none; or 1d, 30d, 1mo"), or_empty(&budget.budget_duration)))
        (count(d, field("rpm_limit", "Requests per minute").hint("no limit"), &figure(budget.rpm_limit)))
        (count(d, field("tpm_limit", "Tokens per minute").hint("no limit"), &figure(budget.tpm_limit)))
    }
}

/// `GET /ui/customers/edit?user_id=`: the end user's fields to change, and its deletion.
pub(super) async fn edit_page(
    state: &AppState,
    viewer: &Viewer,
    q: &Form,
    draft: &Draft<'_>,
) -> Result<Markup, ApiError> {
    let id = q
        .filled("user_id")
        .ok_or(ApiError::MissingParam("user_id"))?;
    let q = query(&[("end_user_id", id)]);
    let c = crate::admin::customers::info(store(state)?, read(&q)).await?;
    let b = &c.litellm_budget_table.limits;
    let d = &draft.for_form("/customers/update");
    Ok(html! {
        p #spend {
            "Spend " (usd(c.accounting.spend))
            " · budget " (b.max_budget.map(usd).unwrap_or_else(|| "none".into()))
            @if let Some(d) = &b.budget_duration { " per " (d) }
            " · " @if c.blocked { span.error { "blocked" } } @else { "active" }
        }
        @if viewer.session.role.may_change() {
            form.stack method="post" action="/ui/customers/update" {
                (d.summary())
                (csrf_field(&viewer.csrf))
                input type="hidden" name="user_id" value=(id);
                (text(d, field("alias", "Alias"), or_empty(&c.alias)))
                (limit_fields(d, b))
                (status_select(d, c.blocked, "its requests are"))
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
) -> Result<Response<ResponseBody>, Refused> {
    let mut r = Reader::new(form);
    let id = r.required("user_id").unwrap_or_default();
    let mut body = Map::new();
    let (path, done) = match sub {
        "/customers/new" | "/customers/update" => {
            body.insert("user_id".into(), id.into());
            body.insert("alias".into(), r.text_or_null("alias"));
            body.insert("max_budget".into(), r.usd("max_budget"));
            body.insert("budget_duration".into(), r.period("budget_duration"));
            for f in ["rpm_limit", "tpm_limit"] {
                body.insert(f.into(), r.count(f));
            }
            if sub == "/customers/new" {
                ("/customer/new", format!("End user {id} created."))
            } else {
                body.insert(
                    "blocked".into(),
                    (form.get("blocked") == Some("true")).into(),
                );
                ("/customer/update", format!("End user {id} saved."))
            }
        }
        "/customers/delete" => {
            body.insert("user_ids".into(), vec![Value::from(id)].into());
            ("/customer/delete", format!("End user {id} deleted."))
        }
        _ => return Err(not_found("POST", sub).into()),
    };
    r.finish()?;
    submit(
        state,
        viewer,
        (path, body),
        ("/ui/customers", done),
        "user_id",
    )
    .await
}
