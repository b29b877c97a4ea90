//! The provider pass-through routes end to end through the real server: every route reaches
//! `sluice mock` on the provider's real path with sluice's credentials (the mock requires its
//! key where each provider reads it, checks Bedrock's SigV4 signatures and Vertex AI's OAuth
//! tokens), never with the caller's; usage is read in each provider's shape and charged to the
//! virtual key's budget; streams arrive as they are sent; paths cannot leave the provider.
use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::{json, Value};
use sluice_mock::MockSettings;

const MASTER: &str = "sk-master";
const UPSTREAM_KEY: &str = "sk-upstream-secret";
const AWS_KEY: &str = "AKIDPASSTHROUGH";
const AWS_SECRET: &str = "pass/through+SECRET";
const BEDROCK_MODEL: &str = "anthropic.claude-sonnet-4-20250514-v1:0";

/// Every route's upstream from the environment variables LiteLLM reads, all at `up`.
fn config(up: &str, key_file: &std::path::Path, extra: &str) -> String {
    format!(
        r#"
model_list: []
environment_variables:
  OPENAI_API_KEY: {UPSTREAM_KEY}
  OPENAI_API_BASE: http://{up}/v1
  ANTHROPIC_API_KEY: {UPSTREAM_KEY}
  ANTHROPIC_API_BASE: http://{up}
  GEMINI_API_KEY: {UPSTREAM_KEY}
  GEMINI_API_BASE: http://{up}
  AZURE_API_KEY: {UPSTREAM_KEY}
  AZURE_API_BASE: http://{up}
  COHERE_API_KEY: {UPSTREAM_KEY}
  COHERE_API_BASE: http://{up}
  MISTRAL_API_KEY: {UPSTREAM_KEY}
  MISTRAL_API_BASE: http://{up}/v1
  AWS_ACCESS_KEY_ID: {AWS_KEY}
  AWS_SECRET_ACCESS_KEY: {AWS_SECRET}
  AWS_REGION_NAME: eu-west-1
  AWS_BEDROCK_RUNTIME_ENDPOINT: http://{up}
  DEFAULT_VERTEXAI_PROJECT: sluice-test
  DEFAULT_VERTEXAI_LOCATION: europe-west4
  DEFAULT_GOOGLE_APPLICATION_CREDENTIALS: {}
  VERTEXAI_API_BASE: http://{up}
general_settings:
  master_key: {MASTER}
{extra}
"#,
        key_file.display()
    )
}

fn strict_mock() -> MockSettings {
    MockSettings {
        api_key: Some(UPSTREAM_KEY.to_owned()),
        aws: Some((AWS_KEY.to_owned(), AWS_SECRET.to_owned())),
        ..MockSettings::default()
    }
}

async fn setup(mock: MockSettings) -> (MockServer, Gateway) {
    let mock = mock_server(mock).await;
    let host = mock.addr.to_string();
    let gw = gateway(&config(&host, &vertex_key_file(&host), "")).await;
    (mock, gw)
}

/// A virtual key made through the admin API.
/// Headers of a request.
type Headers = Vec<(&'static str, String)>;

/// One request per route (label, path, body, headers), each presenting `key` the way that
/// provider's SDK would.
fn calls(key: &str) -> Vec<(&'static str, String, String, Headers)> {
    let chat = r#"{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}"#;
    let gemini = r#"{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}"#;
    let bearer = format!("Bearer {key}");
    vec![
        (
            "/openai/*",
            "/openai/v1/chat/completions".into(),
            chat.into(),
            vec![("authorization", bearer.clone())],
        ),
        (
            "/anthropic/*",
            "/anthropic/v1/messages".into(),
            r#"{"model":"claude-sonnet-4-5","max_tokens":20,"messages":[{"role":"user","content":"hi"}]}"#.into(),
            vec![("x-api-key", key.to_owned()), ("anthropic-version", "2023-06-01".into())],
        ),
        (
            "/gemini/*",
            format!("/gemini/v1beta/models/gemini-2.5-flash:generateContent?key={key}"),
            gemini.into(),
            vec![],
        ),
        (
            "/vertex_ai/*",
            "/vertex_ai/v1/projects/sluice-test/locations/europe-west4/publishers/google/models/gemini-2.5-flash:generateContent".into(),
            gemini.into(),
            vec![("x-litellm-api-key", key.to_owned()), ("authorization", "Bearer ya29.caller-google-token".into())],
        ),
        (
            "/bedrock/*",
            format!("/bedrock/model/{}/converse", BEDROCK_MODEL.replace(':', "%3A")),
            r#"{"messages":[{"role":"user","content":[{"text":"hi"}]}]}"#.into(),
            vec![("x-litellm-api-key", key.to_owned())],
        ),
        (
            "/azure/*",
            "/azure/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21".into(),
            r#"{"messages":[{"role":"user","content":"hi"}]}"#.into(),
            vec![("api-key", key.to_owned())],
        ),
        (
            "/cohere/*",
            "/cohere/v2/chat".into(),
            r#"{"model":"command-a-03-2025","messages":[{"role":"user","content":"hi"}]}"#.into(),
            vec![("authorization", bearer.clone())],
        ),
        (
            "/mistral/*",
            "/mistral/v1/chat/completions".into(),
            chat.replace("gpt-4o-mini", "mistral-small-latest"),
            vec![("authorization", bearer)],
        ),
    ]
}

async fn call(gw: &Gateway, path: &str, body: &str, headers: &[(&'static str, String)]) -> Answer {
    let mut h: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    h.push(("content-type", "application/json"));
    send("POST", &gw.url(path), body.to_owned(), &h).await
}

#[tokio::test]
async fn every_route_reaches_the_provider_with_sluices_credentials() {
    let (mock, mut gw) = setup(strict_mock()).await;
    let key = new_key(&gw, json!({"key_alias": "pt"})).await;
    let models = [
        "gpt-4o-mini",
        "claude-sonnet-4-5",
        "gemini-2.5-flash",
        "gemini-2.5-flash",
        BEDROCK_MODEL,
        "gpt-4o",
        "command-a-03-2025",
        "mistral-small-latest",
    ];
    for ((label, path, body, headers), model) in calls(&key).into_iter().zip(models) {
        let a = call(&gw, &path, &body, &headers).await;
        assert_eq!(a.status, 200, "{label}: {}", a.text());
        assert!(!a.text().contains(&key), "{label}: the key is never echoed");
        let r = record(&mut gw).await;
        assert_eq!(r.route, label);
        assert_eq!(r.status, 200, "{label}");
        assert_eq!(r.model.as_deref(), Some(model), "{label}");
        assert!(r.key.is_some(), "{label}: the virtual key is on the record");
        let usage = r.usage.unwrap_or_else(|| panic!("{label}: usage read"));
        assert!(usage.completion_tokens > 0, "{label}: {usage:?}");
        // Every model here is in the built-in registry (LiteLLM's whole map).
        assert!(r.cost.is_some_and(|c| c > 0), "{label}: {:?}", r.cost);
        assert!(a.header("x-sluice-response-cost").is_some(), "{label}");
    }
    // Eight calls and one token exchange for Vertex AI.
    assert_eq!(mock.requests().await, 9);
    // A key the provider does not accept: the provider's own 401, passed through.
    let (_mock2, gw2) = setup(MockSettings {
        api_key: Some("another-key".into()),
        ..MockSettings::default()
    })
    .await;
    let a = call(
        &gw2,
        "/openai/v1/chat/completions",
        r#"{"model":"gpt-4o-mini","messages":[]}"#,
        &[("authorization", format!("Bearer {MASTER}"))],
    )
    .await;
    assert_eq!(a.status, 401);
    assert_eq!(a.json()["error"]["code"], "invalid_api_key");
}

#[tokio::test]
async fn the_callers_key_never_reaches_the_upstream() {
    let up = recording(Reply::Json(200, r#"{"ok":true}"#)).await;
    let host = up.addr.to_string();
    let mut gw = gateway(&config(&host, &vertex_key_file(&host), "")).await;
    let key = new_key(&gw, json!({})).await;
    for (label, path, body, mut headers) in calls(&key) {
        if label == "/vertex_ai/*" {
            continue; // its token exchange would hit the recorder; the mock test covers it
        }
        headers.extend([
            ("cookie", format!("session={key}")),
            ("connection", "keep-alive, x-hop".into()),
            ("x-hop", "1".into()),
            ("x-custom-header", "kept".into()),
        ]);
        let a = call(&gw, &path, &body, &headers).await;
        assert_eq!(a.status, 200, "{label}: {}", a.text());
        record(&mut gw).await;
    }
    let seen = up.requests();
    assert_eq!(seen.len(), 7);
    let expected = [
        (
            "/v1/chat/completions",
            "authorization",
            "Bearer sk-upstream-secret",
        ),
        ("/v1/messages", "x-api-key", UPSTREAM_KEY),
        (
            "/v1beta/models/gemini-2.5-flash:generateContent",
            "x-goog-api-key",
            UPSTREAM_KEY,
        ),
        (
            "/model/anthropic.claude-sonnet-4-20250514-v1%3A0/converse",
            "x-amz-date",
            "",
        ),
        (
            "/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21",
            "api-key",
            UPSTREAM_KEY,
        ),
        ("/v2/chat", "authorization", "Bearer sk-upstream-secret"),
        (
            "/v1/chat/completions",
            "authorization",
            "Bearer sk-upstream-secret",
        ),
    ];
    for (c, (path, header, value)) in seen.iter().zip(expected) {
        assert_eq!(c.path_and_query, path);
        assert!(
            !c.path_and_query.contains(&key),
            "{path}: no key in the URL"
        );
        let got = c.headers.get(header).unwrap().to_str().unwrap();
        if !value.is_empty() {
            assert_eq!(got, value, "{path}");
        }
        for (name, v) in &c.headers {
            let v = v.to_str().unwrap_or_default();
            assert!(!v.contains(&key), "{path}: the caller's key in {name}");
            assert!(!v.contains(MASTER), "{path}");
        }
        for gone in ["cookie", "x-hop", "x-litellm-api-key"] {
            assert!(c.headers.get(gone).is_none(), "{path}: {gone} forwarded");
        }
        assert_eq!(c.headers.get("x-custom-header").unwrap(), "kept");
    }
    // The Bedrock request is signed with sluice's credentials on the path as sent.
    let bedrock = &seen[3];
    let (path, query) = bedrock
        .path_and_query
        .split_once('?')
        .unwrap_or((&bedrock.path_and_query, ""));
    sluice_net::sigv4::verify(
        AWS_KEY,
        AWS_SECRET,
        path,
        query,
        &bedrock.headers,
        &bedrock.body,
    )
    .unwrap();
    let auth = bedrock
        .headers
        .get("authorization")
        .unwrap()
        .to_str()
        .unwrap();
    assert!(auth.contains("/eu-west-1/bedrock/aws4_request"), "{auth}");
}

#[tokio::test]
async fn bedrock_is_signed_and_its_event_stream_relayed_and_charged() {
    let (mock, mut gw) = setup(strict_mock()).await;
    let key = new_key(&gw, json!({})).await;
    let auth = [("x-litellm-api-key", key.clone())];
    let id = BEDROCK_MODEL.replace(':', "%3A");
    let body = r#"{"messages":[{"role":"user","content":[{"text":"hi"}]}]}"#;
    let a = call(
        &gw,
        &format!("/bedrock/model/{id}/converse-stream"),
        body,
        &auth,
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(
        a.header("content-type"),
        Some("application/vnd.amazon.eventstream")
    );
    // The frames are AWS's, untouched: they decode with their CRCs.
    let mut decoder = sluice_translate::eventstream::Decoder::default();
    decoder.push(&a.body);
    let mut kinds = Vec::new();
    while let Some(m) = decoder.next_message().unwrap() {
        kinds.push(m.header(":event-type").unwrap().to_owned());
    }
    assert_eq!(kinds.first().map(String::as_str), Some("messageStart"));
    assert_eq!(kinds.last().map(String::as_str), Some("metadata"));
    let r = record(&mut gw).await;
    assert!(r.stream);
    assert!(r.usage.unwrap().prompt_tokens > 0);
    assert!(r.cost.unwrap() > 0);
    // Unencoded model ids are signed as AWS expects too.
    let a = call(
        &gw,
        &format!("/bedrock/model/{BEDROCK_MODEL}/converse"),
        body,
        &auth,
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    record(&mut gw).await;
    assert_eq!(mock.requests().await, 2);
    // With credentials the mock does not accept, AWS's 403 comes back as is.
    let mock2 = mock_server(MockSettings {
        aws: Some((AWS_KEY.to_owned(), "another-secret".into())),
        ..MockSettings::default()
    })
    .await;
    let host = mock2.addr.to_string();
    let gw2 = gateway(&config(&host, &vertex_key_file(&host), "")).await;
    let a = call(
        &gw2,
        &format!("/bedrock/model/{id}/converse"),
        body,
        &[("authorization", format!("Bearer {MASTER}"))],
    )
    .await;
    assert_eq!(a.status, 403);
    assert_eq!(
        a.header("x-amzn-errortype"),
        Some("InvalidSignatureException")
    );
}

#[tokio::test]
async fn anthropic_stream_arrives_as_it_is_sent_and_is_charged() {
    let (_mock, mut gw) = setup(MockSettings {
        chunk_interval: Duration::from_millis(30),
        ..strict_mock()
    })
    .await;
    let key = new_key(&gw, json!({"max_budget": 10})).await;
    let started = Instant::now();
    let a = call(
        &gw,
        "/anthropic/v1/messages",
        r#"{"model":"claude-sonnet-4-5","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"hi"}]}"#,
        &[("x-api-key", key.clone())],
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert!(a
        .header("content-type")
        .unwrap()
        .starts_with("text/event-stream"));
    let (_, stop, usage, names) = anthropic_events(&a);
    assert_eq!(stop, "end_turn");
    assert_eq!(names.last().map(String::as_str), Some("message_stop"));
    assert!(usage["output_tokens"].as_u64().unwrap() > 0);
    // Relayed as sent: the first frame came long before the last.
    assert!(a.frames.len() > 3, "{} frames", a.frames.len());
    let first = a.frames.first().unwrap().0 - started;
    let last = a.frames.last().unwrap().0 - started;
    assert!(
        last - first >= Duration::from_millis(150),
        "{first:?} .. {last:?}"
    );
    let r = record(&mut gw).await;
    assert!(r.stream);
    assert_eq!(r.model.as_deref(), Some("claude-sonnet-4-5"));
    assert!(r.usage.unwrap().completion_tokens > 0);
    assert!(r.cost.unwrap() > 0);
    // The key's spend follows: the next answer reports it.
    let a = call(
        &gw,
        "/anthropic/v1/messages",
        r#"{"model":"claude-sonnet-4-5","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}"#,
        &[("x-api-key", key.clone())],
    )
    .await;
    let spent: f64 = a.header("x-sluice-key-spend").unwrap().parse().unwrap();
    assert!(spent > 0.0, "{spent}");
}

#[tokio::test]
async fn streams_of_google_and_openai_are_charged_without_changing_what_the_client_sees() {
    let (_mock, mut gw) = setup(strict_mock()).await;
    let key = new_key(&gw, json!({})).await;
    let a = call(
        &gw,
        &format!("/gemini/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse&key={key}"),
        r#"{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}"#,
        &[],
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert!(a.text().contains("usageMetadata"));
    let r = record(&mut gw).await;
    assert!(r.stream && r.usage.unwrap().completion_tokens > 0 && r.cost.unwrap() > 0);
    // An OpenAI stream that does not ask for usage: sluice asks, reads it, and removes it.
    let a = call(
        &gw,
        "/openai/v1/chat/completions",
        r#"{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"hi"}]}"#,
        &[("authorization", format!("Bearer {key}"))],
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let (text, _, _, usage) = openai_chunks(&a);
    assert!(!text.is_empty());
    assert!(usage.is_none(), "the client did not ask for usage");
    let r = record(&mut gw).await;
    assert!(r.usage.unwrap().completion_tokens > 0);
    assert!(r.cost.unwrap() > 0);
}

/// Two counts of a usage object, as the client sees them (`input`, `output`).
fn counts(usage: &Value, input: &str, output: &str) -> (u64, u64) {
    let n = |k: &str| {
        usage[k]
            .as_u64()
            .unwrap_or_else(|| panic!("{k} in {usage}"))
    };
    (n(input), n(output))
}

/// The usage a client sees in a stream, and sluice's record of it, agree.
fn charged(r: &sluice_core::record::RequestRecord, seen: (u64, u64), label: &str) {
    assert!(r.stream, "{label}");
    let u = r.usage.unwrap_or_else(|| panic!("{label}: usage read"));
    assert_eq!((u.prompt_tokens, u.completion_tokens), seen, "{label}");
    assert!(seen.0 > 0 && seen.1 > 0, "{label}: {seen:?}");
}

#[tokio::test]
async fn streams_in_each_providers_own_framing_are_charged() {
    let (_mock, mut gw) = setup(MockSettings {
        chunk_interval: Duration::from_millis(5),
        ..strict_mock()
    })
    .await;
    let key = new_key(&gw, json!({"max_budget": 10})).await;
    let bearer = [("authorization", format!("Bearer {key}"))];
    // Bedrock InvokeModelWithResponseStream on Claude: event-stream `chunk`s whose base64
    // `bytes` are Anthropic's events; Bedrock's own count rides in the last one.
    let id = BEDROCK_MODEL.replace(':', "%3A");
    let claude = r#"{"anthropic_version":"bedrock-2023-05-31","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}"#;
    let a = call(
        &gw,
        &format!("/bedrock/model/{id}/invoke-with-response-stream"),
        claude,
        &[("x-litellm-api-key", key.clone())],
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(
        a.header("content-type"),
        Some("application/vnd.amazon.eventstream")
    );
    let mut decoder = sluice_translate::eventstream::Decoder::default();
    decoder.push(&a.body);
    let (mut events, mut buf) = (Vec::new(), Vec::new());
    while let Some(m) = decoder.next_message().unwrap() {
        assert!(sluice_translate::eventstream::chunk_bytes(
            &m.payload, &mut buf
        ));
        events.push(serde_json::from_slice::<Value>(&buf).unwrap());
    }
    assert_eq!(events[0]["type"], "message_start");
    let metrics = &events.last().unwrap()["amazon-bedrock-invocationMetrics"];
    let seen = counts(metrics, "inputTokenCount", "outputTokenCount");
    let r = record(&mut gw).await;
    charged(&r, seen, "invoke-with-response-stream");
    assert_eq!(r.model.as_deref(), Some(BEDROCK_MODEL));
    assert!(r.cost.unwrap() > 0);
    // InvokeModel, whole: the model's own `usage`.
    let a = call(
        &gw,
        &format!("/bedrock/model/{id}/invoke"),
        claude,
        &[("x-litellm-api-key", key.clone())],
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let seen = counts(&a.json()["usage"], "input_tokens", "output_tokens");
    let r = record(&mut gw).await;
    let u = r.usage.unwrap();
    assert_eq!((u.prompt_tokens, u.completion_tokens), seen);
    assert!(r.cost.unwrap() > 0);
    // Cohere v2: SSE, the usage in `message-end`.
    let a = call(
        &gw,
        "/cohere/v2/chat",
        r#"{"model":"command-a-03-2025","stream":true,"messages":[{"role":"user","content":"hi"}]}"#,
        &bearer,
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let end: Value = a
        .sse_data()
        .iter()
        .map(|d| serde_json::from_str::<Value>(d).unwrap())
        .find(|e| e["type"] == "message-end")
        .unwrap();
    let units = &end["delta"]["usage"]["billed_units"];
    let seen = counts(units, "input_tokens", "output_tokens");
    charged(&record(&mut gw).await, seen, "cohere v2");
    // Cohere v1: one JSON document a line, the usage in `stream-end`.
    let a = call(
        &gw,
        "/cohere/v1/chat",
        r#"{"model":"command-r","stream":true,"message":"hi there"}"#,
        &bearer,
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(a.header("content-type"), Some("application/stream+json"));
    let lines: Vec<Value> = a
        .text()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let end = lines.last().unwrap();
    assert_eq!(end["event_type"], "stream-end");
    let units = &end["response"]["meta"]["billed_units"];
    let seen = counts(units, "input_tokens", "output_tokens");
    charged(&record(&mut gw).await, seen, "cohere v1");
    // Gemini without `alt=sse`: one JSON array, streamed element by element.
    let a = call(
        &gw,
        &format!("/gemini/v1beta/models/gemini-2.5-flash:streamGenerateContent?key={key}"),
        r#"{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}"#,
        &[],
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert!(a.frames.len() > 1, "relayed as it came");
    let items = a.json();
    let last = items.as_array().unwrap().last().unwrap();
    let seen = counts(
        &last["usageMetadata"],
        "promptTokenCount",
        "candidatesTokenCount",
    );
    let r = record(&mut gw).await;
    charged(&r, seen, "gemini array");
    assert!(r.cost.unwrap() > 0);
    // The key's spend has all of it.
    let a = call(
        &gw,
        "/cohere/v2/chat",
        r#"{"model":"command-a-03-2025","messages":[{"role":"user","content":"hi"}]}"#,
        &bearer,
    )
    .await;
    let spent: f64 = a.header("x-sluice-key-spend").unwrap().parse().unwrap();
    assert!(spent > 0.0, "{spent}");
}

#[tokio::test]
async fn virtual_key_budgets_limits_and_model_access_apply() {
    let (mock, mut gw) = setup(strict_mock()).await;
    let messages = r#"{"model":"claude-sonnet-4-5","max_tokens":20,"messages":[{"role":"user","content":"hi"}]}"#;
    // A tiny budget: the first call is admitted and spends it, the next is refused.
    let key = new_key(&gw, json!({"max_budget": 0.0000001})).await;
    let auth = [("x-api-key", key.clone())];
    let a = call(&gw, "/anthropic/v1/messages", messages, &auth).await;
    assert_eq!(a.status, 200, "{}", a.text());
    let r = record(&mut gw).await;
    assert!(r.cost.unwrap() > 0);
    let refused = call(&gw, "/anthropic/v1/messages", messages, &auth).await;
    assert_eq!(refused.status, 400, "{}", refused.text());
    assert_eq!(refused.json()["error"]["code"], "budget_exceeded");
    record(&mut gw).await;
    // Spend logs hold the pass-through call.
    let logs_ok = eventually(PATIENCE, || async {
        let logs = send(
            "GET",
            &gw.url(&format!("/spend/logs?api_key={key}")),
            "",
            &[("authorization", "Bearer sk-master")],
        )
        .await;
        logs.json().as_array().is_some_and(|rows| {
            rows.iter().any(|l| {
                l["model_group"] == "claude-sonnet-4-5"
                    && l["custom_llm_provider"] == "anthropic"
                    && l["spend"].as_f64().unwrap_or(0.0) > 0.0
                    && l["status"] == "success"
            })
        })
    })
    .await;
    assert!(logs_ok, "the pass-through call is in the spend log");
    // Requests per minute.
    let key = new_key(&gw, json!({"rpm_limit": 1})).await;
    let auth = [("x-api-key", key.clone())];
    assert_eq!(
        call(&gw, "/anthropic/v1/messages", messages, &auth)
            .await
            .status,
        200
    );
    let limited = call(&gw, "/anthropic/v1/messages", messages, &auth).await;
    assert_eq!(limited.status, 429);
    assert_eq!(limited.json()["error"]["code"], "rpm_limit_exceeded");
    // Model access: checked against `<provider>/<model>`.
    let key = new_key(&gw, json!({"models": ["anthropic/*"]})).await;
    let a = call(
        &gw,
        "/anthropic/v1/messages",
        messages,
        &[("x-api-key", key.clone())],
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let denied = call(
        &gw,
        "/openai/v1/chat/completions",
        r#"{"model":"gpt-4o-mini","messages":[]}"#,
        &[("authorization", format!("Bearer {key}"))],
    )
    .await;
    assert_eq!(denied.status, 401);
    assert_eq!(denied.json()["error"]["code"], "model_not_allowed");
    // No key, a wrong key: refused before anything reaches the provider.
    let before = mock.requests().await;
    for headers in [vec![], vec![("x-api-key", "sk-nobody".to_owned())]] {
        let a = call(&gw, "/anthropic/v1/messages", messages, &headers).await;
        assert_eq!(a.status, 401, "{}", a.text());
    }
    assert_eq!(mock.requests().await, before);
}

#[tokio::test]
async fn paths_may_not_leave_the_provider() {
    let (mock, gw) = setup(strict_mock()).await;
    for path in [
        "/anthropic/v1/../../key/generate",
        "/anthropic/v1/%2e%2e/%2E%2E/key/generate",
        "/openai/v1/files/..%2f..%2fsecret",
        "/openai//evil.example/v1/chat/completions",
        "/gemini/v1beta/models/%5c..%5cx:generateContent",
    ] {
        let a = send(
            "POST",
            &gw.url(path),
            "{}",
            &[("authorization", "Bearer sk-master")],
        )
        .await;
        assert_eq!(a.status, 400, "{path}: {}", a.text());
        assert_eq!(a.json()["error"]["param"], "path", "{path}");
    }
    assert_eq!(mock.requests().await, 0);
    // Methods LiteLLM serves on these routes, and no others.
    let a = send(
        "OPTIONS",
        &gw.url("/openai/v1/models"),
        "",
        &[MASTER_HEADER],
    )
    .await;
    assert_eq!(a.status, 405);
}

const MASTER_HEADER: (&str, &str) = ("authorization", "Bearer sk-master");

#[tokio::test]
async fn unconfigured_routes_say_what_is_missing_and_marked_deployments_lend_credentials() {
    let mock = mock_server(strict_mock()).await;
    let up = mock.addr;
    let gw = gateway(&format!(
        r#"
model_list:
  - model_name: claude
    litellm_params:
      model: anthropic/claude-sonnet-4-5
      api_base: http://{up}
      api_key: {UPSTREAM_KEY}
      use_in_pass_through: true
general_settings:
  master_key: {MASTER}
"#
    ))
    .await;
    for (path, missing) in [
        (
            "/azure/openai/deployments/d/chat/completions",
            "AZURE_API_BASE",
        ),
        ("/bedrock/model/x/converse", "AWS_ACCESS_KEY_ID"),
        ("/openai/v1/chat/completions", "OPENAI_API_KEY"),
        ("/cohere/v2/chat", "COHERE_API_KEY"),
        (
            "/vertex_ai/v1/projects/p/locations/l/publishers/google/models/m:generateContent",
            "VERTEXAI_PROJECT",
        ),
    ] {
        let a = send("POST", &gw.url(path), "{}", &[MASTER_HEADER]).await;
        assert_eq!(a.status, 501, "{path}: {}", a.text());
        let e = &a.json()["error"];
        assert_eq!(e["code"], "pass_through_not_configured");
        let message = e["message"].as_str().unwrap();
        assert!(message.contains(missing), "{path}: {message}");
    }
    // The anthropic/ deployment marked `use_in_pass_through` serves /anthropic/*.
    let a = call(
        &gw,
        "/anthropic/v1/messages",
        r#"{"model":"claude-sonnet-4-5","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}"#,
        &[("x-api-key", MASTER.to_owned())],
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    // GET works too (the provider's model list), with no body.
    let a = send("GET", &gw.url("/anthropic/v1/models"), "", &[MASTER_HEADER]).await;
    assert_eq!(a.status, 200, "{}", a.text());
}

/// The next record of an inference or pass-through request (admin calls' are skipped).
async fn record(gw: &mut Gateway) -> sluice_core::record::RequestRecord {
    loop {
        let r = gw.next_record().await;
        if r.route != "admin" {
            return r;
        }
    }
}

/// A `model_list` whose groups have deployments of the pass-through routes' providers, all at
/// `up`, with credentials of their own (no route is configured from the environment; one
/// Bedrock deployment lends `/bedrock/*` its upstream for names that are no group).
fn group_config(up: &str, key_file: &std::path::Path, aws_secret: &str) -> String {
    let key_file = key_file.display();
    format!(
        r#"
model_list:
  - model_name: claude-fast
    litellm_params:
      model: bedrock/{BEDROCK_MODEL}
      aws_access_key_id: {AWS_KEY}
      aws_secret_access_key: "{aws_secret}"
      aws_region_name: eu-west-1
      api_base: http://{up}
    model_info: {{id: bedrock-a}}
  - model_name: claude-fast
    litellm_params:
      model: bedrock/anthropic.claude-3-5-haiku-20241022-v1:0
      aws_access_key_id: {AWS_KEY}
      aws_secret_access_key: "{aws_secret}"
      aws_region_name: eu-west-1
      api_base: http://{up}
      use_in_pass_through: true
    model_info: {{id: bedrock-b}}
  - model_name: claude-fast
    litellm_params:
      model: anthropic/claude-sonnet-4-5
      api_key: {UPSTREAM_KEY}
      api_base: http://{up}
    model_info: {{id: anthropic-a}}
  - model_name: flash
    litellm_params:
      model: gemini/gemini-2.5-flash
      api_key: {UPSTREAM_KEY}
      api_base: http://{up}
    model_info: {{id: gemini-a}}
  - model_name: flash
    litellm_params:
      model: vertex_ai/gemini-2.5-pro
      vertex_project: group-project
      vertex_location: us-east5
      vertex_credentials: {key_file}
      api_base: http://{up}
    model_info: {{id: vertex-a}}
  - model_name: chat
    litellm_params:
      model: azure/gpt-4o-prod
      api_key: {UPSTREAM_KEY}
      api_base: http://{up}
      api_version: "2024-10-21"
    model_info: {{id: azure-a}}
general_settings:
  master_key: {MASTER}
"#
    )
}

#[tokio::test]
async fn group_names_reach_a_deployment_of_the_group_with_its_id_and_credentials() {
    let up = recording(Reply::Json(200, r#"{"ok":true}"#)).await;
    let host = up.addr.to_string();
    let mut gw = gateway(&group_config(&host, &vertex_key_file(&host), AWS_SECRET)).await;
    let master = [("authorization", format!("Bearer {MASTER}"))];
    let bedrock = [("x-litellm-api-key", MASTER.to_owned())];
    let claude = r#"{"anthropic_version":"bedrock-2023-05-31","max_tokens":5,"messages":[]}"#;
    for (path, body, headers) in [
        ("/bedrock/model/claude-fast/invoke", claude, &bedrock[..]),
        (
            "/bedrock/model/claude-fast/invoke-with-response-stream",
            claude,
            &bedrock[..],
        ),
        (
            "/anthropic/v1/messages",
            r#"{"model":"claude-fast","max_tokens":5,"messages":[]}"#,
            &master[..],
        ),
        (
            "/azure/openai/deployments/chat/chat/completions?api-version=2024-10-21",
            r#"{"messages":[]}"#,
            &master[..],
        ),
        (
            "/gemini/v1beta/models/flash:generateContent",
            r#"{"contents":[]}"#,
            &master[..],
        ),
    ] {
        let a = call(&gw, path, body, headers).await;
        assert_eq!(a.status, 200, "{path}: {}", a.text());
        let r = record(&mut gw).await;
        assert!(r.deployment.is_some(), "{path}: routed to a deployment");
    }
    let seen = up.requests();
    let paths: Vec<&str> = seen.iter().map(|c| c.path_and_query.as_str()).collect();
    // Bedrock: the group's name in the path became a deployment's model id, signed as sent
    // with that deployment's credentials.
    assert!(
        paths[0] == "/model/anthropic.claude-sonnet-4-20250514-v1%3A0/invoke"
            || paths[0] == "/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/invoke",
        "{}",
        paths[0]
    );
    assert!(
        paths[1].ends_with("/invoke-with-response-stream"),
        "{}",
        paths[1]
    );
    for c in &seen[..2] {
        sluice_net::sigv4::verify(
            AWS_KEY,
            AWS_SECRET,
            &c.path_and_query,
            "",
            &c.headers,
            &c.body,
        )
        .unwrap();
    }
    // Anthropic: the body's `model`, and nothing else, is the deployment's; its key is sent.
    assert_eq!(paths[2], "/v1/messages");
    assert_eq!(
        &seen[2].body[..],
        br#"{"model":"claude-sonnet-4-5","max_tokens":5,"messages":[]}"#
    );
    assert_eq!(seen[2].headers.get("x-api-key").unwrap(), UPSTREAM_KEY);
    // Azure: the deployment in the path.
    assert_eq!(
        paths[3],
        "/openai/deployments/gpt-4o-prod/chat/completions?api-version=2024-10-21"
    );
    assert_eq!(seen[3].headers.get("api-key").unwrap(), UPSTREAM_KEY);
    // Gemini: only the Gemini deployment of `flash` serves `/gemini/*`.
    assert_eq!(paths[4], "/v1beta/models/gemini-2.5-flash:generateContent");
    assert_eq!(seen[4].headers.get("x-goog-api-key").unwrap(), UPSTREAM_KEY);
    // A name that is no group goes as written, to the route's own upstream (none here).
    let a = call(
        &gw,
        "/gemini/v1beta/models/gemini-2.0-pro:generateContent",
        "{}",
        &master,
    )
    .await;
    assert_eq!(a.status, 501, "{}", a.text());
    // So does a group without a deployment of the route's provider (here to the Bedrock
    // deployment marked `use_in_pass_through`).
    let a = call(&gw, "/bedrock/model/flash/converse", "{}", &bedrock).await;
    assert_eq!(a.status, 200, "{}", a.text());
    let seen = up.requests();
    assert_eq!(seen.len(), 6);
    assert_eq!(seen[5].path_and_query, "/model/flash/converse");
}

#[tokio::test]
async fn group_names_are_balanced_charged_and_checked_for_access() {
    let mock = mock_server(strict_mock()).await;
    let host = mock.addr.to_string();
    let mut gw = gateway(&group_config(&host, &vertex_key_file(&host), AWS_SECRET)).await;
    let key = new_key(
        &gw,
        json!({"models": ["claude-fast", "flash"], "max_budget": 10}),
    )
    .await;
    let bedrock = [("x-litellm-api-key", key.clone())];
    let claude = r#"{"anthropic_version":"bedrock-2023-05-31","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}"#;
    // The group's Bedrock deployments share the calls (the router's strategy); each answer
    // comes from the model the deployment names, and is charged at that deployment's price.
    let mut deployments = std::collections::BTreeSet::new();
    for op in ["invoke", "invoke-with-response-stream", "invoke", "invoke"] {
        let a = call(
            &gw,
            &format!("/bedrock/model/claude-fast/{op}"),
            claude,
            &bedrock,
        )
        .await;
        assert_eq!(a.status, 200, "{op}: {}", a.text());
        let r = record(&mut gw).await;
        assert_eq!(r.model.as_deref(), Some("claude-fast"), "{op}");
        assert!(r.usage.unwrap().completion_tokens > 0, "{op}");
        assert!(r.cost.unwrap() > 0, "{op}: priced as the deployment");
        let deployment = r.deployment.unwrap().to_string();
        if op == "invoke" {
            let expected = match deployment.as_str() {
                "bedrock-a" => BEDROCK_MODEL,
                _ => "anthropic.claude-3-5-haiku-20241022-v1:0",
            };
            assert_eq!(a.json()["model"], expected, "{deployment}");
        }
        deployments.insert(deployment);
    }
    assert_eq!(
        deployments.into_iter().collect::<Vec<_>>(),
        ["bedrock-a", "bedrock-b"]
    );
    // On `/anthropic/*` the same group is its Anthropic deployment.
    let a = call(
        &gw,
        "/anthropic/v1/messages",
        r#"{"model":"claude-fast","max_tokens":20,"stream":true,"messages":[{"role":"user","content":"hi"}]}"#,
        &[("x-api-key", key.clone())],
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let r = record(&mut gw).await;
    assert_eq!(
        (r.deployment.as_deref(), r.model.as_deref()),
        (Some("anthropic-a"), Some("claude-fast"))
    );
    assert!(r.usage.unwrap().completion_tokens > 0 && r.cost.unwrap() > 0);
    // Gemini and Vertex AI: `flash` is each route's own deployment; Vertex AI's project and
    // location are the deployment's, whatever the path said.
    let gemini = r#"{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}"#;
    let a = call(
        &gw,
        &format!("/gemini/v1beta/models/flash:generateContent?key={key}"),
        gemini,
        &[],
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(a.json()["modelVersion"], "gemini-2.5-flash");
    assert_eq!(
        record(&mut gw).await.deployment.as_deref(),
        Some("gemini-a")
    );
    let a = call(
        &gw,
        "/vertex_ai/v1/projects/client-project/locations/europe-west4/publishers/google/models/flash:generateContent",
        gemini,
        &[("x-litellm-api-key", key.clone())],
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(a.json()["modelVersion"], "gemini-2.5-pro");
    assert_eq!(
        record(&mut gw).await.deployment.as_deref(),
        Some("vertex-a")
    );
    // Access is the group's: the key may use `claude-fast`, not the model id behind it (which
    // `/bedrock/*` would pass as written), nor a group it was not given.
    for (path, body, headers) in [
        (
            format!("/bedrock/model/{BEDROCK_MODEL}/invoke"),
            claude,
            bedrock.to_vec(),
        ),
        (
            "/azure/openai/deployments/chat/chat/completions?api-version=2024-10-21".to_owned(),
            r#"{"messages":[]}"#,
            vec![("api-key", key.clone())],
        ),
    ] {
        let a = call(&gw, &path, body, &headers).await;
        assert_eq!(a.status, 401, "{path}: {}", a.text());
        assert_eq!(a.json()["error"]["code"], "model_not_allowed", "{path}");
        record(&mut gw).await;
    }
}

#[tokio::test]
async fn a_groups_failing_deployment_cools_down_as_the_router_says() {
    let mock = mock_server(strict_mock()).await;
    let host = mock.addr.to_string();
    // Both Bedrock deployments sign with a secret AWS (the mock) refuses.
    let gw = gateway(&group_config(
        &host,
        &vertex_key_file(&host),
        "wrong-secret",
    ))
    .await;
    let bedrock = [("x-litellm-api-key", MASTER.to_owned())];
    let claude = r#"{"anthropic_version":"bedrock-2023-05-31","max_tokens":5,"messages":[]}"#;
    for _ in 0..2 {
        let a = call(&gw, "/bedrock/model/claude-fast/invoke", claude, &bedrock).await;
        assert_eq!(a.status, 403, "{}", a.text());
        assert_eq!(
            a.header("x-amzn-errortype"),
            Some("InvalidSignatureException")
        );
    }
    let before = mock.requests().await;
    let a = call(&gw, "/bedrock/model/claude-fast/invoke", claude, &bedrock).await;
    assert_eq!(a.status, 503, "{}", a.text());
    assert_eq!(a.json()["error"]["code"], "no_healthy_deployment");
    assert_eq!(
        mock.requests().await,
        before,
        "nothing sent while they cool down"
    );
}

/// Guardrails on the pass-through routes: on OpenAI's and Anthropic's APIs the text is checked
/// and masked as on `/v1/...` (the provider sees the placeholder and no `guardrails` field, the
/// caller gets their value back, a post_call block refuses the answer); on a provider API
/// whose text sluice cannot read, a request a guardrail applies to is refused, never sent.
#[tokio::test]
async fn guardrails_apply_on_readable_routes_and_refuse_unreadable_ones() {
    const ANSWER: &str = r#"{"id":"c1","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"Mailing <EMAIL_ADDRESS_1> now."},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":5,"total_tokens":10}}"#;
    let up = recording(Reply::Json(200, ANSWER)).await;
    let host = up.addr.to_string();
    let extra = r#"guardrails:
  - guardrail_name: pii
    litellm_params:
      guardrail: litellm_content_filter
      mode: pre_call
      output_parse_pii: true
      pii_entities_config: {EMAIL_ADDRESS: MASK, CREDIT_CARD: MASK}
  - guardrail_name: secrets
    litellm_params:
      guardrail: hide-secrets
      mode: post_call
      pii_entities_config: {AWS_ACCESS_KEY: BLOCK}
"#;
    let gw = gateway(&config(&host, &vertex_key_file(&host), extra)).await;
    let master = vec![("authorization", format!("Bearer {MASTER}"))];
    // OpenAI's route: masked before the provider, given back in the answer.
    let a = call(
        &gw,
        "/openai/v1/chat/completions",
        r#"{"model":"gpt-4o-mini","guardrails":["pii"],"messages":[{"role":"user","content":"mail jane@example.com"}]}"#,
        &master,
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let sent = String::from_utf8(up.requests()[0].body.to_vec()).unwrap();
    assert!(sent.contains("mail <EMAIL_ADDRESS_1>"), "{sent}");
    assert!(
        !sent.contains("jane@") && !sent.contains("guardrails"),
        "{sent}"
    );
    assert_eq!(
        a.json()["choices"][0]["message"]["content"],
        "Mailing jane@example.com now."
    );
    assert_eq!(a.header("x-sluice-applied-guardrails"), Some("pii"));
    // Without a guardrail named, the body goes as it came.
    let plain =
        r#"{"model":"gpt-4o-mini","messages":[{"role":"user","content":"mail jane@example.com"}]}"#;
    assert_eq!(
        call(&gw, "/openai/v1/chat/completions", plain, &master)
            .await
            .status,
        200
    );
    assert_eq!(up.requests()[1].body, plain.as_bytes());
    // Anthropic's route: the card is masked in the Messages body.
    let a = call(
        &gw,
        "/anthropic/v1/messages",
        r#"{"model":"claude-sonnet-4-5","max_tokens":10,"guardrails":["pii"],"messages":[{"role":"user","content":"card 4111 1111 1111 1111"}]}"#,
        &master,
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let sent = String::from_utf8(up.requests()[2].body.to_vec()).unwrap();
    assert!(
        sent.contains("card <CREDIT_CARD_1>") && !sent.contains("4111"),
        "{sent}"
    );
    // A post_call block: the answer is refused (the provider was called, and is charged).
    let leaky = recording(Reply::Json(
        200,
        r#"{"id":"c2","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"key AKIAIOSFODNN7EXAMPLE"},"finish_reason":"stop"}]}"#,
    ))
    .await;
    let lhost = leaky.addr.to_string();
    let gw2 = gateway(&config(&lhost, &vertex_key_file(&lhost), extra)).await;
    let a = call(
        &gw2,
        "/openai/v1/chat/completions",
        r#"{"model":"m","guardrails":["secrets"],"messages":[{"role":"user","content":"hi"}]}"#,
        &master,
    )
    .await;
    assert_eq!(a.status, 400, "{}", a.text());
    assert_eq!(a.json()["error"]["code"], "guardrail_blocked");
    assert!(!a.text().contains("AKIA"));
    // Gemini's API: sluice cannot read its text, so a named guardrail refuses the request.
    let before = up.requests().len();
    let a = call(
        &gw,
        "/gemini/v1beta/models/gemini-2.0-flash:generateContent",
        r#"{"guardrails":["pii"],"contents":[{"role":"user","parts":[{"text":"mail jane@example.com"}]}]}"#,
        &master,
    )
    .await;
    assert_eq!(a.status, 400, "{}", a.text());
    assert_eq!(a.json()["error"]["param"], "guardrails");
    assert_eq!(up.requests().len(), before, "nothing was sent");
}

/// LiteLLM's `general_settings.pass_through_endpoints`: the operator's own routes, forwarded to
/// their target with the config's key (never the caller's), behind virtual keys, charged per
/// request; the path may not leave the target; an open route takes no key.
#[tokio::test]
async fn custom_pass_through_routes_forward_with_the_configs_key_and_charge_per_call() {
    let up = recording(Reply::Json(200, r#"{"ok":true}"#)).await;
    let target = format!("http://{}/api", up.addr);
    let config = format!(
        r#"
model_list: []
general_settings:
  master_key: {MASTER}
  pass_through_endpoints:
    - path: /bria
      target: {target}
      headers: {{Authorization: "Bearer bria-upstream-key"}}
      include_subpath: true
      cost_per_request: 0.25
      default_query_params: {{api_version: "2"}}
      methods: [POST]
    - path: /status
      target: {target}/status
      auth: false
"#
    );
    let mut gw = gateway(&config).await;
    let key = new_key(&gw, json!({"key_alias": "bria-user", "max_budget": 10})).await;
    let a = send(
        "POST",
        &gw.url("/bria/v1/text-to-image?seed=7"),
        r#"{"prompt":"a lighthouse"}"#.to_owned(),
        &[
            ("authorization", &format!("Bearer {key}")),
            ("content-type", "application/json"),
        ],
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(a.json()["ok"], true);
    let seen = up.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].path_and_query,
        "/api/v1/text-to-image?api_version=2&seed=7"
    );
    assert_eq!(seen[0].headers["authorization"], "Bearer bria-upstream-key");
    assert!(
        !format!("{:?}", seen[0].headers).contains(&key),
        "the caller's key stays here"
    );
    assert_eq!(&seen[0].body[..], br#"{"prompt":"a lighthouse"}"#);
    assert_eq!(a.header("x-litellm-response-cost"), Some("0.25"));
    let mut r = gw.next_record().await;
    while r.route != "pass_through_endpoint" {
        r = gw.next_record().await;
    }
    assert_eq!(r.cost, Some(250_000_000), "0.25 USD in nanos");
    assert_eq!(
        r.key.as_ref().and_then(|k| k.alias.as_deref()),
        Some("bria-user")
    );
    // A key is needed; the method must be one the route serves; the path stays below.
    let no_key = send("POST", &gw.url("/bria/x"), "{}".to_owned(), &[]).await;
    assert_eq!(no_key.status, 401);
    let wrong = send("GET", &gw.url("/bria/x"), String::new(), &[MASTER_HEADER]).await;
    assert_eq!(wrong.status, 405);
    let out = send(
        "POST",
        &gw.url("/bria/..%2F..%2Fetc"),
        "{}".to_owned(),
        &[MASTER_HEADER],
    )
    .await;
    assert_eq!(out.status, 400, "{}", out.text());
    // A key limited to some models needs the route's path among them.
    let narrow = new_key(&gw, json!({"models": ["gpt-4o"]})).await;
    let refused = send(
        "POST",
        &gw.url("/bria/x"),
        "{}".to_owned(),
        &[("authorization", &format!("Bearer {narrow}"))],
    )
    .await;
    assert_eq!(refused.status, 401, "{}", refused.text());
    // The open route takes no key.
    let open = send("GET", &gw.url("/status"), String::new(), &[]).await;
    assert_eq!(open.status, 200, "{}", open.text());
    assert_eq!(up.requests().last().unwrap().path_and_query, "/api/status");
}

/// A custom route's body and a web search are not text sluice can check: a guardrail that
/// applies (here `default_on`) refuses them before they are admitted or sent, and one that
/// does not apply lets them through.
#[tokio::test]
async fn a_custom_route_is_refused_when_a_guardrail_applies_to_it() {
    let up = recording(Reply::Json(200, r#"{"ok":true}"#)).await;
    let config = |default_on: bool| {
        format!(
            r#"
model_list: []
general_settings:
  master_key: {MASTER}
  pass_through_endpoints:
    - path: /bria
      target: http://{}/api
      include_subpath: true
      cost_per_request: 0.25
guardrails:
  - guardrail_name: pii
    litellm_params:
      guardrail: litellm_content_filter
      mode: pre_call
      default_on: {default_on}
      pii_entities_config: {{EMAIL_ADDRESS: MASK}}
"#,
            up.addr
        )
    };
    let body = r#"{"prompt":"mail jane@example.com"}"#;
    let on = gateway(&config(true)).await;
    let a = send(
        "POST",
        &on.url("/bria/v1/x"),
        body.to_owned(),
        &[MASTER_HEADER],
    )
    .await;
    assert_eq!(a.status, 400, "{}", a.text());
    assert_eq!(a.json()["error"]["param"], "guardrails");
    assert!(a.text().contains("/bria"), "{}", a.text());
    assert!(up.requests().is_empty(), "nothing was sent");
    let off = gateway(&config(false)).await;
    let a = send(
        "POST",
        &off.url("/bria/v1/x"),
        body.to_owned(),
        &[MASTER_HEADER],
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(up.requests().len(), 1);
}
