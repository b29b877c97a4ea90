//! End-to-end native providers through the real server: OpenAI clients (`/v1/chat/completions`,
//! `/v1/embeddings`) and Anthropic clients (`/v1/messages`) on `gemini/` and `bedrock/`
//! deployments, answered by `sluice mock` on Google's and AWS's real paths and wire formats.
//! The Bedrock mock checks every SigV4 signature, so a wrong one fails these tests.
use crate::common::*;
use serde_json::{json, Value};
use sluice_mock::{Faults, MockSettings};

const AWS_KEY: &str = "AKIDMOCKEXAMPLE";
const AWS_SECRET: &str = "mock/secret+KEY";
const BEDROCK_MODEL: &str = "anthropic.claude-3-5-sonnet-20240620-v1:0";

fn config(mock: &str) -> String {
    format!(
        r#"
model_list:
  - model_name: gem
    litellm_params:
      model: gemini/gemini-2.0-flash
      api_base: http://{mock}
      api_key: g-key
  - model_name: bed
    litellm_params:
      model: bedrock/{BEDROCK_MODEL}
      api_base: http://{mock}
      aws_access_key_id: {AWS_KEY}
      aws_secret_access_key: {AWS_SECRET}
      aws_session_token: session-token
      aws_region_name: eu-west-1
  - model_name: bed-wrong-secret
    litellm_params:
      model: bedrock/{BEDROCK_MODEL}
      api_base: http://{mock}
      aws_access_key_id: {AWS_KEY}
      aws_secret_access_key: not-the-secret
  - model_name: gem-embed
    litellm_params:
      model: gemini/text-embedding-004
      api_base: http://{mock}
      api_key: g-key
  - model_name: titan
    litellm_params:
      model: bedrock/amazon.titan-embed-text-v2:0
      api_base: http://{mock}
      aws_access_key_id: {AWS_KEY}
      aws_secret_access_key: {AWS_SECRET}
router_settings:
  num_retries: 0
  disable_cooldowns: true
general_settings:
  master_key: sk-master
"#
    )
}

fn signing_mock(faults: Faults) -> MockSettings {
    MockSettings {
        aws: Some((AWS_KEY.to_owned(), AWS_SECRET.to_owned())),
        faults,
        ..MockSettings::default()
    }
}

async fn setup() -> (MockServer, Gateway) {
    let mock = mock_server(signing_mock(Faults::default())).await;
    let gw = gateway(&config(&mock.addr.to_string())).await;
    (mock, gw)
}

const WEATHER_TOOL_OPENAI: &str = r#"[{"type":"function","function":{"name":"get_weather","description":"Weather in a city","parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"]}}}]"#;
const WEATHER_TOOL_ANTHROPIC: &str = r#"[{"name":"get_weather","description":"Weather in a city","input_schema":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"]}}]"#;
const NATIVE: [(&str, &str); 2] = [("gem", "gemini"), ("bed", "bedrock")];

async fn messages(gw: &Gateway, body: &str) -> Answer {
    send(
        "POST",
        &gw.url("/v1/messages"),
        body.to_owned(),
        &[
            ("x-api-key", "sk-master"),
            ("anthropic-version", "2023-06-01"),
        ],
    )
    .await
}

fn weather_args(arguments: &str) -> Value {
    let v: Value = serde_json::from_str(arguments).unwrap();
    assert_eq!(v, json!({"city": "mock city", "days": 1}));
    v
}

#[tokio::test]
async fn openai_chat_on_gemini_and_bedrock() {
    let (_mock, mut gw) = setup().await;
    for (model, provider) in NATIVE {
        let a = post(
            &gw.url("/v1/chat/completions"),
            &format!(
                r#"{{"model":"{model}","messages":[{{"role":"system","content":"Be brief."}},{{"role":"user","content":"hello"}}],"max_tokens":50,"temperature":0.2}}"#
            ),
        )
        .await;
        assert_eq!(a.status, 200, "{model}: {}", a.text());
        let v = a.json();
        assert_eq!(v["object"], "chat.completion");
        assert!(
            v["choices"][0]["message"]["content"]
                .as_str()
                .unwrap()
                .starts_with("The mock provider answers"),
            "{v}"
        );
        assert_eq!(v["choices"][0]["finish_reason"], "stop");
        assert_eq!(v["usage"]["completion_tokens"], 16);
        assert!(v["usage"]["prompt_tokens"].as_u64().unwrap() > 0);
        let r = gw.next_record().await;
        assert_eq!(r.provider, Some(provider));
        assert_eq!(r.usage.unwrap().completion_tokens, 16);
    }
}

#[tokio::test]
async fn openai_streamed_tool_calls_assemble_to_the_same_arguments() {
    let (_mock, gw) = setup().await;
    for (model, _) in NATIVE {
        let body = format!(
            r#"{{"model":"{model}","stream":true,"stream_options":{{"include_usage":true}},"messages":[{{"role":"user","content":"weather in Paris?"}}],"tools":{WEATHER_TOOL_OPENAI}}}"#
        );
        let a = post(&gw.url("/v1/chat/completions"), &body).await;
        assert_eq!(a.status, 200, "{model}: {}", a.text());
        let (text, calls, finish, usage) = openai_chunks(&a);
        assert_eq!(text, "Calling get_weather.", "{model}");
        assert_eq!(calls.len(), 1, "{model}");
        assert_eq!(calls[0].0, "get_weather");
        weather_args(&calls[0].1);
        assert_eq!(finish, "tool_calls", "{model}");
        assert!(usage.unwrap()["prompt_tokens"].as_u64().unwrap() > 0);

        // Non-stream, the same call.
        let a = post(
            &gw.url("/v1/chat/completions"),
            &body.replace(r#""stream":true,"#, ""),
        )
        .await;
        let v = a.json();
        let call = &v["choices"][0]["message"]["tool_calls"][0];
        assert_eq!(call["function"]["name"], "get_weather");
        weather_args(call["function"]["arguments"].as_str().unwrap());
        assert_eq!(v["choices"][0]["finish_reason"], "tool_calls");

        // The tool result goes back and the model answers in text.
        let id = call["id"].as_str().unwrap();
        let follow = format!(
            r#"{{"model":"{model}","messages":[{{"role":"user","content":"weather in Paris?"}},{{"role":"assistant","content":null,"tool_calls":[{call}]}},{{"role":"tool","tool_call_id":"{id}","content":"{{\"temp\":21}}"}}],"tools":{WEATHER_TOOL_OPENAI}}}"#
        );
        let a = post(&gw.url("/v1/chat/completions"), &follow).await;
        assert_eq!(a.status, 200, "{model}: {}", a.text());
        assert_eq!(a.json()["choices"][0]["finish_reason"], "stop", "{model}");
    }
}

#[tokio::test]
async fn anthropic_client_on_gemini_and_bedrock() {
    let (_mock, gw) = setup().await;
    for (model, _) in NATIVE {
        let a = messages(
            &gw,
            &format!(
                r#"{{"model":"{model}","max_tokens":100,"system":"Be brief.","messages":[{{"role":"user","content":"hi"}}]}}"#
            ),
        )
        .await;
        assert_eq!(a.status, 200, "{model}: {}", a.text());
        let v = a.json();
        assert_eq!(v["type"], "message");
        assert_eq!(v["stop_reason"], "end_turn");
        assert_eq!(v["usage"]["output_tokens"], 16);

        let body = format!(
            r#"{{"model":"{model}","max_tokens":100,"stream":true,"messages":[{{"role":"user","content":"weather?"}}],"tools":{WEATHER_TOOL_ANTHROPIC}}}"#
        );
        let a = messages(&gw, &body).await;
        assert_eq!(a.status, 200, "{model}: {}", a.text());
        let (blocks, stop, usage, names) = anthropic_events(&a);
        assert_eq!(stop, "tool_use", "{model}");
        assert_eq!(names.first().map(String::as_str), Some("message_start"));
        assert_eq!(names.last().map(String::as_str), Some("message_stop"));
        let tool = blocks.iter().find(|b| b["type"] == "tool_use").unwrap();
        assert_eq!(tool["name"], "get_weather");
        weather_args(tool["json"].as_str().unwrap());
        assert!(usage["output_tokens"].as_u64().unwrap() > 0);

        // Non-stream tool use, then its result sent back.
        let a = messages(&gw, &body.replace(r#""stream":true,"#, "")).await;
        let v = a.json();
        let tool = v["content"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["type"] == "tool_use")
            .unwrap()
            .clone();
        weather_args(&tool["input"].to_string());
        let follow = format!(
            r#"{{"model":"{model}","max_tokens":100,"messages":[{{"role":"user","content":"weather?"}},{{"role":"assistant","content":[{tool}]}},{{"role":"user","content":[{{"type":"tool_result","tool_use_id":{},"content":"sunny"}}]}}],"tools":{WEATHER_TOOL_ANTHROPIC}}}"#,
            tool["id"]
        );
        let a = messages(&gw, &follow).await;
        assert_eq!(a.status, 200, "{model}: {}", a.text());
        assert_eq!(a.json()["stop_reason"], "end_turn", "{model}");
    }
}

#[tokio::test]
async fn images_inline_pass_and_urls_are_refused_by_name() {
    let (_mock, gw) = setup().await;
    let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";
    for (model, _) in NATIVE {
        let body = format!(
            r#"{{"model":"{model}","messages":[{{"role":"user","content":[{{"type":"text","text":"what is this?"}},{{"type":"image_url","image_url":{{"url":"data:image/png;base64,{png}"}}}}]}}]}}"#
        );
        let a = post(&gw.url("/v1/chat/completions"), &body).await;
        assert_eq!(a.status, 200, "{model}: {}", a.text());
        let body = format!(
            r#"{{"model":"{model}","messages":[{{"role":"user","content":[{{"type":"text","text":"what is this?"}},{{"type":"image_url","image_url":{{"url":"https://example.com/cat.png"}}}}]}}]}}"#
        );
        let a = post(&gw.url("/v1/chat/completions"), &body).await;
        assert_eq!(a.status, 400, "{model}: {}", a.text());
        let msg = a.json()["error"]["message"].as_str().unwrap().to_owned();
        assert!(msg.contains("messages[0].content[1]"), "{msg}");
    }
}

#[tokio::test]
async fn a_wrong_signature_is_refused_in_aws_terms() {
    let (mock, gw) = setup().await;
    let a = post(
        &gw.url("/v1/chat/completions"),
        r#"{"model":"bed-wrong-secret","messages":[{"role":"user","content":"hi"}]}"#,
    )
    .await;
    assert_eq!(a.status, 403, "{}", a.text());
    let v = a.json();
    assert_eq!(v["error"]["type"], "permission_error");
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .contains("signature we calculated does not match"));
    assert_eq!(mock.requests().await, 1);
}

#[tokio::test]
async fn provider_errors_map_to_the_client_dialect() {
    for (status, code) in [(429, "rate_limit_exceeded"), (503, "overloaded")] {
        let mock = mock_server(signing_mock(Faults {
            status: Some(status),
            ..Faults::default()
        }))
        .await;
        let gw = gateway(&config(&mock.addr.to_string())).await;
        for (model, _) in NATIVE {
            let a = post(
                &gw.url("/v1/chat/completions"),
                &format!(r#"{{"model":"{model}","messages":[{{"role":"user","content":"hi"}}]}}"#),
            )
            .await;
            assert_eq!(a.status.as_u16(), status, "{model}: {}", a.text());
            let v = a.json();
            assert_eq!(v["error"]["code"], code, "{model}: {v}");
            assert!(v["error"]["message"]
                .as_str()
                .unwrap()
                .contains("injected fault"));
            let a = messages(
                &gw,
                &format!(
                    r#"{{"model":"{model}","max_tokens":10,"messages":[{{"role":"user","content":"hi"}}]}}"#
                ),
            )
            .await;
            assert_eq!(a.status.as_u16(), status);
            let expected = if status == 429 {
                "rate_limit_error"
            } else {
                "overloaded_error"
            };
            assert_eq!(a.json()["error"]["type"], expected, "{model}");
        }
    }
}

#[tokio::test]
async fn a_stream_cut_upstream_ends_with_an_error_not_a_done() {
    // Frames apart in time: hyper drops what it buffered when a body fails.
    let mock = mock_server(MockSettings {
        chunk_interval: std::time::Duration::from_millis(5),
        ..signing_mock(Faults {
            cut_after_chunks: Some(3),
            ..Faults::default()
        })
    })
    .await;
    let gw = gateway(&config(&mock.addr.to_string())).await;
    for (model, _) in NATIVE {
        let a = post(
            &gw.url("/v1/chat/completions"),
            &format!(
                r#"{{"model":"{model}","stream":true,"messages":[{{"role":"user","content":"hi"}}]}}"#
            ),
        )
        .await;
        let data = a.sse_data();
        assert_eq!(a.status, 200, "{model}: {}", a.text());
        assert!(!data.iter().any(|d| d == "[DONE]"), "{model}: {data:?}");
        assert!(
            data.iter().any(|d| d.contains("\"error\"")),
            "{model}: {data:?}"
        );
    }
}

#[tokio::test]
async fn embeddings_on_gemini_and_titan() {
    let (_mock, gw) = setup().await;
    let a = post(
        &gw.url("/v1/embeddings"),
        r#"{"model":"gem-embed","input":["a cat","a dog"],"dimensions":8}"#,
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let v = a.json();
    assert_eq!(v["data"].as_array().unwrap().len(), 2);
    assert_eq!(v["data"][1]["embedding"].as_array().unwrap().len(), 8);
    let a = post(
        &gw.url("/v1/embeddings"),
        r#"{"model":"titan","input":"a cat"}"#,
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let v = a.json();
    assert_eq!(v["data"][0]["embedding"].as_array().unwrap().len(), 16);
    assert_eq!(v["usage"]["prompt_tokens"], 2);
    let a = post(
        &gw.url("/v1/embeddings"),
        r#"{"model":"titan","input":["a","b"]}"#,
    )
    .await;
    assert_eq!(a.status, 400, "{}", a.text());
}

#[tokio::test]
async fn gemini_gets_the_key_header_and_native_body() {
    let up = recording(Reply::Json(
        200,
        r#"{"candidates":[{"content":{"role":"model","parts":[{"text":"hi"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":7,"candidatesTokenCount":1,"cachedContentTokenCount":4,"thoughtsTokenCount":2},"modelVersion":"gemini-2.0-flash"}"#,
    ))
    .await;
    let gw = gateway(&config(&up.addr.to_string())).await;
    let a = post(
        &gw.url("/v1/chat/completions"),
        r#"{"model":"gem","messages":[{"role":"system","content":"S"},{"role":"user","content":"hello"}],"stop":["END"],"max_tokens":9}"#,
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let v = a.json();
    assert_eq!(v["usage"]["prompt_tokens"], 7);
    assert_eq!(v["usage"]["completion_tokens"], 3);
    assert_eq!(v["usage"]["prompt_tokens_details"]["cached_tokens"], 4);
    assert_eq!(
        v["usage"]["completion_tokens_details"]["reasoning_tokens"],
        2
    );
    let seen = &up.requests()[0];
    assert_eq!(
        seen.path_and_query,
        "/v1beta/models/gemini-2.0-flash:generateContent"
    );
    assert_eq!(seen.headers["x-goog-api-key"], "g-key");
    let body: Value = serde_json::from_slice(&seen.body).unwrap();
    assert_eq!(body["systemInstruction"]["parts"][0]["text"], "S");
    assert_eq!(body["contents"][0]["role"], "user");
    assert_eq!(
        body["generationConfig"],
        json!({"maxOutputTokens": 9, "stopSequences": ["END"]})
    );
}

#[tokio::test]
async fn bedrock_requests_are_signed_on_the_encoded_path() {
    // An OpenAI client's call goes through Converse.
    let up = recording(Reply::Json(
        200,
        r#"{"output":{"message":{"role":"assistant","content":[{"text":"hi"}]}},"stopReason":"end_turn","usage":{"inputTokens":3,"outputTokens":1,"totalTokens":14,"cacheReadInputTokens":8,"cacheWriteInputTokens":2}}"#,
    ))
    .await;
    let gw = gateway(&config(&up.addr.to_string())).await;
    let a = post(
        &gw.url("/v1/chat/completions"),
        r#"{"model":"bed","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}"#,
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let v = a.json();
    // 3 plain + 8 read + 2 written.
    assert_eq!(v["usage"]["prompt_tokens"], 13);
    assert_eq!(v["usage"]["prompt_tokens_details"]["cached_tokens"], 8);
    signed(
        &up.requests()[0],
        "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse",
    );

    // A Claude client's Messages call goes through InvokeModel, its body as it wrote it.
    let up = recording(Reply::Json(
        200,
        include_str!("../fixtures/anthropic/message_tool_use.json"),
    ))
    .await;
    let gw = gateway(&config(&up.addr.to_string())).await;
    let a = messages(
        &gw,
        r#"{"model":"bed","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}"#,
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(
        a.body,
        include_str!("../fixtures/anthropic/message_tool_use.json"),
        "Claude's answer passed through"
    );
    let seen = &up.requests()[0];
    signed(
        seen,
        "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/invoke",
    );
    let body: Value = serde_json::from_slice(&seen.body).unwrap();
    assert_eq!(
        body,
        json!({"anthropic_version": "bedrock-2023-05-31", "max_tokens": 10,
            "messages": [{"role": "user", "content": "hi"}]})
    );
}

/// `seen` went to `path`, signed with the deployment's key (session token included) for
/// Bedrock in its region.
fn signed(seen: &Captured, path: &str) {
    assert_eq!(seen.path_and_query, path);
    let auth = seen.headers["authorization"].to_str().unwrap();
    assert!(
        auth.starts_with(&format!("AWS4-HMAC-SHA256 Credential={AWS_KEY}/"))
            && auth.contains("/eu-west-1/bedrock/aws4_request"),
        "{auth}"
    );
    assert_eq!(seen.headers["x-amz-security-token"], "session-token");
    let (path, query) = seen
        .path_and_query
        .split_once('?')
        .unwrap_or((&seen.path_and_query, ""));
    sluice_net::sigv4::verify(AWS_KEY, AWS_SECRET, path, query, &seen.headers, &seen.body).unwrap();
}

#[tokio::test]
async fn vertex_ai_gets_one_oauth_token_for_many_requests() {
    let mock = mock_server(MockSettings::default()).await;
    let host = mock.addr.to_string();
    let key_path = vertex_key_file(&host);
    let gw = gateway(&format!(
        r#"
model_list:
  - model_name: vtx
    litellm_params:
      model: vertex_ai/gemini-2.0-flash
      api_base: http://{host}
      vertex_project: sluice-test
      vertex_location: europe-west4
      vertex_credentials: {0}
  - model_name: vtx-claude
    litellm_params:
      model: vertex_ai/claude-sonnet-4@20250514
      api_base: http://{host}
      vertex_project: sluice-test
      vertex_location: us-east5
      vertex_credentials: {0}
  - model_name: vtx-no-key
    litellm_params:
      model: vertex_ai/gemini-2.0-flash
      api_base: http://{host}
      vertex_project: sluice-test
general_settings:
  master_key: sk-master
"#,
        key_path.display()
    ))
    .await;
    let a = post(
        &gw.url("/v1/chat/completions"),
        r#"{"model":"vtx","messages":[{"role":"user","content":"hi"}]}"#,
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let body = format!(
        r#"{{"model":"vtx","stream":true,"messages":[{{"role":"user","content":"weather?"}}],"tools":{WEATHER_TOOL_OPENAI}}}"#
    );
    let a = post(&gw.url("/v1/chat/completions"), &body).await;
    let (_, calls, finish, _) = openai_chunks(&a);
    weather_args(&calls[0].1);
    assert_eq!(finish, "tool_calls");
    let a = messages(
        &gw,
        r#"{"model":"vtx","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}"#,
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    // One token exchange, three model calls.
    assert_eq!(mock.requests().await, 4);
    // Claude on Vertex: Anthropic's Messages at rawPredict / streamRawPredict.
    let a = post(
        &gw.url("/v1/chat/completions"),
        &body.replace("\"vtx\"", "\"vtx-claude\""),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let (_, calls, finish, _) = openai_chunks(&a);
    weather_args(&calls[0].1);
    assert_eq!(finish, "tool_calls");
    let a = messages(
        &gw,
        r#"{"model":"vtx-claude","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}"#,
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(a.json()["model"], "claude-sonnet-4@20250514");
    assert_eq!(mock.requests().await, 4 + 1 + 2);
    // Without a key the request goes unauthenticated and Google's 401 comes back mapped.
    let a = post(
        &gw.url("/v1/chat/completions"),
        r#"{"model":"vtx-no-key","messages":[{"role":"user","content":"hi"}]}"#,
    )
    .await;
    assert_eq!(a.status, 401, "{}", a.text());
    assert_eq!(a.json()["error"]["code"], "invalid_api_key");
    let _ = std::fs::remove_dir_all(key_path.parent().unwrap());
}

#[tokio::test]
async fn in_process_mock_deployments_play_gemini_and_bedrock() {
    let gw = gateway(
        r#"
model_list:
  - model_name: mock-gem
    litellm_params:
      model: mock/gemini-2.0-flash
      mock_wire: gemini
  - model_name: mock-bed
    litellm_params:
      model: mock/claude-on-bedrock
      mock_wire: bedrock
general_settings:
  master_key: sk-master
"#,
    )
    .await;
    for model in ["mock-gem", "mock-bed"] {
        let body = format!(
            r#"{{"model":"{model}","stream":true,"messages":[{{"role":"user","content":"weather?"}}],"tools":{WEATHER_TOOL_OPENAI}}}"#
        );
        let a = post(&gw.url("/v1/chat/completions"), &body).await;
        assert_eq!(a.status, 200, "{model}: {}", a.text());
        let (text, calls, finish, _) = openai_chunks(&a);
        assert_eq!(text, "Calling get_weather.");
        weather_args(&calls[0].1);
        assert_eq!(finish, "tool_calls");
        let a = messages(
            &gw,
            &format!(
                r#"{{"model":"{model}","max_tokens":10,"messages":[{{"role":"user","content":"hi"}}]}}"#
            ),
        )
        .await;
        assert_eq!(a.status, 200, "{model}: {}", a.text());
        let v = a.json();
        assert_eq!(v["stop_reason"], "end_turn");
        assert_eq!(v["usage"]["output_tokens"], 16);
    }
}
