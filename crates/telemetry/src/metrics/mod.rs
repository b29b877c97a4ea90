//! Prometheus metrics. Request metrics are updated on the recorder task from each finished
//! request's record, so a request pays nothing for them; deployment gauges (in flight,
//! cooldown, latency) are read from the routing atomics when `/metrics` is scraped. Labels are
//! bounded by the config (route, model group, deployment, provider, status class, error
//! kind), never keys or users; request tags, which clients choose too, are capped
//! (`tags.rs`).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use sluice_core::record::{GuardrailVerdict, RecordSink, RequestRecord};

mod cells;
mod tags;
use sluice_routing::{now_ms, Availability, Router};

/// `Content-Type` of the exposition (OpenMetrics text, which Prometheus scrapes natively).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    route: &'static str,
    model: String,
    deployment: String,
    provider: &'static str,
    status_class: &'static str,
    outcome: &'static str,
    error: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    route: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModelLabels {
    model: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DeploymentLabels {
    model: String,
    deployment: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TokenLabels {
    model: String,
    deployment: String,
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GuardrailLabels {
    guardrail: String,
    stage: &'static str,
    verdict: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MaskedLabels {
    guardrail: String,
    entity: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GuardrailName {
    guardrail: String,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

/// A guardrail's check: 1 µs to ~16 ms.
fn guardrail_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.000_001, 2.0, 15))
}

/// Whole requests: 5 ms to ~3 min.
fn duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 16))
}

/// sluice's own time: 10 µs to ~160 ms.
fn overhead_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.000_01, 2.0, 15))
}

/// Time to first token: 10 ms to ~80 s.
fn ttft_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.01, 2.0, 14))
}

/// Every metric sluice exports.
#[derive(Debug)]
pub struct Metrics {
    /// Tells this instance's cached handles from another's ([`cells`]).
    id: u64,
    registry: Registry,
    /// The request counter alone (the same family), for readers that want the figures without
    /// the scrape's work: the admin console's overview.
    requests_only: Registry,
    requests: Family<RequestLabels, Counter>,
    duration: Histograms<ModelLabels>,
    upstream: Histograms<DeploymentLabels>,
    overhead: Histograms<RouteLabels>,
    ttft: Histograms<ModelLabels>,
    tokens: Family<TokenLabels, Counter>,
    retries: Family<ModelLabels, Counter>,
    fallbacks: Family<ModelLabels, Counter>,
    hedges: Family<ModelLabels, Counter>,
    in_flight: Family<DeploymentLabels, Gauge>,
    cooling: Family<DeploymentLabels, Gauge>,
    latency: Family<DeploymentLabels, Gauge<f64, std::sync::atomic::AtomicU64>>,
    queue: Gauge,
    guardrail_checks: Family<GuardrailLabels, Counter>,
    guardrail_masked: Family<MaskedLabels, Counter>,
    guardrail_duration: Histograms<GuardrailName>,
    callbacks: super::callbacks::stats::CallbackMetrics,
    mcp: super::mcp::McpMetrics,
    tags: tags::TagMetrics,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let requests = Family::default();
        registry.register(
            "sluice_requests",
            "Requests answered, by route, model group, deployment, provider, status class, outcome and error kind",
            requests.clone(),
        );
        let duration = Histograms::new_with_constructor(duration_histogram as fn() -> Histogram);
        registry.register(
            "sluice_request_duration_seconds",
            "Time from a request's arrival to the end of its answer",
            duration.clone(),
        );
        let upstream = Histograms::new_with_constructor(duration_histogram as fn() -> Histogram);
        registry.register(
            "sluice_upstream_duration_seconds",
            "Time spent waiting for the upstream (request duration minus sluice's overhead)",
            upstream.clone(),
        );
        let overhead = Histograms::new_with_constructor(overhead_histogram as fn() -> Histogram);
        registry.register(
            "sluice_overhead_seconds",
            "sluice's own time per request, excluding the wait for the upstream",
            overhead.clone(),
        );
        let ttft = Histograms::new_with_constructor(ttft_histogram as fn() -> Histogram);
        registry.register(
            "sluice_time_to_first_token_seconds",
            "Time from a stream request's arrival to its first chunk",
            ttft.clone(),
        );
        let tokens = Family::default();
        registry.register(
            "sluice_tokens",
            "Tokens used, by kind: input, output, cached (read from the prompt cache, part of input), cache_write (written to the prompt cache, part of input), reasoning (part of output)",
            tokens.clone(),
        );
        let retries = Family::default();
        registry.register(
            "sluice_retries",
            "Retried upstream attempts",
            retries.clone(),
        );
        let fallbacks = Family::default();
        registry.register(
            "sluice_fallbacks",
            "Moves to a fallback model group",
            fallbacks.clone(),
        );
        let hedges = Family::default();
        registry.register(
            "sluice_hedged_requests",
            "Hedged second attempts sent",
            hedges.clone(),
        );
        let in_flight = Family::default();
        registry.register(
            "sluice_deployment_in_flight_requests",
            "Requests in flight per deployment",
            in_flight.clone(),
        );
        let cooling = Family::default();
        registry.register(
            "sluice_deployment_cooling_down",
            "1 while a deployment is taken out after failures, else 0",
            cooling.clone(),
        );
        let latency = Family::default();
        registry.register(
            "sluice_deployment_latency_seconds",
            "A deployment's latency estimate (EWMA; time to first byte for streams)",
            latency.clone(),
        );
        let queue = Gauge::default();
        registry.register(
            "sluice_recorder_queue_depth",
            "Finished requests waiting for the recorder (logs, metrics, spend)",
            queue.clone(),
        );
        let guardrail_checks = Family::default();
        registry.register(
            "sluice_guardrail_checks",
            "Guardrail runs, by guardrail, stage (request or answer) and verdict (passed, masked, blocked)",
            guardrail_checks.clone(),
        );
        let guardrail_masked = Family::default();
        registry.register(
            "sluice_guardrail_masked",
            "Values a guardrail replaced by placeholders, by guardrail and entity",
            guardrail_masked.clone(),
        );
        let guardrail_duration =
            Histograms::new_with_constructor(guardrail_histogram as fn() -> Histogram);
        registry.register(
            "sluice_guardrail_duration_seconds",
            "Time a guardrail spent checking a request's or an answer's text",
            guardrail_duration.clone(),
        );
        let callbacks = super::callbacks::stats::CallbackMetrics::register(&mut registry);
        let mcp = super::mcp::McpMetrics::register(&mut registry);
        let tags = tags::TagMetrics::register(&mut registry);
        let mut requests_only = Registry::default();
        requests_only.register(
            "sluice_requests",
            "Requests answered, by route, model group, deployment, provider, status class, outcome and error kind",
            requests.clone(),
        );
        static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        Self {
            id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            guardrail_checks,
            guardrail_masked,
            guardrail_duration,
            registry,
            requests_only,
            callbacks,
            mcp,
            tags,
            requests,
            duration,
            upstream,
            overhead,
            ttft,
            tokens,
            retries,
            fallbacks,
            hedges,
            in_flight,
            cooling,
            latency,
            queue,
        }
    }
}

/// The `kind` label of `sluice_tokens_total`, in [`cells::Cells::tokens`]' order.
const TOKEN_KINDS: [&str; 5] = ["input", "output", "cached", "cache_write", "reasoning"];

fn status_class(status: u16) -> &'static str {
    match status {
        100..=199 => "1xx",
        200..=299 => "2xx",
        300..=399 => "3xx",
        499 => "client_closed",
        400..=499 => "4xx",
        500..=599 => "5xx",
        _ => "other",
    }
}

impl Metrics {
    /// Count one finished request (on the recorder task): its series' handles come from this
    /// thread's cache ([`cells`]), so a request of a kind seen before hashes its labels once
    /// and copies no name.
    pub fn observe(&self, r: &RequestRecord) {
        for g in r.guardrails.iter().flat_map(|g| g.iter()) {
            self.observe_guardrail(g);
        }
        self.tags.observe(r);
        let total = r.start.elapsed();
        cells::with(
            self.id,
            r,
            |key| self.cells(key),
            |cells| {
                cells.requests.inc();
                cells.overhead.observe(r.overhead.as_secs_f64());
                // Requests that never named a model group count above alone.
                let Some(model) = r.model.as_deref() else {
                    return;
                };
                let by_model = || ModelLabels {
                    model: model.to_owned(),
                };
                let by_deployment = || DeploymentLabels {
                    model: model.to_owned(),
                    deployment: r.deployment.as_deref().unwrap_or("").to_owned(),
                };
                cells
                    .duration
                    .get_or_insert_with(|| self.duration.get_or_create(&by_model()).clone())
                    .observe(total.as_secs_f64());
                cells
                    .upstream
                    .get_or_insert_with(|| self.upstream.get_or_create(&by_deployment()).clone())
                    .observe(total.saturating_sub(r.overhead).as_secs_f64());
                if let Some(t) = r.ttfb {
                    cells
                        .ttft
                        .get_or_insert_with(|| self.ttft.get_or_create(&by_model()).clone())
                        .observe(t.as_secs_f64());
                }
                if let Some(u) = &r.usage {
                    let counts = [
                        u.prompt_tokens,
                        u.completion_tokens,
                        u.cached_tokens,
                        u.cache_creation_tokens,
                        u.reasoning_tokens,
                    ];
                    for ((cell, kind), n) in cells.tokens.iter_mut().zip(TOKEN_KINDS).zip(counts) {
                        if n > 0 {
                            cell.get_or_insert_with(|| {
                                let DeploymentLabels { model, deployment } = by_deployment();
                                self.tokens
                                    .get_or_create(&TokenLabels {
                                        model,
                                        deployment,
                                        kind,
                                    })
                                    .clone()
                            })
                            .inc_by(n);
                        }
                    }
                }
                for ((cell, family), n) in cells
                    .counts
                    .iter_mut()
                    .zip([&self.retries, &self.fallbacks, &self.hedges])
                    .zip([r.retries, r.fallbacks, r.hedges])
                {
                    if n > 0 {
                        cell.get_or_insert_with(|| family.get_or_create(&by_model()).clone())
                            .inc_by(u64::from(n));
                    }
                }
            },
        );
    }

    /// The handles every record of `key` updates.
    fn cells(&self, key: &cells::Key<'_>) -> cells::Cells {
        let requests = self
            .requests
            .get_or_create(&RequestLabels {
                route: key.route,
                model: key.model.unwrap_or("").to_owned(),
                deployment: key.deployment.unwrap_or("").to_owned(),
                provider: key.provider,
                status_class: key.status_class,
                outcome: key.outcome,
                error: key.error,
            })
            .clone();
        let overhead = self
            .overhead
            .get_or_create(&RouteLabels { route: key.route })
            .clone();
        cells::Cells {
            requests,
            overhead,
            duration: None,
            upstream: None,
            ttft: None,
            tokens: Default::default(),
            counts: Default::default(),
        }
    }

    /// Count one guardrail run (rare: looked up in its families each time).
    fn observe_guardrail(&self, g: &sluice_core::record::GuardrailRun) {
        self.guardrail_checks
            .get_or_create(&GuardrailLabels {
                guardrail: g.name.to_string(),
                stage: g.stage.name(),
                verdict: g.verdict.name(),
            })
            .inc();
        self.guardrail_duration
            .get_or_create(&GuardrailName {
                guardrail: g.name.to_string(),
            })
            .observe(g.duration.as_secs_f64());
        if g.verdict == GuardrailVerdict::Masked {
            for (entity, n) in &g.found {
                self.guardrail_masked
                    .get_or_create(&MaskedLabels {
                        guardrail: g.name.to_string(),
                        entity: entity.to_string(),
                    })
                    .inc_by(u64::from(*n));
            }
        }
    }

    /// The MCP tool-call families.
    pub fn mcp(&self) -> &super::mcp::McpMetrics {
        &self.mcp
    }

    /// The metric handles of one callback sink.
    pub fn callback_stats(&self, sink: &str) -> super::callbacks::stats::SinkStats {
        self.callbacks.sink(sink)
    }

    /// Render the exposition (deployment gauges read now). `more` writes the families kept
    /// outside the registry (the cache's, the overload manager's) before OpenMetrics' closing
    /// `# EOF`, which a parser requires to be the last line.
    pub fn render(
        &self,
        router: &Router,
        queue_depth: usize,
        more: impl FnOnce(&mut String),
    ) -> String {
        let now = now_ms();
        self.in_flight.clear();
        self.cooling.clear();
        self.latency.clear();
        for group in router.models.groups() {
            for m in group.members() {
                let labels = DeploymentLabels {
                    model: group.name.to_string(),
                    deployment: m.target.info.id.to_string(),
                };
                self.in_flight
                    .get_or_create(&labels)
                    .set(i64::from(m.health.in_flight()));
                let cooling = matches!(m.health.availability(now), Availability::Cooling(_));
                self.cooling.get_or_create(&labels).set(i64::from(cooling));
                if let Some(l) = m.health.latency() {
                    self.latency.get_or_create(&labels).set(l.as_secs_f64());
                }
            }
        }
        self.queue
            .set(i64::try_from(queue_depth).unwrap_or(i64::MAX));
        let mut out = String::with_capacity(16 * 1024);
        if prometheus_client::encoding::text::encode_registry(&mut out, &self.registry).is_err() {
            out.clear();
        }
        more(&mut out);
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode_eof(&mut out);
        out
    }
}

impl Metrics {
    /// `sluice_requests_total` alone, in the exposition's text: the same counter `/metrics`
    /// serves, without resetting the deployment gauges a scrape rebuilds.
    pub fn requests_text(&self) -> String {
        let mut out = String::with_capacity(4 * 1024);
        if prometheus_client::encoding::text::encode(&mut out, &self.requests_only).is_err() {
            out.clear();
        }
        out
    }
}

/// The recorder's handle on the metrics.
impl RecordSink for Metrics {
    fn accept(&self, record: &RequestRecord) {
        // A tool call was counted in `sluice_mcp_*` when it ended (`Recorder::record_tool`);
        // the HTTP request that carried it is a request of its own.
        if record.tool.is_some() {
            return;
        }
        self.observe(record);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{HeaderValue, Method};
    use sluice_core::usage::Usage;
    use std::time::{Duration, Instant};

    fn sample() -> RequestRecord {
        let mut r = RequestRecord::new(
            HeaderValue::from_static("id"),
            Method::POST,
            "/v1/chat/completions",
            Instant::now(),
        );
        r.model = Some("gpt".into());
        r.deployment = Some("d1".into());
        r.provider = Some("openai");
        r.status = 200;
        r.overhead = Duration::from_micros(40);
        r.retries = 1;
        r.usage = Some(Usage {
            prompt_tokens: 10,
            completion_tokens: 5,
            cached_tokens: 4,
            cache_creation_tokens: 0,
            reasoning_tokens: 0,
            ..Usage::default()
        });
        r.ttfb = Some(Duration::from_millis(3));
        r
    }

    #[test]
    fn records_become_series() {
        let m = Metrics::default();
        let r = sample();
        m.observe(&r);
        m.observe(&r);
        let text = m.render(&Router::default(), 3, |_| {});
        assert!(text.contains(r#"sluice_requests_total{route="/v1/chat/completions",model="gpt",deployment="d1",provider="openai",status_class="2xx",outcome="done",error=""} 2"#), "{text}");
        assert!(
            text.contains(r#"sluice_tokens_total{model="gpt",deployment="d1",kind="cached"} 8"#)
        );
        assert!(
            !text.contains(r#"kind="reasoning""#),
            "zero counts are not created"
        );
        assert!(text.contains(r#"sluice_retries_total{model="gpt"} 2"#));
        assert!(
            text.contains(r#"sluice_overhead_seconds_count{route="/v1/chat/completions"} 2"#),
            "{text}"
        );
        assert!(text.contains("sluice_recorder_queue_depth 3"));
        assert!(text.ends_with("# EOF\n"));
        assert_eq!(status_class(499), "client_closed");
    }

    #[test]
    fn cached_handles_count_in_their_own_instance_and_series() {
        let (a, b) = (Metrics::default(), Metrics::default());
        let r = sample();
        let mut other = sample();
        other.deployment = Some("d2".into());
        other.status = 429;
        other.usage = None;
        for _ in 0..3 {
            a.observe(&r);
            a.observe(&other);
        }
        b.observe(&r);
        let text = a.render(&Router::default(), 0, |_| {});
        assert!(text.contains(r#"sluice_requests_total{route="/v1/chat/completions",model="gpt",deployment="d1",provider="openai",status_class="2xx",outcome="done",error=""} 3"#), "{text}");
        assert!(text.contains(r#"sluice_requests_total{route="/v1/chat/completions",model="gpt",deployment="d2",provider="openai",status_class="4xx",outcome="done",error=""} 3"#), "{text}");
        assert!(
            text.contains(r#"sluice_tokens_total{model="gpt",deployment="d1",kind="input"} 30"#)
        );
        assert!(
            !text.contains(r#"deployment="d2",kind="#),
            "no usage, no token series"
        );
        assert!(text.contains(r#"sluice_retries_total{model="gpt"} 6"#));
        assert!(text.contains(r#"sluice_overhead_seconds_count{route="/v1/chat/completions"} 6"#));
        let text = b.render(&Router::default(), 0, |_| {});
        assert!(
            text.contains(r#"status_class="2xx",outcome="done",error=""} 1"#),
            "{text}"
        );
        assert!(!text.contains(r#"deployment="d2""#));
    }

    #[test]
    fn guardrail_runs_become_series_without_values() {
        use sluice_core::record::{GuardrailRun, GuardrailStage};
        let m = Metrics::default();
        let mut r = sample();
        r.model = None;
        r.guardrails = Some(Box::new(vec![
            GuardrailRun {
                name: "pii".into(),
                stage: GuardrailStage::Request,
                verdict: GuardrailVerdict::Masked,
                duration: Duration::from_micros(3),
                found: vec![("EMAIL_ADDRESS".into(), 2)],
            },
            GuardrailRun {
                name: "secrets".into(),
                stage: GuardrailStage::Request,
                verdict: GuardrailVerdict::Blocked,
                duration: Duration::from_micros(2),
                found: vec![("OPENAI_API_KEY".into(), 1)],
            },
        ]));
        m.observe(&r);
        let text = m.render(&Router::default(), 0, |_| {});
        assert!(text.contains(r#"sluice_guardrail_checks_total{guardrail="pii",stage="request",verdict="masked"} 1"#), "{text}");
        assert!(text.contains(r#"sluice_guardrail_checks_total{guardrail="secrets",stage="request",verdict="blocked"} 1"#));
        assert!(text.contains(
            r#"sluice_guardrail_masked_total{guardrail="pii",entity="EMAIL_ADDRESS"} 2"#
        ));
        assert!(
            !text.contains(r#"entity="OPENAI_API_KEY""#),
            "a block masks nothing"
        );
        assert!(text.contains(r#"sluice_guardrail_duration_seconds_count{guardrail="pii"} 1"#));
    }

    #[test]
    fn every_metric_the_docs_and_dashboard_name_exists() {
        let m = Metrics::default();
        let mut r = sample();
        (r.fallbacks, r.hedges) = (1, 1);
        // Tag families have samples once a tagged request was counted.
        r.tags = Some(std::sync::Arc::from([std::sync::Arc::from("t")]));
        r.cost = Some(sluice_core::limits::nanos(0.01));
        // Guardrail families have samples once a guardrail ran.
        r.guardrails = Some(Box::new(vec![sluice_core::record::GuardrailRun {
            name: "pii".into(),
            stage: sluice_core::record::GuardrailStage::Request,
            verdict: sluice_core::record::GuardrailVerdict::Masked,
            duration: Duration::from_micros(3),
            found: vec![("EMAIL_ADDRESS".into(), 1)],
        }]));
        m.observe(&r);
        let member = sluice_routing::Member {
            target: std::sync::Arc::new(sluice_providers::DeploymentTarget::mock_for_tests(
                "g", "d",
            )),
            health: std::sync::Arc::new(sluice_routing::Health::default()),
            weight: 1.0,
            rpm: None,
            tpm: None,
            cost: f64::INFINITY,
            access_groups: std::sync::Arc::new([]),
            tags: std::sync::Arc::new([]),
        };
        member.health.begin(false).succeed(Duration::from_millis(1));
        let router = Router {
            models: sluice_routing::ModelTable::new(vec![member], |_| None),
            ..Router::default()
        };
        // Callback families have samples once a sink exists; MCP's once a call was made.
        let _sink = m.callback_stats("webhook");
        let call = sluice_core::record::ToolCall {
            server: "s".into(),
            method: "tools/call",
            name: Some("t".into()),
            status: sluice_core::record::CallStatus::Ok,
            error: None,
        };
        m.mcp().observe(&call, Duration::from_millis(1), Some(0.01));
        let text = m.render(&router, 0, |_| {});
        let declared: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .filter_map(|l| l.split_whitespace().next())
            .collect();
        for source in [
            include_str!("../../../../docs/grafana/sluice-dashboard.json"),
            include_str!("../../../../docs/metrics.md"),
        ] {
            let mut rest = source;
            while let Some(i) = rest.find("sluice_") {
                let name: String = rest[i..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                rest = &rest[i + name.len()..];
                let base = ["_bucket", "_count", "_sum", "_total"]
                    .iter()
                    .find_map(|s| name.strip_suffix(s))
                    .unwrap_or(&name);
                if base.starts_with("sluice_cache_") {
                    // The binary's cache module renders these; tests/e2e/cache.rs checks them.
                    continue;
                }
                assert!(
                    declared.contains(&base),
                    "{name} is named in the docs but not exported"
                );
            }
        }
    }

    #[test]
    fn the_request_counter_alone_matches_the_scrape() {
        let m = Metrics::default();
        m.observe(&sample());
        m.observe(&sample());
        let alone = m.requests_text();
        let line = alone
            .lines()
            .find(|l| l.starts_with("sluice_requests_total{"))
            .expect("the counter");
        assert!(line.ends_with(" 2"), "{line}");
        assert!(
            !alone.contains("sluice_deployment_"),
            "only the request counter"
        );
        let scrape = m.render(&Router::default(), 0, |_| {});
        assert!(scrape.contains(line), "the same series as /metrics");
    }
}
