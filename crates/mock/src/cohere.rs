//! Cohere's v2 Chat API as the mock writes it (`POST /v2/chat`): the assistant message with
//! text content, and `usage` with `billed_units` and `tokens`, as api.cohere.com answers; a
//! stream as Cohere's typed SSE events ending with `message-end` (which carries the usage).

use bytes::Bytes;
use serde_json::{json, Value};

use super::openai::{event, pieces, Plan};

/// Match Cohere's chat path.
pub(super) fn route(path: &str) -> bool {
    path == "/v2/chat"
}

impl Plan {
    fn cohere_usage(&self) -> Value {
        let units = json!({
            "input_tokens": self.prompt_tokens,
            "output_tokens": self.completion_tokens,
        });
        json!({"billed_units": units, "tokens": units})
    }

    /// `POST /v2/chat`, non-stream.
    pub fn cohere_chat(&self) -> Bytes {
        let v = json!({
            "id": format!("mock-{:012x}", self.serial),
            "finish_reason": "COMPLETE",
            "message": {
                "role": "assistant",
                "content": [{"type": "text", "text": self.text}],
            },
            "usage": self.cohere_usage(),
        });
        Bytes::from(v.to_string())
    }

    /// `POST /v2/chat` with `stream: true`.
    pub fn cohere_stream(&self) -> Vec<Bytes> {
        let id = format!("mock-{:012x}", self.serial);
        let mut out = vec![event(
            "message-start",
            &json!({"type": "message-start", "id": id, "delta": {"message": {"role": "assistant"}}}),
        )];
        for piece in pieces(&self.text, self.chunks) {
            out.push(event(
                "content-delta",
                &json!({"type": "content-delta", "index": 0, "delta": {"message": {"content": {"text": piece}}}}),
            ));
        }
        out.push(event(
            "message-end",
            &json!({"type": "message-end", "delta": {"finish_reason": "COMPLETE", "usage": self.cohere_usage()}}),
        ));
        out
    }
}
