//! The fuzz target over the config loader (fuzz/README.md): YAML text to a validated config,
//! or to errors that say where and why.

use std::collections::HashMap;

use crate::{describe, load_str, Loaded};

/// Any text loads to a config or to errors, the same way twice; every problem has a message;
/// and the master key and database URL given in the text appear neither in `check-config`'s
/// report nor in an error (checked when the value is written once, literally: no aliases or
/// environment references that could copy it into a field that is not secret).
pub fn config_load(data: &[u8]) {
    let Ok(yaml) = std::str::from_utf8(data) else {
        return;
    };
    let env: HashMap<String, String> = HashMap::new();
    let shown = |r: &Result<Loaded, crate::ConfigError>| match r {
        Ok(loaded) => describe(&loaded.config),
        Err(e) => e.to_string(),
    };
    let first = load_str(yaml, &env);
    let text = shown(&first);
    assert_eq!(
        text,
        shown(&load_str(yaml, &env)),
        "the same text loads the same way"
    );
    match &first {
        Ok(loaded) => {
            for w in &loaded.warnings {
                assert!(!w.message.is_empty(), "a warning says why");
            }
            let g = &loaded.config.general;
            let copied = ["*", "os.environ/", "${"].iter().any(|c| yaml.contains(c));
            for secret in [&g.master_key, &g.database_url].into_iter().flatten() {
                let s = secret.expose();
                if !copied && s.len() >= 8 && yaml.matches(s).count() == 1 {
                    assert!(!text.contains(s), "a secret is masked in the report");
                }
            }
        }
        Err(crate::ConfigError::Invalid(problems)) => {
            assert!(!problems.is_empty());
            for p in problems {
                assert!(!p.message.is_empty(), "a problem says why");
            }
        }
        Err(_) => {}
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn config_load_corpus() {
        sluice_core::fuzz::replay(
            env!("CARGO_MANIFEST_DIR"),
            "config_load",
            super::config_load,
        );
    }
}
