//! The tool servers behind the gateway, as sluice's client of each: one session per server,
//! shared by every caller (sluice is the MCP client upstream; callers never see the
//! server's session or credentials). A request goes out with sluice's own id and comes back
//! matched to it; its time and answer size are bounded by the server's settings.

mod http;
mod legacy;
pub mod notes;
mod oauth;
mod sse;
mod stdio;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::value::RawValue;
use sluice_net::client::UpstreamClient;

use crate::jsonrpc;
use crate::settings::{ServerSettings, Transport};
pub use notes::Notes;

/// The protocol revision sluice asks tool servers for (the last with the `initialize`
/// handshake; servers answer with the one they speak).
pub const PROTOCOL_VERSION: &str = "2025-11-25";

/// Why an exchange with a tool server failed (never carries a credential or a URL).
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum UpstreamError {
    /// It could not be reached, or its process is not running.
    #[error("the tool server is unavailable: {0}")]
    Unavailable(String),
    /// It took longer than its `timeout`.
    #[error("the tool server did not answer within {0:?}")]
    Timeout(Duration),
    /// Its answer was larger than its `max_response_bytes`.
    #[error("the tool server's answer exceeded {0} bytes")]
    TooLarge(usize),
    /// It answered with an HTTP error status.
    #[error("the tool server answered HTTP {0}")]
    Status(u16),
    /// Its answer was not the JSON-RPC response expected.
    #[error("the tool server's answer was not valid MCP: {0}")]
    Protocol(String),
}

impl UpstreamError {
    /// A short, bounded label for metrics and records.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Unavailable(_) => "unavailable",
            Self::Timeout(_) => "timeout",
            Self::TooLarge(_) => "too_large",
            Self::Status(_) => "status",
            Self::Protocol(_) => "protocol",
        }
    }
}

/// A tool server's answer to one request: its `result`, or its JSON-RPC `error` object, raw.
#[derive(Debug)]
pub enum Reply {
    /// `result`.
    Result(Box<RawValue>),
    /// `error` (passed to the client as the server wrote it).
    Error(Box<RawValue>),
}

impl Reply {
    /// From a parsed response message.
    fn of(m: &jsonrpc::Message<'_>) -> Result<Self, UpstreamError> {
        match (m.result, m.error) {
            (Some(r), _) => Ok(Self::Result(r.to_owned())),
            (None, Some(e)) => Ok(Self::Error(e.to_owned())),
            (None, None) => Err(UpstreamError::Protocol(
                "a response without result or error".into(),
            )),
        }
    }
}

/// One configured tool server and sluice's link to it.
#[derive(Debug)]
pub struct Server {
    /// Its settings.
    pub settings: ServerSettings,
    link: Link,
    next_id: AtomicU64,
}

#[derive(Debug)]
enum Link {
    Http(Box<http::HttpLink>),
    Stdio(stdio::StdioLink),
    Sse(Box<legacy::LegacyLink>),
}

impl Server {
    /// Link to a server: an HTTP or SSE server is contacted on first use; a stdio server's process
    /// is started now by a supervisor task on the current runtime, restarted with backoff when
    /// it exits, and stopped when this `Server` is dropped.
    pub fn start(settings: ServerSettings, client: UpstreamClient) -> Self {
        let link = match &settings.transport {
            Transport::Http(h) => Link::Http(Box::new(http::HttpLink::new(
                h,
                client,
                settings.max_response_bytes,
            ))),
            Transport::Sse(h) => Link::Sse(Box::new(legacy::LegacyLink::new(
                &settings.name,
                h,
                client,
                settings.max_response_bytes,
                settings.timeout,
            ))),
            Transport::Stdio(s) => Link::Stdio(stdio::StdioLink::start(
                &settings.name,
                s.clone(),
                settings.max_response_bytes,
                settings.timeout,
            )),
        };
        Self {
            settings,
            link,
            next_id: AtomicU64::new(1),
        }
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.settings.name
    }

    /// The id sluice's next request to this server carries.
    pub fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Send `method` with `params` as request `id` (from [`Server::next_id`]) and wait for
    /// its answer, within the server's `timeout`.
    pub async fn request(
        &self,
        id: u64,
        method: &str,
        params: Option<&RawValue>,
    ) -> Result<Reply, UpstreamError> {
        self.request_noting(id, method, params, None).await
    }

    /// [`Server::request`], handing the server's notifications about it to `notes` as they
    /// arrive: its progress (when `params` name `id` as the progress token) and its log
    /// messages (on an HTTP answer stream; a stdio server's are not tied to a request).
    pub async fn request_noting(
        &self,
        id: u64,
        method: &str,
        params: Option<&RawValue>,
        notes: Option<&Notes>,
    ) -> Result<Reply, UpstreamError> {
        let body = jsonrpc::request(id, method, params.map(RawValue::get));
        let timeout = self.settings.timeout;
        let call = async {
            match &self.link {
                Link::Http(h) => h.request(id, body, notes).await,
                Link::Stdio(s) => s.request(id, body, notes).await,
                Link::Sse(l) => l.request(id, body).await,
            }
        };
        tokio::time::timeout(timeout, call)
            .await
            .map_err(|_| UpstreamError::Timeout(timeout))?
    }

    /// Tell the server that request `id` is no longer wanted (`notifications/cancelled`);
    /// best effort, within the server's `timeout`.
    pub async fn cancel(&self, id: u64, reason: &str) {
        let params = serde_json::json!({ "requestId": id, "reason": reason }).to_string();
        let body = jsonrpc::notification("notifications/cancelled", Some(&params));
        let send = async {
            match &self.link {
                Link::Http(h) => h.notify(body).await,
                Link::Stdio(s) => s.notify(body).await,
                Link::Sse(l) => l.notify(body).await,
            }
        };
        if let Ok(Err(e)) = tokio::time::timeout(self.settings.timeout, send).await {
            tracing::debug!(server = %self.settings.name, error = %e, "cancellation not delivered");
        }
    }
}

/// The `initialize` request sluice sends as a client.
fn initialize_params() -> String {
    serde_json::json!({
        "protocolVersion": PROTOCOL_VERSION,
        "capabilities": {},
        "clientInfo": { "name": "sluice", "version": env!("CARGO_PKG_VERSION") },
    })
    .to_string()
}

/// The protocol version an `initialize` result names.
fn negotiated_version(result: &RawValue) -> Result<String, UpstreamError> {
    #[derive(serde::Deserialize)]
    struct Init {
        #[serde(rename = "protocolVersion")]
        protocol_version: String,
    }
    serde_json::from_str::<Init>(result.get())
        .map(|i| i.protocol_version)
        .map_err(|_| UpstreamError::Protocol("initialize result without protocolVersion".into()))
}
