//! Model groups and the choice of a deployment per attempt, with everything that makes routing
//! survive provider failures: per-deployment health and cooldowns (`health`), strategies
//! (`group`), failure kinds (`failure`), retry and fallback rules (`policy`), hedging (`hedge`),
//! tag-based routing (`tags`) and the attempt loop the pipeline calls (`dispatch`). Tables are immutable per config
//! snapshot; live state is atomics, so no request takes a lock.

mod dispatch;
mod failure;
mod group;
mod health;
mod hedge;
mod policy;
mod tags;

pub use dispatch::{dispatch, Attempt, Failure, MayUse, Outcome, Requested, Served};
pub use failure::{retry_after, FailureKind};
pub use group::{Group, Member, Pick, Serving, Strategy, Tried};
pub use health::{
    now_ms, Availability, Breaker, CooldownNews, Cooled, Health, HealthRegistry, InFlight,
    DEFAULT_ALLOWED_FAILS, DEFAULT_COOLDOWN,
};
pub use hedge::HedgeAfter;
pub use policy::{Fallbacks, OnDisconnect, Policy};
pub use sluice_core::error::RouteError;
pub use tags::{eligible, Eligible, TagFiltering, DEFAULT_TAG};

use std::collections::HashMap;
use std::sync::Arc;

/// A snapshot's routing: the model table and the rules for retries, fallbacks and cooldowns.
#[derive(Debug, Default)]
pub struct Router {
    /// Model groups.
    pub models: ModelTable,
    /// Retry, backoff, strategy and breaker rules.
    pub policy: Policy,
    /// Fallback chains.
    pub fallbacks: Fallbacks,
}

/// A `model_name` containing `*` (LiteLLM wildcard routing): `prefix*suffix`.
#[derive(Debug)]
struct Wildcard {
    prefix: Box<str>,
    suffix: Box<str>,
    group: Group,
}

/// A group found for a request, with the text a wildcard matched (fills `*` upstream).
#[derive(Debug, Clone, Copy)]
pub struct Resolved<'a> {
    /// The group.
    pub group: &'a Group,
    /// What `*` matched in the requested model, for wildcard groups.
    pub capture: Option<&'a str>,
}

impl<'a> Resolved<'a> {
    /// A group reached by its own name (an alias's target), nothing captured.
    pub fn whole(group: &'a Group) -> Self {
        Self {
            group,
            capture: None,
        }
    }
}

/// Another name a group answers to (`model_group_alias`), as the config validated it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alias {
    /// The name clients may ask for.
    pub name: Arc<str>,
    /// The group's name (or a name a wildcard group serves).
    pub group: Arc<str>,
    /// Left out of `/v1/models` (`hidden: true`), still served.
    pub hidden: bool,
}

/// All model groups of one config snapshot.
#[derive(Debug, Default)]
pub struct ModelTable {
    groups: HashMap<Arc<str>, Group>,
    wildcards: Vec<Wildcard>,
    /// Public names in config order, for `/v1/models`.
    names: Vec<Arc<str>>,
    /// `model_group_alias`, in config order (a handful: a scan beats a second map).
    aliases: Vec<Alias>,
}

impl ModelTable {
    /// Group deployments by `model_name`, keeping config order; `hedge` gives a group's
    /// hedging setting.
    pub fn new(all: Vec<Member>, hedge: impl Fn(&str) -> Option<HedgeAfter>) -> Self {
        let mut order: Vec<Arc<str>> = Vec::new();
        let mut members: HashMap<Arc<str>, Vec<Member>> = HashMap::new();
        for m in all {
            let name = m.target.info.model_name.clone();
            if !members.contains_key(&name) {
                order.push(name.clone());
            }
            members.entry(name).or_default().push(m);
        }
        let mut table = Self::default();
        for name in order {
            let group = Group::new(
                name.clone(),
                members.remove(&name).unwrap_or_default(),
                hedge(&name),
            );
            match name.split_once('*') {
                Some((prefix, suffix)) => table.wildcards.push(Wildcard {
                    prefix: prefix.into(),
                    suffix: suffix.into(),
                    group,
                }),
                None => {
                    table.names.push(name.clone());
                    table.groups.insert(name, group);
                }
            }
        }
        // Most specific wildcard first, as LiteLLM matches the longest pattern.
        table
            .wildcards
            .sort_by_key(|w| std::cmp::Reverse(w.prefix.len() + w.suffix.len()));
        table
    }

    /// The same table with `model_group_alias` entries. An alias that is a group's own name
    /// is left out (the group wins, as the config warned).
    pub fn with_aliases(mut self, aliases: impl IntoIterator<Item = Alias>) -> Self {
        self.aliases = aliases
            .into_iter()
            .filter(|a| !self.groups.contains_key(&a.name))
            .collect();
        self
    }

    /// Find the group serving `model`: an exact name first, then an alias (the group it
    /// names), then wildcard patterns.
    pub fn resolve<'a>(&'a self, model: &'a str) -> Option<Resolved<'a>> {
        if let Some(group) = self.groups.get(model) {
            return Some(Resolved {
                group,
                capture: None,
            });
        }
        if let Some(a) = self.aliases.iter().find(|a| &*a.name == model) {
            return self.resolve_name(&a.group);
        }
        self.wildcard(model)
    }

    /// An exact group, else the wildcard pattern `model` matches.
    fn resolve_name<'a>(&'a self, model: &'a str) -> Option<Resolved<'a>> {
        match self.groups.get(model) {
            Some(group) => Some(Resolved {
                group,
                capture: None,
            }),
            None => self.wildcard(model),
        }
    }

    /// The most specific wildcard pattern `model` matches.
    fn wildcard<'a>(&'a self, model: &'a str) -> Option<Resolved<'a>> {
        self.wildcards.iter().find_map(|w| {
            let rest = model.strip_prefix(&*w.prefix)?;
            let capture = rest.strip_suffix(&*w.suffix)?;
            (!capture.is_empty()).then_some(Resolved {
                group: &w.group,
                capture: Some(capture),
            })
        })
    }

    /// Exact (non-wildcard) public model names, in config order.
    pub fn names(&self) -> &[Arc<str>] {
        &self.names
    }

    /// The group with this exact name.
    pub fn group(&self, name: &str) -> Option<&Group> {
        self.groups.get(name)
    }

    /// The group a listed model name stands for: a group's own name, or an alias of one.
    pub fn named(&self, name: &str) -> Option<&Group> {
        self.groups.get(name).or_else(|| {
            let a = self.aliases.iter().find(|a| &*a.name == name)?;
            self.resolve_name(&a.group).map(|r| r.group)
        })
    }

    /// What `/v1/models` lists, in config order: each group by its name, then each alias
    /// not marked hidden, with the group it stands for.
    pub fn listed(&self) -> impl Iterator<Item = (&str, &Group)> {
        let groups = self
            .names
            .iter()
            .filter_map(|n| Some((&**n, self.groups.get(n)?)));
        let aliases = self
            .aliases
            .iter()
            .filter(|a| !a.hidden)
            .filter_map(|a| Some((&*a.name, self.resolve_name(&a.group)?.group)));
        groups.chain(aliases)
    }

    /// Every group, wildcard ones included.
    pub fn groups(&self) -> impl Iterator<Item = &Group> {
        self.names
            .iter()
            .filter_map(|n| self.groups.get(n))
            .chain(self.wildcards.iter().map(|w| &w.group))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(group: &str, id: &str) -> Member {
        testing::member(group, id, &[])
    }

    fn first_id(r: Resolved<'_>) -> String {
        r.group.members()[0].target.info.id.to_string()
    }

    #[test]
    fn groups_keep_config_order() {
        let table = ModelTable::new(
            vec![member("g", "a"), member("g", "b"), member("h", "c")],
            |_| None,
        );
        assert_eq!(table.names().len(), 2);
        assert_eq!(table.group("g").unwrap().members().len(), 2);
        assert_eq!(table.groups().count(), 2);
    }

    #[test]
    fn wildcards_capture_and_exact_names_win() {
        let table = ModelTable::new(
            vec![
                member("*", "any"),
                member("openai/*", "oa"),
                member("openai/gpt-4o", "exact"),
            ],
            |name| (name == "openai/*").then_some(HedgeAfter::Percentile(95.0)),
        );
        let r = table.resolve("openai/gpt-4o").unwrap();
        assert_eq!(first_id(r), "exact");
        assert!(r.capture.is_none());
        let r = table.resolve("openai/o3").unwrap();
        assert_eq!(first_id(r), "oa");
        assert_eq!(r.capture, Some("o3"));
        assert!(r.group.hedge.is_some());
        let r = table.resolve("claude-x").unwrap();
        assert_eq!(r.capture, Some("claude-x"));
        assert_eq!(table.names(), [Arc::<str>::from("openai/gpt-4o")]);
        assert!(ModelTable::new(vec![], |_| None).resolve("x").is_none());
    }

    fn alias(name: &str, group: &str, hidden: bool) -> Alias {
        Alias {
            name: name.into(),
            group: group.into(),
            hidden,
        }
    }

    #[test]
    fn aliases_resolve_after_exact_names_and_before_wildcards() {
        let table = ModelTable::new(
            vec![
                member("big", "b"),
                member("small", "s"),
                member("anthropic/*", "wild"),
            ],
            |_| None,
        )
        .with_aliases([
            alias("gpt-4", "big", false),
            alias("secret", "small", true),
            // A group's own name stays the group's.
            alias("small", "big", false),
            // An alias may name a model a wildcard group serves.
            alias("anthropic/claude-x", "big", false),
            alias("claude", "anthropic/claude-3", false),
        ]);
        let r = table.resolve("gpt-4").unwrap();
        assert_eq!(first_id(r), "b");
        assert_eq!(first_id(table.resolve("secret").unwrap()), "s");
        assert_eq!(first_id(table.resolve("small").unwrap()), "s");
        assert_eq!(first_id(table.resolve("anthropic/claude-x").unwrap()), "b");
        let r = table.resolve("claude").unwrap();
        assert_eq!(
            (first_id(r).as_str(), r.capture),
            ("wild", Some("claude-3"))
        );
        assert!(table.resolve("nothing").is_none());
        assert_eq!(table.named("gpt-4").map(|g| &*g.name), Some("big"));
        assert_eq!(table.named("secret").map(|g| &*g.name), Some("small"));
        let listed: Vec<(&str, &str)> = table.listed().map(|(n, g)| (n, &*g.name)).collect();
        assert_eq!(
            listed,
            [
                ("big", "big"),
                ("small", "small"),
                ("gpt-4", "big"),
                ("anthropic/claude-x", "big"),
                ("claude", "anthropic/*"),
            ]
        );
    }
}

/// Test members, shared by the modules' tests.
#[cfg(test)]
pub(crate) mod testing {
    use std::sync::Arc;

    use super::{health::Health, Member};
    use sluice_providers::DeploymentTarget;

    /// A member of `group` with id `id` and these tags, no limits and no known price.
    pub(crate) fn member(group: &str, id: &str, tags: &[&str]) -> Member {
        Member {
            target: Arc::new(DeploymentTarget::mock_for_tests(group, id)),
            health: Arc::new(Health::default()),
            weight: 1.0,
            rpm: None,
            tpm: None,
            cost: f64::INFINITY,
            access_groups: Arc::new([]),
            tags: tags.iter().map(|t| Arc::from(*t)).collect(),
        }
    }
}
