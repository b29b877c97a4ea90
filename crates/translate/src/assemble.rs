//! A streamed answer, put back together for content logging: the frames the relay kept
//! (untouched, as the upstream sent them in the client's format) become the object the same
//! request would have got without `stream`, so a sink logs streamed and whole answers alike.
//! Telemetry runs it on the callbacks' thread, once per record, never on the request path;
//! the mock's tests check every stream it writes against it.
//!
//! - Chat Completions chunks: one choice per index with the joined `content` (and
//!   `reasoning_content`, `refusal`), `tool_calls` assembled by index, `finish_reason`, the
//!   usage chunk's `usage`. Legacy Completions chunks join `text` the same way.
//! - Responses API: the final event's (`response.completed`, `.incomplete`, `.failed`)
//!   `response`.
//! - Anthropic Messages: `message_start`'s message with its content blocks filled from the
//!   deltas (text, thinking, tool input JSON), `message_delta`'s stop reason and usage.

use std::collections::BTreeMap;

use bytes::Bytes;
use serde_json::{Map, Value};

use crate::sse::events;
use crate::stream::data_of;

/// The answer `frames` make, or `None` when they hold no event sluice knows.
pub fn stream_answer(frames: &[Bytes]) -> Option<Value> {
    let mut buf = Vec::with_capacity(frames.iter().map(Bytes::len).sum());
    for f in frames {
        buf.extend_from_slice(f);
    }
    let mut answer = Answer::None;
    for (start, end) in events(&buf) {
        let Some(data) = data_of(&buf[start..end]) else {
            continue;
        };
        // `[DONE]` and a truncated last event do not parse: skipped.
        let Ok(Value::Object(event)) = serde_json::from_slice::<Value>(&data) else {
            continue;
        };
        answer.feed(event);
    }
    answer.finish()
}

/// What the events so far add up to.
enum Answer {
    None,
    Chat(Chat),
    /// The latest `response` object a Responses stream carried.
    Responses(Value),
    Messages(Messages),
}

impl Answer {
    fn feed(&mut self, event: Map<String, Value>) {
        let kind = event.get("type").and_then(Value::as_str).unwrap_or("");
        let object = event.get("object").and_then(Value::as_str).unwrap_or("");
        match self {
            Self::Chat(c) => c.feed(event),
            Self::Responses(r) => {
                if let Some(v) = event.get("response") {
                    *r = v.clone();
                }
            }
            Self::Messages(m) => m.feed(event),
            Self::None if matches!(object, "chat.completion.chunk" | "text_completion") => {
                let mut c = Chat::default();
                c.feed(event);
                *self = Self::Chat(c);
            }
            Self::None if kind.starts_with("response.") => {
                if let Some(v) = event.get("response") {
                    *self = Self::Responses(v.clone());
                }
            }
            Self::None if kind == "message_start" => {
                let mut m = Messages::default();
                m.feed(event);
                *self = Self::Messages(m);
            }
            Self::None => {}
        }
    }

    fn finish(self) -> Option<Value> {
        match self {
            Self::None => None,
            Self::Chat(c) => Some(c.finish()),
            Self::Responses(r) => Some(r),
            Self::Messages(m) => Some(m.finish()),
        }
    }
}

/// Append `s` to the string at `key` (made if missing).
fn append(obj: &mut Map<String, Value>, key: &str, s: &str) {
    match obj.get_mut(key) {
        Some(Value::String(have)) => have.push_str(s),
        _ => {
            obj.insert(key.to_owned(), Value::String(s.to_owned()));
        }
    }
}

/// Chat Completions (or legacy Completions) chunks.
#[derive(Default)]
struct Chat {
    /// `id`, `object`, `created`, `model`, ... of the first chunk.
    head: Map<String, Value>,
    choices: BTreeMap<u64, Choice>,
    usage: Option<Value>,
    text_completion: bool,
}

#[derive(Default)]
struct Choice {
    /// The assembled `message` (chat) fields.
    message: Map<String, Value>,
    tool_calls: BTreeMap<u64, Map<String, Value>>,
    /// Legacy Completions `text`.
    text: String,
    finish_reason: Value,
}

impl Chat {
    fn feed(&mut self, mut event: Map<String, Value>) {
        if let Some(u) = event.remove("usage").filter(|u| !u.is_null()) {
            self.usage = Some(u);
        }
        let choices = event.remove("choices");
        if self.head.is_empty() {
            self.text_completion =
                event.get("object").and_then(Value::as_str) == Some("text_completion");
            self.head = event;
        }
        let Some(Value::Array(choices)) = choices else {
            return;
        };
        for c in choices {
            let index = c.get("index").and_then(Value::as_u64).unwrap_or(0);
            let choice = self.choices.entry(index).or_default();
            if let Some(r) = c.get("finish_reason").filter(|r| !r.is_null()) {
                choice.finish_reason = r.clone();
            }
            if let Some(t) = c.get("text").and_then(Value::as_str) {
                choice.text.push_str(t);
            }
            let Some(Value::Object(delta)) = c.get("delta") else {
                continue;
            };
            for (k, v) in delta {
                match (k.as_str(), v) {
                    ("tool_calls", Value::Array(calls)) => {
                        for call in calls {
                            choice.tool_call(call);
                        }
                    }
                    (_, Value::String(s)) if k != "role" => append(&mut choice.message, k, s),
                    (_, Value::Null) => {}
                    _ => {
                        choice.message.insert(k.clone(), v.clone());
                    }
                }
            }
        }
    }

    fn finish(self) -> Value {
        let Self {
            mut head,
            choices,
            usage,
            text_completion,
        } = self;
        let choices = choices
            .into_iter()
            .map(|(index, mut c)| {
                let finish = std::mem::take(&mut c.finish_reason);
                let mut out = Map::new();
                out.insert("index".into(), index.into());
                if text_completion {
                    out.insert("text".into(), c.text.into());
                } else {
                    out.insert("message".into(), c.into_message());
                }
                out.insert("finish_reason".into(), finish);
                out
            })
            .collect::<Vec<_>>();
        head.insert(
            "object".into(),
            if text_completion {
                "text_completion"
            } else {
                "chat.completion"
            }
            .into(),
        );
        head.insert(
            "choices".into(),
            Value::Array(choices.into_iter().map(Value::Object).collect()),
        );
        head.insert("usage".into(), usage.unwrap_or(Value::Null));
        Value::Object(head)
    }
}

impl Choice {
    fn tool_call(&mut self, call: &Value) {
        let index = call.get("index").and_then(Value::as_u64).unwrap_or(0);
        let slot = self.tool_calls.entry(index).or_default();
        for key in ["id", "type"] {
            if let Some(v) = call.get(key).filter(|v| !v.is_null()) {
                slot.insert(key.into(), v.clone());
            }
        }
        if let Some(Value::Object(f)) = call.get("function") {
            let function = slot
                .entry("function")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(function) = function {
                for (k, v) in f {
                    if let Value::String(s) = v {
                        append(function, k, s);
                    }
                }
            }
        }
    }

    fn into_message(self) -> Value {
        let Self {
            mut message,
            tool_calls,
            ..
        } = self;
        message.entry("role").or_insert_with(|| "assistant".into());
        let empty = message
            .get("content")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty);
        if !tool_calls.is_empty() {
            if empty {
                message.insert("content".into(), Value::Null);
            }
            message.insert(
                "tool_calls".into(),
                Value::Array(tool_calls.into_values().map(Value::Object).collect()),
            );
        } else {
            message.entry("content").or_insert(Value::Null);
        }
        Value::Object(message)
    }
}

/// Anthropic Messages events.
#[derive(Default)]
struct Messages {
    message: Map<String, Value>,
    blocks: BTreeMap<u64, Map<String, Value>>,
    /// Tool input JSON, joined from `input_json_delta`s, parsed at the end.
    json: BTreeMap<u64, String>,
}

impl Messages {
    fn feed(&mut self, event: Map<String, Value>) {
        let index = event.get("index").and_then(Value::as_u64).unwrap_or(0);
        match event.get("type").and_then(Value::as_str).unwrap_or("") {
            "message_start" => {
                if let Some(Value::Object(m)) = event.get("message") {
                    self.message = m.clone();
                }
            }
            "content_block_start" => {
                if let Some(Value::Object(b)) = event.get("content_block") {
                    self.blocks.insert(index, b.clone());
                }
            }
            "content_block_delta" => {
                let Some(Value::Object(delta)) = event.get("delta") else {
                    return;
                };
                let block = self.blocks.entry(index).or_default();
                let text = |k: &str| delta.get(k).and_then(Value::as_str).unwrap_or("");
                match delta.get("type").and_then(Value::as_str).unwrap_or("") {
                    "text_delta" => append(block, "text", text("text")),
                    "thinking_delta" => append(block, "thinking", text("thinking")),
                    "signature_delta" => append(block, "signature", text("signature")),
                    "input_json_delta" => self
                        .json
                        .entry(index)
                        .or_default()
                        .push_str(text("partial_json")),
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(Value::Object(d)) = event.get("delta") {
                    for (k, v) in d {
                        self.message.insert(k.clone(), v.clone());
                    }
                }
                if let Some(Value::Object(u)) = event.get("usage") {
                    let usage = self
                        .message
                        .entry("usage")
                        .or_insert_with(|| Value::Object(Map::new()));
                    if let Value::Object(usage) = usage {
                        for (k, v) in u {
                            usage.insert(k.clone(), v.clone());
                        }
                    }
                }
            }
            _ => {}
        }
    }

    fn finish(self) -> Value {
        let Self {
            mut message,
            mut blocks,
            json,
        } = self;
        for (index, text) in json {
            let input = serde_json::from_str(&text).unwrap_or(Value::String(text));
            blocks
                .entry(index)
                .or_default()
                .insert("input".into(), input);
        }
        message.insert(
            "content".into(),
            Value::Array(blocks.into_values().map(Value::Object).collect()),
        );
        Value::Object(message)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use sluice_core::record::{Content, MAX_STREAM_KEPT};

    fn fixture(path: &str) -> String {
        std::fs::read_to_string(format!(
            "{}/../../tests/fixtures/{path}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap()
    }

    /// The text cut into `n`-byte frames, as a network may deliver it (events split anywhere).
    fn frames(text: &str, n: usize) -> Vec<Bytes> {
        text.as_bytes()
            .chunks(n)
            .map(Bytes::copy_from_slice)
            .collect()
    }

    /// Every `data:` JSON of an SSE text, parsed independently of the code under test.
    fn datas(text: &str) -> Vec<Value> {
        text.lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter_map(|d| serde_json::from_str(d).ok())
            .collect()
    }

    #[test]
    fn chat_chunks_become_one_completion_with_tool_calls_by_index() {
        let sse = fixture("openai/stream_parallel_tools.sse");
        for n in [7, 4096] {
            let got = stream_answer(&frames(&sse, n)).unwrap();
            assert_eq!(got["object"], "chat.completion");
            assert_eq!(got["id"], "chatcmpl-AbC");
            let choice = &got["choices"][0];
            assert_eq!(choice["finish_reason"], "tool_calls");
            assert_eq!(choice["message"]["role"], "assistant");
            assert!(choice["message"]["content"].is_null());
            let calls = choice["message"]["tool_calls"].as_array().unwrap();
            let ids: Vec<&str> = calls.iter().map(|c| c["id"].as_str().unwrap()).collect();
            assert_eq!(ids, ["call_aaa", "call_bbb"]);
            // Each call's arguments are the concatenation of its deltas, in order.
            for (i, call) in calls.iter().enumerate() {
                let want: String = datas(&sse)
                    .iter()
                    .flat_map(|d| d["choices"].as_array().cloned().unwrap_or_default())
                    .flat_map(|c| {
                        c["delta"]["tool_calls"]
                            .as_array()
                            .cloned()
                            .unwrap_or_default()
                    })
                    .filter(|t| t["index"] == json!(i))
                    .filter_map(|t| t["function"]["arguments"].as_str().map(str::to_owned))
                    .collect();
                assert_eq!(call["function"]["arguments"], want.as_str());
                assert_eq!(call["function"]["name"], "get_weather");
                let args: Value =
                    serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
                assert!(args["location"].is_string());
            }
            let usage = datas(&sse)
                .into_iter()
                .rev()
                .find(|d| !d["usage"].is_null());
            assert_eq!(got["usage"], usage.unwrap()["usage"]);
        }
    }

    #[test]
    fn anthropic_events_become_one_message_with_filled_blocks() {
        let sse = fixture("anthropic/stream_tool_use.sse");
        let got = stream_answer(&frames(&sse, 13)).unwrap();
        let events = datas(&sse);
        assert_eq!(got["id"], events[0]["message"]["id"]);
        assert_eq!(got["stop_reason"], "tool_use");
        let delta = events
            .iter()
            .find(|e| e["type"] == "message_delta")
            .unwrap();
        assert_eq!(
            got["usage"]["output_tokens"],
            delta["usage"]["output_tokens"]
        );
        assert_eq!(
            got["usage"]["input_tokens"],
            events[0]["message"]["usage"]["input_tokens"]
        );
        let joined = |i: u64, kind: &str, field: &str| -> String {
            events
                .iter()
                .filter(|e| e["type"] == "content_block_delta" && e["index"] == json!(i))
                .filter(|e| e["delta"]["type"] == kind)
                .map(|e| e["delta"][field].as_str().unwrap().to_owned())
                .collect()
        };
        let blocks = got["content"].as_array().unwrap();
        assert_eq!(blocks[0]["type"], "text");
        assert_eq!(blocks[0]["text"], joined(0, "text_delta", "text").as_str());
        assert_eq!(blocks[1]["type"], "tool_use");
        assert_eq!(blocks[1]["name"], "get_weather");
        let input: Value =
            serde_json::from_str(&joined(1, "input_json_delta", "partial_json")).unwrap();
        assert_eq!(blocks[1]["input"], input);
        assert!(input["location"].is_string());

        let sse = fixture("anthropic/stream_thinking.sse");
        let got = stream_answer(&frames(&sse, 5)).unwrap();
        let thinking = &got["content"][0];
        assert_eq!(thinking["type"], "thinking");
        assert!(thinking["thinking"]
            .as_str()
            .unwrap()
            .contains("453 = 400 + 50 + 3"));
        assert!(thinking["signature"].as_str().unwrap().starts_with("EqQB"));
    }

    #[test]
    fn a_responses_stream_is_its_final_response_and_noise_is_nothing() {
        let ev = |v: Value| {
            Bytes::from(format!(
                "event: {}\ndata: {v}\n\n",
                v["type"].as_str().unwrap()
            ))
        };
        let created = json!({"type": "response.created", "response": {"id": "r1", "status": "in_progress", "output": []}});
        let delta = json!({"type": "response.output_text.delta", "delta": "hi"});
        let done = json!({"type": "response.completed", "response": {"id": "r1", "status": "completed",
            "output": [{"type": "message", "content": [{"type": "output_text", "text": "hi"}]}]}});
        let all = [ev(created.clone()), ev(delta.clone()), ev(done.clone())];
        assert_eq!(stream_answer(&all), Some(done["response"].clone()));
        // Cut before the end: what the stream had said so far.
        assert_eq!(stream_answer(&all[..2]), Some(created["response"].clone()));
        assert_eq!(
            stream_answer(&[Bytes::from_static(b"data: [DONE]\n\n")]),
            None
        );
        assert_eq!(stream_answer(&[]), None);
    }

    #[test]
    fn content_keeps_frames_uncopied_up_to_its_bound() {
        let mut c = Content::default();
        let frame = Bytes::from(vec![b'x'; 64 * 1024]);
        c.keep(&frame);
        assert_eq!(
            c.stream.frames[0].as_ptr(),
            frame.as_ptr(),
            "a kept frame was copied"
        );
        for _ in 0..(MAX_STREAM_KEPT / frame.len() + 2) {
            c.keep(&frame);
        }
        assert!(c.stream.truncated);
        assert!(c.stream.bytes <= MAX_STREAM_KEPT);
        assert_eq!(
            c.stream.bytes,
            c.stream.frames.iter().map(Bytes::len).sum::<usize>()
        );
    }
}
