//! The page shell every console page shares (head, navigation, the signed-in user), its one
//! stylesheet, and the response headers that make a page safe to show: a strict
//! Content-Security-Policy (no script at all, styles only from `/ui/style.css`), no framing,
//! no sniffing, no caching.

use bytes::Bytes;
use http::header::{
    HeaderValue, CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, LOCATION, REFERRER_POLICY,
    X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use http::{Response, StatusCode};
use maud::{html, Markup, DOCTYPE};

use super::session::Viewer;
use crate::http::ResponseBody;

/// Every console answer's policy: nothing but this origin's own stylesheet, forms that post
/// only back here, no scripts, no frames.
pub(super) const CSP: &str = "default-src 'self'; script-src 'none'; style-src 'self'; \
img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'";

/// The stylesheet, served at `/ui/style.css`.
pub(super) const STYLE: &str = include_str!("style.css");

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
                link rel="stylesheet" href="/ui/style.css";
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

/// The stylesheet or the icon, the console's only static files.
pub(super) fn asset(sub: &str) -> Option<Response<ResponseBody>> {
    let (content_type, body) = match sub {
        "/style.css" => ("text/css; charset=utf-8", STYLE),
        "/favicon.svg" => ("image/svg+xml", ICON),
        _ => return None,
    };
    Some(with_headers(
        StatusCode::OK,
        content_type,
        Bytes::from_static(body.as_bytes()),
    ))
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

/// A page that says what went wrong, with its status.
pub(super) fn problem(
    status: StatusCode,
    viewer: Option<&Viewer>,
    message: &str,
) -> Response<ResponseBody> {
    let title = status.canonical_reason().unwrap_or("Error");
    respond(status, page(title, viewer, html! { p.error { (message) } }))
}
