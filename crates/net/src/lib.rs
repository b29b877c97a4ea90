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
pub mod server;
pub mod sigv4;

pub use body::{SegmentsBody, Upload, UploadError};
pub use client::{ClientRegistry, UpstreamClient, UpstreamHttp};
