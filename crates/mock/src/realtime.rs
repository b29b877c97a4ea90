//! The mock's Realtime API session (`GET /v1/realtime`, and Azure's `/openai/realtime`): a
//! WebSocket that behaves like OpenAI's closely enough for a gateway to be tested against it.
//! It sends `session.created` when the session opens, answers `session.update` with
//! `session.updated`, and answers `response.create` with a few `response.output_text.delta`
//! events then `response.done` carrying usage. Everything else is ignored (nothing is echoed);
//! a ping is answered with a pong and a close with a close (both by tungstenite).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use http::header::{
    HeaderValue, CONNECTION, SEC_WEBSOCKET_ACCEPT, SEC_WEBSOCKET_KEY, SEC_WEBSOCKET_PROTOCOL,
    UPGRADE,
};
use http::{HeaderMap, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::Role;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

use crate::{error, MockBody, MockSettings};

/// Input tokens the mock charges each response (before the cached ones).
pub const INPUT_TOKENS: u64 = 12;
/// Of which cached.
pub const CACHED_TOKENS: u64 = 4;

/// Sessions opened so far, for ids.
static SESSIONS: AtomicU64 = AtomicU64::new(0);

/// Whether `path` is a realtime session path (OpenAI's with or without `/v1`, Azure's).
pub(crate) fn is_realtime(path: &str) -> bool {
    matches!(path, "/v1/realtime" | "/realtime" | "/openai/realtime")
}

/// Answer a WebSocket upgrade to a realtime session; the session runs on its own task once
/// hyper has switched protocols.
pub(crate) fn upgrade<B>(mut req: Request<B>, settings: &MockSettings) -> Response<MockBody>
where
    B: Send + 'static,
{
    if let Some(refused) = key_refused(settings, req.headers()) {
        return refused;
    }
    let Some(accept) = req
        .headers()
        .get(SEC_WEBSOCKET_KEY)
        .map(|k| derive_accept_key(k.as_bytes()))
    else {
        return error(
            StatusCode::BAD_REQUEST,
            "expected a WebSocket upgrade",
            None,
            "invalid_request",
        );
    };
    let model = query_value(req.uri().query(), "model")
        .or_else(|| query_value(req.uri().query(), "deployment"))
        .unwrap_or("mock-realtime")
        .to_owned();
    let protocol = req.headers().get(SEC_WEBSOCKET_PROTOCOL).and_then(|v| {
        v.to_str()
            .ok()?
            .split(',')
            .map(str::trim)
            .any(|p| p == "realtime")
            .then(|| HeaderValue::from_static("realtime"))
    });
    let tokens = u64::from(settings.response_tokens.max(1));
    let deltas = settings.chunks.clamp(1, 16);
    let on_upgrade = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        let Ok(upgraded) = on_upgrade.await else {
            return;
        };
        let ws = WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, None).await;
        session(ws, &model, tokens, deltas).await;
    });
    let mut resp = Response::new(MockBody::full(Bytes::new()));
    *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = resp.headers_mut();
    h.insert(CONNECTION, HeaderValue::from_static("upgrade"));
    h.insert(UPGRADE, HeaderValue::from_static("websocket"));
    if let Ok(v) = HeaderValue::from_str(&accept) {
        h.insert(SEC_WEBSOCKET_ACCEPT, v);
    }
    if let Some(p) = protocol {
        h.insert(SEC_WEBSOCKET_PROTOCOL, p);
    }
    resp
}

/// One session, until the client closes it or the connection goes.
async fn session<S>(mut ws: WebSocketStream<S>, model: &str, tokens: u64, deltas: u32)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let n = SESSIONS.fetch_add(1, Relaxed);
    let id = format!("sess_mock{n}");
    let created = event(
        "session.created",
        json!({"session": {"id": id, "model": model}}),
    );
    if ws.send(created).await.is_err() {
        return;
    }
    let mut responses = 0u64;
    while let Some(Ok(msg)) = ws.next().await {
        let Message::Text(text) = msg else {
            // Pings are answered by tungstenite; a close is answered when it is read.
            continue;
        };
        let kind = serde_json::from_str::<Value>(text.as_str())
            .ok()
            .and_then(|v| v.get("type").and_then(Value::as_str).map(str::to_owned));
        let out = match kind.as_deref() {
            Some("session.update") => vec![event(
                "session.updated",
                json!({"session": {"id": id, "model": model}}),
            )],
            Some("response.create") => {
                responses += 1;
                answer(&format!("resp_mock{n}_{responses}"), tokens, deltas)
            }
            _ => Vec::new(),
        };
        for m in out {
            if ws.send(m).await.is_err() {
                return;
            }
        }
    }
}

/// The events of one answer: text deltas, then `response.done` with usage.
fn answer(id: &str, tokens: u64, deltas: u32) -> Vec<Message> {
    let mut out = Vec::new();
    out.push(event(
        "response.created",
        json!({"response": {"id": id, "object": "realtime.response", "status": "in_progress"}}),
    ));
    for i in 0..deltas {
        out.push(event(
            "response.output_text.delta",
            json!({"response_id": id, "item_id": "item_mock", "output_index": 0,
                   "content_index": 0, "delta": format!("mock{i} ")}),
        ));
    }
    let usage = json!({
        "total_tokens": INPUT_TOKENS + tokens,
        "input_tokens": INPUT_TOKENS,
        "output_tokens": tokens,
        "input_token_details": {"cached_tokens": CACHED_TOKENS, "text_tokens": INPUT_TOKENS, "audio_tokens": 0},
        "output_token_details": {"text_tokens": tokens, "audio_tokens": 0},
    });
    out.push(event(
        "response.done",
        json!({"response": {"id": id, "object": "realtime.response", "status": "completed",
                            "output": [], "usage": usage}}),
    ));
    out
}

/// A server event: `type`, an `event_id`, and `fields`.
fn event(kind: &str, fields: Value) -> Message {
    let mut v = fields;
    if let Some(o) = v.as_object_mut() {
        o.insert("type".into(), Value::from(kind));
        o.insert(
            "event_id".into(),
            Value::from(format!("event_mock{}", fastrand::u64(..))),
        );
    }
    Message::text(v.to_string())
}

/// `name=` in a query string (undecoded: the mock's model names are plain).
fn query_value<'q>(query: Option<&'q str>, name: &str) -> Option<&'q str> {
    query?
        .split('&')
        .find_map(|p| p.strip_prefix(name)?.strip_prefix('='))
}

/// With an `api_key` set: the key as OpenAI (`Authorization: Bearer`) or Azure (`api-key`)
/// take it on a realtime upgrade.
fn key_refused(s: &MockSettings, headers: &HeaderMap) -> Option<Response<MockBody>> {
    let want = s.api_key.as_deref()?;
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let presented = [
        header("authorization").and_then(|v| v.strip_prefix("Bearer ")),
        header("api-key"),
    ];
    // Compared in constant time, like every secret sluice checks.
    if presented
        .iter()
        .flatten()
        .any(|p| sluice_net::secret_eq(p.as_bytes(), want.as_bytes()))
    {
        return None;
    }
    Some(error(
        StatusCode::UNAUTHORIZED,
        "Incorrect API key provided.",
        None,
        "invalid_api_key",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_ends_with_usage() {
        let events = answer("r1", 5, 2);
        assert_eq!(events.len(), 4);
        let Message::Text(last) = &events[3] else {
            panic!("text")
        };
        let v: Value = serde_json::from_str(last.as_str()).unwrap();
        assert_eq!(v["type"], "response.done");
        assert_eq!(v["response"]["usage"]["output_tokens"], 5);
        assert_eq!(query_value(Some("a=1&model=gpt"), "model"), Some("gpt"));
        assert!(is_realtime("/v1/realtime") && !is_realtime("/v1/realtimex"));
    }
}
