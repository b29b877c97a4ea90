//! Usage read from a pass-through answer in the provider's own shape, without changing a byte
//! of it: OpenAI's and Anthropic's `usage` (the shared borrowed probe), Gemini's
//! `usageMetadata`, Bedrock Converse's camel-case `usage` (whole, and in ConverseStream's
//! `metadata` event), InvokeModel's model-own usage and Bedrock's
//! `amazon-bedrock-invocationMetrics`, Cohere's `billed_units`. Streams are scanned as they
//! pass: OpenAI and Anthropic SSE through the gateway's own tap (which also removes the usage
//! chunk sluice asked for on the client's behalf); Gemini's and Cohere's SSE `data:` lines and
//! Cohere's v1 JSON lines line by line; Gemini's JSON array (no `alt=sse`) element by element;
//! AWS event-stream frames message by message, InvokeModelWithResponseStream's `chunk`s
//! base64-decoded. Only the documents that can carry usage are parsed (a byte search first).

use std::sync::LazyLock;

use bytes::Bytes;
use memchr::memmem::Finder;
use serde::Deserialize;
use sluice_core::endpoint::Endpoint;
use sluice_core::error::anthropic_error_body;
use sluice_core::usage::{usage_from_body, usage_of, RequestUnits, Usage};
use sluice_translate::eventstream::{chunk_bytes, exception, Decoder, FrameError};
use sluice_translate::jsonstream::{ArrayElements, Lines};
use sluice_translate::sse::{SseTap, TooLong};

use crate::bedrock::codec::RawUsage as ConverseUsage;
use crate::gemini::codec::RawUsage as GeminiUsage;

/// The shape of usage in an answer, decided by the route and the operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// OpenAI's or Anthropic's `usage` object.
    Common,
    /// Gemini's `usageMetadata` (AI Studio and Vertex AI's Google models).
    Gemini,
    /// Bedrock Converse's `usage` (camel case).
    Converse,
    /// Bedrock InvokeModel: the model's own answer (Anthropic's `usage` for Claude); streamed
    /// (InvokeModelWithResponseStream), the model's events in base64 `chunk`s, the last with
    /// Bedrock's `amazon-bedrock-invocationMetrics`.
    Invoke,
    /// Cohere's `billed_units` (`usage.billed_units` in v2, `meta.billed_units` in v1).
    Cohere,
    /// Nothing sluice knows how to read.
    Unknown,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GeminiProbe {
    #[serde(default)]
    usage_metadata: Option<GeminiUsage>,
}

#[derive(Deserialize)]
struct ConverseProbe {
    #[serde(default)]
    usage: Option<ConverseUsage>,
}

/// Cohere's usage wherever it sits: a v2 answer's `usage`, a v1 answer's `meta`, v2's
/// `message-end` event (`delta.usage`), v1's `stream-end` event (`response.meta`).
#[derive(Deserialize)]
struct CohereProbe {
    #[serde(default)]
    usage: Option<CohereMeta>,
    #[serde(default)]
    meta: Option<CohereMeta>,
    #[serde(default)]
    delta: Option<CohereDelta>,
    #[serde(default)]
    response: Option<CohereResponse>,
}

#[derive(Deserialize)]
struct CohereDelta {
    #[serde(default)]
    usage: Option<CohereMeta>,
}

#[derive(Deserialize)]
struct CohereResponse {
    #[serde(default)]
    meta: Option<CohereMeta>,
}

#[derive(Deserialize)]
struct CohereMeta {
    #[serde(default)]
    billed_units: Option<CohereUnits>,
}

#[derive(Deserialize)]
struct CohereUnits {
    #[serde(default)]
    input_tokens: f64,
    #[serde(default)]
    output_tokens: f64,
}

/// Bedrock's own count of an InvokeModelWithResponseStream call, in its last chunk.
#[derive(Deserialize)]
struct InvocationProbe {
    #[serde(rename = "amazon-bedrock-invocationMetrics")]
    metrics: InvocationMetrics,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct InvocationMetrics {
    #[serde(default)]
    input_token_count: u64,
    #[serde(default)]
    output_token_count: u64,
    #[serde(default)]
    cache_read_input_token_count: u64,
    #[serde(default)]
    cache_write_input_token_count: u64,
}

impl From<InvocationMetrics> for Usage {
    /// As Converse's: the input count leaves out cache reads and writes.
    fn from(m: InvocationMetrics) -> Self {
        Usage {
            prompt_tokens: m.input_token_count
                + m.cache_read_input_token_count
                + m.cache_write_input_token_count,
            completion_tokens: m.output_token_count,
            cached_tokens: m.cache_read_input_token_count,
            cache_creation_tokens: m.cache_write_input_token_count,
            ..Usage::default()
        }
    }
}

/// A byte search for `key` (a JSON key, quotes included): the cheap test before a parse.
fn has(key: &'static LazyLock<Finder<'static>>, doc: &[u8]) -> bool {
    key.find(doc).is_some()
}

static USAGE_METADATA: LazyLock<Finder<'static>> =
    LazyLock::new(|| Finder::new(b"\"usageMetadata\""));
static BILLED_UNITS: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\"billed_units\""));
static INVOCATION_METRICS: LazyLock<Finder<'static>> =
    LazyLock::new(|| Finder::new(b"\"amazon-bedrock-invocationMetrics\""));
static USAGE: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\"usage\""));

/// Usage of a whole answer of an inference endpoint, in the client's format (Google's and
/// Bedrock's shapes here, the others by `sluice_core::usage::usage_of`).
pub fn of_answer(endpoint: Endpoint, body: &[u8], requested: RequestUnits) -> Option<Usage> {
    match endpoint {
        Endpoint::GenerateContent => whole(Shape::Gemini, body),
        Endpoint::Converse => whole(Shape::Converse, body),
        _ => usage_of(endpoint, body, requested),
    }
}

/// Usage from a whole answer of this shape; `None` when it carries none sluice can read.
pub fn whole(shape: Shape, body: &[u8]) -> Option<Usage> {
    match shape {
        Shape::Common => usage_from_body(body),
        Shape::Invoke => {
            let metrics = has(&INVOCATION_METRICS, body)
                .then(|| serde_json::from_slice::<InvocationProbe>(body).ok())
                .flatten()
                .map(|p| Usage::from(p.metrics));
            let own = has(&USAGE, body).then(|| usage_from_body(body)).flatten();
            match (own, metrics) {
                (Some(a), Some(b)) => Some(a.merge(b)),
                (a, b) => a.or(b),
            }
        }
        Shape::Gemini => serde_json::from_slice::<GeminiProbe>(body)
            .ok()?
            .usage_metadata
            .map(Usage::from),
        Shape::Converse => serde_json::from_slice::<ConverseProbe>(body)
            .ok()?
            .usage
            .map(Usage::from),
        Shape::Cohere => {
            let p = serde_json::from_slice::<CohereProbe>(body).ok()?;
            let units = p
                .usage
                .or(p.meta)
                .or(p.delta.and_then(|d| d.usage))
                .or(p.response.and_then(|r| r.meta))?
                .billed_units?;
            Some(Usage {
                prompt_tokens: units.input_tokens as u64,
                completion_tokens: units.output_tokens as u64,
                ..Usage::default()
            })
        }
        Shape::Unknown => None,
    }
}

/// A stream's framing, from the answer's `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// `text/event-stream`.
    Sse,
    /// `application/vnd.amazon.eventstream` (Bedrock's binary frames).
    EventStream,
    /// JSON: `application/json` and other `+json` types (a whole answer, or Gemini's array
    /// streamed without `alt=sse`).
    Json,
    /// One JSON document a line: `application/stream+json` (Cohere's v1 stream),
    /// `application/x-ndjson`, `application/jsonl`.
    JsonLines,
    /// Anything else (a file download): relayed, not read.
    Opaque,
}

impl Framing {
    /// The framing a `Content-Type` announces.
    pub fn of(content_type: &str) -> Self {
        let ct = content_type
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        match ct.as_str() {
            "text/event-stream" => Self::Sse,
            "application/vnd.amazon.eventstream" => Self::EventStream,
            "application/stream+json" | "application/x-ndjson" | "application/jsonl" => {
                Self::JsonLines
            }
            "application/json" => Self::Json,
            ct if ct.ends_with("+json") => Self::Json,
            _ => Self::Opaque,
        }
    }
}

/// Why a pass-through stream is not read on: one of its events, lines or array elements grew
/// past its bound without ending (`sluice_translate::sse::MAX_EVENT`), or one of its binary
/// frames is corrupt or larger than AWS allows. The relay ends the stream with
/// [`Tap::error_event`] and drops the upstream.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TapError {
    /// An event, line or element past its bound.
    #[error(transparent)]
    TooLong(#[from] TooLong),
    /// A binary frame that fails its checks (or announces more than AWS's limit).
    #[error("the upstream's event stream is corrupt: {0}")]
    Frame(#[from] FrameError),
}

/// Reads usage from a stream as its frames pass, handing each frame on unchanged (but for the
/// usage-only chunk sluice asked for itself, which the client did not). What it holds of an
/// unfinished event, line, element or frame is bounded ([`TapError`]), and it says when one
/// completed ([`Tap::take_progress`]) for the idle timeout.
#[derive(Debug)]
pub struct Tap {
    read: Read,
    /// The framing, for the error event that ends a stream sluice stops reading.
    framing: Framing,
    /// A unit of the stream completed since [`Tap::take_progress`] last asked.
    progress: bool,
}

/// How a [`Tap`] reads its stream.
#[derive(Debug)]
enum Read {
    /// OpenAI and Anthropic SSE: the gateway's SSE tap.
    Sse(SseTap),
    /// One document a line: Gemini's and Cohere's SSE `data:` lines, Cohere's v1 JSON lines.
    /// Reports are merged (Google sends running totals, Cohere one at the end).
    Lines {
        /// The shape of each line's document.
        shape: Shape,
        /// The line splitter.
        lines: Lines,
        /// Usage so far.
        usage: Option<Usage>,
    },
    /// Gemini's JSON array streamed element by element (`streamGenerateContent` without
    /// `alt=sse`): the last `usageMetadata`, merged.
    Array {
        /// The element splitter.
        elements: ArrayElements,
        /// Usage so far.
        usage: Option<Usage>,
    },
    /// Bedrock ConverseStream: the `metadata` event's `usage`.
    Converse {
        /// Frames of the stream, decoded as they complete.
        decoder: Decoder,
        /// Usage so far.
        usage: Option<Usage>,
    },
    /// Bedrock InvokeModelWithResponseStream: each `chunk`'s model event (Anthropic's
    /// `message_start` / `message_delta` usage for Claude) and Bedrock's invocation metrics.
    Invoke {
        /// Frames of the stream, decoded as they complete.
        decoder: Decoder,
        /// A chunk's decoded bytes, reused.
        scratch: Vec<u8>,
        /// Usage so far.
        usage: Option<Usage>,
    },
    /// A stream sluice does not read.
    Blind,
}

/// Fold a new report into what was seen: the larger count of each field wins.
fn fold(seen: &mut Option<Usage>, new: Option<Usage>) {
    if let Some(u) = new {
        *seen = Some(seen.map_or(u, |s| s.merge(u)));
    }
}

impl Tap {
    /// A tap for a stream of this shape and framing; `strip_usage_chunk` when sluice asked an
    /// OpenAI-shaped upstream for the usage chunk on the client's behalf.
    pub fn new(shape: Shape, framing: Framing, strip_usage_chunk: bool) -> Self {
        let read = match (framing, shape) {
            (Framing::Sse, Shape::Common) => Read::Sse(SseTap::new(strip_usage_chunk)),
            (Framing::Sse, Shape::Gemini)
            | (Framing::Sse | Framing::JsonLines | Framing::Json, Shape::Cohere) => Read::Lines {
                shape,
                lines: Lines::default(),
                usage: None,
            },
            (Framing::Json, Shape::Gemini) => Read::Array {
                elements: ArrayElements::default(),
                usage: None,
            },
            (Framing::EventStream, Shape::Converse) => Read::Converse {
                decoder: Decoder::default(),
                usage: None,
            },
            (Framing::EventStream, Shape::Invoke) => Read::Invoke {
                decoder: Decoder::default(),
                scratch: Vec::new(),
                usage: None,
            },
            _ => Read::Blind,
        };
        Self {
            read,
            framing,
            progress: false,
        }
    }

    /// The tap of an inference endpoint's answer stream, in the client's format: OpenAI's and
    /// Anthropic's SSE (`strip_usage_chunk` as for [`Tap::new`]), Gemini's `alt=sse` events,
    /// Converse's event-stream frames.
    pub fn for_endpoint(endpoint: Endpoint, strip_usage_chunk: bool) -> Self {
        match endpoint {
            Endpoint::GenerateContent => Self::new(Shape::Gemini, Framing::Sse, false),
            Endpoint::Converse => Self::new(Shape::Converse, Framing::EventStream, false),
            _ => Self::new(Shape::Common, Framing::Sse, strip_usage_chunk),
        }
    }

    /// A tap for a body that is not an event stream (speech audio): relayed, not read.
    pub fn raw() -> Self {
        Self {
            read: Read::Sse(SseTap::raw()),
            framing: Framing::Opaque,
            progress: false,
        }
    }

    /// Keep the data of a Responses stream's final event ([`SseTap::keep_final_event`]).
    pub fn keep_final_event(&mut self) {
        if let Read::Sse(tap) = &mut self.read {
            tap.keep_final_event();
        }
    }

    /// That data, once seen.
    pub fn take_final_event(&mut self) -> Option<Bytes> {
        match &mut self.read {
            Read::Sse(tap) => tap.take_final_event(),
            _ => None,
        }
    }

    /// Whether the stream's end was seen: OpenAI's and Anthropic's own end markers; the
    /// formats that end by closing (Gemini's, AWS's event stream) end with their body.
    pub fn finished(&self) -> bool {
        match &self.read {
            Read::Sse(tap) => tap.finished(),
            _ => true,
        }
    }

    /// Whether the client was sent the start of an event that has not ended, so that an event
    /// sluice adds must first end it (SSE; binary frames are whole).
    pub fn mid_event(&self) -> bool {
        match &self.read {
            Read::Sse(tap) => tap.mid_event(),
            _ => false,
        }
    }

    /// Read one frame; returns what to send on. An error means the stream is not to be read
    /// on (nothing of it is held any more).
    pub fn feed(&mut self, frame: Bytes) -> Result<Bytes, TapError> {
        let progress = &mut self.progress;
        match &mut self.read {
            Read::Sse(tap) => {
                let out = tap.feed(frame)?;
                *progress |= tap.take_progress();
                return Ok(out);
            }
            Read::Lines {
                shape,
                lines,
                usage,
            } => lines.feed(&frame, |line| {
                *progress |= !line.is_empty();
                fold(usage, line_usage(*shape, line));
            })?,
            Read::Array { elements, usage } => elements.feed(&frame, |e| {
                *progress = true;
                if has(&USAGE_METADATA, e) {
                    fold(usage, whole(Shape::Gemini, e));
                }
            })?,
            Read::Converse { decoder, usage } => {
                decoder.push(&frame);
                while let Some(m) = decoder.next_message()? {
                    *progress = true;
                    if m.header(":event-type") == Some("metadata") {
                        fold(usage, whole(Shape::Converse, &m.payload));
                    }
                }
            }
            Read::Invoke {
                decoder,
                scratch,
                usage,
            } => {
                decoder.push(&frame);
                while let Some(m) = decoder.next_message()? {
                    *progress = true;
                    if m.header(":event-type") == Some("chunk") && chunk_bytes(&m.payload, scratch)
                    {
                        fold(usage, whole(Shape::Invoke, scratch));
                    }
                }
            }
            Read::Blind => *progress |= !frame.is_empty(),
        }
        Ok(frame)
    }

    /// Whether the stream made progress since the last call: an event, line, element or
    /// frame completed (for a stream sluice does not read, any bytes). The idle timeout
    /// counts this, so bytes trickled without ever completing one do not keep a stream open.
    pub fn take_progress(&mut self) -> bool {
        std::mem::take(&mut self.progress)
    }

    /// At the end of the upstream body: whatever was held back.
    pub fn finish(&mut self) -> Bytes {
        match &mut self.read {
            Read::Sse(tap) => tap.finish(),
            Read::Lines {
                shape,
                lines,
                usage,
            } => {
                lines.finish(|line| fold(usage, line_usage(*shape, line)));
                Bytes::new()
            }
            Read::Array { .. } | Read::Converse { .. } | Read::Invoke { .. } | Read::Blind => {
                Bytes::new()
            }
        }
    }

    /// Usage seen so far.
    pub fn usage(&self) -> Option<Usage> {
        match &self.read {
            Read::Sse(tap) => tap.usage(),
            Read::Lines { usage, .. }
            | Read::Array { usage, .. }
            | Read::Converse { usage, .. }
            | Read::Invoke { usage, .. } => *usage,
            Read::Blind => None,
        }
    }

    /// What tells the client that sluice ended the stream, in the stream's own framing: an
    /// SSE `error` event (Anthropic's shape, which OpenAI's SDKs raise on too; after a blank
    /// line, so that it is an event of its own), or an event-stream exception message that
    /// AWS's SDKs raise. Other framings have no place for one: the aborted body tells.
    pub fn error_event(&self, message: &str) -> Bytes {
        let message = format!("sluice ended the stream: {message}");
        match self.framing {
            Framing::Sse => {
                let body = anthropic_error_body("api_error", &message);
                let mut out = Vec::with_capacity(body.len() + 24);
                out.extend_from_slice(b"\n\nevent: error\ndata: ");
                out.extend_from_slice(&body);
                out.extend_from_slice(b"\n\n");
                Bytes::from(out)
            }
            Framing::EventStream => Bytes::from(exception("internalServerException", &message)),
            Framing::Json | Framing::JsonLines | Framing::Opaque => Bytes::new(),
        }
    }
}

/// The usage in one line of a stream: an SSE `data:` line's document, or the line itself (JSON
/// lines); other SSE fields (`event:`, `id:`) carry none.
fn line_usage(shape: Shape, line: &[u8]) -> Option<Usage> {
    let doc = match line.strip_prefix(b"data:") {
        Some(data) => data.strip_prefix(b" ").unwrap_or(data),
        None => line,
    };
    let key = match shape {
        Shape::Gemini => &USAGE_METADATA,
        Shape::Cohere => &BILLED_UNITS,
        Shape::Common | Shape::Converse | Shape::Invoke | Shape::Unknown => return None,
    };
    if doc.first() != Some(&b'{') || !has(key, doc) {
        return None;
    }
    whole(shape, doc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_translate::eventstream;
    use sluice_translate::sse::MAX_EVENT;

    #[test]
    fn whole_answers_in_each_shape() {
        let gemini = br#"{"candidates":[],"usageMetadata":{"promptTokenCount":7,"candidatesTokenCount":3,"thoughtsTokenCount":2,"cachedContentTokenCount":1}}"#;
        let u = whole(Shape::Gemini, gemini).unwrap();
        assert_eq!(
            (u.prompt_tokens, u.completion_tokens, u.cached_tokens),
            (7, 5, 1)
        );
        let converse =
            br#"{"output":{},"usage":{"inputTokens":4,"outputTokens":9,"cacheReadInputTokens":6}}"#;
        let u = whole(Shape::Converse, converse).unwrap();
        assert_eq!((u.prompt_tokens, u.completion_tokens), (10, 9));
        let cohere = br#"{"usage":{"billed_units":{"input_tokens":5,"output_tokens":8},"tokens":{"input_tokens":70}}}"#;
        let u = whole(Shape::Cohere, cohere).unwrap();
        assert_eq!((u.prompt_tokens, u.completion_tokens), (5, 8));
        let u = whole(
            Shape::Common,
            br#"{"usage":{"input_tokens":3,"output_tokens":4}}"#,
        );
        assert_eq!(u.unwrap().completion_tokens, 4);
        assert_eq!(
            whole(Shape::Unknown, br#"{"usage":{"input_tokens":3}}"#),
            None
        );
        assert_eq!(whole(Shape::Gemini, b"not json"), None);
    }

    #[test]
    fn gemini_sse_split_anywhere() {
        let stream = "data: {\"usageMetadata\":{\"promptTokenCount\":5,\"candidatesTokenCount\":1}}\r\n\r\ndata: {\"usageMetadata\":{\"promptTokenCount\":5,\"candidatesTokenCount\":9}}\r\n\r\n";
        for cut in 1..stream.len() {
            let mut tap = Tap::new(Shape::Gemini, Framing::Sse, false);
            let mut out = Vec::new();
            for part in [&stream[..cut], &stream[cut..]] {
                out.extend_from_slice(&tap.feed(Bytes::copy_from_slice(part.as_bytes())).unwrap());
            }
            assert_eq!(out, stream.as_bytes(), "frames pass unchanged");
            let u = tap.usage().unwrap();
            assert_eq!((u.prompt_tokens, u.completion_tokens), (5, 9), "cut={cut}");
        }
    }

    #[test]
    fn converse_stream_metadata() {
        let mut bytes = eventstream::event("messageStart", br#"{"role":"assistant"}"#);
        bytes.extend(eventstream::event(
            "metadata",
            br#"{"usage":{"inputTokens":11,"outputTokens":22},"metrics":{"latencyMs":1}}"#,
        ));
        let mut tap = Tap::new(Shape::Converse, Framing::EventStream, false);
        let (a, b) = bytes.split_at(7);
        tap.feed(Bytes::copy_from_slice(a)).unwrap();
        assert!(tap.usage().is_none());
        assert!(!tap.take_progress(), "no frame complete yet");
        tap.feed(Bytes::copy_from_slice(b)).unwrap();
        assert!(tap.take_progress());
        let u = tap.usage().unwrap();
        assert_eq!((u.prompt_tokens, u.completion_tokens), (11, 22));
        assert_eq!(
            Framing::of("application/vnd.amazon.eventstream"),
            Framing::EventStream
        );
        assert_eq!(
            Framing::of("Text/Event-Stream; charset=utf-8"),
            Framing::Sse
        );
        assert_eq!(Framing::of("application/json"), Framing::Json);
        assert_eq!(
            Framing::of("application/problem+json; charset=utf-8"),
            Framing::Json
        );
        assert_eq!(Framing::of("application/stream+json"), Framing::JsonLines);
        assert_eq!(Framing::of("audio/mpeg"), Framing::Opaque);
    }

    /// Every frame passes unchanged, and the usage is the same wherever the stream is cut.
    fn tap_split_anywhere(shape: Shape, framing: Framing, stream: &[u8]) -> Usage {
        let mut seen = None;
        for cut in 0..=stream.len() {
            let mut tap = Tap::new(shape, framing, false);
            let mut out = Vec::new();
            for part in [&stream[..cut], &stream[cut..]] {
                out.extend_from_slice(&tap.feed(Bytes::copy_from_slice(part)).unwrap());
            }
            out.extend_from_slice(&tap.finish());
            assert_eq!(out, stream, "frames pass unchanged");
            let u = tap.usage();
            assert!(u.is_some(), "cut={cut}");
            assert!(seen.is_none() || seen == u, "cut={cut}: {u:?} != {seen:?}");
            seen = u;
        }
        seen.unwrap_or_default()
    }

    #[test]
    fn cohere_streams_v2_sse_and_v1_json_lines() {
        let v2 = concat!(
            "event: message-start\ndata: {\"type\":\"message-start\",\"id\":\"x\"}\n\n",
            "event: content-delta\ndata: {\"type\":\"content-delta\",\"delta\":{\"message\":{\"content\":{\"text\":\"billed_units\"}}}}\n\n",
            "event: message-end\ndata: {\"type\":\"message-end\",\"delta\":{\"finish_reason\":\"COMPLETE\",\"usage\":{\"billed_units\":{\"input_tokens\":12,\"output_tokens\":30},\"tokens\":{\"input_tokens\":200,\"output_tokens\":31}}}}\n\n",
        );
        let u = tap_split_anywhere(Shape::Cohere, Framing::Sse, v2.as_bytes());
        assert_eq!((u.prompt_tokens, u.completion_tokens), (12, 30));
        // v1: one JSON document a line, the last without its newline.
        let v1 = concat!(
            "{\"is_finished\":false,\"event_type\":\"stream-start\",\"generation_id\":\"g\"}\n",
            "{\"is_finished\":false,\"event_type\":\"text-generation\",\"text\":\"Hi\"}\n",
            "{\"is_finished\":true,\"event_type\":\"stream-end\",\"response\":{\"text\":\"Hi\",\"meta\":{\"billed_units\":{\"input_tokens\":4,\"output_tokens\":1}}},\"finish_reason\":\"COMPLETE\"}",
        );
        let u = tap_split_anywhere(Shape::Cohere, Framing::JsonLines, v1.as_bytes());
        assert_eq!((u.prompt_tokens, u.completion_tokens), (4, 1));
    }

    #[test]
    fn gemini_json_array_without_sse() {
        let stream = concat!(
            "[{\n  \"candidates\": [{\"content\": {\"parts\": [{\"text\": \"a ] } \\\" [\"}]}}],\n",
            "  \"usageMetadata\": {\"promptTokenCount\": 9, \"candidatesTokenCount\": 2}\n}\n,\r\n",
            "{\n  \"candidates\": [{\"content\": {\"parts\": [{\"text\": \"b\"}]}, \"finishReason\": \"STOP\"}],\n",
            "  \"usageMetadata\": {\"promptTokenCount\": 9, \"candidatesTokenCount\": 7, \"thoughtsTokenCount\": 1}\n}\n]",
        );
        let u = tap_split_anywhere(Shape::Gemini, Framing::Json, stream.as_bytes());
        assert_eq!((u.prompt_tokens, u.completion_tokens), (9, 8));
    }

    #[test]
    fn bedrock_invoke_stream_chunks_and_invocation_metrics() {
        let events = [
            r#"{"type":"message_start","message":{"id":"m","usage":{"input_tokens":20,"cache_read_input_tokens":5,"output_tokens":1}}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"\"usage\": no"}}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":11}}"#,
        ];
        let mut stream: Vec<u8> = events
            .iter()
            .flat_map(|e| eventstream::chunk(e.as_bytes()))
            .collect();
        let claude_only = stream.clone();
        let u = tap_split_anywhere(Shape::Invoke, Framing::EventStream, &claude_only);
        assert_eq!(
            (u.prompt_tokens, u.cached_tokens, u.completion_tokens),
            (25, 5, 11)
        );
        // Bedrock's own count in the last chunk (any model: Llama's events carry no `usage`).
        stream.extend(eventstream::chunk(
            br#"{"type":"message_stop","amazon-bedrock-invocationMetrics":{"inputTokenCount":20,"outputTokenCount":12,"invocationLatency":500,"firstByteLatency":100,"cacheReadInputTokenCount":5}}"#,
        ));
        let u = tap_split_anywhere(Shape::Invoke, Framing::EventStream, &stream);
        assert_eq!((u.prompt_tokens, u.completion_tokens), (25, 12));
        let llama = eventstream::chunk(
            br#"{"generation":"hi","prompt_token_count":null,"amazon-bedrock-invocationMetrics":{"inputTokenCount":8,"outputTokenCount":2}}"#,
        );
        let u = tap_split_anywhere(Shape::Invoke, Framing::EventStream, &llama);
        assert_eq!((u.prompt_tokens, u.completion_tokens), (8, 2));
        // ConverseStream's events are no chunks: an invoke tap reads nothing from them.
        let mut tap = Tap::new(Shape::Invoke, Framing::EventStream, false);
        tap.feed(Bytes::from(eventstream::event(
            "metadata",
            br#"{"usage":{"inputTokens":1,"outputTokens":1}}"#,
        )))
        .unwrap();
        assert_eq!(tap.usage(), None);
    }

    /// Each reading tap refuses a unit that never ends once it passes its bound, holding no
    /// more than a frame beyond it, and gives the client an error in the stream's framing.
    #[test]
    fn units_that_never_end_are_refused_past_their_bound() {
        let junk = Bytes::from(vec![b'x'; 256 * 1024]);
        let cases: [(Shape, Framing, &[u8]); 4] = [
            (Shape::Common, Framing::Sse, b"data: {\"a\":"),
            (Shape::Gemini, Framing::Sse, b"data: {\"a\":"),
            (Shape::Cohere, Framing::JsonLines, b"{\"a\":"),
            (Shape::Gemini, Framing::Json, b"[{\"a\":\""),
        ];
        for (shape, framing, start) in cases {
            let mut tap = Tap::new(shape, framing, false);
            tap.feed(Bytes::from_static(start)).unwrap();
            let mut fed = 0;
            let refused = loop {
                fed += junk.len();
                assert!(
                    fed <= MAX_EVENT + junk.len(),
                    "{shape:?} {framing:?}: no bound"
                );
                match tap.feed(junk.clone()) {
                    Ok(out) => {
                        assert_eq!(out, junk, "forwarded as it came");
                        assert!(!tap.take_progress(), "nothing completed");
                    }
                    Err(e) => break e,
                }
            };
            assert_eq!(refused, TapError::TooLong(TooLong { limit: MAX_EVENT }));
        }
        let sse = Tap::new(Shape::Common, Framing::Sse, false).error_event("why");
        let sse = std::str::from_utf8(&sse).unwrap();
        assert!(sse.starts_with("\n\nevent: error\ndata: {"), "{sse}");
        assert!(sse.contains("sluice ended the stream: why"), "{sse}");
        assert!(Tap::new(Shape::Cohere, Framing::JsonLines, false)
            .error_event("why")
            .is_empty());
    }

    /// A corrupt Bedrock frame ends the reading (the decoder's size bound is tested beside it),
    /// and the exception message sluice sends instead decodes as one.
    #[test]
    fn a_corrupt_binary_frame_is_refused_with_an_exception_message() {
        let mut frame = eventstream::event("messageStart", br#"{"role":"assistant"}"#);
        frame[2] ^= 0x40;
        let mut tap = Tap::new(Shape::Converse, Framing::EventStream, false);
        assert_eq!(
            tap.feed(Bytes::from(frame)),
            Err(TapError::Frame(FrameError::PreludeCrc))
        );
        let mut d = Decoder::default();
        d.push(&tap.error_event("too big"));
        let m = d.next_message().unwrap().unwrap();
        assert_eq!(m.header(":message-type"), Some("exception"));
        assert!(std::str::from_utf8(&m.payload).unwrap().contains("too big"));
    }

    #[test]
    fn progress_counts_completed_units_not_bytes() {
        let mut tap = Tap::new(Shape::Cohere, Framing::JsonLines, false);
        tap.feed(Bytes::from_static(b"{\"a\"")).unwrap();
        assert!(!tap.take_progress());
        tap.feed(Bytes::from_static(b":1}\n\n")).unwrap();
        assert!(tap.take_progress());
        tap.feed(Bytes::from_static(b"\n\n")).unwrap();
        assert!(!tap.take_progress(), "empty lines are no progress");
        let mut blind = Tap::new(Shape::Unknown, Framing::Opaque, false);
        blind.feed(Bytes::from_static(b"%PDF")).unwrap();
        assert!(
            blind.take_progress(),
            "a stream sluice does not read: bytes are progress"
        );
    }
}
