//! `GET /health` (master key): every deployment's routing state, read from the live atomics,
//! and, with `background_health_checks`, its last probe's verdict (LiteLLM's
//! `healthy_endpoints` / `unhealthy_endpoints`). Unlike LiteLLM's `/health`, it makes no
//! upstream calls itself: it reports what traffic and the fleet's last round have shown.

use bytes::Bytes;
use serde::Serialize;

use sluice_routing::{now_ms, Availability, Router};

use crate::probes::{Plan, Round, Verdict};

/// One deployment's live routing state (also the console's models page).
#[derive(Serialize)]
pub(crate) struct Deployment<'a> {
    pub(crate) model_name: &'a str,
    pub(crate) model_id: &'a str,
    pub(crate) provider: &'static str,
    /// `healthy`, `probing`, `cooling_down`, or `not_configured`: its provider needs a key
    /// and the config gives it none (nothing sent to it could succeed).
    pub(crate) state: &'static str,
    pub(crate) cooldown_remaining_s: Option<f64>,
    pub(crate) in_flight: u32,
    pub(crate) latency_ms: Option<f64>,
    pub(crate) requests_this_minute: u64,
    pub(crate) tokens_this_minute: u64,
    pub(crate) successes: u64,
    pub(crate) failures: u64,
    pub(crate) last_failure: Option<&'static str>,
    /// The last health check's verdict, when health checks run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) last_check: Option<&'a Verdict>,
}

#[derive(Serialize)]
struct View<'a> {
    routing_strategy: &'static str,
    healthy_count: usize,
    unhealthy_count: usize,
    deployments: Vec<Deployment<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    background_health_checks: Option<Checked<'a>>,
    /// LiteLLM's lists: the deployments the last round found answering, and the others.
    #[serde(skip_serializing_if = "Option::is_none")]
    healthy_endpoints: Option<Vec<&'a Verdict>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    unhealthy_endpoints: Option<Vec<&'a Verdict>>,
}

/// The health checks' side of the view.
#[derive(Serialize)]
struct Checked<'a> {
    interval_s: f64,
    /// When the last round ended (ms since the epoch), and which instance probed.
    checked_at: Option<u64>,
    checked_by: Option<&'a str>,
    probe_spend_today_usd: f64,
    max_spend_per_day_usd: f64,
}

/// What the health checks add to the view: their plan, last round and today's spend.
pub struct Probes<'a> {
    /// The serving config's plan.
    pub plan: &'a Plan,
    /// The last round applied here.
    pub round: Option<&'a Round>,
    /// Today's probe spend, USD.
    pub spent: f64,
}

/// The health view as JSON.
pub fn view(router: &Router, probes: Option<Probes<'_>>) -> Bytes {
    let mut deployments = deployments(router);
    let healthy = deployments.iter().filter(|d| d.state == "healthy").count();
    let round = probes.as_ref().and_then(|p| p.round);
    if let Some(r) = round {
        for d in &mut deployments {
            d.last_check = r.verdicts.iter().find(|v| v.model_id == d.model_id);
        }
    }
    let listed = |healthy: bool| {
        round.map(|r| {
            r.verdicts
                .iter()
                .filter(|v| v.healthy == Some(healthy))
                .collect()
        })
    };
    let view = View {
        routing_strategy: router.policy.strategy.name(),
        healthy_count: healthy,
        unhealthy_count: deployments.len() - healthy,
        deployments,
        background_health_checks: probes.as_ref().map(|p| Checked {
            interval_s: p.plan.settings.interval.as_secs_f64(),
            checked_at: p.round.map(|r| r.checked_at),
            checked_by: p.round.map(|r| r.checked_by.as_str()),
            probe_spend_today_usd: p.spent,
            max_spend_per_day_usd: p.plan.settings.max_spend_per_day,
        }),
        healthy_endpoints: listed(true),
        unhealthy_endpoints: listed(false),
    };
    Bytes::from(serde_json::to_vec(&view).unwrap_or_default())
}

/// The state of a deployment whose provider needs a key the config does not give it.
pub(crate) const NOT_CONFIGURED: &str = "not_configured";

/// Every deployment's state, read from the routing atomics now.
pub(crate) fn deployments(router: &Router) -> Vec<Deployment<'_>> {
    let now = now_ms();
    let mut deployments = Vec::new();
    for group in router.models.groups() {
        for m in group.members() {
            let (state, remaining) = match m.health.availability(now) {
                _ if m.target.key_missing => (NOT_CONFIGURED, None),
                Availability::Ready => ("healthy", None),
                Availability::Probe => ("probing", Some(0.0)),
                Availability::Cooling(d) => ("cooling_down", Some(d.as_secs_f64())),
            };
            let (requests, tokens) = m.health.usage(now);
            let (successes, failures, last) = m.health.totals();
            deployments.push(Deployment {
                model_name: &group.name,
                model_id: &m.target.info.id,
                provider: m.target.provider.name(),
                state,
                cooldown_remaining_s: remaining,
                in_flight: m.health.in_flight(),
                latency_ms: m.health.latency().map(|d| d.as_secs_f64() * 1e3),
                requests_this_minute: requests,
                tokens_this_minute: tokens,
                successes,
                failures,
                last_failure: last.map(|k| k.name()),
                last_check: None,
            });
        }
    }
    deployments
}

/// `/health`: every deployment's state and the latest probe round, behind the master key.
pub(crate) fn route(
    state: &super::AppState,
    snap: &super::Snapshot,
    headers: &http::HeaderMap,
) -> Result<http::Response<crate::http::ResponseBody>, sluice_core::error::ApiError> {
    crate::auth::authorize(snap.master.as_ref(), headers)?;
    let round = state.probes().latest();
    let probes = snap.features.probes.as_deref().map(|plan| Probes {
        plan,
        round: round.as_deref(),
        spent: state.probes().spent_today(),
    });
    Ok(crate::http::json(
        http::StatusCode::OK,
        view(&snap.router, probes),
    ))
}
