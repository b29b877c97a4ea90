//! JSON streamed without SSE, split into its documents as the bytes arrive: lines (Cohere's v1
//! chat stream is one JSON document a line; SSE `data:` lines read the same way) and one array
//! sent element by element (Gemini's `streamGenerateContent` without `alt=sse`). Each byte is
//! looked at once; only the part of a document that straddles two frames is copied, and a
//! document that grows past [`MAX_HELD`] without ending is an error ([`TooLong`]): the stream
//! is not read on.

use bytes::BytesMut;
use memchr::{memchr, memchr2, memrchr};

use crate::sse::TooLong;

/// Longest line or array element held while its end is awaited (16 MiB, the bound of one SSE
/// event, [`crate::sse::MAX_EVENT`], for the same reasons).
pub const MAX_HELD: usize = crate::sse::MAX_EVENT;

/// Bytes of one document begun in an earlier frame.
#[derive(Debug, Default)]
struct Held {
    buf: BytesMut,
}

impl Held {
    fn push(&mut self, part: &[u8]) -> Result<(), TooLong> {
        if self.buf.len() + part.len() > MAX_HELD {
            self.buf = BytesMut::new();
            return Err(TooLong { limit: MAX_HELD });
        }
        self.buf.extend_from_slice(part);
        Ok(())
    }

    /// The held document completed by `last`; then empty again.
    fn complete(&mut self, last: &[u8], each: &mut impl FnMut(&[u8])) {
        self.buf.extend_from_slice(last);
        each(&self.buf);
        self.buf.clear();
    }

    fn pending(&self) -> bool {
        !self.buf.is_empty()
    }
}

fn trim_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// Splits a byte stream into lines (`\n`, a `\r` before it dropped).
#[derive(Debug, Default)]
pub struct Lines {
    held: Held,
}

impl Lines {
    /// Read one frame; `each` gets every line the frame completes. A line unfinished past
    /// [`MAX_HELD`] bytes is an error.
    pub fn feed(&mut self, frame: &[u8], mut each: impl FnMut(&[u8])) -> Result<(), TooLong> {
        let mut rest = frame;
        if self.held.pending() {
            let Some(nl) = memchr(b'\n', rest) else {
                return self.held.push(rest);
            };
            let mut whole = |line: &[u8]| each(trim_cr(line));
            self.held.complete(&rest[..nl], &mut whole);
            rest = &rest[nl + 1..];
        }
        if let Some(last) = memrchr(b'\n', rest) {
            for line in rest[..last].split(|b| *b == b'\n') {
                each(trim_cr(line));
            }
            rest = &rest[last + 1..];
        }
        if !rest.is_empty() {
            self.held.push(rest)?;
        }
        Ok(())
    }

    /// Whether the start of a line is held (its end not yet seen).
    pub fn pending(&self) -> bool {
        self.held.pending()
    }

    /// At the end of the body: the last line, when it had no newline.
    pub fn finish(&mut self, mut each: impl FnMut(&[u8])) {
        if self.held.pending() {
            let mut whole = |line: &[u8]| each(trim_cr(line));
            self.held.complete(b"", &mut whole);
        }
    }
}

/// Splits a JSON array sent piece by piece (`[{…}\n,\r\n{…}\n]`) into its elements: a scan of
/// string, escape and nesting state, kept across frames.
#[derive(Debug, Default)]
pub struct ArrayElements {
    held: Held,
    /// Open brackets and braces: the array itself is depth 1, its elements' insides 2 and more.
    depth: u32,
    in_string: bool,
    /// The frame ended right after a backslash inside a string.
    escaped: bool,
}

impl ArrayElements {
    /// Read one frame; `each` gets every element (object or array) of the top-level array the
    /// frame completes. An element unfinished past [`MAX_HELD`] bytes is an error.
    pub fn feed(&mut self, frame: &[u8], mut each: impl FnMut(&[u8])) -> Result<(), TooLong> {
        // Where the element in progress began, when it began in this frame.
        let mut start = None;
        let mut i = 0;
        while i < frame.len() {
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                    i += 1;
                    continue;
                }
                match memchr2(b'"', b'\\', &frame[i..]) {
                    None => i = frame.len(),
                    Some(k) if frame[i + k] == b'"' => {
                        self.in_string = false;
                        i += k + 1;
                    }
                    Some(k) => {
                        self.escaped = true;
                        i += k + 1;
                    }
                }
                continue;
            }
            match frame[i] {
                b'"' => self.in_string = true,
                b'{' | b'[' => {
                    self.depth += 1;
                    if self.depth == 2 {
                        start = Some(i);
                    }
                }
                b'}' | b']' => {
                    self.depth = self.depth.saturating_sub(1);
                    if self.depth == 1 {
                        match start.take() {
                            Some(s) => each(&frame[s..=i]),
                            None => self.held.complete(&frame[..=i], &mut each),
                        }
                    }
                }
                _ => {}
            }
            i += 1;
        }
        if self.depth >= 2 {
            match start {
                Some(s) => self.held.push(&frame[s..])?,
                None => self.held.push(frame)?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines_of(frames: &[&[u8]]) -> Vec<String> {
        let mut out = Vec::new();
        let mut l = Lines::default();
        for f in frames {
            l.feed(f, |line| {
                out.push(String::from_utf8_lossy(line).into_owned())
            })
            .unwrap();
        }
        l.finish(|line| out.push(String::from_utf8_lossy(line).into_owned()));
        out
    }

    fn elements_of(frames: &[&[u8]]) -> Vec<String> {
        let mut out = Vec::new();
        let mut a = ArrayElements::default();
        for f in frames {
            a.feed(f, |e| out.push(String::from_utf8_lossy(e).into_owned()))
                .unwrap();
        }
        out
    }

    #[test]
    fn lines_split_anywhere() {
        let text = b"{\"a\":1}\r\n{\"b\":2}\n\n{\"c\":3}";
        let want = ["{\"a\":1}", "{\"b\":2}", "", "{\"c\":3}"];
        for cut in 0..=text.len() {
            let (a, b) = text.split_at(cut);
            assert_eq!(lines_of(&[a, b]), want, "cut={cut}");
        }
        for a in 0..=text.len() {
            for b in a..=text.len() {
                let got = lines_of(&[&text[..a], &text[a..b], &text[b..]]);
                assert_eq!(got, want, "cuts {a},{b}");
            }
        }
    }

    const ARRAY: &str = "[{\n  \"candidates\": [{\"text\": \"a \\\"}\\\\\"}],\n  \"n\": 1\n}\n,\r\n{\n  \"usageMetadata\": {\"promptTokenCount\": 3}, \"s\": \"[{\"\n}\n]";

    #[test]
    fn array_elements_split_anywhere() {
        let want = [
            "{\n  \"candidates\": [{\"text\": \"a \\\"}\\\\\"}],\n  \"n\": 1\n}",
            "{\n  \"usageMetadata\": {\"promptTokenCount\": 3}, \"s\": \"[{\"\n}",
        ];
        let text = ARRAY.as_bytes();
        for (i, e) in want.iter().enumerate() {
            let v: serde_json::Value =
                serde_json::from_str(e).unwrap_or_else(|e| panic!("{i}: {e}"));
            assert!(v.is_object());
        }
        for a in 0..=text.len() {
            for b in a..=text.len() {
                let got = elements_of(&[&text[..a], &text[a..b], &text[b..]]);
                assert_eq!(got, want, "cuts {a},{b}");
            }
        }
        // Byte by byte.
        let bytes: Vec<&[u8]> = text.chunks(1).collect();
        assert_eq!(elements_of(&bytes), want);
    }

    #[test]
    fn a_document_that_never_ends_is_refused_and_nothing_is_held() {
        let big = vec![b'x'; 64 * 1024];
        let mut l = Lines::default();
        let mut out = Vec::new();
        l.feed(b"{\"a\":1}\n{\"a\":", |line| out.push(line.to_vec()))
            .unwrap();
        let mut fed = 0;
        let refused = loop {
            fed += big.len();
            assert!(fed <= MAX_HELD + big.len(), "held past the bound");
            if let Err(e) = l.feed(&big, |line| out.push(line.to_vec())) {
                break e;
            }
        };
        assert_eq!(refused, TooLong { limit: MAX_HELD });
        assert!(fed > MAX_HELD - big.len());
        assert!(l.held.buf.capacity() == 0, "the held bytes are let go");
        assert_eq!(out, vec![b"{\"a\":1}".to_vec()]);

        let mut a = ArrayElements::default();
        a.feed(b"[{\"n\":1},{\"s\":\"", |e| out.push(e.to_vec()))
            .unwrap();
        let mut fed = 0;
        while a.feed(&big, |e| out.push(e.to_vec())).is_ok() {
            fed += big.len();
            assert!(fed <= MAX_HELD, "held past the bound");
        }
        assert_eq!(out.last().unwrap(), b"{\"n\":1}");
    }

    #[test]
    fn a_long_document_under_the_bound_is_read() {
        let mut line = b"{\"s\":\"".to_vec();
        line.resize(1024 * 1024, b'x');
        line.extend_from_slice(b"\"}");
        let mut l = Lines::default();
        let mut got = Vec::new();
        for part in line.chunks(1000) {
            l.feed(part, |d| got.push(d.len())).unwrap();
        }
        l.feed(b"\n", |d| got.push(d.len())).unwrap();
        assert_eq!(got, vec![line.len()]);
    }
}
