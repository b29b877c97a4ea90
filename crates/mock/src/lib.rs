//! The built-in mock provider: answers in process for `mock/` deployments and as a standalone
//! server (`sluice mock`), in OpenAI's and Anthropic's real wire formats (the endpoint decides),
//! with deterministic content and usage. A request that offers tools gets a tool call.
//! It is the only fake in sluice's tests and the upstream of `sluice bench`.
//!
//! With an `api_key` set, requests must carry it where the provider reads its key (a 401
//! otherwise), so tests can tell that a gateway added its upstream credentials.
//!
//! Per-request overrides, as headers: `x-mock-latency-ms`, `x-mock-chunk-interval-ms`,
//! `x-mock-chunks`, `x-mock-response-tokens`; faults (`faults.rs`) from settings, `x-mock-*`
//! headers or a `mock_fault` body object.
//!
//! Embeddings are deterministic unit vectors of the input text. A model whose name contains
//! `bag-of-words` embeds a bag of words (the name the mock receives: the deployment's model,
//! e.g. `openai/text-bag-of-words` at `sluice mock`; for an in-process `mock/` deployment,
//! the model group's name)
//! instead: lower-cased words hashed into 256 dimensions (or the request's `dimensions`),
//! normalised, so that paraphrases sharing their words are close; the semantic cache's tests
//! use it.
//!
//! Beside inference, `sluice mock` serves OpenAI's Files and Batches (`files.rs`), Videos
//! (`videos.rs`) and Vector Stores (`vector_stores.rs`) from bounded in-memory stores, and
//! the web search APIs of Perplexity, Tavily and Exa (`search.rs`), each in its real wire
//! format.

mod anthropic;
mod bedrock;
mod body;
mod cohere;
mod faults;
pub mod files;
mod gemini;
mod media;
mod objects;
mod openai;
mod realtime;
mod record;
mod rules;
mod search;
mod server;
mod settings;
mod tools;
mod vector_stores;
mod videos;

pub use body::{MockBody, MockBodyError};
pub use faults::Faults;
pub use media::image_png;
pub use realtime::{
    CACHED_TOKENS as REALTIME_CACHED_TOKENS, INPUT_TOKENS as REALTIME_INPUT_TOKENS,
};
pub use record::RECORD_LIMIT;
pub use server::{serve, serve_workers};
pub use settings::{MockSettings, MockWire};

use std::borrow::Cow;

use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_TYPE};
use http::{HeaderMap, Method, Response, StatusCode};
use serde::Deserialize;
use serde_json::value::RawValue;

use openai::{filler, stamp, EmbeddingPlan, Plan};
use sluice_core::endpoint::{Dialect, Endpoint};
use sluice_core::error::{
    anthropic_error_body, anthropic_error_type, aws_error_body, aws_error_type, error_body,
    google_error_body,
};

/// The fields of a request the mock reads; everything else is skipped unparsed.
#[derive(Deserialize)]
struct MockRequest<'a> {
    #[serde(borrow)]
    model: Option<Cow<'a, str>>,
    #[serde(default)]
    stream: Option<bool>,
    stream_options: Option<StreamOptions>,
    #[serde(borrow)]
    input: Option<&'a RawValue>,
    dimensions: Option<u32>,
    #[serde(borrow)]
    encoding_format: Option<Cow<'a, str>>,
    #[serde(default)]
    mock_fault: Option<faults::BodyFault>,
    #[serde(borrow)]
    tools: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct StreamOptions {
    #[serde(default)]
    include_usage: bool,
}

/// Settings for this one request: the server's or deployment's, with header overrides.
fn effective(headers: &HeaderMap, base: &MockSettings) -> MockSettings {
    let num = |name: &str| -> Option<u64> {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .and_then(|s| s.trim().parse().ok())
    };
    let mut s = base.clone();
    if let Some(ms) = num("x-mock-latency-ms") {
        s.latency = std::time::Duration::from_millis(ms);
    }
    if let Some(ms) = num("x-mock-chunk-interval-ms") {
        s.chunk_interval = std::time::Duration::from_millis(ms);
    }
    if let Some(n) = num("x-mock-chunks").and_then(|n| u32::try_from(n).ok()) {
        s.chunks = n.max(1);
    }
    if let Some(n) = num("x-mock-response-tokens").and_then(|n| u32::try_from(n).ok()) {
        s.response_tokens = n.max(1);
    }
    s.faults = s.faults.with_headers(headers);
    s
}

/// Answer one request as the upstream would. Never fails: bad requests get OpenAI's 400.
pub async fn respond(
    endpoint: Endpoint,
    headers: &HeaderMap,
    body: &Bytes,
    settings: &MockSettings,
) -> Response<MockBody> {
    respond_as(endpoint, headers, body, settings, None).await
}

/// [`respond`], with the model a path names (an Azure deployment) when the body has none.
async fn respond_as(
    endpoint: Endpoint,
    headers: &HeaderMap,
    body: &Bytes,
    settings: &MockSettings,
    path_model: Option<&str>,
) -> Response<MockBody> {
    let mut s = effective(headers, settings);
    let dialect = endpoint.dialect();
    if let Some(denied) = key_refused(&s, headers, None, dialect) {
        return denied;
    }
    match endpoint {
        Endpoint::ImageGenerations
        | Endpoint::ImageEdits
        | Endpoint::ImageVariations
        | Endpoint::AudioTranscriptions
        | Endpoint::AudioTranslations
        | Endpoint::AudioSpeech
        | Endpoint::Moderations
        | Endpoint::Rerank
        | Endpoint::Ocr => return media::respond(endpoint, headers, body, &s).await,
        // Google's and Bedrock's clients are answered on their own routes (`respond_wire`).
        Endpoint::GenerateContent | Endpoint::Converse => {
            return bad_request(
                dialect,
                "this operation is served on the provider's own path",
                None,
                "invalid_request",
            )
        }
        Endpoint::ChatCompletions
        | Endpoint::Completions
        | Endpoint::Embeddings
        | Endpoint::Responses
        | Endpoint::Messages
        | Endpoint::CountTokens => {}
    }
    let req: MockRequest<'_> = match serde_json::from_slice(body) {
        Ok(r) => r,
        Err(e) => {
            return bad_request(
                dialect,
                &format!("We could not parse the JSON body of your request. ({e})"),
                None,
                "invalid_json",
            )
        }
    };
    if let Some(f) = &req.mock_fault {
        s.faults = s.faults.with_body(f);
        s.latency = f.latency().unwrap_or(s.latency);
    }
    if let Some(fault) =
        before_answer(&s, |status, retry| injected_error(dialect, status, retry)).await
    {
        return fault;
    }
    let Some(model) = req
        .model
        .as_deref()
        .or(path_model)
        .filter(|m| !m.is_empty())
    else {
        return bad_request(
            dialect,
            "you must provide a model parameter",
            Some("model"),
            "missing_required_parameter",
        );
    };
    // What the real API refuses for this model, it refuses here too (`rules.rs`).
    let refused = match endpoint {
        Endpoint::Messages => rules::anthropic_refusal(model, body).map(|m| (m, None)),
        Endpoint::ChatCompletions => rules::openai_refusal(model, body).map(|(m, p)| (m, Some(p))),
        _ => None,
    };
    if let Some((message, param)) = refused {
        return bad_request(dialect, &message, param, "unsupported_parameter");
    }
    // A mock "token" is four bytes of request body: cheap, deterministic, grows with the prompt.
    let prompt_tokens = (body.len() as u64).div_ceil(4).max(1);
    let text = match endpoint {
        Endpoint::Embeddings => return embeddings(&req, model, &s, prompt_tokens),
        Endpoint::CountTokens => return json(StatusCode::OK, anthropic::count(prompt_tokens)),
        Endpoint::ChatCompletions => Text::Chat,
        Endpoint::Completions => Text::Completion,
        Endpoint::Responses => Text::Response,
        Endpoint::Messages => Text::Message,
        // Answered above.
        Endpoint::ImageGenerations
        | Endpoint::ImageEdits
        | Endpoint::ImageVariations
        | Endpoint::AudioTranscriptions
        | Endpoint::AudioTranslations
        | Endpoint::AudioSpeech
        | Endpoint::Moderations
        | Endpoint::Rerank
        | Endpoint::GenerateContent
        | Endpoint::Converse
        | Endpoint::Ocr => Text::Response,
    };
    let turn = match text {
        Text::Chat | Text::Message => tools::plan(req.tools, body),
        Text::Response => tools::plan_response(req.tools, body),
        Text::Completion => None,
    };
    let include_usage = req.stream_options.is_some_and(|o| o.include_usage);
    let plan = match turn {
        Some(tools::Turn::Call(t)) => plan(&s, model, Some(t), prompt_tokens, include_usage),
        Some(tools::Turn::Say(words)) => {
            let said = MockSettings {
                response: Some(words),
                ..s.clone()
            };
            plan(&said, model, None, prompt_tokens, include_usage)
        }
        None => plan(&s, model, None, prompt_tokens, include_usage),
    };
    if req.stream == Some(true) {
        let frames = match text {
            Text::Chat => plan.chat_stream(),
            Text::Completion => plan.completion_stream(),
            Text::Message => plan.message_stream(),
            Text::Response => plan.response_stream(),
        };
        return stream(frames, &s, "text/event-stream; charset=utf-8");
    }
    let bytes = match text {
        Text::Chat => plan.chat(),
        Text::Completion => plan.completion(),
        Text::Message => plan.message(),
        Text::Response => plan.response(),
    };
    json(StatusCode::OK, bytes)
}

/// The text answers' shapes.
#[derive(Clone, Copy)]
enum Text {
    Chat,
    Completion,
    Response,
    Message,
}

/// The answer's content and usage: the tool call, else the fixed or filler text.
fn plan(
    s: &MockSettings,
    model: &str,
    tool: Option<tools::ToolPlan>,
    prompt_tokens: u64,
    include_usage: bool,
) -> Plan {
    let text = s
        .response
        .clone()
        .unwrap_or_else(|| filler(s.response_tokens));
    let (serial, created) = stamp();
    let completion_tokens = match &tool {
        Some(t) => (t.arguments.len() as u64).div_ceil(4).max(1),
        None => text.split_whitespace().count().max(1) as u64,
    };
    Plan {
        model: model.to_owned(),
        completion_tokens,
        tool,
        text,
        prompt_tokens,
        chunks: s.chunks,
        include_usage,
        created,
        serial,
    }
}

/// Latency, then the injected fault if one fires: `Some` answer (from `error`, in the
/// provider's shape) instead of the real one.
async fn before_answer(
    s: &MockSettings,
    error: impl Fn(StatusCode, Option<f64>) -> Response<MockBody>,
) -> Option<Response<MockBody>> {
    if !s.latency.is_zero() {
        tokio::time::sleep(s.latency).await;
    }
    if s.faults.fires() {
        if s.faults.stalls_answer() {
            tokio::time::sleep(s.faults.stall).await;
        }
        if s.faults.reset {
            return Some(Response::new(MockBody::reset()));
        }
        if s.faults.garbage {
            return Some(json_answer(Bytes::from_static(GARBAGE)));
        }
        if let Some(size) = s.faults.huge_bytes {
            return Some(json_answer(huge_completion(size)));
        }
        if let Some(status) = s
            .faults
            .status
            .and_then(|v| StatusCode::from_u16(v).ok())
            .filter(|s| !s.is_success())
        {
            return Some(error(status, s.faults.retry_after));
        }
    }
    None
}

/// [`before_answer`] for an API beyond inference (the search APIs): the request's settings
/// (`x-mock-*` headers applied), its latency, then `Some` injected fault in OpenAI's shape.
async fn openai_fault(headers: &HeaderMap, settings: &MockSettings) -> Option<Response<MockBody>> {
    let s = effective(headers, settings);
    before_answer(&s, |status, retry| {
        injected_error(Dialect::OpenAi, status, retry)
    })
    .await
}

/// What the `garbage` fault sends with a 200 and a JSON content type: an HTML error page from
/// a middlebox, then bytes that are not even text.
const GARBAGE: &[u8] = b"<html><body>502 Bad Gateway</body></html>\x00\xff\xfe{\"choices\":[";

/// A 200 answer with a JSON content type and `body`.
fn json_answer(body: Bytes) -> Response<MockBody> {
    let mut resp = Response::new(MockBody::full(body));
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

/// A valid OpenAI chat completion whose text pads it to about `size` bytes (the `huge_bytes`
/// fault), built once into one buffer.
fn huge_completion(size: usize) -> Bytes {
    let head = br#"{"id":"chatcmpl-mock-huge","object":"chat.completion","created":0,"model":"mock-huge","choices":[{"index":0,"message":{"role":"assistant","content":""#;
    let text = size.saturating_sub(head.len() + 160).max(1);
    let tail = format!(
        r#""}},"finish_reason":"stop"}}],"usage":{{"prompt_tokens":1,"completion_tokens":{c},"total_tokens":{t}}}}}"#,
        c = text / 4,
        t = text / 4 + 1
    );
    let mut out = Vec::with_capacity(head.len() + text + tail.len());
    out.extend_from_slice(head);
    out.resize(head.len() + text, b'x');
    out.extend_from_slice(tail.as_bytes());
    Bytes::from(out)
}

/// A paced stream answer with the settings' cut and stall faults.
fn stream(frames: Vec<Bytes>, s: &MockSettings, content_type: &'static str) -> Response<MockBody> {
    let f = &s.faults;
    let body = MockBody::paced(frames, s.chunk_interval, f.cut_after_chunks)
        .stall(f.stall_after_chunks, f.stall);
    let mut resp = Response::new(body);
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}

/// `Retry-After` on an injected error.
fn with_retry_after(mut resp: Response<MockBody>, retry_after: Option<f64>) -> Response<MockBody> {
    if let Some(v) = retry_after.and_then(|s| HeaderValue::from_str(&s.to_string()).ok()) {
        resp.headers_mut().insert(http::header::RETRY_AFTER, v);
    }
    resp
}

/// A request on a provider's native path (`sluice mock` only: in-process `mock/`
/// deployments answer in the client's dialect).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NativeRoute {
    /// Google AI Studio, or Vertex AI when the flag is set: model and operation.
    Gemini(String, gemini::Op, bool),
    /// Google's OAuth token endpoint (`POST /token`).
    Token,
    /// An Anthropic model on Vertex AI: Messages bodies without `model`.
    VertexAnthropic(String),
    /// Amazon Bedrock: model id (decoded) and operation.
    Bedrock(String, bedrock::Op),
    /// Cohere's chat, v1 or v2.
    Cohere(cohere::Version),
}

impl NativeRoute {
    /// Match a Gemini or Bedrock path.
    pub(crate) fn of(path: &str) -> Option<Self> {
        if path == "/token" {
            return Some(Self::Token);
        }
        if let Some(version) = cohere::route(path) {
            return Some(Self::Cohere(version));
        }
        if let Some(model) = gemini::anthropic_route(path) {
            return Some(Self::VertexAnthropic(model.to_owned()));
        }
        if let Some((model, op, vertex)) = gemini::route(path) {
            return Some(Self::Gemini(model.to_owned(), op, vertex));
        }
        bedrock::route(path).map(|(model, op)| Self::Bedrock(model, op))
    }
}

/// Answer a request on a native path, in that provider's wire format (errors and injected
/// faults included). Bedrock requests are SigV4-checked first when the mock holds a key;
/// Vertex paths need a token the mock's `/token` issued.
pub(crate) async fn respond_native(
    route: &NativeRoute,
    uri: &http::Uri,
    headers: &HeaderMap,
    body: &Bytes,
    settings: &MockSettings,
) -> Response<MockBody> {
    let s = effective(headers, settings);
    let denied = match route {
        NativeRoute::Token => return gemini::token(body, stamp().0),
        NativeRoute::Bedrock(..) => bedrock::check_signature(
            &s,
            uri.path(),
            uri.query().unwrap_or_default(),
            headers,
            body,
        ),
        NativeRoute::Gemini(_, _, true) | NativeRoute::VertexAnthropic(_) => {
            gemini::check_token(headers)
        }
        NativeRoute::Gemini(_, _, false) | NativeRoute::Cohere(_) => {
            key_refused(&s, headers, uri.query(), Dialect::OpenAi)
        }
    };
    if let Some(denied) = denied {
        return denied;
    }
    let prompt_tokens = (body.len() as u64).div_ceil(4).max(1);
    match route {
        NativeRoute::VertexAnthropic(model) => {
            vertex_anthropic(model, headers, body, settings).await
        }
        NativeRoute::Gemini(model, op, _) => {
            if let Some(f) = native_fault(&s, gemini::error).await {
                return f;
            }
            if let Some(refusal) = rules::gemini_refusal(model, body) {
                return gemini::bad_request(&refusal);
            }
            let sse = sluice_translate::gemini::asks_sse(uri.query());
            gemini::answer(model, *op, sse, body, &s, prompt_tokens)
        }
        NativeRoute::Bedrock(model, op) => {
            if let Some(f) = native_fault(&s, bedrock::error).await {
                return f;
            }
            bedrock::answer(model, *op, body, &s, prompt_tokens)
        }
        NativeRoute::Token => gemini::token(body, stamp().0),
        NativeRoute::Cohere(version) => cohere_chat(*version, body, &s, prompt_tokens).await,
    }
}

/// Cohere's chat: latency and faults as for OpenAI, then the answer in Cohere's shape.
async fn cohere_chat(
    version: cohere::Version,
    body: &Bytes,
    s: &MockSettings,
    prompt_tokens: u64,
) -> Response<MockBody> {
    if let Some(fault) = before_answer(s, |status, retry| {
        injected_error(Dialect::OpenAi, status, retry)
    })
    .await
    {
        return fault;
    }
    let req: MockRequest<'_> = match serde_json::from_slice(body) {
        Ok(r) => r,
        Err(e) => return bad_request(Dialect::OpenAi, &e.to_string(), None, "invalid_json"),
    };
    let model = req.model.as_deref().unwrap_or("command-a");
    let plan = plan(s, model, None, prompt_tokens, false);
    if req.stream == Some(true) {
        let content_type = match version {
            cohere::Version::V1 => "application/stream+json",
            cohere::Version::V2 => "text/event-stream",
        };
        return stream(plan.cohere_stream(version), s, content_type);
    }
    json(StatusCode::OK, plan.cohere_chat(version))
}

/// An Azure OpenAI path (`/openai/deployments/{deployment}/chat/completions`,
/// `/openai/responses`): the endpoint and the deployment, which stands for the model.
pub(crate) fn azure_route(path: &str) -> Option<(Endpoint, Option<&str>)> {
    let rest = path.strip_prefix("/openai")?;
    if let Some(below) = rest.strip_prefix("/deployments/") {
        let (deployment, endpoint) = below.split_once('/')?;
        let endpoint = Endpoint::from_path(&format!("/{endpoint}"))?;
        return Some((endpoint, Some(deployment)));
    }
    Endpoint::from_path(rest).map(|e| (e, None))
}

/// Answer an Azure OpenAI path.
pub(crate) async fn respond_azure(
    endpoint: Endpoint,
    deployment: Option<&str>,
    headers: &HeaderMap,
    body: &Bytes,
    settings: &MockSettings,
) -> Response<MockBody> {
    respond_as(endpoint, headers, body, settings, deployment).await
}

/// When the mock requires a key: a 401 unless the request carries it where one of the
/// providers reads it (`Authorization: Bearer`, `x-api-key`, `api-key`, `x-goog-api-key`, or
/// Google's `?key=`).
pub(crate) fn key_refused(
    s: &MockSettings,
    headers: &HeaderMap,
    query: Option<&str>,
    dialect: Dialect,
) -> Option<Response<MockBody>> {
    let want = s.api_key.as_deref()?;
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let presented = [
        header("authorization").and_then(|v| v.strip_prefix("Bearer ")),
        header("x-api-key"),
        header("api-key"),
        header("x-goog-api-key"),
        query.and_then(|q| q.split('&').find_map(|p| p.strip_prefix("key="))),
    ];
    // Compared in constant time, like every secret sluice checks.
    if presented
        .iter()
        .flatten()
        .any(|p| sluice_net::secret_eq(p.as_bytes(), want.as_bytes()))
    {
        return None;
    }
    let message = "Incorrect API key provided.";
    Some(match dialect {
        Dialect::OpenAi => json(
            StatusCode::UNAUTHORIZED,
            error_body(message, "invalid_request_error", None, "invalid_api_key"),
        ),
        Dialect::Anthropic => json(
            StatusCode::UNAUTHORIZED,
            anthropic_error_body("authentication_error", message),
        ),
        Dialect::Gemini => json(
            StatusCode::UNAUTHORIZED,
            google_error_body(StatusCode::UNAUTHORIZED, message),
        ),
        Dialect::Converse => json(
            StatusCode::FORBIDDEN,
            aws_error_body("AccessDeniedException", message),
        ),
    })
}

/// Answer a translated call in process as the `wire` upstream would, for `mock/` deployments
/// with `mock_wire` (no socket, same bytes as `sluice mock` on the real paths).
pub async fn respond_wire(
    wire: MockWire,
    model: &str,
    stream: bool,
    headers: &HeaderMap,
    body: &Bytes,
    settings: &MockSettings,
) -> Response<MockBody> {
    let route = match (wire, stream) {
        (MockWire::Gemini, false) => {
            NativeRoute::Gemini(model.to_owned(), gemini::Op::Generate, false)
        }
        (MockWire::Gemini, true) => {
            NativeRoute::Gemini(model.to_owned(), gemini::Op::Stream, false)
        }
        (MockWire::Bedrock, false) => NativeRoute::Bedrock(model.to_owned(), bedrock::Op::Converse),
        (MockWire::Bedrock, true) => NativeRoute::Bedrock(model.to_owned(), bedrock::Op::Stream),
    };
    // As sluice's Gemini provider asks: streams as SSE.
    let uri = match wire {
        MockWire::Gemini => http::Uri::from_static("/?alt=sse"),
        MockWire::Bedrock => http::Uri::default(),
    };
    respond_native(&route, &uri, headers, body, settings).await
}

/// Latency and injected faults, the error in the provider's shape.
async fn native_fault(
    s: &MockSettings,
    error: fn(StatusCode, &str) -> Response<MockBody>,
) -> Option<Response<MockBody>> {
    before_answer(s, |status, retry| {
        let message = format!("mock error: status {} (injected fault)", status.as_u16());
        with_retry_after(error(status, &message), retry)
    })
    .await
}

/// An Anthropic model on Vertex AI: the Messages mock, with the model the URL names put into
/// the body (which must carry Vertex's `anthropic_version`).
async fn vertex_anthropic(
    model: &str,
    headers: &HeaderMap,
    body: &Bytes,
    settings: &MockSettings,
) -> Response<MockBody> {
    let mut v: serde_json::Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => return bad_request(Dialect::Anthropic, &e.to_string(), None, "invalid_json"),
    };
    if v["anthropic_version"] != sluice_translate::anthropic::VERTEX_VERSION {
        return bad_request(
            Dialect::Anthropic,
            "anthropic_version: vertex-2023-10-16 is required",
            None,
            "invalid_request",
        );
    }
    // The URL names the model; rawPredict refuses one in the body.
    if v.get("model").is_some() {
        return bad_request(
            Dialect::Anthropic,
            "model: Extra inputs are not permitted",
            None,
            "invalid_request",
        );
    }
    v["model"] = model.into();
    let body = Bytes::from(v.to_string());
    Box::pin(respond(Endpoint::Messages, headers, &body, settings)).await
}
fn embeddings(
    req: &MockRequest<'_>,
    model: &str,
    s: &MockSettings,
    prompt_tokens: u64,
) -> Response<MockBody> {
    let inputs = match req.input.map(|raw| serde_json::from_str(raw.get())) {
        Some(Ok(serde_json::Value::String(t))) => vec![t],
        Some(Ok(serde_json::Value::Array(items))) => {
            if items.first().is_some_and(serde_json::Value::is_number) {
                vec![serde_json::Value::Array(items).to_string()]
            } else {
                items
                    .into_iter()
                    .map(|i| match i {
                        serde_json::Value::String(t) => t,
                        other => other.to_string(),
                    })
                    .collect()
            }
        }
        _ => {
            return error(
                StatusCode::BAD_REQUEST,
                "'input' is a required property and must be a string or an array",
                Some("input"),
                "invalid_value",
            )
        }
    };
    let plan = EmbeddingPlan {
        model: model.to_owned(),
        inputs,
        dims: req
            .dimensions
            .unwrap_or(if openai::is_bag_of_words(model) {
                openai::BAG_OF_WORDS_DIMS
            } else {
                s.embedding_dims
            })
            .max(1),
        base64: req.encoding_format.as_deref() == Some("base64"),
        prompt_tokens,
    };
    json(StatusCode::OK, plan.answer())
}

fn json(status: StatusCode, bytes: Bytes) -> Response<MockBody> {
    let mut resp = Response::new(MockBody::full(bytes));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

fn error(status: StatusCode, message: &str, param: Option<&str>, code: &str) -> Response<MockBody> {
    json(
        status,
        error_body(message, "invalid_request_error", param, code),
    )
}

/// A 400 in the endpoint's dialect.
fn bad_request(
    dialect: Dialect,
    message: &str,
    param: Option<&str>,
    code: &str,
) -> Response<MockBody> {
    match dialect {
        Dialect::OpenAi => error(StatusCode::BAD_REQUEST, message, param, code),
        Dialect::Anthropic => json(
            StatusCode::BAD_REQUEST,
            anthropic_error_body("invalid_request_error", message),
        ),
        Dialect::Gemini => json(
            StatusCode::BAD_REQUEST,
            google_error_body(StatusCode::BAD_REQUEST, message),
        ),
        Dialect::Converse => json(
            StatusCode::BAD_REQUEST,
            aws_error_body("ValidationException", message),
        ),
    }
}

/// The error the provider sends for a status, for an injected fault, in the endpoint's
/// dialect.
fn injected_error(
    dialect: Dialect,
    status: StatusCode,
    retry_after: Option<f64>,
) -> Response<MockBody> {
    let message = format!("mock error: status {} (injected fault)", status.as_u16());
    let body = match dialect {
        Dialect::OpenAi => {
            let (kind, code) = match status.as_u16() {
                401 => ("invalid_request_error", "invalid_api_key"),
                404 => ("invalid_request_error", "model_not_found"),
                429 => ("requests", "rate_limit_exceeded"),
                400..=499 => ("invalid_request_error", "invalid_request"),
                _ => ("server_error", "server_error"),
            };
            error_body(&message, kind, None, code)
        }
        Dialect::Anthropic => anthropic_error_body(anthropic_error_type(status), &message),
        Dialect::Gemini => google_error_body(status, &message),
        Dialect::Converse => aws_error_body(aws_error_type(status), &message),
    };
    with_retry_after(json(status, body), retry_after)
}

/// A call on the account's objects (Files, Batches, Videos, Vector Stores) as the in-process
/// mock deployment makes it: one entry for them all, routed by path (without `/v1`).
pub async fn account_objects(
    method: &Method,
    path: &str,
    query: Option<&str>,
    headers: &HeaderMap,
    body: &Bytes,
    settings: &MockSettings,
) -> Response<MockBody> {
    if let Some(p) = videos::route(path) {
        return videos::respond(method, p, query, headers, body, settings);
    }
    if let Some(p) = vector_stores::route(path) {
        return vector_stores::respond(method, p, query, headers, body, settings);
    }
    files::respond(method, path, query, headers, body, settings).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    async fn call(e: Endpoint, headers: &[(&str, &str)], body: &str) -> (u16, String) {
        let mut h = HeaderMap::new();
        for (k, v) in headers {
            h.insert(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        let resp = respond(
            e,
            &h,
            &Bytes::from(body.to_owned()),
            &MockSettings::default(),
        )
        .await;
        let status = resp.status().as_u16();
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8(bytes.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn chat_answers_with_usage() {
        let (s, b) = call(
            Endpoint::ChatCompletions,
            &[],
            r#"{"model":"x","messages":[]}"#,
        )
        .await;
        assert_eq!(s, 200);
        let v: serde_json::Value = serde_json::from_str(&b).unwrap();
        assert_eq!(v["model"], "x");
        assert_eq!(v["usage"]["completion_tokens"], 16);
    }

    #[tokio::test]
    async fn header_overrides() {
        let (_, b) = call(
            Endpoint::ChatCompletions,
            &[("x-mock-response-tokens", "3"), ("x-mock-chunks", "2")],
            r#"{"model":"x","stream":true}"#,
        )
        .await;
        assert_eq!(b.matches("data: ").count(), 1 + 2 + 1 + 1);
        let (s, b) = call(
            Endpoint::ChatCompletions,
            &[("x-mock-status", "429")],
            r#"{"model":"x"}"#,
        )
        .await;
        assert_eq!(s, 429);
        assert!(b.contains("rate_limit_exceeded"));
    }

    #[tokio::test]
    async fn bad_requests_get_openai_errors() {
        let (s, b) = call(Endpoint::ChatCompletions, &[], "{nope").await;
        assert_eq!(s, 400);
        assert!(b.contains("invalid_json"));
        let (s, b) = call(Endpoint::ChatCompletions, &[], "{}").await;
        assert_eq!(s, 400);
        assert!(b.contains("\"param\":\"model\""));
        let (s, _) = call(Endpoint::Embeddings, &[], r#"{"model":"e"}"#).await;
        assert_eq!(s, 400);
    }

    #[tokio::test]
    async fn embeddings_count_inputs_and_dimensions() {
        let (_, b) = call(
            Endpoint::Embeddings,
            &[],
            r#"{"model":"e","input":["a","b","c"],"dimensions":4}"#,
        )
        .await;
        let v: serde_json::Value = serde_json::from_str(&b).unwrap();
        assert_eq!(v["data"].as_array().unwrap().len(), 3);
        assert_eq!(v["data"][2]["embedding"].as_array().unwrap().len(), 4);
        let (_, b) = call(
            Endpoint::Embeddings,
            &[],
            r#"{"model":"e","input":[1,2,3]}"#,
        )
        .await;
        let v: serde_json::Value = serde_json::from_str(&b).unwrap();
        assert_eq!(
            v["data"].as_array().unwrap().len(),
            1,
            "a token array is one input"
        );
    }
}
