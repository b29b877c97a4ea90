//! Models and deployments with their live state: the same routing atomics `/health` and the
//! routing itself read (cooling down, in flight, latency, this minute's use), read now. With
//! `store_model_in_db`, admins add a deployment here and change or remove the stored ones,
//! through the model API (`/model/new`, `/model/update`, `/model/delete`): the same checks,
//! the same fleet-wide effect, the same audit log.

use http::Response;
use maud::{html, Markup};
use serde_json::{Map, Value};

use super::fields::{count, field, password, pick, required, text, usd, Choice, Draft, Reader};
use super::health::{self, Health};
use super::{not_found, query, removal, submit, Refused};
use crate::admin::answers::models::StoredModel;
use crate::console::layout::csrf_field;
use crate::console::{Form, Viewer};
use crate::http::ResponseBody;
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
pub(super) fn page(
    state: &AppState,
    snap: &Snapshot,
    viewer: &Viewer,
    draft: &Draft<'_>,
) -> Result<Markup, ApiError> {
    let list = health::all(state, snap);
    let checked = snap.features.probes.is_some() && list.iter().any(|(_, _, c)| c.is_some());
    let listed = crate::admin::models::listed(snap)?;
    let stored = |id: &str| {
        listed
            .iter()
            .any(|d| d.model_info.id == id && d.model_info.db_model)
    };
    // Deployments are the proxy admins' (an internal user may change their own keys only).
    let admin = viewer.session.role.sees_all() && viewer.session.role.may_change();
    let editable = admin && state.runtime().is_some();
    let d = &draft.for_form("/models/new");
    let unconfigured = list
        .iter()
        .filter(|(_, h, _)| *h == Health::NotConfigured)
        .count();
    Ok(html! {
        p.muted { "Routing strategy: " (snap.router.policy.strategy.name()) ". Read from the live routing state when this page was drawn: a deployment is healthy once it has answered, not before." }
        @if list.is_empty() {
            p.muted #empty { "No deployments: add model_list entries to the config file"
                @if editable { ", or add one below" } "." }
        } @else {
            @if unconfigured > 0 {
                p.error #not-configured { (unconfigured) " deployment(s) have no API key: set the deployment's api_key (or the provider's environment variable, e.g. OPENAI_API_KEY) and reload." }
            }
            table #deployments {
                thead { tr {
                    th { "Model group" } th { "Deployment" } th { "Provider" } th { "Origin" } th { "State" }
                    th.num { "In flight" } th.num { "Latency" } th.num { "Requests / min" }
                    th.num { "Tokens / min" } th.num { "Successes" } th.num { "Failures" } th { "Last failure" }
                    @if checked { th { "Health check" } }
                } }
                tbody {
                    @for (dep, h, check) in &list {
                        tr {
                            td { (super::keys::name(dep.model_name)) }
                            td.mono {
                                @if editable && stored(dep.model_id) {
                                    a href={ "/ui/models/edit?" (query(&[("id", dep.model_id)])) } { (dep.model_id) }
                                } @else {
                                    (dep.model_id)
                                }
                            }
                            td { (dep.provider) }
                            td { @if stored(dep.model_id) { "database" } @else { "config file" } }
                            td class=(h.class()) {
                                (h.name())
                                @if let Health::CoolingDown(s) = h { @if *s > 0.0 { " (" (format!("{s:.0}")) " s)" } }
                            }
                            td.num { (dep.in_flight) }
                            td.num { @if let Some(l) = dep.latency_ms { (format!("{l:.0} ms")) } }
                            td.num { (dep.requests_this_minute) }
                            td.num { (dep.tokens_this_minute) }
                            td.num { (dep.successes) }
                            td.num { (dep.failures) }
                            td { (dep.last_failure.unwrap_or_default()) }
                            @if checked {
                                td.health-check {
                                    @match check.as_ref().map(|(ok, why)| (*ok, why.as_deref())) {
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
        }
        @if editable {
            h2 #new { "Add a deployment" }
            form.stack method="post" action="/ui/models/new" {
                (d.summary())
                (csrf_field(&viewer.csrf))
                (required(d, field("model_name", "Model group (the name clients ask for)").hint("gpt-4o"), ""))
                (fields(d, None))
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
/// (the stored deployment, as stored) when editing, or as typed.
fn fields(f: &Draft<'_>, d: Option<&StoredModel>) -> Markup {
    let mode = d.and_then(StoredModel::mode).unwrap_or_default();
    let modes: Vec<Choice> = MODES
        .iter()
        .map(|m| ((*m).to_owned(), (*m).to_owned()))
        .collect();
    let key_hint = if d.is_some() {
        "empty: unchanged"
    } else {
        "or os.environ/VARIABLE; empty: the provider's variable"
    };
    html! {
        (required(f, field("model", "Provider/model").hint("openai/gpt-4o, anthropic/claude-sonnet-5-5, mock/any"), &param(d, "model")))
        (text(f, field("api_base", "API base").hint("the provider's default"), &param(d, "api_base")))
        (password(f, field("api_key", "API key").hint(key_hint)))
        (count(f, field("rpm", "Requests per minute").hint("no limit"), &param(d, "rpm")))
        (count(f, field("tpm", "Tokens per minute").hint("no limit"), &param(d, "tpm")))
        (usd(f, field("input_cost_per_token", "Input cost per token (USD)").hint("from the price map"), &param(d, "input_cost_per_token")))
        (usd(f, field("output_cost_per_token", "Output cost per token (USD)").hint("from the price map"), &param(d, "output_cost_per_token")))
        (pick(f, field("mode", "Mode"), &modes, mode, Some("not set")))
    }
}

/// `GET /ui/models/edit?id=`: a stored deployment's fields to change, filled from what is
/// stored (not from `/model/info`'s description, which leaves out the prices a form sets),
/// and its removal.
pub(super) async fn edit_page(
    state: &AppState,
    viewer: &Viewer,
    q: &Form,
    draft: &Draft<'_>,
) -> Result<Markup, ApiError> {
    let id = q.filled("id").ok_or(ApiError::MissingParam("id"))?;
    let d = crate::admin::models::stored(state, id).await?;
    let at = |t: &Option<String>| t.clone().unwrap_or_default();
    let f = &draft.for_form("/models/update");
    Ok(html! {
        p.muted { "Added by " (d.created_by) " at " (at(&d.created_at))
            "; last changed by " (d.updated_by) " at " (at(&d.updated_at)) "." }
        form.stack method="post" action="/ui/models/update" {
            (f.summary())
            (csrf_field(&viewer.csrf))
            input type="hidden" name="id" value=(id);
            (required(f, field("model_name", "Model group"), &d.model_name))
            (fields(f, Some(&d)))
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
) -> Result<Response<ResponseBody>, Refused> {
    let editing = sub == "/models/update";
    let mut r = Reader::new(form);
    let mut body = Map::new();
    let (path, done) = match sub {
        "/models/delete" => {
            let id = form.filled("id").ok_or(ApiError::MissingParam("id"))?;
            body.insert("id".into(), id.into());
            ("/model/delete", "Deployment removed.")
        }
        "/models/new" | "/models/update" => {
            let mut params = Map::new();
            r.required("model_name");
            r.required("model");
            for f in ["model", "api_base"] {
                match r.filled(f) {
                    Some(v) => {
                        params.insert(f.into(), v.into());
                    }
                    None if editing => {
                        params.insert(f.into(), Value::Null);
                    }
                    None => {}
                }
            }
            if let Some(k) = r.filled("api_key") {
                params.insert("api_key".into(), k.into());
            }
            for (f, v) in [
                ("rpm", r.count("rpm")),
                ("tpm", r.count("tpm")),
                ("input_cost_per_token", r.price("input_cost_per_token")),
                ("output_cost_per_token", r.price("output_cost_per_token")),
            ] {
                if editing || !v.is_null() {
                    params.insert(f.into(), v);
                }
            }
            let mut info = Map::new();
            match r.filled("mode") {
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
            if let Some(name) = r.filled("model_name") {
                body.insert("model_name".into(), name.into());
            }
            body.insert("litellm_params".into(), params.into());
            body.insert("model_info".into(), info.into());
            if editing {
                (
                    "/model/update",
                    "Deployment saved: served at once on every instance.",
                )
            } else {
                (
                    "/model/new",
                    "Deployment added: served at once on every instance.",
                )
            }
        }
        _ => return Err(not_found("POST", sub).into()),
    };
    r.finish()?;
    let done = ("/ui/models", done.to_owned());
    submit(state, viewer, (path, body), done, "model_name").await
}
