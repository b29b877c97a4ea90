//! The cache key: a 128-bit hash of what determines an answer — the namespace, the endpoint,
//! the model group and every member of the JSON body except those that do not change the
//! answer (the end user, metadata, sluice's and LiteLLM's routing and cache fields). Members
//! are hashed in name order, as the client wrote their values, so two clients that order
//! their fields differently share entries. The hash (XXH3) is seeded with a secret of the
//! process, so that nobody can craft a request whose key collides with another's.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use serde_json::value::RawValue;
use sluice_core::endpoint::Endpoint;
use xxhash_rust::xxh3::Xxh3;

/// Body members that do not change the answer: left out of the key.
/// `stream` and `stream_options` are left out too: an answer serves either shape
/// ([`crate::shape`]).
const NOT_IN_KEY: [&str; 12] = [
    "user",
    "metadata",
    "litellm_metadata",
    "cache",
    "fallbacks",
    "num_retries",
    "timeout",
    "tags",
    "guardrails",
    "mock_testing_fallbacks",
    "stream",
    "stream_options",
];

/// The members that hold a prompt's text: left out of a semantic cache's context.
pub const PROMPT: [&str; 5] = ["messages", "prompt", "input", "instructions", "system"];

/// A request's cache key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CacheKey(pub u128);

impl CacheKey {
    /// The key of a request to `endpoint` for `group`, under `seed` (the cache's secret);
    /// `None` when the body is not a JSON object (such a request is not cached).
    pub fn of(
        seed: u64,
        namespace: Option<&str>,
        endpoint: Endpoint,
        group: &str,
        body: &[u8],
    ) -> Option<Self> {
        Self::hash(seed, namespace, endpoint, group, body, &[])
    }

    /// The semantic cache's context of a request: the same hash as [`CacheKey::of`] but
    /// without the prompt (`messages`, `prompt`, `input`, `instructions`, `system`), so that
    /// two requests with the same context differ only in their prompt text and a close prompt
    /// may answer for the other. Marked so that it never equals an exact key.
    pub fn context_of(
        seed: u64,
        namespace: Option<&str>,
        endpoint: Endpoint,
        group: &str,
        body: &[u8],
    ) -> Option<Self> {
        Self::hash(seed, namespace, endpoint, group, body, &PROMPT)
    }

    fn hash(
        seed: u64,
        namespace: Option<&str>,
        endpoint: Endpoint,
        group: &str,
        body: &[u8],
        skip: &[&str],
    ) -> Option<Self> {
        let members = sorted_members(body)?;
        let members = members.iter().map(|(k, v)| (k.as_ref(), *v));
        Some(Self::digest(
            seed, namespace, endpoint, group, members, skip,
        ))
    }

    /// The key of each item of an embeddings batch: the request with `input` set to that item
    /// alone, so that an input asked on its own (`"input": "x"`) and in a batch share an
    /// entry. `None` when the body is not an object whose `input` is an array of texts or of
    /// token arrays.
    pub fn of_inputs<'b>(
        seed: u64,
        namespace: Option<&str>,
        group: &str,
        body: &'b [u8],
    ) -> Option<Vec<(Self, &'b RawValue)>> {
        let mut members: BTreeMap<String, &'b RawValue> = serde_json::from_slice(body).ok()?;
        let items: Vec<&'b RawValue> = serde_json::from_str(members.get("input")?.get()).ok()?;
        // One list of token ids is a single input, not a batch.
        if items.is_empty()
            || items
                .iter()
                .any(|i| !matches!(i.get().as_bytes().first(), Some(b'"' | b'[')))
        {
            return None;
        }
        let mut keys = Vec::with_capacity(items.len());
        for item in items {
            members.insert("input".to_owned(), item);
            let sorted = members
                .iter()
                .map(|(k, v)| (k.as_str(), v.get().as_bytes()));
            keys.push((
                Self::digest(seed, namespace, Endpoint::Embeddings, group, sorted, &[]),
                item,
            ));
        }
        Some(keys)
    }

    /// The hash of `members` (in name order, each name once) but those in `skip` (a context,
    /// marked apart from exact keys).
    fn digest<'m>(
        seed: u64,
        namespace: Option<&str>,
        endpoint: Endpoint,
        group: &str,
        members: impl Iterator<Item = (&'m str, &'m [u8])>,
        skip: &[&str],
    ) -> Self {
        let mut h = Xxh3::with_seed(seed);
        let mut field = |bytes: &[u8]| {
            h.update(&(bytes.len() as u64).to_le_bytes());
            h.update(bytes);
        };
        if !skip.is_empty() {
            field(b"\0context");
        }
        field(namespace.unwrap_or("").as_bytes());
        field(endpoint.path().as_bytes());
        field(group.as_bytes());
        for (name, value) in members {
            if !NOT_IN_KEY.contains(&name) && !skip.contains(&name) {
                field(name.as_bytes());
                field(value);
            }
        }
        Self(h.digest128())
    }

    /// The key as LiteLLM shows it (`x-litellm-cache-key`): hexadecimal.
    pub fn hex(&self) -> String {
        format!("{:032x}", self.0)
    }

    /// A key from its hexadecimal form (`/cache/delete`).
    pub fn from_hex(s: &str) -> Option<Self> {
        // `from_str_radix` alone would take a leading `+`.
        (s.len() == 32 && s.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| u128::from_str_radix(s, 16).ok().map(Self))?
    }
}

/// The body's top-level members in name order, a name given twice keeping its last value (as
/// serde's map does), each value's bytes as the client wrote them: read by
/// `sluice_core::scan` without building the values (the pipeline's envelope has checked the
/// body is JSON). `None` when it is not an object.
fn sorted_members(body: &[u8]) -> Option<Vec<(Cow<'_, str>, &[u8])>> {
    let mut scan = sluice_core::scan::members(body)?;
    let mut out: Vec<(Cow<'_, str>, &[u8])> = Vec::with_capacity(8);
    for (key, range) in scan.by_ref() {
        let name = if memchr::memchr(b'\\', key).is_none() {
            Cow::Borrowed(std::str::from_utf8(key).ok()?)
        } else {
            // An escaped name means what it decodes to (`"\u006dodel"` is `model`).
            let quoted = [b"\"", key, b"\""].concat();
            Cow::Owned(serde_json::from_slice::<String>(&quoted).ok()?)
        };
        out.push((name, body.get(range)?));
    }
    if scan.failed() || !scan.complete {
        return None;
    }
    // Stable: of a name given twice, the later stays after the earlier, and wins.
    out.sort_by(|a, b| a.0.cmp(&b.0));
    let mut kept: Vec<(Cow<'_, str>, &[u8])> = Vec::with_capacity(out.len());
    for m in out {
        match kept.last_mut() {
            Some(last) if last.0 == m.0 => *last = m,
            _ => kept.push(m),
        }
    }
    Some(kept)
}

impl fmt::Display for CacheKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHAT: Endpoint = Endpoint::ChatCompletions;

    fn key(group: &str, body: &str) -> CacheKey {
        CacheKey::of(7, None, CHAT, group, body.as_bytes()).unwrap()
    }

    #[test]
    fn what_determines_the_answer_is_in_the_key_and_nothing_else() {
        let a = key(
            "gpt",
            r#"{"model":"gpt","messages":[{"role":"user","content":"hi"}],"temperature":0}"#,
        );
        // Field order, the end user, metadata and sluice's routing fields do not matter.
        let same = key(
            "gpt",
            r#"{"temperature":0,"user":"u1","metadata":{"x":1},"num_retries":2,"messages":[{"role":"user","content":"hi"}],"model":"gpt","cache":{"ttl":5}}"#,
        );
        assert_eq!(a, same);
        // The messages, a sampling parameter, the group, the endpoint and the namespace do.
        assert_ne!(
            a,
            key(
                "gpt",
                r#"{"model":"gpt","messages":[{"role":"user","content":"ho"}],"temperature":0}"#
            )
        );
        assert_ne!(
            a,
            key(
                "gpt",
                r#"{"model":"gpt","messages":[{"role":"user","content":"hi"}],"temperature":1}"#
            )
        );
        assert_ne!(
            a,
            key(
                "other",
                r#"{"model":"gpt","messages":[{"role":"user","content":"hi"}],"temperature":0}"#
            )
        );
        let body =
            br#"{"model":"gpt","messages":[{"role":"user","content":"hi"}],"temperature":0}"#;
        assert_ne!(
            Some(a),
            CacheKey::of(7, None, Endpoint::Completions, "gpt", body)
        );
        assert_ne!(Some(a), CacheKey::of(7, Some("team-a"), CHAT, "gpt", body));
        // A stream is the same answer told another way (its flight is another, `shape`).
        assert_eq!(
            a,
            key(
                "gpt",
                r#"{"model":"gpt","messages":[{"role":"user","content":"hi"}],"temperature":0,"stream":true}"#
            )
        );
        assert_eq!(CacheKey::of(7, None, CHAT, "gpt", b"[1,2]"), None);
        assert_ne!(
            Some(a),
            CacheKey::of(8, None, CHAT, "gpt", body),
            "another secret"
        );
        assert_eq!(CacheKey::from_hex(&a.hex()), Some(a));
        assert_eq!(CacheKey::from_hex("xyz"), None);
        // Read by the scanner as serde reads a map: an escaped name is its decoded name, a name
        // given twice keeps its last value; a body that is not a whole object is not keyed.
        let k = |body: &str| CacheKey::of(7, None, CHAT, "gpt", body.as_bytes());
        assert_eq!(
            k(r#"{"\u006dodel":"gpt","messages":[]}"#),
            k(r#"{"model":"gpt","messages":[]}"#)
        );
        assert_eq!(
            k(r#"{"temperature":1,"messages":[],"temperature":0}"#),
            k(r#"{"messages":[],"temperature":0}"#)
        );
        assert_eq!(k(r#"{"messages":[]"#), None);
        // An embeddings batch: each item keyed as if asked alone.
        let batch = br#"{"model":"e","input":["a", [1,2]],"dimensions":8}"#;
        let items = CacheKey::of_inputs(7, None, "e", batch).unwrap();
        assert_eq!(items.len(), 2);
        assert_eq!(
            Some(items[0].0),
            CacheKey::of(
                7,
                None,
                Endpoint::Embeddings,
                "e",
                br#"{"model":"e","input":"a","dimensions":8}"#
            )
        );
        assert_eq!(items[1].1.get(), "[1,2]");
        assert!(
            CacheKey::of_inputs(7, None, "e", br#"{"input":[1,2]}"#).is_none(),
            "token ids"
        );
        assert!(CacheKey::of_inputs(7, None, "e", br#"{"input":"a"}"#).is_none());
        assert!(CacheKey::of_inputs(7, None, "e", br#"{"input":[]}"#).is_none());
        // Found by fuzzing (cache_wire): a leading `+` read as a key.
        assert_eq!(CacheKey::from_hex(&format!("+{}", "0".repeat(31))), None);
    }

    #[test]
    fn a_context_is_the_key_without_the_prompt() {
        let ctx = |ns: Option<&str>, endpoint: Endpoint, group: &str, body: &str| {
            CacheKey::context_of(7, ns, endpoint, group, body.as_bytes()).unwrap()
        };
        let a = ctx(
            None,
            CHAT,
            "gpt",
            r#"{"model":"gpt","messages":[{"role":"user","content":"What is the capital of France?"}],"temperature":0}"#,
        );
        // Another prompt, the same model, temperature and stream: the same context.
        let b = ctx(
            None,
            CHAT,
            "gpt",
            r#"{"temperature":0,"model":"gpt","user":"u","messages":[{"role":"user","content":"capital of france"}]}"#,
        );
        assert_eq!(a, b);
        let body = r#"{"model":"gpt","messages":[{"role":"user","content":"x"}],"temperature":0}"#;
        assert_eq!(a, ctx(None, CHAT, "gpt", body));
        assert_ne!(
            Some(a),
            CacheKey::of(7, None, CHAT, "gpt", body.as_bytes()),
            "never an exact key"
        );
        // Everything else that determines the answer still does.
        let other_temperature = r#"{"model":"gpt","messages":[],"temperature":1}"#;
        assert_ne!(a, ctx(None, CHAT, "gpt", other_temperature));
        assert_ne!(a, ctx(None, CHAT, "other", body));
        assert_ne!(a, ctx(None, Endpoint::Completions, "gpt", body));
        assert_ne!(a, ctx(Some("team-a"), CHAT, "gpt", body));
        // `stream` is how the answer is told, in neither key (`shape`).
        let stream = r#"{"model":"gpt","messages":[],"temperature":0,"stream":true}"#;
        assert_eq!(a, ctx(None, CHAT, "gpt", stream));
        // The prompt members of the other endpoints are left out too.
        let r = |body: &str| ctx(None, Endpoint::Responses, "gpt", body);
        assert_eq!(
            r(r#"{"model":"gpt","input":"a","instructions":"b"}"#),
            r(r#"{"model":"gpt","input":"c"}"#)
        );
        let m = |body: &str| ctx(None, Endpoint::Messages, "gpt", body);
        assert_eq!(
            m(r#"{"model":"gpt","max_tokens":5,"system":"s","messages":[]}"#),
            m(r#"{"model":"gpt","max_tokens":5,"messages":[1]}"#)
        );
        assert_ne!(
            m(r#"{"model":"gpt","max_tokens":5}"#),
            m(r#"{"model":"gpt","max_tokens":6}"#)
        );
    }
}
