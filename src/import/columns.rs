//! What becomes of each of LiteLLM's columns beyond the ones an object's mapping reads
//! itself: kept in the object's `metadata` (as sluice's admin API keeps LiteLLM's fields it
//! does not model), not carried (and why), or bookkeeping that sluice keeps its own way. A
//! column in none of these lists, one a newer LiteLLM added, is reported as not carried, so
//! nothing is dropped without a word.

use ring::digest::{Context, SHA256};
use serde_json::{Map, Value};

use sluice_core::trace_context::hex;

use super::report::Report;
use super::source::Row;

/// One table's columns.
pub struct Columns {
    /// Read by the object's own mapping.
    pub mapped: &'static [&'static str],
    /// Kept in `metadata` under their own name.
    pub kept: &'static [&'static str],
    /// Not carried, and why (listed for every row where they hold a value).
    pub dropped: &'static [(&'static str, &'static str)],
    /// Kept by sluice its own way (timestamps, who changed what, derived counters): not
    /// listed per row; docs/migrate-from-litellm.md names them.
    pub bookkeeping: &'static [&'static str],
}

/// Kept fields sluice acts on; every other kept field is listed as not acted on.
const ACTED_ON: &[&str] = &[
    "aliases",
    "model_aliases",
    "allowed_model_region",
    "guardrails",
    "model_max_budget",
    "model_rpm_limit",
    "model_tpm_limit",
];

/// Columns whose changes are not a change of the object: spend moves on its own (the
/// difference is added), and the rest is bookkeeping.
const VOLATILE: &[&str] = &[
    "spend",
    "updated_at",
    "updated_by",
    "last_active",
    "total_spend",
    "model_spend",
    "settings_updated_at",
    "last_health_check",
    "health_check_error",
    "status",
];

/// Why a user's per-model budget is not carried.
const PER_MODEL: &str = "sluice acts on per-model budgets of keys and teams, not of users; its spend logs carry the per-model spend";

/// `LiteLLM_VerificationToken`.
pub const KEY: Columns = Columns {
    mapped: &[
        "token", "key_name", "key_alias", "spend", "expires", "models", "user_id", "team_id",
        "organization_id", "blocked", "max_budget", "budget_duration", "budget_reset_at",
        "tpm_limit", "rpm_limit", "max_parallel_requests", "metadata", "budget_id",
        "created_at", "object_permission_id",
    ],
    kept: &[
        "aliases", "config", "permissions", "allowed_cache_controls", "allowed_routes",
        "auto_rotate", "rotation_interval", "key_type", "model_max_budget",
    ],
    dropped: &[
        ("router_settings", "per-key router settings are not supported: routing is the config's"),
        ("policies", "LiteLLM's policies have no equivalent in sluice"),
        ("access_group_ids", "LiteLLM's access-group ids are not carried; name the models (or a model access group) in `models`"),
        ("project_id", "sluice has no projects"),
        ("agent_id", "sluice has no agents"),
        ("budget_limits", "several budget windows per key are not supported: the key keeps max_budget and budget_duration"),
        ("budget_fallbacks", "budget fallbacks are not supported"),
        ("tpd_limit", "tokens-per-day limits are not supported (tpm_limit is)"),
    ],
    bookkeeping: &[
        "updated_at", "created_by", "updated_by", "last_active", "total_spend",
        "settings_updated_at", "soft_budget_cooldown", "rotation_count", "last_rotation_at",
        "key_rotation_at", "model_spend",
    ],
};

/// `LiteLLM_TeamTable`.
pub const TEAM: Columns = Columns {
    mapped: &[
        "team_id",
        "team_alias",
        "organization_id",
        "metadata",
        "max_budget",
        "spend",
        "models",
        "max_parallel_requests",
        "tpm_limit",
        "rpm_limit",
        "budget_duration",
        "budget_reset_at",
        "blocked",
        "created_at",
        "members_with_roles",
        "object_permission_id",
        "model_id",
    ],
    kept: &["team_member_permissions", "model_max_budget"],
    dropped: &[
        (
            "router_settings",
            "per-team router settings are not supported: routing is the config's",
        ),
        (
            "policies",
            "LiteLLM's policies have no equivalent in sluice",
        ),
        (
            "allow_team_guardrail_config",
            "teams cannot configure guardrails of their own",
        ),
        (
            "soft_budget",
            "soft budgets (alerts) are not supported for teams",
        ),
        (
            "access_group_ids",
            "LiteLLM's access-group ids are not carried; name the models in `models`",
        ),
        (
            "budget_limits",
            "several budget windows per team are not supported",
        ),
        (
            "default_team_member_models",
            "default models for new members are not supported",
        ),
        (
            "tpd_limit",
            "tokens-per-day limits are not supported (tpm_limit is)",
        ),
    ],
    bookkeeping: &["updated_at", "model_spend", "admins", "members"],
};

/// `LiteLLM_UserTable`.
pub const USER: Columns = Columns {
    mapped: &[
        "user_id", "user_alias", "team_id", "user_role", "max_budget", "spend", "user_email",
        "models", "metadata", "max_parallel_requests", "tpm_limit", "rpm_limit",
        "budget_duration", "budget_reset_at", "created_at", "object_permission_id",
    ],
    kept: &["sso_user_id", "allowed_cache_controls"],
    dropped: &[
        ("password", "LiteLLM's password hash cannot be checked by sluice (argon2): the user sets a new one (/user/update `password`)"),
        ("model_max_budget", PER_MODEL),
        ("policies", "LiteLLM's policies have no equivalent in sluice"),
        ("password_reset_required", "sluice has no forced password reset"),
    ],
    bookkeeping: &[
        "updated_at", "model_spend", "teams", "organization_id", "last_breach_check_at",
    ],
};

/// `LiteLLM_OrganizationTable`.
pub const ORGANIZATION: Columns = Columns {
    mapped: &[
        "organization_id",
        "organization_alias",
        "budget_id",
        "metadata",
        "models",
        "spend",
        "created_at",
        "object_permission_id",
    ],
    kept: &[],
    dropped: &[],
    bookkeeping: &["model_spend", "created_by", "updated_at", "updated_by"],
};

/// `LiteLLM_TagTable`: its limits are its budget's.
pub const TAG: Columns = Columns {
    mapped: &[
        "tag_name",
        "description",
        "models",
        "model_info",
        "budget_id",
        "spend",
        "created_at",
        "created_by",
    ],
    kept: &[],
    dropped: &[],
    bookkeeping: &["updated_at"],
};

/// `LiteLLM_OrganizationMembership`.
pub const ORG_MEMBER: Columns = Columns {
    mapped: &[
        "user_id",
        "organization_id",
        "user_role",
        "budget_id",
        "created_at",
    ],
    kept: &[],
    dropped: &[(
        "spend",
        "sluice keeps no member's spend within an organization",
    )],
    bookkeeping: &["updated_at"],
};

/// `LiteLLM_BudgetTable`.
pub const BUDGET: Columns = Columns {
    mapped: &[
        "budget_id",
        "max_budget",
        "soft_budget",
        "max_parallel_requests",
        "tpm_limit",
        "rpm_limit",
        "model_max_budget",
        "budget_duration",
        "budget_reset_at",
        "created_at",
    ],
    kept: &[],
    dropped: &[
        (
            "allowed_models",
            "a budget's own model list is not supported: set `models` on its holders",
        ),
        (
            "tpd_limit",
            "tokens-per-day limits are not supported (tpm_limit is)",
        ),
        (
            "temp_budget_increase",
            "temporary budget increases are not supported",
        ),
        (
            "temp_budget_expiry",
            "temporary budget increases are not supported",
        ),
    ],
    bookkeeping: &["created_by", "updated_at", "updated_by"],
};

/// `LiteLLM_EndUserTable`.
pub const END_USER: Columns = Columns {
    mapped: &[
        "user_id",
        "alias",
        "spend",
        "budget_id",
        "blocked",
        "models",
    ],
    kept: &["allowed_model_region", "default_model"],
    dropped: &[(
        "object_permission_id",
        "end users have no MCP or vector-store permissions in sluice",
    )],
    bookkeeping: &[],
};

/// `LiteLLM_ProxyModelTable`.
pub const MODEL: Columns = Columns {
    mapped: &[
        "model_id",
        "model_name",
        "litellm_params",
        "model_info",
        "created_at",
        "created_by",
        "blocked",
    ],
    kept: &[],
    dropped: &[],
    bookkeeping: &["updated_at", "updated_by"],
};

/// Whether a value says nothing (NULL, false, zero, empty text, list or object): such a
/// column is not worth a line in the report or a place in `metadata`. The same test a
/// translation uses for a field it can drop.
pub use sluice_translate::params::asks_nothing as says_nothing;

impl Columns {
    /// Puts this row's kept columns into `metadata` (a value the metadata already has wins:
    /// it is where sluice's own API would have put it) and reports kept fields sluice does
    /// not act on, dropped columns holding a value, and columns this version does not know.
    pub fn extras(&self, row: &Row, metadata: &mut Map<String, Value>, report: &mut Report) {
        for (column, value) in row.fields() {
            let c = column.as_str();
            if self.mapped.contains(&c) || self.bookkeeping.contains(&c) || says_nothing(value) {
                continue;
            }
            if self.kept.contains(&c) {
                metadata
                    .entry(c.to_owned())
                    .or_insert_with(|| value.clone());
                if !ACTED_ON.contains(&c) {
                    report.not_enforced(
                        row.table,
                        &row.id,
                        c,
                        "kept in the object's metadata; sluice does not act on it",
                    );
                }
            } else if let Some((_, why)) = self.dropped.iter().find(|(d, _)| *d == c) {
                report.not_carried(row.table, &row.id, c, *why);
            } else {
                report.not_carried(
                    row.table,
                    &row.id,
                    c,
                    "a column this version of sluice does not know",
                );
            }
        }
    }
}

/// A digest of everything in `row` but its volatile columns, and of `context` (values the
/// mapping looked up elsewhere): equal digests mean nothing to write again.
pub fn fingerprint(row: &Row, context: &[&Value]) -> String {
    let mut h = Context::new(&SHA256);
    for (column, value) in row.fields() {
        if VOLATILE.contains(&column.as_str()) {
            continue;
        }
        h.update(column.as_bytes());
        h.update(&[0]);
        h.update(value.to_string().as_bytes());
        h.update(&[0]);
    }
    for v in context {
        h.update(v.to_string().as_bytes());
        h.update(&[0]);
    }
    hex(h.finish().as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn kept_dropped_and_unknown_columns_are_each_reported() {
        let row = Row::from_json(
            "LiteLLM_VerificationToken",
            "h",
            json!({"token": "h", "aliases": {"a": "b"}, "permissions": {"x": 1}, "tpd_limit": 5,
                   "brand_new": "v", "updated_at": "2026-01-01T00:00:00", "router_settings": {}}),
        );
        let mut metadata = Map::new();
        let mut report = Report::new(false);
        KEY.extras(&row, &mut metadata, &mut report);
        assert_eq!(metadata["aliases"], json!({"a": "b"}));
        assert_eq!(metadata["permissions"], json!({"x": 1}));
        let fields: Vec<&str> = report
            .not_carried
            .iter()
            .map(|g| g.field.as_str())
            .collect();
        assert_eq!(fields, ["brand_new", "tpd_limit"]);
        let kept: Vec<&str> = report
            .not_enforced
            .iter()
            .map(|g| g.field.as_str())
            .collect();
        assert_eq!(kept, ["permissions"], "aliases are acted on");
    }

    #[test]
    fn spend_and_bookkeeping_do_not_change_the_fingerprint() {
        let a = Row::from_json(
            "t",
            "1",
            json!({"id": "1", "spend": 1.0, "updated_at": "x", "max_budget": 5}),
        );
        let b = Row::from_json(
            "t",
            "1",
            json!({"id": "1", "spend": 2.0, "updated_at": "y", "max_budget": 5}),
        );
        let c = Row::from_json(
            "t",
            "1",
            json!({"id": "1", "spend": 2.0, "updated_at": "y", "max_budget": 6}),
        );
        assert_eq!(fingerprint(&a, &[]), fingerprint(&b, &[]));
        assert_ne!(fingerprint(&b, &[]), fingerprint(&c, &[]));
        assert_ne!(fingerprint(&a, &[]), fingerprint(&a, &[&json!(1)]));
    }
}
