//! What kind of failure an upstream attempt ended in. Retries, fallbacks and cooldowns all
//! decide on this one classification, so that a 429 is treated as a 429 everywhere.

use std::time::Duration;

use http::header::RETRY_AFTER;
use http::{HeaderMap, StatusCode};
use serde::Deserialize;

/// The kinds LiteLLM's `retry_policy` and `allowed_fails_policy` name, plus the two transport
/// failures (timeouts and unreachable upstreams) that have no HTTP status of their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailureKind {
    /// 400 (or 422) for a reason other than the two below: the request itself is wrong.
    BadRequest,
    /// The prompt does not fit the model's context window.
    ContextWindowExceeded,
    /// The provider refused the content.
    ContentPolicy,
    /// 401 / 403: the deployment's credentials are wrong.
    Authentication,
    /// 404: the provider does not serve that model (or path).
    NotFound,
    /// 429.
    RateLimit,
    /// No answer (or first chunk) in time, or 408.
    Timeout,
    /// 5xx from the provider.
    Server,
    /// The connection failed or broke before an answer.
    Connection,
}

impl FailureKind {
    /// Every kind, for tables indexed by kind.
    pub const ALL: [Self; 9] = [
        Self::BadRequest,
        Self::ContextWindowExceeded,
        Self::ContentPolicy,
        Self::Authentication,
        Self::NotFound,
        Self::RateLimit,
        Self::Timeout,
        Self::Server,
        Self::Connection,
    ];

    /// Position in [`Self::ALL`].
    pub const fn index(self) -> usize {
        self as usize
    }

    /// Stable name for logs, metrics and the health view.
    pub const fn name(self) -> &'static str {
        match self {
            Self::BadRequest => "bad_request",
            Self::ContextWindowExceeded => "context_window_exceeded",
            Self::ContentPolicy => "content_policy",
            Self::Authentication => "authentication",
            Self::NotFound => "not_found",
            Self::RateLimit => "rate_limit",
            Self::Timeout => "timeout",
            Self::Server => "server",
            Self::Connection => "connection",
        }
    }

    /// LiteLLM's `retry_policy` / `allowed_fails_policy` key stem for this kind
    /// (`RateLimitError` → `RateLimitErrorRetries`, `RateLimitErrorAllowedFails`).
    pub const fn litellm_name(self) -> &'static str {
        match self {
            Self::BadRequest => "BadRequestError",
            Self::ContextWindowExceeded => "ContextWindowExceededError",
            Self::ContentPolicy => "ContentPolicyViolationError",
            Self::Authentication => "AuthenticationError",
            Self::NotFound => "NotFoundError",
            Self::RateLimit => "RateLimitError",
            Self::Timeout => "TimeoutError",
            Self::Server => "InternalServerError",
            Self::Connection => "APIConnectionError",
        }
    }

    /// Whether trying again (elsewhere in the group) can help when no policy says otherwise.
    /// A bad request, an oversized prompt or refused content fail the same way everywhere.
    pub const fn retryable_by_default(self) -> bool {
        matches!(
            self,
            Self::RateLimit | Self::Timeout | Self::Server | Self::Connection | Self::NotFound
        )
    }

    /// Whether one failure of this kind takes the deployment out at once: a 429 says the
    /// deployment is saturated, wrong credentials and a missing model will not heal by
    /// themselves. Other kinds count towards `allowed_fails`.
    pub const fn cools_down_at_once(self) -> bool {
        matches!(
            self,
            Self::RateLimit | Self::Authentication | Self::NotFound
        )
    }

    /// Whether the failure says something about the deployment's health at all. A bad request
    /// is the client's fault and must not cool a healthy deployment down.
    pub const fn counts_against_deployment(self) -> bool {
        !matches!(
            self,
            Self::BadRequest | Self::ContextWindowExceeded | Self::ContentPolicy
        )
    }

    /// Classify an upstream's error answer from its status and (small) body.
    pub fn from_response(status: StatusCode, body: &[u8]) -> Self {
        match status.as_u16() {
            400 | 413 | 422 => Self::from_bad_request(body),
            401 | 403 => Self::Authentication,
            404 => Self::NotFound,
            408 => Self::Timeout,
            429 => Self::RateLimit,
            _ if status.is_server_error() => Self::Server,
            _ => Self::BadRequest,
        }
    }

    /// A 400's reason, from the error body's `code`/`type` (OpenAI, Azure) or its message
    /// (providers that only say it in words).
    fn from_bad_request(body: &[u8]) -> Self {
        #[derive(Deserialize)]
        struct Outer<'a> {
            #[serde(borrow)]
            error: Option<Inner<'a>>,
        }
        #[derive(Deserialize)]
        struct Inner<'a> {
            #[serde(borrow, default)]
            code: Option<std::borrow::Cow<'a, str>>,
            #[serde(borrow, default, rename = "type")]
            kind: Option<std::borrow::Cow<'a, str>>,
            #[serde(borrow, default)]
            message: Option<std::borrow::Cow<'a, str>>,
        }
        let inner = serde_json::from_slice::<Outer<'_>>(body)
            .ok()
            .and_then(|o| o.error);
        let (code, kind, message) = match &inner {
            Some(i) => (
                i.code.as_deref().unwrap_or_default(),
                i.kind.as_deref().unwrap_or_default(),
                i.message.as_deref().unwrap_or_default(),
            ),
            None => ("", "", ""),
        };
        let lower = message.to_ascii_lowercase();
        if code == "context_length_exceeded"
            || lower.contains("context length")
            || lower.contains("context window")
            || lower.contains("maximum context")
            || lower.contains("prompt is too long")
            || lower.contains("too many tokens")
        {
            Self::ContextWindowExceeded
        } else if code == "content_policy_violation"
            || code == "content_filter"
            || kind == "content_policy_violation"
            || lower.contains("content management policy")
            || lower.contains("content policy")
        {
            Self::ContentPolicy
        } else {
            Self::BadRequest
        }
    }
}

/// How long the upstream asked to be left alone: `retry-after-ms` (OpenAI, Azure) or
/// `Retry-After` in seconds. HTTP dates are rare from APIs and ignored.
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let read = |name| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .and_then(|s| s.trim().parse::<f64>().ok())
            .filter(|n| n.is_finite() && *n >= 0.0)
    };
    read("retry-after-ms")
        .map(|ms| Duration::from_secs_f64(ms / 1000.0))
        .or_else(|| read(RETRY_AFTER.as_str()).map(Duration::from_secs_f64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_to_kinds() {
        let k = |s: u16| FailureKind::from_response(StatusCode::from_u16(s).unwrap(), b"{}");
        assert_eq!(k(400), FailureKind::BadRequest);
        assert_eq!(k(401), FailureKind::Authentication);
        assert_eq!(k(403), FailureKind::Authentication);
        assert_eq!(k(404), FailureKind::NotFound);
        assert_eq!(k(408), FailureKind::Timeout);
        assert_eq!(k(429), FailureKind::RateLimit);
        assert_eq!(k(500), FailureKind::Server);
        assert_eq!(k(503), FailureKind::Server);
        assert_eq!(k(529), FailureKind::Server);
    }

    #[test]
    fn bad_requests_are_read_for_their_reason() {
        let openai = br#"{"error":{"message":"This model's maximum context length is 8192 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;
        assert_eq!(
            FailureKind::from_response(StatusCode::BAD_REQUEST, openai),
            FailureKind::ContextWindowExceeded
        );
        let anthropic = br#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#;
        assert_eq!(
            FailureKind::from_response(StatusCode::BAD_REQUEST, anthropic),
            FailureKind::ContextWindowExceeded
        );
        let azure = br#"{"error":{"message":"The response was filtered due to the prompt triggering Azure OpenAI's content management policy.","type":null,"param":"prompt","code":"content_filter"}}"#;
        assert_eq!(
            FailureKind::from_response(StatusCode::BAD_REQUEST, azure),
            FailureKind::ContentPolicy
        );
        assert_eq!(
            FailureKind::from_response(StatusCode::BAD_REQUEST, b"not json"),
            FailureKind::BadRequest
        );
    }

    #[test]
    fn retry_after_in_either_spelling() {
        let mut h = HeaderMap::new();
        assert_eq!(retry_after(&h), None);
        h.insert(RETRY_AFTER, "2".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(2)));
        h.insert("retry-after-ms", "150".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_millis(150)));
        h.insert("retry-after-ms", "soon".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(2)));
    }

    #[test]
    fn kinds_are_indexed_in_order() {
        for (i, k) in FailureKind::ALL.iter().enumerate() {
            assert_eq!(k.index(), i);
        }
    }
}
