//! Tenancy, as an outside caller holding one ordinary virtual key would try it (issue 38):
//! keys made through the management API, each hole tried through the real server. A key may
//! not reach a model group through a fallback, its user's `models` bind it, a wildcard
//! deployment is judged by the model asked for, access groups grant their groups, a fresh
//! key's burst stays within its budget, and a deployment added at run time may not point back
//! at the gateway's machine.

use std::time::Duration;

use crate::common::*;
use serde_json::json;
use sluice_mock::{Faults, MockSettings};

const CHAT: &str = r#"{"model":"cheap","messages":[{"role":"user","content":"hi"}]"#;

fn deployment(group: &str, id: &str, base: &str, extra: &str) -> String {
    format!(
        "  - model_name: \"{group}\"\n    litellm_params:\n      model: openai/up\n      api_base: {base}\n      api_key: sk-up\n{extra}    model_info:\n      id: {id}\n"
    )
}

fn config(deployments: &[String], router: &str) -> String {
    format!(
        "model_list:\n{}general_settings:\n  master_key: sk-master\nrouter_settings:\n  retry_backoff_ms: 1\n  num_retries: 0\n{router}",
        deployments.concat()
    )
}

fn failing() -> MockSettings {
    MockSettings {
        faults: Faults {
            status: Some(500),
            ..Faults::default()
        },
        ..MockSettings::default()
    }
}

async fn chat_as(gw: &Gateway, key: &str, body: &str) -> Answer {
    let auth = format!("Bearer {key}");
    send(
        "POST",
        &gw.url("/v1/chat/completions"),
        body.to_owned(),
        &[
            ("content-type", "application/json"),
            ("authorization", &auth),
        ],
    )
    .await
}

fn error_code(a: &Answer) -> String {
    a.json()["error"]["code"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn a_fallback_the_key_may_not_use_is_skipped_and_named() {
    let cheap = mock_server(failing()).await;
    let expensive = mock_server(MockSettings::default()).await;
    let gw = gateway(&config(
        &[
            deployment("cheap", "cheap-1", &cheap.base(), ""),
            deployment("expensive", "expensive-1", &expensive.base(), ""),
        ],
        "",
    ))
    .await;
    let only_cheap = new_key(&gw, json!({"models": ["cheap"]})).await;
    // The request's own fallbacks.
    let body = format!(r#"{CHAT},"fallbacks":["expensive"]}}"#);
    let a = chat_as(&gw, &only_cheap, &body).await;
    assert_eq!(a.status, 500, "cheap's own failure, not expensive's answer");
    assert_eq!(a.header("x-sluice-fallbacks-refused"), Some("expensive"));
    assert_eq!(a.header("x-sluice-attempted-fallbacks"), Some("0"));
    assert_eq!(expensive.requests().await, 0, "expensive never called");
    // A key allowed both is served by the fallback.
    let both = new_key(&gw, json!({"models": ["cheap", "expensive"]})).await;
    let a = chat_as(&gw, &both, &body).await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(a.header("x-sluice-model-id"), Some("expensive-1"));
    assert_eq!(a.header("x-sluice-fallbacks-refused"), None);

    // The config's fallbacks are held to the same rule.
    let gw = gateway(&config(
        &[
            deployment("cheap", "cheap-1", &cheap.base(), ""),
            deployment("expensive", "expensive-1", &expensive.base(), ""),
        ],
        "  fallbacks:\n    - cheap: [expensive]\n",
    ))
    .await;
    let only_cheap = new_key(&gw, json!({"models": ["cheap"]})).await;
    let served_before = expensive.requests().await;
    let a = chat_as(&gw, &only_cheap, &format!("{CHAT}}}")).await;
    assert_eq!(a.status, 500);
    assert_eq!(a.header("x-sluice-fallbacks-refused"), Some("expensive"));
    assert_eq!(expensive.requests().await, served_before);
    // A team that does not allow the fallback refuses it too, whatever the key says.
    let team = admin_as(
        &gw,
        "sk-master",
        "POST",
        "/team/new",
        json!({"team_id": "t-cheap", "models": ["cheap"]}),
    )
    .await;
    assert_eq!(team.status, 200, "{}", team.text());
    let team_key = new_key(&gw, json!({"team_id": "t-cheap"})).await;
    let a = chat_as(&gw, &team_key, &format!("{CHAT}}}")).await;
    assert_eq!(a.header("x-sluice-fallbacks-refused"), Some("expensive"));
    assert_eq!(expensive.requests().await, served_before);
}

#[tokio::test]
async fn a_users_models_bind_the_users_keys() {
    let up = mock_server(MockSettings::default()).await;
    let gw = gateway(&config(
        &[
            deployment("cheap", "cheap-1", &up.base(), ""),
            deployment("expensive", "expensive-1", &up.base(), ""),
        ],
        "",
    ))
    .await;
    let user = admin_as(
        &gw,
        "sk-master",
        "POST",
        "/user/new",
        json!({"user_id": "u-cheap", "models": ["cheap"]}),
    )
    .await;
    assert_eq!(user.status, 200, "{}", user.text());
    let key = new_key(&gw, json!({"user_id": "u-cheap"})).await;
    let a = chat_as(&gw, &key, &format!("{CHAT}}}")).await;
    assert_eq!(a.status, 200, "{}", a.text());
    let a = chat_as(
        &gw,
        &key,
        r#"{"model":"expensive","messages":[{"role":"user","content":"hi"}]}"#,
    )
    .await;
    assert_eq!(a.status, 401, "{}", a.text());
    assert_eq!(error_code(&a), "model_not_allowed", "{}", a.text());
    assert!(a.text().contains("user"), "names who refuses: {}", a.text());
}

#[tokio::test]
async fn a_wildcard_deployment_is_judged_by_the_model_asked_for() {
    let up = mock_server(MockSettings::default()).await;
    let gw = gateway(&config(&[deployment("*", "star", &up.base(), "")], "")).await;
    let key = new_key(&gw, json!({"models": ["gpt-allowed"]})).await;
    let ask =
        |m: &str| format!(r#"{{"model":"{m}","messages":[{{"role":"user","content":"hi"}}]}}"#);
    let a = chat_as(&gw, &key, &ask("gpt-allowed")).await;
    assert_eq!(a.status, 200, "{}", a.text());
    let a = chat_as(&gw, &key, &ask("gpt-other")).await;
    assert_eq!(a.status, 401, "{}", a.text());
    // A prefix pattern in the key's list matches the name asked for, not the group's pattern.
    let prefixed = new_key(&gw, json!({"models": ["gpt-*"]})).await;
    assert_eq!(chat_as(&gw, &prefixed, &ask("gpt-other")).await.status, 200);
    assert_eq!(chat_as(&gw, &prefixed, &ask("claude-x")).await.status, 401);
}

#[tokio::test]
async fn access_groups_grant_the_groups_in_them() {
    let up = mock_server(MockSettings::default()).await;
    let gw = gateway(&config(
        &[
            deployment("beta-model", "beta-1", &up.base(), "").replace(
                "      id: beta-1\n",
                "      id: beta-1\n      access_groups: [beta]\n",
            ),
            deployment("cheap", "cheap-1", &up.base(), ""),
        ],
        "",
    ))
    .await;
    let key = new_key(&gw, json!({"models": ["beta"]})).await;
    let a = chat_as(
        &gw,
        &key,
        r#"{"model":"beta-model","messages":[{"role":"user","content":"hi"}]}"#,
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let a = chat_as(&gw, &key, &format!("{CHAT}}}")).await;
    assert_eq!(a.status, 401, "{}", a.text());
}

/// 50 concurrent chat requests with `key`, spread over `urls` in turn: how many were admitted
/// and what they cost (`x-sluice-response-cost`); every refusal must be the budget's.
async fn burst(urls: &[String], key: &str, body: &str) -> (u32, f64) {
    let mut calls = Vec::new();
    for i in 0..50 {
        let url = urls[i % urls.len()].clone();
        let (auth, body) = (format!("Bearer {key}"), body.to_owned());
        calls.push(tokio::spawn(async move {
            send(
                "POST",
                &url,
                body,
                &[
                    ("content-type", "application/json"),
                    ("authorization", &auth),
                ],
            )
            .await
        }));
    }
    let (mut admitted, mut cost) = (0u32, 0.0f64);
    for c in calls {
        let a = c.await.unwrap();
        match a.status.as_u16() {
            200 => {
                admitted += 1;
                cost += a
                    .header("x-sluice-response-cost")
                    .and_then(|c| c.parse::<f64>().ok())
                    .unwrap_or(0.0);
            }
            400 => assert_eq!(error_code(&a), "budget_exceeded", "{}", a.text()),
            other => panic!("unexpected {other}: {}", a.text()),
        }
    }
    (admitted, cost)
}

/// 50 concurrent requests on a key that has never made one, whose budget holds 10.5 of them:
/// before the request's own estimate was reserved, every one was admitted (4.8x the budget).
#[tokio::test]
async fn a_fresh_keys_burst_stays_within_its_budget() {
    // 100 output tokens at 1e-5 USD each: 0.001 USD a request, and the request's max_tokens
    // (100) prices its reservation at exactly that.
    let slow = mock_server(MockSettings {
        latency: Duration::from_millis(400),
        response_tokens: 100,
        ..MockSettings::default()
    })
    .await;
    let priced = "      input_cost_per_token: 0\n      output_cost_per_token: 0.00001\n";
    let gw = gateway(&config(
        &[deployment("cheap", "cheap-1", &slow.base(), priced)],
        "",
    ))
    .await;
    let budget = 0.0105;
    let key = new_key(&gw, json!({"max_budget": budget})).await;
    let body = format!(r#"{CHAT},"max_tokens":100}}"#);
    let (admitted, cost) = burst(&[gw.url("/v1/chat/completions")], &key, &body).await;
    let ratio = cost / budget;
    eprintln!(
        "tenancy figure: burst of 50 on a fresh key: {admitted} admitted, spend {cost:.4} USD = \
         {ratio:.3}x its budget"
    );
    assert!(admitted >= 1, "the first request is always admitted");
    assert!(ratio <= 1.1, "overshoot {ratio:.3}x (admitted {admitted})");
}

#[tokio::test]
async fn a_deployment_added_at_run_time_may_not_point_at_the_gateways_machine() {
    let dir = temp_dir();
    let gw = gateway_in(
        "model_list: []\ngeneral_settings:\n  master_key: sk-master\n  store_model_in_db: true\n",
        &dir,
    )
    .await;
    for base in [
        "http://127.0.0.1:4000/v1",
        "http://localhost:8080",
        "http://169.254.169.254/latest",
        "http://[::1]:9/v1",
        "http://0.0.0.0:4000",
    ] {
        let a = admin_as(&gw, "sk-master", "POST", "/model/new", json!({"model_name": "sneaky", "litellm_params": {"model": "openai/x", "api_base": base, "api_key": "sk-x"}})).await;
        assert_eq!(a.status, 400, "{base}: {}", a.text());
        assert!(
            a.text().contains("litellm_params.api_base"),
            "{base}: {}",
            a.text()
        );
    }
    // A private network is where self-hosted model servers live: allowed.
    let a = admin_as(&gw, "sk-master", "POST", "/model/new", json!({"model_name": "vllm", "litellm_params": {"model": "openai/x", "api_base": "http://10.1.2.3:8000/v1", "api_key": "sk-x"}})).await;
    assert_eq!(a.status, 200, "{}", a.text());
    // The allow-list lets an operator through.
    let dir = temp_dir();
    let gw = gateway_in(
        "model_list: []\ngeneral_settings:\n  master_key: sk-master\n  store_model_in_db: true\n  client_side_api_base_allowlist: [\"127.0.0.1\"]\n",
        &dir,
    )
    .await;
    let a = admin_as(&gw, "sk-master", "POST", "/model/new", json!({"model_name": "local", "litellm_params": {"model": "openai/x", "api_base": "http://127.0.0.1:9/v1", "api_key": "sk-x"}})).await;
    assert_eq!(a.status, 200, "{}", a.text());
}

#[tokio::test]
async fn a_cached_answer_is_served_only_within_its_team() {
    let up = mock_server(MockSettings::default()).await;
    let yaml = config(&[deployment("cheap", "cheap-1", &up.base(), "")], "").replace(
        "general_settings:",
        "litellm_settings:\n  cache: true\ngeneral_settings:",
    );
    let gw = gateway(&yaml).await;
    for team in ["t-a", "t-b"] {
        let t = admin_as(
            &gw,
            "sk-master",
            "POST",
            "/team/new",
            json!({"team_id": team}),
        )
        .await;
        assert_eq!(t.status, 200, "{}", t.text());
    }
    let a1 = new_key(&gw, json!({"team_id": "t-a"})).await;
    let a2 = new_key(&gw, json!({"team_id": "t-a"})).await;
    let b = new_key(&gw, json!({"team_id": "t-b"})).await;
    let loner = new_key(&gw, json!({})).await;
    let body = format!("{CHAT}}}");
    let first = chat_as(&gw, &a1, &body).await;
    assert_eq!(first.header("x-sluice-cache-hit"), Some("false"));
    let same_team = chat_as(&gw, &a2, &body).await;
    assert_eq!(
        same_team.header("x-sluice-cache-hit"),
        Some("true"),
        "a team shares its cache"
    );
    for (who, key) in [("another team", &b), ("a key without a team", &loner)] {
        let other = chat_as(&gw, key, &body).await;
        assert_eq!(
            other.header("x-sluice-cache-hit"),
            Some("false"),
            "{who} is not served team t-a's answer"
        );
    }
    // Naming a namespace in the body does not leave the caller's scope: team t-b asking for
    // any namespace never reaches t-a's entries, but its own again.
    let named = format!(r#"{CHAT},"cache":{{"namespace":"team:t-a"}}}}"#);
    assert_eq!(
        chat_as(&gw, &b, &named).await.header("x-sluice-cache-hit"),
        Some("false")
    );
    assert_eq!(
        chat_as(&gw, &b, &named).await.header("x-sluice-cache-hit"),
        Some("true")
    );
    // An admin shares a namespace on purpose through the key's metadata.
    let s1 = new_key(
        &gw,
        json!({"team_id": "t-a", "metadata": {"cache": {"namespace": "shared"}}}),
    )
    .await;
    let s2 = new_key(
        &gw,
        json!({"team_id": "t-b", "metadata": {"cache": {"namespace": "shared"}}}),
    )
    .await;
    assert_eq!(
        chat_as(&gw, &s1, &body).await.header("x-sluice-cache-hit"),
        Some("false")
    );
    assert_eq!(
        chat_as(&gw, &s2, &body).await.header("x-sluice-cache-hit"),
        Some("true")
    );
}

#[tokio::test]
async fn a_virtual_key_lists_the_models_it_may_use() {
    let up = mock_server(MockSettings::default()).await;
    let gw = gateway(&config(
        &[
            deployment("cheap", "cheap-1", &up.base(), ""),
            deployment("expensive", "expensive-1", &up.base(), ""),
        ],
        "",
    ))
    .await;
    let key = new_key(&gw, json!({"models": ["cheap"]})).await;
    let auth = format!("Bearer {key}");
    let list = send(
        "GET",
        &gw.url("/v1/models"),
        "",
        &[("authorization", &auth)],
    )
    .await;
    assert_eq!(list.status, 200, "{}", list.text());
    let ids: Vec<String> = list.json()["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids, ["cheap"]);
    let one = send(
        "GET",
        &gw.url("/v1/models/cheap"),
        "",
        &[("authorization", &auth)],
    )
    .await;
    assert_eq!(one.status, 200, "{}", one.text());
    let hidden = send(
        "GET",
        &gw.url("/v1/models/expensive"),
        "",
        &[("authorization", &auth)],
    )
    .await;
    assert_eq!(hidden.status, 404, "{}", hidden.text());
    // The master key sees everything; an unknown key nothing.
    let all = send("GET", &gw.url("/v1/models"), "", &[MASTER]).await;
    assert_eq!(all.json()["data"].as_array().unwrap().len(), 2);
    let stranger = send(
        "GET",
        &gw.url("/v1/models"),
        "",
        &[("authorization", "Bearer sk-nobody-0000000000")],
    )
    .await;
    assert_eq!(stranger.status, 401);
    // A blocked key lists nothing.
    let blocked = admin_as(&gw, "sk-master", "POST", "/key/block", json!({"key": key})).await;
    assert_eq!(blocked.status, 200, "{}", blocked.text());
    assert!(
        eventually(PATIENCE, || async {
            send(
                "GET",
                &gw.url("/v1/models"),
                "",
                &[("authorization", &auth)],
            )
            .await
            .status
                == 401
        })
        .await
    );
}

/// The same burst spread over a fleet: two instances on one PostgreSQL and one Redis, the
/// requests alternating between them. Each instance alone would admit its own 11; the held
/// amounts in Redis keep the pair to the budget.
#[tokio::test]
async fn a_fresh_keys_burst_over_a_fleet_stays_within_its_budget() {
    let (Some(server), Some(redis)) = (postgres_server("SLUICE_TEST_POSTGRES_URL"), redis_server())
    else {
        return;
    };
    let slow = mock_server(MockSettings {
        latency: Duration::from_millis(400),
        response_tokens: 100,
        ..MockSettings::default()
    })
    .await;
    let db = postgres_database(&server).await;
    let priced = "      input_cost_per_token: 0\n      output_cost_per_token: 0.00001\n";
    let yaml = config(&[deployment("cheap", "cheap-1", &slow.base(), priced)], "")
        .replace(
            "general_settings:\n",
            &format!("general_settings:\n  database_url: {db}\n"),
        )
        .replace(
            "router_settings:\n",
            &format!("router_settings:\n  redis_url: {redis}\n"),
        );
    let a = gateway(&yaml).await;
    let b = gateway(&yaml).await;
    for gw in [&a, &b] {
        let up = eventually(PATIENCE, || async {
            get(&gw.url("/health/readiness")).await.json()["redis"] == "connected"
        })
        .await;
        assert!(up, "the fleet's redis is up");
    }
    let budget = 0.0105;
    let key = new_key(&a, json!({"max_budget": budget})).await;
    // Both instances know the key before the burst (the second reads it from the store).
    let warm = send(
        "GET",
        &b.url("/v1/models"),
        "",
        &[("authorization", &format!("Bearer {key}"))],
    )
    .await;
    assert_eq!(warm.status, 200, "{}", warm.text());
    let body = format!(r#"{CHAT},"max_tokens":100}}"#);
    let urls = [a.url("/v1/chat/completions"), b.url("/v1/chat/completions")];
    let (admitted, cost) = burst(&urls, &key, &body).await;
    let ratio = cost / budget;
    eprintln!(
        "tenancy figure: burst of 50 on a fresh key over two instances: {admitted} admitted, \
         spend {cost:.4} USD = {ratio:.3}x its budget"
    );
    assert!(admitted >= 1);
    assert!(ratio <= 1.1, "overshoot {ratio:.3}x (admitted {admitted})");
}

#[tokio::test]
async fn a_virtual_key_reads_its_own_records_and_nothing_else() {
    let up = mock_server(MockSettings::default()).await;
    let gw = gateway(&config(
        &[deployment("cheap", "cheap-1", &up.base(), "")],
        "",
    ))
    .await;
    for (team, user) in [("t-a", "u-a"), ("t-b", "u-b")] {
        let t = admin_as(
            &gw,
            "sk-master",
            "POST",
            "/team/new",
            json!({"team_id": team}),
        )
        .await;
        assert_eq!(t.status, 200, "{}", t.text());
        let u = admin_as(
            &gw,
            "sk-master",
            "POST",
            "/user/new",
            json!({"user_id": user}),
        )
        .await;
        assert_eq!(u.status, 200, "{}", u.text());
    }
    let a = new_key(
        &gw,
        json!({"team_id": "t-a", "user_id": "u-a", "key_alias": "mine"}),
    )
    .await;
    let b = new_key(&gw, json!({"team_id": "t-b", "user_id": "u-b"})).await;
    let read = |path: &str| {
        let path = path.to_owned();
        let (gw, a) = (&gw, &a);
        async move { admin_as(gw, a, "GET", &path, serde_json::Value::Null).await }
    };
    let own = read("/key/info").await;
    assert_eq!(own.status, 200, "{}", own.text());
    assert_eq!(own.json()["info"]["key_alias"], "mine", "{}", own.text());
    assert_eq!(read(&format!("/key/info?key={a}")).await.status, 200);
    assert_eq!(read("/user/info").await.status, 200);
    assert_eq!(read("/user/info?user_id=u-a").await.status, 200);
    let team = read("/team/info").await;
    assert_eq!(team.status, 200, "{}", team.text());
    assert!(team.text().contains("t-a"), "{}", team.text());
    for path in [
        format!("/key/info?key={b}"),
        "/user/info?user_id=u-b".to_owned(),
        "/team/info?team_id=t-b".to_owned(),
        "/key/list".to_owned(),
        "/spend/logs".to_owned(),
    ] {
        let refused = read(&path).await;
        assert_eq!(refused.status, 403, "{path}: {}", refused.text());
        assert_eq!(error_code(&refused), "not_permitted", "{path}");
    }
    // A key for another user is refused (a user's key may make keys only for its own user).
    let change = admin_as(&gw, &a, "POST", "/key/generate", json!({"user_id": "u-b"})).await;
    assert_eq!(change.status, 403, "{}", change.text());
    // A key that is not valid is still 401.
    let stranger = admin_as(
        &gw,
        "sk-nobody-000000",
        "GET",
        "/key/info",
        serde_json::Value::Null,
    )
    .await;
    assert_eq!(stranger.status, 401, "{}", stranger.text());
}
