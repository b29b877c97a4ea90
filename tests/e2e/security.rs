//! End-to-end security: client-supplied upstream targets (SSRF) refused or checked, HTTPS on
//! the listener (the real binary, HTTP/1.1 and h2), and virtual keys only as hashes at rest.
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::common::*;
use bytes::Bytes;
use http::{Request, Version};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};

const CHAT_OK: &str = r#"{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}"#;

/// A gateway whose one deployment points at a port nothing listens on: a request that
/// reaches the recording upstream went where its own body said.
fn config(general: &str) -> String {
    format!(
        r#"
model_list:
  - model_name: gpt-test
    litellm_params:
      model: openai/gpt-upstream
      api_base: http://127.0.0.1:9/v1
      api_key: sk-configured
  - model_name: claude-test
    litellm_params:
      model: anthropic/claude-upstream
      api_base: http://127.0.0.1:9
      api_key: sk-configured
general_settings:
{general}
"#
    )
}

fn chat_with(extra: Value) -> String {
    let mut body = json!({"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]});
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    body.to_string()
}

fn assert_refused(a: &Answer, param: &str, says: &str) {
    assert_eq!(a.status, 400, "{}", a.text());
    let e = &a.json()["error"];
    assert_eq!(e["param"], param, "{}", a.text());
    assert_eq!(e["type"], "invalid_request_error", "{}", a.text());
    let message = e["message"].as_str().unwrap();
    assert!(message.contains(says), "{message}");
}

#[tokio::test]
async fn client_side_targets_and_credentials_are_refused_by_default() {
    let up = recording(Reply::Json(200, CHAT_OK)).await;
    let gw = gateway(&config("  disable_admin_ui: true")).await;
    for (field, value) in [
        ("api_base", json!(up.base())),
        ("base_url", json!(up.base())),
        ("api_key", json!("sk-mine")),
        ("extra_headers", json!({"x-a": "b"})),
        ("api_version", json!("2024-01-01")),
        ("aws_sts_endpoint", json!("http://169.254.169.254/")),
    ] {
        let a = post(
            &gw.url("/v1/chat/completions"),
            &chat_with(json!({ field: value })),
        )
        .await;
        assert_refused(&a, field, "allow_client_side_credentials");
    }
    // Every endpoint that reads the envelope: embeddings, Anthropic's messages, responses.
    let embed = json!({"model": "gpt-test", "input": "x", "api_base": up.base()}).to_string();
    assert_refused(
        &post(&gw.url("/v1/embeddings"), &embed).await,
        "api_base",
        "not allowed",
    );
    let messages = json!({"model": "claude-test", "max_tokens": 5, "base_url": up.base(),
        "messages": [{"role": "user", "content": "hi"}]})
    .to_string();
    let a = post(&gw.url("/v1/messages"), &messages).await;
    assert_eq!(a.status, 400, "{}", a.text());
    assert!(a.text().contains("base_url"), "{}", a.text());
    let responses = json!({"model": "gpt-test", "input": "hi", "api_key": "sk-x"}).to_string();
    assert_refused(
        &post(&gw.url("/v1/responses"), &responses).await,
        "api_key",
        "not allowed",
    );
    assert!(
        up.requests().is_empty(),
        "nothing reached the client's upstream"
    );
}

#[tokio::test]
async fn allowed_client_side_base_and_key_reach_an_allow_listed_upstream() {
    let up = recording(Reply::Json(200, CHAT_OK)).await;
    let gw = gateway(&config(
        "  allow_client_side_credentials: true\n  client_side_api_base_allowlist: [\"127.0.0.1\"]",
    ))
    .await;
    let a = post(
        &gw.url("/v1/chat/completions"),
        &chat_with(json!({"api_base": up.base(), "api_key": "sk-client-own",
            "extra_headers": {"x-client-header": "yes"}})),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(a.json()["choices"][0]["message"]["content"], "hi");
    let seen = up.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].path_and_query, "/v1/chat/completions");
    assert_eq!(seen[0].headers["authorization"], "Bearer sk-client-own");
    assert_eq!(seen[0].headers["x-client-header"], "yes");
    let sent: Value = serde_json::from_slice(&seen[0].body).unwrap();
    assert_eq!(sent["model"], "gpt-upstream");
    for field in ["api_base", "api_key", "extra_headers"] {
        assert!(sent.get(field).is_none(), "{field} sent upstream: {sent}");
    }
    // Without the client's fields the configured (dead) upstream is used: 5xx, not the mock.
    let plain = post(&gw.url("/v1/chat/completions"), &chat_with(json!({}))).await;
    assert!(plain.status.is_server_error(), "{}", plain.text());
    assert_eq!(up.requests().len(), 1);
}

#[tokio::test]
async fn allowed_but_internal_upstreams_are_refused_unless_allow_listed() {
    let up = recording(Reply::Json(200, CHAT_OK)).await;
    let gw = gateway(&config("  allow_client_side_credentials: true")).await;
    let port = up.addr.port();
    for (base, says) in [
        (up.base(), "127.0.0.1 is a loopback address"),
        (format!("http://localhost:{port}/v1"), "it resolves to"),
        (format!("http://[::ffff:127.0.0.1]:{port}/v1"), "loopback"),
        (format!("http://[::1]:{port}/v1"), "loopback"),
        ("http://169.254.169.254/latest".to_owned(), "cloud metadata"),
        ("http://10.0.0.1/v1".to_owned(), "private"),
        ("http://0.0.0.0:1/v1".to_owned(), "unspecified"),
        ("file:///etc/passwd".to_owned(), "http:// or https://"),
        ("http://user:pw@example.com/v1".to_owned(), "credentials"),
    ] {
        let a = post(
            &gw.url("/v1/chat/completions"),
            &chat_with(json!({ "api_base": base })),
        )
        .await;
        assert_refused(&a, "api_base", says);
    }
    // Fields sluice does not honour are refused even when client-side credentials are on.
    let a = post(
        &gw.url("/v1/chat/completions"),
        &chat_with(json!({"vertex_credentials": "{}"})),
    )
    .await;
    assert_refused(&a, "vertex_credentials", "not supported");
    assert!(up.requests().is_empty());
}

#[tokio::test]
async fn pass_through_routes_ignore_a_body_api_base() {
    let up = recording(Reply::Json(200, CHAT_OK)).await;
    let other = recording(Reply::Json(200, CHAT_OK)).await;
    let yaml = format!(
        r#"
model_list:
  - model_name: gpt-test
    litellm_params:
      model: openai/gpt-upstream
      api_base: {}
      api_key: sk-configured
      use_in_pass_through: true
"#,
        up.base()
    );
    let gw = gateway(&yaml).await;
    let body = chat_with(json!({"api_base": other.base()}));
    let a = post(&gw.url("/openai/v1/chat/completions"), &body).await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(up.requests().len(), 1, "the configured upstream answered");
    assert!(
        other.requests().is_empty(),
        "the body's api_base was not followed"
    );
}

#[tokio::test]
async fn virtual_keys_are_stored_only_as_hashes() {
    let dir = temp_dir();
    let yaml = r#"
model_list:
  - model_name: cheap
    litellm_params:
      model: mock/cheap
general_settings:
  master_key: sk-master
  proxy_batch_write_at: 0.1
"#;
    let gw = gateway_in(yaml, &dir).await;
    let key = new_key(&gw, json!({"key_alias": "at-rest"})).await;
    let chat = json!({"model": "cheap", "messages": [{"role": "user", "content": "hi"}]});
    let bearer = format!("Bearer {key}");
    let a = send(
        "POST",
        &gw.url("/v1/chat/completions"),
        chat.to_string(),
        &[
            ("authorization", &bearer),
            ("content-type", "application/json"),
        ],
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let logged = eventually(PATIENCE, || async {
        let logs = admin_as(&gw, "sk-master", "GET", "/spend/logs", Value::Null).await;
        logs.json().as_array().is_some_and(|l| !l.is_empty())
    })
    .await;
    assert!(logged, "the request's spend log was written");
    use sha2::Digest as _;
    let hashed: String = sha2::Sha256::digest(key.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let mut files = Vec::new();
    all_files(&dir, &mut files);
    let stored: Vec<u8> = files
        .iter()
        .flat_map(|f| std::fs::read(f).unwrap_or_default())
        .collect();
    assert!(
        memchr::memmem::find(&stored, hashed.as_bytes()).is_some(),
        "the key's hash is in {files:?}: the right files were read"
    );
    for secret in [key.as_str(), "sk-master"] {
        assert!(
            memchr::memmem::find(&stored, secret.as_bytes()).is_none(),
            "{secret} is stored in the clear"
        );
    }
}

fn all_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let p = entry.path();
        if p.is_dir() {
            all_files(&p, out);
        } else {
            out.push(p);
        }
    }
}

// ---- HTTPS on the listener (the real binary) ----

struct Tls {
    dir: PathBuf,
    cert: PathBuf,
    key: PathBuf,
    der: Vec<u8>,
}

fn self_signed() -> Tls {
    let c =
        rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    let dir = temp_dir();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert, c.cert.pem()).unwrap();
    std::fs::write(&key, c.key_pair.serialize_pem()).unwrap();
    Tls {
        dir,
        cert,
        key,
        der: c.cert.der().to_vec(),
    }
}

const TLS_CONFIG: &str = r#"
model_list:
  - model_name: inproc
    litellm_params:
      model: mock/inproc-model
general_settings:
  master_key: sk-master
"#;

fn tls_args<'p>(cert: &'p Path, key: &'p Path) -> [&'p OsStr; 4] {
    [
        OsStr::new("--tls-cert"),
        cert.as_os_str(),
        OsStr::new("--tls-key"),
        key.as_os_str(),
    ]
}

fn https_client(
    der: &[u8],
    h2: bool,
) -> Client<
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
    Full<Bytes>,
> {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls::pki_types::CertificateDer::from(der.to_vec()))
        .unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let b = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config)
        .https_only();
    let connector = if h2 {
        b.enable_http2().build()
    } else {
        b.enable_http1().build()
    };
    Client::builder(TokioExecutor::new())
        .http2_only(h2)
        .build(connector)
}

async fn call(
    client: &Client<
        hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
        Full<Bytes>,
    >,
    method: &str,
    url: &str,
    body: &str,
) -> (Version, http::HeaderMap, String) {
    let req = Request::builder()
        .method(method)
        .uri(url)
        .header("authorization", "Bearer sk-master")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_owned())))
        .unwrap();
    let resp = client.request(req).await.expect("https request");
    let (parts, body) = resp.into_parts();
    let text = String::from_utf8(body.collect().await.unwrap().to_bytes().to_vec()).unwrap();
    assert!(parts.status.is_success(), "{} {text}", parts.status);
    (parts.version, parts.headers, text)
}

#[tokio::test]
async fn serves_https_over_http1_and_h2_with_secure_console_cookies() {
    let tls = self_signed();
    let Served {
        mut child, addr, ..
    } = serve_binary(TLS_CONFIG, &tls_args(&tls.cert, &tls.key)).unwrap();
    let port = addr.rsplit(':').next().unwrap().to_owned();
    let chat = r#"{"model":"inproc","messages":[{"role":"user","content":"hi"}]}"#;
    for (h2, version) in [(false, Version::HTTP_11), (true, Version::HTTP_2)] {
        let client = https_client(&tls.der, h2);
        for host in ["127.0.0.1", "localhost"] {
            let base = format!("https://{host}:{port}");
            let (v, _, _) = call(&client, "GET", &format!("{base}/health/liveliness"), "").await;
            assert_eq!(v, version);
            let (v, _, text) = call(
                &client,
                "POST",
                &format!("{base}/v1/chat/completions"),
                chat,
            )
            .await;
            assert_eq!(v, version);
            assert!(text.contains("chat.completion"), "{text}");
        }
        let (_, headers, _) = call(
            &client,
            "GET",
            &format!("https://127.0.0.1:{port}/ui/login"),
            "",
        )
        .await;
        let cookie = headers["set-cookie"].to_str().unwrap();
        assert!(cookie.contains("; Secure"), "{cookie}");
    }
    // Plain HTTP on the TLS port gets no answer.
    let plain = tokio::time::timeout(
        Duration::from_secs(5),
        common_plain_get(&format!("http://127.0.0.1:{port}/health/liveliness")),
    )
    .await
    .unwrap();
    assert!(plain.is_err(), "plain HTTP was answered on the TLS port");
    let _ = child.kill();
    let _ = child.wait();
}

async fn common_plain_get(
    url: &str,
) -> Result<http::StatusCode, hyper_util::client::legacy::Error> {
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new())
        .build(hyper_util::client::legacy::connect::HttpConnector::new());
    client
        .request(Request::get(url).body(Full::new(Bytes::new())).unwrap())
        .await
        .map(|r| r.status())
}

#[test]
fn bad_certificates_are_startup_errors_naming_the_flag() {
    let tls = self_signed();
    let missing = tls.dir.join("missing.pem");
    let garbage = tls.dir.join("garbage.pem");
    std::fs::write(&garbage, "not a pem file").unwrap();
    for (cert, key, names) in [
        (&missing, &tls.key, "--tls-cert"),
        (&garbage, &tls.key, "--tls-cert"),
        (&tls.cert, &missing, "--tls-key"),
        (&tls.cert, &garbage, "--tls-key"),
        // A certificate's own text is no private key.
        (&tls.cert, &tls.cert, "--tls-key"),
    ] {
        let err = serve_binary(TLS_CONFIG, &tls_args(cert, key))
            .map(|mut s| {
                let _ = s.child.kill();
            })
            .expect_err("sluice started with a bad certificate or key");
        assert!(err.contains(names), "{err}");
        assert!(!err.contains("BEGIN"), "PEM text in the error: {err}");
    }
}

// ---- TLS towards upstreams: private CA, mutual TLS, verification off ----

/// A certificate authority made for one test.
struct Ca {
    cert: rcgen::Certificate,
    key: rcgen::KeyPair,
}

fn ca(name: &str) -> Ca {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    Ca { cert, key }
}

/// A leaf certificate issued by `ca` for `usage`: (certificate PEM, key PEM).
fn issued(ca: &Ca, names: &[&str], usage: rcgen::ExtendedKeyUsagePurpose) -> (String, String) {
    let mut params =
        rcgen::CertificateParams::new(names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>())
            .unwrap();
    params.extended_key_usages = vec![usage];
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, &ca.cert, &ca.key).unwrap();
    (cert.pem(), key.serialize_pem())
}

/// `sluice mock` over TLS, requiring a client certificate from `client_ca` (the real binary
/// and its flags). Killed on drop.
struct TlsMock {
    child: std::process::Child,
    port: u16,
}

impl Drop for TlsMock {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tls_mock(dir: &Path, server: &(String, String), client_ca: &str) -> TlsMock {
    let write = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let (cert, key, cca) = (
        write("mock-cert.pem", &server.0),
        write("mock-key.pem", &server.1),
        write("mock-client-ca.pem", client_ca),
    );
    let ready = dir.join("mock.ready");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["mock", "--port", "0", "--workers", "1", "--ready-file"])
        .arg(&ready)
        .arg("--tls-cert")
        .arg(&cert)
        .arg("--tls-key")
        .arg(&key)
        .arg("--tls-client-ca")
        .arg(&cca)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let addr = ready_addr(&ready, "mock did not start");
    let port = addr.rsplit(':').next().unwrap().parse().unwrap();
    TlsMock { child, port }
}

/// An upstream that demands a client certificate (as OpenAI's mTLS endpoints do) and is
/// served under a private CA: deployments that trust the CA and present a certificate it
/// accepts get answers, from files in either layout (key in the certificate
/// file or beside it) or from `litellm_settings`; one without a certificate, one trusting the
/// wrong CA, and one trusting only the platform's roots each get a 502 that says why.
/// `ssl_verify: false` skips the server check but still presents the certificate.
#[tokio::test]
async fn upstream_mtls_private_ca_and_verification_off() {
    use rcgen::ExtendedKeyUsagePurpose::{ClientAuth, ServerAuth};
    let dir = temp_dir();
    let server_ca = ca("server CA");
    let client_ca = ca("client CA");
    let stranger = ca("someone else");
    let server = issued(&server_ca, &["127.0.0.1", "localhost"], ServerAuth);
    let client = issued(&client_ca, &["sluice"], ClientAuth);
    let mock = tls_mock(&dir, &server, &client_ca.cert.pem());
    let write = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    };
    let trust = write("server-ca.pem", &server_ca.cert.pem());
    let wrong = write("stranger-ca.pem", &stranger.cert.pem());
    let both = write("client.pem", &format!("{}{}", client.0, client.1));
    let cert_only = write("client-cert.pem", &client.0);
    let key_only = write("client-key.pem", &client.1);
    let base = format!("https://127.0.0.1:{}/v1", mock.port);
    let deployment = |name: &str, tls: &str| {
        format!(
            "  - model_name: {name}\n    litellm_params: {{model: openai/gpt-4o, api_base: '{base}', api_key: sk-x{tls}}}\n"
        )
    };
    let yaml = format!(
        "model_list:\n{}{}{}{}{}{}",
        deployment("mtls", &format!(", ssl_verify: '{trust}', ssl_certificate: '{both}'")),
        deployment(
            "mtls-split",
            &format!(", ssl_verify: '{trust}', ssl_certificate: '{cert_only}', ssl_certificate_key: '{key_only}'")
        ),
        deployment("no-cert", &format!(", ssl_verify: '{trust}'")),
        deployment("wrong-ca", &format!(", ssl_verify: '{wrong}', ssl_certificate: '{both}'")),
        deployment("platform-roots", &format!(", ssl_certificate: '{both}'")),
        deployment("verify-off", &format!(", ssl_verify: false, ssl_certificate: '{both}'")),
    );
    let gw = gateway(&yaml).await;
    let chat = |model: &str| {
        json!({"model": model, "messages": [{"role": "user", "content": "hi"}]}).to_string()
    };
    for model in ["mtls", "mtls-split", "verify-off"] {
        let a = post(&gw.url("/v1/chat/completions"), &chat(model)).await;
        assert_eq!(a.status, 200, "{model}: {}", a.text());
        assert_eq!(a.json()["object"], "chat.completion", "{model}");
    }
    // Without a certificate the upstream's TLS 1.3 refusal arrives after the handshake, as
    // the connection closing.
    for (model, says) in [
        ("no-cert", "upstream_unreachable"),
        ("wrong-ca", "UnknownIssuer"),
        ("platform-roots", "UnknownIssuer"),
    ] {
        let a = post(&gw.url("/v1/chat/completions"), &chat(model)).await;
        assert_eq!(a.status, 502, "{model}: {}", a.text());
        assert!(a.text().contains(says), "{model}: {}", a.text());
    }

    // A Realtime session (a WebSocket, not the pooled client) goes with the same TLS.
    for (model, opens) in [("mtls", true), ("no-cert", false)] {
        let url = format!("ws://{}/v1/realtime?model={model}", gw.addr);
        let req =
            tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(url)
                .unwrap();
        match tokio_tungstenite::connect_async(req).await {
            Ok((mut ws, _)) => {
                assert!(
                    opens,
                    "{model}: a session opened without a client certificate"
                );
                use futures_util::StreamExt as _;
                let first = tokio::time::timeout(Duration::from_secs(5), ws.next())
                    .await
                    .unwrap()
                    .unwrap()
                    .unwrap();
                assert!(first.to_string().contains("session.created"), "{first}");
            }
            Err(tokio_tungstenite::tungstenite::Error::Http(resp)) => {
                assert!(!opens, "{model}: {:?}", resp.status());
                assert_eq!(resp.status(), 502, "{model}");
            }
            Err(e) => panic!("{model}: {e}"),
        }
    }

    // The same from litellm_settings, for every deployment that says nothing itself.
    let global = format!(
        "model_list:\n{}litellm_settings:\n  ssl_verify: '{trust}'\n  ssl_certificate: '{cert_only}'\n  ssl_certificate_key: '{key_only}'\n",
        deployment("inherits", "")
    );
    let gw = gateway(&global).await;
    let a = post(&gw.url("/v1/chat/completions"), &chat("inherits")).await;
    assert_eq!(a.status, 200, "{}", a.text());
}

/// A bad TLS file is a config error naming the key that named it.
#[test]
fn bad_upstream_tls_files_are_config_errors_naming_the_key() {
    let dir = temp_dir();
    let garbage = dir.join("garbage.pem");
    std::fs::write(&garbage, "not pem").unwrap();
    let missing = dir.join("missing.pem");
    for (keys, path, says) in [
        (
            format!("ssl_verify: '{}'", missing.display()),
            "model_list[0].litellm_params.ssl_verify",
            "cannot read",
        ),
        (
            format!("ssl_certificate: '{}'", garbage.display()),
            "model_list[0].litellm_params.ssl_certificate",
            "no PEM certificate",
        ),
        (
            format!("ssl_certificate_key: '{}'", garbage.display()),
            "model_list[0].litellm_params.ssl_certificate_key",
            "needs ssl_certificate",
        ),
    ] {
        let yaml = format!(
            "model_list:\n  - model_name: m\n    litellm_params: {{model: openai/gpt-4o, api_base: 'https://127.0.0.1:9/v1', api_key: k, {keys}}}\n"
        );
        let env: std::collections::HashMap<String, String> = Default::default();
        let e = sluice_config::load_str(&yaml, &env)
            .unwrap_err()
            .to_string();
        assert!(e.contains(path) && e.contains(says), "{e}");
    }
}
