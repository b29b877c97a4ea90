//! The fuzz targets over this crate's parsers (fuzz/README.md): each takes arbitrary bytes,
//! must not panic, and checks what the parser promises — the splice leaves valid JSON with the
//! new model, a form or stream reads the same however it is split, the tap forwards what it
//! is given. `fuzz/fuzz_targets/*.rs` call them under libFuzzer; the tests below replay the
//! checked-in corpus through them on stable.

use bytes::Bytes;
use serde_json::{Map, Value};

use sluice_core::endpoint::Dialect;
use sluice_core::fuzz::frames;

use crate::envelope::{splice, Envelope};
use crate::eventstream::{self, Decoder, Message};
use crate::multipart::{self, Progress, Scanner};
use crate::sse::{events, SseTap};
use crate::stream::{data_of, StreamRead, Translator};

/// Members the envelope removes before a body goes upstream (`cache` unless it is `null`).
const ROUTING_MEMBERS: &[&str] = &["fallbacks", "num_retries", "timeout", "guardrails"];

/// Model names spliced in: a plain one, and one that needs escapes in JSON.
const NEW_MODELS: &[&str] = &["gpt-4o-mini", "a\"b\\c/é\u{1}"];

/// Request envelope and splice: a body the envelope accepts, spliced with a new model (and
/// usage forced on), is valid JSON whose `model` is the new one, whose routing members are
/// gone, and whose every other member is as the client sent it.
pub fn envelope_splice(data: &[u8]) {
    let body = Bytes::copy_from_slice(data);
    let Ok(env) = Envelope::parse(&body) else {
        return;
    };
    let model: String = serde_json::from_slice(&body[env.model_range.clone()])
        .expect("model_range holds the model as a JSON string");
    assert_eq!(model, env.model);
    let original: Option<Map<String, Value>> = serde_json::from_slice(&body).ok();
    for new_model in NEW_MODELS {
        let new = Bytes::from(serde_json::to_vec(new_model).expect("a string encodes"));
        for force_usage in [false, true] {
            let Ok(segments) = splice(&body, &env, Some(&new), force_usage, None) else {
                continue;
            };
            let out: Vec<u8> = segments.concat();
            let spliced: Map<String, Value> = match serde_json::from_slice(&out) {
                Ok(m) => m,
                // Numbers serde_json's `Value` cannot hold (1e999) are still valid JSON.
                Err(_) if original.is_none() => {
                    serde_json::from_slice::<serde::de::IgnoredAny>(&out)
                        .expect("the spliced body is valid JSON");
                    continue;
                }
                Err(e) => panic!("the spliced body is not a JSON object: {e}"),
            };
            assert_eq!(spliced.get("model"), Some(&Value::from(*new_model)));
            if force_usage {
                assert_eq!(
                    spliced
                        .get("stream_options")
                        .and_then(|o| o.get("include_usage")),
                    Some(&Value::Bool(true)),
                    "usage forced on"
                );
            }
            let Some(original) = &original else { continue };
            same_members(original, &spliced, force_usage);
        }
    }
}

/// Every member of the client's body but those the splice changes is in the spliced body,
/// unchanged, and nothing else is.
fn same_members(original: &Map<String, Value>, spliced: &Map<String, Value>, force_usage: bool) {
    let changed = |k: &str| k == "model" || (force_usage && k == "stream_options");
    for (k, v) in original {
        let removed = ROUTING_MEMBERS.contains(&k.as_str()) || (k == "cache" && !v.is_null());
        if changed(k) {
            continue;
        }
        if removed {
            assert!(!spliced.contains_key(k), "`{k}` is removed");
        } else {
            assert_eq!(spliced.get(k), Some(v), "`{k}` is kept as it was");
        }
    }
    for k in spliced.keys() {
        assert!(
            original.contains_key(k) || changed(k),
            "`{k}` was not in the body"
        );
    }
}

/// The multipart reader. The first line of the input is the boundary, the rest the body. A
/// body read whole and read as it arrives (in frames) gives the same parts; parts lie inside
/// the body, in order; the fields before a file read from the form's head are those of the
/// whole form; the upload's envelope names the form's `model` field.
pub fn multipart(data: &[u8]) {
    let Some((&seed, rest)) = data.split_first() else {
        return;
    };
    let Some(nl) = rest.iter().position(|b| *b == b'\n') else {
        return;
    };
    let Ok(boundary) = std::str::from_utf8(&rest[..nl]) else {
        return;
    };
    if boundary.is_empty() {
        return;
    }
    let body = &rest[nl + 1..];
    let whole = multipart::parts(body, boundary);
    // Read as it arrives: a longer prefix each time.
    let mut scanner = Scanner::new(boundary);
    let mut progress = Ok(Progress::NeedMore);
    for f in frames(seed, body.len()) {
        progress = scanner.advance(&body[..f.end]);
        if progress.is_err() {
            break;
        }
    }
    match (&whole, &progress) {
        (Ok(parts), Ok(Progress::Done)) => assert_eq!(parts, &scanner.parts(body)),
        (Ok(_), other) => panic!("read whole: a form; read in frames: {other:?}"),
        (Err(_), Ok(Progress::Done)) => panic!("read in frames: a form; read whole: an error"),
        (Err(_), _) => {}
    }
    let Ok(parts) = whole else { return };
    let mut end = 0;
    for p in &parts {
        assert!(p.value.start >= end && p.value.end >= p.value.start && p.value.end <= body.len());
        assert!(!p.name.is_empty());
        end = p.value.end;
    }
    // The head of the form: its complete parts are the first parts of the whole form.
    let cut = body.len() / 2;
    let head = multipart::head(&body[..cut], boundary).expect("the head of a form reads");
    assert!(head.len() <= parts.len());
    assert_eq!(head[..], parts[..head.len()]);
    if let Ok(env) = Envelope::parse_multipart(body, &parts) {
        let field = multipart::field(&parts, "model").expect("the envelope read a model");
        assert_eq!(env.model_range, field.value);
        assert_eq!(Some(&*env.model), multipart::text(body, field));
    }
}

/// The SSE tap on a pass-through stream. Byte 0 picks the mode (bit 0: strip the usage
/// chunk) and the framing; the rest is the upstream's stream. Forwarding, the client gets
/// exactly the upstream's bytes; either way, usage, the end marker and the output do not
/// depend on how the stream was split.
pub fn sse_tap(data: &[u8]) {
    let Some((&mode, stream)) = data.split_first() else {
        return;
    };
    let strip = mode & 1 == 1;
    let run = |seed: u8| {
        let mut tap = SseTap::new(strip);
        let mut out = Vec::new();
        for f in frames(seed, stream.len()) {
            let fed = tap.feed(Bytes::copy_from_slice(&stream[f]));
            out.extend_from_slice(&fed.expect("a fuzz input is far below MAX_EVENT"));
        }
        out.extend_from_slice(&tap.finish());
        (out, tap.usage(), tap.finished())
    };
    let whole = run(0);
    let split = run(mode >> 1 | 1);
    assert_eq!(whole, split, "the same stream, split differently");
    if !strip {
        assert_eq!(whole.0, stream, "forwarded untouched");
    } else {
        assert!(whole.0.len() <= stream.len(), "stripping only removes");
    }
}

/// A stream translator from `make`'s upstream format to `to`, over `stream` read whole and
/// in the frames `seed` picks: both give the same events (but for `created`, a clock
/// reading), and what the client gets is well-formed in its dialect — SSE events whose data
/// is JSON (Anthropic's named as their `type`), and nothing after OpenAI's `[DONE]`.
pub fn check_translator<R: StreamRead>(make: impl Fn() -> R, to: Dialect, stream: &[u8], seed: u8) {
    let run = |seed: u8| {
        let mut t = Translator::new(make(), to);
        let mut out = Vec::new();
        for f in frames(seed, stream.len()) {
            out.extend(t.feed(&stream[f]));
        }
        out.extend(t.finish());
        out
    };
    let whole = client_events(&run(0), to);
    let split = client_events(&run(seed | 1), to);
    assert_eq!(whole, split, "the same stream, split differently");
}

/// The client's stream as (event name, data) pairs, checked for form; `created` removed.
fn client_events(out: &[u8], to: Dialect) -> Vec<(Option<String>, Value)> {
    assert!(
        out.is_empty() || out.ends_with(b"\n\n"),
        "ends on an event boundary"
    );
    let mut seen = Vec::new();
    let mut done = false;
    for (s, e) in events(out) {
        let event = &out[s..e];
        if event.starts_with(b":") {
            continue; // a comment (ping)
        }
        assert!(!done, "nothing follows [DONE]");
        let name = event
            .strip_prefix(b"event: ")
            .and_then(|r| r.split(|b| *b == b'\n').next())
            .map(|n| String::from_utf8_lossy(n).into_owned());
        let data = data_of(event).expect("every event has data");
        if &*data == b"[DONE]" {
            assert_eq!(to, Dialect::OpenAi, "[DONE] is OpenAI's");
            done = true;
            continue;
        }
        let mut value: Value = serde_json::from_slice(&data).expect("event data is JSON");
        match to {
            Dialect::OpenAi => assert!(name.is_none(), "OpenAI's chunks are unnamed"),
            Dialect::Anthropic => assert_eq!(
                name.as_deref(),
                value.get("type").and_then(Value::as_str),
                "an Anthropic event is named as its type"
            ),
            Dialect::Gemini | Dialect::Converse => {}
        }
        if let Some(o) = value.as_object_mut() {
            o.remove("created");
        }
        seen.push((name, value));
    }
    seen
}

/// The stream translators of the client dialects' own formats (OpenAI's chunks, Anthropic's
/// events) into either dialect. Byte 0: bit 0 the upstream format, bit 1 the client's
/// dialect, the rest the framing; then the upstream's SSE stream.
pub fn stream_translate(data: &[u8]) {
    let Some((&mode, stream)) = data.split_first() else {
        return;
    };
    let to = client_dialect(mode);
    if mode & 1 == 0 {
        check_translator(crate::openai::ChunkReader::default, to, stream, mode >> 2);
    } else {
        check_translator(
            crate::anthropic::EventReader::default,
            to,
            stream,
            mode >> 2,
        );
    }
}

/// The client's dialect a stream target's mode byte names (bit 1).
pub fn client_dialect(mode: u8) -> Dialect {
    if mode & 2 == 0 {
        Dialect::OpenAi
    } else {
        Dialect::Anthropic
    }
}

/// An AWS event stream built from fuzz input, so that a target reaches past the checksums:
/// records of `[kind length][kind][payload length, 2 bytes][payload]`, each encoded as one
/// Bedrock event with valid checksums.
pub fn event_frames(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut rest = data;
    while let Some((&kind_len, r)) = rest.split_first() {
        let kind_len = usize::from(kind_len % 32).min(r.len());
        let (kind, r) = r.split_at(kind_len);
        let Some((len, r)) = r.split_first_chunk::<2>() else {
            break;
        };
        let len = usize::from(u16::from_be_bytes(*len)).min(r.len());
        let (payload, r) = r.split_at(len);
        out.extend(eventstream::event(&String::from_utf8_lossy(kind), payload));
        rest = r;
    }
    out
}

/// `data` as an event stream: built into valid frames ([`event_frames`]) when `build`, else
/// as it is.
pub fn event_stream(build: bool, data: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    if build {
        std::borrow::Cow::Owned(event_frames(data))
    } else {
        std::borrow::Cow::Borrowed(data)
    }
}

/// The AWS event-stream decoder. Byte 0: bit 0 whether the rest is raw bytes or records
/// built into valid frames ([`event_frames`]), the rest the framing. Read whole or in frames,
/// the same messages come out and the same error ends them; a message re-encoded reads back
/// as itself.
pub fn eventstream(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let stream = &*event_stream(mode & 1 == 1, rest);
    let run = |seed: u8| {
        let mut d = Decoder::default();
        let mut got: Vec<Message> = Vec::new();
        for f in frames(seed, stream.len()) {
            d.push(&stream[f]);
            loop {
                match d.next_message() {
                    Ok(Some(m)) => got.push(m),
                    Ok(None) => break,
                    Err(e) => return (got, Some(e)),
                }
            }
        }
        (got, None)
    };
    let whole = run(0);
    assert_eq!(
        whole,
        run(mode >> 1 | 1),
        "the same stream, split differently"
    );
    if mode & 1 == 1 {
        assert_eq!(whole.1, None, "built frames are valid");
    }
    for m in &whole.0 {
        let headers: Vec<(&str, &str)> = [":event-type", ":content-type", ":message-type"]
            .iter()
            .filter_map(|n| m.header(n).map(|v| (*n, v)))
            .collect();
        let mut d = Decoder::default();
        d.push(&eventstream::encode(&headers, &m.payload));
        let back = d.next_message().expect("re-encoded").expect("complete");
        assert_eq!(back.payload, m.payload);
        for (n, v) in headers {
            assert_eq!(back.header(n), Some(v));
        }
    }
}

#[cfg(test)]
mod tests {
    use sluice_core::fuzz::replay;

    const HERE: &str = env!("CARGO_MANIFEST_DIR");

    #[test]
    fn envelope_splice_corpus() {
        replay(HERE, "envelope_splice", super::envelope_splice);
    }

    #[test]
    fn multipart_corpus() {
        replay(HERE, "multipart", super::multipart);
    }

    #[test]
    fn sse_tap_corpus() {
        replay(HERE, "sse_tap", super::sse_tap);
    }

    #[test]
    fn stream_translate_corpus() {
        replay(HERE, "stream_translate", super::stream_translate);
    }

    #[test]
    fn eventstream_corpus() {
        replay(HERE, "eventstream", super::eventstream);
    }
}
