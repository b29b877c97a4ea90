//! What the config asks for: which manager (`key_management_system`) and how it is used
//! (`key_management_settings`), as validated by the config crate.

use std::time::Duration;

use sluice_core::settings::Env;

/// How often the secrets are read again when nothing says otherwise: LiteLLM's
/// `SECRET_MANAGER_REFRESH_INTERVAL` default (a day).
pub const DEFAULT_REFRESH: Duration = Duration::from_secs(86_400);

/// The managers sluice reads (LiteLLM's `KeyManagementSystem` values it supports).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum System {
    /// `aws_secret_manager`: AWS Secrets Manager, `GetSecretValue` signed with SigV4.
    AwsSecretManager,
    /// `hashicorp_vault`: HashiCorp Vault or OpenBao, KV v2, token or AppRole.
    HashicorpVault,
    /// `google_secret_manager`: Google Secret Manager with a service-account key.
    GoogleSecretManager,
    /// `azure_key_vault`: Azure Key Vault with a client-credentials token.
    AzureKeyVault,
}

impl System {
    /// Every supported manager, by its config name.
    pub const ALL: [System; 4] = [
        System::AwsSecretManager,
        System::HashicorpVault,
        System::GoogleSecretManager,
        System::AzureKeyVault,
    ];

    /// Its `key_management_system` value.
    pub fn name(self) -> &'static str {
        match self {
            System::AwsSecretManager => "aws_secret_manager",
            System::HashicorpVault => "hashicorp_vault",
            System::GoogleSecretManager => "google_secret_manager",
            System::AzureKeyVault => "azure_key_vault",
        }
    }

    /// The manager named `value`, or why it is refused (LiteLLM's other values are named
    /// with what sluice does not do).
    pub fn parse(value: &str) -> Result<System, String> {
        let value = value.trim();
        if let Some(s) = System::ALL.into_iter().find(|s| s.name() == value) {
            return Ok(s);
        }
        let names: Vec<&str> = System::ALL.iter().map(|s| s.name()).collect();
        let why = match value {
            "google_kms" | "aws_kms" => {
                "decrypting KMS-encrypted environment values is not supported by sluice"
            }
            "cyberark" => "CyberArk Conjur is not supported by sluice",
            "custom" => "custom secret manager classes (Python) cannot be loaded by sluice",
            "local" => "`local` is the process environment, which sluice reads without a manager; leave the key out",
            _ => "unknown secret manager",
        };
        Err(format!("{why}; expected one of {}", names.join(", ")))
    }

    /// The manager's own refresh-interval variable in LiteLLM, if it has one.
    fn interval_variable(self) -> Option<&'static str> {
        match self {
            System::HashicorpVault => Some("HCP_VAULT_REFRESH_INTERVAL"),
            System::GoogleSecretManager => Some("GOOGLE_SECRET_MANAGER_REFRESH_INTERVAL"),
            System::AwsSecretManager | System::AzureKeyVault => None,
        }
    }
}

/// `key_management_system` with the parts of `key_management_settings` sluice reads.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// The manager.
    pub system: System,
    /// `hosted_keys`: only these names are read from the manager (the rest from the process
    /// environment); `None` reads every referenced name there.
    pub hosted_keys: Option<Vec<String>>,
    /// `primary_secret_name` (AWS): one secret holding a JSON object of names to values.
    pub primary_secret_name: Option<String>,
    /// `aws_region_name` (AWS): the region, over `AWS_REGION_NAME` / `AWS_REGION`.
    pub aws_region_name: Option<String>,
    /// `refresh_interval` (sluice's): seconds between reads, over the environment's.
    pub refresh_interval: Option<Duration>,
}

impl Settings {
    /// Settings for `system` with nothing else set.
    pub fn new(system: System) -> Self {
        Self {
            system,
            hosted_keys: None,
            primary_secret_name: None,
            aws_region_name: None,
            refresh_interval: None,
        }
    }

    /// How often to read again: `refresh_interval`, else the manager's LiteLLM variable
    /// (`HCP_VAULT_REFRESH_INTERVAL`, `GOOGLE_SECRET_MANAGER_REFRESH_INTERVAL`), else
    /// `SECRET_MANAGER_REFRESH_INTERVAL`, else a day. Unparsable variables are skipped.
    pub fn refresh(&self, env: &dyn Env) -> Duration {
        let from_env = |name: &str| {
            env.var(name)
                .and_then(|v| v.trim().parse::<f64>().ok())
                .filter(|s| s.is_finite() && *s > 0.0)
                .map(Duration::from_secs_f64)
        };
        self.refresh_interval
            .or_else(|| self.system.interval_variable().and_then(from_env))
            .or_else(|| from_env("SECRET_MANAGER_REFRESH_INTERVAL"))
            .unwrap_or(DEFAULT_REFRESH)
    }

    /// Whether `name` is read from the manager (`hosted_keys`, when given, lists them).
    pub fn hosts(&self, name: &str) -> bool {
        self.hosted_keys
            .as_ref()
            .is_none_or(|keys| keys.iter().any(|k| k == name))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::collections::HashMap;

    use super::*;

    #[test]
    fn names_parse_and_refusals_say_why() {
        for s in System::ALL {
            assert_eq!(System::parse(s.name()), Ok(s));
        }
        let e = System::parse("google_kms").unwrap_err();
        assert!(e.contains("KMS") && e.contains("hashicorp_vault"), "{e}");
        assert!(System::parse("vault").unwrap_err().starts_with("unknown"));
    }

    #[test]
    fn refresh_interval_precedence() {
        let mut s = Settings::new(System::HashicorpVault);
        let mut env = HashMap::new();
        assert_eq!(s.refresh(&env), DEFAULT_REFRESH);
        env.insert(
            "SECRET_MANAGER_REFRESH_INTERVAL".to_owned(),
            "600".to_owned(),
        );
        assert_eq!(s.refresh(&env), Duration::from_secs(600));
        env.insert("HCP_VAULT_REFRESH_INTERVAL".to_owned(), "60".to_owned());
        assert_eq!(s.refresh(&env), Duration::from_secs(60));
        s.refresh_interval = Some(Duration::from_secs(5));
        assert_eq!(s.refresh(&env), Duration::from_secs(5));
        let aws = Settings::new(System::AwsSecretManager);
        assert_eq!(aws.refresh(&env), Duration::from_secs(600));
    }

    #[test]
    fn hosted_keys_limit_the_names() {
        let mut s = Settings::new(System::AzureKeyVault);
        assert!(s.hosts("ANY"));
        s.hosted_keys = Some(vec!["A".into()]);
        assert!(s.hosts("A") && !s.hosts("B"));
    }
}
