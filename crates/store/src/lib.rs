//! Durable state: virtual keys, teams, users, end users, organizations, tags, budgets, spend logs and daily rollups (and what an import brought over), behind one
//! interface over SQLite (a file next to the binary, zero setup) or PostgreSQL (a fleet).
//!
//! Both backends go through sqlx's `Any` driver with the same SQL: parameters are `$n`, upserts
//! are `ON CONFLICT`, times are Unix milliseconds, flags 0/1 integers and JSON text, so a row
//! decodes to the same Rust types everywhere. Only the migrations differ (column types).
//! Nothing here runs on the request path: auth reads a cache the lead fills from here, and
//! spend arrives in batches from [`writer`].

pub mod audit;
pub mod budget;
pub mod budget_objects;
mod changes;
pub mod end_users;
mod entity;
mod error;
pub mod imported;
pub mod keys;
pub mod model_spend;
pub mod models;
pub mod names;
pub mod objects;
pub mod organizations;
pub mod partitions;
pub mod responses;
pub mod revocations;
mod sink;
pub mod spend_logs;
pub mod spool;
pub mod tags;
pub mod teams;
pub mod users;
pub mod writer;

#[cfg(any(test, feature = "testing"))]
pub mod testing;

use std::path::{Path, PathBuf};
use std::time::Duration;

use sqlx::any::{AnyPoolOptions, AnyRow};
use sqlx::{AnyPool, Row};
use time::OffsetDateTime;

use sluice_core::Secret;

pub use audit::{AuditEntry, AuditFilter};
pub use budget::BudgetDuration;
pub use budget_objects::BudgetRow;
pub use changes::Changes;
pub use end_users::EndUserRow;
pub use entity::Accounting;
pub use entity::{Limits, Page};
pub use error::StoreError;
pub use imported::Imported;
pub use keys::{KeyFilter, KeyHash, KeyRow};
pub use model_spend::SpentBy;
pub use models::ModelRow;
pub use names::{HolderNames, KeyNames, Named, Names};
pub use objects::{ObjectKind, OwnedObject};
pub use organizations::{OrgMember, OrgRole, OrganizationRow};
pub use partitions::{retention_cutoff, Pruned, SpendPartition};
pub use responses::{ConversationItem, ConversationRow, StoredResponse};
pub use sink::{spend_log, SpendSink};
pub use spend_logs::{
    AttemptLog, BatchOutcome, Cursor, DailySpend, GroupSpend, LogPosition, SpendBy, SpendLog,
    SpendLogFilter, SpendStatus, TagSpend, MAX_CONTENT,
};
pub use spool::{Spool, SpoolError};
pub use tags::TagRow;
pub use teams::{TeamMember, TeamRole, TeamRow};
pub use users::UserRow;
pub use writer::{SpendJournal, SpendSender, WriterOptions, WriterStats, DEFAULT_SPOOL_PATH};

/// The SQLite file used when no `database_url` is configured.
pub const DEFAULT_SQLITE_PATH: &str = "sluice.db";

/// Which database a store talks to.
#[derive(Debug, Clone)]
pub enum Location {
    /// An embedded SQLite file, created on first use.
    Sqlite(PathBuf),
    /// A PostgreSQL server; the URL carries credentials, so it stays a [`Secret`].
    Postgres(Secret),
}

impl Location {
    /// `general_settings.database_url`, else `DATABASE_URL`, else the SQLite file at
    /// `default_path`. A `sqlite:` URL is accepted too, for tests and single boxes that want
    /// the file elsewhere.
    pub fn from_settings(
        database_url: Option<&Secret>,
        env_url: Option<String>,
        default_path: &Path,
    ) -> Result<Self, StoreError> {
        let url = database_url
            .map(|s| s.expose().to_owned())
            .or(env_url.filter(|u| !u.trim().is_empty()));
        let Some(url) = url else {
            return Ok(Self::Sqlite(default_path.to_owned()));
        };
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(Self::Postgres(Secret::new(url)))
        } else if let Some(path) = url.strip_prefix("sqlite:") {
            let path = path.trim_start_matches("//");
            let path = path.split('?').next().unwrap_or(path);
            Ok(Self::Sqlite(PathBuf::from(path)))
        } else {
            Err(StoreError::UnsupportedUrl)
        }
    }

    /// The location a loaded config names (`general_settings.database_url`, which the config
    /// loader already falls back to `DATABASE_URL` for), else the default SQLite file.
    pub fn from_config(general: &sluice_config::GeneralSettings) -> Result<Self, StoreError> {
        Self::from_settings(
            general.database_url.as_ref(),
            None,
            Path::new(DEFAULT_SQLITE_PATH),
        )
    }

    /// Which backend this is.
    pub fn backend(&self) -> Backend {
        match self {
            Self::Sqlite(_) => Backend::Sqlite,
            Self::Postgres(_) => Backend::Postgres,
        }
    }
}

/// The two supported databases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// Embedded, one instance.
    Sqlite,
    /// Shared by a fleet.
    Postgres,
}

impl Backend {
    /// Its name in `/health/readiness`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Sqlite => "sqlite",
            Self::Postgres => "postgresql",
        }
    }
}

/// How to open the store.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Where the data lives.
    pub location: Location,
    /// Pool size. Small on purpose: the store sees batches and admin calls, not requests, and
    /// a fleet of instances shares one PostgreSQL.
    pub max_connections: u32,
    /// How long a query waits for a pooled connection (and a connect attempt) before failing;
    /// short so that a down database turns into spooling quickly.
    pub acquire_timeout: Duration,
}

impl StoreOptions {
    /// Defaults for a location: 4 connections, 3 s acquire timeout.
    pub fn new(location: Location) -> Self {
        Self {
            location,
            max_connections: 4,
            acquire_timeout: Duration::from_secs(3),
        }
    }
}

/// The storage interface. Cheap to clone (the pool is shared).
#[derive(Debug, Clone)]
pub struct Store {
    pool: AnyPool,
    backend: Backend,
    /// The spend log's days known to have a partition (PostgreSQL), shared by every clone.
    partitions: std::sync::Arc<partitions::Partitions>,
}

impl Store {
    /// Connect, create the SQLite file if needed, and bring the schema up to date.
    pub async fn open(options: StoreOptions) -> Result<Self, StoreError> {
        sqlx::any::install_default_drivers();
        let backend = options.location.backend();
        let url = match &options.location {
            Location::Sqlite(path) => {
                // `mode=rwc` creates the file, not its directory (`--data-dir` may be new).
                if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    std::fs::create_dir_all(dir)
                        .map_err(|e| StoreError::Connect(sqlx::Error::Io(e)))?;
                }
                format!("sqlite://{}?mode=rwc", path.display())
            }
            // No cached prepared statements on PostgreSQL: through sqlx's Any driver a statement
            // first prepared with a NULL parameter keeps the type it guessed for it, and a later
            // value of the real type then fails ("incorrect binary data format in bind
            // parameter"). Re-preparing costs a parse per statement; the store sees batches and
            // admin calls, not requests.
            Location::Postgres(url) => {
                let u = url.expose();
                let sep = if u.contains('?') { '&' } else { '?' };
                format!("{u}{sep}statement-cache-capacity=0")
            }
        };
        let pool = AnyPoolOptions::new()
            .max_connections(options.max_connections)
            .acquire_timeout(options.acquire_timeout)
            .connect(&url)
            .await
            .map_err(StoreError::Connect)?;
        if backend == Backend::Sqlite {
            // WAL (stored in the file, so once is enough) lets the admin API read while the
            // batch writer writes; sqlx's SQLite connections already wait 5 s on a busy lock.
            sqlx::query("PRAGMA journal_mode = WAL")
                .execute(&pool)
                .await
                .map_err(StoreError::Connect)?;
        }
        match backend {
            Backend::Sqlite => sqlx::migrate!("./migrations/sqlite").run(&pool).await?,
            Backend::Postgres => sqlx::migrate!("./migrations/postgres").run(&pool).await?,
        }
        Ok(Self {
            pool,
            backend,
            partitions: std::sync::Arc::default(),
        })
    }

    /// Which database this store talks to.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// True when a trivial query answers (for `/health/readiness`).
    pub async fn ping(&self) -> bool {
        sqlx::query("SELECT 1").execute(&self.pool).await.is_ok()
    }

    /// Close every pooled connection (graceful shutdown).
    pub async fn close(&self) {
        self.pool.close().await;
    }

    pub(crate) fn pool(&self) -> &AnyPool {
        &self.pool
    }
}

/// Unix milliseconds, the stored form of every time.
pub(crate) fn to_ms(t: OffsetDateTime) -> i64 {
    i64::try_from(t.unix_timestamp_nanos() / 1_000_000).unwrap_or(i64::MAX)
}

/// Back from Unix milliseconds.
pub(crate) fn from_ms(column: &'static str, ms: i64) -> Result<OffsetDateTime, StoreError> {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000).map_err(|e| {
        StoreError::Corrupt {
            column,
            why: e.to_string(),
        }
    })
}

/// Reads a column, naming it if it does not decode.
pub(crate) fn col<'r, T>(row: &'r AnyRow, column: &'static str) -> Result<T, StoreError>
where
    T: sqlx::Decode<'r, sqlx::Any> + sqlx::Type<sqlx::Any>,
{
    row.try_get(column).map_err(|e| StoreError::Corrupt {
        column,
        why: e.to_string(),
    })
}

/// An optional time column.
pub(crate) fn time_col(
    row: &AnyRow,
    column: &'static str,
) -> Result<Option<OffsetDateTime>, StoreError> {
    col::<Option<i64>>(row, column)?
        .map(|ms| from_ms(column, ms))
        .transpose()
}

/// A JSON text column (models lists, metadata).
pub(crate) fn json_col<T: serde::de::DeserializeOwned>(
    row: &AnyRow,
    column: &'static str,
) -> Result<T, StoreError> {
    let text: String = col(row, column)?;
    serde_json::from_str(&text).map_err(|e| StoreError::Corrupt {
        column,
        why: e.to_string(),
    })
}

/// JSON text for a column. Serialising a `Vec<String>` or a `Value` cannot fail.
pub(crate) fn to_json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "null".to_owned())
}

#[cfg(test)]
mod bench_log_pages;
#[cfg(test)]
mod bench_spend_store;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_log_pages;
#[cfg(test)]
mod tests_spend_store;
