//! The steps every route that calls a provider takes, decided here once: the inference
//! pipeline, the pass-through routes (provider, custom, search), files, realtime and MCP call
//! these rather than writing them again, so the order of ARCHITECTURE.md holds on every route.
//!
//! - step 3, [`authenticate`]; step 4½, [`guard`] the request's text; step 6, [`admit`];
//! - step 7, the call, [`beside_checks`] of `during_call` guardrails;
//! - step 8, [`spend_headers`] on the answer (the relays settle a stream when it ends);
//! - step 9, the record, written by the pipeline's `handle` (or by the relay that owns it).

use std::future::Future;
use std::sync::Arc;

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue};
use http::{Extensions, HeaderMap, Response};

use sluice_core::endpoint::Endpoint;
use sluice_core::error::ApiError;
use sluice_core::limits::{self, Nanos, Permit};
use sluice_core::price::Price;
use sluice_core::record::RequestRecord;

use super::state::{AppState, Snapshot};
use crate::auth::addresses::client_of;
use crate::auth::{Caller, KeyEntry, Wanted};
use crate::fleet::Verdict;
use crate::guardrails::{During, Guard};
use crate::http::{
    usd_value, ResponseBody, X_KEY_SPEND, X_LIMIT_REQUESTS, X_LIMIT_TOKENS, X_REMAINING_REQUESTS,
    X_REMAINING_TOKENS, X_RESPONSE_COST,
};
use crate::spend::{Admission, Charges, FleetShare};

/// Who called, and the wall-clock millisecond they were judged at (limits and key expiry
/// are read at that instant for the rest of the request).
pub(crate) struct Authenticated {
    /// The caller: the master key, a virtual key, or nobody on an open gateway.
    pub caller: Caller,
    /// [`limits::wall_ms`] when it was authenticated.
    pub wall: u64,
}

/// What a request presents to be judged by: the headers the key is read from (the request's,
/// or the one header a route builds from where its clients send the key), the client's
/// address (in the request's extensions) and the path.
#[derive(Clone, Copy)]
pub(crate) struct Presented<'a> {
    key: &'a HeaderMap,
    extensions: &'a Extensions,
    path: &'a str,
}

impl<'a> Presented<'a> {
    /// A request as it came.
    pub(crate) fn by<B>(req: &'a http::Request<B>) -> Self {
        Self {
            key: req.headers(),
            extensions: req.extensions(),
            path: req.uri().path(),
        }
    }

    /// A request's head.
    pub(crate) fn by_parts(parts: &'a http::request::Parts) -> Self {
        Self {
            key: &parts.headers,
            extensions: &parts.extensions,
            path: parts.uri.path(),
        }
    }

    /// The key read from `key` instead of the request's headers.
    pub(crate) fn with_key(self, key: &'a HeaderMap) -> Self {
        Self { key, ..self }
    }
}

/// Step 3: who is calling, judged against the client's address and the path.
pub(crate) async fn authenticate(
    state: &AppState,
    snap: &Snapshot,
    presented: Presented<'_>,
) -> Result<Authenticated, ApiError> {
    let wall = limits::wall_ms();
    let at = (client_of(presented.extensions), presented.path);
    let caller = state
        .gate()
        .authenticate(snap.master.as_ref(), presented.key, at, wall)
        .await?;
    Ok(Authenticated { caller, wall })
}

/// Step 4½: the guardrails that apply to this caller, on the request's text (masking it in
/// place or refusing it). `Ok(None)` when none applies (a flag check); `Err` is the refusal,
/// already an answer in the endpoint's dialect.
pub(crate) async fn guard<'s>(
    state: &AppState,
    snap: &'s Snapshot,
    endpoint: Endpoint,
    caller: &Caller,
    body: &mut Bytes,
    record: &mut RequestRecord,
) -> Result<Option<Guard<'s>>, Response<ResponseBody>> {
    let Some(set) = snap.features.guardrails.as_deref() else {
        return Ok(None);
    };
    let carried = caller.guardrails(state.gate().directory());
    let log_content = state.recorder().callbacks().content();
    // Boxed: the step may await an external service, whose future is large; inline it would
    // grow every request's future (see `a_requests_future_stays_small`).
    Box::pin(crate::guardrails::before(
        (set, &snap.router),
        endpoint,
        &carried,
        body,
        record,
        log_content,
    ))
    .await
    .map_err(|refused| {
        // Refused before a model group was resolved: logged under the group the body asked
        // for, with the caller who sent it.
        record.key = caller_info(caller);
        if record.model.is_none() {
            record.model = asked_model(body);
        }
        refused.response(endpoint.dialect(), record)
    })
}

/// The key a caller named, as a record names it (`None` for the master key).
fn caller_info(caller: &Caller) -> Option<Arc<sluice_core::record::KeyInfo>> {
    match caller {
        Caller::Key(k) => Some(k.info.clone()),
        Caller::Open | Caller::Master => None,
    }
}

/// The `model` a request body names (read only for a request refused before its envelope is).
fn asked_model(body: &[u8]) -> Option<Arc<str>> {
    #[derive(serde::Deserialize)]
    struct Asked<'a> {
        #[serde(borrow)]
        model: Option<std::borrow::Cow<'a, str>>,
    }
    let asked: Asked<'_> = serde_json::from_slice(body).ok()?;
    asked
        .model
        .map(|m| Arc::from(m.chars().take(200).collect::<String>()))
}

/// Step 4½ for a body sluice cannot read as text (a custom route's, a web search's): a
/// guardrail that applies to it refuses it, since one that cannot check must not be skipped.
/// `what` says what cannot be read, for the refusal.
pub(crate) fn unguardable(
    state: &AppState,
    snap: &Snapshot,
    caller: &Caller,
    body: &[u8],
    what: impl FnOnce() -> String,
) -> Result<(), ApiError> {
    let Some(set) = snap.features.guardrails.as_deref() else {
        return Ok(());
    };
    let carried = caller.guardrails(state.gate().directory());
    if crate::guardrails::would_apply(set, &carried, body) {
        return Err(ApiError::InvalidParam {
            param: "guardrails",
            message: format!("guardrails apply to this request, and {}", what()),
        });
    }
    Ok(())
}

/// What a request asks to be admitted for.
pub(crate) struct Ask<'a> {
    /// The model (group) it uses, as access rules read it.
    pub wanted: Wanted<'a>,
    /// The end user the request says it is sent for (a JWT's own end user, when the key has
    /// one, is the token's word over this), whose own limits bind too.
    pub end_user: Option<&'a str>,
    /// What it may cost (`spend::estimate`), reserved against budgets with no history yet.
    pub estimate: Nanos,
    /// Its tags, whose budgets and limits hold it whoever calls.
    pub tags: Option<&'a [Arc<str>]>,
    /// What its answer costs, when the route knows before calling (borrowed: a price is
    /// large, and an `Ask` is moved into admission on every request).
    pub price: Option<&'a Price>,
}

impl<'a> Ask<'a> {
    /// Admission for `wanted` alone: no end user, estimate, tags or price.
    pub(crate) fn for_model(wanted: impl Into<Wanted<'a>>) -> Self {
        Self {
            wanted: wanted.into(),
            end_user: None,
            estimate: 0,
            tags: None,
            price: None,
        }
    }
}

/// An admitted request: its key (now on the record) and what it will settle.
pub(crate) struct Admitted {
    /// The virtual key that called, if one did.
    pub key: Option<Arc<KeyEntry>>,
    /// The slots and counters it holds, settled when the answer is known.
    pub charges: Charges,
}

/// Step 6: check that the caller may use the model it asks for and admit the request against
/// the limits and budgets of its key, team, user, end user and tags. The end user goes on the
/// record: a JWT's (`end_user_id_jwt_field`), else the one the request names. The master key and an
/// open gateway have none of their own. With a fleet the shared counters in Redis decide
/// (this instance's follow along); if Redis does not answer in time, this instance's decide
/// alone.
pub(crate) async fn admit(
    state: &AppState,
    caller: Caller,
    ask: Ask<'_>,
    record: &mut RequestRecord,
    wall: u64,
) -> Result<Admitted, ApiError> {
    let end_user = match &caller {
        Caller::Key(k) => k.jwt.as_ref().and_then(|j| j.end_user.as_deref()),
        Caller::Open | Caller::Master => None,
    }
    .or(ask.end_user);
    record.end_user = end_user.map(Into::into);
    // Named before the verdict: a request refused here (a blocked key, a limit, a budget) is
    // logged with the key and team that sent it.
    record.key = caller_info(&caller);
    let (permit, fleet) = permit(state, &caller, end_user, &ask, &record.request_id, wall).await?;
    let key = caller.into_key();
    Ok(Admitted {
        key,
        charges: Charges {
            deployment: None,
            permit,
            price: ask.price.copied(),
            fleet,
        },
    })
}

/// Step 6 for a route that is its own model (a custom route, a search tool): the record names
/// it (`name`, served by `provider`), and it is admitted as a model of that name, charged at
/// its flat `price`.
pub(crate) async fn admit_own(
    state: &AppState,
    caller: Caller,
    (name, provider): (&str, &'static str),
    price: Price,
    record: &mut RequestRecord,
    wall: u64,
) -> Result<Admitted, ApiError> {
    record.model = Some(Arc::from(name));
    record.requested_model = record.model.clone();
    record.provider = Some(provider);
    let ask = Ask {
        price: Some(&price),
        ..Ask::for_model(Wanted::name(name))
    };
    admit(state, caller, ask, record, wall).await
}

/// The permit behind [`admit`]: `None` when no limit or budget applies to the caller.
async fn permit(
    state: &AppState,
    caller: &Caller,
    end_user: Option<&str>,
    ask: &Ask<'_>,
    request_id: &HeaderValue,
    wall: u64,
) -> Result<(Option<Permit>, Option<FleetShare>), ApiError> {
    let directory = state.gate().directory();
    let mut subjects = match (caller, end_user) {
        (Caller::Key(key), end_user) => directory.subjects(key, end_user, &ask.wanted, wall)?,
        // The end user's own limits bind whoever sends for them, the master key too (as in
        // LiteLLM, where a customer's budget holds for every caller).
        (Caller::Master | Caller::Open, Some(e)) => directory.end_user_subjects(e)?,
        (Caller::Master | Caller::Open, None) => limits::Subjects::default(),
    };
    // A tag's budget holds every request that carries it, whoever calls.
    if let Some(tags) = ask.tags {
        directory.tag_subjects(tags, &mut subjects);
    }
    if subjects.is_empty() {
        return Ok((None, None));
    }
    if let Some(fleet) = state.fleet() {
        let id = request_id.to_str().unwrap_or("-");
        match fleet.admit(&subjects, id, wall, ask.estimate).await {
            Some(Verdict::Refused(r)) => return Err(ApiError::Limited(r)),
            Some(Verdict::Admitted(remaining)) => {
                let share =
                    FleetShare::new(fleet.clone(), Admission::Counted(id.into()), remaining);
                return Ok((Some(limits::admit_counted(subjects, wall)), Some(share)));
            }
            Some(Verdict::Leased(remaining)) => {
                let share =
                    FleetShare::new(fleet.clone(), Admission::Leased(ask.estimate), remaining);
                return Ok((Some(limits::admit_counted(subjects, wall)), Some(share)));
            }
            None => {}
        }
    }
    limits::admit_reserving(subjects, wall, ask.estimate)
        .map(|p| (Some(p), None))
        .map_err(ApiError::Limited)
}

/// Step 7 with the request's `during_call` guardrails: asked beside the upstream call (as
/// LiteLLM does), never before it. A refusal that comes first drops (cancels) the call and is
/// the answer; one that comes after the upstream answered is kept on the guard, and replaces
/// the answer in step 8 (which is still charged). Without checks, the call alone.
///
/// The call is made here (`call()`), not handed in as a future: a future passed in would take
/// a slot in the caller's state and another in this one's, doubling every request's future.
pub(crate) async fn beside_checks<F: Future>(
    during: Option<During<'_>>,
    call: impl FnOnce() -> F,
    guard: Option<&mut Guard<'_>>,
    record: &mut RequestRecord,
) -> Result<F::Output, ApiError> {
    let Some(during) = during else {
        return Ok(call().await);
    };
    // Boxed only here: most requests have no `during_call` check.
    let mut call = Box::pin(call());
    let mut check = Box::pin(during.run());
    let (out, mut verdict) = tokio::select! {
        mut verdict = &mut check => {
            if let Some(e) = verdict.take_refusal() {
                verdict.note(record);
                return Err(e);
            }
            ((&mut call).await, verdict)
        }
        out = &mut call => (out, check.await),
    };
    if let (Some(e), Some(g)) = (verdict.take_refusal(), guard) {
        g.refuse(e);
    }
    verdict.note(record);
    Ok(out)
}

/// Step 8's headers on an answer: its cost when settled (`cost`; a stream settles when it
/// ends), `x-ratelimit-*` (LiteLLM's names) from the tightest of the caller's limits, and the
/// key's spend so far.
pub(crate) fn spend_headers(
    charges: &Charges,
    key: Option<&KeyEntry>,
    cost: Option<Nanos>,
    h: &mut HeaderMap,
) {
    if let Some(c) = cost {
        h.insert(X_RESPONSE_COST.clone(), usd_value(c));
    }
    let Some(permit) = &charges.permit else {
        return;
    };
    let left = match &charges.fleet {
        Some(share) => share.remaining,
        None => permit.remaining(limits::wall_ms()),
    };
    if let Some((limit, remaining)) = left.requests {
        h.insert(X_LIMIT_REQUESTS.clone(), HeaderValue::from(limit));
        h.insert(X_REMAINING_REQUESTS.clone(), HeaderValue::from(remaining));
    }
    if let Some((limit, remaining)) = left.tokens {
        h.insert(X_LIMIT_TOKENS.clone(), HeaderValue::from(limit));
        h.insert(X_REMAINING_TOKENS.clone(), HeaderValue::from(remaining));
    }
    if let Some(k) = key {
        h.insert(
            X_KEY_SPEND.clone(),
            usd_value(k.subject.counters.spent(limits::wall_ms())),
        );
        if k.per_model.is_some() {
            per_model_headers(permit, h);
        }
    }
}

/// LiteLLM's `x-litellm-key-remaining-requests-{model}` and `-tokens-{model}`: what is left
/// of the key's own limits for the requested model. Only a key with per-model limits pays for
/// the header names; a model whose name cannot be part of one (`openai/gpt-4o`) gets none.
fn per_model_headers(permit: &Permit, h: &mut HeaderMap) {
    let now = limits::wall_ms();
    for s in permit
        .subjects()
        .filter(|s| s.kind == limits::SubjectKind::Key)
    {
        let Some(model) = crate::auth::per_model::PerModel::model_of(s) else {
            continue;
        };
        let left = s.remaining(now);
        for (what, pair) in [("requests", left.requests), ("tokens", left.tokens)] {
            let Some((_, remaining)) = pair else {
                continue;
            };
            let name = format!(
                "x-litellm-key-remaining-{what}-{}",
                model.to_ascii_lowercase()
            );
            if let Ok(name) = HeaderName::from_bytes(name.as_bytes()) {
                h.insert(name, HeaderValue::from(remaining));
            }
        }
    }
}

/// `x-sluice-applied-guardrails`: the guardrails that ran on the request, when any did.
pub(crate) fn applied_header(guard: Option<&Guard<'_>>, h: &mut HeaderMap) {
    if let Some(v) = guard.and_then(Guard::applied) {
        h.insert(crate::guardrails::X_APPLIED_GUARDRAILS.clone(), v);
    }
}
