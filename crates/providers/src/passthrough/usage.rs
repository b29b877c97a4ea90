//! Usage read from a pass-through answer in the provider's own shape, without changing a byte
//! of it: OpenAI's and Anthropic's `usage` (the shared borrowed probe), Gemini's
//! `usageMetadata`, Bedrock Converse's camel-case `usage` (whole, and in ConverseStream's
//! `metadata` event), Cohere's `billed_units`. Streams are scanned as they pass: SSE through the
//! gateway's own tap (which also removes the usage chunk sluice asked for on the client's
//! behalf), Gemini's SSE and AWS event-stream frames here.

use bytes::{Bytes, BytesMut};
use serde::Deserialize;
use sluice_core::usage::{usage_from_body, Usage};
use sluice_translate::eventstream::Decoder;
use sluice_translate::sse::{events, last_event_end, SseTap};

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

#[derive(Deserialize)]
struct CohereProbe {
    #[serde(default)]
    usage: Option<CohereMeta>,
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

/// Usage from a whole answer of this shape; `None` when it carries none sluice can read.
pub fn whole(shape: Shape, body: &[u8]) -> Option<Usage> {
    match shape {
        Shape::Common => usage_from_body(body),
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
            let units = p.usage.or(p.meta)?.billed_units?;
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
    /// Anything else (a JSON array streamed by Gemini without `alt=sse`, a file download):
    /// relayed, not read.
    Opaque,
}

impl Framing {
    /// The framing a `Content-Type` announces.
    pub fn of(content_type: &str) -> Self {
        let ct = content_type.trim_start().to_ascii_lowercase();
        if ct.starts_with("text/event-stream") {
            Self::Sse
        } else if ct.starts_with("application/vnd.amazon.eventstream") {
            Self::EventStream
        } else {
            Self::Opaque
        }
    }
}

/// Reads usage from a stream as its frames pass, handing each frame on unchanged (but for the
/// usage-only chunk sluice asked for itself, which the client did not).
#[derive(Debug)]
pub enum Tap {
    /// OpenAI and Anthropic SSE: the gateway's SSE tap.
    Sse(SseTap),
    /// Gemini SSE: the last `usageMetadata` seen (Google sends running totals).
    Gemini {
        /// Bytes after the last complete event.
        carry: BytesMut,
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
    /// A stream sluice does not read.
    Blind,
}

impl Tap {
    /// A tap for a stream of this shape and framing; `strip_usage_chunk` when sluice asked an
    /// OpenAI-shaped upstream for the usage chunk on the client's behalf.
    pub fn new(shape: Shape, framing: Framing, strip_usage_chunk: bool) -> Self {
        match (framing, shape) {
            (Framing::Sse, Shape::Gemini) => Self::Gemini {
                carry: BytesMut::new(),
                usage: None,
            },
            (Framing::Sse, Shape::Common) => Self::Sse(SseTap::new(strip_usage_chunk)),
            (Framing::EventStream, Shape::Converse) => Self::Converse {
                decoder: Decoder::default(),
                usage: None,
            },
            _ => Self::Blind,
        }
    }

    /// Read one frame; returns what to send on.
    pub fn feed(&mut self, frame: Bytes) -> Bytes {
        match self {
            Self::Sse(tap) => return tap.feed(frame),
            Self::Gemini { carry, usage } => {
                carry.extend_from_slice(&frame);
                if let Some(end) = last_event_end(carry) {
                    let done = carry.split_to(end);
                    for (s, e) in events(&done) {
                        if let Some(u) = gemini_event(&done[s..e]) {
                            *usage = Some(usage.map_or(u, |seen| seen.merge(u)));
                        }
                    }
                }
            }
            Self::Converse { decoder, usage } => {
                decoder.push(&frame);
                while let Ok(Some(m)) = decoder.next_message() {
                    if m.header(":event-type") == Some("metadata") {
                        if let Some(u) = whole(Shape::Converse, &m.payload) {
                            *usage = Some(u);
                        }
                    }
                }
            }
            Self::Blind => {}
        }
        frame
    }

    /// At the end of the upstream body: whatever was held back.
    pub fn finish(&mut self) -> Bytes {
        match self {
            Self::Sse(tap) => tap.finish(),
            Self::Gemini { .. } | Self::Converse { .. } | Self::Blind => Bytes::new(),
        }
    }

    /// Usage seen so far.
    pub fn usage(&self) -> Option<Usage> {
        match self {
            Self::Sse(tap) => tap.usage(),
            Self::Gemini { usage, .. } | Self::Converse { usage, .. } => *usage,
            Self::Blind => None,
        }
    }
}

/// The usage of one Gemini SSE event (`data: {…"usageMetadata":{…}}`).
fn gemini_event(event: &[u8]) -> Option<Usage> {
    event
        .rsplit(|b| *b == b'\n')
        .filter_map(|line| line.strip_prefix(b"data:"))
        .find_map(|data| whole(Shape::Gemini, data))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_translate::eventstream;

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
                out.extend_from_slice(&tap.feed(Bytes::copy_from_slice(part.as_bytes())));
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
        tap.feed(Bytes::copy_from_slice(a));
        assert!(tap.usage().is_none());
        tap.feed(Bytes::copy_from_slice(b));
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
        assert_eq!(Framing::of("application/json"), Framing::Opaque);
    }
}
