//! The HTTP server: accept connections (HTTP/1.1 and h2c), hand each request to the pipeline,
//! and shut down gracefully (stop accepting, let requests and streams finish up to a deadline).

pub(crate) mod attempt;
pub mod client_side;
mod features;
pub(crate) mod health;
pub(crate) mod inference;
pub(crate) mod internal;
mod listing;
mod litellm_headers;
mod management;
mod named_model;
pub mod overload;
pub mod pipeline;
mod relay;
pub mod routes;
mod several;
mod state;
pub(crate) mod steps;
mod tags;
pub(crate) mod upload;
mod vendor_clients;

pub use features::{Building, FeatureError, Part};
pub use relay::StreamRelay;
pub(crate) use relay::{Abort, IdleTimer, State as RelayState};
pub use state::{
    AppState, Features, ReloadError, ServiceError, ServiceOptions, Services, Snapshot,
    SnapshotError, StoreServices,
};

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response};
use tokio::net::TcpListener;

use sluice_core::error::ApiError;
use sluice_net::server::{serve_on, serve_threads, RequestBody, Tls};
use sluice_routing::OnDisconnect;

use crate::http::ResponseBody;

/// Serve the gateway on one listener, on the calling runtime, until `shutdown` resolves, then
/// drain for at most `grace`.
pub async fn serve(
    listener: TcpListener,
    state: Arc<AppState>,
    shutdown: impl Future<Output = ()>,
    grace: Duration,
) {
    serve_tls(listener, None, state, shutdown, grace).await;
}

/// [`serve`], over TLS when `tls` is given (`--tls-cert` / `--tls-key`).
pub async fn serve_tls(
    listener: TcpListener,
    tls: Option<Tls>,
    state: Arc<AppState>,
    shutdown: impl Future<Output = ()>,
    grace: Duration,
) {
    let limits = state.connections().clone();
    serve_on(
        listener,
        tls,
        move |req| answer(state.clone(), req),
        shutdown,
        grace,
        limits,
    )
    .await;
}

/// Serve the gateway thread-per-core: one worker thread per listener (see [`bind_workers`]),
/// each with its own single-threaded runtime and upstream pools, until `shutdown` resolves.
/// `state` should come from `AppState::with_services` with as many workers as listeners.
pub async fn serve_workers(
    listeners: Vec<std::net::TcpListener>,
    tls: Option<Tls>,
    state: Arc<AppState>,
    shutdown: impl Future<Output = ()>,
    grace: Duration,
) -> std::io::Result<()> {
    // Each worker's own recorder queue: every record to the sinks before its runtime goes.
    let limits = state.connections().clone();
    serve_threads(
        listeners,
        tls,
        move |req| answer(state.clone(), req),
        shutdown,
        grace,
        sluice_telemetry::finish_worker,
        limits,
    )
    .await
}

/// What every connection runs for each request, boxed: hyper keeps a slot the size of the
/// service's future for each connection's whole life, and the pipeline's future is ~7 KB. Boxed,
/// the slot is a pointer and the 7 KB live only while a request is being answered (a held
/// stream or an idle keep-alive connection no longer carries them).
fn answer(
    state: Arc<AppState>,
    req: Request<RequestBody>,
) -> Pin<Box<impl Future<Output = Response<ResponseBody>>>> {
    Box::pin(answer_now(state, req))
}

async fn answer_now(state: Arc<AppState>, req: Request<RequestBody>) -> Response<ResponseBody> {
    if state.snapshot().router.policy.on_disconnect != OnDisconnect::Finish {
        return pipeline::handle(&state, req).await;
    }
    // `on_client_disconnect: finish`: the request runs as its own task, so that a client going
    // away (which drops this future) does not cancel the upstream call.
    let task = tokio::spawn(async move { pipeline::handle(&state, req).await });
    task.await.unwrap_or_else(|_| {
        crate::http::error_response(
            &ApiError::Internal("request task failed"),
            sluice_core::endpoint::Dialect::OpenAi,
        )
    })
}
