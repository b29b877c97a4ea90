//! MCP sessions shared by a fleet: two instances on one PostgreSQL and one Redis, a client that opens its session
//! on one and goes on on the other (as a load balancer without stickiness sends it), and a
//! `DELETE` on either that ends the session on both.

use serde_json::json;

use crate::common::*;
use crate::mcp::{script, text_of, Client};

fn config(db: &str, redis: &str) -> String {
    format!(
        r#"
model_list: []
general_settings:
  master_key: sk-master
  database_url: {db}
router_settings:
  redis_url: {redis}
mcp_servers:
  local:
    command: python3
    args: ["{script}", stdio]
"#,
        script = script().display()
    )
}

#[tokio::test]
async fn a_session_opened_on_one_instance_is_served_and_ended_by_another() {
    let (Some(server), Some(redis)) = (postgres_server("SLUICE_TEST_POSTGRES_URL"), redis_server())
    else {
        return;
    };
    // One database (the keys) and one Redis (the sessions), as a fleet has.
    let db = postgres_database(&server).await;
    let a = gateway(&config(&db, &redis)).await;
    let b = gateway(&config(&db, &redis)).await;
    for gw in [&a, &b] {
        let up = eventually(PATIENCE, || async {
            get(&gw.url("/health/readiness")).await.json()["redis"] == "connected"
        })
        .await;
        assert!(up, "the fleet's redis is up");
    }
    let key = new_key(&a, json!({})).await;
    let other = new_key(&a, json!({})).await;

    let mut on_a = Client::new(&a, "/mcp", &key);
    on_a.initialize().await;
    let session = on_a.session.clone().unwrap();

    // The same session, on the other instance.
    let mut on_b = Client::new(&b, "/mcp", &key);
    on_b.session = Some(session.clone());
    let v = on_b.tool("local-add", json!({"a": 4, "b": 5})).await;
    assert_eq!(text_of(&v), "9", "{v}");

    // Another key may not use it, on either instance.
    let mut thief = Client::new(&b, "/mcp", &other);
    thief.session = Some(session.clone());
    let a404 = thief
        .post(
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
            &[],
        )
        .await;
    assert_eq!(a404.status, 404, "{}", a404.text());

    // Ended on B: gone on A too.
    let auth = format!("Bearer {key}");
    let end = send(
        "DELETE",
        &b.url("/mcp"),
        "",
        &[
            ("authorization", auth.as_str()),
            ("mcp-session-id", session.as_str()),
        ],
    )
    .await;
    assert_eq!(end.status, 200);
    let gone = eventually(PATIENCE, || async {
        on_a.post(
            json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}),
            &[],
        )
        .await
        .status
            == 404
    })
    .await;
    assert!(gone, "the session ended on the instance that opened it");
}
