//! The fuzz target over the request check of sluice's own HTTP/1.1 path (fuzz/README.md,
//! `h1_request`): what it takes must be a request whose end no other reader could place
//! elsewhere.

use bytes::Bytes;

use super::request::{build, check, Parsed};
use super::MAX_BODY;

/// The first byte picks the limits, the rest is what a client sent. Whatever the bytes: no
/// panic; a head taken here is HTTP/1.1 with no transfer coding, upgrade or expectation and
/// at most one `Content-Length`, which is its body's length; every shorter read of the same
/// bytes asks for more (a read boundary never changes where a request ends); a longer one
/// finds the same head; and its parts, once built, carry no line break.
pub fn h1_request(data: &[u8]) {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let max_head = 32 + usize::from(first) * 64;
    let max_headers = 1 + usize::from(first % 100);
    let Parsed::Head(c) = check(rest, max_headers, max_head, MAX_BODY) else {
        return;
    };
    assert!(c.len <= max_head && c.len <= rest.len());
    let head = &rest[..c.len];
    assert!(
        head.windows(10).any(|w| w == b"HTTP/1.1\r\n")
            || head.windows(9).any(|w| w == b"HTTP/1.1\n")
    );
    let mut lengths = 0;
    for line in head.split(|&b| b == b'\n').skip(1) {
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let name = line[..colon].to_ascii_lowercase();
        assert!(
            !matches!(&name[..], b"transfer-encoding" | b"upgrade" | b"expect"),
            "{name:?} taken"
        );
        if name == b"content-length" {
            lengths += 1;
            let value = String::from_utf8_lossy(&line[colon + 1..]);
            assert_eq!(value.trim().parse::<usize>().ok(), Some(c.body));
        }
    }
    assert!(lengths <= 1);
    if lengths == 0 {
        assert_eq!(c.body, 0);
    }
    if rest.len() <= 4096 {
        for n in 0..c.len {
            assert!(
                matches!(
                    check(&rest[..n], max_headers, max_head, MAX_BODY),
                    Parsed::Partial
                ),
                "a prefix of {n} bytes"
            );
        }
    }
    if let Some(h) = build(&Bytes::copy_from_slice(rest), &c) {
        for (_, v) in &h.headers {
            assert!(!v.as_bytes().contains(&b'\n') && !v.as_bytes().contains(&b'\r'));
        }
    }
}
