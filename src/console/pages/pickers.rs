//! What the forms' select lists offer, read where the management API reads them: teams from
//! `/team/list`, users from `/user/list`, a team's members from the store, model groups from
//! the routing table and access groups from the deployments served.

use super::fields::{Choice, Offered};
use super::{read, store};
use crate::server::{AppState, Snapshot};
use sluice_core::error::ApiError;

/// Entries a select list holds at most (a longer list is cut, and says so).
const MAX_CHOICES: usize = 1000;

/// Every team: its id, shown with its alias.
pub(super) async fn teams(state: &AppState) -> Result<Vec<Choice>, ApiError> {
    let list = crate::admin::teams::list(store(state)?, read("page_size=1000")).await?;
    Ok(list
        .into_iter()
        .take(MAX_CHOICES)
        .map(|t| {
            let label = match &t.team_alias {
                Some(a) if *a != t.team_id => format!("{a} ({})", t.team_id),
                _ => t.team_id.clone(),
            };
            (t.team_id, label)
        })
        .collect())
}

/// Every user: their id, shown with their email.
pub(super) async fn users(state: &AppState) -> Result<Vec<Choice>, ApiError> {
    let list = crate::admin::users::list(store(state)?, read("page_size=1000")).await?;
    Ok(list
        .users
        .into_iter()
        .take(MAX_CHOICES)
        .map(|u| {
            let label = match &u.user_email {
                Some(e) => format!("{} ({e})", u.user_id),
                None => u.user_id.clone(),
            };
            (u.user_id, label)
        })
        .collect())
}

/// A team's members, by user id.
pub(super) async fn members(state: &AppState, team: &str) -> Result<Vec<Choice>, ApiError> {
    let members = store(state)?
        .team_members(team)
        .await
        .map_err(|_| ApiError::StoreUnavailable)?;
    Ok(members
        .into_iter()
        .take(MAX_CHOICES)
        .map(|m| (m.user_id.clone(), m.user_id))
        .collect())
}

/// The model groups served and the access groups their deployments name.
pub(super) fn models(snap: &Snapshot) -> Offered {
    Offered {
        models: model_groups(snap),
        access_groups: crate::admin::access_groups::names(snap),
    }
}

/// The model groups served, in config order.
pub(super) fn model_groups(snap: &Snapshot) -> Vec<String> {
    snap.router
        .models
        .names()
        .iter()
        .map(|n| n.to_string())
        .collect()
}
