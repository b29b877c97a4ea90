//! Why a manager could not be built or read. No variant carries a secret value: manager
//! answers are quoted only when they are error bodies, cut short.

/// A manager's settings are incomplete or unusable (checked once, at startup).
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// A variable the manager needs is not set.
    #[error("{manager}: {variable} is not set ({why})")]
    Missing {
        /// The manager's config name.
        manager: &'static str,
        /// The environment variable.
        variable: &'static str,
        /// What it is for.
        why: &'static str,
    },
    /// A variable is set to something unusable.
    #[error("{manager}: {variable}: {message}")]
    Invalid {
        /// The manager's config name.
        manager: &'static str,
        /// The environment variable (or setting).
        variable: &'static str,
        /// What is wrong with it.
        message: String,
    },
}

/// One read failed. `NotFound` is the manager saying it has no such secret; the others are
/// failures to ask it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    /// The manager answered that the secret does not exist.
    #[error("not found")]
    NotFound,
    /// The manager refused the credentials (401/403).
    #[error("access denied ({0})")]
    Denied(String),
    /// It could not be reached, or answered an error or something unreadable.
    #[error("{0}")]
    Failed(String),
}

impl ReadError {
    /// The same failure said to be of `step` (a login, a token request): a missing login
    /// endpoint is a failure, not a missing secret.
    pub(crate) fn during(self, step: &str) -> ReadError {
        match self {
            ReadError::NotFound => ReadError::Failed(format!("{step}: not found")),
            ReadError::Denied(m) => ReadError::Denied(format!("{step}: {m}")),
            ReadError::Failed(m) => ReadError::Failed(format!("{step}: {m}")),
        }
    }
}

/// The start of an error body, for messages (manager error bodies hold no secret values).
pub(crate) fn excerpt(body: &[u8]) -> String {
    String::from_utf8_lossy(body).chars().take(200).collect()
}
