//! MCP's older HTTP+SSE transport (revision 2024-11-05) end to end, both ways at once: a
//! client speaking it to sluice's `/mcp/sse` (an event stream, messages POSTed to the endpoint
//! it names, answers back on the stream), and a real SSE tool server behind sluice's
//! `transport: sse` (`tests/fixtures/mcp/tool_server.py sse`). The upstream credential is
//! sluice's, a dropped upstream stream fails its call at once and the next call opens a new
//! one, the server's own requests are refused, a session is its key's, and a client leaving
//! its stream cancels its calls at the tool server.
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::common::*;
use crate::mcp::{text_of, tool_names, tool_server, HttpTools};

async fn sse_tools(endpoint: Option<&str>) -> HttpTools {
    let env: Vec<(&str, &str)> = endpoint.map(|e| ("SSE_ENDPOINT", e)).into_iter().collect();
    tool_server("sse", &env).await
}

fn config(port: u16, extra: &str) -> String {
    format!(
        r#"
model_list: []
general_settings:
  master_key: sk-master
mcp_servers:
  legacy:
    url: http://127.0.0.1:{port}/sse
    transport: sse
    auth_type: bearer_token
    auth_value: upstream-secret
    timeout: 10
{extra}
"#
    )
}

/// A client of sluice's SSE transport: the open event stream and where to POST.
struct SseClient {
    endpoint: String,
    key: String,
    events: mpsc::UnboundedReceiver<(String, String)>,
    reader: tokio::task::JoinHandle<()>,
    next: u64,
}

impl Drop for SseClient {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// What the tool server behind `/mcp/legacy/sse` answers to one of its test methods
/// (`test/started`, `test/cancelled`), asked in a session of its own.
async fn server_says(gw: &Gateway, method: &str) -> Value {
    let mut w = connect(gw, "/mcp/legacy/sse", "sk-master").await.unwrap();
    w.initialize().await;
    w.request(method, json!({})).await
}

/// Open the stream on `path`; the status when it is refused.
async fn connect(gw: &Gateway, path: &str, key: &str) -> Result<SseClient, u16> {
    let client: Client<HttpConnector, Full<Bytes>> =
        Client::builder(TokioExecutor::new()).build(HttpConnector::new());
    let req = Request::get(gw.url(path))
        .header("authorization", format!("Bearer {key}"))
        .header("accept", "text/event-stream")
        .body(Full::new(Bytes::new()))
        .unwrap();
    let resp = client.request(req).await.expect("request sent");
    if !resp.status().is_success() {
        return Err(resp.status().as_u16());
    }
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut body = resp.into_body();
    let reader = tokio::spawn(async move {
        let mut buf = String::new();
        while let Some(Ok(frame)) = body.frame().await {
            let Ok(data) = frame.into_data() else {
                continue;
            };
            buf.push_str(&String::from_utf8_lossy(&data));
            while let Some(end) = buf.find("\n\n") {
                let event: String = buf.drain(..end + 2).collect();
                let mut name = "message".to_owned();
                let mut data = None;
                for line in event.lines() {
                    if let Some(n) = line.strip_prefix("event: ") {
                        name = n.to_owned();
                    } else if let Some(d) = line.strip_prefix("data: ") {
                        data = Some(d.to_owned());
                    }
                }
                if let Some(d) = data {
                    let _ = tx.send((name, d));
                }
            }
        }
    });
    let (name, endpoint) = tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .expect("the endpoint event in time")
        .expect("an endpoint event");
    assert_eq!(name, "endpoint");
    assert!(endpoint.contains("/sse/messages?session_id="), "{endpoint}");
    Ok(SseClient {
        endpoint: gw.url(&endpoint),
        key: key.into(),
        events: rx,
        reader,
        next: 0,
    })
}

impl SseClient {
    /// POST one message as `key`; the POST's status.
    async fn post_as(&self, key: &str, body: Value) -> u16 {
        let auth = format!("Bearer {key}");
        let a = send(
            "POST",
            &self.endpoint,
            body.to_string(),
            &[
                ("authorization", auth.as_str()),
                ("content-type", "application/json"),
            ],
        )
        .await;
        a.status.as_u16()
    }

    /// A request's response, read from the stream.
    async fn request(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        let status = self
            .post_as(
                &self.key.clone(),
                json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
            )
            .await;
        assert_eq!(
            status, 202,
            "a message is accepted; its answer is on the stream"
        );
        loop {
            let (name, data) = tokio::time::timeout(Duration::from_secs(15), self.events.recv())
                .await
                .expect("an answer in time")
                .expect("the stream is open");
            assert_eq!(name, "message");
            let v: Value = serde_json::from_str(&data).unwrap();
            if v["id"] == id {
                return v;
            }
        }
    }

    async fn initialize(&mut self) -> Value {
        let init = self
            .request(
                "initialize",
                json!({"protocolVersion": "2024-11-05", "capabilities": {},
                       "clientInfo": {"name": "old", "version": "1"}}),
            )
            .await;
        let status = self
            .post_as(
                &self.key.clone(),
                json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            )
            .await;
        assert_eq!(status, 202);
        init["result"].clone()
    }

    async fn tool(&mut self, name: &str, args: Value) -> Value {
        self.request("tools/call", json!({"name": name, "arguments": args}))
            .await
    }

    async fn tool_names(&mut self) -> Vec<String> {
        tool_names(&self.request("tools/list", json!({})).await)
    }
}

#[tokio::test]
async fn sse_clients_reach_sse_servers_through_sluice() {
    let tools = sse_tools(None).await;
    let gw = gateway(&config(tools.port, "")).await;
    let mut c = connect(&gw, "/mcp/sse", "sk-master").await.unwrap();
    let init = c.initialize().await;
    assert_eq!(init["protocolVersion"], "2024-11-05");
    assert_eq!(init["serverInfo"]["name"], "sluice");

    let names = c.tool_names().await;
    for want in ["legacy-add", "legacy-headers", "legacy-slow"] {
        assert!(
            names.contains(&want.to_owned()),
            "{want} missing: {names:?}"
        );
    }
    assert_eq!(
        text_of(&c.tool("legacy-add", json!({"a": 2, "b": 3})).await),
        "5"
    );
    // sluice's credential reaches the tool server; the client's key does not.
    let seen: Value =
        serde_json::from_str(text_of(&c.tool("legacy-headers", json!({})).await)).unwrap();
    assert_eq!(seen["authorization"], "Bearer upstream-secret");
    assert!(!seen.to_string().contains("sk-master"), "{seen}");
    // The server's own request to its client (roots/list) is refused: method not found.
    assert_eq!(text_of(&c.tool("legacy-ask", json!({})).await), "-32601");

    // The upstream stream drops mid-call: the call fails at once, not at its 10 s timeout (an
    // ordering: failed before that timeout), and the next call opens a new stream.
    let started = Instant::now();
    let dropped = c.tool("legacy-drop", json!({})).await;
    assert!(dropped.get("error").is_some(), "{dropped}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(text_of(&c.tool("legacy-streams", json!({})).await), "2");
    assert_eq!(
        text_of(&c.tool("legacy-add", json!({"a": 1, "b": 1})).await),
        "2"
    );

    // One server alone, names as it gives them.
    let mut one = connect(&gw, "/mcp/legacy/sse", "sk-master").await.unwrap();
    one.initialize().await;
    assert!(one.tool_names().await.contains(&"add".to_owned()));
    let read = one
        .request("resources/read", json!({"uri": "mem://note"}))
        .await;
    assert_eq!(read["result"]["contents"][0]["text"], "a note", "{read}");

    let m = send("GET", &gw.url("/metrics"), "", &[MASTER]).await.text();
    for line in [
        r#"sluice_mcp_calls_total{server="legacy",method="tools/call",tool="add",status="ok"} 2"#,
        r#"sluice_mcp_calls_total{server="legacy",method="tools/call",tool="",status="failed"} 1"#,
    ] {
        assert!(m.contains(line), "missing {line} in\n{m}");
    }
}

#[tokio::test]
async fn sse_sessions_are_their_keys_and_end_with_their_stream() {
    let tools = sse_tools(None).await;
    let gw = gateway(&config(tools.port, "")).await;
    let none = new_key(
        &gw,
        json!({"metadata": {"object_permission": {"mcp_servers": []}}}),
    )
    .await;
    let all = new_key(&gw, json!({})).await;

    // The key on the GET and on every POST.
    assert_eq!(connect(&gw, "/mcp/sse", "sk-wrong").await.err(), Some(401));
    assert_eq!(
        connect(&gw, "/mcp/nowhere/sse", "sk-master").await.err(),
        Some(404)
    );
    let mut c = connect(&gw, "/mcp/sse", &all).await.unwrap();
    c.initialize().await;
    let ping = json!({"jsonrpc": "2.0", "id": 99, "method": "ping"});
    assert_eq!(c.post_as("sk-wrong", ping.clone()).await, 401);
    assert_eq!(
        c.post_as("sk-master", ping.clone()).await,
        404,
        "another key's session"
    );
    assert_eq!(c.post_as(&none, ping.clone()).await, 404);
    let bare = send(
        "POST",
        &gw.url("/mcp/sse/messages"),
        ping.to_string(),
        &[("authorization", &format!("Bearer {all}"))],
    )
    .await;
    assert_eq!(bare.status, 400, "no session_id");
    let get = send(
        "GET",
        &c.endpoint,
        "",
        &[("authorization", &format!("Bearer {all}"))],
    )
    .await;
    assert_eq!(get.status, 405);

    // A key without the server sees none of it.
    let mut n = connect(&gw, "/mcp/sse", &none).await.unwrap();
    n.initialize().await;
    assert!(n.tool_names().await.is_empty());
    let refused = n.tool("legacy-add", json!({"a": 1, "b": 1})).await;
    assert_eq!(refused["error"]["code"], -32003, "{refused}");

    // A client that leaves its stream ends its session and cancels its call at the server.
    c.next += 1;
    let slow = json!({"jsonrpc": "2.0", "id": c.next, "method": "tools/call",
                      "params": {"name": "legacy-slow", "arguments": {"seconds": 5}}});
    assert_eq!(c.post_as(&all, slow).await, 202);
    // Left while the call is in flight at the tool server.
    let begun = eventually(PATIENCE, || async {
        server_says(&gw, "test/started").await["result"]["started"]
            .as_array()
            .is_some_and(|a| a.iter().any(|t| t == "slow"))
    })
    .await;
    assert!(begun, "the call reached the tool server");
    let endpoint = c.endpoint.clone();
    drop(c);
    let gone = eventually(PATIENCE, || {
        let endpoint = endpoint.clone();
        let all = all.clone();
        let ping = ping.clone();
        async move {
            let a = send(
                "POST",
                &endpoint,
                ping.to_string(),
                &[("authorization", &format!("Bearer {all}"))],
            )
            .await;
            a.status == 404
        }
    })
    .await;
    assert!(gone, "the session ended with its stream");
    let told = eventually(PATIENCE, || async {
        server_says(&gw, "test/cancelled").await["result"]["cancelled"]
            .as_array()
            .is_some_and(|a| !a.is_empty())
    })
    .await;
    assert!(told, "the tool server was told the call was cancelled");
}

#[tokio::test]
async fn an_endpoint_on_another_origin_is_refused() {
    let tools = sse_tools(Some("http://127.0.0.2:9/messages")).await;
    let gw = gateway(&config(tools.port, "")).await;
    let mut c = connect(&gw, "/mcp/legacy/sse", "sk-master").await.unwrap();
    c.initialize().await;
    let v = c.tool("add", json!({"a": 1, "b": 1})).await;
    let message = v["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("origin"), "{v}");
}

#[tokio::test]
async fn progress_reaches_an_sse_client_before_the_response() {
    let tools = sse_tools(None).await;
    let script = crate::mcp::script();
    let local = format!(
        "  local:\n    command: python3\n    args: [\"{}\", stdio]\n",
        script.display()
    );
    let gw = gateway(&config(tools.port, &local)).await;
    let mut c = connect(&gw, "/mcp/sse", "sk-master").await.unwrap();
    c.initialize().await;
    let status = c
        .post_as(
            "sk-master",
            json!({"jsonrpc": "2.0", "id": 77, "method": "tools/call", "params": {
                "name": "local-steps", "arguments": {"n": 3},
                "_meta": {"progressToken": "tok-1"}}}),
        )
        .await;
    assert_eq!(status, 202);
    let mut progress = Vec::new();
    loop {
        let (_, data) = tokio::time::timeout(Duration::from_secs(15), c.events.recv())
            .await
            .expect("an event in time")
            .expect("the stream is open");
        let v: Value = serde_json::from_str(&data).unwrap();
        if v["id"] == 77 {
            assert!(v["result"].is_object(), "{v}");
            break;
        }
        if v["method"] == "notifications/progress" {
            assert_eq!(
                v["params"]["progressToken"], "tok-1",
                "the client's own token"
            );
            progress.push(v["params"]["progress"].as_f64().unwrap());
        }
    }
    assert_eq!(progress, [1.0, 2.0, 3.0], "every step, before the response");
}
