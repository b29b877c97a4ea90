//! Token usage, prices and cost: what each request consumed, read from the upstream's answer,
//! what that is worth at the deployment's prices, and settling it with the deployment and the
//! callers.

mod prices;
mod settle;

pub use prices::{PriceError, PriceSource, PriceTable, COST_MAP_ENV};
pub use settle::{Charges, FleetShare};
pub use sluice_core::price::Price;
pub use sluice_core::usage::{usage_from_body, usage_from_value, Usage};

/// Cost in USD of one request at a deployment's price (see [`Price::cost`]).
pub fn cost(price: &Price, usage: &Usage) -> f64 {
    price.cost(usage)
}
