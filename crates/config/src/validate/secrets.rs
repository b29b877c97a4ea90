//! `general_settings.key_management_system` and `key_management_settings`: the secret manager
//! `os.environ/` references are read from (`sluice-secrets`). What sluice does not do
//! (writing virtual keys to the manager, KMS decryption, assumed AWS roles, custom classes)
//! is refused here by field, so a config is never silently read differently than LiteLLM would.

use serde_json::Value;
use sluice_core::settings::read::{seconds, text};
use sluice_core::settings::{did_you_mean, Problems, Scalar};
use sluice_secrets::{Settings, System};

const SYSTEM: &str = "general_settings.key_management_system";
const SETTINGS: &str = "general_settings.key_management_settings";

/// Members of `key_management_settings` that only matter when virtual keys are written to the
/// manager (`store_virtual_keys`), which sluice refuses: ignored with a warning.
const WRITE_ONLY: &[&str] = &[
    "prefix_for_stored_virtual_keys",
    "description",
    "tags",
    "kms_key_id",
    "replica_regions",
];

/// LiteLLM's ways of reaching AWS other than static credentials.
const AWS_IDENTITIES: &[&str] = &[
    "aws_role_name",
    "aws_session_name",
    "aws_external_id",
    "aws_profile_name",
    "aws_web_identity_token",
    "aws_sts_endpoint",
];

/// Members sluice reads.
const READ: &[&str] = &[
    "hosted_keys",
    "access_mode",
    "store_virtual_keys",
    "primary_secret_name",
    "aws_region_name",
    "refresh_interval",
    "custom_secret_manager",
];

/// Validate the two keys; `None` when no manager is configured.
pub(crate) fn key_management(
    system: Option<Scalar>,
    settings: Option<Value>,
    p: &mut Problems,
) -> Option<Settings> {
    let Some(name) = text(system) else {
        if settings.as_ref().is_some_and(|s| !s.is_null()) {
            p.warn(SETTINGS, "no key_management_system is set; ignored");
        }
        return None;
    };
    let system = match System::parse(&name) {
        Ok(s) => s,
        Err(why) => {
            p.error(SYSTEM, format!("{name:?}: {why}"));
            return None;
        }
    };
    let mut out = Settings::new(system);
    let members = match settings {
        None | Some(Value::Null) => return Some(out),
        Some(Value::Object(m)) => m,
        Some(_) => {
            p.error(
                SETTINGS,
                "expected a mapping (hosted_keys:, access_mode:, ...)",
            );
            return Some(out);
        }
    };
    for (key, value) in members {
        let path = format!("{SETTINGS}.{key}");
        let scalar = || serde_json::from_value::<Scalar>(value.clone()).ok();
        match key.as_str() {
            "hosted_keys" => out.hosted_keys = names(&path, &value, p),
            "access_mode" => match text(scalar()).as_deref() {
                Some("read_only") | None => {}
                Some("read_and_write") => p.warn(
                    path,
                    "sluice reads from the secret manager and never writes to it; read as read_only",
                ),
                Some("write_only") => p.error(
                    path,
                    "write_only: sluice does not write to secret managers, so nothing would be read; use read_only",
                ),
                Some(other) => p.error(
                    path,
                    format!("expected read_only or read_and_write, got {other:?}"),
                ),
            },
            "store_virtual_keys" => {
                if scalar().and_then(|s| s.boolean()) == Some(true) {
                    p.error(
                        path,
                        "storing virtual keys in the secret manager is not supported by sluice (keys live in its database)",
                    );
                }
            }
            "primary_secret_name" => {
                out.primary_secret_name = text(scalar());
                if system != System::AwsSecretManager {
                    p.warn(path, "read only by aws_secret_manager, as in LiteLLM; ignored");
                }
            }
            "aws_region_name" => out.aws_region_name = text(scalar()),
            "refresh_interval" => out.refresh_interval = seconds(&path, scalar(), p),
            "custom_secret_manager" => p.error(
                path,
                "custom secret manager classes (Python) cannot be loaded by sluice",
            ),
            k if AWS_IDENTITIES.contains(&k) => p.error(
                path,
                "assumed roles, profiles and web identities are not supported by sluice; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN)",
            ),
            k if WRITE_ONLY.contains(&k) => p.warn(
                path,
                "only used when virtual keys are written to the manager, which sluice does not do; ignored",
            ),
            k => p.warn(
                path,
                format!(
                    "not used by sluice; ignored{}",
                    did_you_mean(k, READ.iter().chain(WRITE_ONLY).chain(AWS_IDENTITIES).copied())
                ),
            ),
        }
    }
    Some(out)
}

/// A list of names (`hosted_keys`).
fn names(path: &str, value: &Value, p: &mut Problems) -> Option<Vec<String>> {
    let Value::Array(items) = value else {
        p.error(path, "expected a list of variable names");
        return None;
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, v) in items.iter().enumerate() {
        match v.as_str().map(str::trim).filter(|s| !s.is_empty()) {
            Some(n) => out.push(n.strip_prefix("os.environ/").unwrap_or(n).to_owned()),
            None => p.error(format!("{path}[{i}]"), "expected a variable name"),
        }
    }
    Some(out)
}
