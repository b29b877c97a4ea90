//! Quotas leased from the fleet's counters, so that the common request is admitted with no
//! network I/O. An instance takes a slice of each limit of a subject it serves
//! (`router_settings.fleet_lease`, a fraction of the limit: requests of this minute's `rpm`,
//! tokens of this minute's `tpm`, an amount of the budget) and counts it in Redis at once, as
//! if spent; its requests then draw on the slice locally. A background task renews a slice
//! before it runs out, flushes what requests cost, hands back what a minute left unused and
//! returns an idle subject's slices.
//!
//! The bound: the fleet never admits more than a limit; it may refuse early by what other
//! instances hold unused (at most one slice each, two while a renewal is on its way). When
//! what is left of a limit is under two slices, no slice is granted and requests go back to
//! the exact per-request script (`counters.rs`) until the next minute or budget window. A
//! subject with `max_parallel_requests`, or whose slice would be too small to matter (fewer
//! than [`MIN_REQUESTS`] requests, [`MIN_TOKENS`] tokens or [`MIN_COSTS`] requests' cost),
//! is never leased.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use redis::Script;

use sluice_core::limits::{Nanos, Remaining, Subject, Subjects};

use super::counters::{lease_keys, limit, spend_ttl, tighter, MINUTE_MS};

/// Fewest requests a slice of `rpm` may hold for the subject to be leased.
pub const MIN_REQUESTS: u64 = 2;

/// Fewest tokens a slice of `tpm` may hold for the subject to be leased.
pub const MIN_TOKENS: u64 = 1_000;

/// Fewest requests (at the subject's expected cost) a budget slice must pay for.
pub const MIN_COSTS: u64 = 20;

/// How long a budget slice outlives an instance that stopped renewing it (it died).
pub const HOLD_TTL_MS: u64 = 30_000;

/// A held budget slice is re-stamped this often, well inside [`HOLD_TTL_MS`].
const REFRESH_MS: u64 = 10_000;

/// Settled cost is flushed to the shared spend at least this often.
const FLUSH_MS: u64 = 1_000;

/// A subject with no request for this long gives its slices back.
const IDLE_MS: u64 = 5_000;

/// After a refusal to grant (a limit nearly spent), how long requests use the per-request
/// script before a slice is asked for again.
const NEAR_MS: u64 = 1_000;

/// Lease: KEYS per subject (7): requests now, requests last minute, tokens now, tokens last
/// minute, spend, held budget (members by expiry), held amounts. ARGV: now, hold ttl, n, then
/// per subject (16): rpm, tpm, budget (-1: none), spend seed, spend ttl, requests to give
/// back to this minute and to the last, tokens to give back to this minute and to the last,
/// tokens to add (used beyond the slices), cost to add, the lease's member, budget still
/// held, then the slices wanted (requests, tokens, budget; 0: none).
///
/// Returns per subject: requests granted (-1: nearly spent, none), requests left before the
/// grant, tokens granted, tokens left, budget granted.
const LEASE: &str = r"
local now = tonumber(ARGV[1])
local ttl = tonumber(ARGV[2])
local n = tonumber(ARGV[3])
local into = (now % 60000) / 60000
local function give_back(key, v)
  if v > 0 then
    local c = redis.call('GET', key)
    if c then redis.call('SET', key, math.max(tonumber(c) - v, 0), 'KEEPTTL') end
  end
end
local function grant(limit, want, cur, prev)
  if limit < 0 or want <= 0 then return 0, 0 end
  local left = limit - math.ceil(tonumber(redis.call('GET', prev) or '0') * (1 - into)
    + tonumber(redis.call('GET', cur) or '0'))
  if left < 2 * want then return -1, math.max(left, 0) end
  redis.call('INCRBY', cur, want)
  redis.call('PEXPIRE', cur, 120000)
  return want, left
end
local out = {}
for i = 0, n - 1 do
  local k = i * 7
  local a = 3 + i * 16
  give_back(KEYS[k + 1], tonumber(ARGV[a + 6]))
  give_back(KEYS[k + 2], tonumber(ARGV[a + 7]))
  give_back(KEYS[k + 3], tonumber(ARGV[a + 8]))
  give_back(KEYS[k + 4], tonumber(ARGV[a + 9]))
  local more = tonumber(ARGV[a + 10])
  if more > 0 then
    redis.call('INCRBY', KEYS[k + 3], more)
    redis.call('PEXPIRE', KEYS[k + 3], 120000)
  end
  local budget = tonumber(ARGV[a + 3])
  local gb = 0
  if budget >= 0 then
    local spent = redis.call('GET', KEYS[k + 5])
    if not spent then
      spent = ARGV[a + 4]
      local st = tonumber(ARGV[a + 5])
      if st > 0 then
        redis.call('SET', KEYS[k + 5], spent, 'PX', st)
      else
        redis.call('SET', KEYS[k + 5], spent)
      end
    end
    local cost = tonumber(ARGV[a + 11])
    if cost > 0 then spent = redis.call('INCRBY', KEYS[k + 5], cost) end
    local m = ARGV[a + 12]
    local keep = tonumber(ARGV[a + 13])
    local want = tonumber(ARGV[a + 16])
    local gone = redis.call('ZRANGEBYSCORE', KEYS[k + 6], '-inf', now)
    for _, id in ipairs(gone) do redis.call('HDEL', KEYS[k + 7], id) end
    if #gone > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[k + 6], '-inf', now) end
    local held = 0
    local all = redis.call('HGETALL', KEYS[k + 7])
    for j = 1, #all, 2 do
      if all[j] ~= m then held = held + tonumber(all[j + 1]) end
    end
    local hold = keep
    if want > 0 then
      if budget - tonumber(spent) - held - keep >= 2 * want then
        hold = keep + want
        gb = want
      else
        gb = -1
      end
    end
    if hold > 0 then
      redis.call('HSET', KEYS[k + 7], m, hold)
      redis.call('ZADD', KEYS[k + 6], now + ttl, m)
      for _, key in ipairs({KEYS[k + 6], KEYS[k + 7]}) do
        if redis.call('PTTL', key) < ttl then redis.call('PEXPIRE', key, ttl) end
      end
    else
      redis.call('HDEL', KEYS[k + 7], m)
      redis.call('ZREM', KEYS[k + 6], m)
    end
  end
  local gr, rr = grant(tonumber(ARGV[a + 1]), tonumber(ARGV[a + 14]), KEYS[k + 1], KEYS[k + 2])
  local gt, tr = grant(tonumber(ARGV[a + 2]), tonumber(ARGV[a + 15]), KEYS[k + 3], KEYS[k + 4])
  out[#out + 1] = gr
  out[#out + 1] = rr
  out[#out + 1] = gt
  out[#out + 1] = tr
  out[#out + 1] = gb
end
return out
";

/// The slices of one subject's limits at a lease fraction; `None` when the subject is not
/// leased (see the module's doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slices {
    requests: u64,
    tokens: u64,
    budget: Nanos,
}

impl Slices {
    fn of(s: &Subject, fraction: f64, estimate: Nanos) -> Option<Self> {
        let l = &s.limits;
        if l.max_parallel.is_some() || !l.any() {
            return None;
        }
        let part = |v: u64| (v as f64 * fraction).round() as u64;
        let requests = l.rpm.map_or(0, part);
        let tokens = l.tpm.map_or(0, part);
        let budget = l.max_budget.map_or(0, part);
        let cost = s.counters.reservation(estimate);
        let small = (l.rpm.is_some() && requests < MIN_REQUESTS)
            || (l.tpm.is_some() && tokens < MIN_TOKENS)
            || (l.max_budget.is_some() && (cost == 0 || budget < cost.saturating_mul(MIN_COSTS)));
        (!small).then_some(Self {
            requests,
            tokens,
            budget,
        })
    }
}

/// What this instance holds of one subject's limits.
#[derive(Debug)]
struct Lease {
    /// The subject (its counters keep the map's key, their address, from being reused).
    subject: Subject,
    /// Its member in the shared held-budget set.
    member: Arc<str>,
    /// The slices to ask for, as of the last request (a budget's depends on its cost).
    slices: Slices,
    /// The minute the request and token slices count in.
    minute: u64,
    requests: u64,
    /// Tokens left; below zero when requests used more than the slices held.
    tokens: i64,
    /// Budget this lease holds in Redis, as of the last sync.
    held: Nanos,
    /// Cost settled here since the last sync.
    used: Nanos,
    /// Cost held by requests in flight.
    reserved: Nanos,
    in_flight: u32,
    /// The fleet's room at the last grant, less what was used here since (for headers).
    room: (u64, u64),
    near_until: u64,
    last_used: u64,
    synced: u64,
    /// A sync is on its way.
    busy: bool,
}

impl Lease {
    /// Whether a request costing `reserve` can be admitted on this lease now.
    fn ready(&self, s: &Subject, minute: u64, reserve: Nanos) -> bool {
        let l = &s.limits;
        (l.rpm.is_none() || (self.minute == minute && self.requests >= 1))
            && (l.tpm.is_none() || (self.minute == minute && self.tokens > 0))
            && (l.max_budget.is_none()
                || self
                    .used
                    .saturating_add(self.reserved)
                    .saturating_add(reserve.max(1))
                    <= self.held)
    }

    /// Whether a slice runs low (or out of date) and a renewal is worth asking for.
    fn low(&self, s: &Subject, slices: Slices, now: u64) -> bool {
        if self.busy || self.near_until > now {
            return false;
        }
        let l = &s.limits;
        let minute = now / MINUTE_MS;
        (l.rpm.is_some() && (self.minute != minute || self.requests < slices.requests / 2))
            || (l.tpm.is_some()
                && (self.minute != minute || self.tokens < (slices.tokens / 2) as i64))
            || (l.max_budget.is_some()
                && self.held.saturating_sub(self.used + self.reserved) < slices.budget / 2)
    }
}

/// One subject's part of a sync call, taken from its lease.
#[derive(Debug)]
struct Carried {
    key: usize,
    subject: Subject,
    member: Arc<str>,
    back_requests: (u64, u64),
    back_tokens: (u64, u64),
    more_tokens: u64,
    cost: Nanos,
    keep: Nanos,
    want: Slices,
    release: bool,
}

/// The leases of one instance.
pub struct Leases {
    fraction: f64,
    instance: u64,
    serial: AtomicU64,
    map: Mutex<HashMap<usize, Lease>>,
    /// Wakes the renewal task when a slice runs low.
    pub(super) wake: tokio::sync::Notify,
    script: Script,
}

fn address(s: &Subject) -> usize {
    Arc::as_ptr(&s.counters) as usize
}

impl Leases {
    /// Leases of `fraction` of each limit (0: none, every request asks Redis).
    pub fn new(fraction: f64, instance: u64) -> Self {
        Self {
            fraction,
            instance,
            serial: AtomicU64::new(0),
            map: Mutex::new(HashMap::new()),
            wake: tokio::sync::Notify::new(),
            script: Script::new(LEASE),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<usize, Lease>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Admit a request on the slices held, with no I/O: the fleet-wide room left for the
    /// headers, or `None` when a subject has no usable slice (the caller asks Redis; a
    /// renewal is on its way if one helps).
    pub fn admit(&self, subjects: &Subjects, now: u64, estimate: Nanos) -> Option<Remaining> {
        if self.fraction <= 0.0 {
            return None;
        }
        if subjects
            .iter()
            .any(|s| Slices::of(s, self.fraction, estimate).is_none())
        {
            return None;
        }
        let minute = now / MINUTE_MS;
        let mut map = self.lock();
        let mut ready = true;
        let mut wake = false;
        for s in subjects.iter() {
            let slices = Slices::of(s, self.fraction, estimate)?;
            let reserve = s.counters.reservation(estimate);
            match map.get_mut(&address(s)) {
                Some(l) => {
                    l.slices = slices;
                    if !l.ready(s, minute, reserve) {
                        ready = false;
                        wake |= l.low(s, slices, now);
                    }
                }
                None => {
                    let n = self.serial.fetch_add(1, Ordering::Relaxed);
                    let lease = Lease {
                        subject: s.clone(),
                        member: format!("L{:x}-{n}", self.instance).into(),
                        slices,
                        minute,
                        requests: 0,
                        tokens: 0,
                        held: 0,
                        used: 0,
                        reserved: 0,
                        in_flight: 0,
                        room: (0, 0),
                        near_until: 0,
                        last_used: now,
                        synced: now,
                        busy: false,
                    };
                    map.insert(address(s), lease);
                    ready = false;
                    wake = true;
                }
            }
        }
        if !ready {
            drop(map);
            if wake {
                self.wake.notify_one();
            }
            return None;
        }
        let mut left = Remaining::default();
        for s in subjects.iter() {
            let Some(l) = map.get_mut(&address(s)) else {
                continue;
            };
            l.last_used = now;
            l.in_flight += 1;
            if let Some(rpm) = s.limits.rpm {
                l.requests -= 1;
                l.room.0 = l.room.0.saturating_sub(1);
                left.requests = tighter(left.requests, rpm, rpm.saturating_sub(l.room.0));
            }
            if let Some(tpm) = s.limits.tpm {
                left.tokens = tighter(left.tokens, tpm, tpm.saturating_sub(l.room.1));
            }
            if s.limits.max_budget.is_some() {
                l.reserved += s.counters.reservation(estimate);
            }
            wake |= l.low(s, l.slices, now);
        }
        drop(map);
        if wake {
            self.wake.notify_one();
        }
        Some(left)
    }

    /// Settle a request admitted on leases: its tokens and cost come off the slices (no
    /// I/O). Returns the subjects whose lease is gone (only after a failed renewal dropped
    /// it), for the caller to settle through the script.
    pub fn settle(
        &self,
        subjects: impl Iterator<Item = Subject>,
        tokens: u64,
        cost: Nanos,
        estimate: Nanos,
    ) -> Vec<Subject> {
        let mut orphans = Vec::new();
        let mut map = self.lock();
        for s in subjects {
            let Some(l) = map.get_mut(&address(&s)) else {
                orphans.push(s);
                continue;
            };
            l.in_flight = l.in_flight.saturating_sub(1);
            // The average cost may have moved since admission: with nothing in flight the
            // reservations are exactly nil, whatever rounding crept in.
            l.reserved = if l.in_flight == 0 {
                0
            } else {
                l.reserved.saturating_sub(s.counters.reservation(estimate))
            };
            if s.limits.tpm.is_some() {
                l.tokens = l
                    .tokens
                    .saturating_sub(i64::try_from(tokens).unwrap_or(i64::MAX));
                l.room.1 = l.room.1.saturating_sub(tokens);
            }
            if s.limits.max_budget.is_some() {
                l.used = l.used.saturating_add(cost);
            }
        }
        orphans
    }

    /// Take from every lease what a sync should carry now: renewals of low slices, a new
    /// minute's hand-back, settled cost, re-stamps, and idle subjects' release.
    fn take(&self, now: u64) -> Vec<Carried> {
        let minute = now / MINUTE_MS;
        let mut out = Vec::new();
        let mut map = self.lock();
        for (&key, l) in map.iter_mut() {
            if l.busy {
                continue;
            }
            let s = l.subject.clone();
            let slices = l.slices;
            let release = l.in_flight == 0 && now.saturating_sub(l.last_used) >= IDLE_MS;
            let stale = l.minute != minute;
            let wants = l.low(&s, slices, now);
            let flush = l.used > 0 && now.saturating_sub(l.synced) >= FLUSH_MS;
            let stamp = l.held > 0 && now.saturating_sub(l.synced) >= REFRESH_MS;
            if !(release || stale || wants || flush || stamp) {
                continue;
            }
            let place = |v: u64| match minute.saturating_sub(l.minute) {
                0 => (v, 0),
                1 => (0, v),
                _ => (0, 0),
            };
            let mut back_requests = (0, 0);
            let mut back_tokens = (0, 0);
            let mut more_tokens = 0;
            if release || stale {
                back_requests = place(l.requests);
                l.requests = 0;
                if l.tokens > 0 {
                    back_tokens = place(l.tokens as u64);
                    l.tokens = 0;
                }
                l.minute = minute;
            }
            if l.tokens < 0 {
                more_tokens = l.tokens.unsigned_abs();
                l.tokens = 0;
            }
            let keep = if release {
                // Nothing more is admitted on a slice being handed back.
                l.held = 0;
                0
            } else {
                l.held.saturating_sub(l.used)
            };
            let ask = !release && l.near_until <= now;
            let lim = &s.limits;
            let want = Slices {
                requests: if ask && lim.rpm.is_some() && l.requests < slices.requests / 2 {
                    slices.requests
                } else {
                    0
                },
                tokens: if ask && lim.tpm.is_some() && l.tokens < (slices.tokens / 2) as i64 {
                    slices.tokens
                } else {
                    0
                },
                budget: if ask
                    && lim.max_budget.is_some()
                    && keep.saturating_sub(l.reserved) < slices.budget / 2
                {
                    slices.budget
                } else {
                    0
                },
            };
            l.busy = true;
            out.push(Carried {
                key,
                subject: s,
                member: l.member.clone(),
                back_requests,
                back_tokens,
                more_tokens,
                cost: l.used,
                keep,
                want,
                release,
            });
        }
        out
    }

    /// Apply a sync's answer (`None`: it failed, and what it carried is kept for the next).
    fn apply(&self, batch: Vec<Carried>, answer: Option<&[i64]>, now: u64) {
        let mut map = self.lock();
        for (i, sync) in batch.into_iter().enumerate() {
            let Some(l) = map.get_mut(&sync.key) else {
                continue;
            };
            l.busy = false;
            let Some(a) = answer else {
                // Tokens used beyond the slices are still owed; the hand-backs are dropped
                // (Redis keeps counting them until their minute passes: early refusals,
                // never late admissions).
                l.tokens -= i64::try_from(sync.more_tokens).unwrap_or(i64::MAX);
                continue;
            };
            let get = |j: usize| a.get(i * 5 + j).copied().unwrap_or(0);
            let (requests, req_room, tokens, tok_room, budget) =
                (get(0), get(1), get(2), get(3), get(4));
            l.synced = now;
            l.used = l.used.saturating_sub(sync.cost);
            l.held = sync.keep + budget.max(0) as u64;
            if sync.release && l.in_flight == 0 && now.saturating_sub(l.last_used) >= IDLE_MS {
                map.remove(&sync.key);
                continue;
            }
            if requests > 0 {
                l.requests += requests as u64;
            }
            if tokens > 0 {
                l.tokens += tokens;
            }
            if sync.want.requests > 0 {
                l.room.0 = req_room.max(0) as u64;
            }
            if sync.want.tokens > 0 {
                l.room.1 = tok_room.max(0) as u64;
            }
            if requests < 0 || tokens < 0 || budget < 0 {
                l.near_until = now + NEAR_MS;
            }
        }
    }

    /// One sync of every lease that needs one: a single script call for all of them.
    pub async fn sync<C: redis::aio::ConnectionLike + Send>(
        &self,
        con: &mut C,
        now: u64,
        timeout: std::time::Duration,
    ) -> Option<bool> {
        let batch = self.take(now);
        if batch.is_empty() {
            return None;
        }
        let mut inv = self.script.prepare_invoke();
        inv.arg(now).arg(HOLD_TTL_MS).arg(batch.len());
        let minute = now / MINUTE_MS;
        for b in &batch {
            let s = &b.subject;
            for k in lease_keys(s, minute) {
                inv.key(k);
            }
            let l = &s.limits;
            inv.arg(limit(l.rpm))
                .arg(limit(l.tpm))
                .arg(limit(l.max_budget))
                .arg(s.counters.spent(now).saturating_sub(b.cost))
                .arg(spend_ttl(s, now))
                .arg(b.back_requests.0)
                .arg(b.back_requests.1)
                .arg(b.back_tokens.0)
                .arg(b.back_tokens.1)
                .arg(b.more_tokens)
                .arg(b.cost)
                .arg(&*b.member)
                .arg(b.keep)
                .arg(b.want.requests)
                .arg(b.want.tokens)
                .arg(b.want.budget);
        }
        let answer: Option<Vec<i64>> =
            match tokio::time::timeout(timeout, inv.invoke_async(con)).await {
                Ok(Ok(v)) => Some(v),
                Ok(Err(e)) => {
                    tracing::debug!(error = ?e.kind(), "redis lease sync failed");
                    None
                }
                Err(_) => None,
            };
        let ok = answer.is_some();
        self.apply(batch, answer.as_deref(), now);
        Some(ok)
    }
}
