//! Responses run in the background (`background: true`): the client is answered at once with
//! a `queued` response that is kept like any other, and the request runs on as a request of
//! its own (through the whole pipeline: its key, limits, routing, spend record), whose answer
//! replaces the kept one under the same id: `completed`, or `failed` with the error. The
//! client polls `GET /v1/responses/{id}`; `POST /v1/responses/{id}/cancel` stops a run this
//! instance holds and marks it `cancelled` for every instance, and a run that finishes after
//! its cancel leaves the mark as it is.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;

use bytes::Bytes;
use http::request::Parts;
use http::{HeaderValue, Request};
use http_body_util::{BodyExt as _, Full};
use serde_json::{json, Map, Value};
use time::OffsetDateTime;
use tokio::task::AbortHandle;

use sluice_core::error::ApiError;
use sluice_store::{Store, StoredResponse};

use super::asks::{is_true, Asks};
use super::items;
use super::kept::{store_error, Keeping, Owner};
use crate::auth::Caller;
use crate::server::AppState;

/// The mark a background run carries into its own request: the id its answer is kept under.
#[derive(Debug, Clone)]
pub(crate) struct BackgroundRun(pub(crate) String);

/// The background runs this instance holds, by response id, so that a cancel can stop one.
#[derive(Debug, Default)]
pub struct Runs(Mutex<HashMap<String, AbortHandle>>);

impl Runs {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, AbortHandle>> {
        sluice_core::lock::lock(&self.0)
    }

    /// Stop the run of `id`, if this instance holds it.
    pub(crate) fn abort(&self, id: &str) {
        if let Some(run) = self.lock().remove(id) {
            run.abort();
        }
    }
}

/// The request members a queued response repeats (as OpenAI's answers do), with their
/// defaults as JSON.
const ECHOED: [(&str, &str); 9] = [
    ("instructions", "null"),
    ("metadata", "{}"),
    ("parallel_tool_calls", "true"),
    ("temperature", "null"),
    ("tool_choice", "\"auto\""),
    ("tools", "[]"),
    ("top_p", "null"),
    ("max_output_tokens", "null"),
    ("previous_response_id", "null"),
];

/// What [`start`] returns: a boxed future whose type names `Send`, so that the pipeline
/// awaiting it (whose future the run's own request contains) need not look inside.
pub(crate) type Started<'a> =
    Pin<Box<dyn Future<Output = Result<Option<Value>, ApiError>> + Send + 'a>>;

/// Start a background run when the request asks for one: the queued response kept, the run
/// spawned, the queued response to answer with. `None`: not a background request.
pub(crate) fn start<'a>(
    state: &'a AppState,
    keeping: Option<&'a std::sync::Arc<Keeping>>,
    caller: &'a Caller,
    parts: &'a Parts,
    body: &'a Bytes,
) -> Started<'a> {
    Box::pin(begin(state, keeping, caller, parts, body))
}

async fn begin(
    state: &AppState,
    keeping: Option<&std::sync::Arc<Keeping>>,
    caller: &Caller,
    parts: &Parts,
    body: &Bytes,
) -> Result<Option<Value>, ApiError> {
    if parts.extensions.get::<BackgroundRun>().is_some() {
        return Ok(None);
    }
    let Ok(asks) = serde_json::from_slice::<Asks<'_>>(body) else {
        return Ok(None);
    };
    if !is_true(asks.background) {
        return Ok(None);
    }
    let refused = |message: &str| ApiError::InvalidParam {
        param: "background",
        message: message.into(),
    };
    let (Some(keeping), Some(services), Some(shared)) = (keeping, state.store(), state.shared())
    else {
        return Err(refused(
            "background responses are kept by sluice: that needs a database and \
             general_settings.master_key (or LITELLM_SALT_KEY)",
        ));
    };
    if !keeping.store_answers || asks.store.is_some_and(|v| v.get() == "false") {
        return Err(refused("background responses need store=true"));
    }
    let mut request: Map<String, Value> =
        serde_json::from_slice(body).map_err(|e| ApiError::InvalidJson(e.to_string()))?;
    if request.get("stream").and_then(Value::as_bool) == Some(true) {
        return Err(refused(
            "a background response is not streamed here: ask without stream and poll GET \
             /v1/responses/{id}",
        ));
    }
    let input = items::input_items(request.get("input"))?;
    let owner = Owner::of(caller);
    let id = format!("resp_{}", sluice_core::random::uuid_v4().simple());
    let now = OffsetDateTime::now_utc();
    let model = request
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let mut queued = json!({
        "id": id, "object": "response", "created_at": now.unix_timestamp(),
        "status": "queued", "background": true, "model": model, "output": [],
        "error": null, "incomplete_details": null, "store": true,
    });
    for (name, default) in ECHOED {
        queued[name] = match request.get(name) {
            Some(v) => v.clone(),
            None => serde_json::from_str(default).unwrap_or_default(),
        };
    }
    let store = &services.store;
    let previous_id = request
        .get("previous_response_id")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let row = |response: &Value| -> Result<StoredResponse, ApiError> {
        Ok(StoredResponse {
            id: id.clone(),
            owner_key: owner.key.clone(),
            team_id: owner.team.clone(),
            model: model.clone(),
            previous_id: previous_id.clone(),
            conversation_id: None,
            created_at: now,
            expires_at: Some(now + keeping.retention),
            sealed: keeping.seal(&json!({"input": input, "response": response}))?,
        })
    };
    store
        .put_response(&row(&queued)?)
        .await
        .map_err(store_error)?;
    let failed_row = row(&json!({}))?;
    // The run: the same request without `background`, its answer kept under this id.
    request.remove("background");
    let sent = serde_json::to_vec(&request).map_err(|_| ApiError::Internal("request"))?;
    let mut run = Request::builder()
        .method(parts.method.clone())
        .uri(parts.uri.clone())
        .body(Full::new(Bytes::from(sent)))
        .map_err(|_| ApiError::Internal("background request"))?;
    for (name, value) in &parts.headers {
        if name != http::header::CONTENT_LENGTH {
            run.headers_mut().append(name.clone(), value.clone());
        }
    }
    run.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    run.extensions_mut().insert(BackgroundRun(id.clone()));
    if let Some(c) = parts.extensions.get::<crate::auth::addresses::ClientAddr>() {
        run.extensions_mut().insert(*c);
    }
    let keeping = keeping.clone();
    let store = store.clone();
    let task_id = id.clone();
    let task = tokio::spawn(async move {
        let resp = crate::server::pipeline::handle(&shared, run).await;
        let status = resp.status();
        let answer = resp
            .into_body()
            .collect()
            .await
            .map(http_body_util::Collected::to_bytes)
            .unwrap_or_default();
        if !status.is_success() {
            // The run's error is the kept response's (a success is kept by the run itself).
            fail(&keeping, &store, failed_row, &answer, status.as_u16()).await;
        }
        shared.background_runs().lock().remove(&task_id);
    });
    state
        .background_runs()
        .lock()
        .insert(id.clone(), task.abort_handle());
    // A run that ended before it was held leaves nothing to stop.
    if task.is_finished() {
        state.background_runs().lock().remove(&id);
    }
    Ok(Some(queued))
}

/// Keep a run's failure: its response `failed`, with the error the run answered.
async fn fail(
    keeping: &Keeping,
    store: &Store,
    mut row: StoredResponse,
    answer: &[u8],
    status: u16,
) {
    if cancelled(keeping, store, &row.id).await {
        return;
    }
    let Ok(kept) = keeping.response(store, &row.id).await else {
        return;
    };
    let mut v = kept
        .and_then(|r| keeping.open(&r.sealed).ok())
        .unwrap_or_else(|| json!({"input": [], "response": {}}));
    let error = serde_json::from_slice::<Value>(answer)
        .ok()
        .and_then(|e| e.get("error").cloned())
        .unwrap_or_else(|| json!({"message": format!("the run failed with status {status}")}));
    let message = error
        .get("message")
        .cloned()
        .unwrap_or_else(|| Value::String(format!("the run failed with status {status}")));
    let code = error
        .get("code")
        .filter(|c| !c.is_null())
        .or_else(|| error.get("type"))
        .cloned()
        .unwrap_or(Value::String("server_error".into()));
    v["response"]["status"] = "failed".into();
    v["response"]["error"] = json!({"code": code, "message": message});
    match keeping.seal(&v) {
        Ok(sealed) => {
            row.sealed = sealed;
            if let Err(e) = store.put_response(&row).await {
                tracing::warn!("a background response's failure could not be kept: {e}");
            }
        }
        Err(e) => tracing::warn!("a background response's failure could not be kept: {e}"),
    }
}

/// Whether a kept response was cancelled (a run that ends after it leaves it so).
pub(super) async fn cancelled(keeping: &Keeping, store: &Store, id: &str) -> bool {
    let Ok(Some(row)) = keeping.response(store, id).await else {
        return false;
    };
    keeping
        .open(&row.sealed)
        .ok()
        .and_then(|v| v.pointer("/response/status").cloned())
        == Some(Value::String("cancelled".into()))
}

/// `POST /v1/responses/{id}/cancel` on a kept response the caller may read: a background run
/// still queued or in progress is stopped (here, if this instance holds it) and marked
/// `cancelled`; one already cancelled is answered as it is; any other is refused, as OpenAI
/// does.
pub(super) async fn cancel(
    state: &AppState,
    keeping: &Keeping,
    store: &Store,
    mut row: StoredResponse,
) -> Result<Value, ApiError> {
    let mut v = keeping.open(&row.sealed)?;
    let response = v.get("response").cloned().unwrap_or_default();
    if response.get("background") != Some(&Value::Bool(true)) {
        return Err(ApiError::InvalidParam {
            param: "response_id",
            message: "Only responses created with background=true can be cancelled".into(),
        });
    }
    match response.get("status").and_then(Value::as_str) {
        Some("cancelled") => return Ok(response),
        Some("queued" | "in_progress") => {}
        Some(other) => {
            return Err(ApiError::InvalidParam {
                param: "response_id",
                message: format!("Cannot cancel a {other} response"),
            })
        }
        None => {}
    }
    state.background_runs().abort(&row.id);
    v["response"]["status"] = "cancelled".into();
    row.sealed = keeping.seal(&v)?;
    store.put_response(&row).await.map_err(store_error)?;
    Ok(v["response"].take())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_are_stopped_by_id() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let runs = Runs::default();
            let task = tokio::spawn(std::future::pending::<()>());
            runs.lock().insert("resp_1".into(), task.abort_handle());
            runs.abort("resp_2");
            assert!(!task.is_finished());
            runs.abort("resp_1");
            assert!(task.await.unwrap_err().is_cancelled());
            assert!(runs.lock().is_empty());
        });
    }
}
