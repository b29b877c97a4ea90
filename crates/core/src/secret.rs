//! A string that must never reach a log, an error message or a metric, nor stay in memory
//! after it is dropped.

use std::fmt;

use zeroize::Zeroize;

/// A secret value (API key, master key, database password). `Debug` and `Display` print
/// `*****`, so a secret cannot leak by being formatted; read it with [`Secret::expose`]. Its
/// bytes are overwritten with zeros when it is dropped (a config reload drops the old
/// config's secrets), so a later heap dump or a reused allocation does not hold it. Copies
/// made from it (a header value sent upstream) are not covered.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Drop for Secret {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}

impl Secret {
    /// Wrap a secret.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself, for the one place that sends it (a header, a hash).
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// A masked form safe to print: the first 3 and last 2 characters of long keys, else `*****`.
    pub fn masked(&self) -> String {
        let s = &self.0;
        let n = s.chars().count();
        if n >= 12 {
            let head: String = s.chars().take(3).collect();
            let tail: String = s.chars().skip(n - 2).collect();
            format!("{head}*****{tail}")
        } else {
            "*****".to_owned()
        }
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("*****")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("*****")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_formats_the_value() {
        let s = Secret::new("sk-very-secret-value");
        assert_eq!(format!("{s} {s:?}"), "***** *****");
        assert_eq!(s.masked(), "sk-*****ue");
        assert_eq!(Secret::new("short").masked(), "*****");
        assert_eq!(s.expose(), "sk-very-secret-value");
    }
}
