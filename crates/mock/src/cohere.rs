//! Cohere's Chat API as the mock writes it: v2 (`POST /v2/chat`) answers with the assistant
//! message's text content and `usage` with `billed_units` and `tokens`, and streams Cohere's
//! typed SSE events ending with `message-end` (which carries the usage); v1 (`POST /v1/chat`)
//! answers with `text` and `meta.billed_units`, and streams one JSON document a line
//! (`application/stream+json`) ending with `stream-end` (whose `response` carries the meta),
//! as api.cohere.com does.

use bytes::Bytes;
use serde_json::{json, Value};

use super::openai::{event, pieces, Plan};

/// Which of Cohere's chat APIs a path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Version {
    /// `/v1/chat`: `message` in, `text` and `meta` out, JSON lines when streamed.
    V1,
    /// `/v2/chat`: `messages` in, `message` and `usage` out, SSE when streamed.
    V2,
}

/// Match Cohere's chat paths.
pub(super) fn route(path: &str) -> Option<Version> {
    match path {
        "/v1/chat" => Some(Version::V1),
        "/v2/chat" => Some(Version::V2),
        _ => None,
    }
}

impl Plan {
    fn cohere_units(&self) -> Value {
        json!({
            "input_tokens": self.prompt_tokens,
            "output_tokens": self.completion_tokens,
        })
    }

    fn cohere_usage(&self) -> Value {
        json!({"billed_units": self.cohere_units(), "tokens": self.cohere_units()})
    }

    fn cohere_id(&self) -> String {
        format!("mock-{:012x}", self.serial)
    }

    /// A chat answer, non-stream.
    pub fn cohere_chat(&self, version: Version) -> Bytes {
        Bytes::from(self.cohere_answer(version).to_string())
    }

    fn cohere_answer(&self, version: Version) -> Value {
        match version {
            Version::V2 => json!({
                "id": self.cohere_id(),
                "finish_reason": "COMPLETE",
                "message": {
                    "role": "assistant",
                    "content": [{"type": "text", "text": self.text}],
                },
                "usage": self.cohere_usage(),
            }),
            Version::V1 => json!({
                "response_id": self.cohere_id(),
                "generation_id": self.cohere_id(),
                "text": self.text,
                "chat_history": [],
                "finish_reason": "COMPLETE",
                "meta": {
                    "api_version": {"version": "1"},
                    "billed_units": self.cohere_units(),
                    "tokens": self.cohere_units(),
                },
            }),
        }
    }

    /// A chat answer, streamed: v2's SSE events, v1's JSON lines.
    pub fn cohere_stream(&self, version: Version) -> Vec<Bytes> {
        match version {
            Version::V2 => self.cohere_events(),
            Version::V1 => self.cohere_lines(),
        }
    }

    fn cohere_events(&self) -> Vec<Bytes> {
        let mut out = vec![event(
            "message-start",
            &json!({"type": "message-start", "id": self.cohere_id(), "delta": {"message": {"role": "assistant"}}}),
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

    fn cohere_lines(&self) -> Vec<Bytes> {
        let line = |v: Value| Bytes::from(format!("{v}\n"));
        let mut out = vec![line(json!({
            "is_finished": false,
            "event_type": "stream-start",
            "generation_id": self.cohere_id(),
        }))];
        for piece in pieces(&self.text, self.chunks) {
            out.push(line(json!({
                "is_finished": false,
                "event_type": "text-generation",
                "text": piece,
            })));
        }
        out.push(line(json!({
            "is_finished": true,
            "event_type": "stream-end",
            "response": self.cohere_answer(Version::V1),
            "finish_reason": "COMPLETE",
        })));
        out
    }
}
