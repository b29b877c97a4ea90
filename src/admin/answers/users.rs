//! `/user/*`'s answers: a user, the key `/user/new` issues them, and what `/user/info` and
//! `/user/list` wrap users in.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::keys::KeyInfo;
use super::teams::TeamInfo;
use super::{Accounting, LimitFields, Shown};
use sluice_store::UserRow;

/// A user as `/user/*` answers show them (never their password).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct UserInfo {
    /// Their id.
    pub user_id: String,
    /// Their display name.
    pub user_alias: Option<String>,
    /// Their email.
    pub user_email: Option<String>,
    /// LiteLLM's role (`proxy_admin`, `internal_user`, ...).
    pub user_role: Option<String>,
    /// Their default team.
    pub team_id: Option<String>,
    /// Model groups they may call; empty: all.
    pub models: Vec<String>,
    /// The caller's own `metadata`.
    #[serde(default)]
    pub metadata: Map<String, Value>,
    /// Budget and limits across all of their keys.
    #[serde(flatten)]
    pub limits: LimitFields,
    /// Spend and timestamps.
    #[serde(flatten)]
    pub accounting: Accounting,
    /// LiteLLM's user fields kept in `metadata` and shown beside it (`aliases`,
    /// `organizations`, ...), free-form.
    #[serde(flatten)]
    pub kept: Map<String, Value>,
}

impl UserInfo {
    /// The user's own field names (beside [`LimitFields`] and [`Accounting`]).
    const NAMES: &'static [&'static str] = &[
        "user_id",
        "user_alias",
        "user_email",
        "user_role",
        "team_id",
        "models",
        "metadata",
    ];

    /// The stored user as shown.
    pub(crate) fn of(u: &UserRow) -> Self {
        let shown = Shown::of(&u.limits, &[Self::NAMES, Accounting::NAMES, NewUser::NAMES]);
        Self {
            user_id: u.user_id.clone(),
            user_alias: u.user_alias.clone(),
            user_email: u.user_email.clone(),
            user_role: u.user_role.clone(),
            team_id: u.team_id.clone(),
            models: shown.models,
            metadata: shown.metadata,
            limits: shown.limits,
            accounting: Accounting::of(&u.accounting),
            kept: shown.kept,
        }
    }
}

/// `POST /user/new`: the user, and the key issued them unless `auto_create_key: false`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct NewUser {
    /// The user.
    #[serde(flatten)]
    pub user: UserInfo,
    /// The issued key's plaintext, shown this once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The issued key's hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
}

impl NewUser {
    /// The names the issued key adds.
    const NAMES: &'static [&'static str] = &["key", "token"];
}

/// `GET /user/info`: the user, their keys and their teams.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct UserInfoAnswer {
    /// The user asked for.
    pub user_id: String,
    /// The user.
    pub user_info: UserInfo,
    /// Their keys (at most 1,000).
    pub keys: Vec<KeyInfo>,
    /// The teams they are a member of.
    pub teams: Vec<UserTeam>,
}

/// A team of `/user/info`'s `teams`: the team without its members, and the user's
/// membership (LiteLLM's `team_memberships`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct UserTeam {
    /// The team.
    #[serde(flatten)]
    pub team: TeamInfo,
    /// The user's membership, one.
    pub team_memberships: Vec<Membership>,
}

/// A user's membership of a team.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Membership {
    /// The user.
    pub user_id: String,
    /// The team.
    pub team_id: String,
    /// `admin` or `user`.
    pub role: String,
}

/// `GET /user/list`: one page of users.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct UserList {
    /// The page's users.
    pub users: Vec<UserInfo>,
    /// Users in the whole list.
    pub total: u64,
    /// This page's number, from 1.
    pub page: u64,
    /// Users a page.
    pub page_size: u64,
    /// Pages in the whole list.
    pub total_pages: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admin::answers::tests::names_and_round_trip;

    #[test]
    fn a_user_shows_its_names_and_reads_back() {
        let now = time::macros::datetime!(2026-03-01 12:00 UTC);
        let mut u = UserRow::new("u1".into(), now);
        u.user_email = Some("u1@example.com".into());
        u.password_hash = Some("never shown".into());
        let names = [UserInfo::NAMES, LimitFields::NAMES, Accounting::NAMES];
        names_and_round_trip(&UserInfo::of(&u), &names);
        let issued = NewUser {
            user: UserInfo::of(&u),
            key: Some("sk-new".into()),
            token: Some("hash".into()),
        };
        names_and_round_trip(&issued, &[&names[..], &[NewUser::NAMES]].concat());
        let without = NewUser {
            key: None,
            token: None,
            ..issued
        };
        names_and_round_trip(&without, &names);
    }
}
