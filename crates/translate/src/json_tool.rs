//! Structured output for a model without it: OpenAI's `json_schema` asked as the one tool the
//! model must call, and the call told back as the answer's text, whole and streamed. Claude
//! and Converse models the registry does not flag for native structured output are asked this
//! way (the writers call [`forced_json`]; the exchange reads the answer with
//! [`json_tool_answer`] or `stream::JsonToolStream`).

use sluice_core::rules::ModelRules;

use crate::ir::{
    ChatRequest, ChatResponse, Part, ResponseFormat, StopReason, Text, Tool, ToolChoice,
};

/// The tool a JSON schema is asked through for a model without structured output of its own
/// (LiteLLM's name, so answers read the same through either gateway).
pub const JSON_TOOL: &str = "json_tool_call";

/// For a writer whose model cannot answer in a schema natively (Claude and Converse models the
/// registry does not flag): the request asking for `response_format`'s schema as the one tool
/// the model must call, or `None` when that method does not apply (no schema, a native model,
/// the request's own tools, or thinking, which a forced tool choice excludes). The answer's
/// call of [`JSON_TOOL`] is told back as text ([`json_tool_answer`]).
pub fn forced_json(req: &ChatRequest, rules: &ModelRules) -> Option<ChatRequest> {
    let Some(ResponseFormat::Schema { schema, .. }) = &req.response_format else {
        return None;
    };
    if rules.native_structured_output || !req.tools.is_empty() || req.thinking.is_some() {
        return None;
    }
    let mut forced = req.clone();
    forced.response_format = None;
    forced.tools = vec![Tool {
        name: JSON_TOOL.into(),
        description: Some("Respond with a JSON object that matches the schema.".into()),
        parameters: schema.clone(),
        cache_control: None,
    }];
    forced.tool_choice = Some(ToolChoice::Tool(JSON_TOOL.into()));
    Some(forced)
}

/// Whether `req` was sent as [`forced_json`] may have sent it: a schema asked for, and no tool
/// of the client's own that the model's [`JSON_TOOL`] call could be.
pub fn asks_json_tool(req: &ChatRequest) -> bool {
    matches!(req.response_format, Some(ResponseFormat::Schema { .. }))
        && !req.tools.iter().any(|t| t.name == JSON_TOOL)
}

/// A whole answer to a [`forced_json`] request as the client asked for it: the call's
/// arguments are the answer's text, and the turn ends as a text answer does.
pub fn json_tool_answer(answer: &mut ChatResponse) {
    let mut called = false;
    for part in &mut answer.content {
        if let Part::ToolCall(c) = part {
            if c.name == JSON_TOOL {
                *part = Part::Text(Text::plain(std::mem::take(&mut c.arguments)));
                called = true;
            }
        }
    }
    let others = answer
        .content
        .iter()
        .any(|p| matches!(p, Part::ToolCall(_)));
    if called && !others && answer.stop == StopReason::ToolUse {
        answer.stop = StopReason::EndTurn;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Effort, StreamEvent, Thinking};
    use crate::stream::{Event, JsonToolStream, StreamRead};
    use crate::Params;
    use serde_json::{json, Value};
    use sluice_core::endpoint::Dialect;

    #[test]
    fn a_schema_without_native_support_is_asked_as_a_forced_tool_and_told_back_as_text() {
        let body = br#"{"model":"m","messages":[{"role":"user","content":"hi"}],
            "response_format":{"type":"json_schema","json_schema":{"name":"w","schema":{"type":"object","properties":{"a":{"type":"string"}}}}}}"#;
        let mut p = Params::new(false, Dialect::OpenAi);
        let req = crate::openai::parse_request(body, &mut p).unwrap();
        let v: Value =
            serde_json::from_slice(&crate::anthropic::write_request(&req, &mut p).unwrap())
                .unwrap();
        assert_eq!(v["tools"][0]["name"], JSON_TOOL);
        assert_eq!(
            v["tools"][0]["input_schema"]["properties"]["a"]["type"],
            "string"
        );
        assert_eq!(v["tool_choice"], json!({"type": "tool", "name": JSON_TOOL}));
        assert!(asks_json_tool(&req));
        // With thinking, or tools of the client's own, the method does not apply.
        let mut thinking = req.clone();
        thinking.thinking = Some(Thinking::Effort(Effort::High));
        assert!(forced_json(&thinking, &ModelRules::default()).is_none());

        let mut answer = ChatResponse {
            id: "x".into(),
            model: "m".into(),
            content: vec![Part::ToolCall(crate::ir::ToolCall {
                id: "t".into(),
                name: JSON_TOOL.into(),
                arguments: r#"{"a":"b"}"#.into(),
            })],
            stop: StopReason::ToolUse,
            stop_sequence: None,
            usage: Default::default(),
            created: 0,
        };
        json_tool_answer(&mut answer);
        assert_eq!(answer.stop, StopReason::EndTurn);
        assert!(matches!(&answer.content[0], Part::Text(t) if t.text == r#"{"a":"b"}"#));

        // Streamed: the call's argument deltas are text deltas of the same block.
        let mut reader = JsonToolStream::new(crate::anthropic::EventReader);
        let mut out = Vec::new();
        for data in [
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"json_tool_call","input":{}}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":3}}"#,
        ] {
            reader.read(Event::Data(data.as_bytes()), &mut out);
        }
        assert!(
            out.iter()
                .any(|e| matches!(e, StreamEvent::Text { index: 0, text } if text == "{\"a\":")),
            "{out:?}"
        );
        assert!(
            !out.iter()
                .any(|e| matches!(e, StreamEvent::ToolStart { .. })),
            "{out:?}"
        );
        assert!(
            out.iter().any(|e| matches!(
                e,
                StreamEvent::Stop {
                    reason: StopReason::EndTurn,
                    ..
                }
            )),
            "{out:?}"
        );
    }
}
