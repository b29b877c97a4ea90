//! Request logs from the spend log (`/spend/logs`), newest first: look one up by request id
//! (the `x-request-id` a client saw), or show only the failed ones. An internal user sees
//! the requests made with their keys.

use http::Method;
use maud::{html, Markup};
use serde_json::Value;

use super::{admin, query, short, text, usd};
use crate::console::{Form, Viewer};
use crate::server::AppState;
use sluice_core::error::ApiError;

/// Rows read per page.
const ROWS: &str = "200";

/// `GET /ui/logs?request_id=&failed=1`.
pub(super) async fn page(state: &AppState, viewer: &Viewer, q: &Form) -> Result<Markup, ApiError> {
    let request_id = q.filled("request_id");
    let failed = q.filled("failed").is_some();
    let mut pairs = vec![("limit", ROWS)];
    if let Some(id) = request_id {
        pairs.push(("request_id", id));
    }
    if !viewer.session.role.sees_all() {
        pairs.push(("user_id", viewer.session.user.as_str()));
    }
    let logs = admin(
        state,
        Method::GET,
        "/spend/logs",
        &query(&pairs),
        &Value::Null,
    )
    .await?;
    let logs: Vec<&Value> = logs
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter(|l| !failed || l["status"] != "success")
        .collect();
    Ok(html! {
        form.filters method="get" action="/ui/logs" {
            label for="request_id" { "Request id" }
            input #request_id name="request_id" value=(request_id.unwrap_or_default()) size="40";
            label { input type="checkbox" name="failed" value="1" checked[failed]; " failed only" }
            button.quiet type="submit" { "Look up" }
        }
        @if logs.is_empty() {
            p.muted { "No requests match." }
        } @else {
            table #logs {
                thead { tr {
                    th { "Started" } th { "Request id" } th { "Status" } th { "Model group" } th { "Deployment" }
                    th { "Key" } th { "Team" } th.num { "Tokens in / out" } th.num { "Spend" } th.num { "TTFB" }
                } }
                tbody {
                    @for l in &logs {
                        @let status = text(l, "status");
                        tr {
                            td { (text(l, "startTime")) }
                            td.mono { a href={ "/ui/logs?request_id=" (text(l, "request_id")) } { (text(l, "request_id")) } }
                            td class={ "state-" (status) } { (status) }
                            td { (text(l, "model_group")) }
                            td.mono { (text(l, "model_id")) }
                            td.mono { @let k = text(l, "api_key"); (short(&k)) }
                            td { (text(l, "team_id")) }
                            td.num { (text(l, "prompt_tokens")) " / " (text(l, "completion_tokens")) }
                            td.num { (usd(l["spend"].as_f64().unwrap_or(0.0))) }
                            td.num { @if let Some(t) = l["ttfb_ms"].as_u64() { (t) " ms" } }
                        }
                    }
                }
            }
        }
        p.muted { "From the spend log: requests reach it when the spend writer's batch lands (proxy_batch_write_at)." }
    })
}
