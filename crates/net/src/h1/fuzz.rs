//! The fuzz target over the own client's answer reading: head, framing and body, from bytes an
//! upstream might send (fuzz/README.md, `h1_answer`).

use bytes::BytesMut;

use super::framing::Step;
use super::head::parse_response;

/// What reading an answer came to, whatever the reads' sizes were.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    /// The head never completed before the bytes ran out.
    NoHead,
    /// The head was refused.
    BadHead,
    /// A head, its body's bytes, and how the body ended (`None`: the bytes ran out with the
    /// body still open and the close not yet read; `Some(false)`: the framing was broken).
    Answer {
        status: u16,
        headers: Vec<(String, Vec<u8>)>,
        reusable: bool,
        body: Vec<u8>,
        ended: Option<bool>,
        left: usize,
    },
}

/// The first byte picks a read size (1–16 bytes), the rest is what the upstream sent. Reading
/// it whole and reading it piece by piece come to the same answer (no read boundary changes
/// a head, a length or a chunk: what request smuggling and response splitting hide in); a
/// body never yields more than was sent; a length beside a transfer coding never leaves the
/// connection reusable; what is left after a complete body is counted, so that a caller can
/// refuse to reuse the connection.
pub fn h1_answer(data: &[u8]) {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let step = usize::from(first % 16) + 1;
    let whole = read(rest, rest.len().max(1), false);
    let pieces = read(rest, step, false);
    assert_eq!(whole, pieces, "reads of {step} bytes change the answer");
    if let Outcome::Answer {
        body,
        headers,
        reusable,
        ..
    } = &whole
    {
        assert!(body.len() <= rest.len());
        let has = |n: &str| headers.iter().any(|(h, _)| h == n);
        if has("transfer-encoding") && has("content-length") {
            assert!(!reusable, "a length beside a coding is not trusted");
        }
    }
    // The same bytes as the answer to a HEAD request have no body at all.
    if let Outcome::Answer { body, .. } = read(rest, step, true) {
        assert!(body.is_empty());
    }
}

fn read(data: &[u8], step: usize, head_request: bool) -> Outcome {
    let mut buf = BytesMut::new();
    let mut pieces = data.chunks(step);
    let head = loop {
        match parse_response(&mut buf, head_request) {
            Ok(Some(head)) => break head,
            Ok(None) => match pieces.next() {
                Some(p) => buf.extend_from_slice(p),
                None => return Outcome::NoHead,
            },
            Err(_) => return Outcome::BadHead,
        }
    };
    let mut framing = head.framing;
    let mut body = Vec::new();
    let ended = loop {
        match framing.decode(&mut buf) {
            Ok(Step::Data(d)) => body.extend_from_slice(&d),
            Ok(Step::End) => break Some(true),
            Ok(Step::More) => match pieces.next() {
                Some(p) => buf.extend_from_slice(p),
                None => break None,
            },
            Err(_) => break Some(false),
        }
    };
    let left = if ended == Some(true) {
        buf.len() + pieces.map(<[u8]>::len).sum::<usize>()
    } else {
        0
    };
    Outcome::Answer {
        status: head.status.as_u16(),
        headers: head
            .headers
            .iter()
            .map(|(n, v)| (n.as_str().to_owned(), v.as_bytes().to_vec()))
            .collect(),
        reusable: head.reusable,
        body,
        ended,
        left,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn h1_answer_corpus() {
        sluice_core::fuzz::replay(env!("CARGO_MANIFEST_DIR"), "h1_answer", super::h1_answer);
    }
}
