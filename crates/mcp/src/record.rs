//! One record per MCP exchange that reached (or was refused before) a tool server: what the
//! recorder logs and counts in `sluice_mcp_*`. Labels stay bounded by the config (server,
//! tool, status); keys and teams appear in the log line only.

use std::sync::Arc;
use std::time::Duration;

/// How an exchange ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallStatus {
    /// The server answered with a result.
    Ok,
    /// The tool ran and reported a failure (a result marked `isError`).
    ToolError,
    /// The server answered with a JSON-RPC error (an unknown tool, bad arguments, ...).
    RpcError,
    /// The caller may not use this server or tool: refused before reaching it.
    Refused,
    /// The server could not be reached, timed out, or answered nonsense.
    Failed,
    /// The client cancelled it (or left) before the answer; the server was told.
    Cancelled,
}

impl CallStatus {
    /// Whether the server answered with a result, so the name the call used is one of its
    /// tools: only then is the name a metric label (else a client could grow the series).
    pub fn names_a_tool(self) -> bool {
        matches!(self, Self::Ok | Self::ToolError)
    }

    /// Its label.
    pub fn label(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::ToolError => "tool_error",
            Self::RpcError => "rpc_error",
            Self::Refused => "refused",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }
}

/// A finished MCP call.
#[derive(Debug, Clone)]
pub struct McpCall {
    /// The request id sluice gave the HTTP request that carried it.
    pub request_id: Arc<str>,
    /// The caller's key hash, when it used a virtual key.
    pub key_hash: Option<Arc<str>>,
    /// The key's alias.
    pub key_alias: Option<Arc<str>>,
    /// The key's team.
    pub team_id: Option<Arc<str>>,
    /// The server's name (a configured one, or what the caller named when refused).
    pub server: Arc<str>,
    /// The MCP method (`tools/call`, `resources/read`, ...).
    pub method: &'static str,
    /// The tool (or resource, or prompt) the call named, as the server knows it.
    pub tool: Option<String>,
    /// How long it took.
    pub duration: Duration,
    /// How it ended.
    pub status: CallStatus,
    /// Why it failed or was refused (never a credential).
    pub error: Option<String>,
}
