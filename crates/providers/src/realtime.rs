//! Where a deployment's Realtime API sessions go: OpenAI's and Azure OpenAI's WebSocket URL
//! (built once per deployment, like its HTTP URLs) and sluice's credential headers for the
//! upgrade. Only the OpenAI wire (OpenAI-compatible deployments and Azure) has a Realtime
//! API; every other provider has none, and the gateway refuses before upgrading.

use http::header::{HeaderValue, CONTENT_LENGTH, CONTENT_TYPE};
use http::HeaderMap;
use sluice_net::sigv4::uri_encode;

use crate::target::DeploymentTarget;
use crate::UpstreamTarget;

/// A deployment's realtime URL, `ws://` for an `http://` base and `wss://` for `https://`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RealtimeUrl {
    /// OpenAI's `{base}/realtime?model=`: the upstream model is added per session (a wildcard
    /// deployment's model depends on what the caller asked for).
    Model(String),
    /// Azure's `{base}/openai/realtime?api-version=…&deployment=…`: the deployment names the
    /// model already.
    Fixed(String),
}

impl RealtimeUrl {
    /// OpenAI's realtime URL under `base` (which ends in `/v1` for OpenAI itself).
    pub fn openai(base: &str) -> Self {
        Self::Model(format!("{}/realtime?model=", ws_base(base)))
    }

    /// Azure OpenAI's realtime URL for `deployment` at API `version`.
    pub fn azure(base: &str, deployment: &str, version: &str) -> Self {
        Self::Fixed(format!(
            "{}/openai/realtime?api-version={}&deployment={}",
            ws_base(base),
            uri_encode(version, false),
            uri_encode(deployment, false)
        ))
    }
}

/// The WebSocket scheme for an HTTP base URL.
fn ws_base(base: &str) -> String {
    let base = base.trim_end_matches('/');
    if let Some(rest) = base.strip_prefix("https://") {
        format!("wss://{rest}")
    } else if let Some(rest) = base.strip_prefix("http://") {
        format!("ws://{rest}")
    } else {
        base.to_owned()
    }
}

/// One session's upstream: where to connect and with which headers.
#[derive(Debug)]
pub struct RealtimeUpstream {
    /// The `ws://` or `wss://` URL, model included.
    pub url: String,
    /// sluice's credentials for the deployment (`Authorization` or `api-key`) and its fixed
    /// headers; no content headers (an upgrade has no body).
    pub headers: HeaderMap,
    /// The deployment's upstream TLS (`ssl_verify`, `ssl_certificate`), when not the default.
    pub tls: Option<std::sync::Arc<sluice_net::tls::UpstreamTls>>,
}

/// The realtime upstream of `target`, or `None` when its provider has no Realtime API.
/// `capture` is what a wildcard group's `*` matched, `requested` the model the caller named.
pub fn upstream(
    target: &DeploymentTarget,
    capture: Option<&str>,
    requested: &str,
) -> Option<RealtimeUpstream> {
    let t = match &target.upstream {
        UpstreamTarget::OpenAiCompatible(t) | UpstreamTarget::Azure(t) => t,
        #[allow(unreachable_patterns)]
        _ => return None,
    };
    let url = match &t.realtime {
        RealtimeUrl::Fixed(url) => url.clone(),
        RealtimeUrl::Model(prefix) => {
            let model = t.http.model_for(capture, requested);
            format!("{prefix}{}", uri_encode(&model, false))
        }
    };
    let mut headers = t.http.headers.next().clone();
    headers.remove(CONTENT_TYPE);
    headers.remove(CONTENT_LENGTH);
    Some(RealtimeUpstream {
        url,
        headers,
        tls: t.http.tls.clone(),
    })
}

/// Whether a header value names the `realtime=v1` beta (OpenAI's `OpenAI-Beta`), which the
/// upstream must see when the client sent it.
pub fn is_beta(v: &HeaderValue) -> bool {
    v.as_bytes().starts_with(b"realtime")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn realtime_urls() {
        assert_eq!(
            RealtimeUrl::openai("https://api.openai.com/v1/"),
            RealtimeUrl::Model("wss://api.openai.com/v1/realtime?model=".into())
        );
        assert_eq!(
            RealtimeUrl::openai("http://127.0.0.1:9/v1"),
            RealtimeUrl::Model("ws://127.0.0.1:9/v1/realtime?model=".into())
        );
        assert_eq!(
            RealtimeUrl::azure("https://r.openai.azure.com", "gpt-rt", "2024-10-01-preview"),
            RealtimeUrl::Fixed(
                "wss://r.openai.azure.com/openai/realtime?api-version=2024-10-01-preview&deployment=gpt-rt"
                    .into()
            )
        );
    }
}
