//! A whole answer told again as the stream the same request with `stream: true` gets, and a
//! stream put back together as the whole answer: the response cache serves a stored answer to
//! a request of the other shape with them, so that a question asked once without `stream` is
//! a hit for a client that streams it, and the reverse.
//!
//! The stream carries the whole answer's values as they are (ids, `created`, model, every
//! choice, tool calls, usage), with each text in one delta: a client that assembles the
//! stream gets the whole answer back. Per endpoint:
//!
//! - Chat Completions: per choice a chunk with the message as its delta and one with its
//!   `finish_reason`; the usage chunk when the client asked for it (`include_usage`); `[DONE]`.
//! - Completions: one chunk per choice, the usage chunk when asked, `[DONE]`.
//! - Responses: `response.created`, `.in_progress`, each output item added, its text or
//!   arguments as one delta and done (an `mcp_list_tools` or `mcp_call` item with its own
//!   `response.mcp_*` events), then the final event of the response's status.
//! - Messages: `message_start`, each content block started, given as one delta and stopped,
//!   `message_delta` with the stop reason and usage, `message_stop`.

use bytes::Bytes;
use serde_json::{json, Map, Value};
use sluice_core::endpoint::Endpoint;
use sluice_core::usage::Usage;

use crate::assemble::stream_answer;

/// The stream `endpoint`'s whole answer `whole` makes; `include_usage` adds Chat Completions'
/// and Completions' usage chunk. `None` when the answer is not the JSON object that endpoint
/// answers with.
pub fn stream_of(endpoint: Endpoint, whole: &[u8], include_usage: bool) -> Option<Vec<u8>> {
    let Ok(Value::Object(answer)) = serde_json::from_slice::<Value>(whole) else {
        return None;
    };
    let mut out = Vec::with_capacity(whole.len() * 2 + 256);
    match endpoint {
        Endpoint::ChatCompletions => chat(answer, include_usage, &mut out)?,
        Endpoint::Completions => completions(answer, include_usage, &mut out)?,
        Endpoint::Responses => responses(answer, &mut out)?,
        Endpoint::Messages => messages(answer, &mut out)?,
        _ => return None,
    }
    Some(out)
}

/// The whole answer a stream of `endpoint` makes. `usage` stands in for a Chat Completions or
/// Completions stream's usage chunk when the client did not ask for one.
pub fn whole_of(endpoint: Endpoint, stream: &Bytes, usage: Option<&Usage>) -> Option<Vec<u8>> {
    let mut answer = stream_answer(std::slice::from_ref(stream))?;
    let kind_fits = match endpoint {
        Endpoint::ChatCompletions => answer["object"] == "chat.completion",
        Endpoint::Completions => answer["object"] == "text_completion",
        Endpoint::Responses => answer["object"] == "response",
        Endpoint::Messages => answer["type"] == "message",
        _ => false,
    };
    if !kind_fits {
        return None;
    }
    if let (Some(u), Some(obj)) = (usage, answer.as_object_mut()) {
        if matches!(endpoint, Endpoint::ChatCompletions | Endpoint::Completions)
            && obj.get("usage").is_none_or(Value::is_null)
        {
            obj.insert("usage".into(), crate::openai::usage_json(u));
        }
    }
    serde_json::to_vec(&answer).ok()
}

fn data(v: &Value, out: &mut Vec<u8>) {
    out.extend_from_slice(b"data: ");
    let _ = serde_json::to_writer(&mut *out, v);
    out.extend_from_slice(b"\n\n");
}

fn named(name: &str, v: &Value, out: &mut Vec<u8>) {
    out.extend_from_slice(b"event: ");
    out.extend_from_slice(name.as_bytes());
    out.push(b'\n');
    data(v, out);
}

/// The members every chunk repeats: the answer's own, with the chunk's `object`.
fn chunk_head(answer: &Map<String, Value>, object: &str) -> Map<String, Value> {
    let mut head = Map::new();
    for k in [
        "id",
        "created",
        "model",
        "system_fingerprint",
        "service_tier",
    ] {
        if let Some(v) = answer.get(k).filter(|v| !v.is_null()) {
            head.insert(k.into(), v.clone());
        }
    }
    head.insert("object".into(), object.into());
    head
}

fn chunk(head: &Map<String, Value>, choices: Value, out: &mut Vec<u8>) {
    let mut c = head.clone();
    c.insert("choices".into(), choices);
    data(&Value::Object(c), out);
}

fn usage_chunk(head: &Map<String, Value>, usage: Option<&Value>, out: &mut Vec<u8>) {
    let mut c = head.clone();
    c.insert("choices".into(), json!([]));
    c.insert("usage".into(), usage.cloned().unwrap_or(Value::Null));
    data(&Value::Object(c), out);
}

fn chat(answer: Map<String, Value>, include_usage: bool, out: &mut Vec<u8>) -> Option<()> {
    let head = chunk_head(&answer, "chat.completion.chunk");
    for choice in answer.get("choices")?.as_array()? {
        let index = choice.get("index").cloned().unwrap_or(json!(0));
        let mut delta = choice
            .get("message")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        if let Some(Value::Array(calls)) = delta.get_mut("tool_calls") {
            // A delta's tool calls say which call they continue.
            for (i, call) in calls.iter_mut().enumerate() {
                if let Some(c) = call.as_object_mut() {
                    c.insert("index".into(), i.into());
                }
            }
        }
        delta.retain(|_, v| !v.is_null());
        let logprobs = choice.get("logprobs").cloned().unwrap_or(Value::Null);
        chunk(
            &head,
            json!([{"index": index, "delta": delta, "logprobs": logprobs, "finish_reason": null}]),
            out,
        );
        let finish = choice.get("finish_reason").cloned().unwrap_or(Value::Null);
        chunk(
            &head,
            json!([{"index": index, "delta": {}, "logprobs": null, "finish_reason": finish}]),
            out,
        );
    }
    if include_usage {
        usage_chunk(&head, answer.get("usage"), out);
    }
    out.extend_from_slice(b"data: [DONE]\n\n");
    Some(())
}

fn completions(answer: Map<String, Value>, include_usage: bool, out: &mut Vec<u8>) -> Option<()> {
    let head = chunk_head(&answer, "text_completion");
    for choice in answer.get("choices")?.as_array()? {
        chunk(&head, json!([choice]), out);
    }
    if include_usage {
        usage_chunk(&head, answer.get("usage"), out);
    }
    out.extend_from_slice(b"data: [DONE]\n\n");
    Some(())
}

/// Numbers Responses events in order, as OpenAI's stream does.
struct Events<'o> {
    seq: u64,
    out: &'o mut Vec<u8>,
}

impl Events<'_> {
    fn send(&mut self, kind: &str, mut v: Value) {
        v["type"] = json!(kind);
        v["sequence_number"] = json!(self.seq);
        self.seq += 1;
        named(kind, &v, self.out);
    }
}

fn responses(answer: Map<String, Value>, out: &mut Vec<u8>) -> Option<()> {
    let output = answer.get("output")?.as_array()?.clone();
    let mut begun = answer.clone();
    begun.insert("status".into(), "in_progress".into());
    begun.insert("output".into(), json!([]));
    begun.insert("usage".into(), Value::Null);
    let begun = Value::Object(begun);
    let mut ev = Events { seq: 0, out };
    ev.send("response.created", json!({ "response": begun }));
    ev.send("response.in_progress", json!({ "response": begun }));
    for (oi, item) in output.iter().enumerate() {
        let id = item.get("id").cloned().unwrap_or(Value::Null);
        let mut added = item.clone();
        match item.get("type").and_then(Value::as_str) {
            Some("message") => {
                added["content"] = json!([]);
                added["status"] = json!("in_progress");
                ev.send(
                    "response.output_item.added",
                    json!({"output_index": oi, "item": added}),
                );
                let parts = item.get("content").and_then(Value::as_array);
                for (ci, part) in parts.into_iter().flatten().enumerate() {
                    let at = json!({"item_id": id, "output_index": oi, "content_index": ci});
                    let with = |extra: Value| {
                        let mut v = at.clone();
                        if let (Some(v), Value::Object(extra)) = (v.as_object_mut(), extra) {
                            v.extend(extra);
                        }
                        v
                    };
                    let (kind, text) = match part.get("type").and_then(Value::as_str) {
                        Some("refusal") => ("refusal", part.get("refusal")),
                        _ => ("output_text", part.get("text")),
                    };
                    let text = text.cloned().unwrap_or(json!(""));
                    let mut empty = part.clone();
                    empty[kind_field(kind)] = json!("");
                    ev.send(
                        "response.content_part.added",
                        with(json!({ "part": empty })),
                    );
                    if kind == "refusal" {
                        ev.send("response.refusal.delta", with(json!({ "delta": text })));
                        ev.send("response.refusal.done", with(json!({ "refusal": text })));
                    } else {
                        let logprobs = part.get("logprobs").cloned().unwrap_or(json!([]));
                        ev.send(
                            "response.output_text.delta",
                            with(json!({"delta": text, "logprobs": logprobs})),
                        );
                        ev.send(
                            "response.output_text.done",
                            with(json!({"text": text, "logprobs": logprobs})),
                        );
                    }
                    ev.send("response.content_part.done", with(json!({ "part": part })));
                }
            }
            Some("function_call") => {
                added["arguments"] = json!("");
                added["status"] = json!("in_progress");
                ev.send(
                    "response.output_item.added",
                    json!({"output_index": oi, "item": added}),
                );
                let args = item.get("arguments").cloned().unwrap_or(json!(""));
                ev.send(
                    "response.function_call_arguments.delta",
                    json!({"item_id": id, "output_index": oi, "delta": args}),
                );
                ev.send(
                    "response.function_call_arguments.done",
                    json!({"item_id": id, "output_index": oi, "arguments": args}),
                );
            }
            Some("mcp_list_tools") => mcp_list_tools(item, oi, &mut ev),
            Some("mcp_call") => mcp_call(item, oi, &mut ev),
            _ => ev.send(
                "response.output_item.added",
                json!({"output_index": oi, "item": item}),
            ),
        }
        ev.send(
            "response.output_item.done",
            json!({"output_index": oi, "item": item}),
        );
    }
    let last = match answer.get("status").and_then(Value::as_str) {
        Some("incomplete") => "response.incomplete",
        Some("failed") => "response.failed",
        _ => "response.completed",
    };
    ev.send(last, json!({ "response": Value::Object(answer) }));
    Some(())
}

/// An `mcp_list_tools` item as OpenAI streams it: added without its tools, in progress, then
/// completed (or failed, when it carries an error).
fn mcp_list_tools(item: &Value, oi: usize, ev: &mut Events<'_>) {
    let mut added = item.clone();
    added["tools"] = json!([]);
    ev.send(
        "response.output_item.added",
        json!({"output_index": oi, "item": added}),
    );
    let at = json!({"item_id": item.get("id").cloned().unwrap_or(Value::Null), "output_index": oi});
    ev.send("response.mcp_list_tools.in_progress", at.clone());
    let failed = item.get("error").is_some_and(|e| !e.is_null());
    let last = if failed {
        "response.mcp_list_tools.failed"
    } else {
        "response.mcp_list_tools.completed"
    };
    ev.send(last, at);
}

/// An `mcp_call` item as OpenAI streams it: added in progress, its arguments as one delta and
/// done, the call in progress, then completed (or failed, when it carries an error).
fn mcp_call(item: &Value, oi: usize, ev: &mut Events<'_>) {
    let mut added = item.clone();
    added["arguments"] = json!("");
    added["output"] = Value::Null;
    added["error"] = Value::Null;
    added["status"] = json!("in_progress");
    ev.send(
        "response.output_item.added",
        json!({"output_index": oi, "item": added}),
    );
    let id = item.get("id").cloned().unwrap_or(Value::Null);
    let args = item.get("arguments").cloned().unwrap_or(json!(""));
    ev.send(
        "response.mcp_call_arguments.delta",
        json!({"item_id": id, "output_index": oi, "delta": args}),
    );
    ev.send(
        "response.mcp_call_arguments.done",
        json!({"item_id": id, "output_index": oi, "arguments": args}),
    );
    let at = json!({"item_id": id, "output_index": oi});
    ev.send("response.mcp_call.in_progress", at.clone());
    let failed = item.get("error").is_some_and(|e| !e.is_null());
    let last = if failed {
        "response.mcp_call.failed"
    } else {
        "response.mcp_call.completed"
    };
    ev.send(last, at);
}

fn kind_field(kind: &str) -> &'static str {
    if kind == "refusal" {
        "refusal"
    } else {
        "text"
    }
}

fn messages(answer: Map<String, Value>, out: &mut Vec<u8>) -> Option<()> {
    let content = answer.get("content")?.as_array()?.clone();
    let mut start = answer.clone();
    start.insert("content".into(), json!([]));
    start.insert("stop_reason".into(), Value::Null);
    start.insert("stop_sequence".into(), Value::Null);
    let usage = answer.get("usage").cloned().unwrap_or(json!({}));
    let mut begun_usage = usage.clone();
    if let Some(u) = begun_usage.as_object_mut() {
        u.insert("output_tokens".into(), json!(0));
    }
    start.insert("usage".into(), begun_usage);
    named(
        "message_start",
        &json!({"type": "message_start", "message": start}),
        out,
    );
    for (i, block) in content.iter().enumerate() {
        let kind = block.get("type").and_then(Value::as_str).unwrap_or("");
        let (empty, delta) = match kind {
            "text" => (
                json!({"type": "text", "text": ""}),
                Some(json!({"type": "text_delta", "text": block.get("text")})),
            ),
            "thinking" => (
                json!({"type": "thinking", "thinking": "", "signature": ""}),
                Some(json!({"type": "thinking_delta", "thinking": block.get("thinking")})),
            ),
            "tool_use" => {
                let mut empty = block.clone();
                empty["input"] = json!({});
                let input = block.get("input").cloned().unwrap_or(json!({}));
                (
                    empty,
                    Some(json!({"type": "input_json_delta", "partial_json": input.to_string()})),
                )
            }
            // Server tool blocks and redacted thinking arrive whole in their start event.
            _ => (block.clone(), None),
        };
        named(
            "content_block_start",
            &json!({"type": "content_block_start", "index": i, "content_block": empty}),
            out,
        );
        if let Some(d) = delta {
            named(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": i, "delta": d}),
                out,
            );
        }
        if let Some(sig) = block.get("signature").filter(|_| kind == "thinking") {
            named(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": i,
                    "delta": {"type": "signature_delta", "signature": sig}}),
                out,
            );
        }
        named(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": i}),
            out,
        );
    }
    named(
        "message_delta",
        &json!({"type": "message_delta",
            "delta": {"stop_reason": answer.get("stop_reason"),
                      "stop_sequence": answer.get("stop_sequence")},
            "usage": usage}),
        out,
    );
    named("message_stop", &json!({"type": "message_stop"}), out);
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Told as a stream and put back together, an answer is itself again.
    fn round_trip(endpoint: Endpoint, whole: Value, include_usage: bool) {
        let bytes = serde_json::to_vec(&whole).unwrap();
        let stream = stream_of(endpoint, &bytes, include_usage).unwrap();
        let back = whole_of(endpoint, &Bytes::from(stream), None).unwrap();
        let back: Value = serde_json::from_slice(&back).unwrap();
        assert_eq!(back, whole, "{endpoint:?}");
    }

    #[test]
    fn chat_with_two_choices_tool_calls_and_usage() {
        round_trip(
            Endpoint::ChatCompletions,
            json!({
                "id": "chatcmpl-1", "object": "chat.completion", "created": 7, "model": "m",
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": "Hi there"},
                     "finish_reason": "stop"},
                    {"index": 1, "message": {"role": "assistant", "content": null,
                        "tool_calls": [{"id": "call_1", "type": "function",
                            "function": {"name": "f", "arguments": "{\"a\":1}"}}]},
                     "finish_reason": "tool_calls"}
                ],
                "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}
            }),
            true,
        );
    }

    #[test]
    fn chat_without_the_usage_chunk_takes_the_stored_usage() {
        let whole = json!({
            "id": "c", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "x"},
                "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}
        });
        let stream = stream_of(
            Endpoint::ChatCompletions,
            &serde_json::to_vec(&whole).unwrap(),
            false,
        )
        .unwrap();
        assert!(!String::from_utf8_lossy(&stream).contains("\"usage\""));
        assert!(stream.ends_with(b"data: [DONE]\n\n"));
        let usage = Usage {
            prompt_tokens: 1,
            completion_tokens: 2,
            ..Usage::default()
        };
        let back = whole_of(
            Endpoint::ChatCompletions,
            &Bytes::from(stream),
            Some(&usage),
        )
        .unwrap();
        let back: Value = serde_json::from_slice(&back).unwrap();
        assert_eq!(back["usage"]["completion_tokens"], 2);
        assert_eq!(back["choices"][0]["message"]["content"], "x");
    }

    #[test]
    fn mcp_items_are_told_with_their_own_events() {
        let whole = json!({"id": "resp_1", "object": "response", "created_at": 3,
            "status": "completed", "model": "m", "output": [
                {"type": "mcp_list_tools", "id": "mcpl_1", "server_label": "s",
                 "tools": [{"name": "add", "input_schema": {}}], "error": null},
                {"type": "mcp_call", "id": "mcp_1", "server_label": "s", "name": "add",
                 "arguments": "{\"a\":1}", "output": "1", "error": null, "status": "completed"},
                {"type": "mcp_call", "id": "mcp_2", "server_label": "s", "name": "add",
                 "arguments": "{}", "output": null, "error": "no", "status": "failed"}],
            "usage": {"input_tokens": 2, "output_tokens": 1, "total_tokens": 3}});
        round_trip(Endpoint::Responses, whole.clone(), false);
        let stream = stream_of(
            Endpoint::Responses,
            &serde_json::to_vec(&whole).unwrap(),
            false,
        )
        .unwrap();
        let events: Vec<Value> = String::from_utf8(stream)
            .unwrap()
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .map(|d| serde_json::from_str(d).unwrap())
            .collect();
        let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "response.created",
                "response.in_progress",
                "response.output_item.added",
                "response.mcp_list_tools.in_progress",
                "response.mcp_list_tools.completed",
                "response.output_item.done",
                "response.output_item.added",
                "response.mcp_call_arguments.delta",
                "response.mcp_call_arguments.done",
                "response.mcp_call.in_progress",
                "response.mcp_call.completed",
                "response.output_item.done",
                "response.output_item.added",
                "response.mcp_call_arguments.delta",
                "response.mcp_call_arguments.done",
                "response.mcp_call.in_progress",
                "response.mcp_call.failed",
                "response.output_item.done",
                "response.completed",
            ]
        );
        assert_eq!(events[7]["delta"], "{\"a\":1}");
        assert_eq!(events[7]["item_id"], "mcp_1");
        assert_eq!(events[10]["output_index"], 1);
        for (n, e) in events.iter().enumerate() {
            assert_eq!(e["sequence_number"], n);
        }
    }

    #[test]
    fn completions_responses_and_messages() {
        round_trip(
            Endpoint::Completions,
            json!({"id": "cmpl", "object": "text_completion", "created": 2, "model": "m",
                "choices": [{"index": 0, "text": "abc", "finish_reason": "length"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 3, "total_tokens": 4}}),
            true,
        );
        round_trip(
            Endpoint::Responses,
            json!({"id": "resp_1", "object": "response", "created_at": 3, "status": "completed",
                "model": "m", "output": [
                    {"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
                     "content": [{"type": "output_text", "text": "hello", "annotations": [], "logprobs": []}]},
                    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f",
                     "arguments": "{}", "status": "completed"}],
                "usage": {"input_tokens": 2, "output_tokens": 1, "total_tokens": 3}}),
            false,
        );
        round_trip(
            Endpoint::Messages,
            json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "claude",
                "content": [
                    {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                    {"type": "text", "text": "Hello"},
                    {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"q": "x"}}],
                "stop_reason": "tool_use", "stop_sequence": null,
                "usage": {"input_tokens": 5, "output_tokens": 6,
                          "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}),
            false,
        );
    }

    #[test]
    fn what_is_not_an_answer_is_not_replayed() {
        assert!(stream_of(Endpoint::ChatCompletions, b"[1]", true).is_none());
        assert!(stream_of(Endpoint::Embeddings, b"{}", true).is_none());
        assert!(stream_of(Endpoint::ChatCompletions, b"{\"x\":1}", true).is_none());
        assert!(whole_of(
            Endpoint::Messages,
            &Bytes::from_static(b"data: [DONE]\n\n"),
            None
        )
        .is_none());
    }
}
