//! Deployment outages and recoveries (LiteLLM's `cooldown_deployment` / `outage_alerts`): a
//! deployment that goes into cooldown after failures, and the same deployment back in service
//! once a request succeeds on it. Read from the routing table's health cells, which a fleet
//! shares (cooldowns are announced), so each instance sees the same changes; the claim names
//! the cooldown by its end in ten-second steps, so the fleet sends each once.

use std::collections::HashMap;
use std::sync::Arc;

use sluice_routing::{Availability, Router};

/// What happened to a deployment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Into cooldown, for about this many seconds.
    Cooling(u64),
    /// Back in service.
    Recovered,
}

/// One deployment's change.
#[derive(Debug, Clone, PartialEq)]
pub struct DeploymentEvent {
    /// Its model group.
    pub group: Arc<str>,
    /// Its id.
    pub id: Arc<str>,
    /// Its provider.
    pub provider: &'static str,
    /// What happened.
    pub change: Change,
    /// The cooldown it went into or came out of, by its end (ms since the epoch, in ten-second
    /// steps): the same on every instance of a fleet.
    cooldown: u64,
}

impl DeploymentEvent {
    /// The alert's name, the same on every instance.
    pub fn claim(&self) -> String {
        let what = match self.change {
            Change::Cooling(_) => "cooling",
            Change::Recovered => "recovered",
        };
        format!("alert:deployment:{}:{what}:{}", self.id, self.cooldown)
    }

    /// The message.
    pub fn text(&self) -> String {
        match self.change {
            Change::Cooling(secs) => format!(
                "Deployment cooling down after failures: model group `{}`, deployment `{}` \
                 ({}), out of service for about {secs}s",
                self.group, self.id, self.provider
            ),
            Change::Recovered => format!(
                "Deployment recovered: model group `{}`, deployment `{}` ({}) is serving again",
                self.group, self.id, self.provider
            ),
        }
    }

    /// The webhook's event name.
    pub fn event(&self) -> &'static str {
        match self.change {
            Change::Cooling(_) => "deployment_cooldown",
            Change::Recovered => "deployment_recovered",
        }
    }
}

/// What the last scan saw of each deployment: the end of the cooldown it was in, if any.
#[derive(Debug, Default)]
pub struct Watch {
    cooling: HashMap<Arc<str>, u64>,
}

/// Ten seconds: cooldown ends are named in these steps.
const STEP_MS: u64 = 10_000;

impl Watch {
    /// The changes since the last scan, at wall-clock `now_ms` (cooldowns are named by their
    /// wall-clock end). The first scan only learns what is cooling.
    pub fn changes(&mut self, router: &Router, now_ms: u64, first: bool) -> Vec<DeploymentEvent> {
        let mut out = Vec::new();
        let routing_now = sluice_routing::now_ms();
        for group in router.models.groups() {
            for m in group.members() {
                let info = &m.target.info;
                let was = self.cooling.get(&info.id).copied();
                let event = |change, cooldown| DeploymentEvent {
                    group: info.model_name.clone(),
                    id: info.id.clone(),
                    provider: info.provider,
                    change,
                    cooldown,
                };
                match m.health.availability(routing_now) {
                    Availability::Cooling(left) => {
                        let end = (now_ms + left.as_millis() as u64) / STEP_MS * STEP_MS;
                        if was != Some(end) {
                            self.cooling.insert(info.id.clone(), end);
                            if !first && was.is_none() {
                                out.push(event(Change::Cooling(left.as_secs().max(1)), end));
                            }
                        }
                    }
                    // Cooldown over, its probe not yet answered: still out.
                    Availability::Probe => {}
                    Availability::Ready => {
                        if let Some(end) = self.cooling.remove(&info.id) {
                            if !first {
                                out.push(event(Change::Recovered, end));
                            }
                        }
                    }
                }
            }
        }
        out
    }
}
