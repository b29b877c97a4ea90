//! The gateway's shared state: an immutable snapshot of everything derived from the config,
//! swapped whole on reload (a reload never disturbs requests in flight; they keep the snapshot
//! they started with).

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use arc_swap::{ArcSwap, Guard};
use bytes::Bytes;

use crate::auth::MasterKey;
use crate::config::Config;
use crate::config::RouterSettings;
use crate::providers::client::ClientRegistry;
use crate::providers::target::TargetError;
use crate::providers::DeploymentTarget;
use crate::routing::{
    Breaker, FailureKind, Fallbacks, HealthRegistry, Member, ModelTable, Policy, Router,
    DEFAULT_ALLOWED_FAILS, DEFAULT_COOLDOWN,
};
use crate::telemetry::Recorder;

/// Everything a request reads, built once per config load.
#[derive(Debug)]
pub struct Snapshot {
    /// Model groups, their deployments and the rules for retries, fallbacks and cooldowns.
    pub router: Router,
    /// The master key, if the gateway is closed.
    pub master: Option<MasterKey>,
    /// Largest accepted request body.
    pub max_body: usize,
    /// `/metrics` needs the master key (`require_auth_for_metrics_endpoint`).
    pub metrics_need_key: bool,
    /// `GET /v1/models` answer, prebuilt.
    pub models_json: Bytes,
    /// Unix time of this load (`created` in model objects).
    pub created: u64,
}

impl Snapshot {
    /// Prepare every deployment and prebuild the static answers.
    pub fn build(
        config: &Config,
        clients: &ClientRegistry,
        health: &HealthRegistry,
    ) -> Result<Self, TargetError> {
        let mut members = Vec::with_capacity(config.deployments.len());
        for d in &config.deployments {
            members.push(Member {
                target: Arc::new(DeploymentTarget::build(
                    d,
                    clients,
                    config.litellm.drop_params,
                )?),
                health: health.cell(&d.id),
                // simple-shuffle weighs by `weight`, else `rpm`, else `tpm`, as LiteLLM does.
                weight: d
                    .weight
                    .or(d.rpm.map(|r| r as f64))
                    .or(d.tpm.map(|t| t as f64))
                    .unwrap_or(1.0),
                rpm: d.rpm,
                tpm: d.tpm,
                cost: match (d.input_cost_per_token, d.output_cost_per_token) {
                    (None, None) => f64::INFINITY,
                    (i, o) => i.unwrap_or(0.0) + o.unwrap_or(0.0),
                },
            });
        }
        let hedges = &config.router.hedge_after;
        let models = ModelTable::new(members, |name| {
            hedges.iter().find(|(g, _)| g == name).map(|(_, h)| *h)
        });
        let created = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let data: Vec<_> = models
            .names()
            .iter()
            .filter_map(|n| models.group(n))
            .map(|g| model_object(g, created))
            .collect();
        let list = serde_json::json!({ "object": "list", "data": data });
        Ok(Self {
            models_json: Bytes::from(list.to_string()),
            router: Router {
                models,
                policy: policy(config),
                fallbacks: fallbacks(&config.router, &config.litellm.fallbacks),
            },
            master: config.general.master_key.as_ref().map(MasterKey::new),
            max_body: config.general.max_request_body_bytes,
            metrics_need_key: config.litellm.require_auth_for_metrics_endpoint,
            created,
        })
    }
}

/// Retry and breaker rules from `router_settings` (and `litellm_settings.num_retries`).
fn policy(config: &Config) -> Policy {
    let r = &config.router;
    let defaults = Policy::default();
    let mut p = Policy {
        strategy: r.routing_strategy.unwrap_or_default(),
        num_retries: r
            .num_retries
            .or(config.litellm.num_retries)
            .unwrap_or(defaults.num_retries),
        retry_after: r.retry_after.unwrap_or(defaults.retry_after),
        backoff: r.retry_backoff.unwrap_or(defaults.backoff),
        max_fallbacks: r.max_fallbacks.unwrap_or(defaults.max_fallbacks),
        on_disconnect: r.on_client_disconnect,
        breaker: Breaker {
            allowed_fails: [r.allowed_fails.unwrap_or(DEFAULT_ALLOWED_FAILS);
                FailureKind::ALL.len()],
            cooldown: r.cooldown_time.unwrap_or(DEFAULT_COOLDOWN),
            disabled: r.disable_cooldowns,
        },
        ..defaults
    };
    for (kind, n) in &r.retry_policy {
        p.retry_policy[kind.index()] = Some(*n);
    }
    for (kind, n) in &r.allowed_fails_policy {
        p.breaker.allowed_fails[kind.index()] = *n;
    }
    p
}

/// Fallback chains; `litellm_settings.fallbacks` when the router has none, as LiteLLM reads
/// either.
fn fallbacks(r: &RouterSettings, litellm: &[(String, Vec<String>)]) -> Fallbacks {
    let table = |list: &[(String, Vec<String>)]| {
        list.iter()
            .map(|(from, to)| {
                (
                    Arc::<str>::from(from.as_str()),
                    to.iter().map(|t| Arc::<str>::from(t.as_str())).collect(),
                )
            })
            .collect()
    };
    let general = if r.fallbacks.is_empty() {
        litellm
    } else {
        &r.fallbacks
    };
    Fallbacks {
        general: table(general),
        context_window: table(&r.context_window_fallbacks),
        content_policy: table(&r.content_policy_fallbacks),
        default: r
            .default_fallbacks
            .iter()
            .map(|s| Arc::from(s.as_str()))
            .collect(),
    }
}

/// The OpenAI model object for one group.
pub fn model_object(group: &crate::routing::Group, created: u64) -> serde_json::Value {
    let owned_by = group
        .deployments()
        .next()
        .map_or("sluice", |d| d.provider.name());
    serde_json::json!({
        "id": &*group.name,
        "object": "model",
        "created": created,
        "owned_by": owned_by,
    })
}

/// Shared by every connection.
#[derive(Debug)]
pub struct AppState {
    snapshot: ArcSwap<Snapshot>,
    clients: ClientRegistry,
    health: HealthRegistry,
    recorder: Recorder,
}

impl AppState {
    /// State for a validated config; finished requests go to `recorder`. Upstream calls share
    /// one pool per upstream (for a server on one multi-threaded runtime).
    pub fn new(config: &Config, recorder: Recorder) -> Result<Arc<Self>, TargetError> {
        Self::with_workers(config, recorder, 0)
    }

    /// State for `workers` server threads (`serve_threads`): each gets its own upstream pools.
    pub fn with_workers(
        config: &Config,
        recorder: Recorder,
        workers: usize,
    ) -> Result<Arc<Self>, TargetError> {
        let clients = ClientRegistry::new(workers);
        let health = HealthRegistry::default();
        let snap = Snapshot::build(config, &clients, &health)?;
        Ok(Arc::new(Self {
            snapshot: ArcSwap::from_pointee(snap),
            clients,
            health,
            recorder,
        }))
    }

    /// The current snapshot (lock-free read).
    pub fn snapshot(&self) -> Guard<Arc<Snapshot>> {
        self.snapshot.load()
    }

    /// Where finished requests are recorded.
    pub fn recorder(&self) -> &Recorder {
        &self.recorder
    }

    /// Replace the snapshot with one built from `config`; on error the old one keeps serving.
    pub fn reload(&self, config: &Config) -> Result<(), TargetError> {
        let snap = Snapshot::build(config, &self.clients, &self.health)?;
        self.snapshot.store(Arc::new(snap));
        Ok(())
    }
}
