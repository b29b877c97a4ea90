//! End users: the `user` field of a request body (LiteLLM's "customers"), each with an optional
//! budget. A row appears when an admin creates one or when the first request naming the end
//! user is written to the spend log, so spend is counted even before a budget is set.

use sqlx::any::AnyRow;
use time::OffsetDateTime;

use super::entity::{Accounting, AnyQuery, Entity};
use super::{col, Limits, Page, Store, StoreError};

/// One end user.
#[derive(Debug, Clone, PartialEq)]
pub struct EndUserRow {
    /// The `user` value clients send.
    pub user_id: String,
    /// Display name.
    pub alias: Option<String>,
    /// A blocked end user's requests are refused whatever key they come with.
    pub blocked: bool,
    /// Budget and limits.
    pub limits: Limits,
    /// Spend and timestamps.
    pub accounting: Accounting,
}

impl EndUserRow {
    /// A new, unblocked end user created at `now`.
    pub fn new(user_id: String, now: OffsetDateTime) -> Self {
        Self {
            user_id,
            alias: None,
            blocked: false,
            limits: Limits::default(),
            accounting: Accounting::new(now),
        }
    }
}

impl Entity for EndUserRow {
    const TABLE: &'static str = "end_users";
    const ID: &'static str = "user_id";
    const WHAT: &'static str = "end user";
    const KIND: sluice_core::limits::SubjectKind = sluice_core::limits::SubjectKind::EndUser;
    const OWN: &'static [&'static str] = &["alias", "blocked"];

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
        q.bind(self.alias.clone()).bind(i64::from(self.blocked))
    }
    fn decode(row: &AnyRow, limits: Limits, accounting: Accounting) -> Result<Self, StoreError> {
        Ok(Self {
            user_id: col(row, "user_id")?,
            alias: col(row, "alias")?,
            blocked: col::<i64>(row, "blocked")? != 0,
            limits,
            accounting,
        })
    }
}

impl Store {
    /// Stores a new end user. `Conflict` if the id is taken.
    pub async fn create_end_user(&self, end_user: &EndUserRow) -> Result<(), StoreError> {
        self.insert(end_user).await
    }

    /// The end user with this id, if any.
    pub async fn end_user(&self, user_id: &str) -> Result<Option<EndUserRow>, StoreError> {
        self.get(user_id).await
    }

    /// Saves an edited end user (everything but their spend and creation time).
    pub async fn update_end_user(&self, end_user: &EndUserRow) -> Result<(), StoreError> {
        self.update(end_user).await
    }

    /// Removes an end user.
    pub async fn delete_end_user(&self, user_id: &str) -> Result<(), StoreError> {
        self.delete::<EndUserRow>(user_id).await
    }

    /// End users, in id order.
    pub async fn list_end_users(&self, page: Page) -> Result<Vec<EndUserRow>, StoreError> {
        self.list(None, page).await
    }

    /// How many end users there are.
    pub async fn count_end_users(&self) -> Result<u64, StoreError> {
        self.count::<EndUserRow>(None).await
    }
}
