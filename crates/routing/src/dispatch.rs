//! Step 7 of the pipeline with its failure handling: call a deployment of the group; on a
//! failure, retry on another deployment (a cooled-down one is never called), fall back to
//! other groups, and hedge a slow first attempt. Generic over what an attempt returns, so the
//! pipeline keeps the wire details and this module keeps the decisions.
//!
//! The rules, in order:
//! 1. A retry goes to a deployment this request has not tried, at once.
//! 2. When every deployment of the group was tried (or is cooling down), sluice falls back to
//!    the next group at once if there is one; a group whose deployments are all cooling down
//!    is skipped without a call.
//! 3. Only without a fallback does it retry deployments it already tried, after a backoff
//!    that honours `Retry-After`.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::failure::FailureKind;
use super::group::{Group, Member, Pick, Tried};
use super::health::{now_ms, InFlight};
use super::{Resolved, Router};
use sluice_core::error::{MockFailure, RouteError};
use sluice_core::record::{AttemptEnd, AttemptSpan, Attempts, Explain};
use sluice_core::trace_context::{new_span_id, SpanId};

/// One attempt the pipeline is asked to make.
#[derive(Debug, Clone, Copy)]
pub struct Attempt<'a> {
    /// The group being served.
    pub group: &'a Group,
    /// The deployment to call.
    pub member: &'a Member,
    /// What a wildcard group's `*` matched.
    pub capture: Option<&'a str>,
    /// The attempt's span id (the `traceparent` parent sent upstream).
    pub span_id: SpanId,
}

/// A failed attempt, classified.
#[derive(Debug)]
pub struct Failure<E> {
    /// What kind of failure.
    pub kind: FailureKind,
    /// How long the upstream asked us to wait.
    pub retry_after: Option<Duration>,
    /// The error to give the client if nothing else works.
    pub error: E,
    /// Nothing may be tried after this failure: the request's upload was spent on it (an
    /// upload is relayed once, never held whole to send again).
    pub terminal: bool,
    /// The failure concerns this endpoint only (a 404 for `count_tokens` from an upstream
    /// that does not serve it): another deployment is tried, but this one is not cooled, since
    /// its other endpoints are as healthy as before.
    pub scoped: bool,
}

/// The request's own routing settings (from its body).
#[derive(Debug, Default)]
pub struct Requested<'a> {
    /// `num_retries`.
    pub num_retries: Option<u32>,
    /// `fallbacks`.
    pub fallbacks: Option<&'a [Arc<str>]>,
    /// The body can be sent only once (an upload relayed as it arrives): no hedged second
    /// attempt, and a failure after sending ends the request.
    pub one_shot: bool,
    /// Whether the caller may use a fallback group (by the name it was listed under); `None`
    /// for callers with no access list (the master key, sluice's own calls). A fallback the
    /// caller may not use is skipped and named in [`Outcome::refused`]: without this, a key
    /// allowed one group could name any other as its fallback.
    pub may_use: Option<MayUse<'a>>,
    /// LiteLLM's `mock_testing_*` switches: the group asked for fails this way before any
    /// of its deployments is called (no upstream call, no health change).
    pub mock: Option<MockFailure>,
    /// The only region whose deployments may serve it (an end user's
    /// `allowed_model_region`): the others count as tried from the start.
    pub region: Option<&'a str>,
    /// Its tags (the request's, its key's and team's), for tag routing: the deployments they
    /// leave out (`tags::eligible`) count as tried from the start.
    pub tags: &'a [&'a str],
}

/// The caller's model access, as dispatch asks it of each fallback group: `(name, group)`.
#[derive(Clone, Copy)]
pub struct MayUse<'a>(pub &'a (dyn Fn(&str, &Group) -> bool + Send + Sync));

impl std::fmt::Debug for MayUse<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MayUse(..)")
    }
}

/// A successful attempt.
#[derive(Debug)]
pub struct Served<'a, A> {
    /// What the attempt returned.
    pub answer: A,
    /// The group that served it (a fallback's, after a fallback).
    pub group: &'a Group,
    /// The deployment that served it.
    pub member: &'a Member,
    /// Its in-flight slot: keep it until the answer is fully sent (streams), then drop it.
    pub guard: InFlight,
}

/// The end of dispatching one request.
#[derive(Debug)]
pub struct Outcome<'a, A, E> {
    /// The answer, or the failure to report.
    pub result: Result<Served<'a, A>, Failure<E>>,
    /// The deployment of the last attempt made, if any.
    pub last: Option<&'a Member>,
    /// Attempts after the first within a group, summed over groups.
    pub retries: u32,
    /// Fallback groups moved to.
    pub fallbacks: u32,
    /// Hedged second attempts started.
    pub hedges: u32,
    /// Every attempt made, with its timing and result (for the trace).
    pub attempts: Attempts,
    /// Fallback groups skipped because the caller may not use them; `None` (and no
    /// allocation, and one word in every request's future) unless one was.
    #[allow(clippy::box_collection)] // one word, not a Vec's three, in every request's future
    pub refused: Option<Box<Vec<Arc<str>>>>,
}

struct Run<'a> {
    router: &'a Router,
    requested: &'a Requested<'a>,
    last: Option<&'a Member>,
    retries: u32,
    hedges: u32,
    trail: Attempts,
    #[allow(clippy::box_collection)] // see `Outcome::refused`
    refused: Option<Box<Vec<Arc<str>>>>,
}

/// Serve one request: the group `first`, then its fallbacks. `attempt` makes one upstream
/// call and classifies its failure.
pub async fn dispatch<'a, A, E, F, Fut>(
    router: &'a Router,
    first: Resolved<'a>,
    requested: &'a Requested<'a>,
    mut attempt: F,
) -> Outcome<'a, A, E>
where
    F: FnMut(Attempt<'a>) -> Fut,
    Fut: Future<Output = Result<A, Failure<E>>>,
    E: From<RouteError> + Explain,
{
    let mut run = Run {
        router,
        requested,
        last: None,
        retries: 0,
        hedges: 0,
        trail: Attempts::new(),
        refused: None,
    };
    let mut current = first;
    let mut fallbacks: u32 = 0;
    let mut chain: Option<(&'a [Arc<str>], usize)> = None;
    loop {
        let can_fall_back = match chain {
            Some((list, next)) => next < list.len(),
            None => router
                .fallbacks
                .any_for(&first.group.name, requested.fallbacks.is_some()),
        } && (fallbacks as usize) < router.policy.max_fallbacks;
        let mocked = requested.mock.filter(|_| fallbacks == 0);
        let failure = match mocked {
            // The first attempt fails as a rate limit; the group's retries follow as usual.
            Some(MockFailure::RateLimit) => {
                let deployment = current.group.members().first();
                let wanted = requested
                    .num_retries
                    .or(deployment.and_then(|m| m.target.num_retries));
                if router.policy.retries(FailureKind::RateLimit, wanted) == 0 {
                    mock_failure(current.group, MockFailure::RateLimit)
                } else {
                    run.retries += 1;
                    match run.group(current, can_fall_back, &mut attempt).await {
                        Ok(served) => return run.finish(Ok(served), fallbacks),
                        Err(f) => f,
                    }
                }
            }
            Some(what) => mock_failure(current.group, what),
            None => match run.group(current, can_fall_back, &mut attempt).await {
                Ok(served) => return run.finish(Ok(served), fallbacks),
                Err(f) => f,
            },
        };
        let (list, next) = chain.get_or_insert_with(|| {
            (
                router
                    .fallbacks
                    .chain(&first.group.name, failure.kind, requested.fallbacks),
                0,
            )
        });
        let mut found = None;
        while *next < list.len() && (fallbacks as usize) < router.policy.max_fallbacks {
            let name = &list[*next];
            *next += 1;
            if let Some(r) = router.models.resolve(name) {
                if std::ptr::eq(r.group, current.group) {
                    continue;
                }
                if requested.may_use.is_some_and(|m| !(m.0)(name, r.group)) {
                    run.refused.get_or_insert_default().push(name.clone());
                    continue;
                }
                found = Some(r);
                break;
            }
        }
        match found {
            Some(r) if failure.kind != FailureKind::BadRequest && !failure.terminal => {
                fallbacks += 1;
                current = r;
            }
            _ => return run.finish(Err(failure), fallbacks),
        }
    }
}

impl<'a> Run<'a> {
    fn finish<A, E>(
        self,
        result: Result<Served<'a, A>, Failure<E>>,
        fallbacks: u32,
    ) -> Outcome<'a, A, E> {
        Outcome {
            result,
            last: self.last,
            retries: self.retries,
            fallbacks,
            hedges: self.hedges,
            attempts: self.trail,
            refused: self.refused,
        }
    }

    /// Note an attempt's start; returns its place in the trail.
    fn begin(&mut self, call: &Attempt<'a>, hedge: bool, start: Instant) -> usize {
        self.trail.push(AttemptSpan {
            span_id: call.span_id,
            target: call.member.target.info.clone(),
            hedge,
            start,
            end: None,
            result: AttemptEnd::Open,
            error: None,
        });
        self.trail.len() - 1
    }

    /// Note how an attempt ended.
    fn end<A, E: Explain>(&mut self, at: usize, result: &Result<A, Failure<E>>) {
        self.close(
            at,
            match result {
                Ok(_) => AttemptEnd::Ok,
                Err(f) => AttemptEnd::Failed(f.kind.name()),
            },
        );
        if let (Err(f), Some(a)) = (result, self.trail.get_mut(at)) {
            a.error = f.error.explain().map(Box::new);
        }
    }

    fn close(&mut self, at: usize, result: AttemptEnd) {
        if let Some(a) = self.trail.get_mut(at) {
            a.end = Some(Instant::now());
            a.result = result;
        }
    }

    /// The members of `group` outside the request's region, if it has one.
    fn outside_region(&self, group: &Group) -> Tried {
        let mut outside = Tried::default();
        if let Some(region) = self.requested.region {
            for (i, m) in group.members().iter().enumerate() {
                if m.target.info.region.as_deref() != Some(region) {
                    outside.insert(i);
                }
            }
        }
        outside
    }

    /// Attempts within one group, by the rules in the module comment.
    async fn group<A, E, F, Fut>(
        &mut self,
        at: Resolved<'a>,
        can_fall_back: bool,
        attempt: &mut F,
    ) -> Result<Served<'a, A>, Failure<E>>
    where
        F: FnMut(Attempt<'a>) -> Fut,
        Fut: Future<Output = Result<A, Failure<E>>>,
        E: From<RouteError> + Explain,
    {
        let policy = &self.router.policy;
        let group = at.group;
        let outside = self.outside_region(group);
        let mut tried = outside;
        if policy.tags.enabled {
            match crate::tags::eligible(group, self.requested.tags, policy.tags) {
                Ok(e) => tried = tried.union(e.outside(group)),
                Err(e) => return Err(route_failure(e)),
            }
        }
        let mut attempts: u32 = 0;
        let mut same_again: u32 = 0;
        let mut last: Option<Failure<E>> = None;
        loop {
            match group.pick(policy.strategy, tried, now_ms()) {
                Pick::Chosen {
                    index,
                    member,
                    guard,
                } => {
                    if attempts > 0 {
                        self.retries += 1;
                    }
                    attempts += 1;
                    self.last = Some(member);
                    let first = attempts == 1;
                    let call = Attempt {
                        group,
                        member,
                        capture: at.capture,
                        span_id: new_span_id(),
                    };
                    // The request's own `num_retries`, else the failed deployment's, else the
                    // router's (LiteLLM reads the deployment's from the failure it raised).
                    let wanted = self.requested.num_retries.or(member.target.num_retries);
                    match self.one(call, index, guard, tried, first, attempt).await {
                        Ok(served) => return Ok(served),
                        Err(f) => {
                            tried.insert(index);
                            let allowed = policy.retries(f.kind, wanted);
                            let give_up = attempts > allowed || f.terminal;
                            last = Some(f);
                            if give_up {
                                break;
                            }
                        }
                    }
                }
                Pick::Cooling(retry_in) => {
                    last = last.or_else(|| {
                        Some(route_failure(RouteError::Cooling {
                            group: group.name.clone(),
                            retry_in,
                        }))
                    });
                    break;
                }
                Pick::AtLimit(retry_in) => {
                    last = last.or_else(|| {
                        Some(route_failure(RouteError::AtLimit {
                            group: group.name.clone(),
                            retry_in,
                        }))
                    });
                    break;
                }
                Pick::Exhausted => {
                    // Everyone was tried. Move on if there is somewhere to go; otherwise try
                    // the same deployments again, after a backoff.
                    let Some(f) = last.as_ref().filter(|_| !can_fall_back) else {
                        break;
                    };
                    same_again += 1;
                    tokio::time::sleep(policy.backoff(same_again, f.retry_after)).await;
                    tried = outside;
                }
            }
        }
        Err(last.unwrap_or_else(|| {
            route_failure(RouteError::Cooling {
                group: group.name.clone(),
                retry_in: Duration::ZERO,
            })
        }))
    }

    /// One attempt, hedged when the group asks for it and this is the group's first attempt.
    async fn one<A, E, F, Fut>(
        &mut self,
        call: Attempt<'a>,
        index: usize,
        guard: InFlight,
        tried: Tried,
        first: bool,
        attempt: &mut F,
    ) -> Result<Served<'a, A>, Failure<E>>
    where
        F: FnMut(Attempt<'a>) -> Fut,
        Fut: Future<Output = Result<A, Failure<E>>>,
        E: Explain,
    {
        let breaker = &self.router.policy.breaker;
        let group = call.group;
        let started = Instant::now();
        let delay = group
            .hedge
            .filter(|_| first && !self.requested.one_shot)
            .and_then(|h| h.delay(&group.ttfb));
        let first_at = self.begin(&call, false, started);
        let Some(delay) = delay else {
            // Awaited where it is made: a future kept in a local and awaited later takes a
            // second slot in this function's state, and every request's future grows by it.
            let r = attempt(call).await;
            self.end(first_at, &r);
            return settle(call, guard, r, started, breaker);
        };
        // Hedged attempts are boxed, so the unhedged path's future holds one attempt, not three.
        let mut primary = Box::pin(attempt(call));
        tokio::select! {
            r = &mut primary => {
                self.end(first_at, &r);
                return settle(call, guard, r, started, breaker);
            }
            () = tokio::time::sleep(delay) => {}
        }
        // The first attempt is slow: send a second to another deployment, if one is ready.
        let mut others = tried;
        others.insert(index);
        let (second_call, second_guard) =
            match group.pick(self.router.policy.strategy, others, now_ms()) {
                Pick::Chosen { member, guard, .. } => (
                    Attempt {
                        group,
                        member,
                        capture: call.capture,
                        span_id: new_span_id(),
                    },
                    guard,
                ),
                _ => {
                    let r = primary.await;
                    self.end(first_at, &r);
                    return settle(call, guard, r, started, breaker);
                }
            };
        self.hedges += 1;
        let second_at = self.begin(&second_call, true, Instant::now());
        let mut secondary = Box::pin(attempt(second_call));
        // The first to succeed wins; returning drops the other future, which closes its
        // upstream connection. If one fails, the other still has its chance.
        tokio::select! {
            r = &mut primary => {
                self.end(first_at, &r);
                match r {
                    Ok(a) => {
                        self.close(second_at, AttemptEnd::Cancelled);
                        settle(call, guard, Ok(a), started, breaker)
                    }
                    Err(f) => {
                        drop(settle_failure(guard, f, breaker));
                        self.last = Some(second_call.member);
                        let r = secondary.await;
                        self.end(second_at, &r);
                        settle(second_call, second_guard, r, started, breaker)
                    }
                }
            },
            r = &mut secondary => {
                self.end(second_at, &r);
                self.last = Some(second_call.member);
                match r {
                    Ok(a) => {
                        self.close(first_at, AttemptEnd::Cancelled);
                        settle(second_call, second_guard, Ok(a), started, breaker)
                    }
                    Err(f) => {
                        drop(settle_failure(second_guard, f, breaker));
                        let r = primary.await;
                        self.end(first_at, &r);
                        settle(call, guard, r, started, breaker)
                    }
                }
            }
        }
    }
}

/// Book an attempt's result on its deployment.
fn settle<'a, A, E>(
    call: Attempt<'a>,
    mut guard: InFlight,
    result: Result<A, Failure<E>>,
    started: Instant,
    breaker: &super::health::Breaker,
) -> Result<Served<'a, A>, Failure<E>> {
    match result {
        Ok(answer) => {
            let took = started.elapsed();
            guard.succeed(took);
            if call.group.hedge.is_some() {
                call.group.ttfb.record(took);
            }
            Ok(Served {
                answer,
                group: call.group,
                member: call.member,
                guard,
            })
        }
        Err(f) => Err(settle_failure(guard, f, breaker)),
    }
}

fn settle_failure<E>(
    mut guard: InFlight,
    f: Failure<E>,
    breaker: &super::health::Breaker,
) -> Failure<E> {
    if f.scoped {
        // Dropping the guard ends the attempt (and frees a probe slot) without a verdict.
        drop(guard);
        return f;
    }
    let cooled = guard.fail(f.kind, f.retry_after, breaker);
    if cooled {
        tracing::debug!(kind = f.kind.name(), "deployment cooling down");
    }
    f
}

/// The failure a `mock_testing_*` switch asks of `group`, of the kind whose fallbacks it
/// tries.
fn mock_failure<E: From<RouteError>>(group: &Group, what: MockFailure) -> Failure<E> {
    Failure {
        kind: match what {
            MockFailure::Fallbacks => FailureKind::Server,
            MockFailure::ContextWindow => FailureKind::ContextWindowExceeded,
            MockFailure::ContentPolicy => FailureKind::ContentPolicy,
            MockFailure::RateLimit => FailureKind::RateLimit,
        },
        retry_after: None,
        error: E::from(RouteError::Mocked {
            group: group.name.clone(),
            what,
        }),
        terminal: false,
        scoped: false,
    }
}

fn route_failure<E: From<RouteError>>(e: RouteError) -> Failure<E> {
    // Tags that leave no deployment: no retry, but a fallback group is tried (its
    // deployments' tags may match); a 401, as LiteLLM answers.
    let (kind, retry_after) = match e {
        RouteError::Cooling { .. } => (FailureKind::Server, Some(e.retry_in())),
        RouteError::AtLimit { .. } => (FailureKind::RateLimit, Some(e.retry_in())),
        RouteError::Mocked { .. } => (FailureKind::Server, Some(e.retry_in())),
        RouteError::NoTagMatch { .. } => (FailureKind::Authentication, None),
    };
    Failure {
        kind,
        retry_after,
        error: E::from(e),
        terminal: false,
        scoped: false,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    use tokio::time::Instant;

    use super::*;
    use crate::{testing, HedgeAfter, ModelTable};

    const HEDGE_AFTER: Duration = Duration::from_millis(30);
    const FAST: Duration = Duration::from_millis(10);
    const SLOW: Duration = Duration::from_secs(2);

    /// A group `m` of a deployment that answers after 2 s and one that answers after 10 ms,
    /// hedged after 30 ms when `hedge`.
    fn router(hedge: bool) -> Router {
        let members = vec![
            testing::member("m", "slow", &[]),
            testing::member("m", "fast", &[]),
        ];
        Router {
            models: ModelTable::new(members, |_| hedge.then_some(HedgeAfter::Fixed(HEDGE_AFTER))),
            ..Router::default()
        }
    }

    /// Counts attempts dropped before they finished (the loser of a hedge).
    struct Dropped<'a>(&'a AtomicU32, bool);

    impl Drop for Dropped<'_> {
        fn drop(&mut self) {
            if !self.1 {
                self.0.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Twenty requests; each one's answering deployment, its time on the paused clock and
    /// its hedges, and how many attempts were dropped unfinished.
    async fn serve(router: &Router) -> (Vec<(String, Duration, u32)>, u32) {
        let dropped = AtomicU32::new(0);
        let mut out = Vec::new();
        for _ in 0..20 {
            let first = router.models.resolve("m").unwrap();
            let requested = Requested::default();
            let started = Instant::now();
            let outcome = dispatch(router, first, &requested, |call| {
                let dropped = &dropped;
                async move {
                    let id = call.member.target.info.id.to_string();
                    let mut guard = Dropped(dropped, false);
                    tokio::time::sleep(if id == "slow" { SLOW } else { FAST }).await;
                    guard.1 = true;
                    Ok::<_, Failure<RouteError>>(id)
                }
            })
            .await;
            let served = outcome.result.unwrap();
            out.push((served.answer, started.elapsed(), outcome.hedges));
        }
        (out, dropped.load(Ordering::Relaxed))
    }

    /// On a paused clock (virtual time, exact whatever the machine's load): a request that
    /// starts on the slow deployment is hedged after 30 ms and answered by the fast one 10 ms
    /// later, the slow attempt dropped; one that starts on the fast one is answered in 10 ms,
    /// unhedged. The end-to-end test (`tests/e2e/routing.rs`) checks the same over real
    /// sockets as an ordering only.
    #[tokio::test(start_paused = true)]
    async fn a_slow_first_attempt_is_hedged_after_its_delay_and_the_loser_dropped() {
        let (served, dropped) = serve(&router(true)).await;
        let hedged = served.iter().filter(|s| s.2 == 1).count();
        for (answer, took, hedges) in &served {
            assert_eq!(answer, "fast");
            let want = if *hedges == 1 {
                HEDGE_AFTER + FAST
            } else {
                FAST
            };
            assert_eq!(*took, want, "hedges {hedges}");
        }
        assert!(
            (1..20).contains(&hedged),
            "both deployments go first now and then: {hedged} of 20 hedged"
        );
        assert_eq!(
            dropped as usize, hedged,
            "each hedge drops the slow attempt"
        );
    }

    /// Without hedging, a request that starts on the slow deployment waits for it.
    #[tokio::test(start_paused = true)]
    async fn without_hedging_the_slow_deployment_is_waited_for() {
        let (served, dropped) = serve(&router(false)).await;
        assert!(served.iter().all(|s| s.2 == 0));
        assert!(served.iter().any(|s| s.0 == "slow" && s.1 == SLOW));
        assert!(served
            .iter()
            .all(|s| s.1 == if s.0 == "slow" { SLOW } else { FAST }));
        assert_eq!(dropped, 0);
    }
}
