//! sluice's MCP gateway below HTTP serving: what `mcp_servers:` validates into (`settings`),
//! JSON-RPC read borrowed (`jsonrpc`), sluice as the client of each tool server over streamable
//! HTTP or a supervised child process (`upstream`), the aggregated view of all of them
//! (`hub`) and who may use which (`access`). A call's record is
//! `sluice_core::record::ToolCall`, carried by a `RequestRecord` to every sink.
//!
//! A small JSON-RPC layer of its own rather than the official `rmcp` SDK: the gateway relays
//! messages and reads only their envelope (id, method, a tool's name), so typed models would
//! parse and re-serialise every tool result; and rmcp's streamable HTTP client runs on its own
//! HTTP stack (reqwest) beside sluice's pooled hyper clients.

pub mod access;
pub mod hub;
pub mod jsonrpc;
pub mod settings;
pub mod upstream;

pub use access::Access;
pub use hub::Hub;
pub use settings::McpSettings;
pub use sluice_core::record::{CallStatus, ToolCall};
