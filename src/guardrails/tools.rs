//! `tool_permission` in the pipeline: the tools a request offers the model (`pre_call`), the
//! calls a whole answer makes (`post_call`), and the calls a streamed answer makes as they
//! arrive. Each dialect's shapes: OpenAI chat (`tools[].function`, `tool_calls`), Anthropic
//! Messages (`tools[].name`, `tool_use` blocks) and the Responses API (`function_call` items).

use serde_json::Value;
use sluice_core::endpoint::Endpoint;
use sluice_guardrails::tools::declared_name;
use sluice_guardrails::{Denial, OnDisallowed, ToolPolicy};

/// The request's `tools`: refused at the first disallowed one (`block`), or the disallowed
/// ones taken out (`rewrite`; with `tool_choice` when it named one, and both members when
/// none is left). Returns how many were taken out.
pub(super) fn request(policy: &ToolPolicy, body: &mut Value) -> Result<usize, Denial> {
    let Some(Value::Array(tools)) = body.get_mut("tools") else {
        return Ok(0);
    };
    let mut removed = Vec::new();
    let mut i = 0;
    while i < tools.len() {
        let verdict = declared_name(&tools[i]).map(|n| (n.to_owned(), policy.decide(n, None)));
        match verdict {
            Some((_, Err(denial))) if policy.on_disallowed == OnDisallowed::Block => {
                return Err(denial)
            }
            Some((name, Err(_))) => {
                tools.remove(i);
                removed.push(name);
            }
            _ => i += 1,
        }
    }
    if removed.is_empty() {
        return Ok(0);
    }
    let none_left = tools.is_empty();
    if let Some(o) = body.as_object_mut() {
        let choice_removed = o
            .get("tool_choice")
            .and_then(chosen_name)
            .is_some_and(|n| removed.iter().any(|r| r == n));
        if none_left {
            o.remove("tools");
        }
        if none_left || choice_removed {
            o.remove("tool_choice");
        }
    }
    Ok(removed.len())
}

/// The tool a `tool_choice` forces, in any dialect.
fn chosen_name(choice: &Value) -> Option<&str> {
    choice
        .get("function")
        .and_then(|f| f.get("name"))
        .or_else(|| choice.get("name"))
        .and_then(Value::as_str)
}

/// A call's arguments: OpenAI's and the Responses API's JSON text, Anthropic's object.
fn arguments(v: Option<&Value>) -> Option<Value> {
    match v? {
        Value::String(s) => serde_json::from_str(s).ok(),
        other => Some(other.clone()),
    }
}

/// The calls of a whole answer: refused at the first disallowed one (`block`), or each
/// disallowed one replaced by a note of why (`rewrite`). Returns how many were rewritten.
pub(super) fn answer(
    policy: &ToolPolicy,
    endpoint: Endpoint,
    answer: &mut Value,
) -> Result<usize, Denial> {
    let mut rewritten = 0;
    let mut judge = |name: &str, args: Option<&Value>| -> Result<Option<String>, Denial> {
        match policy.decide(name, arguments(args).as_ref()) {
            Ok(()) => Ok(None),
            Err(d) if policy.on_disallowed == OnDisallowed::Block => Err(d),
            Err(d) => {
                rewritten += 1;
                Ok(Some(d.message))
            }
        }
    };
    match endpoint {
        Endpoint::ChatCompletions => {
            let choices = answer.get_mut("choices").and_then(Value::as_array_mut);
            for choice in choices.into_iter().flatten() {
                let Some(message) = choice.get_mut("message") else {
                    continue;
                };
                let mut notes = Vec::new();
                if let Some(Value::Array(calls)) = message.get_mut("tool_calls") {
                    let mut kept = Vec::with_capacity(calls.len());
                    for call in calls.drain(..) {
                        let f = call.get("function");
                        let name = f.and_then(|f| f.get("name")).and_then(Value::as_str);
                        let args = f.and_then(|f| f.get("arguments"));
                        match name.map(|n| judge(n, args)).transpose()? {
                            Some(Some(note)) => notes.push(note),
                            _ => kept.push(call),
                        }
                    }
                    *calls = kept;
                }
                if notes.is_empty() {
                    continue;
                }
                let left = message
                    .get("tool_calls")
                    .and_then(Value::as_array)
                    .is_some_and(|c| !c.is_empty());
                if let Some(m) = message.as_object_mut() {
                    if !left {
                        m.remove("tool_calls");
                    }
                    let before = m.get("content").and_then(Value::as_str).unwrap_or("");
                    let text = [before.to_owned()]
                        .into_iter()
                        .chain(notes)
                        .filter(|t| !t.is_empty())
                        .collect::<Vec<_>>()
                        .join("\n");
                    m.insert("content".into(), Value::String(text));
                }
                if !left {
                    if let Some(c) = choice.as_object_mut() {
                        c.insert("finish_reason".into(), Value::from("stop"));
                    }
                }
            }
        }
        Endpoint::Messages => {
            let mut any_left = false;
            let blocks = answer.get_mut("content").and_then(Value::as_array_mut);
            for block in blocks.into_iter().flatten() {
                if block.get("type").and_then(Value::as_str) != Some("tool_use") {
                    continue;
                }
                let name = block.get("name").and_then(Value::as_str).map(str::to_owned);
                let verdict = match name {
                    Some(n) => judge(&n, block.get("input"))?,
                    None => None,
                };
                match verdict {
                    Some(note) => *block = serde_json::json!({"type": "text", "text": note}),
                    None => any_left = true,
                }
            }
            if rewritten > 0 && !any_left {
                if let Some(o) = answer.as_object_mut() {
                    o.insert("stop_reason".into(), Value::from("end_turn"));
                }
            }
        }
        Endpoint::Responses => {
            let items = answer.get_mut("output").and_then(Value::as_array_mut);
            for item in items.into_iter().flatten() {
                if item.get("type").and_then(Value::as_str) != Some("function_call") {
                    continue;
                }
                let name = item.get("name").and_then(Value::as_str).map(str::to_owned);
                let verdict = match name {
                    Some(n) => judge(&n, item.get("arguments"))?,
                    None => None,
                };
                if let Some(note) = verdict {
                    let id = item.get("id").cloned().unwrap_or(Value::Null);
                    *item = serde_json::json!({
                        "type": "message", "id": id, "status": "completed", "role": "assistant",
                        "content": [{"type": "output_text", "text": note, "annotations": []}],
                    });
                }
            }
        }
        _ => {}
    }
    Ok(rewritten)
}

/// One tool call of a streamed answer, as its pieces have arrived.
#[derive(Debug, Default)]
struct StreamedCall {
    index: u64,
    name: String,
    arguments: String,
    /// Its name was judged.
    named: bool,
    /// Its whole arguments were judged.
    whole: bool,
}

/// The tool calls a streamed answer has made so far, judged as soon as their name, and
/// (when a rule constrains arguments) their whole arguments, are known. An event holding a
/// call's pieces is released only after the guardrails have seen it (`GuardedStream`), so a
/// refused call never reaches the client.
#[derive(Debug, Default)]
pub(crate) struct StreamedCalls {
    calls: Vec<StreamedCall>,
}

impl StreamedCalls {
    fn call(&mut self, index: u64) -> &mut StreamedCall {
        let at = match self.calls.iter().position(|c| c.index == index) {
            Some(at) => at,
            None => {
                self.calls.push(StreamedCall {
                    index,
                    ..StreamedCall::default()
                });
                self.calls.len() - 1
            }
        };
        &mut self.calls[at]
    }

    /// Note the tool-call pieces of one event's data.
    pub(crate) fn observe(&mut self, endpoint: Endpoint, v: &Value) {
        let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or("").to_owned();
        let index = |v: Option<&Value>| v.and_then(Value::as_u64).unwrap_or(0);
        match endpoint {
            Endpoint::ChatCompletions => {
                let choices = v.get("choices").and_then(Value::as_array);
                for c in choices.into_iter().flatten() {
                    let calls = c
                        .get("delta")
                        .and_then(|d| d.get("tool_calls"))
                        .and_then(Value::as_array);
                    for piece in calls.into_iter().flatten() {
                        let call = self.call(index(piece.get("index")));
                        let f = piece.get("function");
                        call.name.push_str(&text(f.and_then(|f| f.get("name"))));
                        call.arguments
                            .push_str(&text(f.and_then(|f| f.get("arguments"))));
                    }
                }
            }
            Endpoint::Messages => match v.get("type").and_then(Value::as_str) {
                Some("content_block_start") => {
                    let block = v.get("content_block");
                    if block.and_then(|b| b.get("type")).and_then(Value::as_str) == Some("tool_use")
                    {
                        let call = self.call(index(v.get("index")));
                        call.name = text(block.and_then(|b| b.get("name")));
                    }
                }
                Some("content_block_delta") => {
                    let delta = v.get("delta");
                    if delta.and_then(|d| d.get("type")).and_then(Value::as_str)
                        == Some("input_json_delta")
                    {
                        let i = index(v.get("index"));
                        if self.calls.iter().any(|c| c.index == i) {
                            self.call(i)
                                .arguments
                                .push_str(&text(delta.and_then(|d| d.get("partial_json"))));
                        }
                    }
                }
                _ => {}
            },
            Endpoint::Responses => match v.get("type").and_then(Value::as_str) {
                Some("response.output_item.added") => {
                    let item = v.get("item");
                    if item.and_then(|i| i.get("type")).and_then(Value::as_str)
                        == Some("function_call")
                    {
                        let call = self.call(index(v.get("output_index")));
                        call.name = text(item.and_then(|i| i.get("name")));
                        call.arguments = text(item.and_then(|i| i.get("arguments")));
                    }
                }
                Some("response.function_call_arguments.delta") => {
                    let i = index(v.get("output_index"));
                    if self.calls.iter().any(|c| c.index == i) {
                        self.call(i).arguments.push_str(&text(v.get("delta")));
                    }
                }
                _ => {}
            },
            _ => {}
        }
    }

    /// Judge what became known: each call's name once it has one, its arguments once they
    /// are whole JSON (only when `policy` constrains arguments). At the `end` of the stream,
    /// arguments that never became JSON are judged as absent.
    pub(crate) fn judge(&mut self, policy: &ToolPolicy, end: bool) -> Result<(), Denial> {
        for c in &mut self.calls {
            if c.name.is_empty() {
                continue;
            }
            if !c.named {
                policy.decide(&c.name, None)?;
                c.named = true;
            }
            if c.whole || !policy.checks_arguments() {
                continue;
            }
            let text = match c.arguments.trim() {
                // Nothing yet: the arguments may still come (an empty call is `{}` at the end).
                "" if !end => continue,
                "" => "{}",
                _ => &c.arguments,
            };
            match serde_json::from_str::<Value>(text) {
                Ok(args) if args.is_object() => {
                    policy.decide(&c.name, Some(&args))?;
                    c.whole = true;
                }
                _ if end => c.whole = true,
                _ => {}
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use sluice_guardrails::tools::RuleSettings;
    use sluice_guardrails::{Decision, ToolSettings};

    fn policy(on: OnDisallowed) -> ToolPolicy {
        ToolPolicy::new(&ToolSettings {
            rules: vec![
                RuleSettings {
                    id: "weather".into(),
                    tool_name: "get_weather".into(),
                    decision: Decision::Allow,
                    params: vec![],
                },
                RuleSettings {
                    id: "mail".into(),
                    tool_name: "send_email".into(),
                    decision: Decision::Allow,
                    params: vec![("to[]".into(), r"^.+@corp\.example$".into())],
                },
            ],
            default: Some(Decision::Deny),
            on_disallowed: on,
            template: None,
        })
        .unwrap()
    }

    fn tool(name: &str) -> Value {
        json!({"type": "function", "function": {"name": name, "parameters": {}}})
    }

    #[test]
    fn request_tools_are_refused_or_stripped() {
        let mut body = json!({"tools": [tool("get_weather"), tool("Read")]});
        let d = request(&policy(OnDisallowed::Block), &mut body).unwrap_err();
        assert_eq!(d.tool, "Read");

        let rewrite = policy(OnDisallowed::Rewrite);
        let mut body = json!({"tools": [tool("get_weather"), tool("Read")],
            "tool_choice": {"type": "function", "function": {"name": "Read"}}});
        assert_eq!(request(&rewrite, &mut body), Ok(1));
        assert_eq!(body["tools"].as_array().unwrap().len(), 1);
        assert!(body.get("tool_choice").is_none(), "{body}");

        let mut body =
            json!({"tools": [{"name": "Read", "input_schema": {}}], "tool_choice": "auto"});
        assert_eq!(request(&rewrite, &mut body), Ok(1));
        assert!(body.get("tools").is_none() && body.get("tool_choice").is_none());

        let mut fine = json!({"tools": [tool("get_weather")]});
        assert_eq!(request(&rewrite, &mut fine), Ok(0));
    }

    #[test]
    fn chat_answers_are_refused_or_rewritten() {
        let answer = || {
            json!({"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": null, "tool_calls": [
                    {"id": "a", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}},
                    {"id": "b", "type": "function", "function": {"name": "send_email",
                        "arguments": "{\"to\": [\"x@evil.example\"]}"}}]}}]})
        };
        let mut a = answer();
        let d = super::answer(
            &policy(OnDisallowed::Block),
            Endpoint::ChatCompletions,
            &mut a,
        )
        .unwrap_err();
        assert!(d.message.contains("'to[]'"), "{}", d.message);
        let mut a = answer();
        let n = super::answer(
            &policy(OnDisallowed::Rewrite),
            Endpoint::ChatCompletions,
            &mut a,
        );
        assert_eq!(n, Ok(1));
        let m = &a["choices"][0]["message"];
        assert_eq!(m["tool_calls"].as_array().unwrap().len(), 1);
        assert!(m["content"].as_str().unwrap().contains("send_email"), "{m}");
    }

    #[test]
    fn anthropic_and_responses_answers_are_rewritten() {
        let rewrite = policy(OnDisallowed::Rewrite);
        let mut a = json!({"stop_reason": "tool_use", "content": [
            {"type": "tool_use", "id": "t", "name": "Read", "input": {}}]});
        assert_eq!(answer(&rewrite, Endpoint::Messages, &mut a), Ok(1));
        assert_eq!(a["content"][0]["type"], "text");
        assert_eq!(a["stop_reason"], "end_turn");
        let mut r = json!({"output": [{"type": "function_call", "id": "f", "name": "Read",
            "arguments": "{}", "call_id": "c"}]});
        assert_eq!(answer(&rewrite, Endpoint::Responses, &mut r), Ok(1));
        assert_eq!(r["output"][0]["type"], "message");
    }

    #[test]
    fn streamed_calls_are_judged_by_name_then_by_whole_arguments() {
        let p = policy(OnDisallowed::Block);
        let mut calls = StreamedCalls::default();
        let chunk = |name: Option<&str>, args: &str| {
            let mut f = json!({"arguments": args});
            if let Some(n) = name {
                f["name"] = json!(n);
            }
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": f}]}}]})
        };
        calls.observe(Endpoint::ChatCompletions, &chunk(Some("send_email"), ""));
        assert_eq!(calls.judge(&p, false), Ok(()));
        calls.observe(Endpoint::ChatCompletions, &chunk(None, "{\"to\": [\"x@ev"));
        assert_eq!(calls.judge(&p, false), Ok(()), "not whole yet");
        calls.observe(Endpoint::ChatCompletions, &chunk(None, "il.example\"]}"));
        assert!(calls.judge(&p, false).is_err(), "whole and refused");

        let mut anthropic = StreamedCalls::default();
        anthropic.observe(
            Endpoint::Messages,
            &json!({"type": "content_block_start", "index": 1,
                "content_block": {"type": "tool_use", "id": "t", "name": "Read", "input": {}}}),
        );
        let d = anthropic.judge(&p, false).unwrap_err();
        assert_eq!(d.tool, "Read");

        let mut responses = StreamedCalls::default();
        responses.observe(
            Endpoint::Responses,
            &json!({"type": "response.output_item.added", "output_index": 0,
                "item": {"type": "function_call", "name": "get_weather", "arguments": ""}}),
        );
        assert_eq!(responses.judge(&p, true), Ok(()));
    }
}
