//! What LiteLLM users set in `config.yaml` and sluice honours, end to end: `model_group_alias`
//! (a request by the alias reaches its group, under the caller's model access; `/v1/models`
//! lists the aliases not hidden), and a deployment's own `num_retries` and `timeout`.

use std::time::{Duration, Instant};

use sluice_mock::{Faults, MockSettings};

use crate::common::*;

fn chat(model: &str) -> String {
    format!(r#"{{"model":"{model}","messages":[{{"role":"user","content":"hi"}}]}}"#)
}

async fn call(gw: &Gateway, key: &str, body: &str) -> Answer {
    let auth = format!("Bearer {key}");
    send(
        "POST",
        &gw.url("/v1/chat/completions"),
        body.to_owned(),
        &[
            ("authorization", auth.as_str()),
            ("content-type", "application/json"),
        ],
    )
    .await
}

async fn listed(gw: &Gateway, key: &str) -> Vec<String> {
    let auth = format!("Bearer {key}");
    let a = send(
        "GET",
        &gw.url("/v1/models"),
        "",
        &[("authorization", &auth)],
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    a.json()["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_owned())
        .collect()
}

const ALIASES: &str = r#"
model_list:
  - model_name: big
    litellm_params: {model: mock/big}
    model_info: {id: big-1}
  - model_name: small
    litellm_params: {model: mock/small}
    model_info: {id: small-1}
router_settings:
  model_group_alias: {"gpt-4": "big"}
litellm_settings:
  model_group_alias: {"quiet": {"model": "small", "hidden": true}}
general_settings:
  master_key: sk-master
"#;

#[tokio::test]
async fn an_alias_reaches_its_group_under_the_callers_model_access() {
    let gw = gateway(ALIASES).await;
    let a = call(&gw, "sk-master", &chat("gpt-4")).await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(a.header("x-sluice-model-id"), Some("big-1"));
    let a = call(&gw, "sk-master", &chat("quiet")).await;
    assert_eq!(a.status, 200, "a hidden alias is served: {}", a.text());
    assert_eq!(a.header("x-sluice-model-id"), Some("small-1"));

    // Listed: the groups, then the aliases not hidden.
    assert_eq!(listed(&gw, "sk-master").await, ["big", "small", "gpt-4"]);
    let one = send(
        "GET",
        &gw.url("/v1/models/gpt-4"),
        "",
        &[("authorization", "Bearer sk-master")],
    )
    .await;
    assert_eq!(one.status, 200, "{}", one.text());
    assert_eq!(one.json()["id"], "gpt-4");

    // A key allowed the group calls it by its alias; one allowed only the alias calls the
    // alias and not the group by name; one allowed neither calls neither.
    let group_key = new_key(&gw, serde_json::json!({"models": ["big"]})).await;
    let a = call(&gw, &group_key, &chat("gpt-4")).await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(a.header("x-sluice-model-id"), Some("big-1"));
    assert_eq!(listed(&gw, &group_key).await, ["big", "gpt-4"]);

    let alias_key = new_key(&gw, serde_json::json!({"models": ["gpt-4"]})).await;
    let a = call(&gw, &alias_key, &chat("gpt-4")).await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(a.header("x-sluice-model-id"), Some("big-1"));
    assert_eq!(listed(&gw, &alias_key).await, ["gpt-4"]);
    let a = call(&gw, &alias_key, &chat("big")).await;
    assert_eq!(a.status, 401, "{}", a.text());

    let other_key = new_key(&gw, serde_json::json!({"models": ["small"]})).await;
    let a = call(&gw, &other_key, &chat("gpt-4")).await;
    assert_eq!(a.status, 401, "{}", a.text());
}

fn upstream(group: &str, base: &str, extra: &str) -> String {
    format!(
        "  - model_name: {group}\n    litellm_params:\n      model: openai/up\n      api_base: {base}\n      api_key: sk-up\n{extra}    model_info:\n      id: {group}-1\n"
    )
}

#[tokio::test]
async fn a_deployments_own_num_retries_replaces_the_routers() {
    let failing = MockSettings {
        faults: Faults {
            status: Some(503),
            ..Faults::default()
        },
        ..MockSettings::default()
    };
    let own = mock_server(failing.clone()).await;
    let router = mock_server(failing).await;
    let gw = gateway(&format!(
        "model_list:\n{}{}router_settings:\n  num_retries: 3\n  allowed_fails: 100\n  retry_backoff_ms: 1\ngeneral_settings:\n  master_key: sk-master\n",
        upstream("own", &own.base(), "      num_retries: 1\n"),
        upstream("router", &router.base(), ""),
    ))
    .await;
    let a = call(&gw, "sk-master", &chat("own")).await;
    assert_eq!(a.status, 503, "{}", a.text());
    assert_eq!(
        own.requests().await,
        2,
        "1 attempt + the deployment's 1 retry"
    );
    let a = call(&gw, "sk-master", &chat("router")).await;
    assert_eq!(a.status, 503, "{}", a.text());
    assert_eq!(
        router.requests().await,
        4,
        "1 attempt + the router's 3 retries"
    );
    // The request's own num_retries still wins.
    let body = r#"{"model":"own","num_retries":0,"messages":[{"role":"user","content":"hi"}]}"#;
    let a = call(&gw, "sk-master", body).await;
    assert_eq!(a.status, 503, "{}", a.text());
    assert_eq!(own.requests().await, 3);
}

#[tokio::test]
async fn a_deployments_own_timeout_replaces_the_routers() {
    // `hasty` (0.1 s timeout) gives up long before its upstream would answer: timed out
    // before that answer is an ordering, not a race with the clock.
    let never_in_time = Duration::from_secs(10);
    let very_slow = mock_server(MockSettings {
        latency: never_in_time,
        ..MockSettings::default()
    })
    .await;
    let slow = mock_server(MockSettings {
        latency: Duration::from_millis(800),
        ..MockSettings::default()
    })
    .await;
    let gw = gateway(&format!(
        "model_list:\n{}{}router_settings:\n  num_retries: 0\n  timeout: 30\ngeneral_settings:\n  master_key: sk-master\n",
        upstream("hasty", &very_slow.base(), "      timeout: 0.1\n"),
        upstream("patient", &slow.base(), ""),
    ))
    .await;
    let started = Instant::now();
    let a = call(&gw, "sk-master", &chat("hasty")).await;
    assert_eq!(a.status, 504, "{}", a.text());
    assert!(started.elapsed() < never_in_time, "{:?}", started.elapsed());
    let a = call(&gw, "sk-master", &chat("patient")).await;
    assert_eq!(a.status, 200, "{}", a.text());
}
