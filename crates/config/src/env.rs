//! Environment references in config values: `os.environ/VAR` (LiteLLM's form) and `${VAR}`
//! inside strings. Resolved on the YAML tree before typing, so every field accepts them.

use std::collections::BTreeMap;

use serde_yaml_ng::Value;

use sluice_core::settings::{Env, Problems};

/// `environment_variables:` from the config over the real environment (the config wins, as in
/// LiteLLM, which writes them into `os.environ` at startup).
pub(super) struct Layered<'a> {
    /// Variables set by the config.
    pub over: BTreeMap<String, String>,
    /// Everything else.
    pub base: &'a dyn Env,
}

impl Env for Layered<'_> {
    fn var(&self, name: &str) -> Option<String> {
        self.over.get(name).cloned().or_else(|| self.base.var(name))
    }
}

/// What a string value turned into.
enum Resolved {
    /// No reference in it.
    Unchanged,
    /// References substituted.
    Value(String),
    /// A referenced variable is not set (its name).
    Unset(String),
}

/// LiteLLM's reference prefix: `os.environ/NAME`.
pub(super) const OS_ENVIRON: &str = "os.environ/";

fn resolve_str(s: &str, env: &dyn Env) -> Resolved {
    if let Some(name) = s.strip_prefix(OS_ENVIRON) {
        let name = name.trim();
        return match env.var(name) {
            Some(v) => Resolved::Value(v),
            None => Resolved::Unset(name.to_owned()),
        };
    }
    if !s.contains("${") {
        return Resolved::Unchanged;
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        let Some(len) = rest[start + 2..].find('}') else {
            break;
        };
        let name = &rest[start + 2..start + 2 + len];
        out.push_str(&rest[..start]);
        match env.var(name) {
            Some(v) => out.push_str(&v),
            None => return Resolved::Unset(name.to_owned()),
        }
        rest = &rest[start + 3 + len..];
    }
    out.push_str(rest);
    Resolved::Value(out)
}

/// Substitute every reference under `value`. A value whose variable is unset is removed (so the
/// field falls back to its default, as LiteLLM's `None` does), with a warning naming it.
pub(super) fn resolve_tree(value: &mut Value, path: &str, env: &dyn Env, problems: &mut Problems) {
    match value {
        Value::String(s) => match resolve_str(s, env) {
            Resolved::Unchanged => {}
            Resolved::Value(v) => *s = v,
            Resolved::Unset(name) => {
                problems.warn(
                    path,
                    format!("environment variable {name} is not set; left out"),
                );
                *value = Value::Null;
            }
        },
        Value::Sequence(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                resolve_tree(item, &format!("{path}[{i}]"), env, problems);
            }
            items.retain(|v| !v.is_null());
        }
        Value::Mapping(map) => {
            for (k, v) in map.iter_mut() {
                let key = key_text(k);
                let child = if path.is_empty() {
                    key
                } else {
                    format!("{path}.{key}")
                };
                resolve_tree(v, &child, env, problems);
            }
        }
        Value::Tagged(t) => resolve_tree(&mut t.value, path, env, problems),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// A mapping key as text, for paths.
pub(super) fn key_text(k: &Value) -> String {
    match k {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn env() -> HashMap<String, String> {
        HashMap::from([
            ("KEY".to_owned(), "sk-abc".to_owned()),
            ("HOST".to_owned(), "example.com".to_owned()),
        ])
    }

    #[test]
    fn os_environ_and_braces() {
        let e = env();
        assert!(matches!(resolve_str("os.environ/KEY", &e), Resolved::Value(v) if v == "sk-abc"));
        assert!(
            matches!(resolve_str("https://${HOST}/v1", &e), Resolved::Value(v) if v == "https://example.com/v1")
        );
        assert!(matches!(resolve_str("plain", &e), Resolved::Unchanged));
        assert!(matches!(resolve_str("os.environ/NOPE", &e), Resolved::Unset(n) if n == "NOPE"));
        assert!(matches!(resolve_str("${NOPE}", &e), Resolved::Unset(n) if n == "NOPE"));
    }

    #[test]
    fn unset_values_are_removed_with_a_warning() {
        let mut v: Value =
            serde_yaml_ng::from_str("a: os.environ/NOPE\nb: [os.environ/KEY, os.environ/NOPE]")
                .unwrap();
        let mut p = Problems::default();
        resolve_tree(&mut v, "", &env(), &mut p);
        assert_eq!(v["a"], Value::Null);
        assert_eq!(v["b"].as_sequence().unwrap().len(), 1);
        assert_eq!(p.warnings.len(), 2);
        assert_eq!(
            p.warnings[0].to_string(),
            "a: environment variable NOPE is not set; left out"
        );
    }
}
