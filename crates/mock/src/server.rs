//! `sluice mock`: the mock provider as an HTTP server, for benchmarks and for tests that need a
//! real upstream socket. OpenAI and Anthropic paths work with and without the `/v1` prefix;
//! Gemini (`/v1beta/models/{m}:generateContent`, ...), Bedrock (`/model/{id}/converse`, ...),
//! Azure OpenAI (`/openai/deployments/{d}/chat/completions`, ...) and Cohere (`/v2/chat`) are
//! answered on their real paths; `GET /v1/realtime` (and Azure's `/openai/realtime`) opens a
//! Realtime API WebSocket session (`realtime.rs`). Beside inference: OpenAI's Files and
//! Batches (`files.rs`), Videos (`videos.rs`) and Vector Stores (`vector_stores.rs`), and the
//! search APIs of Perplexity, Tavily and Exa (`search.rs`). With `--api-key`, the key is
//! required as each provider reads it. With `--record`, the inference, search, video and
//! vector store requests it is sent are kept for `GET /mock/requests` (`record.rs`); they
//! are what `GET /mock/stats` counts.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::request::Parts;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Limited};
use sluice_net::server::RequestBody;
use tokio::net::TcpListener;

use super::record::Recorder;
use super::{
    azure_route, error, json, key_refused, respond, respond_azure, respond_native, MockBody,
    MockSettings, NativeRoute,
};
use super::{search, vector_stores, videos};
use sluice_core::endpoint::{Dialect, Endpoint};
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

async fn answer(shared: Arc<Shared>, req: Request<RequestBody>) -> Response<MockBody> {
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

/// An API beside inference the mock serves, by its module, with the path as the module's
/// `route` returns it.
enum Api {
    /// A vendor's web search (`search.rs`).
    Search(search::Vendor),
    /// OpenAI's Videos API (`videos.rs`).
    Videos(String),
    /// OpenAI's Vector Stores API (`vector_stores.rs`).
    VectorStores(String),
}

impl Api {
    fn of(path: &str) -> Option<Self> {
        if let Some(vendor) = search::route(path) {
            return Some(Self::Search(vendor));
        }
        if let Some(bare) = videos::route(path) {
            return Some(Self::Videos(bare.to_owned()));
        }
        vector_stores::route(path).map(|bare| Self::VectorStores(bare.to_owned()))
    }
}

/// A request body within [`MAX_BODY`], or the 413 to answer.
async fn read(body: RequestBody) -> Result<Bytes, Response<MockBody>> {
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

/// Count a request, read its body and, when `record` and the mock records, keep it: the
/// guard that counts it answered (once set) or cancelled, its head and its body; or the 413
/// to answer.
async fn admit(
    req: Request<RequestBody>,
    shared: &Shared,
    record: bool,
) -> Result<(Answering<'_>, Parts, Bytes), Response<MockBody>> {
    shared.stats.requests.fetch_add(1, Relaxed);
    let answering = Answering(&shared.stats, false);
    let (parts, body) = req.into_parts();
    let body = read(body).await?;
    if let (Some(recorder), true) = (&shared.recorder, record) {
        recorder.record(&parts, &body);
    }
    Ok((answering, parts, body))
}

async fn handle(req: Request<RequestBody>, shared: &Shared) -> Response<MockBody> {
    let settings = &shared.settings;
    if req.method() == Method::GET && super::realtime::is_realtime(req.uri().path()) {
        return super::realtime::upgrade(req, settings);
    }
    let path = req.uri().path();
    let bare = path.strip_prefix("/v1").unwrap_or(path);
    if let Some(api) = Api::of(path) {
        return beside_inference(req, api, shared).await;
    }
    let inference = (req.method() == Method::POST)
        .then(|| Inference::of(path))
        .flatten();
    if let Some(inference) = inference {
        // The token exchange is no inference request: only what a model was sent is kept.
        let record = !matches!(inference, Inference::Native(NativeRoute::Token));
        let (mut answering, parts, body) = match admit(req, shared, record).await {
            Ok(admitted) => admitted,
            Err(refused) => return refused,
        };
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
    if req.method() == Method::GET && bare == "/models" {
        // Kept when recording: a gateway's health checks list models, and a test counts them.
        let (parts, _) = req.into_parts();
        if let Some(recorder) = &shared.recorder {
            recorder.record(&parts, &Bytes::new());
        }
        if let Some(refused) =
            key_refused(settings, &parts.headers, parts.uri.query(), Dialect::OpenAi)
        {
            return refused;
        }
        return json(
            StatusCode::OK,
            Bytes::from_static(
                br#"{"object":"list","data":[{"id":"mock-model","object":"model","created":0,"owned_by":"sluice-mock"}]}"#,
            ),
        );
    }
    let stats = &shared.stats;
    match (req.method(), Endpoint::from_path(path)) {
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

/// Answer a search, video or vector store request: counted and recorded as inference
/// requests are.
async fn beside_inference(
    req: Request<RequestBody>,
    api: Api,
    shared: &Shared,
) -> Response<MockBody> {
    let (mut answering, parts, body) = match admit(req, shared, true).await {
        Ok(admitted) => admitted,
        Err(refused) => return refused,
    };
    let (method, query, h, s) = (
        &parts.method,
        parts.uri.query(),
        &parts.headers,
        &shared.settings,
    );
    let resp = match api {
        Api::Search(vendor) => search::respond(vendor, method, h, &body, s).await,
        Api::Videos(path) => videos::respond(method, &path, query, h, &body, s),
        Api::VectorStores(path) => vector_stores::respond(method, &path, query, h, &body, s),
    };
    answering.1 = true;
    resp
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
