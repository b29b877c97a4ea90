//! `sluice mock`: the mock provider as an OpenAI-compatible HTTP server, for benchmarks and for
//! tests that need a real upstream socket. Paths work with and without the `/v1` prefix.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use tokio::net::TcpListener;

use super::{error, json, respond, MockBody, MockSettings};
use crate::endpoint::Endpoint;
use crate::server::serve_with;

/// Largest request body the mock reads (the benchmark sends up to ~500 KB).
const MAX_BODY: usize = 64 * 1024 * 1024;

/// Serve the mock provider until `shutdown` resolves (then let open streams finish for up to
/// 10 s).
pub async fn serve(
    listener: TcpListener,
    settings: MockSettings,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let settings = Arc::new(settings);
    let handler = move |req: Request<Incoming>| {
        let settings = settings.clone();
        async move { handle(req, &settings).await }
    };
    serve_with(listener, handler, shutdown, Duration::from_secs(10)).await;
    Ok(())
}

async fn handle(req: Request<Incoming>, settings: &MockSettings) -> Response<MockBody> {
    let path = req.uri().path();
    let bare = path.strip_prefix("/v1").unwrap_or(path);
    match (req.method(), Endpoint::from_path(path)) {
        (&Method::POST, Some(endpoint)) => {
            let (parts, body) = req.into_parts();
            match Limited::new(body, MAX_BODY).collect().await {
                Ok(b) => respond(endpoint, &parts.headers, &b.to_bytes(), settings).await,
                Err(e) => error(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    &format!("could not read the request body: {e}"),
                    None,
                    "request_too_large",
                ),
            }
        }
        (&Method::GET, None) if bare == "/models" => json(
            StatusCode::OK,
            Bytes::from_static(
                br#"{"object":"list","data":[{"id":"mock-model","object":"model","created":0,"owned_by":"sluice-mock"}]}"#,
            ),
        ),
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
