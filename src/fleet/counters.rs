//! Rate-limit and budget counters shared by every instance, in Redis. One script call admits a
//! request against all its subjects atomically (check all, then count all), another settles it
//! (tokens, cost, parallel slot). The windows are the same two-bucket sliding minute the local
//! counters use, so a fleet limits exactly as one instance does.

use std::sync::Arc;

use redis::Script;

use sluice_core::limits::{
    Exceeded, Nanos, Rejected, Remaining, Scope, Subject, SubjectKind, Subjects,
};

/// Admit: KEYS per subject (8): requests now, requests last minute, tokens now, tokens last
/// minute, in-flight set, spend, held budget (request ids by expiry), held amounts (request id
/// → nanos). ARGV: now, request id, slot ttl, n, then per subject (7): rpm, tpm, parallel,
/// budget (-1: none), spend seed, spend ttl (0: none), reservation (nanos; 0: none).
///
/// A budget admits while spend plus what the fleet's requests in flight hold is under it, so
/// that a burst spread over instances is bounded as one instance bounds it; a held amount
/// whose instance died goes when its slot time ends.
const ADMIT: &str = r"
local now = tonumber(ARGV[1])
local into = (now % 60000) / 60000
local n = tonumber(ARGV[4])
local out = {-1}
for i = 0, n - 1 do
  local k = i * 8
  local a = 4 + i * 7
  local rpm = tonumber(ARGV[a + 1])
  local tpm = tonumber(ARGV[a + 2])
  local par = tonumber(ARGV[a + 3])
  local budget = tonumber(ARGV[a + 4])
  local r = 0
  local t = 0
  if budget >= 0 then
    local spent = redis.call('GET', KEYS[k + 6])
    if not spent then
      spent = ARGV[a + 5]
      local ttl = tonumber(ARGV[a + 6])
      if ttl > 0 then
        redis.call('SET', KEYS[k + 6], spent, 'PX', ttl, 'NX')
      else
        redis.call('SET', KEYS[k + 6], spent, 'NX')
      end
    end
    local held = 0
    if redis.call('EXISTS', KEYS[k + 8]) == 1 then
      local gone = redis.call('ZRANGEBYSCORE', KEYS[k + 7], '-inf', now)
      for _, id in ipairs(gone) do redis.call('HDEL', KEYS[k + 8], id) end
      if #gone > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[k + 7], '-inf', now) end
      for _, v in ipairs(redis.call('HVALS', KEYS[k + 8])) do held = held + tonumber(v) end
    end
    if tonumber(spent) + held >= budget then return {i, 4, spent} end
  end
  if tpm >= 0 then
    t = math.ceil(tonumber(redis.call('GET', KEYS[k + 4]) or '0') * (1 - into)
      + tonumber(redis.call('GET', KEYS[k + 3]) or '0'))
    if t >= tpm then return {i, 2, t} end
  end
  if par >= 0 then
    redis.call('ZREMRANGEBYSCORE', KEYS[k + 5], '-inf', now)
    if redis.call('ZCARD', KEYS[k + 5]) >= par then return {i, 3, par} end
  end
  if rpm >= 0 then
    r = math.ceil(tonumber(redis.call('GET', KEYS[k + 2]) or '0') * (1 - into)
      + tonumber(redis.call('GET', KEYS[k + 1]) or '0') + 1)
    if r > rpm then return {i, 1, r - 1} end
  end
  out[#out + 1] = r
  out[#out + 1] = t
end
for i = 0, n - 1 do
  local k = i * 8
  local a = 4 + i * 7
  local est = tonumber(ARGV[a + 7])
  if tonumber(ARGV[a + 4]) >= 0 and est > 0 then
    redis.call('ZADD', KEYS[k + 7], now + tonumber(ARGV[3]), ARGV[2])
    redis.call('PEXPIRE', KEYS[k + 7], tonumber(ARGV[3]))
    redis.call('HSET', KEYS[k + 8], ARGV[2], est)
    redis.call('PEXPIRE', KEYS[k + 8], tonumber(ARGV[3]))
  end
  if tonumber(ARGV[a + 1]) >= 0 then
    redis.call('INCR', KEYS[k + 1])
    redis.call('PEXPIRE', KEYS[k + 1], 120000)
  end
  if tonumber(ARGV[a + 3]) >= 0 then
    redis.call('ZADD', KEYS[k + 5], now + tonumber(ARGV[3]), ARGV[2])
    redis.call('PEXPIRE', KEYS[k + 5], tonumber(ARGV[3]))
  end
end
return out
";

/// Settle: KEYS per subject (5): tokens now, in-flight set, spend, held budget, held amounts.
/// ARGV: request id, tokens, cost, n, then per subject (5): count tokens, release slot, charge
/// budget (1/0; also lets go of what the request held), spend seed, spend ttl.
const SETTLE: &str = r"
local n = tonumber(ARGV[4])
for i = 0, n - 1 do
  local k = i * 5
  local a = 4 + i * 5
  if ARGV[a + 1] == '1' and tonumber(ARGV[2]) > 0 then
    redis.call('INCRBY', KEYS[k + 1], ARGV[2])
    redis.call('PEXPIRE', KEYS[k + 1], 120000)
  end
  if ARGV[a + 2] == '1' then redis.call('ZREM', KEYS[k + 2], ARGV[1]) end
  if ARGV[a + 3] == '1' then
    redis.call('ZREM', KEYS[k + 4], ARGV[1])
    redis.call('HDEL', KEYS[k + 5], ARGV[1])
  end
  if ARGV[a + 3] == '1' and tonumber(ARGV[3]) > 0 then
    if redis.call('EXISTS', KEYS[k + 3]) == 0 then
      local ttl = tonumber(ARGV[a + 5])
      if ttl > 0 then
        redis.call('SET', KEYS[k + 3], ARGV[a + 4], 'PX', ttl)
      else
        redis.call('SET', KEYS[k + 3], ARGV[a + 4])
      end
    end
    redis.call('INCRBY', KEYS[k + 3], ARGV[3])
  end
end
return 1
";

/// How long a parallel-request slot outlives an instance that died holding it.
pub const SLOT_TTL_MS: u64 = 10 * 60 * 1000;

/// How long a budget window's spend counter outlives the window's end.
const SPEND_GRACE_MS: u64 = 24 * 3600 * 1000;

pub(super) const MINUTE_MS: u64 = 60_000;

/// The two scripts, hashed once.
pub struct Scripts {
    admit: Script,
    settle: Script,
}

impl Default for Scripts {
    fn default() -> Self {
        Self {
            admit: Script::new(ADMIT),
            settle: Script::new(SETTLE),
        }
    }
}

fn letter(kind: SubjectKind) -> char {
    match kind {
        SubjectKind::Key => 'k',
        SubjectKind::Team => 't',
        SubjectKind::User => 'u',
        SubjectKind::EndUser => 'e',
        SubjectKind::Organization => 'o',
        SubjectKind::Tag => 'g',
    }
}

/// The hash tag of every counter: a Redis Cluster keeps all of them in one slot, so that one
/// script call may read and count the subjects of a request (key, team, user, organization,
/// tags...) atomically. Subjects are shared across keys (a team's counters serve all its
/// keys), so no narrower tag keeps every call in one slot; the cost is that the counters live
/// on one primary of a cluster (docs/deploy.md, "Redis Sentinel and Cluster").
const COUNTERS_TAG: &str = "{sluice-counters}";

/// `sluice:{sluice-counters}:<kind>:<id>` — the prefix of a subject's counters.
pub(super) fn prefix(s: &Subject) -> String {
    format!("sluice:{COUNTERS_TAG}:{}:{}", letter(s.kind), s.id())
}

/// The admit script's keys of one subject, in its order (see [`ADMIT`]).
fn admit_keys(s: &Subject, minute: u64) -> [String; 8] {
    let p = prefix(s);
    [
        format!("{p}:r:{minute}"),
        format!("{p}:r:{}", minute.saturating_sub(1)),
        format!("{p}:t:{minute}"),
        format!("{p}:t:{}", minute.saturating_sub(1)),
        format!("{p}:p"),
        spend_key(&p, s),
        format!("{p}:h"),
        format!("{p}:hv"),
    ]
}

/// The lease script's keys of one subject, in its order (`leases.rs`): the admit script's
/// without the in-flight set, so both count in the same keys.
pub(super) fn lease_keys(s: &Subject, minute: u64) -> [String; 7] {
    let [r, r_prev, t, t_prev, _, spend, held, amounts] = admit_keys(s, minute);
    [r, r_prev, t, t_prev, spend, held, amounts]
}

/// The settle script's keys of one subject, in its order (see [`SETTLE`]).
fn settle_keys(s: &Subject, minute: u64) -> [String; 5] {
    let p = prefix(s);
    [
        format!("{p}:t:{minute}"),
        format!("{p}:p"),
        spend_key(&p, s),
        format!("{p}:h"),
        format!("{p}:hv"),
    ]
}

pub(super) fn spend_key(p: &str, s: &Subject) -> String {
    format!("{p}:s:{}", s.counters.window_end().unwrap_or(0))
}

pub(super) fn spend_ttl(s: &Subject, now_ms: u64) -> u64 {
    s.counters
        .window_end()
        .map_or(0, |end| end.saturating_sub(now_ms) + SPEND_GRACE_MS)
}

pub(super) fn limit(v: Option<u64>) -> i64 {
    v.map_or(-1, |v| i64::try_from(v).unwrap_or(i64::MAX))
}

/// What the admit script said.
#[derive(Debug)]
pub enum Verdict {
    /// Admitted; the fleet-wide remaining capacity for the headers.
    Admitted(Remaining),
    /// Admitted on this instance's leased slices, with no round trip (`leases.rs`); settled
    /// on them too.
    Leased(Remaining),
    /// Refused by one subject.
    Refused(Rejected),
}

impl Scripts {
    /// Admit a request against the fleet's counters; `estimate` is what it may cost, held
    /// against the budget of each subject with no cost history here (else its average).
    pub async fn admit<C: redis::aio::ConnectionLike + Send>(
        &self,
        con: &mut C,
        subjects: &Subjects,
        request_id: &str,
        now_ms: u64,
        estimate: Nanos,
    ) -> redis::RedisResult<Verdict> {
        let mut inv = self.admit.prepare_invoke();
        let list: Vec<&Subject> = subjects.iter().collect();
        inv.arg(now_ms)
            .arg(request_id)
            .arg(SLOT_TTL_MS)
            .arg(list.len());
        let minute = now_ms / MINUTE_MS;
        for s in &list {
            for k in admit_keys(s, minute) {
                inv.key(k);
            }
            let l = &s.limits;
            inv.arg(limit(l.rpm))
                .arg(limit(l.tpm))
                .arg(limit(l.max_parallel.map(u64::from)))
                .arg(limit(l.max_budget))
                .arg(s.counters.spent(now_ms))
                .arg(spend_ttl(s, now_ms))
                .arg(s.counters.reservation(estimate));
        }
        let out: Vec<i64> = inv.invoke_async(con).await?;
        Ok(verdict(&list, &out, now_ms))
    }

    /// Settle a finished request: its tokens, its cost, its parallel slot.
    pub async fn settle<C: redis::aio::ConnectionLike + Send>(
        &self,
        con: &mut C,
        ticket: &Settlement,
    ) -> redis::RedisResult<()> {
        let mut inv = self.settle.prepare_invoke();
        inv.arg(&*ticket.request_id)
            .arg(ticket.tokens)
            .arg(ticket.cost)
            .arg(ticket.subjects.len());
        let minute = ticket.at_ms / MINUTE_MS;
        for s in &ticket.subjects {
            for k in settle_keys(s, minute) {
                inv.key(k);
            }
            let l = &s.limits;
            let flag = |b: bool| if b { "1" } else { "0" };
            inv.arg(flag(l.tpm.is_some()))
                .arg(flag(l.max_parallel.is_some()))
                .arg(flag(l.max_budget.is_some()))
                .arg(s.counters.spent(ticket.at_ms).saturating_sub(ticket.cost))
                .arg(spend_ttl(s, ticket.at_ms));
        }
        inv.invoke_async::<i64>(con).await.map(drop)
    }
}

/// A finished request's charges, to send to the fleet.
#[derive(Debug)]
pub struct Settlement {
    /// The request id (its member in the in-flight sets).
    pub request_id: Arc<str>,
    /// The subjects it was admitted against.
    pub subjects: Vec<Subject>,
    /// Tokens it used.
    pub tokens: u64,
    /// What it cost.
    pub cost: Nanos,
    /// When it ended (wall-clock ms).
    pub at_ms: u64,
}

fn verdict(list: &[&Subject], out: &[i64], now_ms: u64) -> Verdict {
    let first = out.first().copied().unwrap_or(-1);
    if first >= 0 {
        let s = list.get(first as usize).copied();
        let what = out.get(1).copied().unwrap_or(0);
        let value = out.get(2).copied().unwrap_or(0).max(0) as u64;
        let exceeded = match what {
            1 => Exceeded::Requests,
            2 => Exceeded::Tokens,
            3 => Exceeded::Parallel,
            _ => Exceeded::Budget,
        };
        let limits = s.map(|s| *s.limits).unwrap_or_default();
        let next_minute = MINUTE_MS - now_ms % MINUTE_MS;
        let (limit, retry_ms, spent) = match exceeded {
            Exceeded::Requests => (limits.rpm.unwrap_or(0), next_minute, 0),
            Exceeded::Tokens => (limits.tpm.unwrap_or(0), next_minute, 0),
            Exceeded::Parallel => (u64::from(limits.max_parallel.unwrap_or(0)), 1_000, 0),
            Exceeded::Budget => (
                limits.max_budget.unwrap_or(0),
                s.and_then(|s| s.counters.window_end())
                    .map_or(0, |e| e.saturating_sub(now_ms)),
                value,
            ),
        };
        return Verdict::Refused(Rejected {
            subject: s.map_or(SubjectKind::Key, |s| s.kind),
            scope: s.map_or(Scope::All, |s| s.scope),
            exceeded,
            limit,
            retry_after: std::time::Duration::from_millis(retry_ms),
            spent,
        });
    }
    let mut left = Remaining::default();
    for (i, s) in list.iter().enumerate() {
        let r = out.get(1 + 2 * i).copied().unwrap_or(0).max(0) as u64;
        let t = out.get(2 + 2 * i).copied().unwrap_or(0).max(0) as u64;
        if let Some(l) = s.limits.rpm {
            left.requests = tighter(left.requests, l, r);
        }
        if let Some(l) = s.limits.tpm {
            left.tokens = tighter(left.tokens, l, t);
        }
    }
    Verdict::Admitted(left)
}

pub(super) fn tighter(cur: Option<(u64, u64)>, limit: u64, used: u64) -> Option<(u64, u64)> {
    let left = limit.saturating_sub(used);
    match cur {
        Some((_, l)) if l <= left => cur,
        _ => Some((limit, left)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::cluster_routing::Slot;
    use sluice_core::limits::{Counters, Limits};

    fn subject(kind: SubjectKind, id: &str) -> Subject {
        Subject {
            kind,
            scope: Scope::All,
            limits: Arc::new(Limits::default()),
            counters: Arc::new(Counters::new(id.into())),
        }
    }

    /// A Redis Cluster runs a script only when all its keys hash to one slot: every key of
    /// every subject, whatever its id holds (braces too), is in the counters' slot.
    #[test]
    fn every_counter_key_of_a_call_is_in_one_slot() {
        let slot = Slot::for_key("sluice:{sluice-counters}:anything");
        let kinds = [
            SubjectKind::Key,
            SubjectKind::Team,
            SubjectKind::User,
            SubjectKind::EndUser,
            SubjectKind::Organization,
            SubjectKind::Tag,
        ];
        let ids = ["a1b2", "team-{x}", "}{", "user@example.com", ""];
        let mut n = 0;
        for kind in kinds {
            for id in ids {
                let s = subject(kind, id);
                for k in admit_keys(&s, 29_000_000).iter().chain(&settle_keys(&s, 7)) {
                    assert_eq!(Slot::for_key(k), slot, "{k}");
                    n += 1;
                }
            }
        }
        assert_eq!(n, 6 * 5 * 13);
        // Without the tag the same keys spread over slots: the check above can fail.
        let spread: std::collections::HashSet<_> = ids
            .iter()
            .map(|id| Slot::for_key(format!("sluice:k:{id}:p")))
            .collect();
        assert!(spread.len() > 1);
    }
}
