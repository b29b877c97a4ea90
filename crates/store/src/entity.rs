//! What keys, teams and users have in common: the same budget and limit columns, the same
//! spend counter and timestamps, and the same create/read/update/delete/list/reset code, written
//! once over the [`Entity`] trait instead of three times.

use sqlx::any::{AnyArguments, AnyRow};
use sqlx::query::Query;
use sqlx::Any;
use time::OffsetDateTime;

use super::{col, from_ms, json_col, time_col, to_json, to_ms, BudgetDuration, Store, StoreError};

pub(crate) type AnyQuery<'q> = Query<'q, Any, AnyArguments<'q>>;

/// Budget and rate limits, with LiteLLM's field names. `None` means "no limit of this kind".
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Limits {
    /// Model groups this holder may call; empty means all.
    pub models: Vec<String>,
    /// Spend cap in USD for the current budget window (or for ever without a duration).
    pub max_budget: Option<f64>,
    /// How often `spend` starts again from zero.
    pub budget_duration: Option<BudgetDuration>,
    /// When the current window ends; set from `budget_duration` at creation.
    pub budget_reset_at: Option<OffsetDateTime>,
    /// Requests per minute.
    pub rpm_limit: Option<u64>,
    /// Tokens per minute.
    pub tpm_limit: Option<u64>,
    /// Requests in flight at once.
    pub max_parallel_requests: Option<u64>,
    /// Free-form JSON object the caller attached.
    pub metadata: serde_json::Map<String, serde_json::Value>,
    /// The budget object (`/budget/new`) these limits are a copy of: `/budget/update`
    /// rewrites them for every holder that names it.
    pub budget_id: Option<String>,
}

impl Limits {
    /// Starts the budget window at `now` if there is a duration and no window yet (and drops
    /// the window when the duration is removed), so a row is never half-scheduled.
    pub fn schedule(&mut self, now: OffsetDateTime) {
        match self.budget_duration {
            Some(d) if self.budget_reset_at.is_none() => {
                self.budget_reset_at = d.next_reset(now, now);
            }
            Some(_) => {}
            None => self.budget_reset_at = None,
        }
    }

    const COLUMNS: [&'static str; 9] = [
        "models",
        "max_budget",
        "budget_duration",
        "budget_reset_at",
        "rpm_limit",
        "tpm_limit",
        "max_parallel_requests",
        "metadata",
        "budget_id",
    ];

    fn bind<'q>(&self, q: AnyQuery<'q>) -> AnyQuery<'q> {
        q.bind(to_json(&self.models))
            .bind(self.max_budget)
            .bind(self.budget_duration.map(|d| d.to_string()))
            .bind(self.budget_reset_at.map(to_ms))
            .bind(self.rpm_limit.map(to_i64))
            .bind(self.tpm_limit.map(to_i64))
            .bind(self.max_parallel_requests.map(to_i64))
            .bind(to_json(&self.metadata))
            .bind(self.budget_id.clone())
    }

    pub(crate) fn decode(row: &AnyRow) -> Result<Self, StoreError> {
        let duration: Option<String> = col(row, "budget_duration")?;
        Ok(Self {
            models: json_col(row, "models")?,
            max_budget: col(row, "max_budget")?,
            budget_duration: duration.map(|d| d.parse()).transpose().map_err(
                |e: super::budget::BadDuration| StoreError::Corrupt {
                    column: "budget_duration",
                    why: e.to_string(),
                },
            )?,
            budget_reset_at: time_col(row, "budget_reset_at")?,
            rpm_limit: opt_u64(row, "rpm_limit")?,
            tpm_limit: opt_u64(row, "tpm_limit")?,
            max_parallel_requests: opt_u64(row, "max_parallel_requests")?,
            metadata: json_col(row, "metadata")?,
            budget_id: col(row, "budget_id")?,
        })
    }
}

/// A holder's name in `deleted_holders`.
pub(crate) fn kind_name(kind: sluice_core::limits::SubjectKind) -> &'static str {
    use sluice_core::limits::SubjectKind as K;
    match kind {
        K::Key => "key",
        K::Team => "team",
        K::User => "user",
        K::EndUser => "end_user",
        K::Organization => "organization",
        K::Tag => "tag",
    }
}

/// The holder kind a `deleted_holders` row names, if any.
pub(crate) fn kind_named(name: &str) -> Option<sluice_core::limits::SubjectKind> {
    use sluice_core::limits::SubjectKind as K;
    [
        K::Key,
        K::Team,
        K::User,
        K::EndUser,
        K::Organization,
        K::Tag,
    ]
    .into_iter()
    .find(|k| kind_name(*k) == name)
}

/// Records that holder `id` of `kind` was deleted at `now`, so that every instance's directory
/// drops it (`Changes::deleted_holders`).
pub(crate) async fn tombstone(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    kind: sluice_core::limits::SubjectKind,
    id: &str,
    now: OffsetDateTime,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO deleted_holders (kind, id, deleted_at) VALUES ($1, $2, $3) \
         ON CONFLICT (kind, id) DO UPDATE SET deleted_at = excluded.deleted_at",
    )
    .bind(kind_name(kind))
    .bind(id.to_owned())
    .bind(to_ms(now))
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Counts are `u64` in Rust and `BIGINT` in the database; values past `i64::MAX` saturate.
pub(crate) fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// An optional non-negative count column.
pub(crate) fn opt_u64(row: &AnyRow, column: &'static str) -> Result<Option<u64>, StoreError> {
    Ok(col::<Option<i64>>(row, column)?.map(|n| u64::try_from(n).unwrap_or(0)))
}

/// Spend and timestamps every entity carries.
#[derive(Debug, Clone, PartialEq)]
pub struct Accounting {
    /// USD spent in the current budget window.
    pub spend: f64,
    /// When the row was created.
    pub created_at: OffsetDateTime,
    /// When it was last changed by an admin call or a budget reset (spend updates do not
    /// count: they are too frequent to poll for).
    pub updated_at: OffsetDateTime,
}

impl Accounting {
    /// A fresh row created at `now`.
    pub fn new(now: OffsetDateTime) -> Self {
        Self {
            spend: 0.0,
            created_at: now,
            updated_at: now,
        }
    }

    fn decode(row: &AnyRow) -> Result<Self, StoreError> {
        Ok(Self {
            spend: col(row, "spend")?,
            created_at: from_ms("created_at", col(row, "created_at")?)?,
            updated_at: from_ms("updated_at", col(row, "updated_at")?)?,
        })
    }
}

/// How a holder's recorded spend changes.
#[derive(Debug, Clone, Copy)]
enum SpendChange {
    /// To this figure.
    Set(f64),
    /// By this much (not below zero).
    Add(f64),
}

/// Which slice of a list to return.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    /// Rows to skip.
    pub offset: u64,
    /// Rows to return at most.
    pub limit: u64,
}

impl Default for Page {
    fn default() -> Self {
        Self {
            offset: 0,
            limit: 100,
        }
    }
}

/// A table of budget holders (keys, teams, users).
pub(crate) trait Entity: Sized {
    /// Table name.
    const TABLE: &'static str;
    /// Primary-key column.
    const ID: &'static str;
    /// What it is, for `NotFound`/`Conflict` messages.
    const WHAT: &'static str;
    /// Which holder it is to the limiter (and in `deleted_holders`).
    const KIND: sluice_core::limits::SubjectKind;
    /// The entity's own columns, in the order `bind_own` binds them.
    const OWN: &'static [&'static str];

    fn id(&self) -> &str;
    fn limits(&self) -> &Limits;
    fn accounting(&self) -> &Accounting;
    fn bind_own<'q>(&self, q: AnyQuery<'q>) -> AnyQuery<'q>;
    /// Builds the row from its own columns plus the shared parts.
    fn decode(row: &AnyRow, limits: Limits, accounting: Accounting) -> Result<Self, StoreError>;
}

fn columns<E: Entity>() -> impl Iterator<Item = &'static str> {
    E::OWN.iter().copied().chain(Limits::COLUMNS)
}

pub(crate) fn decode<E: Entity>(row: &AnyRow) -> Result<E, StoreError> {
    E::decode(row, Limits::decode(row)?, Accounting::decode(row)?)
}

impl Store {
    pub(crate) async fn insert<E: Entity>(&self, e: &E) -> Result<(), StoreError> {
        let cols: Vec<&str> = std::iter::once(E::ID)
            .chain(columns::<E>())
            .chain(["spend", "created_at", "updated_at"])
            .collect();
        let params: Vec<String> = (1..=cols.len()).map(|i| format!("${i}")).collect();
        let sql = format!(
            "INSERT INTO {} ({}) VALUES ({})",
            E::TABLE,
            cols.join(", "),
            params.join(", ")
        );
        let a = e.accounting();
        let q = e
            .limits()
            .bind(e.bind_own(sqlx::query(&sql).bind(e.id().to_owned())));
        q.bind(a.spend)
            .bind(to_ms(a.created_at))
            .bind(to_ms(a.updated_at))
            .execute(self.pool())
            .await
            .map_err(StoreError::on_write(E::WHAT))?;
        Ok(())
    }

    /// Writes every column but the id, `spend` and `created_at` (spend only moves through
    /// spend batches and budget resets, so an admin edit can never undo recorded spend).
    pub(crate) async fn update<E: Entity>(&self, e: &E) -> Result<(), StoreError> {
        let mut sets: Vec<String> = columns::<E>()
            .enumerate()
            .map(|(i, c)| format!("{c} = ${}", i + 1))
            .collect();
        let n = sets.len();
        sets.push(format!("updated_at = ${}", n + 1));
        let sql = format!(
            "UPDATE {} SET {} WHERE {} = ${}",
            E::TABLE,
            sets.join(", "),
            E::ID,
            n + 2
        );
        let q = e.limits().bind(e.bind_own(sqlx::query(&sql)));
        let done = q
            .bind(to_ms(e.accounting().updated_at))
            .bind(e.id().to_owned())
            .execute(self.pool())
            .await
            .map_err(StoreError::on_write(E::WHAT))?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound(E::WHAT));
        }
        Ok(())
    }

    pub(crate) async fn get<E: Entity>(&self, id: &str) -> Result<Option<E>, StoreError> {
        let sql = format!("SELECT * FROM {} WHERE {} = $1", E::TABLE, E::ID);
        let row = sqlx::query(&sql)
            .bind(id.to_owned())
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(decode).transpose()
    }

    /// Deletes a holder's row and leaves its tombstone, in one transaction.
    pub(crate) async fn delete<E: Entity>(&self, id: &str) -> Result<(), StoreError> {
        let mut tx = self.pool().begin().await?;
        let sql = format!("DELETE FROM {} WHERE {} = $1", E::TABLE, E::ID);
        let done = sqlx::query(&sql)
            .bind(id.to_owned())
            .execute(&mut *tx)
            .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound(E::WHAT));
        }
        tombstone(&mut tx, E::KIND, id, OffsetDateTime::now_utc()).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Rows in id order, optionally only those whose `column` equals `value`.
    pub(crate) async fn list<E: Entity>(
        &self,
        filter: Option<(&'static str, &str)>,
        page: Page,
    ) -> Result<Vec<E>, StoreError> {
        let (cond, value) = match filter {
            Some((c, v)) => (format!("WHERE {c} = $3"), Some(v.to_owned())),
            None => (String::new(), None),
        };
        let sql = format!(
            "SELECT * FROM {} {cond} ORDER BY {} LIMIT $1 OFFSET $2",
            E::TABLE,
            E::ID
        );
        let mut q = sqlx::query(&sql)
            .bind(to_i64(page.limit))
            .bind(to_i64(page.offset));
        if let Some(v) = value {
            q = q.bind(v);
        }
        q.fetch_all(self.pool()).await?.iter().map(decode).collect()
    }

    /// How many rows there are, optionally only those whose `column` equals `value`.
    pub(crate) async fn count<E: Entity>(
        &self,
        filter: Option<(&'static str, &str)>,
    ) -> Result<u64, StoreError> {
        let cond = if let Some((c, _)) = filter {
            format!("WHERE {c} = $1")
        } else {
            String::new()
        };
        let sql = format!("SELECT COUNT(*) AS n FROM {} {cond}", E::TABLE);
        let mut q = sqlx::query(&sql);
        if let Some((_, v)) = filter {
            q = q.bind(v.to_owned());
        }
        let row = q.fetch_one(self.pool()).await?;
        Ok(u64::try_from(col::<i64>(&row, "n")?).unwrap_or(0))
    }

    /// Sets or moves one holder's recorded spend (never below zero), moving `updated_at` so
    /// every key directory reloads it. `NotFound` when there is no such row.
    async fn change_spend_of<E: Entity>(
        &self,
        id: &str,
        change: SpendChange,
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        let (set, value) = match change {
            SpendChange::Set(v) => ("$1", v),
            SpendChange::Add(v) => ("CASE WHEN spend + $1 < 0 THEN 0 ELSE spend + $1 END", v),
        };
        let sql = format!(
            "UPDATE {} SET spend = {set}, updated_at = $2 WHERE {} = $3",
            E::TABLE,
            E::ID
        );
        let done = sqlx::query(&sql)
            .bind(value)
            .bind(to_ms(now))
            .bind(id.to_owned())
            .execute(self.pool())
            .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound(E::WHAT));
        }
        Ok(())
    }

    async fn change_spend(
        &self,
        kind: sluice_core::limits::SubjectKind,
        id: &str,
        change: SpendChange,
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        use sluice_core::limits::SubjectKind as K;
        match kind {
            K::Key => self.change_spend_of::<super::KeyRow>(id, change, now).await,
            K::Team => {
                self.change_spend_of::<super::TeamRow>(id, change, now)
                    .await
            }
            K::User => {
                self.change_spend_of::<super::UserRow>(id, change, now)
                    .await
            }
            K::EndUser => {
                self.change_spend_of::<super::EndUserRow>(id, change, now)
                    .await
            }
            K::Organization => {
                self.change_spend_of::<super::OrganizationRow>(id, change, now)
                    .await
            }
            K::Tag => self.change_spend_of::<super::TagRow>(id, change, now).await,
        }
    }

    /// Sets a key's, team's, user's or end user's recorded spend: LiteLLM's `spend` on
    /// `/key/update` and `/user/update`, which its clients use to start a budget over. A key
    /// is named by its hash.
    pub async fn set_spend(
        &self,
        kind: sluice_core::limits::SubjectKind,
        id: &str,
        spend: f64,
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        self.change_spend(kind, id, SpendChange::Set(spend), now)
            .await
    }

    /// Adds `delta` (which may be negative: an import's source restarted a budget) to a
    /// holder's recorded spend, never below zero.
    pub async fn add_spend(
        &self,
        kind: sluice_core::limits::SubjectKind,
        id: &str,
        delta: f64,
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        self.change_spend(kind, id, SpendChange::Add(delta), now)
            .await
    }

    /// Starts a new budget window for every row whose window ended by `now`: spend back to
    /// zero and the next reset scheduled from the old one (no drift). Each row is reset only
    /// if its window is still the one read, so two instances running this at once reset it
    /// once. `updated_at` moves too, so the auth cache sees the fresh window. Returns how many
    /// rows were reset.
    pub(crate) async fn reset_due<E: Entity>(
        &self,
        now: OffsetDateTime,
    ) -> Result<u64, StoreError> {
        let sql = format!(
            "SELECT {}, budget_duration, budget_reset_at FROM {} \
             WHERE budget_reset_at IS NOT NULL AND budget_reset_at <= $1",
            E::ID,
            E::TABLE
        );
        let due = sqlx::query(&sql)
            .bind(to_ms(now))
            .fetch_all(self.pool())
            .await?;
        let update = format!(
            "UPDATE {} SET spend = 0, budget_reset_at = $1, updated_at = $4 \
             WHERE {} = $2 AND budget_reset_at = $3",
            E::TABLE,
            E::ID
        );
        let mut reset = 0;
        for row in &due {
            let id: String = col(row, E::ID)?;
            let old: i64 = col(row, "budget_reset_at")?;
            let duration: Option<BudgetDuration> =
                col::<Option<String>>(row, "budget_duration")?.and_then(|d| d.parse().ok());
            let next =
                duration.and_then(|d| d.next_reset(from_ms("budget_reset_at", old).ok()?, now));
            let done = sqlx::query(&update)
                .bind(next.map(to_ms))
                .bind(id)
                .bind(old)
                .bind(to_ms(now))
                .execute(self.pool())
                .await?;
            reset += done.rows_affected();
        }
        Ok(reset)
    }
}
