//! Verified tokens, by SHA-256 of the token, so a repeated token costs one digest and one
//! lock-free read instead of a signature check and two JSON parses.
//!
//! Keyed by a digest, not the token: a 1 KB token is not kept twice, and a collision-resistant
//! digest means a different token can never read another's claims. Each entry carries the key
//! set generation it was verified under; the holder ([`crate::Keys`]) serves an entry only under
//! the current generation, so replacing the key set invalidates every entry at once, even one
//! inserted by a verification that raced the swap.

use std::hash::{BuildHasherDefault, Hash, Hasher};

use crate::verify::Claims;

/// A token's SHA-256.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct TokenDigest([u8; 32]);

impl TokenDigest {
    pub(crate) fn of(token: &str) -> Self {
        let d = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
        let mut out = [0u8; 32];
        out.copy_from_slice(d.as_ref());
        Self(out)
    }
}

impl Hash for TokenDigest {
    /// The digest is already uniform, so its first 8 bytes are the hash. Flooding is not a
    /// concern: only tokens the IdP signed are ever inserted.
    fn hash<H: Hasher>(&self, state: &mut H) {
        let mut word = [0u8; 8];
        word.copy_from_slice(&self.0[..8]);
        state.write_u64(u64::from_le_bytes(word));
    }
}

/// Passes [`TokenDigest`]'s word through: no SipHash round on the hot path.
#[derive(Default)]
pub(crate) struct PassThrough(u64);

impl Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only reached if a key type other than TokenDigest is ever hashed with this; fold the
        // bytes in so it still works.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

#[derive(Clone)]
pub(crate) struct Entry {
    pub(crate) claims: Claims,
    /// First second at which the token is no longer valid (`exp + leeway`).
    pub(crate) valid_until: u64,
    /// The key set generation it was verified under.
    pub(crate) generation: u64,
}

/// The bounded map. When an insert finds it full, entries that are expired or from an older
/// key set are dropped; if that frees less than a quarter of it, everything is dropped. Each
/// sweep thus frees at least a quarter of the capacity, so its O(n) cost spreads over at
/// least n/4 inserts, and a full cache costs the tokens in it one re-verification each.
pub(crate) struct TokenCache {
    map: papaya::HashMap<TokenDigest, Entry, BuildHasherDefault<PassThrough>>,
    capacity: usize,
}

impl TokenCache {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            map: papaya::HashMap::builder()
                .hasher(BuildHasherDefault::default())
                .capacity(capacity.min(1024))
                .build(),
            capacity,
        }
    }

    /// The token's claims when an entry exists, is from `generation` and `now` is before its
    /// end; a stale entry found on the way is removed.
    pub(crate) fn get(&self, d: &TokenDigest, generation: u64, now: u64) -> Option<Claims> {
        let map = self.map.pin();
        let e = map.get(d)?;
        if e.generation == generation && now < e.valid_until {
            return Some(e.claims.clone());
        }
        map.remove(d);
        None
    }

    pub(crate) fn insert(&self, d: TokenDigest, entry: Entry, generation: u64, now: u64) {
        if self.capacity == 0 {
            return;
        }
        let map = self.map.pin();
        if map.len() >= self.capacity {
            map.retain(|_, e| e.generation == generation && now < e.valid_until);
            if map.len() > self.capacity - self.capacity / 4 {
                map.clear();
            }
        }
        map.insert(d, entry);
    }

    pub(crate) fn clear(&self) {
        self.map.pin().clear();
    }

    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn entry(valid_until: u64, generation: u64) -> Entry {
        Entry {
            claims: Arc::new(serde_json::Map::new()),
            valid_until,
            generation,
        }
    }

    #[test]
    fn entries_live_until_their_end_under_their_generation() {
        let c = TokenCache::new(10);
        let d = TokenDigest::of("t");
        c.insert(d, entry(100, 1), 1, 0);
        assert!(c.get(&d, 1, 99).is_some());
        assert!(c.get(&d, 2, 99).is_none());
        assert_eq!(
            c.len(),
            0,
            "an entry of another generation is removed when met"
        );
        c.insert(d, entry(100, 1), 1, 0);
        assert!(c.get(&d, 1, 100).is_none());
        assert_eq!(c.len(), 0);
        assert!(c.get(&TokenDigest::of("u"), 1, 0).is_none());
    }

    #[test]
    fn a_full_cache_sweeps_then_clears() {
        let c = TokenCache::new(8);
        for i in 0..8 {
            c.insert(TokenDigest::of(&i.to_string()), entry(10 + i, 1), 1, 0);
        }
        assert_eq!(c.len(), 8);
        // At now = 14, five entries (valid_until 10..=14) are over: the sweep frees them.
        c.insert(TokenDigest::of("new"), entry(100, 1), 1, 14);
        assert_eq!(c.len(), 4);
        for i in 0..4 {
            c.insert(TokenDigest::of(&format!("more{i}")), entry(100, 1), 1, 14);
        }
        assert_eq!(c.len(), 8);
        // Nothing is over: the sweep frees nothing, so everything goes.
        c.insert(TokenDigest::of("last"), entry(100, 1), 1, 14);
        assert_eq!(c.len(), 1);
        assert!(c.get(&TokenDigest::of("last"), 1, 14).is_some());
    }

    #[test]
    fn capacity_zero_disables_the_cache() {
        let c = TokenCache::new(0);
        let d = TokenDigest::of("t");
        c.insert(d, entry(100, 1), 1, 0);
        assert!(c.get(&d, 1, 0).is_none());
    }
}
