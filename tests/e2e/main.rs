//! Every end-to-end test in one binary: the real server (in process, on loopback ports) in
//! front of `sluice mock` and real stores. One test binary links once instead of once per
//! file, which is most of what a clean build of the tests costs; each file below is a module
//! named for what it tests (`cargo test --test e2e proxy::` runs one of them).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

mod addresses;
mod admin;
mod alerts;
mod architecture;
mod cache;
mod callbacks;
mod chaos;
mod cli;
mod console;
mod console_logs;
mod endpoints;
mod files;
mod files_owners;
mod guardrails;
mod guardrails_vendors;
mod hardening;
mod health_checks;
mod hostile_upstream;
mod jwt;
mod keys;
mod litellm_compat;
mod litellm_config;
mod mcp;
mod mcp_fleet;
mod mcp_oauth;
mod mcp_responses;
mod mcp_spend;
mod mcp_sse;
mod model_rules;
mod models;
mod organizations;
mod passthrough;
mod per_model;
mod portable;
mod providers;
mod proxy;
mod realtime;
mod redis_ha;
mod routing;
mod secrets;
mod security;
mod semantic_cache;
mod tags;
mod team_admin;
mod tenancy;
mod translate;
mod uploads;
