//! Models and deployments with their live state: the same routing atomics `/health` and the
//! routing itself read (cooling down, in flight, latency, this minute's use), read now. With
//! `store_model_in_db`, admins add a deployment here and change or remove the stored ones,
//! through the model API (`/model/new`, `/model/update`, `/model/delete`): the same checks,
//! the same fleet-wide effect, the same audit log.

use http::Response;
use maud::{html, Markup};
use serde_json::{Map, Value};

use super::{amount, change, number, query, removal};
use crate::admin::answers::models::StoredModel;
use crate::console::layout::{csrf_field, redirect};
use crate::console::{Form, Viewer};
use crate::http::ResponseBody;
use crate::server::health::deployments;
use crate::server::{AppState, Snapshot};
use sluice_core::error::ApiError;

/// `model_info.mode` values offered (LiteLLM's).
const MODES: &[&str] = &[
    "chat",
    "completion",
    "responses",
    "embedding",
    "image_generation",
    "audio_transcription",
    "audio_speech",
    "moderation",
    "rerank",
];

/// `GET /ui/models`.
pub(super) fn page(state: &AppState, snap: &Snapshot, viewer: &Viewer) -> Result<Markup, ApiError> {
    let list = deployments(&snap.router);
    // The last round of active health checks, when they run.
    let round = snap
        .features
        .probes
        .as_ref()
        .and_then(|_| state.probes().latest());
    let check = |id: &str| {
        round
            .as_ref()
            .and_then(|r| r.verdicts.iter().find(|v| v.model_id == id).cloned())
    };
    let listed = crate::admin::models::listed(snap)?;
    let stored = |id: &str| {
        listed
            .iter()
            .any(|d| d.model_info.id == id && d.model_info.db_model)
    };
    // Deployments are the proxy admins' (an internal user may change their own keys only).
    let admin = viewer.session.role.sees_all() && viewer.session.role.may_change();
    let editable = admin && state.runtime().is_some();
    Ok(html! {
        p.muted { "Routing strategy: " (snap.router.policy.strategy.name()) ". Read from the live routing state when this page was drawn." }
        table #deployments {
            thead { tr {
                th { "Model group" } th { "Deployment" } th { "Provider" } th { "Origin" } th { "State" }
                th.num { "In flight" } th.num { "Latency" } th.num { "Requests / min" }
                th.num { "Tokens / min" } th.num { "Successes" } th.num { "Failures" } th { "Last failure" }
                @if round.is_some() { th { "Health check" } }
            } }
            tbody {
                @for d in &list {
                    tr {
                        td { (d.model_name) }
                        td.mono {
                            @if editable && stored(d.model_id) {
                                a href={ "/ui/models/edit?" (query(&[("id", d.model_id)])) } { (d.model_id) }
                            } @else {
                                (d.model_id)
                            }
                        }
                        td { (d.provider) }
                        td { @if stored(d.model_id) { "database" } @else { "config file" } }
                        td class={ "state-" (d.state) } {
                            (d.state)
                            @if let Some(s) = d.cooldown_remaining_s.filter(|s| *s > 0.0) {
                                " (" (format!("{s:.0}")) " s)"
                            }
                        }
                        td.num { (d.in_flight) }
                        td.num { @if let Some(l) = d.latency_ms { (format!("{l:.0} ms")) } }
                        td.num { (d.requests_this_minute) }
                        td.num { (d.tokens_this_minute) }
                        td.num { (d.successes) }
                        td.num { (d.failures) }
                        td { (d.last_failure.unwrap_or_default()) }
                        @if round.is_some() {
                            @let v = check(d.model_id);
                            td.health-check {
                                @match v.as_ref().map(|v| (v.healthy, v.error.as_deref())) {
                                    Some((Some(true), _)) => "healthy",
                                    Some((Some(false), why)) => { "unhealthy: " (why.unwrap_or_default()) },
                                    Some((None, why)) => { "not probed: " (why.unwrap_or_default()) },
                                    None => "",
                                }
                            }
                        }
                    }
                }
            }
        }
        @if editable {
            h2 { "Add a deployment" }
            form.stack method="post" action="/ui/models/new" {
                (csrf_field(&viewer.csrf))
                label for="model_name" { "Model group (the name clients ask for)" }
                input #model_name name="model_name" required placeholder="gpt-4o";
                (fields(None))
                button type="submit" { "Add deployment" }
            }
        } @else if admin {
            p.muted { "Deployments come from the config file. With general_settings.store_model_in_db: true they can be added, changed and removed here, on every instance, without a restart." }
        }
    })
}

/// A stored deployment's `litellm_params` member `name` as its form field shows it ("" when
/// not set). They are LiteLLM's free-form provider parameters, so this reads them by name:
/// the form's fields are named as the members they set (`act`).
fn param(d: Option<&StoredModel>, name: &str) -> String {
    match d.and_then(|d| d.litellm_params.get(name)) {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// The `litellm_params` and `model_info` fields of the add and edit forms, filled from `d`
/// (the stored deployment, as stored) when editing.
fn fields(d: Option<&StoredModel>) -> Markup {
    let mode = d.and_then(StoredModel::mode).unwrap_or_default();
    html! {
        label for="model" { "Provider/model" }
        input #model name="model" required value=(param(d, "model")) placeholder="openai/gpt-4o, anthropic/claude-sonnet-5-5, mock/any";
        label for="api_base" { "API base" }
        input #api_base name="api_base" value=(param(d, "api_base")) placeholder="the provider's default";
        label for="api_key" { "API key" }
        input #api_key name="api_key" type="password" autocomplete="off"
            placeholder=(if d.is_some() { "empty: unchanged" } else { "or os.environ/VARIABLE; empty: the provider's variable" });
        label for="rpm" { "Requests per minute" }
        input #rpm name="rpm" value=(param(d, "rpm")) placeholder="no limit";
        label for="tpm" { "Tokens per minute" }
        input #tpm name="tpm" value=(param(d, "tpm")) placeholder="no limit";
        label for="input_cost_per_token" { "Input cost per token (USD)" }
        input #input_cost_per_token name="input_cost_per_token" value=(param(d, "input_cost_per_token")) placeholder="from the price map";
        label for="output_cost_per_token" { "Output cost per token (USD)" }
        input #output_cost_per_token name="output_cost_per_token" value=(param(d, "output_cost_per_token")) placeholder="from the price map";
        label for="mode" { "Mode" }
        select #mode name="mode" {
            option value="" { "not set" }
            @for m in MODES { option value=(m) selected[*m == mode] { (m) } }
        }
    }
}

/// `GET /ui/models/edit?id=`: a stored deployment's fields to change, filled from what is
/// stored (not from `/model/info`'s description, which leaves out the prices a form sets),
/// and its removal.
pub(super) async fn edit_page(
    state: &AppState,
    viewer: &Viewer,
    q: &Form,
) -> Result<Markup, ApiError> {
    let id = q.filled("id").ok_or(ApiError::MissingParam("id"))?;
    let d = crate::admin::models::stored(state, id).await?;
    let at = |t: &Option<String>| t.clone().unwrap_or_default();
    Ok(html! {
        p.muted { "Added by " (d.created_by) " at " (at(&d.created_at))
            "; last changed by " (d.updated_by) " at " (at(&d.updated_at)) "." }
        form.stack method="post" action="/ui/models/update" {
            (csrf_field(&viewer.csrf))
            input type="hidden" name="id" value=(id);
            label for="model_name" { "Model group" }
            input #model_name name="model_name" required value=(d.model_name);
            (fields(Some(&d)))
            button type="submit" { "Save deployment" }
        }
        (removal(viewer, "Remove", "/ui/models/delete", ("id", id), "delete-model", "Remove deployment"))
    })
}

/// `POST /ui/models/new|update|delete`: the form as the model API's body; then back to the
/// list. Blank fields are left out when adding and removed when editing (the API key: kept).
pub(super) async fn act(
    state: &AppState,
    viewer: &Viewer,
    sub: &str,
    form: &Form,
) -> Result<Response<ResponseBody>, ApiError> {
    let editing = sub == "/models/update";
    let mut body = Map::new();
    let path = match sub {
        "/models/delete" => {
            let id = form.filled("id").ok_or(ApiError::MissingParam("id"))?;
            body.insert("id".into(), id.into());
            "/model/delete"
        }
        "/models/new" | "/models/update" => {
            let mut params = Map::new();
            for f in ["model", "api_base"] {
                match form.filled(f) {
                    Some(v) => {
                        params.insert(f.into(), v.into());
                    }
                    None if editing => {
                        params.insert(f.into(), Value::Null);
                    }
                    None => {}
                }
            }
            if let Some(k) = form.filled("api_key") {
                params.insert("api_key".into(), k.into());
            }
            for f in [
                "rpm",
                "tpm",
                "input_cost_per_token",
                "output_cost_per_token",
            ] {
                let v = if f.starts_with("input") || f.starts_with("output") {
                    amount(form, f, false, "price")?
                } else {
                    number(form, f)?
                };
                if editing || !v.is_null() {
                    params.insert(f.into(), v);
                }
            }
            let mut info = Map::new();
            match form.filled("mode") {
                Some(m) => {
                    info.insert("mode".into(), m.into());
                }
                None if editing => {
                    info.insert("mode".into(), Value::Null);
                }
                None => {}
            }
            if editing {
                let id = form.filled("id").ok_or(ApiError::MissingParam("id"))?;
                info.insert("id".into(), id.into());
            }
            if let Some(name) = form.filled("model_name") {
                body.insert("model_name".into(), name.into());
            }
            body.insert("litellm_params".into(), params.into());
            body.insert("model_info".into(), info.into());
            if editing {
                "/model/update"
            } else {
                "/model/new"
            }
        }
        _ => {
            return Err(ApiError::RouteNotFound {
                method: "POST".into(),
                path: format!("/ui{sub}"),
            })
        }
    };
    change(state, &viewer.session.user, path, &Value::Object(body)).await?;
    Ok(redirect("/ui/models"))
}
