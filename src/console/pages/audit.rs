//! The audit log (admins only): the newest changes made through the management API and the
//! console, from `GET /audit`, each with its value before and after (secrets masked).

use maud::{html, Markup};
use serde_json::Value;

use super::{query, read, store};
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
    let log = crate::admin::audit::list(store(state)?, read(&query(&pairs))).await?;
    let rows = &log.audit_logs;
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
                        td { (r.changed_by) }
                        td { (r.action) }
                        td { (r.table_name) }
                        td.mono { (r.object_id) }
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
