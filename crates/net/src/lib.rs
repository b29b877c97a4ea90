//! HTTP plumbing with no knowledge of providers or requests, shared by the gateway, the mock
//! provider's server and the callback sinks: the pooled upstream client (one pool per worker
//! thread), the request body that sends a spliced buffer without copying it, the accept loop
//! and worker threads, AWS SigV4 signing and Google service-account OAuth tokens.

pub mod body;
pub mod client;
/// The fuzz target over SigV4 (fuzz/README.md); not an API.
#[doc(hidden)]
pub mod fuzz;
pub mod google_auth;
pub mod h1;
pub mod networks;
pub mod server;
pub mod sigv4;
pub mod ssrf;
pub mod tls;

pub use body::{SegmentsBody, Upload, UploadError};
pub use client::{ClientRegistry, Connect, UpstreamClient, UpstreamHttp};

/// Whether two secrets (API keys, signatures) are equal, in constant time: both are hashed
/// first, so the comparison takes the same time whatever their contents and lengths. Every
/// place that compares a secret a client presented uses this (or a digest compare like it).
pub fn secret_eq(a: &[u8], b: &[u8]) -> bool {
    use ring::digest::{digest, SHA256};
    use subtle::ConstantTimeEq as _;
    digest(&SHA256, a)
        .as_ref()
        .ct_eq(digest(&SHA256, b).as_ref())
        .into()
}

#[cfg(test)]
mod secret_eq_tests {
    #[test]
    fn equal_only_when_equal() {
        assert!(super::secret_eq(b"sk-abc", b"sk-abc"));
        assert!(!super::secret_eq(b"sk-abc", b"sk-abd"));
        assert!(!super::secret_eq(b"sk-abc", b"sk-abc0"));
        assert!(!super::secret_eq(b"", b"x"));
    }
}
