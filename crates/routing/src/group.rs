//! A model group and the choice of one of its deployments per attempt: skip the ones cooling
//! down or already tried by this request, give a recovered deployment its probe, then apply
//! the routing strategy. A scan over a handful of atomics; no lock, no allocation.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use super::health::{Availability, Health, InFlight};
use super::hedge::{HedgeAfter, TtfbHistogram};
use sluice_core::error::RouteError;
use sluice_providers::DeploymentTarget;

/// `router_settings.routing_strategy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Strategy {
    /// `simple-shuffle`: weighted by `weight` (else `rpm`, else `tpm`), else even.
    #[default]
    SimpleShuffle,
    /// `least-busy`: fewest requests in flight.
    LeastBusy,
    /// `latency-based-routing`: lowest latency estimate (time to first byte for streams), by
    /// the power of two choices so that slower deployments keep being sampled.
    LatencyBased,
    /// `usage-based-routing` (and `-v2`): most rpm/tpm headroom this minute; deployments at
    /// their limit are skipped.
    UsageBased,
    /// `cost-based-routing`: cheapest deployment per token.
    CostBased,
}

impl Strategy {
    /// The strategy LiteLLM's name stands for.
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "simple-shuffle" => Self::SimpleShuffle,
            "least-busy" => Self::LeastBusy,
            "latency-based-routing" => Self::LatencyBased,
            "usage-based-routing" | "usage-based-routing-v2" => Self::UsageBased,
            "cost-based-routing" => Self::CostBased,
            _ => return None,
        })
    }

    /// LiteLLM's name for it.
    pub const fn name(self) -> &'static str {
        match self {
            Self::SimpleShuffle => "simple-shuffle",
            Self::LeastBusy => "least-busy",
            Self::LatencyBased => "latency-based-routing",
            Self::UsageBased => "usage-based-routing",
            Self::CostBased => "cost-based-routing",
        }
    }
}

/// One deployment in a group, with what routing needs to know about it.
#[derive(Debug)]
pub struct Member {
    /// How to call it.
    pub target: Arc<DeploymentTarget>,
    /// Its live state (shared across config reloads).
    pub health: Arc<Health>,
    /// Share for `simple-shuffle`.
    pub weight: f64,
    /// Requests per minute it accepts (`rpm`), for usage-based routing.
    pub rpm: Option<u64>,
    /// Tokens per minute it accepts (`tpm`), for usage-based routing.
    pub tpm: Option<u64>,
    /// USD per input + output token, for cost-based routing (infinite when unknown).
    pub cost: f64,
    /// Its `model_info.access_groups`: names an access list may grant the group by.
    pub access_groups: Arc<[Arc<str>]>,
    /// Its `litellm_params.tags`: what tag-based routing matches a request's tags against
    /// ([`crate::eligible`]); empty for none.
    pub tags: Arc<[Arc<str>]>,
}

/// The deployments one request has already tried in a group: a bit per member.
#[derive(Debug, Default, Clone, Copy)]
pub struct Tried(u128);

impl Tried {
    /// Whether member `i` was tried. Groups beyond 128 members share bits; a collision only
    /// makes a retry skip a deployment it could have used.
    pub fn contains(self, i: usize) -> bool {
        self.0 & (1 << (i % 128)) != 0
    }

    /// Mark member `i` tried.
    pub fn insert(&mut self, i: usize) {
        self.0 |= 1 << (i % 128);
    }
    /// The members in either set (an end user's region and the request's tags both narrow a
    /// group).
    #[must_use]
    pub fn union(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }
}

/// What [`Group::pick`] found.
#[derive(Debug)]
pub enum Pick<'a> {
    /// Call this member; the guard counts the attempt in flight.
    Chosen {
        /// Index in the group.
        index: usize,
        /// The member.
        member: &'a Member,
        /// The attempt, in flight from now on.
        guard: InFlight,
    },
    /// Every member not yet tried is cooling down; the first is back in this long.
    Cooling(Duration),
    /// Every member not yet tried is at its rpm/tpm limit until the minute turns.
    AtLimit(Duration),
    /// Every member was tried.
    Exhausted,
}

/// What [`Group::pick_serving`] found.
#[derive(Debug)]
pub enum Serving<'a, T> {
    /// Call this member with what the caller's test made of it; the guard counts the attempt.
    Chosen {
        /// The member.
        member: &'a Member,
        /// The attempt, in flight from now on.
        guard: InFlight,
        /// What the test returned for it.
        with: T,
    },
    /// Every member left is cooling down; the first is back in this long.
    Cooling(Duration),
    /// Every member left is at its rpm/tpm limit until the minute turns.
    AtLimit(Duration),
    /// No member can serve the request.
    Unserved,
}

impl<'a, T> Serving<'a, T> {
    /// The member chosen and what the test made of it (`None`: no member serves), or why
    /// every member that could is out for now.
    pub fn chosen(self, group: &Group) -> Result<Option<(&'a Member, InFlight, T)>, RouteError> {
        match self {
            Self::Chosen {
                member,
                guard,
                with,
            } => Ok(Some((member, guard, with))),
            Self::Cooling(retry_in) => Err(RouteError::Cooling {
                group: group.name.clone(),
                retry_in,
            }),
            Self::AtLimit(retry_in) => Err(RouteError::AtLimit {
                group: group.name.clone(),
                retry_in,
            }),
            Self::Unserved => Ok(None),
        }
    }
}

/// The deployments behind one public model name.
#[derive(Debug)]
pub struct Group {
    /// Public name.
    pub name: Arc<str>,
    members: Vec<Member>,
    counter: AtomicU64,
    /// Hedging, when configured for this group.
    pub hedge: Option<HedgeAfter>,
    /// Time-to-first-byte distribution, fed when hedging on a percentile.
    pub ttfb: TtfbHistogram,
}

impl Group {
    /// A group over `members`, in config order.
    pub fn new(name: Arc<str>, members: Vec<Member>, hedge: Option<HedgeAfter>) -> Self {
        Self {
            name,
            members,
            counter: AtomicU64::new(0),
            hedge,
            ttfb: TtfbHistogram::default(),
        }
    }

    /// The members, in config order.
    pub fn members(&self) -> &[Member] {
        &self.members
    }

    /// Whether one of its deployments is in the access group `name` (`model_info.access_groups`),
    /// so that a `models` list naming that access group grants this group.
    pub fn in_access_group(&self, name: &str) -> bool {
        self.members
            .iter()
            .any(|m| m.access_groups.iter().any(|g| **g == *name))
    }

    /// The deployments, in config order.
    pub fn deployments(&self) -> impl Iterator<Item = &Arc<DeploymentTarget>> {
        self.members.iter().map(|m| &m.target)
    }

    /// Choose a member for the next attempt. A member whose cooldown just ended gets the
    /// request as its probe (so that it comes back as soon as it works); otherwise the
    /// strategy chooses among the healthy members this request has not tried.
    pub fn pick(&self, strategy: Strategy, tried: Tried, now: u64) -> Pick<'_> {
        let mut cooling: Option<Duration> = None;
        let mut ready = Tried::default(); // reused as "eligible" bits
        let mut any = false;
        for (i, m) in self.members.iter().enumerate() {
            if tried.contains(i) {
                continue;
            }
            match m.health.availability(now) {
                Availability::Ready => {
                    ready.insert(i);
                    any = true;
                }
                Availability::Probe if m.health.claim_probe() => {
                    return Pick::Chosen {
                        index: i,
                        member: m,
                        guard: m.health.begin(true),
                    };
                }
                Availability::Probe => cooling = Some(cooling.map_or(Duration::ZERO, |c| c)),
                Availability::Cooling(d) => cooling = Some(cooling.map_or(d, |c| c.min(d))),
            }
        }
        if !any {
            return match cooling {
                Some(d) => Pick::Cooling(d),
                None => Pick::Exhausted,
            };
        }
        let n = self.counter.fetch_add(1, Relaxed);
        let chosen = match strategy {
            Strategy::SimpleShuffle => self.shuffle(ready, n),
            Strategy::LeastBusy => self.min_by(ready, n, |m| f64::from(m.health.in_flight())),
            Strategy::LatencyBased => self.two_choices(ready, n),
            Strategy::CostBased => self.min_by(ready, n, |m| m.cost),
            Strategy::UsageBased => match self.most_headroom(ready, n, now) {
                Some(i) => Some(i),
                None => return Pick::AtLimit(Duration::from_millis(60_000 - now % 60_000)),
            },
        };
        match chosen {
            Some(index) => {
                let member = &self.members[index];
                Pick::Chosen {
                    index,
                    member,
                    guard: member.health.begin(false),
                }
            }
            None => Pick::Exhausted,
        }
    }

    /// Choose by the strategy among the members that can serve a request: `serves` tests the
    /// member chosen, and one it turns down is passed over as if tried (a Realtime session
    /// needs a provider with a Realtime API; a pass-through route, its own provider).
    pub fn pick_serving<T>(
        &self,
        strategy: Strategy,
        now: u64,
        mut serves: impl FnMut(&Member) -> Option<T>,
    ) -> Serving<'_, T> {
        let mut tried = Tried::default();
        loop {
            match self.pick(strategy, tried, now) {
                Pick::Chosen {
                    index,
                    member,
                    guard,
                } => match serves(member) {
                    Some(with) => {
                        return Serving::Chosen {
                            member,
                            guard,
                            with,
                        }
                    }
                    None => tried.insert(index),
                },
                Pick::Cooling(d) => return Serving::Cooling(d),
                Pick::AtLimit(d) => return Serving::AtLimit(d),
                Pick::Exhausted => return Serving::Unserved,
            }
        }
    }

    fn eligible(&self, set: Tried) -> impl Iterator<Item = (usize, &Member)> {
        self.members
            .iter()
            .enumerate()
            .filter(move |(i, _)| set.contains(*i))
    }

    /// Weighted choice among the eligible members. The draw is a golden-ratio sequence over
    /// the request counter: evenly spread shares without a random-number generator.
    fn shuffle(&self, set: Tried, n: u64) -> Option<usize> {
        let total: f64 = self.eligible(set).map(|(_, m)| m.weight).sum();
        let mut x = ((n as f64) * 0.618_033_988_749_895).fract() * total;
        let mut last = None;
        for (i, m) in self.eligible(set) {
            if x < m.weight {
                return Some(i);
            }
            x -= m.weight;
            last = Some(i);
        }
        last
    }

    /// The eligible member with the lowest `score`; ties rotate with the request counter.
    fn min_by(&self, set: Tried, n: u64, score: impl Fn(&Member) -> f64) -> Option<usize> {
        let len = self.members.len();
        let start = (n % len as u64) as usize;
        let mut best: Option<(usize, f64)> = None;
        for k in 0..len {
            let i = (start + k) % len;
            if !set.contains(i) {
                continue;
            }
            let s = score(&self.members[i]);
            if best.is_none_or(|(_, b)| s < b) {
                best = Some((i, s));
            }
        }
        best.map(|(i, _)| i)
    }

    /// Power of two choices on the latency estimate; a member without one is tried first.
    fn two_choices(&self, set: Tried, n: u64) -> Option<usize> {
        let count = self.eligible(set).count();
        if count <= 2 {
            return self.min_by(set, n, latency_score);
        }
        let a = fastrand::usize(..count);
        let b = (a + 1 + fastrand::usize(..count - 1)) % count;
        let mut picks = self
            .eligible(set)
            .enumerate()
            .filter_map(|(k, (i, m))| (k == a || k == b).then_some((i, latency_score(m))));
        let first = picks.next()?;
        let second = picks.next().unwrap_or(first);
        Some(if second.1 < first.1 {
            second.0
        } else {
            first.0
        })
    }

    /// The member furthest from its rpm/tpm limits this minute; `None` when all are at them.
    fn most_headroom(&self, set: Tried, n: u64, now: u64) -> Option<usize> {
        let headroom = |m: &Member| {
            let (reqs, toks) = m.health.usage(now);
            let free = |used: u64, limit: Option<u64>| match limit {
                Some(0) => 0.0,
                Some(l) => 1.0 - (used as f64 / l as f64),
                None => 1.0,
            };
            free(reqs, m.rpm).min(free(toks, m.tpm))
        };
        let best = self.min_by(set, n, |m| -headroom(m))?;
        (headroom(&self.members[best]) > 0.0).then_some(best)
    }
}

fn latency_score(m: &Member) -> f64 {
    m.health.latency().map_or(0.0, |d| d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::failure::FailureKind;
    use crate::health::{now_ms, Breaker};
    use sluice_providers::DeploymentTarget;
    use std::collections::HashMap;

    pub(crate) fn member(id: &str, weight: f64) -> Member {
        Member {
            target: Arc::new(DeploymentTarget::mock_for_tests("g", id)),
            health: Arc::new(Health::default()),
            weight,
            rpm: None,
            tpm: None,
            cost: f64::INFINITY,
            access_groups: Arc::new([]),
            tags: Arc::new([]),
        }
    }

    fn chosen(p: Pick<'_>) -> (usize, InFlight) {
        match p {
            Pick::Chosen { index, guard, .. } => (index, guard),
            other => panic!("expected a choice, got {other:?}"),
        }
    }

    fn shares(g: &Group, s: Strategy, n: usize) -> HashMap<usize, usize> {
        let mut counts = HashMap::new();
        for _ in 0..n {
            let (i, _) = chosen(g.pick(s, Tried::default(), now_ms()));
            *counts.entry(i).or_insert(0) += 1;
        }
        counts
    }

    #[test]
    fn shuffle_follows_weights_and_skips_tried() {
        let g = Group::new("g".into(), vec![member("a", 3.0), member("b", 1.0)], None);
        let c = shares(&g, Strategy::SimpleShuffle, 10_000);
        let a = c[&0] as f64 / 10_000.0;
        assert!((a - 0.75).abs() < 0.01, "share of a: {a}");
        let mut tried = Tried::default();
        tried.insert(0);
        for _ in 0..10 {
            assert_eq!(
                chosen(g.pick(Strategy::SimpleShuffle, tried, now_ms())).0,
                1
            );
        }
        tried.insert(1);
        assert!(matches!(
            g.pick(Strategy::SimpleShuffle, tried, now_ms()),
            Pick::Exhausted
        ));
    }

    #[test]
    fn even_shares_without_weights() {
        let g = Group::new("g".into(), vec![member("a", 1.0), member("b", 1.0)], None);
        let c = shares(&g, Strategy::SimpleShuffle, 100);
        assert!((c[&0] as i64 - 50).abs() <= 1, "{c:?}");
    }

    #[test]
    fn cooling_members_are_skipped_then_probed() {
        let g = Group::new("g".into(), vec![member("a", 1.0), member("b", 1.0)], None);
        let breaker = Breaker {
            cooldown: Duration::from_millis(30),
            ..Breaker::default()
        };
        let (i, mut guard) = chosen(g.pick(Strategy::SimpleShuffle, Tried::default(), now_ms()));
        assert!(guard.fail(FailureKind::RateLimit, None, &breaker));
        drop(guard);
        for _ in 0..20 {
            let (j, _) = chosen(g.pick(Strategy::SimpleShuffle, Tried::default(), now_ms()));
            assert_ne!(i, j, "a cooling member is never chosen");
        }
        let mut tried = Tried::default();
        tried.insert(1 - i);
        assert!(matches!(
            g.pick(Strategy::SimpleShuffle, tried, now_ms()),
            Pick::Cooling(_)
        ));
        std::thread::sleep(Duration::from_millis(40));
        let (j, probe) = chosen(g.pick(Strategy::SimpleShuffle, Tried::default(), now_ms()));
        assert_eq!(i, j, "the next request probes the recovered member");
        let (k, _) = chosen(g.pick(Strategy::SimpleShuffle, Tried::default(), now_ms()));
        assert_ne!(k, i, "only one probe at a time");
        drop(probe);
    }

    #[test]
    fn only_members_that_serve_are_chosen() {
        let g = Group::new(
            "g".into(),
            vec![member("a", 1.0), member("b", 1.0), member("c", 1.0)],
            None,
        );
        let serves_b = |m: &Member| (&*m.target.info.id == "b").then_some(7);
        for _ in 0..10 {
            match g.pick_serving(Strategy::SimpleShuffle, now_ms(), serves_b) {
                Serving::Chosen { member, with, .. } => {
                    assert_eq!((&*member.target.info.id, with), ("b", 7));
                }
                other => panic!("{other:?}"),
            }
        }
        assert!(matches!(
            g.pick_serving(Strategy::LeastBusy, now_ms(), |_| None::<()>),
            Serving::Unserved
        ));
        // The one that serves cools down: the caller hears how long for.
        let breaker = Breaker::default();
        if let Serving::Chosen { mut guard, .. } =
            g.pick_serving(Strategy::SimpleShuffle, now_ms(), serves_b)
        {
            guard.fail(FailureKind::Authentication, None, &breaker);
        }
        assert!(matches!(
            g.pick_serving(Strategy::SimpleShuffle, now_ms(), serves_b),
            Serving::Cooling(_)
        ));
    }

    #[test]
    fn least_busy_takes_the_idlest() {
        let g = Group::new(
            "g".into(),
            vec![member("a", 1.0), member("b", 1.0), member("c", 1.0)],
            None,
        );
        let _busy_a = g.members()[0].health.begin(false);
        let _busy_c = g.members()[2].health.begin(false);
        let _busy_c2 = g.members()[2].health.begin(false);
        for _ in 0..5 {
            let (i, _) = chosen(g.pick(Strategy::LeastBusy, Tried::default(), now_ms()));
            assert_eq!(i, 1);
        }
    }

    #[test]
    fn latency_based_prefers_the_fast_one() {
        let g = Group::new(
            "g".into(),
            vec![member("slow", 1.0), member("fast", 1.0)],
            None,
        );
        g.members()[0]
            .health
            .begin(false)
            .succeed(Duration::from_millis(50));
        g.members()[1]
            .health
            .begin(false)
            .succeed(Duration::from_millis(5));
        let c = shares(&g, Strategy::LatencyBased, 100);
        assert_eq!(c.get(&1), Some(&100));
    }

    #[test]
    fn usage_based_spreads_and_stops_at_limits() {
        let mut a = member("a", 1.0);
        a.rpm = Some(2);
        let mut b = member("b", 1.0);
        b.rpm = Some(4);
        let g = Group::new("g".into(), vec![a, b], None);
        let mut seen = Vec::new();
        for _ in 0..6 {
            let (i, _) = chosen(g.pick(Strategy::UsageBased, Tried::default(), now_ms()));
            seen.push(i);
        }
        assert_eq!(seen.iter().filter(|i| **i == 0).count(), 2, "{seen:?}");
        assert!(matches!(
            g.pick(Strategy::UsageBased, Tried::default(), now_ms()),
            Pick::AtLimit(_)
        ));
    }

    #[test]
    fn cost_based_takes_the_cheapest() {
        let mut a = member("a", 1.0);
        a.cost = 3e-6;
        let mut b = member("b", 1.0);
        b.cost = 1e-6;
        let g = Group::new("g".into(), vec![a, b, member("unknown", 1.0)], None);
        let c = shares(&g, Strategy::CostBased, 20);
        assert_eq!(c.get(&1), Some(&20));
    }

    #[test]
    fn strategy_names() {
        assert_eq!(
            Strategy::from_name("usage-based-routing-v2"),
            Some(Strategy::UsageBased)
        );
        assert_eq!(Strategy::from_name("nope"), None);
    }
}
