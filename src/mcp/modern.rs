//! MCP's stateless revision (`2026-07-28`, "modern"): no `initialize`, no session. Every
//! request carries its protocol version and client capabilities in `params._meta`, mirrored in
//! the `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` headers, which must match the body;
//! `server/discover` tells a client what sluice speaks. Every result carries `resultType`, the
//! server's identity in `_meta`, and (lists, reads, discover) caching hints.
//!
//! A request is modern when its `MCP-Protocol-Version` header names a version that is not one
//! of the handshake era's (as the official SDKs route it), or when it is `server/discover`.
//! Legacy clients (and dual-era clients talking to a legacy server) keep the handshake path in
//! `mod.rs`. The work of a request is the same for both eras (`calls::Ctx`): permissions,
//! routing to the tool servers (still spoken to in the handshake era), records; only its
//! envelope and cancellation differ. A modern client cancels by closing the response, which
//! drops the call's future and tells the tool server (`calls::CancelOnDrop`).

use std::sync::Arc;

use base64::Engine as _;
use http::{HeaderMap, HeaderName, Response, StatusCode};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use tokio_util::sync::CancellationToken;

use sluice_mcp::jsonrpc::{self, code, Kind, Message};
use sluice_mcp::upstream::Reply;

use super::calls::{Answer, Ctx, Env, SpanParent};
use super::{relay, McpGateway, Who, VERSIONS};
use crate::http::ResponseBody;
use crate::server::AppState;

/// The modern revisions sluice serves.
pub(super) const MODERN: [&str; 1] = ["2026-07-28"];

/// The error codes the modern revision defines (its reserved range).
mod modern_code {
    /// The mirrored headers do not match the body, or one is missing.
    pub(super) const HEADER_MISMATCH: i64 = -32020;
    /// The request's protocol version is not one the server speaks.
    pub(super) const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
}

static PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
static METHOD: HeaderName = HeaderName::from_static("mcp-method");
static NAME: HeaderName = HeaderName::from_static("mcp-name");

const VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";
const CAPABILITIES_KEY: &str = "io.modelcontextprotocol/clientCapabilities";
const SERVER_INFO_KEY: &str = "io.modelcontextprotocol/serverInfo";

/// How long a client may keep a list sluice answered: the list depends on the config and the
/// key's permissions, which change rarely; a call outside a stale list is refused anyway.
const LIST_TTL_MS: u64 = 60_000;

/// Whether this request speaks the stateless revision.
pub(super) fn is_modern(headers: &HeaderMap, msg: &Message<'_>) -> bool {
    match headers
        .get(&PROTOCOL_VERSION)
        .map(|v| v.to_str().unwrap_or(""))
    {
        Some(v) => !VERSIONS.contains(&v),
        None => msg.method == Some("server/discover"),
    }
}

/// What a modern message comes to: an HTTP status and a JSON-RPC body (`None`: no body).
pub(super) struct Outgoing {
    pub(super) status: StatusCode,
    pub(super) body: Option<String>,
}

impl Outgoing {
    /// The JSON-RPC text alone (an event of a relayed call's stream, whose status is sent).
    pub(super) fn text(self) -> String {
        self.body.unwrap_or_default()
    }

    /// As an HTTP response.
    pub(super) fn into_response(self) -> Response<ResponseBody> {
        match self.body {
            Some(text) => super::json(self.status, text),
            None => super::empty(self.status),
        }
    }
}

/// Answer one modern message: the response of the call it runs, or (`Err`) what to answer
/// when there is none to run (a refusal, a notification, discovery).
#[expect(
    clippy::too_many_arguments,
    reason = "the request's pieces, as the handshake path has them"
)]
pub(super) async fn serve(
    state: &AppState,
    gw: &Arc<McpGateway>,
    who: Who,
    server: Option<&str>,
    headers: &HeaderMap,
    msg: &Message<'_>,
    request_id: &http::HeaderValue,
    route: &'static str,
) -> Result<Response<ResponseBody>, Outgoing> {
    let id = msg.id.map_or("null", RawValue::get);
    let method = msg.method.unwrap_or_default();
    match msg.kind() {
        // The revision defines no client notification over HTTP (a client cancels by closing
        // the stream); one sent anyway is acknowledged and dropped, as the SDKs do.
        Kind::Notification => {
            return Err(Outgoing {
                status: StatusCode::ACCEPTED,
                body: None,
            })
        }
        Kind::Request => {}
        Kind::Response | Kind::Invalid => {
            return Err(error(id, code::INVALID_REQUEST, "expected a request", None));
        }
    }
    check(headers, msg, method).map_err(|e| e.reply(id))?;
    let answer = match method {
        "server/discover" => Answer::Result(discover(gw, server)),
        // Removed by the revision (and the handshake with it).
        "initialize" | "ping" | "logging/setLevel" | "subscriptions/listen" => {
            return Err(error(
                id,
                code::METHOD_NOT_FOUND,
                &format!("{method} is not served at this protocol revision"),
                None,
            ));
        }
        _ => {
            let env = Env::of(state);
            let trace = state.recorder().callbacks().tracing().then(|| {
                SpanParent::Client(Box::new(
                    sluice_core::trace_context::TraceContext::from_headers(headers),
                ))
            });
            let params = msg.params.map(handshake_params);
            // A call that asks for progress, from a client that reads event streams: relayed.
            if let Some(token) = relay::wanted(headers, params.as_deref()) {
                return Ok(relay::answer(relay::Call {
                    env,
                    gw: Arc::clone(gw),
                    who,
                    server: server.map(str::to_owned),
                    request_id: request_id.clone(),
                    route,
                    trace,
                    session: None,
                    era: relay::Era::Stateless,
                    id: id.to_owned(),
                    method: method.to_owned(),
                    params,
                    token,
                }));
            }
            let ctx = Ctx {
                env: &env,
                gw,
                who: &who,
                server,
                request_id: request_id.clone(),
                route,
                trace,
                // No session to cancel through: the client closes the response instead, which
                // drops this future.
                cancelled: CancellationToken::new(),
                notes: None,
            };
            ctx.request(method, params.as_deref()).await
        }
    };
    Err(answered(id, method, answer))
}

/// The response a request's work came to, in the revision's envelope.
pub(super) fn answered(id: &str, method: &str, answer: Answer) -> Outgoing {
    match answer {
        Answer::Result(r) => complete(id, method, &r),
        Answer::Raw(Reply::Result(r)) => complete(id, method, r.get()),
        Answer::Raw(Reply::Error(e)) => Outgoing {
            status: status_of(error_code(e.get())),
            body: Some(jsonrpc::error_object(id, e.get())),
        },
        Answer::Error(c, m) => error(id, c, &m, None),
    }
}

/// Why a modern request was refused before any work.
#[derive(Debug, PartialEq)]
enum Refusal {
    /// A mirrored header is missing or disagrees with the body.
    Mismatch(String),
    /// The envelope is malformed (no `_meta` pair).
    Envelope(String),
    /// A version sluice does not speak.
    Unsupported(String),
}

impl Refusal {
    fn reply(self, id: &str) -> Outgoing {
        match self {
            Self::Mismatch(m) => error(id, modern_code::HEADER_MISMATCH, &m, None),
            Self::Envelope(m) => error(id, code::INVALID_PARAMS, &m, None),
            Self::Unsupported(requested) => {
                let supported: Vec<&str> = MODERN.iter().chain(VERSIONS.iter()).copied().collect();
                let data = json!({"supported": supported, "requested": requested});
                error(
                    id,
                    modern_code::UNSUPPORTED_PROTOCOL_VERSION,
                    "Unsupported protocol version",
                    Some(data),
                )
            }
        }
    }
}

/// The validation ladder: the `_meta` envelope, the mirrored headers, then the version.
fn check(headers: &HeaderMap, msg: &Message<'_>, method: &str) -> Result<(), Refusal> {
    #[derive(Deserialize)]
    struct Params<'a> {
        #[serde(rename = "_meta")]
        meta: Option<Map<String, Value>>,
        #[serde(borrow)]
        name: Option<std::borrow::Cow<'a, str>>,
        #[serde(borrow)]
        uri: Option<std::borrow::Cow<'a, str>>,
    }
    let params = msg
        .params
        .and_then(|p| serde_json::from_str::<Params<'_>>(p.get()).ok());
    let meta = params.as_ref().and_then(|p| p.meta.as_ref());
    let Some(meta) =
        meta.filter(|m| m.contains_key(VERSION_KEY) && m.contains_key(CAPABILITIES_KEY))
    else {
        return Err(Refusal::Envelope(format!(
            "params._meta must carry {VERSION_KEY:?} and {CAPABILITIES_KEY:?}"
        )));
    };
    let version = meta.get(VERSION_KEY).and_then(Value::as_str);
    let header = |name: &HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
    if header(&PROTOCOL_VERSION).is_none() || header(&PROTOCOL_VERSION) != version {
        return Err(Refusal::Mismatch(
            "MCP-Protocol-Version header does not match params._meta's protocol version".into(),
        ));
    }
    if header(&METHOD) != Some(method) {
        return Err(Refusal::Mismatch(
            "Mcp-Method header does not match the request's method".into(),
        ));
    }
    let named = match method {
        "tools/call" | "prompts/get" => params.as_ref().and_then(|p| p.name.as_deref()),
        "resources/read" => params.as_ref().and_then(|p| p.uri.as_deref()),
        _ => None,
    };
    if let Some(body) = named {
        if header(&NAME).and_then(decode_header_value).as_deref() != Some(body) {
            return Err(Refusal::Mismatch(
                "Mcp-Name header does not match the request's name".into(),
            ));
        }
    }
    match version {
        Some(v) if MODERN.contains(&v) => Ok(()),
        Some(v) => Err(Refusal::Unsupported(v.chars().take(64).collect())),
        None => Err(Refusal::Envelope(format!("{VERSION_KEY} must be a string"))),
    }
}

/// A modern request's params as a handshake-era tool server takes them: sluice speaks the
/// handshake revisions upstream (one session per server), and such a server refuses a request
/// carrying the stateless envelope, so its `io.modelcontextprotocol/*` members leave `_meta`
/// (the rest of `_meta`, a progress token, stays).
fn handshake_params(params: &RawValue) -> Box<RawValue> {
    let Ok(mut p) = serde_json::from_str::<Map<String, Value>>(params.get()) else {
        return params.to_owned();
    };
    if let Some(Value::Object(meta)) = p.get_mut("_meta") {
        meta.retain(|k, _| !k.starts_with("io.modelcontextprotocol/"));
        if meta.is_empty() {
            p.remove("_meta");
        }
    }
    serde_json::value::to_raw_value(&p).unwrap_or_else(|_| params.to_owned())
}

/// A header value as sent: verbatim, or the UTF-8 inside the `=?base64?…?=` sentinel
/// (canonical base64 only; a malformed one matches nothing).
fn decode_header_value(v: &str) -> Option<String> {
    let Some(payload) = v
        .strip_prefix("=?base64?")
        .and_then(|r| r.strip_suffix("?="))
    else {
        return Some(v.to_owned());
    };
    let engine = base64::engine::general_purpose::STANDARD;
    let bytes = engine.decode(payload).ok()?;
    if engine.encode(&bytes) != payload {
        return None;
    }
    String::from_utf8(bytes).ok()
}

/// `server/discover`'s result (its envelope fields are added by [`complete`]).
fn discover(gw: &McpGateway, server: Option<&str>) -> String {
    let mut capabilities = json!({"tools": {}, "prompts": {}});
    if server.is_some() {
        capabilities["resources"] = json!({});
    }
    let supported: Vec<&str> = MODERN.iter().chain(VERSIONS.iter()).copied().collect();
    let mut v = json!({"supportedVersions": supported, "capabilities": capabilities});
    if let Some(i) = super::instructions(gw, server) {
        v["instructions"] = Value::String(i);
    }
    v.to_string()
}

/// A result as the revision wants it: `resultType` (`complete` unless the server said
/// otherwise), sluice's identity in `_meta`, and the caching hints of cacheable methods.
fn complete(id: &str, method: &str, result: &str) -> Outgoing {
    let mut r = match serde_json::from_str::<Map<String, Value>>(result) {
        Ok(r) => r,
        Err(_) => {
            return error(
                id,
                code::INTERNAL_ERROR,
                "the tool server's result is not a JSON object",
                None,
            )
        }
    };
    r.entry("resultType")
        .or_insert_with(|| Value::String("complete".into()));
    let meta = r.entry("_meta").or_insert_with(|| json!({}));
    if let Some(meta) = meta.as_object_mut() {
        meta.insert(
            SERVER_INFO_KEY.into(),
            json!({"name": "sluice", "version": env!("CARGO_PKG_VERSION")}),
        );
    }
    let hints = match method {
        // The same for every caller of the route.
        "server/discover" => Some((3_600_000, "public")),
        // Per key (its permissions): a shared cache must not keep them.
        "tools/list" | "prompts/list" | "resources/list" | "resources/templates/list" => {
            Some((LIST_TTL_MS, "private"))
        }
        // A tool server's content: no promise of freshness.
        "resources/read" => Some((0, "private")),
        _ => None,
    };
    let input_required = r.get("resultType").and_then(Value::as_str) == Some("input_required");
    if let Some((ttl, scope)) = hints.filter(|_| !input_required) {
        r.entry("ttlMs").or_insert_with(|| json!(ttl));
        r.entry("cacheScope").or_insert_with(|| json!(scope));
    }
    Outgoing {
        status: StatusCode::OK,
        body: Some(jsonrpc::result(id, &Value::Object(r).to_string())),
    }
}

fn error(id: &str, c: i64, message: &str, data: Option<Value>) -> Outgoing {
    let body = match data {
        Some(d) => jsonrpc::error_object(
            id,
            &json!({"code": c, "message": message, "data": d}).to_string(),
        ),
        None => jsonrpc::error(id, c, message),
    };
    Outgoing {
        status: status_of(c),
        body: Some(body),
    }
}

/// The HTTP status the revision gives a JSON-RPC error code.
fn status_of(c: i64) -> StatusCode {
    match c {
        code::PARSE_ERROR
        | code::INVALID_REQUEST
        | code::INVALID_PARAMS
        | modern_code::HEADER_MISMATCH
        | -32021
        | modern_code::UNSUPPORTED_PROTOCOL_VERSION => StatusCode::BAD_REQUEST,
        code::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        _ => StatusCode::OK,
    }
}

/// A tool server's error object's code.
fn error_code(e: &str) -> i64 {
    #[derive(Deserialize)]
    struct E {
        code: i64,
    }
    serde_json::from_str::<E>(e).map_or(code::INTERNAL_ERROR, |e| e.code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn msg(text: &str) -> Message<'_> {
        Message::parse(text.as_bytes()).unwrap()
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    const CALL: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"gh-x","arguments":{},
        "_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;

    #[test]
    fn modern_by_header_or_discover() {
        let m = msg(CALL);
        assert!(is_modern(
            &headers(&[("mcp-protocol-version", "2026-07-28")]),
            &m
        ));
        assert!(is_modern(
            &headers(&[("mcp-protocol-version", "2031-01-01")]),
            &m
        ));
        assert!(!is_modern(
            &headers(&[("mcp-protocol-version", "2025-06-18")]),
            &m
        ));
        assert!(!is_modern(&HeaderMap::new(), &m));
        let d = msg(r#"{"jsonrpc":"2.0","id":1,"method":"server/discover"}"#);
        assert!(is_modern(&HeaderMap::new(), &d));
    }

    #[test]
    fn the_ladder_checks_envelope_headers_then_version() {
        let m = msg(CALL);
        let good = [
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "gh-x"),
        ];
        assert_eq!(check(&headers(&good), &m, "tools/call"), Ok(()));
        // The name base64-encoded in the sentinel form is the same name.
        let b64 = format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode("gh-x")
        );
        let encoded = [good[0], good[1], ("mcp-name", b64.as_str())];
        assert_eq!(check(&headers(&encoded), &m, "tools/call"), Ok(()));
        let wrong_name = [good[0], good[1], ("mcp-name", "gh-y")];
        assert!(matches!(
            check(&headers(&wrong_name), &m, "tools/call"),
            Err(Refusal::Mismatch(_))
        ));
        assert!(matches!(
            check(&headers(&good[..2]), &m, "tools/call"),
            Err(Refusal::Mismatch(_))
        ));
        let wrong_method = [good[0], ("mcp-method", "tools/list"), good[2]];
        assert!(matches!(
            check(&headers(&wrong_method), &m, "tools/call"),
            Err(Refusal::Mismatch(_))
        ));
        let bare = msg(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#);
        assert!(matches!(
            check(&headers(&good), &bare, "tools/list"),
            Err(Refusal::Envelope(_))
        ));
        let future = CALL.replace("2026-07-28", "2031-01-01");
        let f = msg(&future);
        let h = [("mcp-protocol-version", "2031-01-01"), good[1], good[2]];
        assert_eq!(
            check(&headers(&h), &f, "tools/call"),
            Err(Refusal::Unsupported("2031-01-01".into()))
        );
        let reply = Refusal::Unsupported("2031-01-01".into()).reply("1");
        assert_eq!(reply.status, StatusCode::BAD_REQUEST);
        let v: Value = serde_json::from_str(&reply.body.unwrap()).unwrap();
        assert_eq!(v["error"]["code"], -32022);
        assert_eq!(v["error"]["data"]["supported"][0], "2026-07-28");
        assert_eq!(v["error"]["data"]["requested"], "2031-01-01");
    }

    #[test]
    fn results_get_their_envelope() {
        let r = complete("1", "tools/list", r#"{"tools":[]}"#);
        let v: Value = serde_json::from_str(&r.body.unwrap()).unwrap();
        let result = &v["result"];
        assert_eq!(result["resultType"], "complete");
        assert_eq!(result["_meta"][SERVER_INFO_KEY]["name"], "sluice");
        assert_eq!(result["ttlMs"], LIST_TTL_MS);
        assert_eq!(result["cacheScope"], "private");
        let call = complete("1", "tools/call", r#"{"content":[],"_meta":{"k":1}}"#);
        let v: Value = serde_json::from_str(&call.body.unwrap()).unwrap();
        assert_eq!(
            v["result"]["_meta"]["k"], 1,
            "the server's own _meta is kept"
        );
        assert!(
            v["result"].get("ttlMs").is_none(),
            "a call is not cacheable"
        );
        let interim = complete("1", "resources/read", r#"{"resultType":"input_required"}"#);
        let v: Value = serde_json::from_str(&interim.body.unwrap()).unwrap();
        assert_eq!(v["result"]["resultType"], "input_required");
        assert!(v["result"].get("ttlMs").is_none());
        assert_eq!(decode_header_value("=?base64?!!?="), None);
        let p = RawValue::from_string(
            r#"{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","progressToken":1}}"#.into(),
        )
        .unwrap();
        let stripped: Value = serde_json::from_str(handshake_params(&p).get()).unwrap();
        assert_eq!(
            stripped,
            json!({"name": "x", "_meta": {"progressToken": 1}})
        );
        assert_eq!(status_of(code::METHOD_NOT_FOUND), StatusCode::NOT_FOUND);
        assert_eq!(status_of(-32003), StatusCode::OK);
    }
}
