//! Configuration in LiteLLM's `config.yaml` format: raw YAML → environment references resolved →
//! typed and validated → an immutable [`Config`]. Unknown keys are warnings that name the key;
//! wrong values are errors that name the exact path.

mod callbacks;
mod describe;
mod env;
mod load;
mod model;
mod problems;
mod raw;
mod validate;

pub use describe::describe;
pub use env::{Env, ProcessEnv};
pub use load::{load_file, load_str, Loaded};
pub use model::*;
pub use problems::{ConfigError, Invalid, Warning};
pub use sluice_core::Secret;
pub use validate::{DEFAULT_AZURE_API_VERSION, ROUTING_STRATEGIES};

#[cfg(test)]
mod tests;
