//! HashiCorp Vault / OpenBao, KV version 2, as LiteLLM's `HashicorpSecretManager` reads it:
//! `GET {HCP_VAULT_ADDR}/v1/[{namespace}/]{mount}/data/[{prefix}/]{name}` with
//! `X-Vault-Token`, the value being `data.data.key`. The token is `HCP_VAULT_TOKEN`, or one
//! from an AppRole login (`POST /v1/auth/{approle mount}/login`) made once per round of reads.

use http::HeaderName;
use serde::Deserialize;
use sluice_core::settings::Env;
use sluice_core::Secret;
use sluice_net::sigv4::uri_encode;

use crate::error::{ReadError, SetupError};
use crate::http::{parse, Http};

const MANAGER: &str = "hashicorp_vault";
static X_VAULT_TOKEN: HeaderName = HeaderName::from_static("x-vault-token");
static X_VAULT_NAMESPACE: HeaderName = HeaderName::from_static("x-vault-namespace");

/// How sluice proves itself to Vault.
#[derive(Debug)]
enum Auth {
    /// `HCP_VAULT_TOKEN`.
    Token(Secret),
    /// `HCP_VAULT_APPROLE_ROLE_ID` and `HCP_VAULT_APPROLE_SECRET_ID` (LiteLLM's first choice
    /// when both are set), logged in at `HCP_VAULT_APPROLE_MOUNT_PATH`.
    AppRole {
        role_id: Secret,
        secret_id: Secret,
        mount: String,
    },
}

/// A Vault reader.
#[derive(Debug)]
pub(crate) struct Vault {
    addr: String,
    auth: Auth,
    /// `HCP_VAULT_LOGIN_NAMESPACE`, else `HCP_VAULT_NAMESPACE`: sent on the login.
    login_namespace: Option<String>,
    /// The path up to the secret's name: `v1/[ns/]mount/data/[prefix/]`.
    base: String,
    http: Http,
}

/// A set, non-blank variable, trimmed (and its slashes, for path parts).
fn part(env: &dyn Env, name: &str) -> Option<String> {
    env.var(name)
        .map(|v| v.trim().trim_matches('/').to_owned())
        .filter(|v| !v.is_empty())
}

impl Vault {
    /// Read LiteLLM's `HCP_VAULT_*` variables.
    pub(crate) fn from_env(env: &dyn Env, http: Http) -> Result<Self, SetupError> {
        let addr = env
            .var("HCP_VAULT_ADDR")
            .map(|a| a.trim().trim_end_matches('/').to_owned())
            .filter(|a| !a.is_empty())
            .unwrap_or_else(|| "http://127.0.0.1:8200".to_owned());
        if !(addr.starts_with("http://") || addr.starts_with("https://")) {
            return Err(SetupError::Invalid {
                manager: MANAGER,
                variable: "HCP_VAULT_ADDR",
                message: format!("expected an http:// or https:// address, got {addr:?}"),
            });
        }
        let secret = |name| env.var(name).filter(|v| !v.is_empty()).map(Secret::new);
        let auth = match (
            secret("HCP_VAULT_APPROLE_ROLE_ID"),
            secret("HCP_VAULT_APPROLE_SECRET_ID"),
            secret("HCP_VAULT_TOKEN"),
        ) {
            (Some(role_id), Some(secret_id), _) => Auth::AppRole {
                role_id,
                secret_id,
                mount: part(env, "HCP_VAULT_APPROLE_MOUNT_PATH")
                    .unwrap_or_else(|| "approle".to_owned()),
            },
            (_, _, Some(token)) => Auth::Token(token),
            _ if part(env, "HCP_VAULT_CLIENT_CERT").is_some() => {
                return Err(SetupError::Invalid {
                    manager: MANAGER,
                    variable: "HCP_VAULT_CLIENT_CERT",
                    message: "TLS certificate login is not supported by sluice; use HCP_VAULT_TOKEN or AppRole".into(),
                })
            }
            _ => {
                return Err(SetupError::Missing {
                    manager: MANAGER,
                    variable: "HCP_VAULT_TOKEN",
                    why: "or HCP_VAULT_APPROLE_ROLE_ID and HCP_VAULT_APPROLE_SECRET_ID",
                })
            }
        };
        let namespace = part(env, "HCP_VAULT_NAMESPACE");
        let secret_namespace =
            part(env, "HCP_VAULT_SECRET_NAMESPACE").or_else(|| namespace.clone());
        let mut base = "v1/".to_owned();
        for p in [
            secret_namespace,
            Some(part(env, "HCP_VAULT_MOUNT_NAME").unwrap_or_else(|| "secret".to_owned())),
            Some("data".to_owned()),
            part(env, "HCP_VAULT_PATH_PREFIX"),
        ]
        .into_iter()
        .flatten()
        {
            base.push_str(&uri_encode(&p, true));
            base.push('/');
        }
        Ok(Self {
            addr,
            auth,
            login_namespace: part(env, "HCP_VAULT_LOGIN_NAMESPACE").or(namespace),
            base,
            http,
        })
    }

    /// The token for one round of reads (an AppRole login, or the configured token).
    pub(crate) async fn token(&self) -> Result<Secret, ReadError> {
        let (role_id, secret_id, mount) = match &self.auth {
            Auth::Token(t) => return Ok(t.clone()),
            Auth::AppRole {
                role_id,
                secret_id,
                mount,
            } => (role_id, secret_id, mount),
        };
        let body =
            serde_json::json!({"role_id": role_id.expose(), "secret_id": secret_id.expose()});
        let url = format!("{}/v1/auth/{}/login", self.addr, uri_encode(mount, true));
        let namespace: Vec<(&HeaderName, &str)> = self
            .login_namespace
            .iter()
            .map(|ns| (&X_VAULT_NAMESPACE, ns.as_str()))
            .collect();
        let answer = self
            .http
            .post(
                "AppRole login",
                &url,
                "application/json",
                body.to_string(),
                &namespace,
            )
            .await?;
        login_token(&answer)
    }

    /// One secret's value, with a token from [`Vault::token`].
    pub(crate) async fn read(&self, name: &str, token: &Secret) -> Result<Secret, ReadError> {
        if name
            .split('/')
            .any(|s| s.is_empty() || s == "." || s == "..")
        {
            return Err(ReadError::Failed(format!(
                "{name:?} is not a usable secret path"
            )));
        }
        let url = format!("{}/{}{}", self.addr, self.base, uri_encode(name, true));
        value(&self.http.get(&url, &X_VAULT_TOKEN, token.expose()).await?)
    }
}

#[derive(Deserialize)]
struct Login {
    auth: LoginAuth,
}

#[derive(Deserialize)]
struct LoginAuth {
    client_token: String,
}

/// The client token of an AppRole login's answer.
fn login_token(body: &[u8]) -> Result<Secret, ReadError> {
    let login: Login = parse(body, "a Vault login answer ({auth: {client_token}})")?;
    Ok(Secret::new(login.auth.client_token))
}

#[derive(Deserialize)]
struct Read {
    data: ReadData,
}

#[derive(Deserialize)]
struct ReadData {
    data: serde_json::Map<String, serde_json::Value>,
}

/// `data.data.key` of a KV v2 read (LiteLLM keeps each secret under the field `key`).
fn value(body: &[u8]) -> Result<Secret, ReadError> {
    let read: Read = parse(body, "a KV v2 answer ({data: {data: {...}}})")?;
    match read.data.data.get("key") {
        Some(serde_json::Value::String(s)) => Ok(Secret::new(s.as_str())),
        Some(_) => Err(ReadError::Failed("the field `key` is not a string".into())),
        None => Err(ReadError::Failed(
            "the secret has no field `key` (sluice, like LiteLLM, reads the value from `key`)"
                .into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::test_env as env;

    #[test]
    fn kv2_answers() {
        let ok = br#"{"data":{"data":{"key":"sk-1"},"metadata":{"version":3}}}"#;
        assert_eq!(value(ok).unwrap().expose(), "sk-1");
        let e = value(br#"{"data":{"data":{"other":"x"}}}"#).unwrap_err();
        assert!(e.to_string().contains("`key`"), "{e}");
        let e = value(br#"{"data":{"data":{"key":"sk-secret"}"#).unwrap_err();
        assert!(!e.to_string().contains("sk-secret"), "{e}");
        assert_eq!(
            login_token(br#"{"auth":{"client_token":"hvs.x","lease_duration":60}}"#)
                .unwrap()
                .expose(),
            "hvs.x"
        );
    }

    #[test]
    fn paths_follow_litellm() {
        let v = Vault::from_env(&env(&[("HCP_VAULT_TOKEN", "t")]), Http::new()).unwrap();
        assert_eq!(
            format!("{}/{}", v.addr, v.base),
            "http://127.0.0.1:8200/v1/secret/data/"
        );
        let v = Vault::from_env(
            &env(&[
                ("HCP_VAULT_ADDR", "https://vault:8200/"),
                ("HCP_VAULT_TOKEN", "t"),
                ("HCP_VAULT_NAMESPACE", "team"),
                ("HCP_VAULT_MOUNT_NAME", "/kv/"),
                ("HCP_VAULT_PATH_PREFIX", "app/prod"),
            ]),
            Http::new(),
        )
        .unwrap();
        assert_eq!(
            format!("{}/{}", v.addr, v.base),
            "https://vault:8200/v1/team/kv/data/app/prod/"
        );
        assert_eq!(v.login_namespace.as_deref(), Some("team"));
    }

    #[test]
    fn auth_choice_and_missing_credentials() {
        let v = Vault::from_env(
            &env(&[
                ("HCP_VAULT_TOKEN", "t"),
                ("HCP_VAULT_APPROLE_ROLE_ID", "r"),
                ("HCP_VAULT_APPROLE_SECRET_ID", "s"),
            ]),
            Http::new(),
        )
        .unwrap();
        assert!(matches!(v.auth, Auth::AppRole { ref mount, .. } if mount == "approle"));
        let e = Vault::from_env(&env(&[]), Http::new()).unwrap_err();
        assert!(e.to_string().contains("HCP_VAULT_TOKEN"), "{e}");
        let e =
            Vault::from_env(&env(&[("HCP_VAULT_CLIENT_CERT", "/c.pem")]), Http::new()).unwrap_err();
        assert!(e.to_string().contains("not supported"), "{e}");
    }
}
