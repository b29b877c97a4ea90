//! `general_settings`.

use sluice_core::settings::read::{boolean, number, seconds, text, whole};
use sluice_core::settings::{Env, Problems, Scalar};
use sluice_core::Secret;

use sluice_net::ssrf::Allowlist;

use crate::model::GeneralSettings;
use crate::raw::RawGeneral;

/// Validate `general_settings`.
pub(super) fn general(mut raw: RawGeneral, env: &dyn Env, p: &mut Problems) -> GeneralSettings {
    let mut limited = GeneralSettings::default();
    limits(&mut raw, &mut limited, p);
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
        disable_admin_ui: boolean("general_settings.disable_admin_ui", raw.disable_admin_ui, p)
            .unwrap_or_else(|| {
                env.var("DISABLE_ADMIN_UI")
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
