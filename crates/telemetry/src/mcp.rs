//! MCP tool calls as metrics (`sluice_mcp_*`, labelled by server, method, tool and status:
//! all bounded by the config and the servers' own tools, a name being a label only once the
//! server answered it with a result; never keys). A call's log line, spend log, callbacks and
//! span come from its `RequestRecord` like a request's (see `Recorder::record_tool`).

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use sluice_core::record::ToolCall;

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
    cost: Family<ServerLabels, Counter<f64, std::sync::atomic::AtomicU64>>,
}

impl McpMetrics {
    /// Register every family.
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self {
            calls: Family::default(),
            duration: Family::new_with_constructor(call_histogram as fn() -> Histogram),
            cost: Family::default(),
        };
        registry.register(
            "sluice_mcp_calls",
            "MCP calls through the gateway, by server, method, tool and status (ok, tool_error, rpc_error, refused, failed, cancelled)",
            m.calls.clone(),
        );
        registry.register(
            "sluice_mcp_call_duration_seconds",
            "Time an MCP call took, by server and method",
            m.duration.clone(),
        );
        registry.register(
            "sluice_mcp_spend_usd",
            "What priced MCP tool calls cost (mcp_info.mcp_server_cost_info), by server and method",
            m.cost.clone(),
        );
        m
    }

    /// Count one call that took `duration` and cost `cost` dollars.
    pub fn observe(&self, c: &ToolCall, duration: Duration, cost: Option<f64>) {
        // Only a name the server answered with a result is surely one of its tools: any
        // other (refused, unknown, failed) stays out of the labels, which stay bounded.
        let tool = if c.status.names_a_tool() {
            c.name.clone().unwrap_or_default()
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
        let labels = ServerLabels {
            server: c.server.to_string(),
            method: c.method,
        };
        self.duration
            .get_or_create(&labels)
            .observe(duration.as_secs_f64());
        if let Some(usd) = cost.filter(|c| *c > 0.0) {
            self.cost.get_or_create(&labels).inc_by(usd);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::record::CallStatus;

    #[test]
    fn calls_become_series() {
        let mut registry = Registry::default();
        let m = McpMetrics::register(&mut registry);
        let call = |status, tool: &str| ToolCall {
            server: "gh".into(),
            method: "tools/call",
            name: Some(tool.into()),
            status,
            error: None,
        };
        let d = Duration::from_millis(12);
        m.observe(&call(CallStatus::Ok, "create_issue"), d, Some(0.25));
        m.observe(&call(CallStatus::Refused, "made_up_name"), d, None);
        m.observe(&call(CallStatus::RpcError, "made_up_too"), d, None);
        m.observe(&call(CallStatus::Failed, "made_up_three"), d, None);
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).unwrap();
        assert!(out.contains(
            r#"sluice_mcp_calls_total{server="gh",method="tools/call",tool="create_issue",status="ok"} 1"#
        ), "{out}");
        assert!(!out.contains("made_up"), "{out}");
        assert!(out.contains(
            r#"sluice_mcp_call_duration_seconds_count{server="gh",method="tools/call"} 4"#
        ));
        assert!(
            out.contains(r#"sluice_mcp_spend_usd_total{server="gh",method="tools/call"} 0.25"#),
            "{out}"
        );
    }
}
