//! The provider pass-through routes (`/openai/*`, `/anthropic/*`, `/gemini/*`, `/vertex_ai/*`,
//! `/bedrock/*`, `/azure/*`, `/cohere/*`, `/mistral/*`), the gateway's side: the same steps as
//! an inference request, in the same order, with the provider's own API on both ends.
//!
//! 3. authenticate: the virtual (or master) key where LiteLLM takes it on these routes
//!    (`x-litellm-api-key` first, `?key=` / `x-goog-api-key` on Google's routes, then the usual
//!    `Authorization`, `x-api-key`, `api-key`);
//! 4. read the body (the same size limit), check the path (it may not leave the provider's
//!    base);
//! 5. read what the request names: the model (path or body), whether it streams, its end user;
//!    a name that is a `model_list` group with deployments of the route's provider stands for
//!    one of them ([`group`]);
//! 6. admit: the key's access to the group, else to `<provider>/<model>`, and its limits and
//!    budgets, through the pipeline's own `admit`;
//! 7. call the provider with sluice's credentials (`sluice_providers::passthrough::Target`):
//!    the route's own, or the picked deployment's, with its model id in the path or body;
//! 8. answer and settle: a whole JSON answer is read for usage and charged at once; a stream
//!    is relayed frame by frame as it arrives ([`PassRelay`]) and charged when it ends;
//! 9. record: like every request (the pipeline for whole answers, the relay for streams).

pub mod custom;
mod group;
mod relay;
pub mod search;

pub use relay::PassRelay;

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, AUTHORIZATION, CONTENT_TYPE};
use http::{HeaderMap, Request, Response};
use http_body::Body;

use sluice_config::{Config, PriceTable};
use sluice_core::endpoint::Endpoint;
use sluice_core::error::ApiError;
use sluice_core::record::{Content, RequestRecord};
use sluice_net::sigv4::uri_decode;
use sluice_net::ClientRegistry;
use sluice_providers::passthrough::{
    answer_headers, path, usage, BodyFacts, Framing, NamedIn, Outgoing, Route, Tap, Target,
    Targets, Unavailable,
};
use sluice_routing::{retry_after, FailureKind, Group};
use sluice_translate::envelope::{splice, Envelope};

use crate::auth::{self, Wanted};
use crate::http::{collect_upstream, error_response, read_body, ResponseBody};
use crate::server::attempt::failure_kind;
use crate::server::steps::{self, Admitted, Ask, Presented};
use crate::server::{AppState, Snapshot};
use crate::spend::Charges;

/// The pass-through routes of one config snapshot: each route's upstream made ready (or why
/// it cannot be called), the deployments a group's name reaches, and the prices answers are
/// charged at when no deployment prices them.
#[derive(Debug)]
pub struct PassThrough {
    targets: Targets,
    /// The operator's own routes (`general_settings.pass_through_endpoints`).
    custom: custom::CustomRoutes,
    /// The web search tools (`search_tools`).
    search: search::SearchTools,
    deployments: group::DeploymentRoutes,
    prices: PriceTable,
}

impl PassThrough {
    /// The price table the config loaded (LiteLLM's map and the operator's file): what
    /// prices a model found only at request time.
    pub fn prices(&self) -> &PriceTable {
        &self.prices
    }

    /// The operator's own routes.
    pub fn custom(&self) -> &custom::CustomRoutes {
        &self.custom
    }

    /// The web search tools.
    pub fn search(&self) -> &search::SearchTools {
        &self.search
    }

    /// Make every route's upstream, and every deployment of a route's provider, ready from
    /// the validated config.
    pub fn build(config: &Config, clients: &ClientRegistry) -> Self {
        let settings = &config.pass_through;
        Self {
            targets: Targets::build(&settings.upstreams, clients, settings.timeouts),
            custom: custom::CustomRoutes::build(&config.general.pass_through_endpoints, clients),
            search: search::SearchTools::build(&config.search_tools, clients),
            deployments: group::DeploymentRoutes::build(&config.deployments, clients),
            prices: settings.prices.clone(),
        }
    }
}

/// Where a pass-through request goes.
#[derive(Debug, Clone, Copy)]
enum Via<'s> {
    /// A `model_list` group's deployment of the route's provider (the request named the group).
    Group(&'s Group),
    /// The route's own upstream.
    Route(&'s Target),
}

static X_ACCEL_BUFFERING: HeaderName = HeaderName::from_static("x-accel-buffering");

/// Longest model name a record keeps (metrics and spend logs).
const MAX_MODEL_LEN: usize = 256;

/// Serve one pass-through request, through the steps every route shares (`server::steps`).
/// Errors become the pipeline's OpenAI-shaped answers.
pub async fn handle<B>(
    state: &AppState,
    snap: &Snapshot,
    route: Route,
    req: Request<B>,
    record: &mut RequestRecord,
) -> Result<Response<ResponseBody>, ApiError>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    record.provider = Some(route.name());
    // 3. Authenticate, with the key where LiteLLM takes it on this route.
    let presented = caller_key(route, req.headers(), req.uri().query());
    let who = steps::authenticate(state, snap, Presented::by(&req).with_key(&presented)).await?;
    // 4. Read the body within the limit; the path may not leave the provider's base.
    let (parts, body) = req.into_parts();
    let rest = Route::of(parts.uri.path())
        .map(|(_, rest)| rest)
        .ok_or(ApiError::Internal("pass-through route without its prefix"))?;
    path::check(rest)?;
    let mut body = read_body(body, &parts.headers, snap.max_body, snap.body_timeout).await?;
    // 4½. Guardrails, where sluice reads the route's text (OpenAI's and Anthropic's APIs,
    //     whose shapes it knows); on any other route a request a guardrail applies to is
    //     refused, not sent unchecked.
    let checked = guarded_endpoint(route, rest);
    let mut guarded = match checked {
        Some(endpoint) => {
            match steps::guard(state, snap, endpoint, &who.caller, &mut body, record).await {
                Ok(g) => g,
                Err(refused) => return Ok(refused),
            }
        }
        None => {
            unread(state, snap, route, &who.caller, &body)?;
            None
        }
    };
    // 5. What the request names; 6. admitted for it.
    let asked = Asked::read(snap, route, rest, &body, record)?;
    if state.recorder().callbacks().content() {
        record.content = Some(Box::new(Content {
            request: body.clone(),
            ..Content::default()
        }));
    }
    let route_model;
    let wanted = match asked.via {
        Via::Group(g) => Wanted::of(&g.name, g),
        Via::Route(_) => {
            route_model = format!("{}/{}", route.name(), asked.model().unwrap_or("*"));
            Wanted::name(&route_model)
        }
    };
    let ask = Ask {
        end_user: asked.facts.user.as_deref(),
        ..Ask::for_model(wanted)
    };
    let Admitted { key, mut charges } =
        steps::admit(state, who.caller, ask, record, who.wall).await?;
    // 7. Call the provider with sluice's credentials: the group's deployment's, with its model
    //    id where the request named the group, else the route's own; beside the request's
    //    `during_call` guardrails.
    let (target, rest, new_model) = asked.target(snap, route, rest, &mut charges, record)?;
    let (segments, asked_usage) = outgoing_body(
        route,
        &rest,
        &body,
        asked.streams,
        new_model,
        checked.is_some(),
    );
    let limit = if asked.streams {
        target.timeouts.first_chunk
    } else {
        target.timeouts.total
    };
    let before_send = record.start.elapsed();
    let sent = Instant::now();
    let outgoing = Outgoing {
        method: &parts.method,
        rest: &rest,
        query: parts.uri.query(),
        headers: &parts.headers,
        body: segments,
        trace: None,
    };
    let call = || async {
        tokio::time::timeout(limit, target.send(outgoing))
            .await
            .unwrap_or(Err(ApiError::UpstreamTimeout(limit)))
    };
    let during = guarded.as_mut().and_then(|g| g.take_during());
    let resp = match steps::beside_checks(during, call, guarded.as_mut(), record).await? {
        Ok(r) => r,
        Err(e) => {
            if let Some(g) = charges.deployment.as_mut() {
                g.fail(failure_kind(&e), None, &snap.router.policy.breaker);
            }
            return Err(e);
        }
    };
    // 8. Answer and settle.
    let answering = Answering {
        state,
        snap,
        shape: route.shape(&rest),
        checked,
        key: key.as_deref(),
        timing: (before_send, sent, Instant::now()),
    };
    let mut out = if let Some(e) = guarded.as_mut().and_then(|g| g.take_refusal()) {
        // A `during_call` check blocked after the upstream answered: the answer is not sent.
        record.status = e.status().as_u16();
        record.fail_with(&e);
        error_response(
            &e,
            checked.map_or(sluice_core::endpoint::Dialect::OpenAi, |e| e.dialect()),
        )
    } else {
        answering
            .answer(
                resp,
                &asked,
                asked_usage,
                charges,
                guarded.as_mut(),
                target,
                record,
            )
            .await?
    };
    steps::applied_header(guarded.as_ref(), out.headers_mut());
    Ok(out)
}

/// 4½ on a route whose text sluice does not read: a request a guardrail applies to is refused,
/// not sent unchecked.
fn unread(
    state: &AppState,
    snap: &Snapshot,
    route: Route,
    caller: &auth::Caller,
    body: &[u8],
) -> Result<(), ApiError> {
    let Some(set) = snap.features.guardrails.as_deref() else {
        return Ok(());
    };
    let carried = caller.guardrails(state.gate().directory());
    if !crate::guardrails::would_apply(set, &carried, body) {
        return Ok(());
    }
    Err(ApiError::InvalidParam {
        param: "guardrails",
        message: format!(
            "guardrails apply to this request, and sluice cannot read the text of this {} API \
             call: send it through /v1/chat/completions, /v1/responses or /v1/messages",
            route.name()
        ),
    })
}

/// Step 5: what a pass-through request names: the model (path, else body), streaming, the end
/// user; a `model_list` group's name stands for one of its deployments of this provider.
struct Asked<'s, 'r> {
    named: path::Named<'r>,
    facts: BodyFacts<'r>,
    streams: bool,
    via: Via<'s>,
}

impl<'s, 'r> Asked<'s, 'r> {
    fn read(
        snap: &'s Snapshot,
        route: Route,
        rest: &'r str,
        body: &'r [u8],
        record: &mut RequestRecord,
    ) -> Result<Self, ApiError> {
        let named = route.named(rest);
        let facts = BodyFacts::read(body);
        let streams = facts.stream == Some(true)
            || named.op.starts_with("stream")
            || named.op.ends_with("-stream");
        let group_name = match route.group_in() {
            Some(NamedIn::Path) => named.model.as_deref(),
            Some(NamedIn::Body) => facts.model.as_deref(),
            None => None,
        };
        let pt = &snap.pass_through;
        let group =
            group_name.and_then(|n| group::find(&snap.router.models, &pt.deployments, route, n));
        let via = match group {
            Some(g) => Via::Group(g),
            None => Via::Route(
                pt.targets
                    .get(route)
                    .map_err(|why| unavailable(route, why))?,
            ),
        };
        let asked = Self {
            named,
            facts,
            streams,
            via,
        };
        record.stream = streams;
        record.model = Some(match via {
            Via::Group(g) => g.name.clone(),
            Via::Route(_) => Arc::from(format!("{}/*", route.name())),
        });
        record.requested_model = asked.model().map(capped);
        Ok(asked)
    }

    /// The model asked for: the path's, else the body's.
    fn model(&self) -> Option<&str> {
        self.named.model.as_deref().or(self.facts.model.as_deref())
    }

    /// The upstream to call, the path on it, and the model id the body must name instead
    /// (a group's deployment's); the deployment's slot and price go on the charges.
    fn target(
        &self,
        snap: &'s Snapshot,
        route: Route,
        rest: &'r str,
        charges: &mut Charges,
        record: &mut RequestRecord,
    ) -> Result<(&'s Target, Cow<'r, str>, Option<&'s Bytes>), ApiError> {
        let pt = &snap.pass_through;
        Ok(match self.via {
            Via::Group(g) => {
                let routed = group::pick(g, snap.router.policy.strategy, &pt.deployments, route)?;
                record.deployment = Some(routed.member.target.info.id.clone());
                charges.price = Some(routed.member.target.price);
                charges.deployment = Some(routed.guard);
                let t = routed.target;
                match (route.group_in(), self.named.span.clone()) {
                    (Some(NamedIn::Path), Some(span)) => {
                        (t, Cow::Owned(t.routed_path(rest, span)), None)
                    }
                    _ => (t, Cow::Borrowed(rest), Some(t.model_json())),
                }
            }
            Via::Route(t) => {
                charges.price = self.model().and_then(|m| pt.prices.find(route.name(), m));
                (t, Cow::Borrowed(rest), None)
            }
        })
    }
}

/// What step 8 of a pass-through call answers with.
struct Answering<'a> {
    state: &'a AppState,
    snap: &'a Snapshot,
    shape: sluice_providers::passthrough::Shape,
    /// The endpoint whose text guardrails read, if sluice reads this route's.
    checked: Option<sluice_core::endpoint::Endpoint>,
    key: Option<&'a crate::auth::KeyEntry>,
    /// sluice's time before the call, when it was sent, when its head arrived.
    timing: (Duration, Instant, Instant),
}

impl Answering<'_> {
    /// Step 8: the upstream's answer: collected whole (an error, or JSON not streamed) and
    /// settled, or relayed as it arrives and settled when it ends.
    #[allow(clippy::too_many_arguments)]
    async fn answer(
        self,
        resp: Response<sluice_providers::UpstreamBody>,
        asked: &Asked<'_, '_>,
        asked_usage: bool,
        mut charges: Charges,
        guarded: Option<&mut crate::guardrails::Guard<'_>>,
        target: &Target,
        record: &mut RequestRecord,
    ) -> Result<Response<ResponseBody>, ApiError> {
        let (head, upstream) = resp.into_parts();
        record.status = head.status.as_u16();
        if head.status.is_success() && matches!(asked.via, Via::Route(_)) {
            if let Some(m) = asked.model() {
                record.model = Some(capped(m));
            }
        }
        let content_type = head
            .headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        let framing = Framing::of(content_type);
        let whole = !head.status.is_success() || (framing == Framing::Json && !asked.streams);
        let mut out = Response::new(ResponseBody::full(Bytes::new()));
        *out.status_mut() = head.status;
        answer_headers(&head.headers, out.headers_mut());
        let (before_send, sent, arrived) = self.timing;
        if !whole {
            steps::spend_headers(&charges, self.key, None, out.headers_mut());
            // A proxy in front of sluice must not hold the stream back either.
            out.headers_mut()
                .insert(X_ACCEL_BUFFERING.clone(), HeaderValue::from_static("no"));
            record.ttfb = Some(arrived - record.start);
            record.overhead = before_send + arrived.elapsed();
            if let Some(g) = charges.deployment.as_mut() {
                g.succeed(arrived - sent);
            }
            let tap = Tap::new(self.shape, framing, asked_usage);
            let relay = PassRelay::new(
                upstream,
                tap,
                record.clone(),
                self.state.recorder().clone(),
                charges,
            )
            .idle_timeout(target.timeouts.idle);
            let on_stream = match (guarded, self.checked) {
                (Some(g), Some(endpoint)) => g.on_stream().map(|s| (s, endpoint)),
                _ => None,
            };
            *out.body_mut() = match on_stream {
                // post_call guardrails check the stream as it passes, as on the inference
                // routes.
                Some(((list, restore), endpoint)) => ResponseBody::relay(
                    crate::guardrails::GuardedStream::new(relay, list, endpoint, restore),
                ),
                None => ResponseBody::relay(relay),
            };
            return Ok(out);
        }
        let bytes = tokio::time::timeout(target.timeouts.total, collect_upstream(upstream))
            .await
            .unwrap_or(Err(ApiError::UpstreamTimeout(target.timeouts.total)))?;
        let collected = Instant::now();
        if let Some(g) = charges.deployment.as_mut() {
            if head.status.is_success() {
                g.succeed(collected - sent);
            } else {
                let kind = FailureKind::from_response(head.status, &bytes);
                g.fail(
                    kind,
                    retry_after(&head.headers),
                    &self.snap.router.policy.breaker,
                );
            }
        }
        if head.status.is_success() {
            record.usage = usage::whole(self.shape, &bytes);
        }
        if let Some(c) = record.content.as_mut() {
            c.response = Some(bytes.clone());
        }
        // post_call guardrails on the whole answer; a refused answer is still charged.
        let mut refused = None;
        let bytes = match (guarded, self.checked) {
            (Some(g), Some(endpoint)) => {
                match Box::pin(g.after(endpoint, head.status, bytes, record)).await {
                    Ok(b) => b,
                    Err(e) => {
                        refused = Some((e, endpoint));
                        Bytes::new()
                    }
                }
            }
            _ => bytes,
        };
        let cost = charges.settle(record);
        if let Some((e, endpoint)) = refused {
            record.fail_with(&e);
            record.status = e.status().as_u16();
            out = error_response(&e, endpoint.dialect());
        } else {
            *out.body_mut() = ResponseBody::full(bytes);
        }
        steps::spend_headers(&charges, self.key, cost, out.headers_mut());
        record.overhead = before_send + collected.elapsed();
        Ok(out)
    }
}

/// Why a route cannot be called, as the client hears it.
fn unavailable(route: Route, why: &Unavailable) -> ApiError {
    ApiError::PassThroughUnavailable {
        route: route.label(),
        why: why.to_string(),
    }
}

/// The key a pass-through caller presents, as the one header the gate reads: LiteLLM's
/// `x-litellm-api-key` first (the Vertex and AWS SDKs use `Authorization` for Google's and
/// AWS's own credentials), then Google's `?key=` and `x-goog-api-key` on Google's routes, then
/// the usual `Authorization`, `x-api-key` and `api-key`.
pub(crate) fn caller_key(route: Route, headers: &HeaderMap, query: Option<&str>) -> HeaderMap {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|k| !k.is_empty())
            .map(str::to_owned)
    };
    let google = matches!(route, Route::Gemini | Route::Vertex);
    let key = auth::litellm_key(headers)
        .map(str::to_owned)
        .or_else(|| {
            google
                .then(|| {
                    query
                        .and_then(query_key)
                        .or_else(|| header("x-goog-api-key"))
                })
                .flatten()
        })
        .or_else(|| auth::presented_key(headers).map(str::to_owned));
    let mut out = HeaderMap::new();
    if let Some(Ok(mut v)) = key.map(|k| HeaderValue::from_str(&format!("Bearer {k}"))) {
        v.set_sensitive(true);
        out.insert(AUTHORIZATION, v);
    }
    out
}

/// `key=` in a query string, decoded.
fn query_key(query: &str) -> Option<String> {
    query
        .split('&')
        .find_map(|p| p.strip_prefix("key="))
        .map(uri_decode)
        .filter(|k| !k.is_empty())
}

/// The body to send: the client's, untouched but for `model` set to `new_model` (a JSON
/// string: the group's deployment's model) when given, and, for a streamed OpenAI-shaped
/// completion that does not ask for usage, `stream_options.include_usage` spliced in (the
/// relay then removes the usage chunk the client did not ask for), so that the stream can be
/// charged. Returns the segments and whether usage was asked for on the client's behalf.
fn outgoing_body(
    route: Route,
    rest: &str,
    body: &Bytes,
    streams: bool,
    new_model: Option<&Bytes>,
    guarded: bool,
) -> (Vec<Bytes>, bool) {
    let completion = streams && route.openai_completion(rest);
    // The guardrails a request names are sluice's, not the provider's: the field is taken out
    // (the body written again; a guarded body was parsed whole already).
    let unguarded = guarded.then(|| without_guardrails(body)).flatten();
    let body = unguarded.as_ref().unwrap_or(body);
    if completion || new_model.is_some() {
        if let Ok(mut env) = Envelope::parse(body) {
            // A pass-through body keeps every field; only these edits are made.
            env.strip.clear();
            let ask = completion && !env.client_wants_usage;
            if ask || new_model.is_some() {
                if let Ok(segments) = splice(body, &env, new_model, ask, None) {
                    return (segments, ask);
                }
            }
        }
    }
    (vec![body.clone()], false)
}

/// `body` without its top-level `guardrails` member, when it has one.
fn without_guardrails(body: &Bytes) -> Option<Bytes> {
    memchr::memmem::find(body, b"\"guardrails\"")?;
    let mut v: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(body).ok()?;
    v.remove("guardrails")?;
    serde_json::to_vec(&v).ok().map(Bytes::from)
}

/// The endpoint whose text the guardrails read on a pass-through call: OpenAI's (and the
/// OpenAI-shaped providers') chat, completions, Responses and embeddings, Anthropic's
/// Messages. `None` for every other provider API (Gemini's, Bedrock's, Cohere's...).
fn guarded_endpoint(route: Route, rest: &str) -> Option<Endpoint> {
    let path = rest.split('?').next().unwrap_or(rest).trim_end_matches('/');
    match route {
        Route::OpenAi | Route::Azure | Route::Mistral => {
            if path.ends_with("/chat/completions") {
                Some(Endpoint::ChatCompletions)
            } else if path.ends_with("/completions") {
                Some(Endpoint::Completions)
            } else if path.ends_with("/responses") {
                Some(Endpoint::Responses)
            } else if path.ends_with("/embeddings") {
                Some(Endpoint::Embeddings)
            } else {
                None
            }
        }
        Route::Anthropic if path.ends_with("/messages") => Some(Endpoint::Messages),
        _ => None,
    }
}

/// A model name for records, at most [`MAX_MODEL_LEN`] characters.
fn capped(model: &str) -> Arc<str> {
    Arc::from(model.chars().take(MAX_MODEL_LEN).collect::<String>())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_static(v));
        }
        h
    }

    fn bearer(h: &HeaderMap) -> Option<&str> {
        h.get(AUTHORIZATION).and_then(|v| v.to_str().ok())
    }

    #[test]
    fn caller_keys_where_litellm_takes_them() {
        let both = headers(&[
            ("authorization", "Bearer ya29.google-token"),
            ("x-litellm-api-key", "sk-virtual"),
        ]);
        assert_eq!(
            bearer(&caller_key(Route::Vertex, &both, None)),
            Some("Bearer sk-virtual")
        );
        // LiteLLM's docs send it with `Bearer ` too: not doubled.
        let prefixed = headers(&[("x-litellm-api-key", "Bearer sk-virtual")]);
        assert_eq!(
            bearer(&caller_key(Route::Vertex, &prefixed, None)),
            Some("Bearer sk-virtual")
        );
        let none = HeaderMap::new();
        assert_eq!(
            bearer(&caller_key(
                Route::Gemini,
                &none,
                Some("alt=sse&key=sk-q%2B1")
            )),
            Some("Bearer sk-q+1")
        );
        let goog = headers(&[("x-goog-api-key", "sk-g")]);
        assert_eq!(
            bearer(&caller_key(Route::Gemini, &goog, None)),
            Some("Bearer sk-g")
        );
        // Only Google's routes read Google's places.
        assert_eq!(
            bearer(&caller_key(Route::OpenAi, &goog, Some("key=x"))),
            None
        );
        let anthropic = headers(&[("x-api-key", "sk-a")]);
        assert_eq!(
            bearer(&caller_key(Route::Anthropic, &anthropic, None)),
            Some("Bearer sk-a")
        );
    }

    #[test]
    fn usage_is_asked_for_only_on_openai_streams_that_lack_it() {
        let body = Bytes::from_static(br#"{"model":"m","stream":true,"fallbacks":["x"]}"#);
        let (segs, asked) = outgoing_body(
            Route::OpenAi,
            "/v1/chat/completions",
            &body,
            true,
            None,
            false,
        );
        assert!(asked);
        let sent: Vec<u8> = segs.concat();
        let v: serde_json::Value = serde_json::from_slice(&sent).unwrap();
        assert_eq!(v["stream_options"]["include_usage"], true);
        assert_eq!(
            v["fallbacks"][0], "x",
            "a pass-through body keeps every field"
        );
        let wants = Bytes::from_static(
            br#"{"model":"m","stream":true,"stream_options":{"include_usage":true}}"#,
        );
        assert!(
            !outgoing_body(
                Route::OpenAi,
                "/v1/chat/completions",
                &wants,
                true,
                None,
                false
            )
            .1
        );
        assert!(!outgoing_body(Route::Anthropic, "/v1/messages", &body, true, None, false).1);
        assert!(
            !outgoing_body(
                Route::OpenAi,
                "/v1/chat/completions",
                &body,
                false,
                None,
                false
            )
            .1
        );
        // A group's name in the body becomes its deployment's model; nothing else changes.
        let group = Bytes::from_static(br#"{"model":"fast","max_tokens":5,"fallbacks":["x"]}"#);
        let model = Bytes::from_static(br#""claude-sonnet-4-5""#);
        let (segs, asked) = outgoing_body(
            Route::Anthropic,
            "/v1/messages",
            &group,
            false,
            Some(&model),
            false,
        );
        assert!(!asked);
        assert_eq!(
            segs.concat(),
            br#"{"model":"claude-sonnet-4-5","max_tokens":5,"fallbacks":["x"]}"#
        );
    }
    #[test]
    fn a_guarded_body_loses_its_guardrails_field_and_nothing_else() {
        let body = Bytes::from_static(
            br#"{"model":"m","guardrails":["pii"],"fallbacks":["x"],"messages":[]}"#,
        );
        let (segs, _) = outgoing_body(
            Route::OpenAi,
            "/v1/chat/completions",
            &body,
            false,
            None,
            true,
        );
        let v: serde_json::Value = serde_json::from_slice(&segs.concat()).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"model": "m", "fallbacks": ["x"], "messages": []})
        );
        let last = Bytes::from_static(br#"{"model":"m", "guardrails": ["pii"]}"#);
        let (segs, _) = outgoing_body(
            Route::OpenAi,
            "/v1/chat/completions",
            &last,
            false,
            None,
            true,
        );
        let v: serde_json::Value = serde_json::from_slice(&segs.concat()).unwrap();
        assert_eq!(v, serde_json::json!({"model": "m"}));
        // Not guarded: the body goes as it came.
        let (segs, _) = outgoing_body(
            Route::OpenAi,
            "/v1/chat/completions",
            &body,
            false,
            None,
            false,
        );
        assert_eq!(segs.concat(), body);
    }
}
