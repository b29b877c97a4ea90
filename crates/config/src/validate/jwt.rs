//! `general_settings.enable_jwt_auth` and `litellm_jwtauth`: API calls authenticated by an
//! identity provider's JWTs (LiteLLM's settings and environment variables: `JWT_PUBLIC_KEY_URL`,
//! `JWT_AUDIENCE`, `JWT_ISSUER`).

use serde_json::Value;
use sluice_core::settings::read::boolean;
use sluice_core::settings::{Env, Problems, Scalar};

use crate::model::{JwtAuth, JwtRole, ScopeMapping};

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
    "end_user_id_jwt_field",
    "user_roles_jwt_field",
    "user_allowed_roles",
    "roles_jwt_field",
    "role_mappings",
    "object_id_jwt_field",
    "enforce_rbac",
    "scope_mappings",
    "enforce_scope_based_access",
    "team_allowed_routes",
    "team_id_upsert",
    "user_id_upsert",
];

/// A list of strings, or one string alone.
fn texts(v: &Value) -> Option<Vec<String>> {
    match v {
        Value::String(s) => Some(vec![s.clone()]),
        Value::Array(a) => a.iter().map(|s| s.as_str().map(str::to_owned)).collect(),
        _ => None,
    }
}

/// LiteLLM's role names.
fn role(name: &str) -> Option<JwtRole> {
    match name {
        "proxy_admin" => Some(JwtRole::ProxyAdmin),
        "team" => Some(JwtRole::Team),
        "internal_user" => Some(JwtRole::InternalUser),
        _ => None,
    }
}

/// `role_mappings`: `[{role, internal_role}]`.
fn role_mappings(path: &str, v: &Value, p: &mut Problems) -> Vec<(String, JwtRole)> {
    let Some(items) = v.as_array() else {
        p.error(path, "expected a list of {role, internal_role}");
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let at = format!("{path}[{i}]");
        let (Some(name), Some(internal)) = (
            item.get("role").and_then(Value::as_str),
            item.get("internal_role").and_then(Value::as_str),
        ) else {
            p.error(at, "expected {role, internal_role}");
            continue;
        };
        match role(internal) {
            Some(r) => out.push((name.to_owned(), r)),
            None => p.error(
                format!("{at}.internal_role"),
                format!("expected proxy_admin, team or internal_user, got {internal:?}"),
            ),
        }
    }
    out
}

/// `scope_mappings`: `[{scope, models, routes}]`.
fn scope_mappings(path: &str, v: &Value, p: &mut Problems) -> Vec<ScopeMapping> {
    let Some(items) = v.as_array() else {
        p.error(path, "expected a list of {scope, models, routes}");
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let at = format!("{path}[{i}]");
        let Some(scope) = item.get("scope").and_then(Value::as_str) else {
            p.error(format!("{at}.scope"), "expected a scope name");
            continue;
        };
        let list = |name: &str, p: &mut Problems| match item.get(name) {
            None | Some(Value::Null) => Vec::new(),
            Some(v) => texts(v).unwrap_or_else(|| {
                p.error(format!("{at}.{name}"), "expected a list of names");
                Vec::new()
            }),
        };
        out.push(ScopeMapping {
            scope: scope.to_owned(),
            models: list("models", p),
            routes: list("routes", p),
        });
    }
    out
}

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
            "end_user_id_jwt_field" => j.end_user_id_field = text(),
            "user_roles_jwt_field" => j.user_roles_field = text(),
            "roles_jwt_field" => j.roles_field = text(),
            "object_id_jwt_field" => j.object_id_field = text(),
            "user_allowed_roles" => match texts(v) {
                Some(r) => j.user_allowed_roles = Some(r),
                None => bad(p, "a list of role names"),
            },
            "team_allowed_routes" => match texts(v) {
                Some(r) => j.team_allowed_routes = r,
                None => bad(p, "a list of routes or route groups"),
            },
            "role_mappings" => j.role_mappings = role_mappings(&path, v, p),
            "scope_mappings" => j.scope_mappings = scope_mappings(&path, v, p),
            "enforce_rbac" | "enforce_scope_based_access" | "team_id_upsert" | "user_id_upsert" => {
                match v.as_bool() {
                    Some(b) => match name.as_str() {
                        "enforce_rbac" => j.enforce_rbac = b,
                        "enforce_scope_based_access" => j.enforce_scope_based_access = b,
                        "team_id_upsert" => j.team_id_upsert = b,
                        _ => j.user_id_upsert = b,
                    },
                    None => bad(p, "true or false"),
                }
            }
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
    if j.team_id_field.is_none()
        && j.team_id_default.is_none()
        && j.user_id_field.is_none()
        && j.object_id_field.is_none()
    {
        p.warn(
            PATH,
            "names no team_id_jwt_field, team_id_default or user_id_jwt_field: only tokens with \
             the admin scope are accepted",
        );
    }
    Some(j)
}
