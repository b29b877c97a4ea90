//! LiteLLM's model management API: `GET /model/info` (and `/v1/model/info`) lists every
//! deployment served, the file's and the stored ones; with `store_model_in_db`,
//! `POST /model/new`, `POST /model/update` (or `PATCH /model/{id}/update`) and
//! `POST /model/delete` change the stored ones. A change is checked by loading the whole
//! config with it (the same validation as the file's), written, served on this instance
//! before the answer, and announced to the fleet; every change goes to the audit log with
//! its keys masked.

use http::Method;
use serde_json::{json, Map, Value};
use time::OffsetDateTime;

use sluice_core::error::ApiError;
use sluice_store::ModelRow;

use super::answers::models::{DeploymentInfo, ModelInfoList, StoredModel};
use super::{
    audit, body_object, json, query_pairs, query_value, store_error, AdminRequest, AdminResult,
};
use crate::auth::{KeyEntry, Wanted};
use crate::models::RuntimeModels;
use crate::server::{AppState, Snapshot};

/// Fields of `/model/new` and `/model/update` bodies.
const FIELDS: &[&str] = &["model_name", "litellm_params", "model_info"];

/// `litellm_params` names whose values are credentials (a `*_key` or `*_token` name is too).
const SECRET_PARAMS: &[&str] = &[
    "aws_secret_access_key",
    "vertex_credentials",
    "client_secret",
    "password",
];

/// Serves a model route (`path` normalised: no `/v1`), or `None` for any other path.
pub(super) async fn handle(
    state: &AppState,
    method: &Method,
    path: &str,
    query: &str,
    body: &[u8],
    by: &str,
) -> Option<AdminResult> {
    let req = AdminRequest { query, body };
    let patched = path
        .strip_prefix("/model/")
        .and_then(|rest| rest.strip_suffix("/update"))
        .filter(|id| !id.is_empty() && !id.contains('/'));
    if let Some(id) = patched {
        return Some(if *method == Method::PATCH {
            json(update(state, req, Some(id), by)).await
        } else {
            Err(ApiError::MethodNotAllowed(method.to_string()))
        });
    }
    let want = match path {
        "/model/info" | "/v2/model/info" | "/model_group/info" => Method::GET,
        "/model/new" | "/model/update" | "/model/delete" => Method::POST,
        _ => return None,
    };
    if *method != want {
        return Some(Err(ApiError::MethodNotAllowed(method.to_string())));
    }
    Some(match path {
        "/model/info" => json(info(state, req)).await,
        "/v2/model/info" => info_v2(state, req, None),
        "/model_group/info" => group_info(state, req, None),
        "/model/new" => json(new(state, req, by)).await,
        "/model/update" => json(update(state, req, None, by)).await,
        _ => delete(state, req, by).await,
    })
}

/// The run-time deployments, or why there are none.
pub(super) fn runtime(state: &AppState) -> Result<&RuntimeModels, ApiError> {
    state.runtime().map(|r| &**r).ok_or_else(|| {
        ApiError::InvalidDeployment(
            "deployments are changed at run time only with general_settings.store_model_in_db: \
             true (or STORE_MODEL_IN_DB=True); without it, change the config file and reload"
                .into(),
        )
    })
}

/// The deployments served, as `/model/info` lists them (without the stored ones' authors):
/// the snapshot's descriptions, each read as its typed entry.
pub(crate) fn listed(snap: &Snapshot) -> Result<Vec<DeploymentInfo>, ApiError> {
    snap.deployments
        .iter()
        .map(|d| {
            serde_json::from_value(d.clone()).map_err(|e| {
                tracing::error!(error = %e, "a deployment's description is not /model/info's entry");
                ApiError::Internal("deployment description")
            })
        })
        .collect()
}

/// `GET /model/info?litellm_model_id=`: `{"data": [...]}`, one object per deployment, keys
/// masked; stored ones carry who made and last changed them.
pub(crate) async fn info(
    state: &AppState,
    req: AdminRequest<'_>,
) -> Result<ModelInfoList, ApiError> {
    let q = query_pairs(&req, &["litellm_model_id"])?;
    let only = query_value(&q, "litellm_model_id");
    let stored: Vec<ModelRow> = match state.runtime() {
        Some(rt) => rt.store().models().await.map_err(store_error)?,
        None => Vec::new(),
    };
    let mut data = listed(&state.snapshot())?;
    data.retain(|d| only.is_none_or(|id| d.model_info.id == id));
    for d in &mut data {
        if let Some(row) = stored.iter().find(|r| r.model_id == d.model_info.id) {
            d.model_info.stamp(row);
        }
    }
    Ok(ModelInfoList { data })
}

/// A stored deployment as `/model/new` and `/model/update` answer it: its own parameters (as
/// stored, keys masked), for the console's edit form; not found without `store_model_in_db`
/// or for a file's deployment.
pub(crate) async fn stored(state: &AppState, id: &str) -> Result<StoredModel, ApiError> {
    let not_found = || ApiError::NotFound {
        what: "stored deployment",
        id: id.chars().take(128).collect(),
    };
    let rt = state.runtime().ok_or_else(not_found)?;
    let row = rt
        .store()
        .model(id)
        .await
        .map_err(store_error)?
        .ok_or_else(not_found)?;
    Ok(answer(&row, &params_of(rt, &row)))
}

/// The model reads a virtual key may make (LiteLLM's self-service): `GET /model/info`,
/// `/v2/model/info` and `/model_group/info`, showing only the groups the key may use and no
/// provider key, masked or not. `None` for any other route.
pub fn key_read(
    state: &AppState,
    method: &Method,
    path: &str,
    query: &str,
    key: &KeyEntry,
) -> Option<AdminResult> {
    let route = path.strip_prefix("/v1").unwrap_or(path);
    if !matches!(
        route,
        "/model/info" | "/v2/model/info" | "/model_group/info"
    ) {
        return None;
    }
    if *method != Method::GET {
        return Some(Err(ApiError::MethodNotAllowed(method.to_string())));
    }
    let req = AdminRequest { query, body: &[] };
    Some(match route {
        "/model_group/info" => group_info(state, req, Some(key)),
        _ => info_v2(state, req, Some(key)),
    })
}

/// Whether `viewer` (none: the master key) may see the group named `name`.
fn visible(state: &AppState, viewer: Option<&KeyEntry>, name: &str) -> bool {
    let Some(key) = viewer else { return true };
    let snap = state.snapshot();
    let Some(resolved) = snap.router.models.resolve(name) else {
        return false;
    };
    state
        .gate()
        .directory()
        .may_use(key, &Wanted::of(name, resolved.group))
        .is_ok()
}

/// The deployments `viewer` may see, as `/model/info` shows them; a key's view without
/// provider keys.
fn deployments_for(state: &AppState, viewer: Option<&KeyEntry>, model: Option<&str>) -> Vec<Value> {
    let snap = state.snapshot();
    snap.deployments
        .iter()
        .filter(|d| {
            let name = d["model_name"].as_str().unwrap_or_default();
            model.is_none_or(|m| m == name) && visible(state, viewer, name)
        })
        .map(|d| {
            let mut d = d.clone();
            if viewer.is_some() {
                if let Some(p) = d["litellm_params"].as_object_mut() {
                    p.retain(|k, _| !is_secret(k));
                }
            }
            d
        })
        .collect()
}

/// `GET /v2/model/info`: `/model/info`'s deployments, for the master key every one (no
/// store details), for a key those of its groups; `model` narrows it to one group.
fn info_v2(state: &AppState, req: AdminRequest<'_>, viewer: Option<&KeyEntry>) -> AdminResult {
    let q = query_pairs(
        &req,
        &[
            "model",
            "litellm_model_id",
            "user_models_only",
            "include_team_models",
            "debug",
            "page",
            "size",
            "search",
        ],
    )?;
    let mut data = deployments_for(state, viewer, query_value(&q, "model"));
    if let Some(id) = query_value(&q, "litellm_model_id") {
        data.retain(|d| d["model_info"]["id"] == id);
    }
    let total = data.len();
    Ok(json!({ "data": data, "total_count": total }))
}

/// `GET /model_group/info`: one entry per model group (LiteLLM's `ModelGroupInfo`): its
/// providers, mode, prices and limits summed over its deployments; `model_group` narrows it.
fn group_info(state: &AppState, req: AdminRequest<'_>, viewer: Option<&KeyEntry>) -> AdminResult {
    let q = query_pairs(&req, &["model_group"])?;
    let only = query_value(&q, "model_group");
    let mut groups: Vec<(String, Vec<Value>)> = Vec::new();
    // Every deployment, then the caller's view: a wildcard group by each model it serves.
    for d in deployments_for(state, None, None) {
        let name = d["model_name"].as_str().unwrap_or_default().to_owned();
        if !name.contains('*') && !visible(state, viewer, &name) {
            continue;
        }
        match groups.iter_mut().find(|(n, _)| *n == name) {
            Some((_, list)) => list.push(d),
            None => groups.push((name, vec![d])),
        }
    }
    let mut groups = expand_wildcards(state, viewer, groups);
    if let Some(only) = only {
        groups.retain(|(name, _)| name == only);
    }
    let data: Vec<Value> = groups
        .into_iter()
        .map(|(name, list)| {
            let mut providers: Vec<&str> = Vec::new();
            let (mut tpm, mut rpm) = (None::<u64>, None::<u64>);
            for d in &list {
                if let Some(p) = d["model_info"]["litellm_provider"].as_str() {
                    if !providers.contains(&p) {
                        providers.push(p);
                    }
                }
                let sum = |acc: Option<u64>, v: &Value| match (acc, v.as_u64()) {
                    (a, None) => a,
                    (None, Some(v)) => Some(v),
                    (Some(a), Some(v)) => Some(a.saturating_add(v)),
                };
                tpm = sum(tpm, &d["litellm_params"]["tpm"]);
                rpm = sum(rpm, &d["litellm_params"]["rpm"]);
            }
            let first = &list[0]["model_info"];
            json!({
                "model_group": name,
                "providers": providers,
                "mode": first["mode"].as_str().unwrap_or("chat"),
                "input_cost_per_token": first["input_cost_per_token"],
                "output_cost_per_token": first["output_cost_per_token"],
                "max_input_tokens": first["max_input_tokens"],
                "max_output_tokens": first["max_output_tokens"],
                "tpm": tpm,
                "rpm": rpm,
                "access_groups": first["access_groups"],
                "is_public_model_group": false,
            })
        })
        .collect();
    Ok(json!({ "data": data }))
}

/// Each wildcard group (`anthropic/*`) as the models it serves, as LiteLLM lists them: every
/// model the price table knows for the group's provider that its upstream pattern matches,
/// under the name a client asks for (`anthropic/claude-…`), those `viewer` may use.
fn expand_wildcards(
    state: &AppState,
    viewer: Option<&KeyEntry>,
    groups: Vec<(String, Vec<Value>)>,
) -> Vec<(String, Vec<Value>)> {
    let snap = state.snapshot();
    let prices = snap.pass_through.prices();
    let mut out = Vec::with_capacity(groups.len());
    for (name, list) in groups {
        let Some((prefix, suffix)) = name.split_once('*') else {
            out.push((name, list));
            continue;
        };
        let first = &list[0];
        let provider = first["model_info"]["litellm_provider"]
            .as_str()
            .unwrap_or_default();
        let upstream = first["litellm_params"]["model"]
            .as_str()
            .unwrap_or_default();
        let pattern = upstream
            .strip_prefix(provider)
            .and_then(|p| p.strip_prefix('/'))
            .unwrap_or(upstream);
        let (up_prefix, up_suffix) = pattern.split_once('*').unwrap_or((pattern, ""));
        for model in prices.models_of(provider) {
            let Some(capture) = model
                .strip_prefix(up_prefix)
                .and_then(|m| m.strip_suffix(up_suffix))
                .filter(|c| !c.is_empty())
            else {
                continue;
            };
            let public = format!("{prefix}{capture}{suffix}");
            // A name another group serves first is that group's, listed as itself.
            let served_here = snap
                .router
                .models
                .resolve(&public)
                .is_some_and(|r| *r.group.name == *name);
            if !served_here || !visible(state, viewer, &public) {
                continue;
            }
            let price = prices.get(model);
            let entries = list
                .iter()
                .map(|d| {
                    let mut d = d.clone();
                    if let (Some(p), Some(info)) = (price, d["model_info"].as_object_mut()) {
                        info.insert("input_cost_per_token".into(), p.input.into());
                        info.insert("output_cost_per_token".into(), p.output.into());
                    }
                    d
                })
                .collect();
            out.push((public, entries));
        }
    }
    out
}

/// A `model_list` entry from a body: `model_name`, `litellm_params` (an object with `model`),
/// `model_info` (an object).
struct Body {
    model_name: Option<String>,
    params: Option<Map<String, Value>>,
    info: Map<String, Value>,
}

fn read_body(req: &AdminRequest<'_>) -> Result<Body, ApiError> {
    let mut map = body_object(req, &[FIELDS])?;
    let model_name = match map.remove("model_name") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if !s.trim().is_empty() => Some(s.trim().to_owned()),
        Some(_) => {
            return Err(ApiError::InvalidParam {
                param: "model_name",
                message: "expected the model group's name".into(),
            })
        }
    };
    let object = |v: Option<Value>, param: &'static str| match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(m)) => Ok(Some(m)),
        Some(_) => Err(ApiError::InvalidParam {
            param,
            message: "expected an object".into(),
        }),
    };
    Ok(Body {
        model_name,
        params: object(map.remove("litellm_params"), "litellm_params")?,
        info: object(map.remove("model_info"), "model_info")?.unwrap_or_default(),
    })
}

/// `POST /model/new`: store a deployment and serve it. Its id is `model_info.id` when given
/// (a file's deployment's id is refused), else a new UUID.
async fn new(state: &AppState, req: AdminRequest<'_>, by: &str) -> Result<StoredModel, ApiError> {
    let rt = runtime(state)?;
    let mut body = read_body(&req)?;
    let model_name = body
        .model_name
        .ok_or(ApiError::MissingParam("model_name"))?;
    let params = body
        .params
        .filter(|p| p.contains_key("model"))
        .ok_or(ApiError::MissingParam("litellm_params.model"))?;
    let id = match body.info.remove("id") {
        Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_owned(),
        None | Some(Value::Null) => sluice_core::random::uuid_v4().to_string(),
        Some(_) => {
            return Err(ApiError::InvalidParam {
                param: "model_info",
                message: "model_info.id must be a string".into(),
            })
        }
    };
    body.info.remove("db_model");
    if state
        .snapshot()
        .deployments
        .iter()
        .any(|d| d["model_info"]["id"] == id.as_str())
    {
        return Err(ApiError::Conflict(format!("deployment {id}")));
    }
    let now = OffsetDateTime::now_utc();
    let row = ModelRow {
        model_id: id.clone(),
        model_name,
        litellm_params: String::new(),
        model_info: Value::Object(body.info),
        etag: sluice_core::random::uuid_v4().to_string(),
        created_at: now,
        created_by: by.to_owned(),
        updated_at: now,
        updated_by: by.to_owned(),
    };
    upstream_allowed(state, &params).await?;
    let row = checked(rt, row, params, None).await?;
    rt.store().insert_model(&row).await.map_err(store_error)?;
    let answer = answer(&row, &params_of(rt, &row));
    applied(state, rt, "created", &id, None, &audited(&answer), by).await;
    Ok(answer)
}

/// `POST /model/update` (`model_info.id` names it) or `PATCH /model/{id}/update`: change a
/// stored deployment. `litellm_params` and `model_info` are merged key by key into the stored
/// ones (a `null` removes a key); `model_name` replaces.
pub(super) async fn update(
    state: &AppState,
    req: AdminRequest<'_>,
    path_id: Option<&str>,
    by: &str,
) -> Result<StoredModel, ApiError> {
    let rt = runtime(state)?;
    let mut body = read_body(&req)?;
    let id = match (path_id, body.info.remove("id")) {
        (Some(id), _) => id.to_owned(),
        (None, Some(Value::String(s))) if !s.trim().is_empty() => s.trim().to_owned(),
        _ => return Err(ApiError::MissingParam("model_info.id")),
    };
    body.info.remove("db_model");
    let Some(old) = rt.store().model(&id).await.map_err(store_error)? else {
        return Err(not_stored(state, &id));
    };
    let before = audited(&answer(&old, &params_of(rt, &old)));
    let mut params = rt.params(&old).map_err(|why| {
        ApiError::InvalidDeployment(format!(
            "deployment {id}'s stored litellm_params cannot be read ({why}); delete it and add \
             it again"
        ))
    })?;
    merge(&mut params, body.params.unwrap_or_default());
    let mut info = old.model_info.as_object().cloned().unwrap_or_default();
    merge(&mut info, body.info);
    let row = ModelRow {
        model_name: body.model_name.unwrap_or_else(|| old.model_name.clone()),
        model_info: Value::Object(info),
        etag: sluice_core::random::uuid_v4().to_string(),
        updated_at: OffsetDateTime::now_utc(),
        updated_by: by.to_owned(),
        ..old
    };
    if !params.contains_key("model") {
        return Err(ApiError::MissingParam("litellm_params.model"));
    }
    upstream_allowed(state, &params).await?;
    let row = checked(rt, row, params, Some(&id)).await?;
    rt.store().update_model(&row).await.map_err(store_error)?;
    let answer = answer(&row, &params_of(rt, &row));
    applied(
        state,
        rt,
        "updated",
        &id,
        Some(before),
        &audited(&answer),
        by,
    )
    .await;
    Ok(answer)
}

/// `POST /model/delete` (`{"id": ...}`): stop serving a stored deployment and remove it.
async fn delete(state: &AppState, req: AdminRequest<'_>, by: &str) -> AdminResult {
    let rt = runtime(state)?;
    let map = body_object(&req, &[&["id"]])?;
    let id = match map.get("id") {
        Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_owned(),
        _ => return Err(ApiError::MissingParam("id")),
    };
    let Some(old) = rt.store().model(&id).await.map_err(store_error)? else {
        return Err(not_stored(state, &id));
    };
    let before = audited(&answer(&old, &params_of(rt, &old)));
    rt.store().delete_model(&id).await.map_err(store_error)?;
    let answer = json!({ "message": format!("Model: {id} deleted successfully") });
    applied(state, rt, "deleted", &id, Some(before), &answer, by).await;
    Ok(answer)
}

/// Why `id` cannot be changed: a file's deployment is changed in the file; anything else does
/// not exist.
fn not_stored(state: &AppState, id: &str) -> ApiError {
    let in_file = state
        .snapshot()
        .deployments
        .iter()
        .any(|d| d["model_info"]["id"] == id);
    if in_file {
        ApiError::InvalidDeployment(format!(
            "deployment {id} comes from the config file: change it there and reload"
        ))
    } else {
        ApiError::NotFound {
            what: "model",
            id: id.chars().take(128).collect(),
        }
    }
}

/// `row` with `params` sealed, after checking that the config loads with it in place of the
/// stored deployment `replacing` (or added): its problems, by their path in the body, are the
/// caller's 400.
async fn checked(
    rt: &RuntimeModels,
    mut row: ModelRow,
    params: Map<String, Value>,
    replacing: Option<&str>,
) -> Result<ModelRow, ApiError> {
    let mut entries: Vec<(String, Value)> = rt
        .stored()
        .await
        .map_err(store_error)?
        .into_iter()
        .filter(|s| Some(s.row.model_id.as_str()) != replacing)
        .map(|s| (s.row.model_id, s.entry))
        .collect();
    let candidate = crate::models::entry(
        &row.model_id,
        &row.model_name,
        params.clone(),
        &row.model_info,
    );
    entries.push((row.model_id.clone(), candidate));
    let merged = rt.load(&entries).map_err(|e| {
        tracing::warn!(error = %e, "the config file no longer loads");
        ApiError::InvalidDeployment(format!("the config file no longer loads: {e}"))
    })?;
    if let Some((_, problems)) = merged.left_out.iter().find(|(id, _)| *id == row.model_id) {
        let list: Vec<String> = problems.iter().map(ToString::to_string).collect();
        return Err(ApiError::InvalidDeployment(format!(
            "Invalid deployment: {}",
            list.join("; ")
        )));
    }
    row.litellm_params = rt
        .seal(&params)
        .map_err(|_| ApiError::Internal("sealing the deployment's parameters"))?;
    Ok(row)
}

/// A deployment added or changed at run time may not point back into the gateway's machine or
/// at the cloud's metadata service (loopback, link-local, unspecified addresses, and names
/// that resolve to them), unless `client_side_api_base_allowlist` lets the host through:
/// otherwise whoever may add a deployment could make sluice, with its credentials and network
/// position, call its own admin port or the instance's credentials endpoint (a confused
/// deputy). Private networks stay allowed: self-hosted model servers live there.
async fn upstream_allowed(state: &AppState, params: &Map<String, Value>) -> Result<(), ApiError> {
    for field in ["api_base", "base_url"] {
        let Some(Value::String(base)) = params.get(field) else {
            continue;
        };
        let refused = |message: String| ApiError::InvalidParam {
            param: "litellm_params.api_base",
            message,
        };
        let uri: http::Uri = base
            .trim()
            .parse()
            .map_err(|_| refused(format!("litellm_params.{field}: not a URL")))?;
        let Some(host) = uri.host() else {
            return Err(refused(format!(
                "litellm_params.{field}: the URL has no host"
            )));
        };
        let port = uri.port_u16().unwrap_or(match uri.scheme_str() {
            Some("https") | Some("wss") => 443,
            _ => 80,
        });
        let allow = state.snapshot().upstream_allowlist.clone();
        sluice_net::ssrf::check_host_in(sluice_net::ssrf::Scope::Deployment, host, port, &allow)
            .await
            .map_err(|e| {
                refused(format!(
                    "litellm_params.{field}: {e} (general_settings.client_side_api_base_allowlist                      lets an operator allow it)"
                ))
            })?;
    }
    Ok(())
}

/// Serve the change on this instance, tell the fleet, and write the audit log. The change is
/// stored whatever happens here: a failure to serve it is logged and the poll tries again.
async fn applied(
    state: &AppState,
    rt: &RuntimeModels,
    action: &'static str,
    id: &str,
    before: Option<Value>,
    answer: &Value,
    by: &str,
) {
    if let Err(e) = rt.apply(state).await {
        tracing::warn!(error = %e, "stored deployments could not be applied; the poll will try again");
    }
    if let Some(fleet) = state.fleet() {
        fleet.announce_models().await;
    }
    let change = audit::Change::new("models", action);
    audit::record(
        rt.store(),
        by,
        &change,
        vec![(id.to_owned(), before)],
        answer,
    )
    .await;
}

/// A stored deployment's `litellm_params`, opened (empty when unreadable).
fn params_of(rt: &RuntimeModels, row: &ModelRow) -> Map<String, Value> {
    rt.params(row).unwrap_or_default()
}

/// What the API answers for a stored deployment (LiteLLM's `LiteLLM_ProxyModelTable` row).
fn answer(row: &ModelRow, params: &Map<String, Value>) -> StoredModel {
    StoredModel::of(row, masked(params))
}

/// A stored deployment's answer as the audit log keeps it.
fn audited(answer: &StoredModel) -> Value {
    serde_json::to_value(answer).unwrap_or(Value::Null)
}

/// `params` with every credential masked; `os.environ/` references are names, not secrets,
/// and stay.
fn masked(params: &Map<String, Value>) -> Map<String, Value> {
    let mut out = params.clone();
    for (k, v) in out.iter_mut() {
        if is_secret(k) {
            mask_value(v);
        }
    }
    out
}

/// Whether a `litellm_params` name holds a credential.
fn is_secret(k: &str) -> bool {
    k.ends_with("_key")
        || k.ends_with("_token")
        || SECRET_PARAMS.contains(&k)
        || k == "extra_headers"
}

fn mask_value(v: &mut Value) {
    match v {
        Value::String(s) if s.starts_with("os.environ/") => {}
        Value::String(s) => *s = sluice_core::Secret::new(s.as_str()).masked(),
        Value::Object(m) => m.values_mut().for_each(mask_value),
        Value::Array(items) => items.iter_mut().for_each(mask_value),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// `patch` merged into `into`: a `null` removes the key.
fn merge(into: &mut Map<String, Value>, patch: Map<String, Value>) {
    for (k, v) in patch {
        if v.is_null() {
            into.remove(&k);
        } else {
            into.insert(k, v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_masked_and_references_kept() {
        let params: Map<String, Value> = serde_json::from_value(json!({
            "model": "openai/gpt-4o",
            "api_key": "sk-provider-secret-123456",
            "aws_secret_access_key": "abcdefghijklmnop",
            "aws_session_token": "short",
            "vertex_credentials": "os.environ/VERTEX_CREDS",
            "extra_headers": {"x-api-key": "hdr-secret-12345678"},
            "max_tokens": 100,
            "api_base": "http://127.0.0.1:1",
        }))
        .unwrap();
        let m = Value::Object(masked(&params));
        let text = m.to_string();
        for secret in [
            "sk-provider-secret-123456",
            "abcdefghijklmnop",
            "short",
            "hdr-secret-12345678",
        ] {
            assert!(!text.contains(secret), "{secret} leaked: {text}");
        }
        assert_eq!(m["vertex_credentials"], "os.environ/VERTEX_CREDS");
        assert_eq!(m["max_tokens"], 100);
        assert_eq!(m["api_base"], "http://127.0.0.1:1");
        assert_eq!(m["model"], "openai/gpt-4o");
    }

    #[test]
    fn a_patch_sets_and_removes_keys() {
        let mut into: Map<String, Value> =
            serde_json::from_value(json!({"model": "a", "rpm": 5, "tpm": 9})).unwrap();
        let patch: Map<String, Value> =
            serde_json::from_value(json!({"model": "b", "rpm": null})).unwrap();
        merge(&mut into, patch);
        assert_eq!(Value::Object(into), json!({"model": "b", "tpm": 9}));
    }
}
