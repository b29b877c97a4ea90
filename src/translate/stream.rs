//! A translated SSE body: upstream frames are split into complete events, each event is read
//! into internal events and written in the client's format, and the result goes on as soon as
//! it is ready. Nothing is buffered beyond one incomplete event.

use std::borrow::Cow;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};

use super::anthropic::{EventReader, EventWriter};
use super::ir::StreamEvent;
use super::openai::{ChunkReader, ChunkWriter};
use crate::endpoint::Dialect;
use crate::providers::body::{UpstreamBody, UpstreamBodyError};
use crate::providers::sse::{events, last_event_end};

#[derive(Debug)]
enum Reader {
    OpenAi(ChunkReader),
    Anthropic(EventReader),
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
}

impl Translator {
    /// A translator from the upstream's dialect to the client's.
    pub fn new(from: Dialect, to: Dialect) -> Self {
        Self {
            reader: match from {
                Dialect::OpenAi => Reader::OpenAi(ChunkReader::default()),
                Dialect::Anthropic => Reader::Anthropic(EventReader),
            },
            writer: match to {
                Dialect::OpenAi => Writer::OpenAi(ChunkWriter::default()),
                Dialect::Anthropic => Writer::Anthropic(EventWriter::default()),
            },
            carry: BytesMut::new(),
            events: Vec::new(),
        }
    }

    /// Feed upstream bytes; returns the client's bytes for every event completed by them.
    pub fn feed(&mut self, frame: &[u8]) -> Vec<u8> {
        self.carry.extend_from_slice(frame);
        let Some(end) = last_event_end(&self.carry) else {
            return Vec::new();
        };
        let done = self.carry.split_to(end);
        self.translate(&done)
    }

    /// At the end of the upstream body: whatever the last (unterminated) event holds.
    pub fn finish(&mut self) -> Vec<u8> {
        if self.carry.is_empty() {
            return Vec::new();
        }
        let mut rest = self.carry.split();
        rest.extend_from_slice(b"\n\n");
        self.translate(&rest)
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
            }
            for ev in self.events.drain(..) {
                match &mut self.writer {
                    Writer::OpenAi(w) => w.write(ev, &mut out),
                    Writer::Anthropic(w) => w.write(ev, &mut out),
                }
            }
        }
        out
    }
}

/// The data of one SSE event: borrowed when it is one `data:` line (the usual case), several
/// lines joined by newlines otherwise.
fn data_of(event: &[u8]) -> Option<Cow<'_, [u8]>> {
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
    /// Translate `inner` from `from` to `to`.
    pub fn new(inner: UpstreamBody, from: Dialect, to: Dialect) -> Self {
        Self {
            inner,
            translator: Translator::new(from, to),
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
