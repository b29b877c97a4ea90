//! MCP's older HTTP+SSE transport (revision 2024-11-05) for clients that speak only it, on
//! LiteLLM's paths: `GET /mcp/sse` (every server the caller may use) or `GET
//! /mcp/{server}/sse` (one server alone) opens an event stream whose first event, `endpoint`,
//! names where to POST messages (`…/sse/messages?session_id=…`). Each POST is answered
//! `202 Accepted`; its response comes back on the stream as a `message` event.
//!
//! Authentication, permissions and each request's work are the streamable routes' own
//! (`super::enter`, `calls::Ctx::request`): the key is checked on the GET and on every POST,
//! and a POST with another key than the stream's finds no session (404). The session lives as
//! long as the stream: a client that goes away ends it and cancels its calls in flight.
//! Everything sent to the client goes through the session's one sender (`Session::outbox`)
//! into the stream; an idle stream carries a keep-alive comment every 15 seconds.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::stream;
use http::header::{HeaderValue, ALLOW, CACHE_CONTROL, CONTENT_TYPE};
use http::{Method, Request, Response, StatusCode};
use http_body::{Body, Frame};
use http_body_util::StreamBody;
use serde_json::value::RawValue;
use tokio::sync::mpsc;
use tokio::time::{Instant, Interval};
use tokio_util::sync::CancellationToken;

use sluice_core::error::ApiError;
use sluice_core::record::RequestRecord;
use sluice_mcp::jsonrpc::{self, code, Kind, Message};

use super::calls::{Ctx, Env, SpanParent};
use super::relay;
use super::sessions::Owner;
use super::{enter, Entry, McpGateway};
use crate::http::read_body;
use crate::http::{RelayError, ResponseBody};
use crate::server::{AppState, Snapshot};
use sluice_core::trace_context::TraceContext;
use sluice_mcp::upstream::Notes;

/// Messages waiting to go into one client's stream.
const OUTBOX: usize = 64;
/// A comment on a stream idle this long keeps proxies from closing it.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Which of the transport's two paths a request is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// `…/sse`: the event stream (GET).
    Stream,
    /// `…/sse/messages`: a client's message (POST).
    Messages,
}

/// Answer a request on `/mcp/sse`, `/mcp/sse/messages` (`server: None`) or their
/// `/mcp/{server}/…` forms.
pub async fn handle<B>(
    state: &AppState,
    snap: &Snapshot,
    server: Option<&str>,
    part: Part,
    req: Request<B>,
    record: &mut RequestRecord,
) -> Result<Response<ResponseBody>, ApiError>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let entry = enter(state, snap, server, &req, record).await?;
    let method = req.method().clone();
    match (part, &method) {
        (Part::Stream, &Method::GET) => Ok(open(entry, server, req.uri().path())),
        (Part::Messages, &Method::POST) => {
            let (parts, body) = req.into_parts();
            let Some(sid) = session_id(parts.uri.query()) else {
                let text = jsonrpc::error(
                    "null",
                    code::INVALID_REQUEST,
                    "no session_id: open the event stream first",
                );
                return Ok(super::json(StatusCode::BAD_REQUEST, text));
            };
            let body = read_body(body, &parts.headers, snap.max_body, snap.body_timeout).await?;
            let trace = state
                .recorder()
                .callbacks()
                .tracing()
                .then(|| TraceContext::from_headers(&parts.headers));
            let origin = Origin {
                request_id: record.request_id.clone(),
                route: record.route,
                trace,
            };
            Ok(message(state, entry, server, &sid, &body, origin).await)
        }
        (Part::Stream, _) => Ok(not_allowed("GET")),
        (Part::Messages, _) => Ok(not_allowed("POST")),
    }
}

/// Open a session on a new event stream; its first event names the messages endpoint (the
/// stream's own path, so a prefix such as `/v1` stays on it).
fn open(entry: Entry<'_>, server: Option<&str>, path: &str) -> Response<ResponseBody> {
    let Entry { gw, who, wall } = entry;
    let (tx, rx) = mpsc::channel(OUTBOX);
    let (sid, session) =
        gw.sessions
            .open_with(who.owner.clone(), server.map(Into::into), wall, Some(tx));
    let endpoint = format!("{}/messages?session_id={sid}", path.trim_end_matches('/'));
    let pump = Pump {
        first: Some(event("endpoint", &endpoint)),
        rx,
        ended: session.ended(),
        ping: tokio::time::interval_at(Instant::now() + KEEP_ALIVE, KEEP_ALIVE),
        _close: Close {
            gw: Arc::clone(gw),
            sid,
            owner: who.owner,
        },
    };
    let frames = stream::unfold(pump, |mut p| async move {
        let bytes = p.next().await?;
        Some((Ok::<_, RelayError>(Frame::data(bytes)), p))
    });
    let mut resp = Response::new(ResponseBody::shared(StreamBody::new(frames)));
    let h = resp.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    resp
}

/// One client's message on its session: answered `202 Accepted`, the response (if any) sent
/// into the stream. A request runs as its own task, so that the client may send more (its
/// cancellations among them) while it runs; it ends with the session.
async fn message(
    state: &AppState,
    entry: Entry<'_>,
    server: Option<&str>,
    sid: &str,
    body: &[u8],
    origin: Origin,
) -> Response<ResponseBody> {
    let Entry { gw, who, wall } = entry;
    let session = gw
        .sessions
        .get(sid, &who.owner, server, wall)
        .filter(|s| s.outbox().is_some());
    let Some(session) = session else {
        let text = jsonrpc::error("null", code::INVALID_REQUEST, "unknown or ended session");
        return super::json(StatusCode::NOT_FOUND, text);
    };
    let Some(outbox) = session.outbox().cloned() else {
        return super::empty(StatusCode::NOT_FOUND);
    };
    let Some(msg) = Message::parse(body) else {
        return super::json(StatusCode::BAD_REQUEST, super::not_one_message());
    };
    let method = msg.method.unwrap_or_default();
    let id = msg.id.map_or("null", RawValue::get);
    let now = match msg.kind() {
        Kind::Request if method == "initialize" => {
            Some(super::initialize(gw, server, id, msg.params))
        }
        Kind::Request if method == "server/discover" => Some(super::discover(id)),
        Kind::Request => {
            let call = Call {
                gw: Arc::clone(gw),
                who,
                server: server.map(Into::into),
                env: Env::of(state),
                origin,
                id: id.to_owned(),
                method: method.to_owned(),
                params: msg.params.map(ToOwned::to_owned),
            };
            tokio::spawn(call.run(session, outbox));
            return super::empty(StatusCode::ACCEPTED);
        }
        Kind::Notification => {
            super::notified(&session, method, msg.params);
            None
        }
        Kind::Response => None,
        Kind::Invalid => return super::json(StatusCode::BAD_REQUEST, super::invalid(id)),
    };
    if let Some(text) = now {
        if outbox.send(text).await.is_err() {
            return super::empty(StatusCode::NOT_FOUND);
        }
    }
    super::empty(StatusCode::ACCEPTED)
}

/// The POST that carried a request: what the records of its calls name.
struct Origin {
    request_id: HeaderValue,
    route: &'static str,
    /// Its trace context, when tracing is on (its calls' spans hang under it).
    trace: Option<TraceContext>,
}

/// A request taken off its POST, with what its work needs.
struct Call {
    gw: Arc<McpGateway>,
    who: super::Who,
    server: Option<String>,
    env: Env,
    origin: Origin,
    id: String,
    method: String,
    params: Option<Box<RawValue>>,
}

impl Call {
    async fn run(self, session: Arc<super::sessions::Session>, outbox: mpsc::Sender<String>) {
        let call = session.begin(&self.id);
        let cancelled = call.token();
        let token = relay::token(self.params.as_deref());
        let (notes, heard) = match token {
            Some(_) => {
                let (notes, heard) = Notes::channel(relay::NOTES_QUEUE);
                (Some(notes), Some(heard))
            }
            None => (None, None),
        };
        let ctx = Ctx {
            env: &self.env,
            gw: &self.gw,
            who: &self.who,
            server: self.server.as_deref(),
            request_id: self.origin.request_id.clone(),
            route: self.origin.route,
            trace: self
                .origin
                .trace
                .clone()
                .map(|t| SpanParent::Client(Box::new(t))),
            cancelled: cancelled.clone(),
            notes,
        };
        let answer = ctx.request(&self.method, self.params.as_deref());
        // The server's notifications about the call (a progress token was given) go into the
        // stream as they come, before the response; a client behind on reading loses them.
        let answer = match (heard, &token) {
            (Some(mut heard), Some(token)) => {
                tokio::pin!(answer);
                let a = loop {
                    tokio::select! {
                        biased;
                        Some(note) = heard.recv() => {
                            let _ = outbox.try_send(relay::for_client(&note, token));
                        }
                        a = &mut answer => break a,
                    }
                };
                while let Ok(note) = heard.try_recv() {
                    let _ = outbox.try_send(relay::for_client(&note, token));
                }
                a
            }
            _ => answer.await,
        };
        drop(call);
        // A cancelled request is not answered (the client said it no longer wants it).
        if !cancelled.is_cancelled() {
            let _ = outbox.send(answer.into_text(&self.id)).await;
        }
    }
}

/// What feeds one client's stream: the endpoint event, then messages from the outbox and
/// keep-alive comments, until the session ends.
struct Pump {
    first: Option<Bytes>,
    rx: mpsc::Receiver<String>,
    ended: CancellationToken,
    ping: Interval,
    _close: Close,
}

impl Pump {
    async fn next(&mut self) -> Option<Bytes> {
        if let Some(first) = self.first.take() {
            return Some(first);
        }
        tokio::select! {
            biased;
            () = self.ended.cancelled() => None,
            m = self.rx.recv() => {
                self.ping.reset();
                m.map(|text| event("message", &text))
            }
            _ = self.ping.tick() => Some(Bytes::from_static(b": keep-alive\n\n")),
        }
    }
}

/// Ends the session when its stream goes (the client left, or the stream ended).
struct Close {
    gw: Arc<McpGateway>,
    sid: String,
    owner: Owner,
}

impl Drop for Close {
    fn drop(&mut self) {
        self.gw.sessions.close(&self.sid, &self.owner);
    }
}

/// One event; `data` is one line (JSON text has no raw newlines; the endpoint has none).
fn event(name: &str, data: &str) -> Bytes {
    Bytes::from(format!("event: {name}\ndata: {data}\n\n"))
}

/// `session_id` from a query string.
fn session_id(query: Option<&str>) -> Option<String> {
    form_urlencoded::parse(query?.as_bytes())
        .find(|(k, _)| k == "session_id")
        .map(|(_, v)| v.into_owned())
        .filter(|v| !v.is_empty())
}

fn not_allowed(allow: &'static str) -> Response<ResponseBody> {
    let mut resp = super::empty(StatusCode::METHOD_NOT_ALLOWED);
    resp.headers_mut()
        .insert(ALLOW, HeaderValue::from_static(allow));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_and_events() {
        assert_eq!(session_id(Some("session_id=ab12")).as_deref(), Some("ab12"));
        assert_eq!(
            session_id(Some("x=1&session_id=c%2Bd")).as_deref(),
            Some("c+d")
        );
        assert_eq!(session_id(Some("session_id=")), None);
        assert_eq!(session_id(None), None);
        assert_eq!(
            event("endpoint", "/mcp/sse/messages?session_id=1"),
            "event: endpoint\ndata: /mcp/sse/messages?session_id=1\n\n"
        );
    }
}
