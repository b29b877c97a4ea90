//! The router's rules, from `router_settings`: how many retries each kind of failure gets,
//! how long to wait before retrying the same deployment, which groups to fall back to, and
//! when a deployment is taken out. Built once per config load; read by [`super::dispatch`].

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::failure::FailureKind;
use super::group::Strategy;
use super::health::Breaker;
use super::tags::TagFiltering;

/// LiteLLM's default `num_retries` (the OpenAI client's `DEFAULT_MAX_RETRIES`).
pub const DEFAULT_NUM_RETRIES: u32 = 2;
/// LiteLLM's default `max_fallbacks`.
pub const DEFAULT_MAX_FALLBACKS: usize = 5;
/// First backoff before retrying a deployment that already failed this request.
pub const DEFAULT_BACKOFF: Duration = Duration::from_millis(500);
/// Longest single wait before a retry, whatever `Retry-After` says: a client waiting longer
/// is better served by the error (its SDK will retry on its own schedule).
pub const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// What sluice does with the upstream call when the client goes away before the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnDisconnect {
    /// Cancel it at once (its connection is closed); the usage known so far is recorded.
    #[default]
    Cancel,
    /// Let it finish, so that its full usage is recorded (and a provider that bills for the
    /// whole answer is accounted exactly).
    Finish,
}

/// Retry, backoff and breaker rules.
#[derive(Debug, Clone)]
pub struct Policy {
    /// How the next deployment is chosen.
    pub strategy: Strategy,
    /// Retries after the first attempt (`num_retries`).
    pub num_retries: u32,
    /// Per-kind overrides (`retry_policy`).
    pub retry_policy: [Option<u32>; FailureKind::ALL.len()],
    /// When a deployment cools down.
    pub breaker: Breaker,
    /// Least wait before retrying the same deployment (`retry_after`).
    pub retry_after: Duration,
    /// First exponential backoff step (`retry_backoff_ms`).
    pub backoff: Duration,
    /// Fallback groups tried at most (`max_fallbacks`).
    pub max_fallbacks: usize,
    /// Client-disconnect rule (`on_client_disconnect`).
    pub on_disconnect: OnDisconnect,
    /// Tag-based routing (`enable_tag_filtering`, `tag_filtering_match_any`), handed to
    /// [`crate::eligible`] with a request's tags.
    pub tags: TagFiltering,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            strategy: Strategy::default(),
            num_retries: DEFAULT_NUM_RETRIES,
            retry_policy: [None; FailureKind::ALL.len()],
            breaker: Breaker::default(),
            retry_after: Duration::ZERO,
            backoff: DEFAULT_BACKOFF,
            max_fallbacks: DEFAULT_MAX_FALLBACKS,
            on_disconnect: OnDisconnect::default(),
            tags: TagFiltering::default(),
        }
    }
}

impl Policy {
    /// Retries a failure of `kind` gets: `retry_policy` for the kind, else `num_retries` (the
    /// request's own `num_retries` first) for kinds worth retrying, else none.
    pub fn retries(&self, kind: FailureKind, requested: Option<u32>) -> u32 {
        match self.retry_policy[kind.index()] {
            Some(n) => n,
            None if kind.retryable_by_default() => requested.unwrap_or(self.num_retries),
            None => 0,
        }
    }

    /// Wait before retry number `n` (1-based) of a deployment this request already tried:
    /// exponential with jitter, at least `retry_after` and the upstream's `Retry-After`.
    pub fn backoff(&self, n: u32, upstream_says: Option<Duration>) -> Duration {
        let exp = self
            .backoff
            .saturating_mul(1 << n.saturating_sub(1).min(16))
            .min(MAX_BACKOFF);
        let jittered = exp.mul_f64(0.5 + fastrand::f64() * 0.5);
        jittered
            .max(self.retry_after)
            .max(upstream_says.unwrap_or_default())
            .min(MAX_BACKOFF)
    }
}

/// Fallback chains by group name.
#[derive(Debug, Default, Clone)]
pub struct Fallbacks {
    /// `fallbacks`: for any failure a retry could not fix.
    pub general: HashMap<Arc<str>, Vec<Arc<str>>>,
    /// `context_window_fallbacks`.
    pub context_window: HashMap<Arc<str>, Vec<Arc<str>>>,
    /// `content_policy_fallbacks`.
    pub content_policy: HashMap<Arc<str>, Vec<Arc<str>>>,
    /// `default_fallbacks`: for groups without their own list.
    pub default: Vec<Arc<str>>,
}

impl Fallbacks {
    /// The groups to try after `group` failed with `kind`, in order. A kind-specific list wins;
    /// a plain bad request has none (it would fail the same way anywhere). `requested` is the
    /// request body's own `fallbacks`, which replaces the configured general list.
    pub fn chain<'a>(
        &'a self,
        group: &str,
        kind: FailureKind,
        requested: Option<&'a [Arc<str>]>,
    ) -> &'a [Arc<str>] {
        let specific = match kind {
            FailureKind::BadRequest => return &[],
            FailureKind::ContextWindowExceeded => self.context_window.get(group),
            FailureKind::ContentPolicy => self.content_policy.get(group),
            _ => None,
        };
        if let Some(list) = specific {
            return list;
        }
        if let Some(list) = requested {
            return list;
        }
        self.general
            .get(group)
            .map_or(self.default.as_slice(), Vec::as_slice)
    }

    /// Whether `group` has anywhere to go after a failure of a kind that falls back.
    pub fn any_for(&self, group: &str, requested: bool) -> bool {
        requested || self.general.contains_key(group) || !self.default.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<Arc<str>> {
        list.iter().map(|s| Arc::from(*s)).collect()
    }

    #[test]
    fn retries_by_kind() {
        let mut p = Policy::default();
        assert_eq!(p.retries(FailureKind::RateLimit, None), 2);
        assert_eq!(p.retries(FailureKind::RateLimit, Some(5)), 5);
        assert_eq!(p.retries(FailureKind::BadRequest, None), 0);
        p.retry_policy[FailureKind::BadRequest.index()] = Some(1);
        p.retry_policy[FailureKind::Timeout.index()] = Some(0);
        assert_eq!(p.retries(FailureKind::BadRequest, None), 1);
        assert_eq!(p.retries(FailureKind::Timeout, Some(4)), 0);
    }

    #[test]
    fn backoff_grows_honours_retry_after_and_is_capped() {
        let p = Policy::default();
        let b1 = p.backoff(1, None);
        assert!(b1 >= Duration::from_millis(250) && b1 <= Duration::from_millis(500));
        let b3 = p.backoff(3, None);
        assert!(b3 >= Duration::from_secs(1) && b3 <= Duration::from_secs(2));
        assert_eq!(
            p.backoff(1, Some(Duration::from_secs(3))),
            Duration::from_secs(3)
        );
        assert_eq!(p.backoff(1, Some(Duration::from_secs(600))), MAX_BACKOFF);
        assert!(p.backoff(30, None) <= MAX_BACKOFF);
    }

    #[test]
    fn chains_by_kind() {
        let mut f = Fallbacks::default();
        f.general.insert("a".into(), names(&["b"]));
        f.context_window.insert("a".into(), names(&["a-long"]));
        f.default = names(&["z"]);
        let req = names(&["r"]);
        assert_eq!(&*f.chain("a", FailureKind::Server, None)[0], "b");
        assert_eq!(&*f.chain("a", FailureKind::Server, Some(&req))[0], "r");
        assert_eq!(
            &*f.chain("a", FailureKind::ContextWindowExceeded, Some(&req))[0],
            "a-long"
        );
        assert_eq!(&*f.chain("a", FailureKind::ContentPolicy, None)[0], "b");
        assert!(f.chain("a", FailureKind::BadRequest, None).is_empty());
        assert_eq!(&*f.chain("other", FailureKind::Timeout, None)[0], "z");
        assert!(f.any_for("other", false));
    }
}
