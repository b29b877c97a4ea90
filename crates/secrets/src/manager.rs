//! The managers behind one enum: a round of reads asks each for its per-round credential
//! (a login, a token, AWS's primary secret) once, then reads every name.

use sluice_core::settings::Env;
use sluice_core::Secret;

use crate::aws::Aws;
use crate::azure::Azure;
use crate::error::{ReadError, SetupError};
use crate::google::Google;
use crate::http::Http;
use crate::settings::{Settings, System};
use crate::vault::Vault;

/// One configured manager.
#[derive(Debug)]
pub(crate) enum Manager {
    Aws(Aws),
    Vault(Vault),
    /// Boxed: its token source holds an RSA key pair, the largest of the four.
    Google(Box<Google>),
    Azure(Azure),
}

/// One name's outcome in a round.
pub(crate) type Outcome = (String, Result<Secret, ReadError>);

impl Manager {
    /// Build the manager `settings` name from its variables in `env`.
    pub(crate) fn new(settings: &Settings, env: &dyn Env) -> Result<Self, SetupError> {
        let http = Http::new();
        Ok(match settings.system {
            System::AwsSecretManager => Manager::Aws(Aws::new(settings, env, http)?),
            System::HashicorpVault => Manager::Vault(Vault::from_env(env, http)?),
            System::GoogleSecretManager => Manager::Google(Box::new(Google::from_env(env, http)?)),
            System::AzureKeyVault => Manager::Azure(Azure::from_env(env, http)?),
        })
    }

    /// Whether `name` is one the manager's own setup reads, never asked of it (LiteLLM skips
    /// AWS's credentials the same way).
    pub(crate) fn own_variable(&self, name: &str) -> bool {
        match self {
            Manager::Aws(_) => crate::aws::OWN_VARIABLES.contains(&name),
            Manager::Vault(_) => name.starts_with("HCP_VAULT_"),
            Manager::Google(_) => name.starts_with("GOOGLE_SECRET_MANAGER_"),
            Manager::Azure(_) => name.starts_with("AZURE_"),
        }
    }

    /// Read every name in `names`, one after another.
    pub(crate) async fn read_round(&self, names: &[String]) -> Vec<Outcome> {
        let mut out = Vec::with_capacity(names.len());
        match self {
            Manager::Aws(aws) => {
                let primary = aws.primary().await;
                for n in names {
                    out.push((n.clone(), aws.read(n, primary.as_ref()).await));
                }
            }
            Manager::Vault(vault) => {
                let token = vault.token().await;
                for n in names {
                    let r = match &token {
                        Ok(t) => vault.read(n, t).await,
                        Err(e) => Err(e.clone()),
                    };
                    out.push((n.clone(), r));
                }
            }
            Manager::Google(google) => {
                for n in names {
                    out.push((n.clone(), google.read(n).await));
                }
            }
            Manager::Azure(azure) => {
                let token = azure.token().await;
                for n in names {
                    let r = match &token {
                        Ok(t) => azure.read(n, t).await,
                        Err(e) => Err(e.clone()),
                    };
                    out.push((n.clone(), r));
                }
            }
        }
        out
    }
}
