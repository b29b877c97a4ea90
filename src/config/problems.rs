//! What loading a config found wrong: warnings (the config still loads) and errors (it does
//! not), each naming the exact path of the field, so a user can fix every one in one pass.

use std::fmt;
use std::path::PathBuf;

/// Something in the config that sluice ignores or defaults, but that the user should see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// Dotted path of the field, e.g. `model_list[1].litellm_params.tpm`.
    pub path: String,
    /// What is wrong and what sluice does instead.
    pub message: String,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// One invalid value: where it is and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    /// Dotted path of the field.
    pub path: String,
    /// Why it is wrong.
    pub message: String,
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// Why a config was rejected.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file (or an `include:`d one) cannot be read.
    #[error("cannot read config file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Not YAML.
    #[error("{}: not valid YAML: {message}", file.as_deref().unwrap_or("config"))]
    Syntax {
        /// The file, when loading from one.
        file: Option<String>,
        /// Parser message, with line and column.
        message: String,
    },
    /// YAML, but wrong values; every problem found, one per line.
    #[error("invalid config ({} problem{}):\n{}", .0.len(), if .0.len() == 1 { "" } else { "s" }, list(.0))]
    Invalid(Vec<Invalid>),
}

fn list(items: &[Invalid]) -> String {
    items
        .iter()
        .map(|i| format!("  {i}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The collector every loading stage writes to.
#[derive(Debug, Default)]
pub(super) struct Problems {
    /// Warnings so far.
    pub warnings: Vec<Warning>,
    /// Errors so far.
    pub errors: Vec<Invalid>,
}

impl Problems {
    /// Record a warning.
    pub fn warn(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.warnings.push(Warning {
            path: path.into(),
            message: message.into(),
        });
    }

    /// Record an error.
    pub fn error(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.errors.push(Invalid {
            path: path.into(),
            message: message.into(),
        });
    }
}

/// `close` formatted as a "did you mean" hint when one of `known` is near `word`.
pub(super) fn did_you_mean<'a>(word: &str, known: impl IntoIterator<Item = &'a str>) -> String {
    known
        .into_iter()
        .map(|k| (strsim::damerau_levenshtein(word, k), k))
        .filter(|(d, k)| *d <= 2.max(k.len() / 4))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| format!(" (did you mean \"{k}\"?)"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_list_every_problem() {
        let e = ConfigError::Invalid(vec![
            Invalid {
                path: "a.b".into(),
                message: "bad".into(),
            },
            Invalid {
                path: "c".into(),
                message: "worse".into(),
            },
        ]);
        assert_eq!(
            e.to_string(),
            "invalid config (2 problems):\n  a.b: bad\n  c: worse"
        );
    }

    #[test]
    fn suggestions() {
        assert_eq!(
            did_you_mean("mastr_key", ["master_key", "database_url"]),
            " (did you mean \"master_key\"?)"
        );
        assert_eq!(did_you_mean("zzz", ["master_key"]), "");
    }
}
