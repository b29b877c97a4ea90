//! Azure Key Vault: `GET {AZURE_KEY_VAULT_URI}/secrets/{name}?api-version=7.4` with a bearer
//! token from Microsoft Entra ID's client-credentials flow (`POST
//! {AZURE_AUTHORITY_HOST}/{AZURE_TENANT_ID}/oauth2/v2.0/token`, scope
//! `https://vault.azure.net/.default`), the value being `value`. The token is fetched once per
//! round of reads. Azure Identity's other credentials (managed identity, workload identity,
//! the CLI) are not read.

use sluice_core::settings::Env;
use sluice_core::Secret;
use sluice_net::sigv4::uri_encode;

use crate::error::{ReadError, SetupError};
use crate::http::{member, Http};

const MANAGER: &str = "azure_key_vault";
/// The Key Vault REST API version asked for.
const API_VERSION: &str = "7.4";
/// The token's scope: Key Vault's resource.
const SCOPE: &str = "https://vault.azure.net/.default";

/// Whether `name` can be a Key Vault secret's name: 1 to 127 letters, digits and `-`.
pub(crate) fn can_hold(name: &str) -> bool {
    (1..=127).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// A Key Vault reader.
#[derive(Debug)]
pub(crate) struct Azure {
    vault: String,
    token_url: String,
    client_id: String,
    client_secret: Secret,
    http: Http,
}

impl Azure {
    /// Read `AZURE_KEY_VAULT_URI` and the client credentials.
    pub(crate) fn from_env(env: &dyn Env, http: Http) -> Result<Self, SetupError> {
        let var = |n: &str| {
            env.var(n)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let need = |variable: &'static str, why: &'static str| {
            var(variable).ok_or(SetupError::Missing {
                manager: MANAGER,
                variable,
                why,
            })
        };
        let vault = need(
            "AZURE_KEY_VAULT_URI",
            "the vault's address, https://{name}.vault.azure.net",
        )?
        .trim_end_matches('/')
        .to_owned();
        let tenant = need("AZURE_TENANT_ID", "the directory the client belongs to")?;
        let client_id = need("AZURE_CLIENT_ID", "the application (client) id")?;
        let client_secret = Secret::new(need(
            "AZURE_CLIENT_SECRET",
            "sluice signs in with client credentials",
        )?);
        let authority = var("AZURE_AUTHORITY_HOST")
            .map(|a| a.trim_end_matches('/').to_owned())
            .unwrap_or_else(|| "https://login.microsoftonline.com".to_owned());
        Ok(Self {
            vault,
            token_url: format!(
                "{authority}/{}/oauth2/v2.0/token",
                uri_encode(&tenant, false)
            ),
            client_id,
            client_secret,
            http,
        })
    }

    /// An access token for one round of reads.
    pub(crate) async fn token(&self) -> Result<Secret, ReadError> {
        let form = form_urlencoded::Serializer::new(String::new())
            .append_pair("grant_type", "client_credentials")
            .append_pair("client_id", &self.client_id)
            .append_pair("client_secret", self.client_secret.expose())
            .append_pair("scope", SCOPE)
            .finish();
        let answer = self
            .http
            .post(
                "token endpoint",
                &self.token_url,
                "application/x-www-form-urlencoded",
                form,
                &[],
            )
            .await?;
        member(&answer, "access_token", "a token answer ({access_token})")
    }

    /// One secret's current version.
    pub(crate) async fn read(&self, name: &str, token: &Secret) -> Result<Secret, ReadError> {
        let url = format!(
            "{}/secrets/{}?api-version={API_VERSION}",
            self.vault,
            uri_encode(name, false)
        );
        let bearer = format!("Bearer {}", token.expose());
        let answer = self
            .http
            .get(&url, &http::header::AUTHORIZATION, &bearer)
            .await?;
        member(&answer, "value", "a SecretBundle ({value})")
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::collections::HashMap;

    use super::*;

    #[test]
    fn answers() {
        let ok = br#"{"value":"sk-az","id":"https://v.vault.azure.net/secrets/k/1","attributes":{"enabled":true}}"#;
        let value = |b: &[u8]| member(b, "value", "a SecretBundle");
        assert_eq!(value(ok).unwrap().expose(), "sk-az");
        assert!(value(br#"{"error":{"code":"SecretNotFound"}}"#).is_err());
        let t = br#"{"token_type":"Bearer","expires_in":3599,"access_token":"eyJ0"}"#;
        assert_eq!(
            member(t, "access_token", "a token").unwrap().expose(),
            "eyJ0"
        );
    }

    #[test]
    fn only_key_vault_names_are_asked() {
        assert!(can_hold("openai-api-key") && can_hold("Key2"));
        assert!(!can_hold("OPENAI_API_KEY") && !can_hold("") && !can_hold("a/b"));
    }

    #[test]
    fn setup_reads_litellm_and_azure_identity_variables() {
        let mut env: HashMap<String, String> = HashMap::new();
        let e = Azure::from_env(&env, Http::new()).unwrap_err();
        assert!(e.to_string().contains("AZURE_KEY_VAULT_URI"), "{e}");
        for (k, v) in [
            ("AZURE_KEY_VAULT_URI", "https://v.vault.azure.net/"),
            ("AZURE_TENANT_ID", "t"),
            ("AZURE_CLIENT_ID", "c"),
            ("AZURE_CLIENT_SECRET", "s"),
        ] {
            env.insert(k.into(), v.into());
        }
        let a = Azure::from_env(&env, Http::new()).unwrap();
        assert_eq!(a.vault, "https://v.vault.azure.net");
        assert_eq!(
            a.token_url,
            "https://login.microsoftonline.com/t/oauth2/v2.0/token"
        );
        env.insert("AZURE_AUTHORITY_HOST".into(), "http://127.0.0.1:9".into());
        let a = Azure::from_env(&env, Http::new()).unwrap();
        assert_eq!(a.token_url, "http://127.0.0.1:9/t/oauth2/v2.0/token");
    }
}
