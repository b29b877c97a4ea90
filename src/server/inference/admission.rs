//! Phase 6 of an inference request: the model group it names (through the caller's own
//! aliases), its tags, admission against every limit and budget that holds it; 6½ the cache.

use std::sync::Arc;

use bytes::Bytes;

use sluice_core::cache_control::CacheControl;
use sluice_core::endpoint::Endpoint;
use sluice_core::error::ApiError;
use sluice_core::limits::Nanos;
use sluice_core::record::RequestRecord;
use sluice_routing as routing;
use sluice_translate::envelope::Envelope;

use super::inquiry::Inquiry;
use super::read::Read;
use super::{Cx, Flow};
use crate::auth::{Alias, Caller, Wanted};
use crate::cache::embeddings::{Batch, BatchLookup};
use crate::server::steps::Ask;

/// What a request is admitted for: the group it is served from, the name access is judged
/// on, its tags, what it may cost, its cache policy.
pub(super) struct Resolution<'a> {
    pub resolved: routing::Resolved<'a>,
    /// The group's name (a key's own alias grants nothing: access is judged on the group),
    /// else the name asked for.
    by_group: bool,
    /// The request's tags, its key's and team's.
    pub tags: Option<Arc<[Arc<str>]>>,
    estimate: Nanos,
    /// The key's and its team's `metadata.cache` over the request's own controls.
    pub policy: Option<CacheControl>,
}

impl<'a> Resolution<'a> {
    /// What `steps::admit` is asked: the model as access rules read it, the end user the body
    /// names, the estimate, the tags.
    pub(super) fn ask<'r>(&'r self, envelope: &'r Envelope<'_>) -> Ask<'r> {
        let name: &str = match self.by_group {
            true => &self.resolved.group.name,
            false => &envelope.model,
        };
        Ask {
            wanted: Wanted::of(name, self.resolved.group),
            end_user: envelope.user.as_deref(),
            estimate: self.estimate,
            tags: self.tags.as_deref(),
            price: None,
        }
    }
}

/// Phase 6, before admission (`steps::admit`, which the caller awaits): the caller's own
/// aliases (a key's `aliases`, its team's `model_aliases`) name a group before the config's
/// names do; access is judged on the name asked for and the group, except for the key's own
/// alias, which grants nothing (`auth::Alias`). Then the request's tags and what it may cost.
pub(super) fn resolve<'a>(
    cx: Cx<'a>,
    caller: &Caller,
    read: &Read,
    body: &Bytes,
    asked: &'a Inquiry<'_>,
    record: &mut RequestRecord,
) -> Result<Resolution<'a>, ApiError> {
    let (state, snap) = (cx.state, cx.snap);
    let directory = state.gate().directory();
    let envelope = &asked.envelope;
    // An alias names a model group (`model_name`, or a `model_group_alias`), so the group is
    // found by name and no copy of the alias outlives this statement.
    let (resolved, by_group) = match caller.alias(directory, &envelope.model) {
        Some(alias) => (
            snap.router
                .models
                .named(alias.group())
                .map(routing::Resolved::whole),
            matches!(alias, Alias::Key(_)),
        ),
        None => (snap.router.models.resolve(&envelope.model), false),
    };
    let resolved = resolved
        .ok_or_else(|| ApiError::ModelNotFound(envelope.model.chars().take(256).collect()))?;
    record.model = Some(resolved.group.name.clone());
    record.requested_model = record.model.clone();
    // Tags hold the request to their budgets and limits, route among a group's deployments
    // when `enable_tag_filtering` is on, and go to the spend log.
    let key = match caller {
        Caller::Key(k) => Some(&**k),
        Caller::Open | Caller::Master => None,
    };
    let tags = crate::server::tags::gather(
        envelope.routing.tags.as_deref(),
        &read.parts.headers,
        key,
        directory,
    );
    let estimate = match caller {
        Caller::Open | Caller::Master if tags.is_none() => 0,
        _ => crate::spend::estimate(resolved.group, body.len(), envelope.max_tokens),
    };
    let policy = snap.features.cache.as_ref().and_then(|c| {
        caller.cache_policy(directory, envelope.routing.cache.as_deref(), c.namespace())
    });
    Ok(Resolution {
        resolved,
        by_group,
        tags,
        estimate,
        policy,
    })
}

/// What the cache left to do: publish and store the answer, put an embeddings batch back
/// together, send fewer inputs than the client did.
#[derive(Default)]
pub(super) struct Cached {
    /// The answer to publish to the identical requests waiting, and to store.
    pub pending: Option<crate::cache::Pending>,
    /// An embeddings batch answered partly from the store.
    pub batch: Option<Box<Batch>>,
    /// The batch's inputs the store lacked, as a body of their own.
    pub fewer_inputs: Option<Bytes>,
}

/// Phase 6½: the cache: a stored answer, or an identical request's in flight; an embeddings
/// batch input by input. Asked only of a cacheable request (not one whose answer guardrails
/// check, which is neither served from the cache nor stored in it unchecked, nor an MCP tool
/// loop's rounds).
pub(super) async fn cache(
    cx: Cx<'_>,
    read: &Read,
    body: &Bytes,
    asked: &Inquiry<'_>,
    resolution: &Resolution<'_>,
    record: &mut RequestRecord,
) -> Result<Flow<Cached>, ApiError> {
    let mut out = Cached::default();
    let endpoint = cx.endpoint;
    let envelope = &asked.envelope;
    let control = resolution
        .policy
        .as_ref()
        .or(envelope.routing.cache.as_deref());
    let Some(cache) = cx
        .snap
        .features
        .cache
        .as_ref()
        .filter(|c| c.applies(endpoint, control))
    else {
        return Ok(Flow::Next(out));
    };
    let group = &resolution.resolved.group.name;
    let headers = &read.parts.headers;
    if endpoint == Endpoint::Embeddings {
        let asked = crate::cache::controls(control, headers);
        match Box::pin(crate::cache::embeddings::lookup(
            cache, group, body, asked, record,
        ))
        .await
        {
            BatchLookup::Answered(resp) => return Ok(Flow::Answered(resp)),
            BatchLookup::Call { body: fewer, batch } => {
                record.saved = Some(batch.saved).filter(|s| *s > 0);
                out.batch = Some(Box::new(batch));
                out.fewer_inputs = fewer;
                // A batch is stored input by input, not as one answer.
                return Ok(Flow::Next(out));
            }
            BatchLookup::NotBatch => {}
        }
    }
    let shape = if !asked.stream {
        sluice_cache::Shape::Whole
    } else {
        // Only Chat Completions and Completions leave usage out of a stream unless asked.
        let optional = matches!(endpoint, Endpoint::ChatCompletions | Endpoint::Completions);
        sluice_cache::Shape::Stream {
            usage: envelope.client_wants_usage || !optional,
        }
    };
    let lookup = crate::cache::lookup(
        cache,
        &cx.snap.router,
        endpoint,
        group,
        body,
        shape,
        control,
        headers,
        record,
    );
    match Box::pin(lookup).await {
        crate::cache::Lookup::Answered(resp) => Ok(Flow::Answered(resp)),
        crate::cache::Lookup::Call(pending) => {
            out.pending = pending;
            Ok(Flow::Next(out))
        }
    }
}
