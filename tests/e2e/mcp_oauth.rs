//! `auth_type: oauth2` end to end: a real tool server (`tests/fixtures/mcp/tool_server.py
//! oauth`) that accepts only bearer tokens it issued itself at its own OAuth 2 token endpoint
//! (`client_credentials`, the client's id and secret in the form body or HTTP Basic). sluice
//! obtains one token for many calls, sends it upstream, replaces it when the server refuses
//! it, and reports a wrong secret as a clear error that never shows the secret.

use crate::common::*;
use crate::mcp::{tool_server, HttpTools};
use serde_json::{json, Value};

const SECRET: &str = "client-secret-42";
const WRONG: &str = "wrong-secret-9f3c";

type Tools = HttpTools;

async fn tools() -> Tools {
    tool_server("oauth", &[]).await
}

impl Tools {
    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// The token requests the endpoint has seen.
    async fn token_requests(&self) -> Vec<Value> {
        let a = send("GET", &self.url("/stats"), "", &[]).await;
        a.json()["token_requests"].as_array().unwrap().clone()
    }
}

fn config(port: u16) -> String {
    let server = |name: &str, secret: &str, extra: &str| {
        format!(
            r#"
  {name}:
    url: http://127.0.0.1:{port}/mcp
    auth_type: oauth2
    oauth2_flow: client_credentials
    client_id: sluice-client
    client_secret: {secret}
    token_url: http://127.0.0.1:{port}/token
    timeout: 5{extra}"#
        )
    };
    format!(
        "
model_list: []
general_settings:
  master_key: sk-master
mcp_servers:{}{}{}
",
        server("crm", SECRET, "\n    scopes: [tools.read, tools.call]"),
        server(
            "basic",
            SECRET,
            "\n    token_endpoint_auth_method: client_secret_basic"
        ),
        server("wrong", WRONG, ""),
    )
}

/// One JSON-RPC exchange with `/mcp/{server}` in session `session`.
async fn rpc(gw: &Gateway, server: &str, session: Option<&str>, body: Value) -> Answer {
    let mut headers = vec![
        MASTER,
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
    ];
    if let Some(s) = session {
        headers.push(("mcp-session-id", s));
    }
    send(
        "POST",
        &gw.url(&format!("/mcp/{server}")),
        body.to_string(),
        &headers,
    )
    .await
}

/// A session with `/mcp/{server}`.
async fn open(gw: &Gateway, server: &str) -> String {
    let a = rpc(
        gw,
        server,
        None,
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}}}),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let session = a.header("mcp-session-id").expect("a session id").to_owned();
    let n = rpc(
        gw,
        server,
        Some(&session),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    assert_eq!(n.status, 202);
    session
}

async fn call(
    gw: &Gateway,
    server: &str,
    session: &str,
    id: u64,
    tool: &str,
    args: Value,
) -> Value {
    let a = rpc(
        gw,
        server,
        Some(session),
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": tool, "arguments": args}}),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    a.json()
}

fn text_of(v: &Value) -> &str {
    v["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
}

#[tokio::test]
async fn one_token_serves_many_calls_and_is_replaced_when_refused() {
    let tools = tools().await;
    let gw = gateway(&config(tools.port)).await;
    let session = open(&gw, "crm").await;

    // Many calls at once: one token request, its token on every call.
    let calls = (0..8u64).map(|i| {
        let (gw, session) = (&gw, session.as_str());
        async move { call(gw, "crm", session, 10 + i, "add", json!({"a": i, "b": 1})).await }
    });
    let answers = futures_util::future::join_all(calls).await;
    for (i, a) in answers.iter().enumerate() {
        assert_eq!(text_of(a), (i + 1).to_string(), "{a}");
    }
    let seen = call(&gw, "crm", &session, 30, "headers", json!({})).await;
    let seen: Value = serde_json::from_str(text_of(&seen)).unwrap();
    let bearer = seen["authorization"].as_str().unwrap();
    assert!(bearer.starts_with("Bearer tok-"), "{seen}");
    let asked = tools.token_requests().await;
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0]["grant_type"], "client_credentials");
    assert_eq!(asked[0]["scope"], "tools.read tools.call");
    assert_eq!(asked[0]["auth"], "post");

    // The server forgets its tokens: the next call is refused once, a new token fetched and
    // the call sent again, so the client never sees the refusal.
    let revoked = send("POST", &tools.url("/revoke"), "", &[]).await;
    assert_eq!(revoked.status, 200);
    let a = call(&gw, "crm", &session, 40, "echo", json!({"text": "again"})).await;
    assert_eq!(text_of(&a), "again", "{a}");
    assert_eq!(tools.token_requests().await.len(), 2);
    let seen = call(&gw, "crm", &session, 41, "headers", json!({})).await;
    let seen: Value = serde_json::from_str(text_of(&seen)).unwrap();
    assert_ne!(seen["authorization"].as_str().unwrap(), bearer);
    assert_eq!(tools.token_requests().await.len(), 2);

    // HTTP Basic client authentication, when the server is set to want it.
    let session = open(&gw, "basic").await;
    let a = call(&gw, "basic", &session, 1, "add", json!({"a": 2, "b": 3})).await;
    assert_eq!(text_of(&a), "5", "{a}");
    let asked = tools.token_requests().await;
    assert_eq!(asked.len(), 3, "{asked:?}");
    assert_eq!(asked[2]["auth"], "basic");
    assert!(
        asked[2]["scope"].is_null(),
        "no scopes, no scope: {asked:?}"
    );
}

#[tokio::test]
async fn a_wrong_secret_is_a_clear_error_without_the_secret() {
    let tools = tools().await;
    let mut gw = gateway(&config(tools.port)).await;
    // sluice's own session opens; the first call that needs the tool server says why it
    // cannot reach it.
    let session = open(&gw, "wrong").await;
    let a = call(&gw, "wrong", &session, 1, "add", json!({"a": 1, "b": 1})).await;
    let failed = a["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        failed.contains("the token endpoint answered HTTP 401 (invalid_client)"),
        "{failed}"
    );
    assert!(
        !failed.contains(WRONG) && !failed.contains("sluice-client:"),
        "{failed}"
    );
    assert!(!tools.token_requests().await.is_empty());

    // Nor does the secret reach the metrics, or the request's record.
    let m = send("GET", &gw.url("/metrics"), "", &[MASTER]).await.text();
    assert!(!m.contains(WRONG));
    while let Ok(r) = gw.records.try_recv() {
        assert!(!format!("{r:?}").contains(WRONG));
    }
}
