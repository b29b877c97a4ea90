//! What loading a config found wrong: warnings (the config still loads) and errors (it does
//! not), each naming the exact path of the field, so a user can fix every one in one pass.

use std::path::PathBuf;

use sluice_core::settings::Invalid;

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
}
