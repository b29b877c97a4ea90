//! The config file as written: LiteLLM's `config.yaml` keys, every leaf a loosely typed
//! [`Scalar`] (YAML users write `rpm: "100"` and env references always yield strings). The
//! validator turns this into the strict model and names the path of every bad value.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_yaml_ng::Value;
use sluice_core::settings::Scalar;

/// A string or a list of strings (`success_callback: langfuse` or `[langfuse, s3]`).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged, expecting = "a string or a list of strings")]
pub(super) enum OneOrMany {
    /// One value.
    One(Scalar),
    /// Several.
    Many(Vec<Scalar>),
}

impl OneOrMany {
    /// Every value as text.
    pub fn texts(&self) -> Vec<String> {
        match self {
            Self::One(s) => vec![s.text()],
            Self::Many(v) => v.iter().map(Scalar::text).collect(),
        }
    }
}

/// `api_key`: one key, or a list of keys with optional weights
/// (`[sk-a, sk-b]`, `[{key: sk-a, weight: 3}, {key: sk-b}]`).
#[derive(Debug, Clone, Deserialize)]
#[serde(
    untagged,
    expecting = "a key, or a list of keys (strings or {key, weight})"
)]
pub(super) enum RawKeys {
    /// One key.
    One(Scalar),
    /// Several.
    Many(Vec<RawKey>),
}

/// One entry of an `api_key` list.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged, expecting = "a key, or {key, weight}")]
pub(super) enum RawKey {
    /// A bare key.
    Plain(Scalar),
    /// A key with its share.
    Weighted {
        /// The key.
        key: Scalar,
        /// Its share.
        weight: Option<Scalar>,
    },
}

/// Top level of `config.yaml`.
#[derive(Debug, Default, Deserialize)]
pub(super) struct RawConfig {
    pub model_list: Option<Vec<RawModel>>,
    pub general_settings: Option<RawGeneral>,
    pub router_settings: Option<RawRouter>,
    pub litellm_settings: Option<RawLitellm>,
    pub callback_settings: Option<BTreeMap<String, RawCallback>>,
    pub mcp_servers: Option<BTreeMap<String, RawMcpServer>>,
    pub guardrails: Option<Vec<RawGuardrail>>,
    pub search_tools: Option<Value>,
}

/// Top-level keys sluice reads (`environment_variables` and `include` are taken out of the
/// tree before typing; they are listed for "did you mean" hints).
pub(super) const TOP_KEYS: &[&str] = &[
    "model_list",
    "general_settings",
    "router_settings",
    "litellm_settings",
    "callback_settings",
    "mcp_servers",
    "guardrails",
    "search_tools",
    "environment_variables",
    "include",
];

/// `model_list[i]`.
#[derive(Debug, Deserialize)]
pub(super) struct RawModel {
    pub model_name: Option<Scalar>,
    pub litellm_params: Option<RawParams>,
    /// Free-form metadata; `id`, `mode` and `base_model` are read from it.
    pub model_info: Option<BTreeMap<String, Value>>,
}

/// Keys of a `model_list` entry.
pub(super) const MODEL_KEYS: &[&str] = &["model_name", "litellm_params", "model_info"];

/// `model_list[i].litellm_params`.
#[derive(Debug, Default, Deserialize)]
pub(super) struct RawParams {
    pub model: Option<Scalar>,
    pub custom_llm_provider: Option<Scalar>,
    pub api_base: Option<Scalar>,
    pub base_url: Option<Scalar>,
    pub api_key: Option<RawKeys>,
    pub extra_headers: Option<BTreeMap<String, Scalar>>,
    pub rpm: Option<Scalar>,
    pub tpm: Option<Scalar>,
    pub weight: Option<Scalar>,
    pub timeout: Option<Scalar>,
    pub stream_timeout: Option<Scalar>,
    pub stream_idle_timeout: Option<Scalar>,
    pub http2_prior_knowledge: Option<Scalar>,
    pub ssl_verify: Option<Scalar>,
    pub ssl_certificate: Option<Scalar>,
    pub ssl_certificate_key: Option<Scalar>,
    pub max_retries: Option<Scalar>,
    pub input_cost_per_token: Option<Scalar>,
    pub output_cost_per_token: Option<Scalar>,
    pub output_cost_per_image: Option<Scalar>,
    pub input_cost_per_pixel: Option<Scalar>,
    pub input_cost_per_second: Option<Scalar>,
    pub output_cost_per_second: Option<Scalar>,
    pub input_cost_per_character: Option<Scalar>,
    pub input_cost_per_query: Option<Scalar>,
    pub ocr_cost_per_page: Option<Scalar>,
    pub use_in_pass_through: Option<Scalar>,
    pub num_retries: Option<Scalar>,
    pub region_name: Option<Scalar>,
    /// `tags: [free, paid]`: kept loose here so that a bad element is an error naming its
    /// index.
    pub tags: Option<Value>,
    /// Every other key: the ones a provider reads (`aws_region_name`, `vertex_project`,
    /// `mock_chunks`, ...), handed to its module, and unknown ones (a warning).
    #[serde(flatten)]
    pub rest: BTreeMap<String, Value>,
}

/// Keys of `litellm_params` the configuration reads itself (providers read theirs:
/// `sluice_providers::provider_keys`).
pub(super) const PARAM_KEYS: &[&str] = &[
    "model",
    "custom_llm_provider",
    "api_base",
    "base_url",
    "api_key",
    "extra_headers",
    "rpm",
    "tpm",
    "weight",
    "timeout",
    "stream_timeout",
    "stream_idle_timeout",
    "http2_prior_knowledge",
    "ssl_verify",
    "ssl_certificate",
    "ssl_certificate_key",
    "max_retries",
    "input_cost_per_token",
    "output_cost_per_token",
    "output_cost_per_image",
    "input_cost_per_pixel",
    "input_cost_per_second",
    "output_cost_per_second",
    "input_cost_per_character",
    "input_cost_per_query",
    "ocr_cost_per_page",
    "use_in_pass_through",
    "num_retries",
    "region_name",
    "tags",
];

/// `general_settings`.
#[derive(Debug, Default, Deserialize)]
pub(super) struct RawGeneral {
    pub master_key: Option<Scalar>,
    pub database_url: Option<Scalar>,
    pub max_request_size_mb: Option<Scalar>,
    pub proxy_batch_write_at: Option<Scalar>,
    pub disable_admin_ui: Option<Scalar>,
    pub litellm_headers: Option<Scalar>,
    pub store_model_in_db: Option<Scalar>,
    pub allow_client_side_credentials: Option<Scalar>,
    pub client_side_api_base_allowlist: Option<OneOrMany>,
    pub allowed_ips: Option<OneOrMany>,
    pub alerting: Option<OneOrMany>,
    pub enable_jwt_auth: Option<Scalar>,
    pub litellm_jwtauth: Option<Value>,
    pub key_management_system: Option<Scalar>,
    pub key_management_settings: Option<Value>,
    pub alert_types: Option<OneOrMany>,
    pub alert_to_webhook_url: Option<Value>,
    pub use_x_forwarded_for: Option<Scalar>,
    pub trusted_proxy_ranges: Option<OneOrMany>,
    pub ssl_certfile_path: Option<Scalar>,
    pub ssl_keyfile_path: Option<Scalar>,
    // The limits against hostile clients and overload (`validate::general::limits`).
    pub max_request_headers: Option<Scalar>,
    pub max_request_header_size_kb: Option<Scalar>,
    pub max_url_length: Option<Scalar>,
    pub max_messages: Option<Scalar>,
    pub header_read_timeout: Option<Scalar>,
    pub body_read_timeout: Option<Scalar>,
    pub max_connections: Option<Scalar>,
    pub max_connection_rate_per_ip: Option<Scalar>,
    pub max_in_flight_requests: Option<Scalar>,
    pub max_memory_mb: Option<Scalar>,
    pub store_prompts_in_spend_logs: Option<Scalar>,
    pub spend_journal: Option<Scalar>,
    pub store_responses: Option<Scalar>,
    pub responses_retention_days: Option<Scalar>,
    pub maximum_spend_logs_retention_period: Option<Scalar>,
    pub maximum_spend_logs_retention_interval: Option<Scalar>,
    /// LiteLLM's config-declared pass-through routes; read only to say they are not served.
    pub pass_through_endpoints: Option<Value>,
    // Active health checks (`validate::general::health_checks`).
    pub background_health_checks: Option<Scalar>,
    pub health_check_interval: Option<Scalar>,
    pub background_health_check_model_groups: Option<OneOrMany>,
    pub health_check_concurrency: Option<Scalar>,
    pub health_check_max_spend_per_day: Option<Scalar>,
    pub use_shared_health_check: Option<Scalar>,
    pub health_check_details: Option<Scalar>,
    // Spend and deployment reports (`validate::alerting`).
    pub spend_report_frequency: Option<Scalar>,
    pub alerting_args: Option<Value>,
}

/// Keys of `general_settings` sluice reads.
pub(super) const GENERAL_KEYS: &[&str] = &[
    "master_key",
    "database_url",
    "max_request_size_mb",
    "proxy_batch_write_at",
    "disable_admin_ui",
    "litellm_headers",
    "store_model_in_db",
    "allow_client_side_credentials",
    "client_side_api_base_allowlist",
    "allowed_ips",
    "alerting",
    "enable_jwt_auth",
    "litellm_jwtauth",
    "key_management_system",
    "key_management_settings",
    "alert_types",
    "alert_to_webhook_url",
    "use_x_forwarded_for",
    "trusted_proxy_ranges",
    "ssl_certfile_path",
    "ssl_keyfile_path",
    "max_request_headers",
    "max_request_header_size_kb",
    "max_url_length",
    "max_messages",
    "header_read_timeout",
    "body_read_timeout",
    "max_connections",
    "max_connection_rate_per_ip",
    "max_in_flight_requests",
    "max_memory_mb",
    "store_prompts_in_spend_logs",
    "spend_journal",
    "store_responses",
    "responses_retention_days",
    "maximum_spend_logs_retention_period",
    "maximum_spend_logs_retention_interval",
    "pass_through_endpoints",
    "background_health_checks",
    "health_check_interval",
    "background_health_check_model_groups",
    "health_check_concurrency",
    "health_check_max_spend_per_day",
    "use_shared_health_check",
    "health_check_details",
    "spend_report_frequency",
    "alerting_args",
];

/// LiteLLM's fallback lists: `[{"gpt-4o": ["gpt-4o-mini", "claude"]}, ...]`.
pub(super) type RawFallbacks = Vec<BTreeMap<String, OneOrMany>>;

/// `router_settings`.
#[derive(Debug, Default, Deserialize)]
pub(super) struct RawRouter {
    pub routing_strategy: Option<Scalar>,
    pub num_retries: Option<Scalar>,
    pub retry_policy: Option<BTreeMap<String, Scalar>>,
    pub retry_after: Option<Scalar>,
    pub retry_backoff_ms: Option<Scalar>,
    pub timeout: Option<Scalar>,
    pub stream_timeout: Option<Scalar>,
    pub stream_idle_timeout: Option<Scalar>,
    pub allowed_fails: Option<Scalar>,
    pub allowed_fails_policy: Option<BTreeMap<String, Scalar>>,
    pub cooldown_time: Option<Scalar>,
    pub disable_cooldowns: Option<Scalar>,
    pub max_fallbacks: Option<Scalar>,
    pub hedge_after_ms: Option<BTreeMap<String, Scalar>>,
    pub on_client_disconnect: Option<Scalar>,
    pub redis_host: Option<Scalar>,
    pub redis_port: Option<Scalar>,
    pub redis_password: Option<Scalar>,
    pub redis_url: Option<Scalar>,
    pub redis_startup_nodes: Option<Vec<RawNode>>,
    pub service_name: Option<Scalar>,
    pub sentinel_nodes: Option<Vec<RawNode>>,
    pub sentinel_password: Option<Scalar>,
    pub fleet_lease: Option<Scalar>,
    pub fallbacks: Option<RawFallbacks>,
    pub context_window_fallbacks: Option<RawFallbacks>,
    pub content_policy_fallbacks: Option<RawFallbacks>,
    pub default_fallbacks: Option<OneOrMany>,
    pub model_group_alias: Option<RawAliases>,
    pub enable_tag_filtering: Option<Scalar>,
    pub tag_filtering_match_any: Option<Scalar>,
}

/// One server in `redis_startup_nodes` / `sentinel_nodes`: LiteLLM writes cluster nodes as
/// `{host, port}` and sentinels as `[host, port]`; either is read for both, and `"host:port"`.
#[derive(Debug, Clone, Deserialize)]
#[serde(
    untagged,
    expecting = "a node: {host, port}, [host, port] or \"host:port\""
)]
pub(super) enum RawNode {
    /// `"host:port"`.
    Text(Scalar),
    /// `[host, port]`.
    Pair(Vec<Scalar>),
    /// `{host: ..., port: ...}`.
    Map {
        /// The host.
        host: Option<Scalar>,
        /// The port (a number or a string of one).
        port: Option<Scalar>,
    },
}

/// `model_group_alias`: `{alias: group}` or `{alias: {model: group, hidden: true}}`.
pub(super) type RawAliases = BTreeMap<String, RawAlias>;

/// One `model_group_alias` entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged, expecting = "a model group's name, or {model, hidden}")]
pub(super) enum RawAlias {
    /// `alias: group`.
    Group(Scalar),
    /// `alias: {model: group, hidden: true}`.
    Item {
        /// The group.
        model: Option<Scalar>,
        /// Left out of `/v1/models`.
        hidden: Option<Scalar>,
    },
}

/// Keys of `router_settings` sluice reads.
pub(super) const ROUTER_KEYS: &[&str] = &[
    "routing_strategy",
    "num_retries",
    "retry_policy",
    "retry_after",
    "retry_backoff_ms",
    "timeout",
    "stream_timeout",
    "stream_idle_timeout",
    "allowed_fails",
    "allowed_fails_policy",
    "cooldown_time",
    "disable_cooldowns",
    "max_fallbacks",
    "hedge_after_ms",
    "on_client_disconnect",
    "redis_host",
    "redis_port",
    "redis_password",
    "redis_url",
    "redis_startup_nodes",
    "service_name",
    "sentinel_nodes",
    "sentinel_password",
    "fleet_lease",
    "fallbacks",
    "context_window_fallbacks",
    "content_policy_fallbacks",
    "default_fallbacks",
    "model_group_alias",
    "enable_tag_filtering",
    "tag_filtering_match_any",
];

/// `litellm_settings`.
#[derive(Debug, Default, Deserialize)]
pub(super) struct RawLitellm {
    pub drop_params: Option<Scalar>,
    pub num_retries: Option<Scalar>,
    pub request_timeout: Option<Scalar>,
    pub json_logs: Option<Scalar>,
    /// LiteLLM's debug switch; sluice's log level comes from `SLUICE_LOG`.
    #[allow(dead_code)]
    pub set_verbose: Option<Scalar>,
    pub success_callback: Option<OneOrMany>,
    pub failure_callback: Option<OneOrMany>,
    pub callbacks: Option<OneOrMany>,
    pub turn_off_message_logging: Option<Scalar>,
    pub require_auth_for_metrics_endpoint: Option<Scalar>,
    pub fallbacks: Option<RawFallbacks>,
    pub context_window_fallbacks: Option<RawFallbacks>,
    pub default_fallbacks: Option<OneOrMany>,
    pub s3_callback_params: Option<RawCallback>,
    pub gcs_bucket_name: Option<Scalar>,
    pub gcs_path_service_account: Option<Scalar>,
    pub cache: Option<Scalar>,
    pub cache_params: Option<RawCacheParams>,
    pub dedupe_in_flight: Option<Scalar>,
    pub ssl_verify: Option<Scalar>,
    pub ssl_certificate: Option<Scalar>,
    pub ssl_certificate_key: Option<Scalar>,
    pub model_group_alias: Option<RawAliases>,
    pub upperbound_key_generate_params: Option<RawKeyBounds>,
}

/// `litellm_settings.upperbound_key_generate_params`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawKeyBounds {
    pub max_budget: Option<Scalar>,
    pub budget_duration: Option<Scalar>,
    pub duration: Option<Scalar>,
    pub max_parallel_requests: Option<Scalar>,
    pub tpm_limit: Option<Scalar>,
    pub rpm_limit: Option<Scalar>,
}

/// `litellm_settings.cache_params`.
#[derive(Debug, Default, Deserialize)]
pub(super) struct RawCacheParams {
    #[serde(rename = "type")]
    pub kind: Option<Scalar>,
    pub ttl: Option<Scalar>,
    pub namespace: Option<Scalar>,
    pub supported_call_types: Option<OneOrMany>,
    pub mode: Option<Scalar>,
    pub max_bytes: Option<Scalar>,
    pub similarity_threshold: Option<Scalar>,
    pub host: Option<Scalar>,
    pub port: Option<Scalar>,
    pub password: Option<Scalar>,
    pub username: Option<Scalar>,
    pub url: Option<Scalar>,
    pub redis_url: Option<Scalar>,
    pub socket_timeout: Option<Scalar>,
    pub redis_startup_nodes: Option<Vec<RawNode>>,
    pub service_name: Option<Scalar>,
    pub sentinel_nodes: Option<Vec<RawNode>>,
    pub sentinel_password: Option<Scalar>,
    pub default_in_memory_ttl: Option<Scalar>,
    pub default_in_redis_ttl: Option<Scalar>,
    pub redis_semantic_cache_embedding_model: Option<Scalar>,
    pub semantic_cache_embedding_model: Option<Scalar>,
    pub redis_semantic_cache_index_name: Option<Scalar>,
    pub max_entries: Option<Scalar>,
}

/// Keys of `litellm_settings.cache_params` sluice reads.
pub(super) const CACHE_PARAMS_KEYS: &[&str] = &[
    "type",
    "ttl",
    "namespace",
    "supported_call_types",
    "mode",
    "max_bytes",
    "similarity_threshold",
    "host",
    "port",
    "password",
    "username",
    "url",
    "redis_url",
    "socket_timeout",
    "redis_startup_nodes",
    "service_name",
    "sentinel_nodes",
    "sentinel_password",
    "default_in_memory_ttl",
    "default_in_redis_ttl",
    "redis_semantic_cache_embedding_model",
    "semantic_cache_embedding_model",
    "redis_semantic_cache_index_name",
    "max_entries",
];

/// `callback_settings.<name>` (and `litellm_settings.s3_callback_params`): one struct for
/// every sink's keys, so an unknown key warns with a did-you-mean over all of them.
#[derive(Debug, Default, Clone, Deserialize)]
pub(super) struct RawCallback {
    pub callback_type: Option<Scalar>,
    pub endpoint: Option<Scalar>,
    pub url: Option<Scalar>,
    pub headers: Option<BTreeMap<String, Scalar>>,
    pub event_types: Option<OneOrMany>,
    pub log_format: Option<Scalar>,
    pub batch_size: Option<Scalar>,
    pub flush_interval: Option<Scalar>,
    pub max_queue_size: Option<Scalar>,
    pub spill_limit: Option<Scalar>,
    pub message_logging: Option<Scalar>,
    pub host: Option<Scalar>,
    pub public_key: Option<Scalar>,
    pub secret_key: Option<Scalar>,
    pub api_key: Option<Scalar>,
    pub project: Option<Scalar>,
    pub protocol: Option<Scalar>,
    pub service_name: Option<Scalar>,
    pub s3_bucket_name: Option<Scalar>,
    pub s3_region_name: Option<Scalar>,
    pub s3_endpoint_url: Option<Scalar>,
    pub s3_aws_access_key_id: Option<Scalar>,
    pub s3_aws_secret_access_key: Option<Scalar>,
    pub s3_aws_session_token: Option<Scalar>,
    pub s3_path: Option<Scalar>,
    pub gcs_bucket_name: Option<Scalar>,
    pub gcs_path_service_account: Option<Scalar>,
    pub api_base: Option<Scalar>,
}

/// Keys of a `callback_settings` entry.
pub(super) const CALLBACK_KEYS: &[&str] = &[
    "callback_type",
    "endpoint",
    "url",
    "headers",
    "event_types",
    "log_format",
    "batch_size",
    "flush_interval",
    "max_queue_size",
    "spill_limit",
    "message_logging",
    "host",
    "public_key",
    "secret_key",
    "api_key",
    "project",
    "protocol",
    "service_name",
    "s3_bucket_name",
    "s3_region_name",
    "s3_endpoint_url",
    "s3_aws_access_key_id",
    "s3_aws_secret_access_key",
    "s3_aws_session_token",
    "s3_path",
    "gcs_bucket_name",
    "gcs_path_service_account",
    "api_base",
];

/// Keys of `litellm_settings` sluice reads.
pub(super) const LITELLM_KEYS: &[&str] = &[
    "drop_params",
    "num_retries",
    "request_timeout",
    "json_logs",
    "set_verbose",
    "success_callback",
    "failure_callback",
    "callbacks",
    "turn_off_message_logging",
    "require_auth_for_metrics_endpoint",
    "model_group_alias",
    "fallbacks",
    "context_window_fallbacks",
    "default_fallbacks",
    "s3_callback_params",
    "gcs_bucket_name",
    "gcs_path_service_account",
    "cache",
    "cache_params",
    "dedupe_in_flight",
    "ssl_verify",
    "ssl_certificate",
    "ssl_certificate_key",
    "upperbound_key_generate_params",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_are_lenient() {
        let s: Scalar = serde_yaml_ng::from_str("\"100\"").unwrap();
        assert_eq!(s.integer(), Some(100));
        let s: Scalar = serde_yaml_ng::from_str("2.5").unwrap();
        assert_eq!(s.number(), Some(2.5));
        assert_eq!(s.integer(), None);
        let s: Scalar = serde_yaml_ng::from_str("\"True\"").unwrap();
        assert_eq!(s.boolean(), Some(true));
        assert!(serde_yaml_ng::from_str::<Scalar>("[1]").is_err());
    }
}

/// `mcp_servers.<name>` (LiteLLM's keys, plus sluice's `timeout` and `max_response_bytes`).
#[derive(Debug, Default, Deserialize)]
pub(super) struct RawMcpServer {
    pub url: Option<Scalar>,
    pub transport: Option<Scalar>,
    pub command: Option<Scalar>,
    pub args: Option<OneOrMany>,
    pub env: Option<BTreeMap<String, Scalar>>,
    pub auth_type: Option<Scalar>,
    pub auth_value: Option<Scalar>,
    /// `auth_type: oauth2` (LiteLLM's keys, and RFC 7591's `token_endpoint_auth_method`).
    pub oauth2_flow: Option<Scalar>,
    pub client_id: Option<Scalar>,
    pub client_secret: Option<Scalar>,
    pub token_url: Option<Scalar>,
    pub scopes: Option<OneOrMany>,
    pub token_endpoint_auth_method: Option<Scalar>,
    pub static_headers: Option<BTreeMap<String, Scalar>>,
    pub description: Option<Scalar>,
    pub allowed_tools: Option<OneOrMany>,
    pub disallowed_tools: Option<OneOrMany>,
    pub timeout: Option<Scalar>,
    pub max_response_bytes: Option<Scalar>,
    pub mcp_info: Option<RawMcpInfo>,
}

/// `mcp_servers.<name>.mcp_info`: LiteLLM keeps a server's display facts here too
/// (`server_name`, `description`, `logo_url`: not read); sluice reads its prices.
#[derive(Debug, Default, Deserialize)]
pub(super) struct RawMcpInfo {
    pub mcp_server_cost_info: Option<RawMcpCost>,
}

/// `mcp_info.mcp_server_cost_info`.
#[derive(Debug, Default, Deserialize)]
pub(super) struct RawMcpCost {
    pub default_cost_per_query: Option<Scalar>,
    pub tool_name_to_cost_per_query: Option<BTreeMap<String, Scalar>>,
}

/// Keys of an `mcp_servers` entry sluice reads.
pub(super) const MCP_SERVER_KEYS: &[&str] = &[
    "url",
    "transport",
    "command",
    "args",
    "env",
    "auth_type",
    "auth_value",
    "oauth2_flow",
    "client_id",
    "client_secret",
    "token_url",
    "scopes",
    "token_endpoint_auth_method",
    "static_headers",
    "description",
    "allowed_tools",
    "disallowed_tools",
    "timeout",
    "max_response_bytes",
    "mcp_info",
];
/// `guardrails[i]`.
#[derive(Debug, Default, Deserialize)]
pub(super) struct RawGuardrail {
    pub guardrail_name: Option<Scalar>,
    pub litellm_params: Option<RawGuardrailParams>,
    /// Free-form (LiteLLM shows it on `/guardrails/list`); not read.
    #[allow(dead_code)]
    pub guardrail_info: Option<Value>,
}

/// Keys of a `guardrails` entry.
pub(super) const GUARDRAIL_KEYS: &[&str] = &["guardrail_name", "litellm_params", "guardrail_info"];

/// `guardrails[i].litellm_params`.
#[derive(Debug, Default, Deserialize)]
pub(super) struct RawGuardrailParams {
    pub guardrail: Option<Scalar>,
    pub mode: Option<OneOrMany>,
    pub default_on: Option<Scalar>,
    pub output_parse_pii: Option<Scalar>,
    pub pii_entities_config: Option<BTreeMap<String, Scalar>>,
    pub patterns: Option<Vec<RawPattern>>,
    pub blocked_words: Option<Vec<RawBlockedWord>>,
    pub threshold: Option<Scalar>,
    pub api_key: Option<Scalar>,
    pub api_base: Option<Scalar>,
    pub rules: Option<Vec<RawToolRule>>,
    pub default_action: Option<Scalar>,
    pub on_disallowed_action: Option<Scalar>,
    pub violation_message_template: Option<Scalar>,
    pub max_characters: Option<Scalar>,
    pub max_tokens: Option<Scalar>,
    pub additional_provider_specific_params: Option<Value>,
    pub on_error: Option<Scalar>,
    pub timeout: Option<Scalar>,
    // The vendors' own keys, under LiteLLM's names (`validate::vendors`).
    pub presidio_analyzer_api_base: Option<Scalar>,
    pub presidio_anonymizer_api_base: Option<Scalar>,
    pub presidio_language: Option<Scalar>,
    pub presidio_score_thresholds: Option<BTreeMap<String, Scalar>>,
    pub project_id: Option<Scalar>,
    pub breakdown: Option<Scalar>,
    pub metadata: Option<Value>,
    pub dev_info: Option<Scalar>,
    pub on_flagged: Option<Scalar>,
    pub api_version: Option<Scalar>,
    pub severity_threshold: Option<Scalar>,
    pub severity_threshold_by_category: Option<BTreeMap<String, Scalar>>,
    pub categories: Option<OneOrMany>,
    /// `openai_moderation`: the model group that answers `/v1/moderations`.
    pub model: Option<Scalar>,
    #[serde(rename = "outputType")]
    pub output_type: Option<Scalar>,
    #[serde(rename = "blocklistNames")]
    pub blocklist_names: Option<OneOrMany>,
    #[serde(rename = "haltOnBlocklistHit")]
    pub halt_on_blocklist_hit: Option<Scalar>,
    #[serde(rename = "guardrailIdentifier")]
    pub guardrail_identifier: Option<Scalar>,
    #[serde(rename = "guardrailVersion")]
    pub guardrail_version: Option<Scalar>,
    pub aws_region_name: Option<Scalar>,
    pub aws_access_key_id: Option<Scalar>,
    pub aws_secret_access_key: Option<Scalar>,
    pub aws_session_token: Option<Scalar>,
    pub aws_bedrock_runtime_endpoint: Option<Scalar>,
    pub mask_request_content: Option<Scalar>,
    pub mask_response_content: Option<Scalar>,
}

/// `tool_permission`'s `rules[j]`.
#[derive(Debug, Default, Deserialize)]
pub(super) struct RawToolRule {
    pub id: Option<Scalar>,
    pub tool_name: Option<Scalar>,
    pub decision: Option<Scalar>,
    pub allowed_param_patterns: Option<BTreeMap<String, Scalar>>,
}

/// Keys of a tool rule.
pub(super) const TOOL_RULE_KEYS: &[&str] =
    &["id", "tool_name", "decision", "allowed_param_patterns"];

/// Keys of a guardrail's `litellm_params` sluice reads.
pub const GUARDRAIL_PARAM_KEYS: &[&str] = &[
    "guardrail",
    "mode",
    "default_on",
    "output_parse_pii",
    "pii_entities_config",
    "patterns",
    "blocked_words",
    "threshold",
    "api_key",
    "api_base",
    "rules",
    "default_action",
    "on_disallowed_action",
    "violation_message_template",
    "max_characters",
    "max_tokens",
    "additional_provider_specific_params",
    "on_error",
    "timeout",
    "presidio_analyzer_api_base",
    "presidio_anonymizer_api_base",
    "presidio_language",
    "presidio_score_thresholds",
    "project_id",
    "breakdown",
    "metadata",
    "dev_info",
    "on_flagged",
    "api_version",
    "severity_threshold",
    "severity_threshold_by_category",
    "categories",
    "outputType",
    "blocklistNames",
    "haltOnBlocklistHit",
    "guardrailIdentifier",
    "guardrailVersion",
    "aws_region_name",
    "aws_access_key_id",
    "aws_secret_access_key",
    "aws_session_token",
    "aws_bedrock_runtime_endpoint",
    "mask_request_content",
    "mask_response_content",
];

/// `litellm_content_filter`'s `patterns[j]`.
#[derive(Debug, Default, Deserialize)]
pub(super) struct RawPattern {
    pub pattern_type: Option<Scalar>,
    pub pattern_name: Option<Scalar>,
    pub pattern: Option<Scalar>,
    pub name: Option<Scalar>,
    pub action: Option<Scalar>,
}

/// Keys of a content filter pattern.
pub(super) const PATTERN_KEYS: &[&str] =
    &["pattern_type", "pattern_name", "pattern", "name", "action"];

/// `litellm_content_filter`'s `blocked_words[j]`.
#[derive(Debug, Default, Deserialize)]
pub(super) struct RawBlockedWord {
    pub keyword: Option<Scalar>,
    pub action: Option<Scalar>,
    /// For people reading the config; not read.
    #[allow(dead_code)]
    pub description: Option<Scalar>,
}

/// Keys of a blocked word.
pub(super) const BLOCKED_WORD_KEYS: &[&str] = &["keyword", "action", "description"];
