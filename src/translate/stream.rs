//! A translated stream body: upstream frames are split into complete events (SSE, or AWS's
//! binary event-stream for Bedrock), each event is read into internal events and written in
//! the client's format, and the result goes on as soon as it is ready. Nothing is buffered
//! beyond one incomplete event. A Bedrock frame that fails its checksum ends the stream with
//! an error event; nothing after it is read.

use std::borrow::Cow;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};

use super::anthropic::{EventReader, EventWriter};
use super::ir::StreamEvent;
use super::openai::{ChunkReader, ChunkWriter};
use super::{bedrock, gemini, Format};
use crate::providers::body::{UpstreamBody, UpstreamBodyError};
use crate::providers::eventstream::Decoder;
use crate::providers::sse::{events, last_event_end};
use sluice_core::endpoint::Dialect;

#[derive(Debug)]
enum Reader {
    OpenAi(ChunkReader),
    Anthropic(EventReader),
    Gemini(gemini::ChunkReader),
    Bedrock(bedrock::EventReader, Decoder),
}

#[derive(Debug)]
enum Writer {
    OpenAi(ChunkWriter),
    Anthropic(EventWriter),
}

/// Translates a stream from one dialect to another, event by event.
#[derive(Debug)]
pub struct Translator {
    reader: Reader,
    writer: Writer,
    carry: BytesMut,
    events: Vec<StreamEvent>,
    /// A frame failed its checksum: the stream has ended with an error.
    broken: bool,
}

impl Translator {
    /// A translator from the upstream's format to the client's. `id` and `model` name the
    /// answer for formats whose events do not (Bedrock).
    pub fn new(from: Format, to: Dialect, id: String, model: String) -> Self {
        Self {
            reader: match from {
                Format::OpenAi => Reader::OpenAi(ChunkReader::default()),
                Format::Anthropic | Format::VertexAnthropic => Reader::Anthropic(EventReader),
                Format::Gemini => Reader::Gemini(gemini::ChunkReader::default()),
                Format::Bedrock => {
                    Reader::Bedrock(bedrock::EventReader::new(id, model), Decoder::default())
                }
            },
            writer: match to {
                Dialect::OpenAi => Writer::OpenAi(ChunkWriter::default()),
                Dialect::Anthropic => Writer::Anthropic(EventWriter::default()),
            },
            carry: BytesMut::new(),
            events: Vec::new(),
            broken: false,
        }
    }

    /// Feed upstream bytes; returns the client's bytes for every event completed by them.
    pub fn feed(&mut self, frame: &[u8]) -> Vec<u8> {
        if self.broken {
            return Vec::new();
        }
        if let Reader::Bedrock(reader, decoder) = &mut self.reader {
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
                        reader.read(
                            kind.unwrap_or_default(),
                            exception,
                            &m.payload,
                            &mut self.events,
                        );
                    }
                    Ok(None) => break,
                    Err(e) => {
                        self.broken = true;
                        self.events.push(StreamEvent::Error {
                            kind: "api_error".into(),
                            message: format!("the upstream stream is corrupt: {e}"),
                        });
                        break;
                    }
                }
            }
            return self.write_events();
        }
        self.carry.extend_from_slice(frame);
        let Some(end) = last_event_end(&self.carry) else {
            return Vec::new();
        };
        let done = self.carry.split_to(end);
        self.translate(&done)
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
        match &mut self.reader {
            Reader::Gemini(r) => r.end(&mut self.events),
            Reader::Bedrock(r, _) => r.end(&mut self.events),
            Reader::OpenAi(_) | Reader::Anthropic(_) => {}
        }
        out.extend(self.write_events());
        out
    }

    fn translate(&mut self, region: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        for (s, e) in events(region) {
            let Some(data) = data_of(&region[s..e]) else {
                continue;
            };
            match &mut self.reader {
                Reader::OpenAi(r) => r.read(&data, &mut self.events),
                Reader::Anthropic(r) => r.read(&data, &mut self.events),
                Reader::Gemini(r) => r.read(&data, &mut self.events),
                // Bedrock is binary; `feed` decodes it before any SSE splitting.
                Reader::Bedrock(..) => {}
            }
            out.extend(self.write_events());
        }
        out
    }

    /// Write the pending events in the client's format.
    fn write_events(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        for ev in self.events.drain(..) {
            match &mut self.writer {
                Writer::OpenAi(w) => w.write(ev, &mut out),
                Writer::Anthropic(w) => w.write(ev, &mut out),
            }
        }
        out
    }
}

/// The data of one SSE event: borrowed when it is one `data:` line (the usual case), several
/// lines joined by newlines otherwise.
pub(crate) fn data_of(event: &[u8]) -> Option<Cow<'_, [u8]>> {
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

/// An upstream stream body seen through a [`Translator`].
#[derive(Debug)]
pub struct TranslatedBody {
    inner: UpstreamBody,
    translator: Translator,
    ended: bool,
}

impl TranslatedBody {
    /// Translate `inner` with `translator`.
    pub fn new(inner: UpstreamBody, translator: Translator) -> Self {
        Self {
            inner,
            translator,
            ended: false,
        }
    }
}

impl Body for TranslatedBody {
    type Data = Bytes;
    type Error = UpstreamBodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, UpstreamBodyError>>> {
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
                    let out = this.translator.feed(&data);
                    // A corrupt frame ended the stream: stop reading the upstream.
                    this.ended |= this.translator.broken;
                    if !out.is_empty() {
                        return Poll::Ready(Some(Ok(Frame::data(Bytes::from(out)))));
                    }
                }
                Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                None => {
                    this.ended = true;
                    let out = this.translator.finish();
                    if !out.is_empty() {
                        return Poll::Ready(Some(Ok(Frame::data(Bytes::from(out)))));
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
}
