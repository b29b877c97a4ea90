//! `GET /audit`'s answer: the audit log's rows, LiteLLM's shape.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::iso;
use sluice_store::AuditEntry;

/// One page of the audit log, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct AuditLog {
    /// The page's rows.
    pub audit_logs: Vec<AuditRow>,
    /// Rows on this page (LiteLLM's `total`).
    pub total: u64,
    /// This page's number, from 1.
    pub page: u64,
    /// Rows a page.
    pub page_size: u64,
}

/// One change, secrets already masked when it was written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct AuditRow {
    /// The row's id.
    pub id: String,
    /// When the change was made (ISO 8601).
    pub updated_at: Option<String>,
    /// Who made it.
    pub changed_by: String,
    /// `created`, `updated`, `deleted`, `blocked`, `unblocked`, `regenerated`.
    pub action: String,
    /// `keys`, `teams`, `users`, `end_users`, ...
    pub table_name: String,
    /// The object's id (a key's hash).
    pub object_id: String,
    /// The object before the change, as its info route answered (free-form); none for a
    /// creation.
    pub before_value: Option<Value>,
    /// What the change answered (free-form); none for a deletion.
    pub updated_values: Option<Value>,
}

impl AuditRow {
    /// The stored row as shown.
    pub(crate) fn of(e: &AuditEntry) -> Self {
        Self {
            id: e.id.clone(),
            updated_at: iso(e.changed_at),
            changed_by: e.changed_by.clone(),
            action: e.action.clone(),
            table_name: e.table_name.clone(),
            object_id: e.object_id.clone(),
            before_value: e.before_value.clone(),
            updated_values: e.updated_values.clone(),
        }
    }
}
