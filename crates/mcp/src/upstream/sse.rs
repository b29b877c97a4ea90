//! Server-sent events as MCP servers send them: events split as bytes arrive, each event's
//! `data:` lines joined and its `event:` name kept (the SSE transport names its events
//! `endpoint` and `message`). Only what MCP needs (no `retry`, ids ignored).

/// One complete event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Event {
    /// `event:`; `message` when the event names none (the SSE default).
    pub(super) name: String,
    /// The `data:` lines, joined with `\n`.
    pub(super) data: String,
}

/// Collects bytes and yields each complete event.
#[derive(Debug, Default)]
pub(super) struct Events {
    buf: Vec<u8>,
    /// How far `buf` has been searched for a boundary (a long event arriving in many
    /// chunks is not searched from its start again each time).
    searched: usize,
}

impl Events {
    /// Add bytes; returns the data of every event they completed (events without data, such
    /// as keep-alive comments, are passed over).
    pub(super) fn feed(&mut self, bytes: &[u8]) -> Vec<String> {
        self.feed_events(bytes)
            .into_iter()
            .map(|e| e.data)
            .collect()
    }

    /// Add bytes; returns every event with data they completed, with its name.
    pub(super) fn feed_events(&mut self, bytes: &[u8]) -> Vec<Event> {
        self.buf.extend_from_slice(bytes);
        let mut out = Vec::new();
        while let Some((end, sep)) = boundary(&self.buf, self.searched.saturating_sub(3)) {
            let event: Vec<u8> = self.buf.drain(..end + sep).take(end).collect();
            self.searched = 0;
            if let Some(e) = parse(&event) {
                out.push(e);
            }
        }
        self.searched = self.buf.len();
        out
    }

    /// Bytes of an event not yet complete (bounded by the caller).
    pub(super) fn pending(&self) -> usize {
        self.buf.len()
    }
}

fn parse(event: &[u8]) -> Option<Event> {
    let mut data = String::new();
    let mut has_data = false;
    let mut name = None;
    for line in String::from_utf8_lossy(event).lines() {
        if let Some(d) = line.strip_prefix("data:") {
            if has_data {
                data.push('\n');
            }
            has_data = true;
            data.push_str(d.strip_prefix(' ').unwrap_or(d));
        } else if let Some(n) = line.strip_prefix("event:") {
            name = Some(n.strip_prefix(' ').unwrap_or(n).to_owned());
        }
    }
    (has_data && !data.is_empty()).then(|| Event {
        name: name.unwrap_or_else(|| "message".into()),
        data,
    })
}

/// Where the first event ends, searching from `from`: its length and the separator's.
fn boundary(buf: &[u8], from: usize) -> Option<(usize, usize)> {
    let hay = buf.get(from..)?;
    let lf = memfind(hay, b"\n\n").map(|i| (from + i, 2));
    let crlf = memfind(hay, b"\r\n\r\n").map(|i| (from + i, 4));
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

    #[test]
    fn events_keep_their_names() {
        let mut e = Events::default();
        let got = e.feed_events(b"event: endpoint\ndata: /messages?session_id=1\n\n: ping\n\n");
        assert_eq!(
            got,
            vec![Event {
                name: "endpoint".into(),
                data: "/messages?session_id=1".into()
            }]
        );
        // A boundary split between chunks, and an event without a name.
        assert!(e.feed_events(b"data: {}\n").is_empty());
        assert_eq!(e.pending(), 9);
        let got = e.feed_events(b"\nevent:message\ndata:{\"id\":1}\r\n\r\n");
        assert_eq!(got.len(), 2);
        assert_eq!(
            (got[0].name.as_str(), got[0].data.as_str()),
            ("message", "{}")
        );
        assert_eq!(
            (got[1].name.as_str(), got[1].data.as_str()),
            ("message", "{\"id\":1}")
        );
        assert_eq!(e.pending(), 0);
    }
}
