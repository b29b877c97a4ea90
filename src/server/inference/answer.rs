//! Phase 8 of an inference request: the answer, whole or as a stream, settled (usage, cost,
//! spend headers), with the headers that tell the client how routing went.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_TYPE};
use http::{HeaderMap, Response};

use sluice_core::error::ApiError;
use sluice_core::record::RequestRecord;
use sluice_core::usage::Usage;
use sluice_providers::passthrough::usage;
use sluice_routing::{self as routing, OnDisconnect, Requested, Served};

use super::admission::Cached;
use super::dispatch::forced_usage;
use super::inquiry::Inquiry;
use super::read::Read;
use super::Cx;
use crate::auth::KeyEntry;
use crate::guardrails::Guard;
use crate::http::{
    count_value, duration_value, error_response, refused_header, stream_response, upstream_answer,
    ResponseBody, X_FALLBACKS, X_HEDGES, X_MODEL_ID, X_OVERHEAD, X_RETRIES,
};
use crate::server::attempt::{Answer, Failed};
use crate::server::relay::StreamRelay;
use crate::server::{litellm_headers, steps, Snapshot};
use crate::spend::Charges;

/// When the request left for the upstream and when its answer (or first chunk) arrived.
#[derive(Debug, Clone, Copy)]
pub(super) struct Timing {
    /// sluice's own time before the call.
    pub before_send: Duration,
    pub arrived: Instant,
}

impl Timing {
    /// sluice's own time: before the call, and since the answer arrived.
    fn overhead(self) -> Duration {
        self.before_send + self.arrived.elapsed()
    }
}

/// What the answer phase settles with.
pub(super) struct Settling<'a, 's> {
    pub read: &'a mut Read,
    pub asked: &'a Inquiry<'s>,
    pub key: Option<&'a KeyEntry>,
    pub charges: &'a mut Charges,
    pub resolved: routing::Resolved<'s>,
    pub cached: &'a mut Cached,
    pub guarded: &'a mut Option<Guard<'s>>,
    pub requested: &'a Requested<'a>,
    pub timing: Timing,
}

/// Phase 8: answer, and settle what the request used; then the routing headers.
pub(super) async fn answer(
    cx: Cx<'_>,
    mut s: Settling<'_, '_>,
    mut outcome: routing::Outcome<'_, Answer, Failed>,
    record: &mut RequestRecord,
) -> Result<Response<ResponseBody>, ApiError> {
    let attempts = (outcome.retries, outcome.fallbacks, outcome.hedges);
    record.retries = outcome.retries;
    record.fallbacks = outcome.fallbacks;
    record.hedges = outcome.hedges;
    record.attempts = std::mem::take(&mut outcome.attempts);
    if let Some(m) = outcome.last {
        record.deployment = Some(m.target.info.id.clone());
        record.provider = Some(m.target.provider.name());
    }
    // An upload the client broke off, or that passed the limit while relayed, is the client's
    // error, whatever the upstream made of the cut body.
    if let Some(e) = s.read.upload.as_ref().and_then(|u| u.client_error()) {
        if outcome.result.is_err() {
            return Err(e.into());
        }
    }
    let dialect = cx.endpoint.dialect();
    let mut resp = match outcome.result {
        Err(failure) => {
            record.failure = Some(failure.kind.name());
            match failure.error {
                Failed::Upstream(resp) => {
                    // The requests waiting on this one get the provider's refusal too.
                    if let Some(c) = s.cached.pending.take() {
                        let ct = resp.headers().get(CONTENT_TYPE);
                        c.whole(resp.status(), ct, resp.body(), None, None);
                    }
                    upstream_answer(resp, record)
                }
                Failed::Gateway(e) => {
                    record.fail_with(&e);
                    error_response(&e, dialect)
                }
            }
        }
        Ok(Served {
            answer,
            group,
            member,
            guard,
        }) => {
            // Awaited here rather than in a function of its own: one future fewer to move the
            // answer into (its head is a few hundred bytes).
            charge_served(cx, &mut s, group, member, guard, record);
            let answered = match answer {
                Answer::Full(parts, bytes) => Ok(whole(cx, &mut s, parts, bytes, record).await),
                Answer::Stream { parts, first, rest } => {
                    let idle = member.target.timeouts.idle;
                    stream(cx, &mut s, parts, (first, rest), idle, record)
                }
            };
            match answered {
                Ok(mut resp) => {
                    resp.headers_mut()
                        .insert(X_MODEL_ID.clone(), member.target.id_header.clone());
                    resp
                }
                // A `during_call` refusal that arrived after the stream's head: the stream
                // is dropped unsent, and the refusal is the answer.
                Err(refusal) => {
                    record.status = refusal.status().as_u16();
                    record.fail_with(&refusal);
                    return Ok(error_response(&refusal, dialect));
                }
            }
        }
    };
    let h = resp.headers_mut();
    if let Some(m) = outcome.last.filter(|_| !h.contains_key(&X_MODEL_ID)) {
        h.insert(X_MODEL_ID.clone(), m.target.id_header.clone());
    }
    h.insert(X_RETRIES.clone(), count_value(attempts.0));
    h.insert(X_FALLBACKS.clone(), count_value(attempts.1));
    if attempts.2 > 0 {
        h.insert(X_HEDGES.clone(), count_value(attempts.2));
    }
    if let Some(refused) = &outcome.refused {
        refused_header(refused, h);
    }
    steps::applied_header(s.guarded.as_ref(), h);
    h.insert(X_OVERHEAD.clone(), duration_value(record.overhead));
    if cx.snap.litellm_headers {
        litellm_facts(
            h,
            cx.snap,
            s.requested,
            &s.asked.envelope.routing,
            outcome.last,
        );
    }
    Ok(resp)
}

/// A served answer's charges: the deployment's in-flight slot, and its price (a wildcard
/// group's own, else the deployment's) for the units asked.
fn charge_served(
    cx: Cx<'_>,
    s: &mut Settling<'_, '_>,
    group: &routing::Group,
    member: &routing::Member,
    guard: routing::InFlight,
    record: &mut RequestRecord,
) {
    record.model = Some(group.name.clone());
    let units = s.asked.requested_units;
    s.charges.deployment = Some(guard);
    s.charges.price = Some(match wildcard_price(cx.snap, s.resolved, group, member) {
        Some((price, images)) => images.price(price, &units),
        None => member
            .target
            .image_prices
            .price(member.target.price, &units),
    });
}

/// A whole answer: its usage and cost, published to the cache, checked by the `post_call`
/// guardrails (a refused answer is still charged), kept when a Responses answer is kept.
async fn whole(
    cx: Cx<'_>,
    s: &mut Settling<'_, '_>,
    parts: http::response::Parts,
    bytes: Bytes,
    record: &mut RequestRecord,
) -> Response<ResponseBody> {
    let endpoint = cx.endpoint;
    record.usage = usage::of_answer(endpoint, &bytes, s.asked.requested_units);
    // The keeper of a Responses answer to keep (phase 4¾), from the request. A kept answer
    // names what it continued (the request reached the provider without it), and is kept as
    // the client gets it.
    let keeper = s
        .read
        .parts
        .extensions
        .remove::<Box<crate::responses::Keeper>>();
    let bytes = match keeper.filter(|_| parts.status.is_success()) {
        Some(k) => {
            let bytes = k.echo(bytes);
            k.keep_whole(bytes.clone());
            bytes
        }
        None => bytes,
    };
    if let Some(c) = record.content.as_mut() {
        c.response = Some(bytes.clone());
    }
    let cost = s.charges.settle(record);
    let mut cache_headers = s.cached.pending.take().map(|c| {
        let mut h = HeaderMap::new();
        c.mark(&mut h);
        let ct = parts.headers.get(CONTENT_TYPE);
        c.whole(parts.status, ct, &bytes, record.usage, cost);
        h
    });
    // An embeddings batch sent with the inputs the cache lacked: stored input by input, and
    // answered whole in the client's order.
    let bytes = match s.cached.batch.take() {
        Some(b) => {
            let mut h = HeaderMap::new();
            b.mark(&mut h);
            cache_headers = Some(h);
            b.finish(parts.status, bytes, cost)
        }
        None => bytes,
    };
    let checked = match s.guarded.as_mut() {
        Some(g) => Box::pin(g.after(endpoint, parts.status, bytes, record)).await,
        None => Ok(bytes),
    };
    let mut resp = match checked {
        Ok(bytes) => upstream_answer(Response::from_parts(parts, bytes), record),
        Err(e) => {
            record.fail_with(&e);
            record.status = e.status().as_u16();
            error_response(&e, endpoint.dialect())
        }
    };
    if let Some(h) = cache_headers {
        resp.headers_mut().extend(h);
    }
    steps::spend_headers(s.charges, s.key, cost, resp.headers_mut());
    record.overhead = s.timing.overhead();
    resp
}

/// A stream: relayed as it arrives (settled when it ends, by the relay, which owns the record
/// from here), published to the cache's waiting requests, checked by `post_call` guardrails
/// as it passes. `Err`: a `during_call` check blocked, and the stream is dropped unsent.
fn stream(
    cx: Cx<'_>,
    s: &mut Settling<'_, '_>,
    parts: http::response::Parts,
    (first, rest): (Bytes, sluice_providers::UpstreamBody),
    idle: Option<Duration>,
    record: &mut RequestRecord,
) -> Result<Response<ResponseBody>, ApiError> {
    let endpoint = cx.endpoint;
    if let Some(e) = s.guarded.as_mut().and_then(Guard::take_refusal) {
        drop((first, rest));
        return Err(e);
    }
    let mut spend = HeaderMap::new();
    steps::spend_headers(s.charges, s.key, None, &mut spend);
    record.ttfb = Some(s.timing.arrived - record.start);
    record.status = parts.status.as_u16();
    record.overhead = s.timing.overhead();
    if endpoint.answers_binary() {
        record.usage = Some(Usage::requested(s.asked.requested_units));
    }
    let events = parts
        .headers
        .get(CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    let keeper = s
        .read
        .parts
        .extensions
        .remove::<Box<crate::responses::Keeper>>();
    let echo = keeper.as_ref().and_then(|k| k.stream_echo());
    let relay = StreamRelay::new(
        first,
        rest,
        forced_usage(endpoint, &s.asked.envelope),
        endpoint,
        record.clone(),
        cx.state.recorder().clone(),
    )
    .idle_timeout(idle)
    .charges(std::mem::take(s.charges))
    .finish_on_disconnect(cx.snap.router.policy.on_disconnect == OnDisconnect::Finish)
    .keep(keeper)
    .events(events || !endpoint.answers_binary());
    let body = match s.cached.pending.take() {
        Some(c) => {
            let ct = parts
                .headers
                .get(CONTENT_TYPE)
                .cloned()
                .unwrap_or(HeaderValue::from_static("text/event-stream"));
            c.mark(&mut spend);
            c.stream(parts.status, ct, relay)
        }
        None => match s
            .guarded
            .as_mut()
            .filter(|_| !endpoint.answers_binary())
            .and_then(Guard::on_stream)
        {
            // post_call guardrails check the stream as it passes, and the request's
            // placeholders are given back (an answer of audio bytes has no text to check).
            Some((list, restore)) => ResponseBody::relay(crate::guardrails::GuardedStream::new(
                relay, list, endpoint, restore,
            )),
            None => ResponseBody::relay(relay),
        },
    };
    // A Responses stream that continued a kept answer names it (`crate::responses`).
    let body = match echo {
        Some(e) => crate::http::Reshaped::body(body, *e),
        None => body,
    };
    let mut resp = stream_response(parts, body);
    resp.headers_mut().extend(spend);
    Ok(resp)
}

/// LiteLLM's facts without a sluice header of their own: the group, region, retries allowed
/// and timeout of the deployment that answered (or the last one tried).
fn litellm_facts(
    h: &mut HeaderMap,
    snap: &Snapshot,
    requested: &Requested<'_>,
    routing: &sluice_translate::envelope::RequestRouting,
    last: Option<&routing::Member>,
) {
    // Room made once for these and the mirrored ones, rather than a step at a time.
    h.reserve(16);
    if let Some(g) = last.and_then(|m| m.target.group_header.as_ref()) {
        h.insert(litellm_headers::MODEL_GROUP.clone(), g.clone());
    }
    if let Some(r) = last.and_then(|m| m.target.region_header.as_ref()) {
        h.insert(litellm_headers::MODEL_REGION.clone(), r.clone());
    }
    // The request's own, else the serving deployment's, else the router's (as dispatch does).
    let retries = requested
        .num_retries
        .or(last.and_then(|m| m.target.num_retries))
        .unwrap_or(snap.router.policy.num_retries);
    h.insert(
        litellm_headers::MAX_RETRIES.clone(),
        litellm_headers::count(retries),
    );
    let timeout = match (routing.timeout, last) {
        (Some(t), _) => Some(sluice_providers::seconds_header(t)),
        (None, Some(m)) => Some(m.target.timeout_header.clone()),
        (None, None) => None,
    };
    if let Some(t) = timeout {
        h.insert(litellm_headers::TIMEOUT.clone(), t);
    }
}

/// The price of the model a wildcard deployment served (`openai/*` asked for `dall-e-3`),
/// when the deployment has none of its own: found in the price table by the model asked for,
/// so that its answers are not free.
fn wildcard_price(
    snap: &Snapshot,
    resolved: routing::Resolved<'_>,
    group: &routing::Group,
    member: &routing::Member,
) -> Option<(sluice_core::price::Price, sluice_core::price::ImagePrices)> {
    // A wildcard's capture first: most requests have none and stop here.
    let capture = resolved
        .capture
        .filter(|_| std::ptr::eq(resolved.group, group))?;
    let target = &member.target;
    if target.price != sluice_core::price::Price::default() || !target.image_prices.is_empty() {
        return None;
    }
    let model = target.info.upstream_model.replacen('*', capture, 1);
    snap.pass_through
        .prices()
        .for_model(target.info.provider, &model)
}
