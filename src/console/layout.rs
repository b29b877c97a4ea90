//! The page shell every console page shares (head, navigation, the signed-in user), its one
//! stylesheet, and the response headers that make a page safe to show: a strict
//! Content-Security-Policy (no script at all, styles only from this origin), no framing, no
//! sniffing, no caching of pages. The stylesheet is served at a path that names its content
//! (`/ui/style.<hash>.css`) and cached for a year: a new build has a new path.

use bytes::Bytes;
use http::header::{
    HeaderValue, CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, LOCATION, REFERRER_POLICY,
    X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use http::{Response, StatusCode};
use maud::{html, Markup, DOCTYPE};
use std::sync::OnceLock;

use super::session::Viewer;
use crate::http::ResponseBody;

/// Every console answer's policy: nothing but this origin's own stylesheet, forms that post
/// only back here, no scripts, no frames.
pub(super) const CSP: &str = "default-src 'self'; script-src 'none'; style-src 'self'; \
img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'";

/// The stylesheet, served at [`style_path`] (and at `/ui/style.css`, for pages of an older
/// build still open somewhere).
pub(super) const STYLE: &str = include_str!("style.css");

/// `/ui/style.<first 12 hex digits of the stylesheet's SHA-256>.css`, computed once: the path
/// changes whenever the stylesheet does, so it can be cached for good.
pub(super) fn style_path() -> &'static str {
    static PATH: OnceLock<String> = OnceLock::new();
    PATH.get_or_init(|| {
        let d = ring::digest::digest(&ring::digest::SHA256, STYLE.as_bytes());
        let hex = sluice_core::trace_context::hex(d.as_ref());
        format!("/ui/style.{}.css", hex.get(..12).unwrap_or(&hex))
    })
}

/// What a fingerprinted asset is cached as: for a year, never revalidated (its path changes
/// with its content).
const FOREVER: &str = "public, max-age=31536000, immutable";

/// The pages in the navigation: path, label, for admins only.
const NAV: &[(&str, &str, bool)] = &[
    ("/ui/", "Overview", false),
    ("/ui/keys", "Keys", false),
    ("/ui/models", "Models", false),
    ("/ui/spend", "Spend", false),
    ("/ui/logs", "Logs", false),
    ("/ui/playground", "Playground", false),
    ("/ui/teams", "Teams", true),
    ("/ui/users", "Users", true),
    ("/ui/customers", "Customers", true),
    ("/ui/audit", "Audit", true),
    ("/ui/config", "Config", true),
];

/// A whole page: `title`, then `body` under the navigation.
pub(super) fn page(title: &str, viewer: Option<&Viewer>, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · sluice" }
                link rel="stylesheet" href=(style_path());
                link rel="icon" href="/ui/favicon.svg" type="image/svg+xml";
            }
            body {
                header {
                    span.brand { "sluice" }
                    @if let Some(v) = viewer {
                        nav {
                            @for (href, label, admins_only) in NAV {
                                @if v.session.role.sees_all() || !admins_only {
                                    a href=(href) { (label) }
                                }
                            }
                            @if let Some(team) = &v.team_admin {
                                a href={ "/ui/teams/edit?" (form_urlencoded::Serializer::new(String::new()).append_pair("team_id", team).finish()) } { "Your team" }
                            }
                        }
                        span.who { (v.session.user) " · " (v.session.role.name()) }
                        form.inline method="post" action="/ui/logout" {
                            (csrf_field(&v.csrf))
                            button type="submit" { "Sign out" }
                        }
                    }
                }
                main {
                    h1 { (title) }
                    (body)
                }
            }
        }
    }
}

/// The hidden CSRF field every state-changing form carries.
pub(super) fn csrf_field(token: &str) -> Markup {
    html! { input type="hidden" name="csrf" value=(token); }
}

/// An HTML answer with the console's security headers.
pub(super) fn respond(status: StatusCode, markup: Markup) -> Response<ResponseBody> {
    with_headers(
        status,
        "text/html; charset=utf-8",
        Bytes::from(markup.into_string()),
    )
}

/// The icon, served at `/ui/favicon.svg` (browsers ask for one; a 404 is a console error).
const ICON: &str = include_str!("favicon.svg");

/// The stylesheet or the icon, the console's only static files. The stylesheet at its
/// fingerprinted path is cached for a year; at `/ui/style.css` it is revalidated each time
/// (`no-cache`); at a fingerprint of another build (a page an older or newer instance of a
/// fleet drew) it redirects to this build's.
pub(super) fn asset(sub: &str) -> Option<Response<ResponseBody>> {
    let (content_type, body, cache) = match sub {
        "/favicon.svg" => ("image/svg+xml", ICON, "public, max-age=86400"),
        "/style.css" => ("text/css; charset=utf-8", STYLE, "no-cache"),
        _ if style_path().strip_prefix("/ui") == Some(sub) => {
            ("text/css; charset=utf-8", STYLE, FOREVER)
        }
        _ if sub
            .strip_prefix("/style.")
            .and_then(|s| s.strip_suffix(".css"))
            .is_some_and(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_hexdigit())) =>
        {
            return Some(redirect(style_path()))
        }
        _ => return None,
    };
    let mut resp = with_headers(
        StatusCode::OK,
        content_type,
        Bytes::from_static(body.as_bytes()),
    );
    resp.headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static(cache));
    Some(resp)
}

/// `303 See Other` to `to` (after a form post, so a reload does not post again); a `to` that
/// cannot be a header (it never comes from a client unencoded) goes to the overview.
pub(super) fn redirect(to: &str) -> Response<ResponseBody> {
    let mut resp = with_headers(StatusCode::SEE_OTHER, "text/plain", Bytes::new());
    let to = HeaderValue::from_str(to).unwrap_or(HeaderValue::from_static("/ui/"));
    resp.headers_mut().insert(LOCATION, to);
    resp
}

/// A download (the spend CSV): `content_type`, with `disposition` (`attachment;
/// filename=...`), and the same headers.
pub(super) fn respond_text(
    content_type: &'static str,
    disposition: &'static str,
    body: String,
) -> Response<ResponseBody> {
    let mut resp = headed(
        StatusCode::OK,
        content_type,
        ResponseBody::full(Bytes::from(body)),
    );
    resp.headers_mut().insert(
        http::header::CONTENT_DISPOSITION,
        HeaderValue::from_static(disposition),
    );
    resp
}

/// An HTML answer whose body is written as it comes (the playground's stream), with the same
/// security headers.
pub(super) fn respond_streamed(status: StatusCode, body: ResponseBody) -> Response<ResponseBody> {
    headed(status, "text/html; charset=utf-8", body)
}

fn with_headers(
    status: StatusCode,
    content_type: &'static str,
    body: Bytes,
) -> Response<ResponseBody> {
    headed(status, content_type, ResponseBody::full(body))
}

fn headed(
    status: StatusCode,
    content_type: &'static str,
    body: ResponseBody,
) -> Response<ResponseBody> {
    let mut resp = Response::new(body);
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

/// A page that says what went wrong, with its status and a way back: to the overview when
/// signed in, else to the sign-in form.
pub(super) fn problem(
    status: StatusCode,
    viewer: Option<&Viewer>,
    message: &str,
) -> Response<ResponseBody> {
    let back = if viewer.is_some() {
        "/ui/"
    } else {
        "/ui/login"
    };
    problem_back(status, viewer, message, back)
}

/// A page that says what went wrong, with its status and a link `back` to the page the
/// viewer came from (the form they posted, the list they opened an item of).
pub(super) fn problem_back(
    status: StatusCode,
    viewer: Option<&Viewer>,
    message: &str,
    back: &str,
) -> Response<ResponseBody> {
    let title = status.canonical_reason().unwrap_or("Error");
    let body = html! {
        p.error #problem { (message) }
        p { a #back href=(back) { "Back" } }
    };
    respond(status, page(title, viewer, body))
}

/// A redirect that leaves `flash` for the page it leads to (the console seals it into a
/// cookie bound to the session: `flash`).
pub(super) fn redirect_with(to: &str, flash: super::flash::Flash) -> Response<ResponseBody> {
    let mut resp = redirect(to);
    resp.extensions_mut().insert(flash);
    resp
}
