//! Upstream error answers in the client's format: the provider's message is kept, its type
//! and status mapped (Anthropic's 529 `overloaded_error` becomes 503 for OpenAI clients; a
//! prompt over the context window gets OpenAI's `context_length_exceeded` code).

use bytes::Bytes;
use http::StatusCode;

use crate::Codec;
use sluice_core::endpoint::Dialect;
use sluice_core::error::{
    anthropic_error_body, anthropic_error_type, aws_error_body, aws_error_type, error_body,
    google_error_body,
};

/// Longest upstream error message relayed when the body is not in the expected shape.
const MAX_RAW_MESSAGE: usize = 2000;

/// Translate an upstream error answer from the provider's format to the client's.
pub fn translate<C: Codec + ?Sized>(
    from: &C,
    to: Dialect,
    status: StatusCode,
    body: &[u8],
) -> (StatusCode, Bytes) {
    let (kind, message) = from.parse_error(body).unwrap_or_else(|| {
        let text = String::from_utf8_lossy(body);
        (String::new(), text.chars().take(MAX_RAW_MESSAGE).collect())
    });
    match to {
        Dialect::OpenAi => {
            // 529 is Anthropic's own "overloaded"; OpenAI clients know 503.
            let status = if status.as_u16() == 529 {
                StatusCode::SERVICE_UNAVAILABLE
            } else {
                status
            };
            let (kind, code) = openai_type_and_code(status, &kind, &message);
            (status, error_body(&message, kind, None, code))
        }
        Dialect::Anthropic => (
            status,
            anthropic_error_body(anthropic_error_type(status), &message),
        ),
        Dialect::Gemini => {
            let status = if status.as_u16() == 529 {
                StatusCode::SERVICE_UNAVAILABLE
            } else {
                status
            };
            (status, google_error_body(status, &message))
        }
        Dialect::Converse => {
            let status = if status.as_u16() == 529 {
                StatusCode::SERVICE_UNAVAILABLE
            } else {
                status
            };
            (status, aws_error_body(aws_error_type(status), &message))
        }
    }
}

/// OpenAI's `error.type` and `error.code` for a provider's error.
fn openai_type_and_code(
    status: StatusCode,
    kind: &str,
    message: &str,
) -> (&'static str, &'static str) {
    let lower = message.to_ascii_lowercase();
    if lower.contains("prompt is too long")
        || lower.contains("context window")
        || lower.contains("context length")
        || lower.contains("maximum context")
        || lower.contains("input is too long")
        || lower.contains("exceeds the maximum number of tokens")
    {
        return ("invalid_request_error", "context_length_exceeded");
    }
    // Anthropic's error types, Google's statuses, then the HTTP status.
    match (status.as_u16(), kind) {
        (_, "overloaded_error" | "UNAVAILABLE") | (503 | 529, _) => {
            ("service_unavailable_error", "overloaded")
        }
        (_, "rate_limit_error" | "RESOURCE_EXHAUSTED") | (429, _) => {
            ("rate_limit_error", "rate_limit_exceeded")
        }
        (_, "authentication_error" | "UNAUTHENTICATED") | (401, _) => {
            ("authentication_error", "invalid_api_key")
        }
        (_, "permission_error" | "PERMISSION_DENIED") | (403, _) => {
            ("permission_error", "permission_denied")
        }
        (_, "not_found_error" | "NOT_FOUND") | (404, _) => {
            ("invalid_request_error", "model_not_found")
        }
        (_, "request_too_large") | (413, _) => ("invalid_request_error", "request_too_large"),
        (400..=499, _) => ("invalid_request_error", "invalid_request"),
        _ => ("api_error", "upstream_error"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{AnthropicMessages, OpenAiChat};

    fn json(b: &Bytes) -> serde_json::Value {
        serde_json::from_slice(b).unwrap()
    }

    #[test]
    fn overloaded_becomes_503_keeping_the_message() {
        let body =
            br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        let (s, b) = translate(
            &AnthropicMessages::DIRECT,
            Dialect::OpenAi,
            StatusCode::from_u16(529).unwrap(),
            body,
        );
        assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE);
        let v = json(&b);
        assert_eq!(v["error"]["message"], "Overloaded");
        assert_eq!(v["error"]["type"], "service_unavailable_error");
    }

    #[test]
    fn context_too_long_gets_openai_code() {
        let body = br#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208000 tokens > 200000 maximum"}}"#;
        let (s, b) = translate(
            &AnthropicMessages::DIRECT,
            Dialect::OpenAi,
            StatusCode::BAD_REQUEST,
            body,
        );
        assert_eq!(s, StatusCode::BAD_REQUEST);
        assert_eq!(json(&b)["error"]["code"], "context_length_exceeded");
    }

    #[test]
    fn rate_limits_and_auth_both_ways() {
        let body = br#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#;
        let (s, b) = translate(
            &AnthropicMessages::DIRECT,
            Dialect::OpenAi,
            StatusCode::TOO_MANY_REQUESTS,
            body,
        );
        assert_eq!(s, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(json(&b)["error"]["code"], "rate_limit_exceeded");
        let body = br#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}"#;
        let (s, b) = translate(
            &OpenAiChat,
            Dialect::Anthropic,
            StatusCode::UNAUTHORIZED,
            body,
        );
        assert_eq!(s, StatusCode::UNAUTHORIZED);
        let v = json(&b);
        assert_eq!(v["type"], "error");
        assert_eq!(v["error"]["type"], "authentication_error");
        assert_eq!(v["error"]["message"], "Incorrect API key provided");
        let (_, b) = translate(
            &OpenAiChat,
            Dialect::Anthropic,
            StatusCode::FORBIDDEN,
            b"nope",
        );
        assert_eq!(json(&b)["error"]["type"], "permission_error");
        assert_eq!(json(&b)["error"]["message"], "nope");
    }
}
