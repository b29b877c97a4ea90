//! Virtual keys on the request path, end to end through the real server: model access,
//! refusals, rate limits with `x-ratelimit-*` headers, budgets with spend headers, end-user
//! budgets, streams charged when they end, and the concurrent-overspend bound. Keys are put
//! into the gateway's directory directly here; tests/e2e/admin.rs creates them through the API.

use crate::common::*;
use sluice::auth::{digest, ModelAccess, Stored};
use sluice_core::limits::{nanos, Limits, SubjectKind};

const MASTER: &str = "sk-master-1234";

fn config(extra_params: &str) -> String {
    format!(
        r#"
model_list:
  - model_name: cheap
    litellm_params:
      model: mock/cheap
      input_cost_per_token: 0.000001
      output_cost_per_token: 0.000002
      {extra_params}
  - model_name: other
    litellm_params:
      model: mock/other
general_settings:
  master_key: {MASTER}
"#
    )
}

struct KeySpec<'a> {
    key: &'a str,
    team: Option<&'a str>,
    user: Option<&'a str>,
    models: &'a [&'a str],
    limits: Limits,
    spend: f64,
    blocked: bool,
    expires_ms: Option<u64>,
}

impl Default for KeySpec<'_> {
    fn default() -> Self {
        Self {
            key: "sk-test",
            team: None,
            user: None,
            models: &[],
            limits: Limits::default(),
            spend: 0.0,
            blocked: false,
            expires_ms: None,
        }
    }
}

fn put_key(gw: &Gateway, k: KeySpec<'_>) {
    let models: Vec<String> = k.models.iter().map(|m| m.to_string()).collect();
    gw.state.gate().directory().put_key(
        digest(k.key),
        Some("alias"),
        k.expires_ms,
        k.blocked,
        ModelAccess::from_list(&models),
        k.team,
        k.user,
        &Stored {
            limits: k.limits,
            spend: nanos(k.spend),
            window_end_ms: None,
            ..Stored::default()
        },
    );
}

async fn chat(gw: &Gateway, key: &str, model: &str, extra: &str) -> Answer {
    let body =
        format!(r#"{{"model":"{model}","messages":[{{"role":"user","content":"hi"}}]{extra}}}"#);
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

#[tokio::test]
async fn unknown_blocked_expired_and_model_access() {
    let gw = gateway(&config("")).await;
    put_key(
        &gw,
        KeySpec {
            key: "sk-only-cheap",
            models: &["cheap"],
            ..KeySpec::default()
        },
    );
    put_key(
        &gw,
        KeySpec {
            key: "sk-blocked",
            blocked: true,
            ..KeySpec::default()
        },
    );
    put_key(
        &gw,
        KeySpec {
            key: "sk-expired",
            expires_ms: Some(1),
            ..KeySpec::default()
        },
    );
    assert_eq!(chat(&gw, "sk-only-cheap", "cheap", "").await.status, 200);
    assert_eq!(chat(&gw, MASTER, "other", "").await.status, 200);
    let denied = chat(&gw, "sk-only-cheap", "other", "").await;
    assert_eq!(denied.status, 401);
    assert_eq!(denied.json()["error"]["code"], "model_not_allowed");
    assert_eq!(denied.json()["error"]["param"], "model");
    for (key, code) in [
        ("sk-nobody", "invalid_api_key"),
        ("sk-blocked", "key_blocked"),
        ("sk-expired", "key_expired"),
    ] {
        let a = chat(&gw, key, "cheap", "").await;
        assert_eq!(a.status, 401, "{key}");
        assert_eq!(a.json()["error"]["code"], code, "{key}");
        assert_eq!(a.json()["error"]["type"], "authentication_error");
        assert!(!a.text().contains(key), "the key is never echoed");
    }
}

#[tokio::test]
async fn rpm_limit_answers_429_with_ratelimit_headers() {
    let gw = gateway(&config("")).await;
    put_key(
        &gw,
        KeySpec {
            key: "sk-rpm",
            limits: Limits {
                rpm: Some(2),
                ..Limits::default()
            },
            ..KeySpec::default()
        },
    );
    let first = chat(&gw, "sk-rpm", "cheap", "").await;
    assert_eq!(first.status, 200);
    assert_eq!(first.header("x-ratelimit-limit-requests"), Some("2"));
    assert_eq!(first.header("x-ratelimit-remaining-requests"), Some("1"));
    assert_eq!(chat(&gw, "sk-rpm", "cheap", "").await.status, 200);
    let refused = chat(&gw, "sk-rpm", "cheap", "").await;
    assert_eq!(refused.status, 429);
    assert_eq!(refused.json()["error"]["code"], "rpm_limit_exceeded");
    assert_eq!(refused.json()["error"]["type"], "rate_limit_error");
    assert_eq!(refused.header("x-ratelimit-remaining-requests"), Some("0"));
    let wait: u64 = refused.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=60).contains(&wait));
    // The master key is not limited.
    assert_eq!(chat(&gw, MASTER, "cheap", "").await.status, 200);
}

#[tokio::test]
async fn team_tpm_and_parallel_limits() {
    let gw = gateway(&config("mock_latency_ms: 300")).await;
    let dir = gw.state.gate().directory();
    dir.put_holder(
        SubjectKind::Team,
        "team-a",
        false,
        ModelAccess::All,
        &Stored {
            limits: Limits {
                max_parallel: Some(1),
                ..Limits::default()
            },
            ..Stored::default()
        },
    );
    put_key(
        &gw,
        KeySpec {
            key: "sk-team-1",
            team: Some("team-a"),
            ..KeySpec::default()
        },
    );
    put_key(
        &gw,
        KeySpec {
            key: "sk-team-2",
            team: Some("team-a"),
            ..KeySpec::default()
        },
    );
    // Two keys of one team: the team's single parallel slot admits one at a time. The second
    // is sent once the first holds the slot (its upstream call under way, 300 ms long).
    let addr = gw.addr.to_string();
    let (a, b) = tokio::join!(chat(&gw, "sk-team-1", "cheap", ""), async {
        until_in_flight(&addr, MASTER, 1).await;
        chat(&gw, "sk-team-2", "cheap", "").await
    });
    assert_eq!(a.status, 200);
    assert_eq!(b.status, 429);
    assert_eq!(b.json()["error"]["code"], "parallel_request_limit_exceeded");
    // The slot is back once the first finished.
    assert_eq!(chat(&gw, "sk-team-2", "cheap", "").await.status, 200);

    // Tokens per minute: counted when requests end, refused once the minute is used up.
    put_key(
        &gw,
        KeySpec {
            key: "sk-tpm",
            limits: Limits {
                tpm: Some(10),
                ..Limits::default()
            },
            ..KeySpec::default()
        },
    );
    let first = chat(&gw, "sk-tpm", "other", "").await;
    assert_eq!(first.status, 200);
    assert!(first.json()["usage"]["total_tokens"].as_u64().unwrap() >= 10);
    let refused = chat(&gw, "sk-tpm", "other", "").await;
    assert_eq!(refused.status, 429);
    assert_eq!(refused.json()["error"]["code"], "tpm_limit_exceeded");
    assert_eq!(refused.header("x-ratelimit-limit-tokens"), Some("10"));
}

#[tokio::test]
async fn budgets_spend_headers_and_end_users() {
    let mut gw = gateway(&config("")).await;
    put_key(
        &gw,
        KeySpec {
            key: "sk-budget",
            limits: Limits {
                max_budget: Some(nanos(0.000_05)),
                ..Limits::default()
            },
            ..KeySpec::default()
        },
    );
    let a = chat(&gw, "sk-budget", "cheap", "").await;
    assert_eq!(a.status, 200);
    let u = &a.json()["usage"];
    let expected = u["prompt_tokens"].as_f64().unwrap() * 1e-6
        + u["completion_tokens"].as_f64().unwrap() * 2e-6;
    let cost: f64 = a.header("x-sluice-response-cost").unwrap().parse().unwrap();
    assert!((cost - expected).abs() < 1e-9, "cost {cost} vs {expected}");
    let spend: f64 = a.header("x-sluice-key-spend").unwrap().parse().unwrap();
    assert!(
        spend <= cost + 1e-12,
        "spend before this request is charged"
    );
    let record = gw.next_record().await;
    assert_eq!(record.cost, Some(nanos(expected)));
    assert_eq!(
        record.key.as_ref().map(|k| &*k.hash),
        Some(&*sluice_core::trace_context::hex(&digest("sk-budget")))
    );
    // Spend until refused.
    let mut refused = None;
    for _ in 0..100 {
        let r = chat(&gw, "sk-budget", "cheap", "").await;
        if r.status != 200 {
            refused = Some(r);
            break;
        }
    }
    let r = refused.expect("the budget runs out");
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["type"], "budget_exceeded");
    assert_eq!(r.json()["error"]["code"], "budget_exceeded");

    // An end user's own budget, named by the request's `user` field.
    gw.state.gate().directory().put_holder(
        SubjectKind::EndUser,
        "customer-7",
        false,
        ModelAccess::All,
        &Stored {
            limits: Limits {
                max_budget: Some(nanos(0.000_001)),
                ..Limits::default()
            },
            spend: nanos(0.000_001),
            window_end_ms: None,
            ..Stored::default()
        },
    );
    put_key(
        &gw,
        KeySpec {
            key: "sk-free",
            ..KeySpec::default()
        },
    );
    assert_eq!(chat(&gw, "sk-free", "cheap", "").await.status, 200);
    let r = chat(&gw, "sk-free", "cheap", r#","user":"customer-7""#).await;
    assert_eq!(r.status, 400);
    assert!(r.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("end user"));
}

#[tokio::test]
async fn streams_are_charged_when_they_end() {
    let gw = gateway(&config("")).await;
    put_key(
        &gw,
        KeySpec {
            key: "sk-stream",
            limits: Limits {
                max_budget: Some(nanos(100.0)),
                ..Limits::default()
            },
            ..KeySpec::default()
        },
    );
    let s = chat(&gw, "sk-stream", "cheap", r#","stream":true"#).await;
    assert_eq!(s.status, 200);
    assert!(s.text().contains("[DONE]"));
    let entry = gw
        .state
        .gate()
        .directory()
        .key(&digest("sk-stream"))
        .unwrap();
    let spent = eventually(PATIENCE, || async {
        entry.subject.counters.spent(sluice_core::limits::wall_ms()) > 0
    })
    .await;
    assert!(spent, "the stream's cost reached the key's spend");
    let after = chat(&gw, "sk-stream", "cheap", "").await;
    let header: f64 = after.header("x-sluice-key-spend").unwrap().parse().unwrap();
    assert!(header > 0.0);
}

/// 100 concurrent requests against a budget with room for about ten: the overspend stays
/// within one request's cost (docs/keys.md).
#[tokio::test]
async fn concurrent_requests_overspend_by_at_most_about_one() {
    let gw = gateway(&config("mock_latency_ms: 200")).await;
    put_key(
        &gw,
        KeySpec {
            key: "sk-burst",
            limits: Limits {
                max_budget: Some(nanos(1.0)),
                ..Limits::default()
            },
            ..KeySpec::default()
        },
    );
    // One request teaches the key its cost; then set the spend so ~10 more fit.
    let first = chat(&gw, "sk-burst", "cheap", "").await;
    let cost: f64 = first
        .header("x-sluice-response-cost")
        .unwrap()
        .parse()
        .unwrap();
    let entry = gw
        .state
        .gate()
        .directory()
        .key(&digest("sk-burst"))
        .unwrap();
    entry
        .subject
        .counters
        .set_spent(nanos(1.0) - nanos(cost * 10.0) + nanos(cost / 2.0));
    let answers =
        futures_util::future::join_all((0..100).map(|_| chat(&gw, "sk-burst", "cheap", ""))).await;
    let ok = answers.iter().filter(|a| a.status == 200).count();
    let refused = answers.iter().filter(|a| a.status == 400).count();
    assert_eq!(ok + refused, 100);
    assert!((9..=11).contains(&ok), "about ten admitted: {ok}");
    let spent = entry.subject.counters.spent(sluice_core::limits::wall_ms());
    let over = spent.saturating_sub(nanos(1.0));
    assert!(
        over <= nanos(cost * 1.5),
        "overspend {over} nanos > one request ({cost} USD)"
    );
}
