//! `general_settings`.

use sluice_core::settings::read::{boolean, number, seconds, text};
use sluice_core::settings::{Env, Problems};
use sluice_core::Secret;

use sluice_net::ssrf::Allowlist;

use crate::model::GeneralSettings;
use crate::raw::RawGeneral;

/// Validate `general_settings`.
pub(super) fn general(raw: RawGeneral, env: &dyn Env, p: &mut Problems) -> GeneralSettings {
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
        ..GeneralSettings::default()
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
