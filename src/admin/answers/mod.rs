//! The management API's answers as Rust types. A handler builds one of these and the routing
//! table serialises it (`super::json`), so the wire shape is the struct: LiteLLM's field
//! names, pinned by `admin/wire.rs`. The console reads the same structs, by calling the typed
//! handler for a read, or by deserialising a change's answer into them; a renamed field is
//! then a compile error in the console, not a blank form field.
//!
//! Open-ended data stays JSON inside the typed struct: `metadata`, `object_permission`, the
//! kept LiteLLM fields an answer shows beside `metadata` (`kept`), a deployment's
//! `litellm_params`, an audit row's values, a logged prompt and answer.

pub(crate) mod audit;
pub(crate) mod customers;
pub(crate) mod keys;
pub(crate) mod models;
pub(crate) mod spend;
pub(crate) mod teams;
pub(crate) mod users;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use super::fields::reserved;

/// A time as LiteLLM prints it (ISO 8601, UTC); `None` only for a year no format can print.
pub(crate) fn iso(t: OffsetDateTime) -> Option<String> {
    t.format(&Rfc3339).ok()
}

/// The budget and limit fields every holder shows under LiteLLM's names (an end user in its
/// `litellm_budget_table`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct LimitFields {
    /// Spend cap in USD for the budget window; `None`: no budget.
    pub max_budget: Option<f64>,
    /// The budget window (`30d`, `1mo`, ...); `None`: the budget never resets.
    pub budget_duration: Option<String>,
    /// When the current window ends (ISO 8601).
    pub budget_reset_at: Option<String>,
    /// Requests per minute.
    pub rpm_limit: Option<u64>,
    /// Tokens per minute.
    pub tpm_limit: Option<u64>,
    /// Requests in flight at once.
    pub max_parallel_requests: Option<u64>,
    /// The budget object (`/budget/new`) these limits follow.
    pub budget_id: Option<String>,
    /// LiteLLM's `object_permission` (MCP servers and tools), as sent; `null` for none.
    #[serde(default)]
    pub object_permission: Value,
}

impl LimitFields {
    /// The names these fields have in an answer.
    pub(crate) const NAMES: &'static [&'static str] = &[
        "max_budget",
        "budget_duration",
        "budget_reset_at",
        "rpm_limit",
        "tpm_limit",
        "max_parallel_requests",
        "budget_id",
        "object_permission",
    ];
}

/// A holder's spend and timestamps.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Accounting {
    /// USD spent in the current budget window.
    pub spend: f64,
    /// When it was made (ISO 8601).
    pub created_at: Option<String>,
    /// When an admin call or a budget reset last changed it (ISO 8601).
    pub updated_at: Option<String>,
}

impl Accounting {
    /// The names these fields have in an answer.
    pub(crate) const NAMES: &'static [&'static str] = &["spend", "created_at", "updated_at"];

    /// The store's record as shown.
    pub(crate) fn of(a: &sluice_store::Accounting) -> Self {
        Self {
            spend: a.spend,
            created_at: iso(a.created_at),
            updated_at: iso(a.updated_at),
        }
    }
}

/// The kept fields LiteLLM itself keeps in `metadata` (its `LiteLLM_ManagementEndpoint_
/// MetadataFields`, and the premium ones): shown there. Every other kept field is one of
/// LiteLLM's columns, so it is shown beside `metadata`, not in it, and a client that reads
/// back the `metadata` it sent finds exactly that.
const LITELLM_METADATA: &[&str] = &[
    "model_rpm_limit",
    "model_tpm_limit",
    "rpm_limit_type",
    "tpm_limit_type",
    "guardrails",
    "tags",
    "enforced_params",
    "temp_budget_increase",
    "temp_budget_expiry",
    "team_member_key_duration",
    "prompts",
    "logging",
    "allowed_passthrough_routes",
];

/// A holder's limits as an answer shows them.
pub(crate) struct Shown {
    /// Model groups it may call; empty: all.
    pub models: Vec<String>,
    /// `metadata`, less the kept fields shown beside it.
    pub metadata: Map<String, Value>,
    /// The budget and limit fields.
    pub limits: LimitFields,
    /// The kept fields shown beside `metadata`, as LiteLLM shows its columns.
    pub kept: Map<String, Value>,
}

impl Shown {
    /// `limits` as shown by an answer whose own fields are named in `own`: a kept field with
    /// one of those names is not shown beside them (the answer's own field stands).
    pub(crate) fn of(limits: &sluice_store::Limits, own: &[&[&str]]) -> Self {
        let mut metadata = limits.metadata.clone();
        let mut kept = Map::new();
        metadata.retain(|name, value| {
            if !reserved(name) || LITELLM_METADATA.contains(&name.as_str()) {
                return true;
            }
            let taken = LimitFields::NAMES.contains(&name.as_str())
                || own.iter().any(|names| names.contains(&name.as_str()));
            if !taken {
                kept.insert(name.clone(), value.clone());
            }
            false
        });
        Self {
            models: limits.models.clone(),
            metadata,
            limits: LimitFields {
                max_budget: limits.max_budget,
                budget_duration: limits.budget_duration.map(|d| d.to_string()),
                budget_reset_at: limits.budget_reset_at.and_then(iso),
                rpm_limit: limits.rpm_limit,
                tpm_limit: limits.tpm_limit,
                max_parallel_requests: limits.max_parallel_requests,
                budget_id: limits.budget_id.clone(),
                object_permission: limits
                    .metadata
                    .get("object_permission")
                    .cloned()
                    .unwrap_or(Value::Null),
            },
            kept,
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use serde::de::DeserializeOwned;
    use serde::Serialize;

    /// `answer`'s own names (its serialised keys, with nothing kept beside them) are `names`,
    /// and it reads back as itself.
    pub(crate) fn names_and_round_trip<T>(answer: &T, names: &[&[&str]])
    where
        T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug,
    {
        let v = serde_json::to_value(answer).unwrap();
        let mut got: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        let mut want: Vec<&str> = names.concat();
        got.sort_unstable();
        want.sort_unstable();
        assert_eq!(got, want);
        assert_eq!(&serde_json::from_value::<T>(v).unwrap(), answer);
    }
}
