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
    /// The organization it belongs to: its keys are held to the organization's models and
    /// budget too.
    pub organization_id: Option<String>,
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
            organization_id: None,
            limits: Limits::default(),
            accounting: Accounting::new(now),
        }
    }
}

/// A member's role in a team (LiteLLM's `members_with_roles[].role`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TeamRole {
    /// Manages the team's keys and members.
    Admin,
    /// A member: their own keys, the team's usage.
    User,
}

impl TeamRole {
    /// The stored and API name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Admin => "admin",
            Self::User => "user",
        }
    }
}

impl std::str::FromStr for TeamRole {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        match s {
            "admin" => Ok(Self::Admin),
            "user" => Ok(Self::User),
            _ => Err(()),
        }
    }
}

/// One membership.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TeamMember {
    /// The team.
    pub team_id: String,
    /// The user.
    pub user_id: String,
    /// Their role in it.
    pub role: TeamRole,
}

impl Entity for TeamRow {
    const TABLE: &'static str = "teams";
    const ID: &'static str = "team_id";
    const WHAT: &'static str = "team";
    const KIND: sluice_core::limits::SubjectKind = sluice_core::limits::SubjectKind::Team;
    const OWN: &'static [&'static str] = &["team_alias", "blocked", "organization_id"];

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
            .bind(self.organization_id.clone())
    }
    fn decode(row: &AnyRow, limits: Limits, accounting: Accounting) -> Result<Self, StoreError> {
        Ok(Self {
            team_id: col(row, "team_id")?,
            team_alias: col(row, "team_alias")?,
            blocked: col::<i64>(row, "blocked")? != 0,
            organization_id: col(row, "organization_id")?,
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

    /// Removes a team and its memberships (its keys keep their `team_id`; the admin layer
    /// decides about them).
    pub async fn delete_team(&self, team_id: &str) -> Result<(), StoreError> {
        self.delete::<TeamRow>(team_id).await?;
        sqlx::query("DELETE FROM team_members WHERE team_id = $1")
            .bind(team_id.to_owned())
            .execute(self.pool())
            .await?;
        Ok(())
    }

    /// A team's members, in user id order.
    pub async fn team_members(&self, team_id: &str) -> Result<Vec<TeamMember>, StoreError> {
        self.members_where(Some(("team_id", team_id))).await
    }

    /// The teams a user belongs to, in team id order.
    pub async fn memberships(&self, user_id: &str) -> Result<Vec<TeamMember>, StoreError> {
        self.members_where(Some(("user_id", user_id))).await
    }

    /// Every membership, in team and user order (for team lists).
    pub async fn all_team_members(&self) -> Result<Vec<TeamMember>, StoreError> {
        self.members_where(None).await
    }

    async fn members_where(
        &self,
        filter: Option<(&'static str, &str)>,
    ) -> Result<Vec<TeamMember>, StoreError> {
        let cond = filter.map_or(String::new(), |(c, _)| format!("WHERE {c} = $1"));
        let sql = format!(
            "SELECT team_id, user_id, role FROM team_members {cond} ORDER BY team_id, user_id"
        );
        let mut q = sqlx::query(&sql);
        if let Some((_, v)) = filter {
            q = q.bind(v.to_owned());
        }
        q.fetch_all(self.pool())
            .await?
            .iter()
            .map(|r| {
                let role: String = col(r, "role")?;
                Ok(TeamMember {
                    team_id: col(r, "team_id")?,
                    user_id: col(r, "user_id")?,
                    role: role.parse().map_err(|_| StoreError::Corrupt {
                        column: "role",
                        why: format!("unknown team role `{role}`"),
                    })?,
                })
            })
            .collect()
    }

    /// Add `user_id` to `team_id` with `role`, or change their role.
    pub async fn set_team_member(
        &self,
        team_id: &str,
        user_id: &str,
        role: TeamRole,
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO team_members (team_id, user_id, role, added_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (team_id, user_id) DO UPDATE SET role = excluded.role",
        )
        .bind(team_id.to_owned())
        .bind(user_id.to_owned())
        .bind(role.name())
        .bind(super::to_ms(now))
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// Remove `user_id` from `team_id`; `NotFound` when they were not a member.
    pub async fn remove_team_member(&self, team_id: &str, user_id: &str) -> Result<(), StoreError> {
        let done = sqlx::query("DELETE FROM team_members WHERE team_id = $1 AND user_id = $2")
            .bind(team_id.to_owned())
            .bind(user_id.to_owned())
            .execute(self.pool())
            .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound("team member"));
        }
        Ok(())
    }

    /// Teams, in id order.
    pub async fn list_teams(&self, page: Page) -> Result<Vec<TeamRow>, StoreError> {
        self.list(None, page).await
    }

    /// The teams of an organization, in id order.
    pub async fn organization_teams(
        &self,
        organization_id: &str,
        page: Page,
    ) -> Result<Vec<TeamRow>, StoreError> {
        self.list(Some(("organization_id", organization_id)), page)
            .await
    }

    /// How many teams there are.
    pub async fn count_teams(&self) -> Result<u64, StoreError> {
        self.count::<TeamRow>(None).await
    }
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::*;
    use crate::testing::every_backend;

    #[tokio::test]
    async fn members_are_added_changed_listed_and_removed_with_their_team() {
        let now = datetime!(2026-11-27 10:00 UTC);
        for db in every_backend().await {
            let s = &db.store;
            s.create_team(&TeamRow::new("t1".into(), now))
                .await
                .unwrap();
            s.create_team(&TeamRow::new("t2".into(), now))
                .await
                .unwrap();
            s.set_team_member("t1", "ana", TeamRole::Admin, now)
                .await
                .unwrap();
            s.set_team_member("t1", "bo", TeamRole::User, now)
                .await
                .unwrap();
            s.set_team_member("t2", "ana", TeamRole::User, now)
                .await
                .unwrap();
            s.set_team_member("t1", "bo", TeamRole::Admin, now)
                .await
                .unwrap();
            let t1 = s.team_members("t1").await.unwrap();
            assert_eq!(
                t1.iter()
                    .map(|m| (m.user_id.as_str(), m.role))
                    .collect::<Vec<_>>(),
                [("ana", TeamRole::Admin), ("bo", TeamRole::Admin)]
            );
            assert_eq!(s.memberships("ana").await.unwrap().len(), 2);
            assert_eq!(s.all_team_members().await.unwrap().len(), 3);
            s.remove_team_member("t1", "bo").await.unwrap();
            assert!(matches!(
                s.remove_team_member("t1", "bo").await,
                Err(StoreError::NotFound("team member"))
            ));
            s.delete_team("t1").await.unwrap();
            assert!(s.team_members("t1").await.unwrap().is_empty());
            assert_eq!(s.memberships("ana").await.unwrap()[0].team_id, "t2");
        }
    }
}
