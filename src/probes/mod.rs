//! Active health checks (LiteLLM's `background_health_checks`): every
//! `health_check_interval`, one instance of the fleet probes every deployment and all share
//! the verdicts. A failed probe takes the deployment out of routing until a probe finds it
//! answering again; `/health` and the console show each deployment's last verdict.
//!
//! Cheap by design, for LiteLLM users who paid for every pod probing every model: with Redis,
//! the instance that claims the round (`Fleet::claim`, `SET NX` for one interval) probes and
//! writes the round to Redis, and the others read it. A probe is the provider's model list
//! where it has one (free); otherwise the smallest request of the deployment's mode, whose
//! cost goes to the spend log (tag `health_check`) and counts against
//! `health_check_max_spend_per_day`. Never on the request path: a task of its own.

pub mod probe;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sluice_config::{Config, HealthChecks};
use sluice_core::limits::{dollars, nanos, wall_ms};

pub use probe::{Mode, Planned, ProbeKind, Verdict};

use crate::server::AppState;

/// The fleet claim that makes an instance the prober of a round.
const ROUND_CLAIM: &str = "health-check-round";

/// Where the latest round is shared.
const ROUND_KEY: &str = "health-check-round";

/// What health checks read of the config: the settings and each deployment's probe.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// `general_settings`' part.
    pub settings: HealthChecks,
    /// By deployment id; deployments with `disable_background_health_check` are not in it.
    pub deployments: HashMap<String, Planned>,
}

impl crate::server::Part for Plan {
    /// The plan of `config`, when `background_health_checks` is on.
    fn build(
        config: &Config,
        _with: &crate::server::Building<'_>,
        _before: Option<&Arc<Self>>,
    ) -> Result<Option<Arc<Self>>, String> {
        Ok(Self::of(config))
    }
}

impl Plan {
    /// The plan of `config`, when `background_health_checks` is on.
    fn of(config: &Config) -> Option<Arc<Self>> {
        let settings = config.general.health_checks.clone()?;
        let deployments = config
            .deployments
            .iter()
            .filter(|d| !d.model_info.health_check.disabled)
            .filter(|d| {
                settings
                    .groups
                    .as_ref()
                    .is_none_or(|g| g.contains(&d.model_name))
            })
            .map(|d| {
                let planned = Planned {
                    mode: Mode::of(d.model_info.mode.as_deref()),
                    info: d.model_info.health_check.clone(),
                };
                (d.id.clone(), planned)
            })
            .collect();
        Some(Arc::new(Self {
            settings,
            deployments,
        }))
    }
}

/// One round of the fleet: who probed, when, and every verdict.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Round {
    /// When it ended (ms since the epoch).
    pub checked_at: u64,
    /// The instance that probed (`local` without a fleet).
    pub checked_by: String,
    /// One per deployment probed or skipped.
    pub verdicts: Vec<Verdict>,
}

/// The health checks' state in an instance: the round it last applied, and what paid probes
/// spent today.
#[derive(Debug, Default)]
pub struct Checks {
    latest: Mutex<Option<Arc<Round>>>,
    /// (UTC day, nanodollars spent on it) by this instance.
    spent: Mutex<(u64, u64)>,
}

impl Checks {
    /// The last round this instance applied (its own or the fleet's).
    pub fn latest(&self) -> Option<Arc<Round>> {
        sluice_core::lock::lock(&self.latest).clone()
    }

    /// Today's probe spend (USD) as this instance knows it.
    pub fn spent_today(&self) -> f64 {
        let (day, spent) = *sluice_core::lock::lock(&self.spent);
        if day == today() {
            dollars(spent)
        } else {
            0.0
        }
    }

    /// Count `nanos` more spent today; the new total. `fleet_total` (the fleet's own
    /// count, when Redis answered) wins when larger.
    fn spend(&self, by: u64, fleet_total: Option<u64>) -> u64 {
        let mut spent = sluice_core::lock::lock(&self.spent);
        let day = today();
        if spent.0 != day {
            *spent = (day, 0);
        }
        spent.1 = spent.1.saturating_add(by).max(fleet_total.unwrap_or(0));
        spent.1
    }
}

/// The UTC day number.
fn today() -> u64 {
    wall_ms() / 86_400_000
}

/// How often an instance looks for a round to run or to read: a fifth of the interval,
/// between 1 and 15 seconds.
fn poll_every(interval: Duration) -> Duration {
    (interval / 5).clamp(Duration::from_secs(1), Duration::from_secs(15))
}

/// Start the health check task; it follows the config through reloads (off while
/// `background_health_checks` is).
pub fn start(state: &Arc<AppState>) {
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let weak = Arc::downgrade(state);
    rt.spawn(async move {
        let mut next_round = tokio::time::Instant::now();
        let mut applied = 0u64;
        loop {
            let Some(state) = weak.upgrade() else {
                return;
            };
            let Some(plan) = state.snapshot().features.probes.clone() else {
                drop(state);
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            };
            let interval = plan.settings.interval;
            let poll = poll_every(interval);
            let fleet = state.fleet().cloned();
            if tokio::time::Instant::now() >= next_round {
                let mine = match &fleet {
                    // Redis away: each instance probes alone rather than nobody.
                    Some(f) => f.claim(ROUND_CLAIM, interval).await.unwrap_or(true),
                    None => true,
                };
                if mine {
                    let by = fleet
                        .as_ref()
                        .map_or_else(|| "local".to_owned(), |f| f.instance_id());
                    let round = run(&state, &plan, by).await;
                    if let Some(f) = &fleet {
                        if let Ok(json) = serde_json::to_vec(&round) {
                            let _ = f.put(ROUND_KEY, &json, interval * 3).await;
                        }
                    }
                    applied = round.checked_at;
                    apply(&state, &plan, round);
                    next_round = tokio::time::Instant::now() + interval;
                } else {
                    next_round = tokio::time::Instant::now() + poll;
                }
            }
            if let Some(f) = &fleet {
                if let Some(Some(json)) = f.get(ROUND_KEY).await {
                    match serde_json::from_slice::<Round>(&json) {
                        Ok(round) if round.checked_at > applied => {
                            applied = round.checked_at;
                            apply(&state, &plan, round);
                        }
                        Ok(_) => {}
                        Err(e) => tracing::warn!("the fleet's health check round: {e}"),
                    }
                }
            }
            drop(state);
            tokio::time::sleep(poll).await;
        }
    });
}

/// Probe every planned deployment of the serving config, `concurrency` at a time; record
/// what request probes spent.
async fn run(state: &Arc<AppState>, plan: &Plan, by: String) -> Round {
    let snapshot = state.snapshot();
    let members: Vec<_> = snapshot
        .router
        .models
        .groups()
        .flat_map(|g| g.members())
        .filter_map(|m| Some((m, plan.deployments.get(&*m.target.info.id)?)))
        .collect();
    let cap = nanos(plan.settings.max_spend_per_day);
    let fleet = state.fleet().cloned();
    let spent_key = format!("health-check-spend:{}", today());
    // Checked before each paid probe; concurrent probes may pass it together, so a round
    // overshoots the cap by at most `concurrency` probes.
    let (fleet, spent_key) = (&fleet, &spent_key);
    let gate = tokio::sync::Semaphore::new(plan.settings.concurrency);
    let gate = &gate;
    let mut probes = Vec::with_capacity(members.len());
    for (m, planned) in members {
        probes.push(async move {
            let _permit = gate.acquire().await;
            let paid = nanos(state.probes().spent_today()) < cap;
            let probed = probe::probe(m, planned, paid).await;
            if let Some(record) = probed.record {
                let cost = record.cost.unwrap_or(0);
                let fleet_total = match fleet {
                    Some(f) if cost > 0 => {
                        f.add(spent_key, cost, Duration::from_secs(2 * 86_400))
                            .await
                    }
                    _ => None,
                };
                state.probes().spend(cost, fleet_total);
                state.recorder().record(record);
            }
            probed.verdict
        });
    }
    let mut verdicts = futures_util::future::join_all(probes).await;
    verdicts.sort_by(|a, b| (&a.model_name, &a.model_id).cmp(&(&b.model_name, &b.model_id)));
    let unhealthy = verdicts.iter().filter(|v| v.healthy == Some(false)).count();
    tracing::info!(
        deployments = verdicts.len(),
        unhealthy,
        "health checks: round done"
    );
    Round {
        checked_at: wall_ms(),
        checked_by: by,
        verdicts,
    }
}

/// Put a round's verdicts into routing: a deployment that failed in a way that cools stays
/// out until the next round (plus a margin); one that answers again after failing is back now.
fn apply(state: &AppState, plan: &Plan, round: Round) {
    let span = plan.settings.interval + plan.settings.interval / 10;
    let before = state.probes().latest();
    let failed_before = |id: &str| {
        before.as_ref().is_some_and(|r| {
            r.verdicts
                .iter()
                .any(|v| v.model_id == id && v.healthy == Some(false) && v.cools)
        })
    };
    let snapshot = state.snapshot();
    for m in snapshot.router.models.groups().flat_map(|g| g.members()) {
        let Some(v) = round
            .verdicts
            .iter()
            .find(|v| v.model_id == *m.target.info.id)
        else {
            continue;
        };
        match v.healthy {
            Some(false) if v.cools => m.health.cool_for(span),
            Some(true) if failed_before(&v.model_id) => m.health.recover(),
            _ => {}
        }
    }
    *sluice_core::lock::lock(&state.probes().latest) = Some(Arc::new(round));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instance_looks_often_enough_to_take_over_a_round() {
        assert_eq!(
            poll_every(Duration::from_secs(300)),
            Duration::from_secs(15)
        );
        assert_eq!(poll_every(Duration::from_secs(20)), Duration::from_secs(4));
        assert_eq!(poll_every(Duration::from_secs(1)), Duration::from_secs(1));
    }

    #[test]
    fn a_day_of_probe_spend_counts_the_fleet_total_when_larger() {
        let c = Checks::default();
        assert_eq!(c.spend(10, None), 10);
        assert_eq!(c.spend(5, Some(100)), 100);
        assert_eq!(c.spend(5, None), 105);
    }
}
