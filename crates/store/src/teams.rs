//! Teams: a budget and limits shared by every key of the team (LiteLLM's team table).

use sqlx::any::AnyRow;
use time::OffsetDateTime;

use super::entity::{Accounting, AnyQuery, Entity};
use super::{col, Limits, Page, Store, StoreError};

/// One team.
#[derive(Debug, Clone, PartialEq)]
pub struct TeamRow {
    /// Caller-chosen or generated id.
    pub team_id: String,
    /// Display name.
    pub team_alias: Option<String>,
    /// A blocked team's keys are all refused.
    pub blocked: bool,
    /// Budget and limits.
    pub limits: Limits,
    /// Spend and timestamps.
    pub accounting: Accounting,
}

impl TeamRow {
    /// A new, unblocked team created at `now`.
    pub fn new(team_id: String, now: OffsetDateTime) -> Self {
        Self {
            team_id,
            team_alias: None,
            blocked: false,
            limits: Limits::default(),
            accounting: Accounting::new(now),
        }
    }
}

impl Entity for TeamRow {
    const TABLE: &'static str = "teams";
    const ID: &'static str = "team_id";
    const WHAT: &'static str = "team";
    const OWN: &'static [&'static str] = &["team_alias", "blocked"];

    fn id(&self) -> &str {
        &self.team_id
    }
    fn limits(&self) -> &Limits {
        &self.limits
    }
    fn accounting(&self) -> &Accounting {
        &self.accounting
    }
    fn bind_own<'q>(&self, q: AnyQuery<'q>) -> AnyQuery<'q> {
        q.bind(self.team_alias.clone())
            .bind(i64::from(self.blocked))
    }
    fn decode(row: &AnyRow, limits: Limits, accounting: Accounting) -> Result<Self, StoreError> {
        Ok(Self {
            team_id: col(row, "team_id")?,
            team_alias: col(row, "team_alias")?,
            blocked: col::<i64>(row, "blocked")? != 0,
            limits,
            accounting,
        })
    }
}

impl Store {
    /// Stores a new team. `Conflict` if the id is taken.
    pub async fn create_team(&self, team: &TeamRow) -> Result<(), StoreError> {
        self.insert(team).await
    }

    /// The team with this id, if any.
    pub async fn team(&self, team_id: &str) -> Result<Option<TeamRow>, StoreError> {
        self.get(team_id).await
    }

    /// Saves an edited team (everything but its spend and creation time).
    pub async fn update_team(&self, team: &TeamRow) -> Result<(), StoreError> {
        self.update(team).await
    }

    /// Removes a team (its keys keep their `team_id`; the admin layer decides about them).
    pub async fn delete_team(&self, team_id: &str) -> Result<(), StoreError> {
        self.delete::<TeamRow>(team_id).await
    }

    /// Teams, in id order.
    pub async fn list_teams(&self, page: Page) -> Result<Vec<TeamRow>, StoreError> {
        self.list(None, page).await
    }

    /// How many teams there are.
    pub async fn count_teams(&self) -> Result<u64, StoreError> {
        self.count::<TeamRow>(None).await
    }
}
