//! The HTTP server: accept connections (HTTP/1.1 and h2c), hand each request to the pipeline,
//! and shut down gracefully (stop accepting, let requests and streams finish up to a deadline).

mod body;
mod health;
pub mod pipeline;
mod relay;
pub mod routes;
mod state;

pub use body::ResponseBody;
pub use relay::RelayError;
pub use state::{AppState, Snapshot};

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response};
use http_body::Body;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio_util::task::TaskTracker;

use crate::error::ApiError;
use crate::routing::OnDisconnect;

/// Largest read buffer per connection (hyper's minimum is 8 KiB).
pub const MAX_CONN_BUF: usize = 64 * 1024;

/// Serve the gateway until `shutdown` resolves, then drain for at most `grace`.
pub async fn serve(
    listener: TcpListener,
    state: Arc<AppState>,
    shutdown: impl Future<Output = ()>,
    grace: Duration,
) {
    let handler = move |req: Request<Incoming>| {
        let state = state.clone();
        async move {
            if state.snapshot().router.policy.on_disconnect != OnDisconnect::Finish {
                return pipeline::handle(&state, req).await;
            }
            // `on_client_disconnect: finish`: the request runs as its own task, so that a
            // client going away (which drops this future) does not cancel the upstream call.
            let task = tokio::spawn(async move { pipeline::handle(&state, req).await });
            task.await.unwrap_or_else(|_| {
                pipeline::error_response(
                    &ApiError::Internal("request task failed"),
                    crate::endpoint::Dialect::OpenAi,
                )
            })
        }
    };
    serve_with(listener, handler, shutdown, grace).await;
}

/// The accept loop shared by the gateway and the mock provider's server: HTTP/1.1 and h2c on
/// one port, `TCP_NODELAY`, graceful drain on shutdown.
pub async fn serve_with<H, F, B>(
    listener: TcpListener,
    handler: H,
    shutdown: impl Future<Output = ()>,
    grace: Duration,
) where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<B>> + Send + 'static,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        // Cap each connection's read buffer: hyper grows it to the largest read and keeps it
        // while the connection lives, so 500 KB bodies on hundreds of keep-alive connections
        // would otherwise pin hundreds of MB. Bodies arrive in 64 KB frames instead.
        .max_buf_size(MAX_CONN_BUF)
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_secs(30));
    builder.http2().timer(TokioTimer::new());
    let graceful = GracefulShutdown::new();
    let tracker = TaskTracker::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, _) = match accepted {
                    Ok(conn) => conn,
                    Err(e) => {
                        // Out of file descriptors and the like: back off instead of spinning.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let handler = handler.clone();
                let service = service_fn(move |req: Request<Incoming>| {
                    let answer = handler(req);
                    async move { Ok::<_, Infallible>(answer.await) }
                });
                let conn = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
                let conn = graceful.watch(conn.into_owned());
                tracker.spawn(async move {
                    if let Err(e) = conn.await {
                        tracing::debug!(error = %e, "connection ended with an error");
                    }
                });
            }
            () = &mut shutdown => break,
        }
    }
    drop(listener);
    tracing::info!(
        grace_secs = grace.as_secs_f64(),
        "shutting down: draining in-flight requests"
    );
    tokio::select! {
        () = graceful.shutdown() => tracing::info!("all connections closed"),
        () = tokio::time::sleep(grace) => tracing::warn!("grace period over; closing remaining connections"),
    }
    tracker.close();
}
