//! `/team/*`'s answers: a team with its members (`members_with_roles`), and what
//! `/team/info` and `/team/update` wrap it in.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::keys::KeyInfo;
use super::{Accounting, LimitFields, Shown};
use sluice_store::{TeamMember, TeamRow};

/// A team as `/team/*` answers show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct TeamInfo {
    /// Its id.
    pub team_id: String,
    /// Its display name.
    pub team_alias: Option<String>,
    /// A blocked team's keys are all refused.
    pub blocked: bool,
    /// Its organization.
    pub organization_id: Option<String>,
    /// Its members and their roles; absent where a team is shown as a user's
    /// (`/user/info`'s `teams`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub members_with_roles: Option<Vec<MemberWithRole>>,
    /// Model groups its keys may call; empty: all.
    pub models: Vec<String>,
    /// The caller's own `metadata`.
    #[serde(default)]
    pub metadata: Map<String, Value>,
    /// Budget and limits every key of the team shares.
    #[serde(flatten)]
    pub limits: LimitFields,
    /// Spend and timestamps.
    #[serde(flatten)]
    pub accounting: Accounting,
    /// LiteLLM's team fields kept in `metadata` and shown beside it (`model_aliases`,
    /// `team_member_budget`, ...), free-form.
    #[serde(flatten)]
    pub kept: Map<String, Value>,
}

/// One member of a team.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct MemberWithRole {
    /// The member.
    pub user_id: String,
    /// Their email, when the answer looked it up (`/team/info` and the member routes).
    pub user_email: Option<String>,
    /// `admin` or `user`.
    pub role: String,
}

/// Members' emails by user id, for the answers that show one team.
pub(crate) type Emails = HashMap<String, String>;

impl TeamInfo {
    /// The team's own field names (beside [`LimitFields`] and [`Accounting`]).
    const NAMES: &'static [&'static str] = &[
        "team_id",
        "team_alias",
        "blocked",
        "organization_id",
        "members_with_roles",
        "models",
        "metadata",
    ];

    /// The stored team as shown, with those of `members` who are its own (and their
    /// `emails`), or without members at all for `None`.
    pub(crate) fn of(t: &TeamRow, members: Option<(&[TeamMember], &Emails)>) -> Self {
        let shown = Shown::of(&t.limits, &[Self::NAMES, Accounting::NAMES]);
        Self {
            team_id: t.team_id.clone(),
            team_alias: t.team_alias.clone(),
            blocked: t.blocked,
            organization_id: t.organization_id.clone(),
            members_with_roles: members.map(|(members, emails)| {
                members
                    .iter()
                    .filter(|m| m.team_id == t.team_id)
                    .map(|m| MemberWithRole {
                        user_id: m.user_id.clone(),
                        user_email: emails.get(&m.user_id).cloned(),
                        role: m.role.name().to_owned(),
                    })
                    .collect()
            }),
            models: shown.models,
            metadata: shown.metadata,
            limits: shown.limits,
            accounting: Accounting::of(&t.accounting),
            kept: shown.kept,
        }
    }
}

/// `GET /team/info`: the team and its keys.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct TeamInfoAnswer {
    /// The team asked for.
    pub team_id: String,
    /// The team, with its members.
    pub team_info: TeamInfo,
    /// Its keys (at most 1,000).
    pub keys: Vec<KeyInfo>,
}

/// `POST /team/update`: LiteLLM's `{"team_id", "data"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct TeamUpdated {
    /// The team changed.
    pub team_id: String,
    /// The team as it is now, with its members.
    pub data: TeamInfo,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admin::answers::tests::names_and_round_trip;
    use sluice_store::TeamRole;

    #[test]
    fn a_team_shows_its_names_and_reads_back() {
        let now = time::macros::datetime!(2026-03-01 12:00 UTC);
        let mut t = TeamRow::new("t1".into(), now);
        t.limits.rpm_limit = Some(10);
        let members = [TeamMember {
            team_id: "t1".into(),
            user_id: "u1".into(),
            role: TeamRole::Admin,
        }];
        let emails = Emails::from([("u1".to_owned(), "u1@example.com".to_owned())]);
        let with = TeamInfo::of(&t, Some((&members, &emails)));
        names_and_round_trip(
            &with,
            &[TeamInfo::NAMES, LimitFields::NAMES, Accounting::NAMES],
        );
        let without = TeamInfo::of(&t, None);
        let names: Vec<&str> = TeamInfo::NAMES
            .iter()
            .copied()
            .filter(|n| *n != "members_with_roles")
            .collect();
        names_and_round_trip(&without, &[&names, LimitFields::NAMES, Accounting::NAMES]);
    }
}
