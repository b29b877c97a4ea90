//! Every configured tool server, and the one view of them a caller gets: tool names prefixed
//! by their server (`github-create_issue`), filtered by the server's tool lists and the
//! caller's permissions, and a prefixed name routed back to its server.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::value::RawValue;
use serde_json::Value;
use sluice_net::ClientRegistry;

use crate::access::Access;
use crate::settings::{McpSettings, TOOL_SEPARATOR};
use crate::upstream::{Reply, Server, UpstreamError};

/// How long to wait for a connection to an HTTP tool server.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Pages of one server's `*/list` followed for an aggregated list (a bound against a server
/// that never stops paging).
const MAX_PAGES: usize = 20;

/// Resource URIs remembered with the server that listed them (a bound: past it the memory
/// starts again, and the next read of an unknown URI lists again).
const MAX_OWNED_URIS: usize = 100_000;

/// How long a server's own tool list is trusted before a call naming a tool not in it lists
/// again (a server may add tools while it runs).
const TOOLS_FRESH: std::time::Duration = std::time::Duration::from_secs(60);

/// The tool servers, started from one config.
#[derive(Debug)]
pub struct Hub {
    /// By name, in name order.
    servers: Vec<Arc<Server>>,
    settings: McpSettings,
    /// Which server listed each resource URI, and the fixed start of each resource template
    /// (before its first `{`), so that a `resources/read` on the aggregate reaches the
    /// server that owns the URI (URIs pass unchanged: clients show and keep them as given).
    owners: Mutex<Owners>,
    /// Each server's own tool names as it last listed them, and when: a `tools/call` must name
    /// one of them exactly before any allow or deny list is asked (`listed_tool`).
    tools: Mutex<HashMap<String, (std::time::Instant, std::collections::HashSet<String>)>>,
}

#[derive(Debug, Default)]
struct Owners {
    uris: HashMap<String, usize>,
    templates: Vec<(String, usize)>,
}

impl Hub {
    /// Link every server (stdio servers start now, on the current runtime).
    pub fn start(settings: &McpSettings, clients: &ClientRegistry) -> Self {
        let client = clients.get(CONNECT_TIMEOUT);
        let mut servers: Vec<Arc<Server>> = settings
            .servers
            .iter()
            .map(|s| Arc::new(Server::start(s.clone(), client.clone())))
            .collect();
        servers.sort_by(|a, b| a.name().cmp(b.name()));
        Self {
            servers,
            settings: settings.clone(),
            owners: Mutex::default(),
            tools: Mutex::default(),
        }
    }

    /// Whether `tool` is one of the tools `server` itself lists, by exact name. A tool call is
    /// matched against this before the allow and deny lists: those lists name tools exactly,
    /// and a server that also answers to a variant of a denied name (another case, a prefix,
    /// an alias) would otherwise run it for a caller the list meant to refuse. A name not in
    /// the remembered list (or a list older than a minute) lists the server again once.
    pub async fn listed_tool(&self, server: &Server, tool: &str) -> Result<bool, ListError> {
        {
            let tools = lock(&self.tools);
            if let Some((at, names)) = tools.get(server.name()) {
                if names.contains(tool) {
                    return Ok(true);
                }
                if at.elapsed() < TOOLS_FRESH {
                    return Ok(false);
                }
            }
        }
        let listed = list(server, Listing::Tools, false, |_| true).await?;
        let names: std::collections::HashSet<String> = listed
            .iter()
            .filter_map(|t| t.get("name")?.as_str().map(str::to_owned))
            .collect();
        let known = names.contains(tool);
        lock(&self.tools).insert(server.name().to_owned(), (std::time::Instant::now(), names));
        Ok(known)
    }

    /// Remember that `server` listed resource `uri`.
    pub fn remember_uri(&self, server: &str, uri: &str) {
        let Some(i) = self.index(server) else { return };
        let mut owners = lock(&self.owners);
        if owners.uris.len() >= MAX_OWNED_URIS {
            owners.uris.clear();
        }
        owners.uris.entry(uri.to_owned()).or_insert(i);
    }

    /// Remember that `server` listed resource template `template` (RFC 6570).
    pub fn remember_template(&self, server: &str, template: &str) {
        let Some(i) = self.index(server) else { return };
        let start = template.split('{').next().unwrap_or_default();
        if start.is_empty() {
            return;
        }
        let mut owners = lock(&self.owners);
        if owners.templates.len() >= MAX_OWNED_URIS {
            owners.templates.clear();
        }
        if !owners.templates.iter().any(|(t, _)| t == start) {
            owners.templates.push((start.to_owned(), i));
        }
    }

    /// The server that listed `uri`, else the one whose template's fixed start is the
    /// longest that `uri` begins with.
    pub fn owner_of(&self, uri: &str) -> Option<&Arc<Server>> {
        let owners = lock(&self.owners);
        let i = owners.uris.get(uri).copied().or_else(|| {
            owners
                .templates
                .iter()
                .filter(|(start, _)| uri.starts_with(start.as_str()))
                .max_by_key(|(start, _)| start.len())
                .map(|(_, i)| *i)
        })?;
        self.servers.get(i)
    }

    fn index(&self, name: &str) -> Option<usize> {
        self.servers.binary_search_by(|s| s.name().cmp(name)).ok()
    }

    /// The settings it was started from (a reload that leaves them keeps the running hub).
    pub fn settings(&self) -> &McpSettings {
        &self.settings
    }

    /// A server by name.
    pub fn server(&self, name: &str) -> Option<&Arc<Server>> {
        self.servers
            .binary_search_by(|s| s.name().cmp(name))
            .ok()
            .map(|i| &self.servers[i])
    }

    /// Every server, in name order.
    pub fn servers(&self) -> &[Arc<Server>] {
        &self.servers
    }

    /// The server and its own tool name for an aggregated name (`github-create_issue`): the
    /// longest server name followed by the separator.
    pub fn route<'a>(&self, prefixed: &'a str) -> Option<(&Arc<Server>, &'a str)> {
        self.servers
            .iter()
            .filter_map(|s| {
                let rest = prefixed.strip_prefix(s.name())?;
                Some((s, rest.strip_prefix(TOOL_SEPARATOR)?))
            })
            .max_by_key(|(s, _)| s.name().len())
    }
}

/// What one `*/list` family lists, and the key of each entry's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listing {
    /// `tools/list` → `tools[].name`.
    Tools,
    /// `prompts/list` → `prompts[].name`.
    Prompts,
    /// `resources/list` → `resources[].name` (each with its `uri`).
    Resources,
    /// `resources/templates/list` → `resourceTemplates[].name` (each with its `uriTemplate`).
    ResourceTemplates,
}

impl Listing {
    /// The method.
    pub fn method(self) -> &'static str {
        match self {
            Self::Tools => "tools/list",
            Self::Prompts => "prompts/list",
            Self::Resources => "resources/list",
            Self::ResourceTemplates => "resources/templates/list",
        }
    }

    /// The result's array member.
    pub fn member(self) -> &'static str {
        match self {
            Self::Tools => "tools",
            Self::Prompts => "prompts",
            Self::Resources => "resources",
            Self::ResourceTemplates => "resourceTemplates",
        }
    }
}

/// Every entry `server` lists (all pages), each kept when `keep(its own name)`; with
/// `prefix`, names are rewritten `{server}-{name}`.
pub async fn list(
    server: &Server,
    listing: Listing,
    prefix: bool,
    keep: impl Fn(&str) -> bool,
) -> Result<Vec<Value>, ListError> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let params = cursor
            .take()
            .map(|c| serde_json::json!({ "cursor": c }).to_string())
            .map(RawValue::from_string)
            .transpose()
            .map_err(|e| ListError::Upstream(UpstreamError::Protocol(e.to_string())))?;
        let reply = server
            .request(server.next_id(), listing.method(), params.as_deref())
            .await
            .map_err(ListError::Upstream)?;
        let page = match reply {
            Reply::Result(r) => r,
            Reply::Error(e) => return Err(ListError::Refused(e)),
        };
        let mut page: serde_json::Map<String, Value> = serde_json::from_str(page.get())
            .map_err(|e| ListError::Upstream(UpstreamError::Protocol(e.to_string())))?;
        if let Some(Value::Array(items)) = page.remove(listing.member()) {
            for mut item in items {
                let Some(name) = item.get("name").and_then(Value::as_str) else {
                    continue;
                };
                if !keep(name) {
                    continue;
                }
                if prefix {
                    let full = format!("{}{TOOL_SEPARATOR}{name}", server.name());
                    item["name"] = Value::String(full);
                }
                out.push(item);
            }
        }
        match page.remove("nextCursor") {
            Some(Value::String(c)) => cursor = Some(c),
            _ => return Ok(out),
        }
    }
    Ok(out)
}

/// Why a server's listing is missing from an aggregate.
#[derive(Debug)]
pub enum ListError {
    /// The exchange failed.
    Upstream(UpstreamError),
    /// The server answered with a JSON-RPC error.
    Refused(Box<RawValue>),
}

/// Whether `access` (the key's) and `team` (its team's) both allow `tool` of `server`, and
/// the server's own lists serve it.
pub fn tool_allowed(server: &Server, tool: &str, access: &[&Access]) -> bool {
    server.settings.tools.allows(tool) && access.iter().all(|a| a.allows_tool(server.name(), tool))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::{ServerSettings, StdioServer, ToolFilter, Transport};
    use std::time::Duration;

    fn stdio(name: &str) -> ServerSettings {
        ServerSettings {
            name: name.into(),
            description: None,
            transport: Transport::Stdio(StdioServer {
                command: "true".into(),
                args: vec![],
                env: Default::default(),
            }),
            tools: ToolFilter::default(),
            timeout: Duration::from_secs(1),
            max_response_bytes: 1024,
            cost: Default::default(),
        }
    }

    #[tokio::test]
    async fn routes_by_the_longest_server_prefix() {
        let settings = McpSettings {
            servers: vec![stdio("gh"), stdio("gh-enterprise"), stdio("fs")],
        };
        let hub = Hub::start(&settings, &ClientRegistry::new(1));
        let (s, t) = hub.route("gh-enterprise-create_issue").unwrap();
        assert_eq!((s.name(), t), ("gh-enterprise", "create_issue"));
        let (s, t) = hub.route("gh-create-issue").unwrap();
        assert_eq!((s.name(), t), ("gh", "create-issue"));
        assert!(hub.route("slack-post").is_none());
        assert!(hub.route("fs").is_none());
        assert_eq!(hub.server("fs").unwrap().name(), "fs");
    }

    #[tokio::test]
    async fn a_resource_uri_routes_to_the_server_that_listed_it() {
        let settings = McpSettings {
            servers: vec![stdio("gh"), stdio("fs")],
        };
        let hub = Hub::start(&settings, &ClientRegistry::new(1));
        hub.remember_uri("fs", "file:///a");
        hub.remember_uri("gh", "file:///a");
        hub.remember_template("gh", "repo://{owner}/{name}");
        hub.remember_template("fs", "repo://local/{name}");
        hub.remember_uri("nobody", "x://y");
        assert_eq!(hub.owner_of("file:///a").unwrap().name(), "fs");
        assert_eq!(hub.owner_of("repo://me/x").unwrap().name(), "gh");
        assert_eq!(hub.owner_of("repo://local/x").unwrap().name(), "fs");
        assert!(hub.owner_of("file:///b").is_none());
        assert!(hub.owner_of("x://y").is_none());
    }
}
