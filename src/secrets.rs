//! The config's secret manager (`general_settings.key_management_system`) in the running
//! gateway: opened before the config is resolved, so `os.environ/` references read its
//! values; read again every refresh interval by a task that, when a value changed, reloads
//! the config as SIGHUP does, so a rotated upstream key is used without a restart.

use std::sync::Arc;

use sluice_config::{ConfigError, ProcessEnv, Source};
use sluice_secrets::{Secrets, StartError, Vars};

use crate::server::AppState;

/// Why the secret manager kept the gateway from starting.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// `key_management_system` or `key_management_settings` is wrong.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The manager cannot be set up, or a referenced secret read from neither it nor the
    /// process environment.
    #[error("secret manager: {0}")]
    Start(#[from] StartError),
}

/// The environment `source` is resolved against: its secret manager's values (every
/// `os.environ/` name it references, read now) over the process environment, or the process
/// environment alone when it names no manager.
pub async fn open(source: &Source) -> Result<Vars, OpenError> {
    let Some(settings) = source.key_management(&ProcessEnv)? else {
        return Ok(Vars::default());
    };
    let secrets = Secrets::from_process(settings).map_err(StartError::from)?;
    secrets.start(source.referenced_names()).await?;
    Ok(Vars::with(Arc::new(secrets)))
}

/// Log what the first read could not do (logging starts after the config is read).
pub fn log_status(vars: &Vars) {
    let Some(s) = vars.secrets() else { return };
    let status = s.status();
    tracing::info!(
        manager = status.manager,
        secrets = status.secrets,
        refresh_interval_secs = status.refresh_interval_secs,
        "secret manager read"
    );
    for (name, failure) in &status.failing {
        tracing::warn!(secret = %name, manager = status.manager, ?failure, "secret read failed at startup; the process environment's value is used");
    }
}

/// Read the secrets again every interval; reload the config when one changed. Runs until
/// aborted; returns at once when no manager is configured.
pub async fn refresh(state: Arc<AppState>) {
    let Some(secrets) = state.vars().secrets().cloned() else {
        return;
    };
    let every = secrets.interval();
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if !secrets.refresh().await {
            continue;
        }
        match state.reload_from_file().await {
            Ok(_) => tracing::info!(
                manager = secrets.manager(),
                "a secret changed; config reloaded"
            ),
            Err(e) => tracing::error!(
                manager = secrets.manager(),
                "a secret changed, but the config reload was rejected: {e}"
            ),
        }
    }
}
