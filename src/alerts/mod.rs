//! Alerts (LiteLLM's `general_settings.alerting`): a task of its own looks every
//! [`SCAN_EVERY`] at the directory's live counters (`budget_alerts`: each level a budget
//! reaches in a window — soft budget, 15% and 5% left, crossed — goes out once, to Slack,
//! Microsoft Teams, a webhook and e-mail) and at the deployments' health (`outage_alerts` /
//! `cooldown_deployment`: a deployment into cooldown, and back; Slack, Teams, the webhook).
//! Never on the request path.
//!
//! Once per crossing, fleet-wide: with Redis, the instance that claims the alert's name first
//! (`Fleet::claim`, `SET NX` until the window ends) sends it, whichever instance saw the spend.
//! Without Redis, one instance remembers what it sent; the crossings it finds at start are
//! taken as sent before (a restart does not repeat them; one reached while it was down is not
//! sent).

pub mod budget;
pub mod outage;
mod send;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use sluice_config::Alerting;
use sluice_core::limits::wall_ms;

pub use send::{Channels, SmtpError};

use crate::server::AppState;

/// How often budgets are looked at.
pub const SCAN_EVERY: Duration = Duration::from_secs(1);

/// How long a fleet claim on a deployment's outage or recovery is kept.
const OUTAGE_CLAIM: Duration = Duration::from_secs(86_400);

/// How long a fleet claim on an alert of a budget that never renews is kept.
const CLAIM_WITHOUT_WINDOW: Duration = Duration::from_secs(90 * 86_400);

/// Start the alert task, when `alerting` is configured; read at start, not on reload.
pub fn start(state: &Arc<AppState>, a: &Alerting) -> Result<(), SmtpError> {
    if !a.budget && !a.outage {
        return Ok(());
    }
    let (budgets, outages) = (a.budget, a.outage);
    let channels = Channels::new(a)?;
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        return Ok(());
    };
    let weak = Arc::downgrade(state);
    rt.spawn(async move {
        let mut sent: HashMap<String, u64> = HashMap::new();
        let mut deployments = outage::Watch::default();
        let mut first = true;
        let mut tick = tokio::time::interval(SCAN_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let Some(state) = weak.upgrade() else {
                return;
            };
            let now = wall_ms();
            let fleet = state.fleet().cloned();
            if outages {
                let changes = deployments.changes(&state.snapshot().router, now, first);
                for e in changes {
                    let mine = match &fleet {
                        Some(f) => f.claim(&e.claim(), OUTAGE_CLAIM).await.unwrap_or(true),
                        None => true,
                    };
                    if mine {
                        channels.send_deployment(&e).await;
                    }
                }
            }
            let due = if budgets {
                budget::due(state.gate().directory(), now)
            } else {
                Vec::new()
            };
            for c in due {
                let name = c.claim();
                if sent.contains_key(&name) {
                    continue;
                }
                let mine = match &fleet {
                    Some(f) => {
                        let ttl = match c.window_end_ms {
                            0 => CLAIM_WITHOUT_WINDOW,
                            end => Duration::from_millis(end.saturating_sub(now) + 86_400_000),
                        };
                        match f.claim(&name, ttl).await {
                            Some(mine) => mine,
                            // Redis away: ask again next time.
                            None => continue,
                        }
                    }
                    None => !first,
                };
                if mine {
                    channels.send(&c).await;
                }
                sent.insert(name, c.window_end_ms);
            }
            first = false;
            // Windows that ended are done with.
            sent.retain(|_, end| *end == 0 || *end > now);
        }
    });
    Ok(())
}
