//! A stored answer as bytes, for a store outside the process (Redis): a short JSON head (what
//! the client's response needs besides the body, and when the answer was stored and expires,
//! in wall-clock time so that another instance reads the same age) followed by the body as
//! it is, so that reading an entry back slices its body without a copy.
//!
//! ```text
//! "SLC1" | head length (u32, big-endian) | head (JSON) | body
//! ```

use std::borrow::Cow;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::HeaderValue;
use serde::{Deserialize, Serialize};
use sluice_core::limits::Nanos;
use sluice_core::usage::Usage;

use crate::{Entry, Shape};

/// The format's tag and version: an entry in another format reads as a miss.
const MAGIC: &[u8; 4] = b"SLC1";

#[derive(Serialize, Deserialize)]
struct WireHead<'a> {
    status: u16,
    /// Borrowed unless it has escapes (a quoted `charset="utf-8"`).
    #[serde(borrow)]
    content_type: Cow<'a, str>,
    stream: bool,
    /// A stream with Chat Completions' usage chunk.
    #[serde(default)]
    usage_chunk: bool,
    usage: Option<Usage>,
    cost: Option<Nanos>,
    /// When it was stored, in Unix milliseconds.
    stored_ms: u64,
    /// When it expires, in Unix milliseconds.
    expires_ms: u64,
}

impl Entry {
    /// The entry as bytes, aged as of `now_ms` (Unix milliseconds).
    pub fn encode(&self, now_ms: u64) -> Vec<u8> {
        let age = ms(self.stored.elapsed());
        let stored_ms = now_ms.saturating_sub(age);
        let head = WireHead {
            status: self.status,
            content_type: Cow::Borrowed(self.content_type.to_str().unwrap_or("application/json")),
            stream: self.shape.is_stream(),
            usage_chunk: self.shape == Shape::Stream { usage: true },
            usage: self.usage,
            cost: self.cost,
            stored_ms,
            expires_ms: stored_ms.saturating_add(ms(self.ttl)),
        };
        let head = serde_json::to_vec(&head).unwrap_or_default();
        let mut out = Vec::with_capacity(8 + head.len() + self.body.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&u32::try_from(head.len()).unwrap_or(0).to_be_bytes());
        out.extend_from_slice(&head);
        out.extend_from_slice(&self.body);
        out
    }

    /// An entry read back at `now_ms` (Unix milliseconds) and `now`: its age as stored, its
    /// TTL what it has left. `None` when the bytes are not an entry or it has expired.
    pub fn decode(bytes: Bytes, now_ms: u64, now: Instant) -> Option<Self> {
        let rest = bytes.strip_prefix(MAGIC)?;
        let (len, rest) = rest.split_first_chunk::<4>()?;
        let len = usize::try_from(u32::from_be_bytes(*len)).ok()?;
        let head: WireHead<'_> = serde_json::from_slice(rest.get(..len)?).ok()?;
        let left = head.expires_ms.checked_sub(now_ms).filter(|l| *l > 0)?;
        let age = Duration::from_millis(now_ms.saturating_sub(head.stored_ms));
        let body_at = MAGIC.len() + 4 + len;
        Some(Self {
            status: head.status,
            content_type: HeaderValue::from_str(&head.content_type).ok()?,
            shape: if head.stream {
                Shape::Stream {
                    usage: head.usage_chunk,
                }
            } else {
                Shape::Whole
            },
            usage: head.usage,
            cost: head.cost,
            stored: now.checked_sub(age).unwrap_or(now),
            ttl: Duration::from_millis(left),
            body: bytes.slice(body_at..),
        })
    }
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry() -> Entry {
        Entry {
            status: 200,
            content_type: HeaderValue::from_static("text/event-stream"),
            body: Bytes::from_static(b"data: {\"x\":1}\n\ndata: [DONE]\n\n"),
            shape: Shape::Stream { usage: true },
            usage: Some(Usage {
                prompt_tokens: 7,
                completion_tokens: 3,
                ..Usage::default()
            }),
            cost: Some(1234),
            stored: Instant::now(),
            ttl: Duration::from_secs(60),
        }
    }

    #[test]
    fn an_entry_reads_back_as_it_was_with_its_age_and_time_left() {
        let e = entry();
        let bytes = Bytes::from(e.encode(1_000_000));
        // Read 10 s later by another instance.
        let now = Instant::now();
        let back = Entry::decode(bytes, 1_010_000, now).unwrap();
        assert_eq!(back.status, 200);
        assert_eq!(back.content_type, "text/event-stream");
        assert_eq!(back.shape, Shape::Stream { usage: true });
        assert_eq!(back.body, e.body);
        assert_eq!(back.usage, e.usage);
        assert_eq!(back.cost, Some(1234));
        assert_eq!(back.ttl, Duration::from_secs(50));
        assert!(now.duration_since(back.stored) >= Duration::from_secs(10));
    }

    /// Found by fuzzing (cache_wire): a content type with a quote or backslash was written
    /// escaped and could not be read back borrowed, so such answers never hit in Redis.
    #[test]
    fn content_types_with_escapes_read_back() {
        let mut e = entry();
        e.content_type = HeaderValue::from_static(r#"text/plain; charset="utf-8"; x=a\b"#);
        let back = Entry::decode(Bytes::from(e.encode(1_000_000)), 1_000_000, Instant::now());
        assert_eq!(back.unwrap().content_type, e.content_type);
    }

    #[test]
    fn expired_foreign_or_cut_bytes_read_as_nothing() {
        let bytes = Bytes::from(entry().encode(1_000_000));
        assert!(Entry::decode(bytes.clone(), 1_060_000, Instant::now()).is_none());
        assert!(Entry::decode(bytes.slice(..10), 1_000_000, Instant::now()).is_none());
        assert!(Entry::decode(Bytes::from_static(b"{\"a\":1}"), 0, Instant::now()).is_none());
        let mut other = bytes.to_vec();
        other[3] = b'9';
        assert!(Entry::decode(Bytes::from(other), 1_000_000, Instant::now()).is_none());
    }
}
