//! The model API's answers: a deployment as `GET /model/info` lists it, and a stored one as
//! `/model/new` and `/model/update` answer it (LiteLLM's `LiteLLM_ProxyModelTable` row). A
//! deployment's `litellm_params` are LiteLLM's free-form provider parameters, and the rest of
//! its `model_info` free-form too; the fields sluice sets itself are typed.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::iso;
use sluice_store::ModelRow;

/// `GET /model/info`: every deployment served, the config file's and the stored ones.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ModelInfoList {
    /// One entry per deployment, in config order.
    pub data: Vec<DeploymentInfo>,
}

/// One deployment as `/model/info` lists it (provider keys masked).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct DeploymentInfo {
    /// The model group it serves.
    pub model_name: String,
    /// Its provider parameters as the config describes them (`model`, `api_base`, `rpm`,
    /// ...), free-form as in LiteLLM.
    pub litellm_params: Map<String, Value>,
    /// Its id, origin, mode and prices.
    pub model_info: ModelInfo,
}

/// A deployment's `model_info`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ModelInfo {
    /// The deployment's id.
    pub id: String,
    /// Stored (added at run time), not from the config file.
    pub db_model: bool,
    /// LiteLLM's mode (`chat`, `embedding`, ...); `None`: not set.
    pub mode: Option<String>,
    /// Who added a stored deployment, and when (ISO 8601); absent for the file's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_by: Option<String>,
    /// When a stored deployment was added.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
    /// Who last changed a stored deployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_by: Option<String>,
    /// When a stored deployment was last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
    /// The rest as the config describes it (`litellm_provider`, `base_model`, prices, ...),
    /// free-form as in LiteLLM.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

impl ModelInfo {
    /// Marks the deployment with its stored row's authors and times.
    pub(crate) fn stamp(&mut self, row: &ModelRow) {
        self.created_at = iso(row.created_at);
        self.created_by = Some(row.created_by.clone());
        self.updated_at = iso(row.updated_at);
        self.updated_by = Some(row.updated_by.clone());
    }
}

/// A stored deployment as `/model/new` and `/model/update` answer it: its own
/// `litellm_params` (as stored, keys masked) and `model_info`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct StoredModel {
    /// Its id.
    pub model_id: String,
    /// The model group it serves.
    pub model_name: String,
    /// Its provider parameters as stored, keys masked (free-form: whatever was sent).
    pub litellm_params: Map<String, Value>,
    /// Its `model_info` as stored, with `id` and `db_model: true` (free-form: whatever was
    /// sent).
    pub model_info: Map<String, Value>,
    /// When it was added (ISO 8601).
    pub created_at: Option<String>,
    /// Who added it.
    pub created_by: String,
    /// When it was last changed (ISO 8601).
    pub updated_at: Option<String>,
    /// Who last changed it.
    pub updated_by: String,
}

impl StoredModel {
    /// The stored `row`, with its opened parameters already `masked`.
    pub(crate) fn of(row: &ModelRow, masked: Map<String, Value>) -> Self {
        let mut info = row.model_info.as_object().cloned().unwrap_or_default();
        info.insert("id".into(), row.model_id.clone().into());
        info.insert("db_model".into(), true.into());
        Self {
            model_id: row.model_id.clone(),
            model_name: row.model_name.clone(),
            litellm_params: masked,
            model_info: info,
            created_at: iso(row.created_at),
            created_by: row.created_by.clone(),
            updated_at: iso(row.updated_at),
            updated_by: row.updated_by.clone(),
        }
    }

    /// Its `model_info.mode`, when set (a free-form member, read here once).
    pub(crate) fn mode(&self) -> Option<&str> {
        self.model_info.get("mode").and_then(Value::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_listed_deployment_reads_and_writes_back_as_it_was() {
        let file = json!({
            "model_name": "cheap",
            "litellm_params": {"model": "mock/cheap", "rpm": 5},
            "model_info": {
                "id": "cheap-1", "db_model": false, "mode": null, "base_model": null,
                "region_name": null, "access_groups": [], "litellm_provider": "mock",
                "input_cost_per_token": 0.0, "output_cost_per_token": 0.0
            }
        });
        let d: DeploymentInfo = serde_json::from_value(file.clone()).unwrap();
        assert_eq!(d.model_info.id, "cheap-1");
        assert_eq!(serde_json::to_value(&d).unwrap(), file);
        let mut stored = d.clone();
        stored.model_info.created_by = Some("admin".into());
        let v = serde_json::to_value(&stored).unwrap();
        assert_eq!(v["model_info"]["created_by"], "admin");
        assert_eq!(serde_json::from_value::<DeploymentInfo>(v).unwrap(), stored);
    }
}
