//! OpenTelemetry traces over OTLP (HTTP/protobuf or gRPC), built from finished request records
//! on the otel sink's task, never on a request. Per request: one SERVER span (the request,
//! child of the client's `traceparent` when it sent one) and one CLIENT span per upstream
//! attempt, so retries, fallbacks and hedges show as siblings with their deployment and
//! outcome. Attributes follow the GenAI semantic conventions for what sluice knows without
//! parsing more of the body. The protobuf is written by hand (a few message types; no codegen
//! crate to compile).

use std::sync::Arc;

use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_TYPE};
use http::{HeaderMap, Method, Uri};

use super::callbacks::payload::{AttemptRecord, CallbackRecord};
use super::callbacks::target::{ok_status, send, DeliverError, Http};

/// gRPC method path of the OTLP trace service.
const GRPC_PATH: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

/// An OTLP trace exporter.
#[derive(Debug)]
pub struct Exporter {
    /// Traces endpoint (HTTP: the full `/v1/traces` URL; gRPC: the server).
    pub uri: Uri,
    /// gRPC instead of HTTP/protobuf.
    pub grpc: bool,
    /// Extra headers.
    pub headers: HeaderMap,
    /// `service.name`.
    pub service_name: String,
    /// Clients.
    pub http: Http,
}

impl Exporter {
    /// Export one batch of requests' spans.
    pub async fn deliver(&self, batch: &[Arc<CallbackRecord>]) -> Result<(), DeliverError> {
        let msg = export_request(&self.service_name, batch);
        let mut headers = self.headers.clone();
        if !self.grpc {
            headers.insert(
                CONTENT_TYPE,
                HeaderValue::from_static("application/x-protobuf"),
            );
            let a = send(
                &self.http.client,
                Method::POST,
                self.uri.clone(),
                headers,
                Bytes::from(msg),
            )
            .await?;
            return ok_status(&a);
        }
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
        headers.insert("te", HeaderValue::from_static("trailers"));
        let mut framed = Vec::with_capacity(msg.len() + 5);
        framed.push(0);
        framed.extend_from_slice(&u32::try_from(msg.len()).unwrap_or(u32::MAX).to_be_bytes());
        framed.extend_from_slice(&msg);
        let mut parts = self.uri.clone().into_parts();
        parts.path_and_query = Some(http::uri::PathAndQuery::from_static(GRPC_PATH));
        let uri = Uri::from_parts(parts).map_err(|e| DeliverError::Build(e.to_string()))?;
        let a = send(
            &self.http.h2,
            Method::POST,
            uri,
            headers,
            Bytes::from(framed),
        )
        .await?;
        ok_status(&a)?;
        // grpc-status comes in the trailers (or in the headers of a trailers-only answer).
        let status = a
            .trailers
            .as_ref()
            .and_then(|t| t.get("grpc-status"))
            .or_else(|| a.headers.get("grpc-status"))
            .and_then(|v| v.to_str().ok())
            .unwrap_or("0");
        if status == "0" {
            Ok(())
        } else {
            Err(DeliverError::Grpc(status.to_owned()))
        }
    }
}

/// `ExportTraceServiceRequest` for these records: one resource, one scope, their spans.
/// Records without trace ids (tracing was off when they were made) are skipped.
pub fn export_request(service_name: &str, records: &[Arc<CallbackRecord>]) -> Vec<u8> {
    let mut resource = Vec::new();
    attr(&mut resource, 1, "service.name", Val::Str(service_name));
    attr(&mut resource, 1, "telemetry.sdk.name", Val::Str("sluice"));
    attr(
        &mut resource,
        1,
        "service.version",
        Val::Str(env!("CARGO_PKG_VERSION")),
    );
    let mut scope_spans = Vec::new();
    let mut scope = Vec::new();
    string(&mut scope, 1, "sluice");
    string(&mut scope, 2, env!("CARGO_PKG_VERSION"));
    message(&mut scope_spans, 1, &scope);
    for r in records {
        request_spans(&mut scope_spans, r);
    }
    let mut resource_spans = Vec::new();
    message(&mut resource_spans, 1, &resource);
    message(&mut resource_spans, 2, &scope_spans);
    let mut out = Vec::new();
    message(&mut out, 1, &resource_spans);
    out
}

/// The GenAI operation name for sluice's call types.
fn operation(call_type: Option<&str>) -> &'static str {
    match call_type {
        Some("chat_completions" | "messages" | "responses") => "chat",
        Some("completions") => "text_completion",
        Some("embeddings") => "embeddings",
        _ => "request",
    }
}

fn request_spans(out: &mut Vec<u8>, r: &CallbackRecord) {
    let Some(t) = &r.trace else {
        return;
    };
    let (Some(trace_id), Some(span_id)) = (unhex(&t.trace_id), unhex(&t.span_id)) else {
        return;
    };
    let op = operation(r.call_type.as_deref());
    let requested = r.requested_model.as_deref().unwrap_or("");
    let mut span = Vec::new();
    bytes_field(&mut span, 1, &trace_id);
    bytes_field(&mut span, 2, &span_id);
    if let Some(ts) = &t.trace_state {
        string(&mut span, 3, ts);
    }
    if let Some(p) = t.parent_span_id.as_deref().and_then(unhex) {
        bytes_field(&mut span, 4, &p);
    }
    string(&mut span, 5, &format!("{op} {requested}"));
    varint_field(&mut span, 6, 2); // SPAN_KIND_SERVER
    fixed64(&mut span, 7, r.start_unix_nano);
    fixed64(&mut span, 8, r.end_unix_nano);
    let a = &mut span;
    attr(a, 9, "gen_ai.operation.name", Val::Str(op));
    if !requested.is_empty() {
        attr(a, 9, "gen_ai.request.model", Val::Str(requested));
    }
    if let Some(m) = &r.upstream_model {
        attr(a, 9, "gen_ai.response.model", Val::Str(m));
    }
    if let Some(p) = &r.provider {
        attr(a, 9, "gen_ai.provider.name", Val::Str(p));
    }
    if r.usage.prompt_tokens + r.usage.completion_tokens > 0 {
        attr(
            a,
            9,
            "gen_ai.usage.input_tokens",
            Val::Int(r.usage.prompt_tokens),
        );
        attr(
            a,
            9,
            "gen_ai.usage.output_tokens",
            Val::Int(r.usage.completion_tokens),
        );
        if r.usage.cached_tokens > 0 {
            attr(
                a,
                9,
                "gen_ai.usage.cache_read.input_tokens",
                Val::Int(r.usage.cached_tokens),
            );
        }
    }
    attr(a, 9, "http.request.method", Val::Str("POST"));
    attr(a, 9, "http.route", Val::Str(&r.route));
    attr(
        a,
        9,
        "http.response.status_code",
        Val::Int(u64::from(r.status)),
    );
    attr(a, 9, "sluice.request_id", Val::Str(&r.request_id));
    if let Some(g) = &r.model_group {
        attr(a, 9, "sluice.model_group", Val::Str(g));
    }
    if let Some(d) = &r.deployment {
        attr(a, 9, "sluice.deployment", Val::Str(d));
    }
    attr(a, 9, "sluice.retries", Val::Int(u64::from(r.retries)));
    attr(a, 9, "sluice.fallbacks", Val::Int(u64::from(r.fallbacks)));
    attr(a, 9, "sluice.hedges", Val::Int(u64::from(r.hedges)));
    attr(a, 9, "sluice.overhead_ms", Val::F64(r.overhead_ms));
    attr(a, 9, "gen_ai.request.stream", Val::Bool(r.stream));
    if let Some(ms) = r.ttfb_ms {
        attr(a, 9, "sluice.ttfb_ms", Val::F64(ms));
    }
    if let Some(k) = &r.key_alias {
        attr(a, 9, "sluice.key_alias", Val::Str(k));
    }
    if let Some(k) = &r.key_hash {
        attr(a, 9, "sluice.key_hash", Val::Str(k));
    }
    if let Some(t) = &r.team_id {
        attr(a, 9, "sluice.team_id", Val::Str(t));
    }
    if let Some(u) = &r.user_id {
        attr(a, 9, "sluice.user_id", Val::Str(u));
    }
    if let Some(e) = &r.error {
        attr(a, 9, "error.type", Val::Str(e));
    }
    if let Some(m) = &r.messages {
        attr(a, 9, "gen_ai.input.messages", Val::Str(&m.to_string()));
    }
    if let Some(m) = &r.response {
        attr(a, 9, "gen_ai.output.messages", Val::Str(&m.to_string()));
    }
    status(a, r.success(), r.error.as_deref());
    message(out, 2, &span);
    for (n, at) in r.attempts.iter().enumerate() {
        attempt_span(out, r, at, n, &trace_id, &span_id, op);
    }
}

fn attempt_span(
    out: &mut Vec<u8>,
    r: &CallbackRecord,
    at: &AttemptRecord,
    n: usize,
    trace_id: &[u8],
    parent: &[u8],
    op: &str,
) {
    let Some(span_id) = unhex(&at.span_id) else {
        return;
    };
    let mut span = Vec::new();
    bytes_field(&mut span, 1, trace_id);
    bytes_field(&mut span, 2, &span_id);
    bytes_field(&mut span, 4, parent);
    string(&mut span, 5, &format!("{op} {}", at.upstream_model));
    varint_field(&mut span, 6, 3); // SPAN_KIND_CLIENT
    fixed64(&mut span, 7, at.start_unix_nano);
    fixed64(&mut span, 8, at.end_unix_nano.max(at.start_unix_nano));
    let a = &mut span;
    attr(a, 9, "gen_ai.operation.name", Val::Str(op));
    attr(a, 9, "gen_ai.request.model", Val::Str(&at.upstream_model));
    attr(a, 9, "gen_ai.provider.name", Val::Str(&at.provider));
    attr(a, 9, "sluice.attempt", Val::Int(n as u64 + 1));
    attr(a, 9, "sluice.model_group", Val::Str(&at.group));
    attr(a, 9, "sluice.deployment", Val::Str(&at.deployment));
    attr(a, 9, "sluice.hedge", Val::Bool(at.hedge));
    let fallback = r.requested_model.as_deref().is_some_and(|m| m != at.group);
    attr(a, 9, "sluice.fallback", Val::Bool(fallback));
    attr(a, 9, "sluice.outcome", Val::Str(&at.result));
    let ok = matches!(at.result.as_str(), "ok" | "cancelled");
    if !ok {
        attr(a, 9, "error.type", Val::Str(&at.result));
    }
    status(a, ok, (!ok).then_some(at.result.as_str()));
    message(out, 2, &span);
}

/// `Status { message = 2; code = 3 }`: OK or ERROR.
fn status(out: &mut Vec<u8>, ok: bool, msg: Option<&str>) {
    let mut s = Vec::new();
    if let Some(m) = msg.filter(|_| !ok) {
        string(&mut s, 2, m);
    }
    varint_field(&mut s, 3, if ok { 1 } else { 2 });
    message(out, 15, &s);
}

enum Val<'a> {
    Str(&'a str),
    Int(u64),
    F64(f64),
    Bool(bool),
}

/// A `KeyValue { key = 1; AnyValue value = 2 }` as field `field` of the enclosing message.
fn attr(out: &mut Vec<u8>, field: u32, key: &str, v: Val<'_>) {
    let mut any = Vec::new();
    match v {
        Val::Str(s) => string(&mut any, 1, s),
        Val::Bool(b) => varint_field(&mut any, 2, u64::from(b)),
        Val::Int(i) => varint_field(&mut any, 3, i),
        Val::F64(f) => {
            tag(&mut any, 4, 1);
            any.extend_from_slice(&f.to_le_bytes());
        }
    }
    let mut kv = Vec::new();
    string(&mut kv, 1, key);
    message(&mut kv, 2, &any);
    message(out, field, &kv);
}

fn tag(out: &mut Vec<u8>, field: u32, wire: u8) {
    varint(out, (u64::from(field) << 3) | u64::from(wire));
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn varint_field(out: &mut Vec<u8>, field: u32, v: u64) {
    tag(out, field, 0);
    varint(out, v);
}

fn fixed64(out: &mut Vec<u8>, field: u32, v: u64) {
    tag(out, field, 1);
    out.extend_from_slice(&v.to_le_bytes());
}

fn bytes_field(out: &mut Vec<u8>, field: u32, b: &[u8]) {
    tag(out, field, 2);
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn string(out: &mut Vec<u8>, field: u32, s: &str) {
    bytes_field(out, field, s.as_bytes());
}

fn message(out: &mut Vec<u8>, field: u32, m: &[u8]) {
    bytes_field(out, field, m);
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_fields_follow_the_protobuf_encoding() {
        let mut v = Vec::new();
        varint(&mut v, 300);
        assert_eq!(v, [0xac, 0x02]);
        let mut m = Vec::new();
        string(&mut m, 1, "hi");
        assert_eq!(m, [0x0a, 2, b'h', b'i']);
        let mut f = Vec::new();
        fixed64(&mut f, 7, 1);
        assert_eq!(f, [0x39, 1, 0, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn records_without_trace_ids_make_no_spans() {
        let r = crate::telemetry::RequestRecord::new(
            http::HeaderValue::from_static("r1"),
            http::Method::POST,
            "/v1/chat/completions",
            std::time::Instant::now(),
        );
        let rec = Arc::new(CallbackRecord::from_record(&r, false));
        let with = {
            let mut r = r.clone();
            r.trace = Some(Box::new(crate::telemetry::TraceContext::from_headers(
                &HeaderMap::new(),
            )));
            Arc::new(CallbackRecord::from_record(&r, false))
        };
        let empty = export_request("s", &[rec]);
        let one = export_request("s", &[with]);
        assert!(one.len() > empty.len());
        assert!(one.windows(9).any(|w| w == b"sluice.re"));
    }
}
