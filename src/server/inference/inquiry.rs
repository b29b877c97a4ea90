//! Phase 5 of an inference request: what it asks, read from its envelope (never the whole
//! body), and checked before anything is admitted or sent.

use bytes::Bytes;

use sluice_core::endpoint::Endpoint;
use sluice_core::error::ApiError;
use sluice_core::record::{Content, RequestRecord};
use sluice_core::usage::RequestUnits;
use sluice_translate::envelope::Envelope;
use sluice_translate::{multipart, units};

use super::read::Read;
use super::Cx;
use crate::auth::Caller;
use crate::guardrails::Guard;
use crate::mcp::responses::McpLoop;
use crate::server::client_side::ClientTarget;

/// What a Google (`:generateContent`) or Bedrock (`/converse`) client's path says of its
/// request: the model (decoded) and whether it streams. Carried in the request's extensions,
/// so that every other request's future does not grow by it.
#[derive(Debug, Clone)]
pub(crate) struct PathNamed {
    pub(crate) model: String,
    pub(crate) stream: bool,
}

/// What the request asks, as read and checked.
pub(super) struct Inquiry<'a> {
    pub envelope: Envelope<'a>,
    /// A body naming its own upstream or credentials, allowed (`client_side`).
    pub client_target: Option<ClientTarget<'a>>,
    /// Its `mcp` tools, to run the tool loop over (5¾).
    pub mcp_loop: Option<Box<McpLoop>>,
    /// Whether the answer is relayed as it arrives (asked, or audio).
    pub stream: bool,
    /// Usage known from the request (images asked, characters to speak).
    pub requested_units: RequestUnits,
}

/// What phase 5 found.
pub(super) enum Inquired<'a> {
    /// Go on, with what the request asks.
    Next(Inquiry<'a>),
    /// LiteLLM's several-models request (`"model": "a,b"`): each model asked on its own.
    Several(Envelope<'a>),
}

/// Phase 5: read the envelope and check it: streaming where the endpoint can, the message
/// limit, guardrails that must see whole answers, `mcp` tools (5¾). Not async: a body naming
/// its own upstream (`client_side`) is checked by the caller, and a several-models request is
/// handed back to it.
pub(super) fn inquire<'a>(
    cx: Cx<'a>,
    read: &mut Read,
    body: &'a Bytes,
    caller: &Caller,
    guarded: Option<&Guard<'_>>,
    record: &mut RequestRecord,
) -> Result<Inquired<'a>, ApiError> {
    let (snap, endpoint) = (cx.snap, cx.endpoint);
    let named = match endpoint.names_model_in_path() {
        true => read.parts.extensions.remove::<PathNamed>(),
        false => None,
    };
    // ConverseStream's answer is binary event-stream frames, which the guardrails that read
    // answers do not read yet: such a call is refused rather than let past them.
    if endpoint == Endpoint::Converse
        && guarded.is_some_and(Guard::checks_answer)
        && named.as_ref().is_some_and(|n| n.stream)
    {
        return Err(ApiError::InvalidParam {
            param: "guardrails",
            message: "guardrails that check answers apply to this request, and they do not \
                      read ConverseStream's event-stream frames yet: call /converse instead"
                .into(),
        });
    }
    let (mut envelope, requested_units) = envelope(read, body, endpoint, named)?;
    crate::server::litellm_headers::read(&read.parts.headers, &mut envelope.routing)?;
    // (The comma is looked for first: most requests end the test there, before a lookup.)
    if envelope.model.contains(',')
        && matches!(endpoint, Endpoint::ChatCompletions | Endpoint::Completions)
        && !envelope.stream
        && snap.router.models.named(&envelope.model).is_none()
        && crate::server::several::models(&envelope.model).is_some()
    {
        return Ok(Inquired::Several(envelope));
    }
    check(cx, &envelope, guarded)?;
    let client_side = envelope.client_side.is_some();
    let mcp_loop = mcp_loop(cx, read, body, caller, client_side, &record.request_id)?;
    // Speech is audio relayed as it arrives, whatever the request says.
    let stream = envelope.stream || endpoint.answers_binary();
    record.stream = stream;
    // A body with the client's own key is not handed to logging callbacks (it would carry it).
    if cx.state.recorder().callbacks().content() && !client_side {
        record.content = Some(Box::new(logged(body, guarded, stream)));
    }
    Ok(Inquired::Next(Inquiry {
        envelope,
        client_target: None,
        mcp_loop,
        stream,
        requested_units,
    }))
}

/// LiteLLM's several-models request (`"model": "a,b"`): each model asked as a request of its
/// own, the answers listed.
pub(super) async fn several(
    cx: Cx<'_>,
    read: &Read,
    body: &Bytes,
    envelope: &Envelope<'_>,
) -> Result<http::Response<crate::http::ResponseBody>, ApiError> {
    let models = crate::server::several::models(&envelope.model).unwrap_or_default();
    let range = envelope.model_range.clone();
    crate::server::several::answer(cx.state, &read.parts, body, range, &models).await
}

/// The envelope (from the path's model, the JSON body or the multipart form's fields) and
/// the usage the request itself states.
fn envelope<'a>(
    read: &Read,
    body: &'a Bytes,
    endpoint: Endpoint,
    named: Option<PathNamed>,
) -> Result<(Envelope<'a>, RequestUnits), ApiError> {
    let form = match read.boundary(endpoint)? {
        None => None,
        Some(b) => Some(multipart::head(body, b)?),
    };
    let envelope = match (&form, named) {
        (_, Some(PathNamed { model, stream })) => Envelope::named(body, model, stream)?,
        (None, None) => Envelope::parse(body)?,
        (Some(parts), None) => Envelope::parse_multipart(body, parts)?,
    };
    let units = units::request_units(endpoint, body, form.as_deref());
    Ok((envelope, units))
}

/// What an envelope may not ask on this gateway.
fn check(cx: Cx<'_>, envelope: &Envelope, guarded: Option<&Guard<'_>>) -> Result<(), ApiError> {
    if envelope.stream && !cx.endpoint.can_stream() {
        return Err(ApiError::StreamNotSupported);
    }
    if let (Some(n), Some(limit)) = (envelope.messages, cx.snap.max_messages) {
        if n > limit {
            return Err(ApiError::InvalidParam {
                param: "messages",
                message: format!(
                    "{n} messages; the limit is {limit} (general_settings.max_messages)"
                ),
            });
        }
    }
    if let Some(name) = guarded.and_then(Guard::external_on_answer) {
        if envelope.stream {
            return Err(ApiError::InvalidParam {
                param: "stream",
                message: format!(
                    "guardrail '{name}' checks whole answers through its service; \
                     send this request with stream: false"
                ),
            });
        }
    }
    Ok(())
}

/// Phase 5¾: MCP tools in a Responses request (`tools: [{type: "mcp"}]`): sluice runs the tool
/// loop itself against its own servers (`mcp::responses`), checked here, before admission.
/// Every other request pays at most one memchr search of a Responses body.
fn mcp_loop(
    cx: Cx<'_>,
    read: &Read,
    body: &Bytes,
    caller: &Caller,
    client_side: bool,
    request_id: &http::HeaderValue,
) -> Result<Option<Box<McpLoop>>, ApiError> {
    if !crate::mcp::responses::may_name_mcp(cx.endpoint, body) {
        return Ok(None);
    }
    let l = McpLoop::read(
        cx.state,
        cx.snap,
        caller,
        &read.parts.headers,
        body,
        request_id,
    )?;
    if l.is_some() && client_side {
        return Err(ApiError::InvalidParam {
            param: "tools",
            message: "mcp tools run on this gateway's own deployments: send them without \
                      client-side credentials"
                .into(),
        });
    }
    Ok(l)
}

/// The request as content logging keeps it (masked where a `logging_only` guardrail masked
/// it).
fn logged(body: &Bytes, guarded: Option<&Guard<'_>>, stream: bool) -> Content {
    let mut content = Content {
        request: body.clone(),
        ..Content::default()
    };
    if let Some(g) = guarded {
        if let Some(logged) = g.logged_request() {
            content.request = logged;
        }
        // `logging_only` cannot mask a stream's frames yet: the log keeps none of them.
        if stream && g.masks_logs() {
            content.stream.truncated = true;
        }
    }
    content
}
