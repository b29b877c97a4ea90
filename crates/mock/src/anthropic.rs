//! Anthropic's Messages wire format as the mock writes it: a message (text, or text then a
//! `tool_use` block when the request offers tools), the named SSE event sequence of a stream
//! with `ping` and `input_json_delta`, token counts and errors, shaped like api.anthropic.com's
//! answers so that the official SDK parses them unchanged.

use bytes::Bytes;
use serde_json::{json, Value};

use super::openai::{event, pieces, Plan};
use super::tools::split;

impl Plan {
    fn message_id(&self) -> String {
        format!("msg_mock{:012x}", self.serial)
    }

    fn tool_id(&self) -> String {
        format!("toolu_mock{:012x}", self.serial)
    }

    /// The text block's text: the reply, or a short lead-in before a tool call.
    fn lead_text(&self) -> String {
        match &self.tool {
            Some(t) => format!("Calling {}.", t.name),
            None => self.text.clone(),
        }
    }

    fn stop_reason(&self) -> &'static str {
        if self.tool.is_some() {
            "tool_use"
        } else {
            "end_turn"
        }
    }

    fn anthropic_usage(&self, output_tokens: u64) -> Value {
        json!({
            "input_tokens": self.prompt_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": output_tokens,
            "service_tier": "standard"
        })
    }

    /// `POST /v1/messages`, non-stream.
    pub fn message(&self) -> Bytes {
        let mut content = vec![json!({"type": "text", "text": self.lead_text()})];
        if let Some(t) = &self.tool {
            let input: Value = serde_json::from_str(&t.arguments).unwrap_or_else(|_| json!({}));
            content.push(
                json!({"type": "tool_use", "id": self.tool_id(), "name": t.name, "input": input}),
            );
        }
        let v = json!({
            "id": self.message_id(),
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
            "stop_reason": self.stop_reason(),
            "stop_sequence": null,
            "usage": self.anthropic_usage(self.completion_tokens),
        });
        Bytes::from(serde_json::to_vec(&v).unwrap_or_default())
    }

    /// `POST /v1/messages`, stream: each event as SSE (`event:` and `data:`).
    pub fn message_stream(&self) -> Vec<Bytes> {
        self.message_events()
            .iter()
            .map(|(kind, v)| event(kind, v))
            .collect()
    }

    /// The events of a streamed message, named: `message_start`, a `ping`, the text block's
    /// deltas, the tool block's `input_json_delta`s (when calling a tool), `message_delta`
    /// with the stop reason and output tokens, `message_stop`. Anthropic's API sends them as
    /// SSE; Bedrock's InvokeModelWithResponseStream as base64 chunks.
    pub fn message_events(&self) -> Vec<(&'static str, Value)> {
        let mut events = Vec::with_capacity(self.chunks as usize * 2 + 8);
        events.push((
            "message_start",
            json!({"type": "message_start", "message": {
                "id": self.message_id(), "type": "message", "role": "assistant",
                "model": self.model, "content": [], "stop_reason": null,
                "stop_sequence": null, "usage": self.anthropic_usage(1),
            }}),
        ));
        events.push((
            "content_block_start",
            json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "text", "text": ""}}),
        ));
        events.push(("ping", json!({"type": "ping"})));
        let lead = self.lead_text();
        for p in pieces(&lead, self.chunks)
            .into_iter()
            .filter(|p| !p.is_empty())
        {
            events.push((
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0,
                    "delta": {"type": "text_delta", "text": p}}),
            ));
        }
        events.push((
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ));
        if let Some(t) = &self.tool {
            events.push((
                "content_block_start",
                json!({"type": "content_block_start", "index": 1,
                    "content_block": {"type": "tool_use", "id": self.tool_id(),
                        "name": t.name, "input": {}}}),
            ));
            for p in split(&t.arguments, self.chunks) {
                events.push((
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": 1,
                        "delta": {"type": "input_json_delta", "partial_json": p}}),
                ));
            }
            events.push((
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 1}),
            ));
        }
        events.push((
            "message_delta",
            json!({"type": "message_delta",
                "delta": {"stop_reason": self.stop_reason(), "stop_sequence": null},
                "usage": {"output_tokens": self.completion_tokens}}),
        ));
        events.push(("message_stop", json!({"type": "message_stop"})));
        events
    }
}

/// `POST /v1/messages/count_tokens`.
pub(super) fn count(input_tokens: u64) -> Bytes {
    Bytes::from(json!({ "input_tokens": input_tokens }).to_string())
}
