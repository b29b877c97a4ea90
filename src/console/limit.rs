//! A bound on failed sign-ins: after [`MAX_FAILURES`] wrong passwords for one user name within
//! [`WINDOW_S`], that name's password sign-in is refused (429, with `Retry-After`) until the
//! window has passed, whichever password comes. Guessing a user's password (or the master key,
//! the admin's) takes that many tries per quarter hour instead of as many as the network
//! carries. Kept per instance in memory: a fleet of N instances allows N times as many.

use std::collections::HashMap;
use std::sync::Mutex;

/// Wrong passwords a user name may have within a window.
pub(super) const MAX_FAILURES: u32 = 5;
/// The window, in seconds.
pub(super) const WINDOW_S: u64 = 900;
/// Most names tracked at once; past it, windows that ended are dropped first, then all.
const MAX_NAMES: usize = 10_000;

/// Failed sign-ins per user name: count and when its window began (Unix seconds).
#[derive(Debug, Default)]
pub(super) struct SignInLimiter {
    failures: Mutex<HashMap<String, (u32, u64)>>,
}

/// The name a sign-in counts under: the admin's empty name is `admin`; case is ignored.
fn name_of(user: &str) -> String {
    let u = user.trim();
    if u.is_empty() {
        "admin".to_owned()
    } else {
        u.to_lowercase()
    }
}

impl SignInLimiter {
    /// `Err(seconds)` to wait when `user` has used up its tries.
    pub(super) fn check(&self, user: &str, now: u64) -> Result<(), u64> {
        let Ok(map) = self.failures.lock() else {
            return Ok(());
        };
        match map.get(&name_of(user)) {
            Some(&(n, since)) if n >= MAX_FAILURES && now < since + WINDOW_S => {
                Err(since + WINDOW_S - now)
            }
            _ => Ok(()),
        }
    }

    /// A wrong password for `user`.
    pub(super) fn failed(&self, user: &str, now: u64) {
        let Ok(mut map) = self.failures.lock() else {
            return;
        };
        if map.len() >= MAX_NAMES {
            map.retain(|_, (_, since)| now < *since + WINDOW_S);
            if map.len() >= MAX_NAMES {
                map.clear();
            }
        }
        let e = map.entry(name_of(user)).or_insert((0, now));
        if now >= e.1 + WINDOW_S {
            *e = (0, now);
        }
        e.0 += 1;
    }

    /// A right password: `user` starts afresh.
    pub(super) fn succeeded(&self, user: &str) {
        if let Ok(mut map) = self.failures.lock() {
            map.remove(&name_of(user));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn five_wrong_passwords_lock_the_name_for_the_window() {
        let l = SignInLimiter::default();
        for _ in 0..MAX_FAILURES {
            assert_eq!(l.check("Ana", 100), Ok(()));
            l.failed("ana", 100);
        }
        assert_eq!(l.check("ANA", 160), Err(WINDOW_S - 60));
        assert_eq!(l.check("bob", 160), Ok(()), "another name");
        assert_eq!(l.check("ana", 100 + WINDOW_S), Ok(()), "the window passed");
        // The admin's empty name and `admin` are one.
        for _ in 0..MAX_FAILURES {
            l.failed("", 0);
        }
        assert!(l.check("admin", 1).is_err());
        l.succeeded("admin");
        assert_eq!(l.check("", 1), Ok(()));
    }
}
