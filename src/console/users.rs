//! Password sign-in for the users an admin made (`/user/new` with `password`): the password is
//! checked against its argon2 hash in the store, and the user's LiteLLM role becomes the
//! session's. A user without a console role (`team`, `customer`, none) cannot sign in.

use std::sync::OnceLock;

use super::session::{stamp, Role, Session};
use crate::server::AppState;

/// A hash checked when there is no real one (no such user, no password), so that a wrong user
/// name takes as long as a wrong password and sign-in does not tell which users exist.
fn stand_in() -> &'static str {
    static HASH: OnceLock<String> = OnceLock::new();
    HASH.get_or_init(|| {
        crate::auth::password::hash("no user has this password").unwrap_or_default()
    })
}

/// The user id, role and password stamp for a correct password; `None` for anything else (no such user, no
/// password set, a wrong one, no store), so the caller says only "wrong user or password".
/// argon2's work runs on a blocking thread, off the request workers.
pub(super) async fn check_password(
    state: &AppState,
    user: &str,
    password: &str,
) -> Option<(String, Role, String)> {
    let row = match state.store()?.store.user(user).await {
        Ok(row) => row,
        Err(e) => {
            tracing::warn!(error = %e, "console sign-in: store error");
            return None;
        }
    };
    let signer = row.as_ref().and_then(|r| {
        let role = Role::parse(r.user_role.as_deref()?)?;
        Some((r.user_id.clone(), role, r.password_hash.clone()?))
    });
    let stored = signer
        .as_ref()
        .map_or_else(|| stand_in().to_owned(), |(_, _, h)| h.clone());
    let password = password.to_owned();
    let ok = tokio::task::spawn_blocking(move || crate::auth::password::verify(&password, &stored))
        .await
        .unwrap_or(false);
    signer
        .filter(|_| ok)
        .map(|(id, role, hash)| (id, role, stamp(&hash)))
}

/// Whether a stored user's session still holds: the user exists, with the same role and the
/// password they signed in with. One read by primary key per page (pages read the store
/// anyway); a store that does not answer signs the page out rather than trusting a stale role.
pub(super) async fn still_signed_in(state: &AppState, s: &Session) -> bool {
    let Some(services) = state.store() else {
        return false;
    };
    match services.store.user(&s.user).await {
        Ok(Some(row)) => {
            let same_role = row.user_role.as_deref().and_then(Role::parse) == Some(s.role);
            // A single sign-on session has no password to compare: the user and role must hold.
            let sso = s.stamp.as_deref() == Some(super::sso::SSO_STAMP);
            same_role && (sso || row.password_hash.as_deref().map(stamp) == s.stamp)
        }
        Ok(None) => false,
        Err(e) => {
            tracing::warn!(error = %e, "console session check: store error");
            false
        }
    }
}

/// Whether the session `token` stands for was signed out (on any instance). One read by
/// primary key per page; a store that does not answer signs the page out.
pub(super) async fn signed_out(state: &AppState, token: &str) -> bool {
    let Some(services) = state.store() else {
        return false;
    };
    match services
        .store
        .session_revoked(&super::session::session_id(token))
        .await
    {
        Ok(revoked) => revoked,
        Err(e) => {
            tracing::warn!(error = %e, "console sign-out check: store error");
            true
        }
    }
}

/// End the session `token` stands for on every instance, until it would have expired
/// (`expires`, Unix seconds) anyway. A store error is logged: the cookie is still cleared.
pub(super) async fn sign_out(state: &AppState, token: &str, expires: u64, now: u64) {
    let Some(services) = state.store() else {
        return;
    };
    let at = |s: u64| {
        time::OffsetDateTime::from_unix_timestamp(i64::try_from(s).unwrap_or(i64::MAX))
            .unwrap_or(time::OffsetDateTime::UNIX_EPOCH)
    };
    if let Err(e) = services
        .store
        .revoke_session(&super::session::session_id(token), at(expires), at(now))
        .await
    {
        tracing::warn!(error = %e, "console sign-out: the session could not be revoked");
    }
}

/// The team `user` administers: the first team whose members list them as `admin`, their own
/// team first. `None` on any store error (the page then shows only their own).
pub(super) async fn team_admin_of(state: &AppState, user: &str) -> Option<String> {
    let store = &state.store()?.store;
    let mut teams: Vec<String> = store
        .memberships(user)
        .await
        .map_err(|e| tracing::warn!(error = %e, "console: team memberships unreadable"))
        .ok()?
        .into_iter()
        .filter(|m| m.role == sluice_store::TeamRole::Admin)
        .map(|m| m.team_id)
        .collect();
    if teams.len() > 1 {
        let own = store
            .user(user)
            .await
            .ok()
            .flatten()
            .and_then(|u| u.team_id);
        if let Some(i) = own.and_then(|own| teams.iter().position(|t| *t == own)) {
            return Some(teams.swap_remove(i));
        }
    }
    teams.into_iter().next()
}
