//! Who is signed in, kept in the browser rather than in a table: a session token is the user,
//! their role and an expiry, signed with HMAC-SHA256 under a key derived from the master key.
//! Every instance of a fleet derives the same key, so a session works on whichever instance a
//! request lands; changing the master key signs everyone out.
//!
//! CSRF: every form carries a token that is the HMAC (under a second derived key) of the
//! session token it was rendered for, checked on every state change. Before sign-in, the
//! login form's token is bound the same way to a random nonce in a short-lived cookie.

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use http::header::{HeaderValue, COOKIE};
use http::HeaderMap;
use ring::hmac;

use crate::auth::MasterKey;

/// The session cookie.
pub(super) const SESSION_COOKIE: &str = "sluice_session";
/// The login form's nonce cookie.
pub(super) const LOGIN_COOKIE: &str = "sluice_login";
/// A single sign-on in flight: its state and PKCE verifier, signed.
pub(super) const SSO_COOKIE: &str = "sluice_sso";
/// How long a sign-in lasts.
pub(super) const LIFETIME_S: u64 = 12 * 3600;
/// How long a login form stays valid.
pub(super) const LOGIN_LIFETIME_S: u64 = 3600;

/// LiteLLM's proxy roles, as the console grants them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Everything (the master key signs in as this).
    ProxyAdmin,
    /// Sees everything, changes nothing.
    ProxyAdminViewer,
    /// Their own keys and their team's usage; may make and manage their own keys.
    InternalUser,
    /// Their own keys and their team's usage, read only.
    InternalUserViewer,
}

impl Role {
    /// LiteLLM's name.
    pub fn name(self) -> &'static str {
        match self {
            Self::ProxyAdmin => "proxy_admin",
            Self::ProxyAdminViewer => "proxy_admin_viewer",
            Self::InternalUser => "internal_user",
            Self::InternalUserViewer => "internal_user_viewer",
        }
    }

    /// The role LiteLLM's name stands for.
    pub fn parse(name: &str) -> Option<Self> {
        [
            Self::ProxyAdmin,
            Self::ProxyAdminViewer,
            Self::InternalUser,
            Self::InternalUserViewer,
        ]
        .into_iter()
        .find(|r| r.name() == name)
    }

    /// Sees the whole gateway (every key, team, user and log), not only their own.
    pub fn sees_all(self) -> bool {
        matches!(self, Self::ProxyAdmin | Self::ProxyAdminViewer)
    }

    /// May change anything (make, block, delete keys).
    pub fn may_change(self) -> bool {
        matches!(self, Self::ProxyAdmin | Self::InternalUser)
    }
}

/// A verified sign-in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// The user id (`admin` for the master key).
    pub user: String,
    /// What they may do.
    pub role: Role,
    /// Unix seconds after which the token is refused.
    pub expires: u64,
    /// For a stored user, a digest of their password hash when they signed in ([`stamp`]):
    /// each page checks it against the store, so a new password, a removed one, a changed
    /// role or a deleted user ends their sessions at once. `None`: the master key.
    pub stamp: Option<String>,
}

/// The stamp of a password hash: 16 hex digits of its SHA-256, enough to notice a change
/// without putting the hash itself in the cookie.
pub(super) fn stamp(password_hash: &str) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, password_hash.as_bytes());
    d.as_ref()[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// Which sign-in a session token is, without being the token: its SHA-256 in hex.
pub(super) fn session_id(token: &str) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    sluice_core::trace_context::hex(d.as_ref())
}

/// The signed-in user of one request and the CSRF token their forms carry.
#[derive(Debug)]
pub struct Viewer {
    /// Who.
    pub session: Session,
    /// The token bound to their session.
    pub csrf: String,
    /// Which sign-in this is, without the token: its SHA-256 in hex (what the playground
    /// remembers a key under).
    pub session_id: String,
    /// The team this internal user administers (an `admin` in its `members_with_roles`),
    /// read from the store on each page, so a role taken away holds at once.
    pub team_admin: Option<String>,
}

/// Whose keys, logs and members a viewer sees and manages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope<'a> {
    /// Everything (proxy admins and their viewers).
    All,
    /// One team's (a team admin).
    Team(&'a str),
    /// Their own (an internal user).
    Own(&'a str),
}

impl Viewer {
    /// What this viewer's lists are narrowed to.
    pub fn scope(&self) -> Scope<'_> {
        if self.session.role.sees_all() {
            Scope::All
        } else if let Some(team) = &self.team_admin {
            Scope::Team(team)
        } else {
            Scope::Own(&self.session.user)
        }
    }

    /// The management API's query pair that narrows a list to [`Viewer::scope`].
    pub fn scope_pair(&self) -> Option<(&'static str, &str)> {
        match self.scope() {
            Scope::All => None,
            Scope::Team(t) => Some(("team_id", t)),
            Scope::Own(u) => Some(("user_id", u)),
        }
    }

    /// Whether this viewer manages `team`'s members and keys.
    pub fn manages_team(&self, team: &str) -> bool {
        (self.session.role.sees_all() && self.session.role.may_change())
            || self.team_admin.as_deref() == Some(team)
    }
}

/// The signing keys, derived from the master key per request (two HMACs: cheaper than a
/// console page's smallest database read, and nothing to keep in the snapshot).
pub(super) struct Keys {
    session: hmac::Key,
    csrf: hmac::Key,
    /// Signs single sign-on flight cookies.
    pub(super) sso: hmac::Key,
}

impl Keys {
    /// The keys for this master key.
    pub(super) fn new(master: &MasterKey) -> Self {
        Self {
            session: hmac::Key::new(
                hmac::HMAC_SHA256,
                &master.derive(b"sluice console session v1"),
            ),
            csrf: hmac::Key::new(hmac::HMAC_SHA256, &master.derive(b"sluice console csrf v1")),
            sso: hmac::Key::new(hmac::HMAC_SHA256, &master.derive(b"sluice console sso v1")),
        }
    }

    /// The signed token for a session:
    /// `base64(user \n role \n expires \n stamp \n nonce) . base64(mac)`. The nonce makes each
    /// sign-in's token its own, so that signing one out (`console_revocations`) leaves another
    /// sign-in of the same user in the same second alone.
    pub(super) fn issue(&self, s: &Session) -> String {
        let payload = format!(
            "{}\n{}\n{}\n{}\n{}",
            s.user,
            s.role.name(),
            s.expires,
            s.stamp.as_deref().unwrap_or_default(),
            nonce().unwrap_or_default()
        );
        let mac = hmac::sign(&self.session, payload.as_bytes());
        format!("{}.{}", B64.encode(payload), B64.encode(mac.as_ref()))
    }

    /// The session a token stands for, if its signature holds and it has not expired.
    pub(super) fn verify(&self, token: &str, now: u64) -> Option<Session> {
        let (payload, mac) = token.split_once('.')?;
        let payload = B64.decode(payload).ok()?;
        let mac = B64.decode(mac).ok()?;
        hmac::verify(&self.session, &payload, &mac).ok()?;
        let text = std::str::from_utf8(&payload).ok()?;
        let mut parts = text.split('\n');
        let (user, role, expires, stamp, _nonce) = (
            parts.next()?,
            parts.next()?,
            parts.next()?,
            parts.next()?,
            parts.next()?,
        );
        let session = Session {
            user: user.to_owned(),
            role: Role::parse(role)?,
            expires: expires.parse().ok()?,
            stamp: (!stamp.is_empty()).then(|| stamp.to_owned()),
        };
        (parts.next().is_none() && session.expires > now).then_some(session)
    }

    /// The CSRF token for forms rendered for `bound_to` (a session token, or a login nonce),
    /// masked afresh for each page: a random pad and the token XOR the pad. Pages are gzipped
    /// and reflect what a URL asks (filters), so a token that read the same on every page
    /// could be guessed byte by byte from compressed sizes (BREACH); a masked one cannot.
    pub(super) fn csrf(&self, bound_to: &str) -> String {
        let mac = hmac::sign(&self.csrf, bound_to.as_bytes());
        let mac = mac.as_ref();
        let mut masked = vec![0u8; mac.len() * 2];
        let (pad, rest) = masked.split_at_mut(mac.len());
        if sluice_core::random::fill(pad).is_err() {
            // No randomness: the form fails its check (refused, never accepted unmasked).
            return String::new();
        }
        for ((out, m), p) in rest.iter_mut().zip(mac).zip(pad.iter()) {
            *out = m ^ p;
        }
        B64.encode(masked)
    }

    /// Whether `given` is a (masked) CSRF token for `bound_to`, in constant time.
    pub(super) fn csrf_ok(&self, bound_to: &str, given: &str) -> bool {
        let Ok(masked) = B64.decode(given) else {
            return false;
        };
        if masked.is_empty() || masked.len() % 2 != 0 {
            return false;
        }
        let (pad, rest) = masked.split_at(masked.len() / 2);
        let mac: Vec<u8> = rest.iter().zip(pad).map(|(m, p)| m ^ p).collect();
        hmac::verify(&self.csrf, bound_to.as_bytes(), &mac).is_ok()
    }
}

/// A fresh login nonce from the OS's CSPRNG.
pub(super) fn nonce() -> Option<String> {
    let mut bytes = [0u8; 24];
    sluice_core::random::fill(&mut bytes).ok()?;
    Some(B64.encode(bytes))
}

/// One cookie's value from the request's `Cookie` headers.
pub(super) fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// Whether the browser reached sluice over TLS: sluice's own listener (`--tls-cert`, which
/// marks each request `ServedOverTls`), or a proxy in front that ends TLS and says so in
/// `X-Forwarded-Proto`. A client that sets it on plain HTTP only makes its own cookie stricter.
pub(super) fn over_tls(headers: &HeaderMap, extensions: &http::Extensions) -> bool {
    extensions
        .get::<sluice_net::server::ServedOverTls>()
        .is_some()
        || headers
            .get("x-forwarded-proto")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("https"))
}

/// A `Set-Cookie` value: `HttpOnly`, `SameSite=Strict`, scoped to `/ui`, `Secure` over TLS;
/// `max_age` 0 removes the cookie.
pub(super) fn set_cookie(name: &str, value: &str, max_age: u64, tls: bool) -> Option<HeaderValue> {
    cookie_with(name, value, max_age, tls, "/ui", "Strict")
}

/// A `Set-Cookie` value like [`set_cookie`]'s but `SameSite=Lax`, scoped to `/ui/sso`: single
/// sign-on's flight cookie must come back with the provider's redirect, a navigation from
/// another site.
pub(super) fn set_cookie_lax(
    name: &str,
    value: &str,
    max_age: u64,
    tls: bool,
) -> Option<HeaderValue> {
    cookie_with(name, value, max_age, tls, "/ui/sso", "Lax")
}

fn cookie_with(
    name: &str,
    value: &str,
    max_age: u64,
    tls: bool,
    path: &str,
    same_site: &str,
) -> Option<HeaderValue> {
    let secure = if tls { "; Secure" } else { "" };
    HeaderValue::from_str(&format!(
        "{name}={value}; Path={path}; Max-Age={max_age}; HttpOnly; SameSite={same_site}{secure}"
    ))
    .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::Secret;

    fn keys(master: &str) -> Keys {
        Keys::new(&MasterKey::new(&Secret::new(master.to_owned())))
    }

    fn session(expires: u64) -> Session {
        Session {
            user: "alice".into(),
            role: Role::InternalUser,
            expires,
            stamp: Some("0123456789abcdef".into()),
        }
    }

    #[test]
    fn a_token_round_trips_until_it_expires() {
        let k = keys("sk-master");
        let token = k.issue(&session(100));
        assert_eq!(k.verify(&token, 99), Some(session(100)));
        assert_eq!(k.verify(&token, 100), None);
    }

    #[test]
    fn a_token_from_another_master_key_or_edited_is_refused() {
        let token = keys("sk-master").issue(&session(100));
        assert_eq!(keys("sk-other").verify(&token, 0), None);
        let (payload, mac) = token.split_once('.').unwrap();
        let forged = B64.encode("alice\nproxy_admin\n100\n0123456789abcdef");
        assert_eq!(
            keys("sk-master").verify(&format!("{forged}.{mac}"), 0),
            None
        );
        assert!(keys("sk-master")
            .verify(&format!("{payload}.{mac}"), 0)
            .is_some());
    }

    #[test]
    fn csrf_tokens_are_bound_to_their_session() {
        let k = keys("sk-master");
        let t = k.csrf("session-a");
        assert!(k.csrf_ok("session-a", &t));
        assert!(!k.csrf_ok("session-b", &t));
        assert!(!k.csrf_ok("session-a", ""));
        assert!(!keys("sk-other").csrf_ok("session-a", &t));
    }

    #[test]
    fn csrf_tokens_read_differently_on_every_page() {
        let k = keys("sk-master");
        let (a, b) = (k.csrf("session-a"), k.csrf("session-a"));
        assert_ne!(
            a, b,
            "masked afresh: nothing for compression to find (BREACH)"
        );
        assert!(k.csrf_ok("session-a", &a) && k.csrf_ok("session-a", &b));
        // The bare HMAC (what a token was before masking) is refused.
        let bare = B64.encode(hmac::sign(&k.csrf, b"session-a").as_ref());
        assert!(!k.csrf_ok("session-a", &bare));
        // One flipped byte of the masked token fails.
        let mut raw = B64.decode(&a).unwrap();
        let last = raw.len() - 1;
        raw[last] ^= 1;
        assert!(!k.csrf_ok("session-a", &B64.encode(raw)));
    }

    #[test]
    fn cookies_are_read_from_any_cookie_header() {
        let mut h = HeaderMap::new();
        h.append(COOKIE, HeaderValue::from_static("a=1; sluice_session=tok"));
        assert_eq!(cookie(&h, SESSION_COOKIE), Some("tok"));
        assert_eq!(cookie(&h, "b"), None);
    }

    #[test]
    fn cookies_are_strict_and_secure_over_tls() {
        let c = set_cookie("n", "v", 5, true).unwrap();
        let c = c.to_str().unwrap();
        assert!(c.contains("HttpOnly") && c.contains("SameSite=Strict") && c.contains("Secure"));
        let plain = set_cookie("n", "v", 5, false).unwrap();
        assert!(!plain.to_str().unwrap().contains("Secure"));
    }
}
