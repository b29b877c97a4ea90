//! LiteLLM's route lists for JWT callers (`team_allowed_routes`, a scope's `routes`): route
//! groups by name (`openai_routes`, `info_routes`, `mcp_routes`, `management_routes`,
//! `spend_tracking_routes`) or paths (`/v1/chat/completions`; a trailing `*` matches below).
//! A path matches with or without its `/v1` prefix, as LiteLLM lists both.

use std::sync::Arc;

use sluice_core::endpoint::Endpoint;

/// What a JWT's claims grant beside a key's usual fields: the routes it may call
/// (`team_allowed_routes`, its scopes' `routes`) and the end user it acts for
/// (`end_user_id_jwt_field`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JwtGrants {
    /// Every list must allow a route.
    pub routes: RouteRules,
    /// The end user every request is for.
    pub end_user: Option<Arc<str>>,
}

/// One entry of a route list.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Allowed {
    /// Inference and the OpenAI API's objects (LiteLLM's `openai_routes`).
    OpenAi,
    /// Reads of one's own records and the model lists (`info_routes`).
    Info,
    /// The MCP gateway (`mcp_routes`).
    Mcp,
    /// The management API (`management_routes`, and LiteLLM's finer groups of it).
    Management,
    /// Spend reads (`spend_tracking_routes`, `global_spend_tracking_routes`).
    Spend,
    /// A path, or a path prefix when it ends in `*`.
    Path(Box<str>),
}

/// The OpenAI API's object routes beside inference, without `/v1`.
const OBJECT_PREFIXES: &[&str] = &[
    "/models",
    "/files",
    "/batches",
    "/vector_stores",
    "/videos",
    "/realtime",
    "/responses",
    "/conversations",
    "/containers",
    "/fine_tuning",
];

/// LiteLLM's `info_routes` that sluice serves, without `/v1`.
const INFO: &[&str] = &[
    "/key/info",
    "/key/health",
    "/team/info",
    "/team/list",
    "/user/info",
    "/model/info",
    "/v2/model/info",
    "/model_group/info",
    "/health",
    "/key/list",
    "/organization/list",
];

const MANAGEMENT_PREFIXES: &[&str] = &[
    "/key/",
    "/team/",
    "/user/",
    "/model/",
    "/organization/",
    "/customer/",
    "/end_user/",
    "/budget/",
    "/access_group/",
];

fn below(path: &str, prefix: &str) -> bool {
    path == prefix
        || path
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('/'))
}

impl Allowed {
    fn parse(entry: &str) -> Self {
        match entry {
            "openai_routes" | "llm_api_routes" => Self::OpenAi,
            "info_routes" | "model_info_routes" => Self::Info,
            "mcp_routes" => Self::Mcp,
            "management_routes"
            | "key_management_routes"
            | "team_management_routes"
            | "user_management_routes"
            | "internal_user_routes" => Self::Management,
            "spend_tracking_routes" | "global_spend_tracking_routes" => Self::Spend,
            path => Self::Path(path.into()),
        }
    }

    /// Whether `path` (without `/v1`) is in it; `full` is the path as asked.
    fn allows(&self, path: &str, full: &str) -> bool {
        match self {
            Self::OpenAi => {
                Endpoint::from_path(full).is_some()
                    || OBJECT_PREFIXES.iter().any(|p| below(path, p))
            }
            Self::Info => INFO.contains(&path),
            Self::Mcp => below(path, "/mcp") || path.starts_with("/mcp/"),
            Self::Management => MANAGEMENT_PREFIXES.iter().any(|p| path.starts_with(p)),
            Self::Spend => path.starts_with("/spend/") || path.starts_with("/global/spend"),
            Self::Path(p) => {
                let p = p
                    .strip_prefix("/v1")
                    .filter(|r| r.starts_with('/'))
                    .unwrap_or(p);
                match p.strip_suffix('*') {
                    Some(prefix) => path.starts_with(prefix),
                    None => path == p,
                }
            }
        }
    }
}

/// Route lists a caller is held to: each list must allow the route.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RouteRules(Vec<Vec<Allowed>>);

impl RouteRules {
    /// Add a list the caller is held to (LiteLLM's names and paths).
    pub fn and(mut self, entries: &[String]) -> Self {
        self.0
            .push(entries.iter().map(|e| Allowed::parse(e)).collect());
        self
    }

    /// Whether every list allows `path`.
    pub fn allows(&self, path: &str) -> bool {
        let bare = path
            .strip_prefix("/v1")
            .filter(|r| r.starts_with('/'))
            .unwrap_or(path);
        self.0
            .iter()
            .all(|list| list.iter().any(|a| a.allows(bare, path)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(lists: &[&[&str]]) -> RouteRules {
        lists.iter().fold(RouteRules::default(), |r, l| {
            r.and(&l.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>())
        })
    }

    #[test]
    fn litellm_s_default_team_routes_reach_inference_and_reads_only() {
        let r = rules(&[&["openai_routes", "info_routes", "mcp_routes", "/v1/messages"]]);
        for ok in [
            "/v1/chat/completions",
            "/chat/completions",
            "/v1/embeddings",
            "/v1/models",
            "/v1/files/file-1",
            "/key/info",
            "/model/info",
            "/mcp",
            "/mcp/tools/list",
            "/v1/messages",
        ] {
            assert!(r.allows(ok), "{ok}");
        }
        for refused in ["/key/generate", "/team/new", "/spend/logs", "/model/new"] {
            assert!(!r.allows(refused), "{refused}");
        }
    }

    #[test]
    fn every_list_must_allow_and_paths_match_with_or_without_v1() {
        let r = rules(&[&["openai_routes"], &["/chat/completions", "/v1/embeddings"]]);
        assert!(r.allows("/v1/chat/completions"));
        assert!(r.allows("/embeddings"));
        assert!(
            !r.allows("/v1/images/generations"),
            "the scope's list refuses it"
        );
        let r = rules(&[&["/spend/*"]]);
        assert!(r.allows("/spend/logs"));
        assert!(!r.allows("/key/info"));
        assert!(RouteRules::default().allows("/anything"));
    }
}
