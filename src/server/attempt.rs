//! One call to one deployment, as the router's attempt loop makes it: the whole answer, or a
//! stream's head and first chunk, or a failure classified for the router. Below every route
//! that calls a deployment (the inference phases, the MCP tool loop, pass-through's breaker,
//! sluice's own internal calls, active health checks), and above none of them.

use std::time::Duration;

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::BodyExt;

use sluice_core::endpoint::Endpoint;
use sluice_core::error::ApiError;
use sluice_providers::{Call as ProviderCall, DeploymentTarget, UpstreamBody};
use sluice_routing::{self as routing, Failure, FailureKind, RouteError};

use crate::http::{collect_upstream, json_as_declared};

/// What one attempt produced.
pub(crate) enum Answer {
    /// A non-stream answer, whole.
    Full(http::response::Parts, Bytes),
    /// A stream: its head, its first data frame, and the rest of the body.
    Stream {
        parts: http::response::Parts,
        first: Bytes,
        rest: UpstreamBody,
    },
}

/// What the client gets if no attempt succeeds.
pub(crate) enum Failed {
    /// The upstream's own error answer, passed through.
    Upstream(Response<Bytes>),
    /// sluice's error.
    Gateway(ApiError),
}

impl From<RouteError> for Failed {
    fn from(e: RouteError) -> Self {
        Self::Gateway(ApiError::NoDeployment(e))
    }
}

/// A failed attempt's status and message for the request's log: the upstream's error answer,
/// or sluice's (a timeout, a refused connection).
impl sluice_core::record::Explain for Failed {
    fn explain(&self) -> Option<sluice_core::record::ErrorNote> {
        Some(match self {
            Self::Upstream(resp) => {
                sluice_core::record::ErrorNote::of_body(resp.status().as_u16(), resp.body())
            }
            Self::Gateway(e) => sluice_core::record::ErrorNote::of_error(e),
        })
    }
}

/// One call to one deployment, within its timeout (the request's `timeout` when it sets one):
/// the whole answer for non-stream requests, the first chunk for streams. Any failure comes
/// back classified for the router.
pub(crate) async fn attempt(
    target: &DeploymentTarget,
    call: ProviderCall<'_>,
    stream: bool,
    timeout: Option<Duration>,
) -> Result<Answer, Failure<Failed>> {
    let t = &target.timeouts;
    let limit = timeout.unwrap_or(if stream { t.first_chunk } else { t.total });
    let answer = tokio::time::timeout(limit, async {
        // A provider that needs a key, and none configured: nothing sent could succeed, and
        // the prompt has no business leaving without credentials (the routing moves on).
        if target.key_missing {
            return Err(ApiError::DeploymentKeyMissing {
                deployment: target.info.id.to_string(),
                env: target
                    .provider
                    .spec()
                    .key_env
                    .first()
                    .copied()
                    .unwrap_or("its key"),
            });
        }
        let resp = target.send(&call).await?;
        let (parts, mut body) = resp.into_parts();
        if !parts.status.is_success() {
            let bytes = collect_upstream(body).await?;
            return Ok(Err(Response::from_parts(parts, bytes)));
        }
        if !stream {
            let bytes = collect_upstream(body).await?;
            if !json_as_declared(&parts.headers, &bytes) {
                return Err(ApiError::UpstreamInvalid(
                    "the answer says it is JSON but is not".into(),
                ));
            }
            return Ok(Ok(Answer::Full(parts, bytes)));
        }
        // Wait for the first data frame, so that an upstream failing before it still gets a
        // retry, a fallback or a proper error status instead of a broken stream.
        loop {
            match body.frame().await {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) if !data.is_empty() => {
                        return Ok(Ok(Answer::Stream {
                            parts,
                            first: data,
                            rest: body,
                        }))
                    }
                    Ok(_) | Err(_) => {}
                },
                Some(Err(e)) => return Err(ApiError::UpstreamUnreachable(e.to_string())),
                None => {
                    return Err(ApiError::UpstreamInvalid(
                        "the stream ended before its first chunk".into(),
                    ))
                }
            }
        }
    })
    .await
    .unwrap_or(Err(ApiError::UpstreamTimeout(limit)));
    // A failure after the upload began to flow ends the request: it cannot be sent again.
    let spent = call.upload.is_some_and(|u| u.spent());
    match answer {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(resp)) => Err(Failure {
            kind: FailureKind::from_response(resp.status(), resp.body()),
            retry_after: routing::retry_after(resp.headers()),
            scoped: endpoint_scoped(call.endpoint, resp.status()),
            error: Failed::Upstream(resp),
            terminal: spent,
        }),
        Err(e) => Err(Failure {
            kind: failure_kind(&e),
            retry_after: None,
            // sluice declining an endpoint or provider it does not serve here says nothing
            // of the deployment's health.
            scoped: matches!(
                e,
                ApiError::ProviderNotSupported { .. } | ApiError::EndpointNotSupported { .. }
            ),
            error: Failed::Gateway(e),
            terminal: spent,
        }),
    }
}

/// A 404 for an endpoint other than a deployment's main ones (`count_tokens`, moderations,
/// audio, …) says the upstream does not serve that endpoint, nothing about its health: chat and
/// Messages calls keep going to it.
fn endpoint_scoped(endpoint: Endpoint, status: StatusCode) -> bool {
    status == StatusCode::NOT_FOUND
        && !matches!(
            endpoint,
            Endpoint::ChatCompletions
                | Endpoint::Messages
                | Endpoint::Responses
                | Endpoint::Embeddings
        )
}

/// How the router should treat one of sluice's own errors from an attempt.
pub(crate) fn failure_kind(e: &ApiError) -> FailureKind {
    match e {
        ApiError::UpstreamTimeout(_) | ApiError::UpstreamIdle(_) => FailureKind::Timeout,
        ApiError::UpstreamUnreachable(_) => FailureKind::Connection,
        ApiError::UpstreamInvalid(_) => FailureKind::Server,
        // Another deployment of the group (or a fallback) may be one sluice can call.
        ApiError::ProviderNotSupported { .. } | ApiError::EndpointNotSupported { .. } => {
            FailureKind::NotFound
        }
        // Everything else is this request's own, or sluice's: another attempt would meet the
        // same. Listed one by one, so that a new variant is a decision, not a default.
        ApiError::InvalidJson(_)
        | ApiError::MissingParam(_)
        | ApiError::InvalidParam { .. }
        | ApiError::Unauthorized(_)
        | ApiError::ModelNotFound(_)
        | ApiError::RouteNotFound { .. }
        | ApiError::MethodNotAllowed(_)
        | ApiError::BodyTooLarge { .. }
        | ApiError::BodyTimeout(_)
        | ApiError::UriTooLong { .. }
        | ApiError::TooDeep { .. }
        | ApiError::Overloaded { .. }
        | ApiError::BodyRead(_)
        | ApiError::StreamNotSupported
        | ApiError::UnsupportedParam { .. }
        | ApiError::NoDeployment(_)
        | ApiError::Internal(_)
        | ApiError::KeyRefused(_)
        | ApiError::ModelNotAllowed { .. }
        | ApiError::EndUserBlocked
        | ApiError::JwtRefused(_)
        | ApiError::JwtUnavailable(_)
        | ApiError::AddressNotAllowed(_)
        | ApiError::Limited(_)
        | ApiError::UnknownParam(_)
        | ApiError::NotFound { .. }
        | ApiError::Conflict(_)
        | ApiError::StoreUnavailable
        | ApiError::CacheUnavailable(_)
        | ApiError::GuardrailBlocked { .. }
        | ApiError::ToolNotAllowed { .. }
        | ApiError::McpNotAllowed(_)
        | ApiError::NotPermitted(_)
        | ApiError::McpToolLoop(_)
        | ApiError::GuardrailUnavailable { .. }
        | ApiError::UnknownGuardrail(_)
        | ApiError::InvalidDeployment(_)
        | ApiError::PassThroughUnavailable { .. } => FailureKind::BadRequest,
        // Nothing left this gateway, as when a connection fails: try the group's others (a
        // keyless deployment beside keyed ones must not fail a request), and count it against
        // the deployment so that it is cooled down. The client still gets the 401 naming the
        // key to set when no deployment could answer.
        ApiError::DeploymentKeyMissing { .. } => FailureKind::Connection,
    }
}
