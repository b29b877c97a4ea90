//! The pooled upstream HTTP client: keep-alive connections per upstream authority, HTTP/2 when
//! the upstream offers it over TLS (ALPN), rustls with the platform's root certificates.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};

use super::body::SegmentsBody;

/// A pooled client. Cloning shares the pool.
pub type HttpClient = Client<HttpsConnector<HttpConnector>, SegmentsBody>;

/// Hands out clients, one pool per connect timeout, reused across config reloads so that warm
/// connections survive a reload.
#[derive(Default)]
pub struct ClientRegistry {
    clients: Mutex<HashMap<Duration, HttpClient>>,
}

impl std::fmt::Debug for ClientRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClientRegistry")
    }
}

impl ClientRegistry {
    /// The client for this connect timeout (built on first use; config-load time only).
    pub fn get(&self, connect_timeout: Duration) -> HttpClient {
        let mut map = match self.clients.lock() {
            Ok(m) => m,
            Err(poisoned) => poisoned.into_inner(),
        };
        map.entry(connect_timeout)
            .or_insert_with(|| build(connect_timeout))
            .clone()
    }
}

/// An HTTP/2-only client (prior knowledge on `http://`), for gRPC exports.
pub fn h2_only(connect_timeout: Duration) -> HttpClient {
    builder().http2_only(true).build(connector(connect_timeout))
}

fn build(connect_timeout: Duration) -> HttpClient {
    builder()
        .pool_max_idle_per_host(1024)
        .http1_max_buf_size(crate::server::MAX_CONN_BUF)
        .build(connector(connect_timeout))
}

fn builder() -> hyper_util::client::legacy::Builder {
    let mut b = Client::builder(TokioExecutor::new());
    b.pool_idle_timeout(Duration::from_secs(90))
        .pool_timer(TokioTimer::new())
        .timer(TokioTimer::new());
    b
}

fn connector(connect_timeout: Duration) -> HttpsConnector<HttpConnector> {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(Some(connect_timeout));
    http.set_keepalive(Some(Duration::from_secs(60)));
    let builder = match HttpsConnectorBuilder::new().with_native_roots() {
        Ok(b) => b,
        Err(e) => {
            tracing::warn!(error = %e, "no platform root certificates; using the bundled webpki roots");
            HttpsConnectorBuilder::new().with_webpki_roots()
        }
    };
    builder
        .https_or_http()
        .enable_http1()
        .enable_http2()
        .wrap_connector(http)
}
