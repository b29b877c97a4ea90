//! The MCP gateway's endpoint: `/mcp` (every tool server the caller may use, tool names
//! prefixed by server) and `/mcp/{server}` (one server alone, names as it gives them), MCP's
//! streamable HTTP transport, in the handshake revisions (`initialize`, `Mcp-Session-Id`) and
//! the stateless one (`modern.rs`).
//!
//! A POST carries one JSON-RPC message:
//! 3. authenticate: the virtual or master key (`Authorization: Bearer`, `x-api-key`) through
//!    the same `auth::Gate` as model traffic; upstream tool credentials never come from here;
//! 4. read the body (the same size limit); a stateless-revision message goes to `modern.rs`;
//! 5. the session: `initialize` opens one (its id in `Mcp-Session-Id`), every other request
//!    must name one the same key opened on the same route (or, in a fleet, another instance
//!    opened: `shared.rs`);
//! 6. permissions: the key's and its team's `object_permission` (`sluice_mcp::Access`) and the
//!    server's tool lists decide what `tools/list` shows and what `tools/call` may reach; a
//!    call outside them is refused and recorded;
//! 7. one exchange with the tool server (bounded in time and size; a client's
//!    `notifications/cancelled`, or its leaving, is passed on as the server's own
//!    cancellation);
//! 9. a record per call that named a server (a `RequestRecord` with `tool` set: metrics, log
//!    line, spend log, callbacks, span).
//!
//! GET (a server-initiated event stream) is not offered: 405, as the transport allows.
//! DELETE ends the session.

mod calls;
pub mod legacy;
mod modern;
mod relay;
pub(crate) mod responses;
mod sessions;
pub(crate) mod shared;

use std::borrow::Cow;
use std::sync::Arc;

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, ALLOW, CONTENT_TYPE};
use http::{HeaderMap, Method, Request, Response, StatusCode};
use http_body::Body;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use sluice_core::error::{ApiError, KeyRefusal};
use sluice_core::limits::SubjectKind;
use sluice_core::record::RequestRecord;
use sluice_core::trace_context::TraceContext;
use sluice_mcp::jsonrpc::{self, code, Kind, Message};
use sluice_mcp::{Access, Hub, McpSettings};

use crate::auth::{Caller, KeyEntry};
use crate::http::{read_body, ResponseBody};
use crate::server::steps::{self, Authenticated, Presented};
use crate::server::{AppState, Snapshot};
use calls::{Ctx, Env, SpanParent};

pub use sessions::{Owner, Sessions};

static SESSION: HeaderName = HeaderName::from_static("mcp-session-id");

/// The protocol revisions of the handshake era sluice answers in, newest first. A client
/// asking for another gets the newest. The stateless revision is `modern.rs`'s.
const VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// JSON-RPC error code of a call the caller's permissions refuse (implementation-defined
/// server error range).
const FORBIDDEN: i64 = -32003;

/// The tool servers and the client sessions, made ready per config and carried over a reload
/// that leaves `mcp_servers` as it was.
#[derive(Debug)]
pub struct McpGateway {
    hub: Hub,
    sessions: Sessions,
}

impl crate::server::Part for McpGateway {
    /// The running gateway when `mcp_servers` is as it was (its processes and sessions stay
    /// up), else start the servers (stdio children on the current runtime); `None` without any.
    fn build(
        config: &sluice_config::Config,
        with: &crate::server::Building<'_>,
        before: Option<&Arc<Self>>,
    ) -> Result<Option<Arc<Self>>, String> {
        let settings = &config.mcp;
        if let Some(old) = before.filter(|old| old.settings() == settings) {
            return Ok(Some(Arc::clone(old)));
        }
        Ok((!settings.is_empty()).then(|| {
            Arc::new(Self {
                hub: Hub::start(settings, with.clients),
                sessions: Sessions::default(),
            })
        }))
    }
}

impl McpGateway {
    /// The settings it was started from.
    pub fn settings(&self) -> &McpSettings {
        self.hub.settings()
    }
}

/// Who is calling, with what they may use.
struct Who {
    owner: Owner,
    key: Option<Arc<KeyEntry>>,
    /// The key's and its team's permissions, those that name any rule.
    access: Vec<Arc<Access>>,
}

impl Who {
    fn rules(&self) -> Vec<&Access> {
        self.access.iter().map(AsRef::as_ref).collect()
    }

    fn allows_server(&self, server: &str) -> bool {
        self.access.iter().all(|a| a.allows_server(server))
    }
}

/// The first steps of every MCP route, either transport: the gateway (404 without one), the
/// caller authenticated (3.) and the route's server known.
struct Entry<'s> {
    gw: &'s Arc<McpGateway>,
    who: Who,
    wall: u64,
}

async fn enter<'s, B>(
    state: &AppState,
    snap: &'s Snapshot,
    server: Option<&str>,
    req: &Request<B>,
    record: &mut RequestRecord,
) -> Result<Entry<'s>, ApiError> {
    let Some(gw) = snap.features.mcp.as_ref() else {
        return Err(ApiError::RouteNotFound {
            method: req.method().to_string(),
            path: req.uri().path().chars().take(200).collect(),
        });
    };
    let presented = caller_key(req.headers());
    let Authenticated { caller, wall } =
        steps::authenticate(state, snap, Presented::by(req).with_key(&presented)).await?;
    let who = who(state, caller, wall)?;
    record.key = who.key.as_ref().map(|k| k.info.clone());
    if let Some(name) = server {
        if gw.hub.server(name).is_none() {
            return Err(ApiError::NotFound {
                what: "MCP server",
                id: name.chars().take(64).collect(),
            });
        }
    }
    Ok(Entry { gw, who, wall })
}

/// Answer a request on `/mcp` (`server: None`) or `/mcp/{server}`.
pub async fn handle<B>(
    state: &AppState,
    snap: &Snapshot,
    server: Option<&str>,
    req: Request<B>,
    record: &mut RequestRecord,
) -> Result<Response<ResponseBody>, ApiError>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let Entry { gw, who, wall } = enter(state, snap, server, &req, record).await?;
    let session_id = req
        .headers()
        .get(&SESSION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    match *req.method() {
        Method::POST => {}
        Method::DELETE => {
            let closed = match &session_id {
                Some(id) => shared::close(state, gw, id, &who.owner).await,
                None => false,
            };
            let status = if closed {
                StatusCode::OK
            } else {
                StatusCode::NOT_FOUND
            };
            record.status = status.as_u16();
            return Ok(empty(status));
        }
        _ => {
            let mut resp = empty(StatusCode::METHOD_NOT_ALLOWED);
            resp.headers_mut()
                .insert(ALLOW, HeaderValue::from_static("POST, DELETE"));
            return Ok(resp);
        }
    }
    // 4. The body.
    let (parts, body) = req.into_parts();
    let body = read_body(body, &parts.headers, snap.max_body, snap.body_timeout).await?;
    let Some(msg) = Message::parse(&body) else {
        return Ok(json(StatusCode::BAD_REQUEST, not_one_message()));
    };
    // The stateless revision: no session; its own envelope (`modern.rs`).
    if modern::is_modern(&parts.headers, &msg) {
        let resp = modern::serve(
            state,
            gw,
            who,
            server,
            &parts.headers,
            &msg,
            &record.request_id,
            record.route,
        )
        .await
        .unwrap_or_else(modern::Outgoing::into_response);
        record.status = resp.status().as_u16();
        return Ok(resp);
    }
    // 5. The session.
    let method = msg.method.unwrap_or_default();
    let id = msg.id.map_or("null", RawValue::get);
    if msg.kind() == Kind::Request && method == "initialize" {
        let sid = gw
            .sessions
            .open(who.owner.clone(), server.map(Into::into), wall);
        shared::opened(state, &sid, &who.owner, server).await;
        let mut resp = json(StatusCode::OK, initialize(gw, server, id, msg.params));
        if let Ok(v) = HeaderValue::from_str(&sid) {
            resp.headers_mut().insert(SESSION.clone(), v);
        }
        return Ok(resp);
    }
    let Some(sid) = session_id else {
        let text = jsonrpc::error(
            id,
            code::INVALID_REQUEST,
            "no Mcp-Session-Id: initialize first",
        );
        return Ok(json(StatusCode::BAD_REQUEST, text));
    };
    let session = match gw.sessions.get(&sid, &who.owner, server, wall) {
        Some(s) => Some(s),
        None => shared::adopt(state, gw, &sid, &who.owner, server, wall).await,
    };
    let Some(session) = session else {
        let text = jsonrpc::error(id, code::INVALID_REQUEST, "unknown or ended session");
        return Ok(json(StatusCode::NOT_FOUND, text));
    };
    match msg.kind() {
        Kind::Notification => {
            notified(&session, method, msg.params);
            Ok(empty(StatusCode::ACCEPTED))
        }
        Kind::Response => Ok(empty(StatusCode::ACCEPTED)),
        Kind::Invalid => Ok(json(StatusCode::BAD_REQUEST, invalid(id))),
        Kind::Request => {
            let trace =
                state.recorder().callbacks().tracing().then(|| {
                    SpanParent::Client(Box::new(TraceContext::from_headers(&parts.headers)))
                });
            if let Some(token) = relay::wanted(&parts.headers, msg.params) {
                return Ok(relay::answer(relay::Call {
                    env: Env::of(state),
                    gw: Arc::clone(gw),
                    who,
                    server: server.map(str::to_owned),
                    request_id: record.request_id.clone(),
                    route: record.route,
                    trace,
                    session: Some(session),
                    era: relay::Era::Handshake,
                    id: id.to_owned(),
                    method: method.to_owned(),
                    params: msg.params.map(ToOwned::to_owned),
                    token,
                }));
            }
            let call = session.begin(id);
            let env = Env::of(state);
            let ctx = Ctx {
                env: &env,
                gw,
                who: &who,
                server,
                request_id: record.request_id.clone(),
                route: record.route,
                trace,
                cancelled: call.token(),
                notes: None,
            };
            let text = ctx.request(method, msg.params).await.into_text(id);
            Ok(json(StatusCode::OK, text))
        }
    }
}

/// The answer to `initialize` (request `id`), in the client's revision when sluice speaks it.
fn initialize(
    gw: &McpGateway,
    server: Option<&str>,
    id: &str,
    params: Option<&RawValue>,
) -> String {
    let version = requested_version(params);
    jsonrpc::result(id, &initialize_result(gw, server, version))
}

/// The answer to the stateless revision's probe on the SSE transport, which is of the handshake
/// era: the SDKs then fall back to `initialize`. (Streamable HTTP serves it: `modern.rs`.)
fn discover(id: &str) -> String {
    jsonrpc::error(id, code::METHOD_NOT_FOUND, "use initialize")
}

/// A body that is not one JSON-RPC message.
fn not_one_message() -> String {
    jsonrpc::error(
        "null",
        code::INVALID_REQUEST,
        "expected one JSON-RPC message (batches are not part of this protocol revision)",
    )
}

fn invalid(id: &str) -> String {
    jsonrpc::error(
        id,
        code::INVALID_REQUEST,
        "neither a request nor a notification",
    )
}

/// A client's notification on its session: a cancellation reaches the call it names.
fn notified(session: &sessions::Session, method: &str, params: Option<&RawValue>) {
    if method == "notifications/cancelled" {
        if let Some(rid) = cancelled_id(params) {
            session.cancel(&rid);
        }
    }
}

/// The key an MCP client presents, as the one header the gate reads: LiteLLM's
/// `x-litellm-api-key` first (with or without `Bearer `: an MCP client may need
/// `Authorization` for something else), then the usual `Authorization`, `x-api-key`, `api-key`.
fn caller_key(headers: &HeaderMap) -> Cow<'_, HeaderMap> {
    let Some(key) = crate::auth::litellm_key(headers) else {
        return Cow::Borrowed(headers);
    };
    let mut out = HeaderMap::new();
    if let Ok(mut v) = HeaderValue::from_str(&format!("Bearer {key}")) {
        v.set_sensitive(true);
        out.insert(http::header::AUTHORIZATION, v);
    }
    Cow::Owned(out)
}

/// The caller, refused when its key is blocked or expired, or its team or user blocked.
fn who(state: &AppState, caller: Caller, wall: u64) -> Result<Who, ApiError> {
    let dir = state.gate().directory();
    Ok(match caller {
        Caller::Open => Who {
            owner: Owner::Open,
            key: None,
            access: Vec::new(),
        },
        Caller::Master => Who {
            owner: Owner::Master,
            key: None,
            access: Vec::new(),
        },
        Caller::Key(k) => {
            if k.blocked {
                return Err(ApiError::KeyRefused(KeyRefusal::Blocked));
            }
            if k.expires_ms.is_some_and(|t| wall >= t) {
                return Err(ApiError::KeyRefused(KeyRefusal::Expired));
            }
            let mut access: Vec<Arc<Access>> =
                dir.mcp_access(false, &k.info.hash).into_iter().collect();
            if let Some(team) = k.info.team_id.as_deref() {
                if dir
                    .holder(SubjectKind::Team, team)
                    .is_some_and(|t| t.blocked)
                {
                    return Err(ApiError::KeyRefused(KeyRefusal::TeamBlocked));
                }
                access.extend(dir.mcp_access(true, team));
            }
            if let Some(user) = k.info.user_id.as_deref() {
                if dir
                    .holder(SubjectKind::User, user)
                    .is_some_and(|u| u.blocked)
                {
                    return Err(ApiError::KeyRefused(KeyRefusal::UserBlocked));
                }
            }
            Who {
                owner: Owner::Key(k.info.hash.clone()),
                key: Some(k),
                access,
            }
        }
    })
}

/// What `initialize` and `server/discover` tell the model about the route.
fn instructions(gw: &McpGateway, server: Option<&str>) -> Option<String> {
    match server.and_then(|s| gw.hub.server(s)) {
        Some(s) => s.settings.description.clone(),
        None => Some(
            "sluice MCP gateway: tools, prompts and resources of every server you may use, named <server>-<name>".into(),
        ),
    }
}

fn initialize_result(gw: &McpGateway, server: Option<&str>, version: &str) -> String {
    let instructions = instructions(gw, server);
    let mut v = serde_json::json!({
        "protocolVersion": version,
        "capabilities": {
            "tools": { "listChanged": false },
            "prompts": { "listChanged": false },
            "resources": {},
        },
        "serverInfo": { "name": "sluice", "version": env!("CARGO_PKG_VERSION") },
    });
    if let Some(i) = instructions {
        v["instructions"] = Value::String(i);
    }
    v.to_string()
}

/// The revision to answer in: the client's when sluice speaks it, else the newest.
fn requested_version(params: Option<&RawValue>) -> &'static str {
    #[derive(Deserialize)]
    struct P<'a> {
        #[serde(rename = "protocolVersion", borrow)]
        v: Option<&'a str>,
    }
    let asked = params
        .and_then(|p| serde_json::from_str::<P<'_>>(p.get()).ok())
        .and_then(|p| p.v);
    VERSIONS
        .iter()
        .find(|v| Some(**v) == asked)
        .copied()
        .unwrap_or(VERSIONS[0])
}

/// `params.requestId` of a `notifications/cancelled`, as raw JSON text.
fn cancelled_id(params: Option<&RawValue>) -> Option<String> {
    #[derive(Deserialize)]
    struct P<'a> {
        #[serde(rename = "requestId", borrow)]
        id: &'a RawValue,
    }
    params
        .and_then(|p| serde_json::from_str::<P<'_>>(p.get()).ok())
        .map(|p| p.id.get().to_owned())
}

fn json(status: StatusCode, text: String) -> Response<ResponseBody> {
    let mut resp = Response::new(ResponseBody::full(Bytes::from(text)));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

fn empty(status: StatusCode) -> Response<ResponseBody> {
    let mut resp = Response::new(ResponseBody::full(Bytes::new()));
    *resp.status_mut() = status;
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.into()).unwrap()
    }

    #[test]
    fn litellm_key_header_first() {
        let mut h = HeaderMap::new();
        h.insert(
            "authorization",
            HeaderValue::from_static("Bearer upstream-oauth"),
        );
        assert_eq!(
            caller_key(&h).get("authorization").unwrap(),
            "Bearer upstream-oauth"
        );
        h.insert("x-litellm-api-key", HeaderValue::from_static("Bearer sk-1"));
        assert_eq!(caller_key(&h).get("authorization").unwrap(), "Bearer sk-1");
        h.insert("x-litellm-api-key", HeaderValue::from_static("sk-2"));
        assert_eq!(caller_key(&h).get("authorization").unwrap(), "Bearer sk-2");
    }

    #[test]
    fn versions_and_cancellations() {
        assert_eq!(
            requested_version(Some(&raw(r#"{"protocolVersion":"2025-06-18"}"#))),
            "2025-06-18"
        );
        assert_eq!(
            requested_version(Some(&raw(r#"{"protocolVersion":"2031-01-01"}"#))),
            VERSIONS[0]
        );
        assert_eq!(requested_version(None), VERSIONS[0]);
        assert_eq!(
            cancelled_id(Some(&raw(r#"{"requestId":"x","reason":"r"}"#))).as_deref(),
            Some("\"x\"")
        );
    }
}
