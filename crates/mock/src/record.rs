//! What `sluice mock --record` keeps of the inference requests it is sent, so that a test can
//! judge exactly what a gateway put on the wire (the conformance tests hold each recorded
//! body against the vendor's own request types). Off by default: a benchmark's mock pays
//! nothing for it.
//!
//! Kept: method, path, query, headers (names lowercased, credentials redacted, so a recording
//! can be printed in a test failure without leaking a key) and the body, parsed when it is
//! JSON, else only its length. `GET /mock/requests` lists them oldest first; `DELETE
//! /mock/requests` forgets them.

use std::collections::VecDeque;
use std::sync::Mutex;

use bytes::Bytes;
use http::request::Parts;
use serde::Serialize;
use serde_json::{Map, Value};

/// How many requests `--record` keeps: the newest, older ones dropped first. Enough for a
/// test's few calls between two reads, bounded so a long run cannot grow without end.
pub const RECORD_LIMIT: usize = 512;

/// Headers whose values are credentials: recorded as [`REDACTED`].
const SECRET_HEADERS: [&str; 4] = ["authorization", "x-api-key", "api-key", "x-goog-api-key"];

/// What a credential header's value is recorded as.
const REDACTED: &str = "<redacted>";

/// One request as the mock received it.
#[derive(Debug, Clone, Serialize)]
pub struct Recorded {
    /// Its place among all the requests recorded since the server started (from 1; not reset
    /// by a clear), so a reader can tell which requests are new.
    pub seq: u64,
    /// The HTTP method.
    pub method: String,
    /// The path, as sent (percent-encoding kept: Bedrock signs the encoded form).
    pub path: String,
    /// The query string without its `?`, if any.
    pub query: Option<String>,
    /// Lowercased names; a repeated header's values joined by `, `; credentials redacted.
    pub headers: Map<String, Value>,
    /// The body's length in bytes.
    pub body_bytes: usize,
    /// The body, when it parses as JSON.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body: Option<Value>,
}

impl Recorded {
    /// Record a request's head and body.
    pub fn of(parts: &Parts, body: &Bytes, seq: u64) -> Self {
        let mut headers = Map::new();
        for (name, value) in &parts.headers {
            let name = name.as_str();
            let value = if SECRET_HEADERS.contains(&name) {
                REDACTED.to_owned()
            } else {
                String::from_utf8_lossy(value.as_bytes()).into_owned()
            };
            match headers.get_mut(name) {
                Some(Value::String(seen)) if !SECRET_HEADERS.contains(&name) => {
                    seen.push_str(", ");
                    seen.push_str(&value);
                }
                Some(_) => {}
                None => {
                    headers.insert(name.to_owned(), Value::String(value));
                }
            }
        }
        Self {
            seq,
            method: parts.method.as_str().to_owned(),
            path: parts.uri.path().to_owned(),
            query: parts.uri.query().map(str::to_owned),
            headers,
            body_bytes: body.len(),
            body: serde_json::from_slice(body).ok(),
        }
    }
}

/// The bounded buffer of recorded requests, shared by the server's workers.
#[derive(Debug)]
pub struct Recorder {
    limit: usize,
    inner: Mutex<Kept>,
}

#[derive(Debug, Default)]
struct Kept {
    seq: u64,
    requests: VecDeque<Recorded>,
}

impl Recorder {
    /// A recorder keeping the newest `limit` requests (at least one).
    pub fn new(limit: usize) -> Self {
        Self {
            limit: limit.max(1),
            inner: Mutex::new(Kept::default()),
        }
    }

    /// Keep one request, dropping the oldest when full.
    pub fn record(&self, parts: &Parts, body: &Bytes) {
        // A panic elsewhere while holding the lock leaves the buffer whole: keep using it.
        let mut kept = sluice_core::lock::lock(&self.inner);
        kept.seq += 1;
        let entry = Recorded::of(parts, body, kept.seq);
        if kept.requests.len() == self.limit {
            kept.requests.pop_front();
        }
        kept.requests.push_back(entry);
    }

    /// The kept requests, oldest first, as a JSON array.
    pub fn list(&self) -> Bytes {
        let kept = sluice_core::lock::lock(&self.inner);
        let list: Vec<&Recorded> = kept.requests.iter().collect();
        // Maps of strings and JSON values always serialize.
        Bytes::from(serde_json::to_vec(&list).unwrap_or_else(|_| b"[]".to_vec()))
    }

    /// Forget every kept request (the sequence numbers go on).
    pub fn clear(&self) {
        sluice_core::lock::lock(&self.inner).requests.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(path: &str, headers: &[(&str, &str)]) -> Parts {
        let mut b = http::Request::post(path);
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        b.body(()).unwrap().into_parts().0
    }

    #[test]
    fn keeps_the_newest_with_secrets_redacted() {
        let r = Recorder::new(2);
        let head = parts(
            "/v1beta/models/m:streamGenerateContent?alt=sse",
            &[
                ("Authorization", "Bearer sk-secret"),
                ("x-goog-api-key", "g-secret"),
                ("X-Custom", "a"),
                ("x-custom", "b"),
            ],
        );
        r.record(&head, &Bytes::from_static(br#"{"contents":[]}"#));
        r.record(&head, &Bytes::from_static(b"\x00not json"));
        r.record(&parts("/v1/messages", &[]), &Bytes::from_static(b"{}"));
        let list: Value = serde_json::from_slice(&r.list()).unwrap();
        let list = list.as_array().unwrap();
        assert_eq!(list.len(), 2, "the oldest was dropped");
        let first = &list[0];
        assert_eq!(first["seq"], 2);
        assert_eq!(first["path"], "/v1beta/models/m:streamGenerateContent");
        assert_eq!(first["query"], "alt=sse");
        assert_eq!(first["headers"]["authorization"], REDACTED);
        assert_eq!(first["headers"]["x-goog-api-key"], REDACTED);
        assert_eq!(first["headers"]["x-custom"], "a, b");
        assert_eq!(first["body_bytes"], 9);
        assert!(
            first.get("body").is_none(),
            "a body that is not JSON is omitted"
        );
        assert!(!String::from_utf8_lossy(&r.list()).contains("secret"));
        assert_eq!(list[1]["body"], serde_json::json!({}));
        assert_eq!(list[1]["query"], Value::Null);
        r.clear();
        assert_eq!(&r.list()[..], b"[]");
        r.record(&parts("/v1/embeddings", &[]), &Bytes::new());
        let list: Value = serde_json::from_slice(&r.list()).unwrap();
        assert_eq!(list[0]["seq"], 4, "sequence numbers survive a clear");
    }
}
