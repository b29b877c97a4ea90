//! Secret managers (`general_settings.key_management_system`) with the real binary: a
//! deployment's `api_key: os.environ/NAME` read from HashiCorp Vault (token and AppRole with a
//! namespace), Google Secret Manager and Azure Key Vault stand-ins that check what the real
//! services check (credentials, paths, api-version); a rotated secret used without a restart;
//! a failing manager keeping the last good value and saying so in readiness; bad settings and
//! an unreadable secret refused at startup by name. AWS Secrets Manager is tested against
//! moto's server in tests/sdk/test_secret_managers.py.

use sluice_net::server::RequestBody;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};

use crate::common::{
    eventually, recording, send, serve_binary_env, serve_loopback, vertex_key_file, Recording,
    Reply, Served, PATIENCE,
};

const ANSWER: &str = r#"{"id":"c1","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}"#;

/// The secret's name in the config; unusual so that no real environment sets it.
const NAME: &str = "SLUICE_E2E_SECRET_KEY";

/// The value a stand-in serves: `Some` answers it, `None` answers 503 (the manager is down).
type Value = Arc<Mutex<Option<String>>>;

fn value(v: &str) -> Value {
    Arc::new(Mutex::new(Some(v.to_owned())))
}

fn reply(status: u16, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = StatusCode::from_u16(status).unwrap();
    r.headers_mut()
        .insert("content-type", "application/json".parse().unwrap());
    r
}

fn header(req: &Request<RequestBody>, name: &str) -> String {
    req.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

async fn form(req: Request<RequestBody>) -> HashMap<String, String> {
    let body = req.into_body().collect().await.unwrap().to_bytes();
    form_urlencoded::parse(&body).into_owned().collect()
}

/// The binary, killed when dropped.
struct Running(Served);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.child.kill();
        let _ = self.0.child.wait();
    }
}

impl Running {
    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.0.addr)
    }
}

/// Start the binary off the runtime's thread (the stand-ins it reads at startup run on it).
async fn start(config: String, env: Vec<(&'static str, String)>) -> Result<Running, String> {
    tokio::task::spawn_blocking(move || {
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        serve_binary_env(&config, &[] as &[&str], &env).map(Running)
    })
    .await
    .unwrap()
}

/// A deployment whose key is the manager's `name`, answered by `up`.
fn config(up: &Recording, name: &str, manager: &str, settings: &str) -> String {
    format!(
        "model_list:\n  - model_name: gpt\n    litellm_params:\n      model: openai/gpt-4o\n      \
         api_base: {}\n      api_key: os.environ/{name}\n\
         general_settings:\n  key_management_system: {manager}\n  key_management_settings: {settings}\n",
        up.base()
    )
}

async fn chat(gw: &Running) -> u16 {
    let body = r#"{"model":"gpt","messages":[{"role":"user","content":"hi"}]}"#;
    let a = send(
        "POST",
        &gw.url("/v1/chat/completions"),
        body,
        &[("content-type", "application/json")],
    )
    .await;
    a.status.as_u16()
}

/// A chat through `gw` answers and reaches `up` with `Bearer {key}`.
async fn assert_serves(gw: &Running, up: &Recording, key: &str) {
    assert_eq!(chat(gw).await, 200);
    assert_eq!(last_key(up), format!("Bearer {key}"));
}

/// The Authorization the upstream saw last.
fn last_key(up: &Recording) -> String {
    let seen = up.requests();
    let last = seen.last().expect("the upstream was called");
    last.headers["authorization"].to_str().unwrap().to_owned()
}

async fn readiness(gw: &Running) -> serde_json::Value {
    send("GET", &gw.url("/health/readiness"), Bytes::new(), &[])
        .await
        .json()["secrets"]
        .clone()
}

/// A Vault KV v2 stand-in: reads at `/v1/{mount_path}/{NAME}` with one of `tokens`; an AppRole
/// login (role `role-1`, secret `secret-1`, namespace header `team`) hands out `hvs.approle`.
async fn vault(secret: Value, mount_path: &'static str, tokens: &'static [&'static str]) -> String {
    serve_loopback(move |req: Request<RequestBody>| {
        let secret = secret.clone();
        async move {
            let path = req.uri().path().to_owned();
            if req.method() == http::Method::POST && path == "/v1/auth/approle/login" {
                let ns = header(&req, "x-vault-namespace");
                let body = req.into_body().collect().await.unwrap().to_bytes();
                let login: serde_json::Value = serde_json::from_slice(&body).unwrap();
                if ns == "team" && login["role_id"] == "role-1" && login["secret_id"] == "secret-1"
                {
                    return reply(
                        200,
                        r#"{"auth":{"client_token":"hvs.approle","lease_duration":60,"renewable":true}}"#.into(),
                    );
                }
                return reply(400, r#"{"errors":["invalid role or secret ID"]}"#.into());
            }
            if !tokens.contains(&header(&req, "x-vault-token").as_str()) {
                return reply(403, r#"{"errors":["permission denied"]}"#.into());
            }
            if path != format!("/v1/{mount_path}/{NAME}") {
                return reply(404, r#"{"errors":[]}"#.into());
            }
            match secret.lock().unwrap().clone() {
                Some(v) => reply(
                    200,
                    serde_json::json!({"data": {"data": {"key": v}, "metadata": {"version": 1}}})
                        .to_string(),
                ),
                None => reply(503, r#"{"errors":["Vault is sealed"]}"#.into()),
            }
        }
    })
    .await
}

#[tokio::test]
async fn vault_secret_reaches_the_upstream_rotates_and_survives_an_outage() {
    let up = recording(Reply::Json(200, ANSWER)).await;
    let secret = value("sk-vault-1");
    let addr = vault(secret.clone(), "secret/data", &["root-token"]).await;
    let gw = start(
        config(&up, NAME, "hashicorp_vault", "{refresh_interval: 0.3}"),
        vec![
            ("HCP_VAULT_ADDR", addr),
            ("HCP_VAULT_TOKEN", "root-token".into()),
        ],
    )
    .await
    .unwrap();
    assert_serves(&gw, &up, "sk-vault-1").await;
    let ready = readiness(&gw).await;
    assert_eq!(ready["manager"], "hashicorp_vault");
    assert_eq!(ready["state"], "ok");
    assert_eq!(ready["secrets"], 1);

    // Rotated in Vault: used within the refresh interval, without a restart.
    *secret.lock().unwrap() = Some("sk-vault-2".into());
    assert!(
        eventually(PATIENCE, || async {
            chat(&gw).await == 200 && last_key(&up) == "Bearer sk-vault-2"
        })
        .await,
        "the rotated key never reached the upstream"
    );

    // Vault down: the last good value keeps serving, and readiness names the secret.
    *secret.lock().unwrap() = None;
    assert!(
        eventually(PATIENCE, || async {
            readiness(&gw).await["state"] == "degraded"
        })
        .await
    );
    let ready = readiness(&gw).await;
    assert_eq!(ready["failing"][NAME], "unavailable", "{ready}");
    assert!(!ready.to_string().contains("sk-vault"), "{ready}");
    assert_serves(&gw, &up, "sk-vault-2").await;

    // Back: healthy again.
    *secret.lock().unwrap() = Some("sk-vault-2".into());
    assert!(eventually(PATIENCE, || async { readiness(&gw).await["state"] == "ok" }).await);
}

#[tokio::test]
async fn vault_approle_login_in_a_namespace() {
    let up = recording(Reply::Json(200, ANSWER)).await;
    let addr = vault(value("sk-approle"), "team/kv/data/app", &["hvs.approle"]).await;
    let gw = start(
        config(
            &up,
            NAME,
            "hashicorp_vault",
            "{hosted_keys: [SLUICE_E2E_SECRET_KEY]}",
        ),
        vec![
            ("HCP_VAULT_ADDR", addr),
            ("HCP_VAULT_APPROLE_ROLE_ID", "role-1".into()),
            ("HCP_VAULT_APPROLE_SECRET_ID", "secret-1".into()),
            ("HCP_VAULT_NAMESPACE", "team".into()),
            ("HCP_VAULT_MOUNT_NAME", "kv".into()),
            ("HCP_VAULT_PATH_PREFIX", "app".into()),
        ],
    )
    .await
    .unwrap();
    assert_serves(&gw, &up, "sk-approle").await;
}

#[tokio::test]
async fn google_secret_manager_with_a_service_account() {
    let up = recording(Reply::Json(200, ANSWER)).await;
    let google = serve_loopback(|req: Request<RequestBody>| async move {
        let path = req.uri().path().to_owned();
        if path == "/token" {
            let f = form(req).await;
            let jwt_bearer = f.get("grant_type").map(String::as_str)
                == Some("urn:ietf:params:oauth:grant-type:jwt-bearer");
            let assertion = f.get("assertion").map_or(0, |a| a.split('.').count());
            if jwt_bearer && assertion == 3 {
                return reply(
                    200,
                    r#"{"access_token":"ya29.stand-in","expires_in":3600,"token_type":"Bearer"}"#
                        .into(),
                );
            }
            return reply(400, r#"{"error":"invalid_grant"}"#.into());
        }
        if header(&req, "authorization") != "Bearer ya29.stand-in" {
            return reply(
                401,
                r#"{"error":{"code":401,"status":"UNAUTHENTICATED"}}"#.into(),
            );
        }
        if path != format!("/v1/projects/proj-1/secrets/{NAME}/versions/latest:access") {
            return reply(404, r#"{"error":{"code":404,"status":"NOT_FOUND"}}"#.into());
        }
        let data = base64::engine::general_purpose::STANDARD.encode("sk-google");
        reply(
            200,
            serde_json::json!({
                "name": format!("projects/1/secrets/{NAME}/versions/1"),
                "payload": {"data": data}
            })
            .to_string(),
        )
    })
    .await;
    let key_file = vertex_key_file(google.trim_start_matches("http://"));
    let gw = start(
        config(&up, NAME, "google_secret_manager", "{}"),
        vec![
            ("GOOGLE_SECRET_MANAGER_PROJECT_ID", "proj-1".into()),
            (
                "GCS_PATH_SERVICE_ACCOUNT",
                key_file.to_string_lossy().into_owned(),
            ),
            ("GOOGLE_SECRET_MANAGER_ENDPOINT", google.clone()),
        ],
    )
    .await
    .unwrap();
    assert_serves(&gw, &up, "sk-google").await;
}

#[tokio::test]
async fn azure_key_vault_with_client_credentials() {
    let up = recording(Reply::Json(200, ANSWER)).await;
    let azure = serve_loopback(|req: Request<RequestBody>| async move {
        let path = req.uri().path().to_owned();
        let query = req.uri().query().unwrap_or_default().to_owned();
        if path == "/tenant-1/oauth2/v2.0/token" {
            let f = form(req).await;
            let want = [
                ("grant_type", "client_credentials"),
                ("client_id", "app-1"),
                ("client_secret", "app-secret"),
                ("scope", "https://vault.azure.net/.default"),
            ];
            if want
                .iter()
                .all(|(k, v)| f.get(*k).map(String::as_str) == Some(*v))
            {
                return reply(
                    200,
                    r#"{"token_type":"Bearer","expires_in":3599,"access_token":"eyJ.azure"}"#
                        .into(),
                );
            }
            return reply(401, r#"{"error":"invalid_client"}"#.into());
        }
        if !query.starts_with("api-version=7.") {
            return reply(
                400,
                r#"{"error":{"code":"BadParameter","message":"api-version"}}"#.into(),
            );
        }
        if header(&req, "authorization") != "Bearer eyJ.azure" {
            return reply(401, r#"{"error":{"code":"Unauthorized"}}"#.into());
        }
        if path != "/secrets/sluice-e2e-key" {
            return reply(404, r#"{"error":{"code":"SecretNotFound"}}"#.into());
        }
        reply(
            200,
            r#"{"value":"sk-azure","id":"https://v.vault.azure.net/secrets/sluice-e2e-key/1"}"#
                .into(),
        )
    })
    .await;
    let gw = start(
        config(&up, "sluice-e2e-key", "azure_key_vault", "{}"),
        vec![
            ("AZURE_KEY_VAULT_URI", azure.clone()),
            ("AZURE_AUTHORITY_HOST", azure.clone()),
            ("AZURE_TENANT_ID", "tenant-1".into()),
            ("AZURE_CLIENT_ID", "app-1".into()),
            ("AZURE_CLIENT_SECRET", "app-secret".into()),
        ],
    )
    .await
    .unwrap();
    assert_serves(&gw, &up, "sk-azure").await;
}

#[tokio::test]
async fn bad_settings_and_unreadable_secrets_stop_the_start_by_name() {
    let up = recording(Reply::Json(200, ANSWER)).await;
    let e = start(config(&up, NAME, "vault", "{}"), vec![])
        .await
        .err()
        .unwrap();
    assert!(
        e.contains("general_settings.key_management_system: \"vault\": unknown secret manager"),
        "{e}"
    );

    // Vault sealed at startup and nothing in the environment: the start fails naming both.
    let addr = vault(Arc::new(Mutex::new(None)), "secret/data", &["root-token"]).await;
    let env = vec![
        ("HCP_VAULT_ADDR", addr),
        ("HCP_VAULT_TOKEN", "root-token".into()),
    ];
    let e = start(config(&up, NAME, "hashicorp_vault", "{}"), env.clone())
        .await
        .err()
        .unwrap();
    assert!(e.contains("hashicorp_vault") && e.contains(NAME), "{e}");

    // The same with the variable in the process environment: it serves, readiness says so.
    let mut with_env = env;
    with_env.push((NAME, "sk-from-env".into()));
    let gw = start(config(&up, NAME, "hashicorp_vault", "{}"), with_env)
        .await
        .unwrap();
    assert_serves(&gw, &up, "sk-from-env").await;
    assert_eq!(readiness(&gw).await["failing"][NAME], "unavailable");
}
