//! AWS Secrets Manager: `GetSecretValue` (JSON 1.1, `X-Amz-Target:
//! secretsmanager.GetSecretValue`) signed with net's SigV4, the value being `SecretString`.
//! Credentials and region come from the standard variables (static credentials; no assumed
//! roles or profiles), the endpoint from `AWS_ENDPOINT_URL_SECRETS_MANAGER` /
//! `AWS_ENDPOINT_URL` when set.

use std::time::SystemTime;

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Method, StatusCode};
use serde::Deserialize;
use sluice_core::settings::Env;
use sluice_core::Secret;
use sluice_net::sigv4::{Credentials, Signer};

use crate::error::{excerpt, ReadError, SetupError};
use crate::http::{parse, request, Http};
use crate::settings::Settings;

const MANAGER: &str = "aws_secret_manager";
static X_AMZ_TARGET: HeaderName = HeaderName::from_static("x-amz-target");

/// Names LiteLLM never asks the manager for: the ones reading it needs.
pub(crate) const OWN_VARIABLES: &[&str] = &[
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_REGION_NAME",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
];

/// A Secrets Manager reader for one region.
#[derive(Debug)]
pub(crate) struct Aws {
    endpoint: String,
    signer: Signer,
    /// `primary_secret_name`: one secret holding a JSON object of every value.
    primary: Option<String>,
    http: Http,
}

impl Aws {
    /// Read the region, credentials and endpoint.
    pub(crate) fn new(settings: &Settings, env: &dyn Env, http: Http) -> Result<Self, SetupError> {
        let var = |names: &[&str]| {
            names.iter().find_map(|n| {
                env.var(n)
                    .map(|v| v.trim().to_owned())
                    .filter(|v| !v.is_empty())
            })
        };
        let region = settings
            .aws_region_name
            .clone()
            .or_else(|| var(&["AWS_REGION_NAME", "AWS_REGION", "AWS_DEFAULT_REGION"]))
            .ok_or(SetupError::Missing {
                manager: MANAGER,
                variable: "AWS_REGION_NAME",
                why: "or AWS_REGION, or key_management_settings.aws_region_name",
            })?;
        let secret = |name| env.var(name).filter(|v| !v.is_empty()).map(Secret::new);
        let (Some(access_key_id), Some(secret_access_key)) =
            (secret("AWS_ACCESS_KEY_ID"), secret("AWS_SECRET_ACCESS_KEY"))
        else {
            return Err(SetupError::Missing {
                manager: MANAGER,
                variable: "AWS_ACCESS_KEY_ID",
                why: "and AWS_SECRET_ACCESS_KEY: sluice signs with static credentials",
            });
        };
        let endpoint = var(&["AWS_ENDPOINT_URL_SECRETS_MANAGER", "AWS_ENDPOINT_URL"])
            .map(|e| e.trim_end_matches('/').to_owned())
            .unwrap_or_else(|| format!("https://secretsmanager.{region}.amazonaws.com"));
        let credentials = Credentials {
            access_key_id,
            secret_access_key,
            session_token: secret("AWS_SESSION_TOKEN"),
        };
        Ok(Self {
            endpoint,
            signer: Signer::new(credentials, region, "secretsmanager"),
            primary: settings.primary_secret_name.clone(),
            http,
        })
    }

    /// The JSON object of `primary_secret_name` for one round, when configured.
    pub(crate) async fn primary(
        &self,
    ) -> Option<Result<serde_json::Map<String, serde_json::Value>, ReadError>> {
        let name = self.primary.as_deref()?;
        Some(self.get(name).await.and_then(|s| {
            parse(s.expose().as_bytes(), "a JSON object of names to values")
                .map_err(|e| ReadError::Failed(format!("primary_secret_name {name}: {e}")))
        }))
    }

    /// One secret: from the round's primary secret when there is one, else its own.
    pub(crate) async fn read(
        &self,
        name: &str,
        primary: Option<&Result<serde_json::Map<String, serde_json::Value>, ReadError>>,
    ) -> Result<Secret, ReadError> {
        match primary {
            None => self.get(name).await,
            Some(Err(e)) => Err(e.clone()),
            Some(Ok(map)) => match map.get(name) {
                Some(serde_json::Value::String(s)) => Ok(Secret::new(s.as_str())),
                Some(other) => Ok(Secret::new(other.to_string())),
                None => Err(ReadError::NotFound),
            },
        }
    }

    async fn get(&self, name: &str) -> Result<Secret, ReadError> {
        let body = Bytes::from(serde_json::json!({ "SecretId": name }).to_string());
        let mut req = request(Method::POST, &format!("{}/", self.endpoint), body.clone())?;
        let headers = req.headers_mut();
        headers.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/x-amz-json-1.1"),
        );
        headers.insert(
            X_AMZ_TARGET.clone(),
            HeaderValue::from_static("secretsmanager.GetSecretValue"),
        );
        let uri = req.uri().clone();
        self.signer
            .sign(&uri, req.headers_mut(), &body, SystemTime::now());
        let (status, answer) = self.http.send(req).await?;
        if status.is_success() {
            return secret_string(&answer);
        }
        Err(error(status, &answer))
    }
}

#[derive(Deserialize)]
struct Value {
    #[serde(rename = "SecretString")]
    secret_string: Option<String>,
}

/// `SecretString` of a `GetSecretValue` answer.
fn secret_string(body: &[u8]) -> Result<Secret, ReadError> {
    let v: Value = parse(body, "a GetSecretValue answer")?;
    v.secret_string.map(Secret::new).ok_or_else(|| {
        ReadError::Failed("the secret has no SecretString (binary secrets are not read)".into())
    })
}

#[derive(Deserialize)]
struct AwsError {
    #[serde(rename = "__type", default)]
    kind: String,
}

/// An error answer by its `__type` (`ResourceNotFoundException`, `AccessDeniedException`, ...).
fn error(status: StatusCode, body: &[u8]) -> ReadError {
    let kind = serde_json::from_slice::<AwsError>(body)
        .map(|e| e.kind.rsplit('#').next().unwrap_or_default().to_owned())
        .unwrap_or_default();
    match kind.as_str() {
        "ResourceNotFoundException" => ReadError::NotFound,
        "AccessDeniedException"
        | "UnrecognizedClientException"
        | "InvalidSignatureException"
        | "ExpiredTokenException" => ReadError::Denied(format!("{kind}: {}", excerpt(body))),
        _ => ReadError::Failed(format!("status {status}: {}", excerpt(body))),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::collections::HashMap;

    use super::*;
    use crate::settings::System;

    #[test]
    fn answers_and_errors() {
        let ok = br#"{"ARN":"arn:x","Name":"K","SecretString":"sk-aws","VersionId":"v"}"#;
        assert_eq!(secret_string(ok).unwrap().expose(), "sk-aws");
        assert!(secret_string(br#"{"SecretBinary":"AAAA"}"#).is_err());
        let nf = br#"{"__type":"ResourceNotFoundException","message":"Secrets Manager can't find the specified secret."}"#;
        assert_eq!(error(StatusCode::BAD_REQUEST, nf), ReadError::NotFound);
        let denied = br#"{"__type":"com.amazonaws#AccessDeniedException","message":"no"}"#;
        assert!(matches!(
            error(StatusCode::BAD_REQUEST, denied),
            ReadError::Denied(_)
        ));
        assert!(matches!(
            error(StatusCode::INTERNAL_SERVER_ERROR, b"oops"),
            ReadError::Failed(_)
        ));
    }

    #[test]
    fn setup_reads_region_credentials_and_endpoint() {
        let s = Settings::new(System::AwsSecretManager);
        let mut env: HashMap<String, String> = HashMap::new();
        assert!(Aws::new(&s, &env, Http::new())
            .unwrap_err()
            .to_string()
            .contains("AWS_REGION_NAME"));
        env.insert("AWS_REGION".into(), "eu-west-1".into());
        assert!(Aws::new(&s, &env, Http::new())
            .unwrap_err()
            .to_string()
            .contains("AWS_ACCESS_KEY_ID"));
        env.insert("AWS_ACCESS_KEY_ID".into(), "AKID".into());
        env.insert("AWS_SECRET_ACCESS_KEY".into(), "secret".into());
        let a = Aws::new(&s, &env, Http::new()).unwrap();
        assert_eq!(a.endpoint, "https://secretsmanager.eu-west-1.amazonaws.com");
        env.insert("AWS_ENDPOINT_URL".into(), "http://127.0.0.1:5000/".into());
        assert_eq!(
            Aws::new(&s, &env, Http::new()).unwrap().endpoint,
            "http://127.0.0.1:5000"
        );
    }

    #[tokio::test]
    async fn primary_secret_members() {
        let s = Settings::new(System::AwsSecretManager);
        let env = crate::test_env(&[
            ("AWS_REGION", "r"),
            ("AWS_ACCESS_KEY_ID", "a"),
            ("AWS_SECRET_ACCESS_KEY", "b"),
        ]);
        let a = Aws::new(&s, &env, Http::new()).unwrap();
        let map: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(r#"{"A":"x","N":3}"#).unwrap();
        let p = Ok(map);
        assert_eq!(a.read("A", Some(&p)).await.unwrap().expose(), "x");
        assert_eq!(a.read("N", Some(&p)).await.unwrap().expose(), "3");
        assert_eq!(
            a.read("B", Some(&p)).await.unwrap_err(),
            ReadError::NotFound
        );
    }
}
