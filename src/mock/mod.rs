//! The built-in mock provider: answers in process for `mock/` deployments and as a standalone
//! server (`sluice mock`), in each provider's real wire format.

mod settings;

pub use settings::MockSettings;
