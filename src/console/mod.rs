//! The admin console at `/ui`: server-rendered pages (maud) over sluice's own live state (the
//! routing atomics, the Prometheus counters `/metrics` serves) and its store, read through the
//! same functions the management API uses. Served by the same binary; no Node toolchain, no
//! script at all in the pages.
//!
//! This file routes: the stylesheet and the sign-in form are open; every other page needs a
//! session (`session`), and every state change a CSRF token bound to it. Pages live in
//! `pages/`, the shell and security headers in `layout`, password sign-in in `users`.
//!
//! Nothing here is on the inference path: the pipeline reaches this module only for `/ui`.

mod compress;
mod flash;
mod layout;
mod limit;
mod pages;
mod session;
mod sso;
mod users;

pub use session::{Role, Session, Viewer};

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::header::SET_COOKIE;
use http::{Method, Request, Response, StatusCode};
use http_body::Body;
use maud::html;

use crate::http::read_body;
use crate::http::ResponseBody;
use crate::server::{AppState, Snapshot};
use layout::{csrf_field, page, problem, problem_back, redirect, respond};
use session::{cookie, over_tls, set_cookie, Keys, LOGIN_COOKIE, SESSION_COOKIE};
use sluice_core::error::ApiError;

/// The console's settings, from `general_settings` and LiteLLM's environment variables.
#[derive(Debug)]
pub struct Settings {
    /// The admin's user name (`UI_USERNAME`, default `admin`).
    username: String,
    /// `UI_PASSWORD`, kept as a digest; `None`: the master key is the admin's password.
    password: Option<crate::auth::MasterKey>,
    /// Single sign-on over OpenID Connect (`GENERIC_*`).
    sso: Option<sluice_config::Sso>,
    /// What the console learns while it runs, kept over a reload (a reload must neither
    /// forget wrong passwords nor the playground's keys).
    live: std::sync::Arc<Live>,
}

/// The console's running state, beside its settings.
#[derive(Debug, Default)]
struct Live {
    /// Wrong passwords per user name.
    limiter: limit::SignInLimiter,
    /// Samples of the request counter for the overview's requests per second.
    rate: pages::RequestRate,
    /// The playground's keys, remembered per session on this instance.
    playground: pages::PlaygroundKeys,
}

impl crate::server::Part for Settings {
    /// `None` when `disable_admin_ui` turns the console off. Over a reload it keeps what it
    /// learnt running (wrong passwords, request-rate samples, the playground's keys).
    fn build(
        config: &sluice_config::Config,
        _with: &crate::server::Building<'_>,
        before: Option<&std::sync::Arc<Self>>,
    ) -> Result<Option<std::sync::Arc<Self>>, String> {
        Ok(Self::of(&config.general).map(|mut s| {
            if let Some(before) = before {
                s.live = std::sync::Arc::clone(&before.live);
            }
            std::sync::Arc::new(s)
        }))
    }
}

impl Settings {
    /// `None` when `disable_admin_ui` turns the console off.
    fn of(general: &sluice_config::GeneralSettings) -> Option<Self> {
        (!general.disable_admin_ui).then(|| Self {
            username: general.ui_username.clone(),
            password: general
                .ui_password
                .as_ref()
                .map(crate::auth::MasterKey::new),
            sso: general.sso.clone(),
            live: std::sync::Arc::default(),
        })
    }

    /// Whether `user`/`password` is the admin's sign-in.
    fn admin(&self, master: &crate::auth::MasterKey, user: &str, password: &str) -> bool {
        let named = user.is_empty() || user == self.username;
        named && self.password.as_ref().unwrap_or(master).matches(password)
    }
}

/// Largest form the console reads (a playground prompt is the biggest).
const MAX_FORM: usize = 256 * 1024;

/// The sign-in form's path: the accept loop records the peer of every request to it (wrong
/// passwords count per address, `limit`).
pub(crate) const SIGN_IN_PATH: &str = "/ui/login";

/// Serves one console request, gzipped when the browser accepts it. `disable_admin_ui` makes
/// every path a 404.
pub async fn handle<B>(
    state: &AppState,
    snap: &Snapshot,
    req: Request<B>,
) -> Result<Response<ResponseBody>, ApiError>
where
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: std::fmt::Display,
{
    let gzip = compress::accepts_gzip(req.headers());
    let resp = serve(state, snap, req).await?;
    Ok(compress::maybe_gzip(gzip, resp).await)
}

async fn serve<B>(
    state: &AppState,
    snap: &Snapshot,
    req: Request<B>,
) -> Result<Response<ResponseBody>, ApiError>
where
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: std::fmt::Display,
{
    let Some(settings) = snap.features.console.as_ref() else {
        return Err(ApiError::RouteNotFound {
            method: req.method().to_string(),
            path: req.uri().path().chars().take(200).collect(),
        });
    };
    let path = req.uri().path().to_owned();
    let sub = path.strip_prefix("/ui").unwrap_or_default();
    let sub = if sub.is_empty() { "/" } else { sub };
    if let Some(asset) = layout::asset(sub) {
        return Ok(asset);
    }
    let Some(master) = snap.master.as_ref() else {
        return Ok(problem(
            StatusCode::SERVICE_UNAVAILABLE,
            None,
            "The console needs general_settings.master_key: you sign in with it, or as a user \
             made behind it.",
        ));
    };
    let keys = Keys::new(master);
    let tls = over_tls(req.headers(), req.extensions());
    let now = unix_now();
    match (req.method(), sub, settings.sso.as_ref()) {
        (&Method::GET, "/login", Some(sso)) if sso.auto_redirect => {
            return Ok(sso::start(sso, &keys, req.headers(), tls, now))
        }
        (&Method::GET, "/login", _) => {
            return Ok(login_page(settings, &keys, tls, StatusCode::OK, None))
        }
        (&Method::POST, "/login", _) => {
            let (parts, body) = req.into_parts();
            let body = read_body(body, &parts.headers, MAX_FORM, snap.body_timeout).await?;
            let admin = |user: &str, password: &str| settings.admin(master, user, password);
            let client = crate::auth::addresses::client_of(&parts.extensions);
            return Ok(sign_in(
                state,
                settings,
                &admin,
                &keys,
                (&parts.headers, client),
                &body,
                tls,
                now,
            )
            .await);
        }
        (&Method::GET, "/sso/login", Some(sso)) => {
            return Ok(sso::start(sso, &keys, req.headers(), tls, now))
        }
        (&Method::GET, "/sso/callback", Some(sso)) => {
            let query = req.uri().query().unwrap_or_default();
            return Ok(sso::callback(state, sso, &keys, req.headers(), query, tls, now).await);
        }
        _ => {}
    }
    let token = cookie(req.headers(), SESSION_COOKIE)
        .unwrap_or_default()
        .to_owned();
    let token = token.as_str();
    let session = match keys.verify(token, now) {
        Some(s)
            if (s.stamp.is_none() || users::still_signed_in(state, &s).await)
                && !users::signed_out(state, token).await =>
        {
            s
        }
        _ => return Ok(to_sign_in(tls, !token.is_empty())),
    };
    let team_admin = if session.role.sees_all() {
        None
    } else {
        users::team_admin_of(state, &session.user).await
    };
    let viewer = Viewer {
        csrf: keys.csrf(token),
        session_id: session::session_id(token),
        session,
        team_admin,
    };
    let sealer = flash::Sealer::new(master);
    if req.method() == Method::POST {
        let (parts, body) = req.into_parts();
        let body = read_body(body, &parts.headers, MAX_FORM, snap.body_timeout).await?;
        let form = Form::parse(&body);
        let back = pages::way_back(sub, &form, true);
        if !keys.csrf_ok(token, form.get("csrf").unwrap_or_default()) {
            return Ok(problem_back(
                StatusCode::FORBIDDEN,
                Some(&viewer),
                "This form has expired or did not come from this console: reload the page and \
                 try again.",
                &back,
            ));
        }
        if sub == "/logout" {
            users::sign_out(state, token, viewer.session.expires, now).await;
            settings.live.playground.forget(&viewer.session_id);
            return Ok(to_sign_in(tls, true));
        }
        if !viewer.session.role.may_change() {
            return Ok(problem_back(
                StatusCode::FORBIDDEN,
                Some(&viewer),
                &format!(
                    "The role {} may look but not change anything.",
                    viewer.session.role.name()
                ),
                &back,
            ));
        }
        let mut resp = pages::post(state, snap, &viewer, sub, &form)
            .await
            .unwrap_or_else(|e| problem_back(e.status(), Some(&viewer), &e.to_string(), &back));
        // What the redirect's page is to show goes with it, sealed to this session.
        if let Some(f) = resp.extensions_mut().remove::<flash::Flash>() {
            let sealed = sealer.as_ref().and_then(|s| s.seal(token, &f, now));
            let c =
                sealed.and_then(|v| set_cookie(flash::FLASH_COOKIE, &v, flash::LIFETIME_S, tls));
            if let Some(c) = c {
                resp.headers_mut().append(SET_COOKIE, c);
            }
        }
        return Ok(resp);
    }
    if req.method() != Method::GET {
        return Err(ApiError::MethodNotAllowed(req.method().to_string()));
    }
    let query = Form::parse(req.uri().query().unwrap_or_default().as_bytes());
    // A flash is read by the first page after its redirect, and removed.
    let sealed = cookie(req.headers(), flash::FLASH_COOKIE);
    let shown = sealed
        .zip(sealer.as_ref())
        .and_then(|(v, s)| s.open(token, v, now));
    let mut resp = pages::get(state, snap, &viewer, sub, &query, shown)
        .await
        .unwrap_or_else(|e| {
            let back = pages::way_back(sub, &query, false);
            problem_back(e.status(), Some(&viewer), &e.to_string(), &back)
        });
    if let Some(c) = sealed.and_then(|_| set_cookie(flash::FLASH_COOKIE, "", 0, tls)) {
        resp.headers_mut().append(SET_COOKIE, c);
    }
    Ok(resp)
}

/// Off to the sign-in form, removing the session cookie when `clear` (signed out, or a
/// session no longer valid).
fn to_sign_in(tls: bool, clear: bool) -> Response<ResponseBody> {
    let mut resp = redirect("/ui/login");
    if let Some(c) = set_cookie(SESSION_COOKIE, "", 0, tls).filter(|_| clear) {
        resp.headers_mut().append(SET_COOKIE, c);
    }
    resp
}

/// The sign-in form, with a fresh nonce cookie its CSRF token is bound to, and the way to
/// single sign-on when it is configured.
fn login_page(
    settings: &Settings,
    keys: &Keys,
    tls: bool,
    status: StatusCode,
    error: Option<&str>,
) -> Response<ResponseBody> {
    let Some(nonce) = session::nonce() else {
        return problem(
            StatusCode::INTERNAL_SERVER_ERROR,
            None,
            "no OS randomness for the sign-in form",
        );
    };
    let body = html! {
        div.login {
            @if let Some(e) = error { p.error { (e) } }
            form.stack method="post" action="/ui/login" {
                (csrf_field(&keys.csrf(&login_binding(&nonce))))
                label for="username" { "User" }
                input #username name="username" autocomplete="username" placeholder="admin";
                label for="password" { "Password or master key" }
                input #password type="password" name="password" autocomplete="current-password" required;
                button type="submit" { "Sign in" }
            }
            p.muted { "Sign in as admin with the master key, or as a user with the password an admin set." }
            @if settings.sso.is_some() {
                p { a.button #sso href="/ui/sso/login" { "Sign in with single sign-on" } }
            }
        }
    };
    let mut resp = respond(status, page("Sign in", None, body));
    if let Some(c) = set_cookie(LOGIN_COOKIE, &nonce, session::LOGIN_LIFETIME_S, tls) {
        resp.headers_mut().append(SET_COOKIE, c);
    }
    resp
}

/// What the login form's CSRF token signs.
fn login_binding(nonce: &str) -> String {
    format!("login:{nonce}")
}

/// `POST /ui/login`: the admin (`UI_USERNAME` with `UI_PASSWORD`, or the master key) signs in
/// as proxy_admin; a user with a password signs in with their role. A wrong password is a 401
/// with the form again, saying only that.
#[allow(clippy::too_many_arguments)] // the request's parts and the console's settings
async fn sign_in(
    state: &AppState,
    settings: &Settings,
    admin: &(dyn Fn(&str, &str) -> bool + Sync),
    keys: &Keys,
    (headers, client): (&http::HeaderMap, Option<std::net::IpAddr>),
    body: &[u8],
    tls: bool,
    now: u64,
) -> Response<ResponseBody> {
    let form = Form::parse(body);
    let nonce = cookie(headers, LOGIN_COOKIE).unwrap_or_default();
    if nonce.is_empty()
        || !keys.csrf_ok(&login_binding(nonce), form.get("csrf").unwrap_or_default())
    {
        return problem(
            StatusCode::FORBIDDEN,
            None,
            "This sign-in form has expired or did not come from this console: reload it and try \
             again.",
        );
    }
    let user = form.get("username").unwrap_or_default().trim();
    let password = form.get("password").unwrap_or_default();
    if let Err(wait) = settings.live.limiter.check(client, user, now) {
        let mut resp = login_page(
            settings,
            keys,
            tls,
            StatusCode::TOO_MANY_REQUESTS,
            Some(&format!(
                "Too many wrong passwords for this user from this address: try again in {} \
                 minutes.",
                wait.div_ceil(60)
            )),
        );
        if let Ok(v) = http::HeaderValue::from_str(&wait.to_string()) {
            resp.headers_mut().insert(http::header::RETRY_AFTER, v);
        }
        return resp;
    }
    let signed = if admin(user, password) {
        let name = if user.is_empty() { "admin" } else { user };
        Some((name.to_owned(), Role::ProxyAdmin, None))
    } else if user.is_empty() || user.contains('\n') {
        None
    } else {
        users::check_password(state, user, password)
            .await
            .map(|(user, role, stamp)| (user, role, Some(stamp)))
    };
    let Some((user, role, stamp)) = signed else {
        settings
            .live
            .limiter
            .failed(client, form.get("username").unwrap_or_default(), now);
        return login_page(
            settings,
            keys,
            tls,
            StatusCode::UNAUTHORIZED,
            Some("Wrong user or password."),
        );
    };
    settings
        .live
        .limiter
        .succeeded(client, form.get("username").unwrap_or_default());
    let token = keys.issue(&Session {
        user,
        role,
        expires: now + session::LIFETIME_S,
        stamp,
    });
    let mut resp = redirect("/ui/");
    for c in [
        set_cookie(SESSION_COOKIE, &token, session::LIFETIME_S, tls),
        set_cookie(LOGIN_COOKIE, "", 0, tls),
    ]
    .into_iter()
    .flatten()
    {
        resp.headers_mut().append(SET_COOKIE, c);
    }
    resp
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A form body or query string, decoded once.
#[derive(Debug, Default)]
pub(crate) struct Form(Vec<(String, String)>);

impl Form {
    /// Decodes `application/x-www-form-urlencoded` bytes.
    pub(crate) fn parse(bytes: &[u8]) -> Self {
        Self(
            form_urlencoded::parse(bytes)
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        )
    }

    /// Every value of a repeated field (checkboxes of one name), in the order sent.
    pub(crate) fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.0
            .iter()
            .filter(move |(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// A field's value (the first, if repeated).
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Every field, in the order sent.
    pub(crate) fn fields(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// A field's value, `None` when absent or blank.
    pub(crate) fn filled(&self, name: &str) -> Option<&str> {
        self.get(name).map(str::trim).filter(|v| !v.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::MasterKey;
    use sluice_core::Secret;

    fn general(user: &str, password: Option<&str>) -> sluice_config::GeneralSettings {
        sluice_config::GeneralSettings {
            ui_username: user.to_owned(),
            ui_password: password.map(|p| Secret::new(p.to_owned())),
            ..Default::default()
        }
    }

    #[test]
    fn the_admin_signs_in_with_litellms_ui_username_and_password_or_the_master_key() {
        let master = MasterKey::new(&Secret::new("sk-master".to_owned()));
        let plain = Settings::of(&general("admin", None)).unwrap();
        assert!(plain.admin(&master, "admin", "sk-master"));
        assert!(plain.admin(&master, "", "sk-master"));
        assert!(!plain.admin(&master, "someone", "sk-master"));
        assert!(!plain.admin(&master, "admin", "sk-other"));

        let own = Settings::of(&general("ishaan", Some("langchain"))).unwrap();
        assert!(own.admin(&master, "ishaan", "langchain"));
        assert!(
            !own.admin(&master, "ishaan", "sk-master"),
            "UI_PASSWORD replaces it"
        );
        assert!(!own.admin(&master, "admin", "langchain"));

        let off = sluice_config::GeneralSettings {
            disable_admin_ui: true,
            ..Default::default()
        };
        assert!(Settings::of(&off).is_none());
    }
}
