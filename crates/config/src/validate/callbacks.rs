//! Logging callbacks and trace export, as LiteLLM configures them: names in
//! `litellm_settings.success_callback` / `failure_callback` / `callbacks`, settings in
//! `callback_settings.<name>` and the providers' usual environment variables. Each name becomes
//! one validated [`SinkSettings`]; a missing credential or URL names the exact key to set.

use std::collections::BTreeMap;
use std::time::Duration;

use sluice_core::settings::read::{boolean, seconds, text, whole};
use sluice_core::settings::{Env, Problems, Scalar};
use sluice_core::Secret;
use sluice_net::sigv4::uri_decode;

use super::texts;
use crate::model::{CallbackSettings, LitellmSettings, SinkKind, SinkSettings};
use crate::raw::RawCallback;

/// Records per batch unless `batch_size` says otherwise (LiteLLM's batch loggers use 512).
pub const DEFAULT_BATCH_SIZE: usize = 512;
/// Longest a record waits for its batch (LiteLLM flushes every 5 s).
pub const DEFAULT_FLUSH_INTERVAL: Duration = Duration::from_secs(5);
/// Records queued per sink before the recorder spills them.
pub const DEFAULT_MAX_QUEUE: usize = 10_000;
/// Records a down sink keeps (in memory until the spool lands) before dropping the oldest.
pub const DEFAULT_SPILL_LIMIT: usize = 100_000;

/// The sink type a callback name stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Type {
    Webhook,
    Langfuse,
    LangSmith,
    S3,
    Otel,
    Gcs,
}

impl Type {
    fn of(name: &str, raw: Option<&RawCallback>) -> Option<Self> {
        let declared = raw.and_then(|r| r.callback_type.as_ref()).map(Scalar::text);
        match declared.as_deref().unwrap_or(name) {
            "webhook" | "generic_api" | "generic" => Some(Self::Webhook),
            "langfuse" | "langfuse_otel" => Some(Self::Langfuse),
            "langsmith" => Some(Self::LangSmith),
            "s3" | "s3_v2" => Some(Self::S3),
            "otel" | "opentelemetry" => Some(Self::Otel),
            "gcs_bucket" => Some(Self::Gcs),
            _ => None,
        }
    }
}

/// Build the sinks from `litellm_settings` names and `callback_settings`.
pub(super) fn callbacks(
    litellm: &LitellmSettings,
    mut settings: BTreeMap<String, RawCallback>,
    s3_params: Option<RawCallback>,
    gcs_params: RawCallback,
    env: &dyn Env,
    p: &mut Problems,
) -> CallbackSettings {
    // name → (on success, on failure), in first-seen order.
    let mut names: Vec<(String, bool, bool)> = Vec::new();
    let lists = [
        (&litellm.callbacks, true, true),
        (&litellm.success_callback, true, false),
        (&litellm.failure_callback, false, true),
    ];
    for (list, success, failure) in lists {
        for n in list {
            match names.iter_mut().find(|(m, ..)| m == n) {
                Some(entry) => {
                    entry.1 |= success;
                    entry.2 |= failure;
                }
                None => names.push((n.clone(), success, failure)),
            }
        }
    }
    if let Some(s3) = s3_params {
        settings.entry("s3".into()).or_insert(s3);
    }
    let mut sinks = Vec::new();
    for (name, on_success, on_failure) in names {
        let raw = settings.remove(&name);
        let path = format!("callback_settings.{name}");
        let Some(kind) = Type::of(&name, raw.as_ref()) else {
            p.warn(
                format!("litellm_settings.callbacks: {name}"),
                "not a callback sluice has (webhook, generic_api, s3, langfuse, langsmith, \
                 otel, gcs_bucket); ignored",
            );
            continue;
        };
        let mut raw = raw.unwrap_or_default();
        if kind == Type::Gcs {
            // LiteLLM also reads the bucket and key file from litellm_settings.
            raw.gcs_bucket_name = raw
                .gcs_bucket_name
                .or_else(|| gcs_params.gcs_bucket_name.clone());
            raw.gcs_path_service_account = raw
                .gcs_path_service_account
                .or_else(|| gcs_params.gcs_path_service_account.clone());
        }
        if let Some(sink) = sink(&name, kind, raw, litellm, env, &path, p) {
            sinks.push(SinkSettings {
                on_success,
                on_failure,
                ..sink
            });
        }
    }
    for name in settings.keys() {
        p.warn(
            format!("callback_settings.{name}"),
            "no callback of this name is listed in litellm_settings.callbacks / \
             success_callback / failure_callback; ignored",
        );
    }
    CallbackSettings {
        sinks,
        spend_log_content: false,
    }
}

fn sink(
    name: &str,
    kind: Type,
    raw: RawCallback,
    litellm: &LitellmSettings,
    env: &dyn Env,
    path: &str,
    p: &mut Problems,
) -> Option<SinkSettings> {
    let at = |key: &str| format!("{path}.{key}");
    let var = |names: &[&str]| {
        names
            .iter()
            .find_map(|n| env.var(n).filter(|v| !v.trim().is_empty()))
    };
    let missing = |p: &mut Problems, key: &str, vars: &str| {
        // A LiteLLM config naming a callback whose credentials live elsewhere still loads.
        p.warn(
            at(key),
            format!(
                "the {name} callback needs this (or the environment variable {vars}); \
                 the callback is off"
            ),
        );
    };
    // LiteLLM's GCS logger takes its batching from the environment.
    let env_scalar = |n: &str| var(&[n]).map(Scalar::Str);
    let (batch_size, flush_interval) = match kind {
        Type::Gcs => (
            raw.batch_size
                .clone()
                .or_else(|| env_scalar("GCS_BATCH_SIZE")),
            raw.flush_interval
                .clone()
                .or_else(|| env_scalar("GCS_FLUSH_INTERVAL")),
        ),
        _ => (raw.batch_size.clone(), raw.flush_interval.clone()),
    };
    let batch_size = whole::<usize>(&at("batch_size"), batch_size, p)
        .filter(|n| *n > 0)
        .unwrap_or(DEFAULT_BATCH_SIZE);
    let flush_interval =
        seconds(&at("flush_interval"), flush_interval, p).unwrap_or(DEFAULT_FLUSH_INTERVAL);
    let max_queue = whole::<usize>(&at("max_queue_size"), raw.max_queue_size.clone(), p)
        .filter(|n| *n > 0)
        .unwrap_or(DEFAULT_MAX_QUEUE);
    let spill_limit = whole::<usize>(&at("spill_limit"), raw.spill_limit.clone(), p)
        .unwrap_or(DEFAULT_SPILL_LIMIT);
    let message_logging = boolean(&at("message_logging"), raw.message_logging.clone(), p)
        .unwrap_or(false)
        && !litellm.turn_off_message_logging;
    let headers = |raw: &RawCallback| -> Vec<(String, Secret)> {
        raw.headers
            .iter()
            .flatten()
            .map(|(k, v)| (k.clone(), Secret::new(v.text())))
            .collect()
    };
    let kind = match kind {
        Type::Webhook => {
            let url = text(raw.endpoint.clone())
                .or_else(|| text(raw.url.clone()))
                .or_else(|| var(&["GENERIC_LOGGER_ENDPOINT"]));
            let Some(url) = url else {
                missing(p, "endpoint", "GENERIC_LOGGER_ENDPOINT");
                return None;
            };
            let mut hs = headers(&raw);
            if hs.is_empty() {
                hs = var(&["GENERIC_LOGGER_HEADERS"])
                    .map(|h| parse_header_list(&h))
                    .unwrap_or_default();
            }
            let ndjson = match text(raw.log_format.clone()).as_deref() {
                None | Some("json_array") => false,
                Some("ndjson") => true,
                Some(other) => {
                    p.error(
                        at("log_format"),
                        format!("expected json_array or ndjson, got {other:?}"),
                    );
                    false
                }
            };
            let events = texts(raw.event_types.clone());
            if !events.is_empty() {
                let ok = |e: &str| events.iter().any(|x| x == e);
                if !ok("llm_api_success") && !ok("llm_api_failure") {
                    p.error(
                        at("event_types"),
                        "expected llm_api_success and/or llm_api_failure",
                    );
                }
            }
            check_url(&at("endpoint"), &url, p);
            SinkKind::Webhook {
                url,
                headers: hs,
                ndjson,
            }
        }
        Type::Langfuse => {
            let public_key = text(raw.public_key.clone()).or_else(|| var(&["LANGFUSE_PUBLIC_KEY"]));
            let secret_key = text(raw.secret_key.clone()).or_else(|| var(&["LANGFUSE_SECRET_KEY"]));
            let host = text(raw.host.clone())
                .or_else(|| var(&["LANGFUSE_HOST", "LANGFUSE_BASE_URL"]))
                .unwrap_or_else(|| "https://cloud.langfuse.com".into());
            let (Some(public_key), Some(secret_key)) = (public_key, secret_key) else {
                missing(
                    p,
                    "public_key / secret_key",
                    "LANGFUSE_PUBLIC_KEY / LANGFUSE_SECRET_KEY",
                );
                return None;
            };
            check_url(&at("host"), &host, p);
            SinkKind::Langfuse {
                host: host.trim_end_matches('/').to_owned(),
                public_key: Secret::new(public_key),
                secret_key: Secret::new(secret_key),
            }
        }
        Type::LangSmith => {
            let Some(api_key) = text(raw.api_key.clone())
                .or_else(|| var(&["LANGSMITH_API_KEY", "LANGCHAIN_API_KEY"]))
            else {
                missing(p, "api_key", "LANGSMITH_API_KEY");
                return None;
            };
            let endpoint = text(raw.endpoint.clone())
                .or_else(|| var(&["LANGSMITH_ENDPOINT", "LANGSMITH_BASE_URL"]))
                .unwrap_or_else(|| "https://api.smith.langchain.com".into());
            check_url(&at("endpoint"), &endpoint, p);
            SinkKind::LangSmith {
                endpoint: endpoint.trim_end_matches('/').to_owned(),
                api_key: Secret::new(api_key),
                project: text(raw.project.clone())
                    .or_else(|| var(&["LANGSMITH_PROJECT"]))
                    .unwrap_or_else(|| "litellm-completion".into()),
            }
        }
        Type::S3 => {
            let Some(bucket) = text(raw.s3_bucket_name.clone()).or_else(|| var(&["AWS_S3_BUCKET"]))
            else {
                missing(p, "s3_bucket_name", "AWS_S3_BUCKET");
                return None;
            };
            let region = text(raw.s3_region_name.clone())
                .or_else(|| var(&["AWS_REGION", "AWS_DEFAULT_REGION", "AWS_REGION_NAME"]))
                .unwrap_or_else(|| "us-east-1".into());
            let access_key =
                text(raw.s3_aws_access_key_id.clone()).or_else(|| var(&["AWS_ACCESS_KEY_ID"]));
            let secret_key = text(raw.s3_aws_secret_access_key.clone())
                .or_else(|| var(&["AWS_SECRET_ACCESS_KEY"]));
            let (Some(access_key), Some(secret_key)) = (access_key, secret_key) else {
                missing(
                    p,
                    "s3_aws_access_key_id / s3_aws_secret_access_key",
                    "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY",
                );
                return None;
            };
            let endpoint = text(raw.s3_endpoint_url.clone())
                .or_else(|| var(&["AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"]))
                .unwrap_or_else(|| format!("https://s3.{region}.amazonaws.com"));
            check_url(&at("s3_endpoint_url"), &endpoint, p);
            SinkKind::S3 {
                bucket,
                region,
                endpoint: endpoint.trim_end_matches('/').to_owned(),
                access_key: Secret::new(access_key),
                secret_key: Secret::new(secret_key),
                session_token: text(raw.s3_aws_session_token.clone())
                    .or_else(|| var(&["AWS_SESSION_TOKEN"]))
                    .map(Secret::new),
                prefix: text(raw.s3_path.clone())
                    .map(|s| format!("{}/", s.trim_matches('/')))
                    .unwrap_or_default(),
            }
        }
        Type::Otel => otel(&raw, env, path, p)?,
        Type::Gcs => gcs(&raw, env, path, p)?,
    };
    Some(SinkSettings {
        name: name.to_owned(),
        on_success: true,
        on_failure: true,
        batch_size,
        flush_interval,
        max_queue,
        spill_limit,
        message_logging,
        kind,
    })
}

/// GCS settings with LiteLLM's keys: `gcs_bucket_name` (`GCS_BUCKET_NAME`; a `bucket/folder`
/// name puts the objects under `folder/`, as LiteLLM does), `gcs_path_service_account`
/// (`GCS_PATH_SERVICE_ACCOUNT`: a key file's path or its JSON), and where the API lives:
/// `api_base`, else `STORAGE_EMULATOR_HOST` (the variable Google's own SDKs honour).
fn gcs(raw: &RawCallback, env: &dyn Env, path: &str, p: &mut Problems) -> Option<SinkKind> {
    let var = |n: &str| env.var(n).filter(|v| !v.trim().is_empty());
    let name = text(raw.gcs_bucket_name.clone()).or_else(|| var("GCS_BUCKET_NAME"));
    let key =
        text(raw.gcs_path_service_account.clone()).or_else(|| var("GCS_PATH_SERVICE_ACCOUNT"));
    let missing = |p: &mut Problems, key: &str, var: &str| {
        p.warn(
            format!("{path}.{key}"),
            format!(
                "the gcs_bucket callback needs this (or the environment variable {var}); \
                 the callback is off"
            ),
        );
    };
    let Some(name) = name else {
        missing(p, "gcs_bucket_name", "GCS_BUCKET_NAME");
        return None;
    };
    let Some(key) = key else {
        // Application-default credentials (metadata server, gcloud) are not read.
        missing(p, "gcs_path_service_account", "GCS_PATH_SERVICE_ACCOUNT");
        return None;
    };
    let (credentials, _) = sluice_net::google_auth::read_key_file(
        &format!("{path}.gcs_path_service_account"),
        &key,
        p,
    )?;
    let (bucket, prefix) = split_bucket(&name);
    if bucket.is_empty() {
        p.error(
            format!("{path}.gcs_bucket_name"),
            "the bucket name is empty",
        );
        return None;
    }
    let api_base = match text(raw.api_base.clone()).or_else(|| var("STORAGE_EMULATOR_HOST")) {
        // The SDKs take the emulator's host with or without a scheme.
        Some(b) if !b.contains("://") => format!("http://{b}"),
        Some(b) => b,
        None => "https://storage.googleapis.com".into(),
    };
    check_url(&format!("{path}.api_base"), &api_base, p);
    Some(SinkKind::Gcs {
        bucket,
        prefix,
        credentials,
        api_base: api_base.trim_end_matches('/').to_owned(),
    })
}

/// `bucket/some/folder` → (`bucket`, `some/folder/`); `bucket` → (`bucket`, ``).
fn split_bucket(name: &str) -> (String, String) {
    let name = name.trim().trim_matches('/');
    match name.split_once('/') {
        Some((bucket, folder)) => (bucket.to_owned(), format!("{}/", folder.trim_matches('/'))),
        None => (name.to_owned(), String::new()),
    }
}

/// OTLP settings: `callback_settings.otel`, then the standard `OTEL_EXPORTER_OTLP_*`
/// variables, then LiteLLM's own (`OTEL_EXPORTER`, `OTEL_ENDPOINT`, `OTEL_HEADERS`).
fn otel(raw: &RawCallback, env: &dyn Env, path: &str, p: &mut Problems) -> Option<SinkKind> {
    let var = |n: &str| env.var(n).filter(|v| !v.trim().is_empty());
    let protocol = text(raw.protocol.clone())
        .or_else(|| var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"))
        .or_else(|| var("OTEL_EXPORTER_OTLP_PROTOCOL"))
        .or_else(|| var("OTEL_EXPORTER"))
        .unwrap_or_else(|| "http/protobuf".into());
    let grpc = match protocol.as_str() {
        "http/protobuf" | "otlp_http" | "http" => false,
        "grpc" | "otlp_grpc" => true,
        other => {
            p.error(
                format!("{path}.protocol"),
                format!(
                    "expected http/protobuf or grpc, got {other:?} (http/json is not supported)"
                ),
            );
            return None;
        }
    };
    // A signal-specific endpoint is used as is; a base endpoint gets `/v1/traces` (HTTP).
    let endpoint =
        match text(raw.endpoint.clone()).or_else(|| var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")) {
            Some(e) => e,
            None => {
                let base = var("OTEL_EXPORTER_OTLP_ENDPOINT")
                    .or_else(|| var("OTEL_ENDPOINT"))
                    .unwrap_or_else(|| {
                        if grpc {
                            "http://localhost:4317".into()
                        } else {
                            "http://localhost:4318".into()
                        }
                    });
                if grpc || base.ends_with("/v1/traces") {
                    base
                } else {
                    format!("{}/v1/traces", base.trim_end_matches('/'))
                }
            }
        };
    check_url(&format!("{path}.endpoint"), &endpoint, p);
    let mut headers: Vec<(String, Secret)> = raw
        .headers
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), Secret::new(v.text())))
        .collect();
    if headers.is_empty() {
        headers = var("OTEL_EXPORTER_OTLP_TRACES_HEADERS")
            .or_else(|| var("OTEL_EXPORTER_OTLP_HEADERS"))
            .or_else(|| var("OTEL_HEADERS"))
            .map(|h| parse_header_list(&h))
            .unwrap_or_default();
    }
    Some(SinkKind::Otel {
        endpoint,
        grpc,
        headers,
        service_name: text(raw.service_name.clone())
            .or_else(|| var("OTEL_SERVICE_NAME"))
            .unwrap_or_else(|| "sluice".into()),
    })
}

/// `k1=v1,k2=v2` (the OTLP header variable format; values may be percent-encoded).
fn parse_header_list(s: &str) -> Vec<(String, Secret)> {
    s.split(',')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.trim().to_owned(), Secret::new(uri_decode(v.trim()))))
        .filter(|(k, _)| !k.is_empty())
        .collect()
}

fn check_url(path: &str, url: &str, p: &mut Problems) {
    let ok = url
        .parse::<http::Uri>()
        .ok()
        .is_some_and(|u| matches!(u.scheme_str(), Some("http" | "https")) && u.host().is_some());
    if !ok {
        p.error(path, format!("expected an http(s) URL, got {url:?}"));
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use crate::{load_str, SinkKind};

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn litellm_names_and_env_vars_make_sinks() {
        let yaml = "
litellm_settings:
  success_callback: [langfuse]
  failure_callback: [langfuse, webhook]
  callbacks: [otel]
callback_settings:
  webhook: {url: 'http://127.0.0.1:9/hook', batch_size: 10, flush_interval: 0.5}
  otel: {message_logging: true}
";
        let e = env(&[
            ("LANGFUSE_PUBLIC_KEY", "pk-lf-1"),
            ("LANGFUSE_SECRET_KEY", "sk-lf-1"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                "authorization=Bearer%20x,x-b=2",
            ),
        ]);
        let cfg = load_str(yaml, &e).unwrap().config.callbacks;
        let names: Vec<_> = cfg.sinks.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["otel", "langfuse", "webhook"]);
        let lf = &cfg.sinks[1];
        assert!(lf.on_success && lf.on_failure);
        let hook = &cfg.sinks[2];
        assert!(!hook.on_success && hook.on_failure);
        assert_eq!(hook.batch_size, 10);
        assert_eq!(hook.flush_interval.as_millis(), 500);
        let SinkKind::Otel {
            endpoint,
            grpc,
            headers,
            ..
        } = &cfg.sinks[0].kind
        else {
            panic!("not otel")
        };
        assert_eq!(endpoint, "http://127.0.0.1:4318/v1/traces");
        assert!(!grpc);
        assert_eq!(headers[0].1.expose(), "Bearer x");
        assert!(cfg.sinks[0].message_logging);
        assert!(cfg.tracing() && cfg.content());
        let shown = crate::describe(&load_str(yaml, &e).unwrap().config);
        assert!(
            shown.contains(
                "webhook: webhook → http://127.0.0.1:9/hook  (failure; batch 10, flush 0.5s)"
            ),
            "{shown}"
        );
        assert!(
            shown.contains("otel: otlp/http → http://127.0.0.1:4318/v1/traces"),
            "{shown}"
        );
        assert!(
            !shown.contains("sk-lf-1") && !shown.contains("Bearer"),
            "{shown}"
        );
    }

    #[test]
    fn turn_off_message_logging_wins_and_generic_api_is_a_webhook() {
        let yaml = "
litellm_settings:
  turn_off_message_logging: true
  callbacks: [my_api]
callback_settings:
  my_api: {callback_type: generic_api, endpoint: 'http://127.0.0.1:9/x', message_logging: true}
";
        let cfg = load_str(yaml, &env(&[])).unwrap().config.callbacks;
        assert!(matches!(cfg.sinks[0].kind, SinkKind::Webhook { .. }));
        assert!(!cfg.sinks[0].message_logging);
    }

    #[test]
    fn store_prompts_in_spend_logs_keeps_bodies_unless_message_logging_is_off() {
        let on = "general_settings: {store_prompts_in_spend_logs: true}";
        let cfg = load_str(on, &env(&[])).unwrap().config;
        assert!(cfg.general.store_prompts_in_spend_logs);
        assert!(cfg.callbacks.spend_log_content && cfg.callbacks.content());
        let off = "general_settings: {store_prompts_in_spend_logs: true}
litellm_settings: {turn_off_message_logging: true}";
        let cfg = load_str(off, &env(&[])).unwrap().config.callbacks;
        assert!(!cfg.content());
        let default = load_str("general_settings: {}", &env(&[])).unwrap().config;
        assert!(!default.general.store_prompts_in_spend_logs && !default.callbacks.content());
    }

    #[test]
    fn missing_credentials_and_bad_values_name_the_key() {
        let yaml = "
litellm_settings:
  callbacks: [webhook]
callback_settings:
  webhook: {url: 'not a url', batch_size: many}
";
        let err = load_str(yaml, &env(&[])).unwrap_err().to_string();
        assert!(
            err.contains("callback_settings.webhook.batch_size"),
            "{err}"
        );
        assert!(err.contains("callback_settings.webhook.endpoint"), "{err}");
        let yaml = "
litellm_settings:
  callbacks: [gcs_bucket, webhook, langsmith, s3]
callback_settings:
  webhook: {url: 'http://127.0.0.1:1/', flush_intervall: 2}
";
        let loaded = load_str(yaml, &env(&[])).unwrap();
        let warnings: Vec<String> = loaded.warnings.iter().map(|w| w.to_string()).collect();
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("flush_intervall") && w.contains("flush_interval")),
            "{warnings:?}"
        );
        assert!(
            warnings.iter().any(|w| w.contains("gcs_bucket")),
            "{warnings:?}"
        );
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("callback_settings.langsmith.api_key")),
            "{warnings:?}"
        );
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("callback_settings.s3.s3_bucket_name")),
            "{warnings:?}"
        );
        assert_eq!(loaded.config.callbacks.sinks.len(), 1);
    }

    #[test]
    fn gcs_bucket_with_litellm_keys() {
        let key = format!(
            "{}/../../tests/fixtures/vertex/service_account.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let yaml = "
litellm_settings:
  callbacks: [gcs_bucket]
  gcs_bucket_name: my-logs/prod/sluice
";
        let e = env(&[
            ("GCS_PATH_SERVICE_ACCOUNT", key.as_str()),
            ("GCS_FLUSH_INTERVAL", "7"),
            ("GCS_BATCH_SIZE", "64"),
            ("STORAGE_EMULATOR_HOST", "127.0.0.1:4443"),
        ]);
        let cfg = load_str(yaml, &e).unwrap().config.callbacks;
        let s = &cfg.sinks[0];
        assert_eq!((s.batch_size, s.flush_interval.as_secs()), (64, 7));
        let SinkKind::Gcs {
            bucket,
            prefix,
            credentials,
            api_base,
        } = &s.kind
        else {
            panic!("not gcs: {:?}", s.kind)
        };
        assert_eq!(
            (bucket.as_str(), prefix.as_str()),
            ("my-logs", "prod/sluice/")
        );
        assert_eq!(api_base, "http://127.0.0.1:4443");
        assert!(credentials.expose().contains("PRIVATE KEY"));
        // callback_settings wins over litellm_settings and the environment.
        let yaml = format!(
            "
litellm_settings:
  callbacks: [gcs_bucket]
  gcs_bucket_name: ignored
callback_settings:
  gcs_bucket: {{gcs_bucket_name: b, gcs_path_service_account: '{key}', api_base: 'http://127.0.0.1:1/', batch_size: 3}}
"
        );
        let cfg = load_str(&yaml, &env(&[])).unwrap().config.callbacks;
        assert!(
            matches!(&cfg.sinks[0].kind, SinkKind::Gcs { bucket, prefix, api_base, .. }
            if bucket == "b" && prefix.is_empty() && api_base == "http://127.0.0.1:1")
        );
        assert_eq!(cfg.sinks[0].batch_size, 3);
        // A key file that cannot be read is an error naming the key.
        let yaml = "
litellm_settings:
  callbacks: [gcs_bucket]
callback_settings:
  gcs_bucket: {gcs_bucket_name: b, gcs_path_service_account: /nonexistent/key.json}
";
        let err = load_str(yaml, &env(&[])).unwrap_err().to_string();
        assert!(
            err.contains("callback_settings.gcs_bucket.gcs_path_service_account"),
            "{err}"
        );
    }

    #[test]
    fn grpc_and_s3_settings() {
        let yaml = "
litellm_settings:
  callbacks: [otel, s3]
  s3_callback_params:
    s3_bucket_name: logs
    s3_endpoint_url: http://127.0.0.1:5000
    s3_path: sluice/
";
        let e = env(&[
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317"),
            ("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE"),
            ("AWS_SECRET_ACCESS_KEY", "secret"),
        ]);
        let cfg = load_str(yaml, &e).unwrap().config.callbacks;
        assert!(
            matches!(&cfg.sinks[0].kind, SinkKind::Otel { grpc: true, endpoint, .. } if endpoint == "http://127.0.0.1:4317")
        );
        assert!(
            matches!(&cfg.sinks[1].kind, SinkKind::S3 { bucket, prefix, region, .. }
            if bucket == "logs" && prefix == "sluice/" && region == "us-east-1")
        );
    }
}
