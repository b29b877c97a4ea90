//! One upstream call: build the request for a deployment (spliced body, prebuilt URL and
//! headers) and send it, mapping transport failures to gateway errors. The answer comes back
//! in the client's format: same-dialect calls pass through, others go through `translate`.

use bytes::{Bytes, BytesMut};
use http::header::{HeaderName, HeaderValue};
use http::{HeaderMap, Request, Response};

use super::body::{SegmentsBody, UpstreamBody};
use super::envelope::{splice, Envelope};
use super::kind::Wire;
use super::target::{encode_model, DeploymentTarget, HttpTarget, TargetKind};
use crate::mock::MockSettings;
use sluice_core::endpoint::Endpoint;
use sluice_core::error::ApiError;
use sluice_core::trace_context::{TRACEPARENT, TRACESTATE};

/// Anthropic request headers a pass-through call takes from the client (API version and beta
/// features, which Claude Code relies on).
static ANTHROPIC_CLIENT_HEADERS: [HeaderName; 2] = [
    HeaderName::from_static("anthropic-version"),
    HeaderName::from_static("anthropic-beta"),
];

/// The request as the pipeline hands it to a provider.
#[derive(Debug)]
pub struct Call<'a> {
    /// Which operation.
    pub endpoint: Endpoint,
    /// The client's headers (read by the in-process mock for per-request behaviour).
    pub client_headers: &'a HeaderMap,
    /// The client's body, untouched.
    pub body: &'a Bytes,
    /// Its envelope.
    pub envelope: &'a Envelope<'a>,
    /// What a wildcard group's `*` matched in the requested model.
    pub capture: Option<&'a str>,
    /// Ask the upstream for stream usage the client did not request.
    pub force_usage: bool,
    /// W3C trace context for this attempt (`traceparent`, `tracestate`), when tracing is on.
    pub trace: Option<(HeaderValue, Option<&'a HeaderValue>)>,
}

impl Call<'_> {
    /// Add the attempt's trace context to an upstream request's headers.
    pub(crate) fn trace_headers(&self, headers: &mut HeaderMap) {
        if let Some((parent, state)) = &self.trace {
            headers.insert(TRACEPARENT.clone(), parent.clone());
            if let Some(s) = state {
                headers.insert(TRACESTATE.clone(), (*s).clone());
            }
        }
    }
}

/// Send the call to the deployment; resolves when the upstream's response head arrives (for
/// a translated non-stream call, when the whole answer is translated).
pub async fn send(
    target: &DeploymentTarget,
    call: &Call<'_>,
) -> Result<Response<UpstreamBody>, ApiError> {
    match &target.kind {
        TargetKind::Http(http) if http.wire.dialect() == Some(call.endpoint.dialect()) => {
            send_http(http, call).await
        }
        TargetKind::Http(http) => {
            crate::translate::exchange::send(target.provider.name(), http, call).await
        }
        // `mock_wire` makes the in-process mock play a native upstream for chat calls.
        TargetKind::Mock(settings) => match settings.wire.filter(|_| call.endpoint.is_chat()) {
            Some(wire) => {
                crate::translate::exchange::send_mock(target.provider.name(), wire, settings, call)
                    .await
            }
            None => mock(settings, call).await,
        },
        TargetKind::Unsupported => Err(ApiError::ProviderNotSupported {
            provider: target.provider.name(),
            model: target.info.model_name.to_string(),
        }),
    }
}

/// The in-process mock, answering in the client's own format.
async fn mock(
    settings: &MockSettings,
    call: &Call<'_>,
) -> Result<Response<UpstreamBody>, ApiError> {
    let body = contiguous(splice(call.body, call.envelope, None, call.force_usage)?);
    let resp = crate::mock::respond(call.endpoint, call.client_headers, &body, settings).await;
    Ok(resp.map(UpstreamBody::Mock))
}

/// The upstream model name for this call, encoded as a JSON string.
pub(crate) fn model_json(t: &HttpTarget, call: &Call<'_>) -> Bytes {
    match (&t.wildcard, call.capture) {
        (Some(pattern), Some(capture)) => encode_model(&pattern.replacen('*', capture, 1)),
        (Some(_), None) => encode_model(&call.envelope.model),
        (None, _) => t.model_json.clone(),
    }
}

async fn send_http(t: &HttpTarget, call: &Call<'_>) -> Result<Response<UpstreamBody>, ApiError> {
    let model_json = model_json(t, call);
    let unchanged = call.body.get(call.envelope.model_range.clone()) == Some(&model_json[..]);
    let segments = splice(
        call.body,
        call.envelope,
        (!unchanged).then_some(&model_json),
        call.force_usage,
    )?;
    let mut req = Request::post(t.url(call.endpoint).clone())
        .body(SegmentsBody::new(segments))
        .map_err(|e| ApiError::UpstreamInvalid(e.to_string()))?;
    *req.headers_mut() = t.headers.next().clone();
    call.trace_headers(req.headers_mut());
    if t.wire == Wire::Anthropic {
        for name in &ANTHROPIC_CLIENT_HEADERS {
            if let Some(v) = call.client_headers.get(name) {
                req.headers_mut().insert(name.clone(), v.clone());
            }
        }
    }
    let resp = t.client.request(req).await.map_err(client_error)?;
    Ok(resp.map(UpstreamBody::Http))
}

/// A transport failure as the client sees it: the chain of causes, no request details.
pub(crate) fn client_error(e: hyper_util::client::legacy::Error) -> ApiError {
    use std::error::Error as _;
    let mut msg = if e.is_connect() {
        "connection failed".to_owned()
    } else {
        "request failed".to_owned()
    };
    let mut source = e.source();
    while let Some(s) = source {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        source = s.source();
    }
    ApiError::UpstreamUnreachable(msg)
}

fn contiguous(segments: Vec<Bytes>) -> Bytes {
    match segments.len() {
        0 => Bytes::new(),
        1 => segments.into_iter().next().unwrap_or_default(),
        _ => {
            let mut out = BytesMut::with_capacity(segments.iter().map(Bytes::len).sum());
            for s in &segments {
                out.extend_from_slice(s);
            }
            out.freeze()
        }
    }
}
