//! The top-level members of a JSON object, found without building anything. Reading one member
//! of an answer (its `usage`) through serde walks every token of every other member through the
//! deserializer's machinery; this walks structure byte by byte and jumps through strings with
//! `memchr`, several times cheaper, and leaves the one member wanted to serde.
//!
//! It trusts the document to be JSON (an upstream's answer, or a body serde has read already):
//! on anything it does not expect it stops, and callers fall back to serde.

use std::ops::Range;

/// An iterator over `(key, value range)` of the top-level members of a JSON object. The key is
/// the raw bytes between its quotes (escapes left as they are); the range indexes the document.
#[derive(Debug, Clone)]
pub struct Members<'a> {
    doc: &'a [u8],
    /// Forwards: where the next member starts. Backwards: the separator (`,`) or closing
    /// brace just after the next member to read.
    at: usize,
    /// Read from the last member to the first ([`members_rev`]).
    backwards: bool,
    /// Backwards, before the first member: `{}` is told apart there.
    first: bool,
    /// Set when the brace that ends the scan was reached (the closing one forwards, the opening
    /// one backwards): a scan that ends otherwise was cut short.
    pub complete: bool,
    failed: bool,
}

/// The members of `doc`, or `None` when it does not start (after white space) with `{`.
pub fn members(doc: &[u8]) -> Option<Members<'_>> {
    let at = skip_ws(doc, 0);
    (doc.get(at) == Some(&b'{')).then_some(Members {
        doc,
        at: at + 1,
        backwards: false,
        first: true,
        complete: false,
        failed: false,
    })
}

impl Members<'_> {
    /// True when the scan stopped on something that is not JSON.
    pub fn failed(&self) -> bool {
        self.failed
    }
}

impl<'a> Iterator for Members<'a> {
    type Item = (&'a [u8], Range<usize>);

    fn next(&mut self) -> Option<Self::Item> {
        if self.complete || self.failed {
            return None;
        }
        let item = if self.backwards {
            self.member_back()
        } else {
            self.member()
        };
        if item.is_none() && !self.complete {
            self.failed = true;
        }
        item
    }
}

impl<'a> Members<'a> {
    /// Reads one `"key": value` and the separator after it.
    fn member(&mut self) -> Option<(&'a [u8], Range<usize>)> {
        let doc = self.doc;
        let mut at = skip_ws(doc, self.at);
        match doc.get(at)? {
            b'}' => {
                self.complete = true;
                return None;
            }
            b'"' => {}
            _ => return None,
        }
        let key_end = string_end(doc, at)?;
        let key = &doc[at + 1..key_end - 1];
        at = skip_ws(doc, key_end);
        if doc.get(at) != Some(&b':') {
            return None;
        }
        let start = skip_ws(doc, at + 1);
        let end = value_end(doc, start)?;
        at = skip_ws(doc, end);
        match doc.get(at)? {
            b',' => self.at = at + 1,
            b'}' => {
                // The member is returned; the next call ends the scan.
                self.at = at;
            }
            _ => return None,
        }
        Some((key, start..end))
    }
}

/// The members of `doc` from the last to the first, or `None` when it does not end (before
/// white space) with `}`. An answer's `usage` is among its last members (OpenAI's is third from
/// the end, Anthropic's and the embeddings list's last): read from the end, the scan stops there
/// without walking the choices or the vectors before it.
pub fn members_rev(doc: &[u8]) -> Option<Members<'_>> {
    let end = skip_ws_back(doc, doc.len());
    (end > 0 && doc[end - 1] == b'}').then_some(Members {
        doc,
        at: end - 1,
        backwards: true,
        first: true,
        complete: false,
        failed: false,
    })
}

impl<'a> Members<'a> {
    /// Reads one `"key": value` backwards, and the separator or brace before it.
    fn member_back(&mut self) -> Option<(&'a [u8], Range<usize>)> {
        let doc = self.doc;
        let end = skip_ws_back(doc, self.at);
        if self.first {
            self.first = false;
            // `{}`: the brace that opens is the one before the closing one.
            if end > 0 && doc[end - 1] == b'{' {
                self.complete = skip_ws_back(doc, end - 1) == 0;
                return None;
            }
        }
        let start = value_start(doc, end)?;
        let colon = skip_ws_back(doc, start);
        if colon == 0 || doc[colon - 1] != b':' {
            return None;
        }
        let key_end = skip_ws_back(doc, colon - 1);
        if key_end == 0 || doc[key_end - 1] != b'"' {
            return None;
        }
        let key_start = string_start(doc, key_end - 1)?;
        let before = skip_ws_back(doc, key_start);
        match before.checked_sub(1).map(|i| doc[i])? {
            b',' => self.at = before - 1,
            b'{' => {
                // The member is returned; the next call ends the scan.
                self.complete = skip_ws_back(doc, before - 1) == 0;
                if !self.complete {
                    // Something stands before the object's brace: not one object.
                    return None;
                }
            }
            _ => return None,
        }
        Some((&doc[key_start + 1..key_end - 1], start..end))
    }
}

/// The index just past the last byte before `at` that is not white space.
fn skip_ws_back(doc: &[u8], mut at: usize) -> usize {
    while at > 0 && matches!(doc[at - 1], b' ' | b'\n' | b'\r' | b'\t') {
        at -= 1;
    }
    at
}

/// The index of the quote that opens the string whose closing quote is at `close`: the nearest
/// quote before it not escaped by an odd run of backslashes (inside a string every quote is).
fn string_start(doc: &[u8], close: usize) -> Option<usize> {
    let mut end = close;
    loop {
        let q = memchr::memrchr(b'"', &doc[..end])?;
        let slashes = doc[..q].iter().rev().take_while(|b| **b == b'\\').count();
        if slashes % 2 == 0 {
            return Some(q);
        }
        end = q;
    }
}

/// The index where the value that ends just before `end` starts.
fn value_start(doc: &[u8], end: usize) -> Option<usize> {
    match *doc.get(end.checked_sub(1)?)? {
        b'"' => string_start(doc, end - 1),
        close @ (b'}' | b']') => {
            let open = if close == b'}' { b'{' } else { b'[' };
            let mut depth = 0usize;
            let mut i = end;
            loop {
                i = memchr::memrchr3(b'"', open, close, &doc[..i])?;
                match doc[i] {
                    b'"' => {
                        i = string_start(doc, i)?;
                        continue;
                    }
                    b if b == close => depth += 1,
                    _ => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i);
                        }
                    }
                }
            }
        }
        _ => {
            let len = doc[..end].iter().rev().position(|b| {
                matches!(b, b':' | b',' | b'[' | b'{' | b' ' | b'\n' | b'\r' | b'\t')
            })?;
            (len > 0).then_some(end - len)
        }
    }
}

/// Whether `doc` nests `limit` or more arrays and objects deep (the outermost counted). `doc`
/// must be JSON that serde has validated. Most bodies have fewer brackets in all than the
/// limit, which one vector count settles; only the others are walked, counting brackets
/// outside strings.
pub fn nests_at_least(doc: &[u8], limit: usize) -> bool {
    if memchr::memchr2_iter(b'{', b'[', doc)
        .nth(limit.saturating_sub(1))
        .is_none()
    {
        return false;
    }
    let mut depth = 0usize;
    let mut i = 0;
    while let Some(&b) = doc.get(i) {
        match b {
            b'"' => match string_end(doc, i) {
                Some(end) => {
                    i = end;
                    continue;
                }
                None => return false,
            },
            b'[' | b'{' => {
                depth += 1;
                if depth >= limit {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    false
}

fn skip_ws(doc: &[u8], mut at: usize) -> usize {
    while let Some(b' ' | b'\n' | b'\r' | b'\t') = doc.get(at) {
        at += 1;
    }
    at
}

/// The index just past the string that opens at `at` (which holds `"`).
fn string_end(doc: &[u8], at: usize) -> Option<usize> {
    let mut i = at + 1;
    loop {
        i += memchr::memchr2(b'"', b'\\', doc.get(i..)?)?;
        if doc[i] == b'"' {
            return Some(i + 1);
        }
        // A backslash escapes the next byte (`\uXXXX` needs no more: its digits are plain).
        i += 2;
    }
}

/// The index just past the value that starts at `at`.
fn value_end(doc: &[u8], at: usize) -> Option<usize> {
    match doc.get(at)? {
        b'"' => string_end(doc, at),
        // JSON nests properly, so the bracket that closes the value is found by counting only
        // its own kind (and skipping strings): three bytes to look for, so `memchr3` jumps
        // over everything else instead of a byte-by-byte loop.
        &open @ (b'{' | b'[') => {
            let close = if open == b'{' { b'}' } else { b']' };
            let mut depth = 0usize;
            let mut i = at;
            loop {
                i += memchr::memchr3(b'"', open, close, doc.get(i..)?)?;
                match doc[i] {
                    b'"' => {
                        i = string_end(doc, i)?;
                        continue;
                    }
                    b if b == open => depth += 1,
                    _ => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                }
                i += 1;
            }
        }
        // A number, `true`, `false` or `null`: up to the next separator.
        _ => {
            let len = doc[at..]
                .iter()
                .position(|b| matches!(b, b',' | b'}' | b']' | b' ' | b'\n' | b'\r' | b'\t'))?;
            (len > 0).then_some(at + len)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(doc: &[u8]) -> (Vec<(String, String)>, bool) {
        let mut m = members(doc).unwrap();
        let got = m
            .by_ref()
            .map(|(k, r)| {
                (
                    String::from_utf8_lossy(k).into_owned(),
                    String::from_utf8_lossy(&doc[r]).into_owned(),
                )
            })
            .collect();
        (got, m.complete)
    }

    #[test]
    fn members_and_their_values() {
        let doc = br#" { "id" : "x\"}{" , "n":-1.5e3,"ok":true,"none":null,
            "choices":[{"message":{"content":"a \\\" } ] \"usage\":{}"}}],"usage":{"prompt_tokens":3} } "#;
        let (got, complete) = keys(doc);
        assert!(complete);
        let names: Vec<&str> = got.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["id", "n", "ok", "none", "choices", "usage"]);
        assert_eq!(got[0].1, r#""x\"}{""#);
        assert_eq!(got[1].1, "-1.5e3");
        assert_eq!(got[3].1, "null");
        assert_eq!(got[5].1, r#"{"prompt_tokens":3}"#);
    }

    #[test]
    fn mixed_nesting_closes_on_the_values_own_bracket() {
        let doc = br#"{"a":[{"b":[1,{"c":"]}\"]"}],"e":{}}],"d":{"x":[[]],"y":{"z":"}"}},"f":2}"#;
        let (got, complete) = keys(doc);
        assert!(complete);
        assert_eq!(got[0].1, r#"[{"b":[1,{"c":"]}\"]"}],"e":{}}]"#);
        assert_eq!(got[1].1, r#"{"x":[[]],"y":{"z":"}"}}"#);
        assert_eq!(got[2], ("f".to_owned(), "2".to_owned()));
    }

    #[test]
    fn empty_object_and_what_is_not_an_object() {
        let (got, complete) = keys(b"{}");
        assert!(got.is_empty() && complete);
        assert!(members(b"[1]").is_none());
        assert!(members(b"").is_none());
    }

    #[test]
    fn nesting_is_measured_outside_strings() {
        let deep = |n: usize| format!("{{\"a\":{}{}}}", "[".repeat(n), "]".repeat(n));
        assert!(!nests_at_least(deep(126).as_bytes(), 128));
        assert!(nests_at_least(deep(127).as_bytes(), 128));
        // Brackets inside strings count for the quick test but not for the walk.
        let quoted = format!(r#"{{"a":"{}","b":[{{}}]}}"#, "[{".repeat(100));
        assert!(!nests_at_least(quoted.as_bytes(), 128));
        let escaped = format!(r#"{{"a":"\"{}","b":[]}}"#, "[".repeat(200));
        assert!(!nests_at_least(escaped.as_bytes(), 128));
        assert!(!nests_at_least(b"{}", 128));
        assert!(nests_at_least(b"[[]]", 2) && !nests_at_least(b"[[]]", 3));
    }

    /// The backward scan finds what the forward one finds, in the other order.
    #[test]
    fn read_backwards_the_members_are_the_same() {
        let docs: [&[u8]; 7] = [
            br#" { "id" : "x\"}{" , "n":-1.5e3,"ok":true,"none":null,
            "choices":[{"message":{"content":"a \\\" } ] \"usage\":{}"}}],"usage":{"prompt_tokens":3} } "#,
            br#"{"a":[{"b":[1,{"c":"]}\"]"}],"e":{}}],"d":{"x":[[]],"y":{"z":"}"}},"f":2}"#,
            br#"{"k\\":"v\\","\"q\"":"\\\"","e":""}"#,
            br#"{}"#,
            b"\n{\"only\":[]}\n",
            br#"{"a":{"b":"{[\"}"},"c":["]","}"]}"#,
            br#"{"n":0,"m":[-1,2.5e-3,true,false,null]}"#,
        ];
        for doc in docs {
            let (mut forward, complete) = keys(doc);
            assert!(complete, "{}", String::from_utf8_lossy(doc));
            let mut rev = members_rev(doc).unwrap();
            let backward: Vec<(String, String)> = rev
                .by_ref()
                .map(|(k, r)| {
                    (
                        String::from_utf8_lossy(k).into_owned(),
                        String::from_utf8_lossy(&doc[r]).into_owned(),
                    )
                })
                .collect();
            assert!(
                rev.complete && !rev.failed(),
                "{}",
                String::from_utf8_lossy(doc)
            );
            forward.reverse();
            assert_eq!(backward, forward);
        }
    }

    /// Every JSON object of the checked-in fuzz corpora (request bodies, stored answers, admin
    /// bodies): both directions read the same members, and what is not a JSON object fails.
    #[test]
    fn both_directions_agree_on_the_corpora() {
        fn check(doc: &[u8]) {
            let valid = matches!(
                serde_json::from_slice::<serde_json::Value>(doc),
                Ok(serde_json::Value::Object(_))
            );
            let Some(mut rev) = members_rev(doc) else {
                return;
            };
            let backward: Vec<_> = rev.by_ref().collect();
            if !valid {
                return;
            }
            let mut fwd = members(doc).unwrap();
            let mut forward: Vec<_> = fwd.by_ref().collect();
            assert!(fwd.complete && rev.complete && !rev.failed());
            forward.reverse();
            assert_eq!(backward, forward);
        }
        let dir = env!("CARGO_MANIFEST_DIR");
        for corpus in ["envelope_splice", "admin_body", "cache_wire", "config_load"] {
            crate::fuzz::replay(dir, corpus, check);
        }
        // And the providers' recorded answers (tests/fixtures/<provider>/*.json).
        let fixtures = std::path::Path::new(dir).join("../../tests/fixtures");
        let mut n = 0;
        for provider in std::fs::read_dir(&fixtures).unwrap() {
            for file in std::fs::read_dir(provider.unwrap().path()).unwrap() {
                let path = file.unwrap().path();
                if path.extension().is_some_and(|e| e == "json") {
                    check(&std::fs::read(&path).unwrap());
                    n += 1;
                }
            }
        }
        assert!(n >= 10, "{n} fixtures under {}", fixtures.display());
    }

    #[test]
    fn read_backwards_a_broken_document_fails() {
        assert!(members_rev(br#"{"a":1,"usage":{"x":1"#).is_none());
        assert!(members_rev(b"[1]").is_none());
        for doc in [
            &br#"{"a":1 "b":2}"#[..],
            br#"{"a" 1}"#,
            br#"{"a":}"#,
            br#"x{"a":1}"#,
            br#"{"a":1}}"#,
            br#""a":1}"#,
            br#"{"a":"x"y"}"#,
        ] {
            let mut m = members_rev(doc).unwrap();
            let _ = m.by_ref().count();
            assert!(
                m.failed() && !m.complete,
                "{}",
                String::from_utf8_lossy(doc)
            );
        }
    }

    #[test]
    fn a_cut_or_broken_document_fails_instead_of_guessing() {
        for doc in [
            &br#"{"a":1,"usage":{"x":1"#[..],
            br#"{"a":"unterminated"#,
            br#"{"a" 1}"#,
            br#"{"a":1 "b":2}"#,
            br#"{"a":}"#,
            br#"{"a":"x\"#,
        ] {
            let mut m = members(doc).unwrap();
            let _ = m.by_ref().count();
            assert!(
                m.failed() && !m.complete,
                "{}",
                String::from_utf8_lossy(doc)
            );
        }
    }
}
