//! `general_settings.enable_jwt_auth` and `litellm_jwtauth`: API calls authenticated by an
//! identity provider's JWTs (LiteLLM's settings and environment variables: `JWT_PUBLIC_KEY_URL`,
//! `JWT_AUDIENCE`, `JWT_ISSUER`).

use serde_json::Value;
use sluice_core::settings::read::boolean;
use sluice_core::settings::{Env, Problems, Scalar};

use crate::model::JwtAuth;

/// `litellm_jwtauth` members sluice reads.
const READ: &[&str] = &[
    "admin_jwt_scope",
    "team_id_jwt_field",
    "team_id_default",
    "user_id_jwt_field",
    "org_id_jwt_field",
    "public_key_ttl",
    "public_key_stale_ttl",
    "leeway",
];

/// Validate the JWT settings; `None` unless `enable_jwt_auth` is true.
pub(super) fn jwt(
    enabled: Option<Scalar>,
    settings: Option<Value>,
    env: &dyn Env,
    p: &mut Problems,
) -> Option<JwtAuth> {
    const PATH: &str = "general_settings.litellm_jwtauth";
    if !boolean("general_settings.enable_jwt_auth", enabled, p).unwrap_or(false) {
        return None;
    }
    let var = |name: &str| env.var(name).filter(|v| !v.trim().is_empty());
    let list = |v: Option<String>| -> Vec<String> {
        v.map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
    };
    let key_urls = list(var("JWT_PUBLIC_KEY_URL"));
    if key_urls.is_empty() {
        p.error(
            "general_settings.enable_jwt_auth",
            "needs the environment variable JWT_PUBLIC_KEY_URL (the identity provider's JWK Set \
             or OpenID discovery URL; several separated by commas)",
        );
        return None;
    }
    let mut j = JwtAuth {
        key_urls,
        audiences: list(var("JWT_AUDIENCE")),
        issuer: var("JWT_ISSUER"),
        ..JwtAuth::default()
    };
    let Some(settings) = settings else {
        return Some(j);
    };
    let Value::Object(m) = settings else {
        p.error(PATH, "expected a map of settings");
        return Some(j);
    };
    for (name, v) in &m {
        let path = format!("{PATH}.{name}");
        let text = || v.as_str().map(str::to_owned);
        let seconds = || {
            v.as_u64()
                .or_else(|| v.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
        };
        let bad = |p: &mut Problems, what: &str| p.error(path.clone(), format!("expected {what}"));
        match name.as_str() {
            "admin_jwt_scope" => match text() {
                Some(s) => j.admin_scope = s,
                None => bad(p, "a scope name"),
            },
            "team_id_jwt_field" => j.team_id_field = text(),
            "team_id_default" => j.team_id_default = text(),
            "user_id_jwt_field" => j.user_id_field = text(),
            "org_id_jwt_field" => j.org_id_field = text(),
            "public_key_ttl" => match seconds() {
                Some(s) => j.public_key_ttl_secs = s,
                None => bad(p, "a number of seconds"),
            },
            "public_key_stale_ttl" => match seconds() {
                Some(s) => j.public_key_stale_ttl_secs = s,
                None => bad(p, "a number of seconds"),
            },
            "leeway" => match seconds() {
                Some(s) => j.leeway_secs = s,
                None => bad(p, "a number of seconds"),
            },
            _ if v.is_null() => {}
            _ => p.warn(
                path,
                format!(
                    "not used by sluice; ignored (sluice reads {})",
                    READ.join(", ")
                ),
            ),
        }
    }
    if j.team_id_field.is_none() && j.team_id_default.is_none() && j.user_id_field.is_none() {
        p.warn(
            PATH,
            "names no team_id_jwt_field, team_id_default or user_id_jwt_field: only tokens with \
             the admin scope are accepted",
        );
    }
    Some(j)
}
