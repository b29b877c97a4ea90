//! The Bedrock codec against fixtures of its documented shapes (`tests/fixtures/bedrock/`):
//! requests written from both client formats, answers, event streams and errors read back.

use http::StatusCode;
use serde_json::{json, Value};
use sluice_core::endpoint::Dialect;
use sluice_translate::errors;
use sluice_translate::ir::*;
use sluice_translate::testing::{
    assemble_anthropic, assemble_openai, dropped_names, dropping, fixture, json_of, strict,
};
use sluice_translate::{anthropic, openai, Params, TranslateError};

use crate::test_support::{openai_full, run, translator};
use sluice_translate::eventstream;

use super::codec::{self as bedrock, Converse};

// --- Bedrock ------------------------------------------------------------------------------

#[test]
fn claude_code_request_to_bedrock_drops_hints_and_refuses_meaning() {
    let body = fixture("anthropic/request_claude_code.json");
    let mut p = Params::new(false, Dialect::Anthropic);
    let req = anthropic::parse_request(body.as_bytes(), &mut p).unwrap();
    let v = json_of(&bedrock::write_request(&req, &mut p).unwrap());
    let dropped = dropped_names(&p);
    // Cache markers are carried (cachePoint blocks); the rest has no place in Converse.
    assert_eq!(
        dropped,
        [
            "context_management",
            "metadata.user_id",
                                    "tools.defer_loading"
        ]
    );
    // Claude Code's adaptive thinking and effort become a budget for a model with no rules.
    assert_eq!(v["additionalModelRequestFields"]["thinking"]["type"], "enabled");
    assert_eq!(v["system"][2], json!({"cachePoint": {"type": "default"}}));
    // A schema goes through the forced tool on a model without structured output ...
    let body = r#"{"model":"m","max_tokens":9,"messages":[],"output_config":{"format":{"type":"json_schema","schema":{}}}}"#;
    let mut p = Params::new(false, Dialect::Anthropic);
    let req = anthropic::parse_request(body.as_bytes(), &mut p).unwrap();
    let v = json_of(&bedrock::write_request(&req, &mut p).unwrap());
    assert_eq!(
        v["toolConfig"]["toolChoice"],
        json!({"tool": {"name": sluice_translate::json_tool::JSON_TOOL}})
    );
    // ... and a bare json_object, which has no schema, is something Converse cannot honour:
    // named as the client spelt it.
    let (client, body, name) = (
        Dialect::OpenAi,
        r#"{"model":"m","messages":[],"response_format":{"type":"json_object"}}"#,
        "response_format",
    );
    let mut p = Params::new(false, client);
    let req = sluice_translate::parse_request(client, body.as_bytes(), &mut p).unwrap();
    match bedrock::write_request(&req, &mut p) {
        Err(TranslateError::Unsupported(n)) => assert_eq!(n, name),
        other => panic!("{other:?}"),
    }
    let mut d = Params::new(true, client);
    bedrock::write_request(&req, &mut d).unwrap();
    assert_eq!(d.dropped(), [name]);
}

#[test]
fn openai_request_to_bedrock() {
    let req = openai_full();
    assert!(bedrock::write_request(&req, &mut strict()).is_err(), "image URL");
    let mut req = req;
    req.parallel_tool_calls = None;
    let v = json_of(&bedrock::write_request(&req, &mut dropping()).unwrap());
    assert_eq!(
        v["system"],
        json!([{"text": "You are a weather assistant."}])
    );
    let msgs = v["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 3);
    let first = msgs[0]["content"].as_array().unwrap();
    assert_eq!(first[0]["text"], "Weather where this was taken?");
    assert_eq!(first[1], json!({"cachePoint": {"type": "default"}}));
    assert_eq!(
        first[2],
        json!({"image": {"format": "jpeg", "source": {"bytes": "/9j/4AAQSkZJRg=="}}})
    );
    assert_eq!(
        msgs[1]["content"][0],
        json!({"toolUse": {"toolUseId": "call_1", "name": "get_weather", "input": {"location": "Paris"}}})
    );
    assert_eq!(
        msgs[2]["content"][1],
        json!({"toolResult": {"toolUseId": "call_2", "content": [{"text": "24C"}]}})
    );
    assert_eq!(
        v["inferenceConfig"],
        json!({"temperature": 0.2, "topP": 0.8, "stopSequences": ["END"]})
    );
    assert_eq!(
        v["toolConfig"]["tools"][0]["toolSpec"]["inputSchema"]["json"]["required"],
        json!(["location"])
    );
    assert_eq!(v["toolConfig"]["toolChoice"], json!({"any": {}}));
    assert_eq!(
        v["additionalModelRequestFields"]["thinking"],
        json!({"type": "enabled", "budget_tokens": 4096})
    );
}

#[test]
fn bedrock_answer_to_openai_and_anthropic() {
    let r = bedrock::parse_response(fixture("bedrock/converse_tool_use.json").as_bytes()).unwrap();
    assert_eq!(r.stop, StopReason::ToolUse);
    assert_eq!(
        (
            r.usage.prompt_tokens,
            r.usage.cached_tokens,
            r.usage.cache_creation_tokens
        ),
        (1030, 800, 200),
        "inputTokens excludes cache reads and writes"
    );
    let v = json_of(&openai::write_response(&r));
    let m = &v["choices"][0]["message"];
    assert_eq!(m["content"], "I'll look that up.");
    assert_eq!(m["tool_calls"][0]["id"], "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q");
    assert_eq!(m["reasoning_content"], "The user wants Paris weather.");
    assert_eq!(v["usage"]["prompt_tokens"], 1030);
    let a = json_of(&anthropic::write_response(&r));
    assert_eq!(a["content"][0]["signature"], "c2lnbmF0dXJl");
    assert_eq!(a["usage"]["input_tokens"], 30);
    assert_eq!(a["usage"]["cache_creation_input_tokens"], 200);
    // Reasoning with its signature goes back to Bedrock on the next turn.
    let next = ChatRequest {
        messages: vec![Message {
            role: Role::Assistant,
            content: r.content.clone(),
        }],
        ..ChatRequest::default()
    };
    let v = json_of(&bedrock::write_request(&next, &mut strict()).unwrap());
    assert_eq!(
        v["messages"][0]["content"][0]["reasoningContent"]["reasoningText"]["signature"],
        "c2lnbmF0dXJl"
    );
}

fn bedrock_frames() -> Vec<u8> {
    let events: Vec<(String, Value)> =
        serde_json::from_str(&fixture("bedrock/stream_tool_use.json")).unwrap();
    events
        .iter()
        .flat_map(|(kind, payload)| eventstream::event(kind, payload.to_string().as_bytes()))
        .collect()
}

#[test]
fn bedrock_stream_to_openai_and_anthropic_at_any_frame_size() {
    let input = bedrock_frames();
    for cut in [1, 13, 200, input.len()] {
        let out = run(translator(Converse, Dialect::OpenAi), &input, cut);
        let (text, reasoning, calls, finish, usage) = assemble_openai(&out);
        assert_eq!(text, "Looking it up.");
        assert_eq!(reasoning, "Need the weather.");
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].0, "tooluse_abc");
        assert_eq!(
            serde_json::from_str::<Value>(&calls[0].2).unwrap(),
            json!({"location": "Paris"})
        );
        assert_eq!(finish, "tool_calls");
        assert_eq!(usage["prompt_tokens"], 150);
        assert_eq!(usage["prompt_tokens_details"]["cached_tokens"], 100);
        assert!(
            out.contains("\"id\":\"id-1\""),
            "the given id names the answer"
        );
        assert!(out.ends_with("data: [DONE]\n\n"));

        let out = run(translator(Converse, Dialect::Anthropic), &input, cut);
        let (blocks, stop, usage, _) = assemble_anthropic(&out);
        assert_eq!(stop, "tool_use");
        let kinds: Vec<&str> = blocks.iter().map(|b| b["type"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["thinking", "text", "tool_use"]);
        assert_eq!(usage["input_tokens"], 50);
        assert_eq!(usage["cache_read_input_tokens"], 100);
        assert_eq!(blocks[0]["signature"], "c2ln");
    }
}

#[test]
fn a_bad_crc_ends_the_bedrock_stream_with_an_error_and_nothing_after() {
    let good = bedrock_frames();
    let first_len = u32::from_be_bytes([good[0], good[1], good[2], good[3]]) as usize;
    let second_len = u32::from_be_bytes([
        good[first_len],
        good[first_len + 1],
        good[first_len + 2],
        good[first_len + 3],
    ]) as usize;
    // Flip a payload byte of the second frame: its message CRC no longer matches.
    let mut bad = good.clone();
    bad[first_len + second_len - 8] ^= 0x01;
    for cut in [1, 50, bad.len()] {
        let out = run(translator(Converse, Dialect::OpenAi), &bad, cut);
        let data: Vec<&str> = out
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .collect();
        assert!(data.last().unwrap().contains("checksum mismatch"), "{out}");
        assert!(
            !out.contains("Need the"),
            "nothing of the corrupt frame: {out}"
        );
        assert!(!out.contains("[DONE]"));
    }
    // A corrupt prelude: the same.
    let mut bad = good;
    bad[first_len + 5] ^= 0x01;
    let out = run(translator(Converse, Dialect::Anthropic), &bad, 9);
    assert!(out.contains("event: error"), "{out}");
    assert!(out.contains("prelude checksum"), "{out}");
    assert!(!out.contains("message_stop"));
}

#[test]
fn bedrock_exceptions_and_errors() {
    let mut frames = eventstream::event("messageStart", br#"{"role":"assistant"}"#);
    frames.extend(eventstream::encode(
        &[
            (":message-type", "exception"),
            (":exception-type", "throttlingException"),
            (":content-type", "application/json"),
        ],
        br#"{"message":"Too many tokens, please wait."}"#,
    ));
    let out = run(translator(Converse, Dialect::Anthropic), &frames, 64);
    assert!(out.contains(r#""type":"rate_limit_error""#), "{out}");
    assert!(out.contains("Too many tokens"));
    assert!(!out.contains("message_stop"));
    let (s, b) = errors::translate(
        &Converse,
        Dialect::OpenAi,
        StatusCode::TOO_MANY_REQUESTS,
        fixture("bedrock/error_throttling.json").as_bytes(),
    );
    assert_eq!(s, StatusCode::TOO_MANY_REQUESTS);
    let v = json_of(&b);
    assert_eq!(v["error"]["code"], "rate_limit_exceeded");
    assert_eq!(
        v["error"]["message"],
        "Too many requests, please wait before trying again."
    );
    let (_, b) = errors::translate(
        &Converse,
        Dialect::OpenAi,
        StatusCode::BAD_REQUEST,
        br#"{"message":"Input is too long for requested model."}"#,
    );
    assert_eq!(json_of(&b)["error"]["code"], "context_length_exceeded");
}

#[test]
fn converse_gets_a_native_schema_and_the_effort_in_output_config() {
    use sluice_core::rules::{ModelRules, ThinkingStyle};
    let body = br#"{"model":"m","messages":[{"role":"user","content":"hi"}],
        "reasoning_effort":"high",
        "response_format":{"type":"json_schema","json_schema":{"name":"w","schema":{"type":"object"}}}}"#;
    let rules = ModelRules {
        native_structured_output: true,
        thinking: ThinkingStyle::Adaptive,
        ..ModelRules::default()
    };
    let mut p = Params::new(false, Dialect::OpenAi).with_rules(rules);
    let req = openai::parse_request(body, &mut p).unwrap();
    let v = json_of(&bedrock::write_request(&req, &mut p).unwrap());
    assert_eq!(v["outputConfig"]["effort"], "high", "{v}");
    let format = &v["outputConfig"]["textFormat"];
    assert_eq!(format["type"], "json_schema");
    assert_eq!(format["structure"]["jsonSchema"]["schema"], r#"{"type":"object"}"#);
    assert_eq!(
        v["additionalModelRequestFields"]["thinking"],
        json!({"type": "adaptive"})
    );
    assert!(v["additionalModelRequestFields"].get("output_config").is_none());
}
