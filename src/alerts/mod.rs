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
pub mod report;
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

/// Milliseconds of a period, at least one.
fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// The reports' schedules.
struct Reports {
    spend: Option<report::Periodic>,
    monthly: Option<report::Monthly>,
    deployments: Option<report::Periodic>,
    seen: report::Seen,
    period: Duration,
}

impl Reports {
    /// Send the reports whose window ended, each once for the fleet.
    async fn run(&mut self, state: &AppState, channels: &Channels, now: u64) {
        let fleet = state.fleet().cloned();
        let claim = |name: String, ttl: Duration| {
            let fleet = fleet.clone();
            async move {
                match fleet {
                    // Redis away: this instance sends (a report twice beats none).
                    Some(f) => f.claim(&name, ttl).await.unwrap_or(true),
                    None => true,
                }
            }
        };
        let store = state.store().map(|s| s.store.clone());
        let dir = state.gate().directory();
        if let (Some(p), Some(store)) = (self.spend.as_mut(), &store) {
            if let Some((start, end)) = p.due(now) {
                let days = self.period.as_secs_f64() / 86_400.0;
                let title = if days >= 1.0 {
                    format!("Spend Report ({days:.0} days)")
                } else {
                    format!("Spend Report ({}s)", self.period.as_secs())
                };
                if claim(format!("report:spend:{start}:{end}"), self.period * 2).await {
                    if let Some(text) = report::spend(store, dir, (start, end), &title).await {
                        channels.send_report("spend_report", &text).await;
                    }
                }
            }
        }
        if let (Some(m), Some(store)) = (self.monthly.as_mut(), &store) {
            if let Some((start, end, name)) = m.due(now) {
                let ttl = Duration::from_secs(40 * 86_400);
                if claim(format!("report:monthly:{name}"), ttl).await {
                    let title = format!("Monthly Spend Report ({name})");
                    if let Some(text) = report::spend(store, dir, (start, end), &title).await {
                        channels.send_report("spend_report", &text).await;
                    }
                }
            }
        }
        if let Some(p) = self.deployments.as_mut() {
            if let Some((start, end)) = p.due(now) {
                let text = report::deployments(&state.snapshot().router, &mut self.seen);
                let ttl = Duration::from_millis((end - start).saturating_mul(2));
                if let Some(text) = text {
                    if claim(format!("report:deployments:{start}:{end}"), ttl).await {
                        channels.send_report("daily_report", &text).await;
                    }
                }
            }
        }
    }
}

/// Start the alert task, when `alerting` is configured; read at start, not on reload.
pub fn start(state: &Arc<AppState>, a: &Alerting) -> Result<(), SmtpError> {
    if !a.budget && !a.outage && !a.spend_reports && !a.daily_reports {
        return Ok(());
    }
    let (budgets, outages) = (a.budget, a.outage);
    let start_ms = wall_ms();
    let mut reports = Reports {
        spend: a
            .spend_reports
            .then(|| report::Periodic::new(ms(a.spend_report_frequency), start_ms)),
        monthly: a.spend_reports.then(|| report::Monthly::new(start_ms)),
        deployments: a
            .daily_reports
            .then(|| report::Periodic::new(ms(a.daily_report_frequency), start_ms)),
        seen: report::Seen::new(),
        period: a.spend_report_frequency,
    };
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
            reports.run(&state, &channels, now).await;
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
