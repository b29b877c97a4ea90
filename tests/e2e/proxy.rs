//! End-to-end: the gateway in front of the mock provider (over HTTP and in process) and a
//! recording upstream, on ephemeral loopback ports.
use std::time::{Duration, Instant};

use crate::common::*;
use sluice_core::record::Outcome;
use sluice_mock::MockSettings;

fn config(mock_base: &str, extra: &str) -> String {
    format!(
        r#"
model_list:
  - model_name: gpt-test
    litellm_params:
      model: openai/gpt-upstream
      api_base: {mock_base}
      api_key: sk-upstream-secret
  - model_name: inproc
    litellm_params:
      model: mock/inproc-model
  - model_name: embed
    litellm_params:
      model: openai/text-embedding-3-small
      api_base: {mock_base}
{extra}
general_settings:
  master_key: sk-master
"#
    )
}

async fn setup() -> (MockServer, Gateway) {
    let mock = mock_server(MockSettings::default()).await;
    let gw = gateway(&config(&mock.base(), "")).await;
    (mock, gw)
}

#[tokio::test]
async fn chat_non_stream_through_http_upstream() {
    let (_mock, mut gw) = setup().await;
    let a = post(
        &gw.url("/v1/chat/completions"),
        r#"{"model":"gpt-test","messages":[{"role":"user","content":"hello there"}]}"#,
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let v = a.json();
    assert_eq!(v["object"], "chat.completion");
    assert!(
        v["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .len()
            > 1
    );
    assert!(a.header("x-sluice-model-id").is_some());
    assert!(a.header("x-request-id").is_some());
    let overhead: f64 = a
        .header("x-sluice-overhead-duration-ms")
        .unwrap()
        .parse()
        .unwrap();
    let total: f64 = a
        .header("x-sluice-response-duration-ms")
        .unwrap()
        .parse()
        .unwrap();
    assert!(overhead >= 0.0 && overhead <= total, "{overhead} {total}");
    let rec = gw.next_record().await;
    assert_eq!(rec.status, 200);
    assert_eq!(rec.model.as_deref(), Some("gpt-test"));
    let usage = rec.usage.expect("usage recorded");
    assert_eq!(
        usage.completion_tokens,
        v["usage"]["completion_tokens"].as_u64().unwrap()
    );
    assert_eq!(
        usage.prompt_tokens,
        v["usage"]["prompt_tokens"].as_u64().unwrap()
    );
}

#[tokio::test]
async fn routes_without_v1_prefix() {
    let (_mock, gw) = setup().await;
    let a = post(
        &gw.url("/chat/completions"),
        r#"{"model":"gpt-test","messages":[]}"#,
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(get(&gw.url("/models")).await.status, 200);
}

#[tokio::test]
async fn chat_stream_in_order_without_the_usage_chunk_sluice_asked_for() {
    let (_mock, mut gw) = setup().await;
    let a = post(
        &gw.url("/v1/chat/completions"),
        r#"{"model":"gpt-test","stream":true,"messages":[{"role":"user","content":"hi"}]}"#,
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert!(a
        .header("content-type")
        .is_some_and(|c| c.starts_with("text/event-stream")));
    assert_eq!(a.header("cache-control"), Some("no-cache"));
    assert_eq!(a.header("x-accel-buffering"), Some("no"));
    let data = a.sse_data();
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
    let chunks: Vec<serde_json::Value> = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    assert!(chunks.len() >= 3);
    assert!(chunks
        .iter()
        .all(|c| c["object"] == "chat.completion.chunk"));
    assert!(
        chunks
            .iter()
            .all(|c| !c["choices"].as_array().unwrap().is_empty()),
        "the usage-only chunk must be stripped"
    );
    assert_eq!(
        chunks.last().unwrap()["choices"][0]["finish_reason"],
        "stop"
    );
    let rec = gw.next_record().await;
    assert_eq!(rec.outcome, Outcome::StreamComplete);
    assert!(
        rec.usage
            .expect("usage read from the stream")
            .completion_tokens
            > 0
    );
    assert!(rec.ttfb.is_some());
}

#[tokio::test]
async fn chat_stream_keeps_usage_when_client_asks() {
    let (_mock, mut gw) = setup().await;
    let a = post(
        &gw.url("/v1/chat/completions"),
        r#"{"model":"gpt-test","stream":true,"stream_options":{"include_usage":true},"messages":[]}"#,
    )
    .await;
    let data = a.sse_data();
    let usage_chunk: serde_json::Value = serde_json::from_str(&data[data.len() - 2]).unwrap();
    assert_eq!(usage_chunk["choices"].as_array().unwrap().len(), 0);
    assert!(usage_chunk["usage"]["completion_tokens"].as_u64().unwrap() > 0);
    assert!(gw.next_record().await.usage.is_some());
}

#[tokio::test]
async fn completions_embeddings_and_responses() {
    let (_mock, mut gw) = setup().await;
    let a = post(
        &gw.url("/v1/completions"),
        r#"{"model":"gpt-test","prompt":"Say hi"}"#,
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(a.json()["object"], "text_completion");
    gw.next_record().await;

    let a = post(
        &gw.url("/v1/embeddings"),
        r#"{"model":"embed","input":["a b","c"]}"#,
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(a.json()["data"].as_array().unwrap().len(), 2);
    assert!(gw.next_record().await.usage.unwrap().prompt_tokens > 0);

    let a = post(
        &gw.url("/v1/responses"),
        r#"{"model":"gpt-test","input":"hello"}"#,
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(a.json()["object"], "response");
    assert!(gw.next_record().await.usage.unwrap().completion_tokens > 0);

    let a = post(
        &gw.url("/v1/responses"),
        r#"{"model":"gpt-test","input":"hello","stream":true}"#,
    )
    .await;
    assert_eq!(a.status, 200);
    assert!(a.text().contains("event: response.completed"));
    let rec = gw.next_record().await;
    assert_eq!(rec.outcome, Outcome::StreamComplete);
    assert!(rec.usage.unwrap().completion_tokens > 0);
}

#[tokio::test]
async fn in_process_mock_deployment() {
    let (_mock, mut gw) = setup().await;
    let a = post(
        &gw.url("/v1/chat/completions"),
        r#"{"model":"inproc","messages":[]}"#,
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(a.json()["object"], "chat.completion");
    let a = post(
        &gw.url("/v1/chat/completions"),
        r#"{"model":"inproc","messages":[],"stream":true}"#,
    )
    .await;
    assert_eq!(a.sse_data().last().map(String::as_str), Some("[DONE]"));
    gw.next_record().await;
    assert!(gw.next_record().await.usage.is_some());
}

#[tokio::test]
async fn models_list_and_get() {
    let (_mock, gw) = setup().await;
    let a = get(&gw.url("/v1/models")).await;
    assert_eq!(a.status, 200);
    let ids: Vec<String> = a.json()["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids, ["gpt-test", "inproc", "embed"]);
    assert!(!a.text().contains("sk-upstream-secret"));
    let a = get(&gw.url("/v1/models/gpt-test")).await;
    assert_eq!(a.json()["id"], "gpt-test");
    let a = get(&gw.url("/v1/models/nope")).await;
    assert_eq!(a.status, 404);
    assert_eq!(a.json()["error"]["code"], "model_not_found");
}

#[tokio::test]
async fn health_routes_need_no_key() {
    let (_mock, gw) = setup().await;
    for path in [
        "/health/liveliness",
        "/health/liveness",
        "/health/readiness",
    ] {
        let a = crate::common::send("GET", &gw.url(path), "", &[]).await;
        assert_eq!(a.status, 200, "{path}");
    }
    let a = crate::common::send("GET", &gw.url("/health/readiness"), "", &[]).await;
    assert_eq!(a.json()["status"], "healthy");
}

#[tokio::test]
async fn auth_rules() {
    let (_mock, gw) = setup().await;
    let url = gw.url("/v1/chat/completions");
    let body = r#"{"model":"gpt-test","messages":[]}"#;
    let a = crate::common::send("POST", &url, body, &[]).await;
    assert_eq!(a.status, 401);
    assert_eq!(a.json()["error"]["type"], "authentication_error");
    let a = crate::common::send("POST", &url, body, &[("authorization", "Bearer sk-wrong")]).await;
    assert_eq!(a.status, 401);
    assert!(!a.text().contains("sk-master"));
    for h in ["x-api-key", "api-key"] {
        let a = crate::common::send("POST", &url, body, &[(h, "sk-master")]).await;
        assert_eq!(a.status, 200, "{h}");
    }
    assert_eq!(
        crate::common::send("GET", &gw.url("/v1/models"), "", &[])
            .await
            .status,
        401
    );
}

#[tokio::test]
async fn open_gateway_without_master_key() {
    let mock = mock_server(MockSettings::default()).await;
    let yaml = config(&mock.base(), "").replace("general_settings:\n  master_key: sk-master", "");
    let gw = gateway(&yaml).await;
    let a = crate::common::send(
        "POST",
        &gw.url("/v1/chat/completions"),
        r#"{"model":"gpt-test","messages":[]}"#,
        &[],
    )
    .await;
    assert_eq!(a.status, 200);
}

#[tokio::test]
async fn request_errors_have_the_openai_shape() {
    let (_mock, gw) = setup().await;
    let url = gw.url("/v1/chat/completions");

    let a = post(&url, "{\"model\": \"gpt-test\",\n \"messages\": [}").await;
    assert_eq!(a.status, 400);
    let msg = a.json()["error"]["message"].as_str().unwrap().to_owned();
    assert!(msg.contains("line 2") && msg.contains("column"), "{msg}");

    let a = post(&url, r#"{"model":"nope","messages":[]}"#).await;
    assert_eq!(a.status, 404);
    let e = a.json();
    assert_eq!(e["error"]["code"], "model_not_found");
    assert!(
        !a.text().contains("gpt-test"),
        "404 must not list configured models"
    );

    let a = post(&url, r#"{"messages":[]}"#).await;
    assert_eq!(a.status, 400);
    assert_eq!(a.json()["error"]["param"], "model");

    let a = post(
        &gw.url("/v1/embeddings"),
        r#"{"model":"embed","input":"x","stream":true}"#,
    )
    .await;
    assert_eq!(a.status, 400);

    let a = post(&gw.url("/v1/nothing"), "{}").await;
    assert_eq!(a.status, 404);
    let a = get(&url).await;
    assert_eq!(a.status, 405);
    for ans in [&a] {
        let v = ans.json();
        for k in ["message", "type", "param", "code"] {
            assert!(v["error"].get(k).is_some(), "missing error.{k}");
        }
    }
}

#[tokio::test]
async fn body_over_the_limit_is_413() {
    let mock = mock_server(MockSettings::default()).await;
    let yaml = config(&mock.base(), "").replace(
        "general_settings:\n  master_key: sk-master",
        "general_settings:\n  master_key: sk-master\n  max_request_size_mb: 1",
    );
    let gw = gateway(&yaml).await;
    let big = format!(
        r#"{{"model":"gpt-test","messages":[{{"role":"user","content":"{}"}}]}}"#,
        "x".repeat(1_100_000)
    );
    let a = post(&gw.url("/v1/chat/completions"), &big).await;
    assert_eq!(a.status, 413);
    assert_eq!(a.json()["error"]["code"], "request_too_large");
    let ok = format!(
        r#"{{"model":"gpt-test","messages":[{{"role":"user","content":"{}"}}]}}"#,
        "x".repeat(900_000)
    );
    assert_eq!(post(&gw.url("/v1/chat/completions"), &ok).await.status, 200);
}

#[tokio::test]
async fn model_rewrite_leaves_every_other_byte_untouched() {
    let up = recording(Reply::Json(
        200,
        r#"{"id":"x","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}}"#,
    ))
    .await;
    let gw = gateway(&config(&up.base(), "")).await;
    let body = "{ \"messages\" : [ {\"role\":\"user\", \"content\":\"caf\\u00e9 \\\"model\\\": x\"} ],\n\t\"model\":  \"gpt-test\" , \"temperature\":0.50, \"x\":{\"model\":\"keep\"} }";
    let a = post(&gw.url("/v1/chat/completions"), body).await;
    assert_eq!(a.status, 200, "{}", a.text());
    let seen = up.requests();
    assert_eq!(seen.len(), 1);
    let expected = body.replacen("\"gpt-test\"", "\"gpt-upstream\"", 1);
    assert_eq!(std::str::from_utf8(&seen[0].body).unwrap(), expected);
    assert_eq!(seen[0].path_and_query, "/v1/chat/completions");
    assert_eq!(
        seen[0].headers.get("authorization").unwrap(),
        "Bearer sk-upstream-secret"
    );
    assert_eq!(
        seen[0]
            .headers
            .get("content-length")
            .unwrap()
            .to_str()
            .unwrap(),
        expected.len().to_string()
    );
}

#[tokio::test]
async fn stream_asks_upstream_for_usage() {
    let up = recording(Reply::Sse {
        frames: vec![
            "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}],\"usage\":null}\n\n",
            "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1}}\n\ndata: [DONE]\n\n",
        ],
        gap: Duration::from_millis(5),
        then_reset: false,
    })
    .await;
    let mut gw = gateway(&config(&up.base(), "")).await;
    let a = post(
        &gw.url("/v1/chat/completions"),
        r#"{"model":"gpt-test","stream":true,"messages":[]}"#,
    )
    .await;
    let sent: serde_json::Value = serde_json::from_slice(&up.requests()[0].body).unwrap();
    assert_eq!(sent["stream_options"]["include_usage"], true);
    assert_eq!(
        a.text(),
        "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}],\"usage\":null}\n\ndata: [DONE]\n\n"
    );
    let rec = gw.next_record().await;
    assert_eq!(rec.usage.unwrap().prompt_tokens, 3);
}

#[tokio::test]
async fn chunks_are_forwarded_as_they_arrive() {
    let up = recording(Reply::Sse {
        frames: vec![
            "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"content\":\"b\"}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"content\":\"c\"}}]}\n\n",
            "data: [DONE]\n\n",
        ],
        gap: Duration::from_millis(150),
        then_reset: false,
    })
    .await;
    let gw = gateway(&config(&up.base(), "")).await;
    let a = post(
        &gw.url("/v1/chat/completions"),
        r#"{"model":"gpt-test","stream":true,"stream_options":{"include_usage":true},"messages":[]}"#,
    )
    .await;
    assert_eq!(a.frames.len(), 4, "one client frame per upstream frame");
    let gaps: Vec<Duration> = a.frames.windows(2).map(|w| w[1].0 - w[0].0).collect();
    assert!(
        gaps.iter().all(|g| *g >= Duration::from_millis(100)),
        "frames were buffered: {gaps:?}"
    );
}

#[tokio::test]
async fn upstream_errors_pass_through() {
    let up = recording(Reply::Json(
        429,
        r#"{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}"#,
    ))
    .await;
    for stream in [false, true] {
        // A fresh gateway each time: the 429 cools the only deployment down (tests/e2e/routing.rs).
        let gw = gateway(&config(&up.base(), "")).await;
        let a = post(
            &gw.url("/v1/chat/completions"),
            &format!(r#"{{"model":"gpt-test","stream":{stream},"messages":[]}}"#),
        )
        .await;
        assert_eq!(a.status, 429);
        assert_eq!(a.json()["error"]["code"], "rate_limit_exceeded");
    }
}

#[tokio::test]
async fn upstream_timeout_is_504() {
    let up = recording(Reply::Delay(
        Duration::from_secs(3),
        Box::new(Reply::Json(200, "{}")),
    ))
    .await;
    let yaml = config(&up.base(), "").replace(
        "api_key: sk-upstream-secret",
        "api_key: sk-upstream-secret\n      timeout: 0.3",
    );
    let gw = gateway(&yaml).await;
    let a = post(
        &gw.url("/v1/chat/completions"),
        r#"{"model":"gpt-test","messages":[]}"#,
    )
    .await;
    assert_eq!(a.status, 504);
    assert_eq!(a.json()["error"]["type"], "timeout_error");
}

#[tokio::test]
async fn unreachable_upstream_is_502() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let gw = gateway(&config(&format!("http://127.0.0.1:{port}/v1"), "")).await;
    let a = post(
        &gw.url("/v1/chat/completions"),
        r#"{"model":"gpt-test","messages":[]}"#,
    )
    .await;
    assert_eq!(a.status, 502);
    assert_eq!(a.json()["error"]["code"], "upstream_unreachable");
    assert!(!a.text().contains("sk-upstream-secret"));
}

#[tokio::test]
async fn cut_stream_ends_with_an_error_not_a_fake_done() {
    let up = recording(Reply::Sse {
        frames: vec![
            "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"content\":\"b\"}}]}\n\n",
        ],
        gap: Duration::from_millis(20),
        then_reset: true,
    })
    .await;
    let mut gw = gateway(&config(&up.base(), "")).await;
    let a = post(
        &gw.url("/v1/chat/completions"),
        r#"{"model":"gpt-test","stream":true,"messages":[]}"#,
    )
    .await;
    assert_eq!(a.status, 200);
    let data = a.sse_data();
    assert!(!data.iter().any(|d| d == "[DONE]"), "fake [DONE]: {data:?}");
    let last: serde_json::Value = serde_json::from_str(data.last().unwrap()).unwrap();
    assert_eq!(last["error"]["code"], "stream_interrupted", "{data:?}");
    assert!(a.body_error, "the HTTP body must end abnormally");
    assert_eq!(gw.next_record().await.outcome, Outcome::StreamCut);
}

#[tokio::test]
async fn request_id_is_echoed_or_made() {
    let (_mock, gw) = setup().await;
    let a = crate::common::send(
        "POST",
        &gw.url("/v1/chat/completions"),
        r#"{"model":"gpt-test","messages":[]}"#,
        &[MASTER, ("x-request-id", "req-123")],
    )
    .await;
    assert_eq!(a.header("x-request-id"), Some("req-123"));
    let b = post(
        &gw.url("/v1/chat/completions"),
        r#"{"model":"gpt-test","messages":[]}"#,
    )
    .await;
    assert_eq!(b.header("x-request-id").unwrap().len(), 36);
}

#[tokio::test]
async fn wildcard_group_passes_the_model_through() {
    let up = recording(Reply::Json(200, r#"{"choices":[]}"#)).await;
    let extra = format!(
        "  - model_name: \"openai/*\"\n    litellm_params:\n      model: \"openai/*\"\n      api_base: {}\n",
        up.base()
    );
    let gw = gateway(&config(&up.base(), &extra)).await;
    let a = post(
        &gw.url("/v1/chat/completions"),
        r#"{"model":"openai/gpt-4.1-nano","messages":[]}"#,
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let sent: serde_json::Value = serde_json::from_slice(&up.requests()[0].body).unwrap();
    assert_eq!(sent["model"], "gpt-4.1-nano");
}

#[tokio::test]
async fn load_balances_across_a_group() {
    let a = recording(Reply::Json(200, r#"{"choices":[]}"#)).await;
    let b = recording(Reply::Json(200, r#"{"choices":[]}"#)).await;
    let yaml = format!(
        "model_list:\n  - model_name: g\n    litellm_params:\n      model: openai/x\n      api_base: {}\n  - model_name: g\n    litellm_params:\n      model: openai/y\n      api_base: {}\n",
        a.base(),
        b.base()
    );
    let gw = gateway(&yaml).await;
    for _ in 0..10 {
        let r = crate::common::send(
            "POST",
            &gw.url("/v1/chat/completions"),
            r#"{"model":"g"}"#,
            &[],
        )
        .await;
        assert_eq!(r.status, 200);
    }
    assert_eq!(a.requests().len(), 5);
    assert_eq!(b.requests().len(), 5);
}

/// `http2_prior_knowledge: true`: streams to a plain-http upstream share one h2c connection and
/// still run at once; without it every concurrent stream holds an HTTP/1.1 connection.
#[tokio::test]
async fn h2c_upstream_multiplexes_concurrent_streams_on_one_connection() {
    const STREAMS: usize = 40;
    // Each stream lasts two gaps; all of them at once take about that, one after another 40
    // times that. The bound below (six gaps) leaves a loaded machine two seconds of slack.
    const GAP: Duration = Duration::from_millis(500);
    for h2c in [true, false] {
        let up = recording(Reply::Sse {
            frames: vec![
                "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n",
                "data: {\"choices\":[{\"delta\":{\"content\":\"b\"}}]}\n\n",
                "data: [DONE]\n\n",
            ],
            gap: GAP,
            then_reset: false,
        })
        .await;
        let yaml = format!(
            "model_list:\n  - model_name: local\n    litellm_params:\n      model: openai/llama\n      api_base: {}\n      http2_prior_knowledge: {h2c}\n",
            up.base()
        );
        let gw = gateway(&yaml).await;
        let url = gw.url("/v1/chat/completions");
        let started = Instant::now();
        let answers = futures_util::future::join_all((0..STREAMS).map(|_| {
            post(
                &url,
                r#"{"model":"local","stream":true,"stream_options":{"include_usage":true},"messages":[]}"#,
            )
        }))
        .await;
        let took = started.elapsed();
        for a in &answers {
            assert_eq!(a.status, 200, "{}", a.text());
            assert!(a.text().ends_with("data: [DONE]\n\n"), "{}", a.text());
        }
        // Each stream lasts two gaps: run one after another they would take STREAMS times that.
        assert!(took < GAP * 6, "streams did not run at once: {took:?}");
        let seen = up.requests();
        assert_eq!(seen.len(), STREAMS);
        let connections: std::collections::BTreeSet<usize> =
            seen.iter().map(|c| c.connection).collect();
        if h2c {
            assert!(seen.iter().all(|c| c.version == http::Version::HTTP_2));
            assert_eq!(connections.len(), 1, "h2c streams were not multiplexed");
        } else {
            assert!(seen.iter().all(|c| c.version == http::Version::HTTP_11));
            assert_eq!(connections.len(), STREAMS);
        }
    }
}
