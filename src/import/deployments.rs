//! LiteLLM's deployments stored in its database (`LiteLLM_ProxyModelTable`, added through
//! `/model/new` or its UI): each `litellm_params` value opened with LiteLLM's key, the whole
//! sealed with sluice's, so the provider keys are never written in the clear.

use serde_json::Value;
use time::OffsetDateTime;

use sluice_store::ModelRow;

use super::columns::{self, fingerprint};
use super::decrypt::{LiteLlmKey, Opened};
use super::holders::Incoming;
use super::report::{Report, RowError};
use super::source::Row;
use crate::models::Seal;

/// Who the import writes as (`created_by` when LiteLLM has none, and `updated_by`).
const BY: &str = "sluice import litellm";

/// A stored deployment as sluice stores it; `None` for one LiteLLM has blocked (sluice has
/// no blocked deployments, so it is not served: reported).
pub fn model(
    r: &Row,
    key: Option<&LiteLlmKey>,
    seal: Option<&Seal>,
    report: &mut Report,
    now: OffsetDateTime,
) -> Result<Option<Incoming<ModelRow>>, RowError> {
    let mut ignored = serde_json::Map::new();
    columns::MODEL.extras(r, &mut ignored, report);
    if r.flag("blocked")? {
        report.not_carried(
            r.table,
            &r.id,
            "blocked",
            "a blocked deployment is not imported: sluice has no blocked deployments",
        );
        return Ok(None);
    }
    let model_name = r
        .text("model_name")?
        .ok_or_else(|| r.error("model_name", "missing"))?;
    let mut params = r.object("litellm_params")?;
    open(r, "litellm_params", &mut params, key)?;
    let seal = seal.ok_or_else(|| {
        r.error(
            "litellm_params",
            "sluice's config has no general_settings.master_key to seal the provider keys with",
        )
    })?;
    let sealed = seal
        .seal(Value::Object(params).to_string().as_bytes())
        .map_err(|e| r.error("litellm_params", e.to_string()))?;
    let mut info = r.object("model_info")?;
    info.remove("id");
    let row = ModelRow {
        model_id: r.id.clone(),
        model_name,
        litellm_params: sealed,
        model_info: Value::Object(info),
        etag: sluice_core::random::uuid_v4().to_string(),
        created_at: r.time("created_at")?.unwrap_or(now),
        created_by: r.text("created_by")?.unwrap_or_else(|| BY.to_owned()),
        updated_at: now,
        updated_by: BY.to_owned(),
    };
    Ok(Some(Incoming {
        id: r.id.clone(),
        fingerprint: fingerprint(r, &[]),
        row,
        spend: 0.0,
    }))
}

/// Opens every sealed value of `column` (a `litellm_params` or credentials object) in place. LiteLLM
/// seals every string value of a stored deployment, so when none opens but some look sealed,
/// the key is the wrong one: an error naming the value, rather than a deployment that sends
/// ciphertext as its API key. When the key opens some, the rest are plain values that only
/// look like base64.
pub fn open(
    r: &Row,
    column: &str,
    params: &mut serde_json::Map<String, Value>,
    key: Option<&LiteLlmKey>,
) -> Result<(), RowError> {
    let Some(key) = key else {
        let sealed = params.iter().find(|(_, v)| {
            v.as_str()
                .is_some_and(|s| LiteLlmKey::new("").open(s) != Opened::NotSealed)
        });
        return match sealed {
            Some((name, _)) => Err(r.error(&format!("{column}.{name}"), "sealed by LiteLLM, and no key to open it: give --litellm-salt-key (LiteLLM's LITELLM_SALT_KEY, else its master key)")),
            None => Ok(()),
        };
    };
    let before = params.clone();
    let wrong = key.open_values(params);
    let opened = params.iter().any(|(k, v)| before.get(k) != Some(v));
    match wrong.first() {
        Some(name) if !opened => Err(r.error(
            &format!("{column}.{name}"),
            "sealed under another key than the one given (LiteLLM's LITELLM_SALT_KEY, else its master key)",
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use sluice_core::Secret;

    const LEGACY: &str =
        "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXqTKON1cPKR_UjN-_KQsOL7v5B-oaLwIH9gKY551vL25o6w==";

    fn row() -> Row {
        Row::from_json(
            "LiteLLM_ProxyModelTable",
            "m1",
            json!({"model_id": "m1", "model_name": "db-gpt", "blocked": false,
                   "litellm_params": {"model": "openai/gpt-4o", "api_key": LEGACY},
                   "model_info": {"id": "m1", "mode": "chat"}}),
        )
    }

    #[test]
    fn params_are_opened_then_sealed_with_sluices_key() {
        let key = LiteLlmKey::new("sk-litellm-master-1234");
        let seal = Seal::new(None, &Secret::new("sk-sluice")).unwrap();
        let mut report = Report::new(false);
        let now = OffsetDateTime::now_utc();
        let m = model(&row(), Some(&key), Some(&seal), &mut report, now)
            .unwrap()
            .unwrap();
        assert!(!m.row.litellm_params.contains(LEGACY));
        let plain: Value =
            serde_json::from_slice(&seal.open(&m.row.litellm_params).unwrap()).unwrap();
        assert_eq!(plain["api_key"], "sk-upstream-secret");
        assert_eq!(plain["model"], "openai/gpt-4o");
        assert_eq!(m.row.model_info, json!({"mode": "chat"}));
        assert_eq!(m.row.model_name, "db-gpt");
    }

    #[test]
    fn a_wrong_or_missing_key_names_the_value_and_blocked_ones_stay_out() {
        let seal = Seal::new(None, &Secret::new("sk-sluice")).unwrap();
        let mut report = Report::new(false);
        let now = OffsetDateTime::now_utc();
        let e = model(
            &row(),
            Some(&LiteLlmKey::new("nope")),
            Some(&seal),
            &mut report,
            now,
        )
        .unwrap_err();
        assert_eq!(e.column, "litellm_params.api_key");
        let e = model(&row(), None, Some(&seal), &mut report, now).unwrap_err();
        assert_eq!(e.column, "litellm_params.api_key");
        let key = LiteLlmKey::new("sk-litellm-master-1234");
        let e = model(&row(), Some(&key), None, &mut report, now).unwrap_err();
        assert!(e.why.contains("master_key"), "{e}");
        let blocked = Row::from_json(
            "LiteLLM_ProxyModelTable",
            "m2",
            json!({"model_id": "m2", "model_name": "x", "blocked": true}),
        );
        assert!(model(&blocked, Some(&key), Some(&seal), &mut report, now)
            .unwrap()
            .is_none());
        assert_eq!(report.not_carried.last().unwrap().field, "blocked");
    }
}
