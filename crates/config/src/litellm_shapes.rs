//! Loader tests on the shapes LiteLLM's own configs use (its repository's
//! `proxy_server_config.yaml`, its documented keys): they load, what sluice honours is read,
//! and what it does not is one warning naming the key, never a refused config.

use std::collections::HashMap;
use std::time::Duration;

use super::*;
use sluice_providers::{Family, ProviderConfig};

fn no_env() -> HashMap<String, String> {
    HashMap::new()
}

fn warnings(l: &Loaded) -> Vec<String> {
    l.warnings.iter().map(ToString::to_string).collect()
}

fn errors(e: ConfigError) -> Vec<String> {
    match e {
        ConfigError::Invalid(list) => list.iter().map(ToString::to_string).collect(),
        other => panic!("expected validation errors, got {other}"),
    }
}

fn named<'a>(c: &'a Config, group: &str) -> &'a Deployment {
    c.deployments
        .iter()
        .find(|d| d.model_name == group)
        .unwrap_or_else(|| panic!("no deployment of {group}"))
}

/// The shapes of LiteLLM's repository config, written anew: an Azure deployment named only by
/// its group, a text-completion model, a provider sluice has no module for, per-deployment
/// retries, timeouts and region, an alias, and declared pass-through routes; no keys set.
const LITELLM_SHAPES: &str = r#"
model_list:
  - model_name: eu-chat
    litellm_params:
      model: gpt-4o-mini
      region_name: "eu"
      num_retries: 4
    model_info:
      id: "1"
  - model_name: images
    litellm_params:
      model: azure/
      api_version: 2024-02-01
      api_base: https://example-resource.openai.azure.com/
      api_key: os.environ/AZURE_API_KEY
  - model_name: paint
    litellm_params:
      model: dall-e-3
  - model_name: slow
    litellm_params:
      model: openai/slow-model
      api_key: fake
      api_base: https://upstream.example/
      timeout: 300
      stream_timeout: 0.5
      rpm: 10
  - model_name: hosted-llama
    litellm_params:
      model: sagemaker/some-endpoint-name
      input_cost_per_second: 0.0004
  - model_name: instruct
    litellm_params:
      model: text-completion-openai/gpt-3.5-turbo-instruct
  - model_name: flaky
    litellm_params:
      model: openai/flaky
      api_base: https://upstream.example/
      mock_timeout: true
    model_info:
      health_check_timeout: 1
litellm_settings:
  drop_params: true
  num_retries: 5
  request_timeout: 600
  telemetry: false
  context_window_fallbacks: [{"eu-chat": ["slow"]}]
  default_team_settings:
    - team_id: team-a
      success_callback: ["langfuse"]
finetune_settings:
  - custom_llm_provider: openai
    api_key: os.environ/OPENAI_API_KEY
files_settings:
  - custom_llm_provider: openai
router_settings:
  routing_strategy: usage-based-routing-v2
  enable_pre_call_checks: true
  model_group_alias: {"friendly-name": "slow"}
general_settings:
  master_key: sk-test
  proxy_budget_rescheduler_min_time: 60
  database_connection_pool_limit: 10
  pass_through_endpoints:
    - path: "/v1/custom-rerank"
      target: "https://rerank.example/v1/rerank"
      headers:
        content-type: application/json
      forward_headers: true
"#;

#[test]
fn litellms_repository_config_shapes_load_without_keys() {
    let loaded = load_str(LITELLM_SHAPES, &no_env()).unwrap_or_else(|e| panic!("{e}"));
    let c = &loaded.config;
    let w = warnings(&loaded);

    // `azure/` names its deployment by the group, as LiteLLM sends it.
    let images = named(c, "images");
    assert_eq!(images.provider().name(), "azure");
    assert_eq!(images.upstream.model, "images");

    // A bare OpenAI image model is OpenAI's.
    assert_eq!(named(c, "paint").provider().name(), "openai");

    // OpenAI's completions models: OpenAI's URL, a completion model for `/health`.
    let instruct = named(c, "instruct");
    assert_eq!(instruct.provider().name(), "text-completion-openai");
    assert_eq!(
        instruct.upstream.api_base.as_deref(),
        Some("https://api.openai.com/v1")
    );
    assert_eq!(instruct.model_info.mode.as_deref(), Some("completion"));

    // A provider sluice cannot serve loads, with one warning naming its `model`.
    let llama = named(c, "hosted-llama");
    assert_eq!(llama.provider().family(), Family::Unserved);
    assert!(matches!(
        llama.upstream.specific,
        ProviderConfig::Unserved(_)
    ));
    let unserved: Vec<&String> = w
        .iter()
        .filter(|x| x.starts_with("model_list[4].litellm_params.model: sagemaker/"))
        .collect();
    assert_eq!(unserved.len(), 1, "{w:#?}");
    assert!(unserved[0].contains("answered 501"), "{}", unserved[0]);

    // Per-deployment settings are read, not warned about.
    let eu = named(c, "eu-chat");
    assert_eq!(eu.num_retries, Some(4));
    assert_eq!(eu.upstream.region_name.as_deref(), Some("eu"));
    let slow = named(c, "slow");
    assert_eq!(slow.timeout, Some(Duration::from_secs(300)));
    assert_eq!(slow.stream_timeout, Some(Duration::from_millis(500)));
    assert_eq!(slow.num_retries, None);
    // Without its own, a deployment takes `litellm_settings.request_timeout`.
    assert_eq!(eu.timeout, Some(Duration::from_secs(600)));
    for key in ["num_retries", "region_name", "timeout", "stream_timeout"] {
        assert!(
            !w.iter()
                .any(|x| x.contains(&format!("litellm_params.{key}:"))),
            "{key} warned: {w:#?}"
        );
    }

    // The alias, honoured.
    assert_eq!(
        c.router.model_group_alias,
        [GroupAlias {
            alias: "friendly-name".into(),
            group: "slow".into(),
            hidden: false
        }]
    );

    // What sluice does not act on: one warning each, naming the key.
    for path in [
        "litellm_settings.telemetry",
        "litellm_settings.default_team_settings",
        "finetune_settings",
        "files_settings",
        "router_settings.enable_pre_call_checks",
        "general_settings.proxy_budget_rescheduler_min_time",
        "general_settings.database_connection_pool_limit",
        "model_list[6].litellm_params.mock_timeout",
    ] {
        let n = w
            .iter()
            .filter(|x| x.starts_with(&format!("{path}:")))
            .count();
        assert_eq!(n, 1, "{path}: {w:#?}");
    }
    // LiteLLM's own custom route is served.
    let routes = &c.general.pass_through_endpoints;
    assert_eq!(routes.len(), 1);
    assert_eq!(routes[0].path, "/v1/custom-rerank");
    assert_eq!(routes[0].target, "https://rerank.example/v1/rerank");
    assert!(routes[0].forward_headers && routes[0].auth);
    assert!(
        !w.iter()
            .any(|x| x.starts_with("general_settings.pass_through_endpoints")),
        "{w:#?}"
    );
}

#[test]
fn aliases_from_either_section_name_a_served_group() {
    let yaml = r#"
model_list:
  - model_name: big
    litellm_params: {model: mock/big}
  - model_name: "anthropic/*"
    litellm_params: {model: mock/any}
router_settings:
  model_group_alias:
    gpt-4: big
    claude: anthropic/claude-3
litellm_settings:
  model_group_alias:
    secret: {model: big, hidden: true}
    gpt-4: {model: big, hidden: true}
"#;
    let loaded = load_str(yaml, &no_env()).unwrap_or_else(|e| panic!("{e}"));
    let aliases: Vec<(&str, &str, bool)> = loaded
        .config
        .router
        .model_group_alias
        .iter()
        .map(|a| (a.alias.as_str(), a.group.as_str(), a.hidden))
        .collect();
    assert_eq!(
        aliases,
        [
            ("claude", "anthropic/claude-3", false),
            ("gpt-4", "big", false),
            ("secret", "big", true)
        ]
    );
    assert!(warnings(&loaded).contains(
        &"litellm_settings.model_group_alias.gpt-4: also set in router_settings, which wins; ignored"
            .to_owned()
    ));

    let bad = r#"
model_list:
  - model_name: big
    litellm_params: {model: mock/big}
router_settings:
  model_group_alias: {gpt-4: bg, empty: {hidden: true}}
litellm_settings:
  model_group_alias: {other: {model: nowhere, hidden: maybe}}
"#;
    let errs = errors(load_str(bad, &no_env()).unwrap_err());
    for e in [
        r#"router_settings.model_group_alias.gpt-4: no model group is named "bg" (did you mean "big"?)"#,
        "router_settings.model_group_alias.empty: expected a model group's name, or {model: <group>, hidden: <bool>}",
        r#"litellm_settings.model_group_alias.other: no model group is named "nowhere""#,
    ] {
        assert!(errs.iter().any(|x| x == e), "missing {e:?} in {errs:#?}");
    }
    assert!(
        errs.iter()
            .any(|x| x.starts_with("litellm_settings.model_group_alias.other.hidden:")),
        "{errs:#?}"
    );
}

#[test]
fn per_deployment_retries_and_region_are_checked() {
    let yaml = r#"
model_list:
  - model_name: a
    litellm_params: {model: mock/a, num_retries: many, region_name: ""}
"#;
    let errs = errors(load_str(yaml, &no_env()).unwrap_err());
    assert_eq!(
        errs,
        [r#"model_list[0].litellm_params.num_retries: expected a whole number ≥ 0, got "many""#]
    );
}

/// A representative set of LiteLLM's documented keys (docs/proxy/config_settings.md), each
/// with a value of its documented type: the config loads, and every key sluice does not read
/// is a warning naming it.
#[test]
fn documented_litellm_keys_load() {
    let yaml = r#"
environment_variables: {SLACK_WEBHOOK_URL: "https://hooks.slack.test/services/x"}
model_list:
  - model_name: m
    litellm_params:
      model: mock/m
      max_tokens: 256
      temperature: 0.2
      tags: ["free"]
      max_budget: 10
      budget_duration: 30d
      litellm_credential_name: shared
      merge_reasoning_content_in_choices: true
      num_retries: 1
      region_name: us
    model_info:
      id: m-1
      mode: chat
      input_cost_per_token: 0
      output_cost_per_token: 0
      max_tokens: 2048
      base_model: gpt-4o
      supports_vision: true
      additionalProp1: {}
litellm_settings:
  success_callback: []
  service_callbacks: ["datadog", "prometheus"]
  turn_off_message_logging: true
  redact_user_api_key_info: true
  langfuse_default_tags: ["cache_hit"]
  request_timeout: 10
  force_ipv4: true
  json_logs: true
  set_verbose: false
  default_fallbacks: ["m"]
  content_policy_fallbacks: [{"m": ["m"]}]
  context_window_fallbacks: [{"m": ["m"]}]
  mcp_aliases: {"github": "github_mcp_server"}
  modify_params: true
  enable_preview_features: true
  disable_end_user_cost_tracking: true
  key_generation_settings: {team_key_generation: {allowed_team_member_roles: ["admin"]}}
  enable_json_schema_validation: true
  max_budget: 100
  budget_duration: 30d
  upperbound_key_generate_params: {max_budget: 100}
  default_key_generate_params: {max_budget: 10}
  model_group_alias: {"friendly": "m"}
callback_settings:
  otel:
    message_logging: false
general_settings:
  completion_model: m
  store_prompts_in_spend_logs: false
  forward_client_headers_to_llm_api: true
  disable_spend_logs: true
  disable_master_key_return: true
  disable_retry_on_max_parallel_request_limit_error: true
  disable_reset_budget: true
  disable_adding_master_key_hash_to_db: true
  enable_jwt_auth: false
  enforce_user_param: false
  allowed_routes: ["/chat/completions"]
  key_management_system: hashicorp_vault
  key_management_settings: {hosted_keys: ["OPENAI_API_KEY"], access_mode: read_only}
  master_key: sk-1
  maximum_spend_logs_retention_period: 30d
  database_connection_pool_limit: 10
  database_connection_timeout: 60
  allow_requests_on_db_unavailable: true
  custom_auth: my_module.auth
  max_parallel_requests: 10
  global_max_parallel_requests: 100
  infer_model_from_keys: true
  background_health_checks: true
  health_check_interval: 300
  alerting: ["slack"]
  alerting_threshold: 300
  use_client_credentials_pass_through_routes: false
  pass_through_endpoints: []
router_settings:
  routing_strategy: simple-shuffle
  enable_pre_call_checks: true
  allowed_fails: 3
  cooldown_time: 30
  disable_cooldowns: true
  enable_tag_filtering: true
  tag_filtering_match_any: true
  retry_policy: {"TimeoutErrorRetries": 3, "RateLimitErrorRetries": 3}
  allowed_fails_policy: {"TimeoutErrorAllowedFails": 12}
  fallbacks: [{"m": ["m"]}]
  num_retries: 2
  timeout: 30
  stream_timeout: 10
  retry_after: 0
  model_group_retry_policy: {"m": {"TimeoutErrorRetries": 1}}
  provider_budget_config: {openai: {budget_limit: 100, time_period: 1d}}
  default_litellm_params: {temperature: 0}
  set_verbose: false
"#;
    let loaded = load_str(yaml, &no_env()).unwrap_or_else(|e| panic!("{e}"));
    let w = warnings(&loaded);
    for path in [
        "model_list[0].litellm_params.max_tokens",
        "litellm_settings.service_callbacks",
        "litellm_settings.force_ipv4",
        "litellm_settings.mcp_aliases",
        "litellm_settings.key_generation_settings",
        "general_settings.completion_model",
        "general_settings.allowed_routes",
        "general_settings.alerting_threshold",
        "router_settings.provider_budget_config",
    ] {
        let n = w
            .iter()
            .filter(|x| x.starts_with(&format!("{path}:")))
            .count();
        assert_eq!(n, 1, "{path}: {w:#?}");
    }
    // Alerting and tag routing are read, not warned about.
    assert!(
        !w.iter()
            .any(|x| x.starts_with("general_settings.alerting:")),
        "{w:#?}"
    );
    assert!(loaded
        .config
        .general
        .alerting
        .as_ref()
        .is_some_and(|a| a.slack.is_some()));
    for path in [
        "model_list[0].litellm_params.tags",
        "router_settings.enable_tag_filtering",
        "router_settings.tag_filtering_match_any",
    ] {
        assert!(!w.iter().any(|x| x.starts_with(path)), "{path}: {w:#?}");
    }
    let c = &loaded.config;
    assert_eq!(
        &*c.deployments[0].tags,
        [std::sync::Arc::<str>::from("free")]
    );
    assert!(c.router.tag_filtering.enabled && c.router.tag_filtering.match_any);
    assert_eq!(c.deployments[0].num_retries, Some(1));
    assert_eq!(c.router.model_group_alias.len(), 1);
    assert_eq!(c.router.num_retries, Some(2));
}
