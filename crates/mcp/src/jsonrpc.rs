//! JSON-RPC 2.0 as MCP uses it, read borrowed: a message's id, method and params stay slices of
//! the bytes that carried them, so a tool's arguments or result pass through the gateway
//! without being parsed into values and written out again.

use serde::Deserialize;
use serde_json::value::RawValue;

/// The standard error codes sluice answers with.
pub mod code {
    /// The body is not JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// JSON, but not a JSON-RPC request.
    pub const INVALID_REQUEST: i64 = -32600;
    /// No such method (or not served here).
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// Bad params: an unknown tool, a missing name.
    pub const INVALID_PARAMS: i64 = -32602;
    /// The gateway or the tool server failed.
    pub const INTERNAL_ERROR: i64 = -32603;
}

/// One message, borrowed from its buffer.
#[derive(Debug, Deserialize)]
pub struct Message<'a> {
    /// `id`: present on requests and responses, absent on notifications.
    #[serde(borrow, default)]
    pub id: Option<&'a RawValue>,
    /// `method`: present on requests and notifications.
    #[serde(borrow, default)]
    pub method: Option<&'a str>,
    /// `params`.
    #[serde(borrow, default)]
    pub params: Option<&'a RawValue>,
    /// `result` (a response).
    #[serde(borrow, default)]
    pub result: Option<&'a RawValue>,
    /// `error` (a response).
    #[serde(borrow, default)]
    pub error: Option<&'a RawValue>,
}

impl<'a> Message<'a> {
    /// Read one message; `None` when the text is not a JSON object of that shape.
    pub fn parse(text: &'a [u8]) -> Option<Self> {
        // serde would also read a struct from an array; a batch is not one message.
        if text.trim_ascii_start().first() != Some(&b'{') {
            return None;
        }
        serde_json::from_slice(text).ok()
    }

    /// What kind of message this is.
    pub fn kind(&self) -> Kind {
        match (self.method.is_some(), self.id.is_some()) {
            (true, true) => Kind::Request,
            (true, false) => Kind::Notification,
            (false, true) => Kind::Response,
            (false, false) => Kind::Invalid,
        }
    }
}

/// What a message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A call that wants an answer.
    Request,
    /// A call that wants none.
    Notification,
    /// An answer.
    Response,
    /// Neither.
    Invalid,
}

/// A response carrying `result` (raw JSON) for the request `id` (raw JSON).
pub fn result(id: &str, result: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#)
}

/// A response carrying an error for the request `id`; the message is escaped.
pub fn error(id: &str, code: i64, message: &str) -> String {
    let message = serde_json::Value::from(message);
    format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":{code},"message":{message}}}}}"#)
}

/// A response carrying an error object (raw JSON, as a server wrote it) for the request `id`.
pub fn error_object(id: &str, error: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{error}}}"#)
}

/// A request with a numeric id, as sluice sends them upstream.
pub fn request(id: u64, method: &str, params: Option<&str>) -> String {
    let method = serde_json::Value::from(method);
    match params {
        Some(p) => format!(r#"{{"jsonrpc":"2.0","id":{id},"method":{method},"params":{p}}}"#),
        None => format!(r#"{{"jsonrpc":"2.0","id":{id},"method":{method}}}"#),
    }
}

/// A notification.
pub fn notification(method: &str, params: Option<&str>) -> String {
    let method = serde_json::Value::from(method);
    match params {
        Some(p) => format!(r#"{{"jsonrpc":"2.0","method":{method},"params":{p}}}"#),
        None => format!(r#"{{"jsonrpc":"2.0","method":{method}}}"#),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds() {
        let m = Message::parse(br#"{"jsonrpc":"2.0","id":7,"method":"tools/list"}"#).unwrap();
        assert_eq!(m.kind(), Kind::Request);
        assert_eq!(m.id.unwrap().get(), "7");
        let n =
            Message::parse(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).unwrap();
        assert_eq!(n.kind(), Kind::Notification);
        let r = Message::parse(br#"{"jsonrpc":"2.0","id":"a","result":{"x":[1]}}"#).unwrap();
        assert_eq!(r.kind(), Kind::Response);
        assert_eq!(r.result.unwrap().get(), r#"{"x":[1]}"#);
        assert!(Message::parse(b"[1]").is_none());
    }

    #[test]
    fn built_messages_parse_back() {
        let e = error("\"x\"", code::INVALID_PARAMS, "no \"tool\"");
        let v: serde_json::Value = serde_json::from_str(&e).unwrap();
        assert_eq!(v["error"]["message"], "no \"tool\"");
        assert_eq!(v["id"], "x");
        let r = request(3, "tools/call", Some(r#"{"name":"a"}"#));
        let m = Message::parse(r.as_bytes()).unwrap();
        assert_eq!(m.method, Some("tools/call"));
        assert_eq!(m.params.unwrap().get(), r#"{"name":"a"}"#);
        let n = notification("notifications/cancelled", None);
        assert_eq!(
            Message::parse(n.as_bytes()).unwrap().kind(),
            Kind::Notification
        );
    }
}
