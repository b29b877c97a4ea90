//! The pipeline's guardrails step (LiteLLM's `guardrails:`, checks from `sluice_guardrails`):
//! which guardrails apply to a request, their checks on its text before the upstream is called
//! (mask or block), and on the whole answer after (block, mask, and placeholders given back
//! with `output_parse_pii`).
//!
//! A request none applies to costs a flag check: no guardrail is `default_on` and the body
//! does not contain the word `guardrails`. Only when one applies is the body parsed, and only
//! rebuilt when something was masked.

mod external;
mod stream;
mod texts;
mod tools;
mod vendors;

pub use stream::{note_on, GuardedStream, NotesGuardrails};

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::{HeaderName, HeaderValue, StatusCode};
use serde_json::Value;
use sluice_core::endpoint::Endpoint;
use sluice_core::error::ApiError;
use sluice_core::record::{GuardrailRun, GuardrailStage, GuardrailVerdict, RequestRecord};
use sluice_guardrails::{Guardrail, Masks, Tally, Violation};
use sluice_routing::Router;

/// The header that names the guardrails a request ran.
pub(crate) static X_APPLIED_GUARDRAILS: HeaderName =
    HeaderName::from_static("x-sluice-applied-guardrails");

/// A config's guardrails, built once per snapshot.
#[derive(Debug)]
pub struct Guardrails {
    list: Vec<Guardrail>,
    any_default_on: bool,
    /// The services of the external ones, by guardrail name.
    externals: Vec<(Arc<str>, external::External)>,
}

impl crate::server::Part for Guardrails {
    /// The config's guardrails, or `None` when it has none (the pipeline's flag). The error
    /// names an external guardrail whose service cannot be addressed.
    fn build(
        config: &sluice_config::Config,
        with: &crate::server::Building<'_>,
        _before: Option<&Arc<Self>>,
    ) -> Result<Option<Arc<Self>>, String> {
        let list = &config.guardrails;
        if list.is_empty() {
            return Ok(None);
        }
        let mut externals = Vec::new();
        for g in list {
            if let Some(s) = &g.settings.external {
                let e = external::External::build(s, with.clients)
                    .map_err(|why| format!("guardrail {}: {why}", g.name))?;
                externals.push((g.name.clone(), e));
            }
        }
        Ok(Some(Arc::new(Guardrails {
            any_default_on: list.iter().any(|g| g.settings.default_on),
            list: list.to_vec(),
            externals,
        })))
    }
}

impl Guardrails {
    fn external(&self, g: &Guardrail) -> Option<&external::External> {
        self.externals
            .iter()
            .find(|(n, _)| *n == g.name)
            .map(|(_, e)| e)
    }
}

/// A run's verdict and what it found, as `note_run` records them.
type Judged = (GuardrailVerdict, Vec<(Arc<str>, u32)>);

/// A service's refusal (`Ok(reason)`) or failure (`Err(why)`, by its `on_error`): the run's
/// verdict and label, and the error to answer with (`None`: let it through).
fn refused_or_failed(
    g: &Guardrail,
    service: &external::External,
    outcome: Result<String, String>,
    place: &'static str,
) -> (Judged, Option<ApiError>) {
    let label = |l: &str| vec![(Arc::from(l), 1)];
    match outcome {
        Ok(reason) => (
            (GuardrailVerdict::Blocked, label("BLOCKED")),
            Some(ApiError::GuardrailBlocked {
                guardrail: g.name.to_string(),
                found: reason,
                place,
            }),
        ),
        Err(why) => {
            tracing::warn!(guardrail = %g.name, error = %why, "guardrail service failed");
            match service.on_error {
                sluice_guardrails::OnError::Allow => {
                    ((GuardrailVerdict::Passed, label("UNAVAILABLE")), None)
                }
                sluice_guardrails::OnError::Block => (
                    (GuardrailVerdict::Blocked, label("UNAVAILABLE")),
                    Some(ApiError::GuardrailUnavailable {
                        guardrail: g.name.to_string(),
                        place,
                        why,
                    }),
                ),
            }
        }
    }
}

/// Ask `g`'s service about `texts`, replacing them when it intervenes (spans it found are
/// masked with `masks`' placeholders); the run is noted. `Ok(true)` when texts were replaced.
async fn run_external(
    g: &Guardrail,
    service: &external::External,
    texts: &mut [&mut String],
    tools: Option<&Value>,
    (stage, masks): (GuardrailStage, &mut Masks),
    record: &mut RequestRecord,
    router: &Router,
) -> Result<bool, ApiError> {
    let (input_type, place) = match stage {
        GuardrailStage::Request => ("request", "request"),
        GuardrailStage::Answer => ("response", "answer"),
    };
    let started = Instant::now();
    let asked = service
        .check(texts, tools, input_type, record, router)
        .await;
    let label = |l: &str| vec![(Arc::from(l), 1)];
    match asked {
        Ok(external::Verdict::Pass) => {
            note_run(
                record,
                g,
                stage,
                started,
                (GuardrailVerdict::Passed, Vec::new()),
            );
            Ok(false)
        }
        Ok(external::Verdict::Replace(new)) => {
            for (t, n) in texts.iter_mut().zip(new) {
                **t = n;
            }
            note_run(
                record,
                g,
                stage,
                started,
                (GuardrailVerdict::Masked, label("INTERVENED")),
            );
            Ok(true)
        }
        Ok(external::Verdict::Mask(spans)) => {
            let mut tally = Tally::default();
            for (t, found) in texts.iter_mut().zip(spans) {
                if found.is_empty() {
                    continue;
                }
                let refs: Vec<(usize, usize, &str)> =
                    found.iter().map(|(s, e, l)| (*s, *e, l.as_str())).collect();
                **t = masks.mask_spans(t, &refs);
                for (_, _, l) in &found {
                    match tally.masked.iter_mut().find(|(x, _)| **x == **l) {
                        Some((_, n)) => *n += 1,
                        None => tally.masked.push((Arc::from(l.as_str()), 1)),
                    }
                }
            }
            note_run(
                record,
                g,
                stage,
                started,
                (GuardrailVerdict::Masked, tally.masked),
            );
            Ok(true)
        }
        Ok(external::Verdict::Flagged(_)) => {
            note_run(
                record,
                g,
                stage,
                started,
                (GuardrailVerdict::Passed, label("FLAGGED")),
            );
            Ok(false)
        }
        Ok(external::Verdict::Block(reason)) => {
            let (verdict, error) = refused_or_failed(g, service, Ok(reason), place);
            note_run(record, g, stage, started, verdict);
            error.map_or(Ok(false), Err)
        }
        Err(why) => {
            let (verdict, error) = refused_or_failed(g, service, Err(why), place);
            note_run(record, g, stage, started, verdict);
            error.map_or(Ok(false), Err)
        }
    }
}

/// The guardrails applied to one request, and what its answer needs from them.
#[derive(Debug)]
pub(crate) struct Guard<'s> {
    set: &'s Guardrails,
    /// The config's routing, for a guardrail that asks one of its model groups.
    router: &'s Router,
    selected: Vec<&'s Guardrail>,
    masks: Masks,
    /// The request as content logging keeps it when a `logging_only` guardrail masked it.
    logged_request: Option<Bytes>,
    /// External `during_call` checks, asked while the upstream is called.
    during: Vec<DuringCheck<'s>>,
    /// A `during_call` refusal that came after the upstream had answered: the answer is
    /// replaced by it (and, whole, still charged).
    refusal: Option<ApiError>,
}

/// One external `during_call` check: the guardrail, its service, the question (built when the
/// request was read) and how many texts it carries.
#[derive(Debug)]
struct DuringCheck<'s> {
    guardrail: &'s Guardrail,
    router: &'s Router,
    service: &'s external::External,
    question: external::Question,
    texts: usize,
}

/// The `during_call` checks of a request, run beside its upstream call
/// (`server::pipeline`): the call is dropped, and so cancelled, as soon as one blocks, and no
/// answer is released before all have passed.
#[derive(Debug)]
pub(crate) struct During<'s>(Vec<DuringCheck<'s>>);

/// What the `during_call` checks decided: their runs, and the refusal if one blocked.
#[derive(Debug)]
pub(crate) struct DuringVerdict {
    runs: Vec<GuardrailRun>,
    refusal: Option<ApiError>,
}

impl During<'_> {
    /// Ask every service, in config order, stopping at the first refusal. A service's
    /// replacement texts come too late to use (the request has gone): they count as a pass.
    pub(crate) async fn run(self) -> DuringVerdict {
        let mut out = DuringVerdict {
            runs: Vec::with_capacity(self.0.len()),
            refusal: None,
        };
        for c in self.0 {
            let started = Instant::now();
            let asked = c.service.ask(c.question, c.texts, c.router).await;
            let g = c.guardrail;
            let label = |l: &str| vec![(Arc::from(l), 1)];
            let ((verdict, found), refusal) = match asked {
                Ok(external::Verdict::Pass) => ((GuardrailVerdict::Passed, Vec::new()), None),
                Ok(external::Verdict::Replace(_) | external::Verdict::Mask(_)) => (
                    (GuardrailVerdict::Passed, label("INTERVENED_TOO_LATE")),
                    None,
                ),
                Ok(external::Verdict::Flagged(_)) => {
                    ((GuardrailVerdict::Passed, label("FLAGGED")), None)
                }
                Ok(external::Verdict::Block(reason)) => {
                    refused_or_failed(g, c.service, Ok(reason), "request")
                }
                Err(why) => refused_or_failed(g, c.service, Err(why), "request"),
            };
            out.runs.push(GuardrailRun {
                name: g.name.clone(),
                stage: GuardrailStage::Request,
                verdict,
                duration: started.elapsed(),
                found,
            });
            if refusal.is_some() {
                out.refusal = refusal;
                break;
            }
        }
        out
    }
}

impl DuringVerdict {
    /// The refusal, if a check blocked the request (taken once).
    pub(crate) fn take_refusal(&mut self) -> Option<ApiError> {
        self.refusal.take()
    }

    /// Note the runs on the request's record.
    pub(crate) fn note(self, record: &mut RequestRecord) {
        for r in self.runs {
            note(record, r);
        }
    }
}

/// `doc` (a request or an answer, its texts found by `locate`) with every `logging_only`
/// guardrail's findings masked, as content logging keeps it; `None` when none found anything.
fn masked_for_log<'d>(
    selected: &[&Guardrail],
    doc: &'d [u8],
    locate: impl FnOnce(&'d [u8]) -> Result<Vec<texts::Located<'d>>, texts::Unreadable>,
) -> Option<Bytes> {
    let located = locate(doc).ok()?;
    let mut now = texts::owned(&located);
    let mut refs: Vec<&mut String> = now.iter_mut().collect();
    if !mask_for_log(selected, &mut refs) {
        return None;
    }
    texts::splice(doc, &located, &now).map(Bytes::from)
}

/// `texts` with every `logging_only` guardrail's findings masked, or `None` when none found
/// anything. The placeholders are the log's own (never given back).
fn mask_for_log(selected: &[&Guardrail], texts: &mut [&mut String]) -> bool {
    let (mut masks, mut scratch) = (Masks::default(), Vec::new());
    let mut masked = false;
    for g in selected.iter().filter(|g| g.settings.modes.logging_only) {
        for t in texts.iter_mut() {
            if let Some(m) = g.mask_for_log(t, &mut masks, &mut scratch) {
                **t = m;
                masked = true;
            }
        }
    }
    masked
}

/// The guardrails a request names: `guardrails` in the body or in `metadata` (the two values).
fn requested(named: [Option<&Value>; 2]) -> Vec<&str> {
    let mut out = Vec::new();
    for v in named.into_iter().flatten() {
        match v {
            Value::Array(names) => out.extend(names.iter().filter_map(Value::as_str)),
            Value::String(name) => out.push(name),
            // LiteLLM's older `{"name": true}` form (a `false` turns nothing off here).
            Value::Object(m) => out.extend(
                m.iter()
                    .filter(|(_, on)| on.as_bool() == Some(true))
                    .map(|(n, _)| n.as_str()),
            ),
            _ => {}
        }
    }
    out
}

fn tool_refused(g: &Guardrail, d: sluice_guardrails::Denial, place: &'static str) -> ApiError {
    ApiError::ToolNotAllowed {
        guardrail: g.name.to_string(),
        message: d.message,
        place,
    }
}

/// The label a `tool_permission` run is recorded under (never the tool's arguments).
const TOOL_DENIED: &str = "TOOL_DENIED";

/// Run a `tool_permission` guardrail's check; the run is noted on the record either way.
fn run_tools(
    g: &Guardrail,
    stage: GuardrailStage,
    record: &mut RequestRecord,
    check: impl FnOnce() -> Result<usize, sluice_guardrails::Denial>,
) -> Result<bool, sluice_guardrails::Denial> {
    let started = Instant::now();
    let outcome = check();
    let verdict = match &outcome {
        Err(_) => (GuardrailVerdict::Blocked, vec![(Arc::from(TOOL_DENIED), 1)]),
        Ok(0) => (GuardrailVerdict::Passed, Vec::new()),
        Ok(n) => (
            GuardrailVerdict::Masked,
            vec![(
                Arc::from(TOOL_DENIED),
                u32::try_from(*n).unwrap_or(u32::MAX),
            )],
        ),
    };
    note_run(record, g, stage, started, verdict);
    outcome.map(|n| n > 0)
}

fn blocked(v: Violation, place: &'static str) -> ApiError {
    ApiError::GuardrailBlocked {
        guardrail: v.guardrail.to_string(),
        found: v.found.to_string(),
        place,
    }
}

/// The names of `selected`, comma-separated, as a header value.
fn names_value(selected: &[&Guardrail]) -> Option<HeaderValue> {
    let names: Vec<&str> = selected.iter().map(|g| &*g.name).collect();
    HeaderValue::from_str(&names.join(",")).ok()
}

/// A request the guardrails step refused: the error, and the guardrails that were applied
/// when one of them blocked it (for `x-sluice-applied-guardrails`).
#[derive(Debug)]
pub(crate) struct Refused {
    error: ApiError,
    applied: Option<HeaderValue>,
}

impl From<ApiError> for Refused {
    fn from(error: ApiError) -> Self {
        Refused {
            error,
            applied: None,
        }
    }
}

impl Refused {
    /// The error response, in the client's dialect, naming the applied guardrails.
    pub(crate) fn response(
        self,
        dialect: sluice_core::endpoint::Dialect,
        record: &mut RequestRecord,
    ) -> http::Response<crate::http::ResponseBody> {
        record.fail_with(&self.error);
        let mut resp = crate::http::error_response(&self.error, dialect);
        if let Some(v) = self.applied {
            resp.headers_mut().insert(X_APPLIED_GUARDRAILS.clone(), v);
        }
        resp
    }
}

fn note(record: &mut RequestRecord, run: GuardrailRun) {
    record
        .guardrails
        .get_or_insert_with(Default::default)
        .push(run);
}

/// Note `g`'s run that began at `started`.
fn note_run(
    record: &mut RequestRecord,
    g: &Guardrail,
    stage: GuardrailStage,
    started: Instant,
    (verdict, found): Judged,
) {
    note(
        record,
        GuardrailRun {
            name: g.name.clone(),
            stage,
            verdict,
            duration: started.elapsed(),
            found,
        },
    );
}

/// Run `g` over `texts`, masking in place; the run is noted on the record either way.
fn run(
    g: &Guardrail,
    texts: &mut [&mut String],
    masks: &mut Masks,
    stage: GuardrailStage,
    record: &mut RequestRecord,
) -> Result<bool, Violation> {
    let started = Instant::now();
    let mut tally = Tally::default();
    let mut scratch = Vec::new();
    let mut masked = false;
    let mut outcome = Ok(());
    for t in texts.iter_mut() {
        match g.check(t, masks, &mut tally, &mut scratch) {
            Ok(None) => {}
            Ok(Some(new)) => {
                **t = new;
                masked = true;
            }
            Err(v) => {
                outcome = Err(v);
                break;
            }
        }
    }
    let verdict = match &outcome {
        Err(v) => (GuardrailVerdict::Blocked, vec![(v.found.clone(), 1)]),
        Ok(()) if masked => (GuardrailVerdict::Masked, tally.masked),
        Ok(()) => (GuardrailVerdict::Passed, Vec::new()),
    };
    note_run(record, g, stage, started, verdict);
    outcome.map(|()| masked)
}

/// Whether a guardrail would apply to a request with this body from a caller carrying `key`'s
/// guardrails, when its text cannot be read (a provider's own API through a pass-through
/// route): such a request is refused rather than sent unchecked.
pub(crate) fn would_apply(set: &Guardrails, key: &[Arc<str>], body: &[u8]) -> bool {
    set.any_default_on
        || !key.is_empty()
        || (memchr::memmem::find(body, b"guardrails").is_some()
            && serde_json::from_slice::<Value>(body).is_ok_and(|v| {
                let meta = v.get("metadata").and_then(|m| m.get("guardrails"));
                !requested([v.get("guardrails"), meta]).is_empty()
            }))
}

/// Step 4½: apply the guardrails that apply to this request. `Ok(None)` when none does (the
/// body untouched and unparsed); the body is replaced when something was masked. With
/// `log_content` (content logging on), `logging_only` guardrails mask a copy for the log.
pub(crate) async fn before<'s>(
    (set, router): (&'s Guardrails, &'s Router),
    endpoint: Endpoint,
    key: &[Arc<str>],
    body: &mut Bytes,
    record: &mut RequestRecord,
    log_content: bool,
) -> Result<Option<Guard<'s>>, Refused> {
    if !texts::checked(endpoint)
        || (!set.any_default_on
            && key.is_empty()
            && memchr::memmem::find(body, b"guardrails").is_none())
    {
        return Ok(None);
    }
    // Read in place: the texts' strings are found, not copied into a tree, and only the ones
    // a guardrail changed are written back.
    let original = body.clone();
    let found = texts::locate_request(endpoint, &original)
        .map_err(|e| ApiError::InvalidJson(e.to_string()))?;
    let value_of = |raw: Option<&str>| raw.and_then(|r| serde_json::from_str::<Value>(r).ok());
    let named = [
        value_of(found.guardrails),
        value_of(found.metadata_guardrails),
    ];
    let mut names = requested([named[0].as_ref(), named[1].as_ref()]);
    names.extend(key.iter().map(|n| &**n));
    for n in &names {
        if !set.list.iter().any(|g| &*g.name == *n) {
            return Err(ApiError::UnknownGuardrail((*n).chars().take(128).collect()).into());
        }
    }
    let selected: Vec<&Guardrail> = set
        .list
        .iter()
        .filter(|g| g.settings.default_on || names.contains(&&*g.name))
        .collect();
    if selected.is_empty() {
        return Ok(None);
    }
    let mut masks = Masks::default();
    let mut during = Vec::new();
    // External services are shown the request's tools.
    let tools = selected
        .iter()
        .any(|g| g.settings.kind.is_external() && g.settings.modes.on_request())
        .then(|| value_of(found.tools))
        .flatten();
    let mut now = texts::owned(&found.texts);
    {
        let mut texts: Vec<&mut String> = now.iter_mut().collect();
        prompt_size(&selected, &texts, record)?;
        for g in selected.iter().filter(|g| {
            g.settings.modes.on_request()
                && g.tools.is_none()
                && g.settings.kind != sluice_guardrails::Kind::PromptSize
                && !g.settings.kind.is_external()
        }) {
            run(g, &mut texts, &mut masks, GuardrailStage::Request, record).map_err(|v| {
                Refused {
                    error: blocked(v, "request"),
                    applied: names_value(&selected),
                }
            })?;
        }
        // External services last: they see what sluice's own guardrails left. A
        // `during_call`-only one is asked beside the upstream call: its question is built now.
        for g in selected.iter().filter(|g| g.settings.modes.on_request()) {
            let Some(service) = set.external(g) else {
                continue;
            };
            if !g.settings.modes.pre_call {
                let question = service
                    .question(&texts, tools.as_ref(), "request", record)
                    .map_err(|why| ApiError::GuardrailUnavailable {
                        guardrail: g.name.to_string(),
                        place: "request",
                        why,
                    })?;
                during.push(DuringCheck {
                    guardrail: g,
                    router,
                    service,
                    question,
                    texts: texts.len(),
                });
                continue;
            }
            run_external(
                g,
                service,
                &mut texts,
                tools.as_ref(),
                (GuardrailStage::Request, &mut masks),
                record,
                router,
            )
            .await
            .map_err(|error| Refused {
                error,
                applied: names_value(&selected),
            })?;
        }
    }
    if let Some(spliced) = texts::splice(&original, &found.texts, &now) {
        *body = Bytes::from(spliced);
    }
    drop(found);
    tool_rules(&selected, body, record)?;
    let logged_request = (log_content && selected.iter().any(|g| g.settings.modes.logging_only))
        .then(|| {
            masked_for_log(&selected, body, |d| {
                texts::locate_request(endpoint, d).map(|f| f.texts)
            })
        })
        .flatten();
    Ok(Some(Guard {
        set,
        router,
        selected,
        masks,
        logged_request,
        during,
        refusal: None,
    }))
}

/// The `prompt_size` guardrails of a request: the first one its texts exceed refuses it.
fn prompt_size(
    selected: &[&Guardrail],
    texts: &[&mut String],
    record: &mut RequestRecord,
) -> Result<(), Refused> {
    for g in selected.iter().filter(|g| {
        g.settings.modes.on_request() && g.settings.kind == sluice_guardrails::Kind::PromptSize
    }) {
        let started = Instant::now();
        let exceeded = g.settings.size.exceeded(texts);
        let verdict = match exceeded {
            Some(_) => (
                GuardrailVerdict::Blocked,
                vec![(Arc::from("PROMPT_TOO_LONG"), 1)],
            ),
            None => (GuardrailVerdict::Passed, Vec::new()),
        };
        note_run(record, g, GuardrailStage::Request, started, verdict);
        if let Some(why) = exceeded {
            return Err(Refused {
                error: ApiError::GuardrailBlocked {
                    guardrail: g.name.to_string(),
                    found: why,
                    place: "request",
                },
                applied: names_value(selected),
            });
        }
    }
    Ok(())
}

/// The `tool_permission` guardrails of a request: they edit its tools and messages, read
/// whole, written again only when one removed something.
fn tool_rules(
    selected: &[&Guardrail],
    body: &mut Bytes,
    record: &mut RequestRecord,
) -> Result<(), Refused> {
    let rules: Vec<_> = selected
        .iter()
        .filter(|g| g.settings.modes.on_request())
        .filter_map(|g| g.tools.as_ref().map(|p| (*g, p)))
        .collect();
    if rules.is_empty() {
        return Ok(());
    }
    let mut value: Value =
        serde_json::from_slice(body).map_err(|e| ApiError::InvalidJson(e.to_string()))?;
    let mut edited = false;
    for (g, policy) in rules {
        edited |= run_tools(g, GuardrailStage::Request, record, || {
            tools::request(policy, &mut value)
        })
        .map_err(|d| Refused {
            error: tool_refused(g, d, "request"),
            applied: names_value(selected),
        })?;
    }
    if edited {
        let out = serde_json::to_vec(&value)
            .map_err(|_| ApiError::Internal("the checked body could not be written"))?;
        *body = Bytes::from(out);
    }
    Ok(())
}

impl<'s> Guard<'s> {
    /// Whether the answer must pass through this guard (so it cannot be served from the cache
    /// or stored in it unchecked).
    pub(crate) fn checks_answer(&self) -> bool {
        self.selected
            .iter()
            .any(|g| g.settings.modes.post_call || g.settings.output_parse_pii)
    }

    /// What a streamed answer must pass through (`GuardedStream`), if anything: the `post_call`
    /// guardrails, and the request's placeholders to give back (`output_parse_pii`).
    pub(crate) fn on_stream(&mut self) -> Option<(Vec<Guardrail>, Option<Masks>)> {
        let list: Vec<Guardrail> = self
            .selected
            .iter()
            .filter(|g| g.settings.modes.post_call)
            .map(|g| (*g).clone())
            .collect();
        let restore = (self.selected.iter().any(|g| g.settings.output_parse_pii)
            && !self.masks.is_empty())
        .then(|| std::mem::take(&mut self.masks));
        (!list.is_empty() || restore.is_some()).then_some((list, restore))
    }

    /// Refuse the answer with `e` (a `during_call` check that blocked after the upstream had
    /// answered).
    pub(crate) fn refuse(&mut self, e: ApiError) {
        self.refusal = Some(e);
    }

    /// The refusal of the answer, if a `during_call` check blocked it (taken once).
    pub(crate) fn take_refusal(&mut self) -> Option<ApiError> {
        self.refusal.take()
    }

    /// The `during_call` checks to run beside the upstream call, if any (taken once).
    pub(crate) fn take_during(&mut self) -> Option<During<'s>> {
        (!self.during.is_empty()).then(|| During(std::mem::take(&mut self.during)))
    }

    /// The external guardrail that would have to check a streamed answer, if any: a service
    /// judges whole texts, so such a request may not stream.
    pub(crate) fn external_on_answer(&self) -> Option<&str> {
        self.selected
            .iter()
            .find(|g| g.settings.modes.post_call && g.settings.kind.is_external())
            .map(|g| &*g.name)
    }

    /// The request as content logging should keep it, when `logging_only` masked it.
    pub(crate) fn logged_request(&self) -> Option<Bytes> {
        self.logged_request.clone()
    }

    /// Whether a `logging_only` guardrail applies: the log must not keep what it cannot mask
    /// (a stream's frames).
    pub(crate) fn masks_logs(&self) -> bool {
        self.selected.iter().any(|g| g.settings.modes.logging_only)
    }

    /// `x-sluice-applied-guardrails`: the names, comma-separated.
    pub(crate) fn applied(&self) -> Option<HeaderValue> {
        names_value(&self.selected)
    }

    /// The whole answer, checked by the `post_call` guardrails and with placeholders given
    /// back (`output_parse_pii`); an error when one blocks it. Error answers pass unchanged.
    /// Content logging keeps the answer masked by the `logging_only` guardrails.
    pub(crate) async fn after(
        &mut self,
        endpoint: Endpoint,
        status: StatusCode,
        bytes: Bytes,
        record: &mut RequestRecord,
    ) -> Result<Bytes, ApiError> {
        if let Some(e) = self.take_refusal() {
            return Err(e);
        }
        let out = self.check_answer(endpoint, status, bytes, record).await?;
        if record.content.is_some() && self.masks_logs() {
            let logged =
                masked_for_log(&self.selected, &out, |d| texts::locate_answer(endpoint, d));
            if let (Some(c), Some(l)) = (record.content.as_mut(), logged) {
                c.response = Some(l);
            }
        }
        Ok(out)
    }

    async fn check_answer(
        &mut self,
        endpoint: Endpoint,
        status: StatusCode,
        bytes: Bytes,
        record: &mut RequestRecord,
    ) -> Result<Bytes, ApiError> {
        if !status.is_success() || !self.checks_answer() {
            return Ok(bytes);
        }
        let spliced = {
            let Ok(located) = texts::locate_answer(endpoint, &bytes) else {
                return Ok(bytes);
            };
            let mut now = texts::owned(&located);
            let mut texts: Vec<&mut String> = now.iter_mut().collect();
            // Masks of the answer are its own: they are never given back.
            let mut answer_masks = Masks::default();
            for g in self.selected.iter().filter(|g| {
                g.settings.modes.post_call && g.tools.is_none() && !g.settings.kind.is_external()
            }) {
                run(
                    g,
                    &mut texts,
                    &mut answer_masks,
                    GuardrailStage::Answer,
                    record,
                )
                .map_err(|v| blocked(v, "answer"))?;
            }
            for g in self.selected.iter().filter(|g| g.settings.modes.post_call) {
                let Some(service) = self.set.external(g) else {
                    continue;
                };
                run_external(
                    g,
                    service,
                    &mut texts,
                    None,
                    (GuardrailStage::Answer, &mut answer_masks),
                    record,
                    self.router,
                )
                .await?;
            }
            if self.selected.iter().any(|g| g.settings.output_parse_pii) {
                for t in texts.iter_mut() {
                    if let Some(r) = self.masks.restore(t) {
                        **t = r;
                    }
                }
            }
            drop(texts);
            texts::splice(&bytes, &located, &now)
        };
        let out = spliced.map_or(bytes, Bytes::from);
        let tool_rules: Vec<_> = self
            .selected
            .iter()
            .filter(|g| g.settings.modes.post_call)
            .filter_map(|g| g.tools.as_ref().map(|p| (*g, p)))
            .collect();
        if tool_rules.is_empty() {
            return Ok(out);
        }
        let Ok(mut value) = serde_json::from_slice::<Value>(&out) else {
            return Ok(out);
        };
        let mut edited = false;
        for (g, policy) in tool_rules {
            edited |= run_tools(g, GuardrailStage::Answer, record, || {
                tools::answer(policy, endpoint, &mut value)
            })
            .map_err(|d| tool_refused(g, d, "answer"))?;
        }
        if !edited {
            return Ok(out);
        }
        serde_json::to_vec(&value)
            .map(Bytes::from)
            .map_err(|_| ApiError::Internal("the checked answer could not be written"))
    }
}
