//! Server-sent events as a streamable HTTP server answers a POST: events split as bytes
//! arrive, each event's `data:` lines joined. Only what MCP needs (no `retry`, ids ignored).

/// Collects bytes and yields the data of each complete event.
#[derive(Debug, Default)]
pub(super) struct Events {
    buf: Vec<u8>,
}

impl Events {
    /// Add bytes; returns the data of every event they completed.
    pub(super) fn feed(&mut self, bytes: &[u8]) -> Vec<String> {
        self.buf.extend_from_slice(bytes);
        let mut out = Vec::new();
        while let Some((end, sep)) = boundary(&self.buf) {
            let event: Vec<u8> = self.buf.drain(..end + sep).take(end).collect();
            let mut data = String::new();
            for line in String::from_utf8_lossy(&event).lines() {
                if let Some(d) = line.strip_prefix("data:") {
                    if !data.is_empty() {
                        data.push('\n');
                    }
                    data.push_str(d.strip_prefix(' ').unwrap_or(d));
                }
            }
            if !data.is_empty() {
                out.push(data);
            }
        }
        out
    }
}

/// Where the first event ends: its length and the separator's.
fn boundary(buf: &[u8]) -> Option<(usize, usize)> {
    let lf = memfind(buf, b"\n\n").map(|i| (i, 2));
    let crlf = memfind(buf, b"\r\n\r\n").map(|i| (i, 4));
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

fn memfind(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_across_chunks() {
        let mut e = Events::default();
        assert!(e.feed(b"event: message\ndata: {\"a\"").is_empty());
        assert_eq!(
            e.feed(b":1}\n\ndata: x\r\n\r\n: ping\n\n"),
            vec!["{\"a\":1}".to_owned(), "x".to_owned()]
        );
        assert_eq!(e.feed(b"data: a\ndata: b\n\n"), vec!["a\nb".to_owned()]);
    }
}
