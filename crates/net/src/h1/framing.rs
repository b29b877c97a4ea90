//! An answer body's framing, decoded out of the connection's read buffer without copying: a
//! known length, chunked (RFC 9112 §7.1, strict: CRLF line ends, hex sizes that fit, bounded
//! extensions and trailers), or until the connection closes.

use bytes::{Buf as _, Bytes, BytesMut};

/// The most bytes a chunk-size line (with its extensions) or the trailer section may take.
const MAX_LINE: usize = 4 * 1024;
/// The most bytes of trailers after the last chunk (they are read and dropped).
const MAX_TRAILERS: usize = 16 * 1024;

/// Body bytes up to this many are copied out of the read buffer; more are split off it.
pub(crate) const COPY_MAX: usize = 16 * 1024;

/// The first `n` bytes of `buf` as their own `Bytes`: copied when small, so that the read
/// buffer is never shared with an answer that outlives it and stays the connection's for good
/// (a shared one is reallocated for the next read and freed with the answer: with many
/// connections that churn emptied whole allocator pages, a `madvise` and page faults each);
/// split off without a copy when large. For an answer's head and a body of known length; a
/// stream's events are split off (its buffer is let go of between events anyway, and one
/// copy each would be an allocation each).
pub(crate) fn take(buf: &mut BytesMut, n: usize) -> Bytes {
    if n <= COPY_MAX {
        let out = Bytes::copy_from_slice(&buf[..n]);
        buf.advance(n);
        out
    } else {
        buf.split_to(n).freeze()
    }
}

/// How an answer's body ends.
#[derive(Debug)]
pub(crate) enum Framing {
    /// No body (a `HEAD` answer, 204, 304).
    Empty,
    /// This many bytes are left.
    Length(u64),
    /// Chunked transfer coding.
    Chunked(Chunked),
    /// The body ends when the upstream closes the connection.
    UntilClose,
}

/// Where a chunked body's decoder is.
#[derive(Debug)]
pub(crate) enum Chunked {
    /// Before a chunk-size line.
    Size,
    /// Inside a chunk: this many data bytes left.
    Data(u64),
    /// After a chunk's data: its CRLF.
    DataEnd,
    /// After the last (zero) chunk: trailer lines, this many bytes read so far.
    Trailers(usize),
    /// The terminating empty line has been read.
    Done,
}

/// What the decoder made of the buffer.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Body bytes.
    Data(Bytes),
    /// Nothing more can be decoded until more bytes are read.
    More,
    /// The body is complete.
    End,
}

/// A body that breaks its framing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FramingError(pub &'static str);

impl Framing {
    /// A chunked body at its start.
    pub(crate) fn chunked() -> Self {
        Self::Chunked(Chunked::Size)
    }

    /// Decode what `buf` holds: body bytes (taken off `buf`), a need for more, or the end.
    pub(crate) fn decode(&mut self, buf: &mut BytesMut) -> Result<Step, FramingError> {
        match self {
            Self::Empty | Self::Length(0) => Ok(Step::End),
            Self::Length(left) => {
                if buf.is_empty() {
                    return Ok(Step::More);
                }
                let n = usize::try_from(*left).unwrap_or(usize::MAX).min(buf.len());
                *left -= n as u64;
                Ok(Step::Data(take(buf, n)))
            }
            Self::UntilClose if buf.is_empty() => Ok(Step::More),
            Self::UntilClose => Ok(Step::Data(buf.split().freeze())),
            Self::Chunked(state) => state.decode(buf),
        }
    }

    /// The upstream closed the connection: the end of an until-close body, anything else cut
    /// short.
    pub(crate) fn at_close(&self) -> Result<Step, FramingError> {
        match self {
            Self::Empty | Self::Length(0) | Self::UntilClose | Self::Chunked(Chunked::Done) => {
                Ok(Step::End)
            }
            _ => Err(FramingError("the upstream closed the connection mid-body")),
        }
    }

    /// Bytes known to be left, when the framing says.
    pub(crate) fn exact(&self) -> Option<u64> {
        match self {
            Self::Empty | Self::Chunked(Chunked::Done) => Some(0),
            Self::Length(n) => Some(*n),
            Self::Chunked(_) | Self::UntilClose => None,
        }
    }
}

impl Chunked {
    fn decode(&mut self, buf: &mut BytesMut) -> Result<Step, FramingError> {
        loop {
            match self {
                Self::Size => {
                    let Some(line) = line(buf, MAX_LINE)? else {
                        return Ok(Step::More);
                    };
                    let size = chunk_size(&buf[..line])?;
                    buf.advance(line + 2);
                    *self = if size == 0 {
                        Self::Trailers(0)
                    } else {
                        Self::Data(size)
                    };
                }
                Self::Data(left) => {
                    if buf.is_empty() {
                        return Ok(Step::More);
                    }
                    let n = usize::try_from(*left).unwrap_or(usize::MAX).min(buf.len());
                    *left -= n as u64;
                    if *left == 0 {
                        *self = Self::DataEnd;
                    }
                    return Ok(Step::Data(buf.split_to(n).freeze()));
                }
                Self::DataEnd => {
                    if buf.len() < 2 {
                        return Ok(Step::More);
                    }
                    if &buf[..2] != b"\r\n" {
                        return Err(FramingError("a chunk's data is not followed by CRLF"));
                    }
                    buf.advance(2);
                    *self = Self::Size;
                }
                Self::Trailers(read) => {
                    let Some(line) = line(buf, MAX_LINE)? else {
                        return Ok(Step::More);
                    };
                    buf.advance(line + 2);
                    if line == 0 {
                        *self = Self::Done;
                        return Ok(Step::End);
                    }
                    *read += line + 2;
                    if *read > MAX_TRAILERS {
                        return Err(FramingError("the chunked body's trailers are too long"));
                    }
                }
                Self::Done => return Ok(Step::End),
            }
        }
    }
}

/// The length of the CRLF-terminated line at the front of `buf` (without its CRLF), once all
/// of it has arrived. A bare LF, or a line longer than `max`, breaks the framing.
fn line(buf: &[u8], max: usize) -> Result<Option<usize>, FramingError> {
    match memchr::memchr(b'\n', &buf[..buf.len().min(max + 2)]) {
        Some(0) => Err(FramingError("a line ends in a bare LF")),
        Some(lf) if buf[lf - 1] == b'\r' => Ok(Some(lf - 1)),
        Some(_) => Err(FramingError("a line ends in a bare LF")),
        None if buf.len() > max + 1 => Err(FramingError("a chunk line is too long")),
        None => Ok(None),
    }
}

/// A chunk-size line: hex digits (at most 15, so the size fits), then optionally whitespace
/// and `;` extensions (ignored).
fn chunk_size(line: &[u8]) -> Result<u64, FramingError> {
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if digits == 0 {
        return Err(FramingError("a chunk size is not hex"));
    }
    if digits > 15 {
        return Err(FramingError("a chunk size is too large"));
    }
    let rest = &line[digits..];
    let rest = rest.trim_ascii_start();
    if !rest.is_empty() && rest[0] != b';' {
        return Err(FramingError("a chunk size is followed by something else"));
    }
    if rest.iter().any(|&b| b == b'\r' || b == 0) {
        return Err(FramingError("a chunk extension holds a control byte"));
    }
    Ok(line[..digits].iter().fold(0u64, |n, &d| {
        let v = match d {
            b'0'..=b'9' => d - b'0',
            b'a'..=b'f' => d - b'a' + 10,
            _ => d - b'A' + 10,
        };
        n * 16 + u64::from(v)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decode `input` fed `step` bytes at a time; the body's bytes and whether it ended.
    fn feed(
        framing: &mut Framing,
        input: &[u8],
        step: usize,
    ) -> Result<(Vec<u8>, bool), FramingError> {
        let mut buf = BytesMut::new();
        let mut body = Vec::new();
        for piece in input.chunks(step.max(1)) {
            buf.extend_from_slice(piece);
            loop {
                match framing.decode(&mut buf)? {
                    Step::Data(d) => body.extend_from_slice(&d),
                    Step::More => break,
                    Step::End => return Ok((body, true)),
                }
            }
        }
        Ok((body, false))
    }

    #[test]
    fn chunked_bodies_decode_whatever_the_reads_split() {
        let wire = b"5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nx-trailer: 1\r\n\r\n";
        for step in [1, 2, 3, 7, wire.len()] {
            let mut f = Framing::chunked();
            let (body, ended) = feed(&mut f, wire, step).unwrap();
            assert_eq!(body, b"hello, world", "step {step}");
            assert!(ended);
            assert_eq!(f.at_close(), Ok(Step::End));
        }
    }

    #[test]
    fn a_body_cut_short_is_an_error_at_close() {
        let mut f = Framing::chunked();
        let (body, ended) = feed(&mut f, b"5\r\nhel", 100).unwrap();
        assert_eq!((body.as_slice(), ended), (&b"hel"[..], false));
        assert!(f.at_close().is_err());
        let mut f = Framing::Length(10);
        feed(&mut f, b"12345", 100).unwrap();
        assert!(f.at_close().is_err());
        let f = Framing::UntilClose;
        assert_eq!(f.at_close(), Ok(Step::End));
    }

    #[test]
    fn a_known_length_stops_at_its_end_and_leaves_the_rest() {
        let mut f = Framing::Length(5);
        let mut buf = BytesMut::from(&b"helloHTTP/1.1"[..]);
        assert_eq!(
            f.decode(&mut buf),
            Ok(Step::Data(Bytes::from_static(b"hello")))
        );
        assert_eq!(f.decode(&mut buf), Ok(Step::End));
        assert_eq!(&buf[..], b"HTTP/1.1");
    }

    #[test]
    fn broken_chunking_is_refused() {
        for bad in [
            &b"x\r\n"[..],
            b"5\nhello\r\n",
            b"5\r\nhelloXX",
            b"1234567890abcdef0\r\n",
            b"5 x\r\n",
            b"\n",
        ] {
            let mut f = Framing::chunked();
            assert!(
                feed(&mut f, bad, 100).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        let mut f = Framing::chunked();
        let long = [b"5;".as_slice(), &[b'a'; MAX_LINE + 10]].concat();
        assert!(feed(&mut f, &long, 100).is_err(), "an endless extension");
    }
}
