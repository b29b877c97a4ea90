//! A translated stream: upstream frames are split into complete events (SSE, or AWS's binary
//! event stream), each event is read into internal events by the upstream format's
//! [`StreamRead`] and written in the client's dialect, and the result goes on as soon as it is
//! ready. Nothing is buffered beyond one incomplete event, itself bounded ([`MAX_EVENT`]; a
//! binary frame by its own limit). A binary frame that fails its checksum, or an event that
//! outgrows its bound, ends the stream with an error event; nothing after it is read.

use std::borrow::Cow;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};

use crate::anthropic::EventWriter;
use crate::eventstream::Decoder;
use crate::ir::{StopReason, StreamEvent};
use crate::json_tool::JSON_TOOL;
use crate::openai::ChunkWriter;
use crate::responses;
use crate::sse::{events, last_event_end_after, TooLong, MAX_EVENT};
use sluice_core::endpoint::Dialect;

/// How an upstream frames its stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// Server-sent events (`data:` lines).
    Sse,
    /// AWS's binary event stream (Bedrock), checksummed frames.
    EventStream,
}

/// One event of an upstream stream, as its framing delivers it.
#[derive(Debug, Clone, Copy)]
pub enum Event<'a> {
    /// The data of one server-sent event.
    Data(&'a [u8]),
    /// One event-stream message: its event or exception type, and its payload.
    Message {
        /// `:event-type`, or `:exception-type` for an exception.
        kind: &'a str,
        /// The message is an exception.
        exception: bool,
        /// The payload (JSON).
        payload: &'a [u8],
    },
}

/// Reads one upstream format's stream into internal events. The dialects implement it in this
/// crate; providers with formats of their own (Gemini, Bedrock) in their modules.
pub trait StreamRead: Send + 'static {
    /// How the upstream frames the stream.
    const FRAMING: Framing;
    /// Read one event.
    fn read(&mut self, event: Event<'_>, out: &mut Vec<StreamEvent>);
    /// The upstream body ended: what formats that mark their end by closing have to add.
    fn end(&mut self, _out: &mut Vec<StreamEvent>) {}
}

/// A format whose stream is server-sent events: it reads each event's data. Every such reader is
/// a [`StreamRead`] with SSE framing.
pub trait SseRead: Send + 'static {
    /// Read the data of one event.
    fn read_data(&mut self, data: &[u8], out: &mut Vec<StreamEvent>);
    /// The upstream body ended.
    fn end(&mut self, _out: &mut Vec<StreamEvent>) {}
}

impl<T: SseRead> StreamRead for T {
    const FRAMING: Framing = Framing::Sse;

    fn read(&mut self, event: Event<'_>, out: &mut Vec<StreamEvent>) {
        if let Event::Data(data) = event {
            self.read_data(data, out);
        }
    }

    fn end(&mut self, out: &mut Vec<StreamEvent>) {
        SseRead::end(self, out);
    }
}

#[derive(Debug)]
enum Writer {
    OpenAi(ChunkWriter),
    Anthropic(EventWriter),
    Gemini(crate::gemini::EventWriter),
    Converse(crate::converse::EventWriter),
    /// OpenAI's Responses API, which has no [`Dialect`] of its own: its answers repeat the
    /// request's settings, so the writer is built from them.
    Responses(responses::EventWriter),
}

/// Translates a stream from an upstream format to a client dialect, event by event.
#[derive(Debug)]
pub struct Translator<R> {
    reader: R,
    writer: Writer,
    /// Event-stream framing: the frame decoder (SSE framing: `None`).
    decoder: Option<Decoder>,
    carry: BytesMut,
    events: Vec<StreamEvent>,
    /// A frame failed its checksum, or an event outgrew its bound: the stream has ended with
    /// an error.
    broken: bool,
    /// The stream's end was written: nothing more goes to the client.
    done: bool,
}

impl<R: StreamRead> Translator<R> {
    /// A translator from `reader`'s format to the client's dialect.
    pub fn new(reader: R, to: Dialect) -> Self {
        Self::with_writer(
            reader,
            match to {
                Dialect::OpenAi => Writer::OpenAi(ChunkWriter::default()),
                Dialect::Anthropic => Writer::Anthropic(EventWriter::default()),
                Dialect::Gemini => Writer::Gemini(crate::gemini::EventWriter::default()),
                Dialect::Converse => Writer::Converse(crate::converse::EventWriter::default()),
            },
        )
    }

    /// A translator from `reader`'s format to the Responses API's events, whose response
    /// objects repeat `echo` (what [`responses::parse_request`] read of the request).
    pub fn responses(reader: R, echo: responses::Echo) -> Self {
        Self::with_writer(reader, Writer::Responses(responses::EventWriter::new(echo)))
    }

    fn with_writer(reader: R, writer: Writer) -> Self {
        Self {
            reader,
            writer,
            decoder: (R::FRAMING == Framing::EventStream).then(Decoder::default),
            carry: BytesMut::new(),
            events: Vec::new(),
            broken: false,
            done: false,
        }
    }

    /// Whether a corrupt frame, or an event past its bound, has ended the stream.
    pub fn broken(&self) -> bool {
        self.broken
    }

    /// Feed upstream bytes; returns the client's bytes for every event completed by them.
    pub fn feed(&mut self, frame: &[u8]) -> Vec<u8> {
        if self.broken {
            return Vec::new();
        }
        if let Some(decoder) = &mut self.decoder {
            decoder.push(frame);
            loop {
                match decoder.next_message() {
                    Ok(Some(m)) => {
                        let exception = m.header(":message-type") == Some("exception");
                        let kind = if exception {
                            m.header(":exception-type")
                        } else {
                            m.header(":event-type")
                        };
                        self.reader.read(
                            Event::Message {
                                kind: kind.unwrap_or_default(),
                                exception,
                                payload: &m.payload,
                            },
                            &mut self.events,
                        );
                    }
                    Ok(None) => break,
                    Err(e) => {
                        self.fail(format!("the upstream stream is corrupt: {e}"));
                        break;
                    }
                }
            }
            return self.write_events();
        }
        // The carry holds no event's end: only the new bytes can bring one.
        let from = self.carry.len();
        self.carry.extend_from_slice(frame);
        let Some(end) = last_event_end_after(&self.carry, from) else {
            if self.carry.len() > MAX_EVENT {
                self.carry = BytesMut::new();
                self.fail(TooLong { limit: MAX_EVENT }.to_string());
                return self.write_events();
            }
            return Vec::new();
        };
        let done = self.carry.split_to(end);
        let mut out = self.translate(&done);
        if self.carry.len() > MAX_EVENT {
            self.carry = BytesMut::new();
            self.fail(TooLong { limit: MAX_EVENT }.to_string());
            out.extend(self.write_events());
        }
        out
    }

    /// End the stream with an error event: nothing more is read.
    fn fail(&mut self, message: String) {
        self.broken = true;
        self.events.push(StreamEvent::Error {
            kind: "api_error".into(),
            message,
        });
    }

    /// At the end of the upstream body: whatever the last (unterminated) event holds, then
    /// the end of formats that mark it by closing the body (Gemini, Bedrock).
    pub fn finish(&mut self) -> Vec<u8> {
        if self.broken {
            return Vec::new();
        }
        let mut out = Vec::new();
        if !self.carry.is_empty() {
            let mut rest = self.carry.split();
            rest.extend_from_slice(b"\n\n");
            out = self.translate(&rest);
        }
        self.reader.end(&mut self.events);
        out.extend(self.write_events());
        out
    }

    fn translate(&mut self, region: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        for (s, e) in events(region) {
            let Some(data) = data_of(&region[s..e]) else {
                continue;
            };
            self.reader.read(Event::Data(&data), &mut self.events);
            out.extend(self.write_events());
        }
        out
    }

    /// Write the pending events in the client's format.
    fn write_events(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        for ev in self.events.drain(..) {
            // An upstream that goes on after its end (a second `[DONE]`) is not followed.
            if self.done {
                break;
            }
            self.done = matches!(ev, StreamEvent::Done);
            match &mut self.writer {
                Writer::OpenAi(w) => w.write(ev, &mut out),
                Writer::Anthropic(w) => w.write(ev, &mut out),
                Writer::Gemini(w) => w.write(ev, &mut out),
                Writer::Converse(w) => w.write(ev, &mut out),
                Writer::Responses(w) => w.write(ev, &mut out),
            }
        }
        out
    }
}

/// The data of one SSE event: borrowed when it is one `data:` line (the usual case), several
/// lines joined by newlines otherwise.
pub fn data_of(event: &[u8]) -> Option<Cow<'_, [u8]>> {
    let mut data: Option<Cow<'_, [u8]>> = None;
    for line in event.split(|b| *b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if let Some(d) = line.strip_prefix(b"data:") {
            let d = d.strip_prefix(b" ").unwrap_or(d);
            data = Some(match data {
                None => Cow::Borrowed(d),
                Some(prev) => {
                    let mut joined = prev.into_owned();
                    joined.push(b'\n');
                    joined.extend_from_slice(d);
                    Cow::Owned(joined)
                }
            });
        }
    }
    data
}

/// A stream reader that tells a `json_tool::forced_json` answer's tool call as text, wrapped around the
/// upstream format's reader.
#[derive(Debug)]
pub struct JsonToolStream<R> {
    inner: R,
    /// The blocks that are the `json_tool_call` call.
    json_blocks: Vec<usize>,
    events: Vec<StreamEvent>,
}

impl<R> JsonToolStream<R> {
    /// Read `inner`'s stream with the call told as text.
    pub fn new(inner: R) -> Self {
        Self {
            inner,
            json_blocks: Vec::new(),
            events: Vec::new(),
        }
    }

    fn rewrite(&mut self, out: &mut Vec<StreamEvent>) {
        for event in self.events.drain(..) {
            match event {
                StreamEvent::ToolStart { index, name, .. } if name == JSON_TOOL => {
                    self.json_blocks.push(index);
                }
                StreamEvent::ToolArgs { index, json } if self.json_blocks.contains(&index) => {
                    out.push(StreamEvent::Text { index, text: json });
                }
                StreamEvent::Stop {
                    reason: StopReason::ToolUse,
                    stop_sequence,
                } if !self.json_blocks.is_empty() => out.push(StreamEvent::Stop {
                    reason: StopReason::EndTurn,
                    stop_sequence,
                }),
                other => out.push(other),
            }
        }
    }
}

impl<R: StreamRead> StreamRead for JsonToolStream<R> {
    const FRAMING: Framing = R::FRAMING;

    fn read(&mut self, event: Event<'_>, out: &mut Vec<StreamEvent>) {
        self.inner.read(event, &mut self.events);
        self.rewrite(out);
    }

    fn end(&mut self, out: &mut Vec<StreamEvent>) {
        self.inner.end(&mut self.events);
        self.rewrite(out);
    }
}

/// What rewrites a stream as it arrives: a [`Translator`] (another format), or a change of
/// framing alone (`crate::invoke_sse::InvokeSse`: Bedrock's event stream told as SSE).
pub trait Rewrite {
    /// The client's bytes for these upstream bytes (empty until something is whole).
    fn feed(&mut self, bytes: &[u8]) -> Bytes;
    /// The upstream ended: what is left to say.
    fn finish(&mut self) -> Bytes;
    /// The stream ended early with an error event: nothing more is read.
    fn ended(&self) -> bool;
}

impl<R: StreamRead> Rewrite for Translator<R> {
    fn feed(&mut self, bytes: &[u8]) -> Bytes {
        Bytes::from(Translator::feed(self, bytes))
    }

    fn finish(&mut self) -> Bytes {
        Bytes::from(Translator::finish(self))
    }

    fn ended(&self) -> bool {
        self.broken
    }
}

/// An upstream stream body seen through a [`Rewrite`].
#[derive(Debug)]
pub struct TranslatedBody<B, T> {
    inner: B,
    rewrite: T,
    ended: bool,
}

impl<B, T> TranslatedBody<B, T> {
    /// Rewrite `inner` with `rewrite`.
    pub fn new(inner: B, rewrite: T) -> Self {
        Self {
            inner,
            rewrite,
            ended: false,
        }
    }
}

impl<B, T> Body for TranslatedBody<B, T>
where
    B: Body<Data = Bytes> + Unpin,
    T: Rewrite + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = self.get_mut();
        loop {
            if this.ended {
                return Poll::Ready(None);
            }
            match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
                Some(Ok(frame)) => {
                    let Ok(data) = frame.into_data() else {
                        continue;
                    };
                    let out = this.rewrite.feed(&data);
                    // A corrupt frame ended the stream: stop reading the upstream.
                    this.ended |= this.rewrite.ended();
                    if !out.is_empty() {
                        return Poll::Ready(Some(Ok(Frame::data(out))));
                    }
                }
                Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                None => {
                    this.ended = true;
                    let out = this.rewrite.finish();
                    if !out.is_empty() {
                        return Poll::Ready(Some(Ok(Frame::data(out))));
                    }
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_lines_are_borrowed_or_joined() {
        assert!(matches!(
            data_of(b"event: x\ndata: {\"a\":1}\n\n"),
            Some(Cow::Borrowed(b"{\"a\":1}"))
        ));
        assert_eq!(
            data_of(b"data: {\"a\":\r\ndata: 1}\r\n\r\n").as_deref(),
            Some(&b"{\"a\":\n1}"[..])
        );
        assert_eq!(data_of(b": comment\n\n"), None);
    }

    /// Found by fuzzing (stream_translate): an upstream that sent `[DONE]` twice had the
    /// client get events after its `[DONE]`.
    #[test]
    fn nothing_follows_the_end() {
        let chunk = r#"data: {"id":"c","model":"m","choices":[{"delta":{"content":"hi"}}]}"#;
        let upstream = format!("{chunk}\n\ndata: [DONE]\n\n{chunk}\n\ndata: [DONE]\n\n");
        let mut t = Translator::new(crate::openai::ChunkReader::default(), Dialect::OpenAi);
        let mut out = t.feed(upstream.as_bytes());
        out.extend(t.finish());
        let out = String::from_utf8(out).unwrap();
        assert!(out.ends_with("data: [DONE]\n\n"), "{out}");
        assert_eq!(out.matches("[DONE]").count(), 1, "{out}");
        assert_eq!(out.matches("\"hi\"").count(), 1, "{out}");
    }

    /// An upstream that never ends an event: past MAX_EVENT the translator ends the stream
    /// with an error event in the client's dialect and reads nothing more.
    #[test]
    fn an_event_that_never_ends_ends_the_stream_with_an_error() {
        let junk = vec![b'x'; 256 * 1024];
        for to in [Dialect::OpenAi, Dialect::Anthropic] {
            let mut t = Translator::new(crate::openai::ChunkReader::default(), to);
            let mut fed = 0;
            let out = loop {
                let out = t.feed(&junk);
                fed += junk.len();
                if t.broken() {
                    break out;
                }
                assert!(out.is_empty());
                assert!(fed <= MAX_EVENT + junk.len(), "no bound");
            };
            let out = String::from_utf8(out).unwrap();
            assert!(out.contains("without ending an event"), "{out}");
            assert!(out.ends_with("\n\n"), "{out}");
            assert_eq!(t.carry.capacity(), 0, "the held bytes are let go");
            assert!(
                t.feed(b"data: [DONE]\n\n").is_empty(),
                "nothing after the end"
            );
            assert!(t.finish().is_empty());
        }
    }
}
