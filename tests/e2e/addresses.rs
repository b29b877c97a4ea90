//! Who may call, by address: the gateway's `general_settings.allowed_ips` (with
//! `use_x_forwarded_for` and `trusted_proxy_ranges` behind proxies), and a key's or team's
//! `metadata.allowed_ips`, end to end through the real server on loopback.
use crate::common::*;
use serde_json::{json, Value};

const MASTER: &str = "sk-master-addresses";

fn config(general: &str) -> String {
    format!(
        r#"
model_list:
  - model_name: cheap
    litellm_params:
      model: mock/cheap
  - model_name: other
    litellm_params:
      model: mock/other
general_settings:
  master_key: {MASTER}
{general}"#
    )
}

async fn chat(gw: &Gateway, key: &str, forwarded_for: Option<&str>) -> Answer {
    chat_model(gw, key, "cheap", forwarded_for).await
}

async fn chat_model(gw: &Gateway, key: &str, model: &str, forwarded_for: Option<&str>) -> Answer {
    let xff: Vec<(&str, &str)> = forwarded_for
        .map(|f| ("x-forwarded-for", f))
        .into_iter()
        .collect();
    chat_as(gw, key, model, "", &xff).await
}

fn refused(a: &Answer, whose: &str) {
    assert_eq!(a.status, 403, "{}", a.text());
    let e = &a.json()["error"];
    assert_eq!(e["code"], "ip_not_allowed");
    assert_eq!(e["type"], "permission_error");
    let message = e["message"].as_str().unwrap();
    assert!(
        message.starts_with("Access forbidden: IP address not allowed"),
        "{message}"
    );
    assert!(message.contains(whose), "{message}");
}

#[tokio::test]
async fn the_gateways_list_admits_listed_clients_only_and_spares_health_probes() {
    let closed = gateway(&config("  allowed_ips: [\"10.9.9.9\", \"192.0.2.0/24\"]\n")).await;
    refused(&chat(&closed, MASTER, None).await, "the gateway's");
    assert_eq!(get(&closed.url("/health/liveliness")).await.status, 200);
    assert_eq!(get(&closed.url("/health/readiness")).await.status, 200);
    // A client cannot talk its way in with a header the gateway does not believe.
    refused(
        &chat(&closed, MASTER, Some("10.9.9.9")).await,
        "the gateway's",
    );

    let open = gateway(&config("  allowed_ips: [\"127.0.0.0/8\", \"::1\"]\n")).await;
    assert_eq!(chat(&open, MASTER, None).await.status, 200);
}

#[tokio::test]
async fn behind_proxies_the_client_is_read_past_trusted_hops_only() {
    // One hop: the peer is the proxy, the client the address it appended.
    let one = gateway(&config(
        "  allowed_ips: [\"203.0.113.7\"]\n  use_x_forwarded_for: true\n",
    ))
    .await;
    assert_eq!(chat(&one, MASTER, Some("203.0.113.7")).await.status, 200);
    refused(
        &chat(&one, MASTER, Some("203.0.113.7, 198.51.100.1")).await,
        "the gateway's",
    );
    refused(&chat(&one, MASTER, None).await, "the gateway's");
    refused(
        &chat(&one, MASTER, Some("not an address")).await,
        "the gateway's",
    );

    // Trusted ranges: walk past the load balancers, not past what the client wrote.
    let lb = gateway(&config(
        "  allowed_ips: [\"203.0.113.7\"]\n  use_x_forwarded_for: true\n  \
         trusted_proxy_ranges: [\"127.0.0.0/8\", \"198.51.100.0/24\"]\n",
    ))
    .await;
    assert_eq!(
        chat(&lb, MASTER, Some("203.0.113.7, 198.51.100.1"))
            .await
            .status,
        200
    );
    refused(
        &chat(&lb, MASTER, Some("203.0.113.7, 192.0.2.66")).await,
        "the gateway's",
    );
}

#[tokio::test]
async fn a_keys_and_a_teams_lists_hold_on_every_route() {
    let gw = gateway(&config("")).await;
    let admin = |path: &'static str, body: Value| {
        let gw = &gw;
        async move { admin_as(gw, MASTER, "POST", path, body).await }
    };
    let key = |a: Answer| {
        assert_eq!(a.status, 200, "{}", a.text());
        a.json()["key"].as_str().unwrap().to_owned()
    };
    let elsewhere = key(admin(
        "/key/generate",
        json!({"metadata": {"allowed_ips": ["10.0.0.0/8"]}}),
    )
    .await);
    let here = key(admin(
        "/key/generate",
        json!({"metadata": {"allowed_ips": ["127.0.0.1", "::1"]}}),
    )
    .await);
    let free = key(admin("/key/generate", json!({})).await);
    refused(&chat(&gw, &elsewhere, None).await, "the key's");
    assert_eq!(chat(&gw, &here, None).await.status, 200);
    assert_eq!(chat(&gw, &free, None).await.status, 200);
    // Other routes authenticate the same way.
    let models = send(
        "GET",
        &gw.url("/v1/models"),
        "",
        &[("authorization", &format!("Bearer {elsewhere}"))],
    )
    .await;
    refused(&models, "the key's");
    // Requests sluice makes on the client's behalf carry its address.
    assert_eq!(
        chat_model(&gw, &here, "cheap,other", None).await.status,
        200,
        "several models"
    );

    let team = admin_as(
        &gw,
        MASTER,
        "POST",
        "/team/new",
        json!({"team_id": "t-far", "metadata": {"allowed_ips": ["10.0.0.0/8"]}}),
    )
    .await;
    assert_eq!(team.status, 200, "{}", team.text());
    let member = key(admin("/key/generate", json!({"team_id": "t-far"})).await);
    refused(&chat(&gw, &member, None).await, "the team's");
    // The master key is not held to keys' lists.
    assert_eq!(chat(&gw, MASTER, None).await.status, 200);

    let bad = admin(
        "/key/generate",
        json!({"metadata": {"allowed_ips": ["the office"]}}),
    )
    .await;
    assert_eq!(bad.status, 400, "{}", bad.text());
    assert_eq!(bad.json()["error"]["param"], "metadata.allowed_ips");
}
