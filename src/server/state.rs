//! The gateway's shared state: an immutable snapshot of everything derived from the config,
//! swapped whole on reload (a reload never disturbs requests in flight; they keep the snapshot
//! they started with).

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use arc_swap::{ArcSwap, Guard};
use bytes::Bytes;

use crate::auth::MasterKey;
use crate::config::Config;
use crate::providers::client::ClientRegistry;
use crate::providers::target::TargetError;
use crate::providers::DeploymentTarget;
use crate::routing::ModelTable;
use crate::telemetry::Recorder;

/// Everything a request reads, built once per config load.
#[derive(Debug)]
pub struct Snapshot {
    /// Model groups and their deployments.
    pub models: ModelTable,
    /// The master key, if the gateway is closed.
    pub master: Option<MasterKey>,
    /// Largest accepted request body.
    pub max_body: usize,
    /// `GET /v1/models` answer, prebuilt.
    pub models_json: Bytes,
    /// Unix time of this load (`created` in model objects).
    pub created: u64,
}

impl Snapshot {
    /// Prepare every deployment and prebuild the static answers.
    pub fn build(config: &Config, clients: &ClientRegistry) -> Result<Self, TargetError> {
        let mut targets = Vec::with_capacity(config.deployments.len());
        for d in &config.deployments {
            targets.push((Arc::new(DeploymentTarget::build(d, clients)?), d.weight));
        }
        let models = ModelTable::new(targets);
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
            models,
            master: config.general.master_key.as_ref().map(MasterKey::new),
            max_body: config.general.max_request_body_bytes,
            created,
        })
    }
}

/// The OpenAI model object for one group.
pub fn model_object(group: &crate::routing::Group, created: u64) -> serde_json::Value {
    let owned_by = group
        .deployments()
        .first()
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
    recorder: Recorder,
}

impl AppState {
    /// State for a validated config; finished requests go to `recorder`.
    pub fn new(config: &Config, recorder: Recorder) -> Result<Arc<Self>, TargetError> {
        let clients = ClientRegistry::default();
        let snap = Snapshot::build(config, &clients)?;
        Ok(Arc::new(Self {
            snapshot: ArcSwap::from_pointee(snap),
            clients,
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
        let snap = Snapshot::build(config, &self.clients)?;
        self.snapshot.store(Arc::new(snap));
        Ok(())
    }
}
