//! Models and deployments with their live state: the same routing atomics `/health` and the
//! routing itself read (cooling down, in flight, latency, this minute's use), read now.

use maud::{html, Markup};

use crate::server::health::deployments;
use crate::server::Snapshot;

/// `GET /ui/models`.
pub(super) fn page(snap: &Snapshot) -> Markup {
    let list = deployments(&snap.router);
    html! {
        p.muted { "Routing strategy: " (snap.router.policy.strategy.name()) ". Read from the live routing state when this page was drawn." }
        table #deployments {
            thead { tr {
                th { "Model group" } th { "Deployment" } th { "Provider" } th { "State" }
                th.num { "In flight" } th.num { "Latency" } th.num { "Requests / min" }
                th.num { "Tokens / min" } th.num { "Successes" } th.num { "Failures" } th { "Last failure" }
            } }
            tbody {
                @for d in &list {
                    tr {
                        td { (d.model_name) }
                        td.mono { (d.model_id) }
                        td { (d.provider) }
                        td class={ "state-" (d.state) } {
                            (d.state)
                            @if let Some(s) = d.cooldown_remaining_s.filter(|s| *s > 0.0) {
                                " (" (format!("{s:.0}")) " s)"
                            }
                        }
                        td.num { (d.in_flight) }
                        td.num { @if let Some(l) = d.latency_ms { (format!("{l:.0} ms")) } }
                        td.num { (d.requests_this_minute) }
                        td.num { (d.tokens_this_minute) }
                        td.num { (d.successes) }
                        td.num { (d.failures) }
                        td { (d.last_failure.unwrap_or_default()) }
                    }
                }
            }
        }
    }
}
