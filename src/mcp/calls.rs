//! One MCP request's work once the session is known: the aggregated lists, a named call
//! routed to its server and checked against the caller's permissions, the exchange with the
//! tool server (cancelled there when the client cancels or leaves), and its record.

use std::sync::Arc;
use std::time::Instant;

use futures_util::future::join_all;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use bytes::Bytes;
use http::HeaderValue;
use sluice_core::limits::{self, Nanos};
use sluice_core::record::{Content, RequestRecord};
use sluice_core::trace_context::{new_span_id, TraceContext};
use sluice_mcp::hub::{self, Listing};
use sluice_mcp::jsonrpc;
use sluice_mcp::jsonrpc::code;
use sluice_mcp::upstream::{Notes, Reply, Server, UpstreamError};
use sluice_mcp::{CallStatus, ToolCall};
use sluice_telemetry::Recorder;
use tokio_util::sync::CancellationToken;

use super::{McpGateway, Who, FORBIDDEN};
use crate::auth::Directory;
use crate::fleet::{Fleet, Settlement};
use crate::server::AppState;

/// JSON-RPC error code MCP gives a resource that does not exist.
const RESOURCE_NOT_FOUND: i64 = -32002;

/// What a request comes to.
pub(super) enum Answer {
    /// A result sluice made (JSON text).
    Result(String),
    /// A tool server's answer, passed on.
    Raw(Reply),
    /// An error sluice answers with.
    Error(i64, String),
}

/// What a request's work needs of the gateway's state, owned: a request may run as a task of
/// its own (the SSE transport's), which outlives the HTTP request that started it.
#[derive(Clone)]
pub(super) struct Env {
    /// Where the calls' records go.
    pub(super) recorder: Recorder,
    /// The keys, teams and users whose budgets a priced tool checks and charges.
    pub(super) directory: Arc<Directory>,
    /// The fleet's shared counters, when there is a fleet.
    pub(super) fleet: Option<Arc<Fleet>>,
}

impl Env {
    pub(super) fn of(state: &AppState) -> Self {
        Self {
            recorder: state.recorder().clone(),
            directory: Arc::clone(state.gate().directory()),
            fleet: state.fleet().cloned(),
        }
    }
}

impl Answer {
    /// The JSON-RPC response to the client's request `id` (raw JSON).
    pub(super) fn into_text(self, id: &str) -> String {
        match self {
            Self::Result(r) => jsonrpc::result(id, &r),
            Self::Raw(Reply::Result(r)) => jsonrpc::result(id, r.get()),
            Self::Raw(Reply::Error(e)) => jsonrpc::error_object(id, e.get()),
            Self::Error(c, m) => jsonrpc::error(id, c, &m),
        }
    }
}

/// One request's surroundings.
pub(super) struct Ctx<'a> {
    pub(super) env: &'a Env,
    pub(super) gw: &'a McpGateway,
    pub(super) who: &'a Who,
    pub(super) server: Option<&'a str>,
    /// The HTTP request carrying the calls, and its route: what their records name.
    pub(super) request_id: HeaderValue,
    pub(super) route: &'static str,
    /// Where the calls' spans hang, when tracing is on.
    pub(super) trace: Option<SpanParent>,
    /// Fires when the client cancels this request (`notifications/cancelled`, or `DELETE`).
    pub(super) cancelled: CancellationToken,
    /// Where the tool server's notifications about this request go, when the client takes
    /// them (it gave a progress token and reads an event stream: `super::relay`).
    pub(super) notes: Option<Notes>,
}

/// Where a call's span hangs.
pub(super) enum SpanParent {
    /// A call on `/mcp`: its span stands for the request, under the client's span if it sent
    /// one (the context read from its `traceparent`).
    Client(Box<TraceContext>),
    /// A call the tool loop of a model request made: a child of that request's span.
    Request(Box<TraceContext>),
}

impl SpanParent {
    /// The context of one call's span.
    fn span(&self) -> TraceContext {
        match self {
            Self::Client(t) => TraceContext {
                span_id: new_span_id(),
                ..(**t).clone()
            },
            Self::Request(t) => TraceContext {
                parent: Some(t.span_id),
                span_id: new_span_id(),
                ..(**t).clone()
            },
        }
    }
}

/// How an exchange ended, for its record.
pub(super) struct Ended<'r> {
    pub(super) status: CallStatus,
    pub(super) error: Option<String>,
    /// The params sent and the result received, kept only with content logging on.
    pub(super) params: Option<&'r RawValue>,
    pub(super) result: Option<&'r RawValue>,
}

impl Ended<'_> {
    fn bare(status: CallStatus, error: Option<String>) -> Self {
        Self {
            status,
            error,
            params: None,
            result: None,
        }
    }
}

impl Ctx<'_> {
    pub(super) async fn request(&self, method: &str, params: Option<&RawValue>) -> Answer {
        match method {
            "ping" => Answer::Result("{}".into()),
            "tools/list" => self.list(Listing::Tools).await,
            "prompts/list" => self.list(Listing::Prompts).await,
            "resources/list" if self.server.is_none() => self.list(Listing::Resources).await,
            "resources/templates/list" if self.server.is_none() => {
                self.list(Listing::ResourceTemplates).await
            }
            "resources/read" if self.server.is_none() => self.read_resource(params).await,
            "tools/call" | "prompts/get" => self.call_named(method, params).await,
            _ => match self.server {
                // One server alone: everything else passes through to it.
                Some(name) => match self.gw.hub.server(name) {
                    Some(s) if self.who.allows_server(name) => {
                        self.forward(s, method, params, None).await
                    }
                    Some(s) => {
                        let why = format!("this key may not use MCP server \"{name}\"");
                        let subject = params.and_then(subject_of);
                        self.record(
                            s.name(),
                            method,
                            subject.as_deref(),
                            Instant::now(),
                            CallStatus::Refused,
                            Some(why.clone()),
                        );
                        Answer::Error(FORBIDDEN, why)
                    }
                    None => Answer::Error(code::INVALID_PARAMS, "no such server".into()),
                },
                None => Answer::Error(
                    code::METHOD_NOT_FOUND,
                    format!(
                        "{method} is served per server on /mcp/{{server}}; /mcp aggregates tools, prompts and resources"
                    ),
                ),
            },
        }
    }

    /// The servers this request may see: the route's one, or every one the caller may use.
    fn servers(&self) -> Vec<&Arc<Server>> {
        match self.server {
            Some(name) => self
                .gw
                .hub
                .server(name)
                .filter(|s| self.who.allows_server(s.name()))
                .into_iter()
                .collect(),
            None => self
                .gw
                .hub
                .servers()
                .iter()
                .filter(|s| self.who.allows_server(s.name()))
                .collect(),
        }
    }

    /// `tools/list` or `prompts/list` over the servers this request may see; a server that
    /// fails is left out (and logged) rather than failing the list.
    async fn list(&self, listing: Listing) -> Answer {
        let rules = self.who.rules();
        let prefix = self.server.is_none();
        let lists = join_all(self.servers().into_iter().map(|s| {
            let rules = &rules;
            async move {
                let keep = |name: &str| match listing {
                    Listing::Tools => hub::tool_allowed(s, name, rules),
                    Listing::Prompts | Listing::Resources | Listing::ResourceTemplates => true,
                };
                (s, hub::list(s, listing, prefix, keep).await)
            }
        }))
        .await;
        let mut items = Vec::new();
        for (s, list) in lists {
            match list {
                Ok(mut l) => {
                    self.remember_owners(s, listing, &l);
                    items.append(&mut l);
                }
                Err(e) => {
                    tracing::warn!(server = %s.name(), method = listing.method(), error = ?e, "MCP server left out of a list");
                }
            }
        }
        let mut result = serde_json::Map::new();
        result.insert(listing.member().into(), Value::Array(items));
        Answer::Result(Value::Object(result).to_string())
    }

    /// Note which server listed each resource (or template) of an aggregated listing, for
    /// `resources/read`.
    fn remember_owners(&self, server: &Server, listing: Listing, items: &[Value]) {
        let (member, template) = match listing {
            Listing::Resources => ("uri", false),
            Listing::ResourceTemplates => ("uriTemplate", true),
            Listing::Tools | Listing::Prompts => return,
        };
        let hub = &self.gw.hub;
        for uri in items.iter().filter_map(|i| i.get(member)?.as_str()) {
            if template {
                hub.remember_template(server.name(), uri);
            } else {
                hub.remember_uri(server.name(), uri);
            }
        }
    }

    /// `resources/read` on the aggregate: the URI (passed unchanged) goes to the server that
    /// listed it, or whose template it fits; one not seen yet is looked for by listing what
    /// the caller may see. A server the caller may not use is refused and recorded.
    async fn read_resource(&self, params: Option<&RawValue>) -> Answer {
        #[derive(Deserialize)]
        struct P {
            uri: String,
        }
        let Some(P { uri }) = params.and_then(|p| serde_json::from_str(p.get()).ok()) else {
            return Answer::Error(code::INVALID_PARAMS, "params.uri is required".into());
        };
        let shown: String = uri.chars().take(200).collect();
        let hub = &self.gw.hub;
        if hub.owner_of(&uri).is_none() {
            self.list(Listing::Resources).await;
            self.list(Listing::ResourceTemplates).await;
        }
        let Some(server) = hub.owner_of(&uri) else {
            return Answer::Error(
                RESOURCE_NOT_FOUND,
                format!("no MCP server this key may use lists resource \"{shown}\""),
            );
        };
        if !self.who.allows_server(server.name()) {
            let why = format!("this key may not read resource \"{shown}\"");
            self.record(
                server.name(),
                "resources/read",
                Some(&shown),
                Instant::now(),
                CallStatus::Refused,
                Some(why.clone()),
            );
            return Answer::Error(FORBIDDEN, why);
        }
        self.forward(server, "resources/read", params, None).await
    }

    /// `tools/call` or `prompts/get`: the name routed to its server, checked, and the call
    /// passed on with the server's own name for it.
    pub(super) async fn call_named(&self, method: &str, params: Option<&RawValue>) -> Answer {
        let Some(mut fields) = params
            .and_then(|p| serde_json::from_str::<serde_json::Map<String, Value>>(p.get()).ok())
        else {
            return Answer::Error(code::INVALID_PARAMS, "params must be an object".into());
        };
        let Some(name) = fields
            .get("name")
            .and_then(Value::as_str)
            .map(str::to_owned)
        else {
            return Answer::Error(code::INVALID_PARAMS, "params.name is required".into());
        };
        let routed = match self.server {
            Some(s) => self.gw.hub.server(s).map(|s| (s, name.as_str())),
            None => self.gw.hub.route(&name),
        };
        let Some((server, own)) = routed else {
            let what = if method == "tools/call" {
                "tool"
            } else {
                "prompt"
            };
            return Answer::Error(code::INVALID_PARAMS, format!("unknown {what} \"{name}\""));
        };
        // A tool call must name one of the tools the server itself lists, exactly, before any
        // allow or deny list is asked (`Hub::listed_tool`). A server that cannot list is
        // called as before: the call then fails the same way, with its own error.
        if method == "tools/call" {
            match self.gw.hub.listed_tool(server, own).await {
                Ok(true) => {}
                Ok(false) => {
                    let why = format!("unknown tool \"{name}\"");
                    self.record(
                        server.name(),
                        method,
                        Some(own),
                        Instant::now(),
                        CallStatus::RpcError,
                        Some(why.clone()),
                    );
                    return Answer::Error(code::INVALID_PARAMS, why);
                }
                Err(e) => {
                    tracing::debug!(server = %server.name(), error = ?e, "MCP server's tools could not be listed to check a call");
                }
            }
        }
        let allowed = match method {
            "tools/call" => hub::tool_allowed(server, own, &self.who.rules()),
            _ => self.who.allows_server(server.name()),
        };
        let refusal = if !allowed {
            Some(format!(
                "this key may not use \"{own}\" of MCP server \"{}\"",
                server.name()
            ))
        } else if method == "tools/call" && server.settings.cost.of(own).is_some_and(|c| c > 0) {
            self.budget_left().err()
        } else {
            None
        };
        if let Some(why) = refusal {
            self.record(
                server.name(),
                method,
                Some(own),
                Instant::now(),
                CallStatus::Refused,
                Some(why.clone()),
            );
            return Answer::Error(FORBIDDEN, why);
        }
        fields.insert("name".into(), Value::String(own.to_owned()));
        let own = own.to_owned();
        let params = Value::Object(fields).to_string();
        match RawValue::from_string(params) {
            Ok(p) => self.forward(server, method, Some(&p), Some(own)).await,
            Err(_) => Answer::Error(code::INTERNAL_ERROR, "params".into()),
        }
    }

    /// One exchange with `server`, recorded. The server's call is cancelled there if this
    /// future is dropped (the client left, or cancelled) before the answer.
    async fn forward(
        &self,
        server: &Arc<Server>,
        method: &str,
        params: Option<&RawValue>,
        name: Option<String>,
    ) -> Answer {
        let start = Instant::now();
        let upstream_id = server.next_id();
        let mut guard = CancelOnDrop {
            server: Arc::clone(server),
            id: upstream_id,
            armed: true,
        };
        let name = name.or_else(|| params.and_then(subject_of));
        // The client's progress token never reaches the server (sluice's one session there
        // is shared by every caller): sluice's own id for the call stands in for it when the
        // client takes notifications, else it is left out.
        let own_token =
            params.and_then(|p| with_progress_token(p, upstream_id, self.notes.is_some()));
        let params = own_token.as_deref().or(params);
        let notes = self.notes.as_ref().filter(|_| own_token.is_some());
        let reply = tokio::select! {
            r = server.request_noting(upstream_id, method, params, notes) => r,
            () = self.cancelled.cancelled() => {
                // The guard tells the server as it drops.
                self.record(server.name(), method, name.as_deref(), start, CallStatus::Cancelled, None);
                return Answer::Error(code::INTERNAL_ERROR, "cancelled by the client".into());
            }
        };
        guard.armed = false;
        match reply {
            Ok(reply) => {
                let (status, error) = match &reply {
                    Reply::Error(e) => (CallStatus::RpcError, Some(error_message(e))),
                    Reply::Result(r) if is_error_result(r) => (
                        CallStatus::ToolError,
                        Some("the tool reported an error".into()),
                    ),
                    Reply::Result(_) => (CallStatus::Ok, None),
                };
                let result = match &reply {
                    Reply::Result(r) => Some(&**r),
                    Reply::Error(_) => None,
                };
                let ended = Ended {
                    status,
                    error,
                    params,
                    result,
                };
                self.finish(server, method, name.as_deref(), start, ended);
                Answer::Raw(reply)
            }
            Err(e) => {
                self.record(
                    server.name(),
                    method,
                    name.as_deref(),
                    start,
                    CallStatus::Failed,
                    Some(e.to_string()),
                );
                if let UpstreamError::Timeout(_) = e {
                    server.cancel(upstream_id, "timed out at the gateway").await;
                }
                Answer::Error(
                    code::INTERNAL_ERROR,
                    format!("MCP server \"{}\": {e}", server.name()),
                )
            }
        }
    }

    /// Record an exchange that carried nothing worth keeping (refused, failed, cancelled).
    pub(super) fn record(
        &self,
        server: &str,
        method: &str,
        tool: Option<&str>,
        start: Instant,
        status: CallStatus,
        error: Option<String>,
    ) {
        self.write(
            server,
            method,
            tool,
            start,
            Ended::bare(status, error),
            None,
        );
    }

    /// Record an exchange `server` answered, charging its price when it is a priced tool
    /// that ran.
    fn finish(
        &self,
        server: &Server,
        method: &str,
        tool: Option<&str>,
        start: Instant,
        ended: Ended<'_>,
    ) {
        let cost = (method == "tools/call" && ended.status.names_a_tool())
            .then(|| tool.and_then(|t| server.settings.cost.of(t)))
            .flatten();
        if let Some(cost) = cost.filter(|c| *c > 0) {
            self.charge(cost);
        }
        self.write(server.name(), method, tool, start, ended, cost);
    }

    fn write(
        &self,
        server: &str,
        method: &str,
        tool: Option<&str>,
        start: Instant,
        ended: Ended<'_>,
        cost: Option<Nanos>,
    ) {
        let call = ToolCall {
            server: server.into(),
            method: method_label(method),
            name: tool.map(Into::into),
            status: ended.status,
            error: ended.error,
        };
        let mut r = RequestRecord::tool_call(self.request_id.clone(), self.route, start, call);
        r.key = self.who.key.as_ref().map(|k| k.info.clone());
        r.cost = cost;
        r.trace = self.trace.as_ref().map(|t| Box::new(t.span()));
        if self.env.recorder.callbacks().content() {
            if let Some(params) = ended.params {
                r.content = Some(Box::new(Content {
                    request: Bytes::copy_from_slice(params.get().as_bytes()),
                    response: ended
                        .result
                        .map(|res| Bytes::copy_from_slice(res.get().as_bytes())),
                    ..Content::default()
                }));
            }
        }
        self.env.recorder.record_tool(r);
    }

    /// Whether the caller's key, team and user have budget left for a priced tool.
    fn budget_left(&self) -> Result<(), String> {
        let Some(key) = self.who.key.as_deref() else {
            return Ok(());
        };
        let subjects = self.env.directory.spend_subjects(key);
        limits::budget_left(&subjects, limits::wall_ms()).map_err(|e| e.to_string())
    }

    /// Charge a priced tool's cost to the caller's key, team and user: here at once, in the
    /// fleet's shared counters, and (through the record's spend log) in the database.
    fn charge(&self, cost: Nanos) {
        let Some(key) = self.who.key.as_deref() else {
            return;
        };
        let subjects = self.env.directory.spend_subjects(key);
        if subjects.is_empty() {
            return;
        }
        limits::charge_all(&subjects, cost);
        if let Some(fleet) = &self.env.fleet {
            fleet.settle(Settlement {
                // No request of this id holds a parallel slot: settling frees nothing else.
                request_id: format!("mcp-{}", self.request_id.to_str().unwrap_or("-")).into(),
                subjects: subjects.iter().cloned().collect(),
                tokens: 0,
                cost,
                at_ms: limits::wall_ms(),
            });
        }
    }
}

/// Sends the tool server a cancellation for a call whose answer nobody waits for any more.
struct CancelOnDrop {
    server: Arc<Server>,
    id: u64,
    armed: bool,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if self.armed {
            let server = Arc::clone(&self.server);
            let id = self.id;
            tokio::spawn(async move { server.cancel(id, "cancelled by the client").await });
        }
    }
}

/// `params` with `_meta.progressToken` set to sluice's `token` (`keep`) or removed, when
/// the client gave one; `None` when it gave none (the common case costs one substring
/// search).
fn with_progress_token(params: &RawValue, token: u64, keep: bool) -> Option<Box<RawValue>> {
    memchr::memmem::find(params.get().as_bytes(), b"\"progressToken\"")?;
    let mut fields: serde_json::Map<String, Value> = serde_json::from_str(params.get()).ok()?;
    let meta = fields.get_mut("_meta")?.as_object_mut()?;
    meta.remove("progressToken")?;
    if keep {
        meta.insert("progressToken".into(), Value::from(token));
    }
    RawValue::from_string(Value::Object(fields).to_string()).ok()
}

/// What a passed-through call names: a resource's `uri` or a `name`.
fn subject_of(params: &RawValue) -> Option<String> {
    #[derive(Deserialize)]
    struct P {
        uri: Option<String>,
        name: Option<String>,
    }
    serde_json::from_str::<P>(params.get())
        .ok()
        .and_then(|p| p.uri.or(p.name))
        .map(|s| s.chars().take(200).collect())
}

/// A tool result that says it failed (`isError: true`).
fn is_error_result(r: &RawValue) -> bool {
    #[derive(Deserialize)]
    struct R {
        #[serde(rename = "isError", default)]
        is_error: bool,
    }
    serde_json::from_str::<R>(r.get()).is_ok_and(|r| r.is_error)
}

/// A JSON-RPC error object's message (bounded).
fn error_message(e: &RawValue) -> String {
    #[derive(Deserialize)]
    struct E {
        message: Option<String>,
    }
    serde_json::from_str::<E>(e.get())
        .ok()
        .and_then(|e| e.message)
        .unwrap_or_default()
        .chars()
        .take(300)
        .collect()
}

/// A bounded label for a method.
fn method_label(method: &str) -> &'static str {
    const KNOWN: [&str; 10] = [
        "tools/call",
        "tools/list",
        "prompts/get",
        "prompts/list",
        "resources/read",
        "resources/list",
        "resources/templates/list",
        "resources/subscribe",
        "resources/unsubscribe",
        "completion/complete",
    ];
    KNOWN
        .iter()
        .find(|m| **m == method)
        .copied()
        .unwrap_or("other")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.into()).unwrap()
    }

    #[test]
    fn small_readers() {
        assert!(is_error_result(&raw(r#"{"content":[],"isError":true}"#)));
        assert!(!is_error_result(&raw(r#"{"content":[]}"#)));
        assert_eq!(
            error_message(&raw(r#"{"code":1,"message":"boom"}"#)),
            "boom"
        );
        assert_eq!(
            subject_of(&raw(r#"{"uri":"file:///a"}"#)).as_deref(),
            Some("file:///a")
        );
        assert_eq!(method_label("tools/call"), "tools/call");
        assert_eq!(method_label("x/y"), "other");
    }

    #[test]
    fn the_client_progress_token_is_replaced_or_left_out() {
        let p = raw(r#"{"name":"t","_meta":{"progressToken":"abc","other":1}}"#);
        let ours: Value =
            serde_json::from_str(with_progress_token(&p, 7, true).unwrap().get()).unwrap();
        assert_eq!(ours["_meta"]["progressToken"], 7);
        assert_eq!(ours["_meta"]["other"], 1);
        let none: Value =
            serde_json::from_str(with_progress_token(&p, 7, false).unwrap().get()).unwrap();
        assert!(none["_meta"].get("progressToken").is_none());
        assert!(with_progress_token(&raw(r#"{"name":"t"}"#), 7, true).is_none());
        assert!(with_progress_token(&raw(r#"{"name":"progressToken"}"#), 7, true).is_none());
    }
}
