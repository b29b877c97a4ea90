//! A caller's own names for model groups: a key's `aliases` and a team's `model_aliases`
//! (LiteLLM's fields), so a client may keep asking for `mistral-7b` while the admin decides
//! which group serves it. The request path looks an alias up before it resolves the model;
//! the access rule then judges the name asked for and the group it reached.

use std::sync::Arc;

use serde_json::{Map, Value};

/// One holder's aliases: few, so a slice searched in order beats a map.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Aliases(Box<[(Box<str>, Arc<str>)]>);

impl Aliases {
    /// The aliases under `field` of a holder's `metadata` (where the admin API keeps them),
    /// or `None` when there are none. Entries that are not `name → group` strings are left
    /// out (the admin API refuses them; a row written around it counts as none).
    pub fn from_metadata(metadata: &Map<String, Value>, field: &str) -> Option<Arc<Self>> {
        let map = metadata.get(field)?.as_object()?;
        let pairs: Box<[(Box<str>, Arc<str>)]> = map
            .iter()
            .filter_map(|(alias, group)| Some((alias.as_str().into(), group.as_str()?.into())))
            .collect();
        (!pairs.is_empty()).then(|| Arc::new(Self(pairs)))
    }

    /// The group `name` stands for, if it is one of these aliases.
    pub fn get(&self, name: &str) -> Option<&Arc<str>> {
        self.0.iter().find(|(a, _)| &**a == name).map(|(_, g)| g)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_string_pairs_only() {
        let m = json!({"aliases": {"mistral-7b": "gpt-3.5-turbo", "bad": 3}});
        let a = Aliases::from_metadata(m.as_object().unwrap(), "aliases").unwrap();
        assert_eq!(a.get("mistral-7b").map(|g| &**g), Some("gpt-3.5-turbo"));
        assert_eq!(a.get("bad"), None);
        assert_eq!(a.get("gpt-3.5-turbo"), None);
        assert!(Aliases::from_metadata(m.as_object().unwrap(), "model_aliases").is_none());
        let empty = json!({"aliases": {}});
        assert!(Aliases::from_metadata(empty.as_object().unwrap(), "aliases").is_none());
    }
}
