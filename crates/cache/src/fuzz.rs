//! The fuzz target over the cache's wire format (fuzz/README.md): `SLC1` entries as Redis
//! holds them and cache keys in hex (the invalidation messages instances send each other).

use std::time::{Duration, Instant};

use bytes::Bytes;
use http::HeaderValue;

use sluice_core::usage::Usage;

use crate::{CacheKey, Entry};

/// Wall-clock "now" of the target, in Unix milliseconds.
const NOW_MS: u64 = 1_750_000_000_000;

/// Any bytes read as an entry either fail or give an entry with time left;
/// an entry built from the input (content type from its first line) reads back as it was;
/// a key read from hex writes back as that hex.
pub fn cache_wire(data: &[u8]) {
    let now = Instant::now();
    // Any bytes: a miss, or an entry with time left whose body is the bytes after the head.
    // (A decoded entry's `ttl` is what it has left from now, its `stored` its age: sluice puts
    // it in memory and never writes it back, so it is not re-encoded here.)
    if let Some(e) = Entry::decode(Bytes::copy_from_slice(data), NOW_MS, now) {
        assert!(e.ttl > Duration::ZERO);
        assert!(data.ends_with(&e.body));
    }
    if let Some(nl) = data.iter().position(|b| *b == b'\n') {
        if let Ok(content_type) = HeaderValue::from_bytes(&data[..nl]) {
            let n = |i: usize| data.get(i).copied().map_or(0, u64::from);
            let e = Entry {
                status: 200 + u16::from(data[0] % 100),
                content_type,
                body: Bytes::copy_from_slice(&data[nl + 1..]),
                shape: match n(1) % 3 {
                    0 => crate::Shape::Whole,
                    k => crate::Shape::Stream { usage: k == 2 },
                },
                usage: (n(2) > 0).then(|| Usage {
                    prompt_tokens: n(2) << 40,
                    completion_tokens: n(3),
                    ..Usage::default()
                }),
                cost: (n(4) > 0).then(|| n(4) << 50),
                stored: now,
                ttl: Duration::from_secs(60 + n(5)),
            };
            let back = Entry::decode(Bytes::from(e.encode(NOW_MS)), NOW_MS, Instant::now())
                .expect("an entry reads back");
            assert_same(&e, &back);
        }
    }
    if let Some(hex) = data.get(..32).and_then(|h| std::str::from_utf8(h).ok()) {
        if let Some(key) = CacheKey::from_hex(hex) {
            assert_eq!(
                key.hex(),
                hex.to_ascii_lowercase(),
                "a key reads from its hex only"
            );
        }
    }
}

/// Everything an entry carries but its clock readings.
fn assert_same(a: &Entry, b: &Entry) {
    let content_type = a.content_type.to_str().unwrap_or("application/json");
    assert_eq!(content_type, b.content_type);
    assert_eq!(
        (a.status, a.shape, a.usage, a.cost, &a.body),
        (b.status, b.shape, b.usage, b.cost, &b.body)
    );
    assert!(b.ttl <= a.ttl);
}

#[cfg(test)]
mod tests {
    #[test]
    fn cache_wire_corpus() {
        sluice_core::fuzz::replay(env!("CARGO_MANIFEST_DIR"), "cache_wire", super::cache_wire);
    }
}
