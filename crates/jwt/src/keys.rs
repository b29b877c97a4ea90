//! The current key set, its age and refresh rules, and the verified-token cache that depends on
//! it, in one holder the gateway keeps for the life of a JWT configuration. No I/O: the gateway
//! fetches the JWKS when this says to and hands over the bytes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use crate::cache::{Entry, TokenCache, TokenDigest};
use crate::error::{JwksError, JwtError};
use crate::jwks::{Jwks, SkippedKey};
use crate::verify::{verify_until, Claims, Validation, MAX_TOKEN_LEN};

/// How long keys are trusted and how often they may be fetched: LiteLLM's `public_key_ttl` and
/// `public_key_stale_ttl` (same defaults), plus the two bounds sluice adds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeySettings {
    /// Seconds after a fetch when a refresh is due (LiteLLM's `public_key_ttl`, 600).
    pub public_key_ttl_secs: u64,
    /// Seconds past `public_key_ttl` that the last good set stays usable while refreshes fail
    /// (LiteLLM's `public_key_stale_ttl`, 3600); after that verification fails closed with
    /// [`JwtError::KeysStale`]. 0: fail closed as soon as a refresh is overdue.
    pub public_key_stale_ttl_secs: u64,
    /// Least seconds between two fetch attempts claimed through
    /// [`Keys::claim_refresh`] or [`Keys::claim_unknown_kid_refresh`], and after a successful
    /// install: a flood of tokens with made-up `kid`s, or a down IdP, costs at most one fetch
    /// per interval. Default 10.
    pub min_refresh_interval_secs: u64,
    /// Most verified tokens kept (default 10,000; 0 turns the cache off). See the crate docs
    /// for what happens when it fills.
    pub cache_capacity: usize,
}

impl Default for KeySettings {
    fn default() -> Self {
        Self {
            public_key_ttl_secs: 600,
            public_key_stale_ttl_secs: 3600,
            min_refresh_interval_secs: 10,
            cache_capacity: 10_000,
        }
    }
}

/// What an install did, for the gateway's log line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Installed {
    /// False when the fetched set holds the same keys as the current one: only the fetch time
    /// moved, and the token cache was kept.
    pub changed: bool,
    /// Usable keys in the set.
    pub keys: usize,
    /// Keys left out, with why.
    pub skipped: Vec<SkippedKey>,
}

/// "Never", for the time atomics (a real `now` never reaches it).
const NEVER: u64 = u64::MAX;

struct Snapshot {
    jwks: Arc<Jwks>,
    generation: u64,
}

/// The gateway's JWT verifier: the current key set (swapped whole on refresh), when it was
/// fetched, the claim rules, and the verified-token cache. Shared by reference across workers;
/// every method takes `&self` and `now` (Unix seconds).
pub struct Keys {
    settings: KeySettings,
    rules: Validation,
    current: RwLock<Option<Snapshot>>,
    /// The current snapshot's generation, readable without the lock; 0 until the first install.
    generation: AtomicU64,
    fetched_at: AtomicU64,
    last_claim: AtomicU64,
    cache: TokenCache,
}

impl Keys {
    /// An empty holder: every verification fails with [`JwtError::NoKeys`] and
    /// [`Keys::refresh_due`] is true until the first install.
    pub fn new(rules: Validation, settings: KeySettings) -> Self {
        Self {
            cache: TokenCache::new(settings.cache_capacity),
            settings,
            rules,
            current: RwLock::new(None),
            generation: AtomicU64::new(0),
            fetched_at: AtomicU64::new(NEVER),
            last_claim: AtomicU64::new(NEVER),
        }
    }

    /// Parses a fetched JWKS body and installs it (see [`Keys::replace`]). On error nothing
    /// changes: the previous set keeps serving, and keeps ageing towards stale.
    pub fn install(&self, body: &[u8], now: u64) -> Result<Installed, JwksError> {
        Ok(self.replace(Jwks::parse(body)?, now))
    }

    /// Makes `jwks` the current set, fetched at `now`. When its keys differ from the current
    /// ones, the token cache is emptied, and no verification starting after this returns is
    /// answered from one made under the old set: a token signed by a removed key is refused
    /// from then on.
    pub fn replace(&self, jwks: Jwks, now: u64) -> Installed {
        let keys = jwks.keys().len();
        let skipped = jwks.skipped().to_vec();
        let mut current = self.current.write().unwrap_or_else(PoisonError::into_inner);
        let changed = current.as_ref().is_none_or(|s| !s.jwks.same_keys(&jwks));
        if changed {
            let generation = current.as_ref().map_or(0, |s| s.generation) + 1;
            *current = Some(Snapshot {
                jwks: Arc::new(jwks),
                generation,
            });
            self.generation.store(generation, Ordering::Release);
        }
        self.fetched_at.store(now, Ordering::Release);
        drop(current);
        if changed {
            self.cache.clear();
        }
        Installed {
            changed,
            keys,
            skipped,
        }
    }

    /// Verifies a bearer token (without `Bearer `) at `now` and returns its claims. A token
    /// verified before, under the current key set and still valid, is answered from the cache:
    /// one SHA-256 of the token and one lock-free map read.
    pub fn verify(&self, token: &str, now: u64) -> Result<Claims, JwtError> {
        if token.len() > MAX_TOKEN_LEN {
            return Err(JwtError::Malformed("too long"));
        }
        let generation = self.generation.load(Ordering::Acquire);
        if generation == 0 {
            return Err(JwtError::NoKeys);
        }
        if self.is_stale(now) {
            return Err(JwtError::KeysStale);
        }
        let digest = TokenDigest::of(token);
        if let Some(claims) = self.cache.get(&digest, generation, now) {
            return Ok(claims);
        }
        let (jwks, verified_under) = self.snapshot().ok_or(JwtError::NoKeys)?;
        let (claims, valid_until) = verify_until(token, &jwks, &self.rules, now)?;
        self.cache.insert(
            digest,
            Entry {
                claims: claims.clone(),
                valid_until,
                generation: verified_under,
            },
            verified_under,
            now,
        );
        Ok(claims)
    }

    /// The current key set, if one was installed: for logs and admin views.
    pub fn current(&self) -> Option<Arc<Jwks>> {
        self.snapshot().map(|(jwks, _)| jwks)
    }

    fn snapshot(&self) -> Option<(Arc<Jwks>, u64)> {
        let current = self.current.read().unwrap_or_else(PoisonError::into_inner);
        current.as_ref().map(|s| (s.jwks.clone(), s.generation))
    }

    /// When the current set was installed (Unix seconds), `None` before the first install.
    pub fn fetched_at(&self) -> Option<u64> {
        match self.fetched_at.load(Ordering::Acquire) {
            NEVER => None,
            t => Some(t),
        }
    }

    /// Whether the set should be fetched again: never fetched, or at least `public_key_ttl`
    /// old. A query only; a background refresher polls it, request paths use
    /// [`Keys::claim_refresh`] so that one of them fetches.
    pub fn refresh_due(&self, now: u64) -> bool {
        self.fetched_at()
            .is_none_or(|t| now >= t.saturating_add(self.settings.public_key_ttl_secs))
    }

    /// Whether the set is too old to trust (older than `public_key_ttl + public_key_stale_ttl`,
    /// or never fetched): verification then fails closed with [`JwtError::KeysStale`].
    pub fn is_stale(&self, now: u64) -> bool {
        let trusted_for = self
            .settings
            .public_key_ttl_secs
            .saturating_add(self.settings.public_key_stale_ttl_secs);
        self.fetched_at()
            .is_none_or(|t| now > t.saturating_add(trusted_for))
    }

    /// True for exactly one caller when a refresh is due and no fetch was claimed (or
    /// installed) in the last `min_refresh_interval_secs`; that caller should fetch and
    /// [`Keys::install`]. Failed fetches are thus retried once per interval, not per request.
    pub fn claim_refresh(&self, now: u64) -> bool {
        self.refresh_due(now) && self.claim(now)
    }

    /// After [`JwtError::UnknownKid`]: true for exactly one caller when no fetch was claimed
    /// (or installed) in the last `min_refresh_interval_secs`; that caller should fetch,
    /// install, and verify the token again. Everyone else gets the refusal as is, so tokens
    /// with random `kid`s cannot make the gateway hammer the IdP.
    pub fn claim_unknown_kid_refresh(&self, now: u64) -> bool {
        self.claim(now)
    }

    fn claim(&self, now: u64) -> bool {
        let interval = self.settings.min_refresh_interval_secs;
        let recent = |t: u64| t != NEVER && now < t.saturating_add(interval);
        if recent(self.fetched_at.load(Ordering::Acquire)) {
            return false;
        }
        let mut last = self.last_claim.load(Ordering::Acquire);
        loop {
            if recent(last) {
                return false;
            }
            match self.last_claim.compare_exchange_weak(
                last,
                now,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return true,
                Err(seen) => last = seen,
            }
        }
    }

    /// Tokens in the verified cache, for metrics.
    pub fn cached_tokens(&self) -> usize {
        self.cache.len()
    }

    /// The claim rules this holder verifies with (fixed: cached answers depend on them).
    pub fn rules(&self) -> &Validation {
        &self.rules
    }

    /// The key settings this holder was built with.
    pub fn settings(&self) -> &KeySettings {
        &self.settings
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_keys::Signer;
    use serde_json::{json, Value};

    const T0: u64 = 1_800_000_000;

    fn keys() -> Keys {
        Keys::new(Validation::default(), KeySettings::default())
    }

    #[test]
    fn nothing_verifies_before_the_first_install() {
        let k = keys();
        let ec = Signer::ec();
        let t = ec.sign(&json!({"exp": T0 + 60}));
        assert_eq!(k.verify(&t, T0).unwrap_err(), JwtError::NoKeys);
        assert!(JwtError::NoKeys.is_unavailable());
        assert!(k.refresh_due(T0));
        assert!(k.is_stale(T0));
        assert_eq!(k.fetched_at(), None);
        assert!(k.current().is_none());
    }

    #[test]
    fn a_bad_body_leaves_the_current_set_in_place() {
        let k = keys();
        let ec = Signer::ec();
        k.install(&Signer::set_body(&[&ec]), T0).unwrap();
        assert!(k.install(b"<html>", T0 + 5).is_err());
        assert_eq!(k.fetched_at(), Some(T0));
        assert!(k.verify(&ec.sign(&json!({"exp": T0 + 60})), T0 + 5).is_ok());
    }

    #[test]
    fn the_cache_answers_repeats_without_verifying_again_and_stops_at_exp() {
        let k = keys();
        let ec = Signer::ec();
        k.install(&Signer::set_body(&[&ec]), T0).unwrap();
        let t = ec.sign(&json!({"sub": "u", "exp": T0 + 60}));
        let first = k.verify(&t, T0).unwrap();
        assert_eq!(k.cached_tokens(), 1);
        let again = k.verify(&t, T0 + 59).unwrap();
        assert!(
            Arc::ptr_eq(&first, &again),
            "the second answer is the cached map"
        );
        assert_eq!(again["sub"], Value::from("u"));
        assert_eq!(k.verify(&t, T0 + 60).unwrap_err(), JwtError::Expired);
        assert_eq!(k.cached_tokens(), 0, "the expired entry is dropped");
    }

    #[test]
    fn cached_entries_follow_the_leeway_like_a_fresh_verification() {
        let rules = Validation {
            leeway_secs: 5,
            ..Validation::default()
        };
        let k = Keys::new(rules, KeySettings::default());
        let ec = Signer::ec();
        k.install(&Signer::set_body(&[&ec]), T0).unwrap();
        let t = ec.sign(&json!({"exp": T0 + 60}));
        let first = k.verify(&t, T0).unwrap();
        assert!(Arc::ptr_eq(&first, &k.verify(&t, T0 + 64).unwrap()));
        assert_eq!(k.verify(&t, T0 + 65).unwrap_err(), JwtError::Expired);
    }

    #[test]
    fn a_cache_hit_does_not_verify_again() {
        // Proof by a token the current set cannot verify: served only if cached.
        let k = keys();
        let ec = Signer::ec();
        k.install(&Signer::set_body(&[&ec]), T0).unwrap();
        let t = ec.sign(&json!({"exp": T0 + 60}));
        k.verify(&t, T0).unwrap();
        // Swap the held set for one without the key, without bumping the generation: the
        // cache alone answers.
        let other = Signer::ec_with_kid("other");
        *k.current.write().unwrap() = Some(Snapshot {
            jwks: Arc::new(Signer::set(&[&other])),
            generation: 1,
        });
        assert!(k.verify(&t, T0 + 1).is_ok());
    }

    #[test]
    fn rotation_clears_the_cache_and_removed_keys_stop_verifying() {
        let k = keys();
        let old = Signer::ec_with_kid("old");
        let new = Signer::ec_with_kid("new");
        k.install(&Signer::set_body(&[&old]), T0).unwrap();
        let t = old.sign(&json!({"exp": T0 + 3600}));
        k.verify(&t, T0).unwrap();
        assert_eq!(k.cached_tokens(), 1);

        // The same keys again: the cache stays.
        let same = k.install(&Signer::set_body(&[&old]), T0 + 600).unwrap();
        assert!(!same.changed);
        assert_eq!(k.cached_tokens(), 1);
        assert_eq!(k.fetched_at(), Some(T0 + 600));

        let rotated = k.install(&Signer::set_body(&[&new]), T0 + 1200).unwrap();
        assert!(rotated.changed);
        assert_eq!(rotated.keys, 1);
        assert_eq!(k.cached_tokens(), 0);
        assert_eq!(k.verify(&t, T0 + 1201).unwrap_err(), JwtError::UnknownKid);
        let t2 = new.sign(&json!({"exp": T0 + 3600}));
        assert!(k.verify(&t2, T0 + 1201).is_ok());
    }

    #[test]
    fn an_entry_from_a_verification_that_raced_a_rotation_is_never_served() {
        let k = keys();
        let old = Signer::ec_with_kid("old");
        let new = Signer::ec_with_kid("new");
        k.install(&Signer::set_body(&[&old]), T0).unwrap();
        let t = old.sign(&json!({"exp": T0 + 3600}));
        // A verification that read generation 1 and inserts after the swap to generation 2.
        k.install(&Signer::set_body(&[&new]), T0 + 1).unwrap();
        let (claims, valid_until) =
            verify_until(&t, &Signer::set(&[&old]), k.rules(), T0 + 1).unwrap();
        k.cache.insert(
            TokenDigest::of(&t),
            Entry {
                claims,
                valid_until,
                generation: 1,
            },
            1,
            T0 + 1,
        );
        assert_eq!(k.verify(&t, T0 + 2).unwrap_err(), JwtError::UnknownKid);
    }

    #[test]
    fn refresh_due_then_stale_then_fail_closed() {
        let settings = KeySettings {
            public_key_ttl_secs: 600,
            public_key_stale_ttl_secs: 100,
            ..KeySettings::default()
        };
        let k = Keys::new(Validation::default(), settings);
        let ec = Signer::ec();
        k.install(&Signer::set_body(&[&ec]), T0).unwrap();
        let t = ec.sign(&json!({"exp": T0 + 10_000}));
        assert!(!k.refresh_due(T0 + 599));
        assert!(k.refresh_due(T0 + 600));
        assert!(!k.is_stale(T0 + 700));
        assert!(k.verify(&t, T0 + 700).is_ok());
        assert!(k.is_stale(T0 + 701));
        // Stale keys refuse even a cached token.
        let e = k.verify(&t, T0 + 701).unwrap_err();
        assert_eq!(e, JwtError::KeysStale);
        assert!(e.is_unavailable());
        // A successful refresh, even of the same keys, makes it fresh again.
        k.install(&Signer::set_body(&[&ec]), T0 + 800).unwrap();
        assert!(k.verify(&t, T0 + 800).is_ok());
        assert!(!k.refresh_due(T0 + 800));
    }

    #[test]
    fn stale_ttl_zero_fails_closed_once_the_ttl_passes() {
        let settings = KeySettings {
            public_key_ttl_secs: 600,
            public_key_stale_ttl_secs: 0,
            ..KeySettings::default()
        };
        let k = Keys::new(Validation::default(), settings);
        let ec = Signer::ec();
        k.install(&Signer::set_body(&[&ec]), T0).unwrap();
        let t = ec.sign(&json!({"exp": T0 + 10_000}));
        assert!(k.verify(&t, T0 + 600).is_ok());
        assert_eq!(k.verify(&t, T0 + 601).unwrap_err(), JwtError::KeysStale);
    }

    #[test]
    fn unknown_kid_refreshes_are_rate_limited() {
        let k = keys();
        let ec = Signer::ec();
        let stranger = Signer::ec_with_kid("rotated-in");
        k.install(&Signer::set_body(&[&ec]), T0).unwrap();
        let t = stranger.sign(&json!({"exp": T0 + 60}));
        assert_eq!(k.verify(&t, T0 + 3).unwrap_err(), JwtError::UnknownKid);
        // Just installed: no refetch within the interval.
        assert!(!k.claim_unknown_kid_refresh(T0 + 3));
        assert!(k.claim_unknown_kid_refresh(T0 + 10));
        // One claim per interval, whoever asks.
        for s in 10..20 {
            assert!(!k.claim_unknown_kid_refresh(T0 + s), "at +{s}");
        }
        assert!(k.claim_unknown_kid_refresh(T0 + 20));
        // The claimant fetched the rotated set: the token verifies.
        k.install(&Signer::set_body(&[&ec, &stranger]), T0 + 21)
            .unwrap();
        assert!(k.verify(&t, T0 + 21).is_ok());
        assert!(!k.claim_unknown_kid_refresh(T0 + 30));
        assert!(k.claim_unknown_kid_refresh(T0 + 31));
    }

    #[test]
    fn a_due_refresh_is_claimed_once_per_interval() {
        let k = keys();
        assert!(
            k.claim_refresh(T0),
            "never fetched: the first caller fetches"
        );
        assert!(!k.claim_refresh(T0 + 1), "the fetch is in flight or failed");
        assert!(k.claim_refresh(T0 + 10), "retried after the interval");
        let ec = Signer::ec();
        k.install(&Signer::set_body(&[&ec]), T0 + 11).unwrap();
        assert!(!k.claim_refresh(T0 + 12), "fresh keys: nothing to do");
        assert!(!k.claim_refresh(T0 + 610));
        assert!(k.claim_refresh(T0 + 611));
        assert!(!k.claim_refresh(T0 + 612));
    }

    #[test]
    fn concurrent_claims_give_one_winner() {
        let k = Arc::new(keys());
        let wins: usize = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| s.spawn(|| usize::from(k.claim_unknown_kid_refresh(T0))))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(wins, 1);
    }

    #[test]
    fn a_full_cache_still_verifies() {
        let settings = KeySettings {
            cache_capacity: 4,
            ..KeySettings::default()
        };
        let k = Keys::new(Validation::default(), settings);
        let ec = Signer::ec();
        k.install(&Signer::set_body(&[&ec]), T0).unwrap();
        for i in 0..20 {
            let t = ec.sign(&json!({"n": i, "exp": T0 + 60}));
            assert_eq!(k.verify(&t, T0).unwrap()["n"], Value::from(i));
            assert!(k.cached_tokens() <= 4);
        }
    }
}
