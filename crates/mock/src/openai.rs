//! OpenAI's wire format as the mock writes it: chat completions, legacy completions,
//! embeddings and the Responses API, non-stream and stream, shaped like api.openai.com's
//! answers so that the official SDKs parse them unchanged.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use bytes::Bytes;
use serde_json::{json, Value};

use super::tools::{split, ToolPlan};

/// Everything one answer is made of, fixed before the first byte is written.
#[derive(Debug)]
pub(super) struct Plan {
    /// Echoed model name.
    pub model: String,
    /// The whole reply text.
    pub text: String,
    /// Prompt tokens reported in `usage`.
    pub prompt_tokens: u64,
    /// Completion tokens reported in `usage`.
    pub completion_tokens: u64,
    /// Content chunks in a stream.
    pub chunks: u32,
    /// The client asked for `stream_options.include_usage`.
    pub include_usage: bool,
    /// Unix seconds.
    pub created: u64,
    /// Per-answer id suffix.
    pub serial: u64,
    /// Answer with this tool call instead of text (the request offered tools).
    pub tool: Option<ToolPlan>,
}

static SERIAL: AtomicU64 = AtomicU64::new(1);

/// A fresh id suffix and the current time, for a new answer.
pub(super) fn stamp() -> (u64, u64) {
    let created = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    (SERIAL.fetch_add(1, Ordering::Relaxed), created)
}

const WORDS: [&str; 24] = [
    "The",
    "mock",
    "provider",
    "answers",
    "in",
    "the",
    "exact",
    "wire",
    "format",
    "of",
    "each",
    "upstream,",
    "so",
    "clients",
    "and",
    "gateways",
    "can",
    "be",
    "tested",
    "without",
    "any",
    "real",
    "model",
    "behind.",
];

/// Deterministic filler text of `n` words (a mock "token" is one word).
pub(super) fn filler(n: u32) -> String {
    let mut s = String::with_capacity(n as usize * 7);
    for i in 0..n as usize {
        if i > 0 {
            s.push(' ');
        }
        s.push_str(WORDS[i % WORDS.len()]);
    }
    s
}

/// Split `text` into `n` consecutive pieces at word boundaries; they concatenate to `text`.
/// Pieces may be empty when there are fewer words than pieces.
pub(super) fn pieces(text: &str, n: u32) -> Vec<&str> {
    let n = n.max(1) as usize;
    let starts: Vec<usize> = std::iter::once(0)
        .chain(text.match_indices(' ').map(|(i, _)| i))
        .collect();
    let words = starts.len();
    (0..n)
        .map(|k| {
            let from = starts.get(k * words / n).copied().unwrap_or(text.len());
            let to = if k + 1 == n {
                text.len()
            } else {
                starts
                    .get((k + 1) * words / n)
                    .copied()
                    .unwrap_or(text.len())
            };
            text.get(from..to.max(from)).unwrap_or_default()
        })
        .collect()
}

fn sse(v: &Value) -> Bytes {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(b"data: ");
    // Serialising a `Value` cannot fail.
    let _ = serde_json::to_writer(&mut out, v);
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

/// One named SSE event (`event:` and `data:` lines), as the Responses API and Anthropic send.
pub(super) fn event(kind: &str, v: &Value) -> Bytes {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(b"event: ");
    out.extend_from_slice(kind.as_bytes());
    out.extend_from_slice(b"\ndata: ");
    let _ = serde_json::to_writer(&mut out, v);
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

fn body(v: &Value) -> Bytes {
    Bytes::from(serde_json::to_vec(v).unwrap_or_default())
}

const DONE: &[u8] = b"data: [DONE]\n\n";

impl Plan {
    fn chat_usage(&self) -> Value {
        json!({
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0, "audio_tokens": 0,
                "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0
            }
        })
    }

    fn call_id(&self) -> String {
        format!("call_mock{:012x}", self.serial)
    }

    /// `POST /v1/chat/completions`, non-stream.
    pub fn chat(&self) -> Bytes {
        let (message, finish) = match &self.tool {
            None => (
                json!({"role": "assistant", "content": self.text, "refusal": null, "annotations": []}),
                "stop",
            ),
            Some(t) => (
                json!({"role": "assistant", "content": null, "refusal": null, "annotations": [],
                    "tool_calls": [{"id": self.call_id(), "type": "function",
                        "function": {"name": t.name, "arguments": t.arguments}}]}),
                "tool_calls",
            ),
        };
        body(&json!({
            "id": format!("chatcmpl-mock{:012x}", self.serial),
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [{
                "index": 0,
                "message": message,
                "logprobs": null,
                "finish_reason": finish
            }],
            "usage": self.chat_usage(),
            "service_tier": "default",
            "system_fingerprint": "fp_sluice_mock"
        }))
    }

    /// `POST /v1/chat/completions`, stream: a role chunk, the content chunks, a finish chunk,
    /// the usage chunk when asked for, `[DONE]`.
    pub fn chat_stream(&self) -> Vec<Bytes> {
        let id = format!("chatcmpl-mock{:012x}", self.serial);
        let chunk = |delta: Value, finish: Value| {
            let mut c = json!({
                "id": id, "object": "chat.completion.chunk", "created": self.created,
                "model": self.model, "service_tier": "default",
                "system_fingerprint": "fp_sluice_mock",
                "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]
            });
            if self.include_usage {
                c["usage"] = Value::Null;
            }
            sse(&c)
        };
        let mut frames = Vec::with_capacity(self.chunks as usize + 4);
        frames.push(chunk(
            json!({"role": "assistant", "content": "", "refusal": null}),
            Value::Null,
        ));
        match &self.tool {
            None => {
                for p in pieces(&self.text, self.chunks) {
                    frames.push(chunk(json!({ "content": p }), Value::Null));
                }
                frames.push(chunk(json!({}), json!("stop")));
            }
            Some(t) => {
                frames.push(chunk(
                    json!({"tool_calls": [{"index": 0, "id": self.call_id(), "type": "function",
                        "function": {"name": t.name, "arguments": ""}}]}),
                    Value::Null,
                ));
                for p in split(&t.arguments, self.chunks) {
                    frames.push(chunk(
                        json!({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}),
                        Value::Null,
                    ));
                }
                frames.push(chunk(json!({}), json!("tool_calls")));
            }
        }
        if self.include_usage {
            frames.push(sse(&json!({
                "id": id, "object": "chat.completion.chunk", "created": self.created,
                "model": self.model, "service_tier": "default",
                "system_fingerprint": "fp_sluice_mock",
                "choices": [], "usage": self.chat_usage()
            })));
        }
        frames.push(Bytes::from_static(DONE));
        frames
    }

    fn completion_usage(&self) -> Value {
        json!({
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens
        })
    }

    /// `POST /v1/completions`, non-stream.
    pub fn completion(&self) -> Bytes {
        body(&json!({
            "id": format!("cmpl-mock{:012x}", self.serial),
            "object": "text_completion",
            "created": self.created,
            "model": self.model,
            "choices": [{"text": self.text, "index": 0, "logprobs": null, "finish_reason": "stop"}],
            "usage": self.completion_usage(),
            "system_fingerprint": "fp_sluice_mock"
        }))
    }

    /// `POST /v1/completions`, stream.
    pub fn completion_stream(&self) -> Vec<Bytes> {
        let id = format!("cmpl-mock{:012x}", self.serial);
        let chunk = |text: &str, finish: Value| {
            let mut c = json!({
                "id": id, "object": "text_completion", "created": self.created,
                "model": self.model, "system_fingerprint": "fp_sluice_mock",
                "choices": [{"text": text, "index": 0, "logprobs": null, "finish_reason": finish}]
            });
            if self.include_usage {
                c["usage"] = Value::Null;
            }
            sse(&c)
        };
        let mut frames: Vec<Bytes> = pieces(&self.text, self.chunks)
            .into_iter()
            .map(|p| chunk(p, Value::Null))
            .collect();
        frames.push(chunk("", json!("stop")));
        if self.include_usage {
            frames.push(sse(&json!({
                "id": id, "object": "text_completion", "created": self.created,
                "model": self.model, "choices": [], "usage": self.completion_usage()
            })));
        }
        frames.push(Bytes::from_static(DONE));
        frames
    }

    fn response_object(&self, done: bool) -> Value {
        let output = if done {
            json!([self.output_item(true)])
        } else {
            json!([])
        };
        let usage = if done {
            json!({
                "input_tokens": self.prompt_tokens,
                // openai's ResponseUsage requires both details (cache writes since 2.x).
                "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                "output_tokens": self.completion_tokens,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": self.prompt_tokens + self.completion_tokens
            })
        } else {
            Value::Null
        };
        json!({
            "id": format!("resp_mock{:012x}", self.serial),
            "object": "response",
            "created_at": self.created,
            "status": if done { "completed" } else { "in_progress" },
            "background": false,
            "error": null,
            "incomplete_details": null,
            "instructions": null,
            "max_output_tokens": null,
            "model": self.model,
            "output": output,
            "parallel_tool_calls": true,
            "previous_response_id": null,
            "reasoning": {"effort": null, "summary": null},
            "service_tier": "default",
            "store": true,
            "temperature": 1.0,
            "text": {"format": {"type": "text"}},
            "tool_choice": "auto",
            "tools": [],
            "top_p": 1.0,
            "truncation": "disabled",
            "usage": usage,
            "user": null,
            "metadata": {}
        })
    }

    fn item_id(&self) -> String {
        format!("msg_mock{:012x}", self.serial)
    }

    /// The answer's one output item: the tool call when there is one, else the message.
    fn output_item(&self, done: bool) -> Value {
        match &self.tool {
            None => self.message_item(done),
            Some(t) => json!({
                "type": "function_call",
                "id": format!("fc_mock{:012x}", self.serial),
                "call_id": self.call_id(),
                "name": t.name,
                "arguments": if done { t.arguments.as_str() } else { "" },
                "status": if done { "completed" } else { "in_progress" }
            }),
        }
    }

    fn message_item(&self, done: bool) -> Value {
        let content = if done {
            json!([{"type": "output_text", "text": self.text, "annotations": [], "logprobs": []}])
        } else {
            json!([])
        };
        json!({
            "type": "message",
            "id": self.item_id(),
            "status": if done { "completed" } else { "in_progress" },
            "role": "assistant",
            "content": content
        })
    }

    /// `POST /v1/responses`, non-stream.
    pub fn response(&self) -> Bytes {
        body(&self.response_object(true))
    }

    /// `POST /v1/responses`, stream: the full event sequence of a one-message answer, each
    /// with its `sequence_number`.
    pub fn response_stream(&self) -> Vec<Bytes> {
        let item_id = self.item_id();
        let mut seq = 0u64;
        let mut ev = |kind: &str, mut v: Value| {
            v["type"] = json!(kind);
            v["sequence_number"] = json!(seq);
            seq += 1;
            event(kind, &v)
        };
        let text_part = |text: &str| json!({"type": "output_text", "text": text, "annotations": [], "logprobs": []});
        let mut frames = Vec::with_capacity(self.chunks as usize + 8);
        frames.push(ev(
            "response.created",
            json!({"response": self.response_object(false)}),
        ));
        frames.push(ev(
            "response.in_progress",
            json!({"response": self.response_object(false)}),
        ));
        frames.push(ev(
            "response.output_item.added",
            json!({"output_index": 0, "item": self.output_item(false)}),
        ));
        if let Some(t) = &self.tool {
            let fc_id = format!("fc_mock{:012x}", self.serial);
            for p in split(&t.arguments, self.chunks) {
                frames.push(ev(
                    "response.function_call_arguments.delta",
                    json!({"item_id": fc_id, "output_index": 0, "delta": p}),
                ));
            }
            frames.push(ev(
                "response.function_call_arguments.done",
                // openai's ResponseFunctionCallArgumentsDoneEvent requires the name.
                json!({"item_id": fc_id, "output_index": 0, "name": t.name, "arguments": t.arguments}),
            ));
            frames.push(ev(
                "response.output_item.done",
                json!({"output_index": 0, "item": self.output_item(true)}),
            ));
            frames.push(ev(
                "response.completed",
                json!({"response": self.response_object(true)}),
            ));
            return frames;
        }
        frames.push(ev(
            "response.content_part.added",
            json!({"item_id": item_id, "output_index": 0, "content_index": 0, "part": text_part("")}),
        ));
        for p in pieces(&self.text, self.chunks) {
            frames.push(ev(
                "response.output_text.delta",
                json!({"item_id": item_id, "output_index": 0, "content_index": 0, "delta": p, "logprobs": []}),
            ));
        }
        frames.push(ev(
            "response.output_text.done",
            json!({"item_id": item_id, "output_index": 0, "content_index": 0, "text": self.text, "logprobs": []}),
        ));
        frames.push(ev(
            "response.content_part.done",
            json!({"item_id": item_id, "output_index": 0, "content_index": 0, "part": text_part(&self.text)}),
        ));
        frames.push(ev(
            "response.output_item.done",
            json!({"output_index": 0, "item": self.message_item(true)}),
        ));
        frames.push(ev(
            "response.completed",
            json!({"response": self.response_object(true)}),
        ));
        frames
    }
}

/// One embedding request's answer.
#[derive(Debug)]
pub(super) struct EmbeddingPlan {
    /// Echoed model name.
    pub model: String,
    /// The inputs' texts (token-array inputs are rendered as their numbers).
    pub inputs: Vec<String>,
    /// Vector length.
    pub dims: u32,
    /// `encoding_format: base64` (what the openai SDK asks for by default).
    pub base64: bool,
    /// Prompt tokens reported.
    pub prompt_tokens: u64,
}

impl EmbeddingPlan {
    /// `POST /v1/embeddings`: a deterministic unit vector per input (same text, same vector);
    /// a bag of words for a model whose name says so ([`bag_of_words`]), so that paraphrases
    /// are close (what a semantic cache needs to be tested).
    pub fn answer(&self) -> Bytes {
        let data: Vec<Value> = self
            .inputs
            .iter()
            .enumerate()
            .map(|(i, text)| {
                let v = if is_bag_of_words(&self.model) {
                    bag_of_words(text, self.dims)
                } else {
                    vector(text, self.dims)
                };
                let embedding = if self.base64 {
                    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
                    json!(base64::engine::general_purpose::STANDARD.encode(bytes))
                } else {
                    json!(v)
                };
                json!({"object": "embedding", "index": i, "embedding": embedding})
            })
            .collect();
        body(&json!({
            "object": "list",
            "data": data,
            "model": self.model,
            "usage": {"prompt_tokens": self.prompt_tokens, "total_tokens": self.prompt_tokens}
        }))
    }
}

/// Whether a model's embeddings are bags of words: its name contains `bag-of-words`.
pub(super) fn is_bag_of_words(model: &str) -> bool {
    model.contains("bag-of-words")
}

/// The vector length of a bag-of-words model unless the request asks for `dimensions`: wide
/// enough that a few dozen words rarely share a dimension.
pub(super) const BAG_OF_WORDS_DIMS: u32 = 256;

/// A bag of words as a unit vector: the text lower-cased and cut into words (runs of letters
/// and digits), each word hashed (FNV-1a) into one of `dims` dimensions and counted there.
/// Texts with the same words in any order, case or punctuation get the same vector; texts
/// sharing most of their words are close (cosine). No words: the zero vector.
pub(super) fn bag_of_words(text: &str, dims: u32) -> Vec<f32> {
    let mut v = vec![0f32; dims.max(1) as usize];
    let lower = text.to_lowercase();
    for word in lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let h = word.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        v[(h % u64::from(dims.max(1))) as usize] += 1.0;
    }
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        for x in &mut v {
            *x /= norm;
        }
    }
    v
}

/// A unit vector derived from the text (FNV-1a seed, then a sine walk).
pub(super) fn vector(text: &str, dims: u32) -> Vec<f32> {
    let seed = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let phase = (seed % 10_000) as f32 / 1000.0;
    let mut v: Vec<f32> = (0..dims).map(|j| (phase + j as f32 * 0.7).sin()).collect();
    let norm = v
        .iter()
        .map(|x| x * x)
        .sum::<f32>()
        .sqrt()
        .max(f32::EPSILON);
    for x in &mut v {
        *x /= norm;
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(chunks: u32, include_usage: bool) -> Plan {
        Plan {
            model: "m".into(),
            text: filler(10),
            prompt_tokens: 3,
            completion_tokens: 10,
            chunks,
            include_usage,
            created: 1,
            serial: 7,
            tool: None,
        }
    }

    fn data(frames: &[Bytes]) -> Vec<String> {
        frames
            .iter()
            .map(|f| {
                let s = std::str::from_utf8(f).unwrap();
                let line = s.lines().find(|l| l.starts_with("data: ")).unwrap();
                line["data: ".len()..].to_owned()
            })
            .collect()
    }

    #[test]
    fn pieces_concatenate_to_the_text() {
        let t = filler(10);
        for n in [1, 3, 10, 15] {
            let p = pieces(&t, n);
            assert_eq!(p.len(), n as usize);
            assert_eq!(p.concat(), t);
        }
        assert_eq!(pieces("", 2).concat(), "");
    }

    #[test]
    fn chat_stream_matches_non_stream() {
        let p = plan(4, true);
        let d = data(&p.chat_stream());
        assert_eq!(d.last().unwrap(), "[DONE]");
        let chunks: Vec<Value> = d[..d.len() - 1]
            .iter()
            .map(|s| serde_json::from_str(s).unwrap())
            .collect();
        assert_eq!(chunks.len(), 1 + 4 + 1 + 1);
        let text: String = chunks
            .iter()
            .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
            .collect();
        let full: Value = serde_json::from_slice(&p.chat()).unwrap();
        assert_eq!(
            text,
            full["choices"][0]["message"]["content"].as_str().unwrap()
        );
        assert!(chunks[0]["usage"].is_null() && chunks[0].get("usage").is_some());
        let last = chunks.last().unwrap();
        assert_eq!(last["choices"].as_array().unwrap().len(), 0);
        assert_eq!(last["usage"]["total_tokens"], 13);
        let without = data(&plan(4, false).chat_stream());
        assert_eq!(without.len(), 1 + 4 + 1 + 1);
        assert!(!without[0].contains("usage"));
    }

    /// The openai SDK's `ResponseUsage` requires both token details, cache writes included.
    #[test]
    fn responses_usage_has_every_required_detail() {
        let whole: Value = serde_json::from_slice(&plan(2, false).response()).unwrap();
        let usage = &whole["usage"];
        assert_eq!(usage["input_tokens_details"]["cached_tokens"], 0);
        assert_eq!(usage["input_tokens_details"]["cache_write_tokens"], 0);
        assert_eq!(usage["output_tokens_details"]["reasoning_tokens"], 0);
    }

    /// Content logging puts a stream back together (`telemetry::callbacks::assemble`): for
    /// every wire the mock streams, that must be the answer the same request gets whole.
    #[test]
    fn every_stream_assembles_into_the_whole_answer() {
        use sluice_translate::assemble::stream_answer;
        let json = |b: Bytes| -> Value { serde_json::from_slice(&b).unwrap() };
        let tool = ToolPlan {
            name: "get_weather".into(),
            arguments: r#"{"location":"Paris","unit":"celsius"}"#.into(),
        };
        for with_tool in [false, true] {
            let mut p = plan(4, true);
            p.tool = with_tool.then(|| tool.clone());
            let (whole, streamed) = (json(p.chat()), stream_answer(&p.chat_stream()).unwrap());
            let (w, s) = (&whole["choices"][0], &streamed["choices"][0]);
            assert_eq!(s["finish_reason"], w["finish_reason"]);
            for field in ["role", "content", "tool_calls"] {
                assert_eq!(s["message"][field], w["message"][field], "{field}");
            }
            assert_eq!(streamed["usage"], whole["usage"]);
            assert_eq!(streamed["id"], whole["id"]);

            let (whole, streamed) = (
                json(p.message()),
                stream_answer(&p.message_stream()).unwrap(),
            );
            assert_eq!(streamed["content"], whole["content"]);
            assert_eq!(streamed["stop_reason"], whole["stop_reason"]);
            assert_eq!(
                streamed["usage"]["output_tokens"],
                whole["usage"]["output_tokens"]
            );
            let (whole, streamed) = (
                json(p.response()),
                stream_answer(&p.response_stream()).unwrap(),
            );
            assert_eq!(streamed["output"], whole["output"]);
            let kind = if with_tool {
                "function_call"
            } else {
                "message"
            };
            assert_eq!(whole["output"][0]["type"], kind);
        }
        let p = plan(3, true);
        let (whole, streamed) = (
            json(p.completion()),
            stream_answer(&p.completion_stream()).unwrap(),
        );
        assert_eq!(streamed["choices"][0]["text"], whole["choices"][0]["text"]);
        assert_eq!(
            stream_answer(&p.response_stream()).unwrap(),
            json(p.response())
        );
    }

    #[test]
    fn responses_stream_events_in_sequence() {
        let p = plan(3, false);
        let frames = p.response_stream();
        let events: Vec<Value> = data(&frames)
            .iter()
            .map(|s| serde_json::from_str(s).unwrap())
            .collect();
        for (i, e) in events.iter().enumerate() {
            assert_eq!(e["sequence_number"], i as u64);
        }
        assert_eq!(events[0]["type"], "response.created");
        let last = events.last().unwrap();
        assert_eq!(last["type"], "response.completed");
        assert_eq!(last["response"]["usage"]["output_tokens"], 10);
        let deltas: String = events
            .iter()
            .filter(|e| e["type"] == "response.output_text.delta")
            .map(|e| e["delta"].as_str().unwrap())
            .collect();
        assert_eq!(deltas, p.text);
        assert!(std::str::from_utf8(&frames[0])
            .unwrap()
            .starts_with("event: response.created\n"));
    }

    /// openai's `ResponseFunctionCallArgumentsDoneEvent` requires the function's name.
    #[test]
    fn responses_stream_names_the_finished_call() {
        let mut p = plan(2, false);
        p.tool = Some(ToolPlan {
            name: "get_weather".into(),
            arguments: r#"{"city":"Paris"}"#.into(),
        });
        let events: Vec<Value> = data(&p.response_stream())
            .iter()
            .map(|s| serde_json::from_str(s).unwrap())
            .collect();
        let done = events
            .iter()
            .find(|e| e["type"] == "response.function_call_arguments.done")
            .unwrap();
        assert_eq!(done["name"], "get_weather");
        assert_eq!(done["arguments"], r#"{"city":"Paris"}"#);
    }

    #[test]
    fn bag_of_words_vectors_make_paraphrases_close() {
        let cos = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
        let a = bag_of_words("What is the capital of France?", BAG_OF_WORDS_DIMS);
        let b = bag_of_words("what is the capital of france", BAG_OF_WORDS_DIMS);
        let c = bag_of_words("How do I bake sourdough bread?", BAG_OF_WORDS_DIMS);
        let d = bag_of_words("What is the capital city of France?", BAG_OF_WORDS_DIMS);
        assert!((cos(&a, &b) - 1.0).abs() < 1e-5, "same words");
        assert!(cos(&a, &d) > 0.9 && cos(&a, &d) < 0.99, "{}", cos(&a, &d));
        assert!(cos(&a, &c) < 0.5, "{}", cos(&a, &c));
        assert!((cos(&a, &a) - 1.0).abs() < 1e-5, "a unit vector");
        assert!(bag_of_words("?!", 8).iter().all(|x| *x == 0.0));
        assert!(is_bag_of_words("text-bag-of-words-1") && !is_bag_of_words("text-embedding-3"));
    }

    #[test]
    fn embeddings_float_and_base64_agree() {
        let mut e = EmbeddingPlan {
            model: "e".into(),
            inputs: vec!["a".into(), "b".into()],
            dims: 8,
            base64: false,
            prompt_tokens: 2,
        };
        let floats: Value = serde_json::from_slice(&e.answer()).unwrap();
        e.base64 = true;
        let b64: Value = serde_json::from_slice(&e.answer()).unwrap();
        let raw = base64::engine::general_purpose::STANDARD
            .decode(b64["data"][1]["embedding"].as_str().unwrap())
            .unwrap();
        let decoded: Vec<f32> = raw
            .chunks(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let expected: Vec<f32> = floats["data"][1]["embedding"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap() as f32)
            .collect();
        assert_eq!(decoded, expected);
        let norm: f32 = decoded.iter().map(|x| x * x).sum();
        assert!((norm - 1.0).abs() < 1e-4);
        assert_ne!(
            floats["data"][0]["embedding"],
            floats["data"][1]["embedding"]
        );
    }
}
