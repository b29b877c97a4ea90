//! sluice: one small, fast gateway that speaks the OpenAI API to applications and forwards each
//! request to whichever provider serves the model. This crate is the binary's own part: the
//! server and its pipeline, authentication, the admin API, spend settlement and the fleet;
//! everything below it is a crate of the workspace (ARCHITECTURE.md has the graph).

// No function of the crate's own code runs past 150 lines (clippy.toml's threshold): a longer
// one is a sequence of steps that wants names (tests may be longer).
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

pub mod admin;
pub mod alerts;
pub mod auth;
pub mod cache;
pub mod cli;
pub mod console;
pub mod files;
pub mod fleet;
/// The fuzz targets over admin bodies and fleet messages (fuzz/README.md); not an API.
#[doc(hidden)]
#[allow(clippy::expect_used, clippy::panic)] // a broken promise must crash the fuzz target
pub mod fuzz;
pub mod guardrails;
pub mod healthcheck;
pub mod http;
pub mod import;
pub mod mcp;
pub mod models;
pub mod passthrough;
pub mod probes;
pub mod realtime;
pub mod responses;
pub mod secrets;
pub mod server;
pub mod spend;
