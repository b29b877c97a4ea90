//! One deployment's health check: its provider's model list where there is one (free), else
//! the smallest request its mode allows (a few tokens, priced and recorded like a request).

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode};
use http_body_util::BodyExt;
use serde::{Deserialize, Serialize};
use sluice_config::HealthCheckInfo;
use sluice_core::endpoint::Endpoint;
use sluice_core::limits::nanos;
use sluice_core::record::RequestRecord;
use sluice_core::usage::usage_of;
use sluice_providers::Call;
use sluice_routing::{FailureKind, Member};
use sluice_translate::envelope::Envelope;

use crate::server::attempt::{attempt, Answer, Failed};

/// LiteLLM's default `health_check_timeout`.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// LiteLLM's default token limit of a probe (enough for a reasoning model to answer at all).
const DEFAULT_MAX_TOKENS: u32 = 16;

/// What a probe sends, chosen from the deployment's `model_info.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Chat completions (the default, as in LiteLLM).
    Chat,
    /// Text completions.
    Completion,
    /// Embeddings.
    Embedding,
    /// A mode whose smallest request still costs real money or needs an input sluice cannot
    /// make up (images, audio, rerank): only a free probe is made.
    FreeOnly,
}

impl Mode {
    /// `model_info.mode` as a probe reads it.
    pub fn of(mode: Option<&str>) -> Self {
        match mode {
            None | Some("chat" | "responses" | "anthropic_messages") => Self::Chat,
            Some("completion") => Self::Completion,
            Some("embedding") => Self::Embedding,
            Some(_) => Self::FreeOnly,
        }
    }
}

/// A deployment's probe settings, from its `model_info`.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    /// What a request probe sends.
    pub mode: Mode,
    /// `health_check_*`.
    pub info: HealthCheckInfo,
}

/// How a probe was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProbeKind {
    /// The provider's model list: free.
    ModelList,
    /// The smallest request: a few tokens.
    Request,
    /// None was made (the reason says why); the deployment's state is left as it was.
    Skipped,
}

/// One deployment's verdict in a round, as every instance of the fleet reads it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Verdict {
    /// Deployment id.
    pub model_id: String,
    /// Its model group.
    pub model_name: String,
    /// It answered (a 429 counts: it is up, only busy). `None` when no probe was made.
    pub healthy: Option<bool>,
    /// How it was asked.
    pub probe: ProbeKind,
    /// The upstream's status, when it answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Why it is unhealthy or was skipped (no address, no key).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The failure's kind (LiteLLM's exception names are in `error`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Whether the failure takes it out of routing until a probe finds it back.
    #[serde(default)]
    pub cools: bool,
    /// How long the probe took.
    pub latency_ms: f64,
    /// What the probe cost, USD.
    pub cost: f64,
}

impl Verdict {
    fn new(member: &Member, probe: ProbeKind) -> Self {
        Self {
            model_id: member.target.info.id.to_string(),
            model_name: member.target.info.model_name.to_string(),
            healthy: None,
            probe,
            status: None,
            error: None,
            kind: None,
            cools: false,
            latency_ms: 0.0,
            cost: 0.0,
        }
    }

    /// A deployment not probed, and why.
    pub fn skipped(member: &Member, why: &str) -> Self {
        let mut v = Self::new(member, ProbeKind::Skipped);
        v.error = Some(why.to_owned());
        v
    }

    fn failed(mut self, kind: FailureKind, status: Option<u16>, error: String) -> Self {
        // A busy deployment is up; a refused probe body says nothing of the deployment. Every
        // other failure is an outage until the next probe says otherwise.
        let up = kind == FailureKind::RateLimit;
        self.healthy = Some(up);
        self.cools = !up && !matches!(kind, FailureKind::BadRequest | FailureKind::ContentPolicy);
        self.status = status;
        self.kind = Some(kind.name().to_owned());
        self.error = Some(error);
        self
    }
}

/// What a paid probe did, beside its verdict: the record of its spend.
pub struct Probed {
    /// The verdict.
    pub verdict: Verdict,
    /// The request record of a request probe (its spend line), `None` for a free probe.
    pub record: Option<RequestRecord>,
}

impl Probed {
    /// A verdict that cost nothing: no spend line.
    fn free(verdict: Verdict) -> Self {
        Self {
            verdict,
            record: None,
        }
    }
}

/// Probe `member` once. `paid` is whether a request probe may be sent (the day's probe
/// spend is under its cap).
pub async fn probe(member: &Member, planned: &Planned, paid: bool) -> Probed {
    let timeout = planned.info.timeout.unwrap_or(DEFAULT_TIMEOUT);
    let target = &member.target;
    let wildcard = target.info.upstream_model.contains('*');
    // An operator's `health_check_model` or `health_check_max_tokens` asks for a real request.
    let free_first = planned.info.model.is_none() && planned.info.max_tokens.is_none();
    if free_first {
        let start = Instant::now();
        if let Some(listed) = tokio::time::timeout(timeout, async {
            match target.list_models().await? {
                Ok(resp) => {
                    let status = resp.status();
                    let body = resp.into_body().collect().await.map(|b| b.to_bytes());
                    Some(Ok((status, body.unwrap_or_default())))
                }
                Err(e) => Some(Err(e)),
            }
        })
        .await
        .map_err(|_| ())
        .transpose()
        {
            let mut v = Verdict::new(member, ProbeKind::ModelList);
            v.latency_ms = start.elapsed().as_secs_f64() * 1e3;
            match listed {
                Ok(Ok((status, _))) if status.is_success() => {
                    v.healthy = Some(true);
                    v.status = Some(status.as_u16());
                    return Probed::free(v);
                }
                // No model list here after all (an OpenAI-compatible server without one):
                // the request probe decides.
                Ok(Ok((StatusCode::NOT_FOUND | StatusCode::METHOD_NOT_ALLOWED, _))) => {}
                Ok(Ok((status, body))) => {
                    let kind = FailureKind::from_response(status, &body);
                    let why = format!("the model list answered {status}");
                    return Probed::free(v.failed(kind, Some(status.as_u16()), why));
                }
                Ok(Err(e)) => {
                    let why = crate::server::internal::describe(&e);
                    return Probed::free(v.failed(FailureKind::Connection, None, why));
                }
                Err(()) => {
                    let why = format!("no answer within {timeout:?}");
                    return Probed::free(v.failed(FailureKind::Timeout, None, why));
                }
            }
        }
    }
    if planned.mode == Mode::FreeOnly {
        return Probed::free(Verdict::skipped(
            member,
            "its provider has no model list, and a request of its mode would cost",
        ));
    }
    if wildcard && planned.info.model.is_none() {
        return Probed::free(Verdict::skipped(
                member,
                "a wildcard deployment is probed with a request only when model_info.health_check_model names the model",
            ));
    }
    if !paid {
        return Probed::free(Verdict::skipped(
            member,
            "health_check_max_spend_per_day reached: request probes wait for the next day",
        ));
    }
    request_probe(member, planned, wildcard, timeout).await
}

/// The smallest valid request of the deployment's mode, sent to it alone.
async fn request_probe(
    member: &Member,
    planned: &Planned,
    wildcard: bool,
    timeout: Duration,
) -> Probed {
    let target = &member.target;
    let group = &*target.info.model_name;
    let max_tokens = planned.info.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS);
    // A wildcard deployment is asked for `health_check_model` (its provider prefix dropped, as
    // the wildcard's capture would be).
    let asked = match (&planned.info.model, wildcard) {
        (Some(m), true) => m
            .strip_prefix(target.info.provider)
            .and_then(|m| m.strip_prefix('/'))
            .unwrap_or(m)
            .to_owned(),
        _ => group.to_owned(),
    };
    let (endpoint, body) = match planned.mode {
        Mode::Embedding => (
            Endpoint::Embeddings,
            serde_json::json!({"model": asked, "input": "ping"}),
        ),
        Mode::Completion => (
            Endpoint::Completions,
            serde_json::json!({"model": asked, "prompt": "ping", "max_tokens": max_tokens}),
        ),
        Mode::Chat | Mode::FreeOnly => (
            Endpoint::ChatCompletions,
            serde_json::json!({
                "model": asked,
                "messages": [{"role": "user", "content": "ping"}],
                "max_tokens": max_tokens,
            }),
        ),
    };
    let body = Bytes::from(body.to_string());
    let mut verdict = Verdict::new(member, ProbeKind::Request);
    let envelope = match Envelope::parse(&body) {
        Ok(e) => e,
        Err(e) => {
            let why = format!("the probe's body: {e}");
            return Probed::free(verdict.failed(FailureKind::BadRequest, None, why));
        }
    };
    let headers = HeaderMap::new();
    let call = Call::own(
        endpoint,
        &headers,
        &body,
        &envelope,
        wildcard.then_some(asked.as_str()),
    );
    let start = Instant::now();
    let answered = attempt(target, call, false, Some(timeout)).await;
    verdict.latency_ms = start.elapsed().as_secs_f64() * 1e3;
    let mut record = RequestRecord::new(
        http::HeaderValue::from_static("sluice-health-check"),
        Method::POST,
        "health_check",
        start,
    );
    record.model = Some(Arc::clone(&target.info.model_name));
    record.requested_model = record.model.clone();
    record.deployment = Some(Arc::clone(&target.info.id));
    record.provider = Some(target.info.provider);
    record.endpoint = Some(endpoint);
    record.tags = Some(Arc::from([Arc::<str>::from("health_check")]));
    match answered {
        Ok(Answer::Full(parts, bytes)) => {
            verdict.healthy = Some(true);
            verdict.status = Some(parts.status.as_u16());
            record.status = parts.status.as_u16();
            if let Some(usage) = usage_of(endpoint, &bytes, Default::default()) {
                verdict.cost = target.price.cost(&usage);
                record.cost = Some(nanos(verdict.cost));
                record.usage = Some(usage);
            }
        }
        Ok(Answer::Stream { parts, .. }) => {
            verdict.healthy = Some(true);
            verdict.status = Some(parts.status.as_u16());
            record.status = parts.status.as_u16();
        }
        Err(failure) => {
            let (status, why) = match &failure.error {
                Failed::Upstream(resp) => (
                    Some(resp.status().as_u16()),
                    format!("the probe request answered {}", resp.status()),
                ),
                Failed::Gateway(e) => (None, crate::server::internal::describe(e)),
            };
            record.status = status.unwrap_or(502);
            record.failure = Some(failure.kind.name());
            verdict = verdict.failed(failure.kind, status, why);
        }
    }
    Probed {
        verdict,
        record: Some(record),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mode_picks_the_probe_litellm_would_send() {
        assert_eq!(Mode::of(None), Mode::Chat);
        assert_eq!(Mode::of(Some("responses")), Mode::Chat);
        assert_eq!(Mode::of(Some("embedding")), Mode::Embedding);
        assert_eq!(Mode::of(Some("completion")), Mode::Completion);
        assert_eq!(Mode::of(Some("image_generation")), Mode::FreeOnly);
        assert_eq!(Mode::of(Some("audio_speech")), Mode::FreeOnly);
    }

    #[test]
    fn busy_is_up_and_a_refused_probe_does_not_cool() {
        let m = Member {
            target: Arc::new(sluice_providers::DeploymentTarget::mock_for_tests(
                "g", "d1",
            )),
            health: Arc::default(),
            weight: 1.0,
            rpm: None,
            tpm: None,
            cost: 0.0,
            access_groups: Arc::from([]),
            tags: Arc::from([]),
        };
        let v = Verdict::new(&m, ProbeKind::Request);
        let busy = v
            .clone()
            .failed(FailureKind::RateLimit, Some(429), "busy".into());
        assert_eq!((busy.healthy, busy.cools), (Some(true), false));
        let refused = v
            .clone()
            .failed(FailureKind::BadRequest, Some(400), "bad".into());
        assert_eq!((refused.healthy, refused.cools), (Some(false), false));
        let down = v.failed(FailureKind::Server, Some(503), "down".into());
        assert_eq!((down.healthy, down.cools), (Some(false), true));
    }
}
