//! The route table: a static match on method and path (with and without `/v1`), no regex.

use http::Method;

use sluice_core::endpoint::Endpoint;
use sluice_providers::passthrough::{self, Route as PassRoute};

/// What a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route<'a> {
    /// An inference call.
    Inference(Endpoint),
    /// `GET /v1/models`
    ListModels,
    /// `GET /v1/models/{id}`
    GetModel(&'a str),
    /// `GET /health/liveliness` (LiteLLM's spelling) and `/health/liveness`
    Liveness,
    /// `GET /health/readiness`
    Readiness,
    /// `GET /health`: every deployment's routing state (master key).
    Health,
    /// `GET /metrics`: Prometheus exposition.
    Metrics,
    /// `GET /v1/realtime`: a Realtime API WebSocket session (`crate::realtime`).
    Realtime,
    /// A provider pass-through route (`/anthropic/*`, `/bedrock/*`, ...): `crate::passthrough`.
    PassThrough(PassRoute),
    /// Kept Responses answers and the Conversations API (`crate::responses`, which reads the
    /// path again).
    State(crate::responses::Op),
    /// The Files and Batches APIs (`crate::files`, which reads the path again), by label.
    Files(&'static str),
    /// An Azure client's `/openai/deployments/{deployment}/{endpoint}`: sluice's endpoint
    /// when the deployment is a model group, else the pass-through route (if any) it was.
    AzureDeployment(Endpoint, &'a str, Option<PassRoute>),
    /// The management API (`/key/*`, `/team/*`, `/user/*`, `/customer/*`, `/end_user/*`,
    /// `/organization/*`, `/budget/*`, `/tag/*`,
    /// `/spend/*`): `admin::handle` decides the method and the handler.
    Admin,
    /// The cache's management routes (`/cache/ping`, `/cache/delete`, `/cache/flushall`).
    Cache(crate::cache::CacheOp),
    /// The MCP gateway: `/mcp` (`None`) or `/mcp/{server}` (`crate::mcp`, which decides the
    /// method).
    Mcp(Option<&'a str>),
    /// MCP's older SSE transport: `/mcp/sse` and `/mcp/sse/messages` (`None`, as LiteLLM
    /// serves them), `/mcp/{server}/sse` and `/mcp/{server}/sse/messages`
    /// (`crate::mcp::legacy`).
    McpSse(Option<&'a str>, crate::mcp::legacy::Part),
    /// The admin console (`/ui` and below): `crate::console`, which routes within.
    Console,
    /// `GET /routes`: the routes served (LiteLLM's route list).
    Routes,
    /// `/login` (LiteLLM's UI sign-in): the console's sign-in page.
    Login,
    /// A Google (`/v1beta/models/{model}:generateContent`) or Bedrock
    /// (`/model/{modelId}/converse`) client's call: the model and whether it streams are in
    /// the path.
    Named(Named<'a>),
    /// Google's `POST /v1beta/models/{model}:countTokens`: counted here, as for Anthropic's
    /// clients of providers that count nothing.
    GoogleCount(&'a str),
    /// Google's `:embedContent` (`false`) and `:batchEmbedContents` (`true`): embeddings of a
    /// model group, through `/v1/embeddings` (`server::vendor_clients::embed`).
    GoogleEmbed(&'a str, bool),
    /// Google's `GET /v1beta/models` (`None`) and `/v1beta/models/{model}`: the model groups
    /// in Google's shape.
    GoogleModels(Option<&'a str>),
    /// One of the operator's own pass-through routes (`pass_through_endpoints`), by index.
    Custom(usize),
    /// `POST /v1/search/{tool}`: a web search (`crate::passthrough::search`).
    Search,
    /// A known path with the wrong method.
    WrongMethod,
    /// Nothing here.
    NotFound,
}

/// A call whose path names the model (still percent-encoded) and whether it streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Named<'a> {
    /// The operation: [`Endpoint::GenerateContent`] or [`Endpoint::Converse`].
    pub endpoint: Endpoint,
    /// The model segment of the path, as sent.
    pub model: &'a str,
    /// `:streamGenerateContent` or `/converse-stream`.
    pub stream: bool,
}

impl Named<'_> {
    /// Stable label for logs and metrics.
    fn label(&self) -> &'static str {
        match (self.endpoint, self.stream) {
            (Endpoint::Converse, false) => "/model/{modelId}/converse",
            (Endpoint::Converse, true) => "/model/{modelId}/converse-stream",
            (_, false) => "/v1beta/models/{model}:generateContent",
            (_, true) => "/v1beta/models/{model}:streamGenerateContent",
        }
    }
}

/// Google's Gemini API paths (`/v1beta/models/...`, `/v1/models/...` with a `:method`):
/// what they ask for, or `None` for another path.
fn google<'a>(method: &Method, path: &'a str) -> Option<Route<'a>> {
    let rest = path
        .strip_prefix("/v1beta/models")
        .or_else(|| path.strip_prefix("/v1/models").filter(|r| r.contains(':')))?;
    if rest.is_empty() || rest == "/" {
        return Some(if method == Method::GET {
            Route::GoogleModels(None)
        } else {
            Route::WrongMethod
        });
    }
    let rest = rest.strip_prefix('/')?;
    let Some((model, op)) = rest.rsplit_once(':') else {
        return Some(if method == Method::GET && !rest.is_empty() {
            Route::GoogleModels(Some(rest))
        } else {
            Route::NotFound
        });
    };
    if model.is_empty() {
        return Some(Route::NotFound);
    }
    let route = match op {
        "generateContent" | "streamGenerateContent" => Route::Named(Named {
            endpoint: Endpoint::GenerateContent,
            model,
            stream: op == "streamGenerateContent",
        }),
        "countTokens" => Route::GoogleCount(model),
        "embedContent" => Route::GoogleEmbed(model, false),
        "batchEmbedContents" => Route::GoogleEmbed(model, true),
        _ => return Some(Route::NotFound),
    };
    Some(if method == Method::POST {
        route
    } else {
        Route::WrongMethod
    })
}

/// Bedrock's runtime paths a Converse client calls: `/model/{modelId}/converse` and
/// `/converse-stream`.
fn bedrock<'a>(method: &Method, path: &'a str) -> Option<Route<'a>> {
    let rest = path.strip_prefix("/model/")?;
    let (model, stream) = if let Some(m) = rest.strip_suffix("/converse") {
        (m, false)
    } else {
        (rest.strip_suffix("/converse-stream")?, true)
    };
    if model.is_empty() || model.contains('/') {
        return None;
    }
    Some(if method == Method::POST {
        Route::Named(Named {
            endpoint: Endpoint::Converse,
            model,
            stream,
        })
    } else {
        Route::WrongMethod
    })
}

impl Route<'_> {
    /// Stable label for logs and metrics: the path pattern, not the raw path.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Inference(Endpoint::ChatCompletions) => "/v1/chat/completions",
            Self::Inference(Endpoint::Completions) => "/v1/completions",
            Self::Inference(Endpoint::Embeddings) => "/v1/embeddings",
            Self::Inference(Endpoint::Responses) => "/v1/responses",
            Self::Inference(Endpoint::Messages) => "/v1/messages",
            Self::Inference(Endpoint::CountTokens) => "/v1/messages/count_tokens",
            Self::Inference(Endpoint::ImageGenerations) => "/v1/images/generations",
            Self::Inference(Endpoint::ImageEdits) => "/v1/images/edits",
            Self::Inference(Endpoint::ImageVariations) => "/v1/images/variations",
            Self::Inference(Endpoint::AudioTranscriptions) => "/v1/audio/transcriptions",
            Self::Inference(Endpoint::AudioTranslations) => "/v1/audio/translations",
            Self::Inference(Endpoint::AudioSpeech) => "/v1/audio/speech",
            Self::Inference(Endpoint::Moderations) => "/v1/moderations",
            Self::Inference(Endpoint::Rerank) => "/v1/rerank",
            Self::Inference(Endpoint::Ocr) => "/v1/ocr",
            Self::ListModels => "/v1/models",
            Self::GetModel(_) => "/v1/models/{id}",
            Self::Liveness => "/health/liveliness",
            Self::Readiness => "/health/readiness",
            Self::Health => "/health",
            Self::Metrics => "/metrics",
            Self::Realtime => "/v1/realtime",
            Self::PassThrough(r) => r.label(),
            Self::AzureDeployment(..) => "/openai/deployments/{deployment}",
            Self::Files(label) => label,
            Self::State(op) => op.label(),
            Self::Custom(_) => "pass_through_endpoint",
            Self::Search => "/v1/search/{tool}",
            Self::Admin => "admin",
            Self::Cache(op) => op.label(),
            Self::Mcp(None) => "/mcp",
            Self::Mcp(Some(_)) => "/mcp/{server}",
            Self::McpSse(server, part) => {
                use crate::mcp::legacy::Part;
                match (server, part) {
                    (None, Part::Stream) => "/mcp/sse",
                    (None, Part::Messages) => "/mcp/sse/messages",
                    (Some(_), Part::Stream) => "/mcp/{server}/sse",
                    (Some(_), Part::Messages) => "/mcp/{server}/sse/messages",
                }
            }
            Self::Inference(Endpoint::GenerateContent) => "/v1beta/models/{model}:generateContent",
            Self::Inference(Endpoint::Converse) => "/model/{modelId}/converse",
            Self::Named(n) => n.label(),
            Self::GoogleCount(_) => "/v1beta/models/{model}:countTokens",
            Self::GoogleEmbed(_, false) => "/v1beta/models/{model}:embedContent",
            Self::GoogleEmbed(_, true) => "/v1beta/models/{model}:batchEmbedContents",
            Self::GoogleModels(None) => "/v1beta/models",
            Self::GoogleModels(Some(_)) => "/v1beta/models/{model}",
            Self::Console => "/ui",
            Self::Routes => "/routes",
            Self::Login => "/login",
            Self::WrongMethod | Self::NotFound => "other",
        }
    }
}

/// Every route family served, as `GET /routes` lists it (LiteLLM's route list): path
/// patterns and methods, nothing about the deployments behind them.
const LISTED: &[(&str, &[&str])] = &[
    ("/v1/chat/completions", &["POST"]),
    ("/v1/completions", &["POST"]),
    ("/v1/embeddings", &["POST"]),
    ("/v1/responses", &["POST"]),
    ("/v1/messages", &["POST"]),
    ("/v1/messages/count_tokens", &["POST"]),
    ("/v1/images/generations", &["POST"]),
    ("/v1/images/edits", &["POST"]),
    ("/v1/images/variations", &["POST"]),
    ("/v1/audio/transcriptions", &["POST"]),
    ("/v1/audio/translations", &["POST"]),
    ("/v1/audio/speech", &["POST"]),
    ("/v1/moderations", &["POST"]),
    ("/v1/rerank", &["POST"]),
    ("/v1/ocr", &["POST"]),
    ("/v1/models", &["GET"]),
    ("/v1/models/{model}", &["GET"]),
    ("/v1/responses/{id}", &["GET", "DELETE"]),
    ("/v1/responses/{id}/input_items", &["GET"]),
    ("/v1/responses/{id}/cancel", &["POST"]),
    ("/v1/conversations", &["POST"]),
    ("/v1/conversations/{id}", &["GET", "POST", "DELETE"]),
    ("/v1/conversations/{id}/items", &["GET", "POST"]),
    ("/v1/conversations/{id}/items/{item}", &["GET", "DELETE"]),
    ("/v1/files", &["GET", "POST"]),
    ("/v1/batches", &["GET", "POST"]),
    ("/v1/search/{tool}", &["POST"]),
    ("/v1/videos", &["GET", "POST"]),
    ("/v1/videos/{id}", &["GET", "DELETE"]),
    ("/v1/videos/{id}/content", &["GET"]),
    ("/v1/videos/{id}/remix", &["POST"]),
    ("/v1/vector_stores", &["GET", "POST"]),
    ("/v1/vector_stores/{id}", &["GET", "POST", "DELETE"]),
    ("/v1/vector_stores/{id}/search", &["POST"]),
    ("/v1/vector_stores/{id}/files", &["GET", "POST"]),
    (
        "/v1/vector_stores/{id}/files/{file}",
        &["GET", "POST", "DELETE"],
    ),
    ("/v1/vector_stores/{id}/file_batches", &["POST"]),
    ("/v1/vector_stores/{id}/file_batches/{batch}", &["GET"]),
    ("/v1/realtime", &["GET"]),
    ("/openai/deployments/{deployment}/{endpoint}", &["POST"]),
    ("/v1beta/models", &["GET"]),
    ("/v1beta/models/{model}:generateContent", &["POST"]),
    ("/v1beta/models/{model}:streamGenerateContent", &["POST"]),
    ("/v1beta/models/{model}:countTokens", &["POST"]),
    ("/v1beta/models/{model}:embedContent", &["POST"]),
    ("/v1beta/models/{model}:batchEmbedContents", &["POST"]),
    ("/model/{modelId}/converse", &["POST"]),
    ("/model/{modelId}/converse-stream", &["POST"]),
    ("/health", &["GET"]),
    ("/health/liveliness", &["GET"]),
    ("/health/readiness", &["GET"]),
    ("/metrics", &["GET"]),
    ("/key/{action}", &["GET", "POST"]),
    ("/team/{action}", &["GET", "POST"]),
    ("/user/{action}", &["GET", "POST"]),
    ("/customer/{action}", &["GET", "POST"]),
    (
        "/organization/{action}",
        &["GET", "POST", "PATCH", "DELETE"],
    ),
    ("/budget/{action}", &["GET", "POST"]),
    ("/tag/{action}", &["GET", "POST"]),
    ("/model/{action}", &["GET", "POST"]),
    ("/model_group/info", &["GET"]),
    ("/access_group/{action}", &["GET", "POST", "PUT", "DELETE"]),
    ("/v2/model/info", &["GET"]),
    ("/spend/logs", &["GET"]),
    ("/mcp", &["GET", "POST", "DELETE"]),
    ("/ui", &["GET", "POST"]),
    ("/routes", &["GET"]),
];

/// The `GET /routes` answer: `{"routes": [{"path", "methods"}]}`.
pub fn listing() -> bytes::Bytes {
    let routes: Vec<serde_json::Value> = LISTED
        .iter()
        .map(|(path, methods)| serde_json::json!({ "path": path, "methods": methods }))
        .collect();
    bytes::Bytes::from(serde_json::json!({ "routes": routes }).to_string())
}

/// Match a request.
pub fn match_route<'a>(method: &Method, path: &'a str) -> Route<'a> {
    if let Some(endpoint) = Endpoint::from_path(path) {
        return if method == Method::POST {
            Route::Inference(endpoint)
        } else {
            Route::WrongMethod
        };
    }
    if let Some(route) = google(method, path).or_else(|| bedrock(method, path)) {
        return route;
    }
    if let Some((endpoint, deployment)) = super::named_model::azure_deployment(path) {
        return Route::AzureDeployment(endpoint, deployment, PassRoute::of(path).map(|(r, _)| r));
    }
    if let Some((route, _)) = PassRoute::of(path) {
        let allowed = passthrough::allows(method);
        return if allowed {
            Route::PassThrough(route)
        } else {
            Route::WrongMethod
        };
    }
    if path == "/ui" || path.starts_with("/ui/") {
        return Route::Console;
    }
    let bare = path.strip_prefix("/v1").unwrap_or(path);
    if let Some(op) = crate::responses::Op::of(bare) {
        return Route::State(op);
    }
    if crate::passthrough::search::tool_of(path).is_some() {
        return if method == Method::POST {
            Route::Search
        } else {
            Route::WrongMethod
        };
    }
    if let Some(op) = crate::files::Op::of(method, bare) {
        return op.map_or(Route::WrongMethod, |op| Route::Files(op.label()));
    }
    if [
        "/key/",
        "/team/",
        "/user/",
        "/customer/",
        "/end_user/",
        "/spend/",
        "/model/",
        "/v2/model/",
        "/model_group/",
        "/access_group/",
        "/organization/",
        "/budget/",
        "/tag/",
    ]
    .iter()
    .any(|p| bare.starts_with(p))
        || bare == "/audit"
    {
        return Route::Admin;
    }
    if let Some(rest) = bare.strip_prefix("/mcp") {
        use crate::mcp::legacy::Part;
        let rest = rest.trim_end_matches('/');
        let (rest, sse) = if let Some(r) = rest.strip_suffix("/sse/messages") {
            (r, Some(Part::Messages))
        } else if let Some(r) = rest.strip_suffix("/sse") {
            (r, Some(Part::Stream))
        } else {
            (rest, None)
        };
        let server = match rest {
            "" => Some(None),
            s => s
                .strip_prefix('/')
                .filter(|n| !n.is_empty() && !n.contains('/'))
                .map(Some),
        };
        match (server, sse) {
            (Some(server), None) => return Route::Mcp(server),
            (Some(server), Some(part)) => return Route::McpSse(server, part),
            (None, _) => {}
        }
    }
    if let Some(op) = crate::cache::CacheOp::of(bare) {
        return if *method == op.method() {
            Route::Cache(op)
        } else {
            Route::WrongMethod
        };
    }
    if bare == "/login" {
        return Route::Login;
    }
    let route = match bare {
        "/models" => Route::ListModels,
        "/health/liveliness" | "/health/liveness" => Route::Liveness,
        "/health/readiness" | "/health/readiness/details" => Route::Readiness,
        "/routes" => Route::Routes,
        "/health" => Route::Health,
        "/metrics" => Route::Metrics,
        "/realtime" => Route::Realtime,
        _ => match bare.strip_prefix("/models/") {
            Some(id) if !id.is_empty() => Route::GetModel(id),
            _ => return Route::NotFound,
        },
    };
    if method == Method::GET {
        route
    } else {
        Route::WrongMethod
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_with_and_without_v1() {
        let post = Method::POST;
        let get = Method::GET;
        assert_eq!(
            match_route(&post, "/v1/chat/completions"),
            Route::Inference(Endpoint::ChatCompletions)
        );
        assert_eq!(
            match_route(&post, "/responses"),
            Route::Inference(Endpoint::Responses)
        );
        assert_eq!(match_route(&get, "/models"), Route::ListModels);
        assert_eq!(
            match_route(&get, "/v1/models/org/m"),
            Route::GetModel("org/m")
        );
        assert_eq!(match_route(&get, "/health/liveness"), Route::Liveness);
        assert_eq!(match_route(&get, "/health/readiness"), Route::Readiness);
        assert_eq!(match_route(&get, "/health"), Route::Health);
        assert_eq!(match_route(&get, "/metrics"), Route::Metrics);
        assert_eq!(match_route(&get, "/v1/realtime"), Route::Realtime);
        assert_eq!(match_route(&post, "/realtime"), Route::WrongMethod);
        assert_eq!(
            match_route(&get, "/v1/chat/completions"),
            Route::WrongMethod
        );
        assert_eq!(match_route(&post, "/v1/models"), Route::WrongMethod);
        assert_eq!(match_route(&get, "/v1/nope"), Route::NotFound);
        assert_eq!(match_route(&post, "/mcp"), Route::Mcp(None));
        assert_eq!(match_route(&post, "/mcp/"), Route::Mcp(None));
        assert_eq!(match_route(&get, "/mcp/github"), Route::Mcp(Some("github")));
        assert_eq!(match_route(&post, "/mcp/a/b"), Route::NotFound);
        {
            use crate::mcp::legacy::Part;
            assert_eq!(
                match_route(&get, "/mcp/sse"),
                Route::McpSse(None, Part::Stream)
            );
            assert_eq!(
                match_route(&post, "/v1/mcp/sse/messages"),
                Route::McpSse(None, Part::Messages)
            );
            assert_eq!(
                match_route(&get, "/mcp/github/sse/"),
                Route::McpSse(Some("github"), Part::Stream)
            );
            assert_eq!(
                match_route(&post, "/mcp/github/sse/messages"),
                Route::McpSse(Some("github"), Part::Messages)
            );
            assert_eq!(match_route(&get, "/mcp/a/b/sse"), Route::NotFound);
            assert_eq!(match_route(&get, "/mcp//sse"), Route::NotFound);
        }
        assert_eq!(match_route(&post, "/mcpx"), Route::NotFound);
        assert_eq!(match_route(&get, "/ui"), Route::Console);
        assert_eq!(match_route(&post, "/ui/keys/new"), Route::Console);
        assert_eq!(match_route(&get, "/uix"), Route::NotFound);
        assert_eq!(match_route(&get, "/audit"), Route::Admin);
        assert_eq!(match_route(&get, "/v1/model/info"), Route::Admin);
        assert_eq!(match_route(&get, "/v2/model/info"), Route::Admin);
        assert_eq!(match_route(&get, "/model_group/info"), Route::Admin);
        assert_eq!(match_route(&post, "/model/new"), Route::Admin);
        assert_eq!(match_route(&get, "/v1/models/"), Route::NotFound);
    }

    #[test]
    fn google_and_bedrock_paths_name_the_model() {
        let post = Method::POST;
        let get = Method::GET;
        let named = |endpoint, model, stream| {
            Route::Named(Named {
                endpoint,
                model,
                stream,
            })
        };
        assert_eq!(
            match_route(&post, "/v1beta/models/gemini-2.5-flash:generateContent"),
            named(Endpoint::GenerateContent, "gemini-2.5-flash", false)
        );
        assert_eq!(
            match_route(&post, "/v1beta/models/my-group:streamGenerateContent"),
            named(Endpoint::GenerateContent, "my-group", true)
        );
        assert_eq!(
            match_route(&post, "/v1/models/g:generateContent"),
            named(Endpoint::GenerateContent, "g", false)
        );
        assert_eq!(
            match_route(&post, "/v1beta/models/g:countTokens"),
            Route::GoogleCount("g")
        );
        assert_eq!(
            match_route(&get, "/v1beta/models"),
            Route::GoogleModels(None)
        );
        assert_eq!(
            match_route(&post, "/v1/models/e:batchEmbedContents"),
            Route::GoogleEmbed("e", true)
        );
        assert_eq!(
            match_route(&get, "/v1beta/models/g"),
            Route::GoogleModels(Some("g"))
        );
        assert_eq!(
            match_route(&get, "/v1beta/models/g:generateContent"),
            Route::WrongMethod
        );
        assert_eq!(match_route(&post, "/v1beta/models/g:nope"), Route::NotFound);
        // OpenAI's own model routes are unchanged.
        assert_eq!(match_route(&get, "/v1/models/g"), Route::GetModel("g"));
        assert_eq!(
            match_route(&post, "/model/us.anthropic.claude%3A0/converse"),
            named(Endpoint::Converse, "us.anthropic.claude%3A0", false)
        );
        assert_eq!(
            match_route(&post, "/model/m/converse-stream"),
            named(Endpoint::Converse, "m", true)
        );
        // LiteLLM's `/model/*` management routes stay the management API's.
        assert_eq!(match_route(&post, "/model/new"), Route::Admin);
        assert_eq!(match_route(&get, "/model/info"), Route::Admin);
    }
}
