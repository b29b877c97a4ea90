//! Request-time errors, each mapped to the client's error shape (OpenAI's, or Anthropic's on
//! `/v1/messages`) and the right HTTP status.
//! Startup errors live apart (config, bind); nothing here carries internal detail a client
//! should not see, and no variant can hold a secret.
//!
//! The error kinds other layers refuse a request with ([`KeyRefusal`] for authentication,
//! [`RouteError`] for routing, `limits::Rejected`) are defined here or in `limits`, so that
//! every layer can build an [`ApiError`] without this module importing any of them.

use std::time::Duration;

use bytes::Bytes;
use http::StatusCode;

use std::sync::Arc;

use crate::endpoint::Dialect;
use crate::limits::{Exceeded, Rejected, SubjectKind};

/// Why a presented key is refused (authentication's refusals).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum KeyRefusal {
    /// No such key (or it was deleted).
    #[error("invalid API key")]
    Unknown,
    /// `/key/block`.
    #[error("this key is blocked")]
    Blocked,
    /// Past `expires`.
    #[error("this key has expired")]
    Expired,
    /// Its team is blocked.
    #[error("this key's team is blocked")]
    TeamBlocked,
    /// Its user is blocked.
    #[error("this key's user is blocked")]
    UserBlocked,
}

/// A failure of routing itself: nothing could be called.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    /// Every deployment of the group is cooling down.
    #[error("every deployment of model group `{group}` is cooling down after failures; retry in {}s", .retry_in.as_secs_f64().ceil())]
    Cooling {
        /// The group.
        group: Arc<str>,
        /// When the first one is back.
        retry_in: Duration,
    },
    /// The request asked the group to fail (`MockFailure`).
    #[error("This is a mock exception for model={group}, to trigger {}.", match .what {
        MockFailure::RateLimit => "a rate limit error",
        _ => "a fallback",
    })]
    Mocked {
        /// The group.
        group: Arc<str>,
        /// How.
        what: MockFailure,
    },
    /// Every deployment of the group is at its rpm/tpm limit this minute.
    #[error("every deployment of model group `{group}` is at its rpm/tpm limit; retry in {}s", .retry_in.as_secs_f64().ceil())]
    AtLimit {
        /// The group.
        group: Arc<str>,
        /// When the minute turns.
        retry_in: Duration,
    },
    /// Tag routing (`enable_tag_filtering`) leaves no deployment of the group for the
    /// request's tags. LiteLLM's words (its clients match on them) and status (401).
    #[error("Not allowed to access model due to tags configuration. Passed model={group} and tags={tags:?}")]
    NoTagMatch {
        /// The group.
        group: Arc<str>,
        /// The request's tags, as given.
        tags: Box<[Box<str>]>,
    },
}

impl RouteError {
    /// When the client may try again.
    pub fn retry_in(&self) -> Duration {
        match self {
            Self::Cooling { retry_in, .. } | Self::AtLimit { retry_in, .. } => *retry_in,
            Self::Mocked { .. } | Self::NoTagMatch { .. } => Duration::ZERO,
        }
    }
}

/// LiteLLM's switches for trying a config's fallbacks and retries without a failing provider
/// (`mock_testing_fallbacks`, `mock_testing_context_fallbacks`,
/// `mock_testing_content_policy_fallbacks`, `mock_testing_rate_limit_error` in a request
/// body): the group asked for fails that way before any deployment is called, so neither an
/// upstream nor a deployment's health is touched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MockFailure {
    /// The group fails as a server error: the general fallbacks are tried, no retry.
    Fallbacks,
    /// The group fails as a context-window overflow: `context_window_fallbacks`.
    ContextWindow,
    /// The group fails as a content-policy refusal: `content_policy_fallbacks`.
    ContentPolicy,
    /// The first attempt fails as a rate limit: the usual retries follow.
    RateLimit,
}

impl MockFailure {
    /// The body field that asks for it.
    pub const fn field(self) -> &'static str {
        match self {
            Self::Fallbacks => "mock_testing_fallbacks",
            Self::ContextWindow => "mock_testing_context_fallbacks",
            Self::ContentPolicy => "mock_testing_content_policy_fallbacks",
            Self::RateLimit => "mock_testing_rate_limit_error",
        }
    }
}

/// Why a request failed before or while reaching the upstream. The upstream's own error
/// responses are not in here: they pass through with their status and body.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The body is not valid JSON; the message carries serde's line and column.
    #[error("We could not parse the JSON body of your request: {0}")]
    InvalidJson(String),
    /// A parameter sluice needs is absent.
    #[error("Missing required parameter: '{0}'.")]
    MissingParam(&'static str),
    /// A parameter has the wrong type or value.
    #[error("Invalid value for '{param}': {message}")]
    InvalidParam {
        /// The parameter's name.
        param: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// No key, or a wrong one.
    #[error("Authentication error: {0}")]
    Unauthorized(&'static str),
    /// The model group does not exist. Only the name the client sent is echoed.
    #[error("The model `{0}` does not exist or you do not have access to it.")]
    ModelNotFound(String),
    /// No route at that path.
    #[error("Unknown request URL: {method} {path}.")]
    RouteNotFound {
        /// Request method.
        method: String,
        /// Request path (no query string).
        path: String,
    },
    /// The route exists but not for that method.
    #[error("Method {0} is not allowed on this route.")]
    MethodNotAllowed(String),
    /// The body exceeds `max_request_size_mb`.
    #[error("Request body is larger than the limit of {limit} bytes.")]
    BodyTooLarge {
        /// The configured limit.
        limit: usize,
    },
    /// The client took longer than `body_read_timeout` to send its body (a trickled body).
    #[error("The request body was not received within {}s.", .0.as_secs_f64())]
    BodyTimeout(Duration),
    /// The request URL is longer than `max_url_length`.
    #[error("The request URL is longer than the limit of {limit} bytes.")]
    UriTooLong {
        /// The configured limit.
        limit: usize,
    },
    /// The JSON body nests arrays and objects deeper than sluice reads.
    #[error("The JSON body is nested deeper than the limit of {limit} levels.")]
    TooDeep {
        /// The limit (the envelope's `MAX_JSON_DEPTH`).
        limit: usize,
    },
    /// The instance is overloaded (in-flight limit or memory watermark): the newest work is
    /// shed so that admitted requests stay fast.
    #[error("sluice is overloaded ({reason}); retry shortly.")]
    Overloaded {
        /// Which limit: `in_flight` or `memory`.
        reason: &'static str,
    },
    /// The client's body could not be read (connection dropped mid-body).
    #[error("Could not read the request body: {0}")]
    BodyRead(String),
    /// The endpoint cannot stream (embeddings).
    #[error("Streaming is not supported on this endpoint.")]
    StreamNotSupported,
    /// The deployment's provider has no translator in sluice yet.
    #[error(
        "Provider `{provider}` (model `{model}`) is not supported by this version of sluice yet."
    )]
    ProviderNotSupported {
        /// Provider prefix.
        provider: &'static str,
        /// Model group name.
        model: String,
    },
    /// A request parameter the deployment's provider cannot take, and `drop_params` is off.
    #[error(
        "`{provider}` does not support the parameter `{param}`. Remove it, or set \
         `litellm_settings.drop_params: true` to drop such parameters."
    )]
    UnsupportedParam {
        /// The parameter, as the client spelt it.
        param: String,
        /// Provider prefix.
        provider: &'static str,
    },
    /// The deployment's provider has no such operation (embeddings on Anthropic, ...): 501,
    /// naming the pair, and another deployment of the group or a fallback may serve it.
    #[error("`{provider}` does not serve `{endpoint}` (sluice has no translation for this provider and endpoint).")]
    EndpointNotSupported {
        /// Provider prefix.
        provider: &'static str,
        /// The endpoint's name.
        endpoint: &'static str,
    },
    /// The upstream did not answer in time.
    #[error("The upstream provider did not answer within {}s.", .0.as_secs_f64())]
    UpstreamTimeout(Duration),
    /// The upstream could not be reached or dropped the connection before answering.
    #[error("The upstream provider could not be reached: {0}")]
    UpstreamUnreachable(String),
    /// The upstream answered something sluice cannot relay.
    #[error("The upstream provider sent an invalid response: {0}")]
    UpstreamInvalid(String),
    /// No deployment could be called: all cooling down, or all at their limits.
    #[error("No deployment available: {0}")]
    NoDeployment(#[from] RouteError),
    /// sluice failed in a way that is not the client's or the upstream's doing.
    #[error("Internal error: {0}")]
    Internal(&'static str),
    /// A stream's upstream went quiet for longer than its idle timeout.
    #[error("The upstream provider sent nothing for {}s.", .0.as_secs_f64())]
    UpstreamIdle(Duration),
    /// A virtual key that is unknown, blocked, expired, or whose team or user is blocked.
    #[error("Authentication error: {0}")]
    KeyRefused(KeyRefusal),
    /// The key (or its team) may not call this model group. LiteLLM's wording and status
    /// (401, its `*_model_access_denied` type): clients written against LiteLLM catch it as an
    /// authentication error and match on "not allowed to access model".
    #[error("{} not allowed to access model. This {} may not call `{model}`.", .by.name(), .by.name())]
    ModelNotAllowed {
        /// The model group asked for.
        model: String,
        /// Whose `models` list refused it.
        by: SubjectKind,
    },
    /// The request's end user (`user` field) is blocked.
    #[error("The end user of this request is blocked.")]
    EndUserBlocked,
    /// A JWT presented as the API key was refused (bad signature, expired, wrong audience, no
    /// team, ...); the reason is safe to show and never holds the token.
    #[error("Authentication error: JWT refused: {0}")]
    JwtRefused(String),
    /// JWTs cannot be checked now: the identity provider's keys are missing or stale.
    #[error("JWT authentication is unavailable: {0}")]
    JwtUnavailable(String),
    /// The client's address is in none of the `allowed_ips` that apply: the gateway's, the
    /// key's or its team's (named). LiteLLM's words and status (403).
    #[error("Access forbidden: IP address not allowed ({0} allowed_ips).")]
    AddressNotAllowed(&'static str),
    /// A rate limit or budget of the key, team, user or end user.
    #[error("{0}")]
    Limited(Rejected),
    /// A field or query parameter the admin API does not know (named, so typos are obvious).
    #[error("Unknown parameter: '{0}'.")]
    UnknownParam(String),
    /// An admin call named a key, team, user or end user that does not exist.
    #[error("{what} not found: {id}")]
    NotFound {
        /// What kind of thing.
        what: &'static str,
        /// Which one, as the client named it (never a plaintext key).
        id: String,
    },
    /// An admin call would create something that exists already (id or alias taken).
    #[error("{0} already exists.")]
    Conflict(String),
    /// The database did not answer; the admin API cannot serve without it.
    #[error("The database is unavailable; try again shortly.")]
    StoreUnavailable,
    /// The response cache's shared store (Redis) failed a management call; the reason says
    /// how, never where.
    #[error("The cache is unavailable: {0}")]
    CacheUnavailable(String),
    /// A guardrail refused the request or its answer. Names the guardrail and what it found
    /// (an entity or pattern label), never the value.
    #[error("Blocked by guardrail '{guardrail}': {found} found in the {place}.")]
    GuardrailBlocked {
        /// `guardrail_name`.
        guardrail: String,
        /// The label it blocked on (`CREDIT_CARD`, `BLOCKED_WORD`, `prompt_injection`).
        found: String,
        /// `request` or `answer`.
        place: &'static str,
    },
    /// A `tool_permission` guardrail refused a tool the request offers (`place`: `request`) or
    /// a call the answer makes (`answer`); the message is the rule's.
    #[error("Blocked by guardrail '{guardrail}' in the {place}: {message}")]
    ToolNotAllowed {
        /// `guardrail_name`.
        guardrail: String,
        /// What the rule (or `violation_message_template`) says.
        message: String,
        /// `request` or `answer`.
        place: &'static str,
    },
    /// A Responses request's `mcp` tool names a tool server the key (or its team) may not
    /// use (`object_permission.mcp_servers`).
    #[error("This key may not use MCP server '{0}'.")]
    McpNotAllowed(String),
    /// A valid virtual key asked for something only another role may do (a management route
    /// that needs the master key, another key's or team's record); the text names what.
    #[error("{0}")]
    NotPermitted(&'static str),
    /// The tool loop sluice runs for a Responses request's `mcp` tools did not end (the model
    /// kept calling tools past the round limit); the text says how.
    #[error("{0}")]
    McpToolLoop(String),
    /// An external guardrail's service could not be asked (down, too slow, an answer it does
    /// not understand) and the guardrail's `on_error` is `block`. The reason names no address.
    #[error("Guardrail '{guardrail}' could not check the {place}: {why}")]
    GuardrailUnavailable {
        /// `guardrail_name`.
        guardrail: String,
        /// `request` or `answer`.
        place: &'static str,
        /// What went wrong.
        why: String,
    },
    /// A request named a guardrail the config does not define.
    #[error("Unknown guardrail '{0}': no guardrail of that name is configured.")]
    UnknownGuardrail(String),
    /// A deployment sent to `/model/new` or `/model/update` that cannot be served, or a change
    /// the model API cannot make (a file's deployment, `store_model_in_db` off); the text names
    /// each problem by its path in the body.
    #[error("{0}")]
    InvalidDeployment(String),
    /// The deployment's provider needs an API key and the config gives it none (neither
    /// `api_key` nor the provider's environment variable): refused here rather than sent
    /// upstream without credentials. LiteLLM answers 401 (`AuthenticationError`) for it.
    #[error("Deployment {deployment} has no API key: set {env}, or api_key in its litellm_params")]
    DeploymentKeyMissing {
        /// The deployment's id (`model_info.id`).
        deployment: String,
        /// The environment variable its provider reads the key from.
        env: &'static str,
    },
    /// A provider pass-through route (`/bedrock/*`, ...) has no upstream settings or
    /// credentials; the reason names what to set, never a value.
    #[error("The {route} pass-through route is not configured: {why}")]
    PassThroughUnavailable {
        /// The route (`/bedrock/*`).
        route: &'static str,
        /// What is missing.
        why: String,
    },
}

impl ApiError {
    /// HTTP status for this error.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::InvalidJson(_)
            | Self::MissingParam(_)
            | Self::InvalidParam { .. }
            | Self::BodyRead(_)
            | Self::StreamNotSupported
            | Self::UnsupportedParam { .. }
            | Self::UnknownParam(_)
            | Self::GuardrailBlocked { .. }
            | Self::ToolNotAllowed { .. }
            | Self::TooDeep { .. }
            | Self::UnknownGuardrail(_)
            | Self::InvalidDeployment(_) => StatusCode::BAD_REQUEST,
            Self::BodyTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            Self::UriTooLong { .. } => StatusCode::URI_TOO_LONG,
            Self::Overloaded { .. } => StatusCode::SERVICE_UNAVAILABLE,
            Self::Unauthorized(_)
            | Self::KeyRefused(_)
            | Self::ModelNotAllowed { .. }
            | Self::DeploymentKeyMissing { .. }
            | Self::JwtRefused(_) => StatusCode::UNAUTHORIZED,
            Self::JwtUnavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::EndUserBlocked
            | Self::McpNotAllowed(_)
            | Self::NotPermitted(_)
            | Self::AddressNotAllowed(_) => StatusCode::FORBIDDEN,
            // LiteLLM answers 400 for a spent budget; SDKs do not retry it (they retry 429).
            Self::Limited(r) if r.exceeded == Exceeded::Budget => StatusCode::BAD_REQUEST,
            Self::Limited(_) => StatusCode::TOO_MANY_REQUESTS,
            Self::StoreUnavailable
            | Self::CacheUnavailable(_)
            | Self::GuardrailUnavailable { .. } => StatusCode::SERVICE_UNAVAILABLE,
            Self::Conflict(_) => StatusCode::CONFLICT,
            Self::ModelNotFound(_) | Self::RouteNotFound { .. } | Self::NotFound { .. } => {
                StatusCode::NOT_FOUND
            }
            Self::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            Self::BodyTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::ProviderNotSupported { .. }
            | Self::EndpointNotSupported { .. }
            | Self::PassThroughUnavailable { .. } => StatusCode::NOT_IMPLEMENTED,
            Self::UpstreamTimeout(_) | Self::UpstreamIdle(_) => StatusCode::GATEWAY_TIMEOUT,
            Self::UpstreamUnreachable(_) | Self::UpstreamInvalid(_) | Self::McpToolLoop(_) => {
                StatusCode::BAD_GATEWAY
            }
            Self::NoDeployment(RouteError::Cooling { .. }) => StatusCode::SERVICE_UNAVAILABLE,
            Self::NoDeployment(RouteError::AtLimit { .. }) => StatusCode::TOO_MANY_REQUESTS,
            Self::NoDeployment(RouteError::NoTagMatch { .. }) => StatusCode::UNAUTHORIZED,
            Self::NoDeployment(RouteError::Mocked { what, .. }) => match what {
                MockFailure::RateLimit => StatusCode::TOO_MANY_REQUESTS,
                MockFailure::ContextWindow | MockFailure::ContentPolicy => StatusCode::BAD_REQUEST,
                MockFailure::Fallbacks => StatusCode::INTERNAL_SERVER_ERROR,
            },
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// How long the client should wait before trying again (`Retry-After`), when sluice knows.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::NoDeployment(e) => Some(e.retry_in()),
            Self::Limited(r) if !r.retry_after.is_zero() => Some(r.retry_after),
            Self::StoreUnavailable | Self::CacheUnavailable(_) | Self::Overloaded { .. } => {
                Some(Duration::from_secs(1))
            }
            _ => None,
        }
    }

    /// OpenAI's `error.type`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::InvalidJson(_)
            | Self::MissingParam(_)
            | Self::InvalidParam { .. }
            | Self::BodyRead(_)
            | Self::StreamNotSupported
            | Self::ModelNotFound(_)
            | Self::RouteNotFound { .. }
            | Self::MethodNotAllowed(_)
            | Self::BodyTooLarge { .. }
            | Self::UnsupportedParam { .. }
            | Self::UnknownParam(_)
            | Self::NotFound { .. }
            | Self::Conflict(_)
            | Self::GuardrailBlocked { .. }
            | Self::ToolNotAllowed { .. }
            | Self::BodyTimeout(_)
            | Self::UriTooLong { .. }
            | Self::TooDeep { .. }
            | Self::UnknownGuardrail(_)
            | Self::InvalidDeployment(_) => "invalid_request_error",
            // Anthropic's name for the same refusal; OpenAI's SDKs retry any 503.
            Self::Overloaded { .. } => "overloaded_error",
            Self::Unauthorized(_)
            | Self::KeyRefused(_)
            | Self::JwtRefused(_)
            | Self::DeploymentKeyMissing { .. } => "authentication_error",
            Self::JwtUnavailable(_) => "service_unavailable_error",
            Self::ModelNotAllowed { by, .. } => match by {
                SubjectKind::Key => "key_model_access_denied",
                SubjectKind::Team => "team_model_access_denied",
                SubjectKind::User => "user_model_access_denied",
                SubjectKind::EndUser => "end_user_model_access_denied",
                SubjectKind::Organization => "organization_model_access_denied",
                SubjectKind::Tag => "tag_model_access_denied",
            },
            Self::EndUserBlocked
            | Self::McpNotAllowed(_)
            | Self::NotPermitted(_)
            | Self::AddressNotAllowed(_) => "permission_error",
            Self::Limited(r) if r.exceeded == Exceeded::Budget => "budget_exceeded",
            Self::Limited(_) => "rate_limit_error",
            Self::StoreUnavailable
            | Self::CacheUnavailable(_)
            | Self::GuardrailUnavailable { .. } => "service_unavailable_error",
            Self::ProviderNotSupported { .. }
            | Self::EndpointNotSupported { .. }
            | Self::PassThroughUnavailable { .. } => "not_implemented_error",
            Self::UpstreamTimeout(_) | Self::UpstreamIdle(_) => "timeout_error",
            Self::UpstreamUnreachable(_) | Self::UpstreamInvalid(_) | Self::McpToolLoop(_) => {
                "upstream_error"
            }
            Self::NoDeployment(RouteError::Cooling { .. }) => "service_unavailable_error",
            Self::NoDeployment(RouteError::AtLimit { .. }) => "rate_limit_error",
            Self::NoDeployment(RouteError::Mocked { .. }) => "mock_testing_error",
            Self::NoDeployment(RouteError::NoTagMatch { .. }) => "invalid_request_error",
            Self::Internal(_) => "internal_error",
        }
    }

    /// OpenAI's `error.code`: a stable machine-readable reason.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidJson(_) => "invalid_json",
            Self::MissingParam(_) => "missing_required_parameter",
            Self::InvalidParam { .. } => "invalid_value",
            Self::Unauthorized(_) | Self::KeyRefused(KeyRefusal::Unknown) => "invalid_api_key",
            Self::KeyRefused(KeyRefusal::Blocked) => "key_blocked",
            Self::KeyRefused(KeyRefusal::Expired) => "key_expired",
            Self::KeyRefused(KeyRefusal::TeamBlocked) => "team_blocked",
            Self::KeyRefused(KeyRefusal::UserBlocked) => "user_blocked",
            Self::ModelNotAllowed { .. } => "model_not_allowed",
            Self::EndUserBlocked => "end_user_blocked",
            Self::AddressNotAllowed(_) => "ip_not_allowed",
            Self::JwtRefused(_) => "invalid_jwt",
            Self::JwtUnavailable(_) => "jwt_keys_unavailable",
            Self::Limited(r) => match r.exceeded {
                Exceeded::Requests => "rpm_limit_exceeded",
                Exceeded::Tokens => "tpm_limit_exceeded",
                Exceeded::Parallel => "parallel_request_limit_exceeded",
                Exceeded::Budget => "budget_exceeded",
            },
            Self::ModelNotFound(_) => "model_not_found",
            Self::RouteNotFound { .. } => "unknown_url",
            Self::MethodNotAllowed(_) => "method_not_allowed",
            Self::BodyTooLarge { .. } => "request_too_large",
            Self::BodyRead(_) => "body_read_error",
            Self::BodyTimeout(_) => "request_timeout",
            Self::UriTooLong { .. } => "uri_too_long",
            Self::TooDeep { .. } => "json_too_deep",
            Self::Overloaded { .. } => "overloaded",
            Self::StreamNotSupported => "stream_not_supported",
            Self::ProviderNotSupported { .. } => "provider_not_supported",
            Self::UnsupportedParam { .. } => "unsupported_parameter",
            Self::EndpointNotSupported { .. } => "endpoint_not_supported",
            Self::UpstreamTimeout(_) => "upstream_timeout",
            Self::UpstreamUnreachable(_) => "upstream_unreachable",
            Self::UpstreamInvalid(_) => "upstream_invalid_response",
            Self::UpstreamIdle(_) => "upstream_idle_timeout",
            Self::NoDeployment(RouteError::Cooling { .. }) => "no_healthy_deployment",
            Self::NoDeployment(RouteError::AtLimit { .. }) => "deployment_limit_reached",
            Self::NoDeployment(RouteError::Mocked { what, .. }) => what.field(),
            Self::NoDeployment(RouteError::NoTagMatch { .. }) => "no_deployments_with_tag_routing",
            Self::Internal(_) => "internal_error",
            Self::UnknownParam(_) => "unknown_parameter",
            Self::NotFound { .. } => "not_found",
            Self::Conflict(_) => "already_exists",
            Self::StoreUnavailable => "database_unavailable",
            Self::CacheUnavailable(_) => "cache_unavailable",
            Self::PassThroughUnavailable { .. } => "pass_through_not_configured",
            Self::DeploymentKeyMissing { .. } => "deployment_not_configured",
            Self::GuardrailBlocked { .. } | Self::ToolNotAllowed { .. } => "guardrail_blocked",
            Self::GuardrailUnavailable { .. } => "guardrail_unavailable",
            Self::UnknownGuardrail(_) => "unknown_guardrail",
            Self::InvalidDeployment(_) => "invalid_deployment",
            Self::McpNotAllowed(_) => "mcp_server_not_allowed",
            Self::NotPermitted(_) => "not_permitted",
            Self::McpToolLoop(_) => "mcp_tool_loop_limit",
        }
    }

    /// OpenAI's `error.param`: the request parameter at fault, if one is.
    pub fn param(&self) -> Option<&str> {
        match self {
            Self::MissingParam(p) | Self::InvalidParam { param: p, .. } => Some(p),
            Self::UnsupportedParam { param, .. } | Self::UnknownParam(param) => Some(param),
            Self::ModelNotFound(_)
            | Self::ProviderNotSupported { .. }
            | Self::ModelNotAllowed { .. } => Some("model"),
            Self::EndUserBlocked => Some("user"),
            Self::StreamNotSupported => Some("stream"),
            Self::UnknownGuardrail(_) => Some("guardrails"),
            Self::McpNotAllowed(_) => Some("tools"),
            Self::InvalidJson(_)
            | Self::NotPermitted(_)
            | Self::AddressNotAllowed(_)
            | Self::JwtRefused(_)
            | Self::JwtUnavailable(_)
            | Self::InvalidDeployment(_)
            | Self::GuardrailBlocked { .. }
            | Self::ToolNotAllowed { .. }
            | Self::GuardrailUnavailable { .. }
            | Self::Unauthorized(_)
            | Self::DeploymentKeyMissing { .. }
            | Self::RouteNotFound { .. }
            | Self::MethodNotAllowed(_)
            | Self::BodyTooLarge { .. }
            | Self::BodyRead(_)
            | Self::BodyTimeout(_)
            | Self::UriTooLong { .. }
            | Self::TooDeep { .. }
            | Self::Overloaded { .. }
            | Self::EndpointNotSupported { .. }
            | Self::UpstreamTimeout(_)
            | Self::UpstreamUnreachable(_)
            | Self::UpstreamInvalid(_)
            | Self::UpstreamIdle(_)
            | Self::NoDeployment(_)
            | Self::Internal(_)
            | Self::KeyRefused(_)
            | Self::Limited(_)
            | Self::NotFound { .. }
            | Self::Conflict(_)
            | Self::StoreUnavailable
            | Self::CacheUnavailable(_)
            | Self::PassThroughUnavailable { .. }
            | Self::McpToolLoop(_) => None,
        }
    }

    /// The JSON body `{"error": {"message", "type", "param", "code"}}`.
    pub fn body(&self) -> Bytes {
        error_body(&self.to_string(), self.kind(), self.param(), self.code())
    }

    /// The error body in the client's dialect.
    pub fn body_in(&self, dialect: Dialect) -> Bytes {
        match dialect {
            Dialect::OpenAi => self.body(),
            Dialect::Anthropic => {
                anthropic_error_body(anthropic_error_type(self.status()), &self.to_string())
            }
            Dialect::Gemini => google_error_body(self.status(), &self.to_string()),
            Dialect::Converse => aws_error_body(aws_error_type(self.status()), &self.to_string()),
        }
    }
}

/// Google's `error.status` for an HTTP status (google.rpc.Code names), as the Gemini API
/// answers with them.
pub fn google_status(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 | 413 | 422 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        409 => "ABORTED",
        429 => "RESOURCE_EXHAUSTED",
        499 => "CANCELLED",
        501 => "UNIMPLEMENTED",
        503 | 529 => "UNAVAILABLE",
        504 | 408 => "DEADLINE_EXCEEDED",
        400..=499 => "FAILED_PRECONDITION",
        _ => "INTERNAL",
    }
}

/// Build a Google-shaped error body `{"error":{"code","message","status"}}`: what the
/// google-genai SDK reads into its `APIError`.
pub fn google_error_body(status: StatusCode, message: &str) -> Bytes {
    let body = serde_json::json!({
        "error": {"code": status.as_u16(), "message": message, "status": google_status(status)},
    });
    Bytes::from(body.to_string())
}

/// The AWS error code (`x-amzn-ErrorType`, `__type`) for an HTTP status, as Bedrock's runtime
/// names its errors: botocore raises the exception class of that name.
pub fn aws_error_type(status: StatusCode) -> &'static str {
    match status.as_u16() {
        401 | 403 => "AccessDeniedException",
        404 => "ResourceNotFoundException",
        408 | 504 => "ModelTimeoutException",
        424 => "ModelErrorException",
        429 => "ThrottlingException",
        503 | 529 => "ServiceUnavailableException",
        400..=499 => "ValidationException",
        _ => "InternalServerException",
    }
}

/// The header botocore reads an error's code from first.
pub const AWS_ERROR_TYPE: http::HeaderName = http::HeaderName::from_static("x-amzn-errortype");

/// Name an error's AWS type on an answer to a Converse client (`x-amzn-errortype`), as every
/// AWS service does, so that botocore raises the exception class of that name.
pub fn mark_aws_error(dialect: Dialect, status: StatusCode, headers: &mut http::HeaderMap) {
    if dialect == Dialect::Converse {
        headers.insert(
            AWS_ERROR_TYPE,
            http::HeaderValue::from_static(aws_error_type(status)),
        );
    }
}

/// Build an AWS JSON error body `{"__type", "message"}` (the type is also sent in the
/// `x-amzn-ErrorType` header).
pub fn aws_error_body(kind: &str, message: &str) -> Bytes {
    let body = serde_json::json!({"__type": kind, "message": message});
    Bytes::from(body.to_string())
}

/// Anthropic's `error.type` for a status, as its API documents them.
pub fn anthropic_error_type(status: StatusCode) -> &'static str {
    match status.as_u16() {
        401 => "authentication_error",
        402 => "billing_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        504 => "timeout_error",
        503 | 529 => "overloaded_error",
        400..=499 => "invalid_request_error",
        _ => "api_error",
    }
}

/// Build an Anthropic-shaped error body `{"type":"error","error":{"type","message"}}`; also the
/// data of the `error` event that ends a broken Anthropic stream.
pub fn anthropic_error_body(kind: &str, message: &str) -> Bytes {
    let body = serde_json::json!({
        "type": "error",
        "error": {"type": kind, "message": message},
    });
    Bytes::from(body.to_string())
}

/// Build an OpenAI-shaped error body. Also used for the error event that ends a broken stream.
pub fn error_body(message: &str, kind: &str, param: Option<&str>, code: &str) -> Bytes {
    #[derive(serde::Serialize)]
    struct Inner<'a> {
        message: &'a str,
        #[serde(rename = "type")]
        kind: &'a str,
        param: Option<&'a str>,
        code: &'a str,
    }
    #[derive(serde::Serialize)]
    struct Outer<'a> {
        error: Inner<'a>,
    }
    let outer = Outer {
        error: Inner {
            message,
            kind,
            param,
            code,
        },
    };
    // Serialising plain strings into a Vec cannot fail.
    Bytes::from(serde_json::to_vec(&outer).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape_and_status() {
        let e = ApiError::ModelNotFound("gpt-x".into());
        assert_eq!(e.status(), StatusCode::NOT_FOUND);
        let v: serde_json::Value = serde_json::from_slice(&e.body()).unwrap();
        assert_eq!(v["error"]["type"], "invalid_request_error");
        assert_eq!(v["error"]["code"], "model_not_found");
        assert_eq!(v["error"]["param"], "model");
        assert!(v["error"]["message"].as_str().unwrap().contains("gpt-x"));
    }

    #[test]
    fn timeouts_and_unreachable() {
        assert_eq!(
            ApiError::UpstreamTimeout(Duration::from_secs(2)).status(),
            StatusCode::GATEWAY_TIMEOUT
        );
        assert_eq!(
            ApiError::UpstreamUnreachable("refused".into()).status(),
            StatusCode::BAD_GATEWAY
        );
        assert_eq!(
            ApiError::BodyTooLarge { limit: 10 }.status(),
            StatusCode::PAYLOAD_TOO_LARGE
        );
    }
}
