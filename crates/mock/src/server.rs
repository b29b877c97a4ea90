//! `sluice mock`: the mock provider as an HTTP server, for benchmarks and for tests that need a
//! real upstream socket. OpenAI and Anthropic paths work with and without the `/v1` prefix;
//! Gemini (`/v1beta/models/{m}:generateContent`, ...), Bedrock (`/model/{id}/converse`, ...),
//! Azure OpenAI (`/openai/deployments/{d}/chat/completions`, ...) and Cohere (`/v2/chat`) are
//! answered on their real paths; `GET /v1/realtime` (and Azure's `/openai/realtime`) opens a
//! Realtime API WebSocket session (`realtime.rs`). With `--api-key`, the key is required as each provider reads
//! it. With `--record`, the inference requests it is sent are kept for `GET /mock/requests`
//! (`record.rs`).

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use tokio::net::TcpListener;

use super::record::Recorder;
use super::{
    azure_route, error, json, respond, respond_azure, respond_native, MockBody, MockSettings,
    NativeRoute,
};
use sluice_core::endpoint::Endpoint;
use sluice_net::server::{serve_threads, serve_with};

/// Largest request body the mock reads (the benchmark sends up to ~500 KB).
const MAX_BODY: usize = 64 * 1024 * 1024;

/// How long open streams may finish after shutdown.
const GRACE: Duration = Duration::from_secs(10);

/// Serve the mock provider on one listener, on the calling runtime, until `shutdown` resolves
/// (then let open streams finish for up to 10 s).
pub async fn serve(
    listener: TcpListener,
    settings: MockSettings,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let shared = Arc::new(Shared::new(settings, None));
    let handler = move |req| answer(shared.clone(), req);
    serve_with(listener, handler, shutdown, GRACE).await;
    Ok(())
}

/// Serve the mock provider thread-per-core, like the gateway (`server::serve_threads`), so
/// that a benchmark's direct figures get the same server model as the gateway's; over TLS
/// (and mutual TLS) when `tls` is given. With `record`, the newest that many inference
/// requests are kept for `GET /mock/requests`.
pub async fn serve_workers(
    listeners: Vec<std::net::TcpListener>,
    tls: Option<sluice_net::server::Tls>,
    settings: MockSettings,
    record: Option<usize>,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let shared = Arc::new(Shared::new(settings, record.map(Recorder::new)));
    let handler = move |req| answer(shared.clone(), req);
    serve_threads(
        listeners,
        tls,
        handler,
        shutdown,
        GRACE,
        || async {},
        sluice_net::server::ConnLimits::default(),
    )
    .await
}

/// What every connection's handler shares.
struct Shared {
    settings: MockSettings,
    stats: Stats,
    /// Set by `--record`; `None` costs the hot path nothing.
    recorder: Option<Recorder>,
}

impl Shared {
    fn new(settings: MockSettings, recorder: Option<Recorder>) -> Self {
        Self {
            settings,
            stats: Stats::default(),
            recorder,
        }
    }
}

async fn answer(shared: Arc<Shared>, req: Request<Incoming>) -> Response<MockBody> {
    handle(req, &shared).await
}

/// What the server has seen, for tests that count attempts at the upstream
/// (`GET /mock/stats`).
#[derive(Debug, Default)]
struct Stats {
    requests: AtomicU64,
    answered: AtomicU64,
    cancelled: AtomicU64,
}

/// Counts a request as cancelled if its handler is dropped before it answers (the caller
/// closed the connection).
struct Answering<'a>(&'a Stats, bool);

impl Drop for Answering<'_> {
    fn drop(&mut self) {
        let counter = if self.1 {
            &self.0.answered
        } else {
            &self.0.cancelled
        };
        counter.fetch_add(1, Relaxed);
    }
}

/// An inference path the mock answers, by its wire format.
enum Inference {
    /// A provider's native path (Gemini, Vertex AI, Bedrock, Cohere, the token endpoint).
    Native(NativeRoute),
    /// Azure OpenAI's deployment path: the endpoint and the deployment.
    Azure(Endpoint, Option<String>),
    /// OpenAI's and Anthropic's paths.
    Endpoint(Endpoint),
}

impl Inference {
    fn of(path: &str) -> Option<Self> {
        if let Some(route) = NativeRoute::of(path) {
            return Some(Self::Native(route));
        }
        if let Some((endpoint, deployment)) = azure_route(path) {
            return Some(Self::Azure(endpoint, deployment.map(str::to_owned)));
        }
        Endpoint::from_path(path).map(Self::Endpoint)
    }
}

/// A request body within [`MAX_BODY`], or the 413 to answer.
async fn read(body: Incoming) -> Result<Bytes, Response<MockBody>> {
    match Limited::new(body, MAX_BODY).collect().await {
        Ok(b) => Ok(b.to_bytes()),
        Err(e) => Err(error(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!("could not read the request body: {e}"),
            None,
            "request_too_large",
        )),
    }
}

async fn handle(req: Request<Incoming>, shared: &Shared) -> Response<MockBody> {
    let (settings, stats) = (&shared.settings, &shared.stats);
    if req.method() == Method::GET && super::realtime::is_realtime(req.uri().path()) {
        return super::realtime::upgrade(req, settings);
    }
    let path = req.uri().path();
    let bare = path.strip_prefix("/v1").unwrap_or(path);
    let inference = (req.method() == Method::POST)
        .then(|| Inference::of(path))
        .flatten();
    if let Some(inference) = inference {
        stats.requests.fetch_add(1, Relaxed);
        let mut answering = Answering(stats, false);
        let (parts, body) = req.into_parts();
        let body = match read(body).await {
            Ok(b) => b,
            Err(refused) => return refused,
        };
        // The token exchange is no inference request: only what a model was sent is kept.
        if let (Some(recorder), false) = (
            &shared.recorder,
            matches!(inference, Inference::Native(NativeRoute::Token)),
        ) {
            recorder.record(&parts, &body);
        }
        let (h, s) = (&parts.headers, settings);
        let resp = match inference {
            Inference::Native(route) => respond_native(&route, &parts.uri, h, &body, s).await,
            Inference::Azure(e, deployment) => {
                respond_azure(e, deployment.as_deref(), h, &body, s).await
            }
            Inference::Endpoint(e) => respond(e, h, &body, s).await,
        };
        answering.1 = true;
        return resp;
    }
    if let Some(files_path) = crate::files::route(path).map(str::to_owned) {
        let (parts, body) = req.into_parts();
        let body = match read(body).await {
            Ok(b) => b,
            Err(refused) => return refused,
        };
        return crate::files::respond(
            &parts.method,
            &files_path,
            parts.uri.query(),
            &parts.headers,
            &body,
            settings,
        )
        .await;
    }
    match (req.method(), Endpoint::from_path(path)) {
        (&Method::GET, None) if bare == "/models" => json(
            StatusCode::OK,
            Bytes::from_static(
                br#"{"object":"list","data":[{"id":"mock-model","object":"model","created":0,"owned_by":"sluice-mock"}]}"#,
            ),
        ),
        (&Method::GET, None) if bare == "/mock/stats" => {
            let body = serde_json::json!({
                "requests": stats.requests.load(Relaxed),
                "answered": stats.answered.load(Relaxed),
                "cancelled": stats.cancelled.load(Relaxed),
            });
            json(StatusCode::OK, Bytes::from(body.to_string()))
        }
        (&Method::GET | &Method::DELETE, None) if bare == "/mock/requests" => {
            recorded(req.method(), shared.recorder.as_ref())
        }
        (&Method::GET, None) if path.starts_with("/health") => {
            json(StatusCode::OK, Bytes::from_static(br#"{"status":"ok"}"#))
        }
        _ => error(
            StatusCode::NOT_FOUND,
            &format!("Unknown request URL: {} {path}", req.method()),
            None,
            "unknown_url",
        ),
    }
}

/// `GET /mock/requests` (the kept requests, oldest first) and `DELETE /mock/requests`
/// (forget them); a 404 saying how to turn recording on when it is off.
fn recorded(method: &Method, recorder: Option<&Recorder>) -> Response<MockBody> {
    let Some(recorder) = recorder else {
        return error(
            StatusCode::NOT_FOUND,
            "the mock is not recording requests: start it with --record",
            None,
            "recording_off",
        );
    };
    if method == Method::DELETE {
        recorder.clear();
        return json(StatusCode::OK, Bytes::from_static(br#"{"cleared":true}"#));
    }
    json(StatusCode::OK, recorder.list())
}
