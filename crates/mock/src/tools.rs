//! When the mock calls a tool: the request offers tools, does not forbid them, and its last
//! turn is not already a tool result (so a tool loop ends with a text answer, as a model's
//! would). The same rule for OpenAI's, Anthropic's, Gemini's and Bedrock's request shapes: each
//! shape is probed for its tools, forced choice and last turn, then [`decide`] applies it.

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

/// Decide whether to call a tool. `tools` is the request's raw `tools` value, `body` the whole
/// request (read again only when tools are offered).
pub(super) fn plan(tools: Option<&RawValue>, body: &[u8]) -> Option<ToolPlan> {
    tools.filter(|t| t.get() != "null" && t.get() != "[]")?;
    let probe: Probe = serde_json::from_slice(body).ok()?;
    let forced = match &probe.tool_choice {
        Some(Value::String(s)) if s == "none" => return None,
        Some(c) if c["type"] == "none" => return None,
        Some(c) => c["name"]
            .as_str()
            .or(c.pointer("/function/name").and_then(Value::as_str)),
        None => None,
    };
    if let Some(last) = probe.messages.last() {
        let tool_result = last["role"] == "tool"
            || last["content"]
                .as_array()
                .is_some_and(|c| c.iter().any(|b| b["type"] == "tool_result"));
        if tool_result {
            return None;
        }
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
            let schema = t.get("input_schema").or(t.pointer("/function/parameters"));
            Some((name_of(t)?, schema))
        })
        .collect();
    decide(&offered, forced, false)
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
        let p = plan(Some(&raw("[1]")), body).unwrap();
        assert_eq!(p.name, "get_weather");
        let args: Value = serde_json::from_str(&p.arguments).unwrap();
        assert_eq!(args, serde_json::json!({"city": "mock city", "days": 1}));
    }

    #[test]
    fn anthropic_shapes_forced_choice_and_tool_results() {
        let body = br#"{"tools":[{"name":"a","input_schema":{}},{"name":"b","input_schema":{}}],"tool_choice":{"type":"tool","name":"b"},"messages":[{"role":"user","content":"x"}]}"#;
        assert_eq!(plan(Some(&raw("[1]")), body).unwrap().name, "b");
        let body = br#"{"tools":[{"name":"a"}],"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"ok"}]}]}"#;
        assert!(plan(Some(&raw("[1]")), body).is_none());
        let body = br#"{"tools":[{"name":"a"}],"tool_choice":"none","messages":[]}"#;
        assert!(plan(Some(&raw("[1]")), body).is_none());
        assert!(plan(None, b"{}").is_none());
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
