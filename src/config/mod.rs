//! Configuration in LiteLLM's `config.yaml` format: raw YAML → environment references resolved →
//! typed and validated → an immutable [`Config`]. Unknown keys are warnings that name the key;
//! wrong values are errors that name the exact path.

mod model;
mod secret;

pub use model::*;
pub use secret::Secret;
