//! Active health checks end to end: a dead deployment found by a probe is skipped by routing
//! and listed unhealthy in `/health`; a probe is the free model list where the provider has
//! one; a request probe's cost is in the spend log and stops at the day's cap; two instances
//! on one Redis probe once per round between them.
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::*;

const MASTER: &str = "sk-master-probes";

/// A chat completion with usage; also a model list's 2xx, which is all a probe reads of it.
const ANSWER: &str = r#"{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"pong"},"finish_reason":"stop"}],"usage":{"prompt_tokens":8,"completion_tokens":2,"total_tokens":10}}"#;

async fn health(gw: &Gateway) -> Value {
    let auth = format!("Bearer {MASTER}");
    let a = send("GET", &gw.url("/health"), "", &[("authorization", &auth)]).await;
    assert_eq!(a.status, 200, "{}", a.text());
    a.json()
}

/// `/health` once `done` holds of it, or the last one read after `within`.
async fn health_when(gw: &Gateway, within: Duration, done: impl Fn(&Value) -> bool) -> Value {
    poll(within, || health(gw), done).await
}

fn verdict<'a>(h: &'a Value, id: &str) -> Option<&'a Value> {
    h["deployments"]
        .as_array()?
        .iter()
        .find(|d| d["model_id"] == id)?
        .get("last_check")
}

fn deployment<'a>(h: &'a Value, id: &str) -> &'a Value {
    h["deployments"]
        .as_array()
        .and_then(|a| a.iter().find(|d| d["model_id"] == id))
        .unwrap_or(&Value::Null)
}

fn model_lists(up: &Recording) -> usize {
    up.requests()
        .iter()
        .filter(|r| r.path_and_query.ends_with("/models"))
        .count()
}

#[tokio::test]
async fn a_dead_deployment_found_by_a_probe_is_skipped_and_listed_unhealthy() {
    let up = recording(Reply::Json(200, ANSWER)).await;
    let base = up.base();
    let gw = gateway(&format!(
        "model_list:\n\
         \x20 - model_name: m\n    litellm_params:\n      model: openai/up-model\n      \
         api_base: {base}\n      api_key: k1\n    model_info:\n      id: alive\n\
         \x20 - model_name: m\n    litellm_params:\n      model: openai/down-model\n      \
         api_base: http://127.0.0.1:9/v1\n      api_key: k2\n    model_info:\n      id: dead\n\
         general_settings:\n  master_key: {MASTER}\n  background_health_checks: true\n  \
         health_check_interval: 1\n"
    ))
    .await;
    let h = health_when(&gw, PATIENCE, |h| {
        verdict(h, "dead").is_some() && verdict(h, "alive").is_some()
    })
    .await;
    assert!(verdict(&h, "dead").is_some(), "a round within 10 s: {h:#}");
    let alive = verdict(&h, "alive").unwrap();
    assert_eq!(alive["healthy"], true, "{alive}");
    assert_eq!(
        alive["probe"], "model_list",
        "free where the provider lists models"
    );
    assert_eq!(alive["cost"], 0.0);
    let dead = verdict(&h, "dead").unwrap();
    assert_eq!(dead["healthy"], false, "{dead}");
    assert_eq!(dead["kind"], "connection", "{dead}");
    assert_eq!(deployment(&h, "dead")["state"], "cooling_down", "{h:#}");
    assert_eq!(h["unhealthy_endpoints"][0]["model_id"], "dead", "{h:#}");
    assert_eq!(h["healthy_endpoints"][0]["model_id"], "alive", "{h:#}");
    assert_eq!(h["background_health_checks"]["checked_by"], "local");
    // The probe went out with the deployment's key, and bought nothing.
    let listed = up
        .requests()
        .into_iter()
        .find(|r| r.path_and_query.ends_with("/models"))
        .expect("a model list call");
    assert_eq!(listed.headers["authorization"], "Bearer k1");
    assert!(up
        .requests()
        .iter()
        .all(|r| !r.path_and_query.contains("/chat/completions")));

    // Traffic goes to the live deployment without trying the dead one first.
    for _ in 0..8 {
        let a = chat_as(&gw, MASTER, "m", "", &[]).await;
        assert_eq!(a.status, 200, "{}", a.text());
        assert_eq!(a.header("x-litellm-model-id"), Some("alive"));
    }
    let h = health(&gw).await;
    assert_eq!(deployment(&h, "dead")["failures"], 0, "never tried: {h:#}");
}

#[tokio::test]
async fn a_request_probe_is_priced_recorded_and_capped() {
    let up = recording(Reply::Json(200, ANSWER)).await;
    let base = up.base();
    // `health_check_max_tokens` asks for a real request; one costs 8 × 1e-4 + 2 × 2e-4 = 0.0012
    // USD, over the day's cap of 0.001: the next rounds send none.
    let gw = gateway(&format!(
        "model_list:\n\
         \x20 - model_name: paid\n    litellm_params:\n      model: openai/paid-model\n      \
         api_base: {base}\n      api_key: k1\n      input_cost_per_token: 0.0001\n      \
         output_cost_per_token: 0.0002\n    model_info:\n      id: paid-1\n      \
         health_check_max_tokens: 5\n\
         general_settings:\n  master_key: {MASTER}\n  proxy_batch_write_at: 0.2\n  \
         background_health_checks: true\n  health_check_interval: 1\n  \
         health_check_max_spend_per_day: 0.001\n"
    ))
    .await;
    let h = health_when(&gw, PATIENCE, |h| {
        verdict(h, "paid-1").is_some_and(|v| v["probe"] == "skipped")
    })
    .await;
    assert!(
        verdict(&h, "paid-1").is_some_and(|v| v["probe"] == "skipped"),
        "a later round skips the paid probe: {h:#}"
    );
    let why = verdict(&h, "paid-1").unwrap()["error"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(why.contains("health_check_max_spend_per_day"), "{why}");
    let spent = h["background_health_checks"]["probe_spend_today_usd"]
        .as_f64()
        .unwrap();
    assert!((spent - 0.0012).abs() < 1e-9, "one probe's cost: {spent}");
    // One request went out, with the token limit asked for.
    let sent: Vec<_> = up
        .requests()
        .into_iter()
        .filter(|r| r.path_and_query.ends_with("/chat/completions"))
        .collect();
    assert_eq!(sent.len(), 1, "capped after one probe");
    let body: Value = serde_json::from_slice(&sent[0].body).unwrap();
    assert_eq!(body["max_tokens"], 5, "{body}");
    assert_eq!(body["model"], "paid-model", "{body}");
    // Its spend is in the spend log, tagged.
    let logs = spend_logs(&gw, MASTER, 1).await;
    assert!(
        logs.as_array().is_some_and(|l| !l.is_empty()),
        "the probe's spend line"
    );
    let line = &logs[0];
    assert_eq!(line["request_tags"][0], "health_check", "{line}");
    assert_eq!(line["model_id"], "paid-1", "{line}");
    assert!(
        (line["spend"].as_f64().unwrap() - 0.0012).abs() < 1e-9,
        "{line}"
    );
}

/// OpenAI's reasoning models refuse `max_tokens`: their probe asks with
/// `max_completion_tokens`, by the same request rules as a client's request.
#[tokio::test]
async fn a_reasoning_models_probe_asks_with_max_completion_tokens() {
    let up = recording(Reply::Json(200, ANSWER)).await;
    let base = up.base();
    let gw = gateway(&format!(
        "model_list:\n\
         \x20 - model_name: thinker\n    litellm_params:\n      model: openai/o3\n      \
         api_base: {base}\n      api_key: k1\n    model_info:\n      id: o3-1\n      \
         health_check_max_tokens: 64\n\
         general_settings:\n  master_key: {MASTER}\n  background_health_checks: true\n  \
         health_check_interval: 1\n"
    ))
    .await;
    let h = health_when(&gw, PATIENCE, |h| verdict(h, "o3-1").is_some()).await;
    assert_eq!(
        verdict(&h, "o3-1").map(|v| &v["healthy"]),
        Some(&Value::Bool(true)),
        "{h:#}"
    );
    let sent = up
        .requests()
        .into_iter()
        .find(|r| r.path_and_query.ends_with("/chat/completions"))
        .expect("a request probe");
    let body: Value = serde_json::from_slice(&sent.body).unwrap();
    assert_eq!(body["max_completion_tokens"], 64, "{body}");
    assert!(body.get("max_tokens").is_none(), "{body}");
}

/// Two instances on one Redis: one probes each round, both serve its verdicts.
#[tokio::test]
async fn two_instances_probe_once_per_round() {
    let Some(redis) = redis_server() else {
        return;
    };
    let up = recording(Reply::Json(200, ANSWER)).await;
    let base = up.base();
    let (_, redis_lines) = store_and_redis(None, Some(&redis));
    let cfg = format!(
        "model_list:\n\
         \x20 - model_name: m\n    litellm_params:\n      model: openai/shared-model\n      \
         api_base: {base}\n      api_key: k1\n    model_info:\n      id: shared-1\n\
         general_settings:\n  master_key: {MASTER}\n  background_health_checks: true\n  \
         health_check_interval: 1\n{redis_lines}"
    );
    let a = gateway(&cfg).await;
    let b = gateway(&cfg).await;
    on_redis(&[&a, &b]).await;
    let start = Instant::now();
    let before = model_lists(&up);
    // Four rounds, however long a loaded machine takes to make them; then how long they took.
    let ran = eventually(PATIENCE, || async { model_lists(&up) - before >= 4 }).await;
    let rounds = model_lists(&up) - before;
    let elapsed = start.elapsed().as_secs_f64();
    assert!(ran, "{rounds} model list calls in {elapsed:.1} s");
    // One prober: a round a second (and one more at a boundary). Two probing alone would
    // make twice as many: four rounds in about two seconds.
    assert!(
        (rounds as f64) <= elapsed + 1.5,
        "{rounds} model list calls in {elapsed:.1} s"
    );
    // Both serve the same round.
    let same = eventually(PATIENCE, || async {
        let (ha, hb) = (health(&a).await, health(&b).await);
        let (ca, cb) = (
            &ha["background_health_checks"],
            &hb["background_health_checks"],
        );
        ca["checked_by"].is_string()
            && ca["checked_by"] != "local"
            && ca["checked_by"] == cb["checked_by"]
            && verdict(&hb, "shared-1").is_some_and(|v| v["healthy"] == true)
    })
    .await;
    assert!(same, "both instances show the fleet's round");
}
