//! A bound on failed sign-ins: after [`MAX_FAILURES`] wrong passwords for one user name from
//! one address within [`WINDOW_S`], that name's password sign-in from that address is refused
//! (429, with `Retry-After`) until the window has passed, whichever password comes. Guessing a
//! user's password (or the master key, the admin's) takes that many tries per quarter hour per
//! address instead of as many as the network carries, and a stranger's wrong passwords lock out
//! only the stranger: the admin signing in from elsewhere is not refused. The accept loop
//! records the peer of every sign-in (`SIGN_IN_PATH`, `PeerAddresses::always_for`), read
//! through trusted proxies as for allow-lists. Kept per instance in memory, at most 10,000
//! entries: a fleet of N instances allows N times as many.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;

/// Wrong passwords a user name may have within a window.
pub(super) const MAX_FAILURES: u32 = 5;
/// The window, in seconds.
pub(super) const WINDOW_S: u64 = 900;
/// Most names tracked at once; past it, windows that ended are dropped first, then all.
const MAX_NAMES: usize = 10_000;

/// Who tries: the client's address (when recorded) and the user name.
type Trier = (Option<IpAddr>, String);

/// Failed sign-ins per client address and user name: count and when its window began (Unix
/// seconds).
#[derive(Debug, Default)]
pub(super) struct SignInLimiter {
    failures: Mutex<HashMap<Trier, (u32, u64)>>,
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
    /// `Err(seconds)` to wait when `user` has used up its tries from `client`.
    pub(super) fn check(&self, client: Option<IpAddr>, user: &str, now: u64) -> Result<(), u64> {
        let map = sluice_core::lock::lock(&self.failures);
        match map.get(&(client, name_of(user))) {
            Some(&(n, since)) if n >= MAX_FAILURES && now < since + WINDOW_S => {
                Err(since + WINDOW_S - now)
            }
            _ => Ok(()),
        }
    }

    /// A wrong password for `user` from `client`.
    pub(super) fn failed(&self, client: Option<IpAddr>, user: &str, now: u64) {
        let mut map = sluice_core::lock::lock(&self.failures);
        if map.len() >= MAX_NAMES {
            map.retain(|_, (_, since)| now < *since + WINDOW_S);
            if map.len() >= MAX_NAMES {
                map.clear();
            }
        }
        let e = map.entry((client, name_of(user))).or_insert((0, now));
        if now >= e.1 + WINDOW_S {
            *e = (0, now);
        }
        e.0 += 1;
    }

    /// A right password: `user` starts afresh from `client`.
    pub(super) fn succeeded(&self, client: Option<IpAddr>, user: &str) {
        sluice_core::lock::lock(&self.failures).remove(&(client, name_of(user)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn five_wrong_passwords_lock_the_name_for_the_window_from_that_address() {
        let l = SignInLimiter::default();
        let eve: Option<IpAddr> = "203.0.113.9".parse().ok();
        let ana_home: Option<IpAddr> = "198.51.100.4".parse().ok();
        for _ in 0..MAX_FAILURES {
            assert_eq!(l.check(eve, "Ana", 100), Ok(()));
            l.failed(eve, "ana", 100);
        }
        assert_eq!(l.check(eve, "ANA", 160), Err(WINDOW_S - 60));
        assert_eq!(l.check(eve, "bob", 160), Ok(()), "another name");
        assert_eq!(l.check(ana_home, "ana", 160), Ok(()), "another address");
        assert_eq!(l.check(None, "ana", 160), Ok(()), "no address is its own");
        assert_eq!(
            l.check(eve, "ana", 100 + WINDOW_S),
            Ok(()),
            "the window passed"
        );
        // The admin's empty name and `admin` are one.
        for _ in 0..MAX_FAILURES {
            l.failed(eve, "", 0);
        }
        assert!(l.check(eve, "admin", 1).is_err());
        assert!(l.check(ana_home, "admin", 1).is_ok());
        l.succeeded(eve, "admin");
        assert_eq!(l.check(eve, "", 1), Ok(()));
    }
}
