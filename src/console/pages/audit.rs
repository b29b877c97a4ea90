//! The audit log (admins only): the newest changes made through the management API and the
//! console, from `GET /audit`, each with its value before and after (secrets masked). Keys,
//! teams and users are shown by name and linked to their pages (`names`).

use maud::{html, Markup};
use serde_json::Value;

use super::names::{Names, Wanted};
use super::{query, read, store};
use crate::console::{Form, Viewer};
use crate::server::AppState;
use sluice_core::error::ApiError;

/// `GET /ui/audit?table_name=&object_id=`.
pub(super) async fn page(state: &AppState, viewer: &Viewer, q: &Form) -> Result<Markup, ApiError> {
    let mut pairs = vec![("page_size", "200")];
    for f in ["table_name", "object_id", "changed_by"] {
        if let Some(v) = q.filled(f) {
            pairs.push((f, v));
        }
    }
    let log = crate::admin::audit::list(store(state)?, read(&query(&pairs))).await?;
    let rows = &log.audit_logs;
    let mut wanted = Wanted::default();
    for r in rows {
        match r.table_name.as_str() {
            "keys" => wanted.key(&r.object_id),
            "teams" => wanted.team(&r.object_id),
            "users" => wanted.user(&r.object_id),
            _ => &mut wanted,
        }
        .user(&r.changed_by);
    }
    let names = Names::of(state, &wanted).await;
    let object = |table: &str, id: &str| match table {
        "keys" => names.key_link(id),
        "teams" => names.team_link(id, viewer),
        "users" => names.user_link(id, viewer),
        "end_users" => {
            html! { a href={ "/ui/customers/edit?" (query(&[("user_id", id)])) } { (id) } }
        }
        _ => html! { span.mono { (id) } },
    };
    let pretty = |v: &Value| serde_json::to_string_pretty(v).unwrap_or_default();
    Ok(html! {
        form.filters method="get" action="/ui/audit" {
            select name="table_name" {
                option value="" { "every table" }
                @for t in ["keys", "teams", "users", "end_users"] {
                    option value=(t) selected[q.get("table_name") == Some(t)] { (t) }
                }
            }
            input name="object_id" placeholder="object id" value=(q.get("object_id").unwrap_or_default());
            input name="changed_by" placeholder="changed by" value=(q.get("changed_by").unwrap_or_default());
            button type="submit" { "Filter" }
        }
        table #audit {
            thead { tr { th { "When (UTC)" } th { "By" } th { "Action" } th { "Table" } th { "Object" } th { "Before → after" } } }
            tbody {
                @for r in rows {
                    tr {
                        td { (r.updated_at.as_deref().unwrap_or_default()) }
                        td { (names.user_link(&r.changed_by, viewer)) }
                        td { (r.action) }
                        td { (r.table_name) }
                        td { (object(&r.table_name, &r.object_id)) }
                        td {
                            details {
                                summary { "values" }
                                @for v in [&r.before_value, &r.updated_values].into_iter().flatten() {
                                    @if !v.is_null() { pre { (pretty(v)) } }
                                }
                            }
                        }
                    }
                }
            }
        }
        @if rows.is_empty() { p.muted { "No changes recorded yet." } }
    })
}
