//! The request pipeline. This file alone decides the order of the steps; ARCHITECTURE.md
//! draws it. Each step is a call into the module that owns it.
//!
//! 1. accept (request id, start time)  2. route  3. authenticate  4. read the body (limit)
//! 5. read the envelope  6. select a deployment  7. call upstream  8. answer  9. record

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use http::header::{HeaderName, HeaderValue, CACHE_CONTROL, CONTENT_LENGTH, CONTENT_TYPE};
use http::{HeaderMap, Request, Response, StatusCode};
use http_body::Body;
use http_body_util::{BodyExt, Limited};

use super::body::ResponseBody;
use super::relay::StreamRelay;
use super::routes::{match_route, Route};
use super::state::{model_object, AppState, Snapshot};
use crate::auth;
use crate::endpoint::Endpoint;
use crate::error::ApiError;
use crate::providers::body::UpstreamBody;
use crate::providers::call::{self, Call};
use crate::providers::envelope::Envelope;
use crate::providers::TargetKind;
use crate::spend::usage_from_body;
use crate::telemetry::{ms, RequestRecord};

/// Largest upstream answer sluice buffers (non-stream answers and error bodies).
const MAX_UPSTREAM_BODY: usize = 256 * 1024 * 1024;

static X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
static X_MODEL_ID: HeaderName = HeaderName::from_static("x-sluice-model-id");
static X_OVERHEAD: HeaderName = HeaderName::from_static("x-sluice-overhead-duration-ms");
static X_DURATION: HeaderName = HeaderName::from_static("x-sluice-response-duration-ms");
static X_ACCEL: HeaderName = HeaderName::from_static("x-accel-buffering");
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
    let mut record = RequestRecord::new(
        request_id.clone(),
        req.method().clone(),
        route.label(),
        start,
    );
    let result = match route {
        Route::Inference(endpoint) => inference(state, &snap, endpoint, req, &mut record).await,
        Route::ListModels => auth::authorize(snap.master.as_ref(), req.headers())
            .map(|()| json(StatusCode::OK, snap.models_json.clone())),
        Route::GetModel(id) => {
            auth::authorize(snap.master.as_ref(), req.headers()).and_then(|()| get_model(&snap, id))
        }
        Route::Liveness => Ok(json(StatusCode::OK, Bytes::from_static(b"\"I'm alive!\""))),
        Route::Readiness => Ok(json(StatusCode::OK, readiness())),
        Route::WrongMethod => Err(ApiError::MethodNotAllowed(req.method().to_string())),
        Route::NotFound => Err(ApiError::RouteNotFound {
            method: req.method().to_string(),
            path: req.uri().path().chars().take(200).collect(),
        }),
    };
    let mut resp = result.unwrap_or_else(|e| {
        record.error = Some(e.code());
        json(e.status(), e.body())
    });
    let headers = resp.headers_mut();
    headers.insert(X_REQUEST_ID.clone(), request_id);
    headers.insert(X_DURATION.clone(), duration_value(start.elapsed()));
    // 9. Record. A relayed stream owns its record and emits it when the stream ends.
    if !matches!(resp.body(), ResponseBody::Stream(_)) {
        record.status = resp.status().as_u16();
        state.recorder().record(record);
    }
    resp
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
    // 6. Select a deployment.
    let resolved = snap
        .models
        .resolve(&envelope.model)
        .ok_or_else(|| ApiError::ModelNotFound(envelope.model.chars().take(256).collect()))?;
    let target = resolved.group.pick().clone();
    record.model = Some(resolved.group.name.clone());
    record.deployment = Some(target.id.clone());
    record.provider = Some(target.provider.name());
    // 7. Call upstream.
    let force_usage = envelope.stream
        && matches!(endpoint, Endpoint::ChatCompletions | Endpoint::Completions)
        && !envelope.client_wants_usage;
    let call = Call {
        endpoint,
        client_headers: &parts.headers,
        body: &body,
        envelope: &envelope,
        capture: resolved.capture,
        force_usage,
    };
    let (total_timeout, first_chunk_timeout) = timeouts(&target.kind);
    let sent_at = Instant::now();
    let before_send = sent_at - record.start;
    // 8. Answer.
    let mut resp = if envelope.stream {
        let answer = tokio::time::timeout(first_chunk_timeout, async {
            let resp = call::send(&target, &call).await?;
            first_chunk(resp).await
        })
        .await
        .map_err(|_| ApiError::UpstreamTimeout(first_chunk_timeout))??;
        let arrived = Instant::now();
        record.ttfb = Some(arrived - record.start);
        match answer {
            FirstChunk::Error(resp) => passthrough(resp, record),
            FirstChunk::Data { parts, first, rest } => {
                record.status = parts.status.as_u16();
                record.overhead = before_send + arrived.elapsed();
                let relay = StreamRelay::new(
                    first,
                    rest,
                    force_usage,
                    endpoint,
                    record.clone(),
                    state.recorder().clone(),
                );
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
        }
    } else {
        let (parts, bytes) = tokio::time::timeout(total_timeout, async {
            let resp = call::send(&target, &call).await?;
            let (parts, body) = resp.into_parts();
            Ok::<_, ApiError>((parts, collect_upstream(body).await?))
        })
        .await
        .map_err(|_| ApiError::UpstreamTimeout(total_timeout))??;
        let arrived = Instant::now();
        if parts.status.is_success() {
            record.usage = usage_from_body(&bytes);
        }
        let resp = passthrough(Response::from_parts(parts, bytes), record);
        record.overhead = before_send + arrived.elapsed();
        resp
    };
    let h = resp.headers_mut();
    h.insert(X_MODEL_ID.clone(), target.id_header.clone());
    h.insert(X_OVERHEAD.clone(), duration_value(record.overhead));
    Ok(resp)
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
    out
}

/// What a stream's upstream sent first.
enum FirstChunk {
    /// A non-success status: its whole (small) body, passed through as is.
    Error(Response<Bytes>),
    /// Success: the head, the first data frame, and the rest of the body.
    Data {
        parts: http::response::Parts,
        first: Bytes,
        rest: UpstreamBody,
    },
}

/// Wait for the first data frame, so an upstream that fails before it still gets a proper
/// error status (and, with routing, a retry) instead of a broken stream.
async fn first_chunk(resp: Response<UpstreamBody>) -> Result<FirstChunk, ApiError> {
    let (parts, mut body) = resp.into_parts();
    if !parts.status.is_success() {
        let bytes = collect_upstream(body).await?;
        return Ok(FirstChunk::Error(Response::from_parts(parts, bytes)));
    }
    loop {
        match body.frame().await {
            Some(Ok(frame)) => match frame.into_data() {
                Ok(data) if !data.is_empty() => {
                    return Ok(FirstChunk::Data {
                        parts,
                        first: data,
                        rest: body,
                    })
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
}

async fn collect_upstream(body: UpstreamBody) -> Result<Bytes, ApiError> {
    Limited::new(body, MAX_UPSTREAM_BODY)
        .collect()
        .await
        .map(|c| c.to_bytes())
        .map_err(|e| ApiError::UpstreamUnreachable(format!("reading the answer failed: {e}")))
}

fn timeouts(kind: &TargetKind) -> (Duration, Duration) {
    match kind {
        TargetKind::Http(t) => (t.timeout, t.stream_timeout),
        TargetKind::Mock(_) | TargetKind::Unsupported => {
            let d = crate::providers::target::DEFAULT_TIMEOUT;
            (d, d)
        }
    }
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
        .models
        .group(id)
        .ok_or_else(|| ApiError::ModelNotFound(id.chars().take(256).collect()))?;
    let body = model_object(group, snap.created).to_string();
    Ok(json(StatusCode::OK, Bytes::from(body)))
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
