//! What the config validates `mcp_servers:` into. Every value here has been checked
//! (`sluice_config`'s `validate/mcp.rs`), so the gateway never meets a server without a way to
//! reach it, a stdio server with an empty command, or a credential header it cannot send.

use std::collections::BTreeMap;
use std::time::Duration;

use http::{HeaderName, HeaderValue};
use sluice_core::limits::Nanos;
use sluice_core::Secret;

/// How long one upstream exchange may take unless the server sets `timeout`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// The largest answer a tool server may send unless it sets `max_response_bytes` (8 MiB): a
/// bound, so a runaway server cannot fill the gateway's memory.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 8 << 20;

/// The separator between a server's name and a tool's in aggregated names
/// (`github-create_issue`), as LiteLLM spells it.
pub const TOOL_SEPARATOR: char = '-';

/// Every configured MCP server, in name order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct McpSettings {
    /// The servers; names are unique and contain no [`TOOL_SEPARATOR`].
    pub servers: Vec<ServerSettings>,
}

impl McpSettings {
    /// Whether any server is configured (else `/mcp` answers 404 and costs nothing).
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }
}

/// One `mcp_servers.<name>` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerSettings {
    /// Its key under `mcp_servers`: the prefix of its tools and the `{server}` of `/mcp/{server}`.
    pub name: String,
    /// `description`, shown in `initialize`'s instructions of `/mcp/{server}`.
    pub description: Option<String>,
    /// How sluice reaches it.
    pub transport: Transport,
    /// Which of its tools clients see and may call.
    pub tools: ToolFilter,
    /// The longest one exchange with it may take.
    pub timeout: Duration,
    /// The largest answer it may send.
    pub max_response_bytes: usize,
    /// What its tools cost per call (`mcp_info.mcp_server_cost_info`).
    pub cost: ToolCost,
}

/// LiteLLM's `mcp_info.mcp_server_cost_info`: a price per call of each tool, charged to the
/// caller's key, team and user budgets like a model's tokens.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolCost {
    /// `default_cost_per_query`: every tool without a price of its own.
    pub default: Option<Nanos>,
    /// `tool_name_to_cost_per_query`, by the server's own tool names.
    pub tools: BTreeMap<String, Nanos>,
}

impl ToolCost {
    /// What one call of `tool` costs; `None` when the server's tools are free.
    pub fn of(&self, tool: &str) -> Option<Nanos> {
        self.tools.get(tool).copied().or(self.default)
    }
}

/// How sluice reaches a tool server.
#[derive(Debug, Clone, PartialEq)]
pub enum Transport {
    /// Streamable HTTP (`transport: http`): JSON-RPC POSTed to `url`.
    Http(HttpServer),
    /// A child process sluice starts, speaking JSON-RPC lines on stdin/stdout.
    Stdio(StdioServer),
    /// MCP's older HTTP+SSE transport (`transport: sse`, revision 2024-11-05): an event stream
    /// opened with a GET to `url`, messages POSTed to the endpoint it names.
    Sse(HttpServer),
}

/// A tool server reached over HTTP (streamable HTTP, or the SSE transport).
#[derive(Debug, Clone, PartialEq)]
pub struct HttpServer {
    /// `url`: the server's MCP endpoint (for SSE, the event stream's).
    pub url: http::Uri,
    /// `static_headers`, sent with every request. Client headers never reach the server.
    pub headers: Vec<(HeaderName, SecretHeader)>,
    /// How sluice proves itself to the server (`auth_type`); `None`: it does not.
    pub credential: Option<Credential>,
}

/// sluice's credential at a tool server: one static header, or a token sluice obtains
/// itself; never both.
#[derive(Debug, Clone, PartialEq)]
pub enum Credential {
    /// `auth_type` + `auth_value`: the same header on every request.
    Header(HeaderName, SecretHeader),
    /// `auth_type: oauth2`: a bearer token from the OAuth 2 `client_credentials` grant.
    OAuth(Box<OAuthClient>),
}

/// An OAuth 2 client (RFC 6749 §4.4): sluice trades its id and secret at `token_url` for a
/// bearer token, as LiteLLM's `oauth2_flow: client_credentials` does.
#[derive(Debug, Clone, PartialEq)]
pub struct OAuthClient {
    /// `token_url`: the authorization server's token endpoint.
    pub token_url: http::Uri,
    /// `client_id`.
    pub client_id: String,
    /// `client_secret`.
    pub client_secret: Secret,
    /// `scopes`, sent space-separated as `scope` (left out when empty).
    pub scopes: Vec<String>,
    /// `token_endpoint_auth_method`: where the id and secret go.
    pub client_auth: ClientAuth,
}

/// How the client authenticates at the token endpoint (RFC 6749 §2.3.1; the names are
/// RFC 7591's `token_endpoint_auth_method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClientAuth {
    /// `client_secret_post`: `client_id` and `client_secret` in the form body (LiteLLM's way).
    #[default]
    Post,
    /// `client_secret_basic`: HTTP Basic with the form-encoded id and secret.
    Basic,
}

impl ClientAuth {
    /// Every `token_endpoint_auth_method` sluice accepts.
    pub const NAMES: [&'static str; 2] = ["client_secret_post", "client_secret_basic"];

    /// From its config name.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "client_secret_post" => Some(Self::Post),
            "client_secret_basic" => Some(Self::Basic),
            _ => None,
        }
    }
}

/// A header value that may be a credential: never printed.
#[derive(Clone, PartialEq)]
pub struct SecretHeader(pub HeaderValue);

impl std::fmt::Debug for SecretHeader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("\"*****\"")
    }
}

/// A stdio tool server.
#[derive(Debug, Clone, PartialEq)]
pub struct StdioServer {
    /// `command`: the program (looked up on sluice's own `PATH`).
    pub command: String,
    /// `args`.
    pub args: Vec<String>,
    /// `env`: the child's whole environment. Nothing of sluice's own environment is passed on.
    pub env: BTreeMap<String, Secret>,
}

/// `allowed_tools` / `disallowed_tools`: a tool is served when the allow list (if any) names
/// it and the deny list does not.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolFilter {
    /// `allowed_tools`; `None`: every tool.
    pub allowed: Option<Vec<String>>,
    /// `disallowed_tools`.
    pub disallowed: Vec<String>,
}

impl ToolFilter {
    /// Whether the server's own tool `tool` is served.
    pub fn allows(&self, tool: &str) -> bool {
        self.allowed
            .as_ref()
            .is_none_or(|a| a.iter().any(|t| t == tool))
            && !self.disallowed.iter().any(|t| t == tool)
    }
}

/// An `auth_type` sluice does not know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("unknown auth_type")]
pub struct UnknownAuthType;

/// LiteLLM's `auth_type`: which header carries `auth_value`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthType {
    /// `api_key`: `X-API-Key: <value>`.
    ApiKey,
    /// `bearer_token`: `Authorization: Bearer <value>`.
    BearerToken,
    /// `basic`: `Authorization: Basic <value>` (the value already `base64(user:password)`).
    Basic,
    /// `authorization`: `Authorization: <value>` as written.
    Authorization,
}

impl AuthType {
    /// Every `auth_type` sluice accepts (`none` sends nothing; `oauth2` is an
    /// [`OAuthClient`], read from its own keys).
    pub const NAMES: [&'static str; 6] = [
        "none",
        "api_key",
        "bearer_token",
        "basic",
        "authorization",
        "oauth2",
    ];

    /// From its config name; `Ok(None)` for `none`.
    pub fn parse(name: &str) -> Result<Option<Self>, UnknownAuthType> {
        Ok(Some(match name {
            "none" => return Ok(None),
            "api_key" => Self::ApiKey,
            "bearer_token" => Self::BearerToken,
            "basic" => Self::Basic,
            "authorization" => Self::Authorization,
            _ => return Err(UnknownAuthType),
        }))
    }

    /// The header this credential travels in, and its value.
    pub fn header(self, value: &str) -> (HeaderName, String) {
        match self {
            Self::ApiKey => (HeaderName::from_static("x-api-key"), value.to_owned()),
            Self::BearerToken => (http::header::AUTHORIZATION, format!("Bearer {value}")),
            Self::Basic => (http::header::AUTHORIZATION, format!("Basic {value}")),
            Self::Authorization => (http::header::AUTHORIZATION, value.to_owned()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_costs_its_own_price_else_the_default() {
        let mut c = ToolCost::default();
        assert_eq!(c.of("x"), None);
        c.default = Some(10);
        c.tools.insert("send".into(), 50);
        assert_eq!(c.of("send"), Some(50));
        assert_eq!(c.of("x"), Some(10));
    }

    #[test]
    fn filter_allows_by_both_lists() {
        let all = ToolFilter::default();
        assert!(all.allows("x"));
        let f = ToolFilter {
            allowed: Some(vec!["a".into(), "b".into()]),
            disallowed: vec!["b".into()],
        };
        assert!(f.allows("a"));
        assert!(!f.allows("b"));
        assert!(!f.allows("c"));
    }

    #[test]
    fn auth_headers() {
        let (n, v) = AuthType::BearerToken.header("t");
        assert_eq!((n.as_str(), v.as_str()), ("authorization", "Bearer t"));
        let (n, v) = AuthType::ApiKey.header("k");
        assert_eq!((n.as_str(), v.as_str()), ("x-api-key", "k"));
        assert_eq!(AuthType::parse("none"), Ok(None));
        assert!(AuthType::parse("oauth2").is_err());
        assert_eq!(
            ClientAuth::parse("client_secret_basic"),
            Some(ClientAuth::Basic)
        );
        assert_eq!(ClientAuth::parse("private_key_jwt"), None);
    }

    #[test]
    fn secret_header_is_not_printed() {
        let h = SecretHeader(HeaderValue::from_static("sk-secret"));
        assert!(!format!("{h:?}").contains("sk-secret"));
    }
}
