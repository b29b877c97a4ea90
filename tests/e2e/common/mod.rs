//! Shared end-to-end harness: the gateway in process on an ephemeral loopback port, the mock
//! provider server, a recording upstream for byte-exact and fault cases, and an HTTP client.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::stream;
use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::{combinators::BoxBody, BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};

mod browser;
pub use browser::{csrf_of, Browser};

use sluice::server::{AppState, ServiceOptions, Services};
use sluice_core::record::RequestRecord;
use sluice_mock::MockSettings;
use sluice_telemetry::Recorder;

/// A running gateway.
pub struct Gateway {
    pub addr: SocketAddr,
    pub records: mpsc::UnboundedReceiver<RequestRecord>,
    /// Its state (tests put virtual keys in its directory).
    pub state: Arc<AppState>,
    stop: Option<oneshot::Sender<()>>,
}

impl Gateway {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// The next finished request's record (waits up to [`PATIENCE`]).
    pub async fn next_record(&mut self) -> RequestRecord {
        tokio::time::timeout(PATIENCE, self.records.recv())
            .await
            .expect("no record in time")
            .expect("recorder closed")
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Start the gateway on a config given as YAML (`{mock}`/`{up}` already substituted), its
/// embedded store (when the config has a master key) in a fresh directory.
pub async fn gateway(yaml: &str) -> Gateway {
    gateway_in(yaml, &temp_dir()).await
}

/// A fresh directory for a gateway's SQLite store and spool, under the target directory's
/// `tmp/e2e` (emptied once per test run, so stores do not pile up anywhere across runs).
pub fn temp_dir() -> std::path::PathBuf {
    static RUN: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    let run = RUN.get_or_init(|| {
        let run = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("e2e");
        let _ = std::fs::remove_dir_all(&run);
        run
    });
    let dir = run.join(sluice_core::random::uuid_v4().to_string());
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Start the gateway with its embedded store (and spool) in `data_dir`.
pub async fn gateway_in(yaml: &str, data_dir: &std::path::Path) -> Gateway {
    let env: HashMap<String, String> = HashMap::new();
    let loaded = sluice_config::load_str(yaml, &env).expect("config loads");
    let options = ServiceOptions {
        data_dir: data_dir.to_owned(),
    };
    let services = Services::start(&loaded.config, &options)
        .await
        .expect("services start");
    let (tx, rx) = mpsc::unbounded_channel();
    let mut sinks: Vec<Box<dyn sluice_core::record::RecordSink>> = vec![Box::new(tx)];
    sinks.extend(services.sinks());
    let (recorder, _task) = Recorder::start_with(sinks, options.callbacks());
    // As `sluice serve` does: the stored deployments with the file's (`store_model_in_db`).
    let source = sluice_config::Source::from_yaml(yaml).expect("config reads");
    let store = services.store.as_ref().map(|s| s.store.clone());
    let (config, runtime) = sluice::models::prepare(
        loaded.config,
        store.as_ref(),
        source,
        sluice_secrets::Vars::default(),
    )
    .await
    .expect("stored deployments load");
    let state = AppState::with_services(&config, recorder, services, 0).expect("state builds");
    if let Some(rt) = runtime {
        sluice::models::serve(&state, rt);
    }
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(sluice::server::serve(
        listener,
        state.clone(),
        async {
            let _ = stopped.await;
        },
        Duration::from_secs(5),
    ));
    Gateway {
        addr,
        records: rx,
        state,
        stop: Some(stop),
    }
}

/// A running `sluice mock` server (in process).
pub struct MockServer {
    pub addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
}

impl MockServer {
    pub fn base(&self) -> String {
        format!("http://{}/v1", self.addr)
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

pub async fn mock_server(settings: MockSettings) -> MockServer {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(sluice_mock::serve(listener, settings, async {
        let _ = stopped.await;
    }));
    MockServer {
        addr,
        stop: Some(stop),
    }
}

/// One request as the recording upstream saw it.
#[derive(Debug, Clone)]
pub struct Captured {
    pub path_and_query: String,
    pub headers: HeaderMap,
    pub body: Bytes,
    /// The HTTP version the gateway spoke.
    pub version: http::Version,
    /// Which accepted connection it came on (0, 1, … in accept order).
    pub connection: usize,
}

/// How the recording upstream answers.
#[derive(Debug, Clone)]
pub enum Reply {
    /// Status and JSON body.
    Json(u16, &'static str),
    /// SSE frames, each sent after `gap`; `then_reset` aborts the body after the last one.
    Sse {
        frames: Vec<&'static str>,
        gap: Duration,
        then_reset: bool,
    },
    /// Wait, then answer.
    Delay(Duration, Box<Reply>),
}

pub struct Recording {
    pub addr: SocketAddr,
    pub seen: Arc<Mutex<Vec<Captured>>>,
    stop: Option<oneshot::Sender<()>>,
}

impl Recording {
    pub fn base(&self) -> String {
        format!("http://{}/v1", self.addr)
    }
    pub fn requests(&self) -> Vec<Captured> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

type TestBody = BoxBody<Bytes, std::io::Error>;

fn reply_body(reply: Reply) -> futures_util::future::BoxFuture<'static, Response<TestBody>> {
    Box::pin(async move {
        match reply {
            Reply::Json(status, body) => {
                let mut r = Response::new(
                    Full::new(Bytes::from_static(body.as_bytes()))
                        .map_err(|never: Infallible| match never {})
                        .boxed(),
                );
                *r.status_mut() = StatusCode::from_u16(status).unwrap();
                r.headers_mut()
                    .insert("content-type", "application/json".parse().unwrap());
                r
            }
            Reply::Delay(d, inner) => {
                tokio::time::sleep(d).await;
                reply_body(*inner).await
            }
            Reply::Sse {
                frames,
                gap,
                then_reset,
            } => {
                let n = frames.len();
                let s = stream::unfold(0usize, move |i| {
                    let frames = frames.clone();
                    async move {
                        if i < n {
                            if i > 0 {
                                tokio::time::sleep(gap).await;
                            }
                            Some((
                                Ok(Frame::data(Bytes::from_static(frames[i].as_bytes()))),
                                i + 1,
                            ))
                        } else if then_reset && i == n {
                            tokio::time::sleep(gap).await;
                            Some((Err(std::io::Error::other("reset")), i + 1))
                        } else {
                            None
                        }
                    }
                });
                let mut r = Response::new(BodyExt::boxed(StreamBody::new(s)));
                r.headers_mut()
                    .insert("content-type", "text/event-stream".parse().unwrap());
                r
            }
        }
    })
}

/// An upstream that records every request and answers with `reply`.
pub async fn recording(reply: Reply) -> Recording {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen: Arc<Mutex<Vec<Captured>>> = Arc::default();
    let (stop, mut stopped) = oneshot::channel::<()>();
    let seen2 = seen.clone();
    tokio::spawn(async move {
        let mut accepted = 0;
        loop {
            tokio::select! {
                Ok((stream, _)) = listener.accept() => {
                    let connection = accepted;
                    accepted += 1;
                    let seen = seen2.clone();
                    let reply = reply.clone();
                    tokio::spawn(async move {
                        let svc = service_fn(move |req: Request<Incoming>| {
                            let seen = seen.clone();
                            let reply = reply.clone();
                            async move {
                                let (parts, body) = req.into_parts();
                                let body = body.collect().await.unwrap().to_bytes();
                                seen.lock().unwrap().push(Captured {
                                    path_and_query: parts.uri.path_and_query().map(|p| p.to_string()).unwrap_or_default(),
                                    headers: parts.headers,
                                    body,
                                    version: parts.version,
                                    connection,
                                });
                                Ok::<_, Infallible>(reply_body(reply).await)
                            }
                        });
                        // HTTP/1.1 and h2c, as self-hosted model servers may speak either.
                        let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                            .serve_connection(TokioIo::new(stream), svc)
                            .await;
                    });
                }
                _ = &mut stopped => break,
            }
        }
    });
    Recording {
        addr,
        seen,
        stop: Some(stop),
    }
}

/// A finished HTTP exchange.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
    /// Frames as they arrived, with arrival times (streams).
    pub frames: Vec<(Instant, Bytes)>,
    /// Whether the body ended with an error (connection cut).
    pub body_error: bool,
}

impl Answer {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
    /// `data:` payloads of an SSE body, in order.
    pub fn sse_data(&self) -> Vec<String> {
        self.text()
            .lines()
            .filter_map(|l| l.strip_prefix("data: ").map(str::to_owned))
            .collect()
    }
}

fn client() -> Client<HttpConnector, Full<Bytes>> {
    Client::builder(TokioExecutor::new()).build(HttpConnector::new())
}

/// Send a request and read the whole answer, frame by frame.
pub async fn send(
    method: &str,
    url: &str,
    body: impl Into<Bytes>,
    headers: &[(&str, &str)],
) -> Answer {
    let mut req = Request::builder().method(method).uri(url);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req.body(Full::new(body.into())).unwrap();
    let resp = client().request(req).await.expect("request sent");
    let (parts, mut body) = resp.into_parts();
    let mut frames = Vec::new();
    let mut all = Vec::new();
    let mut body_error = false;
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(f) => {
                if let Ok(d) = f.into_data() {
                    all.extend_from_slice(&d);
                    frames.push((Instant::now(), d));
                }
            }
            Err(_) => {
                body_error = true;
                break;
            }
        }
    }
    Answer {
        status: parts.status,
        headers: parts.headers,
        body: Bytes::from(all),
        frames,
        body_error,
    }
}

pub const MASTER: (&str, &str) = ("authorization", "Bearer sk-master");

/// Serve `handler` on a loopback port for the rest of the test (a receiver or a service a
/// gateway calls); its `http://host:port`.
pub async fn serve_loopback<H, F>(handler: H) -> String
where
    H: Fn(Request<sluice_net::server::RequestBody>) -> F + Clone + Send + Sync + 'static,
    F: std::future::Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(sluice_net::server::serve_with(
        listener,
        handler,
        std::future::pending::<()>(),
        Duration::ZERO,
    ));
    format!("http://{addr}")
}

/// A virtual key made by the master key `sk-master` with `/key/generate` and `spec`.
pub async fn new_key(gw: &Gateway, spec: serde_json::Value) -> String {
    let a = send(
        "POST",
        &gw.url("/key/generate"),
        spec.to_string(),
        &[MASTER, ("content-type", "application/json")],
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    a.json()["key"].as_str().unwrap().to_owned()
}

/// The spend log of the request `answer` answered, read with `master` once the spend writer's
/// batch has landed.
pub async fn logged_as(gw: &Gateway, master: &str, answer: &Answer) -> serde_json::Value {
    let id = answer.header("x-request-id").unwrap().to_owned();
    let path = format!("/spend/logs?request_id={id}");
    let row = poll(
        PATIENCE,
        || async {
            let a = admin_as(gw, master, "GET", &path, serde_json::Value::Null).await;
            a.json().as_array().and_then(|r| r.first()).cloned()
        },
        Option::is_some,
    )
    .await;
    row.unwrap_or_else(|| panic!("request {id} never reached the spend log"))
}

/// A management API call with `master` as the bearer key; a null `body` sends none.
pub async fn admin_as(
    gw: &Gateway,
    master: &str,
    method: &str,
    path: &str,
    body: serde_json::Value,
) -> Answer {
    let auth = format!("Bearer {master}");
    let body = if body.is_null() {
        String::new()
    } else {
        body.to_string()
    };
    send(
        method,
        &gw.url(path),
        body,
        &[
            ("content-type", "application/json"),
            ("authorization", &auth),
        ],
    )
    .await
}

/// A chat completion asking `model`, `body_extra` appended to the body's members (`,"x":1`),
/// with `key` as the bearer key and `headers` besides.
pub async fn chat_as(
    gw: &Gateway,
    key: &str,
    model: &str,
    body_extra: &str,
    headers: &[(&str, &str)],
) -> Answer {
    let auth = format!("Bearer {key}");
    let mut all = vec![
        ("content-type", "application/json"),
        ("authorization", auth.as_str()),
    ];
    all.extend_from_slice(headers);
    let body = format!(
        r#"{{"model":"{model}","messages":[{{"role":"user","content":"hi"}}]{body_extra}}}"#
    );
    send("POST", &gw.url("/v1/chat/completions"), body, &all).await
}

/// The config lines for a shared store and Redis: `general_settings.database_url` (to go under
/// `general_settings:`) and a `router_settings:` block; empty for `None`.
pub fn store_and_redis(database_url: Option<&str>, redis_url: Option<&str>) -> (String, String) {
    (
        database_url
            .map(|u| format!("  database_url: {u}\n"))
            .unwrap_or_default(),
        redis_url
            .map(|u| format!("router_settings:\n  redis_url: {u}\n"))
            .unwrap_or_default(),
    )
}

/// Wait until each gateway says Redis is connected ([`PATIENCE`] at most each).
pub async fn on_redis(gateways: &[&Gateway]) {
    for gw in gateways {
        let ready = gw.url("/health/readiness");
        let up = eventually(PATIENCE, || async {
            get(&ready).await.json()["redis"] == "connected"
        })
        .await;
        assert!(up, "Redis connected");
    }
}

/// How long a test waits for something that should happen soon (a record written, a reload
/// seen, a cooldown over, a server up). Generous, so that a loaded machine makes a test slow
/// rather than failed; a passing test waits only as long as the thing takes. Tests wait for
/// the condition itself ([`eventually`], [`poll`], [`wait_blocking`]), never for a fixed time
/// that was long enough on the machine the test was written on.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// Whether `f` comes true within `within` (asked every 50 ms).
pub async fn eventually<F, Fut>(within: Duration, mut f: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if f().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// `f`'s values, asked every 50 ms until `done` accepts one or `within` has passed: the last
/// value either way, for the caller's assertions to check and show.
pub async fn poll<T, F, Fut>(within: Duration, mut f: F, done: impl Fn(&T) -> bool) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let deadline = Instant::now() + within;
    loop {
        let value = f().await;
        if done(&value) || Instant::now() >= deadline {
            return value;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `f`'s first `Some`, asked every 10 ms from a blocking test (or before a runtime exists),
/// within `within`; panics naming `what` when none came.
pub fn wait_blocking<T>(within: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Requests in flight at the deployments of the gateway at `addr` (`host:port`): the sum of
/// its `/metrics` gauge `sluice_deployment_in_flight_requests`, asked with `key`.
pub async fn in_flight(addr: &str, key: &str) -> i64 {
    let auth = format!("Bearer {key}");
    send(
        "GET",
        &format!("http://{addr}/metrics"),
        "",
        &[("authorization", &auth)],
    )
    .await
    .text()
    .lines()
    .filter(|l| l.starts_with("sluice_deployment_in_flight_requests{"))
    .filter_map(|l| l.rsplit_once(' ')?.1.parse::<i64>().ok())
    .sum()
}

/// Wait until the gateway at `addr` has `n` requests in flight at its deployments (an
/// upstream call started, a stream under way): what a test that acts on requests in flight
/// waits for before acting, rather than a fixed time it hopes they take to get there.
pub async fn until_in_flight(addr: &str, key: &str, n: i64) {
    let there = eventually(PATIENCE, || async { in_flight(addr, key).await >= n }).await;
    assert!(there, "{n} requests in flight at {addr}");
}

/// The address a process wrote to its `--ready-file` once it listens (`sluice serve` and
/// `sluice mock` write it then), waiting up to [`PATIENCE`]; panics naming `what` when it
/// never does.
pub fn ready_addr(ready: &std::path::Path, what: &str) -> String {
    wait_blocking(PATIENCE, what, || {
        std::fs::read_to_string(ready)
            .ok()
            .map(|a| a.trim().to_owned())
            .filter(|a| !a.is_empty())
    })
}

/// The test service-account key file, its token endpoint the mock's at `mock` (`host:port`),
/// written to a fresh directory.
pub fn vertex_key_file(mock: &str) -> std::path::PathBuf {
    let key = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/vertex/service_account.json"
    ))
    .unwrap()
    .replace(
        "https://oauth2.googleapis.com/token",
        &format!("http://{mock}/token"),
    );
    let path = temp_dir().join("sa.json");
    std::fs::write(&path, key).unwrap();
    path
}

pub async fn post(url: &str, body: &str) -> Answer {
    send(
        "POST",
        url,
        body.to_owned(),
        &[MASTER, ("content-type", "application/json")],
    )
    .await
}

pub async fn get(url: &str) -> Answer {
    send("GET", url, Bytes::new(), &[MASTER]).await
}

impl MockServer {
    /// What the mock server has seen: `requests`, `answered`, `cancelled`.
    pub async fn stats(&self) -> serde_json::Value {
        get(&format!("http://{}/mock/stats", self.addr))
            .await
            .json()
    }

    /// Inference requests that reached this server.
    pub async fn requests(&self) -> u64 {
        self.stats().await["requests"].as_u64().unwrap()
    }
}

/// The blocks, stop reason, usage and event names an Anthropic client assembles.
pub fn anthropic_events(
    a: &Answer,
) -> (
    Vec<serde_json::Value>,
    String,
    serde_json::Value,
    Vec<String>,
) {
    let text = a.text();
    let names: Vec<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("event: ").map(str::to_owned))
        .collect();
    let mut blocks: Vec<serde_json::Value> = Vec::new();
    let (mut stop, mut usage) = (String::new(), serde_json::Value::Null);
    for d in a.sse_data() {
        let e: serde_json::Value = serde_json::from_str(&d).unwrap();
        match e["type"].as_str().unwrap() {
            "message_start" => usage = e["message"]["usage"].clone(),
            "content_block_start" => {
                assert_eq!(e["index"].as_u64().unwrap() as usize, blocks.len());
                let mut b = e["content_block"].clone();
                b["json"] = serde_json::json!("");
                blocks.push(b);
            }
            "content_block_delta" => {
                let b = &mut blocks[e["index"].as_u64().unwrap() as usize];
                let d = &e["delta"];
                if let Some(t) = d["text"].as_str() {
                    b["text"] = serde_json::json!(format!("{}{t}", b["text"].as_str().unwrap()));
                }
                if let Some(j) = d["partial_json"].as_str() {
                    b["json"] = serde_json::json!(format!("{}{j}", b["json"].as_str().unwrap()));
                }
            }
            "message_delta" => {
                stop = e["delta"]["stop_reason"].as_str().unwrap().to_owned();
                for (k, v) in e["usage"].as_object().unwrap() {
                    usage[k] = v.clone();
                }
            }
            _ => {}
        }
    }
    (blocks, stop, usage, names)
}

/// Text, tool calls (name, arguments), finish reason and usage an OpenAI client assembles.
pub fn openai_chunks(
    a: &Answer,
) -> (
    String,
    Vec<(String, String)>,
    String,
    Option<serde_json::Value>,
) {
    let (mut text, mut finish, mut usage) = (String::new(), String::new(), None);
    let mut calls: Vec<(String, String)> = Vec::new();
    let data = a.sse_data();
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
    for d in &data[..data.len() - 1] {
        let c: serde_json::Value = serde_json::from_str(d).unwrap();
        if !c["usage"].is_null() {
            usage = Some(c["usage"].clone());
        }
        let Some(choice) = c["choices"].get(0) else {
            continue;
        };
        text.push_str(choice["delta"]["content"].as_str().unwrap_or_default());
        for t in choice["delta"]["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let i = t["index"].as_u64().unwrap() as usize;
            if calls.len() <= i {
                calls.resize(i + 1, Default::default());
            }
            if let Some(n) = t["function"]["name"].as_str() {
                calls[i].0 = n.to_owned();
            }
            calls[i]
                .1
                .push_str(t["function"]["arguments"].as_str().unwrap_or_default());
        }
        if let Some(f) = choice["finish_reason"].as_str() {
            finish = f.to_owned();
        }
    }
    (text, calls, finish, usage)
}

/// A PostgreSQL server URL from the test services (scripts/services.sh), or `None` after a
/// loud, counted skip (`sluice_store::testing::skip`); under `CI=true` a missing server fails
/// the test instead.
pub fn postgres_server(var: &str) -> Option<String> {
    sluice_store::testing::required_var(var, "PostgreSQL")
}

/// The PostgreSQL server outage tests may stop and start, and its control script
/// (`stop` / `start`), or `None` after a skip (a failure under CI).
pub fn postgres_restartable() -> Option<(String, String)> {
    sluice_store::testing::postgres_restartable()
}

/// A fresh database on the test server at `server`; its URL.
pub async fn postgres_database(server: &str) -> String {
    sluice_store::testing::postgres_database(server).await
}

/// The test Redis (`SLUICE_TEST_REDIS_URL`), or `None` after a skip (a failure under CI).
pub fn redis_server() -> Option<String> {
    sluice_store::testing::required_var("SLUICE_TEST_REDIS_URL", "Redis")
}

/// The test Redis Stack, with the search module (`SLUICE_TEST_REDIS_STACK_URL`), or `None`
/// after a skip (a failure under CI).
pub fn redis_stack_server() -> Option<String> {
    sluice_store::testing::required_var(
        "SLUICE_TEST_REDIS_STACK_URL",
        "Redis Stack (the search module)",
    )
}

/// `sluice serve` as a process (the real binary) on a free loopback port.
pub struct Served {
    pub child: std::process::Child,
    /// `host:port` it listens on.
    pub addr: String,
    /// Its config file (rewrite it and send SIGHUP to reload).
    pub cfg: std::path::PathBuf,
    /// Its stderr.
    pub log: std::path::PathBuf,
}

/// Start the binary on `config` with `extra` arguments, in a fresh directory; `Err` with its
/// exit status and stderr when it exits instead of listening.
pub fn serve_binary<S: AsRef<std::ffi::OsStr>>(
    config: &str,
    extra: &[S],
) -> Result<Served, String> {
    serve_binary_env(config, extra, &[])
}

/// [`serve_binary`] with `env` added to the process environment it inherits.
#[allow(clippy::zombie_processes)] // the caller waits on `Served::child`
pub fn serve_binary_env<S: AsRef<std::ffi::OsStr>>(
    config: &str,
    extra: &[S],
    env: &[(&str, &str)],
) -> Result<Served, String> {
    let dir = temp_dir();
    let cfg = dir.join("config.yaml");
    std::fs::write(&cfg, config).unwrap();
    let ready = dir.join("ready");
    let log = dir.join("stderr.log");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("serve")
        .arg("--config")
        .arg(&cfg)
        .args(["--port", "0", "--ready-file"])
        .arg(&ready)
        .arg("--data-dir")
        .arg(dir.join("data"))
        .args(extra)
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let started = wait_blocking(PATIENCE, "sluice did not start", || {
        if let Some(status) = child.try_wait().unwrap() {
            let stderr = std::fs::read_to_string(&log).unwrap_or_default();
            return Some(Err(format!("{status}: {stderr}")));
        }
        let addr = std::fs::read_to_string(&ready).ok()?;
        (!addr.is_empty()).then(|| Ok(addr.trim().to_owned()))
    });
    started.map(|addr| Served {
        child,
        addr,
        cfg,
        log,
    })
}

/// `GET /spend/logs` under `master` once it lists at least `at_least` rows ([`PATIENCE`] at
/// most; the last answer either way).
pub async fn spend_logs(gw: &Gateway, master: &str, at_least: usize) -> serde_json::Value {
    let auth = format!("Bearer {master}");
    let url = gw.url("/spend/logs");
    poll(
        PATIENCE,
        || async {
            send("GET", &url, "", &[("authorization", &auth)])
                .await
                .json()
        },
        |logs| logs.as_array().is_some_and(|l| l.len() >= at_least),
    )
    .await
}
