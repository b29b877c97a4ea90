//! The budget and limit fields keys, teams, users and end users share, read once here: on
//! create and on update, where a field that is absent stays as it was, `null` clears it and a
//! value sets it.

use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};
use time::OffsetDateTime;

use super::answers::{Accounting, Shown};
use crate::auth::per_model;
use sluice_core::cache_control::CacheControl;
use sluice_core::error::ApiError;
use sluice_store::{BudgetDuration, Limits};

/// Every field a request struct requires, so serde's "missing field" becomes a
/// `MissingParam` with a static name.
pub(super) const REQUIRED: &[&str] = &[
    "key",
    "keys",
    "team_id",
    "user_id",
    "user_ids",
    "team_ids",
    "member",
    "role",
    // Organizations and budgets (admin/organizations.rs, admin/budgets.rs).
    "organization_id",
    "organization_ids",
    "organizations",
    "organization_alias",
    "budgets",
    "budget_id",
    "id",
    // Tags (admin/tags.rs).
    "name",
    "names",
];

/// Every field name any admin body takes, so a type error can name its field statically.
pub(super) const ALL: &[&str] = &[
    "key",
    "keys",
    "key_aliases",
    "new_key",
    "key_alias",
    "duration",
    "user_id",
    "user_ids",
    "team_id",
    "team_ids",
    "team_alias",
    "member",
    "role",
    "blocked",
    "alias",
    "user_alias",
    "user_email",
    "user_role",
    "auto_create_key",
    "password",
    "models",
    "max_budget",
    "budget_duration",
    "rpm_limit",
    "tpm_limit",
    "max_parallel_requests",
    "metadata",
    "object_permission",
    // Organizations and budgets (admin/organizations.rs, admin/budgets.rs).
    "budget_id",
    "budgets",
    "id",
    "organization_id",
    "organization_ids",
    "organizations",
    "organization_alias",
    "soft_budget",
    "model_max_budget",
    "model_rpm_limit",
    "model_tpm_limit",
    "max_budget_in_organization",
    "budget_reset_at",
    // Tags (admin/tags.rs).
    "name",
    "names",
    "description",
    "model_info",
    "spend",
];

/// LiteLLM's key fields (`GenerateKeyRequest`, `UpdateKeyRequest`) that sluice keeps in the
/// key's `metadata` under their own name, where LiteLLM itself keeps several of them
/// (`tags`, `guardrails`, `model_rpm_limit`, ...). Of these, `guardrails`, `aliases`, `tags`
/// and the per-model limits (`model_rpm_limit`, `model_tpm_limit`, `model_max_budget`) are
/// acted on (the gateway reads them from there); the rest are stored and shown, not acted on yet
/// (docs/litellm-compat.md lists them). A name in none of these lists is still a 400.
pub(super) const KEPT_KEY: &[&str] = &[
    "aliases",
    "guardrails",
    "tags",
    "allowed_cache_controls",
    "config",
    "permissions",
    "model_max_budget",
    "model_rpm_limit",
    "model_tpm_limit",
    "prompts",
    "enforced_params",
    "allowed_routes",
    "allowed_passthrough_routes",
    "rpm_limit_type",
    "tpm_limit_type",
    "soft_budget",
    "send_invite_email",
    "key_type",
    "auto_rotate",
    "rotation_interval",
    "temp_budget_increase",
    "temp_budget_expiry",
];

/// LiteLLM's team fields (`NewTeamRequest`, `UpdateTeamRequest`) kept in the team's
/// `metadata`; `model_aliases`, `guardrails`, `tags` and the per-model limits are acted on.
pub(super) const KEPT_TEAM: &[&str] = &[
    "model_aliases",
    "guardrails",
    "tags",
    "team_member_permissions",
    "model_max_budget",
    "prompts",
    "allowed_passthrough_routes",
    "model_rpm_limit",
    "model_tpm_limit",
    "rpm_limit_type",
    "tpm_limit_type",
    "team_member_budget",
    "team_member_rpm_limit",
    "team_member_tpm_limit",
    "team_member_key_duration",
];

/// LiteLLM's user fields (`NewUserRequest`, `UpdateUserRequest`) kept in the user's
/// `metadata`; `aliases` is acted on (it also goes to the key `/user/new` issues).
pub(super) const KEPT_USER: &[&str] = &[
    "aliases",
    "guardrails",
    "allowed_cache_controls",
    "config",
    "permissions",
    "model_max_budget",
    "model_rpm_limit",
    "model_tpm_limit",
    "prompts",
    "blocked",
    "sso_user_id",
    "organizations",
    "send_invite_email",
];

/// LiteLLM's end-user fields (`NewCustomerRequest`, `UpdateCustomerRequest`) kept in the end
/// user's `metadata`; `allowed_model_region` is acted on (only deployments whose
/// `region_name` it is serve the end user).
pub(super) const KEPT_CUSTOMER: &[&str] = &[
    "soft_budget",
    "model_max_budget",
    "budget_reset_at",
    "allowed_model_region",
    "default_model",
];

/// Every name kept in `metadata` by any of the lists above, plus `object_permission`: a
/// `metadata` replaced wholesale keeps these unless it names them itself.
pub(super) fn reserved(name: &str) -> bool {
    name == "object_permission"
        || [KEPT_KEY, KEPT_TEAM, KEPT_USER, KEPT_CUSTOMER]
            .iter()
            .any(|list| list.contains(&name))
}

/// The shared fields' names, for the unknown-field check.
pub(super) const LIMIT_FIELDS: &[&str] = &[
    "models",
    "max_budget",
    "budget_duration",
    "rpm_limit",
    "tpm_limit",
    "max_parallel_requests",
    "metadata",
    "object_permission",
    "budget_id",
];

/// `Some(None)` for an explicit `null`, `None` (via `default`) when absent.
pub(super) fn set<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// The shared fields of one request.
#[derive(Debug, Default, Deserialize)]
pub(super) struct LimitsPatch {
    #[serde(default, deserialize_with = "set")]
    models: Option<Option<Vec<String>>>,
    #[serde(default, deserialize_with = "set")]
    max_budget: Option<Option<f64>>,
    #[serde(default, deserialize_with = "set")]
    budget_duration: Option<Option<String>>,
    #[serde(default, deserialize_with = "set")]
    rpm_limit: Option<Option<u64>>,
    #[serde(default, deserialize_with = "set")]
    tpm_limit: Option<Option<u64>>,
    #[serde(default, deserialize_with = "set")]
    max_parallel_requests: Option<Option<u64>>,
    #[serde(default, deserialize_with = "set")]
    metadata: Option<Option<Map<String, Value>>>,
    /// LiteLLM's `object_permission` (`mcp_servers`, `mcp_tool_permissions`, ...), kept in
    /// `metadata.object_permission`, where the MCP gateway reads it.
    #[serde(default, deserialize_with = "set")]
    object_permission: Option<Option<Map<String, Value>>>,
    /// The request's kept fields (`KEPT_*`), moved here before the typed read.
    #[serde(skip)]
    pub(super) kept: Map<String, Value>,
    /// A budget object (`/budget/new`) whose limits the holder takes (`budgets::follow`).
    #[serde(default, deserialize_with = "set")]
    budget_id: Option<Option<String>>,
}

impl LimitsPatch {
    /// Whether the request sets a limit a budget object would set.
    fn sets_budget_limits(&self) -> bool {
        self.max_budget.is_some()
            || self.budget_duration.is_some()
            || self.rpm_limit.is_some()
            || self.tpm_limit.is_some()
            || self.max_parallel_requests.is_some()
    }

    /// Applies the fields present; a new or removed `budget_duration` starts (or ends) the
    /// budget window at `now`.
    pub(super) fn apply(self, limits: &mut Limits, now: OffsetDateTime) -> Result<(), ApiError> {
        // A holder that names a budget takes its limits from it (`budgets::follow`).
        if let Some(b) = self.budget_id.clone() {
            limits.budget_id = b;
        }
        if limits.budget_id.is_some() && self.sets_budget_limits() {
            return Err(ApiError::InvalidParam {
                param: "budget_id",
                message: "set either budget_id or the limits (max_budget, budget_duration, \
                          rpm_limit, tpm_limit, max_parallel_requests), not both; change a \
                          budget with /budget/update"
                    .into(),
            });
        }
        if let Some(models) = self.models {
            limits.models = models.unwrap_or_default();
        }
        if let Some(budget) = self.max_budget {
            if budget.is_some_and(|b| !b.is_finite() || b < 0.0) {
                return Err(ApiError::InvalidParam {
                    param: "max_budget",
                    message: "must be a number of USD, 0 or more".into(),
                });
            }
            limits.max_budget = budget;
        }
        if let Some(duration) = self.budget_duration {
            set_duration(
                duration,
                &mut limits.budget_duration,
                &mut limits.budget_reset_at,
            )?;
        }
        if let Some(v) = self.rpm_limit {
            limits.rpm_limit = v;
        }
        if let Some(v) = self.tpm_limit {
            limits.tpm_limit = v;
        }
        if let Some(v) = self.max_parallel_requests {
            limits.max_parallel_requests = v;
        }
        if let Some(m) = self.metadata {
            // LiteLLM's key-level cache controls: refused here rather than ignored later.
            if let Some(c) = m.as_ref().and_then(|m| m.get("cache")) {
                CacheControl::from_metadata(c).map_err(|message| ApiError::InvalidParam {
                    param: "metadata.cache",
                    message,
                })?;
            }
            if let Some(m) = &m {
                // LiteLLM also takes the per-model limits inside `metadata`.
                per_model::read(m).map_err(per_model_error)?;
                crate::auth::addresses::from_metadata(m).map_err(|message| {
                    ApiError::InvalidParam {
                        param: "metadata.allowed_ips",
                        message,
                    }
                })?;
            }
            let mut new = m.unwrap_or_default();
            for (name, value) in &limits.metadata {
                if reserved(name) && !new.contains_key(name) {
                    new.insert(name.clone(), value.clone());
                }
            }
            limits.metadata = new;
        }
        for (name, value) in self.kept {
            check_kept(&name, &value)?;
            if value.is_null() {
                limits.metadata.remove(&name);
            } else {
                limits.metadata.insert(name, value);
            }
        }
        match self.object_permission {
            Some(Some(op)) => {
                check_object_permission(&op)?;
                limits
                    .metadata
                    .insert("object_permission".into(), Value::Object(op));
            }
            Some(None) => {
                limits.metadata.remove("object_permission");
            }
            None => {}
        }
        limits.schedule(now);
        Ok(())
    }
}

/// A `budget_duration` as sent (`"30d"`, or `null` for none): a new or removed one starts (or
/// ends) the budget window, so the next reset is scheduled afresh.
pub(super) fn set_duration(
    sent: Option<String>,
    duration: &mut Option<BudgetDuration>,
    reset_at: &mut Option<OffsetDateTime>,
) -> Result<(), ApiError> {
    let parsed = sent
        .map(|d| d.parse::<BudgetDuration>())
        .transpose()
        .map_err(|e| ApiError::InvalidParam {
            param: "budget_duration",
            message: e.to_string(),
        })?;
    if parsed != *duration {
        *duration = parsed;
        *reset_at = None;
    }
    Ok(())
}

/// The user a call names by `user_id` or, failing that, `user_email` (LiteLLM takes either);
/// 404 naming `what` when no user has the email.
pub(super) async fn user_named(
    store: &sluice_store::Store,
    user_id: Option<String>,
    user_email: Option<&str>,
    what: &'static str,
) -> Result<String, ApiError> {
    match (user_id, user_email) {
        (Some(id), _) => Ok(id),
        (None, Some(email)) => store
            .user_by_email(email)
            .await
            .map_err(super::store_error)?
            .map(|u| u.user_id)
            .ok_or_else(|| ApiError::NotFound {
                what,
                id: email.to_owned(),
            }),
        (None, None) => Err(ApiError::MissingParam("user_id")),
    }
}

/// The kept fields the gateway acts on, in the shape it reads: `aliases` and `model_aliases`
/// map a name a request may use to a model group, `guardrails` and `tags` are lists of names.
/// A wrong shape is a 400 naming the field, not an alias silently ignored.
fn check_kept(name: &str, value: &Value) -> Result<(), ApiError> {
    if value.is_null() {
        return Ok(());
    }
    if per_model::FIELDS.contains(&name) {
        return per_model::check(name, value).map_err(per_model_error);
    }
    let (param, ok, message): (&'static str, bool, &str) = match name {
        "aliases" => (
            "aliases",
            value
                .as_object()
                .is_some_and(|m| m.values().all(Value::is_string)),
            "must map each alias to the model group it names",
        ),
        "model_aliases" => (
            "model_aliases",
            value
                .as_object()
                .is_some_and(|m| m.values().all(Value::is_string)),
            "must map each alias to the model group it names",
        ),
        "guardrails" | "tags" => (
            if name == "tags" { "tags" } else { "guardrails" },
            value
                .as_array()
                .is_some_and(|a| a.iter().all(Value::is_string)),
            "must be a list of names",
        ),
        _ => return Ok(()),
    };
    if ok {
        Ok(())
    } else {
        Err(ApiError::InvalidParam {
            param,
            message: message.to_owned(),
        })
    }
}

/// A refused per-model field, as the admin API's 400.
fn per_model_error(e: per_model::BadModelLimit) -> ApiError {
    ApiError::InvalidParam {
        param: e.param,
        message: e.message,
    }
}

/// `object_permission`'s MCP members in the shapes the gateway reads: `mcp_servers` a list of
/// names, `mcp_tool_permissions` server → list of tools. A wrong shape is a 400, not a
/// permission silently ignored.
pub(super) fn check_object_permission(op: &Map<String, Value>) -> Result<(), ApiError> {
    let names = |v: &Value| v.as_array().is_some_and(|a| a.iter().all(Value::is_string));
    let bad = |message: &str| ApiError::InvalidParam {
        param: "object_permission",
        message: message.to_owned(),
    };
    if op
        .get("mcp_servers")
        .is_some_and(|v| !v.is_null() && !names(v))
    {
        return Err(bad("mcp_servers must be a list of MCP server names"));
    }
    if let Some(tools) = op.get("mcp_tool_permissions").filter(|v| !v.is_null()) {
        let ok = tools.as_object().is_some_and(|m| m.values().all(names));
        if !ok {
            return Err(bad(
                "mcp_tool_permissions must map each MCP server name to a list of tool names",
            ));
        }
    }
    Ok(())
}

/// The shared fields as the typed answers show them ([`Shown`], [`Accounting`]), written into
/// an answer still built as JSON (organizations'): a kept field named like a field already in
/// `out` is not shown beside it.
pub(super) fn limits_json(limits: &Limits, out: &mut Map<String, Value>) {
    let own: Vec<String> = out.keys().cloned().collect();
    let own: Vec<&str> = own.iter().map(String::as_str).collect();
    let shown = Shown::of(limits, &[&own]);
    out.insert("models".into(), Value::from(shown.models));
    out.insert("metadata".into(), Value::Object(shown.metadata));
    if let Ok(Value::Object(fields)) = serde_json::to_value(&shown.limits) {
        out.extend(fields);
    }
    out.extend(shown.kept);
}

/// `spend`, `created_at`, `updated_at`, as [`Accounting`] shows them.
pub(super) fn accounting_json(a: &sluice_store::Accounting, out: &mut Map<String, Value>) {
    if let Ok(Value::Object(fields)) = serde_json::to_value(Accounting::of(a)) {
        out.extend(fields);
    }
}
