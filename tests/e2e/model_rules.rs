//! Requests fitted to today's models through the real server: each deployment's rules come
//! from the built-in registry (LiteLLM's price and capability map) and sluice's rule table, and
//! the upstream (a recording server) sees what the provider's API takes — on the pass-through
//! path (same dialect, the client's buffer spliced) and the translated one.
use crate::common::*;
use serde_json::{json, Value};

const ANTHROPIC_ANSWER: &str = include_str!("../fixtures/anthropic/message_tool_use.json");
const OPENAI_ANSWER: &str = r#"{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}"#;

async fn gateway_on(upstream: &Recording, deployments: &[(&str, &str)]) -> Gateway {
    let mut yaml = String::from("model_list:\n");
    for (name, model) in deployments {
        let base = if model.starts_with("anthropic/") {
            upstream.base().trim_end_matches("/v1").to_owned()
        } else {
            upstream.base()
        };
        yaml.push_str(&format!(
            "  - model_name: {name}\n    litellm_params: {{model: {model}, api_base: \"{base}\", api_key: k}}\n"
        ));
    }
    yaml.push_str("router_settings: {num_retries: 0}\ngeneral_settings: {master_key: sk-master}\n");
    gateway(&yaml).await
}

fn sent(up: &Recording) -> Value {
    let seen = up.requests();
    serde_json::from_slice(&seen.last().expect("a request upstream").body).unwrap()
}

async fn chat(gw: &Gateway, body: Value) -> Answer {
    send(
        "POST",
        &gw.url("/v1/chat/completions"),
        body.to_string(),
        &[MASTER, ("content-type", "application/json")],
    )
    .await
}

async fn messages(gw: &Gateway, body: Value) -> Answer {
    send(
        "POST",
        &gw.url("/v1/messages"),
        body.to_string(),
        &[
            ("x-api-key", "sk-master"),
            ("anthropic-version", "2023-06-01"),
            ("content-type", "application/json"),
        ],
    )
    .await
}

#[tokio::test]
async fn an_openai_reasoning_model_gets_max_completion_tokens_and_no_temperature() {
    let up = recording(Reply::Json(200, OPENAI_ANSWER)).await;
    let gw = gateway_on(&up, &[("o3", "openai/o3"), ("gpt-4o", "openai/gpt-4o")]).await;
    let body = json!({"model": "o3", "max_tokens": 50, "temperature": 0.2,
        "messages": [{"role": "user", "content": "hi"}]});
    let a = chat(&gw, body).await;
    assert_eq!(a.status, 200, "{}", a.text());
    let v = sent(&up);
    assert_eq!(v["max_completion_tokens"], 50, "{v}");
    assert!(
        v.get("max_tokens").is_none() && v.get("temperature").is_none(),
        "{v}"
    );
    assert_eq!(a.headers["x-sluice-dropped-params"], "temperature");

    // A model without the rule is sent what the client wrote.
    let body = json!({"model": "gpt-4o", "max_tokens": 50, "temperature": 0.2,
        "messages": [{"role": "user", "content": "hi"}]});
    assert_eq!(chat(&gw, body).await.status, 200);
    let v = sent(&up);
    assert_eq!(
        (v["max_tokens"].clone(), v["temperature"].clone()),
        (json!(50), json!(0.2))
    );
}

#[tokio::test]
async fn claude_code_on_an_openai_reasoning_model_sends_max_completion_tokens() {
    let up = recording(Reply::Json(200, OPENAI_ANSWER)).await;
    let gw = gateway_on(&up, &[("o3", "openai/o3")]).await;
    let a = messages(
        &gw,
        json!({"model": "o3", "max_tokens": 32000, "temperature": 1,
            "thinking": {"type": "adaptive"}, "output_config": {"effort": "xhigh"},
            "metadata": {"user_id": "x".repeat(150)},
            "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let v = sent(&up);
    assert_eq!(v["max_completion_tokens"], 32000, "{v}");
    assert!(
        v.get("max_tokens").is_none() && v.get("temperature").is_none(),
        "{v}"
    );
    // o3 knows low, medium and high: xhigh becomes the nearest below.
    assert_eq!(v["reasoning_effort"], "high");
    let user = v["user"].as_str().unwrap();
    assert!(
        user.len() <= 64,
        "a 150-character id is hashed to fit: {user}"
    );
}

#[tokio::test]
async fn claude_opus_4_7_gets_adaptive_thinking_from_either_dialect() {
    let up = recording(Reply::Json(200, ANTHROPIC_ANSWER)).await;
    let gw = gateway_on(&up, &[("opus", "anthropic/claude-opus-4-7")]).await;

    // Anthropic client, the old shape: rewritten in the client's buffer.
    let a = messages(
        &gw,
        json!({"model": "opus", "max_tokens": 9000, "temperature": 0.5, "top_k": 3,
            "thinking": {"type": "enabled", "budget_tokens": 4096},
            "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let v = sent(&up);
    assert_eq!(v["thinking"], json!({"type": "adaptive"}), "{v}");
    assert_eq!(v["output_config"], json!({"effort": "high"}));
    assert!(
        v.get("temperature").is_none() && v.get("top_k").is_none(),
        "{v}"
    );
    assert_eq!(
        a.headers["x-sluice-dropped-params"],
        "temperature,top_k,thinking"
    );

    // OpenAI client: reasoning_effort becomes adaptive thinking and its effort.
    let a = chat(
        &gw,
        json!({"model": "opus", "reasoning_effort": "xhigh", "temperature": 0.3, "top_p": 0.9,
            "user": "jane.doe@example.com",
            "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let v = sent(&up);
    assert_eq!(v["thinking"], json!({"type": "adaptive"}), "{v}");
    assert_eq!(v["output_config"], json!({"effort": "xhigh"}));
    assert!(
        v.get("temperature").is_none() && v.get("top_p").is_none(),
        "{v}"
    );
    let user = v["metadata"]["user_id"].as_str().unwrap();
    assert!(
        !user.contains('@'),
        "an e-mail is never sent to Anthropic: {user}"
    );
}

#[tokio::test]
async fn an_older_claude_gets_a_budget_and_no_sampling_parameters() {
    let up = recording(Reply::Json(200, ANTHROPIC_ANSWER)).await;
    let gw = gateway_on(&up, &[("haiku", "anthropic/claude-haiku-4-5")]).await;
    // Claude Code's adaptive shape to a model before 4.6.
    let a = messages(
        &gw,
        json!({"model": "haiku", "max_tokens": 9000, "temperature": 0.5, "top_p": 0.9,
            "thinking": {"type": "adaptive"}, "output_config": {"effort": "medium"},
            "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let v = sent(&up);
    assert_eq!(
        v["thinking"],
        json!({"type": "enabled", "budget_tokens": 2048}),
        "{v}"
    );
    assert!(v.get("output_config").is_none(), "{v}");
    // The Messages API's types have no sampling parameters.
    assert!(
        v.get("temperature").is_none() && v.get("top_p").is_none(),
        "{v}"
    );

    // A raw client without max_tokens: Anthropic requires it.
    let a = messages(
        &gw,
        json!({"model": "haiku", "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(sent(&up)["max_tokens"], 4096);
}

#[tokio::test]
async fn a_404_for_count_tokens_does_not_cool_the_deployment_for_messages() {
    let base = serve_loopback(|req: hyper::Request<sluice_net::server::RequestBody>| async move {
        let mut resp = if req.uri().path().ends_with("/count_tokens") {
            let mut r = hyper::Response::new(http_body_util::Full::new(bytes::Bytes::from_static(
                br#"{"type":"error","error":{"type":"not_found_error","message":"Not found"}}"#,
            )));
            *r.status_mut() = hyper::StatusCode::NOT_FOUND;
            r
        } else {
            hyper::Response::new(http_body_util::Full::new(bytes::Bytes::from_static(
                ANTHROPIC_ANSWER.as_bytes(),
            )))
        };
        resp.headers_mut()
            .insert("content-type", "application/json".parse().unwrap());
        resp
    })
    .await;
    let gw = gateway(&format!(
        "model_list:\n  - model_name: claude\n    litellm_params: {{model: anthropic/claude-haiku-4-5, api_base: \"{base}\", api_key: k}}\nrouter_settings: {{num_retries: 0, allowed_fails: 0}}\ngeneral_settings: {{master_key: sk-master}}\n"
    ))
    .await;
    let count = send(
        "POST",
        &gw.url("/v1/messages/count_tokens"),
        json!({"model": "claude", "messages": [{"role": "user", "content": "hi"}]}).to_string(),
        &[
            ("x-api-key", "sk-master"),
            ("anthropic-version", "2023-06-01"),
        ],
    )
    .await;
    assert_eq!(count.status, 404, "{}", count.text());
    for _ in 0..3 {
        let a = messages(
            &gw,
            json!({"model": "claude", "max_tokens": 9,
                "messages": [{"role": "user", "content": "hi"}]}),
        )
        .await;
        assert_eq!(
            a.status,
            200,
            "Messages still reach the deployment: {}",
            a.text()
        );
    }
}

#[tokio::test]
async fn a_wildcard_deployment_looks_up_the_rules_of_the_model_asked_for() {
    let up = recording(Reply::Json(200, ANTHROPIC_ANSWER)).await;
    let base = up.base().trim_end_matches("/v1").to_owned();
    let gw = gateway(&format!(
        "model_list:\n  - model_name: \"anthropic/*\"\n    litellm_params: {{model: \"anthropic/*\", api_base: \"{base}\", api_key: k}}\nrouter_settings: {{num_retries: 0}}\ngeneral_settings: {{master_key: sk-master}}\n"
    ))
    .await;
    for (model, thinking) in [
        ("anthropic/claude-opus-4-7", json!({"type": "adaptive"})),
        (
            "anthropic/claude-haiku-4-5",
            json!({"type": "enabled", "budget_tokens": 4096}),
        ),
    ] {
        let a = chat(
            &gw,
            json!({"model": model, "reasoning_effort": "high",
                "messages": [{"role": "user", "content": "hi"}]}),
        )
        .await;
        assert_eq!(a.status, 200, "{model}: {}", a.text());
        let v = sent(&up);
        assert_eq!(v["thinking"], thinking, "{model}: {v}");
    }
}
