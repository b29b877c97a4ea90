//! Configuration in LiteLLM's `config.yaml` format: raw YAML → environment references resolved →
//! typed and validated → an immutable [`Config`]. Unknown keys are warnings that name the key;
//! wrong values are errors that name the exact path.

mod describe;
mod env;
/// The fuzz target over the loader (fuzz/README.md); not an API.
#[doc(hidden)]
pub mod fuzz;
mod load;
mod model;
mod prices;
mod problems;
mod raw;
pub mod rules;
mod validate;

pub use describe::{deployment_info, describe};
pub use load::{load_file, load_str, Loaded, Source};
pub use model::*;
pub use prices::{PriceError, PriceSource, PriceTable, COST_MAP_ENV};
pub use problems::ConfigError;
pub use raw::GUARDRAIL_PARAM_KEYS;
pub use sluice_core::settings::{Env, Invalid, ProcessEnv, Warning};
pub use sluice_core::Secret;
pub use validate::ROUTING_STRATEGIES;

#[cfg(test)]
mod litellm_shapes;
#[cfg(test)]
mod tests;
