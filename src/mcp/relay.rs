//! A request answered as an event stream (streamable HTTP's other answer to a POST): the
//! tool server's notifications about the call (its progress, under the client's own progress
//! token, and its log messages) as events while it runs, then the response, then the end.
//! Only a client that gave a progress token and accepts `text/event-stream` gets it; every
//! other request keeps the single JSON answer.
//!
//! The call runs on a task of its own (the answer's body must outlive the handler). A client
//! that reads slowly loses progress events rather than growing a buffer; a client that leaves
//! closes the stream, which cancels the call as a `notifications/cancelled` would.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use http::{HeaderMap, Response, StatusCode};
use http_body::{Body, Frame};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;
use sluice_mcp::upstream::notes::PROGRESS;
use sluice_mcp::upstream::Notes;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::calls::{Ctx, Env, SpanParent};
use super::sessions::Session;
use super::{McpGateway, Who};
use crate::http::{RelayError, ResponseBody};

/// Notifications from the tool server not yet turned into events.
pub(super) const NOTES_QUEUE: usize = 32;
/// Events not yet read by the client.
const EVENTS_QUEUE: usize = 32;

/// The client's progress token (raw JSON) when it gave one and reads event streams: the
/// request is then answered by [`answer`].
pub(super) fn wanted(headers: &HeaderMap, params: Option<&RawValue>) -> Option<Box<RawValue>> {
    let streams = headers
        .get_all(http::header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("text/event-stream"));
    if !streams {
        return None;
    }
    token(params)
}

/// The progress token (raw JSON) the client's params carry, if any (one substring search
/// for the calls that carry none).
pub(super) fn token(params: Option<&RawValue>) -> Option<Box<RawValue>> {
    #[derive(Deserialize)]
    struct Meta<'a> {
        #[serde(rename = "progressToken", borrow)]
        token: Option<&'a RawValue>,
    }
    #[derive(Deserialize)]
    struct P<'a> {
        #[serde(rename = "_meta", borrow)]
        meta: Option<Meta<'a>>,
    }
    let params = params?;
    memchr::memmem::find(params.get().as_bytes(), b"\"progressToken\"")?;
    let p: P<'_> = serde_json::from_str(params.get()).ok()?;
    p.meta?.token.map(ToOwned::to_owned)
}

/// What the call's task owns.
pub(super) struct Call {
    pub(super) env: Env,
    pub(super) gw: Arc<McpGateway>,
    pub(super) who: Who,
    pub(super) server: Option<String>,
    /// The POST carrying it, its route and where its span hangs: what its record names.
    pub(super) request_id: HeaderValue,
    pub(super) route: &'static str,
    pub(super) trace: Option<SpanParent>,
    /// The handshake era's session (its cancellations reach the call); none in the stateless
    /// revision, where the client cancels by closing the stream.
    pub(super) session: Option<Arc<Session>>,
    /// Which revision's envelope the response takes.
    pub(super) era: Era,
    /// The client's JSON-RPC id (raw JSON).
    pub(super) id: String,
    pub(super) method: String,
    pub(super) params: Option<Box<RawValue>>,
    /// The client's progress token (raw JSON).
    pub(super) token: Box<RawValue>,
}

/// The protocol era a relayed call answers in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Era {
    /// `initialize` and sessions: the response as the work came to it.
    Handshake,
    /// `2026-07-28`: the response in the stateless revision's envelope (`modern.rs`).
    Stateless,
}

/// Start the call and answer with its event stream.
pub(super) fn answer(call: Call) -> Response<ResponseBody> {
    let (tx, rx) = mpsc::channel(EVENTS_QUEUE);
    tokio::spawn(run(call, tx));
    let body = ResponseBody::shared(Events { rx });
    let mut resp = Response::new(body);
    *resp.status_mut() = StatusCode::OK;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    resp.headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    resp
}

async fn run(mut call: Call, out: mpsc::Sender<Bytes>) {
    let (notes, mut heard) = Notes::channel(NOTES_QUEUE);
    let session = call.session.take();
    let in_flight = session.as_ref().map(|s| s.begin(&call.id));
    let cancel = in_flight
        .as_ref()
        .map_or_else(CancellationToken::new, |f| f.token());
    let ctx = Ctx {
        env: &call.env,
        gw: &call.gw,
        who: &call.who,
        server: call.server.as_deref(),
        request_id: call.request_id.clone(),
        route: call.route,
        trace: call.trace.take(),
        cancelled: cancel.clone(),
        notes: Some(notes),
    };
    let answer = ctx.request(&call.method, call.params.as_deref());
    tokio::pin!(answer);
    let answer = loop {
        tokio::select! {
            biased;
            Some(note) = heard.recv() => {
                // A client behind on reading loses progress, never the response.
                let _ = out.try_send(event(&for_client(&note, &call.token)));
            }
            a = &mut answer => break a,
            () = out.closed() => {
                // The client left: cancel the call, as its notifications/cancelled would.
                cancel.cancel();
                break answer.await;
            }
        }
    };
    while let Ok(note) = heard.try_recv() {
        let _ = out.try_send(event(&for_client(&note, &call.token)));
    }
    let text = match call.era {
        Era::Handshake => answer.into_text(&call.id),
        Era::Stateless => super::modern::answered(&call.id, &call.method, answer).text(),
    };
    let _ = out.send(event(&text)).await;
}

/// A notification as the client gets it: progress carries the client's own token again.
pub(super) fn for_client(note: &str, token: &RawValue) -> String {
    #[derive(Deserialize)]
    struct N {
        method: String,
        params: Option<serde_json::Map<String, Value>>,
    }
    let Ok(N {
        method,
        params: Some(mut params),
    }) = serde_json::from_str::<N>(note)
    else {
        return note.to_owned();
    };
    if method != PROGRESS {
        return note.to_owned();
    }
    let token = serde_json::from_str(token.get()).unwrap_or(Value::Null);
    params.insert("progressToken".into(), token);
    serde_json::json!({ "jsonrpc": "2.0", "method": method, "params": params }).to_string()
}

/// One SSE event carrying a message (a line break inside the JSON becomes another `data:`
/// line, which the reader joins back).
fn event(message: &str) -> Bytes {
    let mut out = String::with_capacity(message.len() + 24);
    out.push_str("event: message\n");
    for line in message.split('\n') {
        out.push_str("data: ");
        out.push_str(line.trim_end_matches('\r'));
        out.push('\n');
    }
    out.push('\n');
    Bytes::from(out)
}

/// The stream's body: events as the call's task sends them; it ends when the task is done.
struct Events {
    rx: mpsc::Receiver<Bytes>,
}

impl Body for Events {
    type Data = Bytes;
    type Error = RelayError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, RelayError>>> {
        self.get_mut()
            .rx
            .poll_recv(cx)
            .map(|e| e.map(|b| Ok(Frame::data(b))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.into()).unwrap()
    }

    #[test]
    fn only_a_token_and_an_event_stream_ask_for_it() {
        let mut h = HeaderMap::new();
        let p = raw(r#"{"name":"t","_meta":{"progressToken":"c-1"}}"#);
        assert!(wanted(&h, Some(&p)).is_none());
        h.insert(
            http::header::ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        assert_eq!(wanted(&h, Some(&p)).unwrap().get(), r#""c-1""#);
        assert!(wanted(&h, Some(&raw(r#"{"name":"t"}"#))).is_none());
        assert!(wanted(&h, None).is_none());
    }

    #[test]
    fn progress_gets_the_client_token_back() {
        let note = r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":17,"progress":0.5}}"#;
        let v: Value = serde_json::from_str(&for_client(note, &raw(r#""c-1""#))).unwrap();
        assert_eq!(v["params"]["progressToken"], "c-1");
        assert_eq!(v["params"]["progress"], 0.5);
        let log = r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}"#;
        assert_eq!(for_client(log, &raw("1")), log);
        assert_eq!(
            &event("{\"a\":\n1}")[..],
            b"event: message\ndata: {\"a\":\ndata: 1}\n\n"
        );
    }
}
