//! sluice's one source of unguessable bytes, for its own code: `rand` (the version already in
//! the build through tungstenite). The kernel's CSPRNG for secrets (keys, salts, nonces,
//! tokens), and rand's thread-local CSPRNG (ChaCha, seeded and reseeded from the kernel) for
//! the ids of requests, answers and records, which are made on the request path and would
//! otherwise cost a system call each. Statistical choices that guard nothing (routing's
//! random picks, retry jitter, trace ids, the mock's ids) use `fastrand` instead: no secret
//! depends on them.

use rand::TryRngCore as _;

/// The kernel gave no randomness (getrandom(2) failed): nothing secret can be made.
#[derive(Debug, thiserror::Error)]
#[error("no randomness from the operating system")]
pub struct NoRandomness;

/// `buf` filled from the kernel's CSPRNG: for a secret (a key, a salt, a nonce, a token).
pub fn fill(buf: &mut [u8]) -> Result<(), NoRandomness> {
    rand::rngs::OsRng
        .try_fill_bytes(buf)
        .map_err(|_| NoRandomness)
}

/// A fresh random (version 4) UUID, from the thread's CSPRNG: no system call per id. `uuid`'s
/// own `Uuid::new_v4` is not used (clippy.toml): it would bring a second generator.
pub fn uuid_v4() -> uuid::Uuid {
    // One 128-bit draw: `random::<[u8; 16]>()` would draw each byte on its own (16 calls).
    uuid::Builder::from_random_bytes(rand::random::<u128>().to_ne_bytes()).into_uuid()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_are_version_4_and_differ() {
        let (a, b) = (uuid_v4(), uuid_v4());
        assert_ne!(a, b);
        assert_eq!(a.get_version(), Some(uuid::Version::Random));
        assert_eq!(a.get_variant(), uuid::Variant::RFC4122);
    }

    #[test]
    fn filled_bytes_are_not_left_zero() {
        let mut buf = [0u8; 32];
        fill(&mut buf).unwrap();
        assert_ne!(buf, [0u8; 32]);
    }
}
