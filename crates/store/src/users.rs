//! Users: a person's own budget and limits across all their keys (LiteLLM's user table).

use sqlx::any::AnyRow;
use time::OffsetDateTime;

use super::entity::{Accounting, AnyQuery, Entity};
use super::{col, Limits, Page, Store, StoreError};

/// One user.
#[derive(Debug, Clone, PartialEq)]
pub struct UserRow {
    /// Caller-chosen or generated id.
    pub user_id: String,
    /// Display name.
    pub user_alias: Option<String>,
    /// Email, for the dashboard.
    pub user_email: Option<String>,
    /// LiteLLM role (`proxy_admin`, `internal_user`, ...), kept as given.
    pub user_role: Option<String>,
    /// Default team.
    pub team_id: Option<String>,
    /// The console sign-in password as an argon2 PHC string; `None`: no password sign-in.
    pub password_hash: Option<String>,
    /// Budget and limits.
    pub limits: Limits,
    /// Spend and timestamps.
    pub accounting: Accounting,
}

impl UserRow {
    /// A new user created at `now`.
    pub fn new(user_id: String, now: OffsetDateTime) -> Self {
        Self {
            user_id,
            user_alias: None,
            user_email: None,
            user_role: None,
            team_id: None,
            password_hash: None,
            limits: Limits::default(),
            accounting: Accounting::new(now),
        }
    }
}

impl Entity for UserRow {
    const TABLE: &'static str = "users";
    const ID: &'static str = "user_id";
    const WHAT: &'static str = "user";
    const KIND: sluice_core::limits::SubjectKind = sluice_core::limits::SubjectKind::User;
    const OWN: &'static [&'static str] = &[
        "user_alias",
        "user_email",
        "user_role",
        "team_id",
        "password_hash",
    ];

    fn id(&self) -> &str {
        &self.user_id
    }
    fn limits(&self) -> &Limits {
        &self.limits
    }
    fn accounting(&self) -> &Accounting {
        &self.accounting
    }
    fn bind_own<'q>(&self, q: AnyQuery<'q>) -> AnyQuery<'q> {
        q.bind(self.user_alias.clone())
            .bind(self.user_email.clone())
            .bind(self.user_role.clone())
            .bind(self.team_id.clone())
            .bind(self.password_hash.clone())
    }
    fn decode(row: &AnyRow, limits: Limits, accounting: Accounting) -> Result<Self, StoreError> {
        Ok(Self {
            user_id: col(row, "user_id")?,
            user_alias: col(row, "user_alias")?,
            user_email: col(row, "user_email")?,
            user_role: col(row, "user_role")?,
            team_id: col(row, "team_id")?,
            password_hash: col(row, "password_hash")?,
            limits,
            accounting,
        })
    }
}

impl Store {
    /// Stores a new user. `Conflict` if the id is taken.
    pub async fn create_user(&self, user: &UserRow) -> Result<(), StoreError> {
        self.insert(user).await
    }

    /// The user with this id, if any.
    pub async fn user(&self, user_id: &str) -> Result<Option<UserRow>, StoreError> {
        self.get(user_id).await
    }

    /// The first user (in id order) with this email: LiteLLM's members may be named by
    /// `user_email` alone.
    pub async fn user_by_email(&self, email: &str) -> Result<Option<UserRow>, StoreError> {
        let row = sqlx::query("SELECT * FROM users WHERE user_email = $1 ORDER BY user_id LIMIT 1")
            .bind(email.to_owned())
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(super::entity::decode).transpose()
    }

    /// Saves an edited user (everything but their spend and creation time).
    pub async fn update_user(&self, user: &UserRow) -> Result<(), StoreError> {
        self.update(user).await
    }

    /// Removes a user.
    pub async fn delete_user(&self, user_id: &str) -> Result<(), StoreError> {
        self.delete::<UserRow>(user_id).await
    }

    /// Users, in id order.
    pub async fn list_users(&self, page: Page) -> Result<Vec<UserRow>, StoreError> {
        self.list(None, page).await
    }

    /// How many users there are.
    pub async fn count_users(&self) -> Result<u64, StoreError> {
        self.count::<UserRow>(None).await
    }
}
