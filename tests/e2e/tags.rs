//! Tags end to end: a request's tags (`tags`, `metadata.tags`, `x-litellm-tags`) and its key's
//! route among a group's deployments by their `litellm_params.tags` with
//! `enable_tag_filtering` (LiteLLM's rules: `default`, `&`, the 401 when none is left), and
//! `/spend/tags` sums what each tag spent.
use std::time::Duration;

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
    let summed = eventually(Duration::from_secs(5), || async {
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
