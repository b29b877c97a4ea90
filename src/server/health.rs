//! `GET /health` (master key): every deployment's routing state, read from the live atomics.
//! Unlike LiteLLM's `/health`, it makes no upstream calls: it reports what traffic has shown.

use bytes::Bytes;
use serde::Serialize;

use sluice_routing::{now_ms, Availability, Router};

/// One deployment's live routing state (also the console's models page).
#[derive(Serialize)]
pub(crate) struct Deployment<'a> {
    pub(crate) model_name: &'a str,
    pub(crate) model_id: &'a str,
    pub(crate) provider: &'static str,
    pub(crate) state: &'static str,
    pub(crate) cooldown_remaining_s: Option<f64>,
    pub(crate) in_flight: u32,
    pub(crate) latency_ms: Option<f64>,
    pub(crate) requests_this_minute: u64,
    pub(crate) tokens_this_minute: u64,
    pub(crate) successes: u64,
    pub(crate) failures: u64,
    pub(crate) last_failure: Option<&'static str>,
}

#[derive(Serialize)]
struct View<'a> {
    routing_strategy: &'static str,
    healthy_count: usize,
    unhealthy_count: usize,
    deployments: Vec<Deployment<'a>>,
}

/// The health view as JSON.
pub fn view(router: &Router) -> Bytes {
    let deployments = deployments(router);
    let healthy = deployments.iter().filter(|d| d.state == "healthy").count();
    let view = View {
        routing_strategy: router.policy.strategy.name(),
        healthy_count: healthy,
        unhealthy_count: deployments.len() - healthy,
        deployments,
    };
    Bytes::from(serde_json::to_vec(&view).unwrap_or_default())
}

/// Every deployment's state, read from the routing atomics now.
pub(crate) fn deployments(router: &Router) -> Vec<Deployment<'_>> {
    let now = now_ms();
    let mut deployments = Vec::new();
    for group in router.models.groups() {
        for m in group.members() {
            let (state, remaining) = match m.health.availability(now) {
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
            });
        }
    }
    deployments
}
