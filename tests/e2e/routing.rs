//! Routing that survives provider failures, end to end: real mock servers on loopback with
//! injected faults, every attempt counted at the mock.

use std::time::{Duration, Instant};

use crate::common::*;
use sluice_mock::{Faults, MockSettings};

const CHAT: &str = r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;

fn failing(status: u16) -> MockSettings {
    MockSettings {
        faults: Faults {
            status: Some(status),
            ..Faults::default()
        },
        ..MockSettings::default()
    }
}

fn deployment(group: &str, id: &str, base: &str, extra: &str) -> String {
    format!(
        "  - model_name: {group}\n    litellm_params:\n      model: openai/up\n      api_base: {base}\n      api_key: sk-up\n{extra}    model_info:\n      id: {id}\n"
    )
}

fn config(deployments: &[String], router: &str) -> String {
    format!(
        "model_list:\n{}general_settings:\n  master_key: sk-master\nrouter_settings:\n  retry_backoff_ms: 1\n{router}",
        deployments.concat()
    )
}

fn header_num(a: &Answer, name: &str) -> u64 {
    a.header(name)
        .unwrap_or_else(|| panic!("no {name} header"))
        .parse()
        .unwrap()
}

#[tokio::test]
async fn a_failing_deployment_is_retried_elsewhere_then_cooled_down() {
    let bad = mock_server(failing(500)).await;
    let good = mock_server(MockSettings::default()).await;
    let gw = gateway(&config(
        &[
            deployment("m", "bad", &bad.base(), ""),
            deployment("m", "good", &good.base(), ""),
        ],
        "  allowed_fails: 1\n  cooldown_time: 60\n",
    ))
    .await;
    for _ in 0..10 {
        let a = post(&gw.url("/v1/chat/completions"), CHAT).await;
        assert_eq!(a.status, 200, "{}", a.text());
        assert_eq!(a.header("x-sluice-model-id"), Some("good"));
    }
    // allowed_fails: 1 → the second failure within the minute cools it down.
    assert_eq!(bad.requests().await, 2);
    assert_eq!(good.requests().await, 10);
    let health = get(&gw.url("/health")).await.json();
    let bad_state = health["deployments"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["model_id"] == "bad")
        .unwrap()
        .clone();
    assert_eq!(bad_state["state"], "cooling_down");
    assert_eq!(bad_state["last_failure"], "server");
    assert_eq!(health["unhealthy_count"], 1);
}

#[tokio::test]
async fn retries_count_exactly_as_configured() {
    let bad = mock_server(failing(503)).await;
    let gw = gateway(&config(
        &[deployment("m", "only", &bad.base(), "")],
        "  num_retries: 3\n  allowed_fails: 100\n",
    ))
    .await;
    let a = post(&gw.url("/v1/chat/completions"), CHAT).await;
    assert_eq!(a.status, 503, "the upstream's own error passes through");
    assert_eq!(header_num(&a, "x-sluice-attempted-retries"), 3);
    assert_eq!(bad.requests().await, 4, "1 attempt + 3 retries");

    // A bad request is never retried, and the request may lower num_retries itself.
    let bad_req = mock_server(failing(400)).await;
    let gw = gateway(&config(
        &[deployment("m", "only", &bad_req.base(), "")],
        "  num_retries: 3\n",
    ))
    .await;
    let a = post(&gw.url("/v1/chat/completions"), CHAT).await;
    assert_eq!(a.status, 400);
    assert_eq!(bad_req.requests().await, 1);
    let flaky = mock_server(failing(500)).await;
    let gw = gateway(&config(
        &[deployment("m", "only", &flaky.base(), "")],
        "  num_retries: 3\n  allowed_fails: 100\n  retry_policy:\n    InternalServerErrorRetries: 1\n",
    ))
    .await;
    post(&gw.url("/v1/chat/completions"), CHAT).await;
    assert_eq!(
        flaky.requests().await,
        2,
        "retry_policy overrides num_retries"
    );
}

#[tokio::test]
async fn a_cooled_single_deployment_fails_over_at_once() {
    let limited = mock_server(failing(429)).await;
    let backup = mock_server(MockSettings::default()).await;
    let gw = gateway(&config(
        &[
            deployment("m", "primary", &limited.base(), ""),
            deployment("backup", "backup", &backup.base(), ""),
        ],
        "  num_retries: 3\n  cooldown_time: 60\n  fallbacks:\n    - m: [backup]\n",
    ))
    .await;
    for _ in 0..5 {
        let a = post(&gw.url("/v1/chat/completions"), CHAT).await;
        assert_eq!(a.status, 200, "{}", a.text());
        assert_eq!(a.header("x-sluice-model-id"), Some("backup"));
        assert_eq!(header_num(&a, "x-sluice-attempted-fallbacks"), 1);
        assert_eq!(header_num(&a, "x-sluice-attempted-retries"), 0);
    }
    // One call: the 429 cooled it at once; it was never retried, and later requests skipped
    // it without a call (LiteLLM retries a single deployment num_retries times on every one).
    assert_eq!(limited.requests().await, 1);

    // Without a fallback, a cooling group answers 503 at once with Retry-After.
    let gw = gateway(&config(
        &[deployment("m", "primary", &limited.base(), "")],
        "  cooldown_time: 60\n",
    ))
    .await;
    post(&gw.url("/v1/chat/completions"), CHAT).await;
    let a = post(&gw.url("/v1/chat/completions"), CHAT).await;
    assert_eq!(a.status, 503);
    assert_eq!(a.json()["error"]["code"], "no_healthy_deployment");
    let wait: u64 = a.header("retry-after").unwrap().parse().unwrap();
    assert!((50..=60).contains(&wait), "{wait}");
}

#[tokio::test]
async fn cooldown_opens_then_a_probe_closes_it() {
    let backup = mock_server(MockSettings::default()).await;
    let yaml = format!(
        "model_list:\n  - model_name: m\n    litellm_params:\n      model: mock/a\n    model_info:\n      id: a\n{}general_settings:\n  master_key: sk-master\nrouter_settings:\n  cooldown_time: 0.3\n  fallbacks:\n    - m: [backup]\n",
        deployment("backup", "backup", &backup.base(), "")
    );
    let gw = gateway(&yaml).await;
    // The in-process mock reads the client's headers; the standalone backup does not.
    let a = send(
        "POST",
        &gw.url("/v1/chat/completions"),
        CHAT,
        &[MASTER, ("x-mock-status", "429")],
    )
    .await;
    assert_eq!(a.status, 200);
    assert_eq!(a.header("x-sluice-model-id"), Some("backup"));
    let a = post(&gw.url("/v1/chat/completions"), CHAT).await;
    assert_eq!(
        a.header("x-sluice-model-id"),
        Some("backup"),
        "a is cooling"
    );
    // Once the 0.3 s cooldown is over, a probe request goes to a and brings it back.
    let url = gw.url("/v1/chat/completions");
    let a = poll(
        PATIENCE,
        || post(&url, CHAT),
        |a| a.header("x-sluice-model-id") == Some("a"),
    )
    .await;
    assert_eq!(
        a.header("x-sluice-model-id"),
        Some("a"),
        "the probe brought a back"
    );
    assert_eq!(header_num(&a, "x-sluice-attempted-fallbacks"), 0);
    let health = get(&gw.url("/health")).await.json();
    assert_eq!(health["unhealthy_count"], 0);
}

#[tokio::test]
async fn weighted_shares_hold_over_many_requests() {
    let servers = [
        mock_server(MockSettings::default()).await,
        mock_server(MockSettings::default()).await,
        mock_server(MockSettings::default()).await,
    ];
    let deployments: Vec<String> = servers
        .iter()
        .zip([1, 2, 7])
        .enumerate()
        .map(|(i, (s, w))| {
            deployment(
                "m",
                &format!("d{i}"),
                &s.base(),
                &format!("      weight: {w}\n"),
            )
        })
        .collect();
    let gw = gateway(&config(&deployments, "")).await;
    for _ in 0..500 {
        assert_eq!(
            post(&gw.url("/v1/chat/completions"), CHAT).await.status,
            200
        );
    }
    for (s, want) in servers.iter().zip([50.0, 100.0, 350.0]) {
        let got = s.requests().await as f64;
        assert!((got - want).abs() <= want * 0.1 + 3.0, "{got} vs {want}");
    }
}

#[tokio::test]
async fn hedging_cuts_the_tail_when_one_deployment_stalls() {
    // The hedge (after 30 ms) answers long before the slow deployment would: the checks below
    // are that ordering, not bounds on the clock (the exact times are
    // crates/routing/src/dispatch.rs's paused-clock test).
    let slow_takes = Duration::from_secs(1);
    let slow = mock_server(MockSettings {
        latency: slow_takes,
        ..MockSettings::default()
    })
    .await;
    let fast = mock_server(MockSettings::default()).await;
    let deployments = [
        deployment("m", "slow", &slow.base(), ""),
        deployment("m", "fast", &fast.base(), ""),
    ];
    let gw = gateway(&config(&deployments, "  hedge_after_ms:\n    m: 30\n")).await;
    let mut worst = Duration::ZERO;
    let mut hedged = 0;
    for _ in 0..10 {
        let t = Instant::now();
        let a = post(&gw.url("/v1/chat/completions"), CHAT).await;
        worst = worst.max(t.elapsed());
        assert_eq!(a.status, 200);
        assert_eq!(a.header("x-sluice-model-id"), Some("fast"));
        if a.header("x-sluice-hedged-requests").is_some() {
            hedged += 1;
        }
    }
    assert!(
        worst < slow_takes,
        "worst {worst:?}: a request waited for the slow deployment"
    );
    assert!(
        hedged >= 3,
        "about half the requests start on the slow one: {hedged}"
    );
    // The losers were cancelled: their connections closed before the mock answered.
    let stats = poll(
        PATIENCE,
        || slow.stats(),
        |s| s["requests"].as_u64() > Some(0) && s["cancelled"] == s["requests"],
    )
    .await;
    assert_eq!(stats["answered"], 0, "{stats}");
    assert_eq!(stats["cancelled"], stats["requests"], "{stats}");

    // Without hedging the slow deployment shows in the tail.
    let gw = gateway(&config(&deployments, "")).await;
    let mut worst = Duration::ZERO;
    for _ in 0..4 {
        let t = Instant::now();
        post(&gw.url("/v1/chat/completions"), CHAT).await;
        worst = worst.max(t.elapsed());
    }
    assert!(worst >= slow_takes, "worst {worst:?}");
}

#[tokio::test]
async fn a_client_disconnect_cancels_the_upstream_call() {
    // Far longer than the test takes when the call is cancelled: had it not been, the mock
    // would answer only after this.
    let slow = mock_server(MockSettings {
        latency: Duration::from_secs(10),
        ..MockSettings::default()
    })
    .await;
    let mut gw = gateway(&config(&[deployment("m", "slow", &slow.base(), "")], "")).await;
    let url = gw.url("/v1/chat/completions");
    let call = tokio::spawn(async move { post(&url, CHAT).await });
    // The client leaves once its call has reached the upstream.
    assert!(eventually(PATIENCE, || async { slow.requests().await == 1 }).await);
    call.abort();
    let record = gw.next_record().await;
    assert_eq!(record.outcome, sluice_core::record::Outcome::ClientGone);
    let stats = poll(PATIENCE, || slow.stats(), |s| s["cancelled"] == 1).await;
    assert_eq!(stats["requests"], 1);
    assert_eq!(stats["cancelled"], 1, "{stats}");
}

#[tokio::test]
async fn streams_retry_before_the_first_byte_and_idle_streams_end_with_an_error() {
    let reset = mock_server(MockSettings {
        faults: Faults {
            reset: true,
            ..Faults::default()
        },
        ..MockSettings::default()
    })
    .await;
    let good = mock_server(MockSettings::default()).await;
    let gw = gateway(&config(
        &[
            deployment("m", "reset", &reset.base(), ""),
            deployment("m", "good", &good.base(), ""),
        ],
        "",
    ))
    .await;
    let body = r#"{"model":"m","stream":true,"messages":[]}"#;
    for _ in 0..4 {
        let a = post(&gw.url("/v1/chat/completions"), body).await;
        assert_eq!(a.status, 200);
        assert!(!a.body_error);
        assert_eq!(a.sse_data().last().map(String::as_str), Some("[DONE]"));
    }

    // The stall is far longer than the 0.2 s idle timeout: cut before it ends is an ordering.
    let stall = Duration::from_secs(10);
    let stalling = mock_server(MockSettings {
        faults: Faults {
            stall_after_chunks: Some(2),
            stall,
            ..Faults::default()
        },
        ..MockSettings::default()
    })
    .await;
    let gw = gateway(&config(
        &[deployment(
            "m",
            "stall",
            &stalling.base(),
            "      stream_idle_timeout: 0.2\n",
        )],
        "",
    ))
    .await;
    let t = Instant::now();
    let a = post(&gw.url("/v1/chat/completions"), body).await;
    assert!(t.elapsed() < stall, "{:?}", t.elapsed());
    assert!(a.body_error, "the stream is cut, not completed");
    let last = a.sse_data().last().cloned().unwrap();
    assert!(
        last.contains("no complete event from the upstream"),
        "{last}"
    );
}

#[tokio::test]
async fn a_burst_with_random_failures_never_hangs() {
    let mut servers = Vec::new();
    let mut deployments = Vec::new();
    for i in 0..3 {
        let s = mock_server(MockSettings {
            faults: Faults {
                status: Some(500),
                failure_rate: Some(0.1),
                ..Faults::default()
            },
            ..MockSettings::default()
        })
        .await;
        deployments.push(deployment("m", &format!("d{i}"), &s.base(), ""));
        servers.push(s);
    }
    let gw = gateway(&config(&deployments, "  allowed_fails: 1000\n")).await;
    let url = gw.url("/v1/chat/completions");
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..1000 {
        let url = url.clone();
        tasks.spawn(async move {
            tokio::time::timeout(Duration::from_secs(20), post(&url, CHAT))
                .await
                .expect("no request hangs")
        });
    }
    let (mut ok, mut failed, mut retries) = (0u64, 0u64, 0u64);
    while let Some(a) = tasks.join_next().await {
        let a = a.unwrap();
        retries += header_num(&a, "x-sluice-attempted-retries");
        match a.status.as_u16() {
            200 => ok += 1,
            500 => {
                // The documented rule: a request fails only when every attempt failed.
                assert_eq!(header_num(&a, "x-sluice-attempted-retries"), 2);
                failed += 1;
            }
            other => panic!("unexpected status {other}: {}", a.text()),
        }
    }
    assert_eq!(ok + failed, 1000);
    assert!(failed <= 10, "{failed} requests failed all three attempts");
    let mut at_mocks = 0;
    for s in &servers {
        at_mocks += s.requests().await;
    }
    assert_eq!(
        at_mocks,
        1000 + retries,
        "every attempt reached a mock exactly once"
    );
}

#[tokio::test]
async fn with_finish_a_client_disconnect_lets_the_upstream_call_complete() {
    // Long enough for the client to leave while the call is under way.
    let slow = mock_server(MockSettings {
        latency: Duration::from_secs(1),
        ..MockSettings::default()
    })
    .await;
    let mut gw = gateway(&config(
        &[deployment("m", "slow", &slow.base(), "")],
        "  on_client_disconnect: finish\n",
    ))
    .await;
    let url = gw.url("/v1/chat/completions");
    let call = tokio::spawn(async move { post(&url, CHAT).await });
    // The client leaves once its call has reached the upstream.
    assert!(eventually(PATIENCE, || async { slow.requests().await == 1 }).await);
    call.abort();
    let record = gw.next_record().await;
    assert_eq!(record.status, 200, "the call finished without its client");
    assert!(record.usage.is_some(), "and its usage was recorded");
    let stats = slow.stats().await;
    assert_eq!(stats["answered"], 1, "{stats}");
}

#[tokio::test]
async fn context_window_and_request_fallbacks() {
    let short = recording(Reply::Json(
        400,
        r#"{"error":{"message":"This model's maximum context length is 8192 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
    ))
    .await;
    let long = mock_server(MockSettings::default()).await;
    let other = mock_server(MockSettings::default()).await;
    let gw = gateway(&config(
        &[
            deployment("m", "short", &short.base(), ""),
            deployment("m-long", "long", &long.base(), ""),
            deployment("other", "other", &other.base(), ""),
        ],
        "  context_window_fallbacks:\n    - m: [m-long]\n",
    ))
    .await;
    let a = post(&gw.url("/v1/chat/completions"), CHAT).await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(a.header("x-sluice-model-id"), Some("long"));
    assert_eq!(
        short.requests().len(),
        1,
        "a context-window error is not retried"
    );
    // The request's own `fallbacks` do not replace the kind-specific list...
    let body = r#"{"model":"m","messages":[],"fallbacks":["other"],"num_retries":0}"#;
    let a = post(&gw.url("/v1/chat/completions"), body).await;
    assert_eq!(a.header("x-sluice-model-id"), Some("long"));
    // ...but serve any other failure, and never reach the upstream themselves.
    let failing_up = mock_server(failing(500)).await;
    let gw = gateway(&config(
        &[
            deployment("m", "bad", &failing_up.base(), ""),
            deployment("other", "other", &other.base(), ""),
        ],
        "",
    ))
    .await;
    let a = post(&gw.url("/v1/chat/completions"), body).await;
    assert_eq!(a.status, 200);
    assert_eq!(a.header("x-sluice-model-id"), Some("other"));
    assert_eq!(
        failing_up.requests().await,
        1,
        "num_retries: 0 from the body"
    );
    let seen = short.requests();
    assert_eq!(seen.len(), 2);
    let sent: serde_json::Value = serde_json::from_slice(&seen[1].body).unwrap();
    assert_eq!(sent["model"], "up");
    assert!(sent.get("fallbacks").is_none() && sent.get("num_retries").is_none());
}

#[tokio::test]
async fn several_keys_per_deployment_share_its_requests_by_weight() {
    let up = recording(Reply::Json(
        200,
        r#"{"usage":{"prompt_tokens":1,"completion_tokens":1}}"#,
    ))
    .await;
    let yaml = format!(
        "model_list:\n  - model_name: m\n    litellm_params:\n      model: openai/up\n      api_base: {}\n      api_key:\n        - {{key: sk-first, weight: 3}}\n        - sk-second\ngeneral_settings:\n  master_key: sk-master\n",
        up.base()
    );
    let gw = gateway(&yaml).await;
    for _ in 0..200 {
        assert_eq!(
            post(&gw.url("/v1/chat/completions"), CHAT).await.status,
            200
        );
    }
    let first = up
        .requests()
        .iter()
        .filter(|c| c.headers["authorization"] == "Bearer sk-first")
        .count();
    assert!(
        (140..=160).contains(&first),
        "{first} of 200 with the 3:1 key"
    );
}

#[tokio::test]
async fn every_attempt_is_recorded_with_its_deployment_and_outcome() {
    use sluice_core::record::AttemptEnd;
    let bad = mock_server(failing(500)).await;
    let slow = mock_server(MockSettings {
        latency: Duration::from_millis(400),
        ..MockSettings::default()
    })
    .await;
    let good = mock_server(MockSettings::default()).await;
    let mut gw = gateway(&config(
        &[
            deployment("r", "bad", &bad.base(), "      weight: 1000000\n"),
            deployment("r", "good", &good.base(), ""),
            deployment("h", "slow", &slow.base(), "      weight: 1000000\n"),
            deployment("h", "fast", &good.base(), ""),
        ],
        "  allowed_fails: 1000\n  hedge_after_ms:\n    h: 30\n",
    ))
    .await;
    let retried = r#"{"model":"r","messages":[{"role":"user","content":"hi"}]}"#;
    let a = post(&gw.url("/v1/chat/completions"), retried).await;
    assert_eq!(a.status, 200);
    let rec = gw.next_record().await;
    let seen: Vec<_> = rec
        .attempts
        .iter()
        .map(|a| (&*a.target.id, a.result, a.hedge))
        .collect();
    assert_eq!(
        seen,
        [
            ("bad", AttemptEnd::Failed("server"), false),
            ("good", AttemptEnd::Ok, false)
        ]
    );
    assert!(rec.attempts[0].end.unwrap() <= rec.attempts[1].start);
    assert_ne!(rec.attempts[0].span_id, rec.attempts[1].span_id);
    // Tracing is off in this config: no trace ids are made.
    assert!(rec.trace.is_none());

    let hedged = r#"{"model":"h","messages":[{"role":"user","content":"hi"}]}"#;
    let a = post(&gw.url("/v1/chat/completions"), hedged).await;
    assert_eq!(a.header("x-sluice-hedged-requests"), Some("1"));
    let rec = gw.next_record().await;
    let seen: Vec<_> = rec
        .attempts
        .iter()
        .map(|a| (&*a.target.id, a.result, a.hedge))
        .collect();
    assert_eq!(
        seen,
        [
            ("slow", AttemptEnd::Cancelled, false),
            ("fast", AttemptEnd::Ok, true)
        ]
    );
}

/// A deployment whose provider needs a key the config does not give is "not configured" in
/// `/health` (and so in the console), never counted healthy: nothing sent to it could succeed.
#[tokio::test]
async fn a_deployment_without_its_key_is_not_configured_in_health() {
    let up = mock_server(MockSettings::default()).await;
    let yaml = format!(
        "model_list:\n  - model_name: m\n    litellm_params: {{model: openai/m, api_base: \"{}\", api_key: sk-up}}\n    model_info: {{id: keyed}}\n  - model_name: fast\n    litellm_params: {{model: groq/llama-3.3-70b-versatile}}\n    model_info: {{id: keyless}}\n",
        up.base()
    );
    let gw = gateway(&yaml).await;
    let health = get(&gw.url("/health")).await.json();
    let state = |id: &str| {
        health["deployments"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["model_id"] == id)
            .unwrap()["state"]
            .clone()
    };
    assert_eq!(state("keyless"), "not_configured", "{health}");
    assert_eq!(state("keyed"), "healthy", "{health}");
    assert_eq!(health["healthy_count"], 1);
    assert_eq!(health["unhealthy_count"], 1);
    // Nothing is sent without its key: LiteLLM's 401, naming what to set (never a value).
    let body = r#"{"model":"fast","messages":[{"role":"user","content":"hi"}]}"#;
    let a = post(&gw.url("/v1/chat/completions"), body).await;
    assert_eq!(a.status, 401, "{}", a.text());
    assert_eq!(a.json()["error"]["code"], "deployment_not_configured");
    assert_eq!(a.json()["error"]["type"], "authentication_error");
    assert!(a.text().contains("GROQ_API_KEY"), "{}", a.text());
}

/// In a group with a keyless deployment beside a keyed one, every request is served by the
/// keyed one: the keyless one fails at once, without a call, and the routing moves on.
#[tokio::test]
async fn a_keyless_deployment_in_a_group_is_passed_over() {
    let up = mock_server(MockSettings::default()).await;
    let yaml = format!(
        "model_list:\n  - model_name: m\n    litellm_params: {{model: openai/m, api_base: \"{}\", api_key: sk-up}}\n    model_info: {{id: keyed}}\n  - model_name: m\n    litellm_params: {{model: groq/llama-3.3-70b-versatile}}\n    model_info: {{id: keyless}}\n",
        up.base()
    );
    let gw = gateway(&yaml).await;
    for _ in 0..6 {
        let a = post(&gw.url("/v1/chat/completions"), CHAT).await;
        assert_eq!(a.status, 200, "{}", a.text());
        assert_eq!(a.header("x-sluice-model-id"), Some("keyed"));
    }
    assert_eq!(up.requests().await, 6);
}
