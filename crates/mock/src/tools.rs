//! When the mock calls a tool: the request offers tools, does not forbid them, and its last
//! turn is not already a tool result (so a tool loop ends with a text answer, as a model's
//! would). The same rule for OpenAI's, Anthropic's, Gemini's and Bedrock's request shapes: each
//! shape is probed for its tools, forced choice and last turn, then [`decide`] applies it.
//!
//! A test that drives a real agent (Claude Code, Codex CLI, Gemini CLI) scripts the call in
//! its prompt, in OpenAI's, Anthropic's, the Responses API's and Gemini's shapes: a user text line `mock-tool: <name> <JSON arguments>` makes the
//! mock call that tool (when offered) with exactly those arguments, and once a tool result
//! follows that turn, answer `mock tool result: <the result's text>`, so the test sees the
//! tool's real output come back through the gateway. A `mock-tool-loop: <name> <JSON
//! arguments>` line makes it call that tool on every turn, results or not: a model that never
//! stops calling tools, for a tool loop's limit.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// The tool call the mock answers with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ToolPlan {
    /// The tool's name.
    pub name: String,
    /// Deterministic arguments as JSON text, built from the tool's schema.
    pub arguments: String,
}

#[derive(Deserialize)]
struct Probe {
    #[serde(default)]
    tools: Vec<Value>,
    #[serde(default)]
    tool_choice: Option<Value>,
    #[serde(default)]
    messages: Vec<Value>,
}

/// What the mock answers a request that offers tools with, when not its usual text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Turn {
    /// Call this tool.
    Call(ToolPlan),
    /// Say this (a scripted call's result, echoed).
    Say(String),
}

/// The prefix of the user text line that scripts a tool call.
const SCRIPT: &str = "mock-tool:";
/// The prefix of the line that scripts the same call on every turn.
const SCRIPT_LOOP: &str = "mock-tool-loop:";
/// The most characters of a tool result the echo repeats.
const MAX_ECHO: usize = 1000;

/// The Responses API's request: its `input` (a string, or items) read as the chat shape's
/// messages, so that one rule serves both.
#[derive(Deserialize)]
struct ResponsesProbe {
    #[serde(default)]
    tools: Vec<Value>,
    #[serde(default)]
    tool_choice: Option<Value>,
    #[serde(default)]
    input: Value,
}

/// Decide whether to call a tool. `tools` is the request's raw `tools` value, `body` the whole
/// request (read again only when tools are offered).
pub(super) fn plan(tools: Option<&RawValue>, body: &[u8]) -> Option<Turn> {
    tools.filter(|t| t.get() != "null" && t.get() != "[]")?;
    turn(serde_json::from_slice(body).ok()?)
}

/// [`plan`] for a Responses API request (`POST /v1/responses`): function tools are flat
/// (`name`, `parameters`), a `function_call_output` item is the tool result turn.
pub(super) fn plan_response(tools: Option<&RawValue>, body: &[u8]) -> Option<Turn> {
    tools.filter(|t| t.get() != "null" && t.get() != "[]")?;
    let r: ResponsesProbe = serde_json::from_slice(body).ok()?;
    let messages = match r.input {
        Value::String(s) => vec![serde_json::json!({"role": "user", "content": s})],
        Value::Array(items) => items
            .into_iter()
            .filter_map(|mut i| match i["type"].as_str() {
                Some("function_call_output") => {
                    Some(serde_json::json!({"role": "tool", "content": i["output"].take()}))
                }
                Some("function_call") => Some(serde_json::json!({"role": "assistant"})),
                Some("message") | None => Some(
                    serde_json::json!({"role": i["role"].take(), "content": i["content"].take()}),
                ),
                Some(_) => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    turn(Probe {
        tools: r.tools,
        tool_choice: r.tool_choice,
        messages,
    })
}

/// [`plan`] for a Gemini `generateContent` request: its function declarations, its
/// `functionCallingConfig`, and its `contents` read as the chat shape's messages (a turn
/// holding a `functionResponse` is a tool result, whose text is the response's `output`,
/// `result` or `content`, else its JSON), so that a scripted call works as on the other shapes.
pub(super) fn plan_gemini(body: &[u8]) -> Result<Option<Turn>, String> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct GeminiProbe {
        #[serde(default)]
        contents: Vec<Value>,
        #[serde(default)]
        tools: Vec<Value>,
        #[serde(default)]
        tool_config: Option<Value>,
    }
    let g: GeminiProbe = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    let tools: Vec<Value> = g
        .tools
        .iter()
        .flat_map(|t| t["functionDeclarations"].as_array().into_iter().flatten())
        .map(|d| {
            let schema = d.get("parametersJsonSchema").or(d.get("parameters"));
            serde_json::json!({"name": d["name"], "parameters": schema})
        })
        .collect();
    if tools.is_empty() {
        return Ok(None);
    }
    let config = g
        .tool_config
        .as_ref()
        .and_then(|c| c.get("functionCallingConfig"));
    let tool_choice = match config {
        Some(c) if c["mode"] == "NONE" => Some(Value::from("none")),
        Some(c) => c
            .pointer("/allowedFunctionNames/0")
            .map(|n| serde_json::json!({ "name": n })),
        None => None,
    };
    let messages = g
        .contents
        .iter()
        .map(|c| {
            let parts = c["parts"].as_array().map(Vec::as_slice).unwrap_or_default();
            if let Some(r) = parts.iter().find_map(|p| p.get("functionResponse")) {
                let r = &r["response"];
                let text = ["output", "result", "content"]
                    .iter()
                    .find_map(|k| r[k].as_str().map(str::to_owned))
                    .unwrap_or_else(|| r.to_string());
                return serde_json::json!({"role": "tool", "content": text});
            }
            let role = if c["role"] == "model" {
                "assistant"
            } else {
                "user"
            };
            let text: Vec<&str> = parts.iter().filter_map(|p| p["text"].as_str()).collect();
            serde_json::json!({"role": role, "content": text.join("\n")})
        })
        .collect();
    Ok(turn(Probe {
        tools,
        tool_choice,
        messages,
    }))
}

/// The rule, over a request read into the chat shape.
fn turn(probe: Probe) -> Option<Turn> {
    let forced = match &probe.tool_choice {
        Some(Value::String(s)) if s == "none" => return None,
        Some(c) if c["type"] == "none" => return None,
        Some(c) => c["name"]
            .as_str()
            .or(c.pointer("/function/name").and_then(Value::as_str)),
        None => None,
    };
    if let Some(turn) = scripted(&probe) {
        return Some(turn);
    }
    if probe.messages.last().is_some_and(is_tool_result) {
        return None;
    }
    let name_of = |t: &Value| {
        t["name"]
            .as_str()
            .or(t.pointer("/function/name").and_then(Value::as_str))
            .map(str::to_owned)
    };
    let offered: Vec<(String, Option<&Value>)> = probe
        .tools
        .iter()
        .filter_map(|t| {
            let schema = t
                .get("input_schema")
                .or(t.pointer("/function/parameters"))
                .or(t.get("parameters"));
            Some((name_of(t)?, schema))
        })
        .collect();
    decide(&offered, forced, false).map(Turn::Call)
}

/// A tool result turn: OpenAI's `tool` message, or a user turn holding `tool_result` blocks.
fn is_tool_result(m: &Value) -> bool {
    m["role"] == "tool"
        || m["content"]
            .as_array()
            .is_some_and(|c| c.iter().any(|b| b["type"] == "tool_result"))
}

/// The text of a content value: a string, or its text parts joined.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter(|p| {
                matches!(
                    p["type"].as_str(),
                    Some("text" | "input_text" | "output_text")
                )
            })
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The latest tool result's text after message `from`.
fn result_after(messages: &[Value], from: usize) -> Option<String> {
    let m = messages
        .iter()
        .skip(from + 1)
        .rev()
        .find(|m| is_tool_result(m))?;
    if m["role"] == "tool" {
        return Some(text_of(&m["content"]));
    }
    let block = m["content"]
        .as_array()?
        .iter()
        .rev()
        .find(|b| b["type"] == "tool_result")?;
    Some(text_of(&block["content"]))
}

/// The scripted turn: the latest `mock-tool:` line in a user turn's text, the tool it names
/// (if offered) called with its arguments, or, once a tool result follows, that result echoed
/// (never for a `mock-tool-loop:` line).
fn scripted(probe: &Probe) -> Option<Turn> {
    let (at, name, arguments, looping) = probe
        .messages
        .iter()
        .enumerate()
        .rev()
        .filter(|(_, m)| m["role"] == "user")
        .find_map(|(i, m)| {
            let text = text_of(&m["content"]);
            let (line, looping) = text.lines().rev().find_map(|l| {
                let l = l.trim();
                l.strip_prefix(SCRIPT)
                    .map(|r| (r, false))
                    .or_else(|| l.strip_prefix(SCRIPT_LOOP).map(|r| (r, true)))
            })?;
            let (name, args) = line.trim().split_once(char::is_whitespace)?;
            let args: Value = serde_json::from_str(args.trim()).ok()?;
            Some((i, name.to_owned(), args, looping))
        })?;
    if let Some(result) = result_after(&probe.messages, at).filter(|_| !looping) {
        let echoed: String = result.chars().take(MAX_ECHO).collect();
        return Some(Turn::Say(format!("mock tool result: {echoed}")));
    }
    let offered = probe.tools.iter().any(|t| {
        t["name"] == name.as_str()
            || t.pointer("/function/name") == Some(&Value::from(name.as_str()))
    });
    offered.then(|| {
        Turn::Call(ToolPlan {
            name,
            arguments: arguments.to_string(),
        })
    })
}

/// The call for offered tools (name, argument schema): the forced one, else the first; none
/// when the last turn already answers a tool call (`answered`).
pub(super) fn decide(
    offered: &[(String, Option<&Value>)],
    forced: Option<&str>,
    answered: bool,
) -> Option<ToolPlan> {
    if answered {
        return None;
    }
    let (name, schema) = match forced {
        Some(f) => offered.iter().find(|(n, _)| n == f),
        None => offered.first(),
    }?;
    Some(ToolPlan {
        name: name.clone(),
        arguments: arguments(*schema).to_string(),
    })
}

/// One value per schema property: `"mock"` for strings, 1 for numbers, true for booleans.
fn arguments(schema: Option<&Value>) -> Value {
    let mut args = Map::new();
    if let Some(props) = schema.and_then(|s| s["properties"].as_object()) {
        for (name, p) in props {
            let v = match p["type"].as_str() {
                Some("integer" | "number") => Value::from(1),
                Some("boolean") => Value::Bool(true),
                Some("array") => Value::Array(Vec::new()),
                Some("object") => Value::Object(Map::new()),
                _ => Value::from(format!("mock {name}")),
            };
            args.insert(name.clone(), v);
        }
    }
    Value::Object(args)
}

/// Split `text` into `n` pieces at character boundaries; they concatenate to `text`.
pub(super) fn split(text: &str, n: u32) -> Vec<&str> {
    let n = n.max(1) as usize;
    let len = text.len();
    let mut out = Vec::with_capacity(n);
    let mut from = 0;
    for k in 1..=n {
        let mut to = if k == n { len } else { len * k / n };
        while !text.is_char_boundary(to) {
            to += 1;
        }
        let to = to.max(from);
        out.push(&text[from..to]);
        from = to;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_owned()).unwrap()
    }

    #[test]
    fn calls_the_first_tool_with_schema_arguments() {
        let body = br#"{"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}}}}}],"messages":[{"role":"user","content":"hi"}]}"#;
        let Some(Turn::Call(p)) = plan(Some(&raw("[1]")), body) else {
            panic!("a tool call")
        };
        assert_eq!(p.name, "get_weather");
        let args: Value = serde_json::from_str(&p.arguments).unwrap();
        assert_eq!(args, serde_json::json!({"city": "mock city", "days": 1}));
    }

    #[test]
    fn anthropic_shapes_forced_choice_and_tool_results() {
        let body = br#"{"tools":[{"name":"a","input_schema":{}},{"name":"b","input_schema":{}}],"tool_choice":{"type":"tool","name":"b"},"messages":[{"role":"user","content":"x"}]}"#;
        assert!(matches!(plan(Some(&raw("[1]")), body), Some(Turn::Call(p)) if p.name == "b"));
        let body = br#"{"tools":[{"name":"a"}],"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"ok"}]}]}"#;
        assert!(plan(Some(&raw("[1]")), body).is_none());
        let body = br#"{"tools":[{"name":"a"}],"tool_choice":"none","messages":[]}"#;
        assert!(plan(Some(&raw("[1]")), body).is_none());
        assert!(plan(None, b"{}").is_none());
    }

    #[test]
    fn a_scripted_call_then_its_result_echoed() {
        let tools = r#"[{"type":"function","function":{"name":"Agent","parameters":{}}},{"type":"function","function":{"name":"Bash","parameters":{}}}]"#;
        let ask = r#"{"role":"user","content":[{"type":"text","text":"<reminder/>"},{"type":"text","text":"Please.\nmock-tool: Bash {\"command\": \"echo $((6*7))\"}"}]}"#;
        let body = format!(r#"{{"tools":{tools},"messages":[{ask}]}}"#);
        assert_eq!(
            plan(Some(&raw("[1]")), body.as_bytes()),
            Some(Turn::Call(ToolPlan {
                name: "Bash".into(),
                arguments: r#"{"command":"echo $((6*7))"}"#.into()
            }))
        );
        // OpenAI's shape: the result is a tool message, a user text may follow it.
        let body = format!(
            r#"{{"tools":{tools},"messages":[{ask},{{"role":"assistant","content":null}},
            {{"role":"tool","tool_call_id":"c","content":"42"}},{{"role":"user","content":"note"}}]}}"#
        );
        assert_eq!(
            plan(Some(&raw("[1]")), body.as_bytes()),
            Some(Turn::Say("mock tool result: 42".into()))
        );
        // Anthropic's shape: a tool_result block with text blocks.
        let body = format!(
            r#"{{"tools":[{{"name":"Bash"}}],"messages":[{ask},{{"role":"assistant","content":[]}},
            {{"role":"user","content":[{{"type":"tool_result","tool_use_id":"t","content":[{{"type":"text","text":"42"}}]}}]}}]}}"#
        );
        assert_eq!(
            plan(Some(&raw("[1]")), body.as_bytes()),
            Some(Turn::Say("mock tool result: 42".into()))
        );
        // The Responses API's shape: flat function tools, a function_call_output item.
        let ask = r#"{"role":"user","content":[{"type":"input_text","text":"mock-tool: fs-add {\"a\": 2}"}]}"#;
        let tools = r#"[{"type":"function","name":"fs-add","parameters":{}}]"#;
        let body = format!(r#"{{"tools":{tools},"input":[{ask}]}}"#);
        assert_eq!(
            plan_response(Some(&raw("[1]")), body.as_bytes()),
            Some(Turn::Call(ToolPlan {
                name: "fs-add".into(),
                arguments: r#"{"a":2}"#.into()
            }))
        );
        let body = format!(
            r#"{{"tools":{tools},"input":[{ask},{{"type":"function_call","call_id":"c","name":"fs-add","arguments":"{{}}"}},
            {{"type":"function_call_output","call_id":"c","output":"2"}}]}}"#
        );
        assert_eq!(
            plan_response(Some(&raw("[1]")), body.as_bytes()),
            Some(Turn::Say("mock tool result: 2".into()))
        );
        // A looping script calls again after the result.
        let looping = ask.replace("mock-tool:", "mock-tool-loop:");
        let body = format!(
            r#"{{"tools":{tools},"input":[{looping},{{"type":"function_call","call_id":"c","name":"fs-add","arguments":"{{}}"}},
            {{"type":"function_call_output","call_id":"c","output":"2"}}]}}"#
        );
        assert!(
            matches!(plan_response(Some(&raw("[1]")), body.as_bytes()), Some(Turn::Call(p)) if p.name == "fs-add")
        );
        let body = r#"{"tools":[{"type":"function","name":"t","parameters":{"properties":{"q":{"type":"string"}}}}],"input":"hi"}"#;
        assert!(
            matches!(plan_response(Some(&raw("[1]")), body.as_bytes()), Some(Turn::Call(p)) if p.arguments == r#"{"q":"mock q"}"#)
        );
        // A tool that is not offered: the usual rule (the first tool).
        let body = format!(r#"{{"tools":[{{"name":"Read"}}],"messages":[{ask}]}}"#);
        assert!(
            matches!(plan(Some(&raw("[1]")), body.as_bytes()), Some(Turn::Call(p)) if p.name == "Read")
        );
    }

    #[test]
    fn split_concatenates_back() {
        let s = "{\"city\":\"mock é city\"}";
        for n in 1..8 {
            assert_eq!(split(s, n).concat(), s);
            assert_eq!(split(s, n).len(), n as usize);
        }
    }
}
