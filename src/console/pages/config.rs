//! The running config (admins only): the deployments and model groups as `sluice check-config`
//! shows them, secrets masked, and a reload from the file that reports every problem by path
//! while the running config keeps serving, as SIGHUP does.

use http::{Response, StatusCode};
use maud::{html, Markup};

use super::Refused;
use crate::console::flash::Flash;
use crate::console::layout::{self, csrf_field, redirect_with, respond};
use crate::console::Viewer;
use crate::http::ResponseBody;
use crate::server::{AppState, ReloadError, Snapshot};

/// `GET /ui/config`.
pub(super) fn page(state: &AppState, snap: &Snapshot, viewer: &Viewer) -> Markup {
    html! {
        p {
            @match state.config_path() {
                Some(p) => { "Served from " code { (p.display()) } "." }
                None => { "Not started from a config file: nothing to reload." }
            }
        }
        @if viewer.session.role.may_change() && state.config_path().is_some() {
            form method="post" action="/ui/config/reload" {
                (csrf_field(&viewer.csrf))
                button #reload type="submit" { "Reload from the file" }
            }
        }
        h2 { "Deployments" }
        pre #config { (snap.described) }
    }
}

/// What of a reload's warnings goes in the flash cookie at most (a cookie holds about 4 KB,
/// sealed and in base64): the rest are counted, and `sluice check-config` lists them all.
const WARNINGS_BYTES: usize = 2000;

/// `POST /ui/config/reload`: reloaded, back to the config page, which says so and lists the
/// file's warnings; refused, the page that says why (every problem by its path).
pub(super) async fn reload(
    state: &AppState,
    viewer: &Viewer,
) -> Result<Response<ResponseBody>, Refused> {
    match state.reload_from_file().await {
        Ok(warnings) => {
            let flash = Flash {
                notice: Some(
                    "Reloaded: new requests are served by the file's config; requests in flight \
                     finish on the old one."
                        .into(),
                ),
                warnings: kept(warnings),
                ..Flash::default()
            };
            Ok(redirect_with("/ui/config", flash))
        }
        Err(e) => {
            let body = html! {
                p.error #not-reloaded { "Not reloaded; the running config keeps serving." }
                @match &e {
                    ReloadError::Config(sluice_config::ConfigError::Invalid(problems)) => {
                        ul #problems { @for p in problems { li { code { (p.path) } ": " (p.message) } } }
                    }
                    other => { p #problems { (other.to_string()) } }
                }
                p { a #back href="/ui/config" { "Back to the config" } }
            };
            Ok(respond(
                StatusCode::BAD_REQUEST,
                layout::page("Config", Some(viewer), body),
            ))
        }
    }
}

/// The warnings that fit the flash, and a line counting the rest.
fn kept(warnings: Vec<String>) -> Vec<String> {
    let mut out = Vec::new();
    let mut used = 0;
    let total = warnings.len();
    for w in warnings {
        if used + w.len() > WARNINGS_BYTES {
            break;
        }
        used += w.len();
        out.push(w);
    }
    if out.len() < total {
        out.push(format!(
            "… and {} more: `sluice check-config` lists them all.",
            total - out.len()
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_beyond_what_a_cookie_holds_are_counted() {
        assert_eq!(kept(vec!["a".into(), "b".into()]), ["a", "b"]);
        let long = "w".repeat(900);
        let k = kept(vec![long.clone(), long.clone(), long.clone(), long]);
        assert_eq!(k.len(), 3);
        assert_eq!(k[2], "… and 2 more: `sluice check-config` lists them all.");
    }
}
