//! Model groups: deployments that share a `model_name`, and the choice of one per request.
//! The table is immutable (rebuilt on reload); per-group state is atomics, so picking a
//! deployment takes no lock and allocates nothing.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::providers::DeploymentTarget;

/// The deployments behind one public model name.
#[derive(Debug)]
pub struct Group {
    /// Public name.
    pub name: Arc<str>,
    deployments: Vec<Arc<DeploymentTarget>>,
    /// Cumulative weights (same length as `deployments`) when any deployment has a weight.
    cumulative: Option<Vec<f64>>,
    counter: AtomicU64,
}

impl Group {
    fn new(name: Arc<str>, members: Vec<Weighted>) -> Self {
        let weighted = members.iter().any(|(_, w)| w.is_some());
        let cumulative = weighted.then(|| {
            members
                .iter()
                .scan(0.0, |acc, (_, w)| {
                    *acc += w.unwrap_or(1.0);
                    Some(*acc)
                })
                .collect()
        });
        Self {
            name,
            deployments: members.into_iter().map(|(d, _)| d).collect(),
            cumulative,
            counter: AtomicU64::new(0),
        }
    }

    /// The deployments, in config order.
    pub fn deployments(&self) -> &[Arc<DeploymentTarget>] {
        &self.deployments
    }

    /// Choose a deployment: weighted when weights are set, else round robin. The weighted
    /// draw uses a golden-ratio sequence over the request counter, which spreads picks evenly
    /// without a random-number generator.
    pub fn pick(&self) -> &Arc<DeploymentTarget> {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let idx = match &self.cumulative {
            None => (n % self.deployments.len() as u64) as usize,
            Some(cum) => {
                let total = cum.last().copied().unwrap_or(1.0);
                let x = ((n as f64) * 0.618_033_988_749_895).fract() * total;
                cum.iter().position(|c| x < *c).unwrap_or(cum.len() - 1)
            }
        };
        &self.deployments[idx]
    }
}

/// A deployment with its routing weight (`litellm_params.weight`).
pub type Weighted = (Arc<DeploymentTarget>, Option<f64>);

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

/// All model groups of one config snapshot.
#[derive(Debug, Default)]
pub struct ModelTable {
    groups: HashMap<Arc<str>, Group>,
    wildcards: Vec<Wildcard>,
    /// Public names in config order, for `/v1/models`.
    names: Vec<Arc<str>>,
}

impl ModelTable {
    /// Group deployments by `model_name`, keeping config order.
    pub fn new(targets: Vec<Weighted>) -> Self {
        let mut order: Vec<Arc<str>> = Vec::new();
        let mut members: HashMap<Arc<str>, Vec<Weighted>> = HashMap::new();
        for (t, w) in targets {
            let name = t.model_name.clone();
            if !members.contains_key(&name) {
                order.push(name.clone());
            }
            members.entry(name).or_default().push((t, w));
        }
        let mut table = Self::default();
        for name in order {
            let group = Group::new(name.clone(), members.remove(&name).unwrap_or_default());
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

    /// Find the group serving `model`: an exact name first, then wildcard patterns.
    pub fn resolve<'a>(&'a self, model: &'a str) -> Option<Resolved<'a>> {
        if let Some(group) = self.groups.get(model) {
            return Some(Resolved {
                group,
                capture: None,
            });
        }
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
    use crate::mock::MockSettings;
    use crate::providers::{Provider, TargetKind};
    use http::HeaderValue;

    fn target(group: &str, id: &str) -> Arc<DeploymentTarget> {
        Arc::new(DeploymentTarget {
            id: Arc::from(id),
            id_header: HeaderValue::from_static("x"),
            model_name: Arc::from(group),
            provider: Provider::Mock,
            kind: TargetKind::Mock(MockSettings::default()),
        })
    }

    fn share(table: &ModelTable, group: &str, n: usize) -> HashMap<String, usize> {
        let g = table.resolve(group).unwrap().group;
        let mut counts = HashMap::new();
        for _ in 0..n {
            *counts.entry(g.pick().id.to_string()).or_insert(0) += 1;
        }
        counts
    }

    #[test]
    fn round_robin_without_weights() {
        let table = ModelTable::new(vec![
            (target("g", "a"), None),
            (target("g", "b"), None),
            (target("h", "c"), None),
        ]);
        let counts = share(&table, "g", 100);
        assert_eq!(counts["a"], 50);
        assert_eq!(counts["b"], 50);
        assert_eq!(table.names().len(), 2);
    }

    #[test]
    fn weights_shape_the_share() {
        let table = ModelTable::new(vec![
            (target("g", "a"), Some(3.0)),
            (target("g", "b"), Some(1.0)),
        ]);
        let counts = share(&table, "g", 10_000);
        let a = counts["a"] as f64 / 10_000.0;
        assert!((a - 0.75).abs() < 0.01, "share of a: {a}");
    }

    #[test]
    fn wildcards_capture_and_exact_names_win() {
        let table = ModelTable::new(vec![
            (target("*", "any"), None),
            (target("openai/*", "oa"), None),
            (target("openai/gpt-4o", "exact"), None),
        ]);
        let r = table.resolve("openai/gpt-4o").unwrap();
        assert_eq!(r.group.pick().id.as_ref(), "exact");
        assert!(r.capture.is_none());
        let r = table.resolve("openai/o3").unwrap();
        assert_eq!(r.group.pick().id.as_ref(), "oa");
        assert_eq!(r.capture, Some("o3"));
        let r = table.resolve("claude-x").unwrap();
        assert_eq!(r.capture, Some("claude-x"));
        assert_eq!(table.names(), [Arc::<str>::from("openai/gpt-4o")]);
        assert!(ModelTable::new(vec![]).resolve("x").is_none());
    }
}
