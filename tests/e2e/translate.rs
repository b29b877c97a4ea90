//! End-to-end translation through the real server: OpenAI clients on `anthropic/` deployments
//! and Anthropic clients (`/v1/messages`) on OpenAI-compatible, Anthropic and in-process mock
//! deployments. The upstream is `sluice mock` (speaking each wire format) or a recording
//! upstream for byte-exact and error cases.
use crate::common::*;
use serde_json::{json, Value};
use sluice_mock::MockSettings;

const ANTHROPIC_KEY: (&str, &str) = ("x-api-key", "sk-master");

fn config(mock_host: &str, extra: &str) -> String {
    format!(
        r#"
model_list:
  - model_name: claude
    litellm_params:
      model: anthropic/claude-upstream
      api_base: http://{mock_host}
      api_key: sk-ant-upstream
  - model_name: gpt
    litellm_params:
      model: openai/gpt-upstream
      api_base: http://{mock_host}/v1
      api_key: sk-openai-upstream
  - model_name: inproc
    litellm_params:
      model: mock/inproc-model
router_settings:
  num_retries: 0
{extra}
general_settings:
  master_key: sk-master
"#
    )
}

async fn setup(extra: &str) -> (MockServer, Gateway) {
    let mock = mock_server(MockSettings::default()).await;
    let gw = gateway(&config(&mock.addr.to_string(), extra)).await;
    (mock, gw)
}

const WEATHER_TOOL_OPENAI: &str = r#"[{"type":"function","function":{"name":"get_weather","description":"Weather in a city","parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"]}}}]"#;
const WEATHER_TOOL_ANTHROPIC: &str = r#"[{"name":"get_weather","description":"Weather in a city","input_schema":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"]}}]"#;

async fn messages(gw: &Gateway, body: &str) -> Answer {
    send(
        "POST",
        &gw.url("/v1/messages"),
        body.to_owned(),
        &[ANTHROPIC_KEY, ("anthropic-version", "2023-06-01")],
    )
    .await
}

// --- OpenAI client → anthropic/ deployment -------------------------------------------------

#[tokio::test]
async fn openai_client_on_anthropic_deployment() {
    let (_mock, mut gw) = setup("").await;
    let a = post(
        &gw.url("/v1/chat/completions"),
        r#"{"model":"claude","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"hello"}]}"#,
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let v = a.json();
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["model"], "claude-upstream");
    assert!(v["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .starts_with("The mock provider"));
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    assert_eq!(v["usage"]["completion_tokens"], 16);
    let r = gw.next_record().await;
    assert_eq!(r.provider, Some("anthropic"));
    let u = r.usage.unwrap();
    assert_eq!(u.completion_tokens, 16);
    assert_eq!(
        u.prompt_tokens,
        v["usage"]["prompt_tokens"].as_u64().unwrap()
    );
}

#[tokio::test]
async fn openai_client_tool_call_on_anthropic_deployment() {
    let (_mock, gw) = setup("").await;
    let body = format!(
        r#"{{"model":"claude","messages":[{{"role":"user","content":"weather in Paris?"}}],"tools":{WEATHER_TOOL_OPENAI}}}"#
    );
    let a = post(&gw.url("/v1/chat/completions"), &body).await;
    assert_eq!(a.status, 200, "{}", a.text());
    let v = a.json();
    let call = &v["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(call["type"], "function");
    assert_eq!(call["function"]["name"], "get_weather");
    assert!(call["id"].as_str().unwrap().starts_with("toolu_"));
    let args: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({"city": "mock city", "days": 1}));
    assert_eq!(v["choices"][0]["finish_reason"], "tool_calls");
}

#[tokio::test]
async fn openai_client_streams_tool_calls_from_anthropic() {
    let (_mock, mut gw) = setup("").await;
    for include_usage in [false, true] {
        let body = format!(
            r#"{{"model":"claude","stream":true,"stream_options":{{"include_usage":{include_usage}}},
            "messages":[{{"role":"user","content":"weather?"}}],"tools":{WEATHER_TOOL_OPENAI}}}"#
        );
        let a = post(&gw.url("/v1/chat/completions"), &body).await;
        assert_eq!(a.status, 200, "{}", a.text());
        assert!(a
            .header("content-type")
            .unwrap()
            .starts_with("text/event-stream"));
        let (text, calls, finish, usage) = openai_chunks(&a);
        assert_eq!(text, "Calling get_weather.");
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].0, "get_weather");
        let args: Value = serde_json::from_str(&calls[0].1).unwrap();
        assert_eq!(args, json!({"city": "mock city", "days": 1}));
        assert_eq!(finish, "tool_calls");
        assert_eq!(
            usage.is_some(),
            include_usage,
            "usage chunk only when asked"
        );
        // sluice reads the usage either way.
        let r = gw.next_record().await;
        let u = r.usage.expect("stream usage recorded");
        assert!(u.prompt_tokens > 0 && u.completion_tokens > 0);
        if let Some(usage) = usage {
            assert_eq!(usage["prompt_tokens"].as_u64(), Some(u.prompt_tokens));
        }
    }
}

#[tokio::test]
async fn anthropic_errors_reach_openai_clients_mapped() {
    let cases = [
        (
            529,
            include_str!("../fixtures/anthropic/error_overloaded.json"),
            503,
            "Overloaded",
            "overloaded",
        ),
        (
            429,
            include_str!("../fixtures/anthropic/error_rate_limit.json"),
            429,
            "rate limit",
            "rate_limit_exceeded",
        ),
        (
            400,
            include_str!("../fixtures/anthropic/error_prompt_too_long.json"),
            400,
            "prompt is too long",
            "context_length_exceeded",
        ),
    ];
    for (status, body, want, message, code) in cases {
        let up = recording(Reply::Json(status, body)).await;
        let gw = gateway(&format!(
            "model_list:\n  - model_name: claude\n    litellm_params: {{model: anthropic/c, api_base: \"{}\", api_key: k}}\nrouter_settings: {{num_retries: 0}}\ngeneral_settings: {{master_key: sk-master}}\n",
            up.base()
        ))
        .await;
        let a = post(
            &gw.url("/v1/chat/completions"),
            r#"{"model":"claude","messages":[{"role":"user","content":"x"}]}"#,
        )
        .await;
        assert_eq!(a.status, want, "{}", a.text());
        let v = a.json();
        assert!(
            v["error"]["message"].as_str().unwrap().contains(message),
            "{v}"
        );
        assert_eq!(v["error"]["code"], code);
        let seen = up.requests();
        assert_eq!(seen[0].path_and_query, "/v1/messages");
        assert_eq!(seen[0].headers["x-api-key"], "k");
        assert_eq!(seen[0].headers["anthropic-version"], "2023-06-01");
    }
}

#[tokio::test]
async fn drop_params_decides_between_400_and_dropping() {
    let body = r#"{"model":"claude","messages":[{"role":"user","content":"x"}],"logit_bias":{"50256":-100}}"#;
    let (_mock, gw) = setup("").await;
    let a = post(&gw.url("/v1/chat/completions"), body).await;
    assert_eq!(a.status, 400);
    let v = a.json();
    assert_eq!(v["error"]["param"], "logit_bias");
    assert_eq!(v["error"]["code"], "unsupported_parameter");
    let (_mock, gw) = setup("litellm_settings:\n  drop_params: true").await;
    let a = post(&gw.url("/v1/chat/completions"), body).await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(a.header("x-sluice-dropped-params"), Some("logit_bias"));
}

#[tokio::test]
async fn hints_are_dropped_and_listed_meaning_is_refused_by_name() {
    let (_mock, gw) = setup("").await;
    // Claude Code's shape towards an OpenAI-compatible deployment: hints only.
    let body = include_str!("../fixtures/anthropic/request_claude_code.json")
        .replace("\"claude-sonnet-4-6\"", "\"gpt\"");
    for stream in [true, false] {
        let body = body.replace("\"stream\": true", &format!("\"stream\": {stream}"));
        let a = send(
            "POST",
            &gw.url("/v1/messages?beta=true"),
            body,
            &[
                ANTHROPIC_KEY,
                ("anthropic-version", "2023-06-01"),
                ("anthropic-beta", "context-management-2025-06-27"),
            ],
        )
        .await;
        assert_eq!(a.status, 200, "stream {stream}: {}", a.text());
        let mut listed: Vec<&str> = a
            .header("x-sluice-dropped-params")
            .expect("dropped parameters listed")
            .split(',')
            .collect();
        listed.sort_unstable();
        assert_eq!(
            listed,
            [
                "anthropic-beta",
                "cache_control",
                "context_management",
                "tools.defer_loading"
            ],
            "stream {stream}"
        );
    }
    // A request with nothing to drop has no header; nor has a pass-through one.
    for model in ["gpt", "claude"] {
        let a = messages(
            &gw,
            &format!(
                r#"{{"model":"{model}","max_tokens":9,"messages":[{{"role":"user","content":"hi"}}],"context_management":{{"edits":[{{}}]}}}}"#
            ),
        )
        .await;
        assert_eq!(a.status, 200, "{model}: {}", a.text());
        let want = (model == "gpt").then_some("context_management");
        assert_eq!(a.header("x-sluice-dropped-params"), want, "{model}");
    }
    // What the answer depends on: a 400 in the client's shape naming it.
    let mcp = r#"{"model":"gpt","max_tokens":9,"messages":[{"role":"user","content":"hi"}],"mcp_servers":[{"type":"url","url":"https://mcp.example","name":"x"}]}"#;
    let a = messages(&gw, mcp).await;
    assert_eq!(a.status, 400, "{}", a.text());
    let v = a.json();
    assert_eq!(v["type"], "error");
    assert_eq!(v["error"]["type"], "invalid_request_error");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("does not support the parameter `mcp_servers`"),
        "{v}"
    );
    let n2 = r#"{"model":"claude","n":2,"messages":[{"role":"user","content":"hi"}]}"#;
    let a = post(&gw.url("/v1/chat/completions"), n2).await;
    assert_eq!(a.status, 400, "{}", a.text());
    assert_eq!(a.json()["error"]["param"], "n");
    // With drop_params they are dropped and listed too.
    let (_mock, gw) = setup("litellm_settings:\n  drop_params: true").await;
    let a = messages(&gw, mcp).await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(a.header("x-sluice-dropped-params"), Some("mcp_servers"));
    let a = post(&gw.url("/v1/chat/completions"), n2).await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(a.header("x-sluice-dropped-params"), Some("n"));
}

// --- Anthropic client (/v1/messages) -------------------------------------------------------

#[tokio::test]
async fn messages_on_openai_deployment() {
    let (_mock, mut gw) = setup("").await;
    let a = messages(
        &gw,
        r#"{"model":"gpt","max_tokens":100,"system":"Be brief.","messages":[{"role":"user","content":"hello"}]}"#,
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let v = a.json();
    assert_eq!(v["type"], "message");
    assert_eq!(v["role"], "assistant");
    assert_eq!(v["content"][0]["type"], "text");
    assert!(v["content"][0]["text"]
        .as_str()
        .unwrap()
        .starts_with("The mock provider"));
    assert_eq!(v["stop_reason"], "end_turn");
    assert_eq!(v["usage"]["output_tokens"], 16);
    let r = gw.next_record().await;
    assert_eq!(r.usage.unwrap().completion_tokens, 16);
}

#[tokio::test]
async fn messages_stream_with_tools_on_openai_deployment() {
    let (_mock, mut gw) = setup("").await;
    let body = format!(
        r#"{{"model":"gpt","max_tokens":100,"stream":true,"messages":[{{"role":"user","content":"weather?"}}],"tools":{WEATHER_TOOL_ANTHROPIC}}}"#
    );
    let a = messages(&gw, &body).await;
    assert_eq!(a.status, 200, "{}", a.text());
    let (blocks, stop, usage, names) = anthropic_events(&a);
    assert_eq!(names.first().map(String::as_str), Some("message_start"));
    assert_eq!(names.last().map(String::as_str), Some("message_stop"));
    assert_eq!(blocks.len(), 1);
    assert_eq!(blocks[0]["type"], "tool_use");
    assert_eq!(blocks[0]["name"], "get_weather");
    let input: Value = serde_json::from_str(blocks[0]["json"].as_str().unwrap()).unwrap();
    assert_eq!(input, json!({"city": "mock city", "days": 1}));
    assert_eq!(stop, "tool_use");
    assert!(usage["input_tokens"].as_u64().unwrap() > 0);
    let r = gw.next_record().await;
    let u = r.usage.expect("usage read from the translated stream");
    assert_eq!(Some(u.prompt_tokens), usage["input_tokens"].as_u64());
    assert_eq!(Some(u.completion_tokens), usage["output_tokens"].as_u64());

    // The tool result goes back; the model answers in text.
    let body = format!(
        r#"{{"model":"gpt","max_tokens":100,"stream":true,"tools":{WEATHER_TOOL_ANTHROPIC},"messages":[
        {{"role":"user","content":"weather?"}},
        {{"role":"assistant","content":[{{"type":"tool_use","id":"call_1","name":"get_weather","input":{{"city":"Paris"}}}}]}},
        {{"role":"user","content":[{{"type":"tool_result","tool_use_id":"call_1","content":"18C"}}]}}]}}"#
    );
    let a = messages(&gw, &body).await;
    let (blocks, stop, _, _) = anthropic_events(&a);
    assert_eq!(blocks[0]["type"], "text");
    assert!(blocks[0]["text"].as_str().unwrap().starts_with("The mock"));
    assert_eq!(stop, "end_turn");
}

#[tokio::test]
async fn messages_on_anthropic_deployment_pass_through() {
    let up = recording(Reply::Json(
        200,
        include_str!("../fixtures/anthropic/message_tool_use.json"),
    ))
    .await;
    let mut gw = gateway(&format!(
        "model_list:\n  - model_name: claude\n    litellm_params: {{model: anthropic/claude-upstream, api_base: \"{}\", api_key: sk-ant-up}}\ngeneral_settings: {{master_key: sk-master}}\n",
        up.base()
    ))
    .await;
    let body = r#"{"model":"claude","max_tokens":64,"messages":[{"role":"user","content":"hi"}],"future_field":{"x":1}}"#;
    let a = send(
        "POST",
        &gw.url("/v1/messages"),
        body,
        &[
            ANTHROPIC_KEY,
            ("anthropic-version", "2023-06-01"),
            ("anthropic-beta", "prompt-caching-2024-07-31"),
        ],
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(
        a.body,
        include_str!("../fixtures/anthropic/message_tool_use.json"),
        "answer passed through byte for byte"
    );
    let seen = &up.requests()[0];
    assert_eq!(seen.path_and_query, "/v1/messages");
    assert_eq!(
        seen.body,
        body.replace("\"claude\"", "\"claude-upstream\""),
        "only the model is rewritten"
    );
    assert_eq!(seen.headers["x-api-key"], "sk-ant-up");
    assert_eq!(seen.headers["anthropic-beta"], "prompt-caching-2024-07-31");
    // Usage normalised: input 35 + cache write 20 + cache read 1000.
    let u = gw.next_record().await.usage.unwrap();
    assert_eq!(
        (u.prompt_tokens, u.cached_tokens, u.cache_creation_tokens),
        (1055, 1000, 20)
    );
}

#[tokio::test]
async fn messages_stream_on_anthropic_and_mock_deployments() {
    let (_mock, mut gw) = setup("").await;
    for model in ["claude", "inproc"] {
        let a = messages(
            &gw,
            &format!(
                r#"{{"model":"{model}","max_tokens":100,"stream":true,"messages":[{{"role":"user","content":"hi"}}]}}"#
            ),
        )
        .await;
        assert_eq!(a.status, 200, "{model}: {}", a.text());
        let (blocks, stop, usage, names) = anthropic_events(&a);
        assert!(names.contains(&"ping".to_owned()), "{model}");
        assert_eq!(names.last().map(String::as_str), Some("message_stop"));
        assert!(blocks[0]["text"].as_str().unwrap().starts_with("The mock"));
        assert_eq!(stop, "end_turn");
        let r = gw.next_record().await;
        let u = r.usage.expect("usage from message_start + message_delta");
        assert_eq!(Some(u.prompt_tokens), usage["input_tokens"].as_u64());
        assert_eq!(u.completion_tokens, 16);
    }
}

#[tokio::test]
async fn count_tokens_on_each_kind_of_deployment() {
    let (_mock, gw) = setup("").await;
    let body = |m: &str| {
        format!(
            r#"{{"model":"{m}","messages":[{{"role":"user","content":"{}"}}]}}"#,
            "word ".repeat(100)
        )
    };
    for model in ["claude", "gpt", "inproc"] {
        let a = send(
            "POST",
            &gw.url("/v1/messages/count_tokens"),
            body(model),
            &[ANTHROPIC_KEY],
        )
        .await;
        assert_eq!(a.status, 200, "{model}: {}", a.text());
        let n = a.json()["input_tokens"].as_u64().unwrap();
        assert!((100..=200).contains(&n), "{model}: {n}");
    }
}

#[tokio::test]
async fn gateway_errors_on_messages_are_anthropic_shaped() {
    let (_mock, gw) = setup("").await;
    let a = messages(&gw, r#"{"model":"nope","max_tokens":1,"messages":[]}"#).await;
    assert_eq!(a.status, 404);
    let v = a.json();
    assert_eq!(v["type"], "error");
    assert_eq!(v["error"]["type"], "not_found_error");
    assert!(v["error"]["message"].as_str().unwrap().contains("nope"));
    let a = send("POST", &gw.url("/v1/messages"), "{}", &[]).await;
    assert_eq!(a.status, 401);
    assert_eq!(a.json()["error"]["type"], "authentication_error");
    // An upstream OpenAI-shaped error reaches an Anthropic client in Anthropic's shape.
    let up = recording(Reply::Json(
        401,
        r#"{"error":{"message":"Incorrect API key provided: sk-xx","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}"#,
    ))
    .await;
    let gw = gateway(&format!(
        "model_list:\n  - model_name: gpt\n    litellm_params: {{model: openai/g, api_base: \"{}\", api_key: k}}\nrouter_settings: {{num_retries: 0}}\ngeneral_settings: {{master_key: sk-master}}\n",
        up.base()
    ))
    .await;
    let a = messages(
        &gw,
        r#"{"model":"gpt","max_tokens":5,"messages":[{"role":"user","content":"x"}]}"#,
    )
    .await;
    assert_eq!(a.status, 401);
    let v = a.json();
    assert_eq!(v["error"]["type"], "authentication_error");
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .contains("Incorrect API key"));
    assert_eq!(up.requests()[0].path_and_query, "/v1/chat/completions");
}

#[tokio::test]
async fn openai_pass_through_is_untouched() {
    // Same dialect: the OpenAI body goes out byte for byte but for the model.
    let up = recording(Reply::Json(
        200,
        r#"{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}}"#,
    ))
    .await;
    let gw = gateway(&format!(
        "model_list:\n  - model_name: gpt\n    litellm_params: {{model: openai/g, api_base: \"{}\", api_key: k}}\ngeneral_settings: {{master_key: sk-master}}\n",
        up.base()
    ))
    .await;
    let body = r#"{"model":"gpt","messages":[],"logit_bias":{"1":1},"weird":  [1, 2]}"#;
    let a = post(&gw.url("/v1/chat/completions"), body).await;
    assert_eq!(a.status, 200);
    assert_eq!(up.requests()[0].body, body.replace("\"gpt\"", "\"g\""));
}

#[tokio::test]
async fn a_cut_messages_stream_ends_with_an_anthropic_error_event() {
    let (_mock, gw) = setup("").await;
    let a = send(
        "POST",
        &gw.url("/v1/messages"),
        r#"{"model":"inproc","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"hi"}]}"#,
        &[ANTHROPIC_KEY, ("x-mock-cut-after-chunks", "3")],
    )
    .await;
    assert_eq!(a.status, 200);
    assert!(a.body_error, "the body is aborted, not ended");
    let text = a.text();
    assert!(!text.contains("message_stop"));
    let last: Value = serde_json::from_str(a.sse_data().last().unwrap()).unwrap();
    assert_eq!(last["type"], "error");
    assert_eq!(last["error"]["type"], "api_error");
    assert!(text.contains("event: error\n"));
}
