//! Sessions across a fleet: what `/mcp` tells the fleet (`crate::fleet::Fleet::share_session`)
//! when a session opens or ends, and how an instance adopts a session another opened. Without a
//! fleet every function here is a no-op and sessions are the instance's own.

use std::sync::Arc;

use super::sessions::{Owner, Session};
use super::McpGateway;
use crate::server::AppState;

/// How Redis names who opened a session.
fn owner_text(owner: &Owner) -> String {
    match owner {
        Owner::Open => "open".to_owned(),
        Owner::Master => "master".to_owned(),
        Owner::Key(hash) => format!("key:{hash}"),
    }
}

/// How Redis holds who opened a session and for which view: `<owner>|<server or empty>`.
fn holder(owner: &Owner, scope: Option<&str>) -> String {
    format!("{}|{}", owner_text(owner), scope.unwrap_or(""))
}

/// Tell the fleet about a session just opened here.
pub(super) async fn opened(state: &AppState, id: &str, owner: &Owner, scope: Option<&str>) {
    if let Some(fleet) = state.fleet() {
        fleet.share_session(id, &holder(owner, scope)).await;
    }
}

/// A session this instance does not hold: adopted when the fleet knows it as opened by the
/// same owner for the same view (anyone else gets nothing, as for an unknown id).
pub(super) async fn adopt(
    state: &AppState,
    gw: &McpGateway,
    id: &str,
    owner: &Owner,
    scope: Option<&str>,
    now_ms: u64,
) -> Option<Arc<Session>> {
    let fleet = state.fleet()?;
    let shared = fleet.shared_session(id).await?;
    (shared == holder(owner, scope)).then(|| gw.sessions.adopt(id, owner.clone(), scope, now_ms))
}

/// `DELETE` of a session: ended here if it is here, and in the fleet if the fleet holds it for
/// the same owner (whichever instance opened it). Whether it existed.
pub(super) async fn close(state: &AppState, gw: &McpGateway, id: &str, owner: &Owner) -> bool {
    let here = gw.sessions.close(id, owner);
    let Some(fleet) = state.fleet() else {
        return here;
    };
    let mine = owner_text(owner);
    let shared = fleet
        .shared_session(id)
        .await
        .is_some_and(|h| h.split_once('|').is_some_and(|(o, _)| o == mine));
    if here || shared {
        fleet.end_session(id).await;
    }
    here || shared
}

/// Drop this instance's copy of a session another instance ended (its calls here are
/// cancelled).
pub(crate) fn ended_elsewhere(state: &AppState, id: &str) {
    if let Some(gw) = state.snapshot().features.mcp.as_ref() {
        gw.sessions.forget(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holders_name_owner_and_view() {
        assert_eq!(holder(&Owner::Key("ab".into()), Some("gh")), "key:ab|gh");
        assert_eq!(holder(&Owner::Master, None), "master|");
        assert_ne!(holder(&Owner::Open, None), holder(&Owner::Open, Some("x")));
    }
}
