//! Admission against requests-per-minute, tokens-per-minute and parallel-request limits of
//! every subject a request belongs to (its key, team, user, end user). All subjects must admit
//! it; a refusal rolls back what the others already counted. The counters live in memory, next
//! to the subject's cached record, so a check costs a few atomics and no lookup.

use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

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
}

impl SubjectKind {
    /// Name used in messages.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Key => "key",
            Self::Team => "team",
            Self::User => "user",
            Self::EndUser => "end user",
        }
    }
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
}

impl Limits {
    /// Whether any limit is set.
    pub fn any(&self) -> bool {
        self.rpm.is_some() || self.tpm.is_some() || self.max_parallel.is_some()
    }
}

/// A subject's live counters.
#[derive(Debug)]
pub struct Counters {
    requests: Window,
    tokens: Window,
    in_flight: AtomicU32,
}

impl Default for Counters {
    fn default() -> Self {
        Self {
            requests: Window::new(MINUTE_MS),
            tokens: Window::new(MINUTE_MS),
            in_flight: AtomicU32::new(0),
        }
    }
}

/// One subject of a request: its limits and counters.
#[derive(Debug, Clone)]
pub struct Subject {
    /// Which kind.
    pub kind: SubjectKind,
    /// Its limits.
    pub limits: Limits,
    /// Its counters (shared by all requests of the subject).
    pub counters: Arc<Counters>,
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
}

/// A refusal: the subject, the limit, and when to retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{} {} limit of {limit} reached", .subject.name(), match .exceeded { Exceeded::Requests => "requests-per-minute", Exceeded::Tokens => "tokens-per-minute", Exceeded::Parallel => "parallel-request" })]
pub struct Rejected {
    /// Whose limit.
    pub subject: SubjectKind,
    /// Which limit.
    pub exceeded: Exceeded,
    /// Its value.
    pub limit: u64,
    /// When a retry can succeed.
    pub retry_after: Duration,
}

/// Most subjects a request has (key, team, user, end user).
const MAX_SUBJECTS: usize = 4;

/// What an admitted request holds: its parallel slots (released on drop) and the subjects to
/// charge its tokens to.
#[derive(Debug, Default)]
pub struct Permit {
    held: [Option<Subject>; MAX_SUBJECTS],
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
    /// Charge the request's tokens to every subject's tokens-per-minute window.
    pub fn add_tokens(&self, now_ms: u64, tokens: u64) {
        for s in self.held.iter().flatten() {
            if s.limits.tpm.is_some() {
                s.counters.tokens.add(now_ms, tokens);
            }
        }
    }

    /// What is left this sliding minute, for the response headers.
    pub fn remaining(&self, now_ms: u64) -> Remaining {
        let mut out = Remaining::default();
        let tighter = |cur: Option<(u64, u64)>, limit: u64, used: u64| {
            let left = limit.saturating_sub(used);
            match cur {
                Some((_, l)) if l <= left => cur,
                _ => Some((limit, left)),
            }
        };
        for s in self.held.iter().flatten() {
            if let Some(l) = s.limits.rpm {
                out.requests = tighter(out.requests, l, s.counters.requests.estimate(now_ms));
            }
            if let Some(l) = s.limits.tpm {
                out.tokens = tighter(out.tokens, l, s.counters.tokens.estimate(now_ms));
            }
        }
        out
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        for s in self.held.iter().flatten() {
            if s.limits.max_parallel.is_some() {
                s.counters.in_flight.fetch_sub(1, Relaxed);
            }
        }
    }
}

/// Admit a request against every subject's limits, or say which one refuses it.
pub fn admit(subjects: &[Subject], now_ms: u64) -> Result<Permit, Rejected> {
    let mut permit = Permit::default();
    for (slot, s) in permit.held.iter_mut().zip(subjects) {
        if let Err(e) = check(s, now_ms) {
            // Give back what the subjects before counted; dropping `permit` releases their
            // parallel slots.
            for earlier in permit.held.iter().flatten() {
                if earlier.limits.rpm.is_some() {
                    earlier.counters.requests.remove(now_ms, 1);
                }
            }
            return Err(e);
        }
        *slot = Some(s.clone());
    }
    Ok(permit)
}

fn check(s: &Subject, now_ms: u64) -> Result<(), Rejected> {
    let reject = |exceeded, limit, retry_after| Rejected {
        subject: s.kind,
        exceeded,
        limit,
        retry_after,
    };
    let c = &s.counters;
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
            limits,
            counters: Arc::new(Counters::default()),
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
        assert!(admit(&subjects, 1_000).is_ok());
        let p = admit(&subjects, 1_000).unwrap();
        assert_eq!(
            p.remaining(1_000).requests,
            Some((2, 0)),
            "limit and what is left"
        );
        let e = admit(&subjects, 1_000).unwrap_err();
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
        let first = admit(&subjects, 0).unwrap();
        assert_eq!(
            admit(&subjects, 0).unwrap_err().exceeded,
            Exceeded::Parallel
        );
        drop(first);
        assert!(admit(&subjects, 0).is_ok());
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
        let e = admit(&subjects, 0).unwrap_err();
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
            assert!(admit(&[rpm_key.clone(), blocked.clone()], 0).is_err());
        }
        assert!(
            admit(&[rpm_key], 0).is_ok(),
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
        let p = admit(&subjects, 0).unwrap();
        p.add_tokens(0, 100);
        assert_eq!(p.remaining(0).tokens, Some((100, 0)));
        let e = admit(&subjects, 10).unwrap_err();
        assert_eq!(e.exceeded, Exceeded::Tokens);
        assert!(admit(&subjects, 120_001).is_ok(), "two minutes later");
    }
}
