//! One adapter per guardrail vendor, each behind `external::External`: it turns the texts to
//! check into a prepared request and reads its service's reply into a `Verdict`. Reply
//! parsing is a pure function in each module, unit-tested beside it; the e2e tests
//! (`tests/e2e/guardrails_vendors.rs`) speak each contract on loopback.

pub(super) mod azure;
pub(super) mod bedrock;
pub(super) mod generic;
pub(super) mod lakera;
pub(super) mod moderation;
pub(super) mod presidio;

use http::HeaderValue;
use sluice_core::Secret;

/// `Bearer <key>` as a sensitive header value (never printed by `Debug`, kept out of HPACK
/// tables). The error names the key's field, never its value.
fn bearer(key: &Secret) -> Result<HeaderValue, String> {
    sensitive(&format!("Bearer {}", key.expose()))
}

/// `value` as a sensitive header value; the error names no value.
fn sensitive(value: &str) -> Result<HeaderValue, String> {
    let mut v = HeaderValue::from_str(value)
        .map_err(|_| "api_key is not a valid header value".to_owned())?;
    v.set_sensitive(true);
    Ok(v)
}
