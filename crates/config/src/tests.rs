//! Loader tests on LiteLLM-style configs (`tests/fixtures/configs/`).

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use super::*;
use sluice_providers::{Provider, ProviderConfig};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/configs")
        .join(name)
}

fn env(vars: &[(&str, &str)]) -> HashMap<String, String> {
    vars.iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// The URL of a one-server Redis target.
fn single(t: &sluice_core::RedisTarget) -> &str {
    match t {
        sluice_core::RedisTarget::Single(u) => u.expose(),
        other => panic!("not one server: {other:?}"),
    }
}

fn provider(prefix: &str) -> Provider {
    Provider::from_prefix(prefix).unwrap()
}

fn azure(d: &Deployment) -> &sluice_providers::azure::Config {
    match &d.upstream.specific {
        ProviderConfig::Azure(c) => c,
        other => panic!("not azure: {other:?}"),
    }
}

fn openai(d: &Deployment) -> &sluice_providers::openai_compatible::Config {
    match &d.upstream.specific {
        ProviderConfig::OpenAiCompatible(c) => c,
        other => panic!("not OpenAI-compatible: {other:?}"),
    }
}

fn mock(d: &Deployment) -> &sluice_mock::MockSettings {
    match &d.upstream.specific {
        ProviderConfig::Mock(c) => &c.settings,
        other => panic!("not mock: {other:?}"),
    }
}

fn errors(e: ConfigError) -> Vec<String> {
    match e {
        ConfigError::Invalid(list) => list.iter().map(ToString::to_string).collect(),
        other => panic!("expected validation errors, got {other}"),
    }
}

#[test]
fn loads_a_litellm_config_unchanged() {
    let e = env(&[
        ("AZURE_API_KEY", "az-secret-key-value"),
        ("OPENAI_API_KEY", "sk-openai-secret-value"),
        ("GROQ_API_KEY", "gsk-groq"),
        ("VLLM_HOST", "http://10.0.0.5:8000"),
        ("LITELLM_MASTER_KEY", "sk-master-1234"),
    ]);
    let loaded = load_file(&fixture("litellm_full.yaml"), &e).unwrap();
    let c = &loaded.config;
    assert_eq!(c.deployments.len(), 7);

    let az = &c.deployments[0];
    assert_eq!(az.provider(), provider("azure"));
    assert_eq!(az.upstream.model, "gpt-4o-eu");
    assert_eq!(az.id, "azure-eu");
    assert_eq!(
        az.upstream.api_base.as_deref(),
        Some("https://my-endpoint.openai.azure.com"),
        "environment_variables: feeds os.environ/ and the trailing / goes"
    );
    assert_eq!(az.upstream.api_keys[0].key.expose(), "az-secret-key-value");
    assert_eq!(
        azure(az).api_version,
        sluice_providers::azure::DEFAULT_API_VERSION
    );
    assert_eq!(az.rpm, Some(600), "numeric strings are accepted");
    assert_eq!(az.weight, Some(2.0));
    assert_eq!(az.model_info.base_model.as_deref(), Some("azure/gpt-4o"));

    let oa = &c.deployments[1];
    assert_eq!(
        oa.upstream.api_base.as_deref(),
        Some("https://api.openai.com/v1")
    );
    assert_eq!(oa.timeout, Some(Duration::from_secs(30)));
    assert_eq!(oa.stream_timeout, Some(Duration::from_millis(5500)));
    assert_eq!(openai(oa).organization.as_deref(), Some("org-123"));
    assert_eq!(oa.upstream.extra_headers[0].0, "X-Team");
    assert_eq!(oa.id.len(), 16, "derived ids are 16 hex digits");

    let groq = &c.deployments[2];
    assert_eq!(
        groq.upstream.api_base.as_deref(),
        Some("https://api.groq.com/openai/v1")
    );
    assert_eq!(groq.upstream.api_keys[0].key.expose(), "gsk-groq");
    assert_eq!(groq.tpm, Some(100_000));
    assert_eq!(
        groq.timeout,
        Some(Duration::from_secs(120)),
        "litellm_settings.request_timeout is the default timeout"
    );

    assert_eq!(
        c.deployments[3].upstream.api_base.as_deref(),
        Some("http://localhost:11434/v1"),
        "ollama gets /v1"
    );
    let vllm = &c.deployments[4];
    assert_eq!(vllm.upstream.model, "meta-llama/Llama-3.1-8B");
    assert_eq!(
        vllm.upstream.api_base.as_deref(),
        Some("http://10.0.0.5:8000/v1")
    );
    assert_eq!(c.deployments[5].upstream.model, "*");
    assert_eq!(c.deployments[6].provider(), provider("bedrock"));

    assert!(c.litellm.drop_params);
    assert_eq!(c.litellm.num_retries, Some(3));
    assert_eq!(c.litellm.success_callback, ["langfuse"]);
    assert_eq!(
        c.router.routing_strategy,
        Some(sluice_routing::Strategy::UsageBased)
    );
    assert_eq!(c.router.redis.port, Some(6379));
    assert_eq!(c.router.redis.host, None, "unset REDIS_HOST leaves it out");
    assert_eq!(c.router.cooldown_time, Some(Duration::from_secs(30)));
    assert_eq!(
        c.router.fallbacks,
        [(
            "gpt-4o".to_owned(),
            vec!["llama-3".to_owned(), "openai/gpt-4o-mini".to_owned()]
        )],
        "a fallback may name a model a wildcard group serves"
    );
    assert_eq!(
        c.general.master_key.as_ref().unwrap().expose(),
        "sk-master-1234"
    );
    assert_eq!(c.general.max_request_body_bytes, 8 * 1024 * 1024);

    let warnings: Vec<String> = loaded.warnings.iter().map(ToString::to_string).collect();
    for expected in [
        "router_settings.redis_host: environment variable REDIS_HOST is not set; left out",
        "model_list[6].litellm_params.aws_access_key_id: aws_access_key_id and aws_secret_access_key are not set and neither are AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; requests will go unsigned",
        "general_settings.alerting: `slack` needs the environment variable SLACK_WEBHOOK_URL; its alerts are not sent",
    ] {
        assert!(
            warnings.iter().any(|w| w == expected),
            "missing warning {expected:?} in {warnings:#?}"
        );
    }
    // `cache: true` is LiteLLM's in-memory cache, with its defaults.
    let cache = c
        .litellm
        .cache
        .as_ref()
        .expect("cache: true turns the cache on");
    assert!(cache.store && cache.dedupe);
    assert_eq!(cache.kind, sluice_cache::CacheType::Local);
    assert_eq!(cache.ttl, std::time::Duration::from_secs(600));
    let titan = &c.deployments[6];
    assert_eq!(
        titan.upstream.api_base.as_deref(),
        Some("https://bedrock-runtime.us-east-1.amazonaws.com"),
        "the Bedrock endpoint comes from aws_region_name"
    );
    let described = describe(c);
    assert!(!described.contains("sk-openai-secret-value"));
    assert!(!described.contains("az-secret-key-value"));
    assert!(described.contains("azure/gpt-4o-eu"));
}

#[test]
fn every_bad_value_is_named_by_path() {
    let errs = errors(load_file(&fixture("bad_values.yaml"), &env(&[])).unwrap_err());
    let expected = [
        r#"model_list[0].litellm_params.model: unknown provider "opnai" (did you mean "openai"?)"#,
        r#"model_list[1].litellm_params.rpm: expected a whole number ≥ 0, got "lots""#,
        r#"model_list[1].litellm_params.timeout: expected a number > 0, got "-1""#,
        r#"model_list[1].litellm_params.weight: expected a number > 0, got "0""#,
        r#"model_list[2].litellm_params.api_base: required for azure/ models (or set AZURE_API_BASE or AZURE_OPENAI_ENDPOINT)"#,
        r#"model_list[3].litellm_params.model: cannot tell which provider serves "llama3"; write it as provider/model, e.g. openai/llama3"#,
        r#"model_list[4].model_name: required"#,
        r#"model_list[4].litellm_params.api_base: expected an http:// or https:// URL, got "ftp://example.com""#,
        r#"router_settings.routing_strategy: unknown routing strategy "least-bsy" (did you mean "least-busy"?); one of: simple-shuffle, least-busy, latency-based-routing, usage-based-routing, usage-based-routing-v2, cost-based-routing"#,
        r#"router_settings.fallbacks[0].b[0]: unknown model "nope""#,
    ];
    for e in expected {
        assert!(errs.iter().any(|x| x == e), "missing {e:?} in {errs:#?}");
    }
    assert_eq!(errs.len(), expected.len(), "{errs:#?}");
}

#[test]
fn type_errors_name_the_path() {
    let e = load_str(
        "model_list:\n  - model_name: x\n    litellm_params:\n      model: [1, 2]\n",
        &env(&[]),
    )
    .unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("model_list[0].litellm_params.model: invalid type: sequence"),
        "{text}"
    );
    let e = load_str("model_list: [\n", &env(&[])).unwrap_err();
    assert!(matches!(e, ConfigError::Syntax { .. }), "{e}");
}

#[test]
fn include_appends_models() {
    let loaded = load_file(&fixture("main_with_include.yaml"), &env(&[])).unwrap();
    let names: Vec<&str> = loaded
        .config
        .deployments
        .iter()
        .map(|d| d.model_name.as_str())
        .collect();
    assert_eq!(names, ["first", "second"]);
    assert_eq!(
        loaded.config.general.master_key.unwrap().expose(),
        "sk-main"
    );
}

#[test]
fn unknown_keys_get_suggestions() {
    let loaded = load_str(
        "model_list:\n  - model_name: x\n    litellm_params:\n      model: mock/x\n      api_bse: http://a\ngeneral_settings:\n  mastr_key: sk-1\n",
        &env(&[]),
    )
    .unwrap();
    let w: Vec<String> = loaded.warnings.iter().map(ToString::to_string).collect();
    assert!(w.contains(
        &r#"model_list[0].litellm_params.api_bse: not used by sluice; ignored (did you mean "api_base"?)"#.to_owned()
    ), "{w:#?}");
    assert!(w.contains(
        &r#"general_settings.mastr_key: not used by sluice; ignored (did you mean "master_key"?)"#
            .to_owned()
    ));
}

#[test]
fn defaults_keys_and_ids() {
    let yaml = r#"
model_list:
  - model_name: same
    litellm_params: {model: openai/gpt-4o, api_key: sk-a}
  - model_name: same
    litellm_params: {model: openai/gpt-4o, api_key: sk-a}
  - model_name: bare
    litellm_params: {model: gpt-4o-mini}
  - model_name: claude
    litellm_params: {model: claude-sonnet-4-5}
  - model_name: compat
    litellm_params: {model: my-model, api_base: "http://127.0.0.1:9/v1/chat/completions"}
  - model_name: mocked
    litellm_params: {model: openai/gpt-4o, mock_response: "hi", mock_chunks: 3}
"#;
    let e = env(&[
        ("OPENAI_API_KEY", "sk-env"),
        ("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1"),
    ]);
    let c = load_str(yaml, &e).unwrap().config;
    assert_ne!(c.deployments[0].id, c.deployments[1].id);
    assert!(c.deployments[1].id.ends_with("-2"));
    let again = load_str(yaml, &e).unwrap().config;
    assert_eq!(
        c.deployments[0].id, again.deployments[0].id,
        "ids are stable"
    );
    assert_eq!(c.deployments[2].provider(), provider("openai"));
    assert_eq!(c.deployments[2].upstream.api_keys[0].key.expose(), "sk-env");
    assert_eq!(
        c.deployments[2].upstream.api_base.as_deref(),
        Some("http://127.0.0.1:8080/v1")
    );
    assert_eq!(c.deployments[3].provider(), provider("anthropic"));
    assert_eq!(c.deployments[4].provider(), provider("custom_openai"));
    assert_eq!(
        c.deployments[4].upstream.api_base.as_deref(),
        Some("http://127.0.0.1:9/v1")
    );
    assert_eq!(c.deployments[5].provider(), provider("mock"));
    assert_eq!(mock(&c.deployments[5]).response.as_deref(), Some("hi"));
    assert_eq!(mock(&c.deployments[5]).chunks, 3);
}

#[test]
fn duplicate_explicit_ids_are_errors() {
    let yaml = "model_list:\n  - model_name: a\n    litellm_params: {model: mock/a}\n    model_info: {id: x}\n  - model_name: b\n    litellm_params: {model: mock/b}\n    model_info: {id: x}\n";
    let errs = errors(load_str(yaml, &env(&[])).unwrap_err());
    assert_eq!(
        errs,
        [r#"model_list[1].model_info.id: duplicate deployment id "x" (also model_list[0])"#]
    );
}

#[test]
fn quickstart_loads_without_keys() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/quickstart.yaml");
    let loaded = load_file(&path, &env(&[])).unwrap();
    assert_eq!(loaded.config.deployments.len(), 5);
    assert!(loaded.config.general.master_key.is_some());
}

#[test]
fn api_key_lists_with_weights() {
    let yaml = r#"
model_list:
  - model_name: m
    litellm_params:
      model: openai/gpt-4o
      api_key: [{key: sk-aaaaaaaaaaaa, weight: 2}, sk-bbbbbbbbbbbb]
  - model_name: bad
    litellm_params:
      model: openai/gpt-4o
      api_key: [{key: sk-c, weight: -1}]
"#;
    let err = load_str(yaml, &HashMap::new()).unwrap_err().to_string();
    assert!(
        err.contains("model_list[1].litellm_params.api_key[0].weight: expected a number > 0"),
        "{err}"
    );
    let ok = yaml.split("  - model_name: bad").next().unwrap();
    let c = load_str(ok, &HashMap::new()).unwrap().config;
    let keys = &c.deployments[0].upstream.api_keys;
    assert_eq!(keys.len(), 2);
    assert_eq!(
        (keys[0].key.expose(), keys[0].weight),
        ("sk-aaaaaaaaaaaa", 2.0)
    );
    assert_eq!(
        (keys[1].key.expose(), keys[1].weight),
        ("sk-bbbbbbbbbbbb", 1.0)
    );
    let shown = crate::describe(&c);
    assert!(
        shown.contains("(weight 2)") && !shown.contains("sk-aaaaaaaaaaaa"),
        "{shown}"
    );
}

#[test]
fn bedrock_and_vertex_credentials_from_params_and_environment() {
    let yaml = r#"
model_list:
  - model_name: claude
    litellm_params:
      model: bedrock/anthropic.claude-3-5-sonnet-20240620-v1:0
      aws_access_key_id: os.environ/MY_AWS_KEY
      aws_secret_access_key: os.environ/MY_AWS_SECRET
      aws_region_name: eu-central-1
  - model_name: claude-env
    litellm_params:
      model: bedrock/anthropic.claude-3-haiku-20240307-v1:0
  - model_name: vertex
    litellm_params:
      model: vertex_ai/gemini-2.5-pro
      vertex_credentials: '{"client_email": "a@b", "private_key": "k", "token_uri": "http://t", "project_id": "from-key"}'
  - model_name: vertex-bad
    litellm_params:
      model: vertex_ai/gemini-2.5-pro
      vertex_project: p
      vertex_credentials: '{"client_email": "a@b"}'
"#;
    let e = env(&[
        ("MY_AWS_KEY", "AKIAPARAM"),
        ("MY_AWS_SECRET", "param-secret"),
        ("AWS_ACCESS_KEY_ID", "AKIAENV"),
        ("AWS_SECRET_ACCESS_KEY", "env-secret"),
        ("AWS_SESSION_TOKEN", "env-token"),
        ("AWS_REGION", "ap-south-1"),
    ]);
    let errs = errors(load_str(yaml, &e).unwrap_err());
    assert_eq!(
        errs,
        ["model_list[3].litellm_params.vertex_credentials: the key file has no `private_key`"]
    );
    let good = yaml.split("  - model_name: vertex-bad").next().unwrap();
    let c = load_str(good, &e).unwrap().config;
    let bedrock = |d: &Deployment| match &d.upstream.specific {
        ProviderConfig::Bedrock(c) => c.clone(),
        other => panic!("not bedrock: {other:?}"),
    };
    let first = bedrock(&c.deployments[0]);
    let aws = first.aws.as_ref().unwrap();
    assert_eq!(aws.access_key_id.expose(), "AKIAPARAM");
    assert_eq!(first.region, "eu-central-1");
    assert_eq!(
        aws.session_token.as_ref().map(Secret::expose),
        Some("env-token"),
        "each value falls back to its own variable"
    );
    assert_eq!(
        c.deployments[0].upstream.api_base.as_deref(),
        Some("https://bedrock-runtime.eu-central-1.amazonaws.com")
    );
    let second = bedrock(&c.deployments[1]);
    let env_aws = second.aws.as_ref().unwrap();
    assert_eq!(
        (env_aws.access_key_id.expose(), second.region.as_str()),
        ("AKIAENV", "ap-south-1")
    );
    let ProviderConfig::Vertex(v) = &c.deployments[2].upstream.specific else {
        panic!("not vertex");
    };
    assert_eq!(
        (v.project.as_str(), v.location.as_str()),
        ("from-key", "us-central1")
    );
    assert_eq!(
        c.deployments[2].upstream.api_base.as_deref(),
        Some("https://us-central1-aiplatform.googleapis.com")
    );
    assert!(
        !format!("{c:?}").contains("param-secret"),
        "secrets never print"
    );
}

#[test]
fn http2_prior_knowledge_is_for_plain_http_upstreams_only() {
    let yaml = "model_list:
  - model_name: local
    litellm_params: {model: openai/llama, api_base: 'http://127.0.0.1:8000/v1', http2_prior_knowledge: true}
  - model_name: hosted
    litellm_params: {model: openai/gpt-4o, api_base: 'https://api.openai.com/v1', api_key: k, http2_prior_knowledge: true}
  - model_name: plain
    litellm_params: {model: openai/llama, api_base: 'http://127.0.0.1:8000/v1'}
";
    let loaded = load_str(yaml, &env(&[])).unwrap();
    let http: Vec<sluice_net::UpstreamHttp> = loaded
        .config
        .deployments
        .iter()
        .map(|d| d.upstream.connect.http)
        .collect();
    assert_eq!(
        http,
        [
            sluice_net::UpstreamHttp::PriorKnowledge,
            sluice_net::UpstreamHttp::Negotiate,
            sluice_net::UpstreamHttp::Negotiate
        ]
    );
    let paths: Vec<&str> = loaded
        .warnings
        .iter()
        .map(|w| w.path.as_str())
        .filter(|p| p.ends_with("http2_prior_knowledge"))
        .collect();
    assert_eq!(
        paths,
        ["model_list[1].litellm_params.http2_prior_knowledge"],
        "{:?}",
        loaded.warnings
    );

    let e = load_str(
        "model_list:\n  - model_name: x\n    litellm_params: {model: openai/x, api_base: 'http://h/v1', http2_prior_knowledge: maybe}\n",
        &env(&[]),
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("litellm_params.http2_prior_knowledge: expected true or false"),
        "{e}"
    );
}

#[test]
fn pass_through_upstreams_from_a_marked_deployment_else_the_environment() {
    use sluice_providers::passthrough::Route;
    let e = env(&[
        ("ANTHROPIC_API_KEY", "sk-env"),
        ("MISTRAL_API_KEY", "m-env"),
        ("MISTRAL_API_BASE", "http://mistral.local/v1"),
    ]);
    let loaded = load_str(
        r#"
model_list:
  - model_name: claude-plain
    litellm_params:
      model: anthropic/claude-sonnet-4-5
      api_base: http://first.local
      api_key: sk-first
  - model_name: claude-pt
    litellm_params:
      model: anthropic/claude-sonnet-4-5
      api_base: http://marked.local
      api_key: sk-marked
      use_in_pass_through: "true"
  - model_name: fast
    litellm_params:
      model: groq/llama-3.1-8b-instant
      api_key: g
      use_in_pass_through: true
"#,
        &e,
    )
    .unwrap();
    let upstream = |r: Route| {
        loaded
            .config
            .pass_through
            .upstreams
            .iter()
            .find(|(route, _)| *route == r)
            .map(|(_, u)| u.clone())
            .unwrap()
    };
    let a = upstream(Route::Anthropic).unwrap();
    assert_eq!(a.api_base.as_deref(), Some("http://marked.local/v1"));
    assert_eq!(a.api_keys[0].key.expose(), "sk-marked");
    let m = upstream(Route::Mistral).unwrap();
    assert_eq!(m.api_base.as_deref(), Some("http://mistral.local/v1"));
    assert_eq!(m.api_keys[0].key.expose(), "m-env");
    let az = upstream(Route::Azure).unwrap_err();
    assert!(az.to_string().contains("AZURE_API_BASE"), "{az}");
    assert!(
        loaded
            .warnings
            .iter()
            .any(|w| w.message.contains("no pass-through route serves groq/")),
        "{:?}",
        loaded.warnings
    );
    assert!(
        !loaded
            .warnings
            .iter()
            .any(|w| w.path.ends_with("use_in_pass_through")),
        "the key is known"
    );
}

#[test]
fn a_base_from_the_environment_gets_the_providers_path_too() {
    let loaded = load_str(
        "model_list:
  - model_name: claude
    litellm_params: {model: anthropic/claude-sonnet-4-5, api_key: k}
  - model_name: local
    litellm_params: {model: ollama/llama3}
",
        &env(&[
            ("ANTHROPIC_API_BASE", "http://proxy.internal:8080"),
            ("OLLAMA_API_BASE", "http://gpu-box:11434/"),
        ]),
    )
    .unwrap();
    let bases: Vec<_> = loaded
        .config
        .deployments
        .iter()
        .map(|d| d.upstream.api_base.clone().unwrap())
        .collect();
    assert_eq!(
        bases,
        ["http://proxy.internal:8080/v1", "http://gpu-box:11434/v1"]
    );
}

#[test]
fn a_redis_cache_finds_its_redis_where_litellm_looks() {
    let yaml = |params: &str, router: &str| {
        format!(
            "model_list: []\nrouter_settings:\n{router}\nlitellm_settings:\n  cache: true\n  cache_params:\n    type: redis\n{params}"
        )
    };
    let redis = |c: &Config| match &c.litellm.cache.as_ref().unwrap().kind {
        sluice_cache::CacheType::Redis(r) => r.clone(),
        other => panic!("not redis: {other:?}"),
    };
    // Its own keys, the password percent-encoded.
    let own = load_str(
        &yaml(
            "    host: cache.local\n    port: 6380\n    password: p@ss/w\n    socket_timeout: 0.05\n    default_in_memory_ttl: 30\n    default_in_redis_ttl: 120\n",
            "  redis_host: fleet.local",
        ),
        &env(&[]),
    )
    .unwrap();
    let r = redis(&own.config);
    assert_eq!(single(&r.target), "redis://:p%40ss%2Fw@cache.local:6380");
    assert_eq!(r.timeout, Duration::from_millis(50));
    assert_eq!(r.memory_ttl, Some(Duration::from_secs(30)));
    assert_eq!(
        own.config.litellm.cache.as_ref().unwrap().ttl,
        Duration::from_secs(120),
        "default_in_redis_ttl is the TTL of a Redis cache"
    );
    // Else LiteLLM's environment variables.
    let from_env = load_str(
        &yaml("", "  num_retries: 1"),
        &env(&[("REDIS_HOST", "env.local")]),
    )
    .unwrap();
    assert_eq!(
        single(&redis(&from_env.config).target),
        "redis://env.local:6379"
    );
    // Else the fleet's Redis.
    let fleet = load_str(
        &yaml("", "  redis_url: redis://fleet.local:7000"),
        &env(&[]),
    )
    .unwrap();
    assert_eq!(
        single(&redis(&fleet.config).target),
        "redis://fleet.local:7000"
    );
    // Nowhere: an error that says where to put it.
    let errs = errors(load_str(&yaml("", "  num_retries: 1"), &env(&[])).unwrap_err());
    assert!(
        errs.iter()
            .any(|e| e
                .starts_with("litellm_settings.cache_params.host: type \"redis\" needs a Redis")),
        "{errs:?}"
    );
    // TLS is refused by name rather than tried in the clear.
    let errs = errors(
        load_str(
            &yaml("    url: rediss://secure.local:6380\n", "  num_retries: 1"),
            &env(&[]),
        )
        .unwrap_err(),
    );
    assert!(errs.iter().any(|e| e.contains("rediss://")), "{errs:?}");
    assert!(!errs.iter().any(|e| e.contains("secure.local")), "{errs:?}");
}

#[test]
fn redis_cluster_and_sentinel_read_where_litellm_writes_them() {
    use sluice_core::{NodeAddress, RedisTarget};
    let at = |h: &str, port: u16| NodeAddress {
        host: h.into(),
        port,
    };
    let cache = |c: &Config| match &c.litellm.cache.as_ref().unwrap().kind {
        sluice_cache::CacheType::Redis(r) => r.target.clone(),
        other => panic!("not redis: {other:?}"),
    };
    // cache_params: LiteLLM's docs, word for word, with a password for every node.
    let loaded = load_str(
        "model_list: []\nlitellm_settings:\n  cache: true\n  cache_params:\n    type: redis\n    password: pw\n    redis_startup_nodes: [{ \"host\": \"127.0.0.1\", \"port\": \"7001\" }, {host: r2, port: 7002}]\n",
        &env(&[]),
    )
    .unwrap();
    assert!(
        !loaded
            .warnings
            .iter()
            .any(|w| w.path.contains("cache_params")),
        "{:?}",
        loaded.warnings
    );
    assert_eq!(
        cache(&loaded.config),
        RedisTarget::Cluster {
            nodes: vec![at("127.0.0.1", 7001), at("r2", 7002)],
            username: None,
            password: Some(Secret::new("pw")),
        }
    );
    let sentinel = load_str(
        "model_list: []\nlitellm_settings:\n  cache: true\n  cache_params:\n    type: redis\n    service_name: \"mymaster\"\n    sentinel_nodes: [[\"localhost\", 26379], [s2, \"26380\"]]\n    sentinel_password: \"spw\"\n",
        &env(&[("REDIS_PASSWORD", "datapw")]),
    )
    .unwrap();
    assert_eq!(
        cache(&sentinel.config),
        RedisTarget::Sentinel {
            service_name: "mymaster".into(),
            sentinels: vec![at("localhost", 26379), at("s2", 26380)],
            sentinel_password: Some(Secret::new("spw")),
            username: None,
            password: Some(Secret::new("datapw")),
        },
        "the primary's password from REDIS_PASSWORD, as LiteLLM merges it"
    );
    // LiteLLM's environment variables; the environment's Cluster wins over its REDIS_HOST.
    let from_env = load_str(
        "model_list: []\nlitellm_settings:\n  cache: true\n  cache_params: {type: redis}\n",
        &env(&[
            ("REDIS_HOST", "one.local"),
            (
                "REDIS_CLUSTER_NODES",
                r#"[{"host": "c1", "port": "7001"}, {"host": "c2", "port": 7002}]"#,
            ),
        ]),
    )
    .unwrap();
    assert!(matches!(
        cache(&from_env.config),
        RedisTarget::Cluster { ref nodes, .. } if nodes == &[at("c1", 7001), at("c2", 7002)]
    ));
    let from_env = load_str(
        "model_list: []\nlitellm_settings:\n  cache: true\n  cache_params: {type: redis}\n",
        &env(&[
            ("REDIS_SENTINEL_NODES", r#"[["s1", 26379]]"#),
            ("REDIS_SERVICE_NAME", "mymaster"),
            ("REDIS_SENTINEL_PASSWORD", "spw"),
        ]),
    )
    .unwrap();
    assert!(matches!(
        cache(&from_env.config),
        RedisTarget::Sentinel { ref service_name, ref sentinel_password, .. }
            if service_name == "mymaster" && sentinel_password.as_ref().map(Secret::expose) == Some("spw")
    ));
    // router_settings: the fleet's Redis takes the same keys.
    let fleet = load_str(
        "model_list: []\nrouter_settings:\n  redis_password: pw\n  service_name: mymaster\n  sentinel_nodes: [[\"127.0.0.1\", 26379]]\n",
        &env(&[]),
    )
    .unwrap();
    assert_eq!(
        fleet.config.router.redis.target(),
        Some(RedisTarget::Sentinel {
            service_name: "mymaster".into(),
            sentinels: vec![at("127.0.0.1", 26379)],
            sentinel_password: None,
            username: None,
            password: Some(Secret::new("pw")),
        })
    );
    // A cache without its own Redis uses the fleet's, a Cluster too.
    let shared = load_str(
        "model_list: []\nrouter_settings:\n  redis_startup_nodes: [\"10.0.0.1:7001\"]\nlitellm_settings:\n  cache: true\n  cache_params: {type: redis}\n",
        &env(&[]),
    )
    .unwrap();
    assert!(matches!(cache(&shared.config), RedisTarget::Cluster { .. }));
}

#[test]
fn a_half_or_double_redis_setting_names_the_field_and_never_the_password() {
    let errs = |yaml: &str, vars: &[(&str, &str)]| {
        let e = errors(load_str(yaml, &env(vars)).unwrap_err());
        assert!(!e.iter().any(|e| e.contains("hunter2")), "{e:?}");
        e
    };
    let e = errs(
        "model_list: []\nrouter_settings:\n  sentinel_nodes: [[s1, 26379]]\n  sentinel_password: hunter2\n",
        &[],
    );
    assert_eq!(
        e,
        ["router_settings.service_name: sentinel_nodes is set but service_name, the name the sentinels monitor the primary under (`sentinel monitor <name> ...`), is not"]
    );
    let e = errs(
        "model_list: []\nrouter_settings:\n  service_name: mymaster\n",
        &[],
    );
    assert_eq!(
        e,
        ["router_settings.sentinel_nodes: service_name is set but no sentinel_nodes say where the sentinels are ([[host, port], ...])"]
    );
    let e = errs(
        "model_list: []\nrouter_settings:\n  redis_url: redis://:hunter2@one:6379\n  redis_startup_nodes: [{host: c1, port: 7001}]\n  sentinel_nodes: [[s1, 26379]]\n  service_name: m\n",
        &[],
    );
    assert!(
        e.iter().any(|e| e.starts_with("router_settings.redis_startup_nodes: a Redis Cluster (redis_startup_nodes) and a Sentinel-managed primary")),
        "{e:?}"
    );
    assert!(
        e.iter().any(|e| e.starts_with("router_settings.redis_url: one server's address is given, and redis_startup_nodes names a Redis Cluster; keep one")),
        "{e:?}"
    );
    let e = errs(
        "model_list: []\nlitellm_settings:\n  cache: true\n  cache_params:\n    type: redis\n    password: hunter2\n    redis_startup_nodes: [{host: c1, port: \"70o1\"}]\n",
        &[],
    );
    assert!(
        e.contains(&"litellm_settings.cache_params.redis_startup_nodes[0].port: expected a port (1 to 65535), got \"70o1\"".to_owned()),
        "{e:?}"
    );
    let e = errs(
        "model_list: []\nlitellm_settings:\n  cache: true\n  cache_params: {type: redis}\n",
        &[("REDIS_CLUSTER_NODES", "not json hunter2")],
    );
    assert!(
        e.contains(&"litellm_settings.cache_params.redis_startup_nodes: REDIS_CLUSTER_NODES in the environment is not a JSON list of nodes ([{\"host\": ..., \"port\": ...}] or [[host, port]])".to_owned()),
        "{e:?}"
    );
    // The search module's index is not spread over a Cluster: refused by name.
    let e = errs(
        "model_list:\n  - model_name: embed\n    litellm_params: {model: mock/embed}\nlitellm_settings:\n  cache: true\n  cache_params:\n    type: redis-semantic\n    similarity_threshold: 0.9\n    redis_semantic_cache_embedding_model: embed\n    redis_startup_nodes: [{host: c1, port: 7001}]\n",
        &[],
    );
    assert!(
        e.iter().any(|e| e.starts_with("litellm_settings.cache_params.redis_startup_nodes: type \"redis-semantic\" needs the search module")),
        "{e:?}"
    );
}

const ONE_MODEL: &str = "model_list:\n  - model_name: m\n    litellm_params: {model: mock/m}\n";

#[test]
fn guardrails_validate_into_built_guardrails() {
    use sluice_guardrails::{Action, Entity, Kind};
    let yaml = format!(
        r#"{ONE_MODEL}
guardrails:
  - guardrail_name: secrets
    litellm_params:
      guardrail: hide-secrets
      mode: pre_call
      default_on: true
      pii_entities_config: {{OPENAI_API_KEY: BLOCK}}
  - guardrail_name: pii
    litellm_params:
      guardrail: litellm_content_filter
      mode: [pre_call, post_call]
      output_parse_pii: true
      pii_entities_config: {{EMAIL_ADDRESS: MASK, CREDIT_CARD: mask}}
      patterns:
        - {{pattern_type: prebuilt, pattern_name: us_ssn, action: BLOCK}}
        - {{pattern_type: regex, name: ticket, pattern: 'TKT-[0-9]+', action: MASK}}
      blocked_words:
        - {{keyword: Project Falcon, action: BLOCK, description: internal}}
  - guardrail_name: injection
    litellm_params: {{guardrail: prompt_injection, mode: during_call, threshold: 0.5}}
"#
    );
    let loaded = load_str(&yaml, &env(&[])).unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let g = &loaded.config.guardrails;
    assert_eq!(g.len(), 3);
    let s = &g[0].settings;
    assert_eq!(s.kind, Kind::HideSecrets);
    assert!(s.default_on && s.modes.pre_call && !s.modes.post_call);
    assert!(s
        .spec
        .entities
        .contains(&(Entity::OpenAiApiKey, Action::Block)));
    assert!(s
        .spec
        .entities
        .contains(&(Entity::AwsAccessKey, Action::Mask)));
    let s = &g[1].settings;
    assert!(s.output_parse_pii && s.modes.pre_call && s.modes.post_call);
    assert_eq!(
        s.spec.entities,
        vec![
            (Entity::CreditCard, Action::Mask),
            (Entity::EmailAddress, Action::Mask),
            (Entity::UsSsn, Action::Block)
        ]
    );
    assert_eq!(
        s.spec.patterns,
        vec![("ticket".into(), "TKT-[0-9]+".into(), Action::Mask)]
    );
    assert_eq!(s.spec.words, vec![("Project Falcon".into(), Action::Block)]);
    let s = &g[2].settings;
    assert!(s.modes.during_call && s.modes.on_request());
    assert!((s.threshold - 0.5).abs() < f64::EPSILON);
    let shown = crate::describe(&loaded.config);
    assert!(
        shown.contains("  - pii: litellm_content_filter, pre_call+post_call, output_parse_pii  (mask CREDIT_CARD, EMAIL_ADDRESS, ticket; block US_SSN, 1 blocked word(s))"),
        "{shown}"
    );
    assert!(shown.contains("  - injection: prompt_injection, during_call  (block at score 0.5)"));
}

#[test]
fn guardrail_problems_name_their_paths() {
    let yaml = format!(
        r#"{ONE_MODEL}
guardrails:
  - guardrail_name: a
    litellm_params: {{guardrail: hide-secrets, mode: pre_call}}
  - guardrail_name: a
    litellm_params: {{guardrail: hide-secrets, mode: pre_call}}
  - guardrail_name: lk
    litellm_params: {{guardrail: lakera, mode: pre_call, api_key: x}}
  - guardrail_name: typo
    litellm_params: {{guardrail: hide-secret, mode: pre_call}}
  - guardrail_name: modes
    litellm_params: {{guardrail: hide-secrets, mode: [logging_only, pre_cal]}}
  - guardrail_name: cf
    litellm_params:
      guardrail: litellm_content_filter
      mode: pre_call
      default_on: maybe
      pii_entities_config: {{PERSON: MASK, EMAIL: MASK, CREDIT_CARD: REDACT}}
      patterns:
        - {{pattern_type: prebuilt, pattern_name: passport_us}}
        - {{pattern_type: regex, name: bad, pattern: '(unclosed'}}
        - {{pattern_type: fuzzy}}
      blocked_words:
        - {{action: BLOCK}}
  - litellm_params: {{guardrail: hide-secrets, mode: pre_call}}
  - guardrail_name: empty
    litellm_params: {{guardrail: litellm_content_filter, mode: post_call}}
  - guardrail_name: inj
    litellm_params: {{guardrail: prompt_injection, mode: pre_call, threshold: 2}}
  - guardrail_name: tp
    litellm_params:
      guardrail: tool_permission
      mode: post_call
      on_disallowed_action: strip
      default_action: maybe
      rules:
        - {{id: a, decision: allow}}
        - {{id: b, tool_name: x, decision: perhaps}}
        - {{id: c, tool_name: y, decision: allow, allowed_param_patterns: {{to: '(bad'}}}}
  - guardrail_name: tp-empty
    litellm_params: {{guardrail: tool_permission, mode: pre_call}}
  - guardrail_name: size
    litellm_params: {{guardrail: prompt_size, mode: pre_call, max_tokens: lots}}
  - guardrail_name: api
    litellm_params: {{guardrail: generic_guardrail_api, mode: pre_call}}
  - guardrail_name: api2
    litellm_params: {{guardrail: generic_guardrail_api, mode: pre_call, api_base: 'ftp://x', on_error: ignore}}
"#
    );
    let errs = errors(load_str(&yaml, &env(&[])).unwrap_err());
    let expect = [
        r#"guardrails[1].guardrail_name: "a" is already the name of another guardrail"#,
        r#"guardrails[2].litellm_params.guardrail: "lakera" is not built in sluice yet; built-in kinds: hide-secrets, hide_secrets, litellm_content_filter, prompt_injection, tool_permission, prompt_size, generic_guardrail_api, presidio, lakera_v2, bedrock, azure/prompt_shield, azure/text_moderations"#,
        r#"guardrails[3].litellm_params.guardrail: unknown guardrail kind "hide-secret" (did you mean "hide-secrets"?); built-in kinds: hide-secrets, hide_secrets, litellm_content_filter, prompt_injection, tool_permission, prompt_size, generic_guardrail_api, presidio, lakera_v2, bedrock, azure/prompt_shield, azure/text_moderations"#,
        r#"guardrails[4].litellm_params.mode: unknown mode "pre_cal" (did you mean "pre_call"?)"#,
        "guardrails[5].litellm_params.default_on: expected true or false",
        "guardrails[5].litellm_params.pii_entities_config.PERSON: PERSON needs a language model (Presidio's server), which sluice does not call yet",
        "guardrails[5].litellm_params.pii_entities_config.EMAIL: unknown entity; sluice detects PRIVATE_KEY, JWT,",
        r#"guardrails[5].litellm_params.pii_entities_config.CREDIT_CARD: expected MASK or BLOCK, got "REDACT""#,
        "guardrails[5].litellm_params.patterns[0].pattern_name: prebuilt pattern \"passport_us\" is not built in sluice",
        "guardrails[5].litellm_params.patterns[1].pattern: not a valid regular expression",
        r#"guardrails[5].litellm_params.patterns[2].pattern_type: expected prebuilt or regex, got "fuzzy""#,
        "guardrails[5].litellm_params.blocked_words[0].keyword: required: the word or phrase",
        "guardrails[6].guardrail_name: required: the name requests select it by",
        "guardrails[7].litellm_params: a litellm_content_filter needs patterns, blocked_words or pii_entities_config",
        "guardrails[8].litellm_params.threshold: expected a score above 0 and at most 1",
        r#"guardrails[9].litellm_params.default_action: expected allow or deny, got "maybe""#,
        r#"guardrails[9].litellm_params.on_disallowed_action: expected block or rewrite, got "strip""#,
        "guardrails[9].litellm_params.rules[0].tool_name: required",
        r#"guardrails[9].litellm_params.rules[1].decision: expected allow or deny, got "perhaps""#,
        "guardrails[9].litellm_params.rules[2]: allowed_param_patterns.to: regex parse error",
        "guardrails[10].litellm_params.rules: a tool_permission guardrail needs rules",
        "guardrails[11].litellm_params.max_tokens: expected a whole number",
        "guardrails[11].litellm_params: a prompt_size guardrail needs max_characters or max_tokens",
        "guardrails[12].litellm_params.api_base: required: the guardrail service's URL",
        r#"guardrails[13].litellm_params.api_base: expected an http:// or https:// URL, got "ftp://x""#,
        r#"guardrails[13].litellm_params.on_error: expected allow or block, got "ignore""#,
    ];
    for e in expect {
        assert!(
            errs.iter().any(|x| x.starts_with(e)),
            "missing {e:?} in {errs:#?}"
        );
    }
    assert_eq!(errs.len(), expect.len(), "{errs:#?}");
}

/// Each vendor guardrail under LiteLLM's keys (and its environment variables) validates into
/// its vendor's settings; no secret shows in `check-config`'s description.
#[test]
fn vendor_guardrails_read_litellms_keys() {
    use sluice_guardrails::{Action, Kind, OnError, Vendor};
    let yaml = format!(
        r#"{ONE_MODEL}
guardrails:
  - guardrail_name: pii
    litellm_params:
      guardrail: presidio
      mode: pre_call
      output_parse_pii: true
      presidio_analyzer_api_base: http://analyzer:5002/
      presidio_language: de
      presidio_score_thresholds: {{PERSON: 0.6, ALL: 0.4}}
      pii_entities_config: {{PERSON: MASK, US_SSN: BLOCK}}
  - guardrail_name: pii-env
    litellm_params: {{guardrail: presidio, mode: post_call}}
  - guardrail_name: lakera
    litellm_params:
      guardrail: lakera_v2
      mode: during_call
      api_key: os.environ/LAKERA_API_KEY
      project_id: project-7
      on_flagged: monitor
      breakdown: false
      metadata: {{team: core}}
      on_error: allow
      timeout: 2
  - guardrail_name: shield
    litellm_params:
      guardrail: azure/prompt_shield
      mode: pre_call
      api_base: https://cs.cognitiveservices.azure.com/
      api_key: az-secret-1
  - guardrail_name: harm
    litellm_params:
      guardrail: azure/text_moderations
      mode: [pre_call, post_call]
      api_base: https://cs.cognitiveservices.azure.com
      api_key: az-secret-2
      api_version: 2023-10-01
      severity_threshold_by_category: {{Violence: 4}}
      categories: [Hate, Violence]
      outputType: EightSeverityLevels
  - guardrail_name: aws
    litellm_params:
      guardrail: bedrock
      mode: [pre_call, post_call]
      guardrailIdentifier: gr-123
      guardrailVersion: DRAFT
      aws_region_name: eu-west-1
      mask_request_content: true
"#
    );
    let e = env(&[
        ("PRESIDIO_ANALYZER_API_BASE", "http://a:5002"),
        ("PRESIDIO_ANONYMIZER_API_BASE", "http://b:5001"),
        ("LAKERA_API_KEY", "lk-secret-value"),
        ("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE"),
        ("AWS_SECRET_ACCESS_KEY", "aws-secret-value"),
    ]);
    let loaded = load_str(&yaml, &e).unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let g = &loaded.config.guardrails;
    let ext = |i: usize| g[i].settings.external.as_ref().unwrap();

    assert_eq!(g[0].settings.kind, Kind::Presidio);
    assert_eq!(ext(0).api_base, "http://analyzer:5002");
    let Vendor::Presidio(p) = &ext(0).vendor else {
        panic!("presidio")
    };
    assert_eq!(p.anonymizer_base, "http://b:5001", "from the environment");
    assert_eq!(p.language, "de");
    assert_eq!(
        p.entities,
        vec![
            ("PERSON".into(), Action::Mask),
            ("US_SSN".into(), Action::Block)
        ]
    );
    assert_eq!(
        p.score_thresholds,
        vec![("ALL".into(), 0.4), ("PERSON".into(), 0.6)]
    );
    assert!(p.restore, "output_parse_pii");
    assert!(
        g[0].settings.spec.entities.is_empty(),
        "Presidio's entities are not sluice's detectors"
    );
    assert_eq!(ext(1).api_base, "http://a:5002");

    let Vendor::Lakera(l) = &ext(2).vendor else {
        panic!("lakera")
    };
    assert_eq!(ext(2).api_base, "https://api.lakera.ai");
    assert_eq!(ext(2).api_key.as_ref().unwrap().expose(), "lk-secret-value");
    assert_eq!(l.project_id.as_deref(), Some("project-7"));
    assert!(l.monitor && !l.breakdown && l.dev_info);
    assert_eq!(l.metadata.as_deref(), Some(r#"{"team":"core"}"#));
    assert_eq!(ext(2).on_error, OnError::Allow);
    assert_eq!(ext(2).timeout, Duration::from_secs(2));

    assert_eq!(
        ext(3).vendor,
        Vendor::AzurePromptShield {
            api_version: "2024-09-01".into()
        }
    );
    assert_eq!(ext(3).api_base, "https://cs.cognitiveservices.azure.com");
    let Vendor::AzureTextModeration(t) = &ext(4).vendor else {
        panic!("azure text")
    };
    assert_eq!(t.api_version, "2023-10-01");
    assert_eq!(t.by_category, vec![("Violence".into(), 4)]);
    assert_eq!(t.severity_threshold, None, "only the category's own");
    assert_eq!(t.categories, vec!["Hate".to_owned(), "Violence".to_owned()]);
    assert_eq!(t.output_type, "EightSeverityLevels");

    let Vendor::Bedrock(b) = &ext(5).vendor else {
        panic!("bedrock")
    };
    assert_eq!(
        ext(5).api_base,
        "https://bedrock-runtime.eu-west-1.amazonaws.com"
    );
    assert_eq!(
        (b.identifier.as_str(), b.version.as_str()),
        ("gr-123", "DRAFT")
    );
    assert_eq!(b.access_key_id.expose(), "AKIDEXAMPLE");
    assert_eq!(b.secret_access_key.expose(), "aws-secret-value");
    assert!(b.mask_request && !b.mask_response);

    let shown = crate::describe(&loaded.config);
    for secret in [
        "lk-secret-value",
        "az-secret-1",
        "az-secret-2",
        "aws-secret-value",
    ] {
        assert!(!shown.contains(secret), "{secret} in {shown}");
    }
    assert!(
        shown.contains("  - aws: bedrock, pre_call+post_call"),
        "{shown}"
    );
    assert!(
        shown.contains("  - shield: azure/prompt_shield, pre_call"),
        "{shown}"
    );
}

/// A vendor guardrail's missing or bad keys are errors at their paths; secrets never appear.
#[test]
fn vendor_guardrail_problems_name_their_fields() {
    let yaml = format!(
        r#"{ONE_MODEL}
guardrails:
  - guardrail_name: p
    litellm_params:
      guardrail: presidio
      mode: pre_call
      presidio_anonymizer_api_base: "anonymizer:5001"
      presidio_score_thresholds: {{PERSON: 1.5}}
      pii_entities_config: {{PERSON: REDACT}}
  - guardrail_name: l
    litellm_params: {{guardrail: lakera_v2, mode: pre_call, on_flagged: shrug}}
  - guardrail_name: s
    litellm_params: {{guardrail: azure/prompt_shield, mode: [pre_call, post_call], api_key: az-secret-3}}
  - guardrail_name: t
    litellm_params:
      guardrail: azure/text_moderations
      mode: pre_call
      api_base: https://cs.example
      severity_threshold: 9
      severity_threshold_by_category: {{Hate: high}}
  - guardrail_name: b
    litellm_params: {{guardrail: bedrock, mode: pre_call, aws_secret_access_key: aws-secret-4}}
  - guardrail_name: b2
    litellm_params: {{guardrail: bedrock, mode: pre_call, guardrailIdentifier: g, guardrailVersion: 1, aws_region_name: "eu west", aws_access_key_id: k, aws_secret_access_key: s}}
  - guardrail_name: om
    litellm_params: {{guardrail: openai_moderation, mode: pre_call}}
  - guardrail_name: om2
    litellm_params: {{guardrail: openai_moderation, mode: pre_call, model: omni-moderation-latst}}
"#
    );
    let errs = errors(load_str(&yaml, &env(&[])).unwrap_err());
    let expect = [
        "guardrails[0].litellm_params.presidio_analyzer_api_base: required: the Presidio analyzer's URL (or PRESIDIO_ANALYZER_API_BASE)",
        r#"guardrails[0].litellm_params.presidio_anonymizer_api_base: expected an http:// or https:// URL, got "anonymizer:5001""#,
        r#"guardrails[0].litellm_params.pii_entities_config.PERSON: expected MASK or BLOCK, got "REDACT""#,
        "guardrails[0].litellm_params.presidio_score_thresholds.PERSON: expected a score from 0 to 1",
        "guardrails[1].litellm_params.api_key: required: the lakera_v2 key (or LAKERA_API_KEY)",
        r#"guardrails[1].litellm_params.on_flagged: expected block or monitor, got "shrug""#,
        "guardrails[2].litellm_params.mode: azure/prompt_shield judges prompts",
        "guardrails[2].litellm_params.api_base: required: the Azure AI Content Safety resource's endpoint",
        "guardrails[3].litellm_params.api_key: required: the azure/text_moderations key",
        "guardrails[3].litellm_params.severity_threshold: expected a severity from 0 to 7",
        "guardrails[3].litellm_params.severity_threshold_by_category.Hate: expected a whole number",
        "guardrails[4].litellm_params.guardrailIdentifier: required: the Bedrock guardrail's id or ARN",
        "guardrails[4].litellm_params.guardrailVersion: required",
        "guardrails[4].litellm_params.aws_region_name: required: the guardrail's AWS region",
        "guardrails[4].litellm_params.aws_access_key_id: required",
        r#"guardrails[5].litellm_params.aws_region_name: not an AWS region: "eu west""#,
        "guardrails[6].litellm_params.model: required: the model_list group that answers /v1/moderations",
        r#"guardrails[7].litellm_params.model: no model group is named "omni-moderation-latst""#,
    ];
    for e in expect {
        assert!(
            errs.iter().any(|x| x.starts_with(e)),
            "missing {e:?} in {errs:#?}"
        );
    }
    assert_eq!(errs.len(), expect.len(), "{errs:#?}");
    let all = errs.join("\n");
    assert!(
        !all.contains("az-secret-3") && !all.contains("aws-secret-4"),
        "{all}"
    );
}

#[test]
fn the_admin_ui_is_turned_off_by_litellms_setting_or_environment_variable() {
    let yaml =
        |extra: &str| format!("model_list: []\ngeneral_settings:\n  master_key: sk-m\n{extra}");
    let on = load_str(&yaml(""), &env(&[])).unwrap();
    assert!(!on.config.general.disable_admin_ui);
    let off = load_str(&yaml("  disable_admin_ui: true\n"), &env(&[])).unwrap();
    assert!(off.config.general.disable_admin_ui);
    let by_env = load_str(&yaml(""), &env(&[("DISABLE_ADMIN_UI", "True")])).unwrap();
    assert!(by_env.config.general.disable_admin_ui);
    // The config file wins over the environment.
    let kept = load_str(
        &yaml("  disable_admin_ui: false\n"),
        &env(&[("DISABLE_ADMIN_UI", "true")]),
    )
    .unwrap();
    assert!(!kept.config.general.disable_admin_ui);
    assert_eq!(on.config.general.ui_username, "admin");
    assert!(on.config.general.ui_password.is_none());
    let named = load_str(
        &yaml(""),
        &env(&[("UI_USERNAME", "ishaan"), ("UI_PASSWORD", "langchain")]),
    )
    .unwrap();
    assert_eq!(named.config.general.ui_username, "ishaan");
    assert_eq!(
        named.config.general.ui_password.unwrap().expose(),
        "langchain"
    );
    let bad = load_str(&yaml("  disable_admin_ui: maybe\n"), &env(&[])).unwrap_err();
    assert!(errors(bad)
        .iter()
        .any(|e| e.contains("general_settings.disable_admin_ui")));
}

#[test]
fn stored_deployments_are_appended_and_validated_like_the_files() {
    let yaml = "model_list:\n  - model_name: a\n    litellm_params:\n      model: mock/a\ngeneral_settings:\n  store_model_in_db: true\n";
    let source = crate::Source::from_yaml(yaml).unwrap();
    assert_eq!(source.file_models(), 1);
    let alone = source.load(&[], &env(&[])).unwrap();
    assert!(alone.config.general.store_model_in_db);
    let by_env = load_str("model_list: []\n", &env(&[("STORE_MODEL_IN_DB", "True")])).unwrap();
    assert!(by_env.config.general.store_model_in_db);
    let stored = serde_json::json!({
        "model_name": "b",
        "litellm_params": {"model": "mock/b"},
        "model_info": {"id": "db-1", "db_model": true}
    });
    let both = source.load(&[stored], &env(&[])).unwrap();
    let ids: Vec<&str> = both
        .config
        .deployments
        .iter()
        .map(|d| d.id.as_str())
        .collect();
    assert_eq!(ids.len(), 2);
    assert_eq!(ids[1], "db-1");
    assert!(both.config.deployments[1].model_info.db_model);
    assert!(!both.config.deployments[0].model_info.db_model);
    // A stored entry's problem is reported at its place after the file's entries.
    let bad = serde_json::json!({"model_name": "c", "litellm_params": {"model": "mock/c", "rpm": "lots"}});
    let err = source.load(&[bad], &env(&[])).unwrap_err();
    assert!(errors(err)
        .iter()
        .any(|e| e.contains("model_list[1].litellm_params.rpm")));
}

#[test]
fn single_sign_on_from_litellms_generic_variables() {
    let yaml = "model_list: []\n";
    assert!(load_str(yaml, &env(&[]))
        .unwrap()
        .config
        .general
        .sso
        .is_none());
    let idp = [
        ("GENERIC_CLIENT_ID", "sluice"),
        ("GENERIC_CLIENT_SECRET", "s3cret"),
        (
            "GENERIC_AUTHORIZATION_ENDPOINT",
            "http://idp.local/authorize",
        ),
        ("GENERIC_TOKEN_ENDPOINT", "http://idp.local/token"),
        ("GENERIC_USERINFO_ENDPOINT", "http://idp.local/userinfo"),
        ("GENERIC_USER_ROLE_ATTRIBUTE", "litellm_role"),
        ("PROXY_BASE_URL", "https://gw.example/"),
    ];
    let sso = load_str(yaml, &env(&idp))
        .unwrap()
        .config
        .general
        .sso
        .unwrap();
    assert_eq!(sso.client_secret.unwrap().expose(), "s3cret");
    assert_eq!(sso.role_attribute, "litellm_role");
    assert_eq!(sso.user_id_attribute, "preferred_username");
    assert_eq!(sso.default_role, "internal_user_viewer");
    assert_eq!(sso.scope, "openid email profile");
    assert_eq!(sso.base_url.as_deref(), Some("https://gw.example"));
    // An endpoint missing or not a URL, a role that is not one: named.
    let errs = errors(
        load_str(
            yaml,
            &env(&[
                ("GENERIC_CLIENT_ID", "sluice"),
                ("GENERIC_AUTHORIZATION_ENDPOINT", "idp.local/authorize"),
                ("GENERIC_USERINFO_ENDPOINT", "http://idp.local/userinfo"),
                ("GENERIC_ROLE_MAPPINGS_DEFAULT_ROLE", "root"),
            ]),
        )
        .unwrap_err(),
    );
    for name in [
        "GENERIC_AUTHORIZATION_ENDPOINT",
        "GENERIC_TOKEN_ENDPOINT",
        "GENERIC_ROLE_MAPPINGS_DEFAULT_ROLE",
    ] {
        assert!(errs.iter().any(|e| e.starts_with(name)), "{name}: {errs:?}");
    }
}

#[test]
fn client_side_credentials_and_listener_tls_settings() {
    let yaml = |extra: &str| format!("model_list: []\ngeneral_settings:\n{extra}");
    let off = load_str(&yaml("  master_key: sk-m\n"), &env(&[])).unwrap();
    assert!(!off.config.general.allow_client_side_credentials);
    assert!(off.config.general.tls.is_none());
    let on = load_str(
        &yaml(
            "  allow_client_side_credentials: true\n  client_side_api_base_allowlist: \
             [\"10.0.0.0/8\", vllm.internal]\n  ssl_certfile_path: /c.pem\n  \
             ssl_keyfile_path: /k.pem\n",
        ),
        &env(&[]),
    )
    .unwrap();
    let g = &on.config.general;
    assert!(g.allow_client_side_credentials);
    assert!(g
        .client_side_api_base_allowlist
        .allows_ip("10.2.3.4".parse().unwrap()));
    assert!(g
        .client_side_api_base_allowlist
        .allows_host("VLLM.internal"));
    assert_eq!(
        g.tls,
        Some(("/c.pem".into(), "/k.pem".into())),
        "certificate and key paths"
    );
    for (extra, path) in [
        (
            "  client_side_api_base_allowlist: [\"10.0.0.0/40\"]\n",
            "general_settings.client_side_api_base_allowlist",
        ),
        (
            "  ssl_certfile_path: /c.pem\n",
            "general_settings.ssl_keyfile_path",
        ),
        (
            "  allow_client_side_credentials: sometimes\n",
            "general_settings.allow_client_side_credentials",
        ),
    ] {
        let bad = load_str(&yaml(extra), &env(&[])).unwrap_err();
        assert!(errors(bad).iter().any(|e| e.contains(path)), "{extra}");
    }
}

#[test]
fn allowed_ips_and_forwarding_are_read_and_bad_entries_named() {
    use sluice_net::networks::Forwarded;
    let yaml = |extra: &str| format!("model_list: []\ngeneral_settings:\n{extra}");
    let plain = load_str(&yaml("  master_key: sk-m\n"), &env(&[])).unwrap();
    assert!(plain.config.general.allowed_ips.is_none());
    assert_eq!(plain.config.general.forwarded, Forwarded::Ignored);
    let on = load_str(
        &yaml(
            "  allowed_ips: [\"10.0.0.0/8\", \"192.0.2.7\"]\n  use_x_forwarded_for: true\n  \
             trusted_proxy_ranges: [\"127.0.0.0/8\"]\n",
        ),
        &env(&[]),
    )
    .unwrap();
    let g = &on.config.general;
    let list = g.allowed_ips.as_ref().unwrap();
    assert!(list.contains("10.1.1.1".parse().unwrap()));
    assert!(!list.contains("192.0.2.8".parse().unwrap()));
    assert!(matches!(g.forwarded, Forwarded::Through(_)));
    let one_hop = load_str(&yaml("  use_x_forwarded_for: true\n"), &env(&[])).unwrap();
    assert_eq!(one_hop.config.general.forwarded, Forwarded::OneHop);
    for (extra, path) in [
        (
            "  allowed_ips: [\"10.0.0.0/40\"]\n",
            "general_settings.allowed_ips",
        ),
        ("  allowed_ips: [office]\n", "general_settings.allowed_ips"),
        (
            "  use_x_forwarded_for: true\n  trusted_proxy_ranges: [lb]\n",
            "general_settings.trusted_proxy_ranges",
        ),
        (
            "  use_x_forwarded_for: maybe\n",
            "general_settings.use_x_forwarded_for",
        ),
    ] {
        let bad = load_str(&yaml(extra), &env(&[])).unwrap_err();
        assert!(errors(bad).iter().any(|e| e.contains(path)), "{extra}");
    }
}

#[test]
fn hostile_client_and_overload_limits_are_read_and_bad_ones_named() {
    let loaded = load_str(
        "model_list: []\ngeneral_settings:\n  max_request_headers: 50\n  max_request_header_size_kb: 16\n  \
         max_url_length: 4096\n  max_messages: 200\n  header_read_timeout: 5\n  body_read_timeout: 2.5\n  \
         max_connections: 1000\n  max_connection_rate_per_ip: 20\n  max_in_flight_requests: 512\n  \
         max_memory_mb: 1024\n",
        &env(&[]),
    )
    .unwrap();
    let g = &loaded.config.general;
    assert_eq!(g.connections.max_headers, 50);
    assert_eq!(g.connections.max_header_bytes, 16 * 1024);
    assert_eq!(g.connections.header_read_timeout, Duration::from_secs(5));
    assert_eq!(g.connections.max_connections, Some(1000));
    assert_eq!(g.connections.max_connection_rate_per_ip, Some(20));
    assert_eq!(g.max_url_length, 4096);
    assert_eq!(g.max_messages, Some(200));
    assert_eq!(g.body_read_timeout, Duration::from_millis(2500));
    assert_eq!(g.max_in_flight_requests, Some(512));
    assert_eq!(g.max_memory_bytes, Some(1024 * 1024 * 1024));

    let defaults = load_str("model_list: []\n", &env(&[])).unwrap();
    assert_eq!(defaults.config.general.max_in_flight_requests, None);
    assert_eq!(
        defaults.config.general.connections,
        sluice_net::server::ConnLimits::default()
    );

    let errs = errors(
        load_str(
            "model_list: []\ngeneral_settings:\n  max_in_flight_requests: 0\n  \
             max_request_header_size_kb: 2\n  body_read_timeout: -1\n  max_messages: many\n",
            &env(&[]),
        )
        .unwrap_err(),
    );
    for path in [
        "general_settings.max_in_flight_requests: expected a whole number > 0",
        "general_settings.max_request_header_size_kb: expected 8 to 1024",
        "general_settings.body_read_timeout:",
        "general_settings.max_messages:",
    ] {
        assert!(
            errs.iter().any(|e| e.starts_with(path)),
            "{path} not in {errs:?}"
        );
    }
}

#[test]
fn semantic_caches_read_litellms_keys_and_name_what_is_wrong() {
    use sluice_cache::settings::SemanticIndexKind;
    let yaml = |params: &str| {
        format!(
            "model_list:\n  - model_name: embed\n    litellm_params: {{model: mock/embed}}\n\
             litellm_settings:\n  cache: true\n  cache_params:\n{params}"
        )
    };
    let semantic = |c: &Config| c.litellm.cache.as_ref().unwrap().semantic.clone().unwrap();
    // LiteLLM's redis-semantic: its Redis found as type: redis finds it.
    let loaded = load_str(
        &yaml(
            "    type: redis-semantic\n    url: redis://cache.local:6380\n    similarity_threshold: 0.8\n    redis_semantic_cache_embedding_model: embed\n    redis_semantic_cache_index_name: idx\n",
        ),
        &env(&[]),
    )
    .unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let s = semantic(&loaded.config);
    assert_eq!(s.threshold, 0.8);
    assert_eq!(s.embedding_model, "embed");
    assert_eq!(
        s.index,
        SemanticIndexKind::Redis {
            index_name: "idx".into()
        }
    );
    match &loaded.config.litellm.cache.as_ref().unwrap().kind {
        sluice_cache::CacheType::Redis(r) => {
            assert_eq!(single(&r.target), "redis://cache.local:6380");
        }
        other => panic!("not redis: {other:?}"),
    }
    // sluice's local-semantic, with either name of the model key and the default bound.
    for key in [
        "semantic_cache_embedding_model",
        "redis_semantic_cache_embedding_model",
    ] {
        let loaded = load_str(
            &yaml(&format!(
                "    type: local-semantic\n    similarity_threshold: 1\n    {key}: embed\n"
            )),
            &env(&[]),
        )
        .unwrap();
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
        let s = semantic(&loaded.config);
        assert_eq!(s.embedding_model_key, key);
        assert_eq!(
            s.index,
            SemanticIndexKind::Local {
                max_entries: 10_000
            }
        );
    }
    let bounded = load_str(
        &yaml("    type: local-semantic\n    similarity_threshold: 0.9\n    semantic_cache_embedding_model: embed\n    max_entries: 50\n"),
        &env(&[]),
    )
    .unwrap();
    assert_eq!(
        semantic(&bounded.config).index,
        SemanticIndexKind::Local { max_entries: 50 }
    );
    let fails = |params: &str| errors(load_str(&yaml(params), &env(&[])).unwrap_err());
    let has = |errs: &[String], start: &str| {
        assert!(
            errs.iter().any(|e| e.starts_with(start)),
            "{start}: {errs:?}"
        );
    };
    // The threshold is required, and from 0 to 1.
    let errs = fails("    type: local-semantic\n    semantic_cache_embedding_model: embed\n");
    has(
        &errs,
        "litellm_settings.cache_params.similarity_threshold: type \"local-semantic\" needs",
    );
    for bad in ["1.5", "-0.2", "high"] {
        let errs = fails(&format!(
            "    type: local-semantic\n    similarity_threshold: {bad}\n    semantic_cache_embedding_model: embed\n"
        ));
        has(
            &errs,
            "litellm_settings.cache_params.similarity_threshold: expected",
        );
    }
    // The embedding model: required, and a group of this config.
    let errs = fails("    type: local-semantic\n    similarity_threshold: 0.9\n");
    has(&errs, "litellm_settings.cache_params.redis_semantic_cache_embedding_model: type \"local-semantic\" needs the model group");
    let errs = fails(
        "    type: redis-semantic\n    url: redis://r:6379\n    similarity_threshold: 0.9\n    redis_semantic_cache_embedding_model: embedd\n",
    );
    has(&errs, "litellm_settings.cache_params.redis_semantic_cache_embedding_model: unknown model \"embedd\"");
    let errs = fails(
        "    type: local-semantic\n    similarity_threshold: 0.9\n    semantic_cache_embedding_model: nope\n",
    );
    has(
        &errs,
        "litellm_settings.cache_params.semantic_cache_embedding_model: unknown model \"nope\"",
    );
    // redis-semantic needs a Redis as redis does.
    let errs = fails(
        "    type: redis-semantic\n    similarity_threshold: 0.9\n    redis_semantic_cache_embedding_model: embed\n",
    );
    has(
        &errs,
        "litellm_settings.cache_params.host: type \"redis-semantic\" needs a Redis",
    );
    // Qdrant: an error that says why.
    let errs = fails("    type: qdrant-semantic\n    similarity_threshold: 0.9\n");
    has(
        &errs,
        "litellm_settings.cache_params.type: cache type \"qdrant-semantic\" is not available",
    );
    assert!(
        errs.iter().any(|e| e.contains("no Qdrant server")),
        "{errs:?}"
    );
    // Semantic keys on an exact cache are warned about.
    let loaded = load_str(
        &yaml("    type: local\n    similarity_threshold: 0.9\n    max_entries: 5\n"),
        &env(&[]),
    )
    .unwrap();
    assert!(loaded
        .config
        .litellm
        .cache
        .as_ref()
        .unwrap()
        .semantic
        .is_none());
    let warned: Vec<String> = loaded.warnings.iter().map(ToString::to_string).collect();
    assert_eq!(warned.len(), 2, "{warned:?}");
}

#[test]
fn the_spend_journal_is_per_request_unless_batched_and_a_bad_value_is_named() {
    let yaml =
        |extra: &str| format!("model_list: []\ngeneral_settings:\n  master_key: sk-m\n{extra}");
    let mode = |extra: &str| {
        load_str(&yaml(extra), &env(&[]))
            .unwrap()
            .config
            .general
            .spend_journal
    };
    assert_eq!(mode(""), SpendJournalMode::PerRequest, "the default");
    assert_eq!(
        mode("  spend_journal: per_request\n"),
        SpendJournalMode::PerRequest
    );
    assert_eq!(
        mode("  spend_journal: batched\n"),
        SpendJournalMode::Batched
    );
    let bad = load_str(&yaml("  spend_journal: sometimes\n"), &env(&[])).unwrap_err();
    let errs = errors(bad);
    assert!(
        errs.iter()
            .any(|e| e.starts_with("general_settings.spend_journal: ")
                && e.contains("\"per_request\"")
                && e.contains("\"batched\"")
                && e.contains("\"sometimes\"")),
        "{errs:?}"
    );
}

#[test]
fn spend_log_retention_reads_litellm_durations_and_names_a_bad_value() {
    let yaml =
        |extra: &str| format!("model_list: []\ngeneral_settings:\n  master_key: sk-m\n{extra}");
    let general = |extra: &str| load_str(&yaml(extra), &env(&[])).unwrap().config.general;
    let day = Duration::from_secs(86_400);
    let none = general("");
    assert_eq!(none.spend_logs_retention, None, "kept forever by default");
    assert_eq!(
        none.spend_logs_retention_interval, day,
        "LiteLLM's daily run"
    );
    for (text, secs) in [
        ("7d", 7 * 86_400),
        ("24h", 86_400),
        ("60m", 3600),
        ("3600s", 3600),
        ("2w", 14 * 86_400),
    ] {
        let g = general(&format!("  maximum_spend_logs_retention_period: {text}\n"));
        assert_eq!(
            g.spend_logs_retention,
            Some(Duration::from_secs(secs)),
            "{text}"
        );
    }
    let g = general(
        "  maximum_spend_logs_retention_period: 30d\n  maximum_spend_logs_retention_interval: 1h\n",
    );
    assert_eq!(g.spend_logs_retention_interval, Duration::from_secs(3600));
    for bad in ["30", "0d", "7 days", "-1d", "1mo"] {
        let e = load_str(
            &yaml(&format!(
                "  maximum_spend_logs_retention_period: \"{bad}\"\n"
            )),
            &env(&[]),
        )
        .unwrap_err();
        let errs = errors(e);
        assert!(
            errs.iter().any(|e| e.starts_with(
                "general_settings.maximum_spend_logs_retention_period: expected a whole number > 0 followed by s, m, h, d or w"
            ) && e.contains(&format!("{bad:?}"))),
            "{bad}: {errs:?}"
        );
    }
    // An interval alone removes nothing: said, not refused.
    let loaded = load_str(
        &yaml("  maximum_spend_logs_retention_interval: 1d\n"),
        &env(&[]),
    )
    .unwrap();
    assert!(
        loaded.warnings.iter().any(|w| w
            .to_string()
            .starts_with("general_settings.maximum_spend_logs_retention_interval: has no effect")),
        "{:?}",
        loaded.warnings
    );
}

#[test]
fn include_adds_mcp_servers_and_guardrails_and_refuses_a_second_definition() {
    let dir = std::env::temp_dir().join(format!("sluice-include-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("imported.yaml"),
        "mcp_servers:\n  docs: {url: 'http://127.0.0.1:9/mcp'}\nguardrails:\n  - guardrail_name: second\n    litellm_params: {guardrail: hide-secrets, mode: pre_call}\n",
    )
    .unwrap();
    let main = format!(
        "{ONE_MODEL}include: [imported.yaml]\nmcp_servers:\n  wiki: {{url: 'http://127.0.0.1:9/wiki'}}\nguardrails:\n  - guardrail_name: first\n    litellm_params: {{guardrail: hide-secrets, mode: pre_call}}\n"
    );
    std::fs::write(dir.join("main.yaml"), &main).unwrap();
    let loaded = load_file(&dir.join("main.yaml"), &env(&[])).unwrap();
    let mut servers: Vec<&str> = loaded
        .config
        .mcp
        .servers
        .iter()
        .map(|s| s.name.as_ref())
        .collect();
    servers.sort_unstable();
    assert_eq!(servers, ["docs", "wiki"]);
    let guardrails: Vec<&str> = loaded
        .config
        .guardrails
        .iter()
        .map(|g| g.name.as_ref())
        .collect();
    assert_eq!(guardrails, ["first", "second"]);

    std::fs::write(
        dir.join("main.yaml"),
        format!("{ONE_MODEL}include: [imported.yaml]\nmcp_servers:\n  docs: {{url: 'http://127.0.0.1:9/other'}}\n"),
    )
    .unwrap();
    let e = load_file(&dir.join("main.yaml"), &env(&[]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("mcp_servers.docs is also defined"), "{e}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn deployment_tags_and_tag_filtering_are_read_and_bad_tags_named() {
    let yaml = r#"
model_list:
  - model_name: gpt-4
    litellm_params: {model: mock/a, tags: ["free", "eu"]}
  - model_name: gpt-4
    litellm_params: {model: mock/b, tags: default}
  - model_name: gpt-4
    litellm_params: {model: mock/c}
router_settings:
  enable_tag_filtering: true
  tag_filtering_match_any: false
"#;
    let c = load_str(yaml, &env(&[])).unwrap().config;
    let tags = |i: usize| -> Vec<&str> { c.deployments[i].tags.iter().map(|t| &**t).collect() };
    assert_eq!(tags(0), ["free", "eu"]);
    assert_eq!(tags(1), ["default"], "one tag alone is a list of one");
    assert!(tags(2).is_empty());
    assert_eq!(
        c.router.tag_filtering,
        sluice_routing::TagFiltering {
            enabled: true,
            match_any: false
        }
    );
    let described = describe(&c);
    assert!(described.contains("tags: free, eu"), "{described}");
    assert!(
        described.contains("enable_tag_filtering: true"),
        "{described}"
    );
    let info = deployment_info(&c.deployments[0]);
    assert_eq!(
        info["litellm_params"]["tags"],
        serde_json::json!(["free", "eu"])
    );

    // Off unless asked; LiteLLM matches any tag by default.
    let c = load_str(
        "model_list: []
",
        &env(&[]),
    )
    .unwrap()
    .config;
    assert_eq!(
        c.router.tag_filtering,
        sluice_routing::TagFiltering::default()
    );
    assert!(!c.router.tag_filtering.enabled && c.router.tag_filtering.match_any);

    let bad = r#"
model_list:
  - model_name: a
    litellm_params: {model: mock/a, tags: ["ok", 3, ""]}
  - model_name: b
    litellm_params: {model: mock/b, tags: {tier: free}}
  - model_name: c
    litellm_params: {model: mock/c, tags: [["nested"]]}
router_settings:
  enable_tag_filtering: maybe
"#;
    let errs = errors(load_str(bad, &env(&[])).unwrap_err());
    let expected = [
        "model_list[0].litellm_params.tags[1]: expected a tag (a string), got a number",
        "model_list[0].litellm_params.tags[2]: expected a non-empty tag",
        "model_list[1].litellm_params.tags: expected a list of tags, got a mapping",
        "model_list[2].litellm_params.tags[0]: expected a tag (a string), got a list",
    ];
    for e in expected {
        assert!(errs.iter().any(|x| x == e), "missing {e:?} in {errs:#?}");
    }
    assert!(
        errs.iter()
            .any(|e| e.starts_with("router_settings.enable_tag_filtering: ")),
        "{errs:#?}"
    );
    assert_eq!(errs.len(), expected.len() + 1, "{errs:#?}");
}

#[test]
fn health_checks_read_litellm_s_keys_and_name_a_bad_one() {
    let yaml = "model_list:\n  - model_name: m\n    litellm_params:\n      model: mock/m\n    \
                model_info:\n      health_check_timeout: 3\n      health_check_max_tokens: 5\n      \
                disable_background_health_check: false\n\
                general_settings:\n  background_health_checks: true\n  health_check_interval: 30\n  \
                background_health_check_model_groups: [m]\n  use_shared_health_check: true\n";
    let loaded = load_str(yaml, &env(&[])).unwrap_or_else(|e| panic!("{e}"));
    let h = loaded.config.general.health_checks.expect("on");
    assert_eq!(h.interval, Duration::from_secs(30));
    assert_eq!(h.groups.as_deref(), Some(&["m".to_owned()][..]));
    assert_eq!((h.concurrency, h.max_spend_per_day), (8, 1.0));
    let info = &loaded.config.deployments[0].model_info.health_check;
    assert_eq!(info.timeout, Some(Duration::from_secs(3)));
    assert_eq!(info.max_tokens, Some(5));
    // Off unless asked for, whatever else is set.
    let off = load_str(
        "general_settings:\n  health_check_interval: 30\n",
        &env(&[]),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(off.config.general.health_checks.is_none());
    let bad =
        "general_settings:\n  background_health_checks: true\n  health_check_interval: soon\n";
    let errs = errors(load_str(bad, &env(&[])).unwrap_err());
    assert!(
        errs.iter()
            .any(|e| e.starts_with("general_settings.health_check_interval:")),
        "{errs:?}"
    );
}

#[test]
fn jwt_role_and_scope_mappings_are_read_and_a_bad_role_is_named() {
    let yaml = "general_settings:\n  enable_jwt_auth: true\n  litellm_jwtauth:\n    \
                roles_jwt_field: roles\n    role_mappings:\n      - {role: admins, internal_role: proxy_admin}\n    \
                scope_mappings:\n      - {scope: s1, models: [a, b], routes: [/v1/chat/completions]}\n    \
                enforce_scope_based_access: true\n    team_id_upsert: true\n    end_user_id_jwt_field: cust\n";
    let loaded = load_str(
        yaml,
        &env(&[("JWT_PUBLIC_KEY_URL", "http://127.0.0.1:1/jwks")]),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let j = loaded.config.general.jwt.expect("on");
    assert_eq!(
        j.role_mappings,
        vec![("admins".to_owned(), crate::JwtRole::ProxyAdmin)]
    );
    assert_eq!(j.scope_mappings[0].models, ["a", "b"]);
    assert_eq!(j.scope_mappings[0].routes, ["/v1/chat/completions"]);
    assert!(j.enforce_scope_based_access && j.team_id_upsert);
    assert_eq!(j.end_user_id_field.as_deref(), Some("cust"));
    assert_eq!(
        j.team_allowed_routes[0], "openai_routes",
        "LiteLLM's default"
    );
    let bad = yaml.replace("internal_role: proxy_admin", "internal_role: root");
    let errs = errors(
        load_str(
            &bad,
            &env(&[("JWT_PUBLIC_KEY_URL", "http://127.0.0.1:1/jwks")]),
        )
        .unwrap_err(),
    );
    assert!(
        errs.iter()
            .any(|e| e
                .starts_with("general_settings.litellm_jwtauth.role_mappings[0].internal_role:")),
        "{errs:?}"
    );
}

#[test]
fn key_management_system_is_read_and_refusals_name_the_field() {
    let yaml = r#"
general_settings:
  key_management_system: hashicorp_vault
  key_management_settings:
    hosted_keys: ["OPENAI_API_KEY"]
    refresh_interval: 30
    prefix_for_stored_virtual_keys: "litellm/"
model_list:
  - model_name: m
    litellm_params: {model: openai/gpt-4o, api_key: os.environ/OPENAI_API_KEY, api_base: "${BASE}"}
"#;
    let source = Source::from_yaml(yaml).unwrap();
    assert_eq!(source.referenced_names(), vec!["OPENAI_API_KEY".to_owned()]);
    let km = source.key_management(&env(&[])).unwrap().unwrap();
    assert_eq!(km.system, sluice_secrets::System::HashicorpVault);
    assert_eq!(km.hosted_keys, Some(vec!["OPENAI_API_KEY".to_owned()]));
    assert_eq!(km.refresh_interval, Some(Duration::from_secs(30)));
    let loaded = load_str(
        yaml,
        &env(&[("OPENAI_API_KEY", "sk-1"), ("BASE", "http://x")]),
    )
    .unwrap();
    assert_eq!(loaded.config.general.key_management, Some(km));
    assert!(loaded.warnings.iter().any(|w| w
        .to_string()
        .starts_with("general_settings.key_management_settings.prefix_for_stored_virtual_keys:")));

    let bad = "general_settings:\n  key_management_system: google_kms\n";
    let e = errors(load_str(bad, &env(&[])).unwrap_err());
    assert!(
        e[0].starts_with("general_settings.key_management_system: \"google_kms\": decrypting KMS"),
        "{e:?}"
    );
    assert!(Source::from_yaml(bad)
        .unwrap()
        .key_management(&env(&[]))
        .is_err());
    let bad = "general_settings:\n  key_management_system: aws_secret_manager\n  key_management_settings: {store_virtual_keys: true, aws_role_name: r, access_mode: write_only}\n";
    let e = errors(load_str(bad, &env(&[])).unwrap_err());
    for field in ["store_virtual_keys", "aws_role_name", "access_mode"] {
        assert!(
            e.iter().any(|x| x.starts_with(&format!(
                "general_settings.key_management_settings.{field}:"
            ))),
            "{field}: {e:?}"
        );
    }
    let from_env = "general_settings:\n  key_management_system: os.environ/KMS\n";
    let km = Source::from_yaml(from_env)
        .unwrap()
        .key_management(&env(&[("KMS", "azure_key_vault")]))
        .unwrap()
        .unwrap();
    assert_eq!(km.system, sluice_secrets::System::AzureKeyVault);
}

#[test]
fn a_hosted_provider_without_a_key_is_marked_so() {
    let yaml = "model_list:
  - model_name: keyless
    litellm_params: {model: openai/gpt-4o}
  - model_name: keyed
    litellm_params: {model: openai/gpt-4o, api_key: sk-given}
  - model_name: own-server
    litellm_params: {model: openai/llama, api_base: http://10.0.0.5:8000/v1}
  - model_name: anthropic-keyless
    litellm_params: {model: anthropic/claude-sonnet-4-5}
  - model_name: in-process
    litellm_params: {model: mock/any}
";
    let loaded = load_str(yaml, &env(&[])).unwrap();
    let missing: Vec<(&str, bool)> = loaded
        .config
        .deployments
        .iter()
        .map(|d| (d.model_name.as_str(), d.upstream.key_missing))
        .collect();
    assert_eq!(
        missing,
        [
            ("keyless", true),
            ("keyed", false),
            ("own-server", false),
            ("anthropic-keyless", true),
            ("in-process", false),
        ]
    );
    // The provider's environment variable is a key too.
    let loaded = load_str(yaml, &env(&[("OPENAI_API_KEY", "sk-env")])).unwrap();
    assert!(!loaded.config.deployments[0].upstream.key_missing);
}

#[test]
fn fleet_lease_is_a_fraction_of_each_limit_named_when_wrong() {
    let lease = |v: &str| {
        load_str(
            &format!("model_list: []\nrouter_settings:\n  fleet_lease: {v}\n"),
            &env(&[]),
        )
        .map(|c| c.config.router.fleet_lease)
    };
    assert_eq!(lease("0.05").unwrap(), Some(0.05));
    assert_eq!(lease("0").unwrap(), Some(0.0));
    let none = load_str("model_list: []\n", &env(&[])).unwrap();
    assert_eq!(none.config.router.fleet_lease, None);
    assert_eq!(
        errors(lease("0.5").unwrap_err()),
        ["router_settings.fleet_lease: expected a fraction of each limit from 0 to 0.25, got 0.5"]
    );
    assert_eq!(
        errors(lease("-1").unwrap_err()),
        [r#"router_settings.fleet_lease: expected a number ≥ 0, got "-1""#]
    );
}
