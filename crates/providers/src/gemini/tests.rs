//! The Gemini codec against fixtures of its documented shapes (`tests/fixtures/gemini/`):
//! requests written from both client formats, answers, streams and errors read back into both.

use http::StatusCode;
use serde_json::{json, Value};
use sluice_core::endpoint::Dialect;
use sluice_translate::errors;
use sluice_translate::ir::*;
use sluice_translate::testing::{
    assemble_anthropic, assemble_openai, dropped_names, dropping, fixture, json_of, strict,
};
use sluice_translate::{anthropic, openai, Params, TranslateError};

use super::codec::{self as gemini, GenerateContent};
use crate::test_support::{openai_full, run, translator};

// --- Gemini requests ------------------------------------------------------------------------

#[test]
fn openai_request_to_gemini() {
    let req = openai_full();
    // The fixture holds an https image URL, which Gemini cannot fetch.
    let err = gemini::write_request(&req, &mut strict()).unwrap_err();
    assert!(
        matches!(&err, TranslateError::Invalid { message, .. } if message.contains("messages[0].content[2]")),
        "{err}"
    );
    let v = json_of(&gemini::write_request(&req, &mut dropping()).unwrap());
    assert_eq!(
        v["systemInstruction"],
        json!({"parts": [{"text": "You are a weather assistant."}]})
    );
    let contents = v["contents"].as_array().unwrap();
    let roles: Vec<&str> = contents
        .iter()
        .map(|c| c["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["user", "model", "user"],
        "turns merged, alternating"
    );
    assert_eq!(
        contents[0]["parts"][1],
        json!({"inlineData": {"mimeType": "image/jpeg", "data": "/9j/4AAQSkZJRg=="}})
    );
    assert_eq!(
        contents[0]["parts"].as_array().unwrap().len(),
        2,
        "URL dropped"
    );
    assert_eq!(
        contents[1]["parts"][1],
        json!({"functionCall": {"name": "get_weather", "args": {"location": "Rome"}}})
    );
    // Tool results name their function (found through the call ids), in order.
    assert_eq!(
        contents[2]["parts"][0],
        json!({"functionResponse": {"name": "get_weather", "response": {"content": "18C"}}})
    );
    assert_eq!(
        contents[2]["parts"][1]["functionResponse"]["response"]["content"],
        "24C"
    );
    assert_eq!(contents[2]["parts"][2], json!({"text": "Which is warmer?"}));
    let decl = &v["tools"][0]["functionDeclarations"][0];
    assert_eq!(decl["name"], "get_weather");
    assert_eq!(
        decl["parametersJsonSchema"]["required"],
        json!(["location"])
    );
    assert_eq!(
        v["toolConfig"],
        json!({"functionCallingConfig": {"mode": "ANY"}})
    );
    let g = &v["generationConfig"];
    assert_eq!(g["temperature"], 0.2);
    assert_eq!(g["topP"], 0.8);
    assert_eq!(g["stopSequences"], json!(["END"]));
    assert_eq!(
        g["thinkingConfig"],
        json!({"thinkingBudget": 4096, "includeThoughts": true})
    );
    assert!(v.get("stream").is_none(), "the URL says stream");
}

#[test]
fn gemini_tool_choice_response_format_and_gs_uris() {
    let req = openai::parse_request(
        br#"{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"gs://bucket/cat.png"}}]}],
            "tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],
            "tool_choice":{"type":"function","function":{"name":"f"}},
            "response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object","properties":{"a":{"type":"string"}}}}}}"#,
        &mut strict(),
    )
    .unwrap();
    let v = json_of(&gemini::write_request(&req, &mut strict()).unwrap());
    assert_eq!(
        v["contents"][0]["parts"][0],
        json!({"fileData": {"mimeType": "image/png", "fileUri": "gs://bucket/cat.png"}})
    );
    assert_eq!(
        v["toolConfig"]["functionCallingConfig"],
        json!({"mode": "ANY", "allowedFunctionNames": ["f"]})
    );
    assert_eq!(
        v["generationConfig"]["responseMimeType"],
        "application/json"
    );
    assert_eq!(
        v["generationConfig"]["responseJsonSchema"]["properties"]["a"]["type"],
        "string"
    );
    // Anthropic takes no response_format: named, or dropped.
    assert!(matches!(
        anthropic::write_request(&req, &mut strict()),
        Err(TranslateError::Unsupported(p)) if p == "response_format"
    ));
    assert!(anthropic::write_request(&req, &mut dropping()).is_ok());
}

#[test]
fn claude_code_request_to_gemini_drops_hints_and_refuses_meaning() {
    let body = fixture("anthropic/request_claude_code.json");
    let mut p = Params::new(false, Dialect::Anthropic);
    let req = anthropic::parse_request(body.as_bytes(), &mut p).unwrap();
    let v = json_of(&gemini::write_request(&req, &mut p).unwrap());
    assert_eq!(
        dropped_names(&p),
        [
            "cache_control",
            "context_management",
            "metadata.user_id",
                                    "tools.defer_loading"
        ]
    );
    // Claude Code's adaptive thinking and effort become a thinking budget.
    assert!(v["generationConfig"]["thinkingConfig"]["thinkingBudget"].as_u64().unwrap() >= 1024);
    // One tool call per turn is something Gemini cannot promise: named as the client spelt it.
    let body = br#"{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"x"}],
        "tools":[{"name":"f","input_schema":{}}],
        "tool_choice":{"type":"auto","disable_parallel_tool_use":true}}"#;
    let req = anthropic::parse_request(body, &mut strict()).unwrap();
    assert!(matches!(
        gemini::write_request(&req, &mut Params::new(false, Dialect::Anthropic)),
        Err(TranslateError::Unsupported(p)) if p == "tool_choice.disable_parallel_tool_use"
    ));
    let mut d = Params::new(true, Dialect::Anthropic);
    gemini::write_request(&req, &mut d).unwrap();
    assert_eq!(dropped_names(&d), ["tool_choice.disable_parallel_tool_use"]);
    // An OpenAI client's image URL, dropped with drop_params, is listed by its name.
    let mut d = dropping();
    gemini::write_request(&openai_full(), &mut d).unwrap();
    assert_eq!(
        dropped_names(&d),
        ["cache_control", "image_url", "parallel_tool_calls", "user"]
    );
}

#[test]
fn anthropic_request_to_gemini_maps_tool_results_by_id() {
    let req = anthropic::parse_request(fixture("anthropic/request_full.json").as_bytes(), &mut strict())
        .unwrap();
    let v = json_of(&gemini::write_request(&req, &mut dropping()).unwrap());
    let names: Vec<String> = v["contents"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["parts"].as_array().unwrap().clone())
        .filter_map(|p| p["functionResponse"]["name"].as_str().map(str::to_owned))
        .collect();
    let calls: Vec<String> = v["contents"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["parts"].as_array().unwrap().clone())
        .filter_map(|p| p["functionCall"]["name"].as_str().map(str::to_owned))
        .collect();
    assert!(!names.is_empty());
    assert!(
        names.iter().all(|n| calls.contains(n)),
        "{names:?} {calls:?}"
    );
}

// --- Gemini answers ---------------------------------------------------------------------------

#[test]
fn gemini_answer_to_openai_and_anthropic() {
    let r =
        gemini::parse_response(fixture("gemini/response_function_call.json").as_bytes()).unwrap();
    assert_eq!(
        r.stop,
        StopReason::ToolUse,
        "STOP with calls is a tool turn"
    );
    assert_eq!(r.id, "mFk8aPvXJ4-gz7IPuNqN0AE");
    assert_eq!(
        (
            r.usage.prompt_tokens,
            r.usage.completion_tokens,
            r.usage.cached_tokens,
            r.usage.reasoning_tokens
        ),
        (120, 55, 100, 25),
        "thoughts count as completion tokens, cached content is part of the prompt"
    );
    let v = json_of(&openai::write_response(&r));
    let m = &v["choices"][0]["message"];
    assert_eq!(m["content"], "Checking the weather.");
    assert_eq!(m["reasoning_content"], "Let me check both cities.");
    let calls = m["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0]["id"], "call_0_get_weather");
    assert_eq!(calls[1]["id"], "call_1_get_weather");
    assert_eq!(calls[1]["function"]["arguments"], r#"{"location":"Rome"}"#);
    assert_eq!(v["choices"][0]["finish_reason"], "tool_calls");
    let a = json_of(&anthropic::write_response(&r));
    assert_eq!(a["stop_reason"], "tool_use");
    assert_eq!(a["usage"]["input_tokens"], 20);
    assert_eq!(a["usage"]["cache_read_input_tokens"], 100);
    assert_eq!(a["content"][2]["input"], json!({"location": "Paris"}));
}

#[test]
fn gemini_safety_blocks_are_content_filter() {
    let r =
        gemini::parse_response(fixture("gemini/response_prompt_blocked.json").as_bytes()).unwrap();
    assert_eq!(r.stop, StopReason::ContentFilter);
    assert!(r.content.is_empty());
    let r = gemini::parse_response(fixture("gemini/response_safety.json").as_bytes()).unwrap();
    assert_eq!(
        json_of(&openai::write_response(&r))["choices"][0]["finish_reason"],
        "content_filter"
    );
    assert_eq!(
        json_of(&anthropic::write_response(&r))["stop_reason"],
        "refusal"
    );
}

#[test]
fn gemini_stream_to_openai_and_anthropic_at_any_frame_size() {
    let input = fixture("gemini/stream_function_call.sse");
    for cut in [1, 7, 64, input.len()] {
        let out = run(
            translator(GenerateContent, Dialect::OpenAi),
            input.as_bytes(),
            cut,
        );
        let (text, reasoning, calls, finish, usage) = assemble_openai(&out);
        assert_eq!(text, "The weather in Paris:");
        assert_eq!(reasoning, "Thinking about ");
        assert_eq!(calls.len(), 2, "cut {cut}");
        assert_eq!(calls[0].1, "get_weather");
        assert_eq!(
            serde_json::from_str::<Value>(&calls[0].2).unwrap(),
            json!({"location": "Paris", "unit": "c"})
        );
        assert_eq!(
            calls[1],
            ("call_1_get_time".into(), "get_time".into(), "{}".into())
        );
        assert_eq!(finish, "tool_calls");
        assert_eq!(usage["prompt_tokens"], 40);
        assert_eq!(usage["completion_tokens"], 20);
        assert_eq!(usage["prompt_tokens_details"]["cached_tokens"], 32);
        assert!(out.ends_with("data: [DONE]\n\n"));

        let out = run(
            translator(GenerateContent, Dialect::Anthropic),
            input.as_bytes(),
            cut,
        );
        let (blocks, stop, usage, names) = assemble_anthropic(&out);
        assert_eq!(stop, "tool_use");
        let kinds: Vec<&str> = blocks.iter().map(|b| b["type"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["thinking", "text", "tool_use", "tool_use"]);
        assert_eq!(usage["input_tokens"], 8);
        assert_eq!(names.last().map(String::as_str), Some("message_stop"));
    }
}

#[test]
fn a_gemini_stream_without_finish_reason_ends_in_an_error() {
    let input = fixture("gemini/stream_function_call.sse");
    let first = &input[..input.find("\r\n\r\n").unwrap() + 4];
    let out = run(
        translator(GenerateContent, Dialect::OpenAi),
        first.as_bytes(),
        5,
    );
    assert!(!out.contains("[DONE]"));
    assert!(out.contains("ended before its finish reason"), "{out}");
}

#[test]
fn a_gemini_error_mid_stream_ends_it_with_that_error() {
    let input = fixture("gemini/stream_function_call.sse");
    let first = &input[..input.find("\r\n\r\n").unwrap() + 4];
    let stream = format!(
        "{first}data: {{\"error\": {{\"code\": 503, \"message\": \"The model is overloaded.\", \"status\": \"UNAVAILABLE\"}}}}\r\n\r\n"
    );
    let out = run(
        translator(GenerateContent, Dialect::Anthropic),
        stream.as_bytes(),
        11,
    );
    assert!(out.contains(r#""type":"overloaded_error""#), "{out}");
    assert!(out.contains("The model is overloaded."));
    assert!(!out.contains("message_stop"));
    assert_eq!(out.matches("event: error").count(), 1, "{out}");
}

#[test]
fn gemini_errors_keep_their_message() {
    let (s, b) = errors::translate(
        &GenerateContent,
        Dialect::OpenAi,
        StatusCode::TOO_MANY_REQUESTS,
        fixture("gemini/error_rate_limit.json").as_bytes(),
    );
    assert_eq!(s, StatusCode::TOO_MANY_REQUESTS);
    let v = json_of(&b);
    assert_eq!(v["error"]["code"], "rate_limit_exceeded");
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .starts_with("Resource has been exhausted"));
    let (_, b) = errors::translate(
        &GenerateContent,
        Dialect::Anthropic,
        StatusCode::TOO_MANY_REQUESTS,
        br#"[{"error":{"code":429,"message":"quota","status":"RESOURCE_EXHAUSTED"}}]"#,
    );
    assert_eq!(json_of(&b)["error"]["type"], "rate_limit_error");
    assert_eq!(json_of(&b)["error"]["message"], "quota");
}

#[test]
fn gemini_3_thought_signatures_come_back_through_openai_and_anthropic_histories() {
    // A signature with every base64 character that is not allowed in an Anthropic id.
    let signature = "Cr8BAe/+x9Q=";
    let answer = json!({"candidates": [{"content": {"role": "model", "parts": [
        {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}},
         "thoughtSignature": signature}
    ]}, "finishReason": "STOP"}]});
    let parsed = gemini::parse_response(answer.to_string().as_bytes()).unwrap();
    let Some(Part::ToolCall(call)) = parsed.content.first() else {
        panic!("{parsed:?}")
    };
    assert!(
        call.id.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-".contains(&b)),
        "{}",
        call.id
    );
    // The stream gives the same id.
    let sse = format!("data: {answer}\n\n");
    let out = run(translator(GenerateContent, Dialect::OpenAi), sse.as_bytes(), 5);
    let (_, _, calls, _, _) = assemble_openai(&out);
    assert_eq!(calls[0].0, call.id);

    // Each client echoes the call in its history: the next request carries the signature.
    let openai_turn = json!({"model": "m", "messages": [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": call.id, "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": call.id, "content": "sunny"}
    ]});
    let anthropic_turn = json!({"model": "m", "max_tokens": 9, "messages": [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": call.id,
            "name": "get_weather", "input": {"city": "Paris"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id,
            "content": "sunny"}]}
    ]});
    for (dialect, body) in [
        (Dialect::OpenAi, openai_turn),
        (Dialect::Anthropic, anthropic_turn),
    ] {
        let mut p = Params::new(false, dialect);
        let req = sluice_translate::parse_request(dialect, body.to_string().as_bytes(), &mut p)
            .unwrap();
        let v = json_of(&gemini::write_request(&req, &mut p).unwrap());
        let model_turn = &v["contents"][1]["parts"][0];
        assert_eq!(model_turn["thoughtSignature"], signature, "{dialect:?}: {v}");
        assert_eq!(model_turn["functionCall"]["name"], "get_weather");
        // The tool result still names the function.
        assert_eq!(
            v["contents"][2]["parts"][0]["functionResponse"]["name"],
            "get_weather"
        );
    }
}
