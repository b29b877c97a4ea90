//! Translator tests against fixtures of the providers' documented shapes
//! (`tests/fixtures/{anthropic,openai}/`), both directions, plus a round-trip property.

use serde_json::{json, Value};

use super::anthropic::{self, DEFAULT_MAX_TOKENS};
use super::ir::*;
use super::stream::{StreamRead, Translator};
use super::{openai, Params, TranslateError};
use crate::codec::{AnthropicMessages, Codec, OpenAiChat};
use crate::testing::*;
use sluice_core::endpoint::Dialect;

// --- OpenAI client → Anthropic upstream -----------------------------------------------------

#[test]
fn openai_request_to_anthropic() {
    let req = openai::parse_request(
        fixture("openai/request_full.json").as_bytes(),
        &mut strict(),
    )
    .unwrap();
    let v = json_of(&anthropic::write_request(&req, &mut strict()).unwrap());
    assert_eq!(
        v["system"],
        json!([{"type": "text", "text": "You are a weather assistant."}])
    );
    let msgs = v["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 3, "{v:#}");
    // User turn: text with its cache marker, base64 and URL images.
    assert_eq!(
        msgs[0]["content"][0]["cache_control"],
        json!({"type": "ephemeral"})
    );
    assert_eq!(
        msgs[0]["content"][1]["source"],
        json!({"type": "base64", "media_type": "image/jpeg", "data": "/9j/4AAQSkZJRg=="})
    );
    assert_eq!(
        msgs[0]["content"][2]["source"],
        json!({"type": "url", "url": "https://example.com/photo.png"})
    );
    // Assistant tool calls become tool_use blocks with parsed input.
    assert_eq!(msgs[1]["role"], "assistant");
    assert_eq!(msgs[1]["content"][0]["type"], "tool_use");
    assert_eq!(msgs[1]["content"][1]["input"], json!({"location": "Rome"}));
    // Both tool messages and the following user text merge into one user turn.
    assert_eq!(msgs[2]["role"], "user");
    let blocks = msgs[2]["content"].as_array().unwrap();
    assert_eq!(blocks.len(), 3);
    assert_eq!(blocks[0]["type"], "tool_result");
    assert_eq!(blocks[0]["tool_use_id"], "call_1");
    assert_eq!(blocks[0]["content"][0]["text"], "18C");
    assert_eq!(blocks[1]["tool_use_id"], "call_2");
    assert_eq!(
        blocks[2],
        json!({"type": "text", "text": "Which is warmer?"})
    );
    // Parameters.
    assert_eq!(
        v["tools"][0]["input_schema"]["required"],
        json!(["location"])
    );
    assert_eq!(
        v["tool_choice"],
        json!({"type": "any", "disable_parallel_tool_use": true})
    );
    assert_eq!(v["stop_sequences"], json!(["END"]));
    assert_eq!(v["temperature"], 0.2);
    assert_eq!(v["top_p"], 0.8);
    assert_eq!(v["metadata"], json!({"user_id": "user-42"}));
    assert_eq!(
        v["thinking"],
        json!({"type": "enabled", "budget_tokens": 4096})
    );
    assert!(
        v["max_tokens"].as_u64().unwrap() > 4096,
        "max_tokens above the thinking budget"
    );
    assert_eq!(v["stream"], true);
    assert!(v.get("stream_options").is_none());
}

#[test]
fn openai_defaults_and_tool_choice_forms() {
    let body = br#"{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"f"}}}"#;
    let req = openai::parse_request(body, &mut strict()).unwrap();
    let v = json_of(&anthropic::write_request(&req, &mut strict()).unwrap());
    assert_eq!(v["max_tokens"], DEFAULT_MAX_TOKENS);
    assert_eq!(v["tool_choice"], json!({"type": "tool", "name": "f"}));
    assert_eq!(v["tools"][0]["input_schema"]["type"], "object");
    for (choice, want) in [("auto", "auto"), ("none", "none")] {
        let body = format!(
            r#"{{"model":"m","max_tokens":5,"messages":[],"tools":[{{"type":"function","function":{{"name":"f"}}}}],"tool_choice":"{choice}"}}"#
        );
        let req = openai::parse_request(body.as_bytes(), &mut strict()).unwrap();
        let v = json_of(&anthropic::write_request(&req, &mut strict()).unwrap());
        assert_eq!(v["tool_choice"]["type"], want);
        assert_eq!(v["max_tokens"], 5);
    }
}

#[test]
fn openai_client_hints_are_dropped_and_meaning_refused() {
    // Hints: provider tuning, metadata, a field nobody has classified (an object).
    let body = br#"{"model":"m","messages":[{"role":"user","content":"x"}],"store":true,
        "metadata":{"a":"b"},"service_tier":"flex","prompt_cache_key":"k","seed":7,
        "frequency_penalty":0.5,"prediction":{"type":"content","content":"x"},
        "safety_identifier":"s","a_future_field":{"nested":[1]},"verbosity":"low",
        "fallbacks":["other"],"num_retries":1,"stream_options":{"include_usage":true},
        "logprobs":false,"n":1,"modalities":["text"],"stop":null}"#;
    let mut p = strict();
    let req = openai::parse_request(body, &mut p).unwrap();
    anthropic::write_request(&req, &mut p).unwrap();
    let dropped = dropped_names(&p);
    assert_eq!(
        dropped,
        [
            "a_future_field",
            "frequency_penalty",
            "metadata",
            "prediction",
            "prompt_cache_key",
            "safety_identifier",
            "seed",
            "service_tier",
            "store",
            "verbosity"
        ],
        "sluice's own routing fields and values that ask nothing are not listed"
    );
    // Meaning: the answer would differ without them; drop_params drops and lists them.
    for (body, param) in [
        (r#""n":2"#, "n"),
        (r#""logit_bias":{"1":2}"#, "logit_bias"),
        (r#""logprobs":true"#, "logprobs"),
        (r#""top_logprobs":3"#, "top_logprobs"),
        (r#""modalities":["text","audio"]"#, "modalities"),
        (r#""audio":{"voice":"alloy"}"#, "audio"),
        (r#""web_search_options":{}"#, ""),
        (
            r#""tools":[{"type":"custom","custom":{"name":"grammar"}}]"#,
            "tools.custom",
        ),
        (
            r#""messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{}}]}]"#,
            "input_audio",
        ),
    ] {
        let messages = if body.contains("\"messages\"") {
            ""
        } else {
            r#""messages":[],"#
        };
        let body = format!(r#"{{"model":"m",{messages}{body}}}"#);
        let strict_result = openai::parse_request(body.as_bytes(), &mut strict());
        if param.is_empty() {
            strict_result.unwrap();
            continue;
        }
        match strict_result {
            Err(TranslateError::Unsupported(p)) => assert_eq!(p, param),
            other => panic!("{body}: {other:?}"),
        }
        let mut d = dropping();
        openai::parse_request(body.as_bytes(), &mut d).unwrap();
        assert_eq!(d.dropped(), [param], "{body}");
    }
    // A response format Anthropic cannot honour is refused by its OpenAI name.
    let body = br#"{"model":"m","messages":[],"response_format":{"type":"json_object"}}"#;
    let req = openai::parse_request(body, &mut strict()).unwrap();
    assert!(matches!(
        anthropic::write_request(&req, &mut strict()),
        Err(TranslateError::Unsupported(p)) if p == "response_format"
    ));
}

#[test]
fn anthropic_answer_to_openai() {
    let r =
        anthropic::parse_response(fixture("anthropic/message_tool_use.json").as_bytes()).unwrap();
    let v = json_of(&openai::write_response(&r));
    let m = &v["choices"][0]["message"];
    assert_eq!(
        m["content"],
        "I'll check the current weather in San Francisco for you."
    );
    assert_eq!(m["tool_calls"][0]["id"], "toolu_01A09q90qw90lq917835lq9");
    let args: Value = serde_json::from_str(
        m["tool_calls"][0]["function"]["arguments"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        args,
        json!({"location": "San Francisco, CA", "unit": "celsius"})
    );
    assert_eq!(v["choices"][0]["finish_reason"], "tool_calls");
    // input_tokens excludes the cache; prompt_tokens includes reads and writes.
    assert_eq!(v["usage"]["prompt_tokens"], 35 + 20 + 1000);
    assert_eq!(v["usage"]["prompt_tokens_details"]["cached_tokens"], 1000);
    assert_eq!(v["usage"]["completion_tokens"], 71);
    assert_eq!(v["usage"]["total_tokens"], 1055 + 71);
    // The usage reader on the OpenAI-shaped answer agrees (no double counting).
    let u = sluice_core::usage::usage_from_body(&openai::write_response(&r)).unwrap();
    assert_eq!(
        (u.prompt_tokens, u.cached_tokens, u.cache_creation_tokens),
        (1055, 1000, 20)
    );

    let r =
        anthropic::parse_response(fixture("anthropic/message_max_tokens.json").as_bytes()).unwrap();
    let v = json_of(&openai::write_response(&r));
    assert_eq!(v["choices"][0]["finish_reason"], "length");
    assert_eq!(
        v["choices"][0]["message"]["reasoning_content"],
        "The user wants a haiku."
    );
    assert_eq!(
        v["choices"][0]["message"]["thinking_blocks"][0]["signature"],
        "EuYBCkQYAiJA"
    );
}

// --- Anthropic client → OpenAI upstream -----------------------------------------------------

#[test]
fn anthropic_request_to_openai() {
    let body = fixture("anthropic/request_full.json");
    let req = anthropic::parse_request(body.as_bytes(), &mut strict()).unwrap();
    let v = json_of(&openai::write_request(&req, &mut strict()).unwrap());
    let msgs = v["messages"].as_array().unwrap();
    assert_eq!(msgs[0]["role"], "system");
    assert_eq!(
        msgs[0]["content"],
        "You are a weather assistant.\n\nLong reference document..."
    );
    assert_eq!(
        msgs[1]["content"][0]["image_url"]["url"],
        "data:image/png;base64,iVBORw0KGgo="
    );
    assert_eq!(
        msgs[1]["content"][1]["image_url"]["url"],
        "https://upload.wikimedia.org/wikipedia/commons/a/a7/Camponotus_flavomarginatus_ant.jpg"
    );
    assert_eq!(msgs[2]["role"], "assistant");
    assert_eq!(msgs[2]["content"], "Let me check.");
    assert_eq!(msgs[2]["tool_calls"][0]["function"]["name"], "get_weather");
    let args: Value = serde_json::from_str(
        msgs[2]["tool_calls"][0]["function"]["arguments"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(args, json!({"location": "San Francisco, CA"}));
    assert_eq!(
        msgs[3],
        json!({"role": "tool", "tool_call_id": "toolu_01A09q90qw90lq917835lq9", "content": "15 degrees"})
    );
    assert_eq!(msgs[4], json!({"role": "user", "content": "And tomorrow?"}));
    assert_eq!(
        v["tools"][0]["function"]["parameters"]["required"],
        json!(["location"])
    );
    assert_eq!(v["tool_choice"], "auto");
    assert_eq!(v["parallel_tool_calls"], false);
    assert_eq!(v["stop"], json!(["\n\nHuman:"]));
    assert_eq!(v["max_tokens"], 2048);
    assert_eq!(v["user"], "user-123");
    assert_eq!(v["reasoning_effort"], "low");
    assert_eq!(v["stream_options"], json!({"include_usage": true}));
}

#[test]
fn claude_code_request_to_openai_drops_only_hints() {
    let body = fixture("anthropic/request_claude_code.json");
    let mut p = Params::new(false, Dialect::Anthropic);
    let req = anthropic::parse_request(body.as_bytes(), &mut p).unwrap();
    let v = json_of(&openai::write_request(&req, &mut p).unwrap());
    let dropped = dropped_names(&p);
    assert_eq!(
        dropped,
        ["cache_control", "context_management", "tools.defer_loading"]
    );
    // The mid-conversation system turn joins the system prompt; the conversation is intact.
    let msgs = v["messages"].as_array().unwrap();
    assert_eq!(msgs[0]["role"], "system");
    let system = msgs[0]["content"].as_str().unwrap();
    assert!(system.starts_with("x-anthropic-billing-header"), "{system}");
    assert!(
        system.ends_with("Primary working directory: /tmp/work"),
        "{system}"
    );
    let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool"]);
    assert_eq!(msgs[2]["tool_calls"][0]["function"]["name"], "Bash");
    assert_eq!(msgs[3]["tool_call_id"], "toolu_1");
    assert_eq!(msgs[3]["content"], "hi");
    assert_eq!(v["tools"].as_array().unwrap().len(), 3);
    assert_eq!(v["user"], req.user.clone().unwrap());
    assert_eq!(v["reasoning_effort"], "high", "output_config.effort");
    assert_eq!(v["max_tokens"], 32000);
    assert_eq!(v["stream"], true);
}

#[test]
fn anthropic_client_meaning_is_refused_by_name_or_dropped() {
    for (extra, param) in [
        (
            r#""tools":[{"type":"web_search_20250305","name":"web_search"}]"#,
            "tools.web_search_20250305",
        ),
        (
            r#""mcp_servers":[{"type":"url","url":"https://x","name":"x"}]"#,
            "mcp_servers",
        ),
        (
            r#""messages":[{"role":"user","content":[{"type":"document","source":{}}]}]"#,
            "document",
        ),
        (
            r#""messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"search_result"}]}]}]"#,
            "search_result",
        ),
    ] {
        let messages = if extra.contains("\"messages\"") {
            ""
        } else {
            r#""messages":[],"#
        };
        let body = format!(r#"{{"model":"m","max_tokens":9,{messages}{extra}}}"#);
        let mut p = Params::new(false, Dialect::Anthropic);
        match anthropic::parse_request(body.as_bytes(), &mut p) {
            Err(TranslateError::Unsupported(n)) => assert_eq!(n, param),
            other => panic!("{body}: {other:?}"),
        }
        let mut d = Params::new(true, Dialect::Anthropic);
        let req = anthropic::parse_request(body.as_bytes(), &mut d).unwrap();
        assert!(req.tools.is_empty());
        assert!(req
            .messages
            .iter()
            .all(|m| m.content.iter().all(|p| !matches!(
                p,
                Part::ToolResult { content, .. } if !content.is_empty()
            ))));
        assert_eq!(d.dropped(), [param], "{body}");
    }
    // Hints: top-level keys nobody classified, Anthropic-only settings, hint blocks.
    let body = br#"{"model":"m","max_tokens":9,"top_k":5,"container":"c","service_tier":"auto",
        "speed":"fast","inference_geo":"us","diagnostics":{"previous_message_id":null},
        "metadata":{"user_id":"u","extra":"x"},"future":[{"x":1}],
        "messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t",
          "content":[{"type":"tool_reference","tool_name":"Read"}]},
          {"type":"mid_conv_system","content":[{"type":"text","text":"Be terse."},
            {"type":"tool_addition","tool":{"type":"tool_reference","name":"Read"}}]},
          {"type":"compaction","content":"Earlier: the user asked for X."}]}]}"#;
    let mut p = Params::new(false, Dialect::Anthropic);
    let req = anthropic::parse_request(body, &mut p).unwrap();
    let v = json_of(&openai::write_request(&req, &mut p).unwrap());
    let dropped = dropped_names(&p);
    assert_eq!(
        dropped,
        [
            "container",
            "diagnostics",
            "future",
            "inference_geo",
            "metadata",
            "service_tier",
            "speed",
            "tool_addition",
            "tool_reference",
            "top_k"
        ]
    );
    assert!(v.get("top_k").is_none());
    assert_eq!(v["user"], "u");
    assert_eq!(
        v["messages"][0],
        json!({"role": "system", "content": "Be terse."})
    );
    let last = v["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["content"], "Earlier: the user asked for X.");
}

#[test]
fn anthropic_structured_output_becomes_a_response_format() {
    for body in [
        r#"{"model":"m","max_tokens":9,"messages":[],"output_config":{"format":{"type":"json_schema","schema":{"type":"object"}}}}"#,
        r#"{"model":"m","max_tokens":9,"messages":[],"output_format":{"type":"json_schema","schema":{"type":"object"}}}"#,
    ] {
        let mut p = Params::new(false, Dialect::Anthropic);
        let req = anthropic::parse_request(body.as_bytes(), &mut p).unwrap();
        let v = json_of(&openai::write_request(&req, &mut p).unwrap());
        assert_eq!(
            v["response_format"],
            json!({"type": "json_schema", "json_schema": {"name": "response", "schema": {"type": "object"}, "strict": true}})
        );
        assert!(p.dropped().is_empty());
    }
}

#[test]
fn openai_answer_to_anthropic() {
    let r = openai::parse_response(fixture("openai/response_tool_calls.json").as_bytes()).unwrap();
    let v = json_of(&anthropic::write_response(&r));
    assert_eq!(v["type"], "message");
    assert_eq!(v["stop_reason"], "tool_use");
    assert_eq!(v["content"][0]["type"], "tool_use");
    assert_eq!(v["content"][0]["id"], "call_abc123");
    assert_eq!(v["content"][0]["input"], json!({"location": "Boston, MA"}));
    // OpenAI's prompt_tokens includes cached tokens; Anthropic's input_tokens excludes them.
    assert_eq!(v["usage"]["input_tokens"], 82 - 64);
    assert_eq!(v["usage"]["cache_read_input_tokens"], 64);
    assert_eq!(v["usage"]["output_tokens"], 17);
    let u = sluice_core::usage::usage_from_body(&anthropic::write_response(&r)).unwrap();
    assert_eq!((u.prompt_tokens, u.cached_tokens), (82, 64));
}

// --- Streams --------------------------------------------------------------------------------

/// Run a stream through a translator, cutting the input into frames of `cut` bytes. OpenAI
/// chunks carry `created` (the clock's second when the translator started), which is set to 0
/// here: translations compared with each other may start either side of a second's boundary.
fn translate_stream(from: Dialect, to: Dialect, input: &str, cut: usize) -> String {
    without_created(&translate_stream_at(from, to, input, cut))
}

fn without_created(text: &str) -> String {
    const KEY: &str = "\"created\":";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(KEY) {
        let (head, tail) = rest.split_at(at + KEY.len());
        out.push_str(head);
        out.push('0');
        rest = tail.trim_start_matches(|c: char| c.is_ascii_digit());
    }
    out.push_str(rest);
    out
}

fn translate_stream_at(from: Dialect, to: Dialect, input: &str, cut: usize) -> String {
    let mut out = Vec::new();
    match from {
        Dialect::OpenAi => run(
            Translator::new(OpenAiChat.reader("", ""), to),
            input,
            cut,
            &mut out,
        ),
        Dialect::Anthropic => run(
            Translator::new(AnthropicMessages::DIRECT.reader("", ""), to),
            input,
            cut,
            &mut out,
        ),
        Dialect::Gemini | Dialect::Converse => {
            unreachable!("the client-only dialects are no upstream of these tests")
        }
    }
    String::from_utf8(out).unwrap()
}

fn run<R: StreamRead>(mut t: Translator<R>, input: &str, cut: usize, out: &mut Vec<u8>) {
    for chunk in input.as_bytes().chunks(cut.max(1)) {
        out.extend(t.feed(chunk));
    }
    out.extend(t.finish());
}

#[test]
fn created_stamps_are_zeroed_for_comparison() {
    assert_eq!(
        without_created(r#"{"id":"a","created":1795737449,"x":"\"created\":7"}"#),
        r#"{"id":"a","created":0,"x":"\"created\":7"}"#
    );
}

#[test]
fn anthropic_tool_stream_to_openai_chunks_at_any_frame_size() {
    let input = fixture("anthropic/stream_tool_use.sse");
    let whole = translate_stream(Dialect::Anthropic, Dialect::OpenAi, &input, input.len());
    for cut in [1, 7, 64, 500] {
        assert_eq!(
            translate_stream(Dialect::Anthropic, Dialect::OpenAi, &input, cut),
            whole,
            "cut={cut}"
        );
    }
    assert!(whole.ends_with("data: [DONE]\n\n"));
    let (text, _, tools, finish, usage) = assemble_openai(&whole);
    assert_eq!(text, "Okay, let's check the weather for San Francisco, CA:");
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].0, "toolu_01T1x1fJ34qAmk2tNTrN7Up6");
    assert_eq!(tools[0].1, "get_weather");
    let args: Value = serde_json::from_str(&tools[0].2).unwrap();
    assert_eq!(
        args,
        json!({"location": "San Francisco, CA", "unit": "fahrenheit"})
    );
    assert_eq!(finish, "tool_calls");
    assert_eq!(usage["prompt_tokens"], 472);
    assert_eq!(usage["completion_tokens"], 89);
}

#[test]
fn anthropic_thinking_stream_to_openai_reasoning() {
    let out = translate_stream(
        Dialect::Anthropic,
        Dialect::OpenAi,
        &fixture("anthropic/stream_thinking.sse"),
        33,
    );
    let (text, reasoning, tools, finish, usage) = assemble_openai(&out);
    assert_eq!(text, "27 * 453 = 12,231");
    assert!(reasoning.starts_with("Let me solve this step by step"));
    assert!(tools.is_empty());
    assert_eq!(finish, "stop");
    assert_eq!(usage["prompt_tokens"], 45 + 1200);
    assert_eq!(usage["prompt_tokens_details"]["cached_tokens"], 1200);
}

#[test]
fn anthropic_stream_error_becomes_openai_error_event() {
    let out = translate_stream(
        Dialect::Anthropic,
        Dialect::OpenAi,
        &fixture("anthropic/stream_error.sse"),
        10,
    );
    let last = data_lines(&out).pop().unwrap();
    assert_eq!(last["error"]["message"], "Overloaded");
    assert_eq!(last["error"]["type"], "overloaded_error");
    assert!(!out.contains("[DONE]"));
}

#[test]
fn openai_parallel_tool_stream_to_anthropic_events() {
    let input = fixture("openai/stream_parallel_tools.sse");
    let whole = translate_stream(Dialect::OpenAi, Dialect::Anthropic, &input, input.len());
    for cut in [1, 13, 200] {
        assert_eq!(
            translate_stream(Dialect::OpenAi, Dialect::Anthropic, &input, cut),
            whole,
            "cut={cut}"
        );
    }
    let (blocks, stop, usage, names) = assemble_anthropic(&whole);
    assert_eq!(names.first().map(String::as_str), Some("message_start"));
    assert_eq!(names.last().map(String::as_str), Some("message_stop"));
    assert_eq!(blocks.len(), 2);
    assert_eq!(blocks[0]["id"], "call_aaa");
    assert_eq!(blocks[1]["id"], "call_bbb");
    let a: Value = serde_json::from_str(blocks[0]["partial"].as_str().unwrap()).unwrap();
    let b: Value = serde_json::from_str(blocks[1]["partial"].as_str().unwrap()).unwrap();
    assert_eq!(a, json!({"location": "Paris"}));
    assert_eq!(b, json!({"location": "Bogotá"}));
    assert_eq!(stop, "tool_use");
    assert_eq!(usage["input_tokens"], 82 - 64);
    assert_eq!(usage["cache_read_input_tokens"], 64);
    assert_eq!(usage["output_tokens"], 37);
}

#[test]
fn openai_tool_ids_repeated_or_missing_and_server_tool_deltas() {
    // A server that repeats the id on every delta, and one that reuses index 0 per call.
    let chunk = |tc: Value| {
        format!(
            "data: {}\n\n",
            json!({"id": "c", "model": "m", "choices": [{"index": 0, "delta": {"tool_calls": [tc]}}]})
        )
    };
    let input = [
        chunk(json!({"index": 0, "id": "a", "function": {"name": "f", "arguments": "{\"x\""}})),
        chunk(json!({"index": 0, "id": "a", "function": {"arguments": ":1}"}})),
        chunk(json!({"index": 0, "id": "b", "function": {"name": "g", "arguments": "{}"}})),
        "data: [DONE]\n\n".to_owned(),
    ]
    .concat();
    let out = translate_stream(Dialect::OpenAi, Dialect::Anthropic, &input, 9);
    let (blocks, ..) = assemble_anthropic(&out);
    assert_eq!(blocks.len(), 2);
    assert_eq!(
        (blocks[0]["id"].as_str(), blocks[0]["partial"].as_str()),
        (Some("a"), Some("{\"x\":1}"))
    );
    assert_eq!(
        (blocks[1]["name"].as_str(), blocks[1]["partial"].as_str()),
        (Some("g"), Some("{}"))
    );
    // Anthropic server-tool input deltas are not mistaken for a client tool call's arguments.
    let input = concat!(
        "data: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"model\":\"c\"}}\n\n",
        "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"server_tool_use\",\"id\":\"srv\",\"name\":\"web_search\"}}\n\n",
        "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"q\\\":1}\"}}\n\n",
        "data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"f\"}}\n\n",
        "data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}\n\n",
        "data: {\"type\":\"message_stop\"}\n\n",
    );
    let out = translate_stream(Dialect::Anthropic, Dialect::OpenAi, input, 1000);
    let (_, _, tools, _, _) = assemble_openai(&out);
    assert_eq!(
        tools,
        vec![("t".to_owned(), "f".to_owned(), "{}".to_owned())]
    );
}

#[test]
fn anthropic_stream_survives_a_round_trip_through_openai() {
    // Anthropic → OpenAI → Anthropic keeps text, tool calls and the stop reason.
    let openai = translate_stream(
        Dialect::Anthropic,
        Dialect::OpenAi,
        &fixture("anthropic/stream_tool_use.sse"),
        50,
    );
    let back = translate_stream(Dialect::OpenAi, Dialect::Anthropic, &openai, 50);
    let (blocks, stop, usage, _) = assemble_anthropic(&back);
    assert_eq!(
        blocks[0]["text"],
        "Okay, let's check the weather for San Francisco, CA:"
    );
    assert_eq!(blocks[1]["name"], "get_weather");
    assert_eq!(stop, "tool_use");
    assert_eq!(usage["input_tokens"], 472);
    assert_eq!(usage["output_tokens"], 89);
}

// --- Round trip -----------------------------------------------------------------------------

mod round_trip {
    use proptest::prelude::*;

    use super::*;

    fn text() -> impl Strategy<Value = String> {
        "[a-zA-Z0-9 .,!?\"\\\\é\n]{1,24}"
    }

    fn user_part() -> impl Strategy<Value = Part> {
        prop_oneof![
            text().prop_map(|t| Part::Text(Text::plain(t))),
            "[a-z]{1,8}".prop_map(|p| Part::Image {
                source: ImageSource::Url(format!("https://example.com/{p}.png")),
                cache_control: None,
            }),
            "[A-Za-z0-9+/]{4,16}".prop_map(|d| Part::Image {
                source: ImageSource::Base64 {
                    media_type: "image/png".into(),
                    data: d
                },
                cache_control: None,
            }),
        ]
    }

    fn call() -> impl Strategy<Value = ToolCall> {
        ("[a-z0-9]{3,8}", "[a-z_]{1,8}", text()).prop_map(|(id, name, v)| ToolCall {
            id: format!("call_{id}"),
            name,
            arguments: json!({ "q": v }).to_string(),
        })
    }

    /// A user turn: tool results first (as OpenAI tool messages put them), then content.
    fn user() -> impl Strategy<Value = Message> {
        (
            proptest::collection::vec(("[a-z0-9]{3,8}", text()), 0..3),
            proptest::collection::vec(user_part(), 1..4),
        )
            .prop_map(|(results, parts)| {
                let mut content: Vec<Part> = results
                    .into_iter()
                    .map(|(id, t)| Part::ToolResult {
                        id: format!("call_{id}"),
                        content: vec![Part::Text(Text::plain(t))],
                        is_error: false,
                        cache_control: None,
                    })
                    .collect();
                content.extend(parts);
                Message {
                    role: Role::User,
                    content,
                }
            })
    }

    fn assistant() -> impl Strategy<Value = Message> {
        (
            proptest::option::of(text()),
            proptest::collection::vec(call(), 0..3),
        )
            .prop_filter("an assistant turn says something", |(t, c)| {
                t.is_some() || !c.is_empty()
            })
            .prop_map(|(t, calls)| {
                let mut content: Vec<Part> =
                    t.map(|t| Part::Text(Text::plain(t))).into_iter().collect();
                content.extend(calls.into_iter().map(Part::ToolCall));
                Message {
                    role: Role::Assistant,
                    content,
                }
            })
    }

    /// Sampling values as clients write them (two decimals). serde_json's default parser may
    /// be one ulp off on 17-digit floats; such noise is no change of meaning.
    fn hundredths(max: u32) -> impl Strategy<Value = f64> {
        (0..=max).prop_map(|n| f64::from(n) / 100.0)
    }

    fn request() -> impl Strategy<Value = ChatRequest> {
        let turns = proptest::collection::vec((user(), assistant()), 1..4);
        let tools = proptest::collection::vec(("[a-z_]{1,8}", proptest::option::of(text())), 0..3);
        (
            (turns, proptest::option::of(text()), tools),
            (proptest::option::of(1u64..100_000), proptest::option::of(hundredths(200)), proptest::option::of(hundredths(100))),
            (proptest::collection::vec(text(), 0..3), any::<bool>(), proptest::option::of("[a-z0-9-]{1,12}")),
            (proptest::option::of(0usize..4), proptest::option::of(any::<bool>()), proptest::option::of(0usize..3)),
        )
            .prop_map(|((turns, system, tools), (max_tokens, temperature, top_p), (stop, stream, user), (choice, parallel, effort))| {
                let tools: Vec<Tool> = tools
                    .into_iter()
                    .map(|(name, description)| Tool {
                        name,
                        description,
                        parameters: json!({"type": "object", "properties": {"q": {"type": "string"}}}),
                        cache_control: None,
                    })
                    .collect();
                let tool_choice = choice.map(|c| match c {
                    0 => ToolChoice::Auto,
                    1 => ToolChoice::Any,
                    2 => ToolChoice::None,
                    _ => ToolChoice::Tool("f".into()),
                });
                ChatRequest {
                    model: "m".into(),
                    system: system.map(Text::plain).into_iter().collect(),
                    messages: turns.into_iter().flat_map(|(u, a)| [u, a]).collect(),
                    max_tokens,
                    temperature,
                    top_p,
                    top_k: None,
                    stop,
                    stream,
                    parallel_tool_calls: parallel.filter(|_| !tools.is_empty()),
                    tools,
                    tool_choice,
                    user,
                    thinking: effort.map(|e| Thinking::Effort([Effort::Low, Effort::Medium, Effort::High][e])),
                    response_format: None,
                }
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// OpenAI → internal → OpenAI keeps every meaning the OpenAI format can carry.
        #[test]
        fn openai_round_trip_keeps_meaning(req in request()) {
            let wire = openai::write_request(&req, &mut strict()).unwrap();
            let back = openai::parse_request(&wire, &mut strict()).unwrap();
            prop_assert_eq!(&back, &req);
            prop_assert_eq!(openai::write_request(&back, &mut strict()).unwrap(), wire);
        }

        /// Through Anthropic's format and back, the conversation and its tool calls survive.
        #[test]
        fn anthropic_round_trip_keeps_the_conversation(req in request()) {
            let wire = anthropic::write_request(&req, &mut strict()).unwrap();
            let back = anthropic::parse_request(&wire, &mut strict()).unwrap();
            prop_assert_eq!(&back.messages, &req.messages);
            prop_assert_eq!(&back.system, &req.system);
            prop_assert_eq!(&back.stop, &req.stop);
        }
    }
}

#[test]
fn every_anthropic_stop_reason_survives_and_openai_gets_its_nearest() {
    // The anthropic SDK's `StopReason` literals (2.14).
    for (reason, openai) in [
        ("end_turn", "stop"),
        ("max_tokens", "length"),
        ("stop_sequence", "stop"),
        ("tool_use", "tool_calls"),
        ("pause_turn", "stop"),
        ("refusal", "content_filter"),
        ("model_context_window_exceeded", "length"),
    ] {
        let stop = StopReason::from_anthropic(reason);
        assert_eq!(stop.anthropic(), reason);
        assert_eq!(stop.openai(), openai, "{reason}");
    }
}

#[test]
fn a_json_schema_reaches_claude_natively_where_the_model_answers_in_one() {
    let body = br#"{"model":"m","messages":[{"role":"user","content":"hi"}],
        "response_format":{"type":"json_schema","json_schema":{"name":"w","schema":{"type":"object"}}}}"#;
    let native = sluice_core::rules::ModelRules {
        native_structured_output: true,
        ..Default::default()
    };
    let mut p = Params::new(false, Dialect::OpenAi).with_rules(native);
    let req = openai::parse_request(body, &mut p).unwrap();
    let v = json_of(&anthropic::write_request(&req, &mut p).unwrap());
    assert_eq!(
        v["output_config"],
        json!({"format": {"type": "json_schema", "schema": {"type": "object"}}})
    );
    // A model without it is asked through the forced tool (crate::json_tool::forced_json) ...
    let mut p = Params::new(false, Dialect::OpenAi);
    let req = openai::parse_request(body, &mut p).unwrap();
    let v = json_of(&anthropic::write_request(&req, &mut p).unwrap());
    assert_eq!(v["tool_choice"]["name"], crate::json_tool::JSON_TOOL);
    // ... and a bare json_object, which has no schema, cannot be promised.
    let body = br#"{"model":"m","messages":[{"role":"user","content":"hi"}],
        "response_format":{"type":"json_object"}}"#;
    let mut p = Params::new(false, Dialect::OpenAi);
    let req = openai::parse_request(body, &mut p).unwrap();
    assert!(matches!(
        anthropic::write_request(&req, &mut p),
        Err(TranslateError::Unsupported(name)) if name == "response_format"
    ));
}

#[test]
fn thinking_goes_back_to_claude_only_with_its_signature() {
    let body = br#"{"model":"m","messages":[{"role":"user","content":"q"},
        {"role":"assistant","content":"a","reasoning_content":"unsigned thoughts",
         "thinking_blocks":[{"type":"thinking","thinking":"signed thoughts","signature":"sig"}]},
        {"role":"user","content":"again"}]}"#;
    let mut p = Params::new(false, Dialect::OpenAi);
    let req = openai::parse_request(body, &mut p).unwrap();
    let v = json_of(&anthropic::write_request(&req, &mut p).unwrap());
    let blocks = v["messages"][1]["content"].as_array().unwrap();
    let thinking: Vec<&Value> = blocks.iter().filter(|b| b["type"] == "thinking").collect();
    assert_eq!(thinking.len(), 1, "{blocks:?}");
    assert_eq!(thinking[0]["signature"], "sig");

    // Only unsigned reasoning: nothing of it is sent.
    let body = br#"{"model":"m","messages":[{"role":"user","content":"q"},
        {"role":"assistant","content":"a","reasoning_content":"unsigned"},
        {"role":"user","content":"again"}]}"#;
    let mut p = Params::new(false, Dialect::OpenAi);
    let req = openai::parse_request(body, &mut p).unwrap();
    let v = json_of(&anthropic::write_request(&req, &mut p).unwrap());
    assert!(!v.to_string().contains("\"thinking\""), "{v}");
}
