//! What the benchmark sends: the operations users measure gateways on, with request bodies of
//! the sizes they send (LiteLLM's own locust prompt for the middle one).

use bytes::Bytes;
use clap::ValueEnum;

/// One kind of request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Workload {
    /// `POST /v1/chat/completions`, non-stream.
    Chat,
    /// `POST /v1/chat/completions` with `stream: true`.
    ChatStream,
    /// `POST /v1/responses`, non-stream.
    Responses,
    /// `POST /v1/responses` with `stream: true`.
    ResponsesStream,
    /// `POST /v1/embeddings`.
    Embeddings,
    /// `POST /v1/chat/completions` asking for the response cache (`"cache": {"use-cache":
    /// true}`; sluice runs it with `mode: default_off`): every request of a level but the
    /// first is a hit. Direct, the mock answers each one.
    ChatCached,
    /// The same with `stream: true`: a hit replays the stored stream.
    ChatStreamCached,
    /// `chat` naming the built-in PII guardrail (`"guardrails": ["pii"]`, not `default_on`,
    /// so the other workloads run unguarded), with an e-mail address, a card number and a
    /// phone number in the prompt: masked before the upstream, checked and given back in the
    /// answer. Run beside `chat` it prices the guardrail. Not in the default set (another
    /// gateway would need a guardrail of that name).
    ChatPii,
    /// The same with `stream: true`: the answer is held back 256 characters to be checked.
    ChatStreamPii,
}

impl Workload {
    /// Every workload, in report order.
    pub const ALL: [Workload; 7] = [
        Self::Chat,
        Self::ChatStream,
        Self::Responses,
        Self::ResponsesStream,
        Self::Embeddings,
        Self::ChatCached,
        Self::ChatStreamCached,
    ];

    /// Request path.
    pub fn path(self) -> &'static str {
        match self {
            Self::Chat
            | Self::ChatStream
            | Self::ChatCached
            | Self::ChatStreamCached
            | Self::ChatPii
            | Self::ChatStreamPii => "/v1/chat/completions",

            Self::Responses | Self::ResponsesStream => "/v1/responses",
            Self::Embeddings => "/v1/embeddings",
        }
    }

    /// Whether the answer is a stream (time to first byte is measured).
    pub fn streams(self) -> bool {
        matches!(
            self,
            Self::ChatStream | Self::ResponsesStream | Self::ChatStreamCached | Self::ChatStreamPii
        )
    }

    /// Whether it names the gateway's PII guardrail.
    pub fn guarded(self) -> bool {
        matches!(self, Self::ChatPii | Self::ChatStreamPii)
    }

    /// Whether the gateway's response cache serves it.
    pub fn cached(self) -> bool {
        matches!(self, Self::ChatCached | Self::ChatStreamCached)
    }

    /// Stable name for reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Chat => "chat",
            Self::ChatStream => "chat-stream",
            Self::Responses => "responses",
            Self::ResponsesStream => "responses-stream",
            Self::Embeddings => "embeddings",
            Self::ChatCached => "chat-cached",
            Self::ChatStreamCached => "chat-stream-cached",
            Self::ChatPii => "chat-pii",
            Self::ChatStreamPii => "chat-stream-pii",
        }
    }

    /// The request body for `model` carrying `prompt`.
    pub fn body(self, model: &str, prompt: &str) -> Bytes {
        let m = serde_json::Value::from(model);
        let p = serde_json::Value::from(prompt);
        let v = match self {
            Self::Chat => {
                serde_json::json!({"model": m, "messages": [{"role": "user", "content": p}]})
            }
            Self::ChatStream => {
                serde_json::json!({"model": m, "messages": [{"role": "user", "content": p}], "stream": true})
            }
            Self::Responses => serde_json::json!({"model": m, "input": p}),
            Self::ResponsesStream => serde_json::json!({"model": m, "input": p, "stream": true}),
            Self::Embeddings => serde_json::json!({"model": m, "input": p}),
            Self::ChatCached => {
                serde_json::json!({"model": m, "messages": [{"role": "user", "content": p}], "cache": {"use-cache": true}})
            }
            Self::ChatStreamCached => {
                serde_json::json!({"model": m, "messages": [{"role": "user", "content": p}], "stream": true, "cache": {"use-cache": true}})
            }
            Self::ChatPii | Self::ChatStreamPii => {
                let p = format!("{PII} {prompt}");
                serde_json::json!({"model": m, "messages": [{"role": "user", "content": p}],
                    "stream": self.streams(), "guardrails": ["pii"]})
            }
        };
        Bytes::from(v.to_string())
    }
}

/// What the PII workloads add to the prompt: one value of each kind the guardrail masks most.
const PII: &str = "Contact jane.doe@example.com or (415) 555-2671, card 4111 1111 1111 1111.";

/// Request body size class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ValueEnum, serde::Serialize)]
pub enum BodySize {
    /// About 1 KB.
    #[value(name = "1k")]
    #[serde(rename = "1k")]
    Small,
    /// About 16 KB: LiteLLM's locust prompt (a UUID and a sentence, repeated 150 times).
    #[value(name = "15k")]
    #[serde(rename = "15k")]
    Medium,
    /// About 500 KB.
    #[value(name = "500k")]
    #[serde(rename = "500k")]
    Large,
}

impl BodySize {
    /// Stable name for reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Small => "1k",
            Self::Medium => "15k",
            Self::Large => "500k",
        }
    }

    /// The prompt: LiteLLM's `f"{uuid.uuid4()} This is a test ..." * n`, so that no two runs
    /// share a cache key and the size matches what LiteLLM's benchmarks send.
    pub fn prompt(self) -> String {
        let repeats = match self {
            Self::Small => 9,
            Self::Medium => 150,
            Self::Large => 4_650,
        };
        let unit = format!(
            "{} This is a test there will be no cache hits and we'll fill up the context",
            sluice_core::random::uuid_v4()
        );
        unit.repeat(repeats)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_what_they_say() {
        let len = |s: BodySize| Workload::Chat.body("bench", &s.prompt()).len();
        assert!(
            (900..1_300).contains(&len(BodySize::Small)),
            "{}",
            len(BodySize::Small)
        );
        assert!((14_000..18_000).contains(&len(BodySize::Medium)));
        assert!((480_000..540_000).contains(&len(BodySize::Large)));
    }

    #[test]
    fn bodies_are_valid_json() {
        for w in Workload::ALL
            .into_iter()
            .chain([Workload::ChatPii, Workload::ChatStreamPii])
        {
            let b = w.body("m", "hi \"there\"");
            let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
            assert_eq!(v["model"], "m");
            assert_eq!(v["stream"].as_bool().unwrap_or(false), w.streams());
        }
    }
}
