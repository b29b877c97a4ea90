//! Tag-based routing (LiteLLM's `router_settings.enable_tag_filtering`): which deployments of
//! a group may serve a request, from the request's tags and each deployment's
//! `litellm_params.tags`. Pure and static: it reads the tags only, never health, so it runs
//! once per group a request reaches and leaves the choice among the eligible to
//! [`Group::pick`](crate::Group::pick). Nothing here allocates except the error.
//!
//! The rules are LiteLLM's `get_deployments_for_tag`
//! (`litellm/router_strategy/tag_based_routing.py`), with filtering on:
//!
//! - A request tag `!x` excludes the deployments tagged `x`; `&x` requires `x` (a deployment
//!   must carry every `&` tag). A lone `!` or `&` counts for nothing. Every other tag is a
//!   *positive* tag.
//! - **Positive tags**: among the deployments left by `!`/`&`, those whose tags share one of
//!   the positive tags (`tag_filtering_match_any: false`: carry all of them). None: the
//!   deployments left tagged `default`, unless a positive tag is one some deployment of the
//!   group carries (the caller asked for something the group has, just not here), which is a
//!   `RouteError::NoTagMatch`, as is having no `default` deployment to fall back to.
//! - **Only `!`/`&` tags**: with a `&` tag, the deployments left by `!`/`&`; without one, the
//!   `default`-tagged deployments (all of them when none is tagged `default`) less those a
//!   `!` tag excludes. None left: `RouteError::NoTagMatch`.
//! - **No tags**: the deployments tagged `default`, else all of them.
//!
//! Filtering off, every deployment is eligible and tags are ignored.
//!
//! Not taken from LiteLLM (each needs what this crate does not have): `tag_regex` (matches on
//! the request's `User-Agent`), `tag_routing_prefix`, key/team-inherited tags and
//! `model_info.allow_fail_open`, and turning filtering on per group
//! (`model_info.enable_tag_filtering`) or per key or team. LiteLLM filters the deployments not
//! cooling down; this filters all of them and lets the pick skip the cooling ones, so a
//! request whose only match is cooling down waits for it rather than going to `default`.

use std::sync::Arc;

use sluice_core::error::RouteError;

use super::group::{Group, Member, Tried};

/// The tag of the deployments that serve untagged requests, and tagged ones when no
/// deployment matches (LiteLLM's name).
pub const DEFAULT_TAG: &str = "default";

/// `router_settings.enable_tag_filtering` and `tag_filtering_match_any`: whether tags route
/// at all, and how a deployment's tags must meet the request's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TagFiltering {
    /// `enable_tag_filtering` (default `false`): off, deployments' tags are ignored.
    pub enabled: bool,
    /// `tag_filtering_match_any` (default `true`): a deployment matches when it carries one of
    /// the request's positive tags; `false`: only when it carries all of them.
    pub match_any: bool,
}

impl Default for TagFiltering {
    fn default() -> Self {
        Self {
            enabled: false,
            match_any: true,
        }
    }
}

/// Which of a group's deployments a request's tags leave eligible: ask [`Eligible::allows`]
/// per member, or take [`Eligible::outside`] as members already tried.
#[derive(Debug, Clone, Copy)]
pub struct Eligible<'t> {
    pool: Pool,
    tags: &'t [&'t str],
    match_any: bool,
}

/// The rule that picked the eligible members (module comment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pool {
    /// Every member.
    All,
    /// Members tagged `default`.
    Defaults,
    /// Members that `!` tags do not exclude and that carry every `&` tag.
    Constrained,
    /// Of those, the ones tagged `default`.
    ConstrainedDefaults,
    /// Of those, the ones matching the positive tags.
    Matching,
}

impl Eligible<'_> {
    /// Every member: filtering off, or nothing narrows the group.
    pub const ALL: Eligible<'static> = Eligible {
        pool: Pool::All,
        tags: &[],
        match_any: true,
    };

    /// Whether every member is eligible (nothing to filter: the usual request).
    pub fn is_all(&self) -> bool {
        self.pool == Pool::All
    }

    /// Whether `member` may serve the request.
    pub fn allows(&self, member: &Member) -> bool {
        let tags = &member.tags;
        match self.pool {
            Pool::All => true,
            Pool::Defaults => is_default(tags),
            Pool::Constrained => self.passes(tags),
            Pool::ConstrainedDefaults => self.passes(tags) && is_default(tags),
            Pool::Matching => self.passes(tags) && self.matches(tags),
        }
    }

    /// The members of `group` that may not serve the request, as a [`Tried`] set: start a
    /// request's `tried` set from it (as `routing::dispatch` does with an end user's region)
    /// and [`Group::pick`] never chooses them. Groups beyond 128 members share bits as
    /// [`Tried`] does; there a collision can hide an eligible member, which [`Self::allows`]
    /// never does.
    pub fn outside(&self, group: &Group) -> Tried {
        let mut out = Tried::default();
        if self.is_all() {
            return out;
        }
        for (i, m) in group.members().iter().enumerate() {
            if !self.allows(m) {
                out.insert(i);
            }
        }
        out
    }

    /// No `!` tag excludes the deployment and it carries every `&` tag.
    fn passes(&self, tags: &[Arc<str>]) -> bool {
        self.tags.iter().all(|t| match marked(t) {
            Some(Marked::Excluded(x)) => !has(tags, x),
            Some(Marked::Required(r)) => has(tags, r),
            None => true,
        })
    }

    /// The deployment carries one of the positive tags (all of them without `match_any`).
    fn matches(&self, tags: &[Arc<str>]) -> bool {
        if tags.is_empty() {
            return false;
        }
        let mut positive = self.tags.iter().filter(|t| is_positive(t));
        if self.match_any {
            positive.any(|t| has(tags, t))
        } else {
            positive.all(|t| has(tags, t))
        }
    }
}

/// Which members of `group` may serve a request with these tags (`request_tags` as the
/// request gave them: body `tags`, `metadata.tags`, `x-litellm-tags`, the key's and team's;
/// empty for none), by LiteLLM's rules (module comment). Call it once per group the request
/// reaches (the first, then each fallback), after resolving the group and before
/// [`Group::pick`]:
///
/// ```
/// use sluice_core::error::RouteError;
/// use sluice_routing::{eligible, now_ms, Group, Pick, Router};
///
/// fn first_pick<'g>(
///     router: &Router,
///     group: &'g Group,
///     request_tags: &[&str],
/// ) -> Result<Pick<'g>, RouteError> {
///     let eligible = eligible(group, request_tags, router.policy.tags)?;
///     let tried = eligible.outside(group); // members the tags rule out: never picked
///     Ok(group.pick(router.policy.strategy, tried, now_ms()))
/// }
/// ```
///
/// With filtering off this returns [`Eligible::ALL`] at once; otherwise it reads each
/// member's tags at most three times and allocates nothing.
///
/// # Errors
///
/// `RouteError::NoTagMatch` when the tags leave no deployment of the group (LiteLLM's
/// `no_deployments_with_tag_routing`, answered 401).
pub fn eligible<'t>(
    group: &Group,
    request_tags: &'t [&'t str],
    rule: TagFiltering,
) -> Result<Eligible<'t>, RouteError> {
    if !rule.enabled {
        return Ok(Eligible::ALL);
    }
    let members = group.members();
    let with = |pool| Eligible {
        pool,
        tags: request_tags,
        match_any: rule.match_any,
    };
    let any_default = || members.iter().any(|m| is_default(&m.tags));
    let positive = request_tags.iter().any(|t| is_positive(t));
    let (mut required, mut excluded) = (false, false);
    for t in request_tags {
        match marked(t) {
            Some(Marked::Required(_)) => required = true,
            Some(Marked::Excluded(_)) => excluded = true,
            None => {}
        }
    }
    let none_left = |e: &Eligible<'_>| !members.iter().any(|m| e.allows(m));
    if !positive {
        if !required && !excluded {
            // An untagged request: the `default` deployments, else every one.
            return Ok(if any_default() {
                with(Pool::Defaults)
            } else {
                Eligible::ALL
            });
        }
        let e = if !required && any_default() {
            with(Pool::ConstrainedDefaults)
        } else {
            with(Pool::Constrained)
        };
        return if none_left(&e) {
            Err(no_match(group, request_tags))
        } else {
            Ok(e)
        };
    }
    let matching = with(Pool::Matching);
    if !none_left(&matching) {
        return Ok(matching);
    }
    let defaults = with(Pool::ConstrainedDefaults);
    let known = members.iter().any(|m| {
        request_tags
            .iter()
            .any(|t| is_positive(t) && has(&m.tags, t))
    });
    if known || none_left(&defaults) {
        return Err(no_match(group, request_tags));
    }
    Ok(defaults)
}

/// The refusal when the tags leave no deployment (LiteLLM's words, in `RouteError`).
fn no_match(group: &Group, tags: &[&str]) -> RouteError {
    RouteError::NoTagMatch {
        group: group.name.clone(),
        tags: tags.iter().map(|t| Box::from(*t)).collect(),
    }
}

/// A request tag's operator, with the tag it applies to.
enum Marked<'a> {
    /// `!x`.
    Excluded(&'a str),
    /// `&x`.
    Required(&'a str),
}

/// `!x` or `&x` with something after the mark; `None` for a positive tag and a lone mark.
fn marked(t: &str) -> Option<Marked<'_>> {
    if let Some(x) = t.strip_prefix('!') {
        return (!x.is_empty()).then_some(Marked::Excluded(x));
    }
    t.strip_prefix('&')
        .filter(|r| !r.is_empty())
        .map(Marked::Required)
}

/// Neither `!…` nor `&…` (a lone mark is neither positive nor an operator, as in LiteLLM).
fn is_positive(t: &str) -> bool {
    !t.starts_with(['!', '&'])
}

fn has(tags: &[Arc<str>], t: &str) -> bool {
    tags.iter().any(|x| &**x == t)
}

fn is_default(tags: &[Arc<str>]) -> bool {
    has(tags, DEFAULT_TAG)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: &str, tags: &[&str]) -> Member {
        crate::testing::member("g", id, tags)
    }

    fn group(members: &[(&str, &[&str])]) -> Group {
        Group::new(
            "gpt-4".into(),
            members.iter().map(|(id, tags)| member(id, tags)).collect(),
            None,
        )
    }

    const ON: TagFiltering = TagFiltering {
        enabled: true,
        match_any: true,
    };
    const ALL_OF: TagFiltering = TagFiltering {
        enabled: true,
        match_any: false,
    };

    /// The ids of the members eligible, in config order; the error's message otherwise.
    fn ids(g: &Group, tags: &[&str], rule: TagFiltering) -> Result<Vec<String>, String> {
        let e = eligible(g, tags, rule).map_err(|e| e.to_string())?;
        let outside = e.outside(g);
        let ids: Vec<String> = g
            .members()
            .iter()
            .enumerate()
            .filter(|(i, m)| {
                assert_eq!(
                    e.allows(m),
                    !outside.contains(*i),
                    "allows and outside agree"
                );
                e.allows(m)
            })
            .map(|(_, m)| m.target.info.id.to_string())
            .collect();
        Ok(ids)
    }

    fn tiers() -> Group {
        group(&[
            ("free", &["free"]),
            ("paid", &["paid", "fast"]),
            ("dflt", &["default"]),
            ("bare", &[]),
        ])
    }

    #[test]
    fn off_ignores_tags_and_allocates_nothing() {
        let g = tiers();
        let e = eligible(&g, &["paid"], TagFiltering::default()).unwrap();
        assert!(e.is_all());
        assert!(!e.outside(&g).contains(0));
        assert_eq!(
            ids(&g, &["nope"], TagFiltering::default()).unwrap().len(),
            4
        );
        assert!(TagFiltering::default().match_any, "LiteLLM's default");
    }

    #[test]
    fn a_tag_keeps_the_deployments_sharing_any_of_them() {
        let g = tiers();
        assert_eq!(ids(&g, &["free"], ON).unwrap(), ["free"]);
        assert_eq!(ids(&g, &["paid"], ON).unwrap(), ["paid"]);
        // Any one shared tag is enough; the `default` deployment is not added beside a match.
        assert_eq!(ids(&g, &["free", "fast"], ON).unwrap(), ["free", "paid"]);
    }

    #[test]
    fn match_all_needs_every_positive_tag() {
        let g = tiers();
        assert_eq!(ids(&g, &["paid", "fast"], ALL_OF).unwrap(), ["paid"]);
        assert_eq!(ids(&g, &["fast"], ALL_OF).unwrap(), ["paid"]);
        // `free` + `fast` is on no deployment, and both are tags the group knows: an error,
        // not the default deployment.
        let err = ids(&g, &["free", "fast"], ALL_OF).unwrap_err();
        assert!(
            err.starts_with("Not allowed to access model due to tags configuration"),
            "{err}"
        );
    }

    #[test]
    fn an_unknown_tag_falls_back_to_default_deployments() {
        let g = tiers();
        assert_eq!(ids(&g, &["gold"], ON).unwrap(), ["dflt"]);
        assert_eq!(ids(&g, &["gold"], ALL_OF).unwrap(), ["dflt"]);
    }

    #[test]
    fn no_match_and_no_default_is_an_error_naming_group_and_tags() {
        let g = group(&[("free", &["free"]), ("bare", &[])]);
        let e = eligible(&g, &["paid"], ON).unwrap_err();
        let RouteError::NoTagMatch { group: named, tags } = &e else {
            panic!("{e:?}");
        };
        assert_eq!(&**named, "gpt-4");
        assert_eq!(tags.as_ref(), [Box::<str>::from("paid")]);
        let api = sluice_core::error::ApiError::NoDeployment(e.clone());
        assert_eq!(api.status(), http::StatusCode::UNAUTHORIZED);
        assert_eq!(api.code(), "no_deployments_with_tag_routing");
        assert_eq!(
            e.to_string(),
            "Not allowed to access model due to tags configuration. Passed model=gpt-4 and \
             tags=[\"paid\"]"
        );
        // A group with no tags at all refuses any tagged request, as LiteLLM does.
        let untagged = group(&[("a", &[]), ("b", &[])]);
        assert!(ids(&untagged, &["x"], ON).is_err());
        assert_eq!(ids(&untagged, &[], ON).unwrap(), ["a", "b"]);
    }

    #[test]
    fn untagged_requests_go_to_default_deployments_else_all() {
        assert_eq!(ids(&tiers(), &[], ON).unwrap(), ["dflt"]);
        let g = group(&[("free", &["free"]), ("bare", &[])]);
        let e = eligible(&g, &[], ON).unwrap();
        assert!(e.is_all());
        // Lone marks count for nothing: the request is untagged.
        assert_eq!(ids(&tiers(), &["!", "&"], ON).unwrap(), ["dflt"]);
    }

    #[test]
    fn excluded_tags_remove_deployments() {
        let g = tiers();
        // `!free` alone: the default pool (here the one `default` deployment) less `free`.
        assert_eq!(ids(&g, &["!free"], ON).unwrap(), ["dflt"]);
        assert!(ids(&g, &["!default"], ON).is_err());
        // Without `default` deployments the pool is every deployment.
        let g = group(&[("free", &["free"]), ("paid", &["paid"]), ("bare", &[])]);
        assert_eq!(ids(&g, &["!free"], ON).unwrap(), ["paid", "bare"]);
        // With a positive tag: matches less the excluded ones.
        let g = group(&[("a", &["eu", "gpu"]), ("b", &["eu"]), ("c", &["us"])]);
        assert_eq!(ids(&g, &["eu", "!gpu"], ON).unwrap(), ["b"]);
        // The only match excluded, and the tag is the group's: no fallback to `default`.
        let g = group(&[("a", &["eu", "gpu"]), ("d", &["default"])]);
        assert!(ids(&g, &["eu", "!gpu"], ON).is_err());
    }

    #[test]
    fn required_tags_must_all_be_carried() {
        let g = group(&[
            ("a", &["eu", "gpu"]),
            ("b", &["eu"]),
            ("c", &["us", "gpu"]),
            ("d", &["default"]),
        ]);
        // `&` alone: the deployments carrying them, not the default pool.
        assert_eq!(ids(&g, &["&gpu"], ON).unwrap(), ["a", "c"]);
        assert_eq!(ids(&g, &["&gpu", "&eu"], ON).unwrap(), ["a"]);
        assert_eq!(ids(&g, &["&gpu", "!us"], ON).unwrap(), ["a"]);
        assert!(ids(&g, &["&tpu"], ON).is_err());
        // With positive tags: matches among the deployments carrying the `&` tags.
        assert_eq!(ids(&g, &["us", "eu", "&gpu"], ON).unwrap(), ["a", "c"]);
        // Nothing left carries them, and `default` lacks `gpu`: an error.
        assert!(ids(&g, &["fr", "&gpu", "!eu", "!us"], ON).is_err());
        // An unknown positive tag falls back to the `default` deployments that pass.
        let g = group(&[("a", &["gpu"]), ("d", &["default", "gpu"])]);
        assert_eq!(ids(&g, &["fr", "&gpu"], ON).unwrap(), ["d"]);
    }

    #[test]
    fn a_deployment_without_tags_never_matches() {
        let g = group(&[("bare", &[]), ("d", &["default"])]);
        assert_eq!(ids(&g, &["x"], ON).unwrap(), ["d"]);
        assert_eq!(ids(&g, &["x"], ALL_OF).unwrap(), ["d"]);
    }
}
