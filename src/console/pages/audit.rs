//! The audit log (admins only): the newest changes made through the management API and the
//! console, from `GET /audit`, each with its value before and after (secrets masked).

use http::Method;
use maud::{html, Markup};
use serde_json::Value;

use super::{admin, query, text};
use crate::console::Form;
use crate::server::AppState;
use sluice_core::error::ApiError;

/// `GET /ui/audit?table_name=&object_id=`.
pub(super) async fn page(state: &AppState, q: &Form) -> Result<Markup, ApiError> {
    let mut pairs = vec![("page_size", "200")];
    for f in ["table_name", "object_id", "changed_by"] {
        if let Some(v) = q.filled(f) {
            pairs.push((f, v));
        }
    }
    let log = admin(state, Method::GET, "/audit", &query(&pairs), &Value::Null).await?;
    let rows = log["audit_logs"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
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
                        td { (text(r, "updated_at")) }
                        td { (text(r, "changed_by")) }
                        td { (text(r, "action")) }
                        td { (text(r, "table_name")) }
                        td.mono { (text(r, "object_id")) }
                        td {
                            details {
                                summary { "values" }
                                @if !r["before_value"].is_null() { pre { (pretty(&r["before_value"])) } }
                                @if !r["updated_values"].is_null() { pre { (pretty(&r["updated_values"])) } }
                            }
                        }
                    }
                }
            }
        }
        @if rows.is_empty() { p.muted { "No changes recorded yet." } }
    })
}
