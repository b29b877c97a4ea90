//! One inference request (chat, completions, embeddings, Messages, Responses, images, audio,
//! …) as a short sequence of phases over what it has read so far. Each phase is a function of
//! its own module; this one decides their order (ARCHITECTURE.md draws it):
//!
//! 3–4. [`read`]: authenticate, read the body; 4¾ a Responses request's kept items
//! 4½. guardrails on the request text (`steps::guard`)
//! 5. [`inquiry`]: read the envelope and check what it asks; 5¾ its `mcp` tools
//! 6. [`admission`]: the model group, admission, 6½ the cache
//! 7. [`dispatch`]: select a deployment and call it (retries, fallbacks, hedges), beside
//!    the `during_call` guardrails
//! 8. [`answer`]: answer whole or as a stream, and settle

mod admission;
mod answer;
mod dispatch;
mod inquiry;
mod read;

use std::time::Instant;

use bytes::Bytes;
use http::{Request, Response};
use http_body::Body;

use sluice_core::endpoint::Endpoint;
use sluice_core::error::ApiError;
use sluice_core::record::RequestRecord;
use sluice_routing::{self as routing, MayUse, Requested};

use super::state::{AppState, Snapshot};
use super::steps::{self, Presented};
use sluice_translate::envelope::Envelope;

use crate::auth::Wanted;
use crate::http::ResponseBody;

pub(crate) use inquiry::PathNamed;

/// What every phase of one request reads: the gateway, its config of the moment, and the
/// endpoint asked.
#[derive(Clone, Copy)]
struct Cx<'s> {
    state: &'s AppState,
    snap: &'s Snapshot,
    endpoint: Endpoint,
}

/// A phase's result: go on with `T`, or the request is answered already.
enum Flow<T> {
    Next(T),
    Answered(Response<ResponseBody>),
}

/// Serve one inference request, its phases in order. Errors become the caller's
/// OpenAI-shaped (or Anthropic-, Google-shaped) answers.
pub(crate) async fn inference<B>(
    state: &AppState,
    snap: &Snapshot,
    endpoint: Endpoint,
    req: Request<B>,
    record: &mut RequestRecord,
) -> Result<Response<ResponseBody>, ApiError>
where
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: std::fmt::Display,
{
    record.endpoint = Some(endpoint);
    let cx = Cx {
        state,
        snap,
        endpoint,
    };
    let who = steps::authenticate(state, snap, Presented::by(&req)).await?;
    let (parts, body) = req.into_parts();
    let (mut body, upload) = read::body(cx, &parts.headers, body).await?;
    let mut read = read::Read { parts, upload };
    // The phases a request may not need are not entered at all (no future made and polled):
    // 4¾ only for the Responses API, 4½ only with guardrails, 6½ only with a cache.
    if endpoint == Endpoint::Responses {
        if let Some(queued) =
            read::responses_part(cx, &mut read, &mut body, &who.caller, record).await?
        {
            return Ok(queued);
        }
    }
    let mut guarded = match snap.features.guardrails.is_some() {
        true => match steps::guard(state, snap, endpoint, &who.caller, &mut body, record).await {
            Ok(g) => g,
            Err(refused) => return Ok(refused),
        },
        false => None,
    };
    let mut asked =
        match inquiry::inquire(cx, &mut read, &body, &who.caller, guarded.as_ref(), record)? {
            inquiry::Inquired::Next(a) => a,
            inquiry::Inquired::Several(envelope) => {
                return inquiry::several(cx, &read, &body, &envelope).await;
            }
        };
    // A body naming its own upstream or credentials: refused unless allowed (SSRF).
    if let Some(side) = asked.envelope.client_side.as_deref() {
        let target = crate::server::client_side::check(snap.client_side.as_ref(), side).await?;
        asked.client_target = Some(target);
    }
    let mcp_loop = asked.mcp_loop.take();
    let resolution = admission::resolve(cx, &who.caller, &read, &body, &asked, record)?;
    let ask = resolution.ask(&asked.envelope);
    let mut admitted = steps::admit(state, who.caller, ask, record, who.wall).await?;
    let cacheable = mcp_loop.is_none() && !guarded.as_ref().is_some_and(|g| g.checks_answer());
    let mut cached = match snap.features.cache.is_some() && cacheable {
        true => match admission::cache(cx, &read, &body, &asked, &resolution, record).await? {
            Flow::Next(c) => c,
            Flow::Answered(resp) => return Ok(resp),
        },
        false => admission::Cached::default(),
    };
    // Each fallback is held to the same access rule as the group the request named.
    let may_use = |name: &str, group: &routing::Group| {
        admitted.key.as_deref().is_none_or(|k| {
            state
                .gate()
                .directory()
                .may_use(k, &Wanted::of(name, group))
                .is_ok()
        })
    };
    // An end user held to one region (`allowed_model_region`) is served only there.
    let region = asked
        .envelope
        .user
        .as_deref()
        .and_then(|u| state.gate().directory().end_user_region(u));
    let tag_names: Vec<&str> = resolution
        .tags
        .iter()
        .flat_map(|t| t.iter())
        .map(|t| &**t)
        .collect();
    record.tags.clone_from(&resolution.tags);
    let routing_asked = &asked.envelope.routing;
    let requested = Requested {
        num_retries: routing_asked.num_retries,
        fallbacks: routing_asked.fallbacks.as_deref(),
        one_shot: read.upload.is_some(),
        may_use: admitted.key.is_some().then_some(MayUse(&may_use)),
        mock: routing_asked.mock,
        region: region.as_deref(),
        tags: &tag_names,
    };
    let sent_at = Instant::now();
    let before_send = sent_at - record.start;
    // A batch with fewer inputs is a body of its own, and so an envelope of its own (the
    // model's place in it, for the upstream's name).
    // Boxed: rare, and an envelope is large for every request's future to hold.
    let fewer = match cached.fewer_inputs.as_ref() {
        Some(b) => Some(Box::new(Envelope::parse(b)?)),
        None => None,
    };
    let sent = match (&cached.fewer_inputs, &fewer) {
        (Some(b), Some(e)) => (b, &**e),
        _ => (&body, &asked.envelope),
    };
    let call = dispatch::Call {
        cx,
        read: &read,
        asked: &asked,
        resolved: resolution.resolved,
        requested: &requested,
        sent,
    };
    let outcome = dispatch::dispatch(call, mcp_loop, guarded.as_mut(), record).await?;
    let timing = answer::Timing {
        before_send,
        arrived: Instant::now(),
    };
    answer::answer(
        cx,
        answer::Settling {
            read: &mut read,
            asked: &asked,
            key: admitted.key.as_deref(),
            charges: &mut admitted.charges,
            resolved: resolution.resolved,
            cached: &mut cached,
            guarded: &mut guarded,
            requested: &requested,
            timing,
        },
        outcome,
        record,
    )
    .await
}
