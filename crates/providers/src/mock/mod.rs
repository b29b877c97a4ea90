//! The built-in mock provider as a provider like any other (`mock/` deployments, behind the
//! default `mock` feature): answered in process by `sluice_mock` in the client's own dialect,
//! or, with `mock_wire`, as a Gemini or Bedrock upstream would answer, so that those providers'
//! codecs run without a socket. `sluice mock` serves the same code over HTTP.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::Response;
use sluice_core::error::ApiError;
use sluice_mock::{Faults, MockSettings, MockWire};
use sluice_translate::envelope::splice;

use crate::bedrock::Converse;
use crate::body::UpstreamBody;
use crate::call::Call;
use crate::exchange;
use crate::gemini::GenerateContent;
use crate::registry::{ProviderSpec, Upstream};
use crate::Family;
use crate::settings::Reading;
use crate::target::{Prepared, TargetError};

/// `mock/`
pub const SPECS: &[ProviderSpec] = &[ProviderSpec::new("mock", Family::Mock, None, &[])];

/// A mock deployment: how the mock behaves, and which provider's wire it plays.
#[derive(Debug, Clone, Default)]
pub struct Target {
    /// `mock_response`, `mock_latency_ms`, ... and the injected faults.
    pub settings: MockSettings,
    /// `mock_wire`: answer chat calls as this provider would (unset: in the client's dialect).
    pub plays: Option<MockWire>,
}

/// The mock provider.
#[derive(Debug)]
pub struct Mock;

impl Upstream for Mock {
    type Config = Target;
    type Target = Target;
    const SPECS: &'static [ProviderSpec] = SPECS;
    const KEYS: &'static [&'static str] = &[
        "mock_response",
        "mock_latency_ms",
        "mock_chunk_interval_ms",
        "mock_chunks",
        "mock_response_tokens",
        "mock_embedding_dims",
        "mock_status",
        "mock_failure_rate",
        "mock_retry_after",
        "mock_reset",
        "mock_stall_after_chunks",
        "mock_stall_ms",
        "mock_cut_after_chunks",
        "mock_garbage",
        "mock_huge_bytes",
        "mock_wire",
    ];
    const HTTP: bool = false;
    const PRICED: bool = false;

    fn config(cx: &mut Reading<'_>) -> Option<Target> {
        Some(Target {
            settings: settings(cx),
            plays: cx.params.text("mock_wire").and_then(|w| {
                let wire = MockWire::parse(&w);
                if wire.is_none() {
                    cx.problems.error(
                        cx.params.path("mock_wire"),
                        format!("expected gemini or bedrock, got {w:?}"),
                    );
                }
                wire
            }),
        })
    }

    fn target(_: &Prepared<'_>, c: &Target) -> Result<Target, TargetError> {
        Ok(c.clone())
    }

    async fn send(t: &Target, call: &Call<'_>) -> Result<Response<UpstreamBody>, ApiError> {
        let s = &t.settings;
        let headers = call.client_headers;
        let plays = t.plays.filter(|_| call.endpoint.is_chat());
        let model = call.envelope.model.to_string();
        let answer = |wire: MockWire| {
            move |stream: bool, model: &str, body: Bytes| {
                let model = model.to_owned();
                async move {
                    let resp =
                        sluice_mock::respond_wire(wire, &model, stream, headers, &body, s).await;
                    Ok(resp.map(UpstreamBody::in_process))
                }
            }
        };
        match plays {
            Some(w @ MockWire::Gemini) => {
                exchange::chat("mock", &GenerateContent, call, model, (false, Default::default()), answer(w)).await
            }
            Some(w @ MockWire::Bedrock) => {
                exchange::chat("mock", &Converse, call, model, (false, Default::default()), answer(w)).await
            }
            None => {
                let mut segments = splice(call.body, call.envelope, None, call.force_usage, None)?;
                if let Some(upload) = call.upload {
                    segments.push(upload.collect().await?);
                }
                let body = contiguous(segments);
                let resp = sluice_mock::respond(call.endpoint, headers, &body, s).await;
                Ok(resp.map(UpstreamBody::in_process))
            }
        }
    }
}

/// The mock's behaviour from `mock_*` keys, defaults where unset.
fn settings(cx: &mut Reading<'_>) -> MockSettings {
    let d = MockSettings::default();
    let (params, p) = (cx.params, &mut *cx.problems);
    let positive = |name: &str, p: &mut sluice_core::settings::Problems, default: u32| match params
        .whole::<u32>(
        name, p,
    ) {
        Some(0) => {
            p.error(params.path(name), "expected a whole number ≥ 1, got \"0\"");
            default
        }
        Some(n) => n,
        None => default,
    };
    MockSettings {
        response: params.scalar("mock_response").map(|s| s.text()),
        latency: params.millis("mock_latency_ms", p).unwrap_or(d.latency),
        chunk_interval: params
            .millis("mock_chunk_interval_ms", p)
            .unwrap_or(d.chunk_interval),
        chunks: positive("mock_chunks", p, d.chunks),
        response_tokens: positive("mock_response_tokens", p, d.response_tokens),
        embedding_dims: positive("mock_embedding_dims", p, d.embedding_dims),
        faults: faults(cx),
        // In-process mock deployments are never signed, and take no key.
        aws: None,
        api_key: None,
    }
}

/// Injected failures from `mock_status`, `mock_failure_rate`, ... keys.
fn faults(cx: &mut Reading<'_>) -> Faults {
    let (params, p) = (cx.params, &mut *cx.problems);
    let status = params.whole::<u16>("mock_status", p);
    if let Some(s) = status.filter(|s| !(400..=599).contains(s)) {
        p.error(
            params.path("mock_status"),
            format!("expected an HTTP error status (400–599), got {s}"),
        );
    }
    let failure_rate = params.number("mock_failure_rate", false, p);
    if failure_rate.is_some_and(|r| r > 1.0) {
        p.error(
            params.path("mock_failure_rate"),
            "expected a share between 0 and 1",
        );
    }
    Faults {
        status: status.filter(|s| (400..=599).contains(s)),
        failure_rate: failure_rate.map(|r| r.min(1.0)),
        retry_after: params.number("mock_retry_after", false, p),
        reset: params.boolean("mock_reset", p).unwrap_or(false),
        stall_after_chunks: params.whole("mock_stall_after_chunks", p),
        stall: params.millis("mock_stall_ms", p).unwrap_or(Duration::ZERO),
        cut_after_chunks: params.whole("mock_cut_after_chunks", p),
        garbage: params.boolean("mock_garbage", p).unwrap_or(false),
        huge_bytes: params.whole("mock_huge_bytes", p),
    }
}

/// The spliced request body in one buffer (the mock parses it).
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
