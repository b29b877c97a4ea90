//! One normalised usage record for every OpenAI-style answer (chat, completions, embeddings,
//! Responses API), read without parsing the rest of the body into values.

use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};

/// Tokens one request used. `prompt_tokens` includes `cached_tokens` (OpenAI's convention).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Input tokens, cached ones included.
    pub prompt_tokens: u64,
    /// Output tokens, reasoning ones included.
    pub completion_tokens: u64,
    /// Input tokens served from the provider's prompt cache.
    pub cached_tokens: u64,
    /// Output tokens spent on hidden reasoning.
    pub reasoning_tokens: u64,
}

#[derive(Deserialize)]
struct Details {
    #[serde(default)]
    cached_tokens: Option<u64>,
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}

/// The `usage` object in either of OpenAI's spellings (chat: prompt/completion; Responses:
/// input/output).
#[derive(Deserialize)]
struct RawUsage {
    #[serde(default, alias = "input_tokens")]
    prompt_tokens: Option<u64>,
    #[serde(default, alias = "output_tokens")]
    completion_tokens: Option<u64>,
    #[serde(default, alias = "input_tokens_details")]
    prompt_tokens_details: Option<Details>,
    #[serde(default, alias = "output_tokens_details")]
    completion_tokens_details: Option<Details>,
}

impl From<RawUsage> for Usage {
    fn from(raw: RawUsage) -> Self {
        Self {
            prompt_tokens: raw.prompt_tokens.unwrap_or(0),
            completion_tokens: raw.completion_tokens.unwrap_or(0),
            cached_tokens: raw
                .prompt_tokens_details
                .and_then(|d| d.cached_tokens)
                .unwrap_or(0),
            reasoning_tokens: raw
                .completion_tokens_details
                .and_then(|d| d.reasoning_tokens)
                .unwrap_or(0),
        }
    }
}

/// The parts of a JSON document (a whole answer or one stream event) that carry usage.
/// Everything else is skipped by serde without being built.
#[derive(Deserialize)]
pub(crate) struct UsageProbe<'a> {
    #[serde(default)]
    usage: Option<RawUsage>,
    /// Responses API stream events nest the response object.
    #[serde(default)]
    response: Option<NestedResponse>,
    /// Chat chunks: an empty `choices` marks the usage-only chunk.
    #[serde(default)]
    choices: Option<Vec<IgnoredAny>>,
    /// Responses API event type (`response.completed`, ...).
    #[serde(default, borrow, rename = "type")]
    pub kind: Option<&'a str>,
}

#[derive(Deserialize)]
struct NestedResponse {
    #[serde(default)]
    usage: Option<RawUsage>,
}

impl UsageProbe<'_> {
    /// The usage this document carries, if any.
    pub(crate) fn usage(self) -> Option<Usage> {
        self.usage
            .or(self.response.and_then(|r| r.usage))
            .map(Usage::from)
    }

    /// True for the final chat chunk that only carries usage (`"choices": []`).
    pub(crate) fn is_usage_only_chunk(&self) -> bool {
        self.usage.is_some() && self.choices.as_ref().is_some_and(Vec::is_empty)
    }
}

/// Usage from a whole non-stream answer. `None` when the body has none or is not JSON.
pub fn usage_from_body(body: &[u8]) -> Option<Usage> {
    serde_json::from_slice::<UsageProbe<'_>>(body)
        .ok()
        .and_then(UsageProbe::usage)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_usage_with_details() {
        let body = br#"{"id":"x","choices":[{"message":{"content":"usage"}}],
            "usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15,
            "prompt_tokens_details":{"cached_tokens":4},
            "completion_tokens_details":{"reasoning_tokens":2}}}"#;
        assert_eq!(
            usage_from_body(body),
            Some(Usage {
                prompt_tokens: 10,
                completion_tokens: 5,
                cached_tokens: 4,
                reasoning_tokens: 2
            })
        );
    }

    #[test]
    fn responses_usage() {
        let body = br#"{"object":"response","usage":{"input_tokens":7,"output_tokens":3,
            "input_tokens_details":{"cached_tokens":1},"output_tokens_details":{"reasoning_tokens":0},
            "total_tokens":10}}"#;
        let u = usage_from_body(body).unwrap();
        assert_eq!(
            (u.prompt_tokens, u.completion_tokens, u.cached_tokens),
            (7, 3, 1)
        );
    }

    #[test]
    fn embeddings_usage_and_missing() {
        let body = br#"{"data":[],"usage":{"prompt_tokens":8,"total_tokens":8}}"#;
        assert_eq!(usage_from_body(body).unwrap().prompt_tokens, 8);
        assert_eq!(usage_from_body(br#"{"data":[]}"#), None);
        assert_eq!(usage_from_body(b"not json"), None);
        assert_eq!(usage_from_body(br#"{"usage":null}"#), None);
    }

    #[test]
    fn nested_response_event() {
        let ev = br#"{"type":"response.completed","response":{"usage":{"input_tokens":2,"output_tokens":9}}}"#;
        let probe: UsageProbe<'_> = serde_json::from_slice(ev).unwrap();
        assert_eq!(probe.kind, Some("response.completed"));
        assert_eq!(probe.usage().unwrap().completion_tokens, 9);
    }

    #[test]
    fn usage_only_chunk() {
        let ev = br#"{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}}"#;
        let probe: UsageProbe<'_> = serde_json::from_slice(ev).unwrap();
        assert!(probe.is_usage_only_chunk());
        let ev = br#"{"choices":[{"delta":{}}],"usage":{"prompt_tokens":1,"completion_tokens":2}}"#;
        let probe: UsageProbe<'_> = serde_json::from_slice(ev).unwrap();
        assert!(!probe.is_usage_only_chunk());
    }
}
