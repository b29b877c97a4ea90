//! The running config (admins only): the deployments and model groups as `sluice check-config`
//! shows them, secrets masked, and a reload from the file that reports every problem by path
//! while the running config keeps serving, as SIGHUP does.

use maud::{html, Markup};

use crate::console::layout::csrf_field;
use crate::console::Viewer;
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

/// `POST /ui/config/reload`: what reloading the file did.
pub(super) async fn reload(state: &AppState) -> (bool, Markup) {
    match state.reload_from_file().await {
        Ok(warnings) => (
            true,
            html! {
                p #reloaded { "Reloaded: new requests are served by the file's config; requests in flight finish on the old one." }
                @if !warnings.is_empty() {
                    h2 { "Warnings" }
                    ul { @for w in &warnings { li { (w) } } }
                }
                p { a href="/ui/config" { "Back to the config" } }
            },
        ),
        Err(e) => (
            false,
            html! {
                p.error { "Not reloaded; the running config keeps serving." }
                @match &e {
                    ReloadError::Config(sluice_config::ConfigError::Invalid(problems)) => {
                        ul #problems { @for p in problems { li { code { (p.path) } ": " (p.message) } } }
                    }
                    other => { p #problems { (other.to_string()) } }
                }
                p { a href="/ui/config" { "Back to the config" } }
            },
        ),
    }
}
