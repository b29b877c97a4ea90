//! sluice's in-process guardrails (LiteLLM's `guardrails:`), with no I/O, so every check is a
//! function of the text: microseconds, no network, no lock.
//!
//! - [`entity`]: the kinds of sensitive value, under LiteLLM's (Presidio's) names;
//! - [`checks`]: Luhn, IBAN mod-97, SSN rules, IP ranges, entropy;
//! - [`detect`]: a guardrail's detectors in a few combined searches that skip what cannot
//!   match (numbers are looked for around digits), blocked words in one Aho-Corasick pass,
//!   findings resolved so none overlap;
//! - [`mask`]: placeholders (`<EMAIL_ADDRESS_1>`) and their restore in the answer;
//! - [`injection`]: the prompt-injection phrase score;
//! - [`policy`]: the guardrail settings the config validates into, built for use, and what
//!   checking one text does;
//! - [`tools`]: `tool_permission`'s rules over the tools a request offers and the calls an
//!   answer makes.

pub mod checks;
pub mod detect;
pub mod entity;
pub mod injection;
pub mod mask;
pub mod policy;
pub mod tools;

pub use detect::{Action, BuildError, Detector, Finding};
pub use entity::Entity;
pub use mask::Masks;
pub use policy::{
    AzureTextSettings, BedrockSettings, ExternalSettings, Guardrail, Kind, LakeraSettings,
    ModerationSettings, Modes, OnError, PresidioSettings, Settings, SizeLimits, SpecSettings,
    Tally, Vendor, Violation,
};
pub use tools::{Decision, Denial, OnDisallowed, ToolPolicy, ToolSettings};
