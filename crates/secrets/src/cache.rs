//! The values read from the manager, served as the environment the config is resolved
//! against, refreshed in rounds. A failed read keeps the last good value and is remembered
//! (by name and kind, never value) for `/health/readiness`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use sluice_core::settings::{Env, ProcessEnv};
use sluice_core::Secret;

use crate::error::{ReadError, SetupError};
use crate::manager::{Manager, Outcome};
use crate::settings::Settings;

/// Why the gateway cannot start with its secret manager.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The manager's own settings are missing or wrong.
    #[error(transparent)]
    Setup(#[from] SetupError),
    /// Secrets the config references could be read neither from the manager nor from the
    /// process environment.
    #[error("{manager}: cannot read {names} ({reason}), and the process environment does not set {them} either")]
    Unreadable {
        /// The manager's config name.
        manager: &'static str,
        /// The names, comma-separated.
        names: String,
        /// The first failure's reason.
        reason: String,
        /// "it" or "them".
        them: &'static str,
    },
}

/// What went wrong with one name at the last round, as readiness tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Failure {
    /// The manager no longer has it (the last value read is kept).
    NotFound,
    /// The manager refused sluice's credentials.
    Denied,
    /// The manager could not be reached or answered an error.
    Unavailable,
}

impl Failure {
    fn of(e: &ReadError) -> Self {
        match e {
            ReadError::NotFound => Failure::NotFound,
            ReadError::Denied(_) => Failure::Denied,
            ReadError::Failed(_) => Failure::Unavailable,
        }
    }
}

/// The manager's state for `/health/readiness`: names and kinds of failure, never values.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    /// `key_management_system`.
    pub manager: &'static str,
    /// `ok`, or `degraded` when some name failed at the last read (its last good value, or
    /// the process environment's, is served).
    pub state: &'static str,
    /// How many names are read from the manager.
    pub secrets: usize,
    /// The names whose last read failed, and how.
    pub failing: BTreeMap<String, Failure>,
    /// Seconds between rounds.
    pub refresh_interval_secs: u64,
    /// When the last round ended (Unix seconds).
    pub last_refresh: Option<u64>,
}

#[derive(Default)]
struct State {
    /// Names asked of the manager.
    names: BTreeSet<String>,
    /// The last good value of each.
    values: HashMap<String, Secret>,
    failing: BTreeMap<String, Failure>,
    last_round: Option<SystemTime>,
}

/// One manager's secrets.
pub struct Secrets {
    manager: Manager,
    settings: Settings,
    interval: Duration,
    /// Where names the manager does not hold come from (the process environment).
    base: Arc<dyn Env + Send + Sync>,
    state: RwLock<State>,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secrets")
            .field("manager", &self.settings.system.name())
            .finish_non_exhaustive()
    }
}

impl Secrets {
    /// The manager `settings` name, its variables read from `base` (the process environment,
    /// also the fallback for names the manager does not hold).
    pub fn new(settings: Settings, base: Arc<dyn Env + Send + Sync>) -> Result<Self, SetupError> {
        let manager = Manager::new(&settings, &*base)?;
        let interval = settings.refresh(&*base);
        Ok(Self {
            manager,
            settings,
            interval,
            base,
            state: RwLock::new(State::default()),
        })
    }

    /// [`Secrets::new`] over the process environment.
    pub fn from_process(settings: Settings) -> Result<Self, SetupError> {
        Self::new(settings, Arc::new(ProcessEnv))
    }

    /// The manager's config name.
    pub fn manager(&self) -> &'static str {
        self.settings.system.name()
    }

    /// Seconds between rounds.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// The first read, at startup: every name of `names` the manager serves. A name it
    /// cannot read (not one it lacks) that the process environment does not set either
    /// stops the start, naming it; one the environment sets is served from there, logged.
    pub async fn start(&self, names: impl IntoIterator<Item = String>) -> Result<(), StartError> {
        let asked = self.wanted(names, &BTreeSet::new());
        let outcomes = self.manager.read_round(&asked).await;
        let mut unreadable = Vec::new();
        for (name, r) in &outcomes {
            if let Err(e) = r {
                if !matches!(e, ReadError::NotFound) && self.base.var(name).is_none() {
                    unreadable.push((name.clone(), e.to_string()));
                }
            }
        }
        if let Some((_, reason)) = unreadable.first() {
            return Err(StartError::Unreadable {
                manager: self.manager(),
                names: unreadable
                    .iter()
                    .map(|(n, _)| n.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                reason: reason.clone(),
                them: if unreadable.len() == 1 { "it" } else { "them" },
            });
        }
        self.apply(outcomes, true);
        Ok(())
    }

    /// Read the names of `names` not read before (a reloaded config may reference new ones);
    /// failures are kept for readiness and the config falls back to the environment.
    pub async fn ensure(&self, names: impl IntoIterator<Item = String>) {
        let known = self.read().names.clone();
        let asked = self.wanted(names, &known);
        if asked.is_empty() {
            return;
        }
        let outcomes = self.manager.read_round(&asked).await;
        self.apply(outcomes, true);
    }

    /// Read every name again; whether any value changed (the config should then be loaded
    /// again). A failure keeps the last good value.
    pub async fn refresh(&self) -> bool {
        let names: Vec<String> = self.read().names.iter().cloned().collect();
        let outcomes = self.manager.read_round(&names).await;
        self.apply(outcomes, false)
    }

    /// The state for readiness.
    pub fn status(&self) -> Status {
        let s = self.read();
        Status {
            manager: self.manager(),
            state: if s.failing.is_empty() {
                "ok"
            } else {
                "degraded"
            },
            secrets: s.names.len(),
            failing: s.failing.clone(),
            refresh_interval_secs: self.interval.as_secs(),
            last_refresh: s
                .last_round
                .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                .map(|d| d.as_secs()),
        }
    }

    /// The names of `names` the manager is asked for: hosted, not its own setup's, not in `known`.
    fn wanted(
        &self,
        names: impl IntoIterator<Item = String>,
        known: &BTreeSet<String>,
    ) -> Vec<String> {
        let set: BTreeSet<String> = names
            .into_iter()
            .filter(|n| self.settings.hosts(n) && self.manager.asks(n) && !known.contains(n))
            .collect();
        set.into_iter().collect()
    }

    /// Take a round's outcomes; whether a value changed. On a first read (`first`) a name the
    /// manager lacks is left to the environment without being called failing.
    fn apply(&self, outcomes: Vec<Outcome>, first: bool) -> bool {
        let mut changed = false;
        let mut s = self.write();
        for (name, r) in outcomes {
            s.names.insert(name.clone());
            match r {
                Ok(v) => {
                    if s.values.get(&name) != Some(&v) {
                        changed = true;
                        s.values.insert(name.clone(), v);
                    }
                    s.failing.remove(&name);
                }
                Err(ReadError::NotFound) if first => {
                    tracing::info!(secret = %name, manager = self.manager(), "not in the secret manager; read from the environment");
                }
                Err(e) => {
                    let kept = if s.values.contains_key(&name) {
                        "keeping the last value read"
                    } else {
                        "using the process environment's value, if any"
                    };
                    tracing::warn!(secret = %name, manager = self.manager(), error = %e, "secret read failed; {kept}");
                    s.failing.insert(name, Failure::of(&e));
                }
            }
        }
        s.last_round = Some(SystemTime::now());
        changed
    }

    fn read(&self) -> RwLockReadGuard<'_, State> {
        self.state
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, State> {
        self.state
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Env for Secrets {
    fn var(&self, name: &str) -> Option<String> {
        let held = self.read().values.get(name).map(|v| v.expose().to_owned());
        held.or_else(|| self.base.var(name))
    }
}

/// The environment a config is resolved against: a manager's secrets over the process
/// environment, or the process environment alone. Cloned into everything that loads the
/// config again (reloads, run-time deployments).
#[derive(Debug, Clone, Default)]
pub struct Vars(Option<Arc<Secrets>>);

impl Vars {
    /// Over `secrets`.
    pub fn with(secrets: Arc<Secrets>) -> Self {
        Self(Some(secrets))
    }

    /// The manager's secrets, when one is configured.
    pub fn secrets(&self) -> Option<&Arc<Secrets>> {
        self.0.as_ref()
    }
}

impl Env for Vars {
    fn var(&self, name: &str) -> Option<String> {
        match &self.0 {
            Some(s) => s.var(name),
            None => ProcessEnv.var(name),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::settings::System;

    fn secrets() -> Secrets {
        let env = crate::test_env(&[("HCP_VAULT_TOKEN", "t"), ("FROM_ENV", "env-value")]);
        Secrets::new(Settings::new(System::HashicorpVault), Arc::new(env)).unwrap()
    }

    fn ok(name: &str, v: &str) -> Outcome {
        (name.to_owned(), Ok(Secret::new(v)))
    }

    #[test]
    fn a_failed_read_keeps_the_last_good_value_and_is_reported() {
        let s = secrets();
        assert!(s.apply(
            vec![ok("A", "1"), ("FROM_ENV".into(), Err(ReadError::NotFound))],
            true
        ));
        assert_eq!(s.var("A").as_deref(), Some("1"));
        // Not in the manager at startup: the environment's value, not a failure.
        assert_eq!(s.var("FROM_ENV").as_deref(), Some("env-value"));
        assert_eq!(s.status().state, "ok");
        // The same value again is no change; a new one is.
        assert!(!s.apply(vec![ok("A", "1")], false));
        assert!(s.apply(vec![ok("A", "2")], false));
        // Down: the value stays, readiness names it without the value.
        assert!(!s.apply(
            vec![("A".into(), Err(ReadError::Failed("status 503".into())))],
            false
        ));
        assert_eq!(s.var("A").as_deref(), Some("2"));
        let status = s.status();
        assert_eq!(status.state, "degraded");
        assert_eq!(status.failing.get("A"), Some(&Failure::Unavailable));
        assert!(!serde_json::to_string(&status).unwrap().contains("\"2\""));
        // Deleted later: still kept, reported as not found.
        s.apply(vec![("A".into(), Err(ReadError::NotFound))], false);
        assert_eq!(s.var("A").as_deref(), Some("2"));
        assert_eq!(s.status().failing.get("A"), Some(&Failure::NotFound));
        assert!(s.apply(vec![ok("A", "3")], false));
        assert_eq!(s.status().state, "ok");
    }

    #[test]
    fn hosted_keys_and_the_managers_own_variables_are_not_asked() {
        let env = crate::test_env(&[("HCP_VAULT_TOKEN", "t")]);
        let mut settings = Settings::new(System::HashicorpVault);
        settings.hosted_keys = Some(vec!["A".into(), "HCP_VAULT_TOKEN".into()]);
        let s = Secrets::new(settings, Arc::new(env)).unwrap();
        let names = ["A", "B", "HCP_VAULT_TOKEN", "A"].map(String::from);
        assert_eq!(s.wanted(names, &BTreeSet::new()), vec!["A".to_owned()]);
        let known = BTreeSet::from(["A".to_owned()]);
        assert!(s.wanted(["A".to_owned()], &known).is_empty());
    }
}
