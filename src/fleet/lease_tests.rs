//! Leases on a real Redis: two instances, limits large enough to lease, requests drawn from
//! both. What must hold: the fleet never admits more than a limit, admits all but the bound
//! (a slice per instance, two while a renewal is on its way), most requests make no round
//! trip, and nothing a request cost is lost.

use std::sync::Arc;
use std::time::Duration;

use redis::AsyncCommands;
use sluice_core::limits::{nanos, wall_ms, Limits, Nanos, Subject, Subjects};
use sluice_core::RedisTarget;

use super::counters::{prefix, spend_key, MINUTE_MS};
use super::testing::{key, leasing, redis};
use super::{Fleet, Settlement, Verdict};

const LEASE: f64 = 0.02;

/// Wait out the end of a minute: a sliding window gives room again as a minute turns, which
/// would blur a count of what one window admitted.
async fn whole_minute_ahead() {
    let into = wall_ms() % MINUTE_MS;
    if into > 40_000 {
        tokio::time::sleep(Duration::from_millis(MINUTE_MS - into + 200)).await;
    }
}

#[derive(Default, Debug)]
struct Tally {
    leased: u64,
    counted: u64,
    refused: u64,
}

/// One request on `f` as the pipeline sends it: admitted (on a lease or by the script) and
/// settled with `tokens` and `cost`, or refused.
async fn request(f: &Arc<Fleet>, s: &Subject, tokens: u64, cost: Nanos, t: &mut Tally) {
    let subjects = Subjects::from([s.clone()]);
    let id = format!("r{}", t.leased + t.counted + t.refused);
    match f.admit(&subjects, &id, wall_ms(), cost).await {
        Some(Verdict::Leased(_)) => {
            t.leased += 1;
            s.counters.charge(cost);
            f.settle_leased(subjects.iter(), tokens, cost, cost);
        }
        Some(Verdict::Admitted(_)) => {
            t.counted += 1;
            s.counters.charge(cost);
            f.settle(Settlement {
                request_id: id.into(),
                subjects: vec![s.clone()],
                tokens,
                cost,
                at_ms: wall_ms(),
            });
        }
        Some(Verdict::Refused(_)) => t.refused += 1,
        None => panic!("redis did not answer"),
    }
    // Let the lease task run between requests, as other requests' awaits do in the server.
    tokio::task::yield_now().await;
}

/// `n` requests of `tokens` and `cost` alternating between `a` (as `ka`) and `b` (as `kb`).
async fn alternate(
    (a, ka): (&Arc<Fleet>, &Subject),
    (b, kb): (&Arc<Fleet>, &Subject),
    n: usize,
    (tokens, cost): (u64, Nanos),
) -> Tally {
    let mut t = Tally::default();
    for i in 0..n {
        let (f, k) = if i % 2 == 0 { (a, ka) } else { (b, kb) };
        request(f, k, tokens, cost, &mut t).await;
    }
    t
}

async fn two(url: &str) -> (Arc<Fleet>, Arc<Fleet>) {
    let target = RedisTarget::Single(sluice_core::Secret::new(url));
    (leasing(&target, LEASE).await, leasing(&target, LEASE).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leased_requests_stay_within_rpm_and_make_no_round_trip() {
    let Some(redis) = redis() else {
        return;
    };
    let (a, b) = two(&redis.url).await;
    whole_minute_ahead().await;
    let id = format!("{}-lease-rpm", wall_ms());
    let rpm = Limits {
        rpm: Some(1_000),
        ..Limits::default()
    };
    let (ka, kb) = (key(&id, rpm), key(&id, rpm));
    let t = alternate((&a, &ka), (&b, &kb), 1_500, (0, 0)).await;
    let admitted = t.leased + t.counted;
    eprintln!("lease figure: rpm 1000, 1500 sent over two instances: {t:?}");
    assert!(admitted <= 1_000, "never beyond the limit: {t:?}");
    // Slices of 20: two instances may each hold one unused, two while renewing.
    assert!(admitted >= 1_000 - 2 * 2 * 20, "within the bound: {t:?}");
    assert!(
        t.leased * 10 >= admitted * 8,
        "most requests admitted with no round trip: {t:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leased_budget_is_never_overspent_and_every_cost_reaches_redis() {
    let Some(redis) = redis() else {
        return;
    };
    let (a, b) = two(&redis.url).await;
    let id = format!("{}-lease-budget", wall_ms());
    let budget = Limits {
        max_budget: Some(nanos(1.0)),
        ..Limits::default()
    };
    let (ka, kb) = (key(&id, budget), key(&id, budget));
    let cost = nanos(0.001);
    let t = alternate((&a, &ka), (&b, &kb), 1_300, (0, cost)).await;
    let admitted = t.leased + t.counted;
    eprintln!("lease figure: budget 1000 requests' cost, 1300 sent over two instances: {t:?}");
    assert!(admitted <= 1_000, "never beyond the budget: {t:?}");
    assert!(admitted >= 1_000 - 2 * 2 * 20, "within the bound: {t:?}");
    assert!(t.leased * 10 >= admitted * 8, "mostly leased: {t:?}");
    // Every cost reaches the shared spend once the leases flush (at most a second).
    let mut con = redis::Client::open(redis.url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let spend = spend_key(&prefix(&ka), &ka);
    let mut seen = 0;
    for _ in 0..60 {
        seen = con
            .get::<_, Option<u64>>(&spend)
            .await
            .unwrap()
            .unwrap_or(0);
        if seen == admitted * cost {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        seen,
        admitted * cost,
        "every admitted request's cost: {t:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_are_leased_and_an_idle_subject_hands_its_slices_back() {
    let Some(redis) = redis() else {
        return;
    };
    let (a, b) = two(&redis.url).await;
    whole_minute_ahead().await;
    let id = format!("{}-lease-tpm", wall_ms());
    let limits = Limits {
        rpm: Some(10_000),
        tpm: Some(100_000),
        ..Limits::default()
    };
    let (ka, kb) = (key(&id, limits), key(&id, limits));
    let t = alternate((&a, &ka), (&b, &kb), 1_500, (100, 0)).await;
    let admitted = t.leased + t.counted;
    eprintln!("lease figure: tpm 100000 at 100 tokens a request over two instances: {t:?}");
    // Admission checks tokens already used (as one instance does): the last request
    // admitted on each instance may go past the limit by its own tokens.
    assert!(admitted <= 1_000 + 2, "tokens bound the fleet: {t:?}");
    assert!(admitted >= 1_000 - 2 * 2 * 20, "within the bound: {t:?}");
    assert!(t.leased * 10 >= admitted * 8, "mostly leased: {t:?}");
    // Idle, both instances hand back the requests they leased and did not use: the shared
    // count comes down to what was admitted.
    let mut con = redis::Client::open(redis.url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let minute = wall_ms() / MINUTE_MS;
    let requests = format!("{}:r:{minute}", prefix(&ka));
    let tokens = format!("{}:t:{minute}", prefix(&ka));
    let mut seen = (0, 0);
    for _ in 0..100 {
        seen = (
            con.get::<_, Option<u64>>(&requests)
                .await
                .unwrap()
                .unwrap_or(0),
            con.get::<_, Option<u64>>(&tokens)
                .await
                .unwrap()
                .unwrap_or(0),
        );
        if seen.0 == admitted && seen.1 == admitted * 100 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        seen,
        (admitted, admitted * 100),
        "slices handed back when idle: {t:?}"
    );
    drop((a, b));
}
