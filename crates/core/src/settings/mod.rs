//! Reading settings the way sluice's configuration does, for every crate that reads its own
//! part of it (providers read their keys of a deployment): loose leaves ([`Scalar`]) checked
//! where they are used, every problem collected with its exact path ([`Problems`]), and the
//! environment behind a trait ([`Env`]) so tests never touch the process's.

mod env;
mod params;
mod problems;
pub mod read;
mod scalar;

pub use env::{Env, ProcessEnv};
pub use params::Params;
pub use problems::{did_you_mean, Invalid, Problems, Warning};
pub use scalar::Scalar;
