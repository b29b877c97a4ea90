//! The receiver `sluice bench --callbacks` points every callback at: one loopback HTTP server
//! that reads each delivery whole and answers 200, counting deliveries and bytes, so the run
//! can show that records were really sent while it measured the request path.

use std::future::pending;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use sluice_net::server::RequestBody;
use tokio::net::TcpListener;

use super::BenchError;

/// What the receiver got.
#[derive(Debug, Default)]
pub struct Received {
    /// Deliveries (batches, exports, object PUTs).
    pub requests: AtomicU64,
    /// Body bytes.
    pub bytes: AtomicU64,
}

/// Start the receiver on 127.0.0.1; it runs until the bench process ends. It stands in for
/// services on other machines, so it gets its own thread, behind the load generator's (as
/// sluice's callback thread is behind its workers): reading hundreds of megabytes of
/// deliveries must not delay the load generator's sends and skew the very latency compared.
pub async fn start() -> Result<(SocketAddr, Arc<Received>), BenchError> {
    let spawn_err =
        |e: std::io::Error| BenchError::Spawn("callback receiver".into(), e.to_string());
    let std_listener = std::net::TcpListener::bind(("127.0.0.1", 0)).map_err(spawn_err)?;
    std_listener.set_nonblocking(true).map_err(spawn_err)?;
    let addr = std_listener.local_addr().map_err(spawn_err)?;
    let got = Arc::new(Received::default());
    let seen = got.clone();
    std::thread::Builder::new()
        .name("bench-receiver".into())
        .spawn(move || {
            sluice_telemetry::callbacks::yield_to_workers();
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async move {
                if let Ok(listener) = TcpListener::from_std(std_listener) {
                    serve(listener, seen).await;
                }
            });
        })
        .map_err(spawn_err)?;
    Ok((addr, got))
}

/// Answer every delivery with 200 after reading it whole.
async fn serve(listener: TcpListener, got: Arc<Received>) {
    let seen = got;
    let handler = move |req: Request<RequestBody>| {
        let seen = seen.clone();
        async move {
            let n = req
                .into_body()
                .collect()
                .await
                .map_or(0, |c| c.to_bytes().len());
            seen.requests.fetch_add(1, Ordering::Relaxed);
            seen.bytes.fetch_add(n as u64, Ordering::Relaxed);
            Response::new(Full::new(Bytes::from_static(b"{}")))
        }
    };
    sluice_net::server::serve_with(listener, handler, pending::<()>(), Duration::ZERO).await;
}

/// The config lines that turn on every callback sluice has, all pointed at `receiver`
/// (appended to the bench's gateway config).
pub fn callbacks_config(receiver: &str, cache: bool) -> String {
    let cache = if cache {
        super::spawn::CACHE_SETTINGS
    } else {
        ""
    };
    format!(
        "litellm_settings:
{cache}  callbacks: [otel, webhook, langfuse, langsmith, s3]
callback_settings:
  otel: {{endpoint: 'http://{receiver}/v1/traces'}}
  webhook: {{url: 'http://{receiver}/hook'}}
  langfuse: {{host: 'http://{receiver}', public_key: pk-bench, secret_key: sk-bench}}
  langsmith: {{endpoint: 'http://{receiver}', api_key: ls-bench}}
  s3: {{s3_bucket_name: bench, s3_endpoint_url: 'http://{receiver}', s3_aws_access_key_id: AKIDBENCH, s3_aws_secret_access_key: bench-secret}}
"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_callbacks_config_turns_every_sink_on() {
        let mut yaml = super::super::spawn::gateway_config("http://127.0.0.1:1", None, 3, false);
        yaml.push_str(&callbacks_config("127.0.0.1:9", true));
        let loaded = sluice_config::load_str(&yaml, &std::collections::HashMap::new()).unwrap();
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
        assert_eq!(loaded.config.callbacks.sinks.len(), 5);
        assert!(loaded.config.callbacks.tracing());
        let cache = loaded
            .config
            .litellm
            .cache
            .expect("the cache workloads' cache is on");
        assert!(cache.default_off, "only requests that ask use it");
    }
}
