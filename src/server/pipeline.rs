//! The request pipeline: every request enters here. This file decides the order of the
//! steps every route takes before its own (accept, route, shed, record); the inference
//! routes' phases are `server::inference`, and the steps they share with every other route
//! that calls a provider are `server::steps`. ARCHITECTURE.md draws them:
//!
//! 1. accept (request id, start time, the client's address)
//! 2. route; shed when overloaded (`server::overload`), the gateway's `allowed_ips`, refuse
//!    an overlong URL
//! 3. to 8. the route: `server::inference` (authenticate, read, guard, envelope, admit and
//!    cache, dispatch, answer), or a feature's handler through `server::steps`
//! 9. record (here, or by the relay that owns a stream's record when it ends)

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body::Body;

use sluice_core::endpoint::{BodyFormat, Dialect, Endpoint};
use sluice_core::error::ApiError;
use sluice_core::record::{Outcome, RequestRecord};
use sluice_core::trace_context::TraceContext;
use sluice_net::sigv4::uri_decode;
use sluice_telemetry::Recorder;

use super::inference::{inference, PathNamed};
use super::listing::{google_models, models, ModelsShape};
use super::management::{admin, cache_route, metrics, readiness};
use super::routes::{match_route, Route};
use super::state::{AppState, Snapshot};
use super::{litellm_headers, vendor_clients};
use crate::auth::addresses::client_of;
use crate::http::{
    duration_value, error_response, json, read_body, request_id, see_other, ResponseBody,
    X_DURATION, X_REQUEST_ID,
};

/// Handle one request, start to finish. Never fails: every error becomes an OpenAI-shaped
/// response.
pub async fn handle<B>(state: &AppState, mut req: Request<B>) -> Response<ResponseBody>
where
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: std::fmt::Display,
{
    // 1. Accept.
    let start = std::time::Instant::now();
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
    let route = route_of(&snap, &req);
    let dialect = dialect(route, &req);
    // 2½. Overload: past the in-flight limit or the memory watermark the newest work is shed
    //     (an atomic add; health probes and metrics are always answered); the gateway's
    //     `allowed_ips` (keys' and teams' lists are checked when they authenticate); the URL.
    let probe = matches!(
        route,
        Route::Liveness | Route::Readiness | Route::Health | Route::Metrics
    );
    let slot = match admitted(state, &snap, probe, &req) {
        Ok(slot) => slot,
        Err(e) => return error_response(&e, dialect),
    };
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
    // Steps 3 to 8, by the route's handler: an inference request's phases inline (the hot
    // path), every other route's boxed.
    let result = match route {
        Route::Inference(endpoint) => inference(state, &snap, endpoint, req, record).await,
        route => match at_once(state, &snap, route, &req) {
            Some(answered) => answered,
            None => Box::pin(feature(state, &snap, req, record)).await,
        },
    };
    let mut resp = result.unwrap_or_else(|e| {
        record.fail_with(&e);
        error_response(&e, dialect)
    });
    let headers = resp.headers_mut();
    headers.insert(X_REQUEST_ID.clone(), request_id);
    headers.insert(X_DURATION.clone(), duration_value(start.elapsed()));
    if snap.litellm_headers {
        litellm_headers::mirror(headers);
    }
    // 9. Record. A relayed stream (and a realtime session) owns its record and records it
    //    when it ends.
    pending.armed = false;
    let owned = resp.status() == StatusCode::SWITCHING_PROTOCOLS;
    if !owned && !resp.body().owns_record() {
        let mut record = pending.take();
        record.status = resp.status().as_u16();
        state.recorder().record(record);
    }
    // The in-flight slot is held until the response's body ends (a stream to its last frame).
    match slot {
        Some(slot) => resp.map(|body| body.holding(slot)),
        None => resp,
    }
}

/// The route a request takes: the operator's own routes first (they may take a path sluice
/// serves), then sluice's.
fn route_of<'r, B>(snap: &Snapshot, req: &'r Request<B>) -> Route<'r> {
    match snap.pass_through.custom().find(req.uri().path()) {
        Some(i) => Route::Custom(i),
        None => match_route(req.method(), req.uri().path()),
    }
}

/// The dialect errors are answered in: the endpoint's, Google's for Google's clients.
fn dialect<B>(route: Route<'_>, req: &Request<B>) -> Dialect {
    match route {
        Route::Inference(endpoint) => endpoint.dialect(),
        Route::Named(n) => n.endpoint.dialect(),
        Route::GoogleCount(_) | Route::GoogleModels(_) | Route::GoogleEmbed(..) => Dialect::Gemini,
        Route::ListModels | Route::GetModel(_)
            if vendor_clients::is_google_client(req.headers(), req.uri().query()) =>
        {
            Dialect::Gemini
        }
        _ => Dialect::OpenAi,
    }
}

/// Step 2½: whether the gateway takes this request at all: its in-flight slot when a limit is
/// set (probes take none), the gateway's `allowed_ips`, the URL's length.
fn admitted<B>(
    state: &AppState,
    snap: &Snapshot,
    probe: bool,
    req: &Request<B>,
) -> Result<Option<super::overload::Slot>, ApiError> {
    if probe {
        return Ok(None);
    }
    let slot = state.overload().admit()?;
    if let Some(list) = snap.allowed_ips.as_deref() {
        if !crate::auth::addresses::allows(list, client_of(req.extensions())) {
            return Err(ApiError::AddressNotAllowed("the gateway's"));
        }
    }
    let url_len = req.uri().path_and_query().map_or(0, |p| p.as_str().len());
    if url_len > snap.max_url {
        return Err(ApiError::UriTooLong {
            limit: snap.max_url,
        });
    }
    Ok(slot)
}

/// What a route's handler returns.
type Answered = Result<Response<ResponseBody>, ApiError>;

/// The routes answered at once, without a future: the probes, metrics, the route listing.
/// `None` for every other route.
fn at_once<B>(
    state: &AppState,
    snap: &Snapshot,
    route: Route<'_>,
    req: &Request<B>,
) -> Option<Answered> {
    Some(match route {
        Route::Liveness => Ok(json(StatusCode::OK, Bytes::from_static(b"\"I'm alive!\""))),
        Route::Readiness => Ok(readiness(state)),
        Route::Health => super::health::route(state, snap, req.headers()),
        Route::Metrics => {
            let key = snap.master.as_ref().filter(|_| snap.metrics_need_key);
            crate::auth::authorize(key, req.headers()).map(|()| metrics(state, snap))
        }
        Route::Routes => Ok(json(StatusCode::OK, super::routes::listing())),
        Route::Login => Ok(see_other("/ui/login")),
        Route::WrongMethod => Err(ApiError::MethodNotAllowed(req.method().to_string())),
        Route::NotFound => Err(ApiError::RouteNotFound {
            method: req.method().to_string(),
            path: req.uri().path().chars().take(200).collect(),
        }),
        _ => return None,
    })
}

/// Steps 3 to 8 of every route but inference and those answered at once: the feature's own
/// handler. Called boxed: these futures (a WebSocket handshake, the management API's store
/// calls) are far larger than an inference's, and an unboxed branch makes every request's
/// future that large, copied whole each time it moves.
async fn feature<B>(
    state: &AppState,
    snap: &Snapshot,
    req: Request<B>,
    record: &mut RequestRecord,
) -> Answered
where
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: std::fmt::Display,
{
    // The route again (it borrows the request's path, and the request is moved here).
    let route = route_of(snap, &req);
    match route {
        Route::Named(n) => {
            let named = PathNamed {
                model: uri_decode(n.model),
                stream: n.stream,
            };
            path_named(state, snap, n.endpoint, named, req, record).await
        }
        Route::GoogleEmbed(model, batch) => {
            let model = uri_decode(model);
            vendor_clients::embed(state, snap, &model, batch, req, record).await
        }
        Route::GoogleCount(model) => {
            let model = uri_decode(model);
            vendor_clients::count(state, snap, &model, req).await
        }
        Route::ListModels | Route::GetModel(_) | Route::GoogleModels(_) => {
            listed(state, snap, req).await
        }
        Route::PassThrough(r) => crate::passthrough::handle(state, snap, r, req, record).await,
        Route::AzureDeployment(endpoint, deployment, r) => {
            // The name borrows the path; the handler takes the request.
            let deployment = deployment.to_owned();
            azure(state, snap, endpoint, &deployment, r, req, record).await
        }
        Route::Files(_) => crate::files::handle(state, snap, req, record).await,
        Route::State(_) => crate::responses::handle(state, snap, req).await,
        Route::Custom(i) => crate::passthrough::custom::handle(state, snap, i, req, record).await,
        Route::Search => crate::passthrough::search::handle(state, snap, req, record).await,
        Route::Realtime => crate::realtime::handle(state, snap, req, record).await,
        Route::Admin => admin(state, snap, req).await,
        Route::Cache(op) => cache_route(snap, op, req).await,
        Route::Mcp(server) => {
            let server = server.map(str::to_owned);
            crate::mcp::handle(state, snap, server.as_deref(), req, record).await
        }
        Route::McpSse(server, part) => {
            let server = server.map(str::to_owned);
            crate::mcp::legacy::handle(state, snap, server.as_deref(), part, req, record).await
        }
        Route::Console => crate::console::handle(state, snap, req).await,
        Route::Inference(endpoint) => inference(state, snap, endpoint, req, record).await,
        Route::Liveness
        | Route::Readiness
        | Route::Health
        | Route::Metrics
        | Route::Routes
        | Route::Login
        | Route::WrongMethod
        | Route::NotFound => at_once(state, snap, route, &req)
            .unwrap_or(Err(ApiError::Internal("a route answered at once"))),
    }
}

/// The model lists: OpenAI's (or LiteLLM's access groups), or Google's for google-genai,
/// which lists models at `/v1/models` too (its headers tell).
async fn listed<B>(
    state: &AppState,
    snap: &Snapshot,
    req: Request<B>,
) -> Result<Response<ResponseBody>, ApiError> {
    let (head, _) = req.into_parts();
    let route = match_route(&head.method, head.uri.path());
    let google = vendor_clients::is_google_client(&head.headers, head.uri.query());
    match route {
        Route::GoogleModels(one) => google_models(state, snap, &head, one).await,
        Route::GetModel(id) if google => {
            let one = Some(id.strip_prefix("models/").unwrap_or(id));
            google_models(state, snap, &head, one).await
        }
        Route::ListModels if google => google_models(state, snap, &head, None).await,
        _ => {
            let one = match route {
                Route::GetModel(id) => Some(id),
                _ => None,
            };
            let groups_only = head.uri.query().is_some_and(|q| {
                form_urlencoded::parse(q.as_bytes())
                    .any(|(k, v)| k == "only_model_access_groups" && v.eq_ignore_ascii_case("true"))
            });
            let shape = match groups_only && one.is_none() {
                true => ModelsShape::AccessGroups,
                false => ModelsShape::OpenAi,
            };
            let caller = (&head.headers, client_of(&head.extensions));
            models(state, snap, caller, one, shape).await
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every request's future is moved whole into its box (a `memcpy` of its full size), and
    /// it stays allocated while the request runs. It was 8.4 KB when a dispatch future kept in
    /// a local was awaited in one branch (two slots) and unhedged attempts were pinned beside
    /// hedged ones; 6.5 KB without; 7.1 KB (7,072 bytes) with the inference phases as functions
    /// of their own, once what they hand each other is borrowed rather than moved (moved, it
    /// was 12 KB). The bound catches the next such slip.
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
}
