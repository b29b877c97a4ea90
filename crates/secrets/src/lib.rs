//! Secret managers for the config's `os.environ/NAME` references (LiteLLM's
//! `general_settings.key_management_system`): AWS Secrets Manager, HashiCorp Vault / OpenBao
//! (KV v2), Google Secret Manager and Azure Key Vault.
//!
//! Every referenced name is read from the manager at startup into a [`Secrets`] cache, which
//! the config is then resolved against ([`Vars`] implements the config's `Env`: the manager's
//! value first, the process environment after, as LiteLLM's `get_secret` falls back to
//! `os.environ`). The cache is refreshed on an interval; a failed read keeps the last good
//! value and is reported by [`Secrets::status`] (never the values themselves).

mod aws;
mod azure;
mod cache;
mod error;
mod google;
mod http;
mod manager;
mod settings;
mod vault;

pub use cache::{Failure, Secrets, StartError, Status, Vars};
pub use error::{ReadError, SetupError};
pub use settings::{Settings, System, DEFAULT_REFRESH};

/// Test helper: an environment of `pairs`.
#[cfg(test)]
fn test_env(pairs: &[(&str, &str)]) -> std::collections::HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}
