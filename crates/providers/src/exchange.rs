//! The upstream half of a translated call, shared by every provider whose format differs from
//! the client's (OpenAI's Responses API included, for providers that do not serve it): the client's request read into the internal representation and written by the
//! provider's [`Codec`], sent by the provider (its URL and credentials, or the in-process
//! mock), and the answer — whole, streamed, or an error — brought back in the client's dialect,
//! so the pipeline treats it like any other upstream answer. Generic over the codec: each
//! format's path is compiled on its own, with no dispatch at run time.

use std::future::Future;

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, CONTENT_LENGTH, CONTENT_TYPE};
use http::{Extensions, HeaderMap, Response, StatusCode};
use http_body_util::{BodyExt, Limited};
use sluice_core::endpoint::{Dialect, Endpoint};
use sluice_core::error::ApiError;
use sluice_core::rules::ModelRules;
use sluice_translate::embeddings::{self, EmbedRequest};
use sluice_translate::images::ImageRequest;
use sluice_translate::ir::{ChatRequest, ChatResponse};
use sluice_translate::json_tool;
use sluice_translate::stream::{JsonToolStream, StreamRead, TranslatedBody, Translator};
use sluice_translate::{anthropic, errors, parse_request, responses, write_response};
use sluice_translate::{Codec, Params, TranslateError};

use crate::body::UpstreamBody;
use crate::call::Call;

/// Largest upstream answer translated whole (it is held as values while translated).
const MAX_TRANSLATED_BODY: usize = 64 * 1024 * 1024;

/// The client header naming the Anthropic beta features a request asks for. A translated call
/// has no Anthropic upstream to take them: a hint.
pub(crate) const ANTHROPIC_BETA: HeaderName = HeaderName::from_static("anthropic-beta");

/// The request parameters a translated call left out (hints, and with `drop_params` what the
/// answer depends on), as the value of the client's `x-sluice-dropped-params` header. It rides
/// in the answer's extensions, which sluice alone writes, so an upstream cannot forge it and a
/// pass-through answer costs one empty lookup.
#[derive(Debug, Clone)]
pub struct DroppedParams(pub HeaderValue);

impl DroppedParams {
    /// The response header that lists the dropped parameters.
    pub const HEADER: HeaderName = HeaderName::from_static("x-sluice-dropped-params");

    /// Tell the client what its translated call left out, when it left out anything.
    pub fn copy(from: &Extensions, to: &mut HeaderMap) {
        if let Some(d) = from.get::<Self>() {
            to.insert(Self::HEADER, d.0.clone());
        }
    }
}

/// One translated chat call (a Responses call too: read and answered in its own format). `model` is the upstream model name; `drop_params` and the
/// model's rules decide what the request keeps and how it is shaped; `send` delivers the body
/// written in `codec`'s format, given whether the request streams and its model, and returns
/// the upstream's answer. What the translation dropped is logged (debug) and listed on the
/// answer ([`DroppedParams`]).
pub async fn chat<C, F, Fut>(
    provider: &'static str,
    codec: &C,
    call: &Call<'_>,
    model: String,
    (drop, rules): (bool, ModelRules),
    send: F,
) -> Result<Response<UpstreamBody>, ApiError>
where
    C: Codec,
    F: FnOnce(bool, &str, Bytes) -> Fut,
    Fut: Future<Output = Result<Response<UpstreamBody>, ApiError>>,
{
    let fail = |e: TranslateError| e.into_api(provider);
    let dialect = call.endpoint.dialect();
    let mut params = Params::new(drop, dialect).with_rules(rules);
    let (mut req, client) = if call.endpoint == Endpoint::Responses {
        let (req, echo) = responses::parse_request(call.body, &mut params).map_err(fail)?;
        (req, Client::Responses(Box::new(echo)))
    } else {
        let mut req = parse_request(dialect, call.body, &mut params).map_err(fail)?;
        // Google's and Bedrock's clients say whether they stream in the path.
        if call.endpoint.names_model_in_path() {
            req.stream = call.envelope.stream;
        }
        (req, Client::Chat(dialect))
    };
    req.model = model;
    sluice_translate::fit::fit(&mut req, &mut params);
    let body = Bytes::from(codec.write_request(&req, &mut params).map_err(fail)?);
    let beta = call.client_headers.get(ANTHROPIC_BETA);
    if let (Dialect::Anthropic, Some(features)) = (dialect, beta) {
        params.hint("anthropic-beta");
        tracing::debug!(provider, features = ?features, "anthropic-beta features not forwarded");
    }
    let dropped = params.header_value();
    if let Some(names) = &dropped {
        tracing::debug!(provider, dropped = ?names, "parameters the provider cannot take dropped");
    }
    let resp = send(req.stream, &req.model, body).await?;
    let mut resp = answer(provider, codec, client, req, resp).await?;
    if let Some(names) = dropped {
        resp.extensions_mut().insert(DroppedParams(names));
    }
    Ok(resp)
}

/// What a translated call's client reads: a dialect's chat API, or OpenAI's Responses API
/// (an OpenAI-dialect endpoint whose answer repeats the request's settings, [`responses::Echo`]).
enum Client {
    Chat(Dialect),
    /// Boxed: the request's future holds it, and a chat call pays for one word.
    Responses(Box<responses::Echo>),
}

impl Client {
    /// The dialect of its errors and answer ids.
    fn dialect(&self) -> Dialect {
        match self {
            Self::Chat(d) => *d,
            Self::Responses(_) => Dialect::OpenAi,
        }
    }

    /// A stream translated from `reader`'s format into the client's.
    fn translator<R: StreamRead>(self, reader: R) -> Translator<R> {
        match self {
            Self::Chat(d) => Translator::new(reader, d),
            Self::Responses(echo) => Translator::responses(reader, *echo),
        }
    }

    /// A whole answer in the client's format.
    fn write(&self, answer: &ChatResponse) -> Vec<u8> {
        match self {
            Self::Chat(d) => write_response(*d, answer),
            Self::Responses(echo) => responses::write_response(answer, echo),
        }
    }
}

/// The upstream's answer in the client's format: an error translated, a stream translated as
/// it arrives, a whole answer read and rewritten.
async fn answer<C: Codec>(
    provider: &'static str,
    codec: &C,
    client: Client,
    req: ChatRequest,
    resp: Response<UpstreamBody>,
) -> Result<Response<UpstreamBody>, ApiError> {
    let dialect = client.dialect();
    if !resp.status().is_success() {
        return error_answer(codec, dialect, resp).await;
    }
    let (mut parts, body) = resp.into_parts();
    parts.headers.remove(CONTENT_LENGTH);
    let id = codec.answer_id(&parts.headers).map_or_else(
        || fresh_id(dialect),
        |r| format!("{}{r}", id_prefix(dialect)),
    );
    if req.stream {
        let kind = match dialect {
            Dialect::Converse => "application/vnd.amazon.eventstream",
            Dialect::OpenAi | Dialect::Anthropic | Dialect::Gemini => "text/event-stream",
        };
        parts
            .headers
            .insert(CONTENT_TYPE, HeaderValue::from_static(kind));
        let reader = codec.reader(&id, &req.model);
        // A schema asked through a forced tool: its call is the answer's text.
        let body = if json_tool::asks_json_tool(&req) {
            let translator = client.translator(JsonToolStream::new(reader));
            UpstreamBody::made(TranslatedBody::new(body, translator))
        } else {
            UpstreamBody::made(TranslatedBody::new(body, client.translator(reader)))
        };
        return Ok(Response::from_parts(parts, body));
    }
    let bytes = collect(body).await?;
    let mut answer = codec
        .parse_response(&bytes)
        .map_err(|e| e.into_api(provider))?;
    if json_tool::asks_json_tool(&req) {
        json_tool::json_tool_answer(&mut answer);
    }
    if answer.id.is_empty() {
        answer.id = id;
    }
    if answer.model.is_empty() {
        answer.model = req.model;
    }
    parts
        .headers
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    let out = Bytes::from(client.write(&answer));
    Ok(Response::from_parts(parts, UpstreamBody::whole(out)))
}

fn id_prefix(client: Dialect) -> &'static str {
    match client {
        Dialect::OpenAi => "chatcmpl-",
        Dialect::Anthropic => "msg_",
        // Gemini's `responseId` is bare; Converse answers carry no id.
        Dialect::Gemini | Dialect::Converse => "",
    }
}

fn fresh_id(client: Dialect) -> String {
    format!(
        "{}{}",
        id_prefix(client),
        sluice_core::random::uuid_v4().simple()
    )
}

/// The vectors a native embeddings answer holds, and its token count if it reports one.
#[derive(Debug, Clone, PartialEq)]
pub struct Vectors {
    /// One vector per input, in order.
    pub vectors: Vec<Vec<f32>>,
    /// Input tokens, when the upstream counted them.
    pub tokens: Option<u64>,
}

/// A native embeddings API: its request body and its answer.
pub trait EmbedApi {
    /// The request body for `model`.
    fn write(&self, model: &str, req: &EmbedRequest) -> Result<Vec<u8>, TranslateError>;
    /// The vectors of an answer.
    fn read(&self, body: &[u8]) -> Result<Vectors, TranslateError>;
}

/// `/v1/embeddings` on a native upstream: the OpenAI request read, written for `api`, sent by
/// `send`, the answer written as OpenAI's (errors read with `errors`' format).
pub async fn embed<E, C, F, Fut>(
    provider: &'static str,
    api: &E,
    errors: &C,
    call: &Call<'_>,
    model: String,
    send: F,
) -> Result<Response<UpstreamBody>, ApiError>
where
    E: EmbedApi,
    C: Codec,
    F: FnOnce(&str, Bytes) -> Fut,
    Fut: Future<Output = Result<Response<UpstreamBody>, ApiError>>,
{
    let fail = |e: TranslateError| e.into_api(provider);
    let req = embeddings::parse_request(call.body).map_err(fail)?;
    let body = Bytes::from(api.write(&model, &req).map_err(fail)?);
    let resp = send(&model, body).await?;
    whole_answer(errors, resp, |bytes| {
        let v = api.read(bytes).map_err(fail)?;
        Ok(Bytes::from(embeddings::write_response(
            &model, &req, &v.vectors, v.tokens,
        )))
    })
    .await
}

/// A native image-generation API (Imagen's `:predict`, Bedrock's `InvokeModel` per model
/// family): its request body and the images of its answer, base64-encoded.
pub trait ImageApi {
    /// The request body for `model`.
    fn write(&self, model: &str, req: &ImageRequest) -> Result<Vec<u8>, TranslateError>;
    /// The images of an answer, base64-encoded.
    fn read(&self, body: &[u8]) -> Result<Vec<String>, TranslateError>;
}

/// `/v1/images/generations` on a native upstream: the OpenAI request read, written for `api`,
/// sent by `send`, the images written back as OpenAI's `b64_json` answer (errors read with
/// `errors`' format).
pub async fn images<I, C, F, Fut>(
    provider: &'static str,
    api: &I,
    errors: &C,
    call: &Call<'_>,
    model: String,
    send: F,
) -> Result<Response<UpstreamBody>, ApiError>
where
    I: ImageApi,
    C: Codec,
    F: FnOnce(&str, Bytes) -> Fut,
    Fut: Future<Output = Result<Response<UpstreamBody>, ApiError>>,
{
    let fail = |e: TranslateError| e.into_api(provider);
    let req = sluice_translate::images::parse_request(call.body).map_err(fail)?;
    let body = Bytes::from(api.write(&model, &req).map_err(fail)?);
    let resp = send(&model, body).await?;
    whole_answer(errors, resp, |bytes| {
        let images = api.read(bytes).map_err(fail)?;
        let created = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Ok(Bytes::from(sluice_translate::images::write_response(
            created, &images,
        )))
    })
    .await
}

/// A native upstream's whole answer as OpenAI's JSON: a success rewritten by `write`, an
/// error translated from `errors`' format.
async fn whole_answer<C: Codec>(
    errors: &C,
    resp: Response<UpstreamBody>,
    write: impl FnOnce(&[u8]) -> Result<Bytes, ApiError>,
) -> Result<Response<UpstreamBody>, ApiError> {
    let (mut parts, body) = resp.into_parts();
    parts.headers.remove(CONTENT_LENGTH);
    parts
        .headers
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    let bytes = collect(body).await?;
    let out = if parts.status.is_success() {
        write(&bytes)?
    } else {
        let (status, out) = errors::translate(errors, Dialect::OpenAi, parts.status, &bytes);
        parts.status = status;
        out
    };
    Ok(Response::from_parts(parts, UpstreamBody::whole(out)))
}

/// `count_tokens` for a provider without a counter: an estimate from the request's text.
pub fn count_locally(
    provider: &'static str,
    body: &[u8],
) -> Result<Response<UpstreamBody>, ApiError> {
    // Nothing is sent anywhere, so no parameter needs refusing.
    let req = anthropic::parse_request(body, &mut Params::new(true, Dialect::Anthropic))
        .map_err(|e| e.into_api(provider))?;
    let out = serde_json::json!({ "input_tokens": anthropic::estimate_tokens(&req) });
    let mut resp = Response::new(UpstreamBody::whole(Bytes::from(out.to_string())));
    *resp.status_mut() = StatusCode::OK;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Ok(resp)
}

/// The provider does not serve this endpoint.
pub fn not_served(
    provider: &'static str,
    call: &Call<'_>,
) -> Result<Response<UpstreamBody>, ApiError> {
    Err(ApiError::EndpointNotSupported {
        provider,
        endpoint: call.endpoint.name(),
    })
}

/// An upstream's error answer, read in `codec`'s error shape and told in the client's dialect
/// (a same-dialect call relayed to a platform whose errors have a shape of their own: Claude on
/// Bedrock answers a Claude client with AWS's errors).
pub async fn error_answer<C: Codec>(
    codec: &C,
    client: Dialect,
    resp: Response<UpstreamBody>,
) -> Result<Response<UpstreamBody>, ApiError> {
    let (mut parts, body) = resp.into_parts();
    parts.headers.remove(CONTENT_LENGTH);
    let bytes = collect(body).await?;
    let (status, out) = errors::translate(codec, client, parts.status, &bytes);
    parts.status = status;
    sluice_core::error::mark_aws_error(client, status, &mut parts.headers);
    parts
        .headers
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Ok(Response::from_parts(parts, UpstreamBody::whole(out)))
}

pub(crate) async fn collect<B>(body: B) -> Result<Bytes, ApiError>
where
    B: http_body::Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    Limited::new(body, MAX_TRANSLATED_BODY)
        .collect()
        .await
        .map(|c| c.to_bytes())
        .map_err(|e| ApiError::UpstreamUnreachable(format!("reading the answer failed: {e}")))
}
