//! Google Secret Manager: `GET {endpoint}/v1/projects/{project}/secrets/{name}/versions/latest:access`
//! with a service-account access token (net's `TokenSource`, which honours the key file's
//! `token_uri`), the value being the base64 `payload.data`. The project is
//! `GOOGLE_SECRET_MANAGER_PROJECT_ID`; the key file is LiteLLM's `GCS_PATH_SERVICE_ACCOUNT`,
//! else `GOOGLE_APPLICATION_CREDENTIALS`; `GOOGLE_SECRET_MANAGER_ENDPOINT` (sluice's) replaces
//! `https://secretmanager.googleapis.com`.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde::Deserialize;
use sluice_core::settings::Env;
use sluice_core::Secret;
use sluice_net::google_auth::TokenSource;
use sluice_net::sigv4::uri_encode;

use crate::error::{ReadError, SetupError};
use crate::http::{parse, Http};

const MANAGER: &str = "google_secret_manager";

/// A Secret Manager reader for one project.
#[derive(Debug)]
pub(crate) struct Google {
    /// `{endpoint}/v1/projects/{project}/secrets/`.
    base: String,
    tokens: TokenSource,
    http: Http,
}

impl Google {
    /// Read the project, key file and endpoint.
    pub(crate) fn from_env(env: &dyn Env, http: Http) -> Result<Self, SetupError> {
        let var = |n: &str| {
            env.var(n)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let project = var("GOOGLE_SECRET_MANAGER_PROJECT_ID").ok_or(SetupError::Missing {
            manager: MANAGER,
            variable: "GOOGLE_SECRET_MANAGER_PROJECT_ID",
            why: "the project the secrets live in",
        })?;
        let (variable, path) = ["GCS_PATH_SERVICE_ACCOUNT", "GOOGLE_APPLICATION_CREDENTIALS"]
            .into_iter()
            .find_map(|n| var(n).map(|p| (n, p)))
            .ok_or(SetupError::Missing {
                manager: MANAGER,
                variable: "GCS_PATH_SERVICE_ACCOUNT",
                why: "or GOOGLE_APPLICATION_CREDENTIALS: the service-account key file",
            })?;
        let invalid = |message: String| SetupError::Invalid {
            manager: MANAGER,
            variable,
            message,
        };
        let json = std::fs::read_to_string(&path)
            .map_err(|e| invalid(format!("cannot read {path:?}: {e}")))?;
        let tokens =
            TokenSource::new(&json, http.client().clone()).map_err(|e| invalid(e.to_string()))?;
        let endpoint = var("GOOGLE_SECRET_MANAGER_ENDPOINT")
            .map(|e| e.trim_end_matches('/').to_owned())
            .unwrap_or_else(|| "https://secretmanager.googleapis.com".to_owned());
        Ok(Self {
            base: format!(
                "{endpoint}/v1/projects/{}/secrets/",
                uri_encode(&project, false)
            ),
            tokens,
            http,
        })
    }

    /// One secret's latest version.
    pub(crate) async fn read(&self, name: &str) -> Result<Secret, ReadError> {
        let token = self
            .tokens
            .header()
            .await
            .map_err(|e| ReadError::Denied(e.to_string()))?;
        let url = format!(
            "{}{}/versions/latest:access",
            self.base,
            uri_encode(name, false)
        );
        let bearer = token
            .to_str()
            .map_err(|_| ReadError::Denied("the access token is not text".into()))?;
        payload(
            &self
                .http
                .get(&url, &http::header::AUTHORIZATION, bearer)
                .await?,
        )
    }
}

#[derive(Deserialize)]
struct Access {
    payload: Payload,
}

#[derive(Deserialize)]
struct Payload {
    data: String,
}

/// The decoded `payload.data` of an `:access` answer.
fn payload(body: &[u8]) -> Result<Secret, ReadError> {
    let access: Access = parse(body, "an AccessSecretVersion answer ({payload: {data}})")?;
    let bytes = STANDARD
        .decode(access.payload.data.trim())
        .map_err(|_| ReadError::Failed("payload.data is not base64".into()))?;
    String::from_utf8(bytes)
        .map(Secret::new)
        .map_err(|_| ReadError::Failed("the secret is not UTF-8 text".into()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::collections::HashMap;

    use super::*;

    #[test]
    fn payloads() {
        let ok = br#"{"name":"projects/p/secrets/K/versions/2","payload":{"data":"c2stZ29vZ2xl","dataCrc32c":"1"}}"#;
        assert_eq!(payload(ok).unwrap().expose(), "sk-google");
        assert!(payload(br#"{"payload":{"data":"!!"}}"#).is_err());
        assert!(payload(br#"{"payload":{}}"#).is_err());
    }

    #[test]
    fn setup_needs_a_project_and_a_key_file() {
        let mut env: HashMap<String, String> = HashMap::new();
        let e = Google::from_env(&env, Http::new()).unwrap_err();
        assert!(
            e.to_string().contains("GOOGLE_SECRET_MANAGER_PROJECT_ID"),
            "{e}"
        );
        env.insert("GOOGLE_SECRET_MANAGER_PROJECT_ID".into(), "p".into());
        let e = Google::from_env(&env, Http::new()).unwrap_err();
        assert!(e.to_string().contains("GCS_PATH_SERVICE_ACCOUNT"), "{e}");
        let key = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/vertex/service_account.json"
        );
        env.insert("GOOGLE_APPLICATION_CREDENTIALS".into(), key.into());
        env.insert(
            "GOOGLE_SECRET_MANAGER_ENDPOINT".into(),
            "http://127.0.0.1:9/".into(),
        );
        let g = Google::from_env(&env, Http::new()).unwrap();
        assert_eq!(g.base, "http://127.0.0.1:9/v1/projects/p/secrets/");
    }
}
