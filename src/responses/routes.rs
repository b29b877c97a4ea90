//! The routes of kept state: `GET` / `DELETE /v1/responses/{id}`, `GET .../input_items`,
//! `POST .../cancel`, and the Conversations API (`/v1/conversations`, its items). The caller
//! sees only what its own key made (the master key sees everything); another key's is not
//! found.

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body::Body;
use serde_json::{json, Value};

use sluice_core::error::ApiError;

use super::conversations;
use super::items::{self, Query};
use super::kept::{not_found, store_error, Keeping, Owner};
use crate::auth::Caller;
use crate::http::ResponseBody;
use crate::http::{json as json_response, read_body};
use crate::server::steps::{self, Authenticated, Presented};
use crate::server::{AppState, Snapshot};

/// Which of the routes a path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `/v1/responses/{id}`
    Response,
    /// `/v1/responses/{id}/input_items`
    InputItems,
    /// `/v1/responses/{id}/cancel`
    Cancel,
    /// `/v1/conversations`
    Conversations,
    /// `/v1/conversations/{id}`
    Conversation,
    /// `/v1/conversations/{id}/items`
    Items,
    /// `/v1/conversations/{id}/items/{item}`
    Item,
}

impl Op {
    /// The route a path (without `/v1`) is, with its ids.
    fn parse(bare: &str) -> Option<(Self, Vec<&str>)> {
        let parts: Vec<&str> = bare.trim_start_matches('/').split('/').collect();
        if parts.iter().skip(1).any(|p| p.is_empty()) {
            return None;
        }
        let op = match parts.as_slice() {
            ["responses", _] => Self::Response,
            ["responses", _, "input_items"] => Self::InputItems,
            ["responses", _, "cancel"] => Self::Cancel,
            ["conversations"] => Self::Conversations,
            ["conversations", _] => Self::Conversation,
            ["conversations", _, "items"] => Self::Items,
            ["conversations", _, "items", _] => Self::Item,
            _ => return None,
        };
        let ids = match op {
            Self::Conversations => Vec::new(),
            Self::Item => vec![parts[1], parts[3]],
            _ => vec![parts[1]],
        };
        Some((op, ids))
    }

    /// The route a path (without `/v1`) is.
    pub fn of(bare: &str) -> Option<Self> {
        Self::parse(bare).map(|(op, _)| op)
    }

    /// Stable label for logs and metrics.
    pub fn label(self) -> &'static str {
        match self {
            Self::Response => "/v1/responses/{id}",
            Self::InputItems => "/v1/responses/{id}/input_items",
            Self::Cancel => "/v1/responses/{id}/cancel",
            Self::Conversations => "/v1/conversations",
            Self::Conversation => "/v1/conversations/{id}",
            Self::Items => "/v1/conversations/{id}/items",
            Self::Item => "/v1/conversations/{id}/items/{item}",
        }
    }
}

/// Serve one of the routes.
pub(crate) async fn handle<B>(
    state: &AppState,
    snap: &Snapshot,
    req: Request<B>,
) -> Result<Response<ResponseBody>, ApiError>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let Authenticated { caller, wall } =
        steps::authenticate(state, snap, Presented::by(&req)).await?;
    if let Caller::Key(k) = &caller {
        state.gate().directory().usable(k, wall)?;
    }
    let owner = Owner::of(&caller);
    let (parts, body) = req.into_parts();
    let path = parts.uri.path();
    let bare = path.strip_prefix("/v1").unwrap_or(path);
    let not_route = || ApiError::RouteNotFound {
        method: parts.method.to_string(),
        path: path.chars().take(200).collect(),
    };
    let (op, ids) = Op::parse(bare).ok_or_else(not_route)?;
    let (Some(keeping), Some(store)) = (snap.features.responses.as_deref(), state.store()) else {
        return Err(ApiError::InvalidParam {
            param: "store",
            message: "this gateway keeps no responses or conversations: that needs a database \
                      and general_settings.master_key (or LITELLM_SALT_KEY)"
                .into(),
        });
    };
    let store = &store.store;
    let query = parts.uri.query();
    let method = &parts.method;
    let read = || async {
        let bytes = read_body(body, &parts.headers, snap.max_body, snap.body_timeout).await?;
        if bytes.is_empty() {
            return Ok(json!({}));
        }
        serde_json::from_slice::<Value>(&bytes).map_err(|e| ApiError::InvalidJson(e.to_string()))
    };
    let answer = match (op, method) {
        (Op::Response, &Method::GET) => kept(keeping, store, &owner, ids[0])
            .await?
            .get_mut("response")
            .map(Value::take)
            .unwrap_or_default(),
        (Op::Response, &Method::DELETE) => {
            kept(keeping, store, &owner, ids[0]).await?;
            store.delete_response(ids[0]).await.map_err(store_error)?;
            json!({"id": ids[0], "object": "response", "deleted": true})
        }
        (Op::InputItems, &Method::GET) => {
            let mut v = kept(keeping, store, &owner, ids[0]).await?;
            let input = match v.get_mut("input").map(Value::take) {
                Some(Value::Array(items)) => items,
                _ => Vec::new(),
            };
            items::page(input, &Query::parse(query, true)?)
        }
        (Op::Cancel, &Method::POST) => {
            let row = keeping
                .response(store, ids[0])
                .await?
                .filter(|r| owner.reads(r.owner_key.as_deref()))
                .ok_or_else(|| not_found("response", ids[0]))?;
            super::background::cancel(state, keeping, store, row).await?
        }
        (Op::Conversations, &Method::POST) => {
            conversations::create(keeping, store, &owner, &read().await?).await?
        }
        (Op::Conversation, &Method::GET) => conversations::get(store, &owner, ids[0]).await?,
        (Op::Conversation, &Method::POST) => {
            conversations::update(store, &owner, ids[0], &read().await?).await?
        }
        (Op::Conversation, &Method::DELETE) => conversations::delete(store, &owner, ids[0]).await?,
        (Op::Items, &Method::GET) => {
            let q = Query::parse(query, true)?;
            conversations::list(keeping, store, &owner, ids[0], &q).await?
        }
        (Op::Items, &Method::POST) => {
            conversations::add(keeping, store, &owner, ids[0], &read().await?).await?
        }
        (Op::Item, &Method::GET) => {
            conversations::item(keeping, store, &owner, ids[0], ids[1]).await?
        }
        (Op::Item, &Method::DELETE) => {
            conversations::delete_item(store, &owner, ids[0], ids[1]).await?
        }
        _ => return Err(ApiError::MethodNotAllowed(method.to_string())),
    };
    Ok(json_response(
        StatusCode::OK,
        Bytes::from(answer.to_string()),
    ))
}

/// A kept answer the caller may read, opened: `{"input": [...], "response": {...}}`.
async fn kept(
    keeping: &Keeping,
    store: &sluice_store::Store,
    owner: &Owner,
    id: &str,
) -> Result<Value, ApiError> {
    let row = keeping
        .response(store, id)
        .await?
        .filter(|r| owner.reads(r.owner_key.as_deref()))
        .ok_or_else(|| not_found("response", id))?;
    keeping.open(&row.sealed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_the_route_and_its_ids() {
        assert_eq!(
            Op::parse("/responses/resp_1"),
            Some((Op::Response, vec!["resp_1"]))
        );
        assert_eq!(
            Op::parse("/responses/resp_1/input_items"),
            Some((Op::InputItems, vec!["resp_1"]))
        );
        assert_eq!(
            Op::parse("/conversations"),
            Some((Op::Conversations, vec![]))
        );
        assert_eq!(
            Op::parse("/conversations/conv_1/items/msg_2"),
            Some((Op::Item, vec!["conv_1", "msg_2"]))
        );
        assert_eq!(Op::parse("/responses"), None);
        assert_eq!(Op::parse("/responses//cancel"), None);
        assert_eq!(Op::parse("/conversations/c/other"), None);
    }
}
