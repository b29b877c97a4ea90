//! `general_settings`.

use sluice_core::settings::read::{boolean, number, seconds, text, whole};
use sluice_core::settings::{Env, Problems, Scalar};
use sluice_core::Secret;

use sluice_net::networks::{Forwarded, Networks};
use sluice_net::ssrf::Allowlist;

use crate::model::{
    GeneralSettings, HealthChecks, SpendJournalMode, DEFAULT_HEALTH_CHECK_INTERVAL,
};
use crate::raw::RawGeneral;

/// `allowed_ips`, `use_x_forwarded_for` and `trusted_proxy_ranges`: who may call, and how
/// their address is read through proxies.
fn addresses(raw: &mut RawGeneral, g: &mut GeneralSettings, p: &mut Problems) {
    let networks = |path: &str, list: Option<crate::raw::OneOrMany>, p: &mut Problems| {
        let list = list?;
        Networks::parse(&list.texts())
            .map_err(|why| p.error(path, why))
            .ok()
    };
    g.allowed_ips = networks("general_settings.allowed_ips", raw.allowed_ips.take(), p);
    if g.allowed_ips.as_ref().is_some_and(Networks::is_empty) {
        p.warn(
            "general_settings.allowed_ips",
            "an empty list: no client may call the gateway",
        );
    }
    let trusted = networks(
        "general_settings.trusted_proxy_ranges",
        raw.trusted_proxy_ranges.take(),
        p,
    );
    let believe = boolean(
        "general_settings.use_x_forwarded_for",
        raw.use_x_forwarded_for.take(),
        p,
    )
    .unwrap_or(false);
    g.forwarded = match (believe, trusted) {
        (false, _) => Forwarded::Ignored,
        (true, None) => Forwarded::OneHop,
        (true, Some(nets)) => Forwarded::Through(nets),
    };
}

/// `background_health_checks` and its settings. `use_shared_health_check` and
/// `health_check_details` are LiteLLM's switches for what sluice always does (one prober per
/// fleet when Redis is configured; details in `/health`), so they are read and change nothing.
fn health_checks(raw: &mut RawGeneral, p: &mut Problems) -> Option<HealthChecks> {
    let on = boolean(
        "general_settings.background_health_checks",
        raw.background_health_checks.take(),
        p,
    );
    let _ = boolean(
        "general_settings.use_shared_health_check",
        raw.use_shared_health_check.take(),
        p,
    );
    let _ = boolean(
        "general_settings.health_check_details",
        raw.health_check_details.take(),
        p,
    );
    let interval = seconds(
        "general_settings.health_check_interval",
        raw.health_check_interval.take(),
        p,
    );
    let groups = raw
        .background_health_check_model_groups
        .take()
        .map(|g| g.texts());
    let concurrency = whole::<usize>(
        "general_settings.health_check_concurrency",
        raw.health_check_concurrency.take(),
        p,
    );
    let cap = number(
        "general_settings.health_check_max_spend_per_day",
        raw.health_check_max_spend_per_day.take(),
        false,
        p,
    );
    if on != Some(true) {
        return None;
    }
    let interval = interval.unwrap_or(DEFAULT_HEALTH_CHECK_INTERVAL);
    if interval < std::time::Duration::from_secs(1) {
        p.error(
            "general_settings.health_check_interval",
            "at least 1 second: every round calls every deployment",
        );
    }
    if concurrency == Some(0) {
        p.error(
            "general_settings.health_check_concurrency",
            "at least 1 probe at a time",
        );
    }
    Some(HealthChecks {
        interval,
        groups,
        concurrency: concurrency.unwrap_or(8).max(1),
        max_spend_per_day: cap.unwrap_or(1.0),
    })
}

/// Validate `general_settings`.
pub(super) fn general(mut raw: RawGeneral, env: &dyn Env, p: &mut Problems) -> GeneralSettings {
    let mut limited = GeneralSettings::default();
    limits(&mut raw, &mut limited, p);
    addresses(&mut raw, &mut limited, p);
    limited.health_checks = health_checks(&mut raw, p);
    limited.jwt = super::jwt::jwt(
        raw.enable_jwt_auth.take(),
        raw.litellm_jwtauth
            .take()
            .and_then(|v| serde_json::to_value(v).ok()),
        env,
        p,
    );
    limited.alerting = super::alerting::alerting(
        super::alerting::RawAlerting {
            alerting: raw.alerting.take(),
            alert_types: raw.alert_types.take(),
            alert_to_webhook_url: raw
                .alert_to_webhook_url
                .take()
                .and_then(|v| serde_json::to_value(v).ok()),
            spend_report_frequency: raw.spend_report_frequency.take(),
            alerting_args: raw
                .alerting_args
                .take()
                .and_then(|v| serde_json::to_value(v).ok()),
        },
        env,
        p,
    );
    limited.key_management = super::secrets::key_management(
        raw.key_management_system.take(),
        raw.key_management_settings
            .take()
            .and_then(|v| serde_json::to_value(v).ok()),
        p,
    );
    let custom_routes =
        super::custom_routes::custom_routes(raw.pass_through_endpoints.take(), env, p);
    let mut g = GeneralSettings {
        master_key: text(raw.master_key).map(Secret::new),
        database_url: text(raw.database_url)
            .or_else(|| env.var("DATABASE_URL").filter(|s| !s.is_empty()))
            .map(Secret::new),
        proxy_batch_write_at: seconds(
            "general_settings.proxy_batch_write_at",
            raw.proxy_batch_write_at,
            p,
        ),
        litellm_headers: boolean("general_settings.litellm_headers", raw.litellm_headers, p)
            .unwrap_or(true),
        disable_admin_ui: boolean("general_settings.disable_admin_ui", raw.disable_admin_ui, p)
            .unwrap_or_else(|| {
                env.var("DISABLE_ADMIN_UI")
                    .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
            }),
        store_model_in_db: boolean(
            "general_settings.store_model_in_db",
            raw.store_model_in_db,
            p,
        )
        .unwrap_or_else(|| {
            env.var("STORE_MODEL_IN_DB")
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
        }),
        ui_username: env
            .var("UI_USERNAME")
            .map(|u| u.trim().to_owned())
            .filter(|u| !u.is_empty())
            .unwrap_or_else(|| "admin".to_owned()),
        ui_password: env
            .var("UI_PASSWORD")
            .filter(|p| !p.is_empty())
            .map(Secret::new),
        sso: sso(env, p),
        ..limited
    };
    if let Some(mb) = number(
        "general_settings.max_request_size_mb",
        raw.max_request_size_mb,
        true,
        p,
    ) {
        g.max_request_body_bytes = (mb * 1024.0 * 1024.0) as usize;
    }
    g.store_prompts_in_spend_logs = boolean(
        "general_settings.store_prompts_in_spend_logs",
        raw.store_prompts_in_spend_logs,
        p,
    )
    .unwrap_or(false);
    g.spend_journal = match text(raw.spend_journal.take()).as_deref().map(str::trim) {
        None | Some("per_request") => SpendJournalMode::PerRequest,
        Some("batched") => SpendJournalMode::Batched,
        Some(other) => {
            p.error(
                "general_settings.spend_journal",
                format!(
                    "expected \"per_request\" (each answered request's record journaled before \
                     its answer ends) or \"batched\" (journaled by the spend writer every few \
                     milliseconds), got {other:?}"
                ),
            );
            SpendJournalMode::PerRequest
        }
    };
    g.pass_through_endpoints = custom_routes;
    g.store_responses = boolean(
        "general_settings.store_responses",
        raw.store_responses.take(),
        p,
    )
    .unwrap_or(true);
    if let Some(days) = positive(
        "general_settings.responses_retention_days",
        raw.responses_retention_days.take(),
        p,
    ) {
        g.responses_retention_days = days;
    }
    g.spend_logs_retention = retention_duration(
        "general_settings.maximum_spend_logs_retention_period",
        raw.maximum_spend_logs_retention_period.take(),
        p,
    );
    let interval = retention_duration(
        "general_settings.maximum_spend_logs_retention_interval",
        raw.maximum_spend_logs_retention_interval.take(),
        p,
    );
    if let Some(every) = interval {
        if g.spend_logs_retention.is_none() {
            p.warn(
                "general_settings.maximum_spend_logs_retention_interval",
                "has no effect without general_settings.maximum_spend_logs_retention_period \
                 (no spend log is removed)",
            );
        }
        g.spend_logs_retention_interval = every;
    }
    g.allow_client_side_credentials = boolean(
        "general_settings.allow_client_side_credentials",
        raw.allow_client_side_credentials,
        p,
    )
    .unwrap_or(false);
    if let Some(list) = raw.client_side_api_base_allowlist {
        match Allowlist::parse(&list.texts()) {
            Ok(a) => g.client_side_api_base_allowlist = a,
            Err(why) => p.error("general_settings.client_side_api_base_allowlist", why),
        }
    }
    match (text(raw.ssl_certfile_path), text(raw.ssl_keyfile_path)) {
        (Some(cert), Some(key)) => g.tls = Some((cert.into(), key.into())),
        (None, None) => {}
        (Some(_), None) => p.error(
            "general_settings.ssl_keyfile_path",
            "required with ssl_certfile_path (the certificate's private key)",
        ),
        (None, Some(_)) => p.error(
            "general_settings.ssl_certfile_path",
            "required with ssl_keyfile_path (the certificate chain)",
        ),
    }
    g
}

/// LiteLLM's `GENERIC_*` single sign-on variables: none without `GENERIC_CLIENT_ID`; with it,
/// each endpoint is required and must be an http(s) URL, and the default role a console role.
fn sso(env: &dyn Env, p: &mut Problems) -> Option<crate::model::Sso> {
    let var = |name: &str| {
        env.var(name)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    let client_id = var("GENERIC_CLIENT_ID")?;
    let mut url = |name: &'static str| match var(name) {
        Some(u) if u.starts_with("https://") || u.starts_with("http://") => u,
        Some(_) => {
            p.error(name, "expected an http(s) URL (environment variable)");
            String::new()
        }
        None => {
            p.error(
                name,
                "required with GENERIC_CLIENT_ID (environment variable): single sign-on needs the provider's authorization, token and userinfo endpoints",
            );
            String::new()
        }
    };
    let authorization_endpoint = url("GENERIC_AUTHORIZATION_ENDPOINT");
    let token_endpoint = url("GENERIC_TOKEN_ENDPOINT");
    let userinfo_endpoint = url("GENERIC_USERINFO_ENDPOINT");
    let default_role =
        var("GENERIC_ROLE_MAPPINGS_DEFAULT_ROLE").unwrap_or_else(|| "internal_user_viewer".into());
    if !crate::model::CONSOLE_ROLES.contains(&default_role.as_str()) {
        p.error(
            "GENERIC_ROLE_MAPPINGS_DEFAULT_ROLE",
            format!(
                "'{default_role}' is not a console role; expected one of {}",
                crate::model::CONSOLE_ROLES.join(", ")
            ),
        );
    }
    Some(crate::model::Sso {
        client_id,
        client_secret: var("GENERIC_CLIENT_SECRET").map(Secret::new),
        authorization_endpoint,
        token_endpoint,
        userinfo_endpoint,
        scope: var("GENERIC_SCOPE").unwrap_or_else(|| "openid email profile".into()),
        user_id_attribute: var("GENERIC_USER_ID_ATTRIBUTE")
            .unwrap_or_else(|| "preferred_username".into()),
        email_attribute: var("GENERIC_USER_EMAIL_ATTRIBUTE").unwrap_or_else(|| "email".into()),
        role_attribute: var("GENERIC_USER_ROLE_ATTRIBUTE").unwrap_or_else(|| "role".into()),
        team_attribute: var("GENERIC_USER_TEAM_ATTRIBUTE"),
        default_role,
        base_url: var("PROXY_BASE_URL").map(|u| u.trim_end_matches('/').to_owned()),
        auto_redirect: var("AUTO_REDIRECT_UI_LOGIN_TO_SSO")
            .is_some_and(|v| v.eq_ignore_ascii_case("true")),
    })
}

/// The limits against hostile clients and overload.
fn limits(raw: &mut RawGeneral, g: &mut GeneralSettings, p: &mut Problems) {
    let c = &mut g.connections;
    if let Some(n) = positive(
        "general_settings.max_request_headers",
        raw.max_request_headers.take(),
        p,
    ) {
        c.max_headers = n;
    }
    let path = "general_settings.max_request_header_size_kb";
    if let Some(kb) = number(path, raw.max_request_header_size_kb.take(), true, p) {
        if !(8.0..=1024.0).contains(&kb) {
            p.error(path, format!("expected 8 to 1024 (KiB), got {kb}"));
        } else {
            c.max_header_bytes = (kb * 1024.0) as usize;
        }
    }
    if let Some(t) = seconds(
        "general_settings.header_read_timeout",
        raw.header_read_timeout.take(),
        p,
    ) {
        c.header_read_timeout = t;
    }
    c.max_connections = positive(
        "general_settings.max_connections",
        raw.max_connections.take(),
        p,
    );
    c.max_connection_rate_per_ip = positive(
        "general_settings.max_connection_rate_per_ip",
        raw.max_connection_rate_per_ip.take(),
        p,
    );
    if let Some(n) = positive(
        "general_settings.max_url_length",
        raw.max_url_length.take(),
        p,
    ) {
        g.max_url_length = n;
    }
    g.max_messages = positive("general_settings.max_messages", raw.max_messages.take(), p);
    if let Some(t) = seconds(
        "general_settings.body_read_timeout",
        raw.body_read_timeout.take(),
        p,
    ) {
        g.body_read_timeout = t;
    }
    g.max_in_flight_requests = positive(
        "general_settings.max_in_flight_requests",
        raw.max_in_flight_requests.take(),
        p,
    );
    g.max_memory_bytes = number(
        "general_settings.max_memory_mb",
        raw.max_memory_mb.take(),
        true,
        p,
    )
    .map(|mb| (mb * 1024.0 * 1024.0) as u64);
}

/// A whole number > 0 (a limit of 0 would refuse everything; leave the key out for none).
/// LiteLLM's retention durations: a whole number > 0 followed by `s`, `m`, `h`, `d` or `w`
/// (`7d`, `24h`, `60m`, `3600s`). Anything else is an error at `path` saying what is wanted.
fn retention_duration(
    path: &str,
    v: Option<Scalar>,
    p: &mut Problems,
) -> Option<std::time::Duration> {
    let text = v?.text();
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let per: Option<u64> = match unit {
        "s" => Some(1),
        "m" => Some(60),
        "h" => Some(3600),
        "d" => Some(86_400),
        "w" => Some(7 * 86_400),
        _ => None,
    };
    let secs = num
        .parse::<u64>()
        .ok()
        .filter(|n| *n > 0)
        .zip(per)
        .and_then(|(n, per)| n.checked_mul(per));
    if secs.is_none() {
        p.error(
            path,
            format!(
                "expected a whole number > 0 followed by s, m, h, d or w (\"7d\", \"24h\", \
                 \"60m\", \"3600s\"), got {text:?}"
            ),
        );
    }
    secs.map(std::time::Duration::from_secs)
}

fn positive<T: TryFrom<i128> + PartialEq + Default>(
    path: &str,
    v: Option<Scalar>,
    p: &mut Problems,
) -> Option<T> {
    let n = whole::<T>(path, v, p)?;
    if n == T::default() {
        p.error(
            path,
            "expected a whole number > 0; leave the key out for no limit".to_owned(),
        );
        return None;
    }
    Some(n)
}
