//! The audit log: one row per change made through the management API or the console (LiteLLM's
//! `LiteLLM_AuditLog`): who made it, the action, the table and object, and the object's value
//! before and after, as JSON the caller has already masked.

use serde_json::Value;
use time::OffsetDateTime;

use super::{col, from_ms, to_json, to_ms, Page, Store, StoreError};

/// One change.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditEntry {
    /// Unique per row.
    pub id: String,
    /// When it was made.
    pub changed_at: OffsetDateTime,
    /// Who made it: `admin` for the master key (or the `litellm-changed-by` header's name), the
    /// console user otherwise.
    pub changed_by: String,
    /// `created`, `updated`, `deleted`, `blocked`, `unblocked`, `regenerated`.
    pub action: String,
    /// `keys`, `teams`, `users`, `end_users`.
    pub table_name: String,
    /// The object's id (a key's hash, never the key).
    pub object_id: String,
    /// Its value before the change (none for a creation).
    pub before_value: Option<Value>,
    /// What the change answered (none for a deletion).
    pub updated_values: Option<Value>,
}

/// Which rows [`Store::audit_log`] returns, newest first.
#[derive(Debug, Clone, Default)]
pub struct AuditFilter {
    /// Only this table.
    pub table_name: Option<String>,
    /// Only this object.
    pub object_id: Option<String>,
    /// Only this author.
    pub changed_by: Option<String>,
    /// Only this action.
    pub action: Option<String>,
    /// The slice.
    pub page: Page,
}

impl Store {
    /// Record one change.
    pub async fn add_audit(&self, e: &AuditEntry) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO audit_log (id, changed_at, changed_by, action, table_name, object_id, \
             before_value, updated_values) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(e.id.clone())
        .bind(to_ms(e.changed_at))
        .bind(e.changed_by.clone())
        .bind(e.action.clone())
        .bind(e.table_name.clone())
        .bind(e.object_id.clone())
        .bind(e.before_value.as_ref().map(to_json))
        .bind(e.updated_values.as_ref().map(to_json))
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// Changes, newest first.
    pub async fn audit_log(&self, f: &AuditFilter) -> Result<Vec<AuditEntry>, StoreError> {
        let mut conds = Vec::new();
        let mut values = Vec::new();
        for (column, value) in [
            ("table_name", &f.table_name),
            ("object_id", &f.object_id),
            ("changed_by", &f.changed_by),
            ("action", &f.action),
        ] {
            if let Some(v) = value {
                values.push(v.clone());
                conds.push(format!("{column} = ${}", values.len() + 2));
            }
        }
        let cond = if conds.is_empty() {
            String::new()
        } else {
            format!("WHERE {}", conds.join(" AND "))
        };
        let sql = format!(
            "SELECT * FROM audit_log {cond} ORDER BY changed_at DESC, id LIMIT $1 OFFSET $2"
        );
        let mut q = sqlx::query(&sql)
            .bind(i64::try_from(f.page.limit).unwrap_or(i64::MAX))
            .bind(i64::try_from(f.page.offset).unwrap_or(i64::MAX));
        for v in values {
            q = q.bind(v);
        }
        let json =
            |row: &sqlx::any::AnyRow, c: &'static str| -> Result<Option<Value>, StoreError> {
                col::<Option<String>>(row, c)?
                    .map(|t| {
                        serde_json::from_str(&t).map_err(|e| StoreError::Corrupt {
                            column: c,
                            why: e.to_string(),
                        })
                    })
                    .transpose()
            };
        q.fetch_all(self.pool())
            .await?
            .iter()
            .map(|row| {
                Ok(AuditEntry {
                    id: col(row, "id")?,
                    changed_at: from_ms("changed_at", col(row, "changed_at")?)?,
                    changed_by: col(row, "changed_by")?,
                    action: col(row, "action")?,
                    table_name: col(row, "table_name")?,
                    object_id: col(row, "object_id")?,
                    before_value: json(row, "before_value")?,
                    updated_values: json(row, "updated_values")?,
                })
            })
            .collect()
    }
}
