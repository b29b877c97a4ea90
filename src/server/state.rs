//! The gateway's shared state: an immutable snapshot of everything derived from the config,
//! swapped whole on reload (a reload never disturbs requests in flight; they keep the snapshot
//! they started with).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use arc_swap::{ArcSwap, Guard};
use bytes::Bytes;

use super::features::{Building, FeatureError};
use crate::auth::{Directory, Gate, KeyLoader, MasterKey, Sync};
use crate::fleet::{Fleet, FleetError};
use sluice_config::Config;
use sluice_config::RouterSettings;
use sluice_config::SinkSettings;
use sluice_net::ClientRegistry;
use sluice_providers::{DeploymentTarget, TargetError};
use sluice_routing::{
    Breaker, FailureKind, Fallbacks, HealthRegistry, Member, ModelTable, Policy, Router,
    DEFAULT_ALLOWED_FAILS, DEFAULT_COOLDOWN,
};
use sluice_store::{
    writer, Location, SpendSender, SpendSink, SpoolError, Store, StoreError, StoreOptions,
    WriterOptions, DEFAULT_SPOOL_PATH, DEFAULT_SQLITE_PATH,
};
use sluice_telemetry::callbacks::batcher::{MemorySpill, Spill};
use sluice_telemetry::callbacks::{Callbacks, DiskSpill};
use sluice_telemetry::RecordSink;
use sluice_telemetry::Recorder;

/// Everything a request reads, built once per config load.
#[derive(Debug)]
pub struct Snapshot {
    /// Model groups, their deployments and the rules for retries, fallbacks and cooldowns.
    pub router: Router,
    /// The master key, if the gateway is closed.
    pub master: Option<MasterKey>,
    /// Largest accepted request body.
    pub max_body: usize,
    /// Longest accepted request URL (`max_url_length`).
    pub max_url: usize,
    /// Most `messages` in a body (`max_messages`).
    pub max_messages: Option<usize>,
    /// Longest a JSON body may take to arrive (`body_read_timeout`).
    pub body_timeout: std::time::Duration,
    /// `/metrics` needs the master key (`require_auth_for_metrics_endpoint`).
    pub metrics_need_key: bool,
    /// `GET /v1/models` answer, prebuilt.
    pub models_json: Bytes,
    /// Unix time of this load (`created` in model objects).
    pub created: u64,
    /// The provider pass-through routes' upstreams and prices: the gateway's own routes to
    /// each provider, always there (an upstream without credentials answers why).
    pub pass_through: crate::passthrough::PassThrough,
    /// Each feature's runtime part (`None` where the config leaves it off).
    pub features: Features,
    /// `general_settings.litellm_headers`: LiteLLM's `x-litellm-*` answer headers.
    pub litellm_headers: bool,
    /// `litellm_settings.upperbound_key_generate_params`: the most a key made may have.
    pub key_bounds: sluice_config::KeyBounds,
    /// What honours a request's own `api_base` and key; `None` (they are refused) unless
    /// `allow_client_side_credentials`.
    pub client_side: Option<super::client_side::ClientSideSettings>,
    /// Internal hosts an operator lets upstreams reach although the SSRF rule refuses them
    /// (`general_settings.client_side_api_base_allowlist`): for a request body's `api_base`
    /// and for deployments added at run time alike.
    pub upstream_allowlist: Arc<sluice_net::ssrf::Allowlist>,
    /// `general_settings.allowed_ips`: who may call at all (`None`: anyone).
    pub allowed_ips: Option<Arc<sluice_net::networks::Networks>>,
    /// How a client's address is read through proxies (`use_x_forwarded_for`,
    /// `trusted_proxy_ranges`).
    pub forwarded: sluice_net::networks::Forwarded,
    /// The config as `sluice check-config` shows it (secrets masked), for the console.
    pub described: Arc<str>,
    /// Every deployment as `/model/info` lists it (keys masked), in config order.
    pub deployments: Vec<serde_json::Value>,
}

super::features::features! {
    /// `guardrails:` (the pipeline's only check when off).
    guardrails: crate::guardrails::Guardrails,
    /// The response cache (`cache`, `dedupe_in_flight`); kept over a reload that leaves its
    /// settings as they were, with its entries.
    cache: crate::cache::ResponseCache,
    /// How Responses answers and conversations are kept (off: no key to seal them with).
    responses: crate::responses::Keeping,
    /// The admin console at `/ui` and its admin sign-in (off with `disable_admin_ui`).
    console: crate::console::Settings,
    /// Active health checks (`background_health_checks`).
    probes: crate::probes::Plan,
    /// The MCP gateway's tool servers and sessions (`mcp_servers`); kept over a reload that
    /// leaves them as they were. Last: it starts processes, which a later part's error would
    /// have started for nothing.
    mcp: crate::mcp::McpGateway,
}

/// Why a reload from the file did not happen.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The state was not loaded from a file.
    #[error("this gateway was not started from a config file")]
    NoFile,
    /// The file does not load (each problem by path).
    #[error(transparent)]
    Config(#[from] sluice_config::ConfigError),
    /// It loads, but cannot be put in service.
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    /// The stored deployments (`store_model_in_db`) could not be read or merged with it.
    #[error(transparent)]
    Models(#[from] crate::models::ModelsError),
}

/// Why a config could not be put in service.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// A deployment cannot be reached as configured.
    #[error(transparent)]
    Target(#[from] TargetError),
    /// A feature's settings cannot be put in service.
    #[error(transparent)]
    Feature(#[from] FeatureError),
    /// The alert channels cannot be set up (an SMTP host the client refuses).
    #[error("general_settings.alerting: {0}")]
    Alerting(String),
}

impl Snapshot {
    /// Prepare every deployment and prebuild the static answers; each feature builds its part,
    /// handed its part in `before` (the running snapshot, on a reload).
    pub fn build(
        config: &Config,
        clients: &ClientRegistry,
        health: &HealthRegistry,
        before: Option<&Snapshot>,
    ) -> Result<Self, SnapshotError> {
        let mut members = Vec::with_capacity(config.deployments.len());
        for d in &config.deployments {
            members.push(Member {
                target: Arc::new(DeploymentTarget::build(
                    d.spec(),
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
                access_groups: d.model_info.access_groups.iter().cloned().collect(),
                tags: d.tags.clone(),
            });
        }
        let hedges = &config.router.hedge_after;
        let models = ModelTable::new(members, |name| {
            hedges.iter().find(|(g, _)| g == name).map(|(_, h)| *h)
        })
        .with_aliases(config.router.model_group_alias.iter().map(|a| {
            sluice_routing::Alias {
                name: a.alias.as_str().into(),
                group: a.group.as_str().into(),
                hidden: a.hidden,
            }
        }));
        let created = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let data: Vec<_> = models
            .listed()
            .map(|(name, g)| model_object(name, g, created))
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
            max_url: config.general.max_url_length,
            max_messages: config.general.max_messages,
            body_timeout: config.general.body_read_timeout,
            metrics_need_key: config.litellm.require_auth_for_metrics_endpoint,
            created,
            litellm_headers: config.general.litellm_headers,
            key_bounds: config.litellm.key_bounds.clone(),
            client_side: super::client_side::ClientSideSettings::of(config),
            upstream_allowlist: Arc::new(config.general.client_side_api_base_allowlist.clone()),
            allowed_ips: config.general.allowed_ips.clone().map(Arc::new),
            forwarded: config.general.forwarded.clone(),
            pass_through: crate::passthrough::PassThrough::build(config, clients),
            features: Features::build(config, &Building { clients }, before.map(|b| &b.features))?,
            described: sluice_config::describe(config).into(),
            deployments: config
                .deployments
                .iter()
                .map(sluice_config::deployment_info)
                .collect(),
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
        tags: r.tag_filtering,
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

/// The OpenAI model object for one group, listed as `name` (its own, or an alias's).
pub fn model_object(name: &str, group: &sluice_routing::Group, created: u64) -> serde_json::Value {
    let owned_by = group
        .deployments()
        .next()
        .map_or("sluice", |d| d.provider.name());
    serde_json::json!({
        "id": name,
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
    /// Active health checks' last round and spend.
    probes: crate::probes::Checks,
    recorder: Recorder,
    services: Services,
    /// The overload manager (`max_in_flight_requests`, `max_memory_mb`), set at start.
    overload: Arc<super::overload::Overload>,
    /// The connection limits the server starts with (`general_settings`).
    connections: sluice_net::server::ConnLimits,
    /// The config file served, for reloads (SIGHUP, the console); unset in tests that build
    /// the state from a string.
    config_path: std::sync::OnceLock<std::path::PathBuf>,
    /// The environment the config is resolved against (its secret manager's values over the
    /// process environment), set at start; reloads use it too.
    vars: std::sync::OnceLock<sluice_secrets::Vars>,
    /// Deployments managed at run time (`store_model_in_db` with a database), set at start.
    runtime: std::sync::OnceLock<Arc<crate::models::RuntimeModels>>,
    /// The state itself, for work that outlives the request that starts it (a Responses
    /// request run in the background).
    me: std::sync::Weak<AppState>,
    /// The Responses runs this instance holds in the background (a cancel stops them).
    background_runs: crate::responses::Runs,
}

/// What lives beside the config and survives its reloads: the key directory, the store and
/// its spend writer, and the fleet.
#[derive(Debug, Default)]
pub struct Services {
    /// Who may call.
    pub gate: Gate,
    /// Counters and news shared with other instances through Redis.
    pub fleet: Option<Arc<Fleet>>,
    /// The database, when there is one.
    pub store: Option<StoreServices>,
    /// The spend writer's task: it ends, after a last flush, once every sender is gone.
    pub writer_task: Option<tokio::task::JoinHandle<()>>,
}

/// The database and what runs over it.
#[derive(Debug, Clone)]
pub struct StoreServices {
    /// Keys, teams, users, spend.
    pub store: Store,
    /// Keeps the key directory in step with it.
    pub sync: Arc<Sync>,
    /// Hands spend logs to the writer task (batches, spool while the database is away).
    pub writer: SpendSender,
    /// `store_prompts_in_spend_logs` as the running config says (the spend sink reads it).
    pub prompts: Arc<std::sync::atomic::AtomicBool>,
}

/// Where the embedded store and the spend spool live, unless the config says otherwise.
#[derive(Debug, Clone)]
pub struct ServiceOptions {
    /// The directory of `sluice.db` (SQLite) and `sluice-spool/`.
    pub data_dir: PathBuf,
}

impl ServiceOptions {
    /// Logging callbacks whose down sinks spill to files under `data_dir/sluice-spool/` (kept
    /// across restarts); a sink whose file cannot be opened spills to memory instead.
    pub fn callbacks(&self) -> Callbacks {
        let dir = self.data_dir.join("sluice-spool");
        Callbacks::with_spill(Arc::new(move |s: &SinkSettings| -> Box<dyn Spill> {
            match DiskSpill::open(&dir, &s.name, s.spill_limit) {
                Ok(d) => Box::new(d),
                Err(e) => {
                    tracing::warn!(sink = %s.name, error = %e, "callback spool unavailable: spilling to memory");
                    Box::new(MemorySpill::new(s.spill_limit))
                }
            }
        }))
    }
}

/// Why the services could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// The Redis settings are unusable.
    #[error(transparent)]
    Fleet(#[from] FleetError),
    /// The database could not be opened.
    #[error("database: {0}")]
    Store(#[from] StoreError),
    /// The spend spool could not be opened.
    #[error(transparent)]
    Spool(#[from] SpoolError),
}

impl Services {
    /// Start what the config asks for: the store (PostgreSQL at `database_url` or
    /// `DATABASE_URL`, else SQLite in `data_dir` when a master key makes virtual keys
    /// possible), the directory filled from it and kept in sync, the spend writer, and the
    /// fleet when Redis is configured. Must run inside the runtime.
    pub async fn start(config: &Config, options: &ServiceOptions) -> Result<Self, ServiceError> {
        let r = &config.router;
        let fleet = match r.redis.target() {
            Some(target) => Some(Fleet::start(
                &target,
                r.fleet_lease.unwrap_or(crate::fleet::DEFAULT_LEASE),
            )?),
            None => None,
        };
        let env_url = std::env::var("DATABASE_URL").ok();
        let wanted = config.general.database_url.is_some()
            || env_url.as_deref().is_some_and(|u| !u.trim().is_empty())
            || config.general.master_key.is_some();
        let directory = Arc::new(Directory::default());
        let mut writer_task = None;
        let store = if wanted {
            let location = Location::from_settings(
                config.general.database_url.as_ref(),
                env_url,
                &options.data_dir.join(DEFAULT_SQLITE_PATH),
            )?;
            let store = Store::open(StoreOptions::new(location)).await?;
            let sync = Arc::new(Sync::new(store.clone(), directory.clone()));
            let since = sync.fill().await?;
            sync.clone().spawn(since);
            let writer_options = WriterOptions::from_settings(
                &config.general,
                options.data_dir.join(DEFAULT_SPOOL_PATH),
            )
            .for_backend(store.backend());
            let (writer, task) = writer::start(store.clone(), writer_options)?;
            writer_task = Some(task);
            Some(StoreServices {
                store,
                sync,
                writer,
                prompts: Arc::new(std::sync::atomic::AtomicBool::new(
                    config.callbacks.spend_log_content,
                )),
            })
        } else {
            None
        };
        let loader = store.as_ref().map(|s| s.sync.clone() as Arc<dyn KeyLoader>);
        Ok(Self {
            gate: Gate::new(directory, loader).with_jwt(
                config
                    .general
                    .jwt
                    .as_ref()
                    .map(crate::auth::jwt::JwtAuth::start),
            ),
            fleet,
            store,
            writer_task,
        })
    }

    /// The recorder sinks these services need (the spend writer's).
    pub fn sinks(&self) -> Vec<Box<dyn RecordSink>> {
        self.store
            .iter()
            .map(|s| {
                Box::new(SpendSink::new(s.writer.clone(), s.prompts.clone())) as Box<dyn RecordSink>
            })
            .collect()
    }
}

impl AppState {
    /// The shared state, owned: for a task that runs on after the request that spawned it.
    pub fn shared(&self) -> Option<Arc<AppState>> {
        self.me.upgrade()
    }

    /// The Responses runs this instance holds in the background.
    pub(crate) fn background_runs(&self) -> &crate::responses::Runs {
        &self.background_runs
    }

    /// State for a validated config; finished requests go to `recorder`. Upstream calls share
    /// one pool per upstream (for a server on one multi-threaded runtime).
    pub fn new(config: &Config, recorder: Recorder) -> Result<Arc<Self>, SnapshotError> {
        Self::with_services(config, recorder, Services::default(), 0)
    }

    /// State with virtual keys, a store and a fleet, for `workers` server threads
    /// (`serve_threads`: each gets its own upstream pools; 0 for one shared pool).
    pub fn with_services(
        config: &Config,
        recorder: Recorder,
        services: Services,
        workers: usize,
    ) -> Result<Arc<Self>, SnapshotError> {
        let clients = ClientRegistry::new(workers);
        let health = HealthRegistry::default();
        let snap = Snapshot::build(config, &clients, &health, None)?;
        recorder.configure(&config.callbacks);
        // The console's sign-ins always carry their peer: wrong passwords count per address
        // (`console::limit`), so that a stranger's cannot lock out the admin.
        let peer_addresses = services
            .gate
            .directory()
            .peer_addresses()
            .clone()
            .always_for(crate::console::SIGN_IN_PATH);
        if snap.allowed_ips.is_some() {
            peer_addresses.turn_on();
        }
        let state = Arc::new_cyclic(|me| Self {
            me: me.clone(),
            background_runs: crate::responses::Runs::default(),
            snapshot: ArcSwap::from_pointee(snap),
            clients,
            health,
            probes: crate::probes::Checks::default(),
            recorder,
            services,
            overload: super::overload::Overload::start(
                config.general.max_in_flight_requests,
                config.general.max_memory_bytes,
                workers,
            ),
            connections: sluice_net::server::ConnLimits {
                // The directory turns peer recording on for the first key or team with
                // `allowed_ips`; the config's own list turns it on now.
                peer_addresses,
                ..config.general.connections.clone()
            },
            config_path: std::sync::OnceLock::new(),
            vars: std::sync::OnceLock::new(),
            runtime: std::sync::OnceLock::new(),
        });
        crate::probes::start(&state);
        if let Some(a) = &config.general.alerting {
            crate::alerts::start(&state, a).map_err(|e| SnapshotError::Alerting(e.to_string()))?;
        }
        if let Some(fleet) = &state.services.fleet {
            state.health.announce_cooldowns(fleet.announce_cooldowns());
            let weak = Arc::downgrade(&state);
            let sync = state.services.store.as_ref().map(|s| s.sync.clone());
            fleet.subscribe(
                move |change| {
                    if let Some(sync) = sync.clone() {
                        tokio::spawn(async move {
                            // The poll brings the change within half a second anyway; the
                            // failure is said, never the key (only its hash's start).
                            if let Err(e) = sync.reload_key(&change.hash).await {
                                tracing::warn!(
                                    error = %e,
                                    key = %change.hash.get(..12).unwrap_or_default(),
                                    "reloading a key another instance changed failed; the poll will catch up"
                                );
                            }
                        });
                    }
                },
                move |id, span| {
                    if let Some(s) = weak.upgrade() {
                        s.health.cool(id, span);
                    }
                },
            );
            let weak = Arc::downgrade(&state);
            fleet.on_session_end(move |id| {
                if let Some(s) = weak.upgrade() {
                    crate::mcp::shared::ended_elsewhere(&s, id);
                }
            });
        }
        Ok(state)
    }

    /// Active health checks' state (their last round, today's probe spend).
    pub fn probes(&self) -> &crate::probes::Checks {
        &self.probes
    }

    /// The overload manager.
    pub fn overload(&self) -> &Arc<super::overload::Overload> {
        &self.overload
    }

    /// The connection limits the server was configured with.
    pub fn connections(&self) -> &sluice_net::server::ConnLimits {
        &self.connections
    }

    /// Who may call, and the directory of virtual keys.
    pub fn gate(&self) -> &Gate {
        &self.services.gate
    }

    /// The fleet, when Redis is configured.
    pub fn fleet(&self) -> Option<&Arc<Fleet>> {
        self.services.fleet.as_ref()
    }

    /// The store and its writer, when there is a database.
    pub fn store(&self) -> Option<&StoreServices> {
        self.services.store.as_ref()
    }

    /// The current snapshot (lock-free read).
    pub fn snapshot(&self) -> Guard<Arc<Snapshot>> {
        self.snapshot.load()
    }

    /// The upstream connection pools (a request's own target is built over them).
    pub fn clients(&self) -> &ClientRegistry {
        &self.clients
    }

    /// Where finished requests are recorded.
    pub fn recorder(&self) -> &Recorder {
        &self.recorder
    }

    /// Name the config file this state serves, so that it can be read again.
    pub fn set_config_path(&self, path: std::path::PathBuf) {
        let _ = self.config_path.set(path);
    }

    /// The config file this state serves, when it was loaded from one.
    pub fn config_path(&self) -> Option<&std::path::Path> {
        self.config_path.get().map(std::path::PathBuf::as_path)
    }

    /// Resolve the config against `vars` (a secret manager's values) from here on.
    pub fn set_vars(&self, vars: sluice_secrets::Vars) {
        let _ = self.vars.set(vars);
    }

    /// The environment the config is resolved against (the process's unless a secret
    /// manager was set).
    pub fn vars(&self) -> sluice_secrets::Vars {
        self.vars.get().cloned().unwrap_or_default()
    }

    /// Serve deployments managed at run time from here on.
    pub fn set_runtime(&self, runtime: Arc<crate::models::RuntimeModels>) {
        let _ = self.runtime.set(runtime);
    }

    /// The deployments managed at run time, when `store_model_in_db` is on with a database.
    pub fn runtime(&self) -> Option<&Arc<crate::models::RuntimeModels>> {
        self.runtime.get()
    }

    /// Read the config file again and serve it (with the stored deployments, when there are
    /// any): its warnings, or why it was not taken (every problem by path; the running config
    /// keeps serving). What SIGHUP and the console's reload do.
    pub async fn reload_from_file(&self) -> Result<Vec<String>, ReloadError> {
        let path = self.config_path().ok_or(ReloadError::NoFile)?;
        let source = sluice_config::Source::from_file(path)?;
        let vars = self.vars();
        if let Some(secrets) = vars.secrets() {
            // Names the file references for the first time are read now; a changed
            // key_management_system takes a restart.
            secrets.ensure(source.referenced_names()).await;
        }
        let Some(runtime) = self.runtime() else {
            let loaded = source.load(&[], &vars)?;
            self.reload(&loaded.config)?;
            return Ok(loaded.warnings.iter().map(ToString::to_string).collect());
        };
        // Checked alone first, so that a broken file is refused before it replaces the one
        // the stored deployments are merged into.
        let alone = source.load(&[], &vars)?;
        runtime.set_source(source);
        runtime.apply(self).await?;
        Ok(alone.warnings.iter().map(ToString::to_string).collect())
    }

    /// Replace the snapshot with one built from `config`; on error the old one keeps serving.
    pub fn reload(&self, config: &Config) -> Result<(), SnapshotError> {
        let snap = Snapshot::build(
            config,
            &self.clients,
            &self.health,
            Some(&self.snapshot.load()),
        )?;
        if snap.allowed_ips.is_some() {
            self.connections.peer_addresses.turn_on();
        }
        self.snapshot.store(Arc::new(snap));
        self.recorder.configure(&config.callbacks);
        if let Some(s) = &self.services.store {
            s.prompts.store(
                config.callbacks.spend_log_content,
                std::sync::atomic::Ordering::Relaxed,
            );
        }
        Ok(())
    }
}
