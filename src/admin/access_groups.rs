//! LiteLLM's model access groups as objects (`/access_group/new`, `/list`,
//! `/{name}/info`, `/{name}/update`, `/{name}/delete`): a named set of model groups that a
//! key's, team's or user's `models` list may name. A group lives where LiteLLM keeps it, in
//! each member deployment's `model_info.access_groups`; the routes change the stored
//! deployments (`store_model_in_db`) through `/model/update`'s path, so each change is checked,
//! served at once, announced to the fleet and audited like any other. The config file's
//! deployments are listed but not changed (edit the file), as in LiteLLM.

use http::Method;
use serde_json::{json, Map, Value};

use sluice_core::error::ApiError;

use super::models::{runtime, update};
use super::{body_object, store_error, AdminRequest, AdminResult};
use crate::server::{AppState, Snapshot};

/// Serves an `/access_group/…` route, or `None` for any other path.
pub(super) async fn handle(
    state: &AppState,
    method: &Method,
    path: &str,
    body: &[u8],
    by: &str,
) -> Option<AdminResult> {
    let rest = path.strip_prefix("/access_group/")?;
    let (want, answer) = match rest {
        "new" => (Method::POST, None),
        "list" => (Method::GET, None),
        _ => {
            let (name, op) = rest.rsplit_once('/')?;
            let want = match op {
                "info" => Method::GET,
                "update" => Method::PUT,
                "delete" => Method::DELETE,
                _ => return None,
            };
            (want, Some((name, op)))
        }
    };
    if *method != want {
        return Some(Err(ApiError::MethodNotAllowed(method.to_string())));
    }
    let req = AdminRequest { query: "", body };
    Some(match (rest, answer) {
        ("new", _) => new(state, req, by).await,
        ("list", _) => Ok(json!({ "access_groups": groups(state, None) })),
        (_, Some((name, "info"))) => info(state, name),
        (_, Some((name, "update"))) => change(state, name, Some(req), by).await,
        (_, Some((name, _))) => change(state, name, None, by).await,
        _ => Err(ApiError::Internal("access group route")),
    })
}

/// The names of the access groups the deployments served carry, in name order (what the
/// console's model pickers offer beside the model groups).
pub(crate) fn names(snap: &Snapshot) -> Vec<String> {
    found(snap, None)
        .into_iter()
        .map(|(name, _, _)| name)
        .collect()
}

/// Every access group of the deployments served (or just `only`): its model groups and how
/// many deployments carry it, in name order.
fn groups(state: &AppState, only: Option<&str>) -> Vec<Value> {
    found(&state.snapshot(), only)
        .into_iter()
        .map(|(name, mut models, count)| {
            models.sort();
            json!({"access_group": name, "model_names": models, "deployment_count": count})
        })
        .collect()
}

/// Each access group (or just `only`): its name, model groups and deployment count.
fn found(snap: &Snapshot, only: Option<&str>) -> Vec<(String, Vec<String>, u64)> {
    let mut found: Vec<(String, Vec<String>, u64)> = Vec::new();
    for d in &snap.deployments {
        let model = d["model_name"].as_str().unwrap_or_default();
        let names = d["model_info"]["access_groups"].as_array();
        for g in names.into_iter().flatten().filter_map(Value::as_str) {
            if only.is_some_and(|o| o != g) {
                continue;
            }
            let at = match found.iter().position(|(n, _, _)| n == g) {
                Some(at) => at,
                None => {
                    found.push((g.to_owned(), Vec::new(), 0));
                    found.len() - 1
                }
            };
            let entry = &mut found[at];
            if !entry.1.iter().any(|m| m == model) {
                entry.1.push(model.to_owned());
            }
            entry.2 += 1;
        }
    }
    found.sort_by(|a, b| a.0.cmp(&b.0));
    found
}

fn info(state: &AppState, name: &str) -> AdminResult {
    groups(state, Some(name))
        .into_iter()
        .next()
        .ok_or_else(|| ApiError::NotFound {
            what: "access group",
            id: name.to_owned(),
        })
}

/// What a body names: the group's members by model group (`model_names`) or by deployment
/// (`model_ids`, which wins, as in LiteLLM); at least one of them.
struct Members {
    names: Option<Vec<String>>,
    ids: Option<Vec<String>>,
}

fn members(map: &Map<String, Value>) -> Result<Members, ApiError> {
    let list = |field: &'static str| -> Result<Option<Vec<String>>, ApiError> {
        match map.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(a)) => a
                .iter()
                .map(|v| v.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .map(|v| Some(v).filter(|v| !v.is_empty()))
                .ok_or(ApiError::InvalidParam {
                    param: field,
                    message: "expected a list of names".into(),
                }),
            Some(_) => Err(ApiError::InvalidParam {
                param: field,
                message: "expected a list of names".into(),
            }),
        }
    };
    let m = Members {
        names: list("model_names")?,
        ids: list("model_ids")?,
    };
    if m.names.is_none() && m.ids.is_none() {
        return Err(ApiError::MissingParam("model_names"));
    }
    Ok(m)
}

/// `POST /access_group/new`: `{"access_group", "model_names" | "model_ids"}`; 409 when the
/// name is taken.
async fn new(state: &AppState, req: AdminRequest<'_>, by: &str) -> AdminResult {
    let map = body_object(&req, &[&["access_group", "model_names", "model_ids"]])?;
    let name = map
        .get("access_group")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .ok_or(ApiError::MissingParam("access_group"))?
        .to_owned();
    let wanted = members(&map)?;
    if !groups(state, Some(&name)).is_empty() {
        return Err(ApiError::Conflict(format!("access group `{name}`")));
    }
    let updated = set(state, &name, Some(&wanted), by).await?;
    Ok(json!({
        "access_group": name,
        "model_names": wanted.names,
        "model_ids": wanted.ids,
        "models_updated": updated,
    }))
}

/// `PUT /access_group/{name}/update` (new members) and `DELETE /access_group/{name}/delete`
/// (`req` none): 404 for a group no deployment carries.
async fn change(
    state: &AppState,
    name: &str,
    req: Option<AdminRequest<'_>>,
    by: &str,
) -> AdminResult {
    let wanted = match &req {
        Some(r) => Some(members(&body_object(r, &[&["model_names", "model_ids"]])?)?),
        None => None,
    };
    info(state, name)?;
    let updated = set(state, name, wanted.as_ref(), by).await?;
    Ok(match wanted {
        Some(w) => json!({
            "access_group": name,
            "model_names": w.names,
            "model_ids": w.ids,
            "models_updated": updated,
        }),
        None => json!({ "access_group": name, "models_updated": updated }),
    })
}

/// Makes `name` the access group of exactly the stored deployments `wanted` names (none:
/// of no deployment), through `/model/update`; returns how many deployments changed. A model
/// group or id with no stored deployment is a 400 naming it, before anything changes.
async fn set(
    state: &AppState,
    name: &str,
    wanted: Option<&Members>,
    by: &str,
) -> Result<u64, ApiError> {
    let rt = runtime(state)?;
    let stored = rt.store().models().await.map_err(store_error)?;
    let chosen = |id: &str, model: &str| match wanted {
        None => false,
        Some(Members { ids: Some(ids), .. }) => ids.iter().any(|i| i == id),
        Some(Members {
            names: Some(names), ..
        }) => names.iter().any(|n| n == model),
        Some(_) => false,
    };
    if let Some(w) = wanted {
        let missing: Vec<&str> = match (&w.ids, &w.names) {
            (Some(ids), _) => ids
                .iter()
                .filter(|i| !stored.iter().any(|r| r.model_id == **i))
                .map(String::as_str)
                .collect(),
            (None, Some(names)) => names
                .iter()
                .filter(|n| !stored.iter().any(|r| r.model_name == **n))
                .map(String::as_str)
                .collect(),
            (None, None) => Vec::new(),
        };
        if !missing.is_empty() {
            return Err(ApiError::InvalidParam {
                param: if w.ids.is_some() {
                    "model_ids"
                } else {
                    "model_names"
                },
                message: format!(
                    "no stored deployment for {} (access groups change deployments added with \
                     /model/new; the config file's are changed in the file)",
                    missing.join(", ")
                ),
            });
        }
    }
    let mut updated = 0;
    for row in &stored {
        let mut list: Vec<String> = row.model_info["access_groups"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        let has = list.iter().any(|g| g == name);
        let wants = chosen(&row.model_id, &row.model_name);
        if has == wants {
            continue;
        }
        if wants {
            list.push(name.to_owned());
        } else {
            list.retain(|g| g != name);
        }
        let body = json!({ "model_info": { "access_groups": list } }).to_string();
        let req = AdminRequest {
            query: "",
            body: body.as_bytes(),
        };
        update(state, req, Some(&row.model_id), by).await?;
        updated += 1;
    }
    Ok(updated)
}
