//! MCP tool calls as records (issue 18): each call is a row of the spend log (LiteLLM's
//! `call_mcp_tool`), priced by `mcp_info.mcp_server_cost_info` and charged to the key's budget
//! (a spent budget refuses the next priced call, and the refusal is a row too), with its
//! arguments and result only under `store_prompts_in_spend_logs`; a callback record; and an
//! OTLP span `execute_tool <tool>`, a child of the model request's span when the Responses
//! API's tool loop made the call.
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response};
use serde_json::{json, Value};

use crate::common::*;
use crate::mcp::{script, text_of, Client};
use sluice_mock::MockSettings;

/// A loopback OTLP/HTTP receiver: every body it was sent.
async fn collector() -> (String, Arc<Mutex<Vec<Bytes>>>) {
    let got: Arc<Mutex<Vec<Bytes>>> = Arc::default();
    let kept = got.clone();
    let base = serve_loopback(move |req: Request<sluice_net::server::RequestBody>| {
        let kept = kept.clone();
        async move {
            let body = req.into_body().collect().await.unwrap().to_bytes();
            kept.lock().unwrap().push(body);
            Response::new(Full::new(Bytes::new()))
        }
    })
    .await;
    (base, got)
}

fn config(otel: &str, hook: &str, mock: &str) -> String {
    format!(
        r#"
model_list:
  - model_name: m
    litellm_params: {{model: openai/m, api_base: "http://{mock}/v1", api_key: sk-up}}
general_settings:
  master_key: sk-master
  store_prompts_in_spend_logs: true
litellm_settings:
  callbacks: [otel]
  success_callback: [webhook]
  failure_callback: [webhook]
callback_settings:
  otel: {{endpoint: "{otel}/v1/traces"}}
  webhook: {{url: "{hook}/hook", flush_interval: 0.05}}
mcp_servers:
  local:
    command: python3
    args: ["{script}", stdio]
    mcp_info:
      mcp_server_cost_info:
        default_cost_per_query: 0.1
        tool_name_to_cost_per_query: {{add: 0.25, echo: 0}}
"#,
        script = script().display()
    )
}

async fn rows(gw: &Gateway, key: &str, want: usize) -> Vec<Value> {
    let url = gw.url(&format!("/spend/logs?api_key={key}"));
    let rows = poll(
        PATIENCE,
        || async {
            let a = send("GET", &url, "", &[MASTER]).await;
            a.json().as_array().cloned().unwrap_or_default()
        },
        |rows| rows.len() >= want,
    )
    .await;
    assert!(
        rows.len() >= want,
        "{want} spend logs expected, got {rows:?}"
    );
    rows
}

/// The records of tool calls, skipping the HTTP requests' own.
async fn tool_record(gw: &mut Gateway) -> sluice_core::record::RequestRecord {
    loop {
        let r = gw.next_record().await;
        if r.tool.is_some() {
            return r;
        }
    }
}

#[tokio::test]
async fn priced_calls_are_spend_logs_charged_to_the_budget() {
    let (otel, spans) = collector().await;
    let (hook, hooked) = collector().await;
    let mock = mock_server(MockSettings::default()).await;
    let mut gw = gateway(&config(&otel, &hook, &mock.addr.to_string())).await;
    let key = new_key(&gw, json!({"max_budget": 0.5, "key_alias": "agent"})).await;
    let mut c = Client::new(&gw, "/mcp", &key);
    c.initialize().await;

    // Two calls of a tool at 0.25 and one free one: three rows, the key's spend 0.5.
    for (a, b) in [(1, 2), (3, 4)] {
        let v = c.tool("local-add", json!({"a": a, "b": b})).await;
        assert_eq!(text_of(&v), (a + b).to_string(), "{v}");
    }
    let v = c.tool("local-echo", json!({"text": "free"})).await;
    assert_eq!(text_of(&v), "free", "{v}");
    drop(c);

    let r = tool_record(&mut gw).await;
    let t = r.tool.as_deref().unwrap();
    assert_eq!(
        (&*t.server, t.method, t.name.as_deref()),
        ("local", "tools/call", Some("add"))
    );
    assert_eq!(r.cost, Some(sluice_core::limits::nanos(0.25)));
    assert_eq!(r.key.as_ref().unwrap().alias.as_deref(), Some("agent"));
    let trace = r.trace.as_deref().expect("a span with tracing on");
    assert!(
        trace.parent.is_none(),
        "no traceparent from the client: a root span"
    );

    let logs = rows(&gw, &key, 3).await;
    let adds: Vec<&Value> = logs
        .iter()
        .filter(|l| l["model_group"] == "local-add")
        .collect();
    assert_eq!(adds.len(), 2, "{logs:?}");
    for l in &adds {
        assert_eq!(l["call_type"], "call_mcp_tool");
        assert_eq!(l["custom_llm_provider"], "mcp");
        assert_eq!(l["model_id"], "local");
        assert_eq!(l["status"], "success");
        assert!((l["spend"].as_f64().unwrap() - 0.25).abs() < 1e-9, "{l}");
    }
    // Content kept as asked: the arguments sent and the result.
    let detail = send(
        "GET",
        &gw.url(&format!(
            "/spend/logs?request_id={}",
            adds[0]["request_id"].as_str().unwrap()
        )),
        "",
        &[MASTER],
    )
    .await;
    let d = detail.json();
    let d = &d[0];
    assert_eq!(d["messages"]["name"], "add", "{d}");
    assert!(d["messages"]["arguments"]["a"].is_number(), "{d}");
    assert_eq!(d["response"]["content"][0]["type"], "text", "{d}");
    let echo = logs
        .iter()
        .find(|l| l["model_group"] == "local-echo")
        .unwrap();
    assert_eq!(echo["spend"].as_f64(), Some(0.0));

    let ok = eventually(PATIENCE, || async {
        let info = send(
            "GET",
            &gw.url(&format!("/key/info?key={key}")),
            "",
            &[MASTER],
        )
        .await;
        (info.json()["info"]["spend"].as_f64().unwrap_or(0.0) - 0.5).abs() < 1e-9
    })
    .await;
    assert!(ok, "the key's stored spend is the two priced calls");

    // The budget is spent: a priced tool is refused (and recorded), a free one still runs.
    let mut c = Client::new(&gw, "/mcp", &key);
    c.initialize().await;
    let v = c.tool("local-add", json!({"a": 1, "b": 1})).await;
    assert_eq!(v["error"]["code"], -32003, "{v}");
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(msg.contains("budget"), "{msg}");
    let v = c.tool("local-echo", json!({"text": "still"})).await;
    assert_eq!(text_of(&v), "still", "{v}");
    let logs = rows(&gw, &key, 5).await;
    let refused = logs
        .iter()
        .find(|l| l["status"] == "failure")
        .expect("the refusal is logged");
    assert_eq!(refused["model_group"], "local-add");
    assert_eq!(refused["spend"].as_f64(), Some(0.0));
    assert!(
        refused["error"].as_str().unwrap().starts_with("refused: "),
        "{refused}"
    );
    assert!(
        !logs.iter().any(|l| l.to_string().contains(&key)),
        "no key in a log"
    );

    // Each call's span reached the collector: GenAI's execute_tool with MCP's method.
    let ok = eventually(PATIENCE, || {
        let spans = spans.clone();
        async move {
            let all: Vec<u8> = spans
                .lock()
                .unwrap()
                .iter()
                .flat_map(|b| b.to_vec())
                .collect();
            let has = |s: &[u8]| all.windows(s.len()).any(|w| w == s);
            has(b"execute_tool add") && has(b"mcp.method.name") && has(b"sluice.mcp.server")
        }
    })
    .await;
    assert!(ok, "tool spans exported");
    // And each call's callback record, the refusal among the failures.
    let ok = eventually(PATIENCE, || {
        let hooked = hooked.clone();
        async move {
            let records: Vec<Value> = hooked
                .lock()
                .unwrap()
                .iter()
                .filter_map(|b| serde_json::from_slice::<Vec<Value>>(b).ok())
                .flatten()
                .filter(|r| r["call_type"] == "call_mcp_tool")
                .collect();
            let ok = records
                .iter()
                .filter(|r| r["status_text"] == "success" && r["mcp"]["tool"] == "add")
                .count();
            let refused = records
                .iter()
                .any(|r| r["status_text"] == "failure" && r["mcp"]["status"] == "refused");
            ok == 2 && refused && records.iter().all(|r| r["model_group"].is_string())
        }
    })
    .await;
    assert!(
        ok,
        "tool calls reach the webhook: {:?}",
        hooked.lock().unwrap().len()
    );
    let metrics = send("GET", &gw.url("/metrics"), "", &[MASTER]).await.text();
    assert!(
        metrics.contains(r#"sluice_mcp_spend_usd_total{server="local",method="tools/call"} 0.5"#),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_model_calls_tools_whose_spans_are_children_of_its_request() {
    let (otel, _spans) = collector().await;
    let (hook, _hooked) = collector().await;
    let mock = mock_server(MockSettings::default()).await;
    let mut gw = gateway(&config(&otel, &hook, &mock.addr.to_string())).await;
    let key = new_key(&gw, json!({})).await;
    let body = json!({
        "model": "m",
        "input": [{"role": "user", "content": [{"type": "input_text",
            "text": "Add them.\nmock-tool: local-add {\"a\": 2, \"b\": 3}"}]}],
        "tools": [{"type": "mcp", "server_label": "local", "require_approval": "never",
                   "allowed_tools": ["add"]}],
    });
    let auth = format!("Bearer {key}");
    let a = send(
        "POST",
        &gw.url("/v1/responses"),
        body.to_string(),
        &[
            ("authorization", auth.as_str()),
            ("content-type", "application/json"),
        ],
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let out = a.json();
    let calls = out["output"].as_array().unwrap();
    assert!(calls.iter().any(|i| i["type"] == "mcp_call"), "{out}");

    // The tool call's record comes first (it ended inside the request), then the request's.
    let mut tool = None;
    let request = loop {
        let r = gw.next_record().await;
        if r.tool.is_some() {
            tool = Some(r);
        } else if r.route == "/v1/responses" {
            break r;
        }
    };
    let tool = tool.expect("a tool call's record");
    assert_eq!(tool.route, "/v1/responses");
    let (t, q) = (tool.trace.unwrap(), request.trace.unwrap());
    assert_eq!(t.trace_id, q.trace_id, "one trace");
    assert_eq!(
        t.parent,
        Some(q.span_id),
        "the tool's span hangs under the request's"
    );
    assert_eq!(tool.cost, Some(sluice_core::limits::nanos(0.25)));
    let logs = rows(&gw, &key, 2).await;
    assert!(
        logs.iter()
            .any(|l| l["call_type"] == "call_mcp_tool" && l["model_group"] == "local-add"),
        "{logs:?}"
    );
}
