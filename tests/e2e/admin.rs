//! Virtual keys made through the management API and used through the gateway, end to end, on
//! SQLite and on PostgreSQL; two instances sharing PostgreSQL and Redis; and a database outage
//! in the middle of traffic that loses no spend record.
use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::{json, Value};

const MASTER: &str = "sk-master-admin";

fn config(database_url: Option<&str>, redis_url: Option<&str>) -> String {
    let db = database_url
        .map(|u| format!("  database_url: {u}\n"))
        .unwrap_or_default();
    let redis = redis_url
        .map(|u| format!("router_settings:\n  redis_url: {u}\n"))
        .unwrap_or_default();
    format!(
        r#"
model_list:
  - model_name: cheap
    litellm_params:
      model: mock/cheap
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

async fn chat(gw: &Gateway, key: &str) -> Answer {
    let auth = format!("Bearer {key}");
    send(
        "POST",
        &gw.url("/v1/chat/completions"),
        r#"{"model":"cheap","messages":[{"role":"user","content":"hi"}]}"#,
        &[
            ("content-type", "application/json"),
            ("authorization", &auth),
        ],
    )
    .await
}

async fn key_lifecycle(gw: &Gateway) {
    let made = admin(
        gw,
        "POST",
        "/key/generate",
        json!({"key_alias": "app-1", "rpm_limit": 3, "max_budget": 5.0, "models": ["cheap"]}),
    )
    .await;
    assert_eq!(made.status, 200, "{}", made.text());
    let key = made.json()["key"].as_str().unwrap().to_owned();
    assert!(key.starts_with("sk-"));
    // Usable at once, limited, priced.
    let a = chat(gw, &key).await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(a.header("x-ratelimit-limit-requests"), Some("3"));
    assert!(a.header("x-sluice-response-cost").is_some());
    assert_eq!(chat(gw, &key).await.status, 200);
    assert_eq!(chat(gw, &key).await.status, 200);
    assert_eq!(chat(gw, &key).await.status, 429);
    // Blocked and unblocked.
    let b = admin(gw, "POST", "/key/block", json!({"key": key})).await;
    assert_eq!(b.status, 200, "{}", b.text());
    let refused = chat(gw, &key).await;
    assert_eq!(refused.status, 401);
    assert_eq!(refused.json()["error"]["code"], "key_blocked");
    assert_eq!(
        admin(gw, "POST", "/key/unblock", json!({"key": key}))
            .await
            .status,
        200
    );
    assert_eq!(chat(gw, &key).await.status, 429, "unblocked, still limited");
    // Spend reaches the store: the spend log, and the key's spend.
    let ok = eventually(PATIENCE, || async {
        let logs = admin(
            gw,
            "GET",
            &format!("/spend/logs?api_key={key}"),
            Value::Null,
        )
        .await;
        logs.status == 200 && logs.json().as_array().is_some_and(|a| a.len() >= 3)
    })
    .await;
    assert!(ok, "three successful requests in the spend log");
    let ok = eventually(PATIENCE, || async {
        let info = admin(gw, "GET", &format!("/key/info?key={key}"), Value::Null).await;
        info.json()["info"]["spend"].as_f64().unwrap_or(0.0) > 0.0
    })
    .await;
    assert!(ok, "the key's spend is stored");
    let daily = admin(gw, "GET", "/spend/daily", Value::Null).await;
    assert_eq!(daily.status, 200, "{}", daily.text());
    let rows = daily.json();
    let hash = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["model_group"] == "cheap" && r["requests"].as_u64() >= Some(3));
    assert!(hash.is_some(), "today's rollup counts the requests: {rows}");
    // Deleted: refused.
    let d = admin(gw, "POST", "/key/delete", json!({"keys": [key]})).await;
    assert_eq!(d.status, 200, "{}", d.text());
    assert_eq!(
        chat(gw, &key).await.json()["error"]["code"],
        "invalid_api_key"
    );
    // Only the master key may manage keys: a valid virtual key is refused with 403 naming
    // the permission (401 stays for a key that is not valid).
    let other = admin(gw, "POST", "/key/generate", json!({})).await;
    let k2 = other.json()["key"].as_str().unwrap().to_owned();
    let auth = format!("Bearer {k2}");
    let denied = send(
        "POST",
        &gw.url("/key/generate"),
        "{}",
        &[("authorization", &auth)],
    )
    .await;
    assert_eq!(denied.status, 403, "{}", denied.text());
    assert_eq!(denied.json()["error"]["code"], "not_permitted");
}

#[tokio::test]
async fn keys_through_the_api_on_sqlite() {
    let gw = gateway(&config(None, None)).await;
    key_lifecycle(&gw).await;
}

#[tokio::test]
async fn keys_through_the_api_on_postgres() {
    let Some(server) = postgres_server("SLUICE_TEST_POSTGRES_URL") else {
        return;
    };
    let db = postgres_database(&server).await;
    let gw = gateway(&config(Some(&db), None)).await;
    key_lifecycle(&gw).await;
}

/// Two instances on one PostgreSQL and one Redis: a key's rpm limit and budget hold across
/// both, and a key blocked on one is refused by the other within a second.
#[tokio::test]
async fn two_instances_share_limits_and_revocations() {
    let (Some(server), Some(redis)) = (postgres_server("SLUICE_TEST_POSTGRES_URL"), redis_server())
    else {
        return;
    };
    let db = postgres_database(&server).await;
    let cfg = config(Some(&db), Some(&redis));
    let a = gateway(&cfg).await;
    let b = gateway(&cfg).await;
    // Let both connect to Redis.
    let up = |gw: &Gateway| {
        let ready = gw.url("/health/readiness");
        async move { get(&ready).await.json()["redis"] == "connected" }
    };
    assert!(eventually(PATIENCE, || up(&a)).await);
    assert!(eventually(PATIENCE, || up(&b)).await);
    let made = admin(&a, "POST", "/key/generate", json!({"rpm_limit": 4})).await;
    let key = made.json()["key"].as_str().unwrap().to_owned();
    let mut ok = 0;
    for _ in 0..3 {
        ok += usize::from(chat(&a, &key).await.status == 200);
        ok += usize::from(chat(&b, &key).await.status == 200);
    }
    assert_eq!(ok, 4, "rpm 4 across both instances");
    // A budget spent through A is spent for B.
    let made = admin(&a, "POST", "/key/generate", json!({"max_budget": 0.000001})).await;
    assert_eq!(made.status, 200, "{}", made.text());
    let budget_key = made.json()["key"].as_str().unwrap().to_owned();
    assert_eq!(chat(&a, &budget_key).await.status, 200);
    let refused = eventually(PATIENCE, || async {
        chat(&b, &budget_key).await.status == 400
    })
    .await;
    assert!(refused, "the budget spent on A holds on B");
    // Revocation on A reaches B within a second.
    let fresh = admin(&a, "POST", "/key/generate", json!({})).await;
    let k = fresh.json()["key"].as_str().unwrap().to_owned();
    assert_eq!(chat(&b, &k).await.status, 200);
    assert_eq!(
        admin(&a, "POST", "/key/block", json!({"key": k}))
            .await
            .status,
        200
    );
    let t = Instant::now();
    let revoked = eventually(Duration::from_secs(1), || async {
        chat(&b, &k).await.status == 401
    })
    .await;
    assert!(revoked, "B refuses the blocked key within a second");
    eprintln!("revocation reached the other instance in {:?}", t.elapsed());
}

/// The database goes away in the middle of traffic: no client request fails because of it,
/// and every spend record is in the database after it returns.
#[tokio::test]
async fn database_outage_loses_no_spend() {
    let Some((server, ctl)) = postgres_restartable() else {
        return;
    };
    let db = postgres_database(&server).await;
    let gw = gateway(&config(Some(&db), None)).await;
    let pg = |what: &str| {
        let status = std::process::Command::new(&ctl).arg(what).status().unwrap();
        assert!(status.success(), "pg {what}");
    };
    let mut sent = 0;
    for _ in 0..10 {
        assert_eq!(chat(&gw, MASTER).await.status, 200);
        sent += 1;
    }
    pg("stop");
    for _ in 0..30 {
        assert_eq!(
            chat(&gw, MASTER).await.status,
            200,
            "the database is not on the path"
        );
        sent += 1;
    }
    let ready = get(&gw.url("/health/readiness")).await.json();
    let down = eventually(PATIENCE, || async {
        get(&gw.url("/health/readiness")).await.json()["db"]["state"] != "connected"
    })
    .await;
    assert!(down, "readiness says the database is away: {ready}");
    pg("start");
    use sqlx::{Connection, Row};
    let counted = eventually(Duration::from_secs(30), || async {
        let Ok(mut c) = sqlx::AnyConnection::connect(&db).await else {
            return false;
        };
        let n: i64 = sqlx::query("SELECT COUNT(*) AS n FROM spend_logs")
            .fetch_one(&mut c)
            .await
            .map(|r| r.get("n"))
            .unwrap_or(0);
        n == sent
    })
    .await;
    assert!(
        counted,
        "all {sent} spend records present after the database returned"
    );
}
