//! Which MCP servers and tools a key or team may use, as LiteLLM's `object_permission` says:
//! `mcp_servers` (server names) and `mcp_tool_permissions` (server → its tools). sluice's keys
//! and teams keep it in their `metadata.object_permission` (the store has no column of its
//! own for it yet). No entry: every server, every tool, as a key without `models` may call
//! every model.

use serde_json::{Map, Value};

/// A list of names.
type Names = Box<[Box<str>]>;

/// One holder's MCP permissions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Access {
    /// `mcp_servers`; `None`: every server.
    servers: Option<Names>,
    /// `mcp_tool_permissions`: for a server named here, only these of its tools.
    tools: Box<[(Box<str>, Names)]>,
}

impl Access {
    /// Every server and tool.
    pub fn all() -> Self {
        Self::default()
    }

    /// From a key's or team's `metadata` (`object_permission.mcp_servers`,
    /// `object_permission.mcp_tool_permissions`); values of the wrong shape are ignored
    /// (the admin API stores metadata as given).
    pub fn from_metadata(metadata: &Map<String, Value>) -> Self {
        let Some(Value::Object(op)) = metadata.get("object_permission") else {
            return Self::all();
        };
        let names = |v: &Value| -> Option<Names> {
            v.as_array()
                .map(|a| a.iter().filter_map(Value::as_str).map(Into::into).collect())
        };
        let servers = op.get("mcp_servers").and_then(names);
        let tools = match op.get("mcp_tool_permissions") {
            Some(Value::Object(m)) => m
                .iter()
                .filter_map(|(s, t)| Some((s.as_str().into(), names(t)?)))
                .collect(),
            _ => Box::default(),
        };
        Self { servers, tools }
    }

    /// Whether it names any rule (else it allows everything).
    pub fn is_open(&self) -> bool {
        self.servers.is_none() && self.tools.is_empty()
    }

    /// Whether `server` may be used.
    pub fn allows_server(&self, server: &str) -> bool {
        self.servers
            .as_ref()
            .is_none_or(|s| s.iter().any(|n| &**n == server))
    }

    /// Whether `tool` of `server` may be listed and called.
    pub fn allows_tool(&self, server: &str, tool: &str) -> bool {
        self.allows_server(server)
            && self
                .tools
                .iter()
                .find(|(s, _)| &**s == server)
                .is_none_or(|(_, t)| t.iter().any(|n| &**n == tool))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn open_without_object_permission() {
        let a = Access::from_metadata(&meta(serde_json::json!({"owner": "x"})));
        assert!(a.is_open());
        assert!(a.allows_tool("any", "thing"));
    }

    #[test]
    fn servers_and_tools_narrow() {
        let a = Access::from_metadata(&meta(serde_json::json!({
            "object_permission": {
                "mcp_servers": ["github", "fs"],
                "mcp_tool_permissions": {"github": ["create_issue"]}
            }
        })));
        assert!(a.allows_server("fs"));
        assert!(!a.allows_server("slack"));
        assert!(a.allows_tool("fs", "read"));
        assert!(a.allows_tool("github", "create_issue"));
        assert!(!a.allows_tool("github", "delete_repo"));
        assert!(!a.allows_tool("slack", "post"));
    }

    #[test]
    fn an_empty_server_list_allows_none() {
        let a = Access::from_metadata(&meta(
            serde_json::json!({"object_permission": {"mcp_servers": []}}),
        ));
        assert!(!a.allows_server("github"));
    }
}
