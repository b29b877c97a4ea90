//! The Responses API's `mcp` tools (`tools: [{"type": "mcp", "server_label": ...}]`), run by
//! sluice itself against its own tool servers (`mcp_servers:`), for any deployment that
//! serves the Responses API:
//!
//! 1. `read` (pipeline step 5¾, only for a Responses body the one `memmem` search finds
//!    `"mcp"` in): the `mcp` tools checked — a label that is one of sluice's servers, no
//!    `server_url` but sluice's own `/mcp/{server}`, a server the caller may use — before
//!    admission;
//! 2. `run` (in place of step 7's dispatch): each server's tools listed (the caller's MCP
//!    permissions and the tool's `allowed_tools`, as `/mcp` lists them), offered to the model
//!    as `function` tools named `<server>-<tool>`; each round is one whole call through the
//!    router (`server::internal::round`); the model's calls of those tools are run through
//!    the hub (`tools/call`, bounded and recorded as `/mcp` does) and sent back as
//!    `function_call_output`, until the model answers without one (at most [`MAX_ROUNDS`]);
//! 3. the answer: `mcp_list_tools`, one `mcp_call` per call (or `mcp_approval_request` when
//!    the tool's `require_approval` is not `never`), then the model's own output, `usage`
//!    summed over the rounds; a stream is that answer told as Responses events
//!    (`sluice_translate::replay`). The pipeline settles and records it once, as one request.
//!
//! sluice keeps no responses: a client approves a call by sending back the
//! `mcp_approval_request` item with its `mcp_approval_response`, and earlier `mcp_call` items
//! are given to the model as the function calls and outputs they were.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_LENGTH, CONTENT_TYPE, HOST};
use http::{HeaderMap, StatusCode, Uri};
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use tokio_util::sync::CancellationToken;

use sluice_core::endpoint::{Dialect, Endpoint};
use sluice_core::error::ApiError;
use sluice_core::trace_context::TraceContext;
use sluice_mcp::hub::{self, Listing};
use sluice_mcp::settings::TOOL_SEPARATOR;
use sluice_mcp::upstream::Reply;
use sluice_mcp::CallStatus;
use sluice_providers::UpstreamBody;
use sluice_routing::{Outcome, Requested, Resolved, Router, Served};

use super::calls::{Answer as McpAnswer, Ctx, Env, SpanParent};
use super::{McpGateway, Who};
use crate::auth::Caller;
use crate::server::attempt::{Answer, Failed};
use crate::server::{AppState, Snapshot};

/// Model calls one request may make before sluice gives up on the loop.
pub(crate) const MAX_ROUNDS: usize = 8;

/// The most characters of one tool result given to the model and the client.
const MAX_OUTPUT_CHARS: usize = 1 << 20;

/// Step 5¾'s whole cost for every other request: a Responses body that names `"mcp"`
/// anywhere is read further; nothing else is.
pub(crate) fn may_name_mcp(endpoint: Endpoint, body: &[u8]) -> bool {
    endpoint == Endpoint::Responses && memchr::memmem::find(body, b"\"mcp\"").is_some()
}

/// Why a request's `mcp` tools cannot be run.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LoopError {
    /// The body is not a JSON object.
    #[error("the request body is not a JSON object")]
    NotObject,
    /// `mcp` tools, but no `mcp_servers:` configured.
    #[error("tools: this gateway has no MCP servers (mcp_servers:) to run an mcp tool with")]
    NoServers,
    /// An `mcp` tool without a usable `server_label`.
    #[error("tools[{0}]: an mcp tool needs a server_label")]
    NoLabel(usize),
    /// A label that is not one of sluice's servers.
    #[error("tools[{index}]: server_label '{label}' is not one of this gateway's MCP servers")]
    UnknownServer { index: usize, label: String },
    /// A `server_url` elsewhere.
    #[error(
        "tools[{index}]: sluice runs only its own MCP servers: leave server_url out, or make it \
         this gateway's /mcp/{label}"
    )]
    ForeignUrl { index: usize, label: String },
    /// An approval for a call the input does not carry.
    #[error(
        "input: mcp_approval_response '{0}' names no mcp_approval_request in input (sluice \
         keeps no responses: send the request item back with its response)"
    )]
    UnknownApproval(String),
    /// The model kept calling tools.
    #[error("the model called MCP tools in {0} rounds without a final answer; sluice stops there")]
    Rounds(usize),
    /// A server's tools could not be listed.
    #[error("MCP server '{server}': its tools could not be listed ({why})")]
    Listing { server: String, why: String },
}

impl From<LoopError> for ApiError {
    fn from(e: LoopError) -> Self {
        match e {
            LoopError::NotObject => ApiError::InvalidJson(e.to_string()),
            LoopError::NoServers
            | LoopError::NoLabel(_)
            | LoopError::UnknownServer { .. }
            | LoopError::ForeignUrl { .. } => ApiError::InvalidParam {
                param: "tools",
                message: e.to_string(),
            },
            LoopError::UnknownApproval(_) => ApiError::InvalidParam {
                param: "input",
                message: e.to_string(),
            },
            LoopError::Rounds(_) => ApiError::McpToolLoop(e.to_string()),
            LoopError::Listing { .. } => ApiError::UpstreamUnreachable(e.to_string()),
        }
    }
}

/// One `mcp` tool of the request.
#[derive(Debug)]
struct Wanted {
    label: String,
    /// `allowed_tools`: only these (when given).
    allowed: Option<Vec<String>>,
    /// `require_approval`: which of its tools run without asking.
    approval: Approval,
}

#[derive(Debug)]
enum Approval {
    /// `"never"`.
    Never,
    /// `{"never": {"tool_names": [...]}}`: these run, the rest ask.
    NeverFor(Vec<String>),
    /// `"always"`, the default, or anything else: every call asks.
    Always,
}

impl Approval {
    fn read(v: Option<&Value>) -> Self {
        match v {
            Some(Value::String(s)) if s == "never" => Self::Never,
            Some(Value::Object(o)) => match names(o.get("never")) {
                Some(n) => Self::NeverFor(n),
                None => Self::Always,
            },
            _ => Self::Always,
        }
    }

    fn asks(&self, tool: &str) -> bool {
        match self {
            Self::Never => false,
            Self::NeverFor(n) => !n.iter().any(|t| t == tool),
            Self::Always => true,
        }
    }
}

/// A list of tool names: an array of strings, or `{"tool_names": [...]}`.
fn names(v: Option<&Value>) -> Option<Vec<String>> {
    let list = match v? {
        Value::Array(a) => a,
        Value::Object(o) => o.get("tool_names")?.as_array()?,
        _ => return None,
    };
    Some(
        list.iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
    )
}

/// A Responses request whose `mcp` tools sluice runs.
pub(crate) struct McpLoop {
    request: Map<String, Value>,
    wanted: Vec<Wanted>,
    who: Who,
    gw: Arc<McpGateway>,
    /// The client asked for a stream (the rounds are whole; the answer is told as one).
    stream: bool,
    /// The request's trace, when tracing is on: each tool call's span is its child.
    pub(crate) trace: Option<Box<TraceContext>>,
}

/// The loop's tools as listed from their servers.
struct Listed {
    /// `mcp_list_tools` items, one per server.
    items: Vec<Value>,
    /// The tools as the model's functions.
    functions: Vec<Value>,
    /// Function name → (the wanted tool's index, the tool's own name).
    offered: Vec<(String, usize, String)>,
}

impl McpLoop {
    /// Step 5¾: the request's `mcp` tools, checked; `None` when it has none (`"mcp"` was
    /// elsewhere in the body). Before admission, so that a bad tool costs nothing.
    pub(crate) fn read(
        state: &AppState,
        snap: &Snapshot,
        caller: &Caller,
        headers: &HeaderMap,
        body: &[u8],
        request_id: &HeaderValue,
    ) -> Result<Option<Box<Self>>, ApiError> {
        let Ok(Value::Object(request)) = serde_json::from_slice::<Value>(body) else {
            return Err(LoopError::NotObject.into());
        };
        let tools = request.get("tools").and_then(Value::as_array);
        let mcp: Vec<(usize, &Map<String, Value>)> = tools
            .into_iter()
            .flatten()
            .enumerate()
            .filter_map(|(i, t)| t.as_object().map(|t| (i, t)))
            .filter(|(_, t)| t.get("type").and_then(Value::as_str) == Some("mcp"))
            .collect();
        if mcp.is_empty() {
            return Ok(None);
        }
        let Some(gw) = snap.features.mcp.clone() else {
            return Err(LoopError::NoServers.into());
        };
        let host = headers.get(HOST).and_then(|h| h.to_str().ok());
        let mut wanted = Vec::with_capacity(mcp.len());
        for (index, t) in mcp {
            let Some(label) = t.get("server_label").and_then(Value::as_str) else {
                return Err(LoopError::NoLabel(index).into());
            };
            if gw.hub.server(label).is_none() {
                let label = label.chars().take(64).collect();
                return Err(LoopError::UnknownServer { index, label }.into());
            }
            if let Some(url) = t.get("server_url").filter(|u| !u.is_null()) {
                if !own_url(url.as_str(), label, host) {
                    let label = label.to_owned();
                    return Err(LoopError::ForeignUrl { index, label }.into());
                }
            }
            wanted.push(Wanted {
                label: label.to_owned(),
                allowed: names(t.get("allowed_tools")),
                approval: Approval::read(t.get("require_approval")),
            });
        }
        let who = super::who(state, caller.clone(), sluice_core::limits::wall_ms())?;
        for w in &wanted {
            if !who.allows_server(&w.label) {
                let env = Env::of(state);
                let ctx = ctx(&env, &gw, &who, &w.label, request_id, None);
                let why = format!("this key may not use MCP server \"{}\"", w.label);
                ctx.record(
                    &w.label,
                    Listing::Tools.method(),
                    None,
                    std::time::Instant::now(),
                    CallStatus::Refused,
                    Some(why),
                );
                return Err(ApiError::McpNotAllowed(w.label.clone()));
            }
        }
        let stream = request.get("stream").and_then(Value::as_bool) == Some(true);
        Ok(Some(Box::new(Self {
            request,
            wanted,
            who,
            gw,
            stream,
            trace: None,
        })))
    }

    /// Run the loop: list, call the model, run its tool calls, again, until it answers. The
    /// outcome is the last round's, its answer the composed Responses object (or its stream)
    /// and the retries, fallbacks and attempts those of every round.
    #[expect(
        clippy::too_many_arguments,
        reason = "the pipeline's pieces, passed as they are"
    )]
    pub(crate) async fn run<'a>(
        mut self,
        state: &AppState,
        router: &'a Router,
        resolved: Resolved<'a>,
        requested: &'a Requested<'a>,
        headers: &HeaderMap,
        timeout: Option<Duration>,
        request_id: &HeaderValue,
    ) -> Result<Outcome<'a, Answer, Failed>, ApiError> {
        let Listed {
            mut items,
            functions,
            offered,
        } = self.list_tools().await?;
        // The request the model gets: the mcp tools replaced by their functions, whole rounds.
        let client_tools = self.request.get("tools").cloned().unwrap_or(Value::Null);
        let mut tools: Vec<Value> = client_tools
            .as_array()
            .into_iter()
            .flatten()
            .filter(|t| t.get("type").and_then(Value::as_str) != Some("mcp"))
            .cloned()
            .collect();
        tools.extend(functions);
        self.request.insert("tools".into(), Value::Array(tools));
        self.request.insert("stream".into(), Value::Bool(false));
        self.request.remove("stream_options");
        let mut input = self.input(state, request_id, &offered, &mut items).await?;

        let mut usage = Value::Null;
        let (mut retries, mut fallbacks, mut hedges) = (0, 0, 0);
        let mut attempts = sluice_core::record::Attempts::new();
        for round in 1..=MAX_ROUNDS {
            self.request
                .insert("input".into(), Value::Array(input.clone()));
            let body = Bytes::from(
                serde_json::to_vec(&self.request).map_err(|_| ApiError::Internal("mcp round"))?,
            );
            let mut outcome = crate::server::internal::round(
                router,
                resolved,
                requested,
                Endpoint::Responses,
                headers,
                &body,
                timeout,
            )
            .await?;
            retries += outcome.retries;
            fallbacks += outcome.fallbacks;
            hedges += outcome.hedges;
            attempts.extend(std::mem::take(&mut outcome.attempts));
            let finish = |mut o: Outcome<'a, Answer, Failed>, attempts| {
                o.retries = retries;
                o.fallbacks = fallbacks;
                o.hedges = hedges;
                o.attempts = attempts;
                o
            };
            let served = match outcome.result {
                Ok(s) => s,
                Err(f) => {
                    outcome.result = Err(f);
                    return Ok(finish(outcome, attempts));
                }
            };
            let Answer::Full(mut parts, bytes) = served.answer else {
                return Err(ApiError::UpstreamInvalid(
                    "a whole answer was asked for and a stream came".into(),
                ));
            };
            let Ok(Value::Object(mut answer)) = serde_json::from_slice::<Value>(&bytes) else {
                return Err(ApiError::UpstreamInvalid(
                    "the answer is not a Responses object".into(),
                ));
            };
            add_usage(&mut usage, answer.get("usage").unwrap_or(&Value::Null));
            let output = match answer.remove("output") {
                Some(Value::Array(o)) => o,
                _ => Vec::new(),
            };
            let mut calls = Vec::new();
            let mut rest = Vec::new();
            for item in output {
                let tool = (item.get("type").and_then(Value::as_str) == Some("function_call"))
                    .then(|| item.get("name").and_then(Value::as_str))
                    .flatten()
                    .and_then(|n| offered.iter().find(|(f, _, _)| f == n));
                match tool {
                    Some((_, wi, own)) => calls.push((item.clone(), *wi, own.clone())),
                    None => rest.push(item),
                }
            }
            let other_calls = rest
                .iter()
                .any(|i| i.get("type").and_then(Value::as_str) == Some("function_call"));
            let asked = self
                .run_calls(state, request_id, &calls, &mut input, &mut items)
                .await;
            if !calls.is_empty() && !asked && !other_calls {
                if round < MAX_ROUNDS {
                    // The model gets the results: its other items of this round go back with
                    // them.
                    let at = input.len() - 2 * calls.len();
                    input.splice(at..at, rest);
                    continue;
                }
                // The limit: an error, which still carries (and is charged) what the rounds
                // used.
                let e = ApiError::from(LoopError::Rounds(MAX_ROUNDS));
                let mut body: Value = serde_json::from_slice(&e.body_in(Dialect::OpenAi))
                    .map_err(|_| ApiError::Internal("mcp error"))?;
                body["usage"] = usage;
                parts.status = e.status();
                parts.headers.remove(CONTENT_LENGTH);
                let bytes =
                    serde_json::to_vec(&body).map_err(|_| ApiError::Internal("mcp error"))?;
                outcome.result = Ok(Served {
                    answer: Answer::Full(parts, Bytes::from(bytes)),
                    group: served.group,
                    member: served.member,
                    guard: served.guard,
                });
                return Ok(finish(outcome, attempts));
            }
            // The final answer: the loop's items, then the model's own.
            items.extend(rest);
            answer.insert("output".into(), Value::Array(items));
            answer.insert("usage".into(), usage);
            answer.insert("tools".into(), client_tools);
            let bytes =
                serde_json::to_vec(&answer).map_err(|_| ApiError::Internal("mcp answer"))?;
            let answer = self.answer(parts, Bytes::from(bytes))?;
            outcome.result = Ok(Served {
                answer,
                group: served.group,
                member: served.member,
                guard: served.guard,
            });
            return Ok(finish(outcome, attempts));
        }
        // Every round returns or continues, and the last cannot continue.
        Err(LoopError::Rounds(MAX_ROUNDS).into())
    }

    /// The tools of every server the request names, as the loop offers them: `mcp_list_tools`
    /// items for the answer, the functions the model is given, and which tool each function
    /// name stands for.
    async fn list_tools(&self) -> Result<Listed, ApiError> {
        let mut items: Vec<Value> = Vec::new();
        let mut functions: Vec<Value> = Vec::new();
        // Function name → (the wanted tool's index, the tool's own name).
        let mut offered: Vec<(String, usize, String)> = Vec::new();
        let rules = self.who.rules();
        for (wi, w) in self.wanted.iter().enumerate() {
            let Some(server) = self.gw.hub.server(&w.label) else {
                continue;
            };
            let keep = |name: &str| {
                hub::tool_allowed(server, name, &rules)
                    && w.allowed
                        .as_ref()
                        .is_none_or(|a| a.iter().any(|t| t == name))
            };
            let tools = hub::list(server, Listing::Tools, false, keep)
                .await
                .map_err(|e| LoopError::Listing {
                    server: w.label.clone(),
                    why: match e {
                        hub::ListError::Upstream(e) => e.to_string(),
                        hub::ListError::Refused(_) => "the server refused tools/list".into(),
                    },
                })?;
            let mut listed = Vec::with_capacity(tools.len());
            for t in tools {
                let Some(name) = t.get("name").and_then(Value::as_str) else {
                    continue;
                };
                let schema = t
                    .get("inputSchema")
                    .cloned()
                    .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
                let description = t.get("description").cloned().unwrap_or(Value::Null);
                let function = format!("{}{TOOL_SEPARATOR}{name}", w.label);
                functions.push(json!({
                    "type": "function", "name": function, "description": description,
                    "parameters": schema, "strict": false
                }));
                listed.push(json!({
                    "name": name, "description": description, "input_schema": schema,
                    "annotations": t.get("annotations").cloned().unwrap_or(Value::Null)
                }));
                offered.push((function, wi, name.to_owned()));
            }
            items.push(json!({
                "id": new_id("mcpl"), "type": "mcp_list_tools", "server_label": w.label,
                "tools": listed, "error": null
            }));
        }
        Ok(Listed {
            items,
            functions,
            offered,
        })
    }

    /// A round's calls of the loop's tools: each run (its `mcp_call` item for the answer, its
    /// call and output for the model's next round), or, when the server's `require_approval`
    /// asks for it, an `mcp_approval_request` instead. True when one was asked.
    async fn run_calls(
        &self,
        state: &AppState,
        request_id: &HeaderValue,
        calls: &[(Value, usize, String)],
        input: &mut Vec<Value>,
        items: &mut Vec<Value>,
    ) -> bool {
        let mut asked = false;
        for (call, wi, own) in calls {
            let w = &self.wanted[*wi];
            let arguments = call
                .get("arguments")
                .and_then(Value::as_str)
                .unwrap_or("{}");
            if w.approval.asks(own) {
                asked = true;
                items.push(json!({
                    "id": new_id("mcpr"), "type": "mcp_approval_request",
                    "server_label": w.label, "name": own, "arguments": arguments
                }));
                continue;
            }
            let (output, error) = self.call(state, request_id, w, own, arguments).await;
            let call_id = call.get("call_id").cloned().unwrap_or(Value::Null);
            input.push(call.clone());
            input.push(json!({
                "type": "function_call_output", "call_id": call_id,
                "output": output.as_deref().or(error.as_deref()).unwrap_or("")
            }));
            let status = if error.is_some() {
                "failed"
            } else {
                "completed"
            };
            items.push(json!({
                "id": new_id("mcp"), "type": "mcp_call", "server_label": w.label,
                "name": own, "arguments": arguments, "output": output, "error": error,
                "approval_request_id": null, "status": status
            }));
        }
        asked
    }

    /// The input the model gets first: a string as one user message, and the items of earlier
    /// answers the client sends back made plain: an `mcp_call` as the function call and output
    /// it was, an approved `mcp_approval_request` run now (its `mcp_call` joins the answer),
    /// a declined one told to the model, `mcp_list_tools` left out.
    async fn input(
        &self,
        state: &AppState,
        request_id: &HeaderValue,
        offered: &[(String, usize, String)],
        items: &mut Vec<Value>,
    ) -> Result<Vec<Value>, ApiError> {
        let given = match self.request.get("input") {
            Some(Value::String(s)) => return Ok(vec![json!({"role": "user", "content": s})]),
            Some(Value::Array(a)) => a,
            _ => return Ok(Vec::new()),
        };
        let kind = |i: &Value| i.get("type").and_then(Value::as_str).map(str::to_owned);
        let mut out = Vec::with_capacity(given.len());
        for item in given {
            let function_call = |id: &Value, server: &Value, name: &Value, args: &Value| {
                json!({
                    "type": "function_call", "call_id": id,
                    "name": format!("{}{TOOL_SEPARATOR}{}", server.as_str().unwrap_or(""), name.as_str().unwrap_or("")),
                    "arguments": args.as_str().unwrap_or("{}")
                })
            };
            match kind(item).as_deref() {
                Some("mcp_list_tools" | "mcp_approval_request") => {}
                Some("mcp_call") => {
                    let id = &item["id"];
                    out.push(function_call(
                        id,
                        &item["server_label"],
                        &item["name"],
                        &item["arguments"],
                    ));
                    let text = item["output"]
                        .as_str()
                        .or(item["error"].as_str())
                        .unwrap_or("");
                    out.push(
                        json!({"type": "function_call_output", "call_id": id, "output": text}),
                    );
                }
                Some("mcp_approval_response") => {
                    let id = item["approval_request_id"].as_str().unwrap_or("");
                    let asked = given.iter().find(|r| {
                        kind(r).as_deref() == Some("mcp_approval_request") && r["id"] == id
                    });
                    let Some(asked) = asked else {
                        return Err(
                            LoopError::UnknownApproval(id.chars().take(64).collect()).into()
                        );
                    };
                    let server = asked["server_label"].as_str().unwrap_or("");
                    let name = asked["name"].as_str().unwrap_or("");
                    let arguments = asked["arguments"].as_str().unwrap_or("{}");
                    let function = format!("{server}{TOOL_SEPARATOR}{name}");
                    // Only a tool this request offers (listed under the caller's permissions).
                    let Some((_, wi, _)) = offered.iter().find(|(f, _, _)| *f == function) else {
                        return Err(
                            LoopError::UnknownApproval(id.chars().take(64).collect()).into()
                        );
                    };
                    out.push(function_call(
                        &asked["id"],
                        &asked["server_label"],
                        &asked["name"],
                        &asked["arguments"],
                    ));
                    let text = if item["approve"] == true {
                        let w = &self.wanted[*wi];
                        let (output, error) =
                            self.call(state, request_id, w, name, arguments).await;
                        let status = if error.is_some() {
                            "failed"
                        } else {
                            "completed"
                        };
                        items.push(json!({
                            "id": new_id("mcp"), "type": "mcp_call", "server_label": server,
                            "name": name, "arguments": arguments, "output": output,
                            "error": error, "approval_request_id": id, "status": status
                        }));
                        output.or(error).unwrap_or_default()
                    } else {
                        "The user declined this tool call.".to_owned()
                    };
                    out.push(json!({"type": "function_call_output", "call_id": asked["id"], "output": text}));
                }
                _ => out.push(item.clone()),
            }
        }
        Ok(out)
    }

    /// One `tools/call` through the hub, checked and recorded as `/mcp` does: the result's
    /// text, or the error's.
    async fn call(
        &self,
        state: &AppState,
        request_id: &HeaderValue,
        w: &Wanted,
        tool: &str,
        arguments: &str,
    ) -> (Option<String>, Option<String>) {
        let args: Value = match serde_json::from_str(arguments) {
            Ok(v @ Value::Object(_)) => v,
            _ => return (None, Some("the arguments are not a JSON object".into())),
        };
        let params = json!({"name": tool, "arguments": args}).to_string();
        let Ok(params) = RawValue::from_string(params) else {
            return (None, Some("the arguments could not be sent".into()));
        };
        let env = Env::of(state);
        let ctx = ctx(
            &env,
            &self.gw,
            &self.who,
            &w.label,
            request_id,
            self.trace.as_deref(),
        );
        match ctx.call_named("tools/call", Some(&params)).await {
            McpAnswer::Raw(Reply::Result(r)) => {
                let (text, is_error) = result_text(&r);
                if is_error {
                    (None, Some(text))
                } else {
                    (Some(text), None)
                }
            }
            McpAnswer::Raw(Reply::Error(e)) => {
                let message = serde_json::from_str::<Value>(e.get())
                    .ok()
                    .and_then(|v| v["message"].as_str().map(str::to_owned))
                    .unwrap_or_else(|| "the tool server answered with an error".into());
                (None, Some(message))
            }
            McpAnswer::Error(_, message) => (None, Some(message)),
            McpAnswer::Result(text) => (Some(text), None),
        }
    }

    /// The composed answer as the client asked for it: whole, or told as Responses events.
    fn answer(&self, mut parts: http::response::Parts, bytes: Bytes) -> Result<Answer, ApiError> {
        parts.headers.remove(CONTENT_LENGTH);
        if !self.stream {
            parts
                .headers
                .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            return Ok(Answer::Full(parts, bytes));
        }
        let events = sluice_translate::replay::stream_of(Endpoint::Responses, &bytes, false)
            .ok_or(ApiError::Internal("mcp stream"))?;
        parts
            .headers
            .insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
        parts.status = StatusCode::OK;
        Ok(Answer::Stream {
            parts,
            first: Bytes::from(events),
            rest: UpstreamBody::whole(Bytes::new()),
        })
    }
}

fn ctx<'a>(
    env: &'a Env,
    gw: &'a McpGateway,
    who: &'a Who,
    server: &'a str,
    request_id: &HeaderValue,
    trace: Option<&TraceContext>,
) -> Ctx<'a> {
    Ctx {
        env,
        gw,
        who,
        server: Some(server),
        request_id: request_id.clone(),
        route: "/v1/responses",
        trace: trace.map(|t| SpanParent::Request(Box::new(t.clone()))),
        cancelled: CancellationToken::new(),
        notes: None,
    }
}

/// Whether a `server_url` is sluice's own `/mcp/{label}`: that path, on the host the request
/// came to (when it names one).
fn own_url(url: Option<&str>, label: &str, host: Option<&str>) -> bool {
    let Some(uri) = url.and_then(|u| u.parse::<Uri>().ok()) else {
        return false;
    };
    let path = uri.path().trim_end_matches('/');
    let here = match (uri.authority(), host) {
        (Some(a), Some(h)) => a.as_str().eq_ignore_ascii_case(h),
        (None, _) => true,
        (Some(_), None) => true,
    };
    here && path.strip_prefix("/mcp/") == Some(label)
}

/// A tool result's text content joined (its structured content when it has no text), and
/// whether it reports an error; bounded.
fn result_text(r: &RawValue) -> (String, bool) {
    let v: Value = serde_json::from_str(r.get()).unwrap_or(Value::Null);
    let is_error = v["isError"] == true;
    let mut text = v["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["type"] == "text")
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n");
    if text.is_empty() {
        if let Some(s) = v.get("structuredContent") {
            text = s.to_string();
        }
    }
    if text.len() > MAX_OUTPUT_CHARS {
        text = text.chars().take(MAX_OUTPUT_CHARS).collect();
    }
    (text, is_error)
}

/// Add one round's `usage` into the sum: every number, at every depth.
fn add_usage(sum: &mut Value, u: &Value) {
    match (sum, u) {
        (s @ Value::Null, u) => *s = u.clone(),
        (Value::Object(s), Value::Object(u)) => {
            for (k, v) in u {
                add_usage(s.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        (s @ Value::Number(_), Value::Number(u)) => {
            if let (Some(a), Some(b)) = (s.as_u64(), u.as_u64()) {
                *s = Value::from(a + b);
            } else if let (Some(a), Some(b)) = (s.as_f64(), u.as_f64()) {
                *s = json!(a + b);
            }
        }
        _ => {}
    }
}

/// A fresh item id with OpenAI's prefix for its kind.
fn new_id(prefix: &str) -> String {
    format!("{prefix}_{}", sluice_core::random::uuid_v4().simple())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cheap_check_and_urls() {
        assert!(may_name_mcp(
            Endpoint::Responses,
            br#"{"tools":[{"type":"mcp"}]}"#
        ));
        assert!(!may_name_mcp(
            Endpoint::Responses,
            br#"{"input":"an mcp server"}"#
        ));
        assert!(!may_name_mcp(
            Endpoint::ChatCompletions,
            br#"{"type":"mcp"}"#
        ));
        assert!(own_url(
            Some("http://gw:4000/mcp/github"),
            "github",
            Some("gw:4000")
        ));
        assert!(own_url(Some("/mcp/github/"), "github", Some("gw:4000")));
        assert!(!own_url(
            Some("https://mcp.example/mcp/github"),
            "github",
            Some("gw:4000")
        ));
        assert!(!own_url(
            Some("http://gw:4000/mcp/other"),
            "github",
            Some("gw:4000")
        ));
        assert!(!own_url(None, "github", None));
    }

    #[test]
    fn usage_adds_up_and_results_read() {
        let mut sum = Value::Null;
        let u = json!({"input_tokens": 3, "output_tokens": 2, "output_tokens_details": {"reasoning_tokens": 1}});
        add_usage(&mut sum, &u);
        add_usage(&mut sum, &u);
        assert_eq!(sum["input_tokens"], 6);
        assert_eq!(sum["output_tokens_details"]["reasoning_tokens"], 2);
        let r = RawValue::from_string(
            r#"{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}"#.into(),
        )
        .unwrap();
        assert_eq!(result_text(&r), ("a\nb".into(), false));
        let r = RawValue::from_string(
            r#"{"content":[],"structuredContent":{"x":1},"isError":true}"#.into(),
        )
        .unwrap();
        assert_eq!(result_text(&r), (r#"{"x":1}"#.into(), true));
    }

    #[test]
    fn approval_and_tool_names() {
        assert!(!Approval::read(Some(&json!("never"))).asks("x"));
        assert!(Approval::read(None).asks("x"));
        assert!(Approval::read(Some(&json!("always"))).asks("x"));
        let some = Approval::read(Some(&json!({"never": {"tool_names": ["a"]}})));
        assert!(!some.asks("a") && some.asks("b"));
        assert_eq!(names(Some(&json!(["a"]))), Some(vec!["a".to_owned()]));
        assert_eq!(
            names(Some(&json!({"tool_names": ["b"]}))),
            Some(vec!["b".to_owned()])
        );
    }
}
