//! Limits per model on keys and teams (LiteLLM's `model_rpm_limit`, `model_tpm_limit` and
//! `model_max_budget`), set through the management API and held on the request path: exact
//! under a concurrent burst, apart from the holder's other models, team-wide for a team's,
//! across a restart for a budget, and across two instances sharing Redis.

use crate::common::*;
use serde_json::{json, Value};

const MASTER: &str = "sk-master-per-model";

fn config(database_url: Option<&str>, redis_url: Option<&str>) -> String {
    let (db, redis) = store_and_redis(database_url, redis_url);
    format!(
        r#"
model_list:
  - model_name: cheap
    litellm_params:
      model: mock/cheap
      input_cost_per_token: 0.000001
      output_cost_per_token: 0.000002
  - model_name: other
    litellm_params:
      model: mock/other
      input_cost_per_token: 0.000001
      output_cost_per_token: 0.000002
general_settings:
  master_key: {MASTER}
  proxy_batch_write_at: 0.2
{db}{redis}"#
    )
}

async fn admin(gw: &Gateway, method: &str, path: &str, body: Value) -> Answer {
    admin_as(gw, MASTER, method, path, body).await
}

async fn made_key(gw: &Gateway, spec: Value) -> String {
    let a = admin(gw, "POST", "/key/generate", spec).await;
    assert_eq!(a.status, 200, "{}", a.text());
    a.json()["key"].as_str().unwrap().to_owned()
}

async fn chat(gw: &Gateway, key: &str, model: &str) -> Answer {
    chat_as(gw, key, model, "", &[]).await
}

/// `n` requests at once; how many were answered, and the refusals.
async fn burst(gw: &Gateway, key: &str, model: &str, n: usize) -> (usize, Vec<Answer>) {
    let all = futures_util::future::join_all((0..n).map(|_| chat(gw, key, model))).await;
    let ok = all.iter().filter(|a| a.status == 200).count();
    (ok, all.into_iter().filter(|a| a.status != 200).collect())
}

#[tokio::test]
async fn a_keys_and_a_teams_limits_per_model_hold_under_a_burst() {
    let gw = gateway(&config(None, None)).await;
    let team = admin(
        &gw,
        "POST",
        "/team/new",
        json!({"team_id": "t-per-model", "model_rpm_limit": {"other": 3}}),
    )
    .await;
    assert_eq!(team.status, 200, "{}", team.text());
    let key = made_key(
        &gw,
        json!({"team_id": "t-per-model", "model_rpm_limit": {"cheap": 2}}),
    )
    .await;

    // The key's limit for `cheap`: exactly two of ten at once.
    let (ok, refused) = burst(&gw, &key, "cheap", 10).await;
    assert_eq!(ok, 2, "model_rpm_limit 2");
    for r in &refused {
        assert_eq!(r.status, 429, "{}", r.text());
        assert_eq!(r.json()["error"]["code"], "rpm_limit_exceeded");
        let message = r.json()["error"]["message"].as_str().unwrap().to_owned();
        assert!(message.contains("for this model"), "{message}");
    }
    // The team's limit for `other`, shared by its keys: three of ten, then none for a second
    // key of the team, whose own `cheap` is not limited.
    let (ok, _) = burst(&gw, &key, "other", 10).await;
    assert_eq!(ok, 3, "the team's model_rpm_limit 3");
    let second = made_key(&gw, json!({"team_id": "t-per-model"})).await;
    assert_eq!(chat(&gw, &second, "other").await.status, 429);
    assert_eq!(chat(&gw, &second, "cheap").await.status, 200);

    // LiteLLM's per-model headers name what is left of the key's own limit.
    let fresh = made_key(
        &gw,
        json!({"model_rpm_limit": {"cheap": 5}, "model_tpm_limit": {"cheap": 100000}}),
    )
    .await;
    let a = chat(&gw, &fresh, "cheap").await;
    assert_eq!(a.status, 200);
    assert_eq!(
        a.header("x-litellm-key-remaining-requests-cheap"),
        Some("4")
    );
    assert!(a.header("x-litellm-key-remaining-tokens-cheap").is_some());
    assert!(chat(&gw, &fresh, "other")
        .await
        .header("x-litellm-key-remaining-requests-other")
        .is_none());

    // An update takes effect at once, keeping the minute's count.
    let up = admin(
        &gw,
        "POST",
        "/key/update",
        json!({"key": fresh, "model_rpm_limit": {"cheap": 1}}),
    )
    .await;
    assert_eq!(up.status, 200, "{}", up.text());
    assert_eq!(chat(&gw, &fresh, "cheap").await.status, 429);

    // Malformed values are refused, naming the field.
    for bad in [
        json!({"model_rpm_limit": {"cheap": "many"}}),
        json!({"model_tpm_limit": [1]}),
        json!({"model_max_budget": {"cheap": {"budget_limit": 1, "time_period": "fortnight"}}}),
        json!({"metadata": {"model_rpm_limit": {"cheap": -1}}}),
    ] {
        let a = admin(&gw, "POST", "/key/generate", bad.clone()).await;
        assert_eq!(a.status, 400, "{bad}: {}", a.text());
        let param = a.json()["error"]["param"].as_str().unwrap().to_owned();
        assert!(param.starts_with("model_"), "{bad}: {param}");
    }
    // The fields read back as LiteLLM shows them.
    let info = admin(&gw, "GET", &format!("/key/info?key={fresh}"), Value::Null).await;
    assert_eq!(
        info.json()["info"]["metadata"]["model_rpm_limit"],
        json!({"cheap": 1}),
        "{}",
        info.text()
    );
}

#[tokio::test]
async fn a_per_model_budget_refuses_that_model_only_and_survives_a_restart() {
    let dir = temp_dir();
    let gw = gateway_in(&config(None, None), &dir).await;
    let budget = json!({"cheap": {"budget_limit": "0.000001", "time_period": "1d"}});
    let key = made_key(&gw, json!({"model_max_budget": budget})).await;
    assert_eq!(chat(&gw, &key, "cheap").await.status, 200);
    let refused = chat(&gw, &key, "cheap").await;
    assert_eq!(refused.status, 400, "{}", refused.text());
    assert_eq!(refused.json()["error"]["code"], "budget_exceeded");
    let message = refused.json()["error"]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        message.starts_with("Budget has been exceeded!"),
        "{message}"
    );
    assert!(message.contains("for this model"), "{message}");
    assert_eq!(
        chat(&gw, &key, "other").await.status,
        200,
        "other models are not held"
    );

    // Once the spend is logged, a restart reads it back: the budget stays spent.
    let logged = eventually(PATIENCE, || async {
        let logs = admin(&gw, "GET", "/spend/logs", Value::Null).await;
        logs.json()
            .as_array()
            .is_some_and(|l| l.iter().filter(|r| r["model_group"] == "cheap").count() >= 1)
    })
    .await;
    assert!(logged, "the spend log is written");
    drop(gw);
    let gw = gateway_in(&config(None, None), &dir).await;
    let after = chat(&gw, &key, "cheap").await;
    assert_eq!(
        after.status,
        400,
        "spent before the restart: {}",
        after.text()
    );
    assert_eq!(chat(&gw, &key, "other").await.status, 200);
}

/// Two instances on one PostgreSQL and one Redis: a key's limit for one model holds across
/// both.
#[tokio::test]
async fn two_instances_share_a_keys_limit_per_model() {
    let (Some(server), Some(redis)) = (postgres_server("SLUICE_TEST_POSTGRES_URL"), redis_server())
    else {
        return;
    };
    let db = postgres_database(&server).await;
    let cfg = config(Some(&db), Some(&redis));
    let a = gateway(&cfg).await;
    let b = gateway(&cfg).await;
    on_redis(&[&a, &b]).await;
    let key = made_key(&a, json!({"model_rpm_limit": {"cheap": 4}})).await;
    let mut ok = 0;
    for _ in 0..4 {
        ok += usize::from(chat(&a, &key, "cheap").await.status == 200);
        ok += usize::from(chat(&b, &key, "cheap").await.status == 200);
    }
    assert_eq!(ok, 4, "model_rpm_limit 4 across both instances");
    assert_eq!(chat(&b, &key, "other").await.status, 200);
}
