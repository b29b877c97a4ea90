//! What an internal user's key may do with keys (LiteLLM's rule): make keys for its own user,
//! and change or delete keys that belong to that user. A key naming another user, a team the
//! user is not in, or another user's key is refused with 403 naming why. Everything it may do
//! goes through [`super::call`], so it is checked, audited and announced as an admin's change.

use http::Method;
use serde_json::{Map, Value};

use sluice_core::error::ApiError;

use super::keys::key_ref;
use super::{call, store_error, AdminResult};
use crate::server::AppState;

/// Whether [`serve`] answers this call: `POST /key/generate|update|delete`.
pub fn route(method: &Method, path: &str) -> bool {
    let route = path.strip_prefix("/v1").unwrap_or(path);
    *method == Method::POST && matches!(route, "/key/generate" | "/key/update" | "/key/delete")
}

/// Serves one of [`route`]'s calls for a key of `user`.
pub async fn serve(
    state: &AppState,
    method: &Method,
    path: &str,
    body: &[u8],
    user: &str,
) -> AdminResult {
    debug_assert!(route(method, path));
    let route = path.strip_prefix("/v1").unwrap_or(path);
    checked(state, route, body, user).await
}

async fn checked(state: &AppState, route: &str, body: &[u8], user: &str) -> AdminResult {
    let Some(services) = state.store() else {
        return Err(ApiError::StoreUnavailable);
    };
    let store = &services.store;
    let mut map: Map<String, Value> = if body.iter().all(u8::is_ascii_whitespace) {
        Map::new()
    } else {
        serde_json::from_slice(body).map_err(|e| ApiError::InvalidJson(e.to_string()))?
    };
    let named_user = map.get("user_id").and_then(Value::as_str);
    if named_user.is_some_and(|u| u != user) {
        return Err(ApiError::NotPermitted(
            "a user's key may make and change keys only for its own user",
        ));
    }
    // Settings that widen what a key reaches stay the admin's: a cache namespace shared on
    // purpose (`metadata.cache`) and MCP permissions (`object_permission`).
    let widens = map.get("object_permission").is_some_and(|v| !v.is_null())
        || map
            .get("metadata")
            .and_then(Value::as_object)
            .is_some_and(|m| m.contains_key("cache"));
    if widens {
        return Err(ApiError::NotPermitted(
            "`object_permission` and `metadata.cache` on a key need the master key",
        ));
    }
    if let Some(team) = map.get("team_id").and_then(Value::as_str) {
        let members = store.team_members(team).await.map_err(store_error)?;
        if !members.iter().any(|m| m.user_id == user) {
            return Err(ApiError::NotPermitted(
                "a user's key may make keys only for a team its user is in",
            ));
        }
    }
    let owned = |given: &str| {
        let store = store.clone();
        let given = given.to_owned();
        async move {
            let row = store.key(&key_ref(&given)).await.map_err(store_error)?;
            match row {
                Some(k) if k.user_id.as_deref() == Some(user) => Ok(()),
                // Another user's key, or none: the same answer, so keys cannot be probed.
                _ => Err(ApiError::NotPermitted(
                    "a user's key may change and delete only its own user's keys",
                )),
            }
        }
    };
    match route {
        "/key/generate" => {
            map.insert("user_id".into(), user.into());
        }
        "/key/update" => {
            let key = map.get("key").and_then(Value::as_str).unwrap_or_default();
            owned(key).await?;
        }
        _ => {
            if map.get("key_aliases").is_some_and(|v| !v.is_null()) {
                return Err(ApiError::NotPermitted(
                    "a user's key deletes keys by `keys`, not by alias",
                ));
            }
            let keys: Vec<String> = map
                .get("keys")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|k| k.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            for k in &keys {
                owned(k).await?;
            }
        }
    }
    let body = serde_json::to_vec(&map).map_err(|_| ApiError::Internal("admin body"))?;
    call(
        state,
        &Method::POST,
        route,
        "",
        &body,
        &format!("user:{user}"),
    )
    .await
}
