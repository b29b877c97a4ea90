//! MCP tool calls as metrics (`sluice_mcp_*`, labelled by server, method, tool and status:
//! all bounded by the config and the servers' own tools, a name being a label only once the
//! server answered it with a result; never keys) and as one log
//! line each (`sluice::mcp` target, with the key and team). A tool call is not on the model
//! request path: its record is handled where it finishes, no queue in between.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use sluice_mcp::McpCall;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    server: String,
    method: &'static str,
    tool: String,
    status: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServerLabels {
    server: String,
    method: &'static str,
}

/// Tool calls: 1 ms to ~65 s.
fn call_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

/// The `sluice_mcp_*` families.
#[derive(Debug)]
pub struct McpMetrics {
    calls: Family<CallLabels, Counter>,
    duration: Family<ServerLabels, Histogram, fn() -> Histogram>,
}

impl McpMetrics {
    /// Register every family.
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self {
            calls: Family::default(),
            duration: Family::new_with_constructor(call_histogram as fn() -> Histogram),
        };
        registry.register(
            "sluice_mcp_calls",
            "MCP calls through the gateway, by server, method, tool and status (ok, tool_error, refused, failed)",
            m.calls.clone(),
        );
        registry.register(
            "sluice_mcp_call_duration_seconds",
            "Time an MCP call took, by server and method",
            m.duration.clone(),
        );
        m
    }

    /// Count one call.
    pub fn observe(&self, c: &McpCall) {
        // Only a name the server answered with a result is surely one of its tools: any
        // other (refused, unknown, failed) stays out of the labels, which stay bounded.
        let tool = if c.status.names_a_tool() {
            c.tool.clone().unwrap_or_default()
        } else {
            String::new()
        };
        self.calls
            .get_or_create(&CallLabels {
                server: c.server.to_string(),
                method: c.method,
                tool,
                status: c.status.label(),
            })
            .inc();
        self.duration
            .get_or_create(&ServerLabels {
                server: c.server.to_string(),
                method: c.method,
            })
            .observe(c.duration.as_secs_f64());
    }
}

/// The call's log line.
pub fn emit(c: &McpCall) {
    tracing::info!(
        target: "sluice::mcp",
        request_id = %c.request_id,
        key_hash = c.key_hash.as_deref().unwrap_or(""),
        key_alias = c.key_alias.as_deref().unwrap_or(""),
        team_id = c.team_id.as_deref().unwrap_or(""),
        server = %c.server,
        method = c.method,
        tool = c.tool.as_deref().unwrap_or(""),
        duration_ms = u64::try_from(c.duration.as_millis()).unwrap_or(u64::MAX),
        status = c.status.label(),
        error = c.error.as_deref().unwrap_or(""),
        "mcp call"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn calls_become_series() {
        let mut registry = Registry::default();
        let m = McpMetrics::register(&mut registry);
        let call = |status, tool: &str| McpCall {
            request_id: "r".into(),
            key_hash: Some("h".into()),
            key_alias: None,
            team_id: None,
            server: "gh".into(),
            method: "tools/call",
            tool: Some(tool.into()),
            duration: Duration::from_millis(12),
            status,
            error: None,
        };
        m.observe(&call(sluice_mcp::CallStatus::Ok, "create_issue"));
        m.observe(&call(sluice_mcp::CallStatus::Refused, "made_up_name"));
        m.observe(&call(sluice_mcp::CallStatus::RpcError, "made_up_too"));
        m.observe(&call(sluice_mcp::CallStatus::Failed, "made_up_three"));
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).unwrap();
        assert!(out.contains(
            r#"sluice_mcp_calls_total{server="gh",method="tools/call",tool="create_issue",status="ok"} 1"#
        ), "{out}");
        assert!(!out.contains("made_up"), "{out}");
        assert!(out.contains(
            r#"sluice_mcp_call_duration_seconds_count{server="gh",method="tools/call"} 4"#
        ));
        assert!(!out.contains("\"h\""), "no key in a label");
    }
}
