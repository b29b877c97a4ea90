//! What stops an import as a whole (a row that cannot be imported does not: it is listed in
//! the report and the rest go on).

use sluice_store::StoreError;

use crate::models::SealError;

/// Why an import could not run (a row that cannot be imported is not one of these: it is
/// listed in the report and the rest go on).
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// sluice's config did not load.
    #[error("the config: {0}")]
    Config(String),
    /// sluice's store could not be opened or written.
    #[error("sluice's store: {0}")]
    Store(#[from] StoreError),
    /// LiteLLM's database could not be read.
    #[error("LiteLLM's database: {0}")]
    Source(#[source] sqlx::Error),
    /// The database has no LiteLLM tables.
    #[error("LiteLLM's database has no LiteLLM_VerificationToken table: is --database-url LiteLLM's database (and its schema the connection's default)?")]
    NotLiteLlm,
    /// sluice's store is the database being read.
    #[error("sluice's store is LiteLLM's own database ({0}): give sluice a database of its own (general_settings.database_url, else DATABASE_URL, else sluice.db in --data-dir)")]
    SameDatabase(String),
    /// sluice's sealing key could not be made.
    #[error("sluice's sealing key: {0}")]
    Seal(#[from] SealError),
}
