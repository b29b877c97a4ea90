//! `mcp_servers:` → the MCP gateway's settings. Each server is reachable one way (a URL over
//! streamable HTTP or the older SSE transport, or a command sluice starts), sends only
//! credentials it can put in a header, and gets a bounded time and answer size; every bad
//! value is a problem at its path, and credentials never appear in one.

use std::collections::BTreeMap;

use http::{HeaderName, HeaderValue};
use sluice_core::limits::nanos;
use sluice_core::settings::read::{number, seconds, text, whole};
use sluice_core::settings::{did_you_mean, Problems, Scalar};
use sluice_core::Secret;
use sluice_mcp::settings::{
    AuthType, ClientAuth, Credential, HttpServer, McpSettings, OAuthClient, SecretHeader,
    ServerSettings, StdioServer, ToolCost, ToolFilter, Transport, DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_TIMEOUT,
};

use crate::raw::{OneOrMany, RawMcpInfo, RawMcpServer};

/// Transports sluice serves, with LiteLLM's spellings of streamable HTTP.
const TRANSPORTS: [&str; 5] = ["http", "streamable_http", "streamable-http", "stdio", "sse"];

/// The server name `/mcp/sse` would shadow.
const RESERVED_NAME: &str = "sse";

/// Headers sluice sets itself on every upstream request: a `static_headers` entry may not
/// replace them.
const RESERVED: [&str; 6] = [
    "accept",
    "content-type",
    "content-length",
    "host",
    "mcp-session-id",
    "mcp-protocol-version",
];

/// Validate every `mcp_servers` entry.
pub(super) fn mcp_servers(
    raw: Option<BTreeMap<String, RawMcpServer>>,
    p: &mut Problems,
) -> McpSettings {
    let servers = raw
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(name, s)| server(name, s, p))
        .collect();
    McpSettings { servers }
}

fn server(name: String, mut raw: RawMcpServer, p: &mut Problems) -> Option<ServerSettings> {
    let at = format!("mcp_servers.{name}");
    let good_name = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    // `/mcp/sse` is the aggregated SSE stream (as LiteLLM serves it), not a server's route.
    if name == RESERVED_NAME {
        p.error(
            &at,
            "the server name \"sse\" is reserved: /mcp/sse is the gateway's SSE transport (rename the server)",
        );
    }
    if !good_name {
        p.error(
            &at,
            "a server name is 1 to 64 of A-Z, a-z, 0-9, '_', '-' and '.' (it prefixes its tools' names and names its route /mcp/{server})",
        );
    }
    let transport = transport(
        &at,
        raw.transport.take(),
        raw.url.is_some(),
        raw.command.is_some(),
        p,
    );
    let transport = match transport? {
        kind @ (Kind::Http | Kind::Sse) => {
            for (key, set) in [
                ("command", raw.command.is_some()),
                ("args", raw.args.is_some()),
                ("env", raw.env.is_some()),
            ] {
                if set {
                    p.warn(format!("{at}.{key}"), "only stdio servers use it; ignored");
                }
            }
            let url = url(&at, raw.url.take(), p);
            let credential = credential(&at, &mut raw, p);
            if matches!(kind, Kind::Sse) && matches!(credential, Some(Credential::OAuth(_))) {
                p.error(
                    format!("{at}.auth_type"),
                    "oauth2 is served for streamable HTTP servers (transport: http); an SSE server takes a static credential",
                );
            }
            let taken = credential.as_ref().map(credential_header);
            let headers = static_headers(&at, raw.static_headers.take(), taken.as_ref(), p);
            let server = HttpServer {
                url: url?,
                headers,
                credential,
            };
            match kind {
                Kind::Sse => Transport::Sse(server),
                _ => Transport::Http(server),
            }
        }
        Kind::Stdio => {
            for (key, set) in [
                ("url", raw.url.is_some()),
                ("auth_type", raw.auth_type.is_some()),
                ("auth_value", raw.auth_value.is_some()),
                ("static_headers", raw.static_headers.is_some()),
                ("client_id", raw.client_id.is_some()),
                ("client_secret", raw.client_secret.is_some()),
                ("token_url", raw.token_url.is_some()),
                ("scopes", raw.scopes.is_some()),
            ] {
                if set {
                    p.warn(
                        format!("{at}.{key}"),
                        "a stdio server is started by sluice, not called over HTTP; ignored (give it credentials in `env`)",
                    );
                }
            }
            let Some(command) = text(raw.command) else {
                p.error(
                    format!("{at}.command"),
                    "a stdio server needs the command that starts it",
                );
                return None;
            };
            let env = raw
                .env
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, Secret::new(v.text())))
                .collect();
            Transport::Stdio(StdioServer {
                command,
                args: list(raw.args),
                env,
            })
        }
    };
    let timeout = seconds(&format!("{at}.timeout"), raw.timeout, p).unwrap_or(DEFAULT_TIMEOUT);
    let max_response_bytes = match whole::<usize>(
        &format!("{at}.max_response_bytes"),
        raw.max_response_bytes,
        p,
    ) {
        Some(0) => {
            p.error(format!("{at}.max_response_bytes"), "must be > 0");
            DEFAULT_MAX_RESPONSE_BYTES
        }
        Some(n) => n,
        None => DEFAULT_MAX_RESPONSE_BYTES,
    };
    (good_name && name != RESERVED_NAME).then_some(ServerSettings {
        name,
        description: text(raw.description),
        transport,
        tools: ToolFilter {
            allowed: raw.allowed_tools.map(|t| t.texts()),
            disallowed: list(raw.disallowed_tools),
        },
        timeout,
        max_response_bytes,
        cost: cost(&at, raw.mcp_info, p),
    })
}

/// `mcp_info.mcp_server_cost_info`: USD per call, each a number ≥ 0.
fn cost(at: &str, raw: Option<RawMcpInfo>, p: &mut Problems) -> ToolCost {
    let Some(c) = raw.and_then(|i| i.mcp_server_cost_info) else {
        return ToolCost::default();
    };
    let at = format!("{at}.mcp_info.mcp_server_cost_info");
    let price = |path: String, v, p: &mut Problems| number(&path, Some(v), false, p).map(nanos);
    ToolCost {
        default: c
            .default_cost_per_query
            .and_then(|v| price(format!("{at}.default_cost_per_query"), v, p)),
        tools: c
            .tool_name_to_cost_per_query
            .unwrap_or_default()
            .into_iter()
            .filter_map(|(tool, v)| {
                let path = format!("{at}.tool_name_to_cost_per_query.{tool}");
                price(path, v, p).map(|n| (tool, n))
            })
            .collect(),
    }
}

enum Kind {
    Http,
    Sse,
    Stdio,
}

/// `transport`, or what the entry implies: a `command` is stdio, a `url` is HTTP.
fn transport(
    at: &str,
    v: Option<Scalar>,
    has_url: bool,
    has_command: bool,
    p: &mut Problems,
) -> Option<Kind> {
    let path = format!("{at}.transport");
    match text(v).as_deref().map(str::trim) {
        None if has_command => Some(Kind::Stdio),
        None if has_url => Some(Kind::Http),
        None => {
            p.error(
                at,
                "a server needs a `url` (streamable HTTP) or a `command` (stdio)",
            );
            None
        }
        Some("http" | "streamable_http" | "streamable-http") => Some(Kind::Http),
        Some("stdio") => Some(Kind::Stdio),
        Some("sse") => Some(Kind::Sse),
        Some(t) => {
            p.error(
                path,
                format!(
                    "unknown transport \"{t}\"{}",
                    did_you_mean(t, TRANSPORTS.iter().copied())
                ),
            );
            None
        }
    }
}

fn url(at: &str, v: Option<Scalar>, p: &mut Problems) -> Option<http::Uri> {
    let path = format!("{at}.url");
    let Some(raw) = text(v) else {
        p.error(path, "an HTTP or SSE server needs its `url`");
        return None;
    };
    match raw.trim().parse::<http::Uri>() {
        Ok(u) if matches!(u.scheme_str(), Some("http" | "https")) && u.authority().is_some() => {
            Some(u)
        }
        _ => {
            p.error(path, "expected an http:// or https:// URL");
            None
        }
    }
}

/// The header a credential travels in.
fn credential_header(c: &Credential) -> HeaderName {
    match c {
        Credential::Header(name, _) => name.clone(),
        Credential::OAuth(_) => http::header::AUTHORIZATION,
    }
}

/// The credential: a header from `auth_type` and `auth_value`, or an OAuth client
/// (`auth_type: oauth2` with its own keys).
fn credential(at: &str, raw: &mut RawMcpServer, p: &mut Problems) -> Option<Credential> {
    let value = text(raw.auth_value.take());
    let kind = text(raw.auth_type.take());
    let kind = match kind.as_deref().map(str::trim) {
        None => None,
        Some("oauth2") => {
            if value.is_some() {
                p.error(
                    format!("{at}.auth_value"),
                    "auth_type oauth2 obtains its token itself (client_id, client_secret, token_url); remove auth_value",
                );
            }
            return oauth(at, raw, p).map(|c| Credential::OAuth(Box::new(c)));
        }
        Some(k) => match AuthType::parse(k) {
            Ok(k) => k,
            Err(_) => {
                p.error(
                    format!("{at}.auth_type"),
                    format!(
                        "unknown auth_type \"{k}\"{}",
                        did_you_mean(k, AuthType::NAMES.iter().copied())
                    ),
                );
                return None;
            }
        },
    };
    for (key, set) in [
        ("oauth2_flow", raw.oauth2_flow.is_some()),
        ("client_id", raw.client_id.is_some()),
        ("client_secret", raw.client_secret.is_some()),
        ("token_url", raw.token_url.is_some()),
        ("scopes", raw.scopes.is_some()),
        (
            "token_endpoint_auth_method",
            raw.token_endpoint_auth_method.is_some(),
        ),
    ] {
        if set {
            p.warn(
                format!("{at}.{key}"),
                "only auth_type: oauth2 uses it; ignored",
            );
        }
    }
    match (kind, value) {
        (None, None) => None,
        (None, Some(_)) => {
            p.error(
                format!("{at}.auth_value"),
                "set auth_type (api_key, bearer_token, basic or authorization) to say which header carries it",
            );
            None
        }
        (Some(_), None) => {
            p.error(
                format!("{at}.auth_value"),
                "this auth_type needs the credential in auth_value (e.g. os.environ/GITHUB_TOKEN)",
            );
            None
        }
        (Some(k), Some(v)) => {
            let (name, value) = k.header(v.trim());
            match HeaderValue::from_str(&value) {
                Ok(mut hv) => {
                    hv.set_sensitive(true);
                    Some(Credential::Header(name, SecretHeader(hv)))
                }
                Err(_) => {
                    p.error(
                        format!("{at}.auth_value"),
                        "not a valid HTTP header value (control characters or non-ASCII)",
                    );
                    None
                }
            }
        }
    }
}

/// `auth_type: oauth2`: the `client_credentials` client, every missing or bad key named.
fn oauth(at: &str, raw: &mut RawMcpServer, p: &mut Problems) -> Option<OAuthClient> {
    let mut ok = true;
    match text(raw.oauth2_flow.take()).as_deref().map(str::trim) {
        None | Some("client_credentials") => {}
        Some("authorization_code") => {
            ok = false;
            p.error(
                format!("{at}.oauth2_flow"),
                "interactive OAuth (authorization_code, a user signing in) is not available in sluice; a tool server's OAuth client uses client_credentials",
            );
        }
        Some(f) => {
            ok = false;
            p.error(
                format!("{at}.oauth2_flow"),
                format!(
                    "unknown oauth2_flow \"{f}\"{}",
                    did_you_mean(f, ["client_credentials", "authorization_code"].into_iter())
                ),
            );
        }
    }
    let token_url = match text(raw.token_url.take()) {
        None => {
            p.error(
                format!("{at}.token_url"),
                "auth_type oauth2 needs the authorization server's token endpoint in token_url",
            );
            None
        }
        Some(u) => match u.trim().parse::<http::Uri>() {
            Ok(u)
                if matches!(u.scheme_str(), Some("http" | "https")) && u.authority().is_some() =>
            {
                Some(u)
            }
            _ => {
                p.error(
                    format!("{at}.token_url"),
                    "expected an http:// or https:// URL",
                );
                None
            }
        },
    };
    let client_id = text(raw.client_id.take()).map(|s| s.trim().to_owned());
    if client_id.is_none() {
        p.error(
            format!("{at}.client_id"),
            "auth_type oauth2 needs the OAuth client's id in client_id",
        );
    }
    let client_secret = text(raw.client_secret.take()).map(|s| Secret::new(s.trim()));
    if client_secret.is_none() {
        p.error(
            format!("{at}.client_secret"),
            "auth_type oauth2 needs the OAuth client's secret in client_secret (e.g. os.environ/MCP_CLIENT_SECRET)",
        );
    }
    let client_auth = match text(raw.token_endpoint_auth_method.take()) {
        None => ClientAuth::default(),
        Some(m) => match ClientAuth::parse(m.trim()) {
            Some(a) => a,
            None => {
                ok = false;
                p.error(
                    format!("{at}.token_endpoint_auth_method"),
                    format!(
                        "unknown token_endpoint_auth_method \"{}\": sluice sends the client's secret as {}",
                        m.trim(),
                        ClientAuth::NAMES.join(" (the default) or ")
                    ),
                );
                ClientAuth::default()
            }
        },
    };
    let scopes = raw
        .scopes
        .take()
        .map(|s| s.texts())
        .unwrap_or_default()
        .iter()
        .flat_map(|s| s.split_whitespace())
        .map(str::to_owned)
        .collect();
    match (ok, token_url, client_id, client_secret) {
        (true, Some(token_url), Some(client_id), Some(client_secret)) => Some(OAuthClient {
            token_url,
            client_id,
            client_secret,
            scopes,
            client_auth,
        }),
        _ => None,
    }
}

/// `static_headers`; none may be one sluice sets itself, nor the one the credential (`taken`)
/// travels in.
fn static_headers(
    at: &str,
    raw: Option<BTreeMap<String, Scalar>>,
    taken: Option<&HeaderName>,
    p: &mut Problems,
) -> Vec<(HeaderName, SecretHeader)> {
    let mut out = Vec::new();
    for (k, v) in raw.unwrap_or_default() {
        let path = format!("{at}.static_headers.{k}");
        let Ok(name) = HeaderName::from_bytes(k.trim().as_bytes()) else {
            p.error(path, "not a valid HTTP header name");
            continue;
        };
        if RESERVED.contains(&name.as_str()) {
            p.error(path, "sluice sets this header itself");
            continue;
        }
        if taken == Some(&name) {
            p.error(
                path,
                "the credential (auth_type) sets this header; give it in one place",
            );
            continue;
        }
        match HeaderValue::from_str(v.text().trim()) {
            Ok(mut hv) => {
                hv.set_sensitive(true);
                out.push((name, SecretHeader(hv)));
            }
            Err(_) => p.error(path, "not a valid HTTP header value"),
        }
    }
    out
}

fn list(v: Option<OneOrMany>) -> Vec<String> {
    v.map(|v| v.texts()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use crate::{load_str, ConfigError};
    use sluice_mcp::settings::{ClientAuth, Credential, Transport};
    use std::collections::HashMap;

    fn env() -> HashMap<String, String> {
        HashMap::from([
            ("GH_TOKEN".to_owned(), "ghp-secret".to_owned()),
            ("MCP_SECRET".to_owned(), "cs-secret".to_owned()),
        ])
    }

    fn load(yaml: &str) -> Result<crate::Loaded, ConfigError> {
        load_str(yaml, &env())
    }

    fn errors(yaml: &str) -> Vec<(String, String)> {
        match load(yaml) {
            Err(ConfigError::Invalid(v)) => v.into_iter().map(|e| (e.path, e.message)).collect(),
            other => panic!("expected problems, got {other:?}"),
        }
    }

    #[test]
    fn tool_prices() {
        let loaded = load(
            r#"
mcp_servers:
  zapier:
    url: https://api.example.com/mcp
    mcp_info:
      server_name: Zapier
      mcp_server_cost_info:
        default_cost_per_query: 0.01
        tool_name_to_cost_per_query: {send_email: 0.05, free: 0}
"#,
        )
        .unwrap();
        let cost = &loaded.config.mcp.servers[0].cost;
        assert_eq!(
            cost.of("send_email"),
            Some(sluice_core::limits::nanos(0.05))
        );
        assert_eq!(cost.of("free"), Some(0));
        assert_eq!(cost.of("other"), Some(sluice_core::limits::nanos(0.01)));
        let e = errors(
            r#"
mcp_servers:
  z:
    url: https://api.example.com/mcp
    mcp_info: {mcp_server_cost_info: {default_cost_per_query: -1, tool_name_to_cost_per_query: {t: cheap}}}
"#,
        );
        assert!(
            e.iter().any(|(p, m)| p
                == "mcp_servers.z.mcp_info.mcp_server_cost_info.default_cost_per_query"
                && m.contains("≥ 0")),
            "{e:?}"
        );
        assert!(
            e.iter().any(|(p, _)| p
                == "mcp_servers.z.mcp_info.mcp_server_cost_info.tool_name_to_cost_per_query.t"),
            "{e:?}"
        );
    }

    #[test]
    fn http_and_stdio_servers() {
        let loaded = load(
            r#"
mcp_servers:
  github:
    url: https://api.example.com/mcp
    transport: http
    auth_type: bearer_token
    auth_value: os.environ/GH_TOKEN
    static_headers: {X-Org: acme}
    allowed_tools: [create_issue, list_issues]
    disallowed_tools: [list_issues]
    description: GitHub
    timeout: 5
  fs:
    command: python3
    args: [server.py, --root, /tmp]
    env: {ROOT: /tmp}
    max_response_bytes: 1000
"#,
        )
        .unwrap();
        let s = &loaded.config.mcp.servers;
        assert_eq!(s.len(), 2);
        let fs = s.iter().find(|s| s.name == "fs").unwrap();
        let Transport::Stdio(st) = &fs.transport else {
            panic!("fs is stdio")
        };
        assert_eq!(st.args, ["server.py", "--root", "/tmp"]);
        assert_eq!(st.env["ROOT"].expose(), "/tmp");
        assert_eq!(fs.max_response_bytes, 1000);
        let gh = s.iter().find(|s| s.name == "github").unwrap();
        let Transport::Http(h) = &gh.transport else {
            panic!("github is http")
        };
        let Some(Credential::Header(name, value)) = &h.credential else {
            panic!("github has a header credential")
        };
        assert_eq!(name, "authorization");
        assert_eq!(value.0, "Bearer ghp-secret");
        assert_eq!(h.headers[0].0, "x-org");
        assert!(gh.tools.allows("create_issue"));
        assert!(!gh.tools.allows("list_issues"));
        assert_eq!(gh.timeout, std::time::Duration::from_secs(5));
        assert!(!format!("{:?}", loaded.config.mcp).contains("ghp-secret"));
        let described = crate::describe(&loaded.config);
        assert!(
            described.contains(
                "github  → http https://api.example.com  (headers: authorization, x-org)"
            ),
            "{described}"
        );
        assert!(
            described.contains("fs  → stdio python3 server.py --root /tmp  (env: ROOT)"),
            "{described}"
        );
        assert!(!described.contains("ghp-secret"));
    }

    #[test]
    fn every_bad_value_names_its_path() {
        let errs = errors(
            r#"
mcp_servers:
  "bad name!":
    url: http://x
  nourl:
    transport: http
  badurl:
    url: ftp://x
  oldnourl:
    transport: sse
    auth_type: bearer_token
  sse:
    url: http://x/sse
    transport: sse
  typo:
    url: http://x
    transport: htp
  noval:
    url: http://x
    auth_type: bearer_token
  badauth:
    url: http://x
    auth_type: kerberos
    auth_value: x
  hdr:
    url: http://x
    static_headers: {Mcp-Session-Id: x}
  nocmd:
    transport: stdio
  nothing: {}
  t:
    url: http://x
    timeout: -1
    max_response_bytes: 0
"#,
        );
        let has = |path: &str, word: &str| {
            assert!(
                errs.iter().any(|(p, m)| p == path && m.contains(word)),
                "no problem at {path} saying {word}: {errs:?}"
            );
        };
        has("mcp_servers.bad name!", "server name");
        has("mcp_servers.nourl.url", "url");
        has("mcp_servers.badurl.url", "http://");
        has("mcp_servers.oldnourl.url", "url");
        has("mcp_servers.oldnourl.auth_value", "auth_value");
        has("mcp_servers.sse", "reserved");
        has("mcp_servers.typo.transport", "did you mean");
        has("mcp_servers.noval.auth_value", "auth_value");
        has("mcp_servers.badauth.auth_type", "kerberos");
        has("mcp_servers.hdr.static_headers.Mcp-Session-Id", "itself");
        has("mcp_servers.nocmd.command", "command");
        has("mcp_servers.nothing", "url");
        has("mcp_servers.t.timeout", "> 0");
        has("mcp_servers.t.max_response_bytes", "> 0");
    }

    #[test]
    fn sse_servers_take_the_http_settings() {
        let loaded = load(
            r#"
mcp_servers:
  legacy:
    url: http://127.0.0.1:9/sse
    transport: sse
    auth_type: api_key
    auth_value: os.environ/GH_TOKEN
    static_headers: {X-Org: acme}
"#,
        )
        .unwrap();
        let s = &loaded.config.mcp.servers[0];
        let Transport::Sse(h) = &s.transport else {
            panic!("legacy is sse: {:?}", s.transport)
        };
        assert_eq!(h.url, "http://127.0.0.1:9/sse");
        let Some(Credential::Header(name, value)) = &h.credential else {
            panic!("a header credential: {:?}", h.credential)
        };
        assert_eq!(
            (name.as_str(), value.0.to_str().unwrap()),
            ("x-api-key", "ghp-secret")
        );
        assert_eq!(h.headers[0].0, "x-org");
        let described = crate::describe(&loaded.config);
        assert!(
            described.contains("legacy  → sse http://127.0.0.1:9  (headers: x-api-key, x-org)"),
            "{described}"
        );
        assert!(!described.contains("ghp-secret"));
    }

    #[test]
    fn an_oauth2_client() {
        let loaded = load(
            r#"
mcp_servers:
  crm:
    url: https://crm.example/mcp
    auth_type: oauth2
    oauth2_flow: client_credentials
    client_id: sluice
    client_secret: os.environ/MCP_SECRET
    token_url: https://auth.example/oauth/token
    scopes: [tools.read, "tools.call admin"]
    token_endpoint_auth_method: client_secret_basic
    static_headers: {X-Org: acme}
"#,
        )
        .unwrap();
        let s = &loaded.config.mcp.servers[0];
        let Transport::Http(h) = &s.transport else {
            panic!("crm is http")
        };
        let Some(Credential::OAuth(c)) = &h.credential else {
            panic!("crm has an OAuth client")
        };
        assert_eq!(c.client_id, "sluice");
        assert_eq!(c.client_secret.expose(), "cs-secret");
        assert_eq!(c.token_url, "https://auth.example/oauth/token");
        assert_eq!(c.scopes, ["tools.read", "tools.call", "admin"]);
        assert_eq!(c.client_auth, ClientAuth::Basic);
        assert_eq!(h.headers.len(), 1);
        assert!(!format!("{:?}", loaded.config.mcp).contains("cs-secret"));
        let described = crate::describe(&loaded.config);
        assert!(
            described.contains("crm  → http https://crm.example  (headers: x-org; oauth2 client_credentials at https://auth.example)"),
            "{described}"
        );
        assert!(!described.contains("cs-secret"));
        // The body is the default place for the client's credentials, as in LiteLLM.
        let loaded = load(
            r#"
mcp_servers:
  crm:
    url: https://crm.example/mcp
    auth_type: oauth2
    client_id: sluice
    client_secret: s
    token_url: http://127.0.0.1:9/token
"#,
        )
        .unwrap();
        let Transport::Http(h) = &loaded.config.mcp.servers[0].transport else {
            panic!("crm is http")
        };
        assert!(matches!(
            &h.credential,
            Some(Credential::OAuth(c)) if c.client_auth == ClientAuth::Post && c.scopes.is_empty()
        ));
    }

    #[test]
    fn every_bad_oauth2_value_names_its_path() {
        let errs = errors(
            r#"
mcp_servers:
  nothing:
    url: http://x
    auth_type: oauth2
  badurl:
    url: http://x
    auth_type: oauth2
    client_id: a
    client_secret: os.environ/MCP_SECRET
    token_url: ftp://auth/token
  interactive:
    url: http://x
    auth_type: oauth2
    oauth2_flow: authorization_code
    client_id: a
    client_secret: b
    token_url: http://auth/token
  typo:
    url: http://x
    auth_type: oauth2
    oauth2_flow: client_credential
    client_id: a
    client_secret: b
    token_url: http://auth/token
    token_endpoint_auth_method: basic
  both:
    url: http://x
    auth_type: oauth2
    auth_value: os.environ/GH_TOKEN
    client_id: a
    client_secret: b
    token_url: http://auth/token
    static_headers: {Authorization: Bearer x}
"#,
        );
        let has = |path: &str, word: &str| {
            assert!(
                errs.iter().any(|(p, m)| p == path && m.contains(word)),
                "no problem at {path} saying {word}: {errs:?}"
            );
        };
        has("mcp_servers.nothing.token_url", "token endpoint");
        has("mcp_servers.nothing.client_id", "client_id");
        has("mcp_servers.nothing.client_secret", "client_secret");
        has("mcp_servers.badurl.token_url", "http://");
        has("mcp_servers.interactive.oauth2_flow", "client_credentials");
        has("mcp_servers.typo.oauth2_flow", "did you mean");
        has(
            "mcp_servers.typo.token_endpoint_auth_method",
            "client_secret_basic",
        );
        has("mcp_servers.both.auth_value", "remove auth_value");
        has("mcp_servers.both.static_headers.Authorization", "one place");
        for (_, m) in &errs {
            assert!(!m.contains("cs-secret") && !m.contains("ghp-secret"), "{m}");
        }
        // OAuth keys without auth_type oauth2 are named, not silently used.
        let loaded = load(
            r#"
mcp_servers:
  s:
    url: http://x
    client_id: a
"#,
        )
        .unwrap();
        assert!(loaded
            .warnings
            .iter()
            .any(|w| w.path == "mcp_servers.s.client_id" && w.message.contains("oauth2")));
    }

    #[test]
    fn unknown_keys_warn_with_a_hint() {
        let loaded = load(
            r#"
mcp_servers:
  s:
    url: http://x
    alowed_tools: [a]
"#,
        )
        .unwrap();
        assert!(
            loaded
                .warnings
                .iter()
                .any(|w| w.path == "mcp_servers.s.alowed_tools"
                    && w.message.contains("allowed_tools"))
        );
    }
}
