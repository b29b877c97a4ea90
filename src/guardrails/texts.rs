//! Where the text is in each endpoint's request and answer: only these strings are checked,
//! masked and given back. Images, audio, tool definitions and every other field stay as they
//! are (and are not checked).

use serde_json::Value;
use sluice_core::endpoint::Endpoint;

/// The text of a message's `content`: a string, or the `text` of each part of a list
/// (OpenAI's `{"type": "text"}` / `input_text`, Anthropic's `{"type": "text"}`).
fn content<'a>(v: &'a mut Value, out: &mut Vec<&'a mut String>) {
    match v {
        Value::String(s) => out.push(s),
        Value::Array(parts) => {
            for part in parts {
                if let Some(Value::String(t)) = part.get_mut("text") {
                    out.push(t);
                }
            }
        }
        _ => {}
    }
}

/// A string or a list of strings (completions' `prompt`, embeddings' `input`).
fn strings<'a>(v: &'a mut Value, out: &mut Vec<&'a mut String>) {
    match v {
        Value::String(s) => out.push(s),
        Value::Array(items) => {
            for item in items {
                if let Value::String(s) = item {
                    out.push(s);
                }
            }
        }
        _ => {}
    }
}

/// Each message's content in a `messages` (or Responses `input`) list.
fn messages<'a>(v: &'a mut Value, out: &mut Vec<&'a mut String>) {
    match v {
        Value::String(s) => out.push(s),
        Value::Array(items) => {
            for m in items {
                match m {
                    Value::String(s) => out.push(s),
                    Value::Object(o) => {
                        if let Some(c) = o.get_mut("content") {
                            content(c, out);
                        }
                    }
                    _ => {}
                }
            }
        }
        _ => {}
    }
}

/// Whether an endpoint carries text guardrails can check.
pub(super) fn checked(endpoint: Endpoint) -> bool {
    matches!(
        endpoint,
        Endpoint::ChatCompletions
            | Endpoint::Completions
            | Endpoint::Responses
            | Endpoint::Messages
            | Endpoint::Embeddings
    )
}

/// The request's text: chat `messages`, completions `prompt`, Responses `input` and
/// `instructions`, Anthropic `messages` and `system`, embeddings `input`.
pub(super) fn request<'a>(endpoint: Endpoint, body: &'a mut Value, out: &mut Vec<&'a mut String>) {
    let Some(obj) = body.as_object_mut() else {
        return;
    };
    for (k, v) in obj.iter_mut() {
        match (endpoint, k.as_str()) {
            (Endpoint::ChatCompletions | Endpoint::Messages, "messages")
            | (Endpoint::Responses, "input") => messages(v, out),
            (Endpoint::Messages, "system") | (Endpoint::Responses, "instructions") => {
                content(v, out);
            }
            (Endpoint::Completions, "prompt") | (Endpoint::Embeddings, "input") => strings(v, out),
            _ => {}
        }
    }
}

/// A whole answer's text: chat `choices[].message.content`, completions `choices[].text`,
/// Anthropic `content[].text`, Responses `output[].content[].text`.
pub(super) fn answer<'a>(endpoint: Endpoint, body: &'a mut Value, out: &mut Vec<&'a mut String>) {
    match endpoint {
        Endpoint::ChatCompletions | Endpoint::Completions => {
            let Some(Value::Array(choices)) = body.get_mut("choices") else {
                return;
            };
            for c in choices {
                let Value::Object(c) = c else { continue };
                for (k, v) in c.iter_mut() {
                    match k.as_str() {
                        "text" => strings(v, out),
                        "message" => {
                            if let Some(m) = v.get_mut("content") {
                                content(m, out);
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        Endpoint::Messages => {
            if let Some(c) = body.get_mut("content") {
                content(c, out);
            }
        }
        Endpoint::Responses => {
            if let Some(Value::Array(items)) = body.get_mut("output") {
                for item in items {
                    if let Some(c) = item.get_mut("content") {
                        content(c, out);
                    }
                }
            }
        }
        _ => {}
    }
}

/// The text a streamed event adds, per endpoint: chat `choices[].delta.content`, completions
/// `choices[].text`, Anthropic `delta.text`, Responses `response.output_text.delta`'s `delta`.
pub(super) fn delta<'a>(endpoint: Endpoint, event: &'a mut Value, out: &mut Vec<&'a mut String>) {
    match endpoint {
        Endpoint::ChatCompletions | Endpoint::Completions => {
            let Some(Value::Array(choices)) = event.get_mut("choices") else {
                return;
            };
            for c in choices {
                let Value::Object(c) = c else { continue };
                for (k, v) in c.iter_mut() {
                    match (k.as_str(), v) {
                        ("text", Value::String(t)) => out.push(t),
                        ("delta", Value::Object(d)) => {
                            if let Some(Value::String(t)) = d.get_mut("content") {
                                out.push(t);
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        Endpoint::Messages => {
            if let Some(Value::String(t)) = event.get_mut("delta").and_then(|d| d.get_mut("text")) {
                out.push(t);
            }
        }
        Endpoint::Responses => {
            let Value::Object(o) = event else { return };
            if o.get("type").and_then(Value::as_str) != Some("response.output_text.delta") {
                return;
            }
            if let Some(Value::String(t)) = o.get_mut("delta") {
                out.push(t);
            }
        }
        _ => {}
    }
}

/// Text a streamed event repeats whole after its deltas (Responses' `.done` events and
/// `response.completed`): masked and given back like the deltas, so nothing slips out there.
pub(super) fn repeated<'a>(
    endpoint: Endpoint,
    event: &'a mut Value,
    out: &mut Vec<&'a mut String>,
) {
    if endpoint != Endpoint::Responses {
        return;
    }
    let Value::Object(o) = event else { return };
    let kind = o
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    match kind.as_str() {
        "response.output_text.done" => {
            if let Some(Value::String(t)) = o.get_mut("text") {
                out.push(t);
            }
        }
        "response.content_part.done" => {
            if let Some(Value::String(t)) = o.get_mut("part").and_then(|p| p.get_mut("text")) {
                out.push(t);
            }
        }
        "response.output_item.done" => {
            if let Some(c) = o.get_mut("item").and_then(|i| i.get_mut("content")) {
                content(c, out);
            }
        }
        "response.completed" | "response.incomplete" => {
            if let Some(r) = o.get_mut("response") {
                answer(Endpoint::Responses, r, out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn req(endpoint: Endpoint, mut v: Value) -> Vec<String> {
        let mut out = Vec::new();
        request(endpoint, &mut v, &mut out);
        out.into_iter().map(|s| s.clone()).collect()
    }

    #[test]
    fn request_text_per_endpoint() {
        let chat = json!({"model": "m", "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "data:x"}}]},
        ], "user": "not text"});
        assert_eq!(req(Endpoint::ChatCompletions, chat), ["sys", "a"]);
        let msgs = json!({"system": [{"type": "text", "text": "s"}], "messages": [{"role": "user", "content": "u"}]});
        let mut got = req(Endpoint::Messages, msgs);
        got.sort();
        assert_eq!(got, ["s", "u"]);
        assert_eq!(
            req(Endpoint::Completions, json!({"prompt": ["p", "q"]})),
            ["p", "q"]
        );
        let resp = json!({"instructions": "i", "input": [{"role": "user", "content": [{"type": "input_text", "text": "t"}]}]});
        let mut got = req(Endpoint::Responses, resp);
        got.sort();
        assert_eq!(got, ["i", "t"]);
        assert_eq!(
            req(Endpoint::Responses, json!({"input": "plain"})),
            ["plain"]
        );
    }

    #[test]
    fn answer_text_per_endpoint() {
        let mut chat = json!({"choices": [{"message": {"role": "assistant", "content": "hi"}}]});
        let mut out = Vec::new();
        answer(Endpoint::ChatCompletions, &mut chat, &mut out);
        assert_eq!(out.len(), 1);
        let mut msg =
            json!({"content": [{"type": "text", "text": "x"}, {"type": "tool_use", "input": {}}]});
        let mut out = Vec::new();
        answer(Endpoint::Messages, &mut msg, &mut out);
        assert_eq!(out.len(), 1);
    }
}
