//! The playground: a chat request sent through sluice's own pipeline (the same
//! `pipeline::handle` a client's request runs through: authentication, admission, routing,
//! spend), with a key the user gives, so it runs with exactly that key's rights and is charged
//! to it. The answer, its cost and its request id are shown.
//!
//! Streamed (the default), the page itself is the stream: its head and the form are sent at
//! once, each delta of the answer is written into the answer's `<pre>` (escaped) as the
//! gateway relays it, and the page ends with the usage when the stream does. The browser shows
//! the answer as it grows with no script at all.

use bytes::{Bytes, BytesMut};
use futures_util::stream;
use futures_util::StreamExt as _;
use http::{Request, Response, StatusCode};
use http_body::Frame;
use http_body_util::{BodyExt, Full, StreamBody};
use maud::{html, Markup, PreEscaped};
use serde_json::{json, Value};

use crate::console::layout::{csrf_field, page, respond, respond_streamed};
use crate::console::{Form, Viewer};
use crate::http::RelayError;
use crate::http::ResponseBody;
use crate::server::{AppState, Snapshot};
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
            label { input #stream name="stream" type="checkbox" value="1" checked[f.get("stream").is_some() || f.get("key").is_none()]; " Stream the answer" }
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
    let streamed = f.get("stream") == Some("1");
    let mut body = json!({ "model": model, "messages": [{ "role": "user", "content": prompt }] });
    if streamed {
        body["stream"] = true.into();
        body["stream_options"] = json!({"include_usage": true});
    }
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
    if streamed && status.is_success() {
        return Ok(stream_page(snap, viewer, f, resp));
    }
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

/// Where the streamed answer goes in the page, and where its footer goes: the page is rendered
/// once with these and cut there.
const ANSWER_AT: &str = "\u{1}sluice-answer\u{1}";
const FOOTER_AT: &str = "\u{1}sluice-footer\u{1}";

/// The page as a stream: its head and form now, then the answer's deltas into its `<pre>`,
/// then the usage and the rest of the page when the gateway's stream ends.
fn stream_page(
    snap: &Snapshot,
    viewer: &Viewer,
    f: &Form,
    resp: Response<ResponseBody>,
) -> Response<ResponseBody> {
    let request_id = resp
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let shown = html! {
        h2 { "Answer" }
        pre.answer #answer { (PreEscaped(ANSWER_AT)) }
        (PreEscaped(FOOTER_AT))
    };
    let whole = page(
        "Playground",
        Some(viewer),
        form(snap, viewer, f, Some(shown)),
    )
    .into_string();
    let (head, rest) = whole.split_once(ANSWER_AT).unwrap_or((&whole, ""));
    let (middle, tail) = rest.split_once(FOOTER_AT).unwrap_or((rest, ""));
    let (head, middle, tail) = (head.to_owned(), middle.to_owned(), tail.to_owned());
    let reader = Reader {
        body: resp.into_body(),
        buf: BytesMut::new(),
        usage: Value::Null,
        request_id,
        middle,
        tail,
        done: false,
    };
    let frames = stream::once(async move { Ok(Frame::data(Bytes::from(head))) }).chain(
        stream::unfold(reader, |mut r| async move {
            let bytes = r.next().await?;
            Some((Ok::<_, RelayError>(Frame::data(bytes)), r))
        }),
    );
    respond_streamed(
        StatusCode::OK,
        ResponseBody::shared(StreamBody::new(frames)),
    )
}

/// Reads the gateway's SSE answer and writes the page's next bytes.
struct Reader {
    body: ResponseBody,
    buf: BytesMut,
    usage: Value,
    request_id: String,
    middle: String,
    tail: String,
    done: bool,
}

impl Reader {
    /// The page's next bytes: the text of the events that came complete, or, at the end, the
    /// footer and the rest of the page; `None` after that.
    async fn next(&mut self) -> Option<Bytes> {
        if self.done {
            return None;
        }
        loop {
            match self.body.frame().await {
                Some(Ok(frame)) => {
                    let Ok(data) = frame.into_data() else {
                        continue;
                    };
                    self.buf.extend_from_slice(&data);
                    let text = self.take_events();
                    if !text.is_empty() {
                        return Some(Bytes::from(text));
                    }
                }
                Some(Err(_)) => return Some(self.end(Some("the stream broke"))),
                None => return Some(self.end(None)),
            }
        }
    }

    /// The escaped text of every complete event in the buffer.
    fn take_events(&mut self) -> String {
        let mut out = String::new();
        while let Some(at) = self.buf.windows(2).position(|w| w == b"\n\n") {
            let event = self.buf.split_to(at + 2);
            for line in event[..].split(|b| *b == b'\n') {
                let Some(data) = line.strip_prefix(b"data: ") else {
                    continue;
                };
                let Ok(v) = serde_json::from_slice::<Value>(data) else {
                    continue;
                };
                if !v["usage"].is_null() {
                    self.usage = v["usage"].clone();
                }
                if let Some(t) = v["choices"][0]["delta"]["content"].as_str() {
                    out.push_str(&html! { (t) }.into_string());
                }
            }
        }
        out
    }

    fn end(&mut self, broke: Option<&str>) -> Bytes {
        self.done = true;
        let u = &self.usage;
        let footer = html! {
            @if let Some(why) = broke { p.error { (why) } }
            p.muted {
                (u["prompt_tokens"]) " tokens in, " (u["completion_tokens"]) " out"
                " · request " a href={ "/ui/logs?request_id=" (self.request_id) } { (self.request_id) }
            }
        };
        let mut out = std::mem::take(&mut self.middle);
        out.push_str(&footer.into_string());
        out.push_str(&self.tail);
        Bytes::from(out)
    }
}
