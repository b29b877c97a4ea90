//! sluice's shared vocabulary, below every other crate: the endpoints and dialects sluice
//! speaks, the request error and its error kinds, token usage and prices, rate limits and
//! budgets, and the record each request leaves behind. No I/O and no knowledge of providers,
//! configuration or storage, so that every layer above can depend on it and it on none of them.

pub mod cache_control;
pub mod endpoint;
pub mod error;
/// Helpers of the crates' fuzz targets (fuzz/README.md); not an API.
#[doc(hidden)]
#[allow(clippy::panic)] // a corpus that cannot be read must fail the test replaying it
pub mod fuzz;
pub mod limits;
pub mod lock;
pub mod poll;
pub mod price;
pub mod random;
pub mod record;
pub mod redis_target;
pub mod rules;
pub mod scan;
pub mod secret;
pub mod settings;
pub mod trace_context;
pub mod usage;

pub use endpoint::{Dialect, Endpoint};
pub use error::ApiError;
pub use redis_target::{NodeAddress, RedisTarget};
pub use secret::Secret;
pub use trace_context::{hex, unhex};
