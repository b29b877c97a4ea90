//! The routes that manage the gateway rather than call a provider: the management API, the
//! cache's routes, metrics and readiness.

use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_TYPE, RETRY_AFTER};
use http::{Request, Response, StatusCode};
use http_body::Body;

use sluice_core::error::ApiError;

use super::state::{AppState, Snapshot};
use super::steps::{self, Presented};
use crate::auth::{self, Caller};
use crate::http::{json, read_body, ResponseBody};

/// The cache's management routes, behind the master key.
pub(super) async fn cache_route<B>(
    snap: &Snapshot,
    op: crate::cache::CacheOp,
    req: Request<B>,
) -> Result<Response<ResponseBody>, ApiError>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    auth::authorize(snap.master.as_ref(), req.headers())?;
    let (parts, body) = req.into_parts();
    let body = read_body(body, &parts.headers, snap.max_body, snap.body_timeout).await?;
    crate::cache::manage(op, snap.features.cache.as_deref(), &body).await
}

/// The management API, behind the master key. A change is applied to this instance's key
/// directory at once and announced to the fleet, so a blocked or deleted key stops working
/// everywhere within the poll interval at worst.
pub(super) async fn admin<B>(
    state: &AppState,
    snap: &Snapshot,
    req: Request<B>,
) -> Result<Response<ResponseBody>, ApiError>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    if snap.master.is_none() {
        return Err(ApiError::Unauthorized(
            "the management API needs general_settings.master_key",
        ));
    }
    // The master key, or a virtual key reading its own records (`admin::own_query`): 401 for
    // a key that is not valid, 403 for a valid key asking for more.
    let steps::Authenticated { caller, wall } =
        steps::authenticate(state, snap, Presented::by(&req)).await?;
    let (parts, body) = req.into_parts();
    let path = parts.uri.path();
    let own = match &caller {
        // A proxy_admin user's key is an admin, as in LiteLLM.
        Caller::Key(k) if state.gate().directory().is_proxy_admin(k) => {
            state.gate().directory().usable(k, wall)?;
            None
        }
        Caller::Key(k) => {
            state.gate().directory().usable(k, wall)?;
            let q = parts.uri.query().unwrap_or("");
            // An internal user's key making or changing its own user's keys.
            if let Some(user) = state.gate().directory().key_manager(k) {
                if crate::admin::user_keys_route(&parts.method, path) {
                    let body =
                        read_body(body, &parts.headers, snap.max_body, snap.body_timeout).await?;
                    let answer =
                        crate::admin::user_keys(state, &parts.method, path, &body, &user).await?;
                    let bytes = serde_json::to_vec(&answer)
                        .map_err(|_| ApiError::Internal("admin answer"))?;
                    return Ok(json(StatusCode::OK, Bytes::from(bytes)));
                }
            }
            if let Some(answer) = crate::admin::key_read(state, &parts.method, path, q, k) {
                let bytes =
                    serde_json::to_vec(&answer?).map_err(|_| ApiError::Internal("admin answer"))?;
                return Ok(json(StatusCode::OK, Bytes::from(bytes)));
            }
            Some(crate::admin::own_query(
                &parts.method,
                path,
                q,
                k,
                state.gate().directory(),
            )?)
        }
        Caller::Master | Caller::Open => None,
    };
    let body = read_body(body, &parts.headers, snap.max_body, snap.body_timeout).await?;
    let query = own
        .as_deref()
        .unwrap_or_else(|| parts.uri.query().unwrap_or(""));
    // LiteLLM's header naming who makes a change, for the audit log; else the master key's.
    let by = parts
        .headers
        .get("litellm-changed-by")
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().chars().take(128).collect::<String>())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "admin".to_owned());
    let bytes = match crate::admin::call_bytes(state, &parts.method, path, query, &body).await {
        Some(bytes) => bytes?,
        None => {
            let answer = crate::admin::call(state, &parts.method, path, query, &body, &by).await?;
            serde_json::to_vec(&answer).map_err(|_| ApiError::Internal("admin answer"))?
        }
    };
    Ok(json(StatusCode::OK, Bytes::from(bytes)))
}

/// `/metrics`: Prometheus' text, rendered when asked.
pub(super) fn metrics(state: &AppState, snap: &Snapshot) -> Response<ResponseBody> {
    let recorder = state.recorder();
    let text = recorder
        .metrics()
        .render(&snap.router, recorder.queue_depth(), |text| {
            if let Some(cache) = &snap.features.cache {
                crate::cache::metrics(cache, text);
            }
            state.overload().metrics(text);
        });
    let mut resp = Response::new(ResponseBody::full(Bytes::from(text)));
    resp.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static(sluice_telemetry::metrics::CONTENT_TYPE),
    );
    resp
}

/// `/health/readiness`: ready to serve, and the state of what it shares with others. A down
/// Redis or database does not make the instance unready: it serves on local counters and
/// spools spend, and says so here. While the overload manager sheds requests it is 503, so a
/// load balancer steers away until it recovers.
pub(super) fn readiness(state: &AppState) -> Response<ResponseBody> {
    let shedding = state.overload().shedding();
    let body = readiness_body(state, shedding);
    match shedding {
        None => json(StatusCode::OK, body),
        Some(_) => {
            let mut resp = json(StatusCode::SERVICE_UNAVAILABLE, body);
            resp.headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from_static("1"));
            resp
        }
    }
}

/// The readiness document; `shedding` is why the overload manager sheds, if it does.
fn readiness_body(state: &AppState, shedding: Option<&'static str>) -> Bytes {
    let redis = match state.fleet() {
        None => "not configured",
        Some(f) if f.is_up() => "connected",
        Some(_) => "unreachable: rate limits and budgets are counted by this instance alone",
    };
    let db = match state.store() {
        None => serde_json::json!("not configured"),
        Some(s) => {
            let w = s.writer.stats();
            serde_json::json!({
                "backend": s.store.backend().name(),
                "state": if w.database_up {
                    "connected"
                } else {
                    "unreachable: spend logs are spooled to disk until it returns"
                },
                "spooled_bytes": w.spooled_bytes,
                "lost_records": w.lost,
            })
        }
    };
    let body = serde_json::json!({
        "status": if shedding.is_some() { "overloaded" } else { "healthy" },
        "shedding": shedding,
        "callbacks": state.recorder().callbacks().status(),
        "db": db,
        "redis": redis,
        "cache": crate::cache::readiness(state.snapshot().features.cache.as_deref()),
        // The secret manager: which one, and the names whose last read failed (never values).
        "secrets": match state.vars().secrets() {
            None => serde_json::json!("not configured"),
            Some(s) => serde_json::to_value(s.status()).unwrap_or_default(),
        },
        "sluice_version": env!("CARGO_PKG_VERSION"),
        "sluice_commit": env!("SLUICE_GIT_COMMIT"),
        // LiteLLM's field, for dashboards that read it: the version of what answers.
        "litellm_version": concat!("sluice-", env!("CARGO_PKG_VERSION")),
    });
    Bytes::from(body.to_string())
}
