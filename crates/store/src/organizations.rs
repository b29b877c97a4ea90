//! Organizations (LiteLLM's `LiteLLM_OrganizationTable`): a budget holder above teams and keys.
//! Its `models` bind every key and team under it, its budget caps their spend together, and its
//! `spend` grows with theirs (`write_spend_batch`). Members have an organization role
//! (`organization_members`).

use sqlx::any::AnyRow;
use time::OffsetDateTime;

use super::entity::{Accounting, AnyQuery, Entity};
use super::{col, from_ms, to_ms, Limits, Page, Store, StoreError};

/// One organization.
#[derive(Debug, Clone, PartialEq)]
pub struct OrganizationRow {
    /// Caller-chosen or generated id.
    pub organization_id: String,
    /// Display name; need not be unique.
    pub organization_alias: Option<String>,
    /// Models, limits (a copy of its budget's) and metadata.
    pub limits: Limits,
    /// Spend of every key and team under it, and timestamps.
    pub accounting: Accounting,
}

impl OrganizationRow {
    /// A new organization created at `now`.
    pub fn new(organization_id: String, now: OffsetDateTime) -> Self {
        Self {
            organization_id,
            organization_alias: None,
            limits: Limits::default(),
            accounting: Accounting::new(now),
        }
    }
}

impl Entity for OrganizationRow {
    const TABLE: &'static str = "organizations";
    const ID: &'static str = "organization_id";
    const WHAT: &'static str = "organization";
    const KIND: sluice_core::limits::SubjectKind = sluice_core::limits::SubjectKind::Organization;
    const OWN: &'static [&'static str] = &["organization_alias"];

    fn id(&self) -> &str {
        &self.organization_id
    }
    fn limits(&self) -> &Limits {
        &self.limits
    }
    fn accounting(&self) -> &Accounting {
        &self.accounting
    }
    fn bind_own<'q>(&self, q: AnyQuery<'q>) -> AnyQuery<'q> {
        q.bind(self.organization_alias.clone())
    }
    fn decode(row: &AnyRow, limits: Limits, accounting: Accounting) -> Result<Self, StoreError> {
        Ok(Self {
            organization_id: col(row, "organization_id")?,
            organization_alias: col(row, "organization_alias")?,
            limits,
            accounting,
        })
    }
}

/// A member's role in an organization (LiteLLM's roles within an organization).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrgRole {
    /// Manages the organization's teams and members.
    Admin,
    /// A member.
    User,
    /// A member who may only look.
    Viewer,
}

impl OrgRole {
    /// The stored and API name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Admin => "org_admin",
            Self::User => "internal_user",
            Self::Viewer => "internal_user_viewer",
        }
    }
}

impl std::str::FromStr for OrgRole {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        match s {
            "org_admin" => Ok(Self::Admin),
            "internal_user" => Ok(Self::User),
            "internal_user_viewer" => Ok(Self::Viewer),
            _ => Err(()),
        }
    }
}

/// One membership.
#[derive(Debug, Clone, PartialEq)]
pub struct OrgMember {
    /// The organization.
    pub organization_id: String,
    /// The user.
    pub user_id: String,
    /// Their role in it.
    pub role: OrgRole,
    /// Their budget within it (shown; LiteLLM's `max_budget_in_organization`).
    pub max_budget_in_organization: Option<f64>,
    /// When they joined.
    pub created_at: OffsetDateTime,
    /// When their membership last changed.
    pub updated_at: OffsetDateTime,
}

impl OrgMember {
    fn decode(r: &AnyRow) -> Result<Self, StoreError> {
        let role: String = col(r, "role")?;
        Ok(Self {
            organization_id: col(r, "organization_id")?,
            user_id: col(r, "user_id")?,
            role: role.parse().map_err(|_| StoreError::Corrupt {
                column: "role",
                why: format!("unknown organization role `{role}`"),
            })?,
            max_budget_in_organization: col(r, "max_budget_in_organization")?,
            created_at: from_ms("created_at", col(r, "created_at")?)?,
            updated_at: from_ms("updated_at", col(r, "updated_at")?)?,
        })
    }
}

impl Store {
    /// Stores a new organization. `Conflict` if the id is taken (aliases may repeat).
    pub async fn create_organization(&self, o: &OrganizationRow) -> Result<(), StoreError> {
        self.insert(o).await
    }

    /// The organization with this id, if any.
    pub async fn organization(&self, id: &str) -> Result<Option<OrganizationRow>, StoreError> {
        self.get(id).await
    }

    /// Saves an edited organization (everything but its spend and creation time).
    pub async fn update_organization(&self, o: &OrganizationRow) -> Result<(), StoreError> {
        self.update(o).await
    }

    /// Removes an organization and its memberships. Its keys and teams stay, no longer under
    /// it (their `organization_id` cleared, `updated_at` moved so every directory sees it).
    pub async fn delete_organization(
        &self,
        id: &str,
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        let mut tx = self.pool().begin().await?;
        let done = sqlx::query("DELETE FROM organizations WHERE organization_id = $1")
            .bind(id.to_owned())
            .execute(&mut *tx)
            .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound("organization"));
        }
        sqlx::query("DELETE FROM organization_members WHERE organization_id = $1")
            .bind(id.to_owned())
            .execute(&mut *tx)
            .await?;
        super::entity::tombstone(
            &mut tx,
            sluice_core::limits::SubjectKind::Organization,
            id,
            now,
        )
        .await?;
        for table in ["keys", "teams"] {
            let sql = format!(
                "UPDATE {table} SET organization_id = NULL, updated_at = $1 \
                 WHERE organization_id = $2"
            );
            sqlx::query(&sql)
                .bind(to_ms(now))
                .bind(id.to_owned())
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Organizations, in id order.
    pub async fn list_organizations(&self, page: Page) -> Result<Vec<OrganizationRow>, StoreError> {
        self.list(None, page).await
    }

    /// An organization's members, in user id order.
    pub async fn organization_members(&self, id: &str) -> Result<Vec<OrgMember>, StoreError> {
        sqlx::query(
            "SELECT * FROM organization_members WHERE organization_id = $1 ORDER BY user_id",
        )
        .bind(id.to_owned())
        .fetch_all(self.pool())
        .await?
        .iter()
        .map(OrgMember::decode)
        .collect()
    }

    /// Add a member, or change their role and budget within the organization.
    pub async fn set_organization_member(&self, m: &OrgMember) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO organization_members (organization_id, user_id, role, \
             max_budget_in_organization, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6) \
             ON CONFLICT (organization_id, user_id) DO UPDATE SET role = excluded.role, \
             max_budget_in_organization = excluded.max_budget_in_organization, \
             updated_at = excluded.updated_at",
        )
        .bind(m.organization_id.clone())
        .bind(m.user_id.clone())
        .bind(m.role.name())
        .bind(m.max_budget_in_organization)
        .bind(to_ms(m.created_at))
        .bind(to_ms(m.updated_at))
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// Remove a member; `NotFound` when they were not one.
    pub async fn remove_organization_member(
        &self,
        id: &str,
        user_id: &str,
    ) -> Result<(), StoreError> {
        let done = sqlx::query(
            "DELETE FROM organization_members WHERE organization_id = $1 AND user_id = $2",
        )
        .bind(id.to_owned())
        .bind(user_id.to_owned())
        .execute(self.pool())
        .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound("organization member"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::*;
    use crate::testing::every_backend;
    use crate::{BudgetRow, KeyRow, TeamRow};

    #[tokio::test]
    async fn organizations_members_and_budgets_round_trip() {
        let now = datetime!(2026-11-29 10:00 UTC);
        for db in every_backend().await {
            let s = &db.store;
            let mut b = BudgetRow::new("b1".into(), now);
            b.max_budget = Some(5.0);
            b.rpm_limit = Some(10);
            s.create_budget(&b).await.unwrap();
            let mut org = OrganizationRow::new("o1".into(), now);
            org.organization_alias = Some("acme".into());
            org.limits.models = vec!["cheap".into()];
            b.copy_into(&mut org.limits, now);
            s.create_organization(&org).await.unwrap();
            // Aliases may repeat.
            let mut twin = OrganizationRow::new("o2".into(), now);
            twin.organization_alias = Some("acme".into());
            s.create_organization(&twin).await.unwrap();
            assert_eq!(s.organization("o1").await.unwrap(), Some(org.clone()));

            let mut team = TeamRow::new("t1".into(), now);
            team.organization_id = Some("o1".into());
            team.limits.budget_id = Some("b1".into());
            s.create_team(&team).await.unwrap();
            let mut key = KeyRow::new("sk-org-key-1", now);
            key.organization_id = Some("o1".into());
            s.create_key(&key).await.unwrap();

            // A budget update reaches every holder that names it, and moves its updated_at.
            b.max_budget = Some(7.0);
            b.budget_duration = Some("1d".parse().unwrap());
            let later = datetime!(2026-11-29 11:00 UTC);
            assert_eq!(s.update_budget(&b, later).await.unwrap(), 2);
            let o = s.organization("o1").await.unwrap().unwrap();
            assert_eq!(o.limits.max_budget, Some(7.0));
            assert_eq!(o.limits.rpm_limit, Some(10));
            assert_eq!(
                o.limits.budget_reset_at,
                Some(datetime!(2026-11-30 11:00 UTC))
            );
            assert_eq!(o.accounting.updated_at, later);
            let t = s.team("t1").await.unwrap().unwrap();
            assert_eq!(t.limits.max_budget, Some(7.0));
            assert_eq!(
                s.budget_users("b1").await.unwrap(),
                ["teams", "organizations"]
            );

            let m = OrgMember {
                organization_id: "o1".into(),
                user_id: "ana".into(),
                role: OrgRole::Admin,
                max_budget_in_organization: Some(2.0),
                created_at: now,
                updated_at: now,
            };
            s.set_organization_member(&m).await.unwrap();
            s.set_organization_member(&OrgMember {
                role: OrgRole::Viewer,
                ..m.clone()
            })
            .await
            .unwrap();
            let members = s.organization_members("o1").await.unwrap();
            assert_eq!(members.len(), 1);
            assert_eq!(members[0].role, OrgRole::Viewer);

            s.delete_organization("o1", later).await.unwrap();
            assert!(s.organization_members("o1").await.unwrap().is_empty());
            assert_eq!(s.team("t1").await.unwrap().unwrap().organization_id, None);
            assert_eq!(
                s.key(&key.token).await.unwrap().unwrap().organization_id,
                None
            );
            assert!(matches!(
                s.delete_organization("o1", later).await,
                Err(StoreError::NotFound("organization"))
            ));
        }
    }
}
