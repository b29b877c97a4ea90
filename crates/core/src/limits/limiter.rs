//! Admission against requests-per-minute, tokens-per-minute, parallel-request and budget limits
//! of every subject a request belongs to (its key, team, user, end user, organization). All subjects must
//! admit it; a refusal rolls back what the others already counted. The counters live in memory,
//! next to the subject's cached record, so a check costs a few atomics and no lookup.
//!
//! Budgets are checked before a request and charged when it ends (its cost is known only
//! then). To keep a burst of concurrent requests from all passing the check before any is
//! charged, each admitted request holds a reservation of the subject's recent average cost
//! until it is charged: a request is admitted only while spend plus reservations is under the
//! budget. A subject with no history yet (a fresh key) reserves the request's own estimate
//! instead (the model's price for its prompt and its `max_tokens`, or a default), so that a
//! burst on a new key is bounded from the first request. The overspend is then bounded by the
//! requests in flight when the budget ran out, and in practice by about one request's cost
//! (docs/keys.md, docs/reliability.md).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use smallvec::SmallVec;

use super::window::Window;

const MINUTE_MS: u64 = 60_000;

/// Who a limit belongs to (for the error message and headers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubjectKind {
    /// A virtual key.
    Key,
    /// The key's team.
    Team,
    /// The key's user.
    User,
    /// The end user named in the request's `user` field.
    EndUser,
    /// The organization the key (or its team) is under.
    Organization,
    /// A tag the request carries (`/tag/new`): a cost centre's budget and limits, whoever
    /// calls.
    Tag,
}

impl SubjectKind {
    /// Name used in messages.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Key => "key",
            Self::Team => "team",
            Self::User => "user",
            Self::EndUser => "end user",
            Self::Organization => "organization",
            Self::Tag => "tag",
        }
    }
}

/// What a subject's limits count: all of its requests, or only those for one model (a key's or
/// team's `model_rpm_limit`, `model_tpm_limit` and `model_max_budget`, counted apart from its
/// own limits).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Scope {
    /// Every request of the subject.
    #[default]
    All,
    /// Its requests for one model group.
    Model,
}

/// A subject's limits (`rpm_limit`, `tpm_limit`, `max_parallel_requests`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    /// Requests per sliding minute.
    pub rpm: Option<u64>,
    /// Tokens per sliding minute (counted when requests end).
    pub tpm: Option<u64>,
    /// Requests in flight at once.
    pub max_parallel: Option<u32>,
    /// `max_budget`, in nano-dollars, for the current budget window.
    pub max_budget: Option<Nanos>,
}

impl Limits {
    /// Whether any limit is set.
    pub fn any(&self) -> bool {
        self.rpm.is_some()
            || self.tpm.is_some()
            || self.max_parallel.is_some()
            || self.max_budget.is_some()
    }
}

/// Money in nano-dollars (10⁻⁹ USD): integer, so a budget's spend can be one atomic add and
/// never drifts the way summed floats do. u64 holds 18 billion dollars.
pub type Nanos = u64;

/// Dollars to [`Nanos`], rounding to the nearest; negative and NaN become 0.
pub fn nanos(usd: f64) -> Nanos {
    if usd.is_finite() && usd > 0.0 {
        (usd * 1e9).round() as u64
    } else {
        0
    }
}

/// [`Nanos`] to dollars, for headers and the API.
pub fn dollars(n: Nanos) -> f64 {
    n as f64 / 1e9
}

/// The end of a budget window that has been renewed by a request but not yet given its next
/// end (the key cache's sync task computes calendar arithmetic off the request path).
const RENEWING: u64 = u64::MAX;

/// A subject's live counters, and who they count for.
#[derive(Debug)]
pub struct Counters {
    /// The subject's id (a key's hash, a team, user or end-user id; with the model for a
    /// per-model subject): names its shared counters in a fleet. Kept here, with the counters
    /// it names, so that a [`Subject`] is two pointers and a request's permit stays small.
    id: Arc<str>,
    requests: Window,
    tokens: Window,
    in_flight: AtomicU32,
    spent: AtomicU64,
    /// Cost held by admitted requests not yet charged.
    reserved: AtomicU64,
    /// Running average cost of this subject's requests (what each new one reserves).
    avg_cost: AtomicU64,
    /// When the current budget window ends (ms since the epoch); 0 for a budget without a
    /// window, [`RENEWING`] while the next end is being computed.
    window_end_ms: AtomicU64,
}

impl Counters {
    /// Fresh counters of the subject `id`.
    pub fn new(id: Arc<str>) -> Self {
        Self::with_spend(id, 0, None)
    }

    /// Counters of the subject `id`, which has already spent `spent` in a window ending at
    /// `window_end_ms` (from the store).
    pub fn with_spend(id: Arc<str>, spent: Nanos, window_end_ms: Option<u64>) -> Self {
        Self {
            id,
            requests: Window::new(MINUTE_MS),
            tokens: Window::new(MINUTE_MS),
            in_flight: AtomicU32::new(0),
            spent: AtomicU64::new(spent),
            reserved: AtomicU64::new(0),
            avg_cost: AtomicU64::new(0),
            window_end_ms: AtomicU64::new(window_end_ms.unwrap_or(0)),
        }
    }

    /// The subject's id.
    pub fn id(&self) -> &Arc<str> {
        &self.id
    }

    /// Spend in the current window as of `now_ms`. A window that has ended is renewed here:
    /// exactly one caller wins the swap and zeroes the spend.
    pub fn spent(&self, now_ms: u64) -> Nanos {
        let end = self.window_end_ms.load(Relaxed);
        if end != 0
            && end != RENEWING
            && now_ms >= end
            && self
                .window_end_ms
                .compare_exchange(end, RENEWING, Relaxed, Relaxed)
                .is_ok()
        {
            self.spent.store(0, Relaxed);
        }
        self.spent.load(Relaxed)
    }

    /// Add a finished request's cost.
    pub fn charge(&self, cost: Nanos) {
        self.spent.fetch_add(cost, Relaxed);
    }

    /// Hold the expected cost of a request just admitted: the subject's average once it has
    /// one, else the request's own `estimate`. Returns what was held.
    fn reserve(&self, estimate: Nanos) -> Nanos {
        let est = self.reservation(estimate);
        if est > 0 {
            self.reserved.fetch_add(est, Relaxed);
        }
        est
    }

    /// What a request admitted now would hold against the budget: the subject's average cost
    /// once it has one, else `estimate` (the fleet's shared reservations use the same rule).
    pub fn reservation(&self, estimate: Nanos) -> Nanos {
        match self.avg_cost.load(Relaxed) {
            0 => estimate,
            avg => avg,
        }
    }

    /// Let go of a reservation.
    fn release(&self, held: Nanos) {
        if held > 0 {
            let _ = self
                .reserved
                .fetch_update(Relaxed, Relaxed, |r| Some(r.saturating_sub(held)));
        }
    }

    /// Fold a charged cost into the running average (an eighth per request).
    fn learn(&self, cost: Nanos) {
        let _ = self.avg_cost.fetch_update(Relaxed, Relaxed, |avg| {
            Some(if avg == 0 {
                cost
            } else {
                avg - avg / 8 + cost / 8
            })
        });
    }

    /// Cost held by requests in flight.
    pub fn reserved(&self) -> Nanos {
        self.reserved.load(Relaxed)
    }

    /// Whether a renewed window waits for its next end (see [`Counters::set_window_end`]).
    pub fn renewing(&self) -> bool {
        self.window_end_ms.load(Relaxed) == RENEWING
    }

    /// The current window's end, if there is a window and it is known.
    pub fn window_end(&self) -> Option<u64> {
        match self.window_end_ms.load(Relaxed) {
            0 | RENEWING => None,
            end => Some(end),
        }
    }

    /// Give a renewed (or changed) window its end.
    pub fn set_window_end(&self, end_ms: Option<u64>) {
        self.window_end_ms.store(end_ms.unwrap_or(0), Relaxed);
    }

    /// Replace the spend (an operator reset it through the admin API).
    pub fn set_spent(&self, spent: Nanos) {
        self.spent.store(spent, Relaxed);
    }
}

/// One subject of a request: its limits and counters.
#[derive(Debug, Clone)]
pub struct Subject {
    /// Which kind.
    pub kind: SubjectKind,
    /// All of the holder's requests, or those for one model.
    pub scope: Scope,
    /// Its limits, shared with its holder's record: behind an `Arc` a subject is 24 bytes, and
    /// a request's future holds up to seven of them (its `Permit`).
    pub limits: Arc<Limits>,
    /// Its counters (shared by all requests of the subject), which carry its id.
    pub counters: Arc<Counters>,
}

impl Subject {
    /// Its id (see [`Counters::id`]).
    pub fn id(&self) -> &Arc<str> {
        &self.counters.id
    }

    /// What is left of this subject's limits this sliding minute (LiteLLM's per-model
    /// `x-litellm-key-remaining-*-{model}` headers name one subject's).
    pub fn remaining(&self, now_ms: u64) -> Remaining {
        let left = |limit: Option<u64>, w: &Window| {
            limit.map(|l| (l, l.saturating_sub(w.estimate(now_ms))))
        };
        Remaining {
            requests: left(self.limits.rpm, &self.counters.requests),
            tokens: left(self.limits.tpm, &self.counters.tokens),
        }
    }
}

/// The tighter of two `(limit, left)` pairs: the one with less left.
fn tighter(cur: Option<(u64, u64)>, other: Option<(u64, u64)>) -> Option<(u64, u64)> {
    match (cur, other) {
        (Some((_, l)), Some((_, o))) if l <= o => cur,
        (_, Some(o)) => Some(o),
        (c, None) => c,
    }
}

/// Which limit refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exceeded {
    /// `rpm_limit`.
    Requests,
    /// `tpm_limit`.
    Tokens,
    /// `max_parallel_requests`.
    Parallel,
    /// `max_budget`.
    Budget,
}

impl Exceeded {
    /// How messages name the limit.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Requests => "requests-per-minute",
            Self::Tokens => "tokens-per-minute",
            Self::Parallel => "parallel-request",
            Self::Budget => "budget",
        }
    }
}

/// A refusal: the subject, the limit, and when to retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.describe())]
pub struct Rejected {
    /// Whose limit.
    pub subject: SubjectKind,
    /// The holder's limit, or its limit for the requested model.
    pub scope: Scope,
    /// Which limit.
    pub exceeded: Exceeded,
    /// Its value (nano-dollars for a budget).
    pub limit: u64,
    /// When a retry can succeed (for a budget: when its window ends, if it has one).
    pub retry_after: Duration,
    /// What the subject has spent (budgets only).
    pub spent: Nanos,
}

impl Rejected {
    fn describe(&self) -> String {
        let model = match self.scope {
            Scope::All => "",
            Scope::Model => " for this model",
        };
        match self.exceeded {
            // LiteLLM's words first: its clients match on "Budget has been exceeded!".
            Exceeded::Budget => format!(
                "Budget has been exceeded! {} budget{model} exceeded: Current cost: {} USD (with \
                 requests in flight), Max budget: {} USD",
                self.subject.name(),
                dollars(self.spent),
                dollars(self.limit)
            ),
            e => format!(
                "{} {} limit{model} of {} reached",
                self.subject.name(),
                e.name(),
                self.limit
            ),
        }
    }
}

/// Subjects a request usually has at most, kept inline: key, team, user, end user and
/// organization, and the key's and the team's limits for the requested model. A request with
/// more (tags with budgets, `/tag/new`) spills to the heap; none is ever dropped.
const INLINE_SUBJECTS: usize = 7;

/// What an admitted request holds: each subject with its budget reservation (released when
/// the request is charged or dropped), its parallel slots (released on drop) and the subjects
/// to charge its tokens to.
#[derive(Debug, Default)]
pub struct Permit {
    held: SmallVec<[(Subject, Nanos); INLINE_SUBJECTS]>,
}

/// Remaining capacity to report in `x-ratelimit-*` headers (the tightest subject's).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Remaining {
    /// `x-ratelimit-limit-requests` / `x-ratelimit-remaining-requests`.
    pub requests: Option<(u64, u64)>,
    /// `x-ratelimit-limit-tokens` / `x-ratelimit-remaining-tokens`.
    pub tokens: Option<(u64, u64)>,
}

impl Permit {
    /// Charge a finished request's cost to every subject with a budget, in place of its
    /// reservation.
    pub fn charge(&mut self, cost: Nanos) {
        for (s, held) in &mut self.held {
            if s.limits.max_budget.is_some() {
                s.counters.charge(cost);
                s.counters.release(std::mem::take(held));
                s.counters.learn(cost);
            }
        }
    }

    /// The subjects this permit holds, for the fleet counters and spend headers.
    pub fn subjects(&self) -> impl Iterator<Item = &Subject> {
        self.held.iter().map(|(s, _)| s)
    }

    /// Charge the request's tokens to every subject's tokens-per-minute window.
    pub fn add_tokens(&self, now_ms: u64, tokens: u64) {
        for s in self.subjects() {
            if s.limits.tpm.is_some() {
                s.counters.tokens.add(now_ms, tokens);
            }
        }
    }

    /// What is left this sliding minute, for the response headers: the tightest subject's.
    pub fn remaining(&self, now_ms: u64) -> Remaining {
        let mut out = Remaining::default();
        for s in self.subjects() {
            let left = s.remaining(now_ms);
            out.requests = tighter(out.requests, left.requests);
            out.tokens = tighter(out.tokens, left.tokens);
        }
        out
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        for (s, held) in &self.held {
            if s.limits.max_parallel.is_some() {
                s.counters.in_flight.fetch_sub(1, Relaxed);
            }
            s.counters.release(*held);
        }
    }
}

/// The subjects one request is admitted against, in order (key, team, user, organization,
/// end user, the key's and the team's limits for the model, then its tags'): inline up to
/// seven, so collecting the usual ones allocates nothing.
#[derive(Debug, Default)]
pub struct Subjects {
    items: SmallVec<[Subject; INLINE_SUBJECTS]>,
}

impl Subjects {
    /// Add one.
    pub fn push(&mut self, s: Subject) {
        self.items.push(s);
    }

    /// None at all: nothing to check.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The subjects.
    pub fn iter(&self) -> impl Iterator<Item = &Subject> {
        self.items.iter()
    }
}

impl<const N: usize> From<[Subject; N]> for Subjects {
    fn from(list: [Subject; N]) -> Self {
        let mut out = Self::default();
        for s in list {
            out.push(s);
        }
        out
    }
}

/// Admit a request against every subject's limits, or say which one refuses it. A subject
/// with a budget and no cost history reserves nothing: see [`admit_reserving`].
pub fn admit(subjects: Subjects, now_ms: u64) -> Result<Permit, Rejected> {
    admit_reserving(subjects, now_ms, 0)
}

/// [`admit`], with `estimate` (what this request may cost) as the reservation of every
/// budgeted subject that has no average cost yet.
pub fn admit_reserving(
    subjects: Subjects,
    now_ms: u64,
    estimate: Nanos,
) -> Result<Permit, Rejected> {
    let mut permit = Permit::default();
    for s in subjects.items {
        if let Err(e) = check(&s, now_ms) {
            // Give back what the subjects before counted; dropping `permit` releases their
            // parallel slots.
            for earlier in permit.subjects() {
                if earlier.limits.rpm.is_some() {
                    earlier.counters.requests.remove(now_ms, 1);
                }
            }
            return Err(e);
        }
        let reserved = if s.limits.max_budget.is_some() {
            s.counters.reserve(estimate)
        } else {
            0
        };
        permit.held.push((s, reserved));
    }
    Ok(permit)
}

/// Whether `s` has budget left (spend and reservations below `max_budget`).
fn check_budget(s: &Subject, now_ms: u64) -> Result<(), Rejected> {
    let Some(max) = s.limits.max_budget else {
        return Ok(());
    };
    let c = &s.counters;
    let spent = c.spent(now_ms).saturating_add(c.reserved());
    if spent < max {
        return Ok(());
    }
    let retry_after = c.window_end().map_or(Duration::ZERO, |end| {
        Duration::from_millis(end.saturating_sub(now_ms))
    });
    Err(Rejected {
        subject: s.kind,
        scope: s.scope,
        exceeded: Exceeded::Budget,
        limit: max,
        retry_after,
        spent,
    })
}

/// Check only the budgets of `subjects`: what a priced call that is not a model request (an
/// MCP tool's) must pass. It takes no request or parallel slot.
pub fn budget_left(subjects: &Subjects, now_ms: u64) -> Result<(), Rejected> {
    subjects.iter().try_for_each(|s| check_budget(s, now_ms))
}

/// Charge a finished priced call's cost to every subject, without a permit.
pub fn charge_all(subjects: &Subjects, cost: Nanos) {
    for s in subjects.iter() {
        s.counters.charge(cost);
    }
}

/// Count a request the fleet has already admitted in this instance's counters too, without
/// checking them: they stay current for when Redis is unreachable and this instance limits
/// on its own.
pub fn admit_counted(subjects: Subjects, now_ms: u64) -> Permit {
    let mut permit = Permit::default();
    for s in subjects.items {
        if s.limits.max_parallel.is_some() {
            s.counters.in_flight.fetch_add(1, Relaxed);
        }
        if s.limits.rpm.is_some() {
            s.counters.requests.add(now_ms, 1);
        }
        permit.held.push((s, 0));
    }
    permit
}

fn check(s: &Subject, now_ms: u64) -> Result<(), Rejected> {
    let reject = |exceeded, limit, retry_after| Rejected {
        subject: s.kind,
        scope: s.scope,
        exceeded,
        limit,
        retry_after,
        spent: 0,
    };
    let c = &s.counters;
    check_budget(s, now_ms)?;
    if let Some(tpm) = s.limits.tpm {
        if c.tokens.estimate(now_ms) >= tpm {
            let wait = c.tokens.wait_for_room(now_ms, 1, tpm);
            return Err(reject(Exceeded::Tokens, tpm, Duration::from_millis(wait)));
        }
    }
    if let Some(max) = s.limits.max_parallel {
        if c.in_flight.fetch_add(1, Relaxed) >= max {
            c.in_flight.fetch_sub(1, Relaxed);
            return Err(reject(
                Exceeded::Parallel,
                u64::from(max),
                Duration::from_secs(1),
            ));
        }
    }
    if !c.requests.try_add(now_ms, 1, s.limits.rpm) {
        if s.limits.max_parallel.is_some() {
            c.in_flight.fetch_sub(1, Relaxed);
        }
        let rpm = s.limits.rpm.unwrap_or(0);
        let wait = c.requests.wait_for_room(now_ms, 1, rpm);
        return Err(reject(Exceeded::Requests, rpm, Duration::from_millis(wait)));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subject(kind: SubjectKind, limits: Limits) -> Subject {
        Subject {
            kind,
            scope: Scope::All,
            limits: Arc::new(limits),
            counters: Arc::new(Counters::new("s".into())),
        }
    }

    #[test]
    fn rpm_refuses_with_a_retry_time() {
        let key = subject(
            SubjectKind::Key,
            Limits {
                rpm: Some(2),
                ..Limits::default()
            },
        );
        let subjects = [key];
        assert!(admit(Subjects::from(subjects.clone()), 1_000).is_ok());
        let p = admit(Subjects::from(subjects.clone()), 1_000).unwrap();
        assert_eq!(
            p.remaining(1_000).requests,
            Some((2, 0)),
            "limit and what is left"
        );
        let e = admit(Subjects::from(subjects.clone()), 1_000).unwrap_err();
        assert_eq!(e.exceeded, Exceeded::Requests);
        assert_eq!(e.subject, SubjectKind::Key);
        assert!(e.retry_after <= Duration::from_secs(59));
        assert_eq!(e.to_string(), "key requests-per-minute limit of 2 reached");
    }

    #[test]
    fn parallel_slots_are_released_with_the_permit() {
        let team = subject(
            SubjectKind::Team,
            Limits {
                max_parallel: Some(1),
                ..Limits::default()
            },
        );
        let subjects = [team];
        let first = admit(Subjects::from(subjects.clone()), 0).unwrap();
        assert_eq!(
            admit(Subjects::from(subjects.clone()), 0)
                .unwrap_err()
                .exceeded,
            Exceeded::Parallel
        );
        drop(first);
        assert!(admit(Subjects::from(subjects.clone()), 0).is_ok());
    }

    #[test]
    fn subjects_past_the_inline_seven_are_held_to_their_limits_too() {
        // Seven open subjects, then a tag with a slot of its own and one that refuses.
        let open = || subject(SubjectKind::Key, Limits::default());
        let parallel = subject(
            SubjectKind::Tag,
            Limits {
                max_parallel: Some(1),
                ..Limits::default()
            },
        );
        let mut s = Subjects::default();
        (0..INLINE_SUBJECTS).for_each(|_| s.push(open()));
        s.push(parallel.clone());
        let permit = admit(s, 0).expect("the eighth subject has a slot");
        assert_eq!(permit.subjects().count(), INLINE_SUBJECTS + 1);
        assert_eq!(parallel.counters.in_flight.load(Relaxed), 1);
        let mut again = Subjects::default();
        (0..INLINE_SUBJECTS).for_each(|_| again.push(open()));
        again.push(parallel.clone());
        let e = admit(again, 0).expect_err("the eighth subject's one slot is taken");
        assert_eq!(
            (e.subject, e.exceeded),
            (SubjectKind::Tag, Exceeded::Parallel)
        );
        drop(permit);
        assert_eq!(parallel.counters.in_flight.load(Relaxed), 0);
        let refusing = subject(
            SubjectKind::Tag,
            Limits {
                rpm: Some(0),
                ..Limits::default()
            },
        );
        let mut nine = Subjects::default();
        (0..INLINE_SUBJECTS).for_each(|_| nine.push(open()));
        nine.push(parallel.clone());
        nine.push(refusing);
        assert!(admit(nine, 0).is_err(), "the ninth subject refuses");
        assert_eq!(parallel.counters.in_flight.load(Relaxed), 0);
    }

    #[test]
    fn a_refusal_by_one_subject_frees_the_others_slots() {
        let key = subject(
            SubjectKind::Key,
            Limits {
                max_parallel: Some(5),
                ..Limits::default()
            },
        );
        let user = subject(
            SubjectKind::User,
            Limits {
                rpm: Some(0),
                ..Limits::default()
            },
        );
        let subjects = [key.clone(), user];
        let e = admit(Subjects::from(subjects.clone()), 0).unwrap_err();
        assert_eq!(e.subject, SubjectKind::User);
        assert_eq!(key.counters.in_flight.load(Relaxed), 0);
        let rpm_key = subject(
            SubjectKind::Key,
            Limits {
                rpm: Some(1),
                ..Limits::default()
            },
        );
        let blocked = subject(
            SubjectKind::Team,
            Limits {
                rpm: Some(0),
                ..Limits::default()
            },
        );
        for _ in 0..3 {
            assert!(admit(Subjects::from([rpm_key.clone(), blocked.clone()]), 0).is_err());
        }
        assert!(
            admit(Subjects::from([rpm_key]), 0).is_ok(),
            "refused requests did not use up the key's own minute"
        );
    }

    #[test]
    fn tokens_count_when_requests_end() {
        let key = subject(
            SubjectKind::Key,
            Limits {
                tpm: Some(100),
                ..Limits::default()
            },
        );
        let subjects = [key];
        let p = admit(Subjects::from(subjects.clone()), 0).unwrap();
        p.add_tokens(0, 100);
        assert_eq!(p.remaining(0).tokens, Some((100, 0)));
        let e = admit(Subjects::from(subjects.clone()), 10).unwrap_err();
        assert_eq!(e.exceeded, Exceeded::Tokens);
        assert!(
            admit(Subjects::from(subjects.clone()), 120_001).is_ok(),
            "two minutes later"
        );
    }

    fn budget(max_usd: f64, spent_usd: f64, window_end_ms: Option<u64>) -> Subject {
        Subject {
            kind: SubjectKind::Key,
            scope: Scope::All,
            limits: Arc::new(Limits {
                max_budget: Some(nanos(max_usd)),
                ..Limits::default()
            }),
            counters: Arc::new(Counters::with_spend(
                "k".into(),
                nanos(spent_usd),
                window_end_ms,
            )),
        }
    }

    #[test]
    fn a_spent_budget_refuses_until_its_window_ends() {
        let key = budget(1.0, 0.9, Some(10_000));
        let subjects = [key.clone()];
        let mut p = admit(Subjects::from(subjects.clone()), 0).unwrap();
        p.charge(nanos(0.1));
        drop(p);
        let e = admit(Subjects::from(subjects.clone()), 1_000).unwrap_err();
        assert_eq!(e.exceeded, Exceeded::Budget);
        assert_eq!(e.retry_after, Duration::from_secs(9));
        assert_eq!(
            e.to_string(),
            "Budget has been exceeded! key budget exceeded: Current cost: 1 USD (with requests in \
             flight), Max budget: 1 USD"
        );
        // The window ends: one request renews it, spend starts from zero.
        assert!(admit(Subjects::from(subjects.clone()), 10_000).is_ok());
        assert!(key.counters.renewing());
        assert_eq!(key.counters.spent(10_001), 0);
        key.counters.set_window_end(Some(20_000));
        assert_eq!(key.counters.window_end(), Some(20_000));
    }

    #[test]
    fn a_budget_without_window_never_renews() {
        let key = budget(0.5, 0.5, None);
        assert!(admit(Subjects::from([key.clone()]), u64::MAX - 1).is_err());
        assert!(!key.counters.renewing());
    }

    /// 100 requests race against a budget with room for 10. Without reservations every one
    /// would pass the check before any is charged; with them, once the subject's average cost
    /// is known, admissions stop when spend plus reservations reaches the budget.
    #[test]
    fn concurrent_overspend_is_bounded() {
        let key = budget(1.0, 0.98, None);
        let cost = nanos(0.001);
        // One request teaches the subject its cost.
        admit(Subjects::from([key.clone()]), 0)
            .unwrap()
            .charge(cost);
        let before = key.counters.spent(0);
        let barrier = std::sync::Barrier::new(100);
        let admitted = std::sync::atomic::AtomicU64::new(0);
        std::thread::scope(|scope| {
            for _ in 0..100 {
                scope.spawn(|| {
                    let permit = admit(Subjects::from([key.clone()]), 0);
                    // Nobody is charged until everybody has been through admission.
                    barrier.wait();
                    if let Ok(mut p) = permit {
                        admitted.fetch_add(1, Relaxed);
                        p.charge(cost);
                    }
                });
            }
        });
        let admitted = admitted.load(Relaxed);
        let spent = key.counters.spent(0);
        assert_eq!(spent - before, admitted * cost);
        assert!(
            (19..=20).contains(&admitted),
            "room for 19 requests (0.019 USD): admitted {admitted}"
        );
        assert!(
            spent.saturating_sub(nanos(1.0)) <= cost,
            "overspend at most one request: spent {spent}"
        );
        assert_eq!(key.counters.reserved(), 0, "every reservation released");
        assert!(admit(Subjects::from([key]), 0).is_err(), "spent");
    }

    /// A fresh key (no cost history) with room for 10.5 requests, 50 at once: the request's
    /// own estimate is reserved, so no more than 11 are admitted (1.05x the budget at most).
    #[test]
    fn a_fresh_keys_burst_is_bounded_by_the_estimate() {
        let cost = nanos(0.001);
        let key = budget(0.0105, 0.0, None);
        let barrier = std::sync::Barrier::new(50);
        let admitted = std::sync::atomic::AtomicU64::new(0);
        std::thread::scope(|scope| {
            for _ in 0..50 {
                scope.spawn(|| {
                    let permit = admit_reserving(Subjects::from([key.clone()]), 0, cost);
                    barrier.wait();
                    if let Ok(mut p) = permit {
                        admitted.fetch_add(1, Relaxed);
                        p.charge(cost);
                    }
                });
            }
        });
        let admitted = admitted.load(Relaxed);
        assert_eq!(admitted, 11, "room for 10.5 requests at 0.001 USD each");
        assert!(key.counters.spent(0) as f64 <= 1.1 * nanos(0.0105) as f64);
        assert_eq!(key.counters.reserved(), 0, "every reservation released");
        // Without an estimate a fresh key reserves nothing (the old behaviour).
        let bare = budget(0.0105, 0.0, None);
        let p = admit(Subjects::from([bare.clone()]), 0).unwrap();
        assert_eq!(bare.counters.reserved(), 0);
        drop(p);
    }

    #[test]
    fn a_failed_request_gives_its_reservation_back() {
        let key = budget(1.0, 0.0, None);
        admit(Subjects::from([key.clone()]), 0)
            .unwrap()
            .charge(nanos(0.5));
        let p = admit(Subjects::from([key.clone()]), 0).unwrap();
        assert_eq!(key.counters.reserved(), nanos(0.5));
        drop(p);
        assert_eq!(key.counters.reserved(), 0);
    }
}
