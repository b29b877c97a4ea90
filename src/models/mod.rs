//! Deployments managed at run time (`general_settings.store_model_in_db`, LiteLLM's
//! `STORE_MODEL_IN_DB`): `/model/new`, `/model/update`, `/model/delete` and the console keep
//! them in the database (`proxy_models`), and every instance serves them beside the file's.
//!
//! There is one way a deployment enters service, whatever its origin: the file's config, as read
//! ([`sluice_config::Source`]), is loaded again with the stored entries appended to its
//! `model_list`, through the same validation, pricing and id rules, and the snapshot is swapped
//! ([`AppState::reload`]): requests in flight finish on the one they started with. A change
//! made on one instance reaches the others through the fleet's Redis channel at once, and
//! through a poll of the stored `(id, etag)` pairs every [`POLL_EVERY`] without Redis.
//!
//! Nothing here runs on the request path.

mod seal;

use std::sync::{Arc, Weak};
use std::time::Duration;

use serde_json::{Map, Value};

pub use seal::{Seal, SealError};
use sluice_config::{ConfigError, Invalid, Loaded, Source};
use sluice_store::{ModelRow, Store, StoreError};

use crate::server::{AppState, SnapshotError};

/// How often an instance compares the stored deployments with those it serves: how late a
/// change reaches an instance that missed the fleet's message (or has no Redis).
pub const POLL_EVERY: Duration = Duration::from_millis(500);

/// Why the stored deployments could not be put in service.
#[derive(Debug, thiserror::Error)]
pub enum ModelsError {
    /// The database did not answer.
    #[error("database: {0}")]
    Store(#[from] StoreError),
    /// The file's config no longer loads (its problems by path).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The merged config cannot be served.
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    /// The sealing key cannot be made.
    #[error(transparent)]
    Seal(#[from] SealError),
}

/// A stored deployment and the `model_list` entry it stands for (`litellm_params` opened).
#[derive(Debug, Clone)]
pub struct Stored {
    /// The row as stored.
    pub row: ModelRow,
    /// `model_name`, `litellm_params`, `model_info` (with `id` and `db_model: true`).
    pub entry: Value,
}

/// A config load with stored entries: what was served, and the entries left out because of
/// their own problems (by id, each problem's path relative to the entry).
pub struct Merged {
    /// The config to serve.
    pub loaded: Loaded,
    /// Stored entries that could not be served, and why.
    pub left_out: Vec<(String, Vec<Invalid>)>,
}

/// The run-time deployments of one instance: the database, the sealing key, the file's
/// config as read, and what is being served.
pub struct RuntimeModels {
    store: Store,
    seal: Seal,
    source: std::sync::Mutex<Source>,
    /// What `source` is resolved against (a secret manager's values, or the process's).
    vars: sluice_secrets::Vars,
    /// `(id, etag)` of the stored deployments served, in id order. Held while a change is
    /// applied, so that changes apply one at a time.
    served: tokio::sync::Mutex<Vec<(String, String)>>,
}

impl std::fmt::Debug for RuntimeModels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuntimeModels").finish_non_exhaustive()
    }
}

impl RuntimeModels {
    /// Run-time deployments over `store`, merged into `source`.
    pub fn new(store: Store, seal: Seal, source: Source, vars: sluice_secrets::Vars) -> Self {
        Self {
            store,
            seal,
            source: std::sync::Mutex::new(source),
            vars,
            served: tokio::sync::Mutex::new(Vec::new()),
        }
    }

    /// The database the deployments live in.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Seal `litellm_params` for storage.
    pub fn seal(&self, params: &Map<String, Value>) -> Result<String, SealError> {
        self.seal
            .seal(Value::Object(params.clone()).to_string().as_bytes())
    }

    /// The file's config as read now.
    fn source(&self) -> Source {
        sluice_core::lock::lock(&self.source).clone()
    }

    /// Serve a newly read config file from here on (a reload).
    pub fn set_source(&self, source: Source) {
        *sluice_core::lock::lock(&self.source) = source;
    }

    /// A row's `litellm_params`, opened; why not, when they cannot be.
    pub fn params(&self, row: &ModelRow) -> Result<Map<String, Value>, String> {
        let plain = self
            .seal
            .open(&row.litellm_params)
            .map_err(|e| e.to_string())?;
        serde_json::from_slice(&plain).map_err(|e| e.to_string())
    }

    /// A row's `model_list` entry; `None` (logged) when its parameters cannot be opened.
    fn entry(&self, row: &ModelRow) -> Option<Value> {
        match self.params(row) {
            Ok(params) => Some(entry(
                &row.model_id,
                &row.model_name,
                params,
                &row.model_info,
            )),
            Err(why) => {
                tracing::warn!(model_id = %row.model_id, %why, "stored deployment left out: its litellm_params cannot be read");
                None
            }
        }
    }

    /// Every stored deployment that can be read.
    pub async fn stored(&self) -> Result<Vec<Stored>, StoreError> {
        Ok(self.read().await?.0)
    }

    /// The stored deployments that can be read, and the `(id, etag)` of every row (read or
    /// not: the poll compares them all).
    async fn read(&self) -> Result<(Vec<Stored>, Vec<(String, String)>), StoreError> {
        let rows = self.store.models().await?;
        let etags = rows
            .iter()
            .map(|r| (r.model_id.clone(), r.etag.clone()))
            .collect();
        let stored = rows
            .into_iter()
            .filter_map(|row| {
                let entry = self.entry(&row)?;
                Some(Stored { row, entry })
            })
            .collect();
        Ok((stored, etags))
    }

    /// Load the file's config with every readable stored deployment.
    async fn merged(&self) -> Result<(Merged, Vec<(String, String)>), ModelsError> {
        let (stored, etags) = self.read().await?;
        let entries: Vec<(String, Value)> = stored
            .into_iter()
            .map(|s| (s.row.model_id, s.entry))
            .collect();
        Ok((self.load(&entries)?, etags))
    }

    /// Load the file's config with `entries` (`(id, entry)`) appended. An entry whose own
    /// problems stop the load is left out and the rest loaded again; a problem of the file
    /// itself is the error.
    pub fn load(&self, entries: &[(String, Value)]) -> Result<Merged, ConfigError> {
        let source = self.source();
        let base = source.file_models();
        let mut kept: Vec<&(String, Value)> = entries.iter().collect();
        let mut left_out = Vec::new();
        loop {
            let values: Vec<Value> = kept.iter().map(|(_, v)| v.clone()).collect();
            let problems = match source.load(&values, &self.vars) {
                Ok(loaded) => return Ok(Merged { loaded, left_out }),
                Err(ConfigError::Invalid(problems)) => problems,
                Err(e) => return Err(e),
            };
            let mut bad: Vec<(usize, Vec<Invalid>)> = Vec::new();
            let mut own = Vec::new();
            for p in problems {
                match stored_index(&p.path, base).filter(|i| *i < kept.len()) {
                    Some(i) => {
                        let p = Invalid {
                            path: relative(&p.path).to_owned(),
                            message: p.message,
                        };
                        match bad.iter_mut().find(|(j, _)| *j == i) {
                            Some((_, list)) => list.push(p),
                            None => bad.push((i, vec![p])),
                        }
                    }
                    None => own.push(p),
                }
            }
            if !own.is_empty() || bad.is_empty() {
                return Err(ConfigError::Invalid(own));
            }
            bad.sort_by_key(|(i, _)| std::cmp::Reverse(*i));
            for (i, problems) in bad {
                let (id, _) = kept.remove(i);
                left_out.push((id.clone(), problems));
            }
        }
    }

    /// Read the stored deployments and serve them with the file's (also when nothing changed:
    /// a reload of the file comes this way).
    pub async fn apply(&self, state: &AppState) -> Result<(), ModelsError> {
        let mut served = self.served.lock().await;
        let (merged, etags) = self.merged().await?;
        for (id, problems) in &merged.left_out {
            let why: Vec<String> = problems.iter().map(ToString::to_string).collect();
            tracing::warn!(model_id = %id, problems = %why.join("; "), "stored deployment left out");
        }
        state.reload(&merged.loaded.config)?;
        *served = etags;
        Ok(())
    }

    /// The config to start with: the file's and the stored deployments.
    pub async fn initial(&self) -> Result<Merged, ModelsError> {
        let mut served = self.served.lock().await;
        let (merged, etags) = self.merged().await?;
        *served = etags;
        Ok(merged)
    }

    /// Apply the stored deployments if they differ from those served.
    pub async fn catch_up(&self, state: &AppState) -> Result<bool, ModelsError> {
        let now = self.store.model_etags().await?;
        if *self.served.lock().await == now {
            return Ok(false);
        }
        self.apply(state).await?;
        Ok(true)
    }

    /// Compare with the database every [`POLL_EVERY`] for as long as the state lives.
    pub fn spawn_poll(self: &Arc<Self>, state: Weak<AppState>) {
        let me = Arc::clone(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(POLL_EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(state) = state.upgrade() else {
                    return;
                };
                match me.catch_up(&state).await {
                    Ok(true) => tracing::info!("stored deployments changed: now serving them"),
                    Ok(false) => {}
                    Err(e) => tracing::debug!(error = %e, "stored deployments poll failed"),
                }
            }
        });
    }
}

/// What a gateway starts with, given its file's `config` (loaded from `source`): with
/// `store_model_in_db`, a database and a master key (which seals stored keys unless
/// `LITELLM_SALT_KEY` is set), the run-time deployments and the config merged with the stored
/// ones; otherwise the file's config alone.
pub async fn prepare(
    config: sluice_config::Config,
    store: Option<&Store>,
    source: Source,
    vars: sluice_secrets::Vars,
) -> Result<(sluice_config::Config, Option<Arc<RuntimeModels>>), ModelsError> {
    if !config.general.store_model_in_db {
        return Ok((config, None));
    }
    let (Some(store), Some(master)) = (store, config.general.master_key.as_ref()) else {
        tracing::warn!("store_model_in_db needs general_settings.master_key (and so a database): deployments cannot be added at run time");
        return Ok((config, None));
    };
    let salt = std::env::var("LITELLM_SALT_KEY")
        .ok()
        .filter(|s| !s.is_empty());
    let seal = Seal::new(salt.as_deref(), master)?;
    let runtime = RuntimeModels::new(store.clone(), seal, source, vars);
    let merged = runtime.initial().await?;
    for (id, problems) in &merged.left_out {
        let why: Vec<String> = problems.iter().map(ToString::to_string).collect();
        tracing::warn!(model_id = %id, problems = %why.join("; "), "stored deployment left out");
    }
    Ok((merged.loaded.config, Some(Arc::new(runtime))))
}

/// Put `runtime` in service on `state`: the model API uses it, the poll keeps this instance
/// in step with the database, and the fleet's news brings another instance's change at once.
pub fn serve(state: &Arc<AppState>, runtime: Arc<RuntimeModels>) {
    runtime.spawn_poll(Arc::downgrade(state));
    if let Some(fleet) = state.fleet() {
        let weak = Arc::downgrade(state);
        let rt = Arc::clone(&runtime);
        fleet.on_models(move || {
            let (weak, rt) = (weak.clone(), Arc::clone(&rt));
            tokio::spawn(async move {
                if let Some(state) = weak.upgrade() {
                    if let Err(e) = rt.catch_up(&state).await {
                        tracing::warn!(error = %e, "stored deployments could not be applied; the poll will try again");
                    }
                }
            });
        });
    }
    state.set_runtime(runtime);
}

/// The `model_list` entry of a stored deployment.
pub fn entry(id: &str, model_name: &str, params: Map<String, Value>, info: &Value) -> Value {
    let mut model_info = info.as_object().cloned().unwrap_or_default();
    model_info.insert("id".into(), id.into());
    model_info.insert("db_model".into(), true.into());
    serde_json::json!({
        "model_name": model_name,
        "litellm_params": params,
        "model_info": model_info,
    })
}

/// Which stored entry a problem's path is in: `model_list[N]...` with `N` at or past the
/// file's `base` entries.
fn stored_index(path: &str, base: usize) -> Option<usize> {
    let rest = path.strip_prefix("model_list[")?;
    let (n, _) = rest.split_once(']')?;
    n.parse::<usize>().ok()?.checked_sub(base)
}

/// A problem's path within its entry: `model_list[7].litellm_params.api_base` →
/// `litellm_params.api_base`.
fn relative(path: &str) -> &str {
    match path.split_once(']') {
        Some((_, rest)) => rest.strip_prefix('.').unwrap_or(rest),
        None => path,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problems_are_placed_in_their_stored_entry() {
        assert_eq!(
            stored_index("model_list[3].litellm_params.model", 2),
            Some(1)
        );
        assert_eq!(stored_index("model_list[1].model_name", 2), None);
        assert_eq!(stored_index("router_settings.fallbacks", 2), None);
        assert_eq!(
            relative("model_list[3].litellm_params.model"),
            "litellm_params.model"
        );
        assert_eq!(relative("model_list[3]"), "");
    }

    #[test]
    fn a_stored_entry_is_marked_as_from_the_database() {
        let mut params = Map::new();
        params.insert("model".into(), "openai/gpt-4o".into());
        let e = entry(
            "m1",
            "gpt-db",
            params,
            &serde_json::json!({"mode": "chat", "id": "x"}),
        );
        assert_eq!(e["model_info"]["id"], "m1", "the row's id wins");
        assert_eq!(e["model_info"]["db_model"], true);
        assert_eq!(e["model_info"]["mode"], "chat");
        assert_eq!(e["litellm_params"]["model"], "openai/gpt-4o");
    }
}
