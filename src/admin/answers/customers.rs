//! `/customer/*`'s (and `/end_user/*`'s) answers: an end user, with its budget nested in
//! `litellm_budget_table` as LiteLLM nests it.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{Accounting, LimitFields, Shown};
use sluice_store::EndUserRow;

/// An end user (a request's `user`) as `/customer/*` answers show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct CustomerInfo {
    /// The end user's id, as requests name it.
    pub user_id: String,
    /// Its display name.
    pub alias: Option<String>,
    /// A blocked end user's requests are refused.
    pub blocked: bool,
    /// The budget object its limits follow.
    pub budget_id: Option<String>,
    /// Model groups it may call; empty: all.
    pub models: Vec<String>,
    /// LiteLLM's column, kept in `metadata`: only deployments of this region serve it. As
    /// sent (free-form); `null` for none.
    #[serde(default)]
    pub allowed_model_region: Value,
    /// LiteLLM's column, kept in `metadata` and not acted on: as sent; `null` for none.
    #[serde(default)]
    pub default_model: Value,
    /// The caller's own `metadata`.
    #[serde(default)]
    pub metadata: Map<String, Value>,
    /// Its budget and limits.
    pub litellm_budget_table: BudgetTable,
    /// Spend and timestamps.
    #[serde(flatten)]
    pub accounting: Accounting,
}

/// An end user's budget and limits (LiteLLM's `litellm_budget_table`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct BudgetTable {
    /// Budget and limits.
    #[serde(flatten)]
    pub limits: LimitFields,
    /// LiteLLM's end-user fields kept in `metadata` and shown here (`soft_budget`,
    /// `model_max_budget`, ...), free-form.
    #[serde(flatten)]
    pub kept: Map<String, Value>,
}

/// The kept fields an end user shows beside `metadata` rather than in its budget.
const COLUMNS: [&str; 2] = ["allowed_model_region", "default_model"];

impl CustomerInfo {
    /// The stored end user as shown.
    pub(crate) fn of(e: &EndUserRow) -> Self {
        // The budget table is the holder's limits without models and metadata.
        let mut shown = Shown::of(&e.limits, &[&["models", "metadata"]]);
        let [region, default_model] =
            COLUMNS.map(|name| shown.kept.remove(name).unwrap_or(Value::Null));
        Self {
            user_id: e.user_id.clone(),
            alias: e.alias.clone(),
            blocked: e.blocked,
            budget_id: e.limits.budget_id.clone(),
            models: shown.models,
            allowed_model_region: region,
            default_model,
            metadata: shown.metadata,
            litellm_budget_table: BudgetTable {
                limits: shown.limits,
                kept: shown.kept,
            },
            accounting: Accounting::of(&e.accounting),
        }
    }
}

/// `POST /customer/block` and `/customer/unblock`: the end users as they are now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct BlockedCustomers {
    /// Each end user named, blocked or unblocked.
    pub blocked_users: Vec<CustomerInfo>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admin::answers::tests::names_and_round_trip;

    #[test]
    fn an_end_user_shows_its_names_and_reads_back() {
        let now = time::macros::datetime!(2026-03-01 12:00 UTC);
        let mut e = EndUserRow::new("c1".into(), now);
        e.limits.max_budget = Some(3.0);
        let m = &mut e.limits.metadata;
        m.insert("allowed_model_region".into(), "eu".into());
        m.insert("soft_budget".into(), 2.into());
        m.insert("plan".into(), "pro".into());
        let c = CustomerInfo::of(&e);
        assert_eq!(c.allowed_model_region, "eu");
        assert_eq!(
            c.litellm_budget_table.kept.keys().collect::<Vec<_>>(),
            ["soft_budget"]
        );
        assert_eq!(c.metadata.keys().collect::<Vec<_>>(), ["plan"]);
        e.limits.metadata.clear();
        names_and_round_trip(
            &CustomerInfo::of(&e),
            &[
                &[
                    "user_id",
                    "alias",
                    "blocked",
                    "budget_id",
                    "models",
                    "allowed_model_region",
                    "default_model",
                    "metadata",
                    "litellm_budget_table",
                ],
                Accounting::NAMES,
            ],
        );
        names_and_round_trip(
            &CustomerInfo::of(&e).litellm_budget_table,
            &[LimitFields::NAMES],
        );
    }
}
