//! Token usage, prices and cost: what each request consumed, read from the upstream's answer,
//! and what it owes, charged to its deployment and callers.

mod price;
mod settle;
pub(crate) mod usage;

pub use price::Price;
pub use settle::{Charges, FleetShare};
pub use usage::{usage_from_body, usage_from_value, Usage};
