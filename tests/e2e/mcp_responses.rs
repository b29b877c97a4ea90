//! The Responses API's `mcp` tools run by sluice: a real tool server
//! (`tests/fixtures/mcp/tool_server.py`, a stdio child) behind the gateway, the mock provider
//! over its real OpenAI wire as the model (it calls the tool a `mock-tool:` line names, then
//! answers with the tool's result). The loop lists the tools, runs the model's call, feeds the
//! result back and answers with `mcp_list_tools`, `mcp_call` and the model's message, usage
//! summed, whole or streamed; permissions refuse, approvals ask and then run.
use std::path::PathBuf;

use crate::common::*;
use serde_json::{json, Value};
use sluice_mock::MockSettings;

fn config(mock: &str) -> String {
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp/tool_server.py");
    format!(
        r#"
model_list:
  - model_name: gpt
    litellm_params:
      model: openai/gpt-upstream
      api_base: http://{mock}/v1
      api_key: sk-openai-upstream
router_settings:
  num_retries: 0
general_settings:
  master_key: sk-master
mcp_servers:
  local:
    command: python3
    args: ["{script}", stdio]
    timeout: 5
  other:
    command: python3
    args: ["{script}", stdio]
    timeout: 5
"#,
        script = script.display()
    )
}

fn request(server: &str, approval: &str, stream: bool) -> Value {
    json!({
        "model": "gpt",
        "stream": stream,
        "input": [{"role": "user", "content": [{"type": "input_text",
            "text": format!("Add them.\nmock-tool: {server}-add {{\"a\": 2, \"b\": 3}}")}]}],
        "tools": [{"type": "mcp", "server_label": server, "require_approval": approval,
                   "allowed_tools": ["add", "echo"]}]
    })
}

async fn responses(gw: &Gateway, key: &str, body: &Value) -> Answer {
    let auth = format!("Bearer {key}");
    send(
        "POST",
        &gw.url("/v1/responses"),
        body.to_string(),
        &[
            ("authorization", auth.as_str()),
            ("content-type", "application/json"),
        ],
    )
    .await
}

async fn responses_record(gw: &mut Gateway) -> sluice_core::record::RequestRecord {
    loop {
        let r = gw.next_record().await;
        if r.route == "/v1/responses" && r.tool.is_none() {
            return r;
        }
    }
}

fn types(answer: &Value) -> Vec<&str> {
    answer["output"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["type"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn the_model_calls_a_tool_and_answers_with_its_result() {
    let mock = mock_server(MockSettings::default()).await;
    let mut gw = gateway(&config(&mock.addr.to_string())).await;

    let a = responses(&gw, "sk-master", &request("local", "never", false)).await;
    assert_eq!(a.status, 200, "{}", a.text());
    let v = a.json();
    assert_eq!(types(&v), ["mcp_list_tools", "mcp_call", "message"], "{v}");
    let listed: Vec<&str> = v["output"][0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(listed, ["add", "echo"], "allowed_tools narrows the list");
    assert_eq!(v["output"][0]["server_label"], "local");
    let call = &v["output"][1];
    assert_eq!(call["name"], "add");
    assert_eq!(call["server_label"], "local");
    assert_eq!(call["output"], "5");
    assert_eq!(call["error"], Value::Null);
    assert_eq!(
        v["output"][2]["content"][0]["text"], "mock tool result: 5",
        "the model got the tool's result"
    );
    // The client's own tools come back as it sent them.
    assert_eq!(v["tools"][0]["type"], "mcp");

    // Two model calls, one request: usage summed, recorded and charged once.
    let u = &v["usage"];
    let (i, o) = (
        u["input_tokens"].as_u64().unwrap(),
        u["output_tokens"].as_u64().unwrap(),
    );
    assert_eq!(u["total_tokens"].as_u64().unwrap(), i + o);
    let r = responses_record(&mut gw).await;
    assert_eq!(r.status, 200);
    let usage = r.usage.expect("usage recorded");
    assert_eq!((usage.prompt_tokens, usage.completion_tokens), (i, o));
    // The first round alone is smaller than the sum: the second one's input holds the first's.
    let alone = responses(
        &gw,
        "sk-master",
        &json!({"model": "gpt", "input": "Add them.\nmock-tool: local-add {\"a\": 2, \"b\": 3}",
                "tools": [{"type": "function", "name": "local-add", "parameters": {}}]}),
    )
    .await
    .json();
    assert!(alone["usage"]["input_tokens"].as_u64().unwrap() < i);

    // Without an mcp tool a Responses request is untouched.
    let plain = responses(&gw, "sk-master", &json!({"model": "gpt", "input": "hi"})).await;
    assert_eq!(plain.status, 200);
    assert_eq!(types(&plain.json()), ["message"]);
}

#[tokio::test]
async fn the_loop_streams_as_responses_events() {
    let mock = mock_server(MockSettings::default()).await;
    let mut gw = gateway(&config(&mock.addr.to_string())).await;
    let a = responses(&gw, "sk-master", &request("local", "never", true)).await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert!(a
        .header("content-type")
        .unwrap()
        .starts_with("text/event-stream"));
    let events: Vec<Value> = a
        .text()
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds[0], "response.created");
    assert_eq!(*kinds.last().unwrap(), "response.completed");
    let added: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "response.output_item.added")
        .map(|e| e["item"]["type"].as_str().unwrap())
        .collect();
    assert_eq!(added, ["mcp_list_tools", "mcp_call", "message"]);
    let done = events
        .iter()
        .find(|e| e["type"] == "response.output_item.done" && e["item"]["type"] == "mcp_call")
        .unwrap();
    assert_eq!(done["item"]["output"], "5");
    let text: String = events
        .iter()
        .filter(|e| e["type"] == "response.output_text.delta")
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert_eq!(text, "mock tool result: 5");
    let r = responses_record(&mut gw).await;
    assert!(r.stream);
    let completed = events.last().unwrap();
    assert_eq!(
        r.usage.unwrap().completion_tokens,
        completed["response"]["usage"]["output_tokens"]
            .as_u64()
            .unwrap()
    );
}

#[tokio::test]
async fn permissions_refuse_and_bad_tools_are_400() {
    let mock = mock_server(MockSettings::default()).await;
    let gw = gateway(&config(&mock.addr.to_string())).await;
    let key = new_key(
        &gw,
        json!({"metadata": {"object_permission": {
            "mcp_servers": ["other"],
            "mcp_tool_permissions": {"other": ["echo"]}
        }}}),
    )
    .await;
    let a = responses(&gw, &key, &request("local", "never", false)).await;
    assert_eq!(a.status, 403, "{}", a.text());
    assert_eq!(a.json()["error"]["code"], "mcp_server_not_allowed");
    assert!(a.text().contains("local"));
    let m = send("GET", &gw.url("/metrics"), "", &[MASTER]).await.text();
    assert!(
        m.lines().any(|l| l.starts_with("sluice_mcp_calls_total")
            && l.contains("server=\"local\"")
            && l.contains("status=\"refused\"")),
        "the refusal is recorded"
    );
    assert!(
        !m.lines()
            .any(|l| l.starts_with("sluice_mcp_calls_total") && l.contains("status=\"ok\"")),
        "no tool ran"
    );
    // A server it may use, but a tool its permissions leave out: not offered to the model.
    let a = responses(&gw, &key, &request("other", "never", false)).await;
    assert_eq!(a.status, 200, "{}", a.text());
    let v = a.json();
    let listed = &v["output"][0]["tools"];
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed[0]["name"], "echo");

    for (tool, says) in [
        (
            json!({"type": "mcp", "server_label": "github"}),
            "not one of this gateway's MCP servers",
        ),
        (
            json!({"type": "mcp", "server_label": "local", "server_url": "https://mcp.example/sse"}),
            "sluice runs only its own MCP servers",
        ),
    ] {
        let a = responses(
            &gw,
            "sk-master",
            &json!({"model": "gpt", "input": "x", "tools": [tool]}),
        )
        .await;
        assert_eq!(a.status, 400, "{}", a.text());
        assert!(a.text().contains(says), "{}", a.text());
    }
    // sluice's own /mcp/{server} is accepted.
    let own = format!("http://{}/mcp/local", gw.addr);
    let mut body = request("local", "never", false);
    body["tools"][0]["server_url"] = json!(own);
    let a = responses(&gw, "sk-master", &body).await;
    assert_eq!(a.status, 200, "{}", a.text());
}

#[tokio::test]
async fn a_call_that_needs_approval_asks_then_runs_once_approved() {
    let mock = mock_server(MockSettings::default()).await;
    let gw = gateway(&config(&mock.addr.to_string())).await;
    let first = request("local", "always", false);
    let a = responses(&gw, "sk-master", &first).await;
    assert_eq!(a.status, 200, "{}", a.text());
    let v = a.json();
    assert_eq!(types(&v), ["mcp_list_tools", "mcp_approval_request"], "{v}");
    let asked = v["output"][1].clone();
    assert_eq!(asked["name"], "add");
    assert_eq!(asked["server_label"], "local");

    // The client approves: it sends the request item back with its response.
    let mut again = first.clone();
    let input = again["input"].as_array_mut().unwrap();
    input.push(asked.clone());
    input.push(json!({"type": "mcp_approval_response", "approve": true,
                      "approval_request_id": asked["id"]}));
    let a = responses(&gw, "sk-master", &again).await;
    assert_eq!(a.status, 200, "{}", a.text());
    let v = a.json();
    assert_eq!(types(&v), ["mcp_list_tools", "mcp_call", "message"], "{v}");
    assert_eq!(v["output"][1]["output"], "5");
    assert_eq!(v["output"][1]["approval_request_id"], asked["id"]);
    assert_eq!(v["output"][2]["content"][0]["text"], "mock tool result: 5");

    // An approval for a request the input does not carry.
    let mut lost = first.clone();
    lost["input"].as_array_mut().unwrap().push(
        json!({"type": "mcp_approval_response", "approve": true, "approval_request_id": "mcpr_x"}),
    );
    let a = responses(&gw, "sk-master", &lost).await;
    assert_eq!(a.status, 400, "{}", a.text());
}

#[tokio::test]
async fn a_model_that_keeps_calling_tools_stops_at_the_round_limit() {
    let mock = mock_server(MockSettings::default()).await;
    let mut gw = gateway(&config(&mock.addr.to_string())).await;
    let mut body = request("local", "never", false);
    body["input"][0]["content"][0]["text"] =
        json!("Add forever.\nmock-tool-loop: local-add {\"a\": 1, \"b\": 1}");
    let a = responses(&gw, "sk-master", &body).await;
    assert_eq!(a.status, 502, "{}", a.text());
    let v = a.json();
    assert_eq!(v["error"]["code"], "mcp_tool_loop_limit", "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("8 rounds"),
        "{v}"
    );
    // What the eight rounds used is still told and charged.
    let input = v["usage"]["input_tokens"].as_u64().expect("usage");
    let r = responses_record(&mut gw).await;
    assert_eq!(r.status, 502);
    assert_eq!(r.usage.expect("usage recorded").prompt_tokens, input);
    // Each of the eight rounds ran the tool it asked for.
    let m = send("GET", &gw.url("/metrics"), "", &[MASTER]).await.text();
    let line =
        r#"sluice_mcp_calls_total{server="local",method="tools/call",tool="add",status="ok"} 8"#;
    assert!(m.contains(line), "missing {line} in\n{m}");
}
