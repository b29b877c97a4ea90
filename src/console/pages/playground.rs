//! The playground: a conversation with a model group, sent through sluice's own pipeline (the
//! same `pipeline::handle` a client's request runs through: authentication, admission,
//! routing, spend), with a key the user gives, so it runs with exactly that key's rights and
//! is charged to it. Each answer shows its tokens, cost and request id.
//!
//! No script and no conversation kept on the server: the form carries the conversation so far
//! (each turn a hidden field, at most [`MAX_TURNS`] of them, the form at most the console's
//! 256 KB), a system prompt and the parameters, and each post sends it all with the new
//! message. The key is typed once and remembered for the sign-in on this instance
//! ([`PlaygroundKeys`]): never written into a page again, forgotten at sign-out.
//!
//! Streamed (the default), the page itself is the stream: the conversation and the new turn
//! are sent at once, each delta of the answer is written into its `<pre>` (escaped) as the
//! gateway relays it, and the usage and the form for the next turn follow when the stream
//! ends. The browser shows the answer as it grows with no script at all.

use std::collections::HashMap;
use std::sync::Mutex;

use bytes::{Bytes, BytesMut};
use futures_util::stream;
use futures_util::StreamExt as _;
use http::{Request, Response, StatusCode};
use http_body::Frame;
use http_body_util::{BodyExt, Full, StreamBody};
use maud::{html, Markup, PreEscaped};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::fields::{field, row, Draft, Problems};
use crate::console::layout::{csrf_field, page, respond, respond_streamed};
use crate::console::{Form, Viewer};
use crate::http::RelayError;
use crate::http::ResponseBody;
use crate::server::{AppState, Snapshot};
use sluice_core::error::ApiError;
use sluice_core::Secret;

/// Turns a conversation keeps; older ones are dropped (and the page says so).
const MAX_TURNS: usize = 40;

/// Sign-ins whose key an instance remembers at most.
const MAX_KEYS: usize = 10_000;

/// The playground's keys, remembered per sign-in (by [`Viewer::session_id`], never the session
/// token) until the session expires or signs out, in this instance's memory: a key typed once
/// serves every turn. Another instance of a fleet, or a config reload, asks for it again.
#[derive(Debug, Default)]
pub(in crate::console) struct PlaygroundKeys {
    keys: Mutex<HashMap<String, (Secret, u64)>>,
}

impl PlaygroundKeys {
    /// Remembers `key` for the sign-in `session` until `until` (Unix seconds). Full, it makes
    /// room by dropping expired entries, then the one expiring first.
    fn remember(&self, session: &str, key: &str, until: u64, now: u64) {
        let mut keys = sluice_core::lock::lock(&self.keys);
        if keys.len() >= MAX_KEYS && !keys.contains_key(session) {
            keys.retain(|_, (_, until)| *until > now);
            if keys.len() >= MAX_KEYS {
                let first = keys
                    .iter()
                    .min_by_key(|(_, (_, until))| *until)
                    .map(|(s, _)| s.clone());
                if let Some(s) = first {
                    keys.remove(&s);
                }
            }
        }
        keys.insert(session.to_owned(), (Secret::new(key), until));
    }

    /// The key remembered for `session`, if it has not expired.
    fn get(&self, session: &str, now: u64) -> Option<String> {
        let keys = sluice_core::lock::lock(&self.keys);
        keys.get(session)
            .filter(|(_, until)| *until > now)
            .map(|(k, _)| k.expose().to_owned())
    }

    /// Forgets `session`'s key (sign-out, or the form's "forget").
    pub(in crate::console) fn forget(&self, session: &str) {
        sluice_core::lock::lock(&self.keys).remove(session);
    }
}

/// One message of the conversation, as its hidden field carries it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Turn {
    /// `user` or `assistant`.
    role: String,
    /// What was said.
    content: String,
    /// For an answer: what it took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    meta: Option<Meta>,
}

/// What one answer took.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Meta {
    prompt_tokens: u64,
    completion_tokens: u64,
    /// USD, when known.
    cost: Option<f64>,
    request_id: String,
}

/// The settings the form keeps from turn to turn, as typed.
#[derive(Debug, Clone, Default)]
struct Settings {
    model: String,
    system: String,
    temperature: String,
    max_tokens: String,
    stream: bool,
}

impl Settings {
    fn of(f: &Form) -> Self {
        let text = |n: &str| f.get(n).unwrap_or_default().to_owned();
        Self {
            model: text("model"),
            system: text("system"),
            temperature: text("temperature"),
            max_tokens: text("max_tokens"),
            stream: f.get("stream").is_some(),
        }
    }
}

/// Everything the form for the next turn needs, owned: a streamed page writes it when the
/// stream ends.
struct Composer {
    csrf: String,
    models: Vec<String>,
    settings: Settings,
    /// The last four characters of the remembered key, if one is.
    key_hint: Option<String>,
    /// The viewer may make keys (and so one of their own for the playground).
    may_make: bool,
}

impl Composer {
    fn new(snap: &Snapshot, viewer: &Viewer, settings: Settings, key: Option<&str>) -> Self {
        Self {
            csrf: viewer.csrf.clone(),
            models: super::pickers::model_groups(snap),
            settings,
            may_make: viewer.session.role.may_change(),
            key_hint: key.map(|k| {
                let tail: String = k.chars().rev().take(4).collect();
                tail.chars().rev().collect()
            }),
        }
    }

    /// The form for the next turn, carrying `turns`; `message` is what the message box
    /// holds (a refused message, kept); `problems` go beside their fields.
    fn render(&self, turns: &[Turn], message: &str, problems: &Problems) -> Markup {
        let s = &self.settings;
        let d = &Draft::with_problems(problems.clone());
        let key_label = if self.key_hint.is_some() {
            "Another key"
        } else {
            "API key"
        };
        html! {
            form.stack #composer method="post" action="/ui/playground" {
                (csrf_field(&self.csrf))
                @for t in turns {
                    input type="hidden" name="turn" value=(serde_json::to_string(t).unwrap_or_default());
                }
                @if let Some(hint) = &self.key_hint {
                    span { "Key" }
                    div.field #remembered { "the key ending …" (hint) ", remembered for this sign-in "
                        label { input name="forget_key" type="checkbox" value="1"; " forget it" } }
                }
                (row(d, field("key", key_label), |_| html! {
                    input #key type="password" name="key" autocomplete="off"
                        placeholder=(if self.key_hint.is_some() { "empty: the remembered key" } else { "a virtual key, or the master key" });
                }))
                (row(d, field("model", "Model"), |_| html! {
                    select #model name="model" {
                        @for name in &self.models {
                            option value=(name) selected[*name == s.model] { (name) }
                        }
                    }
                }))
                (row(d, field("prompt", "Message"), |_| html! {
                    textarea #prompt name="prompt" required { (message) }
                }))
                (row(d, field("system", "System prompt"), |_| html! {
                    textarea.short #system name="system" placeholder="none" { (s.system) }
                }))
                (row(d, field("temperature", "Temperature"), |_| html! {
                    input #temperature name="temperature" type="number" min="0" max="2" step="0.1" value=(s.temperature) placeholder="the model's default";
                }))
                (row(d, field("max_tokens", "Max tokens"), |_| html! {
                    input #max_tokens name="max_tokens" type="number" min="1" step="1" value=(s.max_tokens) placeholder="the model's default";
                }))
                label.wide { input #stream name="stream" type="checkbox" value="1" checked[s.stream]; " Stream the answer" }
                button #send type="submit" { "Send" }
                // After Send: Enter in a field submits with the form's first button.
                @if self.key_hint.is_none() && self.may_make {
                    button.quiet #own-key type="submit" name="own_key" value="1" formnovalidate {
                        "No key at hand? Make me one for this sign-in"
                    }
                }
            }
            p { a #new-conversation href="/ui/playground" { "New conversation" } }
        }
    }
}

/// The conversation so far.
fn conversation(turns: &[Turn], dropped: bool) -> Markup {
    html! {
        div #conversation {
            @if dropped { p.muted { "Older turns were dropped: a conversation keeps the last " (MAX_TURNS) "." } }
            @if turns.is_empty() {
                p.muted #empty { "Start a conversation: write a message below. Each answer shows its tokens, cost and request id, and is charged to the key like any client's request." }
            }
            @for t in turns { (turn(t)) }
        }
    }
}

fn turn(t: &Turn) -> Markup {
    html! {
        div class={ "turn " (t.role) } {
            div.who-said { (t.role) }
            pre { (t.content) }
            @if let Some(m) = &t.meta { (meta(m)) }
        }
    }
}

/// An answer's tokens, cost and request id.
fn meta(m: &Meta) -> Markup {
    html! {
        p.muted.meta {
            (m.prompt_tokens) " tokens in, " (m.completion_tokens) " out"
            " · cost " @match m.cost { Some(c) => (super::usd(c)), None => "unknown" }
            @if !m.request_id.is_empty() {
                " · request " a href={ "/ui/logs?request_id=" (m.request_id) } { (m.request_id) }
            }
        }
    }
}

/// The conversation a form carries: its turns (user and assistant only; anything else is
/// left out), the newest [`MAX_TURNS`], and whether older ones were dropped.
fn turns_of(f: &Form) -> (Vec<Turn>, bool) {
    let mut turns: Vec<Turn> = f
        .all("turn")
        .filter_map(|t| serde_json::from_str::<Turn>(t).ok())
        .filter(|t| matches!(t.role.as_str(), "user" | "assistant"))
        .collect();
    let dropped = turns.len() > MAX_TURNS;
    if dropped {
        turns.drain(..turns.len() - MAX_TURNS);
    }
    (turns, dropped)
}

/// `GET /ui/playground`: a new conversation.
pub(super) fn page_get(snap: &Snapshot, viewer: &Viewer) -> Markup {
    let key = remembered(snap, viewer);
    let settings = Settings {
        stream: true,
        ..Settings::default()
    };
    let composer = Composer::new(snap, viewer, settings, key.as_deref());
    html! {
        (conversation(&[], false))
        (composer.render(&[], "", &Problems::default()))
    }
}

/// The key remembered for this sign-in.
fn remembered(snap: &Snapshot, viewer: &Viewer) -> Option<String> {
    let keys = &snap.features.console.as_ref()?.live.playground;
    keys.get(&viewer.session_id, crate::console::unix_now())
}

/// What a turn asks of the gateway, with the problems found in the form.
fn request_body(
    settings: &Settings,
    turns: &[Turn],
    prompt: &str,
    problems: &mut Problems,
) -> Value {
    let mut messages = Vec::with_capacity(turns.len() + 2);
    if !settings.system.trim().is_empty() {
        messages.push(json!({"role": "system", "content": settings.system}));
    }
    for t in turns {
        messages.push(json!({"role": t.role, "content": t.content}));
    }
    messages.push(json!({"role": "user", "content": prompt}));
    let mut body = json!({ "model": settings.model, "messages": messages });
    let temperature = settings.temperature.trim();
    if !temperature.is_empty() {
        match temperature.parse::<f64>() {
            Ok(t) if (0.0..=2.0).contains(&t) => body["temperature"] = t.into(),
            _ => problems.add("temperature", "a number from 0 to 2"),
        }
    }
    let max_tokens = settings.max_tokens.trim();
    if !max_tokens.is_empty() {
        match max_tokens.parse::<u64>() {
            Ok(n) if n >= 1 => body["max_tokens"] = n.into(),
            _ => problems.add("max_tokens", "a whole number, 1 or more"),
        }
    }
    if settings.stream {
        body["stream"] = true.into();
        body["stream_options"] = json!({"include_usage": true});
    }
    body
}

/// `POST /ui/playground`: the conversation and the new message through the pipeline.
pub(super) async fn send(
    state: &AppState,
    snap: &Snapshot,
    viewer: &Viewer,
    f: &Form,
) -> Result<Response<ResponseBody>, ApiError> {
    let now = crate::console::unix_now();
    let keys = snap.features.console.as_ref().map(|s| &s.live.playground);
    if f.get("forget_key") == Some("1") {
        if let Some(k) = keys {
            k.forget(&viewer.session_id);
        }
    }
    let settings = Settings::of(f);
    let (mut turns, dropped) = turns_of(f);
    let prompt = f.get("prompt").unwrap_or_default();
    if f.get("own_key") == Some("1") {
        // A key of the viewer's own, made now, remembered, and the form shown again.
        let mut problems = Problems::default();
        let key = match own_key(state, viewer, now).await {
            Ok(k) => {
                if let Some(keys) = keys {
                    keys.remember(&viewer.session_id, &k, viewer.session.expires, now);
                }
                Some(k)
            }
            Err(e) => {
                problems.add("key", e.to_string());
                None
            }
        };
        let composer = Composer::new(snap, viewer, settings, key.as_deref());
        let shown = html! {
            @if key.is_some() {
                div.notice #notice role="status" { "A key of yours was made for the playground; it expires with this sign-in." }
            }
            (conversation(&turns, dropped))
            (composer.render(&turns, prompt, &problems))
        };
        return Ok(respond(
            StatusCode::OK,
            page("Playground", Some(viewer), shown),
        ));
    }
    let key = match f.filled("key") {
        Some(k) => {
            if let Some(keys) = keys {
                keys.remember(&viewer.session_id, k, viewer.session.expires, now);
            }
            Some(k.to_owned())
        }
        None => remembered(snap, viewer),
    };
    let mut problems = Problems::default();
    if key.is_none() {
        problems.add("key", "a key is needed: a virtual key, or the master key");
    }
    if prompt.trim().is_empty() {
        problems.add("prompt", "write a message");
    }
    if f.filled("model").is_none() {
        problems.add("model", "pick a model");
    }
    let body = request_body(&settings, &turns, prompt, &mut problems);
    let composer = Composer::new(snap, viewer, settings, key.as_deref());
    let (Some(key), true) = (key, problems.is_empty()) else {
        let shown = html! {
            (conversation(&turns, dropped))
            (composer.render(&turns, prompt, &problems))
        };
        return Ok(respond(
            StatusCode::BAD_REQUEST,
            page("Playground", Some(viewer), shown),
        ));
    };
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
    let asked = Turn {
        role: "user".into(),
        content: prompt.to_owned(),
        meta: None,
    };
    if composer.settings.stream && status.is_success() {
        turns.push(asked);
        return Ok(stream_page(snap, viewer, composer, turns, dropped, resp));
    }
    let [request_id, cost] =
        ["x-request-id", "x-sluice-response-cost"].map(|name| header(&resp, name));
    let bytes = resp
        .into_body()
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    let answer: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    if !status.is_success() {
        // Not answered: the message stays in the box, to send again.
        let shown = html! {
            (conversation(&turns, dropped))
            p.error #answer { (status.as_u16()) ": " (answer["error"]["message"].as_str().unwrap_or_default()) }
            @if !request_id.is_empty() { p.muted { "request " (request_id) } }
            (composer.render(&turns, prompt, &Problems::default()))
        };
        return Ok(respond(
            StatusCode::OK,
            page("Playground", Some(viewer), shown),
        ));
    }
    let usage = &answer["usage"];
    turns.push(asked);
    turns.push(Turn {
        role: "assistant".into(),
        content: answer["choices"][0]["message"]["content"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        meta: Some(Meta {
            prompt_tokens: usage["prompt_tokens"].as_u64().unwrap_or(0),
            completion_tokens: usage["completion_tokens"].as_u64().unwrap_or(0),
            cost: cost.parse().ok(),
            request_id,
        }),
    });
    let shown = html! {
        (conversation(&turns, dropped))
        (composer.render(&turns, "", &Problems::default()))
    };
    Ok(respond(
        StatusCode::OK,
        page("Playground", Some(viewer), shown),
    ))
}

/// A key of the viewer's own for the playground, through `/key/generate` as the keys page
/// makes one: theirs (and their team's), so the playground runs with their rights and is
/// charged to them; it expires when the sign-in does.
async fn own_key(state: &AppState, viewer: &Viewer, now: u64) -> Result<String, ApiError> {
    let user = &viewer.session.user;
    let mut body = json!({
        "user_id": user,
        "key_alias": format!("playground: {user} {now}"),
        "duration": format!("{}s", viewer.session.expires.saturating_sub(now).max(60)),
        "metadata": {"made_by": "console playground"},
    });
    let team = match &viewer.team_admin {
        Some(t) => Some(t.clone()),
        None => super::team_of(state, user).await.unwrap_or(None),
    };
    if let Some(t) = team {
        body["team_id"] = t.into();
    }
    let made: crate::admin::answers::keys::IssuedKey =
        super::change_as(state, user, "/key/generate", &body).await?;
    Ok(made.key)
}

fn header(resp: &Response<ResponseBody>, name: &str) -> String {
    resp.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

/// Where the streamed answer goes in the page, where its footer goes, and where the form for
/// the next turn goes: the page is rendered once with these and cut there.
const ANSWER_AT: &str = "\u{1}sluice-answer\u{1}";
const FOOTER_AT: &str = "\u{1}sluice-footer\u{1}";
const COMPOSER_AT: &str = "\u{1}sluice-composer\u{1}";

/// The page as a stream: the conversation and the new turn now, then the answer's deltas into
/// its `<pre>`, then the usage, the form for the next turn and the rest of the page when the
/// gateway's stream ends.
fn stream_page(
    snap: &Snapshot,
    viewer: &Viewer,
    composer: Composer,
    turns: Vec<Turn>,
    dropped: bool,
    resp: Response<ResponseBody>,
) -> Response<ResponseBody> {
    let request_id = header(&resp, "x-request-id");
    // The price of the deployment that answers, for the turn's cost (a stream's is known
    // only when it ends).
    let deployment = header(&resp, "x-sluice-model-id");
    let price = snap
        .router
        .models
        .groups()
        .flat_map(|g| g.members())
        .find(|m| *m.target.info.id == *deployment)
        .map(|m| m.target.price);
    let shown = html! {
        (conversation(&turns, dropped))
        div.turn.assistant {
            div.who-said { "assistant" }
            pre.answer #answer { (PreEscaped(ANSWER_AT)) }
            (PreEscaped(FOOTER_AT))
        }
        (PreEscaped(COMPOSER_AT))
    };
    let whole = page("Playground", Some(viewer), shown).into_string();
    let (head, rest) = whole.split_once(ANSWER_AT).unwrap_or((&whole, ""));
    let (after_answer, rest) = rest.split_once(FOOTER_AT).unwrap_or((rest, ""));
    let (after_footer, tail) = rest.split_once(COMPOSER_AT).unwrap_or((rest, ""));
    let head = head.to_owned();
    let reader = Reader {
        body: resp.into_body(),
        buf: BytesMut::new(),
        usage: Value::Null,
        answer: String::new(),
        request_id,
        price,
        pieces: [after_answer, after_footer, tail].map(str::to_owned),
        composer,
        turns,
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
    /// The answer's text so far, for the next turn's hidden field.
    answer: String,
    request_id: String,
    price: Option<sluice_core::price::Price>,
    /// The page after the answer, after the footer, and after the form.
    pieces: [String; 3],
    composer: Composer,
    turns: Vec<Turn>,
    done: bool,
}

impl Reader {
    /// The page's next bytes: the text of the events that came complete, or, at the end, the
    /// footer, the form and the rest of the page; `None` after that.
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
                    self.answer.push_str(t);
                    out.push_str(&html! { (t) }.into_string());
                }
            }
        }
        out
    }

    fn end(&mut self, broke: Option<&str>) -> Bytes {
        self.done = true;
        let u = &self.usage;
        let cost = self
            .price
            .as_ref()
            .zip(sluice_core::usage::usage_from_value(u))
            .map(|(p, usage)| p.cost(&usage));
        let m = Meta {
            prompt_tokens: u["prompt_tokens"].as_u64().unwrap_or(0),
            completion_tokens: u["completion_tokens"].as_u64().unwrap_or(0),
            cost,
            request_id: std::mem::take(&mut self.request_id),
        };
        let footer = html! {
            @if let Some(why) = broke { p.error { (why) } }
            (meta(&m))
        };
        self.turns.push(Turn {
            role: "assistant".into(),
            content: std::mem::take(&mut self.answer),
            meta: Some(m),
        });
        let [after_answer, after_footer, tail] = std::mem::take(&mut self.pieces);
        let mut out = after_answer;
        out.push_str(&footer.into_string());
        out.push_str(&after_footer);
        out.push_str(
            &self
                .composer
                .render(&self.turns, "", &Problems::default())
                .into_string(),
        );
        out.push_str(&tail);
        Bytes::from(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_remembered_per_sign_in_until_it_expires_or_is_forgotten() {
        let keys = PlaygroundKeys::default();
        keys.remember("a", "sk-one", 100, 10);
        keys.remember("b", "sk-two", 100, 10);
        assert_eq!(keys.get("a", 50).as_deref(), Some("sk-one"));
        assert_eq!(keys.get("a", 100), None, "expired with the session");
        keys.forget("b");
        assert_eq!(keys.get("b", 50), None);
        assert!(!format!("{keys:?}").contains("sk-one"), "kept as a Secret");
    }

    #[test]
    fn a_full_memory_drops_the_key_expiring_first() {
        let keys = PlaygroundKeys::default();
        for i in 0..MAX_KEYS as u64 {
            keys.remember(&format!("s{i}"), "sk", 1000 + i, 10);
        }
        keys.remember("new", "sk-new", 5000, 10);
        assert_eq!(keys.get("s0", 20), None);
        assert_eq!(keys.get("s1", 20).as_deref(), Some("sk"));
        assert_eq!(keys.get("new", 20).as_deref(), Some("sk-new"));
    }

    #[test]
    fn the_form_carries_the_conversation_and_its_newest_turns_only() {
        let mut s = form_urlencoded::Serializer::new(String::new());
        for i in 0..MAX_TURNS + 2 {
            let t = Turn {
                role: if i % 2 == 0 { "user" } else { "assistant" }.into(),
                content: format!("turn {i}"),
                meta: None,
            };
            s.append_pair("turn", &serde_json::to_string(&t).unwrap());
        }
        s.append_pair("turn", r#"{"role": "system", "content": "sneaked in"}"#);
        s.append_pair("turn", "not json");
        let f = Form::parse(s.finish().as_bytes());
        let (turns, dropped) = turns_of(&f);
        assert!(dropped);
        assert_eq!(turns.len(), MAX_TURNS);
        assert_eq!(turns[0].content, "turn 2");
        assert!(turns.iter().all(|t| t.role != "system"));
    }

    #[test]
    fn the_request_has_the_system_prompt_the_turns_and_the_parameters() {
        let settings = Settings {
            model: "m".into(),
            system: "be brief".into(),
            temperature: "0.2".into(),
            max_tokens: "64".into(),
            stream: false,
        };
        let turns = [
            Turn {
                role: "user".into(),
                content: "hi".into(),
                meta: None,
            },
            Turn {
                role: "assistant".into(),
                content: "hello".into(),
                meta: Some(Meta::default()),
            },
        ];
        let mut p = Problems::default();
        let body = request_body(&settings, &turns, "again", &mut p);
        assert!(p.is_empty());
        assert_eq!(
            body,
            json!({"model": "m", "temperature": 0.2, "max_tokens": 64, "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "hello"},
                {"role": "user", "content": "again"},
            ]})
        );
        let bad = Settings {
            temperature: "3".into(),
            max_tokens: "0".into(),
            ..settings
        };
        request_body(&bad, &[], "x", &mut p);
        assert!(p.of("temperature").is_some() && p.of("max_tokens").is_some());
    }
}
