//! The request pipeline. This file alone decides the order of the steps; ARCHITECTURE.md
//! draws it. Each step is a call into the module that owns it.
//!
//! 1. accept (request id, start time)
//! 2. route; shed when overloaded (`server::overload`), refuse an overlong URL
//! 3. authenticate (master key, virtual keys)
//! 4. read the body (limit); guardrails on its text (4½: mask or block)
//! 5. read the envelope; a Responses request's `mcp` tools checked (5¾, `mcp::responses`)
//! 6. admit (model access, rate limits, budgets)
//! 7. select a deployment and call it (retries, fallbacks, hedges); with `mcp` tools, the
//!    tool loop's rounds instead
//! 8. answer and settle (usage, cost)
//! 9. record

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use http::header::{
    HeaderName, HeaderValue, CACHE_CONTROL, CONTENT_LENGTH, CONTENT_TYPE, RETRY_AFTER,
};
use http::{HeaderMap, Request, Response, StatusCode};
use http_body::Body;
use http_body_util::{BodyExt, Limited};

use sluice_core::endpoint::{BodyFormat, Dialect, Endpoint};
use sluice_core::error::ApiError;
use sluice_core::limits::{self, Exceeded, Permit};
use sluice_core::record::{Content, Outcome, RequestRecord};
use sluice_core::trace_context::TraceContext;
use sluice_core::usage::Usage;
use sluice_net::sigv4::uri_decode;
use sluice_providers::exchange::DroppedParams;
use sluice_providers::passthrough::usage;
use sluice_providers::{Call, DeploymentTarget, UpstreamBody};
use sluice_routing::{
    self as routing, Attempt, Failure, FailureKind, MayUse, OnDisconnect, Requested, RouteError,
    Served,
};
use sluice_telemetry::Recorder;
use sluice_translate::envelope::Envelope;
use sluice_translate::{multipart, units};

use super::body::ResponseBody;
use super::litellm_headers;
use super::relay::StreamRelay;
use super::routes::{match_route, Route};
use super::state::{model_object, AppState, Snapshot};
use crate::auth::addresses::client_of;
use crate::auth::{self, Caller, KeyEntry, Wanted};
use crate::cache::embeddings::BatchLookup;
use crate::fleet::Verdict;
use crate::spend::{Charges, FleetShare};

/// Largest upstream answer sluice buffers (non-stream answers and error bodies).
const MAX_UPSTREAM_BODY: usize = 256 * 1024 * 1024;

/// Smallest body limit for file uploads (multipart endpoints): OpenAI takes audio files up
/// to 25 MB and several images to edit, whatever the limit for JSON bodies is.
pub(crate) const MIN_UPLOAD_LIMIT: usize = 64 * 1024 * 1024;

static X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
static X_MODEL_ID: HeaderName = HeaderName::from_static("x-sluice-model-id");
static X_OVERHEAD: HeaderName = HeaderName::from_static("x-sluice-overhead-duration-ms");
static X_DURATION: HeaderName = HeaderName::from_static("x-sluice-response-duration-ms");
static X_ACCEL: HeaderName = HeaderName::from_static("x-accel-buffering");
static X_RETRIES: HeaderName = HeaderName::from_static("x-sluice-attempted-retries");
static X_FALLBACKS: HeaderName = HeaderName::from_static("x-sluice-attempted-fallbacks");
static X_FALLBACKS_REFUSED: HeaderName = HeaderName::from_static("x-sluice-fallbacks-refused");
static X_HEDGES: HeaderName = HeaderName::from_static("x-sluice-hedged-requests");
pub(crate) static X_RESPONSE_COST: HeaderName = HeaderName::from_static("x-sluice-response-cost");
static X_KEY_SPEND: HeaderName = HeaderName::from_static("x-sluice-key-spend");
static X_LIMIT_REQUESTS: HeaderName = HeaderName::from_static("x-ratelimit-limit-requests");
static X_REMAINING_REQUESTS: HeaderName = HeaderName::from_static("x-ratelimit-remaining-requests");
static X_LIMIT_TOKENS: HeaderName = HeaderName::from_static("x-ratelimit-limit-tokens");
static X_REMAINING_TOKENS: HeaderName = HeaderName::from_static("x-ratelimit-remaining-tokens");
static JSON: HeaderValue = HeaderValue::from_static("application/json");

/// Handle one request, start to finish. Never fails: every error becomes an OpenAI-shaped
/// response.
pub async fn handle<B>(state: &AppState, mut req: Request<B>) -> Response<ResponseBody>
where
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: std::fmt::Display,
{
    // 1. Accept.
    let start = Instant::now();
    let request_id = request_id(req.headers());
    let snap = state.snapshot();
    // 1½. The client's address, once some allow-list exists (the accept loop records each
    //     peer then): read through trusted proxies, kept in the request's extensions.
    if let Some(ip) = crate::auth::addresses::read(req.extensions(), req.headers(), &snap.forwarded)
    {
        req.extensions_mut()
            .insert(crate::auth::addresses::ClientAddr(ip));
    }
    // 2. Route.
    // The operator's own routes first (they may take a path sluice serves), then sluice's.
    let route = match snap.pass_through.custom().find(req.uri().path()) {
        Some(i) => Route::Custom(i),
        None => match_route(req.method(), req.uri().path()),
    };
    let dialect = match route {
        Route::Inference(endpoint) => endpoint.dialect(),
        Route::Named(n) => n.endpoint.dialect(),
        Route::GoogleCount(_) | Route::GoogleModels(_) | Route::GoogleEmbed(..) => Dialect::Gemini,
        Route::ListModels | Route::GetModel(_)
            if super::vendor_clients::is_google_client(req.headers(), req.uri().query()) =>
        {
            Dialect::Gemini
        }
        _ => Dialect::OpenAi,
    };
    // 2½. Overload: past the in-flight limit or the memory watermark the newest work is shed
    //     (an atomic add; health probes and metrics are always answered). Then the URL length.
    let probe = matches!(
        route,
        Route::Liveness | Route::Readiness | Route::Health | Route::Metrics
    );
    let slot = if probe {
        None
    } else {
        match state.overload().admit() {
            Ok(slot) => slot,
            Err(e) => return error_response(&e, dialect),
        }
    };
    // 2¾. The gateway's `allowed_ips` (keys' and teams' lists are checked when they
    //     authenticate).
    if let Some(list) = snap.allowed_ips.as_deref().filter(|_| !probe) {
        if !crate::auth::addresses::allows(list, client_of(req.extensions())) {
            return error_response(&ApiError::AddressNotAllowed("the gateway's"), dialect);
        }
    }
    let url_len = req.uri().path_and_query().map_or(0, |p| p.as_str().len());
    if url_len > snap.max_url {
        return error_response(
            &ApiError::UriTooLong {
                limit: snap.max_url,
            },
            dialect,
        );
    }
    let mut pending = Pending {
        record: RequestRecord::new(
            request_id.clone(),
            req.method().clone(),
            route.label(),
            start,
        ),
        recorder: state.recorder(),
        armed: true,
    };
    let record = &mut pending.record;
    if matches!(route, Route::Inference(_) | Route::Named(_))
        && state.recorder().callbacks().tracing()
    {
        record.trace = Some(Box::new(TraceContext::from_headers(req.headers())));
    }
    // The routes other than inference are boxed: their futures (a WebSocket handshake, the
    // management API's store calls) are far larger than an inference's, and an unboxed branch
    // makes every request's future that large, copied whole each time it moves.
    let result = match route {
        Route::Inference(endpoint) => inference(state, &snap, endpoint, req, record).await,
        Route::Named(n) => {
            // The name borrows the path; the handler takes the request.
            let named = PathNamed {
                model: uri_decode(n.model),
                stream: n.stream,
            };
            Box::pin(path_named(state, &snap, n.endpoint, named, req, record)).await
        }
        Route::GoogleEmbed(model, batch) => {
            let model = uri_decode(model);
            Box::pin(super::vendor_clients::embed(
                state, &snap, &model, batch, req, record,
            ))
            .await
        }
        Route::GoogleCount(model) => {
            let model = uri_decode(model);
            Box::pin(super::vendor_clients::count(state, &snap, &model, req)).await
        }
        // google-genai lists models at `/v1/models`, OpenAI's path: its headers tell.
        Route::ListModels | Route::GetModel(_)
            if super::vendor_clients::is_google_client(req.headers(), req.uri().query()) =>
        {
            let one = match route {
                Route::GetModel(id) => Some(id.strip_prefix("models/").unwrap_or(id)),
                _ => None,
            };
            Box::pin(google_models(state, &snap, &req, one)).await
        }
        Route::GoogleModels(one) => Box::pin(google_models(state, &snap, &req, one)).await,
        Route::ListModels => {
            let groups_only = req.uri().query().is_some_and(|q| {
                form_urlencoded::parse(q.as_bytes())
                    .any(|(k, v)| k == "only_model_access_groups" && v.eq_ignore_ascii_case("true"))
            });
            let shape = if groups_only {
                ModelsShape::AccessGroups
            } else {
                ModelsShape::OpenAi
            };
            Box::pin(models(
                state,
                &snap,
                (req.headers(), client_of(req.extensions())),
                None,
                shape,
            ))
            .await
        }
        Route::GetModel(id) => {
            let shape = ModelsShape::OpenAi;
            Box::pin(models(
                state,
                &snap,
                (req.headers(), client_of(req.extensions())),
                Some(id),
                shape,
            ))
            .await
        }
        Route::Liveness => Ok(json(StatusCode::OK, Bytes::from_static(b"\"I'm alive!\""))),
        Route::Readiness => Ok(readiness(state)),
        Route::Health => auth::authorize(snap.master.as_ref(), req.headers()).map(|()| {
            let round = state.probes().latest();
            let probes = snap
                .probe_plan
                .as_deref()
                .map(|plan| super::health::Probes {
                    plan,
                    round: round.as_deref(),
                    spent: state.probes().spent_today(),
                });
            json(StatusCode::OK, super::health::view(&snap.router, probes))
        }),
        Route::Metrics => {
            let key = snap.master.as_ref().filter(|_| snap.metrics_need_key);
            auth::authorize(key, req.headers()).map(|()| metrics(state, &snap))
        }
        Route::PassThrough(r) => {
            Box::pin(crate::passthrough::handle(state, &snap, r, req, record)).await
        }
        Route::AzureDeployment(endpoint, deployment, r) => {
            // The name borrows the path; the handler takes the request.
            let deployment = deployment.to_owned();
            Box::pin(azure(state, &snap, endpoint, &deployment, r, req, record)).await
        }
        Route::Files(_) => Box::pin(crate::files::handle(state, &snap, req, record)).await,
        Route::State(_) => Box::pin(crate::responses::handle(state, &snap, req)).await,
        Route::Custom(i) => {
            Box::pin(crate::passthrough::custom::handle(
                state, &snap, i, req, record,
            ))
            .await
        }
        Route::Search => {
            Box::pin(crate::passthrough::search::handle(
                state, &snap, req, record,
            ))
            .await
        }
        Route::Realtime => Box::pin(crate::realtime::handle(state, &snap, req, record)).await,
        Route::Admin => Box::pin(admin(state, &snap, req)).await,
        Route::Cache(op) => Box::pin(cache_route(&snap, op, req)).await,
        Route::Mcp(server) => {
            // The name borrows the path; the handler takes the request.
            let server = server.map(str::to_owned);
            Box::pin(crate::mcp::handle(
                state,
                &snap,
                server.as_deref(),
                req,
                record,
            ))
            .await
        }
        Route::McpSse(server, part) => {
            let server = server.map(str::to_owned);
            Box::pin(crate::mcp::legacy::handle(
                state,
                &snap,
                server.as_deref(),
                part,
                req,
                record,
            ))
            .await
        }
        Route::Console => Box::pin(crate::console::handle(state, &snap, req)).await,
        Route::Routes => Ok(json(StatusCode::OK, super::routes::listing())),
        Route::Login => Ok(see_other("/ui/login")),
        Route::WrongMethod => Err(ApiError::MethodNotAllowed(req.method().to_string())),
        Route::NotFound => Err(ApiError::RouteNotFound {
            method: req.method().to_string(),
            path: req.uri().path().chars().take(200).collect(),
        }),
    };
    let mut resp = result.unwrap_or_else(|e| {
        record.error = Some(e.code());
        error_response(&e, dialect)
    });
    let headers = resp.headers_mut();
    headers.insert(X_REQUEST_ID.clone(), request_id);
    headers.insert(X_DURATION.clone(), duration_value(start.elapsed()));
    if snap.litellm_headers {
        litellm_headers::mirror(headers);
    }
    // 9. Record. A relayed stream (and a realtime session) owns its record and emits it when
    //    it ends.
    pending.armed = false;
    let owned = resp.status() == StatusCode::SWITCHING_PROTOCOLS;
    if !owned
        && !matches!(
            resp.body(),
            ResponseBody::Stream(_) | ResponseBody::Pass(_) | ResponseBody::Guarded(_)
        )
    {
        let mut record = pending.take();
        record.status = resp.status().as_u16();
        state.recorder().record(record);
    }
    // The in-flight slot is held until the response's body ends (a stream to its last frame).
    match slot {
        Some(slot) => resp.map(|body| ResponseBody::Held(Box::new((body, slot)))),
        None => resp,
    }
}

/// The record of a request still being handled. If the client goes away first, hyper drops
/// the handler, and this records the request as abandoned (nothing is lost from the logs or,
/// later, the spend).
struct Pending<'a> {
    record: RequestRecord,
    recorder: &'a Recorder,
    armed: bool,
}

impl Pending<'_> {
    fn take(&mut self) -> RequestRecord {
        let shell = self.record.clone_shell();
        std::mem::replace(&mut self.record, shell)
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if self.armed {
            let mut record = self.take();
            record.outcome = Outcome::ClientGone;
            // nginx's "client closed request": no status was sent.
            record.status = 499;
            self.recorder.record(record);
        }
    }
}

/// What a Google or Bedrock client's path says of its request: the model (decoded) and
/// whether it streams.
#[derive(Debug, Clone)]
struct PathNamed {
    model: String,
    stream: bool,
}

/// A Google (`:generateContent`) or Bedrock (`/converse`) client's call: an inference request
/// whose model and stream flag are in the path, with the key where Google's clients send it.
async fn path_named<B>(
    state: &AppState,
    snap: &Snapshot,
    endpoint: Endpoint,
    named: PathNamed,
    mut req: Request<B>,
    record: &mut RequestRecord,
) -> Result<Response<ResponseBody>, ApiError>
where
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: std::fmt::Display,
{
    let mut array = false;
    match endpoint {
        Endpoint::GenerateContent => {
            let query = req.uri().query().map(str::to_owned);
            super::vendor_clients::key_header(req.headers_mut(), query.as_deref());
            array = named.stream && !sluice_translate::gemini::asks_sse(query.as_deref());
        }
        Endpoint::Converse => super::vendor_clients::sigv4_key(req.headers_mut()),
        _ => {}
    }
    // Carried in the request, so that every other request's future does not grow by it.
    req.extensions_mut().insert(named);
    let resp = inference(state, snap, endpoint, req, record).await?;
    Ok(if array {
        super::vendor_clients::json_array(resp)
    } else {
        resp
    })
}

pub(crate) async fn inference<B>(
    state: &AppState,
    snap: &Snapshot,
    endpoint: Endpoint,
    req: Request<B>,
    record: &mut RequestRecord,
) -> Result<Response<ResponseBody>, ApiError>
where
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: std::fmt::Display,
{
    record.endpoint = Some(endpoint);
    // 3. Authenticate.
    let wall = limits::wall_ms();
    let caller = state
        .gate()
        .authenticate(
            snap.master.as_ref(),
            req.headers(),
            (client_of(req.extensions()), req.uri().path()),
            wall,
        )
        .await?;
    // 4. Read the body, within the size limit: an upload only up to its first file, the rest
    //    relayed as it arrives (`upload`).
    let (mut parts, body) = req.into_parts();
    let boundary = match endpoint.body_format() {
        BodyFormat::Json => None,
        BodyFormat::Multipart => Some(
            parts
                .headers
                .get(CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .and_then(multipart::boundary)
                .ok_or(ApiError::InvalidParam {
                    param: "content-type",
                    message: "expected multipart/form-data with a boundary".into(),
                })?,
        ),
    };
    let (mut body, upload) = match boundary {
        None => (
            read_body(body, &parts.headers, snap.max_body, snap.body_timeout).await?,
            None,
        ),
        Some(b) => {
            let limit = snap.max_body.max(MIN_UPLOAD_LIMIT);
            Box::pin(super::upload::read_head(
                body,
                &parts.headers,
                limit,
                b,
                &["model"],
            ))
            .await?
        }
    };
    // A `/moderations` body without a model goes to OpenAI's default one, as in LiteLLM.
    if endpoint == Endpoint::Moderations && boundary.is_none() {
        if let Some(b) =
            super::named_model::with_model(&body, super::named_model::MODERATION_DEFAULT)
        {
            body = b;
        }
    }
    // 4¾. A Responses request that continues a kept answer or a conversation gets their
    //     items first; one whose answer is to be kept gets its keeper (`crate::responses`),
    //     which rides in the request's extensions, so that no other request's future grows.
    //     A request run in the background is answered here, queued; it runs on as a
    //     request of its own (`crate::responses::background`).
    if endpoint == Endpoint::Responses {
        let queued = crate::responses::background::start(
            state,
            snap.responses.as_ref(),
            &caller,
            &parts,
            &body,
        )
        .await?;
        if let Some(queued) = queued {
            record.status = 200;
            return Ok(json(StatusCode::OK, Bytes::from(queued.to_string())));
        }
        let store = state.store().map(|s| &s.store);
        let run = parts
            .extensions
            .get::<crate::responses::background::BackgroundRun>()
            .cloned();
        let keeper = Box::pin(crate::responses::prepare(
            snap.responses.as_ref(),
            store,
            &caller,
            &mut body,
            run.as_ref(),
        ))
        .await?;
        if let Some(k) = keeper {
            parts.extensions.insert(k);
        }
    }
    // 4½. Guardrails on the request text (mask or block): a flag check unless one applies.
    let mut guarded = match snap.guardrails.as_deref() {
        Some(set) => {
            let carried = caller.guardrails(state.gate().directory());
            let log_content = state.recorder().callbacks().content();
            // Boxed: the step may await an external service, whose future is large; inline it
            // would grow every request's future (see `a_requests_future_stays_small`).
            match Box::pin(crate::guardrails::before(
                (set, &snap.router),
                endpoint,
                &carried,
                &mut body,
                record,
                log_content,
            ))
            .await
            {
                Ok(g) => g,
                Err(refused) => return Ok(refused.response(endpoint.dialect(), record)),
            }
        }
        None => None,
    };
    // ConverseStream's answer is binary event-stream frames, which the guardrails that read
    // answers do not read yet: such a call is refused rather than let past them.
    if endpoint == Endpoint::Converse
        && guarded.as_ref().is_some_and(|g| g.checks_answer())
        && parts
            .extensions
            .get::<PathNamed>()
            .is_some_and(|n| n.stream)
    {
        return Err(ApiError::InvalidParam {
            param: "guardrails",
            message: "guardrails that check answers apply to this request, and they do not \
                      read ConverseStream's event-stream frames yet: call /converse instead"
                .into(),
        });
    }
    // 5. Read the envelope, not the body.
    let form = match boundary {
        None => None,
        Some(b) => Some(multipart::head(&body, b)?),
    };
    let named = match endpoint.names_model_in_path() {
        true => parts.extensions.remove::<PathNamed>(),
        false => None,
    };
    let mut envelope = match (&form, named) {
        (_, Some(PathNamed { model, stream })) => Envelope::named(&body, model, stream)?,
        (None, None) => Envelope::parse(&body)?,
        (Some(parts), None) => Envelope::parse_multipart(&body, parts)?,
    };
    super::litellm_headers::read(&parts.headers, &mut envelope.routing)?;
    // LiteLLM's several-models request (`"model": "a,b"`): each model asked on its own.
    // (The comma is looked for first: most requests end the test there, before a lookup.)
    if envelope.model.contains(',')
        && matches!(endpoint, Endpoint::ChatCompletions | Endpoint::Completions)
        && !envelope.stream
        && snap.router.models.named(&envelope.model).is_none()
    {
        if let Some(models) = super::several::models(&envelope.model) {
            let range = envelope.model_range.clone();
            return super::several::answer(state, &parts, &body, range, &models).await;
        }
    }
    // A body naming its own upstream or credentials: refused unless allowed (SSRF).
    let client_target = match envelope.client_side.as_deref() {
        None => None,
        Some(side) => Some(super::client_side::check(snap.client_side.as_ref(), side).await?),
    };
    if envelope.stream && !endpoint.can_stream() {
        return Err(ApiError::StreamNotSupported);
    }
    if let (Some(n), Some(limit)) = (envelope.messages, snap.max_messages) {
        if n > limit {
            return Err(ApiError::InvalidParam {
                param: "messages",
                message: format!(
                    "{n} messages; the limit is {limit} (general_settings.max_messages)"
                ),
            });
        }
    }
    if let Some(name) = guarded.as_ref().and_then(|g| g.external_on_answer()) {
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
    // 5¾. MCP tools in a Responses request (`tools: [{type: "mcp"}]`): sluice runs the tool
    //     loop itself against its own servers (`mcp::responses`), checked here, before
    //     admission. Every other request pays at most one memchr search of a Responses body.
    let mcp_loop = if crate::mcp::responses::may_name_mcp(endpoint, &body) {
        let l = crate::mcp::responses::McpLoop::read(
            state,
            snap,
            &caller,
            &parts.headers,
            &body,
            &record.request_id,
        )?;
        if l.is_some() && client_target.is_some() {
            return Err(ApiError::InvalidParam {
                param: "tools",
                message: "mcp tools run on this gateway's own deployments: send them without \
                          client-side credentials"
                    .into(),
            });
        }
        l
    } else {
        None
    };
    // Speech is audio relayed as it arrives, whatever the request says.
    let stream = envelope.stream || endpoint.answers_binary();
    let requested_units = units::request_units(endpoint, &body, form.as_deref());
    record.stream = stream;
    // A body with the client's own key is not handed to logging callbacks (it would carry it).
    if state.recorder().callbacks().content() && client_target.is_none() {
        let mut content = Content {
            request: body.clone(),
            ..Content::default()
        };
        if let Some(g) = guarded.as_ref() {
            if let Some(logged) = g.logged_request() {
                content.request = logged;
            }
            // `logging_only` cannot mask a stream's frames yet: the log keeps none of them.
            if stream && g.masks_logs() {
                content.stream.truncated = true;
            }
        }
        record.content = Some(Box::new(content));
    }
    // The caller's own aliases (a key's `aliases`, its team's `model_aliases`) name a group
    // before the config's names do. An alias names a model group (`model_name`, or a
    // `model_group_alias`), so the group is found by name and no copy of the alias outlives
    // this statement. Access is judged on the name asked for and the group, except for the
    // key's own alias, which grants nothing (`auth::Alias`).
    let (resolved, by_group) = match caller.alias(state.gate().directory(), &envelope.model) {
        Some(alias) => (
            snap.router
                .models
                .named(alias.group())
                .map(routing::Resolved::whole),
            matches!(alias, crate::auth::Alias::Key(_)),
        ),
        None => (snap.router.models.resolve(&envelope.model), false),
    };
    let resolved = resolved
        .ok_or_else(|| ApiError::ModelNotFound(envelope.model.chars().take(256).collect()))?;
    record.model = Some(resolved.group.name.clone());
    record.requested_model = record.model.clone();
    // A JWT's end user (`end_user_id_jwt_field`) is the token's word, over the body's `user`.
    let end_user = match &caller {
        Caller::Key(k) => k.jwt.as_ref().and_then(|j| j.end_user.as_deref()),
        Caller::Open | Caller::Master => None,
    }
    .or(envelope.user.as_deref());
    record.end_user = end_user.map(Into::into);
    // Tags (the request's, its key's and team's) hold it to their budgets and limits (step
    // 6), route among a group's deployments when `enable_tag_filtering` is on, and go to the
    // spend log.
    let tags = super::tags::gather(
        envelope.routing.tags.as_deref(),
        &parts.headers,
        match &caller {
            Caller::Key(k) => Some(&**k),
            Caller::Open | Caller::Master => None,
        },
        state.gate().directory(),
    );
    // 6. Admit: the caller's model access, rate limits and budgets, and its tags'.
    let estimate = match &caller {
        Caller::Open | Caller::Master if tags.is_none() => 0,
        _ => crate::spend::estimate(resolved.group, body.len(), envelope.max_tokens),
    };
    let (permit, fleet) = admit_estimated(
        state,
        &caller,
        end_user,
        Wanted::of(
            if by_group {
                &resolved.group.name
            } else {
                &envelope.model
            },
            resolved.group,
        ),
        estimate,
        tags.as_deref(),
        &record.request_id,
        wall,
    )
    .await?;
    // The key's and its team's `metadata.cache` over the request's own controls.
    let policy = snap.cache.as_ref().and_then(|c| {
        caller.cache_policy(
            state.gate().directory(),
            envelope.routing.cache.as_deref(),
            c.namespace(),
        )
    });
    let key = caller.into_key();
    record.key = key.as_ref().map(|k| k.info.clone());
    // 6½. The cache: a stored answer, or an identical request's in flight; an embeddings
    //     batch input by input.
    let mut cached = None;
    let mut batch = None;
    let mut fewer_inputs: Option<Bytes> = None;
    let control = policy.as_ref().or(envelope.routing.cache.as_deref());
    // An answer guardrails check is neither served from the cache nor stored in it unchecked.
    let answer_checked = guarded.as_ref().is_some_and(|g| g.checks_answer());
    if let Some(cache) = snap
        .cache
        .as_ref()
        .filter(|c| !answer_checked && mcp_loop.is_none() && c.applies(endpoint, control))
    {
        let group = &resolved.group.name;
        if endpoint == Endpoint::Embeddings {
            let asked = crate::cache::controls(control, &parts.headers);
            match Box::pin(crate::cache::embeddings::lookup(
                cache, group, &body, asked, record,
            ))
            .await
            {
                BatchLookup::Answered(resp) => return Ok(resp),
                BatchLookup::Call {
                    body: fewer,
                    batch: b,
                } => {
                    fewer_inputs = fewer;
                    record.saved = Some(b.saved).filter(|s| *s > 0);
                    batch = Some(Box::new(b));
                }
                BatchLookup::NotBatch => {}
            }
        }
        let shape = if batch.is_some() {
            None
        } else if !stream {
            Some(sluice_cache::Shape::Whole)
        } else {
            // Only Chat Completions and Completions leave usage out of a stream unless asked.
            let optional = matches!(endpoint, Endpoint::ChatCompletions | Endpoint::Completions);
            Some(sluice_cache::Shape::Stream {
                usage: envelope.client_wants_usage || !optional,
            })
        };
        if let Some(shape) = shape {
            match Box::pin(crate::cache::lookup(
                cache,
                &snap.router,
                endpoint,
                group,
                &body,
                shape,
                control,
                &parts.headers,
                record,
            ))
            .await
            {
                crate::cache::Lookup::Answered(resp) => return Ok(resp),
                crate::cache::Lookup::Call(pending) => cached = pending,
            }
        }
    }
    // 7. Select a deployment and call it: routing::dispatch picks, retries, falls back and
    //    hedges; `attempt` makes each call and classifies its failure.
    let force_usage = envelope.stream
        && matches!(endpoint, Endpoint::ChatCompletions | Endpoint::Completions)
        && !envelope.client_wants_usage;
    // Each fallback is held to the same access rule as the group the request named.
    let may_use = |name: &str, group: &routing::Group| {
        key.as_deref().is_none_or(|k| {
            state
                .gate()
                .directory()
                .may_use(k, &Wanted::of(name, group))
                .is_ok()
        })
    };
    // An end user held to one region (`allowed_model_region`) is served only there.
    let region = envelope
        .user
        .as_deref()
        .and_then(|u| state.gate().directory().end_user_region(u));
    let tag_names: Vec<&str> = tags.iter().flat_map(|t| t.iter()).map(|t| &**t).collect();
    record.tags = tags.clone();
    let requested = Requested {
        num_retries: envelope.routing.num_retries,
        fallbacks: envelope.routing.fallbacks.as_deref(),
        one_shot: upload.is_some(),
        may_use: key.is_some().then_some(MayUse(&may_use)),
        mock: envelope.routing.mock,
        region: region.as_deref(),
        tags: &tag_names,
    };
    let sent_at = Instant::now();
    let before_send = sent_at - record.start;
    let trace = record.trace.as_ref();
    // A closure, not the future itself: a future held in a local and then awaited in one arm
    // takes two slots in this function's state (the local and the awaited value), which doubled
    // every request's future and the bytes copied each time it moves.
    // A batch with fewer inputs is a body of its own, and so an envelope of its own (the
    // model's place in it, for the upstream's name).
    let fewer_envelope = match fewer_inputs.as_deref() {
        Some(b) => Some(Envelope::parse(b)?),
        None => None,
    };
    let (sent, sent_envelope) = match (&fewer_inputs, &fewer_envelope) {
        (Some(b), Some(e)) => (b, e),
        _ => (&body, &envelope),
    };
    let dispatch = || {
        routing::dispatch(&snap.router, resolved, &requested, |a: Attempt<'_>| {
            let call = Call {
                endpoint,
                client_headers: &parts.headers,
                body: sent,
                upload: upload.as_ref(),
                envelope: sent_envelope,
                capture: a.capture,
                force_usage,
                trace: trace.map(|t| (t.traceparent_for(a.span_id), t.state.as_ref())),
            };
            let own = client_target
                .as_ref()
                .map(|c| c.target(&a.member.target, state.clients()));
            let timeout = envelope.routing.timeout;
            async move {
                match own {
                    None => attempt(&a.member.target, call, stream, timeout).await,
                    Some(Ok(target)) => attempt(&target, call, stream, timeout).await,
                    Some(Err(e)) => Err(Failure {
                        kind: failure_kind(&e),
                        retry_after: None,
                        error: Failed::Gateway(e),
                        terminal: true,
                        scoped: false,
                    }),
                }
            }
        })
    };
    // A Responses request with MCP tools: rounds of whole calls and the tool calls between
    // them, one outcome (the last round's, its answer the composed one). External
    // `during_call` guardrails are asked beside any other call: a refusal drops (cancels) the
    // call, and no answer goes out before every check has passed.
    let during = guarded.as_mut().and_then(|g| g.take_during());
    let mut outcome = match (mcp_loop, during) {
        (Some(mut l), _) => {
            let rid = record.request_id.clone();
            l.trace.clone_from(&record.trace);
            Box::pin(l.run(
                state,
                &snap.router,
                resolved,
                &requested,
                &parts.headers,
                envelope.routing.timeout,
                &rid,
            ))
            .await?
        }
        (None, None) => dispatch().await,
        (None, Some(during)) => {
            let mut dispatched = Box::pin(dispatch());
            let mut check = Box::pin(during.run());
            let (outcome, mut verdict) = tokio::select! {
                mut verdict = &mut check => {
                    if let Some(e) = verdict.take_refusal() {
                        drop(dispatched);
                        verdict.note(record);
                        return Err(e);
                    }
                    ((&mut dispatched).await, verdict)
                }
                outcome = &mut dispatched => (outcome, check.await),
            };
            drop(dispatched);
            // The upstream answered first: a refusal replaces the answer (step 8).
            if let (Some(e), Some(g)) = (verdict.take_refusal(), guarded.as_mut()) {
                g.refuse(e);
            }
            verdict.note(record);
            outcome
        }
    };
    let arrived = Instant::now();
    let attempts = AttemptCounts::of(&outcome);
    record.retries = outcome.retries;
    record.fallbacks = outcome.fallbacks;
    record.hedges = outcome.hedges;
    record.attempts = std::mem::take(&mut outcome.attempts);
    if let Some(m) = outcome.last {
        record.deployment = Some(m.target.info.id.clone());
        record.provider = Some(m.target.provider.name());
    }
    // An upload the client broke off, or that passed the limit while relayed, is the client's
    // error, whatever the upstream made of the cut body.
    if let Some(e) = upload.as_ref().and_then(|u| u.client_error()) {
        if outcome.result.is_err() {
            return Err(e.into());
        }
    }
    // 8. Answer, and settle what the request used.
    let mut charges = Charges {
        deployment: None,
        permit,
        price: None,
        fleet,
    };
    let mut resp = match outcome.result {
        Err(failure) => {
            record.failure = Some(failure.kind.name());
            match failure.error {
                Failed::Upstream(resp) => {
                    // The requests waiting on this one get the provider's refusal too.
                    if let Some(c) = cached.take() {
                        let ct = resp.headers().get(CONTENT_TYPE);
                        c.whole(resp.status(), ct, resp.body(), None, None);
                    }
                    passthrough(resp, record)
                }
                Failed::Gateway(e) => {
                    record.error = Some(e.code());
                    error_response(&e, endpoint.dialect())
                }
            }
        }
        Ok(Served {
            answer,
            group,
            member,
            guard,
        }) => {
            record.model = Some(group.name.clone());
            // The keeper of a Responses answer to keep (step 4¾), from the request.
            let keeper = parts.extensions.remove::<Box<crate::responses::Keeper>>();
            let h = member.target.id_header.clone();
            charges.deployment = Some(guard);
            charges.price = Some(match wildcard_price(snap, resolved, group, member) {
                Some((price, images)) => images.price(price, &requested_units),
                None => member
                    .target
                    .image_prices
                    .price(member.target.price, &requested_units),
            });
            let mut resp = match answer {
                Answer::Full(parts, bytes) => {
                    record.usage = usage::of_answer(endpoint, &bytes, requested_units);
                    // A kept Responses answer names what it continued (the request reached the
                    // provider without it), and is kept as the client gets it.
                    let bytes = match keeper.filter(|_| parts.status.is_success()) {
                        Some(k) => {
                            let bytes = k.echo(bytes);
                            k.keep_whole(bytes.clone());
                            bytes
                        }
                        None => bytes,
                    };
                    if let Some(c) = record.content.as_mut() {
                        c.response = Some(bytes.clone());
                    }
                    let cost = charges.settle(record);
                    let mut cache_key = cached.take().map(|c| {
                        let mut h = HeaderMap::new();
                        c.mark(&mut h);
                        let ct = parts.headers.get(CONTENT_TYPE);
                        c.whole(parts.status, ct, &bytes, record.usage, cost);
                        h
                    });
                    // An embeddings batch sent with the inputs the cache lacked: stored input
                    // by input, and answered whole in the client's order.
                    let bytes = match batch.take() {
                        Some(b) => {
                            let mut h = HeaderMap::new();
                            b.mark(&mut h);
                            cache_key = Some(h);
                            b.finish(parts.status, bytes, cost)
                        }
                        None => bytes,
                    };
                    let checked = match guarded.as_mut() {
                        Some(g) => Box::pin(g.after(endpoint, parts.status, bytes, record)).await,
                        None => Ok(bytes),
                    };
                    let mut resp = match checked {
                        Ok(bytes) => passthrough(Response::from_parts(parts, bytes), record),
                        Err(e) => {
                            record.error = Some(e.code());
                            record.status = e.status().as_u16();
                            error_response(&e, endpoint.dialect())
                        }
                    };
                    if let Some(h) = cache_key {
                        resp.headers_mut().extend(h);
                    }
                    if let Some(c) = cost {
                        resp.headers_mut()
                            .insert(X_RESPONSE_COST.clone(), usd_value(c));
                    }
                    spend_headers(&charges, key.as_deref(), resp.headers_mut());
                    record.overhead = before_send + arrived.elapsed();
                    resp
                }
                Answer::Stream { parts, first, rest } => {
                    if let Some(e) = guarded.as_mut().and_then(|g| g.take_refusal()) {
                        // A during_call check blocked: the stream is dropped unsent.
                        drop((first, rest));
                        record.status = e.status().as_u16();
                        record.error = Some(e.code());
                        return Ok(error_response(&e, endpoint.dialect()));
                    }
                    let mut spend = HeaderMap::new();
                    spend_headers(&charges, key.as_deref(), &mut spend);
                    record.ttfb = Some(arrived - record.start);
                    record.status = parts.status.as_u16();
                    record.overhead = before_send + arrived.elapsed();
                    if endpoint.answers_binary() {
                        record.usage = Some(Usage::requested(requested_units));
                    }
                    let events = parts
                        .headers
                        .get(CONTENT_TYPE)
                        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
                    let relay = StreamRelay::new(
                        first,
                        rest,
                        force_usage,
                        endpoint,
                        record.clone(),
                        state.recorder().clone(),
                    )
                    .idle_timeout(member.target.timeouts.idle)
                    .charges(std::mem::take(&mut charges))
                    .finish_on_disconnect(snap.router.policy.on_disconnect == OnDisconnect::Finish);
                    let echo = keeper.as_ref().and_then(|k| k.stream_echo());
                    let relay = relay
                        .keep(keeper)
                        .events(events || !endpoint.answers_binary());
                    let body = match cached.take() {
                        Some(c) => {
                            let ct = parts
                                .headers
                                .get(CONTENT_TYPE)
                                .cloned()
                                .unwrap_or(HeaderValue::from_static("text/event-stream"));
                            c.mark(&mut spend);
                            c.stream(parts.status, ct, relay)
                        }
                        None => match guarded
                            .as_mut()
                            .filter(|_| !endpoint.answers_binary())
                            .and_then(|g| g.on_stream())
                        {
                            // post_call guardrails check the stream as it passes, and the
                            // request's placeholders are given back (an answer of audio
                            // bytes has no text to check).
                            Some((list, restore)) => ResponseBody::Guarded(Box::new(
                                crate::guardrails::GuardedStream::new(
                                    relay, list, endpoint, restore,
                                ),
                            )),
                            None => ResponseBody::Stream(Box::new(relay)),
                        },
                    };
                    // A Responses stream that continued a kept answer names it (`crate::responses`).
                    let body = match echo {
                        Some(e) => super::body::Reshaped::body(body, *e),
                        None => body,
                    };
                    let mut resp = stream_response(parts, body);
                    resp.headers_mut().extend(spend);
                    resp
                }
            };
            resp.headers_mut().insert(X_MODEL_ID.clone(), h);
            resp
        }
    };
    let h = resp.headers_mut();
    if let Some(m) = outcome.last.filter(|_| !h.contains_key(&X_MODEL_ID)) {
        h.insert(X_MODEL_ID.clone(), m.target.id_header.clone());
    }
    attempts.write(h);
    if let Some(refused) = &outcome.refused {
        refused_header(refused, h);
    }
    if let Some(v) = guarded.as_ref().and_then(|g| g.applied()) {
        h.insert(crate::guardrails::X_APPLIED_GUARDRAILS.clone(), v);
    }
    h.insert(X_OVERHEAD.clone(), duration_value(record.overhead));
    if snap.litellm_headers {
        litellm_facts(h, snap, &requested, &envelope.routing, outcome.last);
    }
    Ok(resp)
}

/// LiteLLM's facts without a sluice header of their own: the group, region, retries allowed
/// and timeout of the deployment that answered (or the last one tried).
fn litellm_facts(
    h: &mut HeaderMap,
    snap: &Snapshot,
    requested: &Requested<'_>,
    routing: &sluice_translate::envelope::RequestRouting,
    last: Option<&routing::Member>,
) {
    // Room made once for these and the mirrored ones, rather than a step at a time.
    h.reserve(16);
    if let Some(g) = last.and_then(|m| m.target.group_header.as_ref()) {
        h.insert(litellm_headers::MODEL_GROUP.clone(), g.clone());
    }
    if let Some(r) = last.and_then(|m| m.target.region_header.as_ref()) {
        h.insert(litellm_headers::MODEL_REGION.clone(), r.clone());
    }
    // The request's own, else the serving deployment's, else the router's (as dispatch does).
    let retries = requested
        .num_retries
        .or(last.and_then(|m| m.target.num_retries))
        .unwrap_or(snap.router.policy.num_retries);
    h.insert(
        litellm_headers::MAX_RETRIES.clone(),
        litellm_headers::count(retries),
    );
    let timeout = match (routing.timeout, last) {
        (Some(t), _) => Some(sluice_providers::seconds_header(t)),
        (None, Some(m)) => Some(m.target.timeout_header.clone()),
        (None, None) => None,
    };
    if let Some(t) = timeout {
        h.insert(litellm_headers::TIMEOUT.clone(), t);
    }
}

/// The price of the model a wildcard deployment served (`openai/*` asked for `dall-e-3`),
/// when the deployment has none of its own: found in the price table by the model asked for,
/// so that its answers are not free.
fn wildcard_price(
    snap: &Snapshot,
    resolved: routing::Resolved<'_>,
    group: &routing::Group,
    member: &routing::Member,
) -> Option<(sluice_core::price::Price, sluice_core::price::ImagePrices)> {
    // A wildcard's capture first: most requests have none and stop here.
    let capture = resolved
        .capture
        .filter(|_| std::ptr::eq(resolved.group, group))?;
    let target = &member.target;
    if target.price != sluice_core::price::Price::default() || !target.image_prices.is_empty() {
        return None;
    }
    let model = target.info.upstream_model.replacen('*', capture, 1);
    snap.pass_through
        .prices()
        .for_model(target.info.provider, &model)
}

/// An Azure client's `/openai/deployments/{deployment}/{endpoint}`: sluice's own endpoint
/// when `{deployment}` is a model group here (the body's model, or else the deployment,
/// names it), and the `/openai/*` pass-through otherwise, as before.
async fn azure<B>(
    state: &AppState,
    snap: &Snapshot,
    endpoint: Endpoint,
    deployment: &str,
    pass: Option<sluice_providers::passthrough::Route>,
    req: Request<B>,
    record: &mut RequestRecord,
) -> Result<Response<ResponseBody>, ApiError>
where
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: std::fmt::Display,
{
    let served = snap.router.models.resolve(deployment).is_some();
    if !served || endpoint.body_format() != BodyFormat::Json {
        return match pass {
            Some(r) => crate::passthrough::handle(state, snap, r, req, record).await,
            None => Err(ApiError::ModelNotFound(
                deployment.chars().take(256).collect(),
            )),
        };
    }
    if req.method() != http::Method::POST {
        return Err(ApiError::MethodNotAllowed(req.method().to_string()));
    }
    record.route = Route::Inference(endpoint).label();
    let (parts, body) = req.into_parts();
    let body = read_body(body, &parts.headers, snap.max_body, snap.body_timeout).await?;
    let body = super::named_model::with_model(&body, deployment).unwrap_or(body);
    let req = Request::from_parts(parts, http_body_util::Full::new(body));
    inference(state, snap, endpoint, req, record).await
}

/// The cache's management routes, behind the master key.
async fn cache_route<B>(
    snap: &Snapshot,
    op: crate::cache::CacheOp,
    req: Request<B>,
) -> Result<Response<ResponseBody>, ApiError>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    auth::authorize(snap.master.as_ref(), req.headers())?;
    let (parts, body) = req.into_parts();
    let body = read_body(body, &parts.headers, snap.max_body, snap.body_timeout).await?;
    crate::cache::manage(op, snap.cache.as_deref(), &body).await
}

/// The management API, behind the master key. A change is applied to this instance's key
/// directory at once and announced to the fleet, so a blocked or deleted key stops working
/// everywhere within the poll interval at worst.
async fn admin<B>(
    state: &AppState,
    snap: &Snapshot,
    req: Request<B>,
) -> Result<Response<ResponseBody>, ApiError>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    if snap.master.is_none() {
        return Err(ApiError::Unauthorized(
            "the management API needs general_settings.master_key",
        ));
    }
    // The master key, or a virtual key reading its own records (`admin::own_query`): 401 for
    // a key that is not valid, 403 for a valid key asking for more.
    let wall = limits::wall_ms();
    let caller = state
        .gate()
        .authenticate(
            snap.master.as_ref(),
            req.headers(),
            (client_of(req.extensions()), req.uri().path()),
            wall,
        )
        .await?;
    let (parts, body) = req.into_parts();
    let path = parts.uri.path();
    let own = match &caller {
        // A proxy_admin user's key is an admin, as in LiteLLM.
        Caller::Key(k) if state.gate().directory().is_proxy_admin(k) => {
            state.gate().directory().usable(k, wall)?;
            None
        }
        Caller::Key(k) => {
            state.gate().directory().usable(k, wall)?;
            let q = parts.uri.query().unwrap_or("");
            // An internal user's key making or changing its own user's keys.
            if let Some(user) = state.gate().directory().key_manager(k) {
                if crate::admin::user_keys_route(&parts.method, path) {
                    let body =
                        read_body(body, &parts.headers, snap.max_body, snap.body_timeout).await?;
                    let answer =
                        crate::admin::user_keys(state, &parts.method, path, &body, &user).await?;
                    let bytes = serde_json::to_vec(&answer)
                        .map_err(|_| ApiError::Internal("admin answer"))?;
                    return Ok(json(StatusCode::OK, Bytes::from(bytes)));
                }
            }
            if let Some(answer) = crate::admin::key_read(state, &parts.method, path, q, k) {
                let bytes =
                    serde_json::to_vec(&answer?).map_err(|_| ApiError::Internal("admin answer"))?;
                return Ok(json(StatusCode::OK, Bytes::from(bytes)));
            }
            Some(crate::admin::own_query(
                &parts.method,
                path,
                q,
                k,
                state.gate().directory(),
            )?)
        }
        Caller::Master | Caller::Open => None,
    };
    let body = read_body(body, &parts.headers, snap.max_body, snap.body_timeout).await?;
    let query = own
        .as_deref()
        .unwrap_or_else(|| parts.uri.query().unwrap_or(""));
    // LiteLLM's header naming who makes a change, for the audit log; else the master key's.
    let by = parts
        .headers
        .get("litellm-changed-by")
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().chars().take(128).collect::<String>())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "admin".to_owned());
    let answer = crate::admin::call(state, &parts.method, path, query, &body, &by).await?;
    let bytes = serde_json::to_vec(&answer).map_err(|_| ApiError::Internal("admin answer"))?;
    Ok(json(StatusCode::OK, Bytes::from(bytes)))
}

/// Step 6: check that the caller may use `group` and admit the request against the limits and
/// budgets of its key, team, user and end user. The master key and an open gateway have none.
/// With a fleet, the shared counters in Redis decide (this instance's counters follow along);
/// if Redis does not answer in time, this instance's counters decide alone.
pub(crate) async fn admit<'w>(
    state: &AppState,
    caller: &Caller,
    end_user: Option<&str>,
    wanted: impl Into<Wanted<'w>>,
    request_id: &HeaderValue,
    wall: u64,
) -> Result<(Option<Permit>, Option<FleetShare>), ApiError> {
    admit_estimated(state, caller, end_user, wanted, 0, None, request_id, wall).await
}

/// [`admit`], with what the request may cost (`spend::estimate`) reserved against the budget
/// of each caller that has no cost history yet, and the request's tags' limits (`/tag/new`)
/// beside the caller's.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn admit_estimated<'w>(
    state: &AppState,
    caller: &Caller,
    end_user: Option<&str>,
    wanted: impl Into<Wanted<'w>>,
    estimate: limits::Nanos,
    tags: Option<&[Arc<str>]>,
    request_id: &HeaderValue,
    wall: u64,
) -> Result<(Option<Permit>, Option<FleetShare>), ApiError> {
    let directory = state.gate().directory();
    let mut subjects = match (caller, end_user) {
        (Caller::Key(key), _) => directory.subjects(key, end_user, &wanted.into(), wall)?,
        // The end user's own limits bind whoever sends for them, the master key too (as in
        // LiteLLM, where a customer's budget holds for every caller).
        (Caller::Master | Caller::Open, Some(e)) => directory.end_user_subjects(e)?,
        (Caller::Master | Caller::Open, None) => limits::Subjects::default(),
    };
    // A tag's budget holds every request that carries it, whoever calls.
    if let Some(tags) = tags {
        directory.tag_subjects(tags, &mut subjects);
    }
    if subjects.is_empty() {
        return Ok((None, None));
    }
    if let Some(fleet) = state.fleet() {
        let id = request_id.to_str().unwrap_or("-");
        match fleet.admit(&subjects, id, wall, estimate).await {
            Some(Verdict::Refused(r)) => return Err(ApiError::Limited(r)),
            Some(Verdict::Admitted(remaining)) => {
                let share = FleetShare::new(fleet.clone(), id.into(), remaining);
                return Ok((Some(limits::admit_counted(subjects, wall)), Some(share)));
            }
            None => {}
        }
    }
    limits::admit_reserving(subjects, wall, estimate)
        .map(|p| (Some(p), None))
        .map_err(ApiError::Limited)
}

/// `x-ratelimit-*` (LiteLLM's names) from the tightest of the caller's limits, and the key's
/// spend so far.
pub(crate) fn spend_headers(charges: &Charges, key: Option<&KeyEntry>, h: &mut HeaderMap) {
    let Some(permit) = &charges.permit else {
        return;
    };
    let left = match &charges.fleet {
        Some(share) => share.remaining,
        None => permit.remaining(limits::wall_ms()),
    };
    if let Some((limit, remaining)) = left.requests {
        h.insert(X_LIMIT_REQUESTS.clone(), HeaderValue::from(limit));
        h.insert(X_REMAINING_REQUESTS.clone(), HeaderValue::from(remaining));
    }
    if let Some((limit, remaining)) = left.tokens {
        h.insert(X_LIMIT_TOKENS.clone(), HeaderValue::from(limit));
        h.insert(X_REMAINING_TOKENS.clone(), HeaderValue::from(remaining));
    }
    if let Some(k) = key {
        h.insert(
            X_KEY_SPEND.clone(),
            usd_value(k.subject.counters.spent(limits::wall_ms())),
        );
        if k.per_model.is_some() {
            per_model_headers(permit, h);
        }
    }
}

/// LiteLLM's `x-litellm-key-remaining-requests-{model}` and `-tokens-{model}`: what is left
/// of the key's own limits for the requested model. Only a key with per-model limits pays for
/// the header names; a model whose name cannot be part of one (`openai/gpt-4o`) gets none.
fn per_model_headers(permit: &Permit, h: &mut HeaderMap) {
    let now = limits::wall_ms();
    for s in permit
        .subjects()
        .filter(|s| s.kind == limits::SubjectKind::Key)
    {
        let Some(model) = crate::auth::per_model::PerModel::model_of(s) else {
            continue;
        };
        let left = s.remaining(now);
        for (what, pair) in [("requests", left.requests), ("tokens", left.tokens)] {
            let Some((_, remaining)) = pair else {
                continue;
            };
            let name = format!(
                "x-litellm-key-remaining-{what}-{}",
                model.to_ascii_lowercase()
            );
            if let Ok(name) = HeaderName::from_bytes(name.as_bytes()) {
                h.insert(name, HeaderValue::from(remaining));
            }
        }
    }
}

/// Dollars as a header value, exact to the nano-dollar with trailing zeros trimmed (`0.00015`),
/// written from integers on the stack: formatting the `f64` cost ~600 instructions and a
/// `String` per keyed request.
pub(crate) fn usd_value(n: limits::Nanos) -> HeaderValue {
    use std::io::Write as _;
    let mut buf = [0u8; 32];
    let mut rest = &mut buf[..];
    let (whole, frac) = (n / 1_000_000_000, n % 1_000_000_000);
    let written = if frac == 0 {
        write!(rest, "{whole}")
    } else {
        write!(rest, "{whole}.{frac:09}")
    };
    let Ok(()) = written else {
        return HeaderValue::from_static("0");
    };
    let mut len = 32 - rest.len();
    if frac != 0 {
        while buf[len - 1] == b'0' {
            len -= 1;
        }
    }
    HeaderValue::from_bytes(&buf[..len]).unwrap_or(HeaderValue::from_static("0"))
}

/// `x-sluice-fallbacks-refused`: the fallback groups skipped because the caller may not use
/// them, so that a client sees why its fallback was not tried.
pub(crate) fn refused_header(refused: &[Arc<str>], h: &mut HeaderMap) {
    let list = refused.iter().map(|n| &**n).collect::<Vec<_>>().join(", ");
    if let Ok(v) = HeaderValue::from_str(&list) {
        h.insert(X_FALLBACKS_REFUSED.clone(), v);
    }
}

/// Response headers that tell the client how hard routing had to work.
#[derive(Debug, Clone, Copy)]
struct AttemptCounts {
    retries: u32,
    fallbacks: u32,
    hedges: u32,
}

impl AttemptCounts {
    fn of<A, E>(o: &routing::Outcome<'_, A, E>) -> Self {
        Self {
            retries: o.retries,
            fallbacks: o.fallbacks,
            hedges: o.hedges,
        }
    }

    fn write(self, h: &mut HeaderMap) {
        h.insert(X_RETRIES.clone(), count_value(self.retries));
        h.insert(X_FALLBACKS.clone(), count_value(self.fallbacks));
        if self.hedges > 0 {
            h.insert(X_HEDGES.clone(), count_value(self.hedges));
        }
    }
}

/// A small count as a header value; the common ones are static (no allocation per request).
fn count_value(n: u32) -> HeaderValue {
    const DIGITS: [&str; 4] = ["0", "1", "2", "3"];
    match DIGITS.get(n as usize) {
        Some(d) => HeaderValue::from_static(d),
        None => HeaderValue::from(n),
    }
}

/// What one attempt produced.
pub(crate) enum Answer {
    /// A non-stream answer, whole.
    Full(http::response::Parts, Bytes),
    /// A stream: its head, its first data frame, and the rest of the body.
    Stream {
        parts: http::response::Parts,
        first: Bytes,
        rest: UpstreamBody,
    },
}

/// What the client gets if no attempt succeeds.
pub(crate) enum Failed {
    /// The upstream's own error answer, passed through.
    Upstream(Response<Bytes>),
    /// sluice's error.
    Gateway(ApiError),
}

impl From<RouteError> for Failed {
    fn from(e: RouteError) -> Self {
        Self::Gateway(ApiError::NoDeployment(e))
    }
}

/// One call to one deployment, within its timeout (the request's `timeout` when it sets one):
/// the whole answer for non-stream requests, the first chunk for streams. Any failure comes
/// back classified for the router.
pub(crate) async fn attempt(
    target: &DeploymentTarget,
    call: Call<'_>,
    stream: bool,
    timeout: Option<Duration>,
) -> Result<Answer, Failure<Failed>> {
    let t = &target.timeouts;
    let limit = timeout.unwrap_or(if stream { t.first_chunk } else { t.total });
    let answer = tokio::time::timeout(limit, async {
        let resp = target.send(&call).await?;
        let (parts, mut body) = resp.into_parts();
        if !parts.status.is_success() {
            let bytes = collect_upstream(body).await?;
            return Ok(Err(Response::from_parts(parts, bytes)));
        }
        if !stream {
            let bytes = collect_upstream(body).await?;
            if !json_as_declared(&parts.headers, &bytes) {
                return Err(ApiError::UpstreamInvalid(
                    "the answer says it is JSON but is not".into(),
                ));
            }
            return Ok(Ok(Answer::Full(parts, bytes)));
        }
        // Wait for the first data frame, so that an upstream failing before it still gets a
        // retry, a fallback or a proper error status instead of a broken stream.
        loop {
            match body.frame().await {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) if !data.is_empty() => {
                        return Ok(Ok(Answer::Stream {
                            parts,
                            first: data,
                            rest: body,
                        }))
                    }
                    Ok(_) | Err(_) => {}
                },
                Some(Err(e)) => return Err(ApiError::UpstreamUnreachable(e.to_string())),
                None => {
                    return Err(ApiError::UpstreamInvalid(
                        "the stream ended before its first chunk".into(),
                    ))
                }
            }
        }
    })
    .await
    .unwrap_or(Err(ApiError::UpstreamTimeout(limit)));
    // A failure after the upload began to flow ends the request: it cannot be sent again.
    let spent = call.upload.is_some_and(|u| u.spent());
    match answer {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(resp)) => Err(Failure {
            kind: FailureKind::from_response(resp.status(), resp.body()),
            retry_after: routing::retry_after(resp.headers()),
            scoped: endpoint_scoped(call.endpoint, resp.status()),
            error: Failed::Upstream(resp),
            terminal: spent,
        }),
        Err(e) => Err(Failure {
            kind: failure_kind(&e),
            retry_after: None,
            // sluice declining an endpoint or provider it does not serve here says nothing
            // of the deployment's health.
            scoped: matches!(
                e,
                ApiError::ProviderNotSupported { .. } | ApiError::EndpointNotSupported { .. }
            ),
            error: Failed::Gateway(e),
            terminal: spent,
        }),
    }
}

/// A 404 for an endpoint other than a deployment's main ones (`count_tokens`, moderations,
/// audio, …) says the upstream does not serve that endpoint, nothing about its health: chat and
/// Messages calls keep going to it.
fn endpoint_scoped(endpoint: Endpoint, status: StatusCode) -> bool {
    status == StatusCode::NOT_FOUND
        && !matches!(
            endpoint,
            Endpoint::ChatCompletions
                | Endpoint::Messages
                | Endpoint::Responses
                | Endpoint::Embeddings
        )
}

/// How the router should treat one of sluice's own errors from an attempt.
pub(crate) fn failure_kind(e: &ApiError) -> FailureKind {
    match e {
        ApiError::UpstreamTimeout(_) | ApiError::UpstreamIdle(_) => FailureKind::Timeout,
        ApiError::UpstreamUnreachable(_) => FailureKind::Connection,
        ApiError::UpstreamInvalid(_) => FailureKind::Server,
        // Another deployment of the group (or a fallback) may be one sluice can call.
        ApiError::ProviderNotSupported { .. } | ApiError::EndpointNotSupported { .. } => {
            FailureKind::NotFound
        }
        // Everything else is this request's own, or sluice's: another attempt would meet the
        // same. Listed one by one, so that a new variant is a decision, not a default.
        ApiError::InvalidJson(_)
        | ApiError::MissingParam(_)
        | ApiError::InvalidParam { .. }
        | ApiError::Unauthorized(_)
        | ApiError::ModelNotFound(_)
        | ApiError::RouteNotFound { .. }
        | ApiError::MethodNotAllowed(_)
        | ApiError::BodyTooLarge { .. }
        | ApiError::BodyTimeout(_)
        | ApiError::UriTooLong { .. }
        | ApiError::TooDeep { .. }
        | ApiError::Overloaded { .. }
        | ApiError::BodyRead(_)
        | ApiError::StreamNotSupported
        | ApiError::UnsupportedParam { .. }
        | ApiError::NoDeployment(_)
        | ApiError::Internal(_)
        | ApiError::KeyRefused(_)
        | ApiError::ModelNotAllowed { .. }
        | ApiError::EndUserBlocked
        | ApiError::JwtRefused(_)
        | ApiError::JwtUnavailable(_)
        | ApiError::AddressNotAllowed(_)
        | ApiError::Limited(_)
        | ApiError::UnknownParam(_)
        | ApiError::NotFound { .. }
        | ApiError::Conflict(_)
        | ApiError::StoreUnavailable
        | ApiError::CacheUnavailable(_)
        | ApiError::GuardrailBlocked { .. }
        | ApiError::ToolNotAllowed { .. }
        | ApiError::McpNotAllowed(_)
        | ApiError::NotPermitted(_)
        | ApiError::McpToolLoop(_)
        | ApiError::GuardrailUnavailable { .. }
        | ApiError::UnknownGuardrail(_)
        | ApiError::InvalidDeployment(_)
        | ApiError::PassThroughUnavailable { .. } => FailureKind::BadRequest,
    }
}

/// An upstream's buffered answer, relayed with its status and content type.
fn passthrough(resp: Response<Bytes>, record: &mut RequestRecord) -> Response<ResponseBody> {
    let (parts, bytes) = resp.into_parts();
    record.status = parts.status.as_u16();
    let mut out = Response::new(ResponseBody::full(bytes));
    *out.status_mut() = parts.status;
    let ct = parts
        .headers
        .get(CONTENT_TYPE)
        .cloned()
        .unwrap_or(JSON.clone());
    out.headers_mut().insert(CONTENT_TYPE, ct);
    if let Some(ra) = parts.headers.get(RETRY_AFTER) {
        out.headers_mut().insert(RETRY_AFTER, ra.clone());
    }
    DroppedParams::copy(&parts.extensions, out.headers_mut());
    out
}

/// The response head of a relayed stream.
fn stream_response(parts: http::response::Parts, body: ResponseBody) -> Response<ResponseBody> {
    let mut resp = Response::new(body);
    *resp.status_mut() = parts.status;
    let h = resp.headers_mut();
    h.insert(
        CONTENT_TYPE,
        parts
            .headers
            .get(CONTENT_TYPE)
            .cloned()
            .unwrap_or(HeaderValue::from_static("text/event-stream")),
    );
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(X_ACCEL.clone(), HeaderValue::from_static("no"));
    DroppedParams::copy(&parts.extensions, h);
    resp
}

/// sluice's own error in the client's dialect, with `Retry-After` when it knows one.
pub fn error_response(e: &ApiError, dialect: Dialect) -> Response<ResponseBody> {
    let mut resp = json(e.status(), e.body_in(dialect));
    let h = resp.headers_mut();
    sluice_core::error::mark_aws_error(dialect, e.status(), h);
    if let Some(wait) = e.retry_after() {
        let secs = wait.as_secs_f64().ceil().max(1.0) as u64;
        h.insert(RETRY_AFTER, HeaderValue::from(secs));
    }
    if let ApiError::Limited(r) = e {
        let names = match r.exceeded {
            Exceeded::Requests => Some((&X_LIMIT_REQUESTS, &X_REMAINING_REQUESTS)),
            Exceeded::Tokens => Some((&X_LIMIT_TOKENS, &X_REMAINING_TOKENS)),
            Exceeded::Parallel | Exceeded::Budget => None,
        };
        if let Some((limit, remaining)) = names {
            h.insert(limit.clone(), HeaderValue::from(r.limit));
            h.insert(remaining.clone(), HeaderValue::from_static("0"));
        }
    }
    resp
}

/// False when an answer declares a JSON content type but does not start like JSON (an HTML
/// page from a middlebox, a corrupted body): it becomes a 502 the router may retry elsewhere,
/// instead of a 200 the client cannot parse. Only the first byte is looked at, so a 10 MB
/// answer costs nothing more.
fn json_as_declared(headers: &HeaderMap, body: &[u8]) -> bool {
    let declared = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.trim_start().starts_with("application/json"));
    !declared
        || matches!(
            body.iter().find(|b| !b.is_ascii_whitespace()),
            Some(b'{' | b'[') | None
        )
}

pub(crate) async fn collect_upstream(body: UpstreamBody) -> Result<Bytes, ApiError> {
    Limited::new(body, MAX_UPSTREAM_BODY)
        .collect()
        .await
        .map(|c| c.to_bytes())
        .map_err(|e| ApiError::UpstreamUnreachable(format!("reading the answer failed: {e}")))
}

/// The body length the client declared (`Content-Length`); a declared length over `limit`
/// is refused before anything is read.
pub(crate) fn declared_length(
    headers: &HeaderMap,
    limit: usize,
) -> Result<Option<usize>, ApiError> {
    let declared = headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    match declared {
        Some(n) if n > limit => Err(ApiError::BodyTooLarge { limit }),
        _ => Ok(declared),
    }
}

/// Read the request body into one buffer, refusing more than `limit` bytes. A body that
/// arrives in one frame is kept as is; otherwise it is copied once into a buffer sized from
/// `Content-Length`.
pub(crate) async fn read_body<B>(
    body: B,
    headers: &HeaderMap,
    limit: usize,
    timeout: Duration,
) -> Result<Bytes, ApiError>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    // A body that is already here completes at the first poll, and the timer is never armed.
    tokio::time::timeout(timeout, read_body_within(body, headers, limit))
        .await
        .unwrap_or(Err(ApiError::BodyTimeout(timeout)))
}

/// [`read_body`] with no time limit.
async fn read_body_within<B>(
    mut body: B,
    headers: &HeaderMap,
    limit: usize,
) -> Result<Bytes, ApiError>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let declared = declared_length(headers, limit)?;
    let mut first: Option<Bytes> = None;
    let mut buf = BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| ApiError::BodyRead(e.to_string()))?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        let have = first.as_ref().map_or(0, Bytes::len) + buf.len();
        if have + data.len() > limit {
            return Err(ApiError::BodyTooLarge { limit });
        }
        match first.take() {
            None if buf.is_empty() => first = Some(data),
            None => buf.extend_from_slice(&data),
            Some(f) => {
                buf.reserve(declared.unwrap_or(0).max(f.len() + data.len()));
                buf.extend_from_slice(&f);
                buf.extend_from_slice(&data);
            }
        }
    }
    Ok(first.unwrap_or_else(|| buf.freeze()))
}

/// `GET /v1/models` (`one: None`) and `GET /v1/models/{id}`: for the master key (or an open
/// gateway) every model group, prebuilt; for a virtual key the groups the access rule lets it
/// use (a blocked or expired key is refused as on any inference route), so that front-ends
/// that list models first work with the keys they are given and show only what will answer.
/// How a model list is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ModelsShape {
    /// OpenAI's `{"object": "list", "data": [...]}`.
    OpenAi,
    /// LiteLLM's `?only_model_access_groups=True`: the access groups, as OpenAI's models.
    AccessGroups,
    /// Google's `{"models": [...]}` (the google-genai SDK's `models.list` / `models.get`).
    Google,
}

/// The model list in Google's shape, for google-genai's `models.list` / `models.get`: its key
/// where Google's clients send it.
async fn google_models<B>(
    state: &AppState,
    snap: &Snapshot,
    req: &Request<B>,
    one: Option<&str>,
) -> Result<Response<ResponseBody>, ApiError> {
    let mut headers = req.headers().clone();
    super::vendor_clients::key_header(&mut headers, req.uri().query());
    let caller = (&headers, client_of(req.extensions()));
    models(state, snap, caller, one, ModelsShape::Google).await
}

async fn models(
    state: &AppState,
    snap: &Snapshot,
    (headers, client): (&HeaderMap, Option<std::net::IpAddr>),
    one: Option<&str>,
    shape: ModelsShape,
) -> Result<Response<ResponseBody>, ApiError> {
    let wall = limits::wall_ms();
    let caller = state
        .gate()
        // Every model list route is one of the OpenAI API's (`openai_routes`).
        .authenticate(snap.master.as_ref(), headers, (client, "/v1/models"), wall)
        .await?;
    let table = &snap.router.models;
    let key = match &caller {
        Caller::Key(k) => {
            state.gate().directory().usable(k, wall)?;
            Some(k)
        }
        Caller::Open | Caller::Master => None,
    };
    let directory = state.gate().directory();
    // Asked by the name listed (a group's, or an alias's), as a request by that name is.
    let may_use = |name: &str, group: &routing::Group| {
        key.is_none_or(|k| directory.may_use(k, &Wanted::of(name, group)).is_ok())
    };
    if let Some(id) = one {
        let not_found = || ApiError::ModelNotFound(id.chars().take(256).collect());
        let group = table
            .named(id)
            .filter(|g| may_use(id, g))
            .ok_or_else(not_found)?;
        let body = match shape {
            ModelsShape::Google => super::vendor_clients::model_object(id),
            ModelsShape::OpenAi | ModelsShape::AccessGroups => {
                model_object(id, group, snap.created)
            }
        };
        return Ok(json(StatusCode::OK, Bytes::from(body.to_string())));
    }
    if shape == ModelsShape::Google {
        let models: Vec<_> = table
            .listed()
            .filter(|(name, g)| may_use(name, g))
            .map(|(name, _)| super::vendor_clients::model_object(name))
            .collect();
        let body = serde_json::json!({ "models": models }).to_string();
        return Ok(json(StatusCode::OK, Bytes::from(body)));
    }
    if shape == ModelsShape::AccessGroups {
        // LiteLLM's `?only_model_access_groups=True`: the access groups (`model_info.
        // access_groups`) of the groups the caller may use, as model objects.
        let mut names: Vec<&str> = Vec::new();
        for (_, g) in table.listed().filter(|(name, g)| may_use(name, g)) {
            for m in g.members() {
                for a in m.access_groups.iter() {
                    if !names.contains(&&**a) {
                        names.push(a);
                    }
                }
            }
        }
        let data: Vec<_> = names
            .iter()
            .map(|n| serde_json::json!({"id": n, "object": "model", "created": snap.created, "owned_by": "sluice"}))
            .collect();
        let body = serde_json::json!({ "object": "list", "data": data }).to_string();
        return Ok(json(StatusCode::OK, Bytes::from(body)));
    }
    if key.is_none() {
        return Ok(json(StatusCode::OK, snap.models_json.clone()));
    }
    let data: Vec<_> = table
        .listed()
        .filter(|(name, g)| may_use(name, g))
        .map(|(name, g)| model_object(name, g, snap.created))
        .collect();
    let body = serde_json::json!({ "object": "list", "data": data }).to_string();
    Ok(json(StatusCode::OK, Bytes::from(body)))
}

fn metrics(state: &AppState, snap: &Snapshot) -> Response<ResponseBody> {
    let recorder = state.recorder();
    let text = recorder
        .metrics()
        .render(&snap.router, recorder.queue_depth(), |text| {
            if let Some(cache) = &snap.cache {
                crate::cache::metrics(cache, text);
            }
            state.overload().metrics(text);
        });
    let mut resp = Response::new(ResponseBody::full(Bytes::from(text)));
    resp.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static(sluice_telemetry::metrics::CONTENT_TYPE),
    );
    resp
}

/// `/health/readiness`: ready to serve, and the state of what it shares with others. A down
/// Redis or database does not make the instance unready: it serves on local counters and
/// spools spend, and says so here. While the overload manager sheds requests it is 503, so a
/// load balancer steers away until it recovers.
fn readiness(state: &AppState) -> Response<ResponseBody> {
    let shedding = state.overload().shedding();
    let body = readiness_body(state, shedding);
    match shedding {
        None => json(StatusCode::OK, body),
        Some(_) => {
            let mut resp = json(StatusCode::SERVICE_UNAVAILABLE, body);
            resp.headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from_static("1"));
            resp
        }
    }
}

/// The readiness document; `shedding` is why the overload manager sheds, if it does.
fn readiness_body(state: &AppState, shedding: Option<&'static str>) -> Bytes {
    let redis = match state.fleet() {
        None => "not configured",
        Some(f) if f.is_up() => "connected",
        Some(_) => "unreachable: rate limits and budgets are counted by this instance alone",
    };
    let db = match state.store() {
        None => serde_json::json!("not configured"),
        Some(s) => {
            let w = s.writer.stats();
            serde_json::json!({
                "backend": s.store.backend().name(),
                "state": if w.database_up {
                    "connected"
                } else {
                    "unreachable: spend logs are spooled to disk until it returns"
                },
                "spooled_bytes": w.spooled_bytes,
                "lost_records": w.lost,
            })
        }
    };
    let body = serde_json::json!({
        "status": if shedding.is_some() { "overloaded" } else { "healthy" },
        "shedding": shedding,
        "callbacks": state.recorder().callbacks().status(),
        "db": db,
        "redis": redis,
        "cache": crate::cache::readiness(state.snapshot().cache.as_deref()),
        // The secret manager: which one, and the names whose last read failed (never values).
        "secrets": match state.vars().secrets() {
            None => serde_json::json!("not configured"),
            Some(s) => serde_json::to_value(s.status()).unwrap_or_default(),
        },
        "sluice_version": env!("CARGO_PKG_VERSION"),
        "sluice_commit": env!("SLUICE_GIT_COMMIT"),
        // LiteLLM's field, for dashboards that read it: the version of what answers.
        "litellm_version": concat!("sluice-", env!("CARGO_PKG_VERSION")),
    });
    Bytes::from(body.to_string())
}

/// A `303 See Other` to `location` (LiteLLM's `/login` goes to the console's sign-in page).
fn see_other(location: &'static str) -> Response<ResponseBody> {
    let mut resp = Response::new(ResponseBody::full(Bytes::new()));
    *resp.status_mut() = StatusCode::SEE_OTHER;
    resp.headers_mut()
        .insert(http::header::LOCATION, HeaderValue::from_static(location));
    resp
}

pub(crate) fn json(status: StatusCode, body: Bytes) -> Response<ResponseBody> {
    let mut resp = Response::new(ResponseBody::full(body));
    *resp.status_mut() = status;
    resp.headers_mut().insert(CONTENT_TYPE, JSON.clone());
    resp
}

/// The client's `x-request-id` when it is a sane token, else a fresh UUID.
fn request_id(headers: &HeaderMap) -> HeaderValue {
    headers
        .get(&X_REQUEST_ID)
        .filter(|v| {
            let b = v.as_bytes();
            !b.is_empty() && b.len() <= 128 && b.iter().all(|c| c.is_ascii_graphic())
        })
        .cloned()
        .unwrap_or_else(|| {
            let mut buf = [0u8; uuid::fmt::Hyphenated::LENGTH];
            let s = sluice_core::random::uuid_v4()
                .hyphenated()
                .encode_lower(&mut buf);
            HeaderValue::from_str(s).unwrap_or(HeaderValue::from_static("-"))
        })
}

/// Milliseconds with three decimals, formatted on the stack from integers (no `String` per
/// header; `{:.3}` on an `f64` cost ~900 instructions a header).
fn duration_value(d: Duration) -> HeaderValue {
    use std::io::Write as _;
    let mut buf = [0u8; 32];
    let mut rest = &mut buf[..];
    let us = d.as_micros();
    let len = match write!(rest, "{}.{:03}", us / 1000, us % 1000) {
        Ok(()) => 32 - rest.len(),
        Err(_) => return HeaderValue::from_static("0"),
    };
    HeaderValue::from_bytes(&buf[..len]).unwrap_or(HeaderValue::from_static("0"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::limits::dollars;

    /// Every request's future is moved whole into its box (a `memcpy` of its full size), and
    /// it stays allocated while the request runs. It was 8.4 KB when a dispatch future kept in
    /// a local was awaited in one branch (two slots) and unhedged attempts were pinned beside
    /// hedged ones; 6.5 KB without. The bound catches the next such slip.
    #[tokio::test]
    async fn a_requests_future_stays_small() {
        let yaml = "model_list:\n  - model_name: m\n    litellm_params: {model: openai/m, api_base: 'http://127.0.0.1:9/v1'}\n";
        let loaded =
            sluice_config::load_str(yaml, &std::collections::HashMap::new()).expect("config");
        let (recorder, _task) = sluice_telemetry::Recorder::start(Vec::new());
        let state = AppState::new(&loaded.config, recorder).expect("state");
        let req = Request::new(http_body_util::Full::new(Bytes::new()));
        let future = handle(&state, req);
        let size = std::mem::size_of_val(&future);
        assert!(
            size <= 7 * 1024,
            "a request's future is {size} bytes; find the awaited future that grew it \
             (cargo +nightly rustc --release --bin sluice -- -Zprint-type-sizes)"
        );
    }

    #[test]
    fn an_answer_declared_json_must_start_like_json() {
        let mut h = HeaderMap::new();
        assert!(
            json_as_declared(&h, b"<html>"),
            "no content type: not judged"
        );
        h.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/json; charset=utf-8"),
        );
        assert!(json_as_declared(&h, b" \n{\"id\":1}"));
        assert!(json_as_declared(&h, b"[1]"));
        assert!(
            json_as_declared(&h, b""),
            "an empty body is left to the caller"
        );
        assert!(!json_as_declared(&h, b"<html><body>502</body></html>"));
        assert!(!json_as_declared(&h, b"\x00\xff{"));
        h.insert(CONTENT_TYPE, HeaderValue::from_static("audio/mpeg"));
        assert!(json_as_declared(&h, b"\xff\xfb"));
    }

    #[test]
    fn durations_are_milliseconds_with_three_decimals() {
        let v = |us| duration_value(Duration::from_micros(us));
        assert_eq!(v(0), "0.000");
        assert_eq!(v(34), "0.034");
        assert_eq!(v(1_234_567), "1234.567");
        assert_eq!(duration_value(Duration::from_nanos(999)), "0.000");
    }

    #[test]
    fn dollars_are_exact_and_trimmed_like_the_float_they_stand_for() {
        for n in [
            0u64,
            1,
            150_000,
            1_000_000_000,
            2_500_000_000,
            123_456_789,
            7_000_000_001,
        ] {
            let shown = usd_value(n);
            let text = shown.to_str().unwrap();
            assert_eq!(text.parse::<f64>().unwrap(), dollars(n), "{n} -> {text}");
            assert!(!text.contains('.') || !text.ends_with('0'), "{text}");
        }
        assert_eq!(usd_value(150_000), "0.00015");
        assert_eq!(usd_value(3_000_000_000), "3");
    }
}
