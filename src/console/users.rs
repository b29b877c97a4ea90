//! Password sign-in for the users an admin made (`/user/new` with `password`): the password is
//! checked against its argon2 hash in the store, and the user's LiteLLM role becomes the
//! session's. A user without a console role (`team`, `customer`, none) cannot sign in.

use super::session::Role;
use crate::server::AppState;

/// The user id and role for a correct password; `None` for anything else (no such user, no
/// password set, a wrong one, no store), so the caller says only "wrong user or password".
/// argon2's work runs on a blocking thread, off the request workers.
pub(super) async fn check_password(
    state: &AppState,
    user: &str,
    password: &str,
) -> Option<(String, Role)> {
    let services = state.store()?;
    let row = match services.store.user(user).await {
        Ok(row) => row?,
        Err(e) => {
            tracing::warn!(error = %e, "console sign-in: store error");
            return None;
        }
    };
    let role = Role::parse(row.user_role.as_deref()?)?;
    let stored = row.password_hash?;
    let password = password.to_owned();
    let ok = tokio::task::spawn_blocking(move || crate::auth::password::verify(&password, &stored))
        .await
        .unwrap_or(false);
    ok.then_some((row.user_id, role))
}
