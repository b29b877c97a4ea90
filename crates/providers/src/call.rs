//! The request as the pipeline hands it to a provider: the client's untouched body and its
//! envelope, what the routing decided (a wildcard's capture, usage to ask for), and the
//! attempt's trace context.

use std::sync::Arc;

use bytes::Bytes;
use http::header::HeaderValue;
use http::HeaderMap;
use sluice_core::endpoint::Endpoint;
use sluice_core::trace_context::{TRACEPARENT, TRACESTATE};
use sluice_net::Upload;
use sluice_translate::envelope::Envelope;

/// One call to a deployment.
#[derive(Debug)]
pub struct Call<'a> {
    /// Which operation.
    pub endpoint: Endpoint,
    /// The client's headers (a few pass through to the provider that defines them; the
    /// in-process mock reads its per-request behaviour from them).
    pub client_headers: &'a HeaderMap,
    /// The client's body, untouched; for an upload relayed as it arrives, its head (the form
    /// up to the first file's first bytes), the rest in `upload`.
    pub body: &'a Bytes,
    /// The rest of an upload, sent after `body` by the first attempt that sends anything.
    pub upload: Option<&'a Arc<Upload>>,
    /// Its envelope.
    pub envelope: &'a Envelope<'a>,
    /// What a wildcard group's `*` matched in the requested model.
    pub capture: Option<&'a str>,
    /// Ask the upstream for stream usage the client did not request.
    pub force_usage: bool,
    /// W3C trace context for this attempt (`traceparent`, `tracestate`), when tracing is on.
    pub trace: Option<(HeaderValue, Option<&'a HeaderValue>)>,
}

impl<'a> Call<'a> {
    /// A whole JSON body sluice sends on its own behalf (a guardrail's check, a round of the
    /// tool loop, a health check's probe): no upload, no forced usage, no trace.
    pub fn own(
        endpoint: Endpoint,
        client_headers: &'a HeaderMap,
        body: &'a Bytes,
        envelope: &'a Envelope<'a>,
        capture: Option<&'a str>,
    ) -> Self {
        Self {
            endpoint,
            client_headers,
            body,
            upload: None,
            envelope,
            capture,
            force_usage: false,
            trace: None,
        }
    }

    /// Add the attempt's trace context to an upstream request's headers.
    pub fn trace_headers(&self, headers: &mut HeaderMap) {
        if let Some((parent, state)) = &self.trace {
            headers.insert(TRACEPARENT.clone(), parent.clone());
            if let Some(s) = state {
                headers.insert(TRACESTATE.clone(), (*s).clone());
            }
        }
    }
}
