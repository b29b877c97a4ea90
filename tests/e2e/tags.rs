//! Tags end to end: a request's tags (`tags`, `metadata.tags`, `x-litellm-tags`) and its key's
//! route among a group's deployments by their `litellm_params.tags` with
//! `enable_tag_filtering` (LiteLLM's rules: `default`, `&`, the 401 when none is left), and
//! `/spend/tags` sums what each tag spent.

use crate::common::*;
use serde_json::{json, Value};

const MASTER: &str = "sk-master-tags";

fn config() -> String {
    let deployment = |group: &str, id: &str, tags: &str| {
        format!(
            "  - model_name: {group}\n    litellm_params:\n      model: mock/{id}\n      \
             input_cost_per_token: 0.000001\n      output_cost_per_token: 0.000002\n      \
             tags: {tags}\n    model_info:\n      id: {id}\n"
        )
    };
    format!(
        "model_list:\n{}{}{}{}{}general_settings:\n  master_key: {MASTER}\n  \
         proxy_batch_write_at: 0.2\nrouter_settings:\n  enable_tag_filtering: true\n",
        deployment("gpt", "paid", "[paid]"),
        deployment("gpt", "free", "[free, default]"),
        deployment("gpt", "eu", "[eu]"),
        deployment("strict", "a", "[a]"),
        deployment("strict", "b", "[b]"),
    )
}

async fn chat(gw: &Gateway, key: &str, model: &str, extra: &str, header: Option<&str>) -> Answer {
    let tags: Vec<(&str, &str)> = header.map(|h| ("x-litellm-tags", h)).into_iter().collect();
    chat_as(gw, key, model, extra, &tags).await
}

async fn served_by(gw: &Gateway, key: &str, extra: &str, header: Option<&str>) -> String {
    let a = chat(gw, key, "gpt", extra, header).await;
    assert_eq!(a.status, 200, "{}", a.text());
    a.header("x-sluice-model-id").unwrap().to_owned()
}

#[tokio::test]
async fn tags_route_among_a_groups_deployments_and_are_summed_by_tag() {
    let gw = gateway(&config()).await;
    for _ in 0..4 {
        assert_eq!(
            served_by(&gw, MASTER, "", None).await,
            "free",
            "untagged: default"
        );
    }
    assert_eq!(
        served_by(&gw, MASTER, r#","tags":["paid"]"#, None).await,
        "paid"
    );
    assert_eq!(
        served_by(&gw, MASTER, r#","metadata":{"tags":["eu"]}"#, None).await,
        "eu"
    );
    assert_eq!(served_by(&gw, MASTER, "", Some("paid")).await, "paid");
    assert_eq!(
        served_by(&gw, MASTER, r#","tags":["&eu"]"#, None).await,
        "eu"
    );
    // A tag no deployment of the group carries: the default ones.
    assert_eq!(
        served_by(&gw, MASTER, r#","tags":["nobody"]"#, None).await,
        "free"
    );
    // No default to fall back to: LiteLLM's 401.
    let none = chat(&gw, MASTER, "strict", r#","tags":["c"]"#, None).await;
    assert_eq!(none.status, 401, "{}", none.text());
    assert_eq!(
        none.json()["error"]["code"],
        "no_deployments_with_tag_routing"
    );
    let message = none.json()["error"]["message"].as_str().unwrap().to_owned();
    assert!(
        message.contains("Not allowed to access model due to tags configuration"),
        "{message}"
    );
    // A key's tags route its every request.
    let made = admin_as(
        &gw,
        MASTER,
        "POST",
        "/key/generate",
        json!({"metadata": {"tags": ["eu"]}}),
    )
    .await;
    assert_eq!(made.status, 200, "{}", made.text());
    let key = made.json()["key"].as_str().unwrap().to_owned();
    assert_eq!(served_by(&gw, &key, "", None).await, "eu");
    // Malformed tags are the client's error.
    let bad = chat(&gw, MASTER, "gpt", r#","tags":"paid""#, None).await;
    assert_eq!(bad.status, 400, "{}", bad.text());
    assert_eq!(bad.json()["error"]["param"], "tags");

    // Spend by tag, tags as the requests gave them: paid twice (body, header), eu twice
    // (metadata, the key), `&eu` once.
    let by_tag = |rows: &Value, tag: &str| {
        rows.as_array()
            .and_then(|r| r.iter().find(|r| r["individual_request_tag"] == tag))
            .cloned()
    };
    let read = || async {
        admin_as(&gw, MASTER, "GET", "/spend/tags", Value::Null)
            .await
            .json()
    };
    let summed = eventually(PATIENCE, || async {
        by_tag(&read().await, "eu").is_some_and(|r| r["log_count"] == 2)
    })
    .await;
    let rows = read().await;
    assert!(summed, "{rows}");
    assert_eq!(by_tag(&rows, "&eu").unwrap()["log_count"], 1, "{rows}");
    let paid = by_tag(&rows, "paid").unwrap();
    assert_eq!(paid["log_count"], 2, "{rows}");
    assert!(paid["total_spend"].as_f64().unwrap() > 0.0, "{rows}");
    assert!(paid["total_tokens"].as_u64().unwrap() > 0, "{rows}");
    let logs = admin_as(&gw, MASTER, "GET", "/spend/logs", Value::Null).await;
    assert!(
        logs.text().contains("\"request_tags\""),
        "the spend log shows its tags: {}",
        logs.text()
    );
}

fn budget_config(database_url: Option<&str>, redis_url: Option<&str>) -> String {
    let (db, redis) = store_and_redis(database_url, redis_url);
    format!(
        "model_list:\n  - model_name: gpt\n    litellm_params:\n      model: mock/gpt\n      \
         input_cost_per_token: 0.000001\n      output_cost_per_token: 0.000002\n\
         general_settings:\n  master_key: {MASTER}\n  proxy_batch_write_at: 0.2\n{db}{redis}"
    )
}

async fn tagged(gw: &Gateway, key: &str, tags: &str) -> Answer {
    chat(gw, key, "gpt", &format!(r#","tags":{tags}"#), None).await
}

async fn admin(gw: &Gateway, method: &str, path: &str, body: Value) -> Answer {
    admin_as(gw, MASTER, method, path, body).await
}

/// `n` requests with `tags` at once, from `keys` in turn; how many were answered, and one
/// refusal.
async fn burst(gw: &Gateway, keys: &[&str], tags: &str, n: usize) -> (usize, Option<Answer>) {
    let all =
        futures_util::future::join_all((0..n).map(|i| tagged(gw, keys[i % keys.len()], tags)))
            .await;
    let ok = all.iter().filter(|a| a.status == 200).count();
    (ok, all.into_iter().find(|a| a.status != 200))
}

/// LiteLLM's `/tag/*`: a tag's rate limit holds a burst from the master key and a virtual key
/// together, its budget refuses once spent and starts again when raised or its spend is set,
/// `/tag/list` shows stored and dynamic tags, and a deleted tag limits nothing.
#[tokio::test]
async fn a_tags_limits_and_budget_hold_every_request_that_carries_it() {
    let gw = gateway(&budget_config(None, None)).await;
    let key = admin(&gw, "POST", "/key/generate", json!({})).await.json()["key"]
        .as_str()
        .unwrap()
        .to_owned();
    let made = admin(
        &gw,
        "POST",
        "/tag/new",
        json!({"name": "burst", "description": "a shared minute", "rpm_limit": 5}),
    )
    .await;
    assert_eq!(made.status, 200, "{}", made.text());
    assert_eq!(made.json()["message"], "Tag burst created successfully");
    assert_eq!(made.json()["tag"]["name"], "burst");
    assert_eq!(made.json()["tag"]["litellm_budget_table"]["rpm_limit"], 5);
    let (ok, refused) = burst(&gw, &[MASTER, &key], r#"["burst","other"]"#, 12).await;
    assert_eq!(ok, 5, "rpm_limit 5 over both callers");
    let refused = refused.unwrap();
    assert_eq!(refused.status, 429, "{}", refused.text());
    assert!(refused.text().contains("tag"), "{}", refused.text());
    assert_eq!(
        tagged(&gw, &key, r#"["other"]"#).await.status,
        200,
        "other tags are not held to it"
    );
    assert_eq!(chat(&gw, &key, "gpt", "", None).await.status, 200);

    // A budget: refused once spent, whoever calls.
    let made = admin(
        &gw,
        "POST",
        "/tag/new",
        json!({"name": "eng", "max_budget": 0.00003, "soft_budget": 0.00001,
               "budget_duration": "30d"}),
    )
    .await;
    assert_eq!(made.status, 200, "{}", made.text());
    let mut served = 0;
    let refusal = loop {
        let a = tagged(
            &gw,
            if served % 2 == 0 { MASTER } else { &key },
            r#"["eng"]"#,
        )
        .await;
        if a.status != 200 {
            break a;
        }
        served += 1;
        assert!(served < 20, "the tag's budget never refused");
    };
    assert!(served >= 1, "the first request is within the budget");
    assert_eq!(refusal.status, 400, "{}", refusal.text());
    assert_eq!(refusal.json()["error"]["code"], "budget_exceeded");
    let message = refusal.json()["error"]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        message.contains("Budget has been exceeded! tag budget"),
        "{message}"
    );
    // Its spend reaches the store.
    let info = || async {
        admin(&gw, "POST", "/tag/info", json!({"names": ["eng"]}))
            .await
            .json()
    };
    let spent = eventually(PATIENCE, || async {
        info().await["eng"]["spend"].as_f64().unwrap_or(0.0) > 0.0
    })
    .await;
    let shown = info().await;
    assert!(spent, "{shown}");
    assert_eq!(shown["eng"]["litellm_budget_table"]["max_budget"], 0.00003);
    assert_eq!(shown["eng"]["litellm_budget_table"]["soft_budget"], 0.00001);
    assert_eq!(
        shown["eng"]["litellm_budget_table"]["budget_duration"],
        "30d"
    );
    assert!(shown["eng"]["budget_reset_at"].is_string(), "{shown}");
    // Raised: served again.
    let raised = admin(
        &gw,
        "POST",
        "/tag/update",
        json!({"name": "eng", "max_budget": 10.0}),
    )
    .await;
    assert_eq!(raised.status, 200, "{}", raised.text());
    assert_eq!(
        raised.json()["tag"]["litellm_budget_table"]["max_budget"],
        10.0
    );
    assert_eq!(tagged(&gw, &key, r#"["eng"]"#).await.status, 200);
    // Spend set back to zero through the API.
    let reset = admin(
        &gw,
        "POST",
        "/tag/update",
        json!({"name": "eng", "spend": 0}),
    )
    .await;
    assert_eq!(reset.status, 200, "{}", reset.text());
    assert_eq!(reset.json()["tag"]["spend"], 0.0);

    // The list: stored tags with their budgets, then the tags only requests named.
    let list = admin(&gw, "GET", "/tag/list", Value::Null).await;
    assert_eq!(list.status, 200, "{}", list.text());
    let names: Vec<String> = list
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    let seen = eventually(PATIENCE, || async {
        admin(&gw, "GET", "/tag/list", Value::Null)
            .await
            .text()
            .contains("\"other\"")
    })
    .await;
    assert!(seen, "{names:?}");
    let list = admin(&gw, "GET", "/tag/list", Value::Null).await.json();
    let other = list
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "other")
        .unwrap()
        .clone();
    assert!(
        other["description"]
            .as_str()
            .unwrap()
            .contains("dynamically"),
        "{other}"
    );
    assert!(other["created_at"].is_string(), "{other}");
    assert_eq!(list[0]["name"], "burst", "{list}");
    assert_eq!(list[0]["litellm_budget_table"]["rpm_limit"], 5, "{list}");

    // Mistakes are the client's, and say which field.
    let again = admin(&gw, "POST", "/tag/new", json!({"name": "eng"})).await;
    assert_eq!(again.status, 409, "{}", again.text());
    let nameless = admin(&gw, "POST", "/tag/new", json!({"max_budget": 1})).await;
    assert_eq!(nameless.status, 400, "{}", nameless.text());
    assert_eq!(nameless.json()["error"]["param"], "name");
    let typo = admin(
        &gw,
        "POST",
        "/tag/new",
        json!({"name": "x", "max_budjet": 1}),
    )
    .await;
    assert_eq!(typo.status, 400, "{}", typo.text());
    assert_eq!(typo.json()["error"]["param"], "max_budjet");
    let missing = admin(&gw, "POST", "/tag/info", json!({"names": ["eng", "nope"]})).await;
    assert_eq!(missing.status, 404, "{}", missing.text());
    assert!(missing.text().contains("nope"), "{}", missing.text());

    // Deleted: its minute no longer holds anyone.
    let gone = admin(&gw, "POST", "/tag/delete", json!({"name": "burst"})).await;
    assert_eq!(gone.status, 200, "{}", gone.text());
    let (ok, _) = burst(&gw, &[MASTER, &key], r#"["burst"]"#, 8).await;
    assert_eq!(ok, 8, "a deleted tag limits nothing");
    let twice = admin(&gw, "POST", "/tag/delete", json!({"name": "burst"})).await;
    assert_eq!(twice.status, 404, "{}", twice.text());
}

/// Two instances on one PostgreSQL and one Redis: a tag's rate limit holds across both, and a
/// tag deleted on one stops holding requests on the other.
#[tokio::test]
async fn two_instances_share_a_tags_limit_and_its_deletion() {
    let (Some(server), Some(redis)) = (postgres_server("SLUICE_TEST_POSTGRES_URL"), redis_server())
    else {
        return;
    };
    let db = postgres_database(&server).await;
    let cfg = budget_config(Some(&db), Some(&redis));
    let a = gateway(&cfg).await;
    let b = gateway(&cfg).await;
    on_redis(&[&a, &b]).await;
    // Redis outlives a run: a name of this run's own starts a fresh minute.
    let name = format!("fleet-{}", std::process::id());
    let tags = format!(r#"["{name}"]"#);
    let made = admin(
        &a,
        "POST",
        "/tag/new",
        json!({"name": name, "rpm_limit": 4}),
    )
    .await;
    assert_eq!(made.status, 200, "{}", made.text());
    // The other instance's directory takes the tag from the store's poll (every 0.5 s).
    let known = eventually(PATIENCE, || async {
        b.state
            .gate()
            .directory()
            .holder(sluice_core::limits::SubjectKind::Tag, &name)
            .is_some()
    })
    .await;
    assert!(known, "the other instance knows the tag");
    let mut ok = 0;
    for _ in 0..4 {
        ok += usize::from(tagged(&a, MASTER, &tags).await.status == 200);
        ok += usize::from(tagged(&b, MASTER, &tags).await.status == 200);
    }
    assert_eq!(ok, 4, "rpm_limit 4 across both instances");
    let gone = admin(&a, "POST", "/tag/delete", json!({"name": name})).await;
    assert_eq!(gone.status, 200, "{}", gone.text());
    let freed = eventually(PATIENCE, || async {
        tagged(&b, MASTER, &tags).await.status == 200
    })
    .await;
    assert!(freed, "the other instance dropped the deleted tag's limit");
}
