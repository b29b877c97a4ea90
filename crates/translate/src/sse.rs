//! A server-sent-event tap: frames pass through untouched while the tap reads usage from data
//! lines, notices the stream's proper end, and (when sluice asked for usage on the client's
//! behalf) removes the usage-only chunk the client did not ask for.
//!
//! What an upstream controls is bounded: the bytes of one unfinished event (and so of one
//! unfinished line) are at most [`MAX_EVENT`], past which the tap refuses the stream
//! ([`TooLong`]), and each byte is searched for an event's end once, however the event is split.

use std::sync::LazyLock;

use bytes::{Bytes, BytesMut};
use memchr::{memchr, memchr_iter, memmem, memrchr_iter};

use sluice_core::usage::Usage;
use sluice_core::usage::UsageProbe;

/// The longest event (and so the longest line) sluice holds while waiting for its end: 16 MiB.
/// The largest events real providers send are streamed images (a partial or final image as
/// base64 in one `data:` line, a few MiB at most); the rest are a few KiB. An upstream whose
/// event outgrows this is not a model answering but a stream that never ends an event, and
/// holding it would cost memory without bound and leave the client waiting.
pub const MAX_EVENT: usize = 16 * 1024 * 1024;

/// An upstream stream's unfinished event (or line, or document) outgrew its bound: the stream
/// ends with an error instead of being held without limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the upstream sent more than {limit} bytes without ending an event")]
pub struct TooLong {
    /// The bound, in bytes.
    pub limit: usize,
}

/// Scanner state for one stream.
#[derive(Debug, Default)]
pub struct SseTap {
    /// Bytes after the last complete event (at most [`MAX_EVENT`]). Forwarding mode: a copy
    /// kept only for scanning. Stripping mode: held back until the event completes.
    carry: BytesMut,
    strip_usage_chunk: bool,
    usage: Option<Usage>,
    finished: bool,
    /// Not an event stream (speech audio): frames pass untouched, and the upstream's clean end
    /// is the stream's end.
    raw: bool,
    /// A non-blank event completed (raw: bytes came) since [`SseTap::take_progress`] asked.
    progress: bool,
    /// The client was sent the start of an event that will not end: the tail
    /// [`SseTap::finish`] gave back, or (forwarding) the start of an event past its bound.
    sent_unfinished: bool,
    /// Keep the data of a Responses stream's final event (the whole response, kept by the
    /// gateway when the client asked it to `store` the answer).
    keep_final: bool,
    /// That data, once seen.
    final_event: Option<Bytes>,
}

/// Whether the `\n` at `p` closes a blank line, i.e. ends an event (`\n\n` or `\n\r\n`).
fn closes_event(buf: &[u8], p: usize) -> bool {
    match p {
        0 => false,
        1 => buf[0] == b'\n',
        _ => buf[p - 1] == b'\n' || (buf[p - 1] == b'\r' && buf[p - 2] == b'\n'),
    }
}

/// End of the last complete event (`\n\n` or `\r\n\r\n`) in `buf`, if any. Searches back
/// from the end, so a frame that ends on an event boundary (the usual case) costs a few bytes.
pub fn last_event_end(buf: &[u8]) -> Option<usize> {
    last_event_end_after(buf, 0)
}

/// [`last_event_end`] for a buffer whose first `from` bytes are known to end no event (an
/// event's start, to which new bytes were appended): only the `\n`s from `from` on are looked
/// at, so an event arriving in many frames is searched once, not once per frame.
pub fn last_event_end_after(buf: &[u8], from: usize) -> Option<usize> {
    let from = from.min(buf.len());
    memrchr_iter(b'\n', &buf[from..])
        .map(|p| p + from)
        .find(|&p| closes_event(buf, p))
        .map(|p| p + 1)
}

/// Iterate `(start, end)` of each event (blank-line separated) in a region of complete events;
/// a trailing part without its blank line comes last. Blank runs between events are skipped.
pub fn events(buf: &[u8]) -> impl Iterator<Item = (usize, usize)> + '_ {
    let mut start = 0;
    memchr_iter(b'\n', buf)
        .filter(move |&p| closes_event(buf, p))
        .map(|p| p + 1)
        .chain(std::iter::once(buf.len()))
        .filter_map(move |end| {
            let event = (start, end);
            start = end;
            let blank = buf[event.0..event.1]
                .iter()
                .all(|b| matches!(b, b'\n' | b'\r'));
            (!blank).then_some(event)
        })
}

/// The lines of `buf` (split at `\n`; a `\r` before it stays).
fn lines(buf: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = Some(buf);
    std::iter::from_fn(move || {
        let r = rest?;
        match memchr(b'\n', r) {
            Some(i) => {
                rest = Some(&r[i + 1..]);
                Some(&r[..i])
            }
            None => {
                rest = None;
                Some(r)
            }
        }
    })
}

impl SseTap {
    /// A tap; `strip_usage_chunk` removes the final usage-only chat chunk from the output.
    pub fn new(strip_usage_chunk: bool) -> Self {
        Self {
            strip_usage_chunk,
            ..Self::default()
        }
    }

    /// A tap for a body that is not an event stream (audio bytes): nothing is scanned.
    pub fn raw() -> Self {
        Self {
            raw: true,
            ..Self::default()
        }
    }

    /// Usage seen so far.
    pub fn usage(&self) -> Option<Usage> {
        self.usage
    }

    /// Keep the data of the stream's `response.completed` (or `response.incomplete`) event.
    pub fn keep_final_event(&mut self) {
        self.keep_final = true;
    }

    /// The final Responses event's data, when [`SseTap::keep_final_event`] asked for it.
    pub fn take_final_event(&mut self) -> Option<Bytes> {
        self.final_event.take()
    }

    /// Whether the stream's own end marker (`[DONE]` or a terminal Responses event) was seen.
    pub fn finished(&self) -> bool {
        self.finished || self.raw
    }

    /// Whether the stream made progress since the last call: an event completed (blank lines
    /// alone are none; a comment such as `: ping` is one; for raw bytes, any frame). Idle
    /// timeouts count this, not bytes, so an upstream that trickles bytes without ever ending
    /// an event still times out.
    pub fn take_progress(&mut self) -> bool {
        std::mem::take(&mut self.progress)
    }

    /// Whether the client has been sent the start of an event that has not ended (forwarding
    /// mode, or the tail [`SseTap::finish`] gave back): an event sluice adds must first end it.
    pub fn mid_event(&self) -> bool {
        !self.raw && ((!self.strip_usage_chunk && !self.carry.is_empty()) || self.sent_unfinished)
    }

    /// Feed one upstream frame; returns what to send on (may be empty). An event still
    /// unfinished past [`MAX_EVENT`] bytes is an error: the stream is not to be read on.
    pub fn feed(&mut self, frame: Bytes) -> Result<Bytes, TooLong> {
        let out = if self.raw {
            self.progress |= !frame.is_empty();
            frame
        } else if self.strip_usage_chunk {
            self.feed_stripping(frame)
        } else {
            self.feed_forwarding(&frame);
            frame
        };
        if self.carry.len() > MAX_EVENT {
            self.carry = BytesMut::new();
            self.sent_unfinished |= !self.strip_usage_chunk;
            return Err(TooLong { limit: MAX_EVENT });
        }
        Ok(out)
    }

    /// At the end of the upstream body: whatever was held back.
    pub fn finish(&mut self) -> Bytes {
        if self.strip_usage_chunk && !self.carry.is_empty() {
            let rest = self.carry.split().freeze();
            self.scan_event(&rest);
            self.sent_unfinished = true;
            rest
        } else {
            Bytes::new()
        }
    }

    fn feed_forwarding(&mut self, frame: &[u8]) {
        if self.carry.is_empty() {
            let end = last_event_end(frame).unwrap_or(0);
            self.scan_region(&frame[..end]);
            self.carry.extend_from_slice(&frame[end..]);
        } else {
            let from = self.carry.len();
            self.carry.extend_from_slice(frame);
            if let Some(end) = last_event_end_after(&self.carry, from) {
                let done = self.carry.split_to(end);
                self.scan_region(&done);
            }
        }
    }

    fn feed_stripping(&mut self, frame: Bytes) -> Bytes {
        let complete = if self.carry.is_empty() {
            let end = last_event_end(&frame).unwrap_or(0);
            if end < frame.len() {
                self.carry.extend_from_slice(&frame[end..]);
            }
            frame.slice(..end)
        } else {
            // An event begun earlier: only the new bytes can end it, and nothing is copied
            // back while it stays unfinished.
            let from = self.carry.len();
            self.carry.extend_from_slice(&frame);
            match last_event_end_after(&self.carry, from) {
                Some(end) => self.carry.split_to(end).freeze(),
                None => return Bytes::new(),
            }
        };
        // Usually none, else one: the usage chunk the client did not ask for.
        let mut dropped: Vec<(usize, usize)> = Vec::new();
        for (s, e) in events(&complete) {
            self.progress = true;
            if self.scan_event(&complete[s..e]) {
                dropped.push((s, e));
            }
        }
        if dropped.is_empty() {
            return complete;
        }
        let mut out = BytesMut::with_capacity(complete.len());
        let mut at = 0;
        for (s, e) in dropped {
            out.extend_from_slice(&complete[at..s]);
            at = e;
        }
        out.extend_from_slice(&complete[at..]);
        out.freeze()
    }

    fn scan_region(&mut self, region: &[u8]) {
        for (s, e) in events(region) {
            self.progress = true;
            self.scan_event(&region[s..e]);
        }
    }

    /// Scan one event; returns true when it is the usage-only chunk to strip.
    fn scan_event(&mut self, event: &[u8]) -> bool {
        let mut strip = false;
        for line in lines(event) {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if let Some(name) = line.strip_prefix(b"event:") {
                // A terminal Responses event ends the stream whether or not it carries usage
                // (`response.failed` has `"usage": null`).
                let name = name.strip_prefix(b" ").unwrap_or(name);
                self.finished |= is_terminal_event(name);
                continue;
            }
            let Some(data) = line.strip_prefix(b"data:") else {
                continue;
            };
            let data = data.strip_prefix(b" ").unwrap_or(data);
            if data == b"[DONE]" {
                self.finished = true;
                continue;
            }
            if !has_usage(data) {
                continue;
            }
            if let Ok(probe) = serde_json::from_slice::<UsageProbe<'_>>(data) {
                self.finished |= probe.kind.is_some_and(|k| is_terminal_event(k.as_bytes()));
                if self.keep_final
                    && matches!(
                        probe.kind,
                        Some("response.completed" | "response.incomplete")
                    )
                {
                    self.final_event = Some(Bytes::copy_from_slice(data));
                }
                let usage_only = probe.is_usage_only_chunk();
                if let Some(u) = probe.usage() {
                    self.usage = Some(self.usage.map_or(u, |seen| seen.merge(u)));
                    strip |= self.strip_usage_chunk && usage_only;
                }
            }
        }
        strip
    }
}

/// The events after which nothing follows: the Responses API's, Anthropic's, and those of
/// streamed images, transcriptions and speech (which end without `[DONE]`).
fn is_terminal_event(name: &[u8]) -> bool {
    matches!(
        name,
        b"response.completed"
            | b"response.failed"
            | b"response.incomplete"
            | b"message_stop"
            | b"image_generation.completed"
            | b"image_edit.completed"
            | b"transcript.text.done"
            | b"speech.audio.done"
    )
}

/// Cheap pre-check: a `"usage"` key whose value is not `null`.
fn has_usage(data: &[u8]) -> bool {
    static USAGE_KEY: LazyLock<memmem::Finder<'static>> =
        LazyLock::new(|| memmem::Finder::new(b"\"usage\""));
    let mut from = 0;
    while let Some(p) = USAGE_KEY.find(&data[from..]) {
        let after = &data[from + p + 7..];
        let value = after
            .iter()
            .position(|b| !matches!(b, b' ' | b':' | b'\t'))
            .map(|i| &after[i..]);
        if !value.is_some_and(|v| v.starts_with(b"null")) {
            return true;
        }
        from += p + 7;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHUNK: &str = "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}],\"usage\":null}\n\n";
    const USAGE: &str =
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":4}}\n\n";
    const DONE: &str = "data: [DONE]\n\n";

    fn run(tap: &mut SseTap, frames: &[&str]) -> String {
        let mut out = Vec::new();
        for f in frames {
            out.extend_from_slice(&tap.feed(Bytes::copy_from_slice(f.as_bytes())).unwrap());
        }
        out.extend_from_slice(&tap.finish());
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn forwards_untouched_and_reads_usage() {
        let mut tap = SseTap::new(false);
        let all = format!("{CHUNK}{USAGE}{DONE}");
        let out = run(&mut tap, &[&all]);
        assert_eq!(out, all);
        assert_eq!(tap.usage().unwrap().completion_tokens, 4);
        assert!(tap.finished());
    }

    #[test]
    fn strips_only_the_usage_chunk() {
        let mut tap = SseTap::new(true);
        let out = run(&mut tap, &[CHUNK, &format!("{USAGE}{DONE}")]);
        assert_eq!(out, format!("{CHUNK}{DONE}"));
        assert_eq!(tap.usage().unwrap().prompt_tokens, 3);
        assert!(tap.finished());
    }

    /// Found by fuzzing (sse_tap): with two usage-only chunks in one frame only the last was
    /// removed, so what the client got depended on how the upstream split its stream.
    #[test]
    fn every_usage_chunk_is_stripped_however_the_stream_is_split() {
        let all = format!("{CHUNK}{USAGE}{USAGE}{DONE}");
        let whole = run(&mut SseTap::new(true), &[&all]);
        let split = run(&mut SseTap::new(true), &[CHUNK, USAGE, USAGE, DONE]);
        assert_eq!(whole, format!("{CHUNK}{DONE}"));
        assert_eq!(whole, split);
    }

    #[test]
    fn events_split_across_frames_at_every_byte() {
        let all = format!("{CHUNK}{USAGE}{DONE}");
        for strip in [false, true] {
            for cut in 1..all.len() {
                let mut tap = SseTap::new(strip);
                let out = run(&mut tap, &[&all[..cut], &all[cut..]]);
                let want = if strip {
                    format!("{CHUNK}{DONE}")
                } else {
                    all.clone()
                };
                assert_eq!(out, want, "strip={strip} cut={cut}");
                assert_eq!(tap.usage().unwrap().completion_tokens, 4, "cut={cut}");
                assert!(tap.finished(), "cut={cut}");
            }
        }
    }

    #[test]
    fn crlf_and_responses_events() {
        let ev = "event: response.completed\r\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":5,\"output_tokens\":6}}}\r\n\r\n";
        let mut tap = SseTap::new(false);
        run(&mut tap, &[ev]);
        assert!(tap.finished());
        assert_eq!(tap.usage().unwrap().prompt_tokens, 5);
    }

    #[test]
    fn failed_responses_event_without_usage_finishes_the_stream() {
        let ev = "event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"status\":\"failed\",\"usage\":null}}\n\n";
        let mut tap = SseTap::new(false);
        run(&mut tap, &[ev]);
        assert!(tap.finished());
        assert!(tap.usage().is_none());
    }

    #[test]
    fn anthropic_stream_usage_is_merged_and_message_stop_ends_it() {
        let start = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"usage\":{\"input_tokens\":10,\"cache_read_input_tokens\":90,\"output_tokens\":1}}}\n\n";
        let delta = "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":42}}\n\n";
        let stop = "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
        let mut tap = SseTap::new(false);
        run(&mut tap, &[start, delta]);
        assert!(!tap.finished());
        run(&mut tap, &[stop]);
        assert!(tap.finished());
        let u = tap.usage().unwrap();
        assert_eq!(
            (u.prompt_tokens, u.cached_tokens, u.completion_tokens),
            (100, 90, 42)
        );
    }

    #[test]
    fn cut_stream_is_not_finished() {
        let mut tap = SseTap::new(false);
        run(&mut tap, &[CHUNK, CHUNK]);
        assert!(!tap.finished());
        assert!(tap.usage().is_none());
    }

    /// The straightforward definitions the scanners must agree with.
    fn reference_last_event_end(buf: &[u8]) -> Option<usize> {
        let lf = memmem::rfind(buf, b"\n\n").map(|p| p + 2);
        let crlf = memmem::rfind(buf, b"\n\r\n").map(|p| p + 3);
        lf.max(crlf)
    }

    fn reference_events(buf: &[u8]) -> Vec<&[u8]> {
        let mut out = Vec::new();
        let mut start = 0;
        for end in 1..=buf.len() {
            let ends_event = buf[..end].ends_with(b"\n\n") || buf[..end].ends_with(b"\n\r\n");
            if ends_event || end == buf.len() {
                out.push(&buf[start..end]);
                start = end;
            }
        }
        out.retain(|e| !e.iter().all(|b| matches!(b, b'\n' | b'\r')));
        out
    }

    proptest::proptest! {
        #[test]
        fn scanners_agree_with_the_reference(
            bytes in proptest::collection::vec(proptest::sample::select(b"a:\r\n".to_vec()), 0..40)
        ) {
            proptest::prop_assert_eq!(last_event_end(&bytes), reference_last_event_end(&bytes));
            let got: Vec<&[u8]> = events(&bytes).map(|(s, e)| &bytes[s..e]).collect();
            proptest::prop_assert_eq!(got, reference_events(&bytes));
            let joined: Vec<u8> = lines(&bytes).collect::<Vec<_>>().join(&b'\n');
            proptest::prop_assert_eq!(joined, bytes.clone());
        }

        /// Searching only the bytes appended to an event's start finds what a search of the
        /// whole buffer finds.
        #[test]
        fn searching_after_an_events_start_agrees(
            head in proptest::collection::vec(proptest::sample::select(b"a:\r\n".to_vec()), 0..20),
            tail in proptest::collection::vec(proptest::sample::select(b"a:\r\n".to_vec()), 0..20),
        ) {
            let start = &head[last_event_end(&head).unwrap_or(0)..];
            let buf = [start, &tail[..]].concat();
            proptest::prop_assert_eq!(
                last_event_end_after(&buf, start.len()),
                last_event_end(&buf)
            );
        }
    }

    /// An upstream that sends bytes and never ends an event: past MAX_EVENT the tap refuses
    /// the stream, holding no more than one frame beyond the bound, in both modes.
    #[test]
    fn an_event_that_never_ends_is_refused_past_the_bound() {
        let junk = Bytes::from(vec![b'x'; 64 * 1024]);
        for strip in [false, true] {
            let mut tap = SseTap::new(strip);
            tap.feed(Bytes::from_static(CHUNK.as_bytes())).unwrap();
            assert!(tap.take_progress());
            let mut fed = 0;
            let refused = loop {
                fed += junk.len();
                assert!(fed <= MAX_EVENT + 2 * junk.len(), "strip={strip}: no bound");
                match tap.feed(junk.clone()) {
                    Ok(out) => {
                        assert!(!tap.take_progress(), "no event completed");
                        assert_eq!(out.len(), if strip { 0 } else { junk.len() });
                    }
                    Err(e) => break e,
                }
            };
            assert_eq!(refused, TooLong { limit: MAX_EVENT });
            assert!(fed > MAX_EVENT, "strip={strip}: refused early, at {fed}");
            assert_eq!(
                tap.mid_event(),
                !strip,
                "forwarded bytes left an event open"
            );
            assert_eq!(tap.carry.capacity(), 0, "the held bytes are let go");
        }
    }

    #[test]
    fn progress_is_a_completed_event_not_bytes() {
        let mut tap = SseTap::new(false);
        let parts: Vec<&[u8]> = CHUNK.as_bytes().chunks(7).collect();
        for (i, b) in parts.iter().enumerate() {
            let last = i == parts.len() - 1;
            tap.feed(Bytes::copy_from_slice(b)).unwrap();
            assert_eq!(tap.take_progress(), last);
            assert_eq!(tap.mid_event(), !last);
        }
        let mut tap = SseTap::new(true);
        tap.feed(Bytes::from_static(b"data: {\"par")).unwrap();
        assert!(!tap.take_progress());
        assert!(!tap.mid_event(), "held back, not sent");
        assert_eq!(tap.finish(), "data: {\"par");
        assert!(tap.mid_event(), "the tail went out unfinished");
        tap.feed(Bytes::from_static(b"\n\n\r\n")).unwrap();
        assert!(!tap.take_progress(), "blank lines are not an event");
        tap.feed(Bytes::from_static(b": ping\n\n")).unwrap();
        assert!(tap.take_progress(), "a keep-alive comment is");
        let mut raw = SseTap::raw();
        raw.feed(Bytes::from_static(b"\xff\xfb")).unwrap();
        assert!(raw.take_progress());
        assert!(!raw.take_progress());
        assert!(!raw.mid_event());
    }

    /// An event trickled a byte at a time reads as it would whole (each byte is searched
    /// once: the carry is not searched again from its start for every frame).
    #[test]
    fn a_trickled_event_reads_whole() {
        let mut event = b"data: ".to_vec();
        event.resize(64 * 1024, b'a');
        event.extend_from_slice(b"\n\n");
        for strip in [false, true] {
            let mut tap = SseTap::new(strip);
            let mut out = Vec::new();
            for b in event.chunks(1) {
                out.extend_from_slice(&tap.feed(Bytes::copy_from_slice(b)).unwrap());
            }
            assert_eq!(out, event, "strip={strip}");
            assert!(tap.take_progress());
        }
    }

    #[test]
    fn usage_inside_content_is_not_mistaken() {
        let ev = "data: {\"choices\":[{\"delta\":{\"content\":\"the \\\"usage\\\": field\"}}]}\n\n";
        let mut tap = SseTap::new(true);
        let out = run(&mut tap, &[ev]);
        assert_eq!(out, ev);
        assert!(tap.usage().is_none());
    }
}
