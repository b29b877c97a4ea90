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

/// Every member of `v` as `path: type`, arrays' elements merged under `[]`.
fn shape(v: &Value) -> std::collections::BTreeSet<String> {
    fn walk(path: &str, v: &Value, out: &mut std::collections::BTreeSet<String>) {
        let kind = match v {
            Value::Null => "null",
            Value::Bool(_) => "bool",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Array(items) => {
                items
                    .iter()
                    .for_each(|x| walk(&format!("{path}[]"), x, out));
                "array"
            }
            Value::Object(m) => {
                m.iter()
                    .for_each(|(k, x)| walk(&format!("{path}.{k}"), x, out));
                "object"
            }
        };
        out.insert(format!("{path}: {kind}"));
    }
    let mut out = std::collections::BTreeSet::new();
    walk("", v, &mut out);
    out
}

/// The model API's answers keep the shape they had before they were typed (LiteLLM's clients
/// read these names): a file's and a stored deployment in `/model/info`, a stored one as
/// `/model/new` and `/model/update` answer it.
#[tokio::test]
async fn the_model_apis_answers_keep_their_wire_shape() {
    let yaml = format!(
        "model_list:\n  - model_name: cheap\n    litellm_params:\n      model: mock/cheap\n      rpm: 5\n    model_info:\n      id: file-cheap\n      mode: chat\ngeneral_settings:\n  master_key: {MASTER}\n  store_model_in_db: true\n"
    );
    let gw = gateway(&yaml).await;
    let made = admin(
        &gw,
        "POST",
        "/model/new",
        json!({
            "model_name": "stored",
            "litellm_params": {"model": "mock/stored", "api_key": "sk-upstream-123456789", "tpm": 9, "input_cost_per_token": 0.25},
            "model_info": {"mode": "embedding", "note": "x"}
        }),
    )
    .await;
    assert_eq!(made.status, 200, "{}", made.text());
    let id = made.json()["model_id"].as_str().unwrap().to_owned();
    let updated = admin(
        &gw,
        "POST",
        "/model/update",
        json!({"model_info": {"id": id, "note": null}, "litellm_params": {"rpm": 3}}),
    )
    .await;
    assert_eq!(updated.status, 200, "{}", updated.text());
    let all = admin(&gw, "GET", "/model/info", Value::Null).await;
    let one = admin(
        &gw,
        "GET",
        &format!("/model/info?litellm_model_id={id}"),
        Value::Null,
    )
    .await;
    let mut problems = String::new();
    for (route, answer, expected) in [
        ("POST /model/new", made.json(), MODEL_NEW),
        ("POST /model/update", updated.json(), MODEL_UPDATE),
        ("GET /model/info", all.json(), MODEL_INFO),
        ("GET /model/info one", one.json(), MODEL_INFO),
    ] {
        let got: Vec<String> = shape(&answer).into_iter().collect();
        let want: Vec<&str> = expected
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        if got != want {
            problems.push_str(&format!("{route}:\n{}\n\n", got.join("\n")));
        }
    }
    assert!(problems.is_empty(), "{problems}");
}

/// The shapes as the handlers answered before their answers were typed (one deployment's
/// `/model/info` has the shape of the whole list's: a stored deployment's members are a file's
/// and more).
const MODEL_NEW: &str = ".created_at: string
    .created_by: string
    .litellm_params.api_key: string
    .litellm_params.input_cost_per_token: number
    .litellm_params.model: string
    .litellm_params.tpm: number
    .litellm_params: object
    .model_id: string
    .model_info.db_model: bool
    .model_info.id: string
    .model_info.mode: string
    .model_info.note: string
    .model_info: object
    .model_name: string
    .updated_at: string
    .updated_by: string
    : object";
const MODEL_UPDATE: &str = ".created_at: string
    .created_by: string
    .litellm_params.api_key: string
    .litellm_params.input_cost_per_token: number
    .litellm_params.model: string
    .litellm_params.rpm: number
    .litellm_params.tpm: number
    .litellm_params: object
    .model_id: string
    .model_info.db_model: bool
    .model_info.id: string
    .model_info.mode: string
    .model_info: object
    .model_name: string
    .updated_at: string
    .updated_by: string
    : object";
const MODEL_INFO: &str = ".data: array
    .data[].litellm_params.model: string
    .data[].litellm_params.rpm: number
    .data[].litellm_params.tpm: number
    .data[].litellm_params: object
    .data[].model_info.access_groups: array
    .data[].model_info.base_model: null
    .data[].model_info.created_at: string
    .data[].model_info.created_by: string
    .data[].model_info.db_model: bool
    .data[].model_info.id: string
    .data[].model_info.input_cost_per_token: number
    .data[].model_info.litellm_provider: string
    .data[].model_info.mode: string
    .data[].model_info.output_cost_per_token: number
    .data[].model_info.region_name: null
    .data[].model_info.updated_at: string
    .data[].model_info.updated_by: string
    .data[].model_info: object
    .data[].model_name: string
    .data[]: object
    : object";
