//! Phase 7 of an inference request: select a deployment and call it. `routing::dispatch`
//! picks, retries, falls back and hedges; [`attempt`] makes each call and classifies its
//! failure; a Responses request with `mcp` tools runs its tool loop's rounds instead. The
//! `during_call` guardrails run beside the call (`steps::beside_checks`).

use bytes::Bytes;

use sluice_core::endpoint::Endpoint;
use sluice_core::error::ApiError;
use sluice_core::record::RequestRecord;
use sluice_providers::Call as ProviderCall;
use sluice_routing::{self as routing, Attempt, Failure, Requested};
use sluice_translate::envelope::Envelope;

use super::inquiry::Inquiry;
use super::read::Read;
use super::Cx;
use crate::guardrails::Guard;
use crate::mcp::responses::McpLoop;
use crate::server::attempt::{attempt, failure_kind, Answer, Failed};
use crate::server::steps;

/// What the call sends, and where from.
pub(super) struct Call<'a, 'o> {
    pub cx: Cx<'o>,
    pub read: &'a Read,
    pub asked: &'a Inquiry<'a>,
    pub resolved: routing::Resolved<'o>,
    pub requested: &'o Requested<'o>,
    /// What is sent: the client's body and envelope, or an embeddings batch's inputs the
    /// cache lacked (a body and envelope of their own).
    pub sent: (&'a Bytes, &'a Envelope<'a>),
}

/// Phase 7: the tool loop's rounds for a Responses request with `mcp` tools (one outcome, the
/// last round's, its answer the composed one), else dispatch over the group, beside the
/// `during_call` guardrails.
pub(super) async fn dispatch<'o>(
    call: Call<'_, 'o>,
    mcp_loop: Option<Box<McpLoop>>,
    guarded: Option<&mut Guard<'_>>,
    record: &mut RequestRecord,
) -> Result<routing::Outcome<'o, Answer, Failed>, ApiError> {
    let Cx {
        state,
        snap,
        endpoint,
    } = call.cx;
    if let Some(mut l) = mcp_loop {
        let rid = record.request_id.clone();
        l.trace.clone_from(&record.trace);
        return Box::pin(l.run(
            state,
            &snap.router,
            call.resolved,
            call.requested,
            &call.read.parts.headers,
            call.asked.envelope.routing.timeout,
            &rid,
        ))
        .await;
    }
    // Out of the record while the call runs beside the checks (which write the record).
    let trace = record.trace.take();
    let sender = Sender {
        cx: call.cx,
        call: &call,
        force_usage: forced_usage(endpoint, &call.asked.envelope),
        trace: trace.as_deref(),
    };
    let dispatched = || {
        routing::dispatch(&snap.router, call.resolved, call.requested, |a| {
            sender.attempt(a)
        })
    };
    let mut guarded = guarded;
    let during = guarded.as_deref_mut().and_then(Guard::take_during);
    let outcome = steps::beside_checks(during, dispatched, guarded, record).await;
    record.trace = trace;
    outcome
}

/// What every attempt of one request sends, held once (each attempt's future refers to it).
struct Sender<'c, 'a, 'o> {
    cx: Cx<'o>,
    call: &'c Call<'a, 'o>,
    force_usage: bool,
    trace: Option<&'c sluice_core::trace_context::TraceContext>,
}

impl<'o> Sender<'_, '_, 'o> {
    /// One attempt at the deployment the router chose, with the client's own upstream when
    /// the request names one (`client_side`).
    fn attempt(
        &self,
        a: Attempt<'o>,
    ) -> impl std::future::Future<Output = Result<Answer, Failure<Failed>>> + '_ {
        let call = self.call;
        let (body, envelope) = call.sent;
        let provider_call = ProviderCall {
            endpoint: self.cx.endpoint,
            client_headers: &call.read.parts.headers,
            body,
            upload: call.read.upload.as_ref(),
            envelope,
            capture: a.capture,
            force_usage: self.force_usage,
            trace: self
                .trace
                .map(|t| (t.traceparent_for(a.span_id), t.state.as_ref())),
        };
        let own = call
            .asked
            .client_target
            .as_ref()
            .map(|c| c.target(&a.member.target, self.cx.state.clients()));
        let (stream, timeout) = (call.asked.stream, call.asked.envelope.routing.timeout);
        async move {
            match own {
                None => attempt(&a.member.target, provider_call, stream, timeout).await,
                Some(Ok(target)) => attempt(&target, provider_call, stream, timeout).await,
                Some(Err(e)) => Err(Failure {
                    kind: failure_kind(&e),
                    retry_after: None,
                    error: Failed::Gateway(e),
                    terminal: true,
                    scoped: false,
                }),
            }
        }
    }
}

/// A stream's usage is asked of the upstream even when the client did not ask for it (Chat
/// Completions and Completions leave it out unless asked): the spend needs it; the relay takes
/// it out of what the client gets.
pub(super) fn forced_usage(endpoint: Endpoint, envelope: &Envelope) -> bool {
    envelope.stream
        && matches!(endpoint, Endpoint::ChatCompletions | Endpoint::Completions)
        && !envelope.client_wants_usage
}
