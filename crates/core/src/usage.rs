//! One normalised usage record for every answer (OpenAI chat, completions, embeddings,
//! Responses API, Anthropic Messages), read without parsing the rest of the body into values.
//! Anthropic's `input_tokens` excludes cache reads and writes; normalised `prompt_tokens`
//! includes both, as OpenAI's does, so spend is computed one way.

use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};

use crate::endpoint::Endpoint;
use crate::price::ImageQuality;

/// Tokens one request used. `prompt_tokens` includes `cached_tokens` and
/// `cache_creation_tokens` (OpenAI's convention).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Input tokens, cached ones included.
    pub prompt_tokens: u64,
    /// Output tokens, reasoning ones included.
    pub completion_tokens: u64,
    /// Input tokens served from the provider's prompt cache.
    pub cached_tokens: u64,
    /// Input tokens written to the provider's prompt cache (Anthropic bills them apart).
    pub cache_creation_tokens: u64,
    /// Of those, the ones written for an hour (Anthropic's
    /// `cache_creation.ephemeral_1h_input_tokens`), dearer than the 5-minute ones.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_creation_1h_tokens: u64,
    /// Output tokens spent on hidden reasoning.
    pub reasoning_tokens: u64,
    /// Images generated (image endpoints; priced per image).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub images: u64,
    /// Pixels of the images generated (priced per pixel, as LiteLLM prices DALL·E).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub pixels: u64,
    /// Milliseconds of audio transcribed or translated (priced per second).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub audio_ms: u64,
    /// Characters of text spoken (`/audio/speech`; priced per character).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub characters: u64,
    /// Rerank search units (Cohere's `billed_units.search_units`; priced per query).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub search_units: u64,
    /// Calls priced per call (a custom pass-through route's `cost_per_request`). 16 bits, as
    /// `pages`: both fit beside the flags, so the record (held by every request) does not grow.
    #[serde(default, skip_serializing_if = "is_zero_u16")]
    pub requests: u16,
    /// Document pages read (OCR's `usage_info.pages_processed`; priced per page).
    #[serde(default, skip_serializing_if = "is_zero_u16")]
    pub pages: u16,
    /// Seconds of video generated (a video's `seconds`; priced per second). 16 bits, beside
    /// `pages`, for the same reason.
    #[serde(default, skip_serializing_if = "is_zero_u16")]
    pub video_seconds: u16,
    /// Served in fast mode (Anthropic's `speed: "fast"`), which the registry prices higher.
    #[serde(default, skip_serializing_if = "is_false")]
    pub fast: bool,
    /// Served in the US only (Anthropic's `inference_geo: "us"`), which the registry prices
    /// higher.
    #[serde(default, skip_serializing_if = "is_false")]
    pub us_only: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn is_zero_u16(n: &u16) -> bool {
    *n == 0
}

/// What a request itself says about the units it will be charged for: the characters it
/// asks to be spoken, the size and quality of each image it asks for. Read once from the
/// request body.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RequestUnits {
    /// Characters of `input` (`/audio/speech`).
    pub characters: u64,
    /// Width and height of one requested image (`size`; OpenAI's 1024×1024 when not stated),
    /// `None` for `auto` or an unreadable size, and for other endpoints.
    pub image_size: Option<(u32, u32)>,
    /// The requested image `quality`, when stated.
    pub image_quality: Option<ImageQuality>,
}

impl RequestUnits {
    /// Pixels of one requested image, 0 when its size is not known.
    pub fn pixels_per_image(&self) -> u64 {
        self.image_size
            .map_or(0, |(w, h)| u64::from(w) * u64::from(h))
    }
}

impl Usage {
    /// Combine two reports of the same answer: Anthropic streams input tokens at the start and
    /// cumulative output tokens at the end, so the larger count of each field wins.
    pub fn merge(self, later: Usage) -> Usage {
        Usage {
            prompt_tokens: self.prompt_tokens.max(later.prompt_tokens),
            completion_tokens: self.completion_tokens.max(later.completion_tokens),
            cached_tokens: self.cached_tokens.max(later.cached_tokens),
            cache_creation_tokens: self.cache_creation_tokens.max(later.cache_creation_tokens),
            cache_creation_1h_tokens: self
                .cache_creation_1h_tokens
                .max(later.cache_creation_1h_tokens),
            reasoning_tokens: self.reasoning_tokens.max(later.reasoning_tokens),
            images: self.images.max(later.images),
            pixels: self.pixels.max(later.pixels),
            audio_ms: self.audio_ms.max(later.audio_ms),
            characters: self.characters.max(later.characters),
            search_units: self.search_units.max(later.search_units),
            requests: self.requests.max(later.requests),
            pages: self.pages.max(later.pages),
            video_seconds: self.video_seconds.max(later.video_seconds),
            fast: self.fast || later.fast,
            us_only: self.us_only || later.us_only,
        }
    }

    /// The units a request stated for itself, as usage (what an answer without a usage
    /// report, such as streamed speech audio, is charged for).
    pub fn requested(units: RequestUnits) -> Usage {
        Usage {
            characters: units.characters,
            ..Usage::default()
        }
    }

    /// Anthropic's `input_tokens`: input neither read from nor written to the cache.
    pub fn uncached_input_tokens(&self) -> u64 {
        self.prompt_tokens
            .saturating_sub(self.cached_tokens + self.cache_creation_tokens)
    }
}

/// Two answers' usage added: a Realtime API session is charged for all its responses.
impl std::ops::Add for Usage {
    type Output = Usage;

    fn add(self, other: Usage) -> Usage {
        Usage {
            prompt_tokens: self.prompt_tokens + other.prompt_tokens,
            completion_tokens: self.completion_tokens + other.completion_tokens,
            cached_tokens: self.cached_tokens + other.cached_tokens,
            cache_creation_tokens: self.cache_creation_tokens + other.cache_creation_tokens,
            cache_creation_1h_tokens: self.cache_creation_1h_tokens
                + other.cache_creation_1h_tokens,
            reasoning_tokens: self.reasoning_tokens + other.reasoning_tokens,
            images: self.images + other.images,
            pixels: self.pixels + other.pixels,
            audio_ms: self.audio_ms + other.audio_ms,
            characters: self.characters + other.characters,
            search_units: self.search_units + other.search_units,
            requests: self.requests.saturating_add(other.requests),
            pages: self.pages.saturating_add(other.pages),
            video_seconds: self.video_seconds.saturating_add(other.video_seconds),
            fast: self.fast || other.fast,
            us_only: self.us_only || other.us_only,
        }
    }
}

/// Anthropic's cache writes by lifetime.
#[derive(Deserialize)]
struct CacheWrites {
    #[serde(default)]
    ephemeral_1h_input_tokens: Option<u64>,
}

impl CacheWrites {
    /// Read as [`RawUsage::scan`] reads usage: `Some(None)` for `null`.
    fn scan(value: &[u8]) -> Option<Option<Self>> {
        if value == b"null" {
            return Some(None);
        }
        let mut w = CacheWrites {
            ephemeral_1h_input_tokens: None,
        };
        let mut members = crate::scan::members(value)?;
        for (key, range) in members.by_ref() {
            match key {
                b"ephemeral_1h_input_tokens" => {
                    if w.ephemeral_1h_input_tokens.is_some() {
                        return None;
                    }
                    w.ephemeral_1h_input_tokens = count(&value[range])?;
                }
                k if k.contains(&b'\\') => return None,
                _ => {}
            }
        }
        members.complete.then_some(Some(w))
    }
}

#[derive(Deserialize)]
struct Details {
    #[serde(default)]
    cached_tokens: Option<u64>,
    /// Anthropic spells it `thinking_tokens` (`usage.output_tokens_details`).
    #[serde(default, alias = "thinking_tokens")]
    reasoning_tokens: Option<u64>,
}

/// The `usage` object in OpenAI's spellings (chat: prompt/completion; Responses:
/// input/output) and Anthropic's (input/output plus cache reads and writes).
#[derive(Deserialize)]
struct RawUsage {
    /// Anthropic: input tokens read from the cache (not in `input_tokens`).
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
    /// Anthropic: input tokens written to the cache (not in `input_tokens`).
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    /// Anthropic: the cache writes by lifetime.
    #[serde(default)]
    cache_creation: Option<CacheWrites>,
    /// OpenAI chat: cached tokens included.
    #[serde(default)]
    prompt_tokens: Option<u64>,
    /// Responses API (cached included) and Anthropic (cache reads and writes excluded).
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default, alias = "output_tokens")]
    completion_tokens: Option<u64>,
    /// Only a total (Jina's and Voyage's rerankers, embeddings servers): all input.
    #[serde(default)]
    total_tokens: Option<u64>,
    /// `input_token_details` is the Realtime API's spelling (`response.done`).
    #[serde(default, alias = "input_tokens_details", alias = "input_token_details")]
    prompt_tokens_details: Option<Details>,
    #[serde(
        default,
        alias = "output_tokens_details",
        alias = "output_token_details"
    )]
    completion_tokens_details: Option<Details>,
    /// Transcriptions billed by duration: `{"type": "duration", "seconds": 9}`.
    #[serde(default)]
    seconds: Option<f64>,
    /// Anthropic: `fast` when served in fast mode.
    #[serde(default)]
    speed: Option<String>,
    /// Anthropic: where the answer was computed (`us`, `global`).
    #[serde(default)]
    inference_geo: Option<String>,
}

impl From<RawUsage> for Usage {
    fn from(raw: RawUsage) -> Self {
        let read = raw.cache_read_input_tokens.unwrap_or(0);
        let written = raw.cache_creation_input_tokens.unwrap_or(0);
        let detailed = raw.prompt_tokens_details.and_then(|d| d.cached_tokens);
        // `prompt_tokens` already counts the cache (an OpenAI-shaped answer may carry the
        // Anthropic cache fields as extra detail); Anthropic's `input_tokens` does not.
        let prompt_tokens = match (raw.prompt_tokens, raw.input_tokens) {
            (Some(p), _) => p,
            (None, Some(i)) => i + read + written,
            (None, None) if raw.completion_tokens.is_none() => {
                raw.total_tokens.unwrap_or(0) + read + written
            }
            (None, None) => read + written,
        };
        Self {
            prompt_tokens,
            completion_tokens: raw.completion_tokens.unwrap_or(0),
            cached_tokens: detailed.unwrap_or(read),
            cache_creation_tokens: written,
            cache_creation_1h_tokens: raw
                .cache_creation
                .and_then(|c| c.ephemeral_1h_input_tokens)
                .unwrap_or(0)
                .min(written),
            reasoning_tokens: raw
                .completion_tokens_details
                .and_then(|d| d.reasoning_tokens)
                .unwrap_or(0),
            audio_ms: raw.seconds.map_or(0, seconds_to_ms),
            fast: raw.speed.as_deref() == Some("fast"),
            us_only: raw.inference_geo.as_deref() == Some("us"),
            ..Usage::default()
        }
    }
}

impl RawUsage {
    /// The usage object read by [`crate::scan`] instead of serde's derived visitor (which
    /// matches every key against every field and alias). `None` when anything is not the plain
    /// shape (a value that is not a non-negative integer, an escaped key, a repeated detail
    /// object): the caller then asks serde, which decides as before.
    fn scan(obj: &[u8]) -> Option<Self> {
        let mut raw = RawUsage {
            cache_read_input_tokens: None,
            cache_creation_input_tokens: None,
            cache_creation: None,
            prompt_tokens: None,
            input_tokens: None,
            completion_tokens: None,
            total_tokens: None,
            prompt_tokens_details: None,
            completion_tokens_details: None,
            seconds: None,
            speed: None,
            inference_geo: None,
        };
        let mut members = crate::scan::members(obj)?;
        for (key, range) in members.by_ref() {
            let value = &obj[range];
            let slot = match key {
                b"cache_read_input_tokens" => &mut raw.cache_read_input_tokens,
                b"cache_creation_input_tokens" => &mut raw.cache_creation_input_tokens,
                b"prompt_tokens" => &mut raw.prompt_tokens,
                b"input_tokens" => &mut raw.input_tokens,
                b"completion_tokens" | b"output_tokens" => &mut raw.completion_tokens,
                b"total_tokens" => &mut raw.total_tokens,
                b"prompt_tokens_details" | b"input_tokens_details" | b"input_token_details" => {
                    if raw.prompt_tokens_details.is_some() {
                        return None;
                    }
                    raw.prompt_tokens_details = Details::scan(value)?;
                    continue;
                }
                b"completion_tokens_details"
                | b"output_tokens_details"
                | b"output_token_details" => {
                    if raw.completion_tokens_details.is_some() {
                        return None;
                    }
                    raw.completion_tokens_details = Details::scan(value)?;
                    continue;
                }
                b"cache_creation" => {
                    if raw.cache_creation.is_some() {
                        return None;
                    }
                    raw.cache_creation = CacheWrites::scan(value)?;
                    continue;
                }
                b"speed" | b"inference_geo" => {
                    let text = match value {
                        b"null" => None,
                        v => Some(serde_json::from_slice::<String>(v).ok()?),
                    };
                    if key == b"speed" {
                        raw.speed = text;
                    } else {
                        raw.inference_geo = text;
                    }
                    continue;
                }
                b"seconds" => {
                    raw.seconds = match value {
                        b"null" => None,
                        v => Some(std::str::from_utf8(v).ok()?.parse().ok()?),
                    };
                    continue;
                }
                k if k.contains(&b'\\') => return None,
                _ => continue,
            };
            if slot.is_some() {
                return None;
            }
            *slot = count(value)?;
        }
        members.complete.then_some(raw)
    }
}

impl Details {
    /// A details object read as [`RawUsage::scan`] reads usage: `Some(None)` for `null`.
    fn scan(value: &[u8]) -> Option<Option<Self>> {
        if value == b"null" {
            return Some(None);
        }
        let mut d = Details {
            cached_tokens: None,
            reasoning_tokens: None,
        };
        let mut members = crate::scan::members(value)?;
        for (key, range) in members.by_ref() {
            let slot = match key {
                b"cached_tokens" => &mut d.cached_tokens,
                b"reasoning_tokens" | b"thinking_tokens" => &mut d.reasoning_tokens,
                k if k.contains(&b'\\') => return None,
                _ => continue,
            };
            if slot.is_some() {
                return None;
            }
            *slot = count(&value[range])?;
        }
        members.complete.then_some(Some(d))
    }
}

/// A token count as serde reads an `Option<u64>`: `null` is none, digits are a number, and
/// anything else (a sign, a fraction, an overflow) is `None` here, for serde to judge.
fn count(value: &[u8]) -> Option<Option<u64>> {
    if value == b"null" {
        return Some(None);
    }
    if value.is_empty() || value.len() > 19 || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if value.len() > 1 && value[0] == b'0' {
        return None;
    }
    Some(Some(
        value.iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0')),
    ))
}

fn seconds_to_ms(s: f64) -> u64 {
    if s.is_finite() && s > 0.0 {
        (s * 1000.0).round() as u64
    } else {
        0
    }
}

/// The parts of a JSON document (a whole answer or one stream event) that carry usage.
/// Everything else is skipped by serde without being built.
#[derive(Deserialize)]
pub struct UsageProbe<'a> {
    #[serde(default)]
    usage: Option<RawUsage>,
    /// Responses API stream events nest the response object.
    #[serde(default)]
    response: Option<NestedResponse>,
    /// Anthropic's `message_start` nests the message object.
    #[serde(default)]
    message: Option<NestedResponse>,
    /// Chat chunks: an empty `choices` marks the usage-only chunk.
    #[serde(default)]
    choices: Option<Vec<IgnoredAny>>,
    /// Responses API event type (`response.completed`, ...).
    #[serde(default, borrow, rename = "type")]
    pub kind: Option<&'a str>,
}

#[derive(Deserialize)]
struct NestedResponse {
    #[serde(default)]
    usage: Option<RawUsage>,
}

impl UsageProbe<'_> {
    /// The usage this document carries, if any.
    pub fn usage(self) -> Option<Usage> {
        self.usage
            .or(self.response.and_then(|r| r.usage))
            .or(self.message.and_then(|m| m.usage))
            .map(Usage::from)
    }

    /// True for the final chat chunk that only carries usage (`"choices": []`).
    pub fn is_usage_only_chunk(&self) -> bool {
        self.usage.is_some() && self.choices.as_ref().is_some_and(Vec::is_empty)
    }
}

/// Usage from an already parsed `usage` object (translators read whole answers as values).
pub fn usage_from_value(usage: &serde_json::Value) -> Option<Usage> {
    RawUsage::deserialize(usage).ok().map(Usage::from)
}

/// The parts of an answer priced per unit: images (`data`), audio (`duration` of a verbose
/// transcription), rerank search units (Cohere's `meta.billed_units`), beside any `usage`.
#[derive(Deserialize)]
struct UnitsProbe {
    #[serde(default)]
    usage: Option<RawUsage>,
    #[serde(default)]
    data: Option<Vec<IgnoredAny>>,
    #[serde(default)]
    duration: Option<f64>,
    #[serde(default)]
    meta: Option<Meta>,
}

#[derive(Deserialize)]
struct Meta {
    #[serde(default)]
    billed_units: Option<BilledUnits>,
}

#[derive(Deserialize)]
struct BilledUnits {
    #[serde(default)]
    search_units: Option<u64>,
}

/// Usage of a whole answer of `endpoint`, with the units the request stated. Token-priced
/// endpoints read only `usage` ([`usage_from_body`]); the others also count what they are
/// priced by. `None` when nothing billable is known.
pub fn usage_of(endpoint: Endpoint, answer: &[u8], requested: RequestUnits) -> Option<Usage> {
    let images = match endpoint {
        Endpoint::ChatCompletions
        | Endpoint::Completions
        | Endpoint::Embeddings
        | Endpoint::Responses
        | Endpoint::Messages
        | Endpoint::CountTokens
        | Endpoint::Moderations => return usage_from_body(answer),
        Endpoint::AudioSpeech => return Some(Usage::requested(requested)),
        Endpoint::ImageGenerations | Endpoint::ImageEdits | Endpoint::ImageVariations => true,
        Endpoint::AudioTranscriptions | Endpoint::AudioTranslations | Endpoint::Rerank => false,
        // Google's and Bedrock's shapes are read where their wire types live
        // (`sluice_providers::passthrough::usage::of_answer`).
        Endpoint::GenerateContent | Endpoint::Converse => return None,
        Endpoint::Ocr => return ocr_usage(answer),
    };
    let probe: UnitsProbe = serde_json::from_slice(answer).ok()?;
    let mut u = probe.usage.map(Usage::from).unwrap_or_default();
    if images {
        u.images = probe.data.map_or(0, |d| d.len() as u64);
        u.pixels = u.images * requested.pixels_per_image();
    }
    if u.audio_ms == 0 {
        u.audio_ms = probe.duration.map_or(0, seconds_to_ms);
    }
    u.search_units = probe
        .meta
        .and_then(|m| m.billed_units)
        .and_then(|b| b.search_units)
        .unwrap_or(0);
    (u != Usage::default()).then_some(u)
}

/// An OCR answer's pages (Mistral's `usage_info.pages_processed`).
fn ocr_usage(answer: &[u8]) -> Option<Usage> {
    #[derive(Deserialize)]
    struct Info {
        #[serde(default)]
        pages_processed: Option<u64>,
    }
    #[derive(Deserialize)]
    struct Probe {
        #[serde(default)]
        usage_info: Option<Info>,
    }
    let pages = serde_json::from_slice::<Probe>(answer)
        .ok()?
        .usage_info?
        .pages_processed?;
    Some(Usage {
        pages: u16::try_from(pages).unwrap_or(u16::MAX),
        ..Usage::default()
    })
}

/// Usage from a whole non-stream answer. `None` when the body has none or is not JSON.
///
/// Every answer sluice proxies is read here, so the usual shape takes a short path: the
/// top-level members are scanned from the end ([`crate::scan::members_rev`]: `usage` is among
/// the last, after the choices or vectors) and a top-level `usage` object is read by the same
/// scanner. Usage nested in `response` or `message` (Realtime and stream events), and
/// anything the scan cannot read, take the full probe.
pub fn usage_from_body(body: &[u8]) -> Option<Usage> {
    if let Some(mut members) = crate::scan::members_rev(body) {
        let mut nested = false;
        for (key, value) in members.by_ref() {
            match key {
                b"usage" if body.get(value.start) == Some(&b'{') => {
                    let usage = &body[value];
                    return match RawUsage::scan(usage) {
                        Some(raw) => Some(raw.into()),
                        None => serde_json::from_slice::<RawUsage>(usage)
                            .ok()
                            .map(Usage::from),
                    };
                }
                b"response" | b"message" => nested = true,
                _ => {}
            }
        }
        if members.complete && !nested {
            return None;
        }
    }
    serde_json::from_slice::<UsageProbe<'_>>(body)
        .ok()
        .and_then(UsageProbe::usage)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anthropic_thinking_tokens_speed_and_geo_are_read() {
        let body = br#"{"usage":{"input_tokens":10,"output_tokens":50,"output_tokens_details":{"thinking_tokens":30},"speed":"fast","inference_geo":"us"}}"#;
        // Both readers: the byte scan of a whole answer and serde over a parsed value.
        let value: serde_json::Value = serde_json::from_slice(body).unwrap();
        for u in [
            usage_from_body(body).unwrap(),
            usage_from_value(&value["usage"]).unwrap(),
        ] {
            assert_eq!(u.reasoning_tokens, 30);
            assert!(u.fast && u.us_only, "{u:?}");
        }
        let plain = br#"{"usage":{"input_tokens":10,"output_tokens":50,"inference_geo":"global"}}"#;
        let u = usage_from_body(plain).unwrap();
        assert!(!u.fast && !u.us_only);
    }

    #[test]
    fn realtime_response_done_usage() {
        let frame = br#"{"type":"response.done","event_id":"e","response":{"id":"r","usage":{"total_tokens":17,"input_tokens":12,"output_tokens":5,"input_token_details":{"cached_tokens":4,"text_tokens":12,"audio_tokens":0},"output_token_details":{"text_tokens":5,"audio_tokens":0}}}}"#;
        let u = usage_from_body(frame).unwrap();
        assert_eq!(
            (u.prompt_tokens, u.completion_tokens, u.cached_tokens),
            (12, 5, 4)
        );
    }

    #[test]
    fn the_scanned_path_reads_what_the_full_probe_reads() {
        let probe = |b: &[u8]| {
            serde_json::from_slice::<UsageProbe<'_>>(b)
                .ok()
                .and_then(UsageProbe::usage)
        };
        let bodies: [&[u8]; 8] = [
            br#"{"id":"x","choices":[{"message":{"content":"\"usage\":{\"prompt_tokens\":99}"}}],"usage":{"prompt_tokens":10,"completion_tokens":5},"system_fingerprint":"fp"}"#,
            br#"{"choices":[{"message":{"content":"no usage here, \"usage\": {}"}}]}"#,
            br#"{"usage":null,"response":{"usage":{"input_tokens":4,"output_tokens":2}}}"#,
            br#"{"type":"message","message":{"usage":{"input_tokens":7,"output_tokens":1}}}"#,
            br#"{"usage":{"prompt_tokens":"ten"}}"#,
            br#"{"usage":{"prompt_tokens":1}"#,
            br#"not json"#,
            br#"  {"object":"list","data":[{"embedding":[0.1,-2e-3]}],"usage":{"prompt_tokens":8,"total_tokens":8}}  "#,
        ];
        for b in bodies {
            assert_eq!(
                usage_from_body(b),
                probe(b),
                "{}",
                String::from_utf8_lossy(b)
            );
        }
        let usages: [&[u8]; 7] = [
            br#"{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15,"prompt_tokens_details":{"cached_tokens":4,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":2}}"#,
            br#"{"input_tokens":10,"output_tokens":5,"cache_read_input_tokens":100,"cache_creation_input_tokens":20,"service_tier":"standard"}"#,
            br#"{"total_tokens":7}"#,
            br#"{"type":"duration","seconds":9.5}"#,
            br#"{"prompt_tokens":-1}"#,
            br#"{"prompt_tokens":1.0,"completion_tokens":null}"#,
            br#"{"input_tokens_details":null,"input_tokens":3,"output_tokens":01}"#,
        ];
        for u in usages {
            let b = [&br#"{"choices":[],"usage":"#[..], u, b"}"].concat();
            assert_eq!(
                usage_from_body(&b),
                probe(&b),
                "{}",
                String::from_utf8_lossy(&b)
            );
        }
        assert!(
            RawUsage::scan(usages[0]).is_some(),
            "the plain shape is scanned"
        );
        assert_eq!(usage_from_body(bodies[0]).unwrap().prompt_tokens, 10);
        assert_eq!(usage_from_body(bodies[7]).unwrap().prompt_tokens, 8);
    }

    #[test]
    fn chat_usage_with_details() {
        let body = br#"{"id":"x","choices":[{"message":{"content":"usage"}}],
            "usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15,
            "prompt_tokens_details":{"cached_tokens":4},
            "completion_tokens_details":{"reasoning_tokens":2}}}"#;
        assert_eq!(
            usage_from_body(body),
            Some(Usage {
                prompt_tokens: 10,
                completion_tokens: 5,
                cached_tokens: 4,
                cache_creation_tokens: 0,
                reasoning_tokens: 2,
                ..Usage::default()
            })
        );
    }

    #[test]
    fn anthropic_usage_counts_cache_reads_and_writes_as_input() {
        let body = br#"{"type":"message","usage":{"input_tokens":10,"output_tokens":5,
            "cache_read_input_tokens":100,"cache_creation_input_tokens":20}}"#;
        let u = usage_from_body(body).unwrap();
        assert_eq!(u.prompt_tokens, 130);
        assert_eq!(u.cached_tokens, 100);
        assert_eq!(u.cache_creation_tokens, 20);
        assert_eq!(u.uncached_input_tokens(), 10);
        let start =
            br#"{"type":"message_start","message":{"usage":{"input_tokens":7,"output_tokens":1}}}"#;
        let first = serde_json::from_slice::<UsageProbe<'_>>(start)
            .unwrap()
            .usage()
            .unwrap();
        let delta = br#"{"type":"message_delta","usage":{"output_tokens":42}}"#;
        let last = usage_from_body(delta).unwrap();
        let u = first.merge(last);
        assert_eq!((u.prompt_tokens, u.completion_tokens), (7, 42));
    }

    #[test]
    fn responses_usage() {
        let body = br#"{"object":"response","usage":{"input_tokens":7,"output_tokens":3,
            "input_tokens_details":{"cached_tokens":1},"output_tokens_details":{"reasoning_tokens":0},
            "total_tokens":10}}"#;
        let u = usage_from_body(body).unwrap();
        assert_eq!(
            (u.prompt_tokens, u.completion_tokens, u.cached_tokens),
            (7, 3, 1)
        );
    }

    #[test]
    fn embeddings_usage_and_missing() {
        let body = br#"{"data":[],"usage":{"prompt_tokens":8,"total_tokens":8}}"#;
        assert_eq!(usage_from_body(body).unwrap().prompt_tokens, 8);
        assert_eq!(usage_from_body(br#"{"data":[]}"#), None);
        assert_eq!(usage_from_body(b"not json"), None);
        assert_eq!(usage_from_body(br#"{"usage":null}"#), None);
    }

    #[test]
    fn nested_response_event() {
        let ev = br#"{"type":"response.completed","response":{"usage":{"input_tokens":2,"output_tokens":9}}}"#;
        let probe: UsageProbe<'_> = serde_json::from_slice(ev).unwrap();
        assert_eq!(probe.kind, Some("response.completed"));
        assert_eq!(probe.usage().unwrap().completion_tokens, 9);
    }

    #[test]
    fn units_of_images_audio_and_rerank() {
        let none = RequestUnits::default();
        let img = br#"{"created":1,"data":[{"url":"u"},{"url":"v"}]}"#;
        let sized = RequestUnits {
            image_size: Some((1024, 1024)),
            ..none
        };
        let u = usage_of(Endpoint::ImageGenerations, img, sized).unwrap();
        assert_eq!((u.images, u.pixels), (2, 2 * 1024 * 1024));
        let gpt_image = br#"{"data":[{"b64_json":"x"}],"usage":{"input_tokens":5,"output_tokens":272,"total_tokens":277}}"#;
        let u = usage_of(Endpoint::ImageEdits, gpt_image, none).unwrap();
        assert_eq!(
            (u.images, u.prompt_tokens, u.completion_tokens),
            (1, 5, 272)
        );
        let verbose = br#"{"task":"transcribe","duration":8.47,"text":"hi"}"#;
        let u = usage_of(Endpoint::AudioTranscriptions, verbose, none).unwrap();
        assert_eq!(u.audio_ms, 8470);
        let json = br#"{"text":"hi","usage":{"type":"duration","seconds":3}}"#;
        assert_eq!(
            usage_of(Endpoint::AudioTranslations, json, none)
                .unwrap()
                .audio_ms,
            3000
        );
        assert_eq!(
            usage_of(Endpoint::AudioTranscriptions, br#"{"text":"hi"}"#, none),
            None
        );
        let jina = br#"{"results":[],"usage":{"total_tokens":42}}"#;
        assert_eq!(
            usage_of(Endpoint::Rerank, jina, none)
                .unwrap()
                .prompt_tokens,
            42
        );
        let rerank = br#"{"results":[],"meta":{"billed_units":{"search_units":1}}}"#;
        assert_eq!(
            usage_of(Endpoint::Rerank, rerank, none)
                .unwrap()
                .search_units,
            1
        );
        let speech = RequestUnits {
            characters: 42,
            ..none
        };
        assert_eq!(
            usage_of(Endpoint::AudioSpeech, b"\xff\xfb", speech)
                .unwrap()
                .characters,
            42
        );
    }

    #[test]
    fn usage_only_chunk() {
        let ev = br#"{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}}"#;
        let probe: UsageProbe<'_> = serde_json::from_slice(ev).unwrap();
        assert!(probe.is_usage_only_chunk());
        let ev = br#"{"choices":[{"delta":{}}],"usage":{"prompt_tokens":1,"completion_tokens":2}}"#;
        let probe: UsageProbe<'_> = serde_json::from_slice(ev).unwrap();
        assert!(!probe.is_usage_only_chunk());
    }
}
