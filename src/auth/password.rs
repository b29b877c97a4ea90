//! Console passwords: argon2id with the crate's default parameters (OWASP's recommended
//! 19 MiB, 2 passes) and a 16-byte salt from the OS, stored as a PHC string that carries both,
//! so parameters can be raised later without breaking stored hashes.

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;

/// Shortest password accepted.
pub const MIN_LEN: usize = 8;

/// The PHC string for `password`, or `None` when the OS gives no randomness.
pub fn hash(password: &str) -> Option<String> {
    let mut salt = [0u8; 16];
    sluice_core::random::fill(&mut salt).ok()?;
    let salt = SaltString::encode_b64(&salt).ok()?;
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .ok()
        .map(|h| h.to_string())
}

/// Whether `password` matches a stored PHC string (constant-time inside argon2).
pub fn verify(password: &str, stored: &str) -> bool {
    PasswordHash::new(stored).is_ok_and(|h| {
        Argon2::default()
            .verify_password(password.as_bytes(), &h)
            .is_ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hash_verifies_only_its_password() {
        let h = hash("correct horse").unwrap();
        assert!(h.starts_with("$argon2id$"));
        assert!(!h.contains("correct horse"));
        assert!(verify("correct horse", &h));
        assert!(!verify("correct horsf", &h));
        assert!(!verify("correct horse", "not a hash"));
        assert_ne!(hash("correct horse").unwrap(), h, "salted");
    }
}
