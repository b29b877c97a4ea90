//! What can go wrong talking to the store. Kept apart from `ApiError`: the admin handlers decide
//! what a client may see (a `NotFound` or `Conflict` is safe to show; database text never is).

/// A store operation's failure.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// `database_url` is neither a PostgreSQL nor a SQLite URL.
    #[error("database_url must start with postgres://, postgresql:// or sqlite:")]
    UnsupportedUrl,
    /// The database could not be reached or refused the connection.
    #[error("could not connect to the database: {0}")]
    Connect(#[source] sqlx::Error),
    /// A migration failed; the store is not usable.
    #[error("database migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A query failed (database down, timeout, constraint other than uniqueness...).
    #[error("database query failed: {0}")]
    Query(#[source] sqlx::Error),
    /// A row with that unique id or alias already exists.
    #[error("{0} already exists")]
    Conflict(&'static str),
    /// No row with that id.
    #[error("{0} not found")]
    NotFound(&'static str),
    /// A stored value does not decode (hand-edited row, JSON that is not JSON...).
    #[error("stored {column} is invalid: {why}")]
    Corrupt {
        /// The column that did not decode.
        column: &'static str,
        /// Why.
        why: String,
    },
}

impl StoreError {
    /// Maps a query error, turning unique-key violations into `Conflict(what)`.
    pub(crate) fn on_write(what: &'static str) -> impl Fn(sqlx::Error) -> Self {
        move |e| match &e {
            sqlx::Error::Database(db) if db.is_unique_violation() => Self::Conflict(what),
            _ => Self::Query(e),
        }
    }
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        Self::Query(e)
    }
}
