//! Read the request envelope (`model`, `stream`, `stream_options`, and the routing fields
//! LiteLLM accepts in a body: `fallbacks`, `num_retries`, `timeout`, `cache`) without building the
//! body, and splice the few bytes sluice changes into the original buffer without copying it.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;

use sluice_core::cache_control::CacheControl;
use sluice_core::endpoint::BodyFormat;
use sluice_core::error::{ApiError, MockFailure};

use crate::multipart;

#[derive(Deserialize)]
struct RawEnvelope<'a> {
    #[serde(borrow, default)]
    model: Option<&'a RawValue>,
    #[serde(borrow, default)]
    stream: Option<&'a RawValue>,
    /// `null` too is kept (as the raw `null`): the splice must replace it, not add a second.
    #[serde(borrow, default, deserialize_with = "present")]
    stream_options: Option<&'a RawValue>,
    #[serde(borrow, default)]
    fallbacks: Option<&'a RawValue>,
    // The output cap, under each API's name (Chat's old and new, Responses'), read only for
    // the budget reservation of a caller with no cost history.
    #[serde(borrow, default)]
    max_tokens: Option<&'a RawValue>,
    #[serde(borrow, default)]
    max_completion_tokens: Option<&'a RawValue>,
    #[serde(borrow, default)]
    max_output_tokens: Option<&'a RawValue>,
    // The fields a same-dialect call is fitted to its model by (`Tunables`).
    #[serde(borrow, default)]
    temperature: Option<&'a RawValue>,
    #[serde(borrow, default)]
    top_p: Option<&'a RawValue>,
    #[serde(borrow, default)]
    top_k: Option<&'a RawValue>,
    #[serde(borrow, default)]
    thinking: Option<&'a RawValue>,
    #[serde(borrow, default)]
    output_config: Option<&'a RawValue>,
    #[serde(borrow, default)]
    num_retries: Option<&'a RawValue>,
    #[serde(borrow, default)]
    timeout: Option<&'a RawValue>,
    // LiteLLM's switches for trying fallbacks and retries (`MockFailure`).
    #[serde(borrow, default)]
    mock_testing_fallbacks: Option<&'a RawValue>,
    #[serde(borrow, default)]
    mock_testing_context_fallbacks: Option<&'a RawValue>,
    #[serde(borrow, default)]
    mock_testing_content_policy_fallbacks: Option<&'a RawValue>,
    #[serde(borrow, default)]
    mock_testing_rate_limit_error: Option<&'a RawValue>,
    #[serde(borrow, default)]
    user: Option<&'a RawValue>,
    #[serde(borrow, default)]
    cache: Option<&'a RawValue>,
    #[serde(borrow, default)]
    guardrails: Option<&'a RawValue>,
    // LiteLLM's request tags: top-level `tags` (never sent) or `metadata.tags`.
    #[serde(borrow, default)]
    tags: Option<&'a RawValue>,
    #[serde(borrow, default)]
    metadata: Option<&'a RawValue>,
    // LiteLLM's client-side credentials and upstream targets (`ClientSide`).
    #[serde(borrow, default)]
    api_base: Option<&'a RawValue>,
    #[serde(borrow, default)]
    base_url: Option<&'a RawValue>,
    #[serde(borrow, default)]
    api_key: Option<&'a RawValue>,
    #[serde(borrow, default)]
    extra_headers: Option<&'a RawValue>,
    #[serde(borrow, default)]
    api_version: Option<&'a RawValue>,
    #[serde(borrow, default)]
    user_config: Option<&'a RawValue>,
    #[serde(borrow, default)]
    vertex_credentials: Option<&'a RawValue>,
    #[serde(borrow, default)]
    aws_access_key_id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    aws_secret_access_key: Option<&'a RawValue>,
    #[serde(borrow, default)]
    aws_role_name: Option<&'a RawValue>,
    #[serde(borrow, default)]
    aws_web_identity_token: Option<&'a RawValue>,
    #[serde(borrow, default)]
    aws_sts_endpoint: Option<&'a RawValue>,
    #[serde(borrow, default)]
    aws_bedrock_runtime_endpoint: Option<&'a RawValue>,
    #[serde(borrow, default)]
    s3_endpoint_url: Option<&'a RawValue>,
    #[serde(borrow, default)]
    sagemaker_base_url: Option<&'a RawValue>,
    #[serde(borrow, default)]
    deployment_url: Option<&'a RawValue>,
    #[serde(default)]
    messages: Option<Messages>,
}

/// What a request body says about where and how to call the upstream: LiteLLM's client-side
/// credentials (`api_base`, `api_key`, ...). Refused unless the operator allows them
/// (`general_settings.allow_client_side_credentials`): a caller who picks the upstream can
/// point the gateway, and the provider keys it holds, at any host. Always removed from the
/// body sent upstream.
#[derive(Debug, Default)]
pub struct ClientSide<'a> {
    /// `api_base`, else `base_url`: the field's name and its value.
    pub api_base: Option<(&'static str, &'a RawValue)>,
    /// `api_key`.
    pub api_key: Option<&'a RawValue>,
    /// `extra_headers`.
    pub extra_headers: Option<&'a RawValue>,
    /// The first field present that sluice does not honour even when allowed (`api_version`,
    /// cloud credentials and endpoints).
    pub unsupported: Option<&'static str>,
}

impl ClientSide<'_> {
    /// The first field present, for the refusal that names it.
    pub fn first_field(&self) -> &'static str {
        match (self.api_base, self.api_key, self.extra_headers) {
            (Some((name, _)), _, _) => name,
            (None, Some(_), _) => "api_key",
            (None, None, Some(_)) => "extra_headers",
            (None, None, None) => self.unsupported.unwrap_or("api_base"),
        }
    }
}

impl<'a> RawEnvelope<'a> {
    /// The client-side fields present (`None`, the usual case, costs one branch per field), their
    /// value ranges added to `values` so that they are stripped.
    fn client_side(
        &self,
        body: &[u8],
        values: &mut Vec<Range<usize>>,
    ) -> Result<Option<Box<ClientSide<'a>>>, ApiError> {
        let unsupported: [(&'static str, Option<&'a RawValue>); 12] = [
            ("api_version", self.api_version),
            ("user_config", self.user_config),
            ("vertex_credentials", self.vertex_credentials),
            ("aws_access_key_id", self.aws_access_key_id),
            ("aws_secret_access_key", self.aws_secret_access_key),
            ("aws_role_name", self.aws_role_name),
            ("aws_web_identity_token", self.aws_web_identity_token),
            ("aws_sts_endpoint", self.aws_sts_endpoint),
            (
                "aws_bedrock_runtime_endpoint",
                self.aws_bedrock_runtime_endpoint,
            ),
            ("s3_endpoint_url", self.s3_endpoint_url),
            ("sagemaker_base_url", self.sagemaker_base_url),
            ("deployment_url", self.deployment_url),
        ];
        let honoured = [
            self.api_base,
            self.base_url,
            self.api_key,
            self.extra_headers,
        ];
        if honoured
            .iter()
            .chain(unsupported.iter().map(|(_, v)| v))
            .all(Option::is_none)
        {
            return Ok(None);
        }
        let mut side = ClientSide {
            api_base: self
                .api_base
                .map(|v| ("api_base", v))
                .or(self.base_url.map(|v| ("base_url", v))),
            api_key: self.api_key,
            extra_headers: self.extra_headers,
            unsupported: None,
        };
        for v in honoured.into_iter().flatten() {
            values.push(range_in(body, v)?);
        }
        for (name, v) in unsupported {
            if let Some(v) = v {
                side.unsupported = side.unsupported.or(Some(name));
                values.push(range_in(body, v)?);
            }
        }
        Ok(Some(Box::new(side)))
    }
}

/// A member that is present, even as `null` (which `Option` alone would read as absent).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

/// The JSON nesting depth sluice accepts in a body (the body's own object counted): serde_json's
/// recursion limit, which bounded `messages` alone before.
pub const MAX_JSON_DEPTH: usize = 128;

/// `messages`, read for its length only; serde validates each message and skips it without
/// building it. Their depth is bounded with the rest of the body's ([`MAX_JSON_DEPTH`]).
struct Messages(usize);

impl<'de> Deserialize<'de> for Messages {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Count;
        impl<'de> serde::de::Visitor<'de> for Count {
            type Value = Messages;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a list of messages")
            }
            fn visit_unit<E>(self) -> Result<Messages, E> {
                Ok(Messages(0))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Messages, A::Error> {
                let mut n = 0;
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {
                    n += 1;
                }
                Ok(Messages(n))
            }
        }
        d.deserialize_any(Count)
    }
}

/// A `fallbacks` entry: a model name, or LiteLLM's `{"model": ...}` object.
#[derive(Deserialize)]
#[serde(untagged)]
enum RawFallback {
    Name(String),
    Object { model: String },
}

/// Routing settings a request carries in its body (LiteLLM's names). Sluice reads and removes
/// them: providers would reject the unknown parameters.
#[derive(Debug, Default)]
pub struct RequestRouting {
    /// `fallbacks`: model groups to try, in order, instead of the configured ones.
    pub fallbacks: Option<Vec<Arc<str>>>,
    /// `num_retries`.
    pub num_retries: Option<u32>,
    /// `timeout` in seconds: for each attempt, instead of the deployment's.
    pub timeout: Option<Duration>,
    /// `cache`: LiteLLM's per-request cache controls (boxed: rare, and ~80 bytes that every
    /// request's future would carry).
    pub cache: Option<Box<CacheControl>>,
    /// LiteLLM's `mock_testing_*` switches: the group asked for fails that way, unasked.
    pub mock: Option<sluice_core::error::MockFailure>,
    /// LiteLLM's request tags (`tags`, else `metadata.tags`): for tag routing and spend by
    /// tag. `None`, the usual case, costs nothing.
    pub tags: Option<Box<[Arc<str>]>>,
}

#[derive(Deserialize)]
struct StreamOptions {
    #[serde(default)]
    include_usage: Option<bool>,
}

/// What sluice needs to know about a request body, with byte ranges into it for splicing.
#[derive(Debug)]
pub struct Envelope<'a> {
    /// The model the client asked for (borrowed unless it contained escapes).
    pub model: Cow<'a, str>,
    /// Byte range of the `model` value (quotes included) in the body.
    pub model_range: Range<usize>,
    /// `stream: true`.
    pub stream: bool,
    /// Whether the client asked for `stream_options.include_usage: true`.
    pub client_wants_usage: bool,
    /// Byte range of the `stream_options` value, if present.
    pub stream_options_range: Option<Range<usize>>,
    /// Offset just past the body's opening `{`.
    pub object_start: usize,
    /// The body's routing settings.
    pub routing: RequestRouting,
    /// Value ranges of members to remove before sending upstream (sluice's own fields).
    pub strip: Vec<Range<usize>>,
    /// OpenAI's `user`: the end user, whose budget and limits apply too. Passed upstream.
    pub user: Option<Cow<'a, str>>,
    /// How the body is encoded: the model is spliced in as a JSON string or as a form
    /// field's raw text.
    pub format: BodyFormat,
    /// Client-side credentials and upstream targets the body carries (rare: boxed).
    pub client_side: Option<Box<ClientSide<'a>>>,
    /// How many entries `messages` has, when the body has that list.
    pub messages: Option<usize>,
    /// The output cap the body gives (`max_tokens`, `max_completion_tokens` or
    /// `max_output_tokens`), when it is a whole number: what a budget reservation prices.
    pub max_tokens: Option<u64>,
    /// Where the fields a same-dialect call is fitted to its model by sit.
    pub tunables: Tunables,
}

/// A list of tags as sent: strings, at most [`MAX_TAGS`] of at most [`MAX_TAG_LEN`] bytes
/// each (they are stored with every spend log).
fn tag_list(json: &str, param: &'static str) -> Result<Box<[Arc<str>]>, ApiError> {
    let bad = |message: &str| ApiError::InvalidParam {
        param,
        message: message.into(),
    };
    let list: Vec<Cow<'_, str>> =
        serde_json::from_str(json).map_err(|_| bad("expected a list of strings"))?;
    if list.len() > MAX_TAGS {
        return Err(bad("at most 64 tags"));
    }
    if list.iter().any(|t| t.len() > MAX_TAG_LEN) {
        return Err(bad("a tag is at most 256 bytes"));
    }
    Ok(list.iter().map(|t| Arc::from(&**t)).collect())
}

/// `metadata.tags`, when `metadata` is an object that has them.
fn metadata_tags(json: &str) -> Result<Option<Box<[Arc<str>]>>, ApiError> {
    #[derive(Deserialize)]
    struct Meta<'a> {
        #[serde(borrow, default)]
        tags: Option<&'a RawValue>,
    }
    let Ok(meta) = serde_json::from_str::<Meta<'_>>(json) else {
        return Ok(None);
    };
    meta.tags
        .filter(|t| t.get() != "null")
        .map(|t| tag_list(t.get(), "metadata.tags"))
        .transpose()
}

/// Most tags one request may carry.
pub const MAX_TAGS: usize = 64;
/// Longest tag, in bytes.
pub const MAX_TAG_LEN: usize = 256;

/// A value's byte range in the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    start: usize,
    end: usize,
}

impl Span {
    /// Where it starts.
    pub fn start(self) -> usize {
        self.start
    }

    /// As a range of the body.
    pub fn range(self) -> Range<usize> {
        self.start..self.end
    }
}

/// A top-level field whose meaning depends on the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tunable {
    /// `max_tokens`.
    MaxTokens,
    /// `temperature`.
    Temperature,
    /// `top_p`.
    TopP,
    /// `top_k`.
    TopK,
    /// `thinking`.
    Thinking,
    /// `output_config`.
    OutputConfig,
    /// `user`.
    User,
    /// `stream` (a platform that takes the stream mode in its URL refuses it in the body).
    Stream,
}

/// Where the top-level fields whose meaning depends on the model start: a same-dialect call
/// keeps the client's buffer, so fitting it to the model (`crate::fit`) splices these instead
/// of rewriting the body. Only starts are kept (the request's future holds the envelope, and
/// stays small); a value's end is found when a fit needs it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Tunables {
    /// Offsets of each [`Tunable`]'s value; 0 for absent (a value never starts at the body's
    /// first byte, its `{`).
    starts: [u32; 8],
    /// `max_completion_tokens` is present.
    pub max_completion_tokens: bool,
}

impl Tunables {
    /// Where `which`'s value is in `body` (the body the envelope was read from).
    pub fn span(&self, body: &[u8], which: Tunable) -> Option<Span> {
        let start = *self.starts.get(which as usize)? as usize;
        if start == 0 {
            return None;
        }
        let mut values =
            serde_json::Deserializer::from_slice(body.get(start..)?).into_iter::<&RawValue>();
        let len = values.next()?.ok()?.get().len();
        Some(Span {
            start,
            end: start + len,
        })
    }

    fn set(&mut self, body: &[u8], which: Tunable, raw: Option<&RawValue>) -> Result<(), ApiError> {
        if let Some(v) = raw {
            let start = range_in(body, v)?.start;
            self.starts[which as usize] =
                u32::try_from(start).map_err(|_| ApiError::InvalidJson("body too large".into()))?;
        }
        Ok(())
    }
}

/// What fitting a same-dialect call to its model changes in the client's body: members removed
/// (by their value ranges), values replaced, members added at the object's start.
#[derive(Debug, Default)]
pub struct Edits {
    /// Value ranges of members to remove.
    pub remove: Vec<Range<usize>>,
    /// Ranges replaced by new text (a value, or a key's quoted name).
    pub replace: Vec<(Range<usize>, Bytes)>,
    /// Members (`"key":value,`) added first in the object.
    pub insert: Vec<Bytes>,
}

impl Edits {
    /// Nothing changes.
    pub fn is_empty(&self) -> bool {
        self.remove.is_empty() && self.replace.is_empty() && self.insert.is_empty()
    }

    /// `other`'s edits too.
    pub fn add(&mut self, other: Edits) {
        self.remove.extend(other.remove);
        self.replace.extend(other.replace);
        self.insert.extend(other.insert);
    }
}

/// The range of the quoted key of the member whose value starts at `value_start`.
pub fn key_range(body: &[u8], value_start: usize) -> Result<Range<usize>, ApiError> {
    let broken = || ApiError::InvalidJson("internal: member boundaries".into());
    let colon = skip_ws_back(body, value_start);
    if colon == 0 || body[colon - 1] != b':' {
        return Err(broken());
    }
    let close = skip_ws_back(body, colon - 1);
    if close == 0 || body[close - 1] != b'"' {
        return Err(broken());
    }
    let mut open = close - 1;
    loop {
        open = body[..open]
            .iter()
            .rposition(|b| *b == b'"')
            .ok_or_else(broken)?;
        let escapes = body[..open]
            .iter()
            .rev()
            .take_while(|b| **b == b'\\')
            .count();
        if escapes % 2 == 0 {
            break;
        }
    }
    Ok(open..close)
}

/// The first of these that is a whole number: read without failing the request (the upstream
/// judges the field; sluice only estimates with it).
fn whole_number(values: [Option<&RawValue>; 3]) -> Option<u64> {
    values
        .into_iter()
        .flatten()
        .find_map(|v| serde_json::from_str::<u64>(v.get()).ok())
}

fn range_in(body: &[u8], raw: &RawValue) -> Result<Range<usize>, ApiError> {
    let start = (raw.get().as_ptr() as usize)
        .checked_sub(body.as_ptr() as usize)
        .filter(|s| s + raw.get().len() <= body.len())
        .ok_or_else(|| ApiError::InvalidJson("internal: value outside the body".into()))?;
    Ok(start..start + raw.get().len())
}

impl<'a> Envelope<'a> {
    /// The envelope of a body whose model and stream flag are in the path (Google's and
    /// Bedrock's APIs, `Endpoint::names_model_in_path`): the body must be one JSON object
    /// within the depth bound; nothing else of it is read here (the translators and the
    /// vendor read it whole), and it carries none of sluice's routing fields.
    pub fn named(body: &'a [u8], model: String, stream: bool) -> Result<Self, ApiError> {
        serde_json::from_slice::<serde::de::IgnoredAny>(body)
            .map_err(|e| ApiError::InvalidJson(e.to_string()))?;
        if sluice_core::scan::nests_at_least(body, MAX_JSON_DEPTH) {
            return Err(ApiError::TooDeep {
                limit: MAX_JSON_DEPTH,
            });
        }
        let object_start = body
            .iter()
            .position(|b| !b.is_ascii_whitespace())
            .filter(|p| body[*p] == b'{')
            .map(|p| p + 1)
            .ok_or_else(|| ApiError::InvalidJson("expected a JSON object".into()))?;
        if model.is_empty() {
            return Err(ApiError::MissingParam("model"));
        }
        Ok(Self {
            model: Cow::Owned(model),
            model_range: object_start..object_start,
            stream,
            client_wants_usage: false,
            stream_options_range: None,
            object_start,
            routing: RequestRouting::default(),
            strip: Vec::new(),
            user: None,
            format: BodyFormat::Json,
            client_side: None,
            messages: None,
            max_tokens: None,
            tunables: Tunables::default(),
        })
    }

    /// Parse the envelope of an OpenAI- or Anthropic-shaped body (the model is its `model`).
    /// Every byte is validated as JSON, but only these fields are built.
    pub fn parse(body: &'a [u8]) -> Result<Self, ApiError> {
        let raw: RawEnvelope<'a> =
            serde_json::from_slice(body).map_err(|e| ApiError::InvalidJson(e.to_string()))?;
        // serde skips what sluice does not read without a depth limit (on the heap, not the
        // stack); the bound is the body's, checked once over its bytes (docs/reliability.md).
        if sluice_core::scan::nests_at_least(body, MAX_JSON_DEPTH) {
            return Err(ApiError::TooDeep {
                limit: MAX_JSON_DEPTH,
            });
        }
        let model_raw = raw.model.ok_or(ApiError::MissingParam("model"))?;
        let model: Cow<'a, str> =
            serde_json::from_str(model_raw.get()).map_err(|_| ApiError::InvalidParam {
                param: "model",
                message: "expected a string".into(),
            })?;
        if model.is_empty() {
            return Err(ApiError::MissingParam("model"));
        }
        let model_range = range_in(body, model_raw)?;
        let (client_wants_usage, stream_options_range) = match raw.stream_options {
            // `null` is replaced when usage is forced on (a second member would be a
            // duplicate key, and the upstream would read the last: no usage).
            Some(so) if so.get() == "null" => (false, Some(range_in(body, so)?)),
            Some(so) => {
                let opts: StreamOptions =
                    serde_json::from_str(so.get()).map_err(|e| ApiError::InvalidParam {
                        param: "stream_options",
                        message: e.to_string(),
                    })?;
                (opts.include_usage == Some(true), Some(range_in(body, so)?))
            }
            None => (false, None),
        };
        let object_start = body
            .iter()
            .position(|b| *b == b'{')
            .map(|p| p + 1)
            .ok_or_else(|| ApiError::InvalidJson("expected a JSON object".into()))?;
        let mut routing = RequestRouting::default();
        let mut values = Vec::new();
        if let Some(v) = raw.fallbacks {
            let list: Vec<RawFallback> =
                serde_json::from_str(v.get()).map_err(|_| ApiError::InvalidParam {
                    param: "fallbacks",
                    message: "expected a list of model names".into(),
                })?;
            routing.fallbacks = Some(
                list.into_iter()
                    .map(|f| match f {
                        RawFallback::Name(m) | RawFallback::Object { model: m } => Arc::from(m),
                    })
                    .collect(),
            );
            values.push(range_in(body, v)?);
        }
        if let Some(v) = raw.num_retries {
            routing.num_retries =
                Some(
                    serde_json::from_str(v.get()).map_err(|_| ApiError::InvalidParam {
                        param: "num_retries",
                        message: "expected a whole number ≥ 0".into(),
                    })?,
                );
            values.push(range_in(body, v)?);
        }
        if let Some(v) = raw.timeout {
            let secs: f64 = serde_json::from_str(v.get())
                .ok()
                .filter(|s: &f64| s.is_finite() && *s > 0.0)
                .ok_or_else(|| ApiError::InvalidParam {
                    param: "timeout",
                    message: "expected a number of seconds > 0".into(),
                })?;
            routing.timeout = Some(Duration::from_secs_f64(secs.min(86_400.0)));
            values.push(range_in(body, v)?);
        }
        for (v, what) in [
            (raw.mock_testing_fallbacks, MockFailure::Fallbacks),
            (
                raw.mock_testing_context_fallbacks,
                MockFailure::ContextWindow,
            ),
            (
                raw.mock_testing_content_policy_fallbacks,
                MockFailure::ContentPolicy,
            ),
            (raw.mock_testing_rate_limit_error, MockFailure::RateLimit),
        ] {
            let Some(v) = v else { continue };
            let on: bool = serde_json::from_str(v.get()).map_err(|_| ApiError::InvalidParam {
                param: what.field(),
                message: "expected true or false".into(),
            })?;
            if on {
                routing.mock.get_or_insert(what);
            }
            values.push(range_in(body, v)?);
        }
        if let Some(v) = raw.cache.filter(|v| v.get() != "null") {
            let control =
                CacheControl::from_body(v.get()).map_err(|message| ApiError::InvalidParam {
                    param: "cache",
                    message,
                })?;
            routing.cache = Some(Box::new(control));
            values.push(range_in(body, v)?);
        }
        // LiteLLM's per-request guardrail names: read by the guardrails step, never sent.
        if let Some(v) = raw.guardrails {
            values.push(range_in(body, v)?);
        }
        if let Some(v) = raw.tags.filter(|v| v.get() != "null") {
            routing.tags = Some(tag_list(v.get(), "tags")?);
            values.push(range_in(body, v)?);
        } else if let Some(m) = raw
            .metadata
            .filter(|m| memchr::memmem::find(m.get().as_bytes(), b"\"tags\"").is_some())
        {
            routing.tags = metadata_tags(m.get())?;
        }
        let client_side = raw.client_side(body, &mut values)?;
        let user: Option<Cow<'a, str>> =
            match raw.user {
                Some(u) if u.get() != "null" => Some(serde_json::from_str(u.get()).map_err(
                    |_| ApiError::InvalidParam {
                        param: "user",
                        message: "expected a string".into(),
                    },
                )?),
                _ => None,
            }
            .filter(|u: &Cow<'a, str>| !u.is_empty());
        let stream = match raw.stream.map(RawValue::get) {
            None | Some("false" | "null") => false,
            Some("true") => true,
            Some(_) => {
                return Err(ApiError::InvalidParam {
                    param: "stream",
                    message: "expected true or false".into(),
                })
            }
        };
        let mut tunables = Tunables {
            max_completion_tokens: raw.max_completion_tokens.is_some(),
            ..Tunables::default()
        };
        for (which, value) in [
            (Tunable::MaxTokens, raw.max_tokens),
            (Tunable::Temperature, raw.temperature),
            (Tunable::TopP, raw.top_p),
            (Tunable::TopK, raw.top_k),
            (Tunable::Thinking, raw.thinking),
            (Tunable::OutputConfig, raw.output_config),
            (Tunable::User, raw.user.filter(|u| u.get() != "null")),
            (Tunable::Stream, raw.stream),
        ] {
            tunables.set(body, which, value)?;
        }
        Ok(Self {
            model,
            model_range,
            stream,
            client_wants_usage,
            stream_options_range,
            object_start,
            routing,
            strip: values,
            user,
            format: BodyFormat::Json,
            client_side,
            messages: raw.messages.map(|m| m.0),
            max_tokens: whole_number([
                raw.max_tokens,
                raw.max_completion_tokens,
                raw.max_output_tokens,
            ]),
            tunables,
        })
    }

    /// The envelope of a `multipart/form-data` upload: `model`, `stream` and `user` are form
    /// fields; `model_range` is the model field's raw text. Nothing is stripped or added.
    /// `parts` are the form's (`multipart::head`): `body` may be the head of a form whose
    /// file is still arriving, and fields after the file are not seen.
    pub fn parse_multipart(
        body: &'a [u8],
        parts: &[multipart::Part<'_>],
    ) -> Result<Self, ApiError> {
        let field = |name: &str| {
            multipart::field(parts, name).map(|p| (p.value.clone(), multipart::text(body, p)))
        };
        let not_text = |param: &'static str| ApiError::InvalidParam {
            param,
            message: "expected text".into(),
        };
        let (model_range, model) = match field("model") {
            Some((range, Some(m))) if !m.trim().is_empty() => (range, m),
            Some((_, None)) => return Err(not_text("model")),
            _ => return Err(ApiError::MissingParam("model")),
        };
        let stream = match field("stream") {
            None => false,
            Some((_, Some(s))) => s.trim().eq_ignore_ascii_case("true"),
            Some((_, None)) => return Err(not_text("stream")),
        };
        let user = match field("user") {
            Some((_, Some(u))) if !u.is_empty() => Some(Cow::Borrowed(u)),
            Some((_, None)) => return Err(not_text("user")),
            _ => None,
        };
        // A form's client-side fields are refused; sluice honours them only in JSON bodies.
        let client_side = MULTIPART_CLIENT_SIDE
            .iter()
            .find(|n| multipart::field(parts, n).is_some())
            .map(|n| {
                Box::new(ClientSide {
                    unsupported: Some(*n),
                    ..ClientSide::default()
                })
            });
        Ok(Self {
            model: Cow::Borrowed(model),
            model_range,
            stream,
            client_wants_usage: false,
            stream_options_range: None,
            object_start: 0,
            routing: RequestRouting::default(),
            strip: Vec::new(),
            user,
            format: BodyFormat::Multipart,
            client_side,
            messages: None,
            max_tokens: None,
            tunables: Tunables::default(),
        })
    }
}

/// Form fields of an upload that would name the upstream or its key.
const MULTIPART_CLIENT_SIDE: [&str; 4] = ["api_base", "base_url", "api_key", "extra_headers"];

fn skip_ws_back(body: &[u8], mut i: usize) -> usize {
    while i > 0 && body[i - 1].is_ascii_whitespace() {
        i -= 1;
    }
    i
}

fn skip_ws(body: &[u8], mut i: usize) -> usize {
    while i < body.len() && body[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

/// Turn the value ranges of top-level members into the ranges that remove those members whole
/// (key, colon, value and one comma), so that the rest stays valid JSON.
fn member_spans(body: &[u8], values: Vec<Range<usize>>) -> Result<Vec<Range<usize>>, ApiError> {
    let mut spans: Vec<Range<usize>> = Vec::with_capacity(values.len());
    for v in values {
        let open = key_range(body, v.start)?.start;
        spans.push(open..v.end);
    }
    spans.sort_by_key(|r| r.start);
    // Members separated only by a comma merge into one span.
    let mut merged: Vec<Range<usize>> = Vec::with_capacity(spans.len());
    for s in spans {
        if let Some(last) = merged.last_mut() {
            let gap = skip_ws(body, last.end);
            if body.get(gap) == Some(&b',') && skip_ws(body, gap + 1) == s.start {
                last.end = s.end;
                continue;
            }
        }
        merged.push(s);
    }
    // Take the comma after a span, or else the one before it (the object's last member).
    for s in &mut merged {
        let after = skip_ws(body, s.end);
        if body.get(after) == Some(&b',') {
            s.end = skip_ws(body, after + 1);
        } else {
            let before = skip_ws_back(body, s.start);
            if before > 0 && body[before - 1] == b',' {
                s.start = before - 1;
            }
        }
    }
    Ok(merged)
}

/// The body sent upstream: slices of the client's buffer with replacements between them.
/// At most a handful of segments, each a reference-counted view (no copy of the prompt).
pub type Segments = Vec<Bytes>;

/// Build the upstream body: `model` replaced by `new_model_json` (an encoded JSON string) when
/// given, and `stream_options.include_usage` forced on when `force_usage` is set.
pub fn splice(
    body: &Bytes,
    env: &Envelope<'_>,
    new_model_json: Option<&Bytes>,
    force_usage: bool,
    fit: Option<&Edits>,
) -> Result<Segments, ApiError> {
    let extra = fit.map_or(0, |f| f.replace.len() + f.insert.len());
    let mut edits: Vec<(Range<usize>, Bytes)> = Vec::with_capacity(2 + env.strip.len() + extra);
    let removed = match fit.filter(|f| !f.remove.is_empty()) {
        None if env.strip.is_empty() => Vec::new(),
        None => member_spans(body, env.strip.clone())?,
        Some(f) => member_spans(body, env.strip.iter().chain(&f.remove).cloned().collect())?,
    };
    for range in removed {
        edits.push((range, Bytes::new()));
    }
    if let Some(f) = fit {
        edits.extend(f.replace.iter().cloned());
        for member in &f.insert {
            edits.push((env.object_start..env.object_start, member.clone()));
        }
    }
    if let Some(m) = new_model_json {
        edits.push((env.model_range.clone(), m.clone()));
    }
    if force_usage {
        match &env.stream_options_range {
            Some(range) => {
                let opts: Option<serde_json::Map<String, serde_json::Value>> =
                    serde_json::from_slice(&body[range.clone()]).map_err(|e| {
                        ApiError::InvalidParam {
                            param: "stream_options",
                            message: e.to_string(),
                        }
                    })?;
                let mut opts = opts.unwrap_or_default();
                opts.insert("include_usage".into(), serde_json::Value::Bool(true));
                let encoded = serde_json::to_vec(&opts).map_err(|e| ApiError::InvalidParam {
                    param: "stream_options",
                    message: e.to_string(),
                })?;
                edits.push((range.clone(), Bytes::from(encoded)));
            }
            None => edits.push((
                env.object_start..env.object_start,
                Bytes::from_static(br#""stream_options":{"include_usage":true},"#),
            )),
        }
    }
    edits.sort_by_key(|(r, _)| r.start);
    let mut out = Vec::with_capacity(edits.len() * 2 + 1);
    let mut pos = 0;
    for (range, replacement) in edits {
        if range.start > pos {
            out.push(body.slice(pos..range.start));
        }
        if !replacement.is_empty() {
            out.push(replacement);
        }
        pos = pos.max(range.end);
    }
    if pos < body.len() {
        out.push(body.slice(pos..));
    }
    Ok(out)
}

#[cfg(test)]
mod depth_tests {
    use super::*;

    fn nested(depth: usize) -> Vec<u8> {
        let mut body = br#"{"model":"m","messages":[{"role":"user","content":"#.to_vec();
        body.extend(std::iter::repeat_n(b'[', depth));
        body.extend(std::iter::repeat_n(b']', depth));
        body.extend(b"}]}");
        body
    }

    #[test]
    fn messages_are_counted_and_their_depth_bounded() {
        let body = br#"{"model":"m","messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"text","text":"b"}]}]}"#;
        assert_eq!(Envelope::parse(body).unwrap().messages, Some(2));
        assert_eq!(Envelope::parse(br#"{"model":"m"}"#).unwrap().messages, None);
        assert!(Envelope::parse(&nested(100)).is_ok());
        assert!(matches!(
            Envelope::parse(&nested(10_000)),
            Err(ApiError::TooDeep {
                limit: MAX_JSON_DEPTH
            })
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn join(segs: &Segments) -> String {
        segs.iter()
            .map(|b| std::str::from_utf8(b).unwrap())
            .collect()
    }

    #[test]
    fn reads_envelope_and_ranges() {
        let body = br#"{"messages":[{"role":"user","content":"hi \"model\""}],"model":"gpt-4o","stream":true}"#;
        let env = Envelope::parse(body).unwrap();
        assert_eq!(env.model, "gpt-4o");
        assert_eq!(&body[env.model_range.clone()], br#""gpt-4o""#);
        assert!(env.stream);
        assert!(!env.client_wants_usage);
        assert_eq!(env.object_start, 1);
    }

    #[test]
    fn rewrites_model_leaving_every_other_byte() {
        let body = Bytes::from_static(br#"{ "model" : "a" , "x": [1, 2,   3], "y":"model"}"#);
        let env = Envelope::parse(&body).unwrap();
        let segs = splice(
            &body,
            &env,
            Some(&Bytes::from_static(br#""gpt-4o-mini""#)),
            false,
            None,
        )
        .unwrap();
        assert_eq!(
            join(&segs),
            r#"{ "model" : "gpt-4o-mini" , "x": [1, 2,   3], "y":"model"}"#
        );
    }

    #[test]
    fn request_tags_are_read_and_never_sent_upstream() {
        let body = Bytes::from_static(br#"{"model":"m","tags":["a","b"],"x":1}"#);
        let env = Envelope::parse(&body).unwrap();
        let tags: Vec<&str> = env.routing.tags.iter().flatten().map(|t| &**t).collect();
        assert_eq!(tags, ["a", "b"]);
        let out = join(&splice(&body, &env, None, false, None).unwrap());
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert!(v.get("tags").is_none(), "{out}");
        assert_eq!(v["x"], 1);
        // `metadata.tags` is read; `metadata` itself is the client's and stays.
        let body = Bytes::from_static(br#"{"model":"m","metadata":{"tags":["t"],"k":"v"}}"#);
        let env = Envelope::parse(&body).unwrap();
        assert_eq!(env.routing.tags.as_deref().map(<[_]>::len), Some(1));
        let plain = Envelope::parse(br#"{"model":"m","metadata":{"k":"v"}}"#).unwrap();
        assert!(plain.routing.tags.is_none());
        for bad in [
            &br#"{"model":"m","tags":"a"}"#[..],
            br#"{"model":"m","tags":[1]}"#,
            br#"{"model":"m","metadata":{"tags":"a"}}"#,
        ] {
            let e = Envelope::parse(bad).unwrap_err();
            assert!(matches!(e, ApiError::InvalidParam { .. }), "{e}");
        }
    }

    #[test]
    fn escaped_model_names() {
        let body = br#"{"model":"a\/b"}"#;
        let env = Envelope::parse(body).unwrap();
        assert_eq!(env.model, "a/b");
    }

    #[test]
    fn injects_stream_options_when_absent() {
        let body = Bytes::from_static(br#"  {"model":"m","stream":true}"#);
        let env = Envelope::parse(&body).unwrap();
        let segs = splice(&body, &env, None, true, None).unwrap();
        let out = join(&segs);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["stream_options"]["include_usage"], true);
        assert_eq!(v["model"], "m");
    }

    #[test]
    fn merges_existing_stream_options() {
        let body = Bytes::from_static(
            br#"{"stream_options":{"include_usage":false,"other":1},"model":"m","stream":true}"#,
        );
        let env = Envelope::parse(&body).unwrap();
        assert!(!env.client_wants_usage);
        let segs = splice(
            &body,
            &env,
            Some(&Bytes::from_static(br#""n""#)),
            true,
            None,
        )
        .unwrap();
        let v: serde_json::Value = serde_json::from_str(&join(&segs)).unwrap();
        assert_eq!(v["stream_options"]["include_usage"], true);
        assert_eq!(v["stream_options"]["other"], 1);
        assert_eq!(v["model"], "n");
    }

    /// Found by fuzzing (envelope_splice): `"stream_options": null` got a second
    /// `stream_options` member in front of it, and the upstream, reading the last, sent no usage.
    #[test]
    fn null_stream_options_are_replaced_when_usage_is_forced() {
        let body = Bytes::from_static(br#"{"model":"m","stream":true,"stream_options":null}"#);
        let env = Envelope::parse(&body).unwrap();
        assert!(!env.client_wants_usage);
        let out = join(&splice(&body, &env, None, true, None).unwrap());
        assert_eq!(out.matches("stream_options").count(), 1, "{out}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["stream_options"]["include_usage"], true);
        let out = join(&splice(&body, &env, None, false, None).unwrap());
        assert_eq!(out, std::str::from_utf8(&body).unwrap());
    }

    #[test]
    fn client_usage_request_is_seen() {
        let body = br#"{"model":"m","stream":true,"stream_options":{"include_usage":true}}"#;
        assert!(Envelope::parse(body).unwrap().client_wants_usage);
    }

    #[test]
    fn errors_name_the_problem() {
        let e = Envelope::parse(b"{\"model\": \"m\",\n  \"x\": }").unwrap_err();
        assert!(
            matches!(e, ApiError::InvalidJson(ref m) if m.contains("line 2")),
            "{e}"
        );
        assert!(matches!(
            Envelope::parse(b"{}"),
            Err(ApiError::MissingParam("model"))
        ));
        assert!(matches!(
            Envelope::parse(br#"{"model":5}"#),
            Err(ApiError::InvalidParam { param: "model", .. })
        ));
        assert!(matches!(
            Envelope::parse(br#"{"model":"m","stream":"yes"}"#),
            Err(ApiError::InvalidParam {
                param: "stream",
                ..
            })
        ));
        assert!(Envelope::parse(b"[1,2]").is_err());
    }

    #[test]
    fn client_side_fields_are_found_named_and_stripped() {
        let plain = Envelope::parse(br#"{"model":"m","messages":[{"api_base":"x"}]}"#).unwrap();
        assert!(
            plain.client_side.is_none(),
            "nested members are not the body's"
        );
        let body = Bytes::from_static(
            br#"{"base_url":"http://h","model":"m","api_key":"k","x":1,"api_version":"v"}"#,
        );
        let env = Envelope::parse(&body).unwrap();
        let side = env.client_side.as_deref().unwrap();
        assert_eq!(side.first_field(), "base_url");
        assert_eq!(side.api_base.map(|(_, v)| v.get()), Some(r#""http://h""#));
        assert_eq!(side.api_key.map(|v| v.get()), Some(r#""k""#));
        assert_eq!(side.unsupported, Some("api_version"));
        let out = join(&splice(&body, &env, None, false, None).unwrap());
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v, serde_json::json!({"model": "m", "x": 1}));
        let only = Envelope::parse(br#"{"model":"m","aws_sts_endpoint":"http://169.254.169.254"}"#)
            .unwrap();
        assert_eq!(
            only.client_side.as_deref().map(ClientSide::first_field),
            Some("aws_sts_endpoint")
        );
    }

    #[test]
    fn routing_fields_are_read_and_removed() {
        let cases: &[&str] = &[
            r#"{"model":"m","fallbacks":["a",{"model":"b"}],"num_retries":1,"timeout":2.5}"#,
            r#"{"fallbacks":["a",{"model":"b"}],"model":"m","timeout":2.5,"num_retries":1}"#,
            r#"{ "num_retries" : 1 , "model":"m" , "timeout":2.5 ,"fallbacks": ["a", {"model": "b"}] }"#,
            r#"{"timeout":2.5,"fallbacks":["a",{"model":"b"}],"num_retries":1,"model":"m"}"#,
        ];
        for case in cases {
            let body = Bytes::from_static(case.as_bytes());
            let env = Envelope::parse(&body).unwrap();
            let r = &env.routing;
            let names: Vec<&str> = r.fallbacks.as_ref().unwrap().iter().map(|s| &**s).collect();
            assert_eq!(names, ["a", "b"], "{case}");
            assert_eq!(r.num_retries, Some(1));
            assert_eq!(r.timeout, Some(Duration::from_millis(2500)));
            let out = join(
                &splice(
                    &body,
                    &env,
                    Some(&Bytes::from_static(br#""n""#)),
                    false,
                    None,
                )
                .unwrap(),
            );
            let v: serde_json::Value =
                serde_json::from_str(&out).unwrap_or_else(|e| panic!("{case} -> {out}: {e}"));
            assert_eq!(v, serde_json::json!({"model": "n"}), "{case}");
        }
        let body = Bytes::from_static(br#"{"model":"m","timeout":1,"x":[1]}"#);
        let env = Envelope::parse(&body).unwrap();
        let out = join(&splice(&body, &env, None, true, None).unwrap());
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["x"][0], 1);
        assert!(v.get("timeout").is_none());
        // LiteLLM's mock-testing switches are read and never sent upstream.
        let body = Bytes::from_static(
            br#"{"model":"m","mock_testing_fallbacks":true,"mock_testing_rate_limit_error":false}"#,
        );
        let env = Envelope::parse(&body).unwrap();
        assert_eq!(env.routing.mock, Some(MockFailure::Fallbacks));
        let out = join(&splice(&body, &env, None, true, None).unwrap());
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["model"], "m");
        assert!(v.get("mock_testing_fallbacks").is_none(), "{out}");
        assert!(v.get("mock_testing_rate_limit_error").is_none(), "{out}");
        assert!(matches!(
            Envelope::parse(br#"{"model":"m","timeout":-1}"#),
            Err(ApiError::InvalidParam {
                param: "timeout",
                ..
            })
        ));
        assert!(matches!(
            Envelope::parse(br#"{"model":"m","fallbacks":"x"}"#),
            Err(ApiError::InvalidParam {
                param: "fallbacks",
                ..
            })
        ));
        // LiteLLM's per-request cache controls: read, and never sent upstream.
        let body = Bytes::from_static(br#"{"cache":{"no-store":true,"ttl":5},"model":"m","x":1}"#);
        let env = Envelope::parse(&body).unwrap();
        let c = env.routing.cache.as_ref().unwrap();
        assert!(c.no_store && c.ttl == Some(Duration::from_secs(5)));
        let out = join(&splice(&body, &env, None, false, None).unwrap());
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v, serde_json::json!({"model": "m", "x": 1}));
        assert!(matches!(
            Envelope::parse(br#"{"model":"m","cache":{"nocache":true}}"#),
            Err(ApiError::InvalidParam { param: "cache", .. })
        ));
    }

    #[test]
    fn large_body_is_not_copied() {
        let prompt = "x".repeat(500_000);
        let body = Bytes::from(format!(
            r#"{{"model":"m","messages":[{{"content":"{prompt}"}}]}}"#
        ));
        let env = Envelope::parse(&body).unwrap();
        let segs = splice(
            &body,
            &env,
            Some(&Bytes::from_static(br#""other""#)),
            false,
            None,
        )
        .unwrap();
        // The big tail is a view into the original allocation, not a copy.
        let tail = segs.last().unwrap();
        assert!(tail.len() > 500_000);
        let base = body.as_ptr() as usize;
        let t = tail.as_ptr() as usize;
        assert!(t >= base && t < base + body.len());
    }
}
