//! The Realtime API proxy (`GET /v1/realtime?model=<group>`, and `/realtime`): a WebSocket
//! session between the caller and an OpenAI or Azure OpenAI deployment, with the same steps
//! as an inference request before the upgrade, so that every refusal is an ordinary HTTP
//! answer the client can read:
//!
//! 3. authenticate: the virtual (or master) key from `Authorization` (and the other usual
//!    headers), or from the `openai-insecure-api-key.<key>` subprotocol browsers send;
//! 5. the model group from `?model=` (404 when unknown);
//! 6. admit: the key's access to the group, its limits and budgets (the pipeline's `admit`);
//! 7. one deployment, picked by the group's strategy among those whose provider has a
//!    Realtime API (OpenAI-compatible, Azure; others: 501 naming the pair), connected to as a
//!    WebSocket client with sluice's credentials; an upstream that refuses the upgrade has its
//!    status and body passed back;
//! 8. `101 Switching Protocols`, then [`session`] relays frames both ways and adds up the
//!    usage of every `response.done`;
//! 9. one record and one settlement per session, when it ends: the deployment's in-flight
//!    slot and the caller's parallel slot are held for the whole session.

mod session;

use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{
    HeaderName, HeaderValue, AUTHORIZATION, CONNECTION, SEC_WEBSOCKET_ACCEPT, SEC_WEBSOCKET_KEY,
    SEC_WEBSOCKET_PROTOCOL, UPGRADE,
};
use http::{HeaderMap, Request, Response, StatusCode};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::Error as WsError;

use sluice_core::error::ApiError;
use sluice_core::record::RequestRecord;
use sluice_providers::realtime::{self, RealtimeUpstream};
use sluice_routing::{now_ms, Group, InFlight, Member, RouteError, Strategy};

use crate::auth::{self, Wanted};
use crate::http::ResponseBody;
use crate::server::steps::{self, Admitted, Ask, Presented};
use crate::server::{AppState, Snapshot};

use session::{Session, Upstream};

/// The route's name in errors and records.
const ROUTE: &str = "/v1/realtime";

/// Longest wait for the upstream to accept the WebSocket upgrade.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// The subprotocol prefix that carries the key in browsers (which cannot set headers on a
/// WebSocket): OpenAI's `openai-insecure-api-key.<key>`.
const KEY_PROTOCOL: &str = "openai-insecure-api-key.";

static OPENAI_BETA: HeaderName = HeaderName::from_static("openai-beta");

/// Answer a Realtime API upgrade: refuse it as an ordinary HTTP error, or switch protocols and
/// run the session on its own task.
pub async fn handle<B>(
    state: &AppState,
    snap: &Snapshot,
    mut req: Request<B>,
    record: &mut RequestRecord,
) -> Result<Response<ResponseBody>, ApiError> {
    record.stream = true;
    // 3. Authenticate.
    let presented = caller_key(req.headers());
    let who = steps::authenticate(state, snap, Presented::by(&req).with_key(&presented)).await?;
    let accept = websocket_accept(req.headers())?;
    // 5. The model group.
    let model = query_model(req.uri().query()).ok_or(ApiError::MissingParam("model"))?;
    let resolved = snap
        .router
        .models
        .resolve(&model)
        .ok_or_else(|| ApiError::ModelNotFound(model.chars().take(256).collect()))?;
    let group = resolved.group;
    record.model = Some(group.name.clone());
    record.requested_model = record.model.clone();
    // 6. Admit.
    let ask = Ask::for_model(Wanted::of(&model, group));
    let Admitted { mut charges, .. } =
        steps::admit(state, who.caller, ask, record, who.wall).await?;
    // 7. A deployment with a Realtime API, and its upstream session.
    let strategy = snap.router.policy.strategy;
    let (member, mut guard, upstream) = pick(group, strategy, resolved.capture, &model)?;
    record.deployment = Some(member.target.info.id.clone());
    record.provider = Some(member.target.provider.name());
    let before_send = record.start.elapsed();
    let sent = Instant::now();
    let ws = match connect(upstream, req.headers()).await {
        Ok(ws) => ws,
        Err(Refusal::Answer(resp)) => {
            record.status = resp.status().as_u16();
            return Ok(resp);
        }
        Err(Refusal::Error(e)) => return Err(e),
    };
    guard.succeed(sent.elapsed());
    // 8. Switch protocols; the session owns the record and the charges from here.
    let arrived = Instant::now();
    record.status = StatusCode::SWITCHING_PROTOCOLS.as_u16();
    record.ttfb = Some(arrived - record.start);
    record.overhead = before_send;
    charges.deployment = Some(guard);
    charges.price = Some(member.target.price);
    let on_upgrade = hyper::upgrade::on(&mut req);
    let session = Session::new(record.clone(), state.recorder().clone(), charges);
    tokio::spawn(session.run(on_upgrade, ws));
    let mut resp = Response::new(ResponseBody::full(Bytes::new()));
    *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = resp.headers_mut();
    h.insert(CONNECTION, HeaderValue::from_static("upgrade"));
    h.insert(UPGRADE, HeaderValue::from_static("websocket"));
    h.insert(SEC_WEBSOCKET_ACCEPT, accept);
    if offers_realtime_protocol(req.headers()) {
        h.insert(SEC_WEBSOCKET_PROTOCOL, HeaderValue::from_static("realtime"));
    }
    Ok(resp)
}

/// Pick a member of `group` whose provider has a Realtime API, by the group's strategy; members
/// without one are skipped, and a group with none is refused (501, naming the provider).
fn pick<'g>(
    group: &'g Group,
    strategy: Strategy,
    capture: Option<&str>,
    requested: &str,
) -> Result<(&'g Member, InFlight, RealtimeUpstream), ApiError> {
    let upstream = |m: &Member| realtime::upstream(&m.target, capture, requested);
    let chosen = group
        .pick_serving(strategy, now_ms(), upstream)
        .chosen(group)
        .map_err(ApiError::NoDeployment)?;
    chosen.ok_or_else(
        || match group.members().iter().find(|m| upstream(m).is_none()) {
            Some(m) => ApiError::EndpointNotSupported {
                provider: m.target.provider.name(),
                endpoint: ROUTE,
            },
            None => ApiError::NoDeployment(RouteError::Cooling {
                group: group.name.clone(),
                retry_in: Duration::ZERO,
            }),
        },
    )
}

/// Why the upstream session did not open.
enum Refusal {
    /// The upstream answered the upgrade with an HTTP error: passed back as it came.
    Answer(Response<ResponseBody>),
    /// It could not be reached, or did not answer in time.
    Error(ApiError),
}

/// Open the upstream session with sluice's credentials (and the client's `OpenAI-Beta`).
async fn connect(up: RealtimeUpstream, client: &HeaderMap) -> Result<Upstream, Refusal> {
    let mut req = up
        .url
        .as_str()
        .into_client_request()
        .map_err(|e| Refusal::Error(ApiError::UpstreamInvalid(e.to_string())))?;
    req.headers_mut().extend(up.headers);
    if let Some(beta) = client.get(&OPENAI_BETA).filter(|v| realtime::is_beta(v)) {
        req.headers_mut().insert(OPENAI_BETA.clone(), beta.clone());
    }
    // The deployment's own TLS (a private CA, a client certificate), else tungstenite's roots.
    let connector = match up
        .tls
        .as_deref()
        .map(sluice_net::tls::UpstreamTls::shared_config)
    {
        None => None,
        Some(Ok(config)) => Some(tokio_tungstenite::Connector::Rustls(config)),
        Some(Err(e)) => return Err(Refusal::Error(ApiError::UpstreamInvalid(e.to_string()))),
    };
    let connecting = tokio_tungstenite::connect_async_tls_with_config(req, None, true, connector);
    match tokio::time::timeout(CONNECT_TIMEOUT, connecting).await {
        Err(_) => Err(Refusal::Error(ApiError::UpstreamTimeout(CONNECT_TIMEOUT))),
        Ok(Ok((ws, _))) => Ok(ws),
        Ok(Err(WsError::Http(resp))) => {
            let (parts, body) = resp.into_parts();
            let mut out = Response::new(ResponseBody::full(Bytes::from(body.unwrap_or_default())));
            *out.status_mut() = parts.status;
            if let Some(ct) = parts.headers.get(http::header::CONTENT_TYPE) {
                out.headers_mut()
                    .insert(http::header::CONTENT_TYPE, ct.clone());
            }
            Err(Refusal::Answer(out))
        }
        Ok(Err(e)) => Err(Refusal::Error(ApiError::UpstreamUnreachable(e.to_string()))),
    }
}

/// The key a realtime caller presents, as the one header the gate reads: the usual headers
/// first, then the browsers' `openai-insecure-api-key.<key>` subprotocol.
fn caller_key(headers: &HeaderMap) -> HeaderMap {
    let key = auth::presented_key(headers).map(str::to_owned).or_else(|| {
        protocols(headers)
            .find_map(|p| p.strip_prefix(KEY_PROTOCOL).map(str::to_owned))
            .filter(|k| !k.is_empty())
    });
    let mut out = HeaderMap::new();
    if let Some(Ok(mut v)) = key.map(|k| HeaderValue::from_str(&format!("Bearer {k}"))) {
        v.set_sensitive(true);
        out.insert(AUTHORIZATION, v);
    }
    out
}

/// The subprotocols the client offers.
fn protocols(headers: &HeaderMap) -> impl Iterator<Item = &str> {
    headers
        .get_all(SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
}

/// Whether the client offers the `realtime` subprotocol (browsers do, beside the key): the
/// answer must then name it, or the browser drops the connection.
fn offers_realtime_protocol(headers: &HeaderMap) -> bool {
    protocols(headers).any(|p| p == "realtime")
}

/// `Sec-WebSocket-Accept` for a WebSocket upgrade request; 400 for anything else (a plain GET,
/// or an HTTP/2 request, which cannot upgrade this way).
fn websocket_accept(headers: &HeaderMap) -> Result<HeaderValue, ApiError> {
    let upgrade = headers
        .get(UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
    let key = headers.get(SEC_WEBSOCKET_KEY).filter(|_| upgrade);
    let Some(key) = key else {
        return Err(ApiError::InvalidParam {
            param: "upgrade",
            message: "the Realtime API is a WebSocket: send an HTTP/1.1 upgrade \
                      (Upgrade: websocket, Sec-WebSocket-Key)"
                .into(),
        });
    };
    HeaderValue::from_str(&derive_accept_key(key.as_bytes()))
        .map_err(|_| ApiError::Internal("websocket accept key"))
}

/// `model=` in the query string, decoded.
fn query_model(query: Option<&str>) -> Option<String> {
    form_urlencoded::parse(query?.as_bytes())
        .find(|(k, _)| k == "model")
        .map(|(_, v)| v.into_owned())
        .filter(|m| !m.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn keys_from_headers_and_the_browser_subprotocol() {
        let browser = headers(&[(
            "sec-websocket-protocol",
            "realtime, openai-insecure-api-key.sk-b, openai-beta.realtime-v1",
        )]);
        assert_eq!(
            caller_key(&browser).get(AUTHORIZATION).unwrap(),
            "Bearer sk-b"
        );
        assert!(offers_realtime_protocol(&browser));
        let both = headers(&[
            ("authorization", "Bearer sk-h"),
            ("sec-websocket-protocol", "openai-insecure-api-key.sk-b"),
        ]);
        assert_eq!(caller_key(&both).get(AUTHORIZATION).unwrap(), "Bearer sk-h");
        assert!(caller_key(&HeaderMap::new()).is_empty());
    }

    #[test]
    fn model_and_upgrade() {
        assert_eq!(
            query_model(Some("model=gpt-4o%2Drealtime&x=1")).as_deref(),
            Some("gpt-4o-realtime")
        );
        assert_eq!(query_model(Some("model=")), None);
        assert!(websocket_accept(&HeaderMap::new()).is_err());
        let up = headers(&[
            ("upgrade", "WebSocket"),
            ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
        ]);
        assert_eq!(
            websocket_accept(&up).unwrap(),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
    }
}
