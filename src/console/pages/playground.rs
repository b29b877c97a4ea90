//! The playground: a chat request sent through sluice's own pipeline (the same
//! `pipeline::handle` a client's request runs through: authentication, admission, routing,
//! spend), with a key the user gives, so it runs with exactly that key's rights and is charged
//! to it. The answer, its cost and its request id are shown.

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use maud::{html, Markup};
use serde_json::{json, Value};

use crate::console::layout::{csrf_field, page, respond};
use crate::console::{Form, Viewer};
use crate::server::{AppState, ResponseBody, Snapshot};
use sluice_core::error::ApiError;

/// The form, with the last answer (if any) below it.
fn form(snap: &Snapshot, viewer: &Viewer, f: &Form, answer: Option<Markup>) -> Markup {
    let chosen = f.get("model").unwrap_or_default();
    html! {
        form.stack method="post" action="/ui/playground" {
            (csrf_field(&viewer.csrf))
            label for="key" { "API key" }
            input #key type="password" name="key" required placeholder="a virtual key, or the master key" autocomplete="off";
            label for="model" { "Model" }
            select #model name="model" {
                @for name in snap.router.models.names() {
                    option value=(name) selected[&**name == chosen] { (name) }
                }
            }
            label for="prompt" { "Message" }
            textarea #prompt name="prompt" required { (f.get("prompt").unwrap_or_default()) }
            button type="submit" { "Send" }
        }
        @if let Some(a) = answer { (a) }
    }
}

/// `GET /ui/playground`.
pub(super) fn page_get(snap: &Snapshot, viewer: &Viewer) -> Markup {
    form(snap, viewer, &Form::default(), None)
}

/// `POST /ui/playground`: one non-streamed chat completion through the pipeline.
pub(super) async fn send(
    state: &AppState,
    snap: &Snapshot,
    viewer: &Viewer,
    f: &Form,
) -> Result<Response<ResponseBody>, ApiError> {
    let key = f.filled("key").ok_or(ApiError::MissingParam("key"))?;
    let model = f.filled("model").ok_or(ApiError::MissingParam("model"))?;
    let prompt = f.get("prompt").unwrap_or_default();
    let body = json!({ "model": model, "messages": [{ "role": "user", "content": prompt }] });
    let req = Request::post("/v1/chat/completions")
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::AUTHORIZATION, format!("Bearer {key}"))
        .body(Full::new(Bytes::from(body.to_string())))
        .map_err(|_| ApiError::InvalidParam {
            param: "key",
            message: "not a valid header value".into(),
        })?;
    let resp = Box::pin(crate::server::pipeline::handle(state, req)).await;
    let status = resp.status();
    let [request_id, cost] = ["x-request-id", "x-sluice-response-cost"].map(|name| {
        resp.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    });
    let bytes = resp
        .into_body()
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    let answer: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let shown = html! {
        h2 { "Answer" }
        @if status.is_success() {
            pre.answer #answer { (answer["choices"][0]["message"]["content"].as_str().unwrap_or_default()) }
            p.muted {
                (answer["usage"]["prompt_tokens"]) " tokens in, " (answer["usage"]["completion_tokens"]) " out · cost $" (cost)
                " · request " a href={ "/ui/logs?request_id=" (request_id) } { (request_id) }
            }
        } @else {
            p.error #answer { (status.as_u16()) ": " (answer["error"]["message"].as_str().unwrap_or_default()) }
            p.muted { "request " (request_id) }
        }
    };
    Ok(respond(
        StatusCode::OK,
        page(
            "Playground",
            Some(viewer),
            form(snap, viewer, f, Some(shown)),
        ),
    ))
}
