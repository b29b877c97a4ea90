//! sluice's MCP gateway below HTTP serving: what `mcp_servers:` validates into (`settings`),
//! JSON-RPC read borrowed (`jsonrpc`), sluice as the client of each tool server over streamable
//! HTTP or a supervised child process (`upstream`), the aggregated view of all of them
//! (`hub`), who may use which (`access`) and the record of each call (`record`).
//!
//! A small JSON-RPC layer of its own rather than the official `rmcp` SDK: the gateway relays
//! messages and reads only their envelope (id, method, a tool's name), so typed models would
//! parse and re-serialise every tool result; and rmcp's streamable HTTP client runs on its own
//! HTTP stack (reqwest) beside sluice's pooled hyper clients.

pub mod access;
pub mod hub;
pub mod jsonrpc;
pub mod record;
pub mod settings;
pub mod upstream;

pub use access::Access;
pub use hub::Hub;
pub use record::{CallStatus, McpCall};
pub use settings::McpSettings;
