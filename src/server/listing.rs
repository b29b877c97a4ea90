//! The model list routes: OpenAI's `/v1/models`, LiteLLM's access-group listing and Google's
//! `models.list` / `models.get`, each as the caller may see it.

use bytes::Bytes;
use http::request::Parts;
use http::{HeaderMap, Response, StatusCode};

use sluice_core::error::ApiError;
use sluice_core::limits;
use sluice_routing as routing;

use super::state::{model_object, AppState, Snapshot};
use crate::auth::addresses::client_of;
use crate::auth::{Caller, Wanted};
use crate::http::{json, ResponseBody};

/// How a model list is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ModelsShape {
    /// OpenAI's `{"object": "list", "data": [...]}`.
    OpenAi,
    /// LiteLLM's `?only_model_access_groups=True`: the access groups, as OpenAI's models.
    AccessGroups,
    /// Google's `{"models": [...]}` (the google-genai SDK's `models.list` / `models.get`).
    Google,
}

/// The model list in Google's shape, for google-genai's `models.list` / `models.get`: its key
/// where Google's clients send it.
pub(super) async fn google_models(
    state: &AppState,
    snap: &Snapshot,
    head: &Parts,
    one: Option<&str>,
) -> Result<Response<ResponseBody>, ApiError> {
    let mut headers = head.headers.clone();
    super::vendor_clients::key_header(&mut headers, head.uri.query());
    let caller = (&headers, client_of(&head.extensions));
    models(state, snap, caller, one, ModelsShape::Google).await
}

/// `GET /v1/models` (`one: None`) and `GET /v1/models/{id}`: for the master key (or an open
/// gateway) every model group, prebuilt; for a virtual key the groups the access rule lets it
/// use (a blocked or expired key is refused as on any inference route), so that front-ends
/// that list models first work with the keys they are given and show only what will answer.
pub(super) async fn models(
    state: &AppState,
    snap: &Snapshot,
    (headers, client): (&HeaderMap, Option<std::net::IpAddr>),
    one: Option<&str>,
    shape: ModelsShape,
) -> Result<Response<ResponseBody>, ApiError> {
    let wall = limits::wall_ms();
    let caller = state
        .gate()
        // Every model list route is one of the OpenAI API's (`openai_routes`).
        .authenticate(snap.master.as_ref(), headers, (client, "/v1/models"), wall)
        .await?;
    let table = &snap.router.models;
    let key = match &caller {
        Caller::Key(k) => {
            state.gate().directory().usable(k, wall)?;
            Some(k)
        }
        Caller::Open | Caller::Master => None,
    };
    let directory = state.gate().directory();
    // Asked by the name listed (a group's, or an alias's), as a request by that name is.
    let may_use = |name: &str, group: &routing::Group| {
        key.is_none_or(|k| directory.may_use(k, &Wanted::of(name, group)).is_ok())
    };
    if let Some(id) = one {
        let not_found = || ApiError::ModelNotFound(id.chars().take(256).collect());
        let group = table
            .named(id)
            .filter(|g| may_use(id, g))
            .ok_or_else(not_found)?;
        let body = match shape {
            ModelsShape::Google => super::vendor_clients::model_object(id),
            ModelsShape::OpenAi | ModelsShape::AccessGroups => {
                model_object(id, group, snap.created)
            }
        };
        return Ok(json(StatusCode::OK, Bytes::from(body.to_string())));
    }
    if shape == ModelsShape::Google {
        let models: Vec<_> = table
            .listed()
            .filter(|(name, g)| may_use(name, g))
            .map(|(name, _)| super::vendor_clients::model_object(name))
            .collect();
        let body = serde_json::json!({ "models": models }).to_string();
        return Ok(json(StatusCode::OK, Bytes::from(body)));
    }
    if shape == ModelsShape::AccessGroups {
        // LiteLLM's `?only_model_access_groups=True`: the access groups (`model_info.
        // access_groups`) of the groups the caller may use, as model objects.
        let mut names: Vec<&str> = Vec::new();
        for (_, g) in table.listed().filter(|(name, g)| may_use(name, g)) {
            for m in g.members() {
                for a in m.access_groups.iter() {
                    if !names.contains(&&**a) {
                        names.push(a);
                    }
                }
            }
        }
        let data: Vec<_> = names
            .iter()
            .map(|n| serde_json::json!({"id": n, "object": "model", "created": snap.created, "owned_by": "sluice"}))
            .collect();
        let body = serde_json::json!({ "object": "list", "data": data }).to_string();
        return Ok(json(StatusCode::OK, Bytes::from(body)));
    }
    if key.is_none() {
        return Ok(json(StatusCode::OK, snap.models_json.clone()));
    }
    let data: Vec<_> = table
        .listed()
        .filter(|(name, g)| may_use(name, g))
        .map(|(name, g)| model_object(name, g, snap.created))
        .collect();
    let body = serde_json::json!({ "object": "list", "data": data }).to_string();
    Ok(json(StatusCode::OK, Bytes::from(body)))
}
