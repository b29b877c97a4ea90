//! End-to-end: the response cache (`litellm_settings.cache: true`) through the gateway to
//! `sluice mock`: a repeated request answered from the store (free, marked, recorded), a
//! stream replayed byte for byte, the per-request controls, identical requests in flight
//! collapsed into one upstream call (streams fanned out), the leader's client leaving without
//! failing the others, `mode: default_off`, and the management routes.
use std::time::Duration;

use crate::common::*;
use sluice_mock::MockSettings;

fn config(mock_base: &str, cache_params: &str) -> String {
    format!(
        r#"
model_list:
  - model_name: gpt
    litellm_params:
      model: openai/gpt-4o-mini
      api_base: {mock_base}
      input_cost_per_token: 0.000001
      output_cost_per_token: 0.000002
  - model_name: embed
    litellm_params:
      model: openai/text-embedding-3-small
      api_base: {mock_base}
litellm_settings:
  cache: true
{cache_params}
general_settings:
  master_key: sk-master
"#
    )
}

const CHAT: &str = r#"{"model":"gpt","messages":[{"role":"user","content":"what is a sluice?"}]}"#;
/// The same request: other field order, an end user, metadata and cache controls.
const CHAT_AGAIN: &str = r#"{"messages":[{"role":"user","content":"what is a sluice?"}],"user":"u2","metadata":{"run":2},"model":"gpt"}"#;

async fn chat(gw: &Gateway, body: &str, extra: &[(&str, &str)]) -> Answer {
    let mut headers = vec![MASTER, ("content-type", "application/json")];
    headers.extend_from_slice(extra);
    send(
        "POST",
        &gw.url("/v1/chat/completions"),
        body.to_owned(),
        &headers,
    )
    .await
}

#[tokio::test]
async fn a_repeated_request_is_answered_from_the_cache_for_free() {
    let mock = mock_server(MockSettings::default()).await;
    let mut gw = gateway(&config(&mock.base(), "")).await;
    let first = chat(&gw, CHAT, &[]).await;
    assert_eq!(first.status, 200, "{}", first.text());
    assert_eq!(first.header("x-sluice-cache-hit"), Some("false"));
    let key = first.header("x-sluice-cache-key").unwrap().to_owned();
    assert_eq!(first.header("x-litellm-cache-key"), Some(key.as_str()));
    assert!(
        first
            .header("x-sluice-response-cost")
            .unwrap()
            .parse::<f64>()
            .unwrap()
            > 0.0
    );
    let r = gw.next_record().await;
    assert!(!r.cache_hit);
    let again = chat(&gw, CHAT_AGAIN, &[]).await;
    assert_eq!(again.status, 200);
    assert_eq!(again.header("x-sluice-cache-hit"), Some("true"));
    assert_eq!(again.header("x-sluice-cache-key"), Some(key.as_str()));
    assert_eq!(again.header("x-sluice-response-cost"), Some("0"));
    assert_eq!(again.body, first.body, "the same answer, byte for byte");
    let r = gw.next_record().await;
    assert!(r.cache_hit);
    assert_eq!(r.cost, Some(0));
    assert_eq!(
        r.usage.unwrap().completion_tokens,
        first.json()["usage"]["completion_tokens"].as_u64().unwrap()
    );
    assert_eq!(mock.requests().await, 1, "one upstream call");
    // Another question, or another sampling parameter, is another key.
    let other = chat(&gw, r#"{"model":"gpt","messages":[{"role":"user","content":"what is a sluice?"}],"temperature":0.5}"#, &[]).await;
    assert_eq!(other.header("x-sluice-cache-hit"), Some("false"));
    assert_eq!(mock.requests().await, 2);
    // Embeddings are cached too.
    let emb = r#"{"model":"embed","input":["a","b"]}"#;
    let url = gw.url("/v1/embeddings");
    let h = [MASTER, ("content-type", "application/json")];
    let e1 = send("POST", &url, emb, &h).await;
    let e2 = send("POST", &url, emb, &h).await;
    assert_eq!(
        (
            e1.header("x-sluice-cache-hit"),
            e2.header("x-sluice-cache-hit")
        ),
        (Some("false"), Some("true"))
    );
    assert_eq!(e1.body, e2.body);
    // The metrics count them (an embeddings batch input by input).
    let m = get(&gw.url("/metrics")).await.text();
    assert!(m.contains("sluice_cache_hits_total 3"), "{m}");
    assert!(m.contains("sluice_cache_misses_total 4"), "{m}");
    // The cache's and the overload manager's families come before OpenMetrics' last line.
    assert!(
        m.ends_with("# EOF\n") && m.matches("# EOF").count() == 1,
        "{m}"
    );
}

#[tokio::test]
async fn a_stream_is_replayed_as_the_same_stream() {
    let mock = mock_server(MockSettings {
        chunks: 5,
        ..MockSettings::default()
    })
    .await;
    let gw = gateway(&config(&mock.base(), "")).await;
    let body = r#"{"model":"gpt","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"stream it"}]}"#;
    let first = chat(&gw, body, &[]).await;
    assert_eq!(first.status, 200);
    assert!(first.sse_data().last().is_some_and(|d| d == "[DONE]"));
    let again = chat(&gw, body, &[]).await;
    assert_eq!(again.header("x-sluice-cache-hit"), Some("true"));
    assert!(again
        .header("content-type")
        .unwrap()
        .starts_with("text/event-stream"));
    assert_eq!(
        again.sse_data(),
        first.sse_data(),
        "same chunks, usage included"
    );
    assert_eq!(mock.requests().await, 1);
    // The same question not streamed is the same answer, put together as JSON.
    let whole = chat(
        &gw,
        r#"{"model":"gpt","messages":[{"role":"user","content":"stream it"}]}"#,
        &[],
    )
    .await;
    assert_eq!(whole.header("x-sluice-cache-hit"), Some("true"));
    assert!(whole
        .header("content-type")
        .unwrap()
        .starts_with("application/json"));
    let (text, _, finish, usage) = openai_chunks(&first);
    let w = whole.json();
    assert_eq!(w["object"], "chat.completion");
    assert_eq!(w["choices"][0]["message"]["content"], text.as_str());
    assert_eq!(w["choices"][0]["finish_reason"], finish.as_str());
    assert_eq!(Some(w["usage"].clone()), usage);
    assert_eq!(mock.requests().await, 1);
    // Each request is recorded once: the streamed miss by its relay when the stream ended,
    // not by the pipeline too. The recorder takes records in order, so once a fourth request
    // is counted, every record of the first three has been.
    let fourth = chat(
        &gw,
        r#"{"model":"gpt","messages":[{"role":"user","content":"4th"}]}"#,
        &[],
    )
    .await;
    assert_eq!(fourth.status, 200);
    let counted = eventually(Duration::from_secs(10), || async {
        chat_requests_recorded(&gw).await >= 4.0
    })
    .await;
    assert!(counted, "the four requests are recorded");
    assert_eq!(chat_requests_recorded(&gw).await, 4.0, "and each once");
}

/// The chat requests the gateway's metrics have counted (every status and outcome).
async fn chat_requests_recorded(gw: &Gateway) -> f64 {
    let text = send("GET", &gw.url("/metrics"), "", &[MASTER]).await.text();
    text.lines()
        .filter(|l| {
            l.starts_with("sluice_requests_total{") && l.contains("route=\"/v1/chat/completions\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// An answer stored whole is told again as a stream for a client that streams the same
/// question, and a stored stream is put together for one that does not: Chat Completions,
/// Responses and Messages, with the usage the client asked for.
#[tokio::test]
async fn an_answer_stored_in_one_shape_serves_the_other() {
    let mock = mock_server(MockSettings {
        chunks: 4,
        ..MockSettings::default()
    })
    .await;
    let gw = gateway(&config(&mock.base(), "")).await;
    let send_to = |path: &str, body: String| {
        let url = gw.url(path);
        async move { post(&url, &body).await }
    };
    // Chat: whole first, then a stream without and one with the usage chunk.
    let ask = r#""messages":[{"role":"user","content":"shapes"}]"#;
    let whole = send_to(
        "/v1/chat/completions",
        format!(r#"{{"model":"gpt",{ask}}}"#),
    )
    .await;
    assert_eq!(whole.status, 200, "{}", whole.text());
    let w = whole.json();
    let plain = send_to(
        "/v1/chat/completions",
        format!(r#"{{"model":"gpt","stream":true,{ask}}}"#),
    )
    .await;
    assert_eq!(plain.header("x-sluice-cache-hit"), Some("true"));
    assert!(plain
        .header("content-type")
        .unwrap()
        .starts_with("text/event-stream"));
    let (text, _, finish, usage) = openai_chunks(&plain);
    assert_eq!(
        text,
        w["choices"][0]["message"]["content"].as_str().unwrap()
    );
    assert_eq!(finish, "stop");
    assert_eq!(usage, None, "not asked for");
    let with_usage = send_to(
        "/v1/chat/completions",
        format!(
            r#"{{"model":"gpt","stream":true,"stream_options":{{"include_usage":true}},{ask}}}"#
        ),
    )
    .await;
    assert_eq!(with_usage.header("x-sluice-cache-hit"), Some("true"));
    assert_eq!(openai_chunks(&with_usage).3, Some(w["usage"].clone()));
    assert_eq!(mock.requests().await, 1);

    // Messages: whole first, then streamed.
    let ask = r#""max_tokens":50,"messages":[{"role":"user","content":"shapes of messages"}]"#;
    let whole = send_to("/v1/messages", format!(r#"{{"model":"gpt",{ask}}}"#)).await;
    assert_eq!(whole.status, 200, "{}", whole.text());
    let w = whole.json();
    let streamed = send_to(
        "/v1/messages",
        format!(r#"{{"model":"gpt","stream":true,{ask}}}"#),
    )
    .await;
    assert_eq!(streamed.header("x-sluice-cache-hit"), Some("true"));
    let (blocks, stop, usage, names) = anthropic_events(&streamed);
    assert_eq!(names.first().map(String::as_str), Some("message_start"));
    assert_eq!(names.last().map(String::as_str), Some("message_stop"));
    assert_eq!(blocks[0]["text"], w["content"][0]["text"]);
    assert_eq!(stop, w["stop_reason"].as_str().unwrap());
    assert_eq!(usage["output_tokens"], w["usage"]["output_tokens"]);
    assert_eq!(mock.requests().await, 2);

    // Responses: streamed first, then whole.
    let ask = r#""input":"shapes of responses""#;
    let streamed = send_to(
        "/v1/responses",
        format!(r#"{{"model":"gpt","stream":true,{ask}}}"#),
    )
    .await;
    assert_eq!(streamed.status, 200, "{}", streamed.text());
    let completed: serde_json::Value = streamed
        .sse_data()
        .iter()
        .map(|d| serde_json::from_str::<serde_json::Value>(d).unwrap())
        .find(|e| e["type"] == "response.completed")
        .unwrap();
    let whole = send_to("/v1/responses", format!(r#"{{"model":"gpt",{ask}}}"#)).await;
    assert_eq!(whole.header("x-sluice-cache-hit"), Some("true"));
    assert_eq!(whole.json(), completed["response"]);
    assert_eq!(mock.requests().await, 3);
}

#[tokio::test]
async fn per_request_controls_are_obeyed() {
    let mock = mock_server(MockSettings::default()).await;
    let gw = gateway(&config(&mock.base(), "")).await;
    // no-store: answered, not kept.
    let q =
        |n: u32| format!(r#"{{"model":"gpt","messages":[{{"role":"user","content":"q{n}"}}]}}"#);
    chat(&gw, &q(1), &[("cache-control", "no-store")]).await;
    assert_eq!(
        chat(&gw, &q(1), &[]).await.header("x-sluice-cache-hit"),
        Some("false")
    );
    assert_eq!(
        chat(&gw, &q(1), &[]).await.header("x-sluice-cache-hit"),
        Some("true")
    );
    // no-cache (in the body, LiteLLM's way): not answered from the cache, and the field is
    // never sent upstream (the mock would refuse nothing, so the key shows it: same as q1).
    let no_cache =
        r#"{"model":"gpt","messages":[{"role":"user","content":"q1"}],"cache":{"no-cache":true}}"#;
    let a = chat(&gw, no_cache, &[]).await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(a.header("x-sluice-cache-hit"), Some("false"));
    assert_eq!(mock.requests().await, 3);
    // ttl: an answer kept 1 s is taken within it and gone once it is over (not before: the
    // first miss comes at least a second after it was stored).
    let short = r#"{"model":"gpt","messages":[{"role":"user","content":"q2"}],"cache":{"ttl":1}}"#;
    chat(&gw, short, &[]).await;
    let stored = std::time::Instant::now();
    assert_eq!(
        chat(&gw, short, &[]).await.header("x-sluice-cache-hit"),
        Some("true")
    );
    let expired = eventually(PATIENCE, || async {
        chat(&gw, short, &[]).await.header("x-sluice-cache-hit") == Some("false")
    })
    .await;
    assert!(expired, "the answer outlived its ttl");
    assert!(
        stored.elapsed() >= Duration::from_secs(1),
        "gone before its ttl"
    );
    // max-age: an answer older than asked is not taken. Wall time: the answer just stored
    // must be older than 0 s.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(
        chat(&gw, short, &[("cache-control", "max-age=0")])
            .await
            .header("x-sluice-cache-hit"),
        Some("false")
    );
    // A malformed cache object is a 400 naming it.
    let bad = chat(
        &gw,
        r#"{"model":"gpt","messages":[],"cache":{"nocache":true}}"#,
        &[],
    )
    .await;
    assert_eq!(bad.status, 400);
    assert_eq!(bad.json()["error"]["param"], "cache");
}

#[tokio::test]
async fn identical_requests_in_flight_reach_the_upstream_once() {
    let mock = mock_server(MockSettings {
        latency: Duration::from_millis(300),
        chunks: 4,
        chunk_interval: Duration::from_millis(20),
        ..MockSettings::default()
    })
    .await;
    let gw = gateway(&config(&mock.base(), "")).await;
    let body = r#"{"model":"gpt","messages":[{"role":"user","content":"everyone asks this"}]}"#;
    let answers = futures_util::future::join_all((0..100).map(|_| chat(&gw, body, &[]))).await;
    assert_eq!(
        mock.requests().await,
        1,
        "100 identical requests, one upstream call"
    );
    let first = &answers[0].body;
    for a in &answers {
        assert_eq!(a.status, 200);
        assert_eq!(&a.body, first);
    }
    let hits = answers
        .iter()
        .filter(|a| a.header("x-sluice-cache-hit") == Some("true"))
        .count();
    assert_eq!(hits, 99);
    // Streams fan out chunk by chunk.
    let stream = r#"{"model":"gpt","stream":true,"messages":[{"role":"user","content":"everyone streams this"}]}"#;
    let answers = futures_util::future::join_all((0..20).map(|_| chat(&gw, stream, &[]))).await;
    assert_eq!(mock.requests().await, 2);
    let want = answers[0].sse_data();
    assert!(want.len() > 4 && want.last().is_some_and(|d| d == "[DONE]"));
    for a in &answers {
        assert_eq!(a.sse_data(), want);
    }
}

#[tokio::test]
async fn the_leaders_client_leaving_does_not_fail_the_others() {
    let mock = mock_server(MockSettings {
        latency: Duration::from_millis(400),
        ..MockSettings::default()
    })
    .await;
    let gw = gateway(&config(&mock.base(), "")).await;
    let body = r#"{"model":"gpt","messages":[{"role":"user","content":"who leads?"}]}"#;
    // The leader's client gives up after 100 ms; five followers wait, sent once the leader's
    // call has reached the upstream.
    let leader = tokio::time::timeout(Duration::from_millis(100), chat(&gw, body, &[]));
    let followers = async {
        assert!(eventually(PATIENCE, || async { mock.requests().await >= 1 }).await);
        futures_util::future::join_all((0..5).map(|_| chat(&gw, body, &[]))).await
    };
    let (gone, answers) = tokio::join!(leader, followers);
    assert!(gone.is_err(), "the leader's client left");
    for a in &answers {
        assert_eq!(a.status, 200, "{}", a.text());
    }
    assert!(
        mock.requests().await <= 2,
        "a follower took the lead at most once"
    );
}

#[tokio::test]
async fn default_off_mode_and_the_management_routes() {
    let mock = mock_server(MockSettings::default()).await;
    let gw = gateway(&config(
        &mock.base(),
        "  cache_params:\n    mode: default_off\n",
    ))
    .await;
    chat(&gw, CHAT, &[]).await;
    assert_eq!(
        chat(&gw, CHAT, &[]).await.header("x-sluice-cache-hit"),
        None,
        "not used unless asked"
    );
    let asks = r#"{"model":"gpt","messages":[{"role":"user","content":"what is a sluice?"}],"cache":{"use-cache":true}}"#;
    let first = chat(&gw, asks, &[]).await;
    assert_eq!(first.header("x-sluice-cache-hit"), Some("false"));
    assert_eq!(
        chat(&gw, asks, &[]).await.header("x-sluice-cache-hit"),
        Some("true")
    );
    let ping = get(&gw.url("/cache/ping")).await;
    assert_eq!(ping.status, 200);
    assert_eq!(ping.json()["entries"], 1);
    // Delete by the key the answer named, then it is a miss again.
    let key = first.header("x-sluice-cache-key").unwrap();
    let h = [MASTER, ("content-type", "application/json")];
    let del = send(
        "POST",
        &gw.url("/cache/delete"),
        format!(r#"{{"keys":["{key}"]}}"#),
        &h,
    )
    .await;
    assert_eq!(del.json()["deleted"], 1, "{}", del.text());
    assert_eq!(
        chat(&gw, asks, &[]).await.header("x-sluice-cache-hit"),
        Some("false")
    );
    let flush = send("POST", &gw.url("/cache/flushall"), "", &h).await;
    assert_eq!(flush.status, 200);
    assert_eq!(get(&gw.url("/cache/ping")).await.json()["entries"], 0);
    // Management needs the master key.
    let anon = send("GET", &gw.url("/cache/ping"), "", &[]).await;
    assert_eq!(anon.status, 401);
}

#[tokio::test]
async fn a_cache_type_sluice_does_not_have_is_a_startup_error_naming_it() {
    let yaml = config(
        "http://127.0.0.1:9/v1",
        "  cache_params:\n    type: qdrant-semantic\n",
    );
    let env = std::collections::HashMap::<String, String>::new();
    let err = sluice_config::load_str(&yaml, &env)
        .unwrap_err()
        .to_string();
    assert!(err.contains("litellm_settings.cache_params.type"), "{err}");
    assert!(err.contains("qdrant-semantic"), "{err}");
}

/// `type: redis` at `url`, keys under a namespace of this test alone.
fn redis_params(url: &str) -> String {
    redis_params_in(
        url,
        &format!("t{}", sluice_core::random::uuid_v4().simple()),
    )
}

/// `type: redis` at `url`, keys under `namespace`.
fn redis_params_in(url: &str, namespace: &str) -> String {
    format!("  cache_params:\n    type: redis\n    url: {url}\n    namespace: {namespace}\n")
}

/// Wait until the cache's Redis at `url` holds `n` answers under `namespace` (they are written
/// off the request path, after the answer has left).
async fn stored_in_redis(url: &str, namespace: &str, n: usize) {
    let client = redis::Client::open(url).unwrap();
    let count = || async {
        let Ok(mut c) = client.get_multiplexed_async_connection().await else {
            return 0;
        };
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{namespace}:*"))
            .query_async(&mut c)
            .await
            .unwrap_or_default();
        keys.len()
    };
    let have = poll(PATIENCE, count, |have| *have >= n).await;
    assert_eq!(have, n, "answers under {namespace} in Redis");
}

#[tokio::test]
async fn a_redis_cache_is_shared_by_two_instances_and_a_flush_reaches_both() {
    let Some(redis) = redis_server() else {
        return;
    };
    let mock = mock_server(MockSettings::default()).await;
    let namespace = format!("t{}", sluice_core::random::uuid_v4().simple());
    let yaml = config(&mock.base(), &redis_params_in(&redis, &namespace));
    let (a, b) = (gateway(&yaml).await, gateway(&yaml).await);
    for gw in [&a, &b] {
        let ready = get(&gw.url("/health/readiness")).await.json();
        assert_eq!(ready["cache"]["type"], "redis", "{ready}");
    }
    let ready_a = a.url("/health/readiness");
    assert!(
        eventually(PATIENCE, || async {
            get(&ready_a).await.json()["cache"]["redis"] == "connected"
        })
        .await,
        "instance a connects to Redis"
    );
    let first = chat(&a, CHAT, &[]).await;
    assert_eq!(first.header("x-sluice-cache-hit"), Some("false"));
    // Written to Redis off the request path: b finds it once it is there. b's own misses are
    // not stored (`no-store`), so a hit can only be a's answer from Redis.
    stored_in_redis(&redis, &namespace, 1).await;
    let again = CHAT_AGAIN.replacen('{', r#"{"cache":{"no-store":true},"#, 1);
    let from_b = chat(&b, &again, &[]).await;
    assert_eq!(
        from_b.header("x-sluice-cache-hit"),
        Some("true"),
        "instance b is answered from the shared store"
    );
    assert_eq!(from_b.body, first.body, "the same answer, byte for byte");
    assert_eq!(from_b.header("x-sluice-response-cost"), Some("0"));
    assert_eq!(
        from_b.header("x-sluice-cache-key"),
        first.header("x-sluice-cache-key"),
        "both instances compute the same key"
    );
    let upstream = mock.requests().await;
    assert!(
        upstream <= 2,
        "b never asks upstream once it found the answer"
    );
    // A stream too, replayed on b as the same events.
    let stream = r#"{"model":"gpt","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"shared stream"}]}"#;
    let s1 = chat(&a, stream, &[]).await;
    stored_in_redis(&redis, &namespace, 2).await;
    let s2 = chat(&b, stream, &[]).await;
    assert_eq!(s2.header("x-sluice-cache-hit"), Some("true"));
    assert_eq!(s2.sse_data(), s1.sse_data());
    // An embeddings batch: b finds the input a stored in Redis (one MGET), and sends only the
    // new one upstream.
    let e1 = post(
        &a.url("/v1/embeddings"),
        r#"{"model":"embed","input":["x1","x2"]}"#,
    )
    .await;
    stored_in_redis(&redis, &namespace, 4).await;
    let e2 = post(
        &b.url("/v1/embeddings"),
        r#"{"model":"embed","input":["x2","x3"]}"#,
    )
    .await;
    assert_eq!(e2.status, 200, "{}", e2.text());
    assert_eq!(
        e2.json()["data"][0]["embedding"],
        e1.json()["data"][1]["embedding"]
    );
    let m = get(&b.url("/metrics")).await.text();
    assert!(m.contains("sluice_cache_redis_hits_total 3"), "{m}");
    assert!(m.contains("sluice_cache_redis_up 1"), "{m}");
    // Every cache metric docs/metrics.md names is exported (with `type: redis`, all of them).
    let docs = include_str!("../../docs/metrics.md");
    for name in docs.split('`').filter(|w| w.starts_with("sluice_cache_")) {
        assert!(
            m.lines()
                .any(|l| l.strip_prefix(name).is_some_and(|v| v.starts_with(' '))),
            "{name} is named in docs/metrics.md but not exported"
        );
    }
    let ping = get(&a.url("/cache/ping")).await;
    assert_eq!(ping.status, 200, "{}", ping.text());
    assert_eq!(ping.json()["cache_type"], "redis");
    assert_eq!(ping.json()["ping_response"], true);
    // Flushed on b: gone from Redis and from a's memory as well.
    let h = [MASTER];
    let flush = send("POST", &b.url("/cache/flushall"), "", &h).await;
    assert_eq!(flush.status, 200, "{}", flush.text());
    assert_eq!(flush.json()["redis_keys_removed"], 5, "{}", flush.text());
    let ping_a = a.url("/cache/ping");
    assert!(
        eventually(PATIENCE, || async {
            get(&ping_a).await.json()["entries"] == 0
        })
        .await,
        "a's memory is emptied by b's flush"
    );
    let before = mock.requests().await;
    assert_eq!(
        chat(&a, CHAT, &[]).await.header("x-sluice-cache-hit"),
        Some("false")
    );
    assert_eq!(mock.requests().await, before + 1);
}

#[tokio::test]
async fn a_redis_that_is_down_leaves_each_instance_caching_in_its_own_memory() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mock = mock_server(MockSettings::default()).await;
    let yaml = config(
        &mock.base(),
        &redis_params(&format!("redis://127.0.0.1:{closed}")),
    );
    let gw = gateway(&yaml).await;
    let ready = get(&gw.url("/health/readiness")).await;
    assert_eq!(ready.status, 200, "the instance stays ready");
    assert!(
        ready.json()["cache"]["redis"]
            .as_str()
            .unwrap()
            .starts_with("unreachable"),
        "{}",
        ready.text()
    );
    let started = std::time::Instant::now();
    let first = chat(&gw, CHAT, &[]).await;
    assert_eq!(first.status, 200, "{}", first.text());
    let again = chat(&gw, CHAT, &[]).await;
    assert_eq!(again.status, 200);
    assert_eq!(again.header("x-sluice-cache-hit"), Some("true"));
    assert_eq!(mock.requests().await, 1);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "no request waits on the missing Redis"
    );
    let ping = get(&gw.url("/cache/ping")).await;
    assert_eq!(ping.status, 503, "{}", ping.text());
    assert_eq!(ping.json()["error"]["code"], "cache_unavailable");
    assert!(
        !ping.text().contains(&closed.to_string()),
        "no address in errors"
    );
}

/// A key's and a team's `metadata.cache` (LiteLLM's key-level cache controls) hold their
/// requests to it whatever the request says; a hit's spend row carries what it saved.
#[tokio::test]
async fn key_and_team_cache_settings_and_the_saved_cost_in_the_spend_log() {
    let mock = mock_server(MockSettings::default()).await;
    let gw = gateway(&config(&mock.base(), "")).await;
    let admin = |path: &'static str, body: serde_json::Value| {
        let gw = &gw;
        async move { admin_as(gw, "sk-master", "POST", path, body).await }
    };
    // A malformed policy is refused by name, not ignored.
    let bad = admin(
        "/key/generate",
        serde_json::json!({"metadata": {"cache": {"no_store": true}}}),
    )
    .await;
    assert_eq!(bad.status, 400, "{}", bad.text());
    assert_eq!(bad.json()["error"]["param"], "metadata.cache");

    // A key set to no-store: its answers are never stored, so never hit.
    let no_store = new_key(
        &gw,
        serde_json::json!({"metadata": {"cache": {"no-store": true}}}),
    )
    .await;
    let as_key = |key: &str| format!("Bearer {key}");
    let chat = |gw: &Gateway, body: &str, auth: &[(&str, &str)]| {
        let (url, body) = (gw.url("/v1/chat/completions"), body.to_owned());
        let mut headers = vec![("content-type", "application/json")];
        headers.extend_from_slice(if auth.is_empty() { &[MASTER] } else { auth });
        let headers: Vec<(String, String)> = headers
            .into_iter()
            .map(|(n, v)| (n.to_owned(), v.to_owned()))
            .collect();
        async move {
            let h: Vec<(&str, &str)> = headers
                .iter()
                .map(|(n, v)| (n.as_str(), v.as_str()))
                .collect();
            send("POST", &url, body, &h).await
        }
    };
    let body = r#"{"model":"gpt","messages":[{"role":"user","content":"policy one"}]}"#;
    for _ in 0..2 {
        let a = chat(&gw, body, &[("authorization", &as_key(&no_store))]).await;
        assert_eq!(a.status, 200, "{}", a.text());
        assert_eq!(a.header("x-sluice-cache-hit"), Some("false"));
    }
    assert_eq!(mock.requests().await, 2);

    // A team with a namespace of its own: its keys neither see nor fill the shared entries.
    let team = admin(
        "/team/new",
        serde_json::json!({"team_id": "t-cache", "metadata": {"cache": {"namespace": "t-cache"}}}),
    )
    .await;
    assert_eq!(team.status, 200, "{}", team.text());
    let member = new_key(&gw, serde_json::json!({"team_id": "t-cache"})).await;
    let body = r#"{"model":"gpt","messages":[{"role":"user","content":"policy two"}]}"#;
    let shared = chat(&gw, body, &[]).await;
    assert_eq!(shared.header("x-sluice-cache-hit"), Some("false"));
    let first = chat(&gw, body, &[("authorization", &as_key(&member))]).await;
    assert_eq!(
        first.header("x-sluice-cache-hit"),
        Some("false"),
        "another namespace"
    );
    assert_ne!(
        first.header("x-sluice-cache-key"),
        shared.header("x-sluice-cache-key")
    );
    let cost: f64 = first
        .header("x-sluice-response-cost")
        .unwrap()
        .parse()
        .unwrap();
    assert!(cost > 0.0);
    let hit = chat(&gw, body, &[("authorization", &as_key(&member))]).await;
    assert_eq!(hit.header("x-sluice-cache-hit"), Some("true"));
    assert_eq!(mock.requests().await, 4);

    // The hit's spend row: free, marked, and what it saved.
    let rid = hit.header("x-request-id").unwrap().to_owned();
    let logged = eventually(PATIENCE, || async {
        let rows = send(
            "GET",
            &gw.url(&format!("/spend/logs?request_id={rid}")),
            "",
            &[MASTER],
        )
        .await
        .json();
        rows.as_array().into_iter().flatten().any(|l| {
            l["cache_hit"] == "True"
                && l["spend"].as_f64() == Some(0.0)
                && l["saved_spend"]
                    .as_f64()
                    .is_some_and(|s| (s - cost).abs() < 1e-12)
        })
    })
    .await;
    assert!(logged, "the hit's spend row records what it saved");
}

/// An embeddings batch is cached input by input: a batch with some inputs stored sends only
/// the others upstream and is answered whole in the client's order; an input asked alone
/// shares the entry it got in a batch.
#[tokio::test]
async fn embeddings_are_cached_per_input() {
    let mock = mock_server(MockSettings::default()).await;
    let mut gw = gateway(&config(&mock.base(), "")).await;
    let url = gw.url("/v1/embeddings");
    let embed = |input: &str| {
        let url = url.clone();
        let body = format!(r#"{{"model":"embed","input":{input}}}"#);
        async move { post(&url, &body).await }
    };
    let vector = |a: &Answer, i: usize| a.json()["data"][i]["embedding"].clone();
    let first = embed(r#"["alpha","beta"]"#).await;
    assert_eq!(first.status, 200, "{}", first.text());
    assert_eq!(first.header("x-sluice-cache-hit"), Some("false"));
    gw.next_record().await;
    assert_eq!(mock.requests().await, 1);

    // Two of three stored: one upstream call, for "gamma" alone.
    let mixed = embed(r#"["beta","gamma","alpha"]"#).await;
    assert_eq!(mixed.status, 200, "{}", mixed.text());
    let m = mixed.json();
    assert_eq!(m["data"].as_array().unwrap().len(), 3);
    for (i, d) in m["data"].as_array().unwrap().iter().enumerate() {
        assert_eq!(d["index"], i, "in the client's order");
    }
    assert_eq!(vector(&mixed, 0), vector(&first, 1), "beta, from the store");
    assert_eq!(
        vector(&mixed, 2),
        vector(&first, 0),
        "alpha, from the store"
    );
    assert_eq!(mock.requests().await, 2);
    let direct = post(
        &format!("{}/embeddings", mock.base()),
        r#"{"model":"text-embedding-3-small","input":["gamma"]}"#,
    )
    .await
    .json();
    assert_eq!(m["data"][1]["embedding"], direct["data"][0]["embedding"]);
    let r = gw.next_record().await;
    assert!(!r.cache_hit);
    assert_eq!(
        r.usage.unwrap().prompt_tokens,
        direct["usage"]["prompt_tokens"].as_u64().unwrap(),
        "only gamma went upstream"
    );

    // All stored: a hit, free, no upstream call; and gamma alone shares its entry.
    let all = embed(r#"["gamma","alpha"]"#).await;
    assert_eq!(all.header("x-sluice-cache-hit"), Some("true"));
    assert_eq!(all.header("x-sluice-response-cost"), Some("0"));
    assert_eq!(vector(&all, 0), vector(&mixed, 1));
    assert!(gw.next_record().await.cache_hit);
    let alone = embed(r#""gamma""#).await;
    assert_eq!(alone.header("x-sluice-cache-hit"), Some("true"));
    assert_eq!(vector(&alone, 0), vector(&mixed, 1));
    assert_eq!(mock.requests().await, 3, "the direct call only");
}
