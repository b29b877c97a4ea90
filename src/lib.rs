//! sluice: one small, fast gateway that speaks the OpenAI API to applications and forwards each
//! request to whichever provider serves the model. See ARCHITECTURE.md for the request pipeline.

pub mod admin;
pub mod auth;
pub mod bench;
pub mod cli;
pub mod config;
pub mod fleet;
pub mod mock;
pub mod providers;
pub mod routing;
pub mod server;
pub mod spend;
pub mod store;
pub mod telemetry;
pub mod translate;
