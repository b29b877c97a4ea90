//! What instances of sluice share through Redis (`router_settings.redis_host/port/password` or
//! `redis_url`): rate-limit and budget counters (`counters.rs`), and the news that a key
//! changed (`broadcast.rs`), so that a revocation on one instance holds on every other within
//! a second, and MCP client sessions (`sessions.rs`). If Redis cannot be reached, each
//! instance goes on with its own counters, says so in `/health/readiness` and the log, and
//! returns to the shared ones when Redis is back.

mod broadcast;
mod counters;
mod link;
mod sessions;
mod shared;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub(crate) use broadcast::decode_cooldown;
pub use broadcast::{KeyChange, CHANNEL};
pub use counters::{Settlement, Verdict, SLOT_TTL_MS};
pub use link::{BadRedisUrl, RedisConn, RedisLink};

use counters::Scripts;
use sluice_core::limits::Subjects;
use sluice_core::RedisTarget;

/// Longest a request waits for Redis before it is admitted on local counters instead.
const CALL_TIMEOUT: Duration = Duration::from_millis(250);

/// While Redis is away, one request in this interval tries it (and may wait up to
/// [`CALL_TIMEOUT`]); the others are admitted on local counters at once. Without it every
/// request paid the timeout while Redis was down (tests/chaos.rs `redis_killed_and_back`
/// answered 903 requests before this change, ~4,300 after).
const PROBE_EVERY_MS: u64 = 250;

/// Why the fleet could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// The Redis URL does not parse.
    #[error("router_settings: {0}")]
    BadUrl(#[from] BadRedisUrl),
}

/// The connection to the fleet's Redis, and whether it currently answers.
pub struct Fleet {
    /// This instance's id in the fleet's messages.
    instance: u64,
    link: Arc<RedisLink>,
    scripts: Scripts,
    /// When a request last tried Redis while it was away (ms, the callers' clock).
    last_probe: AtomicU64,
}

impl std::fmt::Debug for Fleet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fleet").field("up", &self.is_up()).finish()
    }
}

impl Fleet {
    /// Set up the fleet on `target` (one server, a Cluster, or a primary Sentinel names).
    /// Connecting happens in the background: an instance starts (on local counters) even
    /// while Redis is down.
    pub fn start(target: &RedisTarget) -> Result<Arc<Self>, FleetError> {
        let link = RedisLink::start(
            target,
            CALL_TIMEOUT,
            (
                "rate limits and budgets are shared by the fleet",
                "rate limits and budgets fall back to this instance's counters",
            ),
        )?;
        Ok(Arc::new(Self {
            instance: fastrand::u64(..),
            link,
            scripts: Scripts::default(),
            last_probe: AtomicU64::new(0),
        }))
    }

    /// Whether Redis answered the last call.
    pub fn is_up(&self) -> bool {
        self.link.is_up()
    }

    fn mark(&self, up: bool) {
        self.link.mark(up);
    }

    fn connection(&self) -> Option<RedisConn> {
        self.link.connection()
    }

    /// Admit a request against the fleet's counters. `None`: Redis did not answer in time and
    /// the caller should admit on local counters.
    pub async fn admit(
        &self,
        subjects: &Subjects,
        request_id: &str,
        now_ms: u64,
        estimate: sluice_core::limits::Nanos,
    ) -> Option<Verdict> {
        if !self.may_call(now_ms) {
            return None;
        }
        let mut con = self.connection()?;
        let call = self
            .scripts
            .admit(&mut con, subjects, request_id, now_ms, estimate);
        match tokio::time::timeout(CALL_TIMEOUT, call).await {
            Ok(Ok(v)) => {
                self.mark(true);
                Some(v)
            }
            Ok(Err(e)) => {
                tracing::debug!(error = ?e.kind(), "redis admit failed");
                self.mark(false);
                None
            }
            Err(_) => {
                self.mark(false);
                None
            }
        }
    }

    /// Whether a request at `now_ms` should call Redis: always while it is up; while it is
    /// away, only the first request of each [`PROBE_EVERY_MS`] (a probe that notices its return).
    fn may_call(&self, now_ms: u64) -> bool {
        if self.is_up() {
            return true;
        }
        let last = self.last_probe.load(Ordering::Relaxed);
        now_ms.saturating_sub(last) >= PROBE_EVERY_MS
            && self
                .last_probe
                .compare_exchange(last, now_ms, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }

    /// Send a finished request's charges to the fleet, off the request path.
    pub fn settle(self: &Arc<Self>, s: Settlement) {
        let Some(mut con) = self.connection() else {
            return;
        };
        let fleet = self.clone();
        tokio::spawn(async move {
            match tokio::time::timeout(CALL_TIMEOUT * 4, fleet.scripts.settle(&mut con, &s)).await {
                Ok(Ok(())) => fleet.mark(true),
                Ok(Err(_)) | Err(_) => fleet.mark(false),
            }
        });
    }

    /// Claim `name` for `ttl` across the fleet (Redis `SET NX PX`): `Some(true)` for the one
    /// instance that claimed it first, `Some(false)` for every other, `None` when Redis did not
    /// answer. What makes an alert go out once per fleet, not once per instance.
    pub async fn claim(&self, name: &str, ttl: std::time::Duration) -> Option<bool> {
        let mut con = self.connection()?;
        let ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
        let mut cmd = redis::cmd("SET");
        cmd.arg(format!("sluice:claim:{name}"))
            .arg(1)
            .arg("NX")
            .arg("PX")
            .arg(ms);
        let set = cmd.query_async::<Option<String>>(&mut con);
        match tokio::time::timeout(CALL_TIMEOUT * 4, set).await {
            Ok(Ok(answer)) => {
                self.mark(true);
                Some(answer.is_some())
            }
            Ok(Err(_)) | Err(_) => {
                self.mark(false);
                None
            }
        }
    }

    /// Tell every instance that a key changed (blocked, deleted, updated).
    pub async fn publish(&self, change: &KeyChange) -> bool {
        let Some(mut con) = self.connection() else {
            return false;
        };
        let sent: redis::RedisResult<i64> = redis::cmd("PUBLISH")
            .arg(CHANNEL)
            .arg(change.encode())
            .query_async(&mut con)
            .await;
        self.mark(sent.is_ok());
        sent.is_ok()
    }
}

#[cfg(test)]
pub(crate) mod testing;

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::limits::{nanos, Counters, Exceeded, Limits, Subject, SubjectKind};

    use testing::up;

    /// The same key as two instances see it: same id and limits, separate local counters.
    fn key(id: &str, limits: Limits) -> Subject {
        Subject {
            kind: SubjectKind::Key,
            scope: sluice_core::limits::Scope::All,
            limits: Arc::new(limits),
            counters: Arc::new(Counters::new(id.into())),
        }
    }

    fn one(s: &Subject) -> Subjects {
        Subjects::from([s.clone()])
    }

    fn settle(f: &Arc<Fleet>, s: &Subject, id: &str, tokens: u64, cost: u64) {
        f.settle(Settlement {
            request_id: id.into(),
            subjects: vec![s.clone()],
            tokens,
            cost,
            at_ms: sluice_core::limits::wall_ms(),
        });
    }

    async fn admitted(f: &Fleet, s: &Subject, id: &str) -> bool {
        match f
            .admit(&one(s), id, sluice_core::limits::wall_ms(), 0)
            .await
        {
            Some(Verdict::Admitted(_)) => true,
            Some(Verdict::Refused(_)) => false,
            None => panic!("redis did not answer"),
        }
    }

    #[tokio::test]
    async fn two_instances_share_rpm_parallel_and_budget() {
        let Some(redis) = testing::redis() else {
            return;
        };
        let (a, b) = (up(&redis.url).await, up(&redis.url).await);
        let unique = format!("{}", sluice_core::limits::wall_ms());
        // rpm 5 across both instances.
        let rpm = Limits {
            rpm: Some(5),
            ..Limits::default()
        };
        let (ka, kb) = (key(&unique, rpm), key(&unique, rpm));
        let mut n = 0;
        for i in 0..4 {
            n += usize::from(admitted(&a, &ka, &format!("a{i}")).await);
            n += usize::from(admitted(&b, &kb, &format!("b{i}")).await);
        }
        assert_eq!(n, 5, "five of eight admitted across two instances");
        match b
            .admit(&one(&kb), "x", sluice_core::limits::wall_ms(), 0)
            .await
        {
            Some(Verdict::Refused(r)) => {
                assert_eq!(r.exceeded, Exceeded::Requests);
                assert!(r.retry_after <= Duration::from_secs(60));
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        // One parallel slot across both, freed when the holder settles.
        let par = Limits {
            max_parallel: Some(1),
            ..Limits::default()
        };
        let id = format!("{unique}-p");
        let (pa, pb) = (key(&id, par), key(&id, par));
        assert!(admitted(&a, &pa, "r1").await);
        assert!(!admitted(&b, &pb, "r2").await);
        settle(&a, &pa, "r1", 10, 0);
        let mut freed = false;
        for _ in 0..100 {
            if admitted(&b, &pb, "r3").await {
                freed = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(freed, "the slot came back");
        // A budget spent on one instance is spent on the other.
        let budget = Limits {
            max_budget: Some(nanos(1.0)),
            ..Limits::default()
        };
        let id = format!("{unique}-b");
        let (ba, bb) = (key(&id, budget), key(&id, budget));
        assert!(admitted(&a, &ba, "s1").await);
        ba.counters.charge(nanos(1.0));
        settle(&a, &ba, "s1", 0, nanos(1.0));
        let mut refused = None;
        for _ in 0..100 {
            if let Some(Verdict::Refused(r)) = b
                .admit(&one(&bb), "s2", sluice_core::limits::wall_ms(), 0)
                .await
            {
                refused = Some(r);
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let r = refused.expect("budget refused on the other instance");
        assert_eq!(r.exceeded, Exceeded::Budget);
        assert_eq!(r.spent, nanos(1.0));
    }

    /// 50 requests on a fresh key spread over two instances, none charged before all are
    /// admitted, against a budget with room for 10.5: each holds its estimate fleet-wide, so
    /// 11 are admitted (without held amounts, all 50 were). Settling lets go of the holds.
    #[tokio::test]
    async fn a_burst_over_two_instances_holds_the_budget_from_the_first_request() {
        let Some(redis) = testing::redis() else {
            return;
        };
        let (a, b) = (up(&redis.url).await, up(&redis.url).await);
        let id = format!("{}-burst", sluice_core::limits::wall_ms());
        let budget = Limits {
            max_budget: Some(nanos(0.0105)),
            ..Limits::default()
        };
        let (ka, kb) = (key(&id, budget), key(&id, budget));
        let cost = nanos(0.001);
        let mut admitted = Vec::new();
        for i in 0..50 {
            let (f, k) = if i % 2 == 0 { (&a, &ka) } else { (&b, &kb) };
            let rid = format!("q{i}");
            match f
                .admit(&one(k), &rid, sluice_core::limits::wall_ms(), cost)
                .await
            {
                Some(Verdict::Admitted(_)) => admitted.push((i, rid)),
                Some(Verdict::Refused(r)) => assert_eq!(r.exceeded, Exceeded::Budget),
                None => panic!("redis did not answer"),
            }
        }
        assert_eq!(admitted.len(), 11, "room for 10.5 requests fleet-wide");
        // Failed requests (cost 0) give their holds back: room again.
        for (i, rid) in &admitted {
            let (f, k) = if i % 2 == 0 { (&a, &ka) } else { (&b, &kb) };
            settle(f, k, rid, 0, 0);
        }
        let mut again = false;
        for _ in 0..100 {
            if matches!(
                a.admit(&one(&ka), "after", sluice_core::limits::wall_ms(), cost)
                    .await,
                Some(Verdict::Admitted(_))
            ) {
                again = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(again, "settled requests no longer hold the budget");
    }

    #[tokio::test]
    async fn a_cooldown_on_one_instance_holds_on_the_other() {
        use sluice_routing::{Availability, HealthRegistry};
        let Some(redis) = testing::redis() else {
            return;
        };
        let (a, b) = (up(&redis.url).await, up(&redis.url).await);
        let (ra, rb) = (
            Arc::new(HealthRegistry::default()),
            Arc::new(HealthRegistry::default()),
        );
        let (ca, cb) = (ra.cell("dep-1"), rb.cell("dep-1"));
        ra.announce_cooldowns(a.announce_cooldowns());
        let rb2 = rb.clone();
        b.subscribe(|_| {}, move |id, span| rb2.cool(id, span));
        // Give the subscriber a moment to subscribe, then fail dep-1 on A past its allowance.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let breaker = sluice_routing::Breaker::default();
        let mut g = ca.begin(false);
        assert!(g.fail(sluice_routing::FailureKind::RateLimit, None, &breaker));
        let mut cooled = false;
        for _ in 0..200 {
            if matches!(
                cb.availability(sluice_routing::now_ms()),
                Availability::Cooling(_)
            ) {
                cooled = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(cooled, "B keeps dep-1 out after A cooled it");
    }

    #[tokio::test]
    async fn an_unreachable_redis_leaves_admission_to_the_instance() {
        let port = testing_free_port();
        let f = Fleet::start(&RedisTarget::Single(sluice_core::Secret::new(format!(
            "redis://127.0.0.1:{port}"
        ))))
        .unwrap();
        let s = key("k", Limits::default());
        assert!(f.admit(&one(&s), "r", 0, 0).await.is_none());
        assert!(!f.is_up());
        // While it is away, one request per probe interval tries it; the rest do not wait.
        assert!(f.may_call(1_000));
        assert!(!f.may_call(1_001));
        assert!(!f.may_call(1_000 + PROBE_EVERY_MS - 1));
        assert!(f.may_call(1_000 + PROBE_EVERY_MS));
    }

    fn testing_free_port() -> u16 {
        std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap()
    }
}
