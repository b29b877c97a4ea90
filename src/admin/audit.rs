//! The audit log of the management API (LiteLLM's audit logs): every change to a key, team,
//! user, end user, organization or budget, made through `/key/*`, `/team/*`, `/user/*`,
//! `/customer/*`, `/organization/*`, `/budget/*` or the console, is stored with who made it, the action, the object and its value before and after
//! — secrets masked before anything is written: a key's plaintext is never stored, only its
//! hash and `sk-…` with its last four characters. `GET /audit` reads it back.

use http::Method;
use serde_json::Value;
use time::OffsetDateTime;

use sluice_store::{AuditEntry, AuditFilter, KeyHash, Store};

use super::answers::audit::{AuditLog, AuditRow};
use super::{page, query_pairs, query_value, store_error, AdminRequest};
use sluice_core::error::ApiError;

/// What a change route does: the table it changes and the action.
pub(super) struct Change {
    table: &'static str,
    action: &'static str,
}

impl Change {
    /// A change of `table` by a route that names its object itself (the model API).
    pub(super) fn new(table: &'static str, action: &'static str) -> Self {
        Self { table, action }
    }
}

/// The change a `POST` to `path` (already normalised: no `/v1`, `/customer/` for end users)
/// makes; `None` for routes that change nothing audited.
pub(super) fn change_of(path: &str) -> Option<Change> {
    let (table, verb) = path.strip_prefix('/')?.split_once('/')?;
    let table = match table {
        "key" => "keys",
        "team" => "teams",
        "user" => "users",
        "customer" => "end_users",
        "organization" => "organizations",
        "budget" => "budgets",
        "tag" => "tags",
        _ => return None,
    };
    let action = match verb {
        "generate" | "new" => "created",
        "update" | "member_add" | "member_update" | "member_delete" => "updated",
        "delete" => "deleted",
        "block" => "blocked",
        "unblock" => "unblocked",
        "regenerate" => "regenerated",
        // `/key/{key}/regenerate`
        v if v.ends_with("/regenerate") => "regenerated",
        _ => return None,
    };
    Some(Change { table, action })
}

/// A key as the log names it: its hash, never the plaintext.
fn key_id(given: &str) -> String {
    if given.starts_with("sk-") {
        KeyHash::of(given).as_str().to_owned()
    } else {
        given.to_owned()
    }
}

impl Change {
    /// The objects the call names: from the body, or (for a creation) from the answer.
    pub(super) fn objects(&self, path: &str, body: &Value, answer: Option<&Value>) -> Vec<String> {
        let (one, many) = match self.table {
            "keys" => ("key", "keys"),
            "teams" => ("team_id", "team_ids"),
            "organizations" => ("organization_id", "organization_ids"),
            // `/budget/delete` names its budget as `id`.
            "budgets" if body.get("id").is_some() => ("id", "budgets"),
            "budgets" => ("budget_id", "budgets"),
            "tags" => ("name", "names"),
            _ => ("user_id", "user_ids"),
        };
        if let Some(named) = path
            .strip_prefix("/key/")
            .and_then(|r| r.strip_suffix("/regenerate"))
        {
            return vec![key_id(named)];
        }
        let mut ids: Vec<String> = body
            .get(one)
            .and_then(Value::as_str)
            .into_iter()
            .chain(
                body.get(many)
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str),
            )
            .map(|s| {
                if self.table == "keys" {
                    key_id(s)
                } else {
                    s.to_owned()
                }
            })
            .collect();
        if ids.is_empty() {
            if let Some(a) = answer {
                let field = match self.table {
                    "keys" => "token",
                    "budgets" => "budget_id",
                    _ => one,
                };
                ids.extend(a.get(field).and_then(Value::as_str).map(str::to_owned));
            }
        }
        ids
    }

    /// The info route that reads an object's value before the change.
    pub(super) fn info(&self, id: &str) -> (&'static str, String) {
        let (path, param) = match self.table {
            "keys" => ("/key/info", "key"),
            "teams" => ("/team/info", "team_id"),
            "users" => ("/user/info", "user_id"),
            "organizations" => ("/organization/info", "organization_id"),
            _ => ("/customer/info", "end_user_id"),
        };
        let q = form_urlencoded::Serializer::new(String::new())
            .append_pair(param, id)
            .finish();
        (path, q)
    }

    /// Whether the object's value before the change is worth reading (it exists).
    pub(super) fn has_before(&self) -> bool {
        // A budget and a tag have no GET info route to read them by.
        self.action != "created" && !matches!(self.table, "budgets" | "tags")
    }

    /// The rows to write for one call.
    pub(super) fn entries(
        &self,
        by: &str,
        objects: &[(String, Option<Value>)],
        answer: &Value,
    ) -> Vec<AuditEntry> {
        let now = OffsetDateTime::now_utc();
        let mut after = answer.clone();
        mask(&mut after);
        objects
            .iter()
            .map(|(id, before)| AuditEntry {
                id: sluice_core::random::uuid_v4().to_string(),
                changed_at: now,
                changed_by: by.to_owned(),
                action: self.action.to_owned(),
                table_name: self.table.to_owned(),
                object_id: id.clone(),
                before_value: before.clone().map(|mut b| {
                    mask(&mut b);
                    b
                }),
                updated_values: (self.action != "deleted").then(|| after.clone()),
            })
            .collect()
    }
}

/// Names whose values are secrets whatever they hold.
const SECRET_FIELDS: [&str; 5] = [
    "password",
    "password_hash",
    "api_key",
    "master_key",
    "secret",
];

/// Mask every secret in `v`: a key's plaintext (`sk-…`) keeps its last four characters, a
/// password or upstream key becomes `***`.
pub(super) fn mask(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, val) in m.iter_mut() {
                if SECRET_FIELDS.contains(&k.as_str()) && !val.is_null() {
                    *val = Value::from("***");
                } else {
                    mask(val);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(mask),
        Value::String(s) if s.starts_with("sk-") => {
            *s = sluice_store::keys::abbreviate(s);
        }
        _ => {}
    }
}

/// `GET /audit`: changes, newest first, filtered by `table_name`, `object_id`, `changed_by`,
/// `action`; paged by `page` and `page_size` (LiteLLM's shape: `audit_logs` with `total` of
/// the page, `page`, `page_size`).
pub(crate) async fn list(store: &Store, req: AdminRequest<'_>) -> Result<AuditLog, ApiError> {
    let q = query_pairs(
        &req,
        &[
            "table_name",
            "object_id",
            "changed_by",
            "action",
            "page",
            "page_size",
        ],
    )?;
    let (number, page) = page(&q, "page_size")?;
    let own = |k: &str| query_value(&q, k).map(str::to_owned);
    let filter = AuditFilter {
        table_name: own("table_name"),
        object_id: own("object_id"),
        changed_by: own("changed_by"),
        action: own("action"),
        page,
    };
    let rows = store.audit_log(&filter).await.map_err(store_error)?;
    Ok(AuditLog {
        total: rows.len() as u64,
        audit_logs: rows.iter().map(AuditRow::of).collect(),
        page: number,
        page_size: page.limit,
    })
}

/// Record the change `path` made: the objects' values before (read by `read_before` ahead of
/// it), the answer after. A failure to write the log is logged, never the caller's error: the
/// change itself has happened.
pub(super) async fn record(
    store: &Store,
    by: &str,
    change: &Change,
    before: Vec<(String, Option<Value>)>,
    answer: &Value,
) {
    for e in change.entries(by, &before, answer) {
        if let Err(err) = store.add_audit(&e).await {
            tracing::warn!(error = %err, "audit log write failed");
        }
    }
}

/// The objects a change names and their values now, before it runs.
pub(super) async fn read_before(
    store: &Store,
    change: &Change,
    path: &str,
    body: &[u8],
) -> Vec<(String, Option<Value>)> {
    let parsed: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let mut out = Vec::new();
    for id in change.objects(path, &parsed, None) {
        let before = if change.has_before() {
            let (info, q) = change.info(&id);
            match super::handle(store, &Method::GET, info, &q, b"").await {
                Some(Ok(v)) => Some(v),
                _ => None,
            }
        } else {
            None
        };
        out.push((id, before));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn routes_tables_actions_and_objects() {
        let c = change_of("/key/update").unwrap();
        assert_eq!((c.table, c.action), ("keys", "updated"));
        let ids = c.objects("/key/update", &json!({"key": "sk-abcdef123456"}), None);
        assert_eq!(
            ids,
            vec![KeyHash::of("sk-abcdef123456").as_str().to_owned()]
        );
        let c = change_of("/team/delete").unwrap();
        assert_eq!(
            c.objects("/team/delete", &json!({"team_ids": ["a", "b"]}), None),
            ["a", "b"]
        );
        let c = change_of("/user/new").unwrap();
        assert_eq!(
            c.objects("/user/new", &json!({}), Some(&json!({"user_id": "u1"}))),
            ["u1"]
        );
        let c = change_of("/key/sk-zzzz9999/regenerate").unwrap();
        assert_eq!(c.action, "regenerated");
        assert!(change_of("/key/info").is_none());
        assert!(change_of("/spend/logs").is_none());
        let c = change_of("/organization/delete").unwrap();
        assert_eq!((c.table, c.action), ("organizations", "deleted"));
        assert_eq!(
            c.objects(
                "/organization/delete",
                &json!({"organization_ids": ["o"]}),
                None
            ),
            ["o"]
        );
        let c = change_of("/budget/delete").unwrap();
        assert_eq!(
            c.objects("/budget/delete", &json!({"id": "b"}), None),
            ["b"]
        );
        assert!(!c.has_before());
        let c = change_of("/budget/new").unwrap();
        let answer = json!({"budget_id": "made"});
        assert_eq!(
            c.objects("/budget/new", &json!({}), Some(&answer)),
            ["made"]
        );
        assert!(change_of("/organization/info").is_none());
    }

    #[test]
    fn secrets_are_masked_wherever_they_are() {
        let mut v = json!({
            "key": "sk-verysecretvalue1234",
            "info": {"metadata": {"note": "sk-anothersecret9876"}, "password": "hunter22"},
            "token": "ab12",
            "list": [{"api_key": "upstream"}]
        });
        mask(&mut v);
        let text = v.to_string();
        assert!(!text.contains("verysecret") && !text.contains("anothersecret"));
        assert!(!text.contains("hunter22") && !text.contains("upstream"));
        assert!(text.contains("1234"), "the key's tail stays: {text}");
        assert_eq!(v["token"], "ab12");
    }
}
