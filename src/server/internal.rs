//! Calls sluice makes to its own model groups — a moderation guardrail's check, a semantic
//! cache's embedding, a round of the MCP tool loop — through the same routing as a client's
//! request (health, retries, fallbacks, cooldowns, hedging), but with no caller: no key, no
//! limits, no spend record and no logging. What they cost is part of the request that caused
//! them, not a request of their own.

use std::time::Duration;

use bytes::Bytes;
use http::HeaderMap;
use sluice_core::endpoint::Endpoint;
use sluice_core::error::ApiError;
use sluice_providers::Call;
use sluice_routing::{self as routing, Attempt, Outcome, Requested, Resolved, Router};
use sluice_translate::envelope::Envelope;

use crate::server::attempt::{attempt, Answer, Failed};

/// Send `body` (a JSON request naming a model group in `model`) to `endpoint` through the
/// router, and return the whole answer of the deployment that served it. Each attempt is
/// bounded by `timeout`. An error answer from every deployment, or no deployment, is `Err`
/// with a reason safe to show a client (no address, no key).
pub(crate) async fn call(
    router: &Router,
    endpoint: Endpoint,
    body: Bytes,
    timeout: Duration,
) -> Result<Bytes, String> {
    let envelope = Envelope::parse(&body).map_err(|e| e.to_string())?;
    let resolved = router
        .models
        .resolve(&envelope.model)
        .ok_or_else(|| format!("no model group named '{}'", envelope.model))?;
    let requested = Requested {
        num_retries: None,
        fallbacks: None,
        one_shot: false,
        may_use: None,
        mock: None,
        region: None,
        tags: &[],
    };
    let headers = HeaderMap::new();
    let outcome = routing::dispatch(router, resolved, &requested, |a: Attempt<'_>| {
        let call = Call::own(endpoint, &headers, &body, &envelope, a.capture);
        async move { attempt(&a.member.target, call, false, Some(timeout)).await }
    })
    .await;
    match outcome.result {
        Ok(served) => match served.answer {
            Answer::Full(_, bytes) => Ok(bytes),
            Answer::Stream { .. } => Err("the model group answered with a stream".into()),
        },
        Err(failure) => Err(match failure.error {
            Failed::Upstream(resp) => format!("the model group answered {}", resp.status()),
            Failed::Gateway(e) => describe(&e),
        }),
    }
}

/// One whole (non-stream) call of a client's request with a body sluice made from it (a round
/// of the MCP tool loop, `mcp::responses`): routed to the request's own group with its
/// retries and fallbacks, the client's headers, and the outcome as the pipeline's own
/// dispatch returns it, so that step 8 settles the last round's answer like any other.
pub(crate) async fn round<'a>(
    router: &'a Router,
    resolved: Resolved<'a>,
    requested: &'a Requested<'a>,
    endpoint: Endpoint,
    headers: &HeaderMap,
    body: &Bytes,
    timeout: Option<Duration>,
) -> Result<Outcome<'a, Answer, Failed>, ApiError> {
    let envelope = Envelope::parse(body)?;
    Ok(
        routing::dispatch(router, resolved, requested, |a: Attempt<'_>| {
            let call = Call::own(endpoint, headers, body, &envelope, a.capture);
            async move { attempt(&a.member.target, call, false, timeout).await }
        })
        .await,
    )
}

/// An error of sluice's, as a short reason (safe to show: no address, no key).
pub(crate) fn describe(e: &ApiError) -> String {
    match e {
        ApiError::UpstreamTimeout(d) => format!("no answer within {d:?}"),
        other => other.code().to_owned(),
    }
}
