//! The mock's answers for the endpoints beyond text: images (generated, edited, varied;
//! `url` or `b64_json`, streamed partial images for `gpt-image-*`), audio (transcripts in
//! every `response_format`, streamed transcript events, speech as audio bytes or `sse`
//! events), moderations and rerank (Cohere's shape). Deterministic, in OpenAI's and Cohere's
//! wire shapes.
//!
//! Uploaded files are read, never interpreted: audio counts as 16 kHz 16-bit mono PCM
//! (32,000 bytes a second), and a transcript ends with the upload's size and FNV-1a hash so
//! tests can check the upstream got the client's bytes unchanged.

use std::borrow::Cow;

use base64::Engine as _;
use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_TYPE};
use http::{HeaderMap, Response, StatusCode};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json as j, Value};

use sluice_core::endpoint::{BodyFormat, Dialect, Endpoint};
use sluice_translate::multipart;

use super::openai::{filler, stamp};
use super::{bad_request, before_answer, injected_error, json, stream, MockBody, MockSettings};

/// Bytes of audio per second, as the mock counts them.
const AUDIO_BYTES_PER_SECOND: u64 = 32_000;

/// Bytes of speech the mock sends per character of input.
const SPEECH_BYTES_PER_CHARACTER: usize = 64;

/// A 1×1 transparent PNG: the image every mock answer shows.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x00, 0x01, 0x00, 0x00,
    0x05, 0x00, 0x01, 0x0d, 0x0a, 0x2d, 0xb4, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae,
    0x42, 0x60, 0x82,
];

/// The mock's image, base64-encoded (as every image API answers with bytes).
pub(crate) fn png_base64() -> String {
    base64::engine::general_purpose::STANDARD.encode(PNG)
}

/// A valid 1×1 RGB PNG whose colour is the first three bytes of the FNV-1a hash of
/// `"{prompt}#{index}"`: the `index`th image the mock draws for `prompt` on the native image
/// APIs (Bedrock), so a test can check that the gateway passed each image through unchanged.
pub fn image_png(prompt: &str, index: u32) -> Vec<u8> {
    fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
        let len = u32::try_from(data.len()).unwrap_or(u32::MAX);
        out.extend_from_slice(&len.to_be_bytes());
        let start = out.len();
        out.extend_from_slice(kind);
        out.extend_from_slice(data);
        let crc = crc32fast::hash(&out[start..]);
        out.extend_from_slice(&crc.to_be_bytes());
    }
    let [r, g, b, ..] = fnv1a(format!("{prompt}#{index}").as_bytes()).to_be_bytes();
    // One scanline: filter byte 0, then the pixel; stored as one uncompressed deflate block.
    let raw = [0, r, g, b];
    let adler = {
        let (a, b) = raw.iter().fold((1u32, 0u32), |(a, b), x| {
            let a = (a + u32::from(*x)) % 65_521;
            (a, (b + a) % 65_521)
        });
        (b << 16) | a
    };
    let mut idat = vec![0x78, 0x01, 0x01, 0x04, 0x00, 0xfb, 0xff];
    idat.extend_from_slice(&raw);
    idat.extend_from_slice(&adler.to_be_bytes());
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    chunk(&mut out, b"IHDR", &[0, 0, 0, 1, 0, 0, 0, 1, 8, 2, 0, 0, 0]);
    chunk(&mut out, b"IDAT", &idat);
    chunk(&mut out, b"IEND", &[]);
    out
}

/// The fields of a media request the mock reads, from JSON or from form fields.
#[derive(Debug, Default, Deserialize)]
struct MediaRequest<'a> {
    #[serde(borrow, default)]
    model: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    prompt: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    input: Option<&'a RawValue>,
    #[serde(default)]
    n: Option<u32>,
    #[serde(borrow, default)]
    response_format: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    stream_format: Option<Cow<'a, str>>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(borrow, default)]
    query: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    documents: Option<Vec<Document<'a>>>,
    #[serde(default)]
    top_n: Option<usize>,
    #[serde(default)]
    return_documents: Option<bool>,
    /// Text Embeddings Inference's rerank: the documents.
    #[serde(borrow, default)]
    texts: Option<Vec<Cow<'a, str>>>,
    /// Text Embeddings Inference's rerank: return each text with its score.
    #[serde(default)]
    return_text: Option<bool>,
    /// OCR's document (`{"type": "document_url" | "image_url", ...}`).
    #[serde(borrow, default)]
    document: Option<&'a RawValue>,
    /// OCR's page selection.
    #[serde(default)]
    pages: Option<Vec<u32>>,
    /// The uploaded file: its size and hash (form bodies only).
    #[serde(skip)]
    file: Option<(usize, u64)>,
}

/// A rerank document: a string, or an object with `text`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Document<'a> {
    Text(#[serde(borrow)] Cow<'a, str>),
    Object {
        #[serde(borrow)]
        text: Cow<'a, str>,
    },
}

impl Document<'_> {
    fn text(&self) -> &str {
        match self {
            Self::Text(t) | Self::Object { text: t } => t,
        }
    }
}

/// Answer a media, moderation or rerank request.
pub(crate) async fn respond(
    endpoint: Endpoint,
    headers: &HeaderMap,
    body: &Bytes,
    s: &MockSettings,
) -> Response<MockBody> {
    let req = match read(endpoint, headers, body) {
        Ok(r) => r,
        Err(message) => return bad_request(Dialect::OpenAi, &message, None, "invalid_request"),
    };
    if let Some(fault) = before_answer(s, |status, retry| {
        injected_error(Dialect::OpenAi, status, retry)
    })
    .await
    {
        return fault;
    }
    if let (Endpoint::Rerank, Some(texts)) = (endpoint, &req.texts) {
        // Text Embeddings Inference serves one model and takes none in the body.
        return tei_rerank(&req, texts);
    }
    let Some(model) = req.model.as_deref().filter(|m| !m.is_empty()) else {
        return bad_request(
            Dialect::OpenAi,
            "you must provide a model parameter",
            Some("model"),
            "missing_required_parameter",
        );
    };
    match endpoint {
        Endpoint::ImageGenerations | Endpoint::ImageEdits | Endpoint::ImageVariations => {
            images(endpoint, model, &req, s)
        }
        Endpoint::AudioTranscriptions | Endpoint::AudioTranslations => {
            transcript(endpoint, model, &req, s)
        }
        Endpoint::AudioSpeech => speech(&req, s),
        Endpoint::Moderations => moderations(model, &req),
        Endpoint::Rerank => rerank(model, &req),
        Endpoint::Ocr => ocr(model, &req),
        Endpoint::ChatCompletions
        | Endpoint::Completions
        | Endpoint::Embeddings
        | Endpoint::Responses
        | Endpoint::Messages
        | Endpoint::CountTokens
        | Endpoint::GenerateContent
        | Endpoint::Converse => bad_request(
            Dialect::OpenAi,
            "not a media endpoint",
            None,
            "invalid_request",
        ),
    }
}

/// The request's fields: parsed JSON, or the form's text fields and its file.
fn read<'a>(
    endpoint: Endpoint,
    headers: &'a HeaderMap,
    body: &'a [u8],
) -> Result<MediaRequest<'a>, String> {
    match endpoint.body_format() {
        BodyFormat::Json => serde_json::from_slice(body)
            .map_err(|e| format!("We could not parse the JSON body of your request. ({e})")),
        BodyFormat::Multipart => {
            let boundary = headers
                .get(CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .and_then(multipart::boundary)
                .ok_or("expected a multipart/form-data body")?;
            let parts = multipart::parts(body, boundary).map_err(|e| e.to_string())?;
            let mut req = MediaRequest::default();
            for p in &parts {
                if p.filename.is_some() {
                    let bytes = &body[p.value.clone()];
                    req.file.get_or_insert((bytes.len(), fnv1a(bytes)));
                    continue;
                }
                let text = multipart::text(body, p).map(Cow::Borrowed);
                match p.name {
                    "model" => req.model = text,
                    "prompt" => req.prompt = text,
                    "response_format" => req.response_format = text,
                    "n" => req.n = text.and_then(|t| t.trim().parse().ok()),
                    "stream" => req.stream = text.map(|t| t.trim() == "true"),
                    _ => {}
                }
            }
            if req.file.is_none() {
                return Err("a file part is required".into());
            }
            Ok(req)
        }
    }
}

/// FNV-1a, 64 bits: a hash a test can recompute in a line.
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn images(
    endpoint: Endpoint,
    model: &str,
    req: &MediaRequest<'_>,
    s: &MockSettings,
) -> Response<MockBody> {
    let n = req.n.unwrap_or(1).clamp(1, 10);
    let token_priced = model.starts_with("gpt-image");
    let b64 = token_priced || req.response_format.as_deref() == Some("b64_json");
    let encoded = png_base64();
    let (serial, created) = stamp();
    let input_tokens = req.prompt.as_deref().map_or(1, |p| p.len().div_ceil(4)) as u64;
    let usage = j!({
        "input_tokens": input_tokens,
        "output_tokens": 272 * u64::from(n),
        "total_tokens": input_tokens + 272 * u64::from(n),
        "input_tokens_details": {"text_tokens": input_tokens, "image_tokens": 0},
    });
    if req.stream == Some(true) {
        let kind = match endpoint {
            Endpoint::ImageEdits => "image_edit",
            _ => "image_generation",
        };
        let mut frames = Vec::new();
        for i in 0..s.chunks.min(3) {
            let ev = j!({"type": format!("{kind}.partial_image"), "b64_json": encoded,
                "partial_image_index": i, "created_at": created});
            frames.push(Bytes::from(format!(
                "event: {kind}.partial_image\ndata: {ev}\n\n"
            )));
        }
        let done = j!({"type": format!("{kind}.completed"), "b64_json": encoded,
            "created_at": created, "usage": usage});
        frames.push(Bytes::from(format!(
            "event: {kind}.completed\ndata: {done}\n\n"
        )));
        return stream(frames, s, "text/event-stream; charset=utf-8");
    }
    let data: Vec<Value> = (0..n)
        .map(|i| {
            if b64 {
                j!({"b64_json": encoded})
            } else {
                j!({"url": format!("http://127.0.0.1/mock/images/{serial}-{i}.png"),
                    "revised_prompt": req.prompt})
            }
        })
        .collect();
    let mut answer = j!({"created": created, "data": data});
    if token_priced {
        answer["usage"] = usage;
    }
    json(StatusCode::OK, Bytes::from(answer.to_string()))
}

fn transcript(
    endpoint: Endpoint,
    model: &str,
    req: &MediaRequest<'_>,
    s: &MockSettings,
) -> Response<MockBody> {
    let (size, hash) = req.file.unwrap_or_default();
    let seconds = (size as u64).div_ceil(AUDIO_BYTES_PER_SECOND).max(1);
    let words = s
        .response
        .clone()
        .unwrap_or_else(|| filler(s.response_tokens));
    let text = format!("{words} [{size} bytes fnv1a {hash:016x}]");
    // The GPT-4o transcribers bill tokens; Whisper bills seconds.
    let usage = if model.starts_with("whisper") {
        j!({"type": "duration", "seconds": seconds})
    } else {
        let out = text.split_whitespace().count() as u64;
        j!({"type": "tokens", "input_tokens": seconds * 10, "output_tokens": out,
            "total_tokens": seconds * 10 + out,
            "input_token_details": {"audio_tokens": seconds * 10, "text_tokens": 0}})
    };
    if req.stream == Some(true) && endpoint == Endpoint::AudioTranscriptions {
        let mut frames: Vec<Bytes> = text
            .split_inclusive(' ')
            .map(|w| {
                let ev = j!({"type": "transcript.text.delta", "delta": w});
                Bytes::from(format!("data: {ev}\n\n"))
            })
            .collect();
        let done = j!({"type": "transcript.text.done", "text": text, "usage": usage});
        frames.push(Bytes::from(format!("data: {done}\n\n")));
        return stream(frames, s, "text/event-stream; charset=utf-8");
    }
    let task = match endpoint {
        Endpoint::AudioTranslations => "translate",
        _ => "transcribe",
    };
    let cue = |sep: char| {
        let end = format!("00:00:{:02}{sep}000", seconds.min(59));
        format!("00:00:00{sep}000 --> {end}")
    };
    let (content_type, body) = match req.response_format.as_deref().unwrap_or("json") {
        "text" => ("text/plain; charset=utf-8", format!("{text}\n")),
        "srt" => (
            "text/plain; charset=utf-8",
            format!("1\n{}\n{text}\n\n", cue(',')),
        ),
        "vtt" => (
            "text/vtt; charset=utf-8",
            format!("WEBVTT\n\n{}\n{text}\n\n", cue('.')),
        ),
        "verbose_json" => (
            "application/json",
            j!({"task": task, "language": "english", "duration": seconds as f64, "text": text,
                "segments": [{"id": 0, "seek": 0, "start": 0.0, "end": seconds as f64,
                    "text": text, "tokens": [], "temperature": 0.0, "avg_logprob": -0.2,
                    "compression_ratio": 1.0, "no_speech_prob": 0.0}],
                "usage": usage})
            .to_string(),
        ),
        _ => (
            "application/json",
            j!({"text": text, "usage": usage}).to_string(),
        ),
    };
    let mut resp = json(StatusCode::OK, Bytes::from(body));
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}

fn speech(req: &MediaRequest<'_>, s: &MockSettings) -> Response<MockBody> {
    let input: Cow<'_, str> = req
        .input
        .and_then(|r| serde_json::from_str(r.get()).ok())
        .unwrap_or_default();
    let characters = input.chars().count().max(1);
    let format = req.response_format.as_deref().unwrap_or("mp3");
    let audio: Vec<u8> = (0..characters * SPEECH_BYTES_PER_CHARACTER)
        .map(|i| (i % 251) as u8)
        .collect();
    let chunks = (s.chunks as usize).max(1);
    let size = audio.len().div_ceil(chunks);
    if req.stream_format.as_deref() == Some("sse") {
        let b64 = base64::engine::general_purpose::STANDARD;
        let mut frames: Vec<Bytes> = audio
            .chunks(size)
            .map(|c| {
                let ev = j!({"type": "speech.audio.delta", "audio": b64.encode(c)});
                Bytes::from(format!("data: {ev}\n\n"))
            })
            .collect();
        let tokens = characters.div_ceil(4);
        let done = j!({"type": "speech.audio.done", "usage": {"input_tokens": tokens,
            "output_tokens": audio.len() / 100, "total_tokens": tokens + audio.len() / 100}});
        frames.push(Bytes::from(format!("data: {done}\n\n")));
        return stream(frames, s, "text/event-stream; charset=utf-8");
    }
    let content_type = match format {
        "wav" => "audio/wav",
        "opus" => "audio/ogg",
        "aac" => "audio/aac",
        "flac" => "audio/flac",
        "pcm" => "audio/pcm",
        _ => "audio/mpeg",
    };
    let frames = audio.chunks(size).map(Bytes::copy_from_slice).collect();
    stream(frames, s, content_type)
}

fn moderations(model: &str, req: &MediaRequest<'_>) -> Response<MockBody> {
    let inputs: Vec<String> = match req.input.map(|r| serde_json::from_str::<Value>(r.get())) {
        Some(Ok(Value::String(t))) => vec![t],
        Some(Ok(Value::Array(items))) => items
            .into_iter()
            .map(|v| match v {
                Value::String(t) => t,
                other => other["text"].as_str().unwrap_or_default().to_owned(),
            })
            .collect(),
        _ => {
            return bad_request(
                Dialect::OpenAi,
                "input must be a string or a list",
                Some("input"),
                "invalid_value",
            )
        }
    };
    let results: Vec<Value> = inputs
        .iter()
        .map(|t| {
            // Deterministic: the word "violent" is flagged, nothing else is.
            let violent = t.to_lowercase().contains("violent");
            let score = if violent { 0.97 } else { 0.0001 };
            j!({"flagged": violent,
                "categories": {"violence": violent, "harassment": false, "hate": false,
                    "self-harm": false, "sexual": false},
                "category_scores": {"violence": score, "harassment": 0.0001, "hate": 0.0001,
                    "self-harm": 0.0001, "sexual": 0.0001}})
        })
        .collect();
    let (serial, _) = stamp();
    let answer = j!({"id": format!("modr-mock{serial}"), "model": model, "results": results});
    json(StatusCode::OK, Bytes::from(answer.to_string()))
}

/// Each text's score against `query` (the share of query words it contains, ties by
/// position), best first.
fn scores<'t>(query: &str, texts: impl Iterator<Item = &'t str>) -> Vec<(usize, f64)> {
    let terms: Vec<String> = query.split_whitespace().map(str::to_lowercase).collect();
    let mut scored: Vec<(usize, f64)> = texts
        .enumerate()
        .map(|(i, text)| {
            let text = text.to_lowercase();
            let hits = terms.iter().filter(|t| text.contains(t.as_str())).count();
            let score = (hits as f64 + 1.0) / (terms.len() as f64 + 2.0) - i as f64 * 1e-6;
            (i, score)
        })
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1));
    scored
}

/// Mistral's OCR answer: a page of markdown per page read (the pages asked for; else two for a
/// document, one for an image), `usage_info.pages_processed` for the bill.
fn ocr(model: &str, req: &MediaRequest<'_>) -> Response<MockBody> {
    let doc: Value = match req.document.map(|d| serde_json::from_str(d.get())) {
        Some(Ok(v @ Value::Object(_))) => v,
        _ => {
            return bad_request(
                Dialect::OpenAi,
                "document must be a document_url or image_url chunk",
                Some("document"),
                "invalid_value",
            )
        }
    };
    let (kind, source) = match doc["type"].as_str() {
        Some("document_url") => ("document_url", doc["document_url"].as_str()),
        Some("image_url") => (
            "image_url",
            doc["image_url"]
                .as_str()
                .or(doc.pointer("/image_url/url").and_then(Value::as_str)),
        ),
        _ => ("", None),
    };
    let Some(source) = source.filter(|s| !s.is_empty()) else {
        return bad_request(
            Dialect::OpenAi,
            "document must be a document_url or image_url chunk",
            Some("document"),
            "invalid_value",
        );
    };
    let numbers: Vec<u32> = match &req.pages {
        Some(p) if !p.is_empty() => p.clone(),
        _ if kind == "image_url" => vec![0],
        _ => vec![0, 1],
    };
    let tag = fnv1a(source.as_bytes());
    let pages: Vec<Value> = numbers
        .iter()
        .map(|i| {
            j!({"index": i, "markdown": format!("# Page {}\n\nmock text {tag:016x}", i + 1),
                "images": [], "dimensions": {"dpi": 200, "height": 2200, "width": 1700}})
        })
        .collect();
    let answer = j!({"pages": pages, "model": model, "document_annotation": null,
        "usage_info": {"pages_processed": numbers.len(), "doc_size_bytes": null}});
    json(StatusCode::OK, Bytes::from(answer.to_string()))
}

fn rerank(model: &str, req: &MediaRequest<'_>) -> Response<MockBody> {
    let (Some(query), Some(docs)) = (req.query.as_deref(), req.documents.as_ref()) else {
        return bad_request(
            Dialect::OpenAi,
            "query and documents are required",
            Some("documents"),
            "missing_required_parameter",
        );
    };
    let mut scored = scores(query, docs.iter().map(Document::text));
    scored.truncate(req.top_n.unwrap_or(docs.len()));
    let results: Vec<Value> = scored
        .into_iter()
        .map(|(i, score)| {
            let mut r = j!({"index": i, "relevance_score": score});
            if req.return_documents == Some(true) {
                r["document"] = j!({"text": docs[i].text()});
            }
            r
        })
        .collect();
    let (serial, _) = stamp();
    let answer = j!({"id": format!("rerank-mock{serial}"), "model": model, "results": results,
        "meta": {"api_version": {"version": "2"}, "billed_units": {"search_units": 1}}});
    json(StatusCode::OK, Bytes::from(answer.to_string()))
}

/// Text Embeddings Inference's `/rerank`: a bare list of `{index, score, text?}`, best first,
/// every text scored (TEI has no `top_n`); its errors are `{"error", "error_type"}`.
fn tei_rerank(req: &MediaRequest<'_>, texts: &[Cow<'_, str>]) -> Response<MockBody> {
    let tei_error = |message: &str| {
        json(
            StatusCode::UNPROCESSABLE_ENTITY,
            Bytes::from(j!({"error": message, "error_type": "Validation"}).to_string()),
        )
    };
    let Some(query) = req.query.as_deref() else {
        return tei_error("missing field `query`");
    };
    if texts.is_empty() {
        return tei_error("`texts` cannot be empty");
    }
    let results: Vec<Value> = scores(query, texts.iter().map(|t| t.as_ref()))
        .into_iter()
        .map(|(i, score)| {
            let mut r = j!({"index": i, "score": score});
            if req.return_text == Some(true) {
                r["text"] = j!(texts[i]);
            }
            r
        })
        .collect();
    json(
        StatusCode::OK,
        Bytes::from(Value::Array(results).to_string()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[test]
    fn drawn_images_are_valid_pngs_coloured_by_the_prompt() {
        let png = image_png("a fox", 0);
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        // Every chunk's CRC covers its type and data.
        let mut at = 8;
        let mut kinds = Vec::new();
        while at < png.len() {
            let len = u32::from_be_bytes(png[at..at + 4].try_into().unwrap()) as usize;
            let body = &png[at + 4..at + 8 + len];
            let crc = u32::from_be_bytes(png[at + 8 + len..at + 12 + len].try_into().unwrap());
            assert_eq!(crc32fast::hash(body), crc);
            kinds.push(String::from_utf8(body[..4].to_vec()).unwrap());
            at += 12 + len;
        }
        assert_eq!(kinds, ["IHDR", "IDAT", "IEND"]);
        let [r, g, b, ..] = fnv1a(b"a fox#0").to_be_bytes();
        assert!(png.windows(4).any(|w| w == [0, r, g, b]));
        assert_eq!(image_png("a fox", 0), png);
        assert_ne!(image_png("a fox", 1), png);
        assert_ne!(image_png("a cat", 0), png);
    }

    async fn call(endpoint: Endpoint, ct: &str, body: &'static [u8]) -> (StatusCode, Bytes) {
        let mut h = HeaderMap::new();
        h.insert(CONTENT_TYPE, HeaderValue::from_str(ct).unwrap());
        let resp = respond(
            endpoint,
            &h,
            &Bytes::from_static(body),
            &MockSettings::default(),
        )
        .await;
        let status = resp.status();
        (status, resp.into_body().collect().await.unwrap().to_bytes())
    }

    #[tokio::test]
    async fn answers_in_openai_and_cohere_shapes() {
        let (st, b) = call(
            Endpoint::ImageGenerations,
            "application/json",
            br#"{"model":"dall-e-3","prompt":"a cat","n":2,"response_format":"b64_json"}"#,
        )
        .await;
        assert_eq!(st, StatusCode::OK);
        let v: Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(v["data"].as_array().unwrap().len(), 2);
        assert!(v["data"][0]["b64_json"].is_string());

        let form = b"--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper-1\r\n\
--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\n\r\nabc\r\n\
--b\r\nContent-Disposition: form-data; name=\"response_format\"\r\n\r\nverbose_json\r\n--b--\r\n";
        let (st, b) = call(
            Endpoint::AudioTranscriptions,
            "multipart/form-data; boundary=b",
            form,
        )
        .await;
        assert_eq!(st, StatusCode::OK);
        let v: Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(v["duration"], 1.0);
        let tail = format!("[3 bytes fnv1a {:016x}]", fnv1a(b"abc"));
        assert!(v["text"].as_str().unwrap().ends_with(&tail), "{v}");

        let (_, b) = call(
            Endpoint::Rerank,
            "application/json",
            br#"{"model":"rerank-v3.5","query":"red fox","documents":["blue sky","a red fox"],"top_n":1}"#,
        )
        .await;
        let v: Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(v["results"][0]["index"], 1);
        assert_eq!(v["meta"]["billed_units"]["search_units"], 1);
        // Text Embeddings Inference's shape: no model, a bare list, every text, best first.
        let (status, b) = call(
            Endpoint::Rerank,
            "application/json",
            br#"{"query":"red fox","texts":["blue sky","a red fox"],"raw_scores":false,"return_text":true}"#,
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        let v: Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(
            (v[0]["index"].as_u64(), v[0]["text"].as_str()),
            (Some(1), Some("a red fox"))
        );
        assert_eq!(v.as_array().unwrap().len(), 2);
        assert!(v[0]["score"].as_f64() > v[1]["score"].as_f64());
        let (status, b) = call(
            Endpoint::Rerank,
            "application/json",
            br#"{"query":"q","texts":[]}"#,
        )
        .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
        assert!(String::from_utf8_lossy(&b).contains("error_type"));

        let (_, b) = call(
            Endpoint::Moderations,
            "application/json",
            br#"{"model":"omni-moderation-latest","input":["hello","a violent act"]}"#,
        )
        .await;
        let v: Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(v["results"][0]["flagged"], false);
        assert_eq!(v["results"][1]["flagged"], true);

        let (st, b) = call(
            Endpoint::AudioSpeech,
            "application/json",
            br#"{"model":"tts-1","input":"hi","voice":"alloy"}"#,
        )
        .await;
        assert_eq!(st, StatusCode::OK);
        assert_eq!(b.len(), 2 * SPEECH_BYTES_PER_CHARACTER);

        let (st, _) = call(
            Endpoint::AudioTranscriptions,
            "multipart/form-data; boundary=b",
            b"--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper-1\r\n--b--",
        )
        .await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "no file part");
    }
}
