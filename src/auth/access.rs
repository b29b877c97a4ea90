//! The one rule for model access: whether a caller's `models` lists (its key's, its team's and
//! its user's) let it use a model group under the name it asked for. Every path that reaches a
//! deployment asks it here, each fallback and each tool-loop round included, so that no route
//! is a way around another's check.
//!
//! LiteLLM's semantics: an empty list, `*` or `all-proxy-models` allows everything;
//! `all-team-models` defers to the team; otherwise an entry allows a group when it is
//! - the name the caller asked for (for a wildcard group, the concrete model, never the
//!   pattern: a key allowed `dall-e-3` may call it through a `*` deployment, and a key allowed
//!   only `*`-free names may not call everything a `*` group serves),
//! - the group's own name,
//! - a pattern ending in `*` whose prefix starts the name asked for (`openai/*`), or
//! - an access group one of the group's deployments is in (`model_info.access_groups`).

use sluice_routing::Group;

/// Which model groups a holder may call (LiteLLM's `models` list).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelAccess {
    /// Every group (`[]`, `["*"]` or `["all-proxy-models"]`).
    All,
    /// Whatever the key's team allows (`["all-team-models"]`); a key without a team: all.
    Team,
    /// These entries: names, `prefix*` patterns and access groups.
    Only(Box<[Box<str>]>),
}

/// What a request asks to use: the name the caller gave and the group it resolved to.
#[derive(Debug, Clone, Copy)]
pub struct Wanted<'a> {
    /// The model as the caller named it (a body's `model`, a fallback's name, a route's model).
    pub requested: &'a str,
    /// The group's name (a wildcard group's is its pattern).
    pub group: &'a str,
    /// The group, when the name resolved to one: its access groups count.
    pub resolved: Option<&'a Group>,
}

impl<'a> Wanted<'a> {
    /// A request for `requested`, served by `group`.
    pub fn of(requested: &'a str, group: &'a Group) -> Self {
        Self {
            requested,
            group: &group.name,
            resolved: Some(group),
        }
    }

    /// A name that is not a config group (a pass-through route's `<provider>/<model>`, a
    /// deployment named by a file id): only the name itself can be granted.
    pub fn name(name: &'a str) -> Self {
        Self {
            requested: name,
            group: name,
            resolved: None,
        }
    }

    /// Whether one access-list entry grants this.
    fn granted_by(&self, entry: &str) -> bool {
        if entry == self.requested || entry == self.group {
            return true;
        }
        if let Some(prefix) = entry.strip_suffix('*') {
            return self.requested.starts_with(prefix);
        }
        self.resolved.is_some_and(|g| g.in_access_group(entry))
    }
}

impl<'a> From<&'a str> for Wanted<'a> {
    fn from(name: &'a str) -> Self {
        Self::name(name)
    }
}

impl<'a> From<&'a std::sync::Arc<str>> for Wanted<'a> {
    fn from(name: &'a std::sync::Arc<str>) -> Self {
        Self::name(name)
    }
}

impl ModelAccess {
    /// From LiteLLM's `models` list.
    pub fn from_list(models: &[String]) -> Self {
        if models.is_empty() || models.iter().any(|m| m == "*" || m == "all-proxy-models") {
            Self::All
        } else if models.iter().any(|m| m == "all-team-models") {
            Self::Team
        } else {
            Self::Only(models.iter().map(|m| m.as_str().into()).collect())
        }
    }

    /// Whether `wanted` is allowed (`Team` answers true: the team's own access decides).
    pub fn allows(&self, wanted: &Wanted<'_>) -> bool {
        match self {
            Self::All | Self::Team => true,
            Self::Only(entries) => entries.iter().any(|e| wanted.granted_by(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_providers::DeploymentTarget;
    use sluice_routing::{Health, Member};
    use std::sync::Arc;

    fn group(name: &str, access: &[&str]) -> Group {
        let member = Member {
            target: Arc::new(DeploymentTarget::mock_for_tests(name, "d")),
            health: Arc::new(Health::default()),
            weight: 1.0,
            rpm: None,
            tpm: None,
            cost: f64::INFINITY,
            access_groups: access.iter().map(|a| Arc::from(*a)).collect(),
            tags: Arc::new([]),
        };
        Group::new(name.into(), vec![member], None)
    }

    fn list(entries: &[&str]) -> ModelAccess {
        ModelAccess::from_list(&entries.iter().map(|e| e.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn lists_that_allow_everything_or_defer() {
        let g = group("x", &[]);
        assert!(list(&[]).allows(&Wanted::of("x", &g)));
        assert!(list(&["*"]).allows(&Wanted::of("x", &g)));
        assert!(list(&["all-proxy-models"]).allows(&Wanted::of("x", &g)));
        assert_eq!(list(&["all-team-models"]), ModelAccess::Team);
    }

    #[test]
    fn names_and_prefix_patterns() {
        let only = list(&["gpt-4o", "openai/*"]);
        let g = group("gpt-4o", &[]);
        assert!(only.allows(&Wanted::of("gpt-4o", &g)));
        let claude = group("claude", &[]);
        assert!(!only.allows(&Wanted::of("claude", &claude)));
        let wild = group("openai/*", &[]);
        assert!(only.allows(&Wanted::of("openai/gpt-5", &wild)));
    }

    #[test]
    fn a_wildcard_group_is_judged_by_the_name_asked_for() {
        let star = group("*", &[]);
        let only = list(&["dall-e-3"]);
        assert!(only.allows(&Wanted::of("dall-e-3", &star)));
        assert!(!only.allows(&Wanted::of("gpt-4o", &star)));
        // A pattern entry matches the requested name, not the group's pattern.
        let anthropic = group("anthropic/*", &[]);
        assert!(!list(&["openai/*"]).allows(&Wanted::of("anthropic/claude", &anthropic)));
    }

    #[test]
    fn access_groups_grant_their_members() {
        let beta = group("gpt-5", &["beta-models"]);
        let other = group("gpt-4o", &[]);
        let only = list(&["beta-models"]);
        assert!(only.allows(&Wanted::of("gpt-5", &beta)));
        assert!(!only.allows(&Wanted::of("gpt-4o", &other)));
        // A bare name without a group has no access groups.
        assert!(!only.allows(&Wanted::name("gpt-5")));
        assert!(only.allows(&Wanted::name("beta-models")));
    }
}
