//! Teams and users (admins only), from `/team/list` and `/user/list`.

use http::Method;
use maud::{html, Markup};
use serde_json::Value;

use super::{admin, text, usd};
use crate::server::AppState;
use sluice_core::error::ApiError;

/// `GET /ui/teams`.
pub(super) async fn teams(state: &AppState) -> Result<Markup, ApiError> {
    let list = admin(
        state,
        Method::GET,
        "/team/list",
        "page_size=1000",
        &Value::Null,
    )
    .await?;
    let teams = list.as_array().map(Vec::as_slice).unwrap_or_default();
    Ok(html! {
        table #teams {
            thead { tr { th { "Team" } th { "Alias" } th.num { "Spend" } th.num { "Budget" } th.num { "RPM" } th { "Status" } } }
            tbody {
                @for t in teams {
                    tr {
                        td { (text(t, "team_id")) }
                        td { (text(t, "team_alias")) }
                        td.num { (usd(t["spend"].as_f64().unwrap_or(0.0))) }
                        td.num { (t["max_budget"].as_f64().map(usd).unwrap_or_default()) }
                        td.num { (text(t, "rpm_limit")) }
                        td { @if t["blocked"] == true { span.error { "blocked" } } @else { "active" } }
                    }
                }
            }
        }
    })
}

/// `GET /ui/users`.
pub(super) async fn users(state: &AppState) -> Result<Markup, ApiError> {
    let list = admin(
        state,
        Method::GET,
        "/user/list",
        "page_size=1000",
        &Value::Null,
    )
    .await?;
    let users = list["users"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    Ok(html! {
        table #users {
            thead { tr { th { "User" } th { "Email" } th { "Role" } th { "Team" } th.num { "Spend" } th.num { "Budget" } } }
            tbody {
                @for u in users {
                    tr {
                        td { (text(u, "user_id")) }
                        td { (text(u, "user_email")) }
                        td { (text(u, "user_role")) }
                        td { (text(u, "team_id")) }
                        td.num { (usd(u["spend"].as_f64().unwrap_or(0.0))) }
                        td.num { (u["max_budget"].as_f64().map(usd).unwrap_or_default()) }
                    }
                }
            }
        }
    })
}
