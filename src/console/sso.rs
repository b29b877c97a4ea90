//! Single sign-on over OpenID Connect: the authorization-code flow with PKCE against any
//! provider (Okta, Entra ID, Google, Keycloak, ...), configured by LiteLLM's `GENERIC_*`
//! environment variables (`sluice_config::Sso`), with no cap on the number of users.
//!
//! 1. `GET /ui/sso/login`: a fresh `state` and PKCE verifier go into a short-lived cookie
//!    signed with a key derived from the master key; the browser is sent to the provider.
//! 2. `GET /ui/sso/callback?code&state`: the cookie's `state` must match; sluice trades the
//!    code (with the verifier, and the client secret when there is one) for an access token
//!    at the token endpoint, reads the user's claims from the userinfo endpoint, and signs
//!    them in with the role and team their claims name. The token never reaches the browser.
//!
//! The user is made (or brought up to date) in the store as LiteLLM does, so that their keys,
//! team and spend work as a password user's; their session ends when an admin deletes them or
//! changes their role.

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD as B64};
use base64::Engine;
use bytes::Bytes;
use http::header::{AUTHORIZATION, CONTENT_TYPE, HOST, LOCATION, SET_COOKIE};
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Limited};
use maud::html;
use ring::{digest, hmac};
use serde_json::Value;
use sluice_config::Sso;
use sluice_net::body::SegmentsBody;

use super::layout::{page, problem, respond};
use super::session::{self, cookie, Keys, Role, Session, SESSION_COOKIE, SSO_COOKIE};
use crate::http::ResponseBody;
use crate::server::AppState;

/// How long the provider may take to send the browser back.
const FLIGHT_S: u64 = 600;
/// The stamp an SSO session carries: no password to compare, but the user must still exist
/// with the role they signed in with.
pub(super) const SSO_STAMP: &str = "sso";
/// Largest token or userinfo answer read.
const MAX_ANSWER: usize = 64 * 1024;

/// The redirect URI the provider sends the browser back to: `PROXY_BASE_URL`'s, else this
/// request's own host.
fn redirect_uri(sso: &Sso, headers: &HeaderMap, tls: bool) -> String {
    let base = sso.base_url.clone().unwrap_or_else(|| {
        let host = headers
            .get(HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("127.0.0.1");
        format!("{}://{host}", if tls { "https" } else { "http" })
    });
    format!("{base}/ui/sso/callback")
}

/// Random bytes from the OS as URL-safe base64 (32 bytes: 43 characters, PKCE's least).
fn random() -> Option<String> {
    let mut bytes = [0u8; 32];
    sluice_core::random::fill(&mut bytes).ok()?;
    Some(B64.encode(bytes))
}

/// The flight cookie: `state \n verifier \n expires`, signed.
fn flight_cookie(key: &hmac::Key, state: &str, verifier: &str, expires: u64) -> String {
    let payload = format!("{state}\n{verifier}\n{expires}");
    let mac = hmac::sign(key, payload.as_bytes());
    format!("{}.{}", B64.encode(payload), B64.encode(mac.as_ref()))
}

/// The verifier of a flight cookie whose signature holds, that has not expired and whose
/// state is `state`.
fn open_flight(key: &hmac::Key, value: &str, state: &str, now: u64) -> Option<String> {
    let (payload, mac) = value.split_once('.')?;
    let payload = B64.decode(payload).ok()?;
    hmac::verify(key, &payload, &B64.decode(mac).ok()?).ok()?;
    let text = String::from_utf8(payload).ok()?;
    let mut parts = text.split('\n');
    let (kept, verifier, expires) = (parts.next()?, parts.next()?, parts.next()?);
    let fresh = expires.parse::<u64>().ok()? > now;
    // The cookie is signed and its state random and single-use: a plain compare leaks
    // nothing an attacker could use.
    let same = kept == state;
    (fresh && same && parts.next().is_none()).then(|| verifier.to_owned())
}

/// `GET /ui/sso/login`: off to the provider.
pub(super) fn start(
    sso: &Sso,
    keys: &Keys,
    headers: &HeaderMap,
    tls: bool,
    now: u64,
) -> Response<ResponseBody> {
    let (Some(state), Some(verifier)) = (random(), random()) else {
        return problem(
            StatusCode::INTERNAL_SERVER_ERROR,
            None,
            "no OS randomness for single sign-on",
        );
    };
    let challenge = B64.encode(digest::digest(&digest::SHA256, verifier.as_bytes()));
    let query = form_urlencoded::Serializer::new(String::new())
        .append_pair("response_type", "code")
        .append_pair("client_id", &sso.client_id)
        .append_pair("redirect_uri", &redirect_uri(sso, headers, tls))
        .append_pair("scope", &sso.scope)
        .append_pair("state", &state)
        .append_pair("code_challenge", &challenge)
        .append_pair("code_challenge_method", "S256")
        .finish();
    let sep = if sso.authorization_endpoint.contains('?') {
        '&'
    } else {
        '?'
    };
    let to = format!("{}{sep}{query}", sso.authorization_endpoint);
    let Ok(location) = HeaderValue::from_str(&to) else {
        return problem(
            StatusCode::INTERNAL_SERVER_ERROR,
            None,
            "GENERIC_AUTHORIZATION_ENDPOINT is not a usable URL",
        );
    };
    let mut resp = respond(StatusCode::SEE_OTHER, html! {});
    resp.headers_mut().insert(LOCATION, location);
    let value = flight_cookie(&keys.sso, &state, &verifier, now + FLIGHT_S);
    if let Some(c) = session::set_cookie_lax(SSO_COOKIE, &value, FLIGHT_S, tls) {
        resp.headers_mut().append(SET_COOKIE, c);
    }
    resp
}

/// Why a sign-in through the provider did not happen; the page says it, never a token or
/// the client secret.
#[derive(Debug, thiserror::Error)]
pub(super) enum SsoError {
    /// The provider sent the browser back with an error (the user declined, ...).
    #[error("the sign-in provider refused: {0}")]
    Refused(String),
    /// No flight cookie, a forged or expired one, or another state.
    #[error("this sign-in expired or did not start here: start it again")]
    Flight,
    /// The token or userinfo endpoint failed.
    #[error("the sign-in provider's {0} endpoint failed: {1}")]
    Provider(&'static str, String),
    /// The claims name no user.
    #[error("the provider's claims name no user (neither '{0}' nor 'sub')")]
    NoUser(String),
    /// The store could not keep the user.
    #[error("the user could not be stored: {0}")]
    Store(String),
}

/// `GET /ui/sso/callback`: the provider's code traded for the user's claims, and a session.
pub(super) async fn callback(
    state: &AppState,
    sso: &Sso,
    keys: &Keys,
    headers: &HeaderMap,
    query: &str,
    tls: bool,
    now: u64,
) -> Response<ResponseBody> {
    match sign_in(state, sso, keys, headers, query, tls, now).await {
        Ok(s) => signed_in(keys, &s, tls),
        Err(e) => {
            tracing::warn!(error = %e, "console single sign-on failed");
            let status = match e {
                SsoError::Provider(..) => StatusCode::BAD_GATEWAY,
                SsoError::Store(_) => StatusCode::SERVICE_UNAVAILABLE,
                _ => StatusCode::UNAUTHORIZED,
            };
            let mut resp = problem(status, None, &format!("Single sign-on: {e}."));
            if let Some(c) = session::set_cookie_lax(SSO_COOKIE, "", 0, tls) {
                resp.headers_mut().append(SET_COOKIE, c);
            }
            resp
        }
    }
}

async fn sign_in(
    state: &AppState,
    sso: &Sso,
    keys: &Keys,
    headers: &HeaderMap,
    query: &str,
    tls: bool,
    now: u64,
) -> Result<Session, SsoError> {
    let q = super::Form::parse(query.as_bytes());
    if let Some(e) = q.filled("error") {
        let why = q.filled("error_description").unwrap_or(e);
        return Err(SsoError::Refused(why.chars().take(200).collect()));
    }
    let (Some(code), Some(got_state)) = (q.filled("code"), q.filled("state")) else {
        return Err(SsoError::Flight);
    };
    let verifier = cookie(headers, SSO_COOKIE)
        .and_then(|c| open_flight(&keys.sso, c, got_state, now))
        .ok_or(SsoError::Flight)?;
    let token = exchange(
        state,
        sso,
        code,
        &verifier,
        &redirect_uri(sso, headers, tls),
    )
    .await?;
    let claims = userinfo(state, sso, &token).await?;
    let who = Claimed::of(sso, &claims)?;
    keep_user(state, &who).await?;
    Ok(Session {
        user: who.user,
        role: who.role,
        expires: now + session::LIFETIME_S,
        stamp: Some(SSO_STAMP.to_owned()),
    })
}

/// The session cookie, and a page that moves on to `/ui/`. A redirect would not do: the
/// browser came here from the provider's site, and a `SameSite=Strict` cookie is not sent on
/// the rest of a navigation that began on another site.
fn signed_in(keys: &Keys, s: &Session, tls: bool) -> Response<ResponseBody> {
    let token = keys.issue(s);
    let body = html! {
        p { "Signed in as " strong { (s.user) } " (" (s.role.name()) "). " a href="/ui/" { "Continue" } }
    };
    let mut resp = respond(StatusCode::OK, page("Signed in", None, body));
    let h = resp.headers_mut();
    h.insert("refresh", HeaderValue::from_static("0; url=/ui/"));
    for c in [
        session::set_cookie(SESSION_COOKIE, &token, session::LIFETIME_S, tls),
        session::set_cookie_lax(SSO_COOKIE, "", 0, tls),
    ]
    .into_iter()
    .flatten()
    {
        h.append(SET_COOKIE, c);
    }
    resp
}

/// One call to the provider: `req` sent, its JSON answer read (at most [`MAX_ANSWER`]).
async fn provider(
    state: &AppState,
    which: &'static str,
    req: Request<SegmentsBody>,
) -> Result<Value, SsoError> {
    let client = state.clients().get(std::time::Duration::from_secs(5));
    let fail = |e: String| SsoError::Provider(which, e);
    let resp = tokio::time::timeout(std::time::Duration::from_secs(10), client.request(req))
        .await
        .map_err(|_| fail("no answer within 10 s".into()))?
        .map_err(|e| fail(e.to_string()))?;
    let status = resp.status();
    let body = Limited::new(resp.into_body(), MAX_ANSWER)
        .collect()
        .await
        .map_err(|e| fail(e.to_string()))?
        .to_bytes();
    if !status.is_success() {
        // The provider's error code only: its description may echo what was sent.
        let code = serde_json::from_slice::<Value>(&body)
            .ok()
            .and_then(|v| v.get("error").and_then(Value::as_str).map(str::to_owned))
            .unwrap_or_default();
        return Err(fail(
            format!("status {status} {code}").trim_end().to_owned(),
        ));
    }
    serde_json::from_slice(&body).map_err(|_| fail("the answer is not JSON".into()))
}

/// The authorization code and PKCE verifier traded for an access token.
async fn exchange(
    state: &AppState,
    sso: &Sso,
    code: &str,
    verifier: &str,
    redirect_uri: &str,
) -> Result<String, SsoError> {
    let form = form_urlencoded::Serializer::new(String::new())
        .append_pair("grant_type", "authorization_code")
        .append_pair("code", code)
        .append_pair("redirect_uri", redirect_uri)
        .append_pair("code_verifier", verifier)
        .append_pair("client_id", &sso.client_id)
        .finish();
    let fail = |e: http::Error| SsoError::Provider("token", e.to_string());
    let mut req = Request::builder()
        .method(Method::POST)
        .uri(&sso.token_endpoint)
        .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header(http::header::ACCEPT, "application/json")
        .body(SegmentsBody::new(vec![Bytes::from(form)]))
        .map_err(fail)?;
    if let Some(secret) = &sso.client_secret {
        // client_secret_basic: both parts form-encoded first (RFC 6749 §2.3.1).
        let enc = |s: &str| form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
        let basic = STANDARD.encode(format!("{}:{}", enc(&sso.client_id), enc(secret.expose())));
        let mut v = HeaderValue::from_str(&format!("Basic {basic}"))
            .map_err(|_| SsoError::Provider("token", "the client secret is not usable".into()))?;
        v.set_sensitive(true);
        req.headers_mut().insert(AUTHORIZATION, v);
    }
    let answer = provider(state, "token", req).await?;
    answer
        .get("access_token")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| SsoError::Provider("token", "no access_token in the answer".into()))
}

/// The user's claims, read with the access token.
async fn userinfo(state: &AppState, sso: &Sso, token: &str) -> Result<Value, SsoError> {
    let mut bearer = HeaderValue::from_str(&format!("Bearer {token}"))
        .map_err(|_| SsoError::Provider("token", "the access token is not usable".into()))?;
    bearer.set_sensitive(true);
    let req = Request::builder()
        .method(Method::GET)
        .uri(&sso.userinfo_endpoint)
        .header(AUTHORIZATION, bearer)
        .header(http::header::ACCEPT, "application/json")
        .body(SegmentsBody::new(Vec::new()))
        .map_err(|e| SsoError::Provider("userinfo", e.to_string()))?;
    provider(state, "userinfo", req).await
}

/// A claim by name; a dotted name reaches into objects (`realm_access.role`). A list gives
/// its first text.
fn claim<'v>(claims: &'v Value, name: &str) -> Option<&'v str> {
    let mut v = claims;
    for part in name.split('.') {
        v = v.get(part)?;
    }
    match v {
        Value::String(s) => Some(s.as_str()),
        Value::Array(items) => items.iter().find_map(Value::as_str),
        _ => None,
    }
    .map(str::trim)
    .filter(|s| !s.is_empty())
}

/// Who the claims say signed in.
#[derive(Debug, PartialEq)]
struct Claimed {
    user: String,
    role: Role,
    email: Option<String>,
    team: Option<String>,
}

impl Claimed {
    fn of(sso: &Sso, claims: &Value) -> Result<Self, SsoError> {
        let user = claim(claims, &sso.user_id_attribute)
            .or_else(|| claim(claims, "sub"))
            .filter(|u| !u.contains('\n'))
            .ok_or_else(|| SsoError::NoUser(sso.user_id_attribute.clone()))?;
        let role = claim(claims, &sso.role_attribute)
            .and_then(Role::parse)
            .or_else(|| Role::parse(&sso.default_role))
            .unwrap_or(Role::InternalUserViewer);
        Ok(Self {
            user: user.to_owned(),
            role,
            email: claim(claims, &sso.email_attribute).map(str::to_owned),
            team: sso
                .team_attribute
                .as_deref()
                .and_then(|t| claim(claims, t))
                .map(str::to_owned),
        })
    }
}

/// The user made, or brought up to date with the provider's role and team, in the store.
async fn keep_user(state: &AppState, who: &Claimed) -> Result<(), SsoError> {
    let services = state
        .store()
        .ok_or_else(|| SsoError::Store("no store".into()))?;
    let known = services
        .store
        .user(&who.user)
        .await
        .map_err(|e| SsoError::Store(e.to_string()))?;
    let mut body = serde_json::json!({"user_id": who.user, "user_role": who.role.name()});
    if let Some(e) = &who.email {
        body["user_email"] = e.as_str().into();
    }
    let path = match &known {
        Some(row) => {
            let same_role = row.user_role.as_deref() == Some(who.role.name());
            let same_team = who.team.is_none() || row.team_id.as_deref() == who.team.as_deref();
            if same_role && same_team {
                return Ok(());
            }
            "/user/update"
        }
        None => "/user/new",
    };
    if let Some(t) = &who.team {
        let mut with_team = body.clone();
        with_team["team_id"] = t.as_str().into();
        if super::pages::change(state, SSO_STAMP, path, &with_team)
            .await
            .is_ok()
        {
            return Ok(());
        }
        // A team the store does not have: the user signs in without one.
        tracing::warn!(team = %t, "single sign-on: the claimed team does not exist");
    }
    super::pages::change(state, SSO_STAMP, path, &body)
        .await
        .map(|_| ())
        .map_err(|e| SsoError::Store(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sso() -> Sso {
        Sso {
            client_id: "c".into(),
            client_secret: None,
            authorization_endpoint: "http://idp/authorize".into(),
            token_endpoint: "http://idp/token".into(),
            userinfo_endpoint: "http://idp/userinfo".into(),
            scope: "openid".into(),
            user_id_attribute: "preferred_username".into(),
            email_attribute: "email".into(),
            role_attribute: "realm.roles".into(),
            team_attribute: Some("groups".into()),
            default_role: "internal_user_viewer".into(),
            base_url: None,
            auto_redirect: false,
        }
    }

    #[test]
    fn claims_name_the_user_role_and_team() {
        let c = serde_json::json!({
            "sub": "u-1", "preferred_username": "ana", "email": "ana@x",
            "realm": {"roles": ["proxy_admin_viewer", "other"]}, "groups": ["search"]
        });
        assert_eq!(
            Claimed::of(&sso(), &c).unwrap(),
            Claimed {
                user: "ana".into(),
                role: Role::ProxyAdminViewer,
                email: Some("ana@x".into()),
                team: Some("search".into()),
            }
        );
        // No name: `sub`; no known role: the default.
        let c = serde_json::json!({"sub": "u-2", "realm": {"roles": "root"}});
        let who = Claimed::of(&sso(), &c).unwrap();
        assert_eq!(
            (who.user.as_str(), who.role),
            ("u-2", Role::InternalUserViewer)
        );
        assert!(Claimed::of(&sso(), &serde_json::json!({})).is_err());
    }

    #[test]
    fn a_flight_cookie_opens_only_for_its_state_and_in_time() {
        let key = hmac::Key::new(hmac::HMAC_SHA256, b"k");
        let c = flight_cookie(&key, "st", "ver", 100);
        assert_eq!(open_flight(&key, &c, "st", 99).as_deref(), Some("ver"));
        assert_eq!(open_flight(&key, &c, "other", 99), None);
        assert_eq!(open_flight(&key, &c, "st", 100), None, "expired");
        let other = hmac::Key::new(hmac::HMAC_SHA256, b"j");
        assert_eq!(open_flight(&other, &c, "st", 99), None, "another key");
    }

    #[test]
    fn the_redirect_uri_is_the_public_base_or_the_host() {
        let mut h = HeaderMap::new();
        h.insert(HOST, HeaderValue::from_static("gw.local:4000"));
        assert_eq!(
            redirect_uri(&sso(), &h, false),
            "http://gw.local:4000/ui/sso/callback"
        );
        let mut s = sso();
        s.base_url = Some("https://gw.example".into());
        assert_eq!(
            redirect_uri(&s, &h, false),
            "https://gw.example/ui/sso/callback"
        );
    }
}
