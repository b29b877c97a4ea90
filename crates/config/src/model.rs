//! The validated configuration: what the rest of sluice reads. Built only by
//! [`crate::load_str`] / [`crate::load_file`], so every value here has already
//! been checked (a deployment always has a provider it can call, a base URL that parses, ...).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use sluice_core::price::{ImagePrices, Price};
use sluice_core::rules::{ModelRules, RuleBook};
use sluice_core::{NodeAddress, RedisTarget, Secret};
use sluice_net::server::ConnLimits;
use sluice_providers::passthrough::{Route, Unavailable};
use sluice_providers::{DeploymentSpec, Provider, Timeouts, UpstreamConfig};
use sluice_routing::{FailureKind, HedgeAfter, OnDisconnect, Strategy, TagFiltering};

use crate::prices::PriceTable;

/// The whole validated config.
#[derive(Debug, Clone)]
pub struct Config {
    /// Every deployment, in file order. Deployments sharing `model_name` form a model group.
    pub deployments: Vec<Deployment>,
    /// `general_settings`.
    pub general: GeneralSettings,
    /// `router_settings` (parsed now; routing behaviour comes with the routing work).
    pub router: RouterSettings,
    /// `litellm_settings`.
    pub litellm: LitellmSettings,
    /// Logging callbacks and tracing (`litellm_settings.*callback*` + `callback_settings`).
    pub callbacks: CallbackSettings,
    /// The provider pass-through routes (`/anthropic/*`, `/bedrock/*`, ...).
    pub pass_through: PassThroughSettings,
    /// `mcp_servers`: the tool servers behind `/mcp`.
    pub mcp: sluice_mcp::McpSettings,
    /// `guardrails:`, built, in file order.
    pub guardrails: Vec<sluice_guardrails::Guardrail>,
    /// `search_tools:`, in file order.
    pub search_tools: Vec<SearchTool>,
}

/// The provider pass-through routes: each route's upstream (from a deployment marked
/// `use_in_pass_through: true`, else the provider's environment variables) or why it has none,
/// how long their calls may take, and the prices their answers are charged at (the same table
/// deployments are priced from, looked up per request by the model the request names).
#[derive(Debug, Clone)]
pub struct PassThroughSettings {
    /// One entry per route, in `Route::ALL` order.
    pub upstreams: Vec<(Route, Result<UpstreamConfig, Unavailable>)>,
    /// `router_settings.timeout` / `stream_timeout` (LiteLLM's 600 s by default).
    pub timeouts: Timeouts,
    /// Model name → price.
    pub prices: PriceTable,
}

/// Every logging callback and trace exporter the config turns on.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CallbackSettings {
    /// The sinks, one per distinct callback name.
    pub sinks: Vec<SinkSettings>,
    /// `general_settings.store_prompts_in_spend_logs` (and `turn_off_message_logging` not
    /// set): requests keep their bodies for the spend log too.
    pub spend_log_content: bool,
}

impl CallbackSettings {
    /// Whether an OpenTelemetry exporter is on (requests then carry trace ids).
    pub fn tracing(&self) -> bool {
        self.sinks
            .iter()
            .any(|s| matches!(s.kind, SinkKind::Otel { .. }))
    }

    /// Whether any sink wants prompt/completion content.
    pub fn content(&self) -> bool {
        self.spend_log_content || self.sinks.iter().any(|s| s.message_logging)
    }
}

/// One callback sink.
#[derive(Debug, Clone, PartialEq)]
pub struct SinkSettings {
    /// The name it was configured under (metrics label, readiness entry).
    pub name: String,
    /// Send successful requests.
    pub on_success: bool,
    /// Send failed requests.
    pub on_failure: bool,
    /// Records per batch (`batch_size`).
    pub batch_size: usize,
    /// Longest a record waits for its batch to fill (`flush_interval`).
    pub flush_interval: Duration,
    /// Records waiting for the sink before they go to the spill (`max_queue_size`).
    pub max_queue: usize,
    /// Records held while the sink is down before the oldest are dropped (`spill_limit`).
    pub spill_limit: usize,
    /// Include prompt and completion content (`message_logging: true`, and
    /// `turn_off_message_logging` not set).
    pub message_logging: bool,
    /// Where and how to send.
    pub kind: SinkKind,
}

impl SinkKind {
    /// Short type name, for `check-config`.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::Webhook { .. } => "webhook",
            Self::Langfuse { .. } => "langfuse",
            Self::LangSmith { .. } => "langsmith",
            Self::S3 { .. } => "s3",
            Self::Gcs { .. } => "gcs_bucket",
            Self::Otel { grpc: true, .. } => "otlp/grpc",
            Self::Otel { grpc: false, .. } => "otlp/http",
        }
    }

    /// Where it sends, without a query string (which may carry a token).
    pub fn destination(&self) -> String {
        let bare = |u: &str| u.split(['?', '#']).next().unwrap_or_default().to_owned();
        match self {
            Self::Webhook { url, .. } => bare(url),
            Self::Langfuse { host, .. } => bare(host),
            Self::LangSmith {
                endpoint, project, ..
            } => {
                format!("{} (project {project})", bare(endpoint))
            }
            Self::S3 {
                endpoint,
                bucket,
                prefix,
                ..
            } => format!("{}/{bucket}/{prefix}", bare(endpoint)),
            Self::Gcs {
                api_base,
                bucket,
                prefix,
                ..
            } => format!("{}/{bucket}/{prefix}", bare(api_base)),
            Self::Otel { endpoint, .. } => bare(endpoint),
        }
    }
}

/// The sink types sluice can send to.
#[derive(Debug, Clone, PartialEq)]
pub enum SinkKind {
    /// Generic HTTP JSON sink (`webhook`, LiteLLM's `generic_api` / `generic`).
    Webhook {
        /// Where to POST.
        url: String,
        /// Extra headers (may carry credentials).
        headers: Vec<(String, Secret)>,
        /// One JSON array per batch, or one JSON object per line.
        ndjson: bool,
    },
    /// Langfuse's ingestion API.
    Langfuse {
        /// `LANGFUSE_HOST`.
        host: String,
        /// `LANGFUSE_PUBLIC_KEY`.
        public_key: Secret,
        /// `LANGFUSE_SECRET_KEY`.
        secret_key: Secret,
    },
    /// LangSmith's runs batch API.
    LangSmith {
        /// `LANGSMITH_ENDPOINT`.
        endpoint: String,
        /// `LANGSMITH_API_KEY`.
        api_key: Secret,
        /// `LANGSMITH_PROJECT`.
        project: String,
    },
    /// Any S3-compatible store: one object per batch.
    S3 {
        /// Bucket.
        bucket: String,
        /// Region (SigV4 scope).
        region: String,
        /// Endpoint URL (default `https://s3.<region>.amazonaws.com`).
        endpoint: String,
        /// Access key id.
        access_key: Secret,
        /// Secret access key.
        secret_key: Secret,
        /// Session token, for temporary credentials.
        session_token: Option<Secret>,
        /// Key prefix (`s3_path`).
        prefix: String,
    },
    /// A Google Cloud Storage bucket: one object per batch, uploaded through the JSON API
    /// with a service account's OAuth token.
    Gcs {
        /// Bucket (`gcs_bucket_name` before its first `/`).
        bucket: String,
        /// Object name prefix (the rest of `gcs_bucket_name`, with a trailing `/`).
        prefix: String,
        /// The service-account key file's JSON (`gcs_path_service_account`).
        credentials: Secret,
        /// Where the JSON API lives (`https://storage.googleapis.com`, or an emulator's URL).
        api_base: String,
    },
    /// OpenTelemetry traces over OTLP.
    Otel {
        /// Full URL of the traces endpoint (HTTP: `.../v1/traces`; gRPC: the server root).
        endpoint: String,
        /// gRPC instead of HTTP/protobuf.
        grpc: bool,
        /// `OTEL_EXPORTER_OTLP_HEADERS` (may carry credentials).
        headers: Vec<(String, Secret)>,
        /// `service.name`.
        service_name: String,
    },
}

/// One upstream deployment (`model_list[i]`).
#[derive(Debug, Clone)]
pub struct Deployment {
    /// The public model (group) name clients ask for.
    pub model_name: String,
    /// Stable id: `model_info.id`, else derived from the deployment's contents.
    pub id: String,
    /// Its upstream: provider, model, base URL, keys, headers and what only its provider
    /// reads (validated by the provider's module).
    pub upstream: UpstreamConfig,
    /// `rpm` limit of the deployment.
    pub rpm: Option<u64>,
    /// `tpm` limit of the deployment.
    pub tpm: Option<u64>,
    /// `weight` for weighted routing.
    pub weight: Option<f64>,
    /// `timeout`: the whole upstream call, non-stream.
    pub timeout: Option<Duration>,
    /// `stream_timeout`: time to the first chunk of a stream.
    pub stream_timeout: Option<Duration>,
    /// `stream_idle_timeout`: longest gap between two chunks of a stream.
    pub stream_idle_timeout: Option<Duration>,
    /// `max_retries`.
    pub max_retries: Option<u32>,
    /// `num_retries`: retries after this deployment fails, in place of the router's
    /// `num_retries` (a request's own `num_retries` still wins), as LiteLLM reads it.
    pub num_retries: Option<u32>,
    /// `input_cost_per_token` override, in USD.
    pub input_cost_per_token: Option<f64>,
    /// `output_cost_per_token` override, in USD.
    pub output_cost_per_token: Option<f64>,
    /// Per-unit price overrides (`output_cost_per_image`, `input_cost_per_second`, ...).
    pub unit_costs: UnitCosts,
    /// `model_info`.
    pub model_info: ModelInfo,
    /// USD per token, resolved once at load from the price table (`model_info.base_model`,
    /// `provider/model`, `model`) and the cost overrides above, so a request's cost is
    /// arithmetic only. All zero when nothing is known (a warning says so).
    pub price: Price,
    /// Its image prices by quality and size (LiteLLM's `hd/1024-x-1792/dall-e-3` entries),
    /// one of which a request picks; empty for most models.
    pub image_prices: ImagePrices,
    /// What its upstream model accepts, resolved at load from the registry and sluice's
    /// own rule table (`rules`).
    pub rules: ModelRules,
    /// For a wildcard deployment (`anthropic/*`), the rules of each model it is asked for.
    pub rule_book: Option<RuleBook>,
    /// `use_in_pass_through`: its upstream and credentials serve its provider's pass-through
    /// route (the first such deployment of a provider does).
    pub use_in_pass_through: bool,
    /// `tags`: what tag-based routing (`router_settings.enable_tag_filtering`) matches a
    /// request's tags against; `default` marks the deployments of untagged requests. Shared,
    /// as the routing table's member holds the same list.
    pub tags: Arc<[Arc<str>]>,
}

impl Deployment {
    /// Which provider serves it.
    pub fn provider(&self) -> Provider {
        self.upstream.provider
    }

    /// How long an attempt on it may take, defaulted as LiteLLM does.
    pub fn timeouts(&self) -> Timeouts {
        Timeouts::new(self.timeout, self.stream_timeout, self.stream_idle_timeout)
    }

    /// What the providers crate makes ready to call.
    pub fn spec(&self) -> DeploymentSpec<'_> {
        DeploymentSpec {
            id: &self.id,
            model_name: &self.model_name,
            upstream: &self.upstream,
            timeouts: self.timeouts(),
            price: self.price,
            image_prices: &self.image_prices,
            num_retries: self.num_retries,
            rules: self.rules,
            rule_book: self.rule_book.as_ref(),
        }
    }
}

/// Active health checks (LiteLLM's `background_health_checks`, `health_check_interval`,
/// `background_health_check_model_groups`, `health_check_concurrency`, and sluice's spend cap).
#[derive(Debug, Clone, PartialEq)]
pub struct HealthChecks {
    /// `health_check_interval` (default 300 s): time between two rounds of the fleet.
    pub interval: Duration,
    /// `background_health_check_model_groups`: only these groups are probed (`None`: all).
    pub groups: Option<Vec<String>>,
    /// `health_check_concurrency` (default 8): probes in flight at once.
    pub concurrency: usize,
    /// `health_check_max_spend_per_day` (sluice's, default 1 USD): what paid probes may cost
    /// in a UTC day; past it only free probes (model lists) run.
    pub max_spend_per_day: f64,
}

/// Default `health_check_interval`, LiteLLM's.
pub const DEFAULT_HEALTH_CHECK_INTERVAL: Duration = Duration::from_secs(300);

/// A deployment's own health check settings (LiteLLM's `model_info.health_check_*`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HealthCheckInfo {
    /// `health_check_model`: the model a probe asks for (a wildcard deployment's stand-in).
    pub model: Option<String>,
    /// `health_check_timeout`: how long a probe may take (default: 60 s, LiteLLM's).
    pub timeout: Option<Duration>,
    /// `disable_background_health_check`: never probed.
    pub disabled: bool,
    /// `health_check_max_tokens`: the token limit of a request probe (default 16).
    pub max_tokens: Option<u32>,
}

/// `model_info` of a deployment.
#[derive(Debug, Clone, Default)]
pub struct ModelInfo {
    /// `model_info.id`, if given.
    pub id: Option<String>,
    /// `model_info.mode` (`chat`, `embedding`, `completion`, `responses`, ...).
    pub mode: Option<String>,
    /// `model_info.base_model`, used for pricing when the upstream name is an alias.
    pub base_model: Option<String>,
    /// `model_info.db_model`: it came from the database (`/model/new`), not the file; set by
    /// sluice on the entries it appends, as LiteLLM marks them.
    pub db_model: bool,
    /// `model_info.access_groups`: names a key's, team's or user's `models` list may give
    /// instead of the group's own name (LiteLLM's model access groups), so that granting a
    /// family of models is one entry that follows the config.
    pub access_groups: Vec<Arc<str>>,
    /// Its health check settings.
    pub health_check: HealthCheckInfo,
}

/// Default `max_url_length`: twice nginx's default header buffer; an API URL is far shorter.
pub const DEFAULT_MAX_URL_LENGTH: usize = 16 * 1024;

/// Default `body_read_timeout`: generous for a JSON body on a slow link, short enough that a
/// trickled body does not hold a connection for long.
pub const DEFAULT_BODY_READ_TIMEOUT: Duration = Duration::from_secs(60);

/// JWT authentication of API calls (`enable_jwt_auth`, `litellm_jwtauth`, LiteLLM's
/// `JWT_*` variables): an identity provider's tokens stand in for virtual keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JwtAuth {
    /// `JWT_PUBLIC_KEY_URL`: JWK Set or OpenID discovery URLs, tried in order.
    pub key_urls: Vec<String>,
    /// `JWT_AUDIENCE`: a token's `aud` must name one (none: not checked).
    pub audiences: Vec<String>,
    /// `JWT_ISSUER`: a token's `iss` must be it (none: not checked).
    pub issuer: Option<String>,
    /// `admin_jwt_scope` (default `litellm_proxy_admin`): a token with it acts as the master key.
    pub admin_scope: String,
    /// `team_id_jwt_field`: the claim naming the caller's team (dots reach into objects).
    pub team_id_field: Option<String>,
    /// `team_id_default`: the team of a token without one.
    pub team_id_default: Option<String>,
    /// `user_id_jwt_field`: the claim naming the caller's user.
    pub user_id_field: Option<String>,
    /// `org_id_jwt_field`: the claim naming the caller's organization.
    pub org_id_field: Option<String>,
    /// `public_key_ttl` (default 600 s): how long a fetched key set is used before a refresh.
    pub public_key_ttl_secs: u64,
    /// `public_key_stale_ttl` (default 3600 s): how long past that it serves while the provider
    /// is unreachable; then tokens are refused (503).
    pub public_key_stale_ttl_secs: u64,
    /// `leeway` (default 0 s): clock skew allowed on `exp`, `nbf` and `iat`.
    pub leeway_secs: u64,
    /// `end_user_id_jwt_field`: the claim naming the end user a call is for (spend, budgets).
    pub end_user_id_field: Option<String>,
    /// `user_roles_jwt_field` with `user_allowed_roles`: a token must carry one of these roles.
    pub user_roles_field: Option<String>,
    /// `user_allowed_roles`.
    pub user_allowed_roles: Option<Vec<String>>,
    /// `roles_jwt_field` with `role_mappings`: the provider's roles as LiteLLM's.
    pub roles_field: Option<String>,
    /// `role_mappings`: (the provider's role, the role it acts as).
    pub role_mappings: Vec<(String, JwtRole)>,
    /// `object_id_jwt_field`: the team (role `team`) or user (role `internal_user`) id.
    pub object_id_field: Option<String>,
    /// `enforce_rbac`: a token whose roles map to none is refused.
    pub enforce_rbac: bool,
    /// `scope_mappings`: what each scope grants.
    pub scope_mappings: Vec<ScopeMapping>,
    /// `enforce_scope_based_access`: a token reaches only its scopes' models and routes.
    pub enforce_scope_based_access: bool,
    /// `team_allowed_routes`: what a team's or user's token may call (LiteLLM's route groups
    /// or paths).
    pub team_allowed_routes: Vec<String>,
    /// `team_id_upsert`: a team a token names that does not exist is made.
    pub team_id_upsert: bool,
    /// `user_id_upsert`: a user a token names that does not exist is made.
    pub user_id_upsert: bool,
}

/// A role a JWT may act as (LiteLLM's `RBAC_ROLES`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JwtRole {
    /// `proxy_admin`: the master key's rights.
    ProxyAdmin,
    /// `team`: the object id names the team.
    Team,
    /// `internal_user`: the object id names the user.
    InternalUser,
}

/// One of `scope_mappings`: a scope and what it grants (LiteLLM's `ScopeMapping`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopeMapping {
    /// The scope, as in the token's `scope` / `scp`.
    pub scope: String,
    /// Model groups (or access groups) it grants.
    pub models: Vec<String>,
    /// Routes it grants (LiteLLM's route groups or paths; none: no route limit of its own).
    pub routes: Vec<String>,
}

/// LiteLLM's default `team_allowed_routes`.
pub const DEFAULT_TEAM_ALLOWED_ROUTES: &[&str] = &[
    "openai_routes",
    "info_routes",
    "mcp_routes",
    "/v1/messages",
    "/v1/messages/count_tokens",
];

impl Default for JwtAuth {
    fn default() -> Self {
        Self {
            key_urls: Vec::new(),
            audiences: Vec::new(),
            issuer: None,
            admin_scope: "litellm_proxy_admin".into(),
            team_id_field: None,
            team_id_default: None,
            user_id_field: None,
            org_id_field: None,
            public_key_ttl_secs: 600,
            public_key_stale_ttl_secs: 3600,
            leeway_secs: 0,
            end_user_id_field: None,
            user_roles_field: None,
            user_allowed_roles: None,
            roles_field: None,
            role_mappings: Vec::new(),
            object_id_field: None,
            enforce_rbac: false,
            scope_mappings: Vec::new(),
            enforce_scope_based_access: false,
            team_allowed_routes: DEFAULT_TEAM_ALLOWED_ROUTES
                .iter()
                .map(|r| (*r).to_owned())
                .collect(),
            team_id_upsert: false,
            user_id_upsert: false,
        }
    }
}

/// LiteLLM's alerts (`general_settings.alerting`): where they go and which are sent.
#[derive(Debug, Clone, PartialEq)]
pub struct Alerting {
    /// `slack`: `SLACK_WEBHOOK_URL` (a Slack incoming webhook; the URL is a credential).
    pub slack: Option<Secret>,
    /// `ms_teams`: `MS_TEAMS_WEBHOOK_URL` (an Adaptive Card per alert).
    pub ms_teams: Option<Secret>,
    /// `webhook`: `WEBHOOK_URL` (LiteLLM's `WebhookEvent` JSON per alert).
    pub webhook: Option<Secret>,
    /// `email`: an SMTP server (LiteLLM's `SMTP_*` variables).
    pub email: Option<Smtp>,
    /// `budget_alerts` among `alert_types` (default: on).
    pub budget: bool,
    /// `outage_alerts` or `cooldown_deployment` among `alert_types` (default: on): a
    /// deployment going into cooldown, and back.
    pub outage: bool,
    /// `alert_to_webhook_url`: Slack-format webhooks that receive one type of alert instead of
    /// `SLACK_WEBHOOK_URL`.
    pub routed: std::collections::BTreeMap<AlertKind, Vec<Secret>>,
    /// `spend_reports` among `alert_types` (default: on): spend by team, tag, model and key
    /// every `spend_report_frequency`, and each calendar month's.
    pub spend_reports: bool,
    /// `spend_report_frequency` (default `7d`): the length of a spend report's window.
    pub spend_report_frequency: std::time::Duration,
    /// `daily_reports` among `alert_types` (default: on): the deployments with the most
    /// failed requests and the slowest, every `alerting_args.daily_report_frequency`.
    pub daily_reports: bool,
    /// `alerting_args.daily_report_frequency` (or `SLACK_DAILY_REPORT_FREQUENCY`; default
    /// 12 h).
    pub daily_report_frequency: std::time::Duration,
}

impl Default for Alerting {
    fn default() -> Self {
        Self {
            slack: None,
            ms_teams: None,
            webhook: None,
            email: None,
            budget: true,
            outage: true,
            routed: std::collections::BTreeMap::new(),
            spend_reports: true,
            spend_report_frequency: std::time::Duration::from_secs(7 * 86_400),
            daily_reports: true,
            daily_report_frequency: std::time::Duration::from_secs(12 * 3_600),
        }
    }
}

/// The alert types sluice sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AlertKind {
    /// `budget_alerts`: soft budget crossed, 15% and 5% of the budget left, budget crossed.
    Budget,
    /// `outage_alerts` / `cooldown_deployment`: a deployment into cooldown, and recovered.
    Outage,
    /// `spend_reports` and `daily_reports`.
    Report,
}

/// An SMTP server for alert e-mail.
#[derive(Debug, Clone, PartialEq)]
pub struct Smtp {
    /// `SMTP_HOST`.
    pub host: String,
    /// `SMTP_PORT` (default 587).
    pub port: u16,
    /// `SMTP_USERNAME`: with a password, the login (AUTH PLAIN/LOGIN).
    pub username: Option<String>,
    /// `SMTP_PASSWORD`.
    pub password: Option<Secret>,
    /// `SMTP_SENDER_EMAIL`: the From address.
    pub sender: String,
    /// `SMTP_TLS` (default true): STARTTLS, required; false: plain text (a local relay).
    pub starttls: bool,
    /// `SMTP_CA_FILE` (sluice's own): a PEM certificate authority trusted for the SMTP
    /// server besides the public ones (a private mail relay's).
    pub ca_file: Option<std::path::PathBuf>,
}

/// `general_settings`.
#[derive(Debug, Clone)]
pub struct GeneralSettings {
    /// `master_key`: when set, every inference route needs it (or, later, a virtual key).
    pub master_key: Option<Secret>,
    /// `database_url` (or `DATABASE_URL`): PostgreSQL for fleets; parsed now, used by the store.
    pub database_url: Option<Secret>,
    /// Largest request body accepted, in bytes (`max_request_size_mb`, default 32 MiB).
    pub max_request_body_bytes: usize,
    /// `proxy_batch_write_at`: seconds between spend-log batch writes.
    pub proxy_batch_write_at: Option<Duration>,
    /// `litellm_headers` (sluice's, default true): answers carry LiteLLM's `x-litellm-*`
    /// headers beside sluice's own; off saves their cost (docs/benchmarks.md) where no client
    /// reads them.
    pub litellm_headers: bool,
    /// `disable_admin_ui` (or LiteLLM's `DISABLE_ADMIN_UI` environment variable): no console at
    /// `/ui`, every path under it a 404.
    pub disable_admin_ui: bool,
    /// `store_model_in_db` (or LiteLLM's `STORE_MODEL_IN_DB` environment variable): deployments
    /// added with `/model/new` (or the console) are kept in the database and served beside
    /// the file's, on every instance, without a restart.
    pub store_model_in_db: bool,
    /// LiteLLM's `UI_USERNAME` (default `admin`) and `UI_PASSWORD` environment variables: the
    /// console's admin sign-in. Without a password, the master key is the admin's password.
    pub ui_username: String,
    /// `UI_PASSWORD`.
    pub ui_password: Option<Secret>,
    /// Single sign-on to the console over OpenID Connect, from LiteLLM's `GENERIC_*`
    /// environment variables; `None` without `GENERIC_CLIENT_ID`.
    pub sso: Option<Sso>,
    /// `allow_client_side_credentials` (LiteLLM's key): a request body may name its own
    /// `api_base` / `base_url`, `api_key` and `extra_headers`. Off: such a body is refused (400
    /// naming the field), because a caller who picks the upstream can point the gateway at any
    /// host.
    pub allow_client_side_credentials: bool,
    /// `client_side_api_base_allowlist`: host names, addresses and CIDR blocks a client-supplied
    /// `api_base` may reach although they are internal (loopback, private, link-local, ...).
    pub client_side_api_base_allowlist: sluice_net::ssrf::Allowlist,
    /// `allowed_ips` (LiteLLM's key): only clients at these addresses or in these CIDR blocks
    /// may call the gateway (health probes and `/metrics` excepted). `None`: anyone.
    pub allowed_ips: Option<sluice_net::networks::Networks>,
    /// `use_x_forwarded_for` and `trusted_proxy_ranges`: whether a client's address is read
    /// from `X-Forwarded-For`, and past which proxies.
    pub forwarded: sluice_net::networks::Forwarded,
    /// `alerting`, `alert_types`, `alert_to_webhook_url`: budget alerts and where they go.
    pub alerting: Option<Alerting>,
    /// `enable_jwt_auth` with `litellm_jwtauth`: JWTs accepted in place of virtual keys.
    pub jwt: Option<JwtAuth>,
    /// `background_health_checks` and its settings: deployments probed on an interval by one
    /// instance of a fleet, the verdicts shared by all (`None`: health comes from traffic).
    pub health_checks: Option<HealthChecks>,
    /// `key_management_system` with `key_management_settings`: the secret manager the
    /// config's `os.environ/` references are read from (`sluice-secrets`). Read at startup,
    /// before the rest of the config is resolved; kept here so a reload can see it changed.
    pub key_management: Option<sluice_secrets::Settings>,
    /// `ssl_certfile_path` / `ssl_keyfile_path` (LiteLLM's names; `--tls-cert` / `--tls-key`
    /// win): serve HTTPS with this PEM certificate chain and private key.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// Connection limits against hostile clients (`max_request_headers`,
    /// `max_request_header_size_kb`, `header_read_timeout`, `max_connections`,
    /// `max_connection_rate_per_ip`): read when the server starts, not on reload.
    pub connections: ConnLimits,
    /// `max_url_length`: longest request URL (path and query), in bytes; longer is 414.
    pub max_url_length: usize,
    /// `max_messages`: most entries of a body's `messages` list; more is 400. Off by default.
    pub max_messages: Option<usize>,
    /// `body_read_timeout`: longest a client may take to send a JSON body; then 408.
    pub body_read_timeout: Duration,
    /// `max_in_flight_requests`: requests in flight at once (streams until they end), split
    /// over the workers; past it requests are shed with 503. Off by default.
    pub max_in_flight_requests: Option<usize>,
    /// `max_memory_mb`: resident memory past which requests are shed with 503. Off by default.
    pub max_memory_bytes: Option<u64>,
    /// `store_prompts_in_spend_logs` (LiteLLM's key): each spend log keeps the request's
    /// messages and the answer (64 KB of each at most), for the console's request detail.
    /// Off by default: prompts are the users' data. `turn_off_message_logging` wins.
    pub store_prompts_in_spend_logs: bool,
    /// `spend_journal` (sluice's own key): when a request's spend record reaches the crash
    /// journal (docs/reliability.md).
    pub spend_journal: SpendJournalMode,
    /// `store_responses` (sluice's key, default true): Responses API answers asked with
    /// `store` (OpenAI's default) are kept, sealed, for `previous_response_id`, retrieval and
    /// conversations. Needs a database and the master key (or `LITELLM_SALT_KEY`) to seal with.
    pub store_responses: bool,
    /// `responses_retention_days` (default 30, as OpenAI keeps them): how long a kept answer
    /// lasts.
    pub responses_retention_days: u32,
    /// `maximum_spend_logs_retention_period` (LiteLLM's key, `7d`, `24h`, `60m`, `3600s`):
    /// spend logs older than this are removed in the background (PostgreSQL drops whole days,
    /// so it keeps up to a day more for periods of a day or longer). None (the default) keeps
    /// every log. The daily rollups the spend pages read are kept.
    pub spend_logs_retention: Option<Duration>,
    /// `maximum_spend_logs_retention_interval` (LiteLLM's key, same format; default a day):
    /// how often retention runs.
    pub spend_logs_retention_interval: Duration,
    /// `pass_through_endpoints` (LiteLLM's key): routes of the operator's own, forwarded to
    /// their targets.
    pub pass_through_endpoints: Vec<CustomRoute>,
}

/// One of `general_settings.pass_through_endpoints`: a path on the gateway forwarded to a
/// target, as LiteLLM declares them.
#[derive(Debug, Clone)]
pub struct CustomRoute {
    /// The gateway's path (`/bria`), without a trailing `/`.
    pub path: String,
    /// Where it goes (`https://engine.prod.bria-api.com`), without a trailing `/`.
    pub target: String,
    /// Headers sent with every call (lower-case names; values may hold keys).
    pub headers: Vec<(String, Secret)>,
    /// The client's headers go along too (never its credentials, nor hop-by-hop ones).
    pub forward_headers: bool,
    /// Paths below `path` are forwarded below `target`; else only `path` itself is served.
    pub include_subpath: bool,
    /// Query parameters sent unless the client gives them.
    pub default_query: Vec<(String, String)>,
    /// The target URL's own query parameters are kept beside the client's.
    pub merge_query_params: bool,
    /// USD charged per request.
    pub cost_per_request: f64,
    /// Longest a call may take.
    pub timeout: Duration,
    /// Callers need a virtual key (or the master key); `false` opens the route to anyone.
    pub auth: bool,
    /// The methods served (upper case); empty: all.
    pub methods: Vec<String>,
}

/// One of `search_tools`: a web search API served at `/v1/search/{name}` (LiteLLM's key).
#[derive(Debug, Clone)]
pub struct SearchTool {
    /// `search_tool_name`: the path's last segment.
    pub name: String,
    /// `litellm_params.search_provider`.
    pub provider: sluice_providers::search::SearchProvider,
    /// `litellm_params.api_key` (else the provider's environment variable).
    pub api_key: Option<Secret>,
    /// `litellm_params.api_base` (else the provider's environment variable, else its public
    /// API), without a trailing `/`.
    pub api_base: String,
    /// USD per query: `litellm_params.input_cost_per_query`, else the price map's
    /// `{provider}/search`.
    pub cost_per_query: f64,
    /// Longest a call may take (`litellm_params.timeout`; 60 s).
    pub timeout: Duration,
}

/// How often spend-log retention runs unless `maximum_spend_logs_retention_interval` says
/// otherwise (LiteLLM's default).
pub const DEFAULT_SPEND_LOGS_RETENTION_INTERVAL: Duration = Duration::from_secs(86_400);

/// How long a kept Responses answer lasts unless `responses_retention_days` says otherwise
/// (OpenAI's own retention).
pub const DEFAULT_RESPONSES_RETENTION_DAYS: u32 = 30;

/// `general_settings.spend_journal`: how close to the answer a request's spend record is made
/// safe from the process being killed (`kill -9`, the OOM killer).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SpendJournalMode {
    /// `per_request` (the default): the worker that answers appends the record's line to
    /// its journal file before the answer's last byte leaves (one `write`, no `fsync`), so a
    /// kill loses no answered request's record.
    #[default]
    PerRequest,
    /// `batched`: the spend writer journals what it takes from its queue every few
    /// milliseconds, off the request path; a kill can lose the records of the last poll.
    Batched,
}

impl Default for GeneralSettings {
    fn default() -> Self {
        Self {
            master_key: None,
            database_url: None,
            max_request_body_bytes: 32 * 1024 * 1024,
            proxy_batch_write_at: None,
            litellm_headers: true,
            disable_admin_ui: false,
            store_model_in_db: false,
            ui_username: "admin".to_owned(),
            ui_password: None,
            sso: None,
            allow_client_side_credentials: false,
            client_side_api_base_allowlist: sluice_net::ssrf::Allowlist::default(),
            allowed_ips: None,
            forwarded: sluice_net::networks::Forwarded::default(),
            alerting: None,
            jwt: None,
            health_checks: None,
            key_management: None,
            tls: None,
            connections: ConnLimits::default(),
            max_url_length: DEFAULT_MAX_URL_LENGTH,
            max_messages: None,
            body_read_timeout: DEFAULT_BODY_READ_TIMEOUT,
            max_in_flight_requests: None,
            spend_journal: SpendJournalMode::PerRequest,
            store_responses: true,
            pass_through_endpoints: Vec::new(),
            responses_retention_days: DEFAULT_RESPONSES_RETENTION_DAYS,
            spend_logs_retention: None,
            spend_logs_retention_interval: DEFAULT_SPEND_LOGS_RETENTION_INTERVAL,
            max_memory_bytes: None,
            store_prompts_in_spend_logs: false,
        }
    }
}

/// The console's single sign-on: an OpenID Connect provider (Okta, Entra ID, Google,
/// Keycloak, ...) signs users in with the authorization-code flow and PKCE; the user, role and
/// team come from its userinfo claims. LiteLLM's environment variables name each field.
#[derive(Debug, Clone, PartialEq)]
pub struct Sso {
    /// `GENERIC_CLIENT_ID`.
    pub client_id: String,
    /// `GENERIC_CLIENT_SECRET` (a public client has none; PKCE protects its code).
    pub client_secret: Option<Secret>,
    /// `GENERIC_AUTHORIZATION_ENDPOINT`: where the browser is sent to sign in.
    pub authorization_endpoint: String,
    /// `GENERIC_TOKEN_ENDPOINT`: where sluice trades the code for an access token.
    pub token_endpoint: String,
    /// `GENERIC_USERINFO_ENDPOINT`: where sluice reads the user's claims with it.
    pub userinfo_endpoint: String,
    /// `GENERIC_SCOPE` (default `openid email profile`).
    pub scope: String,
    /// `GENERIC_USER_ID_ATTRIBUTE` (default `preferred_username`; `sub` when absent).
    pub user_id_attribute: String,
    /// `GENERIC_USER_EMAIL_ATTRIBUTE` (default `email`).
    pub email_attribute: String,
    /// `GENERIC_USER_ROLE_ATTRIBUTE` (default `role`): a LiteLLM role name.
    pub role_attribute: String,
    /// `GENERIC_USER_TEAM_ATTRIBUTE` (sluice's): the claim naming the user's team.
    pub team_attribute: Option<String>,
    /// `GENERIC_ROLE_MAPPINGS_DEFAULT_ROLE` (default `internal_user_viewer`): the role of a
    /// user whose claims name none.
    pub default_role: String,
    /// `PROXY_BASE_URL`: the console's public address, for the redirect URI
    /// (`<PROXY_BASE_URL>/ui/sso/callback`); without it, the request's own host.
    pub base_url: Option<String>,
    /// `AUTO_REDIRECT_UI_LOGIN_TO_SSO`: the sign-in page goes straight to the provider.
    pub auto_redirect: bool,
}

/// The console roles LiteLLM names, the ones single sign-on may grant.
pub const CONSOLE_ROLES: [&str; 4] = [
    "proxy_admin",
    "proxy_admin_viewer",
    "internal_user",
    "internal_user_viewer",
];

/// `router_settings`: how requests are spread over a group's deployments and what happens
/// when one fails (docs/routing.md lists the defaults).
#[derive(Debug, Clone, Default)]
pub struct RouterSettings {
    /// `routing_strategy`.
    pub routing_strategy: Option<Strategy>,
    /// `num_retries`.
    pub num_retries: Option<u32>,
    /// `retry_policy`: retries per failure kind (`RateLimitErrorRetries: 3`, ...).
    pub retry_policy: Vec<(FailureKind, u32)>,
    /// `retry_after`: least wait before retrying a deployment that already failed.
    pub retry_after: Option<Duration>,
    /// `retry_backoff_ms`: first step of the exponential backoff (sluice's own key).
    pub retry_backoff: Option<Duration>,
    /// `timeout` in seconds, default for every deployment.
    pub timeout: Option<Duration>,
    /// `stream_timeout`: default time to a stream's first chunk.
    pub stream_timeout: Option<Duration>,
    /// `stream_idle_timeout`: default longest gap between stream chunks (sluice's own key).
    pub stream_idle_timeout: Option<Duration>,
    /// `allowed_fails`.
    pub allowed_fails: Option<u32>,
    /// `allowed_fails_policy`: failures per kind allowed per minute before a cooldown.
    pub allowed_fails_policy: Vec<(FailureKind, u32)>,
    /// `cooldown_time`.
    pub cooldown_time: Option<Duration>,
    /// `disable_cooldowns`.
    pub disable_cooldowns: bool,
    /// `max_fallbacks`.
    pub max_fallbacks: Option<usize>,
    /// `hedge_after_ms`: group → when to send a hedged second attempt (sluice's own key).
    pub hedge_after: Vec<(String, HedgeAfter)>,
    /// `on_client_disconnect`: `cancel` (default) or `finish` (sluice's own key).
    pub on_client_disconnect: OnDisconnect,
    /// `redis_host`, `redis_port`, `redis_password`, `redis_url`: the fleet's Redis.
    pub redis: RedisAddress,
    /// `fleet_lease` (sluice's own key): the fraction of each rpm, tpm and budget limit an
    /// instance of a fleet leases from Redis at a time, so that most requests are admitted
    /// with no round trip; 0 sends every limited request to Redis. `None`: the default (2 %).
    pub fleet_lease: Option<f64>,
    /// `fallbacks`: group name → ordered fallback groups.
    pub fallbacks: Vec<(String, Vec<String>)>,
    /// `context_window_fallbacks`.
    pub context_window_fallbacks: Vec<(String, Vec<String>)>,
    /// `content_policy_fallbacks`.
    pub content_policy_fallbacks: Vec<(String, Vec<String>)>,
    /// `default_fallbacks`.
    pub default_fallbacks: Vec<String>,
    /// `model_group_alias` (here or in `litellm_settings`; the router's entry wins): other
    /// names a group answers to, each checked to name a served model.
    pub model_group_alias: Vec<GroupAlias>,
    /// `enable_tag_filtering` (off by default) and `tag_filtering_match_any` (default true):
    /// whether deployments' `tags` route requests, and how.
    pub tag_filtering: TagFiltering,
}

/// One `model_group_alias` entry: requests for `alias` are served by `group`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupAlias {
    /// The name clients may ask for.
    pub alias: String,
    /// The model group (or a name a wildcard group serves) it stands for.
    pub group: String,
    /// `hidden: true`: served, but left out of `/v1/models`.
    pub hidden: bool,
}

/// Where a Redis is, as LiteLLM's keys give it: a whole `redis://` URL, or a host with its
/// port, user and password; or a Redis Cluster's startup nodes; or the sentinels that name a
/// primary. One type for the fleet's Redis and the cache's.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RedisAddress {
    /// `redis_url` / `url` (wins over the parts).
    pub url: Option<Secret>,
    /// `redis_host` / `host`.
    pub host: Option<String>,
    /// `redis_port` / `port` (6379 when left out).
    pub port: Option<u16>,
    /// `username` (Redis ACL user).
    pub username: Option<String>,
    /// `redis_password` / `password` (of the one server, every cluster node, or the primary
    /// Sentinel names).
    pub password: Option<Secret>,
    /// `redis_startup_nodes` (`REDIS_CLUSTER_NODES`): a Redis Cluster's nodes.
    pub startup_nodes: Vec<NodeAddress>,
    /// `service_name` (`REDIS_SERVICE_NAME`): the name Sentinel monitors the primary under.
    pub service_name: Option<String>,
    /// `sentinel_nodes` (`REDIS_SENTINEL_NODES`): the sentinels' addresses.
    pub sentinel_nodes: Vec<NodeAddress>,
    /// `sentinel_password` (`REDIS_SENTINEL_PASSWORD`): the sentinels' own password.
    pub sentinel_password: Option<Secret>,
}

impl RedisAddress {
    /// The `redis://` URL of one server; `None` when neither a URL nor a host is given.
    /// User and password are percent-encoded, so any character may stand in them.
    pub fn url(&self) -> Option<Secret> {
        use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
        if let Some(u) = &self.url {
            return Some(u.clone());
        }
        let host = self.host.as_deref()?;
        let port = self.port.unwrap_or(6379);
        let user = self
            .username
            .as_deref()
            .map(|u| utf8_percent_encode(u, NON_ALPHANUMERIC).to_string())
            .unwrap_or_default();
        Some(Secret::new(match &self.password {
            Some(p) => format!(
                "redis://{user}:{}@{host}:{port}",
                utf8_percent_encode(p.expose(), NON_ALPHANUMERIC)
            ),
            None if user.is_empty() => format!("redis://{host}:{port}"),
            None => format!("redis://{user}@{host}:{port}"),
        }))
    }

    /// Whether a Redis Cluster or Sentinel is named (rather than one server).
    pub fn is_fleet_of_servers(&self) -> bool {
        !self.startup_nodes.is_empty()
            || !self.sentinel_nodes.is_empty()
            || self.service_name.is_some()
    }

    /// The Redis to connect to: a Cluster when startup nodes are given, a Sentinel-named
    /// primary when sentinels and a service name are, else one server; `None` when nothing
    /// (or half a Sentinel setting, which validation reports) is given.
    pub fn target(&self) -> Option<RedisTarget> {
        if !self.startup_nodes.is_empty() {
            return Some(RedisTarget::Cluster {
                nodes: self.startup_nodes.clone(),
                username: self.username.clone(),
                password: self.password.clone(),
            });
        }
        if self.is_fleet_of_servers() {
            return Some(RedisTarget::Sentinel {
                service_name: self.service_name.clone()?,
                sentinels: Some(self.sentinel_nodes.clone()).filter(|s| !s.is_empty())?,
                sentinel_password: self.sentinel_password.clone(),
                username: self.username.clone(),
                password: self.password.clone(),
            });
        }
        self.url().map(RedisTarget::Single)
    }
}

/// `litellm_settings`.
#[derive(Debug, Clone, Default)]
pub struct LitellmSettings {
    /// `drop_params`: drop parameters a provider cannot take instead of failing.
    pub drop_params: bool,
    /// `cache` / `cache_params` / `dedupe_in_flight`: the response cache, when on.
    pub cache: Option<sluice_cache::CacheSettings>,
    /// `num_retries` (LiteLLM also accepts it here).
    pub num_retries: Option<u32>,
    /// `request_timeout` in seconds, default for every deployment.
    pub request_timeout: Option<Duration>,
    /// `set_verbose` / `json_logs`: logging preferences.
    pub json_logs: bool,
    /// `success_callback` names.
    pub success_callback: Vec<String>,
    /// `failure_callback` names.
    pub failure_callback: Vec<String>,
    /// `callbacks` names.
    pub callbacks: Vec<String>,
    /// `turn_off_message_logging`.
    pub turn_off_message_logging: bool,
    /// `require_auth_for_metrics_endpoint`: `/metrics` needs the master key.
    pub require_auth_for_metrics_endpoint: bool,
    /// `fallbacks` (LiteLLM also accepts router fallbacks here).
    pub fallbacks: Vec<(String, Vec<String>)>,
    /// `upperbound_key_generate_params`: the most a key made by a user's own key may have.
    pub key_bounds: KeyBounds,
}

/// The most a key that a user's own key makes may have (LiteLLM's
/// `upperbound_key_generate_params`); each absent value is unbounded. The durations are kept
/// as written (`"30d"`) and compared where keys are made.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KeyBounds {
    /// `max_budget`, USD.
    pub max_budget: Option<f64>,
    /// `budget_duration`: the longest budget window.
    pub budget_duration: Option<String>,
    /// `duration`: the longest key lifetime.
    pub duration: Option<String>,
    /// `max_parallel_requests`.
    pub max_parallel_requests: Option<u64>,
    /// `tpm_limit`.
    pub tpm_limit: Option<u64>,
    /// `rpm_limit`.
    pub rpm_limit: Option<u64>,
}

/// A deployment's own per-unit prices, over the price table's (LiteLLM's `litellm_params`
/// keys of the same names), in USD.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct UnitCosts {
    /// `output_cost_per_image`.
    pub per_image: Option<f64>,
    /// `input_cost_per_pixel`.
    pub per_pixel: Option<f64>,
    /// `input_cost_per_second` plus `output_cost_per_second`.
    pub per_second: Option<f64>,
    /// `input_cost_per_character`.
    pub per_character: Option<f64>,
    /// `input_cost_per_query`.
    pub per_query: Option<f64>,
    /// `ocr_cost_per_page`.
    pub per_page: Option<f64>,
}
