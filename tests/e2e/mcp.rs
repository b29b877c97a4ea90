//! The MCP gateway end to end: a client speaking MCP's streamable HTTP to sluice's `/mcp`, and
//! two real tool servers behind it (`tests/fixtures/mcp/tool_server.py`): one a child process
//! sluice starts (stdio), one over streamable HTTP answering calls as SSE streams and
//! requiring its own credential. Tools are aggregated and routed by prefix, the upstream
//! credential is sluice's and no client header reaches the tool server, a key's
//! `object_permission` narrows what it sees and refuses what it may not call, bounds and
//! cancellation reach the tool server, and every call is counted in `sluice_mcp_*`.
use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::{json, Value};

pub(crate) fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp/tool_server.py")
}

/// A tool server of the fixture's, stopped when dropped.
pub(crate) struct HttpTools {
    child: Child,
    pub(crate) port: u16,
}

impl Drop for HttpTools {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `tool_server.py <mode> PORTFILE` with `env` added, once it listens.
pub(crate) async fn tool_server(mode: &str, env: &[(&str, &str)]) -> HttpTools {
    let portfile = temp_dir().join("port");
    let child = Command::new("python3")
        .arg(script())
        .arg(mode)
        .arg(&portfile)
        .envs(env.iter().copied())
        .spawn()
        .expect("python3 runs");
    let mut tools = HttpTools { child, port: 0 };
    let up = eventually(PATIENCE, || {
        let p = std::fs::read_to_string(&portfile).ok();
        async move { p.is_some() }
    })
    .await;
    assert!(up, "the {mode} tool server did not start");
    tools.port = std::fs::read_to_string(&portfile).unwrap().parse().unwrap();
    tools
}

/// Wait until the tool server at `path` (`/mcp/local`) has begun `n` calls of `tool`: a call
/// is in flight there.
async fn calls_begun(gw: &Gateway, path: &str, tool: &str, n: usize) {
    let begun = eventually(PATIENCE, || {
        let mut one = Client::new(gw, path, "sk-master");
        async move {
            one.initialize().await;
            let v = one.request("test/started", json!({})).await;
            v["result"]["started"]
                .as_array()
                .is_some_and(|a| a.iter().filter(|t| *t == tool).count() >= n)
        }
    })
    .await;
    assert!(begun, "{n} calls of {tool} begun at {path}");
}

async fn http_tools() -> HttpTools {
    tool_server("http", &[]).await
}

fn config(port: u16, extra: &str) -> String {
    format!(
        r#"
model_list: []
general_settings:
  master_key: sk-master
mcp_servers:
  local:
    command: python3
    args: ["{script}", stdio]
    env: {{TOOL_PREFIX: ">"}}
    timeout: 2
    max_response_bytes: 4000
  remote:
    url: http://127.0.0.1:{port}/mcp
    transport: http
    auth_type: bearer_token
    auth_value: upstream-secret
    disallowed_tools: [big]
{extra}
"#,
        script = script().display()
    )
}

/// An MCP client session over plain HTTP.
pub(crate) struct Client<'a> {
    gw: &'a Gateway,
    path: String,
    key: String,
    pub(crate) session: Option<String>,
    next: u64,
}

impl<'a> Client<'a> {
    pub(crate) fn new(gw: &'a Gateway, path: &str, key: &str) -> Self {
        Self {
            gw,
            path: path.into(),
            key: key.into(),
            session: None,
            next: 1,
        }
    }

    pub(crate) async fn post(&self, body: Value, extra: &[(&str, &str)]) -> Answer {
        let auth = format!("Bearer {}", self.key);
        let mut headers = vec![
            ("authorization", auth.as_str()),
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
        ];
        if let Some(s) = &self.session {
            headers.push(("mcp-session-id", s.as_str()));
        }
        headers.extend_from_slice(extra);
        send("POST", &self.gw.url(&self.path), body.to_string(), &headers).await
    }

    pub(crate) async fn initialize(&mut self) -> Value {
        let a = self
            .post(
                json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                    "protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "test", "version": "1"}}}),
                &[],
            )
            .await;
        assert_eq!(a.status, 200, "{}", a.text());
        self.session = Some(a.header("mcp-session-id").expect("a session id").to_owned());
        let n = self
            .post(
                json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
                &[],
            )
            .await;
        assert_eq!(n.status, 202);
        a.json()["result"].clone()
    }

    /// A request's whole JSON-RPC response.
    pub(crate) async fn request(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let a = self
            .post(
                json!({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params}),
                &[],
            )
            .await;
        assert_eq!(a.status, 200, "{}", a.text());
        let v = a.json();
        assert_eq!(v["id"], self.next);
        v
    }

    pub(crate) async fn tool(&mut self, name: &str, args: Value) -> Value {
        self.request("tools/call", json!({"name": name, "arguments": args}))
            .await
    }

    async fn tool_names(&mut self) -> Vec<String> {
        tool_names(&self.request("tools/list", json!({})).await)
    }
}

/// The tools a `tools/list` response names, sorted.
pub(crate) fn tool_names(v: &Value) -> Vec<String> {
    let mut names: Vec<String> = v["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    names
}

pub(crate) fn text_of(v: &Value) -> &str {
    v["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
}

async fn metrics(gw: &Gateway) -> String {
    send("GET", &gw.url("/metrics"), "", &[MASTER]).await.text()
}

#[tokio::test]
async fn tools_are_aggregated_routed_and_measured() {
    let tools = http_tools().await;
    let gw = gateway(&config(tools.port, "")).await;
    let mut c = Client::new(&gw, "/mcp", "sk-master");
    let init = c.initialize().await;
    assert_eq!(init["protocolVersion"], "2025-06-18");
    assert_eq!(init["serverInfo"]["name"], "sluice");

    let names = c.tool_names().await;
    for want in ["local-add", "local-big", "remote-add", "remote-headers"] {
        assert!(
            names.contains(&want.to_owned()),
            "{want} missing: {names:?}"
        );
    }
    assert!(
        !names.contains(&"remote-big".to_owned()),
        "disallowed_tools hides it"
    );

    // Routed by prefix, to the child process and to the HTTP server (whose answer is SSE).
    assert_eq!(
        text_of(&c.tool("local-add", json!({"a": 2, "b": 3})).await),
        "5"
    );
    assert_eq!(
        text_of(&c.tool("remote-echo", json!({"text": "hi"})).await),
        "hi"
    );
    assert_eq!(
        text_of(&c.tool("local-echo", json!({"text": "hi"})).await),
        ">hi"
    );

    // The child's environment is its configured variables only (Python may add LC_CTYPE).
    let env = text_of(&c.tool("local-env", json!({})).await).to_owned();
    let names: Vec<&str> = env.split(',').collect();
    assert!(names.contains(&"TOOL_PREFIX"), "{env}");
    assert!(
        names
            .iter()
            .all(|n| ["TOOL_PREFIX", "LC_CTYPE"].contains(n)),
        "sluice's environment leaked: {env}"
    );

    // sluice's credential reaches the HTTP server; the client's headers and key do not.
    c.next += 1;
    let a = c
        .post(
            json!({"jsonrpc": "2.0", "id": c.next, "method": "tools/call",
                   "params": {"name": "remote-headers", "arguments": {}}}),
            &[("x-client-secret", "do-not-forward")],
        )
        .await;
    let seen: Value = serde_json::from_str(text_of(&a.json())).unwrap();
    assert_eq!(seen["authorization"], "Bearer upstream-secret");
    assert!(seen.get("x-client-secret").is_none(), "{seen}");
    assert!(!seen.to_string().contains("sk-master"), "{seen}");

    // A tool's own failure passes through as its result; an unknown tool is the client's error.
    let failed = c.tool("local-fail", json!({})).await;
    assert_eq!(failed["result"]["isError"], true);
    let unknown = c.tool("nowhere-add", json!({})).await;
    assert_eq!(unknown["error"]["code"], -32602);
    // A name the server did not list is refused before it reaches the server (so that no
    // variant of a denied name can run): the client's error, recorded with no metric label.
    let made_up = c.tool("local-made_up_tool", json!({})).await;
    assert_eq!(made_up["error"]["code"], -32602, "{made_up}");

    let m = metrics(&gw).await;
    for line in [
        r#"sluice_mcp_calls_total{server="local",method="tools/call",tool="add",status="ok"} 1"#,
        r#"sluice_mcp_calls_total{server="remote",method="tools/call",tool="echo",status="ok"} 1"#,
        r#"sluice_mcp_calls_total{server="local",method="tools/call",tool="fail",status="tool_error"} 1"#,
        r#"sluice_mcp_calls_total{server="local",method="tools/call",tool="",status="rpc_error"} 1"#,
    ] {
        assert!(m.contains(line), "missing {line} in\n{m}");
    }
    assert!(
        m.contains(r#"sluice_mcp_call_duration_seconds_count{server="local",method="tools/call"}"#)
    );
    assert!(!m.contains("made_up_tool"));

    // Closing the session ends it.
    let closed = send(
        "DELETE",
        &gw.url("/mcp"),
        "",
        &[MASTER, ("mcp-session-id", c.session.as_deref().unwrap())],
    )
    .await;
    assert_eq!(closed.status, 200);
    c.next += 1;
    let gone = c
        .post(
            json!({"jsonrpc": "2.0", "id": c.next, "method": "tools/list"}),
            &[],
        )
        .await;
    assert_eq!(gone.status, 404);
}

#[tokio::test]
async fn permissions_narrow_the_list_and_refuse_calls() {
    let tools = http_tools().await;
    let gw = gateway(&config(tools.port, "")).await;
    let key = new_key(
        &gw,
        json!({"metadata": {"object_permission": {
            "mcp_servers": ["local"],
            "mcp_tool_permissions": {"local": ["add", "echo"]}
        }}}),
    )
    .await;

    // No key, or a wrong one: refused before anything else.
    let none = send("POST", &gw.url("/mcp"), "{}", &[]).await;
    assert_eq!(none.status, 401);
    let wrong = Client::new(&gw, "/mcp", "sk-wrong");
    let a = wrong
        .post(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}),
            &[],
        )
        .await;
    assert_eq!(a.status, 401);

    let mut c = Client::new(&gw, "/mcp", &key);
    c.initialize().await;
    assert_eq!(c.tool_names().await, ["local-add", "local-echo"]);
    assert_eq!(
        text_of(&c.tool("local-add", json!({"a": 1, "b": 1})).await),
        "2"
    );
    for name in ["remote-echo", "local-env"] {
        let refused = c.tool(name, json!({})).await;
        assert_eq!(refused["error"]["code"], -32003, "{refused}");
        assert!(
            refused["error"]["message"]
                .as_str()
                .unwrap()
                .contains("may not use"),
            "{refused}"
        );
    }
    // One server alone: the key sees nothing of a server it may not use.
    let mut single = Client::new(&gw, "/mcp/remote", &key);
    single.initialize().await;
    assert!(single.tool_names().await.is_empty());
    let read = single
        .request("resources/read", json!({"uri": "mem://note"}))
        .await;
    assert_eq!(read["error"]["code"], -32003, "{read}");
    let p = single
        .request(
            "prompts/get",
            json!({"name": "greet", "arguments": {"who": "x"}}),
        )
        .await;
    assert_eq!(p["error"]["code"], -32003, "{p}");

    // LiteLLM's header for the key, with Authorization meant for something else.
    let a = send(
        "POST",
        &gw.url("/mcp"),
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}).to_string(),
        &[
            ("x-litellm-api-key", &format!("Bearer {key}")),
            ("authorization", "Bearer some-oauth-token"),
            ("content-type", "application/json"),
        ],
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    // x-api-key works as on every route.
    let a = send(
        "POST",
        &gw.url("/mcp"),
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}).to_string(),
        &[
            ("x-api-key", key.as_str()),
            ("content-type", "application/json"),
        ],
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());

    // A session is its key's: the master key cannot use it.
    let mut thief = Client::new(&gw, "/mcp", "sk-master");
    thief.session = c.session.clone();
    let a = thief
        .post(
            json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}),
            &[],
        )
        .await;
    assert_eq!(a.status, 404);

    let m = metrics(&gw).await;
    assert!(
        m.contains(r#"sluice_mcp_calls_total{server="remote",method="tools/call",tool="",status="refused"} 1"#)
            && m.contains(r#"sluice_mcp_calls_total{server="remote",method="resources/read",tool="",status="refused"} 1"#),
        "{m}"
    );
    assert!(m.contains(
        r#"sluice_mcp_calls_total{server="local",method="tools/call",tool="",status="refused"} 1"#
    ));
    assert!(m.contains(
        r#"sluice_mcp_calls_total{server="local",method="tools/call",tool="add",status="ok"} 1"#
    ));

    // A blocked key is refused before any tool server.
    let b = send(
        "POST",
        &gw.url("/key/block"),
        json!({"key": key}).to_string(),
        &[MASTER, ("content-type", "application/json")],
    )
    .await;
    assert_eq!(b.status, 200, "{}", b.text());
    let refused = eventually(PATIENCE, || {
        let c = Client::new(&gw, "/mcp", &key);
        async move {
            let a = c
                .post(
                    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}),
                    &[],
                )
                .await;
            a.status == 401
        }
    })
    .await;
    assert!(refused, "a blocked key still reaches /mcp");
}

#[tokio::test]
async fn a_team_narrows_its_keys_and_both_must_allow() {
    let tools = http_tools().await;
    let gw = gateway(&config(tools.port, "")).await;
    let team = send(
        "POST",
        &gw.url("/team/new"),
        json!({"team_id": "agents", "metadata": {"object_permission": {"mcp_servers": ["remote"]}}})
            .to_string(),
        &[MASTER, ("content-type", "application/json")],
    )
    .await;
    assert_eq!(team.status, 200, "{}", team.text());
    // A key of the team with no rules of its own: the team's.
    let plain = new_key(&gw, json!({"team_id": "agents"})).await;
    let mut c = Client::new(&gw, "/mcp", &plain);
    c.initialize().await;
    let names = c.tool_names().await;
    assert!(
        !names.is_empty() && names.iter().all(|n| n.starts_with("remote-")),
        "{names:?}"
    );
    // A key allowed only `local` in a team allowed only `remote`: nothing.
    let narrow = new_key(
        &gw,
        json!({"team_id": "agents", "metadata": {"object_permission": {"mcp_servers": ["local"]}}}),
    )
    .await;
    let mut c = Client::new(&gw, "/mcp", &narrow);
    c.initialize().await;
    assert!(c.tool_names().await.is_empty());
    assert_eq!(
        c.tool("local-add", json!({"a": 1, "b": 1})).await["error"]["code"],
        -32003
    );
}

#[tokio::test]
async fn a_reload_keeps_the_tool_servers_when_their_settings_stay() {
    let tools = http_tools().await;
    let yaml = config(tools.port, "");
    let gw = gateway(&yaml).await;
    let before = gw.state.snapshot().features.mcp.clone().unwrap();
    let env = std::collections::HashMap::<String, String>::new();
    let same = sluice_config::load_str(&yaml, &env).unwrap().config;
    gw.state.reload(&same).unwrap();
    let after = gw.state.snapshot().features.mcp.clone().unwrap();
    assert!(
        std::sync::Arc::ptr_eq(&before, &after),
        "the same servers and sessions"
    );
    let changed = sluice_config::load_str(&yaml.replace("timeout: 2", "timeout: 3"), &env)
        .unwrap()
        .config;
    gw.state.reload(&changed).unwrap();
    let again = gw.state.snapshot().features.mcp.clone().unwrap();
    assert!(
        !std::sync::Arc::ptr_eq(&before, &again),
        "new settings, new servers"
    );
    // The new servers serve.
    let mut c = Client::new(&gw, "/mcp", "sk-master");
    c.initialize().await;
    assert_eq!(
        text_of(&c.tool("local-add", json!({"a": 2, "b": 2})).await),
        "4"
    );
}

#[tokio::test]
async fn one_server_alone_passes_resources_and_prompts_through() {
    let tools = http_tools().await;
    let gw = gateway(&config(tools.port, "")).await;
    let mut c = Client::new(&gw, "/mcp/local", "sk-master");
    let init = c.initialize().await;
    assert!(init["capabilities"]["resources"].is_object());
    assert!(c.tool_names().await.contains(&"add".to_owned()));
    assert_eq!(
        text_of(&c.tool("add", json!({"a": 40, "b": 2})).await),
        "42"
    );
    let r = c
        .request("resources/read", json!({"uri": "mem://note"}))
        .await;
    assert_eq!(r["result"]["contents"][0]["text"], "a note");
    let p = c
        .request(
            "prompts/get",
            json!({"name": "greet", "arguments": {"who": "ann"}}),
        )
        .await;
    assert_eq!(p["result"]["messages"][0]["content"]["text"], "hello ann");
    // An unknown server is a 404.
    let none = Client::new(&gw, "/mcp/nope", "sk-master");
    let a = none
        .post(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}),
            &[],
        )
        .await;
    assert_eq!(a.status, 404);
    // Aggregated prompts are prefixed like tools.
    let mut all = Client::new(&gw, "/mcp", "sk-master");
    all.initialize().await;
    let p = all
        .request(
            "prompts/get",
            json!({"name": "remote-greet", "arguments": {"who": "bo"}}),
        )
        .await;
    assert_eq!(p["result"]["messages"][0]["content"]["text"], "hello bo");
}

#[tokio::test]
async fn time_size_and_cancellation_are_bounded() {
    let tools = http_tools().await;
    let gw = gateway(&config(tools.port, "")).await;
    let mut c = Client::new(&gw, "/mcp", "sk-master");
    c.initialize().await;

    // Longer than the server's 2 s timeout: an error at the timeout, before the tool would
    // have answered (an ordering: a tool of 10 s, well past the timeout), and the server is
    // told.
    let started = Instant::now();
    let slow = c.tool("local-slow", json!({"seconds": 10})).await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert!(
        slow["error"]["message"]
            .as_str()
            .unwrap()
            .contains("did not answer"),
        "{slow}"
    );

    // The client cancels a call in flight: it ends at once and the server hears of it.
    let session = c.session.clone().unwrap();
    let url = gw.url("/mcp");
    let call = tokio::spawn({
        let url = url.clone();
        let session = session.clone();
        async move {
            send(
                "POST",
                &url,
                json!({"jsonrpc": "2.0", "id": "slow-1", "method": "tools/call",
                       "params": {"name": "local-slow", "arguments": {"seconds": 10}}})
                .to_string(),
                &[
                    MASTER,
                    ("mcp-session-id", &session),
                    ("content-type", "application/json"),
                ],
            )
            .await
        }
    });
    // In flight at the tool server (its second call of `slow`, after the timed-out one).
    calls_begun(&gw, "/mcp/local", "slow", 2).await;
    let started = Instant::now();
    let n = send(
        "POST",
        &url,
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
               "params": {"requestId": "slow-1", "reason": "user"}})
        .to_string(),
        &[
            MASTER,
            ("mcp-session-id", &session),
            ("content-type", "application/json"),
        ],
    )
    .await;
    assert_eq!(n.status, 202);
    let answered = call.await.unwrap();
    // Ended by the cancellation, before the tool's 10 s.
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert!(answered.text().contains("cancelled"), "{}", answered.text());
    let mut told = Value::Null;
    let heard = eventually(PATIENCE, || {
        let mut one = Client::new(&gw, "/mcp/local", "sk-master");
        async move {
            one.initialize().await;
            let v = one.request("test/cancelled", json!({})).await;
            v["result"]["cancelled"]
                .as_array()
                .is_some_and(|a| a.len() >= 2)
        }
    })
    .await;
    if !heard {
        let mut one = Client::new(&gw, "/mcp/local", "sk-master");
        one.initialize().await;
        told = one.request("test/cancelled", json!({})).await;
    }
    assert!(heard, "the server did not hear both cancellations: {told}");

    // A larger answer than max_response_bytes is refused; the server comes back after it.
    let big = c.tool("local-big", json!({"n": 10000})).await;
    assert!(
        big["error"]["message"].as_str().unwrap().contains("4000"),
        "{big}"
    );
    let back = eventually(PATIENCE, || {
        let mut one = Client::new(&gw, "/mcp", "sk-master");
        async move {
            one.initialize().await;
            text_of(&one.tool("local-add", json!({"a": 1, "b": 2})).await) == "3"
        }
    })
    .await;
    assert!(back, "the stdio server was not restarted");
    let m = metrics(&gw).await;
    assert!(
        m.contains(r#"server="local",method="tools/call",tool="",status="failed"} 2"#),
        "{m}"
    );
    assert!(
        m.contains(r#"server="local",method="tools/call",tool="",status="cancelled"} 1"#),
        "{m}"
    );
}

/// The JSON-RPC messages of an SSE answer, in order.
fn sse_messages(text: &str) -> Vec<Value> {
    text.split("\n\n")
        .filter_map(|event| {
            let data: Vec<&str> = event
                .lines()
                .filter_map(|l| l.strip_prefix("data: "))
                .collect();
            (!data.is_empty()).then(|| serde_json::from_str(&data.join("\n")).unwrap())
        })
        .collect()
}

#[tokio::test]
async fn progress_and_logs_are_relayed_as_an_event_stream() {
    let tools = http_tools().await;
    let gw = gateway(&config(tools.port, "")).await;
    let mut c = Client::new(&gw, "/mcp", "sk-master");
    c.initialize().await;
    // A stdio server's progress (by token; its log lines concern no request in particular),
    // and an HTTP server's progress and log messages from the call's answer stream (not the
    // progress it sends for another token).
    for (tool, logs) in [("local-steps", 0), ("remote-steps", 1)] {
        c.next += 1;
        let call = json!({"jsonrpc": "2.0", "id": c.next, "method": "tools/call", "params": {
            "name": tool, "arguments": {"n": 3}, "_meta": {"progressToken": "tok-1"}}});
        let a = c.post(call, &[]).await;
        assert_eq!(a.status, 200, "{}", a.text());
        assert!(
            a.header("content-type")
                .unwrap()
                .starts_with("text/event-stream"),
            "{tool}"
        );
        let msgs = sse_messages(&a.text());
        let progress: Vec<&Value> = msgs
            .iter()
            .filter(|m| m["method"] == "notifications/progress")
            .collect();
        let steps: Vec<i64> = progress
            .iter()
            .map(|p| p["params"]["progress"].as_i64().unwrap())
            .collect();
        assert_eq!(steps, [1, 2, 3], "{tool}: {msgs:?}");
        assert!(
            progress
                .iter()
                .all(|p| p["params"]["progressToken"] == "tok-1"),
            "{msgs:?}"
        );
        let logged = msgs
            .iter()
            .filter(|m| m["method"] == "notifications/message")
            .count();
        assert_eq!(logged, logs, "{tool}: {msgs:?}");
        let last = msgs.last().unwrap();
        assert_eq!(last["id"], c.next);
        assert_eq!(last["result"]["content"][0]["text"], "stepped");
    }
    // A client that takes only JSON gets the one JSON answer.
    let session = c.session.clone().unwrap();
    let a = send(
        "POST",
        &gw.url("/mcp"),
        json!({"jsonrpc": "2.0", "id": 50, "method": "tools/call", "params": {
            "name": "local-steps", "arguments": {"n": 2}, "_meta": {"progressToken": 5}}})
        .to_string(),
        &[
            MASTER,
            ("content-type", "application/json"),
            ("accept", "application/json"),
            ("mcp-session-id", session.as_str()),
        ],
    )
    .await;
    assert_eq!(a.status, 200);
    assert_eq!(a.header("content-type"), Some("application/json"));
    assert_eq!(text_of(&a.json()), "stepped");
}

#[tokio::test]
async fn resources_are_aggregated_and_read_by_uri() {
    let tools = http_tools().await;
    let gw = gateway(&config(tools.port, "")).await;
    let mut c = Client::new(&gw, "/mcp", "sk-master");
    let init = c.initialize().await;
    assert!(init["capabilities"]["resources"].is_object(), "{init}");
    let list = c.request("resources/list", json!({})).await;
    let listed: Vec<(&str, &str)> = list["result"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["name"].as_str().unwrap(), r["uri"].as_str().unwrap()))
        .collect();
    assert_eq!(
        listed,
        [
            ("local-note", "mem://note"),
            ("remote-note", "mem://remote-note")
        ]
    );
    let t = c.request("resources/templates/list", json!({})).await;
    assert_eq!(
        t["result"]["resourceTemplates"],
        json!([{"name": "remote-remote", "uriTemplate": "mem://remote/{id}"}])
    );
    for uri in ["mem://note", "mem://remote-note", "mem://remote/7"] {
        let r = c.request("resources/read", json!({"uri": uri})).await;
        assert_eq!(r["result"]["contents"][0]["uri"], uri, "{r}");
        assert_eq!(r["result"]["contents"][0]["text"], "a note", "{r}");
    }
    let none = c
        .request("resources/read", json!({"uri": "mem://nothing"}))
        .await;
    assert_eq!(none["error"]["code"], -32002, "{none}");

    // A key limited to one server neither lists nor reads the other's.
    let key = new_key(
        &gw,
        json!({"metadata": {"object_permission": {"mcp_servers": ["local"]}}}),
    )
    .await;
    let mut k = Client::new(&gw, "/mcp", &key);
    k.initialize().await;
    let list = k.request("resources/list", json!({})).await;
    assert_eq!(
        list["result"]["resources"],
        json!([{"name": "local-note", "uri": "mem://note"}])
    );
    let t = k.request("resources/templates/list", json!({})).await;
    assert_eq!(t["result"]["resourceTemplates"], json!([]));
    for uri in ["mem://remote-note", "mem://remote/7"] {
        let r = k.request("resources/read", json!({"uri": uri})).await;
        assert_eq!(r["error"]["code"], -32003, "{r}");
    }
    let m = metrics(&gw).await;
    assert!(
        m.contains(r#"sluice_mcp_calls_total{server="remote",method="resources/read",tool="",status="refused"} 2"#),
        "{m}"
    );
    assert!(
        m.contains(r#"sluice_mcp_calls_total{server="remote",method="resources/read",tool="mem://remote-note",status="ok"} 1"#),
        "{m}"
    );
}

#[tokio::test]
async fn progress_streams_as_it_comes_and_leaving_cancels_the_call() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let tools = http_tools().await;
    let gw = gateway(&config(tools.port, "")).await;
    let mut c = Client::new(&gw, "/mcp", "sk-master");
    c.initialize().await;
    let session = c.session.clone().unwrap();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "local-steps", "arguments": {"n": 1, "delay": 10},
        "_meta": {"progressToken": "t"}}})
    .to_string();
    let mut sock = tokio::net::TcpStream::connect(gw.addr).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nhost: x\r\nauthorization: Bearer sk-master\r\n\
         content-type: application/json\r\naccept: application/json, text/event-stream\r\n\
         mcp-session-id: {session}\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    sock.write_all(head.as_bytes()).await.unwrap();
    // The progress arrives while the tool still works (its result is 10 s away): an ordering,
    // the progress before the result, not a bound on the clock.
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains("notifications/progress") {
        let n = tokio::time::timeout(PATIENCE, sock.read(&mut buf))
            .await
            .expect("progress in time")
            .unwrap();
        assert!(
            n > 0,
            "the stream ended: {}",
            String::from_utf8_lossy(&seen)
        );
        seen.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&seen);
    assert!(text.contains("text/event-stream"), "{text}");
    assert!(!text.contains("stepped"), "{text}");
    // The client leaves: the call is cancelled at the server and recorded so.
    drop(sock);
    let heard = eventually(PATIENCE, || {
        let mut one = Client::new(&gw, "/mcp/local", "sk-master");
        async move {
            one.initialize().await;
            let v = one.request("test/cancelled", json!({})).await;
            v["result"]["cancelled"]
                .as_array()
                .is_some_and(|a| !a.is_empty())
        }
    })
    .await;
    assert!(heard, "the server was not told");
    let m = metrics(&gw).await;
    assert!(
        m.contains(r#"server="local",method="tools/call",tool="",status="cancelled"} 1"#),
        "{m}"
    );
}

/// A tool server that answers to a tool's name in any case, and a deny list naming the tool:
/// before a call was matched against the server's own list, `remote-BIG` ran the denied
/// `big` (the list names tools exactly). Now a name the server did not list is refused
/// before it reaches the server.
#[tokio::test]
async fn a_variant_of_a_denied_tool_name_does_not_reach_the_server() {
    let tools = tool_server("http", &[("TOOL_NAMES_ANY_CASE", "1")]).await;
    let gw = gateway(&config(tools.port, "")).await;
    let mut c = Client::new(&gw, "/mcp", "sk-master");
    c.initialize().await;
    let denied = c.tool("remote-big", json!({"n": 10})).await;
    assert!(denied["error"].is_object(), "{denied}");
    for variant in ["remote-BIG", "remote-Big"] {
        let v = c.tool(variant, json!({"n": 10})).await;
        assert_eq!(v["error"]["code"], -32602, "{variant}: {v}");
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("unknown tool")),
            "{variant}: {v}"
        );
    }
    // The listed name still runs.
    assert_eq!(
        text_of(&c.tool("remote-add", json!({"a": 1, "b": 2})).await),
        "3"
    );
}
