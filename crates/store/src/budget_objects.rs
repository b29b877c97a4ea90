//! Budgets as objects (LiteLLM's `LiteLLM_BudgetTable`, `/budget/*`): a named set of limits
//! that keys, teams, end users and organizations point at with `budget_id`. A holder that names
//! a budget keeps a copy of its limits in its own columns ([`BudgetRow::copy_into`]), and
//! [`Store::update_budget`] rewrites that copy in every table at once, so enforcement and the
//! budget-reset job go on reading one row per holder, exactly as for limits set directly.

use serde_json::{Map, Value};
use sqlx::any::AnyRow;
use time::OffsetDateTime;

use super::entity::{opt_u64, to_i64};
use super::{col, from_ms, json_col, time_col, to_json, to_ms, BudgetDuration, Limits};
use super::{Page, Store, StoreError};

/// The tables whose rows may name a budget (every budget holder).
const HOLDERS: [&str; 6] = [
    "keys",
    "teams",
    "users",
    "end_users",
    "organizations",
    "tags",
];

/// One budget.
#[derive(Debug, Clone, PartialEq)]
pub struct BudgetRow {
    /// Caller-chosen or generated id.
    pub budget_id: String,
    /// Spend cap in USD per window (requests are refused past it).
    pub max_budget: Option<f64>,
    /// A spend level that only warns (LiteLLM alerts on it; sluice shows it).
    pub soft_budget: Option<f64>,
    /// Requests in flight at once.
    pub max_parallel_requests: Option<u64>,
    /// Tokens per minute.
    pub tpm_limit: Option<u64>,
    /// Requests per minute.
    pub rpm_limit: Option<u64>,
    /// How often spend starts again from zero.
    pub budget_duration: Option<BudgetDuration>,
    /// When the budget's window ends (holders keep their own window, started when they took
    /// the budget).
    pub budget_reset_at: Option<OffsetDateTime>,
    /// LiteLLM's per-model budgets, kept as given.
    pub model_max_budget: Option<Map<String, Value>>,
    /// When it was created.
    pub created_at: OffsetDateTime,
    /// When it was last changed.
    pub updated_at: OffsetDateTime,
}

impl BudgetRow {
    /// An empty budget (no limit of any kind) created at `now`.
    pub fn new(budget_id: String, now: OffsetDateTime) -> Self {
        Self {
            budget_id,
            max_budget: None,
            soft_budget: None,
            max_parallel_requests: None,
            tpm_limit: None,
            rpm_limit: None,
            budget_duration: None,
            budget_reset_at: None,
            model_max_budget: None,
            created_at: now,
            updated_at: now,
        }
    }

    /// Starts the window at `now` when there is a duration and no window (and drops it with
    /// the duration), as [`Limits::schedule`] does for a holder.
    pub fn schedule(&mut self, now: OffsetDateTime) {
        match self.budget_duration {
            Some(d) if self.budget_reset_at.is_none() => {
                self.budget_reset_at = d.next_reset(now, now);
            }
            Some(_) => {}
            None => self.budget_reset_at = None,
        }
    }

    /// The window's end as of `now`: a stored end that has passed is moved on by whole
    /// windows (holders reset on their own; the budget row only shows when).
    pub fn reset_at(&self, now: OffsetDateTime) -> Option<OffsetDateTime> {
        match (self.budget_reset_at, self.budget_duration) {
            (Some(at), Some(d)) if at <= now => d.next_reset(at, now),
            (at, _) => at,
        }
    }

    /// Make `limits` a copy of this budget's and name it. A changed duration restarts the
    /// holder's window at `now`.
    pub fn copy_into(&self, limits: &mut Limits, now: OffsetDateTime) {
        limits.budget_id = Some(self.budget_id.clone());
        limits.max_budget = self.max_budget;
        limits.rpm_limit = self.rpm_limit;
        limits.tpm_limit = self.tpm_limit;
        limits.max_parallel_requests = self.max_parallel_requests;
        if limits.budget_duration != self.budget_duration {
            limits.budget_duration = self.budget_duration;
            limits.budget_reset_at = None;
        }
        limits.schedule(now);
    }

    fn decode(row: &AnyRow) -> Result<Self, StoreError> {
        let duration: Option<String> = col(row, "budget_duration")?;
        let model_max_budget: Option<String> = col(row, "model_max_budget")?;
        Ok(Self {
            budget_id: col(row, "budget_id")?,
            max_budget: col(row, "max_budget")?,
            soft_budget: col(row, "soft_budget")?,
            max_parallel_requests: opt_u64(row, "max_parallel_requests")?,
            tpm_limit: opt_u64(row, "tpm_limit")?,
            rpm_limit: opt_u64(row, "rpm_limit")?,
            budget_duration: duration.map(|d| d.parse()).transpose().map_err(
                |e: super::budget::BadDuration| StoreError::Corrupt {
                    column: "budget_duration",
                    why: e.to_string(),
                },
            )?,
            budget_reset_at: time_col(row, "budget_reset_at")?,
            model_max_budget: match model_max_budget {
                Some(_) => json_col(row, "model_max_budget")?,
                None => None,
            },
            created_at: from_ms("created_at", col(row, "created_at")?)?,
            updated_at: from_ms("updated_at", col(row, "updated_at")?)?,
        })
    }
}

impl Store {
    /// Stores a new budget. `Conflict` if the id is taken.
    pub async fn create_budget(&self, b: &BudgetRow) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO budgets (budget_id, max_budget, soft_budget, max_parallel_requests, \
             tpm_limit, rpm_limit, budget_duration, budget_reset_at, model_max_budget, \
             created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
        )
        .bind(b.budget_id.clone())
        .bind(b.max_budget)
        .bind(b.soft_budget)
        .bind(b.max_parallel_requests.map(to_i64))
        .bind(b.tpm_limit.map(to_i64))
        .bind(b.rpm_limit.map(to_i64))
        .bind(b.budget_duration.map(|d| d.to_string()))
        .bind(b.budget_reset_at.map(to_ms))
        .bind(b.model_max_budget.as_ref().map(to_json))
        .bind(to_ms(b.created_at))
        .bind(to_ms(b.updated_at))
        .execute(self.pool())
        .await
        .map_err(StoreError::on_write("budget"))?;
        Ok(())
    }

    /// The budget with this id, if any.
    pub async fn budget(&self, budget_id: &str) -> Result<Option<BudgetRow>, StoreError> {
        let row = sqlx::query("SELECT * FROM budgets WHERE budget_id = $1")
            .bind(budget_id.to_owned())
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(BudgetRow::decode).transpose()
    }

    /// Budgets, in id order.
    pub async fn list_budgets(&self, page: Page) -> Result<Vec<BudgetRow>, StoreError> {
        sqlx::query("SELECT * FROM budgets ORDER BY budget_id LIMIT $1 OFFSET $2")
            .bind(to_i64(page.limit))
            .bind(to_i64(page.offset))
            .fetch_all(self.pool())
            .await?
            .iter()
            .map(BudgetRow::decode)
            .collect()
    }

    /// Saves an edited budget and rewrites the copy of its limits in every holder that names
    /// it (in one transaction); a holder whose duration changes starts a new window at `now`.
    /// `updated_at` moves on those rows, so every instance's key directory picks them up.
    /// Returns how many holders changed.
    pub async fn update_budget(
        &self,
        b: &BudgetRow,
        now: OffsetDateTime,
    ) -> Result<u64, StoreError> {
        let mut tx = self.pool().begin().await?;
        let done = sqlx::query(
            "UPDATE budgets SET max_budget = $1, soft_budget = $2, max_parallel_requests = $3, \
             tpm_limit = $4, rpm_limit = $5, budget_duration = $6, budget_reset_at = $7, \
             model_max_budget = $8, updated_at = $9 WHERE budget_id = $10",
        )
        .bind(b.max_budget)
        .bind(b.soft_budget)
        .bind(b.max_parallel_requests.map(to_i64))
        .bind(b.tpm_limit.map(to_i64))
        .bind(b.rpm_limit.map(to_i64))
        .bind(b.budget_duration.map(|d| d.to_string()))
        .bind(b.budget_reset_at.map(to_ms))
        .bind(b.model_max_budget.as_ref().map(to_json))
        .bind(to_ms(b.updated_at))
        .bind(b.budget_id.clone())
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound("budget"));
        }
        let duration = b.budget_duration.map(|d| d.to_string());
        let new_window = b.budget_duration.and_then(|d| d.next_reset(now, now));
        let mut holders = 0;
        for table in HOLDERS {
            // The CASE reads the row's old duration: an unchanged one keeps its window.
            let sql = format!(
                "UPDATE {table} SET max_budget = $1, rpm_limit = $2, tpm_limit = $3, \
                 max_parallel_requests = $4, \
                 budget_reset_at = CASE WHEN COALESCE(budget_duration, '') = COALESCE($5, '') \
                 THEN budget_reset_at ELSE $6 END, \
                 budget_duration = $5, updated_at = $7 WHERE budget_id = $8"
            );
            holders += sqlx::query(&sql)
                .bind(b.max_budget)
                .bind(b.rpm_limit.map(to_i64))
                .bind(b.tpm_limit.map(to_i64))
                .bind(b.max_parallel_requests.map(to_i64))
                .bind(duration.clone())
                .bind(new_window.map(to_ms))
                .bind(to_ms(now))
                .bind(b.budget_id.clone())
                .execute(&mut *tx)
                .await?
                .rows_affected();
        }
        tx.commit().await?;
        Ok(holders)
    }

    /// The tables with a row that names `budget_id`, in [`HOLDERS`] order.
    pub async fn budget_users(&self, budget_id: &str) -> Result<Vec<&'static str>, StoreError> {
        let mut out = Vec::new();
        for table in HOLDERS {
            let sql = format!("SELECT COUNT(*) AS n FROM {table} WHERE budget_id = $1");
            let row = sqlx::query(&sql)
                .bind(budget_id.to_owned())
                .fetch_one(self.pool())
                .await?;
            if col::<i64>(&row, "n")? > 0 {
                out.push(table);
            }
        }
        Ok(out)
    }

    /// Removes a budget. The admin layer refuses while a holder names it.
    pub async fn delete_budget(&self, budget_id: &str) -> Result<(), StoreError> {
        let done = sqlx::query("DELETE FROM budgets WHERE budget_id = $1")
            .bind(budget_id.to_owned())
            .execute(self.pool())
            .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound("budget"));
        }
        Ok(())
    }
}
