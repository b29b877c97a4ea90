//! The request pipeline. This file alone decides the order of the steps; ARCHITECTURE.md
//! draws it. Each step is a call into the module that owns it.
//!
//! 1. accept (request id, start time)  2. route  3. authenticate  4. read the body (limit)
//! 5. read the envelope  6. select a deployment  7. call upstream  8. answer  9. record

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use http::header::{
    HeaderName, HeaderValue, CACHE_CONTROL, CONTENT_LENGTH, CONTENT_TYPE, RETRY_AFTER,
};
use http::{HeaderMap, Request, Response, StatusCode};
use http_body::Body;
use http_body_util::{BodyExt, Limited};

use super::body::ResponseBody;
use super::relay::StreamRelay;
use super::routes::{match_route, Route};
use super::state::{model_object, AppState, Snapshot};
use crate::auth;
use crate::endpoint::{Dialect, Endpoint};
use crate::error::ApiError;
use crate::providers::body::UpstreamBody;
use crate::providers::call::{self, Call};
use crate::providers::envelope::Envelope;
use crate::providers::DeploymentTarget;
use crate::routing::{
    self, Attempt, Failure, FailureKind, OnDisconnect, Requested, RouteError, Served,
};
use crate::spend::usage_from_body;
use crate::telemetry::{ms, Outcome, Recorder, RequestRecord};

/// Largest upstream answer sluice buffers (non-stream answers and error bodies).
const MAX_UPSTREAM_BODY: usize = 256 * 1024 * 1024;

static X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
static X_MODEL_ID: HeaderName = HeaderName::from_static("x-sluice-model-id");
static X_OVERHEAD: HeaderName = HeaderName::from_static("x-sluice-overhead-duration-ms");
static X_DURATION: HeaderName = HeaderName::from_static("x-sluice-response-duration-ms");
static X_ACCEL: HeaderName = HeaderName::from_static("x-accel-buffering");
static X_RETRIES: HeaderName = HeaderName::from_static("x-sluice-attempted-retries");
static X_FALLBACKS: HeaderName = HeaderName::from_static("x-sluice-attempted-fallbacks");
static X_HEDGES: HeaderName = HeaderName::from_static("x-sluice-hedged-requests");
static JSON: HeaderValue = HeaderValue::from_static("application/json");

/// Handle one request, start to finish. Never fails: every error becomes an OpenAI-shaped
/// response.
pub async fn handle<B>(state: &AppState, req: Request<B>) -> Response<ResponseBody>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    // 1. Accept.
    let start = Instant::now();
    let request_id = request_id(req.headers());
    let snap = state.snapshot();
    // 2. Route.
    let route = match_route(req.method(), req.uri().path());
    let dialect = match route {
        Route::Inference(endpoint) => endpoint.dialect(),
        _ => Dialect::OpenAi,
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
    let result = match route {
        Route::Inference(endpoint) => inference(state, &snap, endpoint, req, record).await,
        Route::ListModels => auth::authorize(snap.master.as_ref(), req.headers())
            .map(|()| json(StatusCode::OK, snap.models_json.clone())),
        Route::GetModel(id) => {
            auth::authorize(snap.master.as_ref(), req.headers()).and_then(|()| get_model(&snap, id))
        }
        Route::Liveness => Ok(json(StatusCode::OK, Bytes::from_static(b"\"I'm alive!\""))),
        Route::Readiness => Ok(json(StatusCode::OK, readiness())),
        Route::Health => auth::authorize(snap.master.as_ref(), req.headers())
            .map(|()| json(StatusCode::OK, super::health::view(&snap.router))),
        Route::Metrics => {
            let key = snap.master.as_ref().filter(|_| snap.metrics_need_key);
            auth::authorize(key, req.headers()).map(|()| metrics(state, &snap))
        }
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
    // 9. Record. A relayed stream owns its record and emits it when the stream ends.
    pending.armed = false;
    if !matches!(resp.body(), ResponseBody::Stream(_)) {
        let mut record = pending.take();
        record.status = resp.status().as_u16();
        state.recorder().record(record);
    }
    resp
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

async fn inference<B>(
    state: &AppState,
    snap: &Snapshot,
    endpoint: Endpoint,
    req: Request<B>,
    record: &mut RequestRecord,
) -> Result<Response<ResponseBody>, ApiError>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    // 3. Authenticate.
    auth::authorize(snap.master.as_ref(), req.headers())?;
    // 4. Read the body, within the size limit.
    let (parts, body) = req.into_parts();
    let body = read_body(body, &parts.headers, snap.max_body).await?;
    // 5. Read the envelope, not the body.
    let envelope = Envelope::parse(&body)?;
    if envelope.stream && !endpoint.can_stream() {
        return Err(ApiError::StreamNotSupported);
    }
    record.stream = envelope.stream;
    // 6. Select a deployment and 7. call it: routing::dispatch picks, retries, falls back and
    //    hedges; `attempt` makes each call and classifies its failure.
    let resolved = snap
        .router
        .models
        .resolve(&envelope.model)
        .ok_or_else(|| ApiError::ModelNotFound(envelope.model.chars().take(256).collect()))?;
    record.model = Some(resolved.group.name.clone());
    let force_usage = envelope.stream
        && matches!(endpoint, Endpoint::ChatCompletions | Endpoint::Completions)
        && !envelope.client_wants_usage;
    let requested = Requested {
        num_retries: envelope.routing.num_retries,
        fallbacks: envelope.routing.fallbacks.as_deref(),
    };
    let sent_at = Instant::now();
    let before_send = sent_at - record.start;
    let outcome = routing::dispatch(&snap.router, resolved, &requested, |a: Attempt<'_>| {
        let call = Call {
            endpoint,
            client_headers: &parts.headers,
            body: &body,
            envelope: &envelope,
            capture: a.capture,
            force_usage,
        };
        attempt(&a.member.target, call, envelope.routing.timeout)
    })
    .await;
    let arrived = Instant::now();
    let attempts = AttemptCounts::of(&outcome);
    record.retries = outcome.retries;
    record.fallbacks = outcome.fallbacks;
    record.hedges = outcome.hedges;
    if let Some(m) = outcome.last {
        record.deployment = Some(m.target.id.clone());
        record.provider = Some(m.target.provider.name());
    }
    // 8. Answer.
    let mut resp = match outcome.result {
        Err(failure) => {
            record.failure = Some(failure.kind.name());
            match failure.error {
                Failed::Upstream(resp) => passthrough(resp, record),
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
            let h = member.target.id_header.clone();
            let mut resp = match answer {
                Answer::Full(parts, bytes) => {
                    record.usage = usage_from_body(&bytes);
                    if let Some(u) = &record.usage {
                        guard.add_tokens(u.prompt_tokens + u.completion_tokens);
                    }
                    let resp = passthrough(Response::from_parts(parts, bytes), record);
                    record.overhead = before_send + arrived.elapsed();
                    resp
                }
                Answer::Stream { parts, first, rest } => {
                    record.ttfb = Some(arrived - record.start);
                    record.status = parts.status.as_u16();
                    record.overhead = before_send + arrived.elapsed();
                    let relay = StreamRelay::new(
                        first,
                        rest,
                        force_usage,
                        endpoint,
                        record.clone(),
                        state.recorder().clone(),
                    )
                    .idle_timeout(member.target.timeouts.idle)
                    .in_flight(guard)
                    .finish_on_disconnect(snap.router.policy.on_disconnect == OnDisconnect::Finish);
                    stream_response(parts, relay)
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
    h.insert(X_OVERHEAD.clone(), duration_value(record.overhead));
    Ok(resp)
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
enum Answer {
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
enum Failed {
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
async fn attempt(
    target: &DeploymentTarget,
    call: Call<'_>,
    timeout: Option<Duration>,
) -> Result<Answer, Failure<Failed>> {
    let stream = call.envelope.stream;
    let t = &target.timeouts;
    let limit = timeout.unwrap_or(if stream { t.first_chunk } else { t.total });
    let answer = tokio::time::timeout(limit, async {
        let resp = call::send(target, &call).await?;
        let (parts, mut body) = resp.into_parts();
        if !parts.status.is_success() {
            let bytes = collect_upstream(body).await?;
            return Ok(Err(Response::from_parts(parts, bytes)));
        }
        if !stream {
            let bytes = collect_upstream(body).await?;
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
    match answer {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(resp)) => Err(Failure {
            kind: FailureKind::from_response(resp.status(), resp.body()),
            retry_after: routing::retry_after(resp.headers()),
            error: Failed::Upstream(resp),
        }),
        Err(e) => Err(Failure {
            kind: failure_kind(&e),
            retry_after: None,
            error: Failed::Gateway(e),
        }),
    }
}

/// How the router should treat one of sluice's own errors from an attempt.
fn failure_kind(e: &ApiError) -> FailureKind {
    match e {
        ApiError::UpstreamTimeout(_) | ApiError::UpstreamIdle(_) => FailureKind::Timeout,
        ApiError::UpstreamUnreachable(_) => FailureKind::Connection,
        ApiError::UpstreamInvalid(_) => FailureKind::Server,
        // Another deployment of the group (or a fallback) may be one sluice can call.
        ApiError::ProviderNotSupported { .. } => FailureKind::NotFound,
        _ => FailureKind::BadRequest,
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
    out
}

/// The response head of a relayed stream.
fn stream_response(parts: http::response::Parts, relay: StreamRelay) -> Response<ResponseBody> {
    let mut resp = Response::new(ResponseBody::Stream(Box::new(relay)));
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
    resp
}

/// sluice's own error in the client's dialect, with `Retry-After` when it knows one.
pub fn error_response(e: &ApiError, dialect: Dialect) -> Response<ResponseBody> {
    let mut resp = json(e.status(), e.body_in(dialect));
    if let Some(wait) = e.retry_after() {
        let secs = wait.as_secs_f64().ceil().max(1.0) as u64;
        resp.headers_mut()
            .insert(RETRY_AFTER, HeaderValue::from(secs));
    }
    resp
}

async fn collect_upstream(body: UpstreamBody) -> Result<Bytes, ApiError> {
    Limited::new(body, MAX_UPSTREAM_BODY)
        .collect()
        .await
        .map(|c| c.to_bytes())
        .map_err(|e| ApiError::UpstreamUnreachable(format!("reading the answer failed: {e}")))
}

/// Read the request body into one buffer, refusing more than `limit` bytes. A body that
/// arrives in one frame is kept as is; otherwise it is copied once into a buffer sized from
/// `Content-Length`.
async fn read_body<B>(mut body: B, headers: &HeaderMap, limit: usize) -> Result<Bytes, ApiError>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let declared = headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(ApiError::BodyTooLarge { limit });
    }
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

fn get_model(snap: &Snapshot, id: &str) -> Result<Response<ResponseBody>, ApiError> {
    let group = snap
        .router
        .models
        .group(id)
        .ok_or_else(|| ApiError::ModelNotFound(id.chars().take(256).collect()))?;
    let body = model_object(group, snap.created).to_string();
    Ok(json(StatusCode::OK, Bytes::from(body)))
}

fn metrics(state: &AppState, snap: &Snapshot) -> Response<ResponseBody> {
    let recorder = state.recorder();
    let text = recorder
        .metrics()
        .render(&snap.router, recorder.queue_depth());
    let mut resp = Response::new(ResponseBody::full(Bytes::from(text)));
    resp.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static(crate::telemetry::metrics::CONTENT_TYPE),
    );
    resp
}

fn readiness() -> Bytes {
    let body = serde_json::json!({
        "status": "healthy",
        "db": "not configured",
        "cache": "disabled",
        "sluice_version": env!("CARGO_PKG_VERSION"),
    });
    Bytes::from(body.to_string())
}

fn json(status: StatusCode, body: Bytes) -> Response<ResponseBody> {
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
            let s = uuid::Uuid::new_v4().hyphenated().encode_lower(&mut buf);
            HeaderValue::from_str(s).unwrap_or(HeaderValue::from_static("-"))
        })
}

/// Milliseconds with three decimals, formatted on the stack (no `String` per header).
fn duration_value(d: Duration) -> HeaderValue {
    use std::io::Write as _;
    let mut buf = [0u8; 32];
    let mut rest = &mut buf[..];
    let len = match write!(rest, "{:.3}", ms(d)) {
        Ok(()) => 32 - rest.len(),
        Err(_) => return HeaderValue::from_static("0"),
    };
    HeaderValue::from_bytes(&buf[..len]).unwrap_or(HeaderValue::from_static("0"))
}
