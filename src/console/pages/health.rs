//! What the console says of a deployment's health, from what it has actually done and whether
//! it can work at all: a deployment whose provider expects a key it does not have is "not
//! configured" however idle it is, and one that has never answered is "no requests yet", not
//! "healthy". The models page and the overview both count from here, so they agree.

use crate::server::health::{deployments, Deployment};
use crate::server::{AppState, Snapshot};

/// A deployment's health as the console shows it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Health {
    /// Its provider's hosted API expects a key, and none is configured.
    NotConfigured,
    /// Cooling down after failures, for this many more seconds.
    CoolingDown(f64),
    /// Cooled down; its next request tests it.
    Probing,
    /// Failing: its health check failed, or it has failed and never succeeded.
    Failing,
    /// It has answered (a request or a health check), and is not cooling down.
    Healthy,
    /// Nothing has been sent to it yet.
    Untried,
}

impl Health {
    /// The state of `d` (`/health`'s, `not_configured` among them), `checked` the last
    /// health check's verdict (`None` without one).
    pub(super) fn of(d: &Deployment<'_>, checked: Option<bool>) -> Self {
        match d.state {
            crate::server::health::NOT_CONFIGURED => return Self::NotConfigured,
            "cooling_down" => return Self::CoolingDown(d.cooldown_remaining_s.unwrap_or(0.0)),
            "probing" => return Self::Probing,
            _ => {}
        }
        match (checked, d.successes, d.failures) {
            (Some(false), _, _) => Self::Failing,
            (Some(true), _, _) | (None, 1.., _) => Self::Healthy,
            (None, 0, 1..) => Self::Failing,
            (None, 0, 0) => Self::Untried,
        }
    }

    /// What the page says.
    pub(super) fn name(self) -> &'static str {
        match self {
            Self::NotConfigured => "not configured",
            Self::CoolingDown(_) => "cooling_down",
            Self::Probing => "probing",
            Self::Failing => "failing",
            Self::Healthy => "healthy",
            Self::Untried => "no requests yet",
        }
    }

    /// Its CSS class (`state-…`).
    pub(super) fn class(self) -> &'static str {
        match self {
            Self::NotConfigured => "state-not_configured",
            Self::CoolingDown(_) => "state-cooling_down",
            Self::Probing => "state-probing",
            Self::Failing => "state-failing",
            Self::Healthy => "state-healthy",
            Self::Untried => "state-untried",
        }
    }
}

/// The last health check of a deployment: healthy or not (`None`: not probed), and why.
pub(super) type Check = (Option<bool>, Option<String>);

/// Every deployment served, its health, and its last health check's verdict and reason.
pub(super) fn all<'s>(
    state: &AppState,
    snap: &'s Snapshot,
) -> Vec<(Deployment<'s>, Health, Option<Check>)> {
    // The last round of active health checks, when they run.
    let round = snap
        .features
        .probes
        .as_ref()
        .and_then(|_| state.probes().latest());
    deployments(&snap.router)
        .into_iter()
        .map(|d| {
            let check = round
                .as_ref()
                .and_then(|r| r.verdicts.iter().find(|v| v.model_id == d.model_id))
                .map(|v| (v.healthy, v.error.clone()));
            let health = Health::of(&d, check.as_ref().and_then(|c| c.0));
            (d, health, check)
        })
        .collect()
}

/// The overview's counts: healthy, not configured, untried, of how many.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Tally {
    /// Healthy.
    pub healthy: usize,
    /// Not configured (no key).
    pub not_configured: usize,
    /// No requests yet.
    pub untried: usize,
    /// All deployments.
    pub total: usize,
}

impl Tally {
    /// Counts `states`.
    pub(super) fn of(states: impl IntoIterator<Item = Health>) -> Self {
        let mut t = Self::default();
        for h in states {
            t.total += 1;
            match h {
                Health::Healthy => t.healthy += 1,
                Health::NotConfigured => t.not_configured += 1,
                Health::Untried => t.untried += 1,
                _ => {}
            }
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment(state: &'static str, successes: u64, failures: u64) -> Deployment<'static> {
        Deployment {
            model_name: "g",
            model_id: "d",
            provider: "openai",
            state,
            cooldown_remaining_s: (state == "cooling_down").then_some(12.0),
            in_flight: 0,
            latency_ms: None,
            requests_this_minute: 0,
            tokens_this_minute: 0,
            successes,
            failures,
            last_failure: None,
            last_check: None,
        }
    }

    #[test]
    fn health_comes_from_outcomes_and_credentials() {
        let ready = deployment("healthy", 0, 0);
        let missing = deployment(crate::server::health::NOT_CONFIGURED, 0, 0);
        assert_eq!(Health::of(&ready, None), Health::Untried);
        assert_eq!(Health::of(&missing, None), Health::NotConfigured);
        assert_eq!(Health::of(&missing, Some(true)), Health::NotConfigured);
        assert_eq!(Health::of(&ready, Some(true)), Health::Healthy);
        assert_eq!(Health::of(&ready, Some(false)), Health::Failing);
        assert_eq!(
            Health::of(&deployment("healthy", 3, 1), None),
            Health::Healthy
        );
        assert_eq!(
            Health::of(&deployment("healthy", 0, 2), None),
            Health::Failing
        );
        assert_eq!(
            Health::of(&deployment("cooling_down", 3, 5), None),
            Health::CoolingDown(12.0)
        );
        assert_eq!(
            Health::of(&deployment("probing", 3, 5), None),
            Health::Probing
        );
        assert_eq!(
            Tally::of([
                Health::Healthy,
                Health::NotConfigured,
                Health::Untried,
                Health::Failing
            ]),
            Tally {
                healthy: 1,
                not_configured: 1,
                untried: 1,
                total: 4
            }
        );
    }
}
