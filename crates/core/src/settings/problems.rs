//! What reading settings found wrong: warnings (the settings still load) and errors (they do
//! not), each naming the exact path of the field, so a user can fix every one in one pass.

use std::fmt;

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

/// The collector every loading stage writes to.
#[derive(Debug, Default)]
pub struct Problems {
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
pub fn did_you_mean<'a>(word: &str, known: impl IntoIterator<Item = &'a str>) -> String {
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
    fn suggestions() {
        assert_eq!(
            did_you_mean("mastr_key", ["master_key", "database_url"]),
            " (did you mean \"master_key\"?)"
        );
        assert_eq!(did_you_mean("zzz", ["master_key"]), "");
    }
}
