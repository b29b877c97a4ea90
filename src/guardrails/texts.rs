//! Where the text is in each endpoint's request and answer: only these strings are checked,
//! masked and given back. Images, audio, tool definitions and every other field stay as they
//! are (and are not checked).
//!
//! A whole request or answer is read in place ([`locate_request`], [`locate_answer`]): typed,
//! borrowing structs find each text's string literal in the body without building a tree of
//! it, and [`splice`] writes back only the strings that changed, leaving every other byte as
//! the client or the provider sent it. Stream events, small and rewritten whole, are read
//! into a `Value` ([`delta`], [`repeated`]).

use std::borrow::Cow;
use std::ops::Range;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;
use sluice_core::endpoint::Endpoint;

/// A text found in a document: where its string literal is (quotes included) and what it says.
#[derive(Debug)]
pub(super) struct Located<'a> {
    span: Range<usize>,
    /// The string's value: borrowed from the document unless it had escapes.
    pub(super) text: Cow<'a, str>,
}

/// A request's texts, and the fields the guardrails step reads besides them (raw JSON).
#[derive(Debug, Default)]
pub(super) struct RequestTexts<'a> {
    pub(super) texts: Vec<Located<'a>>,
    /// `guardrails`: the guardrails the body names.
    pub(super) guardrails: Option<&'a str>,
    /// `metadata.guardrails`: the guardrails named there.
    pub(super) metadata_guardrails: Option<&'a str>,
    /// `tools`, shown to external services.
    pub(super) tools: Option<&'a str>,
}

/// `metadata`'s `guardrails`.
#[derive(Deserialize)]
struct WithGuardrails<'a> {
    #[serde(borrow, default)]
    guardrails: Option<&'a RawValue>,
}

/// An object's `content` (a message, a Responses output item).
#[derive(Deserialize)]
struct WithContent<'a> {
    #[serde(borrow, default)]
    content: Option<&'a RawValue>,
}

/// An object's `text` (a content part).
#[derive(Deserialize)]
struct WithText<'a> {
    #[serde(borrow, default)]
    text: Option<&'a RawValue>,
}

/// A Gemini content's `parts`, or a candidate's `content`.
#[derive(Deserialize)]
struct WithParts<'a> {
    #[serde(borrow, default)]
    parts: Option<&'a RawValue>,
    #[serde(borrow, default)]
    content: Option<&'a RawValue>,
}

/// A Converse answer's `output`: its `message`.
#[derive(Deserialize)]
struct WithMessage<'a> {
    #[serde(borrow, default)]
    message: Option<&'a RawValue>,
}

/// A chat or completions choice.
#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(borrow, default)]
    text: Option<&'a RawValue>,
    #[serde(borrow, default)]
    message: Option<&'a RawValue>,
}

/// Why a document's texts could not be read.
#[derive(Debug, thiserror::Error)]
pub(super) enum Unreadable {
    /// Not a JSON object.
    #[error("the body is not a JSON object")]
    NotAnObject,
    /// The object is cut short or broken, or not UTF-8.
    #[error("the body is not valid JSON")]
    NotJson,
    /// A member's value is not JSON.
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    /// A text's string was not where it was read from (never expected: serde borrows).
    #[error("a text was not read in place")]
    NotInPlace,
}

type Read = Result<(), Unreadable>;

/// Reads texts out of one document, recording where each is. Every value it is handed is a
/// slice of `doc` holding one JSON value.
struct Reader<'a> {
    doc: &'a [u8],
    out: Vec<Located<'a>>,
}

fn first(value: &str) -> u8 {
    value.as_bytes().first().copied().unwrap_or(b'n')
}

fn items(value: &str) -> Result<Vec<&RawValue>, serde_json::Error> {
    serde_json::from_str(value)
}

impl<'a> Reader<'a> {
    /// A string value: its place and text. Anything else is not text and is left alone.
    fn string(&mut self, lit: &'a str) -> Read {
        if first(lit) != b'"' || lit.len() < 2 {
            return Ok(());
        }
        // A slice of the document, so its address tells where it is.
        let start = (lit.as_ptr() as usize).wrapping_sub(self.doc.as_ptr() as usize);
        let span = start..start.wrapping_add(lit.len());
        if self.doc.get(span.clone()) != Some(lit.as_bytes()) {
            return Err(Unreadable::NotInPlace);
        }
        let inner = &lit[1..lit.len() - 1];
        let text = if memchr::memchr(b'\\', inner.as_bytes()).is_none() {
            Cow::Borrowed(inner)
        } else {
            Cow::Owned(serde_json::from_str::<String>(lit)?)
        };
        self.out.push(Located { span, text });
        Ok(())
    }

    /// A string, or each string of a list (completions' `prompt`, embeddings' `input`).
    fn strings(&mut self, value: &'a str) -> Read {
        match first(value) {
            b'"' => self.string(value),
            b'[' => items(value)?
                .into_iter()
                .try_for_each(|i| self.string(i.get())),
            _ => Ok(()),
        }
    }

    /// A `content`: a string, or each string and the `text` of each part of a list (a
    /// moderation's `input`, a rerank's `documents` mix the two).
    fn content(&mut self, value: &'a str) -> Read {
        match first(value) {
            b'"' => self.string(value),
            b'[' => {
                for part in items(value)? {
                    match first(part.get()) {
                        b'"' => self.string(part.get())?,
                        b'{' => {
                            let part = serde_json::from_str::<WithText<'a>>(part.get())?;
                            if let Some(t) = part.text {
                                self.string(t.get())?;
                            }
                        }
                        _ => {}
                    }
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// An object's `content`.
    fn content_of(&mut self, value: &'a str) -> Read {
        if first(value) != b'{' {
            return Ok(());
        }
        match serde_json::from_str::<WithContent<'a>>(value)?.content {
            Some(c) => self.content(c.get()),
            None => Ok(()),
        }
    }

    /// A Gemini content (`{"role", "parts": [{"text"}, ...]}`): each part's text.
    fn parts_of(&mut self, value: &'a str) -> Read {
        if first(value) != b'{' {
            return Ok(());
        }
        match serde_json::from_str::<WithParts<'a>>(value)?.parts {
            Some(p) => self.content(p.get()),
            None => Ok(()),
        }
    }

    /// A list of Gemini contents (`contents`).
    fn contents(&mut self, value: &'a str) -> Read {
        if first(value) != b'[' {
            return Ok(());
        }
        items(value)?
            .into_iter()
            .try_for_each(|c| self.parts_of(c.get()))
    }

    /// Gemini `candidates`: each candidate's content's parts.
    fn candidates(&mut self, value: &'a str) -> Read {
        if first(value) != b'[' {
            return Ok(());
        }
        for c in items(value)? {
            if first(c.get()) != b'{' {
                continue;
            }
            if let Some(content) = serde_json::from_str::<WithParts<'a>>(c.get())?.content {
                self.parts_of(content.get())?;
            }
        }
        Ok(())
    }

    /// A `messages` (or Responses `input`) list: each string item, each message's content.
    fn messages(&mut self, value: &'a str) -> Read {
        match first(value) {
            b'"' => self.string(value),
            b'[' => items(value)?
                .into_iter()
                .try_for_each(|m| match first(m.get()) {
                    b'"' => self.string(m.get()),
                    _ => self.content_of(m.get()),
                }),
            _ => Ok(()),
        }
    }
}

/// The top-level members of `doc`, named (a key written with escapes is decoded, as the
/// provider will), each value as text. Walked by `sluice_core::scan` rather than serde: the
/// members no guardrail reads are stepped over, not parsed.
fn members(doc: &[u8]) -> Result<Vec<(Cow<'_, str>, &str)>, Unreadable> {
    let mut scan = sluice_core::scan::members(doc).ok_or(Unreadable::NotAnObject)?;
    let mut out = Vec::new();
    for (key, range) in scan.by_ref() {
        let value = std::str::from_utf8(&doc[range]).map_err(|_| Unreadable::NotJson)?;
        let key = if memchr::memchr(b'\\', key).is_none() {
            Cow::Borrowed(std::str::from_utf8(key).map_err(|_| Unreadable::NotJson)?)
        } else {
            let quoted = [b"\"", key, b"\""].concat();
            Cow::Owned(serde_json::from_slice::<String>(&quoted)?)
        };
        out.push((key, value));
    }
    if scan.failed() {
        return Err(Unreadable::NotJson);
    }
    Ok(out)
}

/// The request's texts, read in place: chat `messages`, completions `prompt`, Responses `input`
/// and `instructions`, Anthropic `messages` and `system` (a token count's too), embeddings
/// `input`, an image's `prompt`, speech's `input` and `instructions`, a moderation's `input`, a
/// rerank's `query` and `documents`, Gemini's `contents[].parts[].text` and
/// `systemInstruction`, Converse's `messages[].content[].text` and `system`. A field given
/// twice is read twice.
pub(super) fn locate_request(
    endpoint: Endpoint,
    doc: &[u8],
) -> Result<RequestTexts<'_>, Unreadable> {
    let mut r = Reader {
        doc,
        out: Vec::new(),
    };
    let mut found = RequestTexts::default();
    for (key, value) in members(doc)? {
        match (endpoint, &*key) {
            (
                Endpoint::ChatCompletions | Endpoint::Messages | Endpoint::CountTokens,
                "messages",
            )
            | (Endpoint::Responses, "input")
            | (Endpoint::Converse, "messages") => r.messages(value)?,
            (Endpoint::GenerateContent, "contents") => r.contents(value)?,
            (Endpoint::GenerateContent, "systemInstruction" | "system_instruction") => {
                r.parts_of(value)?;
            }
            (Endpoint::Messages | Endpoint::CountTokens | Endpoint::Converse, "system")
            | (Endpoint::Responses, "instructions")
            | (Endpoint::Moderations, "input")
            | (Endpoint::Rerank, "documents") => {
                r.content(value)?;
            }
            (Endpoint::Completions, "prompt")
            | (Endpoint::Embeddings, "input")
            | (Endpoint::ImageGenerations, "prompt")
            | (Endpoint::AudioSpeech, "input" | "instructions")
            | (Endpoint::Rerank, "query") => {
                r.strings(value)?;
            }
            (_, "guardrails") => found.guardrails = Some(value),
            (_, "tools") => found.tools = Some(value),
            (_, "metadata") if first(value) == b'{' => {
                found.metadata_guardrails = serde_json::from_str::<WithGuardrails<'_>>(value)?
                    .guardrails
                    .map(RawValue::get);
            }
            _ => {}
        }
    }
    found.texts = r.out;
    Ok(found)
}

/// A whole answer's texts, read in place: chat `choices[].message.content`, completions
/// `choices[].text`, Anthropic `content[].text`, Responses `output[].content[].text`. An
/// answer has its texts in one member: the members after it (`usage`...) are not read.
pub(super) fn locate_answer(
    endpoint: Endpoint,
    doc: &[u8],
) -> Result<Vec<Located<'_>>, Unreadable> {
    let member: &[u8] = match endpoint {
        Endpoint::ChatCompletions | Endpoint::Completions => b"choices",
        Endpoint::Messages => b"content",
        Endpoint::Responses | Endpoint::Converse => b"output",
        Endpoint::GenerateContent => b"candidates",
        _ => return Ok(Vec::new()),
    };
    let mut scan = sluice_core::scan::members(doc).ok_or(Unreadable::NotAnObject)?;
    let Some(range) = scan.find_map(|(key, range)| (key == member).then_some(range)) else {
        return if scan.failed() {
            Err(Unreadable::NotJson)
        } else {
            Ok(Vec::new())
        };
    };
    let value = std::str::from_utf8(&doc[range]).map_err(|_| Unreadable::NotJson)?;
    let mut r = Reader {
        doc,
        out: Vec::new(),
    };
    match endpoint {
        Endpoint::Messages => r.content(value)?,
        Endpoint::GenerateContent => r.candidates(value)?,
        Endpoint::Converse => {
            if first(value) == b'{' {
                if let Some(m) = serde_json::from_str::<WithMessage<'_>>(value)?.message {
                    r.content_of(m.get())?;
                }
            }
        }
        _ if first(value) != b'[' => {}
        Endpoint::Responses => {
            for item in items(value)? {
                r.content_of(item.get())?;
            }
        }
        _ => {
            for c in items(value)? {
                if first(c.get()) != b'{' {
                    continue;
                }
                let c: Choice<'_> = serde_json::from_str(c.get())?;
                if let Some(t) = c.text {
                    r.strings(t.get())?;
                }
                if let Some(m) = c.message {
                    r.content_of(m.get())?;
                }
            }
        }
    }
    Ok(r.out)
}

/// The located texts as strings the guardrails can rewrite (`splice` writes back the ones
/// they changed).
pub(super) fn owned(located: &[Located<'_>]) -> Vec<String> {
    located.iter().map(|l| l.text.to_string()).collect()
}

/// `doc` with each located text that `now` changed written in its place (as a JSON string),
/// every other byte as it was; `None` when nothing changed. `now[i]` is `located[i]`'s text.
pub(super) fn splice(doc: &[u8], located: &[Located<'_>], now: &[String]) -> Option<Vec<u8>> {
    let mut changed: Vec<(&Range<usize>, &str)> = located
        .iter()
        .zip(now)
        .filter(|(l, n)| l.text != n.as_str())
        .map(|(l, n)| (&l.span, n.as_str()))
        .collect();
    if changed.is_empty() {
        return None;
    }
    changed.sort_unstable_by_key(|(span, _)| span.start);
    let mut out = Vec::with_capacity(doc.len() + 64);
    let mut at = 0;
    for (span, text) in changed {
        out.extend_from_slice(&doc[at..span.start]);
        // Folded without an early exit, so that it compiles to vector compares.
        let plain = !text.bytes().fold(false, |esc, b| {
            esc | (b < 0x20) | (b == b'"') | (b == b'\\')
        });
        if plain {
            // Nothing to escape (the usual case: a text that had no escapes, with
            // placeholders in it): written as it is.
            out.push(b'"');
            out.extend_from_slice(text.as_bytes());
            out.push(b'"');
        } else {
            // Writing a string to a Vec cannot fail.
            let _ = serde_json::to_writer(&mut out, text);
        }
        at = span.end;
    }
    out.extend_from_slice(&doc[at..]);
    Some(out)
}

/// The text of a message's `content`: a string, or the `text` of each part of a list
/// (OpenAI's `{"type": "text"}` / `input_text`, Anthropic's `{"type": "text"}`).
fn content<'a>(v: &'a mut Value, out: &mut Vec<&'a mut String>) {
    match v {
        Value::String(s) => out.push(s),
        Value::Array(parts) => {
            for part in parts {
                if let Some(Value::String(t)) = part.get_mut("text") {
                    out.push(t);
                }
            }
        }
        _ => {}
    }
}

/// A string or a list of strings (completions' `prompt`, embeddings' `input`).
fn strings<'a>(v: &'a mut Value, out: &mut Vec<&'a mut String>) {
    match v {
        Value::String(s) => out.push(s),
        Value::Array(items) => {
            for item in items {
                if let Value::String(s) = item {
                    out.push(s);
                }
            }
        }
        _ => {}
    }
}

/// Whether an endpoint carries text guardrails can check: every JSON one. Multipart uploads
/// (image edits and variations, transcriptions, translations) are not read: their text is a
/// short form field beside an image or a recording no text guardrail could judge.
pub(super) fn checked(endpoint: Endpoint) -> bool {
    matches!(
        endpoint,
        Endpoint::ChatCompletions
            | Endpoint::Completions
            | Endpoint::Responses
            | Endpoint::Messages
            | Endpoint::CountTokens
            | Endpoint::Embeddings
            | Endpoint::ImageGenerations
            | Endpoint::AudioSpeech
            | Endpoint::Moderations
            | Endpoint::Rerank
            | Endpoint::GenerateContent
            | Endpoint::Converse
    )
}

/// A whole answer's text: chat `choices[].message.content`, completions `choices[].text`,
/// Anthropic `content[].text`, Responses `output[].content[].text`.
pub(super) fn answer<'a>(endpoint: Endpoint, body: &'a mut Value, out: &mut Vec<&'a mut String>) {
    match endpoint {
        Endpoint::ChatCompletions | Endpoint::Completions => {
            let Some(Value::Array(choices)) = body.get_mut("choices") else {
                return;
            };
            for c in choices {
                let Value::Object(c) = c else { continue };
                for (k, v) in c.iter_mut() {
                    match k.as_str() {
                        "text" => strings(v, out),
                        "message" => {
                            if let Some(m) = v.get_mut("content") {
                                content(m, out);
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        Endpoint::Messages => {
            if let Some(c) = body.get_mut("content") {
                content(c, out);
            }
        }
        Endpoint::Responses => {
            if let Some(Value::Array(items)) = body.get_mut("output") {
                for item in items {
                    if let Some(c) = item.get_mut("content") {
                        content(c, out);
                    }
                }
            }
        }
        Endpoint::GenerateContent => candidates(body, out),
        Endpoint::Converse => {
            if let Some(c) = body.pointer_mut("/output/message/content") {
                content(c, out);
            }
        }
        _ => {}
    }
}

/// A Gemini answer's (or stream chunk's) `candidates[].content.parts[].text`.
fn candidates<'a>(body: &'a mut Value, out: &mut Vec<&'a mut String>) {
    if let Some(Value::Array(list)) = body.get_mut("candidates") {
        for c in list {
            if let Some(parts) = c.pointer_mut("/content/parts") {
                content(parts, out);
            }
        }
    }
}

/// The text a streamed event adds, per endpoint: chat `choices[].delta.content`, completions
/// `choices[].text`, Anthropic `delta.text`, Responses `response.output_text.delta`'s `delta`.
pub(super) fn delta<'a>(endpoint: Endpoint, event: &'a mut Value, out: &mut Vec<&'a mut String>) {
    match endpoint {
        Endpoint::ChatCompletions | Endpoint::Completions => {
            let Some(Value::Array(choices)) = event.get_mut("choices") else {
                return;
            };
            for c in choices {
                let Value::Object(c) = c else { continue };
                for (k, v) in c.iter_mut() {
                    match (k.as_str(), v) {
                        ("text", Value::String(t)) => out.push(t),
                        ("delta", Value::Object(d)) => {
                            if let Some(Value::String(t)) = d.get_mut("content") {
                                out.push(t);
                            }
                        }
                        _ => {}
                    }
                }
            }
        }
        Endpoint::Messages => {
            if let Some(Value::String(t)) = event.get_mut("delta").and_then(|d| d.get_mut("text")) {
                out.push(t);
            }
        }
        Endpoint::Responses => {
            let Value::Object(o) = event else { return };
            if o.get("type").and_then(Value::as_str) != Some("response.output_text.delta") {
                return;
            }
            if let Some(Value::String(t)) = o.get_mut("delta") {
                out.push(t);
            }
        }
        // Each Gemini chunk is a whole `GenerateContentResponse` of new text.
        Endpoint::GenerateContent => candidates(event, out),
        _ => {}
    }
}

/// Text a streamed event repeats whole after its deltas (Responses' `.done` events and
/// `response.completed`): masked and given back like the deltas, so nothing slips out there.
pub(super) fn repeated<'a>(
    endpoint: Endpoint,
    event: &'a mut Value,
    out: &mut Vec<&'a mut String>,
) {
    if endpoint != Endpoint::Responses {
        return;
    }
    let Value::Object(o) = event else { return };
    let kind = o
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    match kind.as_str() {
        "response.output_text.done" => {
            if let Some(Value::String(t)) = o.get_mut("text") {
                out.push(t);
            }
        }
        "response.content_part.done" => {
            if let Some(Value::String(t)) = o.get_mut("part").and_then(|p| p.get_mut("text")) {
                out.push(t);
            }
        }
        "response.output_item.done" => {
            if let Some(c) = o.get_mut("item").and_then(|i| i.get_mut("content")) {
                content(c, out);
            }
        }
        "response.completed" | "response.incomplete" => {
            if let Some(r) = o.get_mut("response") {
                answer(Endpoint::Responses, r, out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn req(endpoint: Endpoint, v: Value) -> Vec<String> {
        let doc = v.to_string();
        let found = locate_request(endpoint, doc.as_bytes()).unwrap();
        found.texts.iter().map(|l| l.text.to_string()).collect()
    }

    #[test]
    fn request_text_per_endpoint() {
        let chat = json!({"model": "m", "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "data:x"}}]},
        ], "user": "not text"});
        assert_eq!(req(Endpoint::ChatCompletions, chat), ["sys", "a"]);
        let msgs = json!({"system": [{"type": "text", "text": "s"}], "messages": [{"role": "user", "content": "u"}]});
        let mut got = req(Endpoint::Messages, msgs);
        got.sort();
        assert_eq!(got, ["s", "u"]);
        assert_eq!(
            req(Endpoint::Completions, json!({"prompt": ["p", "q"]})),
            ["p", "q"]
        );
        let resp = json!({"instructions": "i", "input": [{"role": "user", "content": [{"type": "input_text", "text": "t"}]}]});
        let mut got = req(Endpoint::Responses, resp);
        got.sort();
        assert_eq!(got, ["i", "t"]);
        assert_eq!(
            req(Endpoint::Responses, json!({"input": "plain"})),
            ["plain"]
        );
    }

    #[test]
    fn texts_are_found_in_place_and_only_changed_ones_written_back() {
        // Escapes, nesting and spacing the way a client may send them.
        let doc = br#"{ "model":"m", "messages" : [ {"role":"user","content":"mail a\"b@x.io"},
            {"role":"user","content":[{"type":"image_url","image_url":{"url":"u"}},
            {"type":"text","text":"keep \u00e9"}]}, "bare" ], "metadata": {"guardrails": ["g"]},
            "guardrails": "h", "tools": [{"type":"function"}] }"#;
        let found = locate_request(Endpoint::ChatCompletions, doc).unwrap();
        let got: Vec<&str> = found.texts.iter().map(|l| &*l.text).collect();
        assert_eq!(got, ["mail a\"b@x.io", "keep é", "bare"]);
        assert_eq!(found.guardrails, Some(r#""h""#));
        assert_eq!(found.metadata_guardrails, Some(r#"["g"]"#));
        assert!(found.tools.is_some());
        let mut now = owned(&found.texts);
        assert!(splice(doc, &found.texts, &now).is_none(), "nothing changed");
        now[0] = "mail <EMAIL_1> \"q\"".into();
        let out = splice(doc, &found.texts, &now).unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["messages"][0]["content"], "mail <EMAIL_1> \"q\"");
        // Everything else is byte for byte what was sent.
        let tail = std::str::from_utf8(doc).unwrap();
        let tail = &tail[tail.find("},").unwrap()..];
        assert!(std::str::from_utf8(&out).unwrap().ends_with(tail));
        // Not a JSON object, or a text that is not valid JSON: an error, never a guess.
        assert!(locate_request(Endpoint::ChatCompletions, b"[1]").is_err());
        assert!(locate_request(
            Endpoint::ChatCompletions,
            br#"{"messages":[{"content":"x}]}"#
        )
        .is_err());
        // A key written with escapes is the key it decodes to; a field given twice is read twice.
        let doc = br#"{"mess\u0061ges":[{"content":"a"}],"messages":[{"content":"b"}]}"#;
        let found = locate_request(Endpoint::ChatCompletions, doc).unwrap();
        let got: Vec<&str> = found.texts.iter().map(|l| &*l.text).collect();
        assert_eq!(got, ["a", "b"]);
    }

    #[test]
    fn google_and_bedrock_texts() {
        let gemini = json!({
            "systemInstruction": {"parts": [{"text": "sys"}]},
            "contents": [{"role": "user", "parts": [{"text": "a"}, {"inlineData": {"data": "x"}}]},
                         {"role": "model", "parts": [{"functionCall": {"name": "f"}}]}],
            "generationConfig": {"temperature": 1},
        });
        let mut got = req(Endpoint::GenerateContent, gemini);
        got.sort();
        assert_eq!(got, ["a", "sys"]);
        let converse = json!({"system": [{"text": "s"}], "messages": [
            {"role": "user", "content": [{"text": "u"}, {"image": {"format": "png"}}]}]});
        let mut got = req(Endpoint::Converse, converse);
        got.sort();
        assert_eq!(got, ["s", "u"]);
        let answer = br#"{"candidates":[{"content":{"parts":[{"text":"x"},{"text":"y"}],"role":"model"}}],"usageMetadata":{}}"#;
        let found = locate_answer(Endpoint::GenerateContent, answer).unwrap();
        assert_eq!(
            found.iter().map(|l| &*l.text).collect::<Vec<_>>(),
            ["x", "y"]
        );
        let answer = br#"{"output":{"message":{"role":"assistant","content":[{"text":"z"}]}},"stopReason":"end_turn"}"#;
        let found = locate_answer(Endpoint::Converse, answer).unwrap();
        assert_eq!(found.iter().map(|l| &*l.text).collect::<Vec<_>>(), ["z"]);
        let mut chunk = json!({"candidates": [{"content": {"parts": [{"text": "d"}]}}]});
        let mut out = Vec::new();
        delta(Endpoint::GenerateContent, &mut chunk, &mut out);
        assert_eq!(out.len(), 1);
    }

    #[test]
    fn the_other_json_endpoints_texts() {
        let sorted = |e, v| {
            let mut got = req(e, v);
            got.sort();
            got
        };
        assert_eq!(
            sorted(
                Endpoint::ImageGenerations,
                json!({"prompt": "p", "size": "1024x1024"})
            ),
            ["p"]
        );
        assert_eq!(
            sorted(
                Endpoint::AudioSpeech,
                json!({"input": "i", "instructions": "j", "voice": "v"})
            ),
            ["i", "j"]
        );
        assert_eq!(
            sorted(
                Endpoint::Moderations,
                json!({"input": ["a", {"type": "text", "text": "b"},
                {"type": "image_url", "image_url": {"url": "u"}}]})
            ),
            ["a", "b"]
        );
        assert_eq!(
            sorted(
                Endpoint::Rerank,
                json!({"query": "q", "documents": ["d", {"text": "e"}], "top_n": 1})
            ),
            ["d", "e", "q"]
        );
        assert_eq!(
            sorted(
                Endpoint::CountTokens,
                json!({"system": "s", "messages": [{"role": "user", "content": "u"}]})
            ),
            ["s", "u"]
        );
        for e in [Endpoint::ImageEdits, Endpoint::AudioTranscriptions] {
            assert!(!checked(e));
        }
    }

    #[test]
    fn answer_texts_in_place() {
        let chat = br#"{"choices":[{"index":0,"message":{"role":"assistant","content":"hi"}},{"text":"t"}],"usage":{}}"#;
        let got = locate_answer(Endpoint::ChatCompletions, chat).unwrap();
        assert_eq!(
            got.iter().map(|l| &*l.text).collect::<Vec<_>>(),
            ["hi", "t"]
        );
        let msg = br#"{"content":[{"type":"text","text":"x"},{"type":"tool_use","input":{"text":"no"}}]}"#;
        let got = locate_answer(Endpoint::Messages, msg).unwrap();
        assert_eq!(got.iter().map(|l| &*l.text).collect::<Vec<_>>(), ["x"]);
        let resp = br#"{"output":[{"type":"reasoning"},{"type":"message","content":[{"type":"output_text","text":"r"}]}]}"#;
        let got = locate_answer(Endpoint::Responses, resp).unwrap();
        assert_eq!(got.iter().map(|l| &*l.text).collect::<Vec<_>>(), ["r"]);
    }

    #[test]
    fn answer_text_per_endpoint() {
        let mut chat = json!({"choices": [{"message": {"role": "assistant", "content": "hi"}}]});
        let mut out = Vec::new();
        answer(Endpoint::ChatCompletions, &mut chat, &mut out);
        assert_eq!(out.len(), 1);
        let mut msg =
            json!({"content": [{"type": "text", "text": "x"}, {"type": "tool_use", "input": {}}]});
        let mut out = Vec::new();
        answer(Endpoint::Messages, &mut msg, &mut out);
        assert_eq!(out.len(), 1);
    }
}
