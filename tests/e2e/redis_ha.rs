//! A fleet on a Redis Cluster of three primaries (scripts/services.sh starts it): two
//! instances hold a key's and a team's limits and a budget exactly as one instance does, and
//! share the response cache (one `MGET` across slots, a flush that walks every primary).
//! Sentinel failover is tested on the fleet itself (`src/fleet/mod.rs`) and measured end to
//! end by bench/redis-failover.sh.

use crate::common::*;
use serde_json::json;
use sluice_mock::MockSettings;

const MASTER_KEY: &str = "sk-master-redis-ha";

/// The test cluster's nodes as LiteLLM's `redis_startup_nodes`, or `None` after a skip.
fn cluster_nodes() -> Option<String> {
    let list =
        sluice_store::testing::required_var("SLUICE_TEST_REDIS_CLUSTER_NODES", "Redis Cluster")?;
    let nodes: Vec<String> = list
        .split(',')
        .filter_map(|n| n.rsplit_once(':'))
        .map(|(h, p)| format!("{{\"host\": \"{h}\", \"port\": \"{p}\"}}"))
        .collect();
    Some(format!("[{}]", nodes.join(", ")))
}

async fn admin(gw: &Gateway, path: &str, body: serde_json::Value) -> Answer {
    admin_as(gw, MASTER_KEY, "POST", path, body).await
}

async fn chat(gw: &Gateway, key: &str, content: &str) -> Answer {
    let body = format!(r#"{{"model":"gpt","messages":[{{"role":"user","content":"{content}"}}]}}"#);
    let auth = format!("Bearer {key}");
    send(
        "POST",
        &gw.url("/v1/chat/completions"),
        body,
        &[
            ("content-type", "application/json"),
            ("authorization", &auth),
        ],
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_on_a_redis_cluster_share_limits_budgets_and_the_cache() {
    let (Some(server), Some(nodes)) =
        (postgres_server("SLUICE_TEST_POSTGRES_URL"), cluster_nodes())
    else {
        return;
    };
    let db = postgres_database(&server).await;
    let mock = mock_server(MockSettings::default()).await;
    let namespace = format!("ha{}", sluice_core::random::uuid_v4().simple());
    let yaml = format!(
        r#"
model_list:
  - model_name: gpt
    litellm_params:
      model: openai/gpt
      api_base: {base}
      api_key: sk-mock
      input_cost_per_token: 0.001
      output_cost_per_token: 0.001
  - model_name: embed
    litellm_params:
      model: openai/embed
      api_base: {base}
      api_key: sk-mock
general_settings:
  master_key: {MASTER_KEY}
  database_url: {db}
  proxy_batch_write_at: 0.2
router_settings:
  redis_startup_nodes: {nodes}
litellm_settings:
  cache: true
  cache_params:
    type: redis
    namespace: {namespace}
    supported_call_types: ["aembedding"]
"#,
        base = mock.base()
    );
    let (a, b) = (
        std::sync::Arc::new(gateway(&yaml).await),
        std::sync::Arc::new(gateway(&yaml).await),
    );
    on_redis(&[&a, &b]).await;
    for gw in [&a, &b] {
        let ready = gw.url("/health/readiness");
        assert!(
            eventually(PATIENCE, || async {
                get(&ready).await.json()["cache"]["redis"] == "connected"
            })
            .await,
            "the cache reaches the cluster"
        );
    }

    // A team's rpm over two of its keys, a key's own rpm: a concurrent burst over both
    // instances admits exactly the limits.
    let team = admin(&a, "/team/new", json!({"rpm_limit": 6})).await;
    assert_eq!(team.status, 200, "{}", team.text());
    let team_id = team.json()["team_id"].as_str().unwrap().to_owned();
    let mut keys = Vec::new();
    for _ in 0..2 {
        let k = admin(&a, "/key/generate", json!({"team_id": team_id})).await;
        assert_eq!(k.status, 200, "{}", k.text());
        keys.push(k.json()["key"].as_str().unwrap().to_owned());
    }
    let own = admin(&b, "/key/generate", json!({"rpm_limit": 4})).await;
    let own = own.json()["key"].as_str().unwrap().to_owned();
    let burst = |key: String, n: usize| {
        let (a, b) = (a.clone(), b.clone());
        async move {
            let calls = (0..n).map(|i| {
                let (gw, key) = (if i % 2 == 0 { a.clone() } else { b.clone() }, key.clone());
                async move { chat(&gw, &key, &format!("burst {i}")).await.status.as_u16() }
            });
            futures_util::future::join_all(calls).await
        }
    };
    let (t1, t2, o) = tokio::join!(
        burst(keys[0].clone(), 6),
        burst(keys[1].clone(), 6),
        burst(own.clone(), 10)
    );
    let ok = |s: &[u16]| s.iter().filter(|c| **c == 200).count();
    let limited = |s: &[u16]| s.iter().filter(|c| **c == 429).count();
    assert_eq!(
        ok(&t1) + ok(&t2),
        6,
        "team rpm 6 over two keys: {t1:?} {t2:?}"
    );
    assert_eq!(limited(&t1) + limited(&t2), 6);
    assert_eq!(ok(&o), 4, "key rpm 4 over two instances: {o:?}");

    // A budget spent through one instance is spent on the other.
    let spender = admin(&a, "/key/generate", json!({"max_budget": 0.000_001})).await;
    let spender = spender.json()["key"].as_str().unwrap().to_owned();
    assert_eq!(chat(&a, &spender, "spend").await.status, 200);
    let refused = eventually(PATIENCE, || async {
        chat(&b, &spender, "spend again").await.status == 400
    })
    .await;
    assert!(refused, "the budget spent on a holds on b");

    // The cache: an embeddings batch stored by a is read by b in one MGET over slots, and a
    // flush on b walks every primary.
    let auth = format!("Bearer {MASTER_KEY}");
    let h = [
        ("authorization", auth.as_str()),
        ("content-type", "application/json"),
    ];
    let e1 = send(
        "POST",
        &a.url("/v1/embeddings"),
        r#"{"model":"embed","input":["x1","x2","x3"]}"#,
        &h,
    )
    .await;
    assert_eq!(e1.status, 200, "{}", e1.text());
    let before = mock.requests().await;
    let e2 = poll(
        PATIENCE,
        || async {
            send(
                "POST",
                &b.url("/v1/embeddings"),
                r#"{"model":"embed","input":["x3","x1","x2"]}"#,
                &h,
            )
            .await
        },
        |e| e.header("x-sluice-cache-hit") == Some("true"),
    )
    .await;
    assert_eq!(
        e2.header("x-sluice-cache-hit"),
        Some("true"),
        "{}",
        e2.text()
    );
    assert_eq!(
        e2.json()["data"][1]["embedding"],
        e1.json()["data"][0]["embedding"]
    );
    assert_eq!(mock.requests().await, before, "b asked no upstream");
    let flush = send("POST", &b.url("/cache/flushall"), "", &h).await;
    assert_eq!(flush.status, 200, "{}", flush.text());
    assert_eq!(flush.json()["redis_keys_removed"], 3, "{}", flush.text());
}
