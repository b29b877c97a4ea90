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

    /// Whether `name` is asked of the manager: not one its own setup reads (LiteLLM skips
    /// AWS's credentials the same way), and for Key Vault one it can hold (letters, digits and
    /// `-`; `OPENAI_API_KEY` cannot be a Key Vault secret, so it is the environment's).
    pub(crate) fn asks(&self, name: &str) -> bool {
        match self {
            Manager::Aws(_) => !crate::aws::OWN_VARIABLES.contains(&name),
            Manager::Vault(_) => !name.starts_with("HCP_VAULT_"),
            Manager::Google(_) => !name.starts_with("GOOGLE_SECRET_MANAGER_"),
            Manager::Azure(_) => crate::azure::can_hold(name),
        }
    }

    /// Read every name in `names`, one after another, after the round's credential.
    pub(crate) async fn read_round(&self, names: &[String]) -> Vec<Outcome> {
        if names.is_empty() {
            // No login or token request for nothing to read.
            return Vec::new();
        }
        let round = self.begin().await;
        let mut out = Vec::with_capacity(names.len());
        for n in names {
            out.push((n.clone(), self.read_one(n, &round).await));
        }
        out
    }

    /// What a round needs once: Vault's and Azure's token, AWS's primary secret.
    async fn begin(&self) -> Round {
        match self {
            Manager::Aws(aws) => Round {
                token: None,
                primary: aws.primary().await,
            },
            Manager::Vault(vault) => Round::with_token(vault.token().await),
            // Google's token source caches its own token across rounds.
            Manager::Google(_) => Round {
                token: None,
                primary: None,
            },
            Manager::Azure(azure) => Round::with_token(azure.token().await),
        }
    }

    async fn read_one(&self, name: &str, round: &Round) -> Result<Secret, ReadError> {
        match self {
            Manager::Aws(aws) => aws.read(name, round.primary.as_ref()).await,
            Manager::Vault(vault) => vault.read(name, round.token()?).await,
            Manager::Google(google) => google.read(name).await,
            Manager::Azure(azure) => azure.read(name, round.token()?).await,
        }
    }
}

/// A round's credential, fetched once before its reads.
struct Round {
    token: Option<Result<Secret, ReadError>>,
    primary: Option<Result<serde_json::Map<String, serde_json::Value>, ReadError>>,
}

impl Round {
    fn with_token(token: Result<Secret, ReadError>) -> Self {
        Self {
            token: Some(token),
            primary: None,
        }
    }

    /// The round's token, or why there is none (each read fails with the login's error).
    fn token(&self) -> Result<&Secret, ReadError> {
        match &self.token {
            Some(Ok(t)) => Ok(t),
            Some(Err(e)) => Err(e.clone()),
            None => Err(ReadError::Failed(
                "no token was fetched for this round".into(),
            )),
        }
    }
}
