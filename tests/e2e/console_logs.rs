//! What the request log keeps of a request that did not get an answer, end to end: refusals
//! before a model (a blocked key, a limit, a guardrail) are logged with the key and team that
//! sent them and what the client was told; a request whose deployment failed is logged with
//! its status, error type and message, each attempt's, and no deployment that answered; and
//! the console's pages show keys and teams by name, not hash.
use crate::common::*;
use serde_json::{json, Value};

const MASTER: &str = "sk-master-console-logs";

fn config() -> String {
    format!(
        r#"
model_list:
  - model_name: cheap
    litellm_params:
      model: mock/cheap
  - model_name: broken
    litellm_params:
      model: mock/broken
      mock_status: 503
    model_info:
      id: broken-1
guardrails:
  - guardrail_name: short-prompts
    litellm_params:
      guardrail: prompt_size
      mode: pre_call
      default_on: true
      max_characters: 40
general_settings:
  master_key: {MASTER}
  proxy_batch_write_at: 0.1
router_settings:
  retry_backoff_ms: 1
"#
    )
}

async fn admin(gw: &Gateway, path: &str, body: Value) -> Answer {
    let method = if body.is_null() { "GET" } else { "POST" };
    admin_as(gw, MASTER, method, path, body).await
}

async fn chat(gw: &Gateway, key: &str, model: &str, content: &str, extra: Value) -> Answer {
    let auth = format!("Bearer {key}");
    let mut body = json!({"model": model, "messages": [{"role": "user", "content": content}]});
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        b.extend(e.clone());
    }
    send(
        "POST",
        &gw.url("/v1/chat/completions"),
        body.to_string(),
        &[
            ("content-type", "application/json"),
            ("authorization", auth.as_str()),
        ],
    )
    .await
}

/// The spend log of the request `answer` answered, once the writer's batch has landed.
async fn logged(gw: &Gateway, answer: &Answer) -> Value {
    logged_as(gw, MASTER, answer).await
}

/// Team `t-search` ("Search") and a key `app-one` in it, with `limits`: the key and its hash.
async fn team_and_key(gw: &Gateway, limits: Value) -> (String, String) {
    let team = json!({"team_id": "t-search", "team_alias": "Search"});
    admin(gw, "/team/new", team).await;
    let mut body = json!({"key_alias": "app-one", "team_id": "t-search"});
    if let (Some(b), Some(l)) = (body.as_object_mut(), limits.as_object()) {
        b.extend(l.clone());
    }
    let made = admin(gw, "/key/generate", body).await.json();
    let text = |f: &str| made[f].as_str().unwrap().to_owned();
    (text("key"), text("token"))
}

#[tokio::test]
async fn refusals_before_a_model_are_logged_with_the_caller_and_the_reason() {
    let gw = gateway(&config()).await;
    let (key, hash) = team_and_key(&gw, json!({"rpm_limit": 1})).await;

    // A guardrail's refusal, before the envelope is read.
    let long = "a prompt far longer than the forty characters the guardrail allows";
    let guarded = chat(&gw, &key, "cheap", long, Value::Null).await;
    assert_eq!(guarded.status, 400, "{}", guarded.text());
    // A limit's.
    assert_eq!(
        chat(&gw, &key, "cheap", "hi", Value::Null).await.status,
        200
    );
    let limited = chat(&gw, &key, "cheap", "hi", Value::Null).await;
    assert_eq!(limited.status, 429, "{}", limited.text());
    // A blocked key's.
    admin(&gw, "/key/block", json!({"key": key})).await;
    let blocked = poll(
        PATIENCE,
        || chat(&gw, &key, "cheap", "hi", Value::Null),
        |a| a.status == 401,
    )
    .await;
    assert_eq!(blocked.status, 401, "{}", blocked.text());

    for (answer, status, code, kind) in [
        (&guarded, 400, "guardrail", "invalid_request_error"),
        (&limited, 429, "rpm_limit_exceeded", "rate_limit_error"),
        (&blocked, 401, "key_blocked", "authentication_error"),
    ] {
        let row = logged(&gw, answer).await;
        assert_eq!(row["status"], "failure", "{row}");
        assert_eq!(row["api_key"], hash.as_str(), "the key that sent it: {row}");
        assert_eq!(row["team_id"], "t-search", "its team: {row}");
        assert_eq!(row["model_group"], "cheap", "the group it asked for: {row}");
        assert_eq!(row["http_status"], status, "{row}");
        assert!(
            row["error"]
                .as_str()
                .unwrap()
                .starts_with(&format!("{status} {code}")),
            "{row}"
        );
        assert_eq!(row["error_type"], kind, "{row}");
        let message = answer.json()["error"]["message"].clone();
        assert_eq!(row["error_message"], message, "as the client got it: {row}");
        assert!(row["model_id"].is_null(), "no deployment was called: {row}");
        assert!(!row.to_string().contains(&key), "never the key's plaintext");
    }

    // An unknown key names no caller: it is counted (the overview's "refused before a model"),
    // not logged, so that a flood of made-up keys cannot fill the log.
    let unknown = chat(&gw, "sk-made-up", "cheap", "hi", Value::Null).await;
    assert_eq!(unknown.status, 401);
    let id = unknown.header("x-request-id").unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    let rows = admin(&gw, &format!("/spend/logs?request_id={id}"), Value::Null).await;
    assert_eq!(rows.json(), json!([]), "{}", rows.text());
}

#[tokio::test]
async fn a_failed_requests_detail_explains_it_by_name() {
    let gw = gateway(&config()).await;
    let (key, _) = team_and_key(&gw, Value::Null).await;
    let last_four = &key[key.len() - 4..];
    let failed = chat(&gw, &key, "broken", "hi", json!({"num_retries": 1})).await;
    assert_eq!(failed.status, 503, "{}", failed.text());
    let row = logged(&gw, &failed).await;
    assert_eq!(row["error_type"], "server_error", "{row}");
    let message = failed.json()["error"]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(row["error_message"], message.as_str(), "{row}");
    let attempts = row["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 2, "{row}");
    for a in attempts {
        assert_eq!(a["model_id"], "broken-1");
        assert_eq!(a["status"], 503, "{row}");
        assert_eq!(a["message"], message.as_str(), "{row}");
    }

    let mut b = Browser::default();
    assert_eq!(b.sign_in(&gw, "admin", MASTER).await.status, 303);
    let html = b
        .get(
            &gw,
            &format!("/ui/logs/detail?id={}", row["id"].as_str().unwrap()),
        )
        .await
        .text();
    assert!(html.contains(r#"id="http-status">503<"#), "{html}");
    assert!(html.contains(r#"id="served">none<"#), "{html}");
    assert!(html.contains(r#"id="deployment">none<"#), "{html}");
    assert!(html.contains(r#"id="error-type">server_error<"#), "{html}");
    let shown = html
        .split(r#"id="error-message">"#)
        .nth(1)
        .unwrap_or_default();
    assert!(shown.starts_with(&message), "{html}");
    // Each attempt's status and message.
    let table = &html[html.find(r#"id="attempts""#).unwrap()..];
    assert_eq!(table.matches(&message).count(), 2, "{table}");
    // The key by its alias and last four, the team by its alias, each linked.
    let name = format!("app-one (sk-...{last_four})");
    assert!(html.contains(&name), "{html}");
    assert!(
        html.contains(r#"href="/ui/teams/edit?team_id=t-search""#) && html.contains(">Search<")
    );
    // The list too, with the failure's status.
    let list = b.get(&gw, "/ui/logs?status=failure").await.text();
    assert!(list.contains(&name) && list.contains(">Search<"), "{list}");
    assert!(list.contains("503"), "{list}");
    assert!(!list.contains(&key), "never the key's plaintext");
}
