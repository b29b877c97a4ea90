//! The keys of one deployment's `litellm_params` that only its provider reads (`aws_region_name`,
//! `vertex_project`, `mock_latency_ms`, ...). The configuration hands them to the provider's
//! module, which reads its own keys by name with the same path-naming readers as the rest of
//! the configuration; a key no provider knows is reported by the configuration, not here.

use std::collections::BTreeMap;
use std::time::Duration;

use super::{read, Problems, Scalar};

/// One deployment's provider-specific `litellm_params`, with the path they were read at.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Params {
    at: String,
    values: BTreeMap<String, Scalar>,
}

impl Params {
    /// The values found at `at` (e.g. `model_list[2].litellm_params`).
    pub fn new(at: impl Into<String>, values: BTreeMap<String, Scalar>) -> Self {
        Self {
            at: at.into(),
            values,
        }
    }

    /// Where these keys were read (`model_list[2].litellm_params`).
    pub fn at(&self) -> &str {
        &self.at
    }

    /// The path of one key, for problems.
    pub fn path(&self, key: &str) -> String {
        format!("{}.{key}", self.at)
    }

    /// Whether the key was given.
    pub fn has(&self, key: &str) -> bool {
        self.values.contains_key(key)
    }

    /// The key's leaf as written.
    pub fn scalar(&self, key: &str) -> Option<Scalar> {
        self.values.get(key).cloned()
    }

    /// The key's text; blank text is no value.
    pub fn text(&self, key: &str) -> Option<String> {
        read::text(self.scalar(key))
    }

    /// A whole number ≥ 0 that fits `T`.
    pub fn whole<T: TryFrom<i128>>(&self, key: &str, p: &mut Problems) -> Option<T> {
        read::whole(&self.path(key), self.scalar(key), p)
    }

    /// A finite number > 0 (≥ 0 unless `min_exclusive`).
    pub fn number(&self, key: &str, min_exclusive: bool, p: &mut Problems) -> Option<f64> {
        read::number(&self.path(key), self.scalar(key), min_exclusive, p)
    }

    /// Milliseconds as a duration.
    pub fn millis(&self, key: &str, p: &mut Problems) -> Option<Duration> {
        read::millis(&self.path(key), self.scalar(key), p)
    }

    /// `true` or `false`.
    pub fn boolean(&self, key: &str, p: &mut Problems) -> Option<bool> {
        read::boolean(&self.path(key), self.scalar(key), p)
    }
}
