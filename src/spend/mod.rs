//! Token usage and (later) cost: what each request consumed, read from the upstream's answer.

pub(crate) mod usage;

pub use usage::{usage_from_body, usage_from_value, Usage};
