//! The spend log's days and how long they are kept (docs/store.md, "A spend store that stays
//! flat").
//!
//! On PostgreSQL `spend_logs` is partitioned by UTC day on `start_time` (migration 0017): one
//! table per day, `spend_logs_YYYYMMDD`. The writer's maintenance makes the next days' tables
//! ahead of time, and a batch that brings a day without one (an import's old rows, a spool
//! replayed after midnight) makes it first, outside the batch's transaction. Which days exist
//! is kept in memory ([`Partitions`]), so a batch whose days are known costs no catalog read;
//! a batch that fails forgets them, so a day another instance's retention dropped is made
//! again by the replay.
//!
//! Retention (`maximum_spend_logs_retention_period`) drops the days wholly past the cutoff, a
//! catalog change that takes the same time whatever the day holds and leaves no dead rows to
//! vacuum; rows older than the cutoff in a table that spans it (the `spend_logs_legacy`
//! partition migration 0017 made of the rows stored before it; the current day under a
//! retention shorter than a day) are deleted in batches. SQLite keeps one table and deletes in
//! batches by its `(start_time, id)` index.
//!
//! Schema changes take a lock on `spend_logs` that would queue every read and write behind a
//! long-running query: each runs with a short `lock_timeout`, and one that times out is tried
//! again at the next maintenance (or batch).

use std::collections::BTreeSet;
use std::sync::Mutex;

use time::OffsetDateTime;

use super::{col, to_ms, Backend, Store, StoreError};

/// Milliseconds in a UTC day (the partitions' width).
pub(crate) const DAY_MS: i64 = 86_400_000;

/// Days made ahead of today by [`Store::prepare_spend_partitions`]: a batch written after
/// midnight finds its table, even when the maintenance has not run since.
const DAYS_AHEAD: i64 = 3;

/// Rows one retention DELETE removes: small enough that a statement holds its locks briefly
/// and a writer's batch never waits long behind it.
const DELETE_CHUNK: i64 = 5_000;

/// How long a schema change (a day made or dropped) waits for its lock before giving up
/// until the next try.
const LOCK_TIMEOUT: &str = "SET LOCAL lock_timeout = '2s'";

/// Makers of partitions take this transaction-scoped advisory lock first, so that two
/// instances making the same day do not both try (one would fail on the catalog's unique key).
const PARTITION_LOCK: i64 = 0x51C1_5E5D_0017;

/// The days that have a partition, as this process last read or made them (PostgreSQL).
#[derive(Debug, Default)]
pub(crate) struct Partitions {
    known: Mutex<Known>,
}

#[derive(Debug, Default)]
struct Known {
    /// Days (Unix ms / [`DAY_MS`]) with a table of their own.
    days: BTreeSet<i64>,
    /// Every start time below this has a partition (`spend_logs_legacy`), in Unix ms.
    below: Option<i64>,
}

impl Known {
    fn covers(&self, day: i64) -> bool {
        self.days.contains(&day) || self.below.is_some_and(|b| (day + 1) * DAY_MS <= b)
    }
}

impl Partitions {
    fn known(&self) -> std::sync::MutexGuard<'_, Known> {
        sluice_core::lock::lock(&self.known)
    }

    /// Of `days`, those no known partition holds.
    fn missing(&self, days: &BTreeSet<i64>) -> Vec<i64> {
        let k = self.known();
        days.iter().copied().filter(|d| !k.covers(*d)).collect()
    }

    /// Forgets every day, so the next batch reads the catalog again (after a failed write:
    /// another instance may have dropped a day this one knew).
    pub(crate) fn forget(&self) {
        *self.known() = Known::default();
    }
}

/// One partition of `spend_logs` as the catalog describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpendPartition {
    /// Its table's name.
    pub name: String,
    /// Its lowest start time, Unix ms (`None`: no lower bound).
    pub from: Option<i64>,
    /// The start time it ends before, Unix ms (`None`: no upper bound).
    pub to: Option<i64>,
}

/// What one retention run removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Whole days dropped (PostgreSQL).
    pub partitions: u64,
    /// Rows deleted one by one (SQLite; on PostgreSQL, from a table spanning the cutoff).
    pub rows: u64,
    /// Rows past the cutoff are left because the run reached its row budget: run again soon.
    pub more: bool,
}

/// The UTC day of a Unix-ms time, as a day number.
pub(crate) fn day_of(ms: i64) -> i64 {
    ms.div_euclid(DAY_MS)
}

/// A day's partition name: `spend_logs_YYYYMMDD`.
pub(crate) fn partition_name(day: i64) -> String {
    let date = OffsetDateTime::from_unix_timestamp(day * 86_400)
        .map(OffsetDateTime::date)
        .unwrap_or(time::Date::MIN);
    format!(
        "spend_logs_{:04}{:02}{:02}",
        date.year(),
        u8::from(date.month()),
        date.day()
    )
}

/// `FOR VALUES FROM (a) TO (b)` as `pg_get_expr` prints a range partition's bound: each side a
/// number (quoted or not) or `MINVALUE` / `MAXVALUE` (no bound). `None` for anything else
/// (a DEFAULT partition).
fn parse_bound(text: &str) -> Option<(Option<i64>, Option<i64>)> {
    let rest = text.trim().strip_prefix("FOR VALUES FROM (")?;
    let (from, rest) = rest.split_once(") TO (")?;
    let to = rest.strip_suffix(')')?;
    let side = |s: &str| -> Option<Option<i64>> {
        let s = s.trim().trim_matches('\'');
        match s {
            "MINVALUE" | "MAXVALUE" => Some(None),
            n => n.parse().ok().map(Some),
        }
    };
    Some((side(from)?, side(to)?))
}

/// The time before which retention removes rows, for a period kept back from `now`. On
/// PostgreSQL a period of a day or more is rounded down to a UTC midnight, so that retention
/// only ever drops whole days (it keeps up to a day more than the period); a shorter period,
/// and SQLite, cut exactly.
pub fn retention_cutoff(
    backend: Backend,
    now: OffsetDateTime,
    period: std::time::Duration,
) -> OffsetDateTime {
    let cut = now - period;
    let whole_days =
        backend == Backend::Postgres && period >= std::time::Duration::from_secs(86_400);
    if whole_days {
        cut.to_offset(time::UtcOffset::UTC)
            .date()
            .midnight()
            .assume_utc()
    } else {
        cut
    }
}

impl Store {
    /// The partitions of `spend_logs`, oldest first (none on SQLite).
    pub async fn spend_partitions(&self) -> Result<Vec<SpendPartition>, StoreError> {
        if self.backend() != Backend::Postgres {
            return Ok(Vec::new());
        }
        let rows = sqlx::query(
            "SELECT CAST(c.relname AS TEXT) AS name, \
             pg_get_expr(c.relpartbound, c.oid) AS bound \
             FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid \
             WHERE i.inhparent = CAST('spend_logs' AS regclass)",
        )
        .fetch_all(self.pool())
        .await?;
        let mut parts = Vec::with_capacity(rows.len());
        for row in &rows {
            let bound: String = col(row, "bound")?;
            let Some((from, to)) = parse_bound(&bound) else {
                return Err(StoreError::Corrupt {
                    column: "relpartbound",
                    why: format!("spend log partition bound {bound:?} is not a range"),
                });
            };
            parts.push(SpendPartition {
                name: col(row, "name")?,
                from,
                to,
            });
        }
        parts.sort_by_key(|p| (p.from.unwrap_or(i64::MIN), p.to.unwrap_or(i64::MAX)));
        Ok(parts)
    }

    /// Reads the catalog into the known days.
    async fn reload_partitions(&self) -> Result<(), StoreError> {
        let parts = self.spend_partitions().await?;
        let mut known = Known::default();
        for p in parts {
            match (p.from, p.to) {
                (Some(f), Some(t)) if t - f == DAY_MS && f.rem_euclid(DAY_MS) == 0 => {
                    known.days.insert(day_of(f));
                }
                (None, Some(t)) => known.below = Some(known.below.map_or(t, |b| b.max(t))),
                // A partition of another shape (made by hand): its days are not assumed, so
                // one that a batch needs fails that batch loudly rather than silently.
                _ => {}
            }
        }
        *self.partitions.known() = known;
        Ok(())
    }

    /// Makes sure every day of `days` (day numbers) has a partition: a set lookup when they
    /// are known; otherwise the catalog is read again and the missing days made, one short
    /// transaction each. Nothing on SQLite.
    pub(crate) async fn ensure_spend_days(&self, days: &BTreeSet<i64>) -> Result<(), StoreError> {
        if self.backend() != Backend::Postgres || self.partitions.missing(days).is_empty() {
            return Ok(());
        }
        self.reload_partitions().await?;
        for day in self.partitions.missing(days) {
            let mut tx = self.pool().begin().await?;
            sqlx::query(LOCK_TIMEOUT).execute(&mut *tx).await?;
            sqlx::query(&format!("SELECT pg_advisory_xact_lock({PARTITION_LOCK})"))
                .execute(&mut *tx)
                .await?;
            let sql = format!(
                "CREATE TABLE IF NOT EXISTS {} PARTITION OF spend_logs \
                 FOR VALUES FROM ({}) TO ({})",
                partition_name(day),
                day * DAY_MS,
                (day + 1) * DAY_MS
            );
            sqlx::query(&sql).execute(&mut *tx).await?;
            tx.commit().await?;
            self.partitions.known().days.insert(day);
        }
        Ok(())
    }

    /// Makes the partitions of today and the next days ahead of the batches that will need
    /// them (the writer's maintenance). Not yesterday's: a retention shorter than a day drops
    /// it, and a late record of it (a spool replayed after midnight) makes it on demand.
    /// Nothing on SQLite.
    pub async fn prepare_spend_partitions(&self, now: OffsetDateTime) -> Result<(), StoreError> {
        let today = day_of(to_ms(now));
        let days: BTreeSet<i64> = (today..=today + DAYS_AHEAD).collect();
        self.ensure_spend_days(&days).await
    }

    /// Removes the spend logs that started before `cutoff`: whole days dropped on PostgreSQL,
    /// then rows deleted in batches where a table spans the cutoff (all of it on SQLite), at
    /// most `max_rows` of them per run ([`Pruned::more`] says some are left). The rollups
    /// (`daily_spend`, `daily_spend_by`) are kept: they are small, and the spend pages keep
    /// showing the days whose logs are gone.
    pub async fn prune_spend_logs(
        &self,
        cutoff: OffsetDateTime,
        max_rows: u64,
    ) -> Result<Pruned, StoreError> {
        let cut = to_ms(cutoff);
        let mut pruned = Pruned::default();
        if self.backend() == Backend::Postgres {
            for p in self.spend_partitions().await? {
                if p.to.is_some_and(|t| t <= cut) {
                    self.drop_partition(&p.name).await?;
                    pruned.partitions += 1;
                }
            }
            if pruned.partitions > 0 {
                self.partitions.forget();
            }
        }
        let delete = match self.backend() {
            Backend::Sqlite => {
                "DELETE FROM spend_logs WHERE rowid IN \
                 (SELECT rowid FROM spend_logs WHERE start_time < $1 LIMIT $2)"
            }
            // Partition pruning reads only the tables that may hold such rows (after the
            // drops above: the one spanning the cutoff, if any).
            Backend::Postgres => {
                "DELETE FROM spend_logs WHERE (id, start_time) IN \
                 (SELECT id, start_time FROM spend_logs WHERE start_time < $1 LIMIT $2)"
            }
        };
        while pruned.rows < max_rows {
            let chunk = DELETE_CHUNK.min(i64::try_from(max_rows - pruned.rows).unwrap_or(i64::MAX));
            let n = sqlx::query(delete)
                .bind(cut)
                .bind(chunk)
                .execute(self.pool())
                .await?
                .rows_affected();
            pruned.rows += n;
            if n < u64::try_from(chunk).unwrap_or(0) {
                return Ok(pruned);
            }
        }
        pruned.more = true;
        Ok(pruned)
    }

    /// Drops one day's table (PostgreSQL), waiting at most [`LOCK_TIMEOUT`] for its lock.
    async fn drop_partition(&self, name: &str) -> Result<(), StoreError> {
        // Names come from the catalog; quoted all the same.
        let quoted = format!("\"{}\"", name.replace('"', "\"\""));
        let mut tx = self.pool().begin().await?;
        sqlx::query(LOCK_TIMEOUT).execute(&mut *tx).await?;
        sqlx::query(&format!("DROP TABLE IF EXISTS {quoted}"))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        tracing::info!(partition = name, "spend log day dropped (retention)");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_read_as_pg_get_expr_prints_them() {
        assert_eq!(
            parse_bound("FOR VALUES FROM ('1767225600000') TO ('1767312000000')"),
            Some((Some(1_767_225_600_000), Some(1_767_312_000_000)))
        );
        assert_eq!(
            parse_bound("FOR VALUES FROM (MINVALUE) TO (1767312000000)"),
            Some((None, Some(1_767_312_000_000)))
        );
        assert_eq!(parse_bound("DEFAULT"), None);
        assert_eq!(parse_bound("FOR VALUES FROM (x) TO (1)"), None);
    }

    #[test]
    fn days_are_named_by_their_utc_date() {
        let day = day_of(to_ms(time::macros::datetime!(2026-01-01 23:59:59.999 UTC)));
        assert_eq!(partition_name(day), "spend_logs_20260101");
        assert_eq!(day_of(-1), -1);
    }

    #[test]
    fn cutoffs_keep_whole_days_on_postgres_only() {
        let now = time::macros::datetime!(2026-03-10 15:30 UTC);
        let week = std::time::Duration::from_secs(7 * 86_400);
        let hour = std::time::Duration::from_secs(3600);
        assert_eq!(
            retention_cutoff(Backend::Postgres, now, week),
            time::macros::datetime!(2026-03-03 00:00 UTC)
        );
        assert_eq!(
            retention_cutoff(Backend::Sqlite, now, week),
            time::macros::datetime!(2026-03-03 15:30 UTC)
        );
        assert_eq!(
            retention_cutoff(Backend::Postgres, now, hour),
            time::macros::datetime!(2026-03-10 14:30 UTC)
        );
    }
}
