//! OpenTelemetry traces over OTLP (HTTP/protobuf or gRPC), built from finished request records
//! on the otel sink's task, never on a request. Per request: one SERVER span (the request,
//! child of the client's `traceparent` when it sent one) and one CLIENT span per upstream
//! attempt, so retries, fallbacks and hedges show as siblings with their deployment and
//! outcome. Attributes follow the GenAI semantic conventions for what sluice knows without
//! parsing more of the body. The protobuf is written by hand (a few message types; no codegen
//! crate to compile).

use std::sync::Arc;

use bytes::{BufMut, BytesMut};
use http::header::{HeaderValue, CONTENT_TYPE};
use http::{HeaderMap, Method, Uri};

use super::callbacks::deliver::{ok_status, send, DeliverError, Http};
use super::callbacks::payload::{AttemptRecord, CallbackRecord, McpRecord};
use super::trace_context::unhex;

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
    /// Export one batch of requests' spans, encoded into the sink's reusable buffer.
    pub async fn deliver(
        &self,
        batch: &[Arc<CallbackRecord>],
        buf: &mut BytesMut,
    ) -> Result<(), DeliverError> {
        buf.clear();
        let mut headers = self.headers.clone();
        if !self.grpc {
            export_request(buf, &self.service_name, batch);
            headers.insert(
                CONTENT_TYPE,
                HeaderValue::from_static("application/x-protobuf"),
            );
            let body = buf.split().freeze();
            let a = send(
                &self.http.client,
                Method::POST,
                self.uri.clone(),
                headers,
                body,
            )
            .await?;
            return ok_status(&a);
        }
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
        headers.insert("te", HeaderValue::from_static("trailers"));
        // gRPC frame: uncompressed flag and the message length ahead of the message.
        buf.extend_from_slice(&[0; 5]);
        export_request(buf, &self.service_name, batch);
        let len = u32::try_from(buf.len() - 5).unwrap_or(u32::MAX);
        buf[1..5].copy_from_slice(&len.to_be_bytes());
        let body = buf.split().freeze();
        let mut parts = self.uri.clone().into_parts();
        parts.path_and_query = Some(http::uri::PathAndQuery::from_static(GRPC_PATH));
        let uri = Uri::from_parts(parts).map_err(|e| DeliverError::Build(e.to_string()))?;
        let a = send(&self.http.h2, Method::POST, uri, headers, body).await?;
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

/// Append an `ExportTraceServiceRequest` for these records to `out`: one resource, one scope,
/// their spans. Records without trace ids (tracing was off when they were made) are skipped.
pub fn export_request(out: &mut BytesMut, service_name: &str, records: &[Arc<CallbackRecord>]) {
    nested(out, 1, |rs| {
        nested(rs, 1, |res| {
            attr(res, 1, "service.name", Val::Str(service_name));
            attr(res, 1, "telemetry.sdk.name", Val::Str("sluice"));
            attr(
                res,
                1,
                "service.version",
                Val::Str(env!("CARGO_PKG_VERSION")),
            );
        });
        nested(rs, 2, |ss| {
            nested(ss, 1, |scope| {
                string(scope, 1, "sluice");
                string(scope, 2, env!("CARGO_PKG_VERSION"));
            });
            for r in records {
                request_spans(ss, r);
            }
        });
    });
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

/// A trace or span id from its hex form.
fn id<const N: usize>(hex: &str) -> Option<[u8; N]> {
    unhex::<N>(hex.as_bytes())
}

fn request_spans(out: &mut BytesMut, r: &CallbackRecord) {
    let Some(t) = &r.trace else {
        return;
    };
    let (Some(trace_id), Some(span_id)) = (id::<16>(&t.trace_id), id::<8>(&t.span_id)) else {
        return;
    };
    if let Some(m) = &r.mcp {
        return tool_span(out, r, m, &trace_id, &span_id, t.parent_span_id.as_deref());
    }
    let op = operation(r.call_type.as_deref());
    let requested = r.requested_model.as_deref().unwrap_or("");
    nested(out, 2, |a| {
        bytes_field(a, 1, &trace_id);
        bytes_field(a, 2, &span_id);
        if let Some(ts) = &t.trace_state {
            string(a, 3, ts);
        }
        if let Some(p) = t.parent_span_id.as_deref().and_then(id::<8>) {
            bytes_field(a, 4, &p);
        }
        name(a, 5, op, requested);
        varint_field(a, 6, 2); // SPAN_KIND_SERVER
        fixed64(a, 7, r.start_unix_nano);
        fixed64(a, 8, r.end_unix_nano);
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
        let u = &r.usage;
        if u.prompt_tokens + u.completion_tokens > 0 {
            attr(a, 9, "gen_ai.usage.input_tokens", Val::Int(u.prompt_tokens));
            attr(
                a,
                9,
                "gen_ai.usage.output_tokens",
                Val::Int(u.completion_tokens),
            );
            if u.cached_tokens > 0 {
                let cached = Val::Int(u.cached_tokens);
                attr(a, 9, "gen_ai.usage.cache_read.input_tokens", cached);
            }
        }
        attr(a, 9, "http.request.method", Val::Str("POST"));
        attr(a, 9, "http.route", Val::Str(&r.route));
        let status_code = Val::Int(u64::from(r.status));
        attr(a, 9, "http.response.status_code", status_code);
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
        if r.cache_hit {
            attr(a, 9, "sluice.cache_hit", Val::Bool(true));
            if let Some(usd) = r.saved_cost {
                attr(a, 9, "sluice.cache.saved_usd", Val::F64(usd));
            }
        }
        caller(a, r);
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
    });
    for (n, at) in r.attempts.iter().enumerate() {
        attempt_span(out, r, at, n, &trace_id, &span_id, op);
    }
}

/// Who made the call: the key (alias and hash, never the key), its team and user.
fn caller(a: &mut BytesMut, r: &CallbackRecord) {
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
}

/// An MCP exchange's span (GenAI's `execute_tool`, MCP's `mcp.method.name`): a child of the
/// model request whose tool loop made it, or of the client's span for a call on `/mcp`.
fn tool_span(
    out: &mut BytesMut,
    r: &CallbackRecord,
    m: &McpRecord,
    trace_id: &[u8],
    span_id: &[u8],
    parent: Option<&str>,
) {
    let tool = m.tool.as_deref().unwrap_or("");
    nested(out, 2, |a| {
        bytes_field(a, 1, trace_id);
        bytes_field(a, 2, span_id);
        if let Some(p) = parent.and_then(id::<8>) {
            bytes_field(a, 4, &p);
        }
        name(a, 5, "execute_tool", tool);
        varint_field(a, 6, 3); // SPAN_KIND_CLIENT: sluice calls the tool server
        fixed64(a, 7, r.start_unix_nano);
        fixed64(a, 8, r.end_unix_nano);
        attr(a, 9, "gen_ai.operation.name", Val::Str("execute_tool"));
        if !tool.is_empty() {
            attr(a, 9, "gen_ai.tool.name", Val::Str(tool));
        }
        attr(a, 9, "mcp.method.name", Val::Str(&m.method));
        attr(a, 9, "sluice.mcp.server", Val::Str(&m.server));
        attr(a, 9, "sluice.mcp.status", Val::Str(&m.status));
        attr(a, 9, "sluice.request_id", Val::Str(&r.request_id));
        if let Some(usd) = r.cost {
            attr(a, 9, "sluice.cost_usd", Val::F64(usd));
        }
        caller(a, r);
        let ok = m.status == "ok";
        if !ok {
            attr(a, 9, "error.type", Val::Str(&m.status));
        }
        status(a, ok, m.error.as_deref().or(Some(&m.status)));
    });
}

fn attempt_span(
    out: &mut BytesMut,
    r: &CallbackRecord,
    at: &AttemptRecord,
    n: usize,
    trace_id: &[u8],
    parent: &[u8],
    op: &str,
) {
    let Some(span_id) = id::<8>(&at.span_id) else {
        return;
    };
    nested(out, 2, |a| {
        bytes_field(a, 1, trace_id);
        bytes_field(a, 2, &span_id);
        bytes_field(a, 4, parent);
        name(a, 5, op, &at.upstream_model);
        varint_field(a, 6, 3); // SPAN_KIND_CLIENT
        fixed64(a, 7, at.start_unix_nano);
        fixed64(a, 8, at.end_unix_nano.max(at.start_unix_nano));
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
    });
}

/// `Status { message = 2; code = 3 }`: OK or ERROR.
fn status(out: &mut BytesMut, ok: bool, msg: Option<&str>) {
    nested(out, 15, |s| {
        if let Some(m) = msg.filter(|_| !ok) {
            string(s, 2, m);
        }
        varint_field(s, 3, if ok { 1 } else { 2 });
    });
}

enum Val<'a> {
    Str(&'a str),
    Int(u64),
    F64(f64),
    Bool(bool),
}

/// A `KeyValue { key = 1; AnyValue value = 2 }` as field `field` of the enclosing message.
fn attr(out: &mut BytesMut, field: u32, key: &str, v: Val<'_>) {
    nested(out, field, |kv| {
        string(kv, 1, key);
        nested(kv, 2, |any| match v {
            Val::Str(s) => string(any, 1, s),
            Val::Bool(b) => varint_field(any, 2, u64::from(b)),
            Val::Int(i) => varint_field(any, 3, i),
            Val::F64(f) => {
                tag(any, 4, 1);
                any.extend_from_slice(&f.to_le_bytes());
            }
        });
    });
}

/// A length-delimited field whose contents `body` writes in place. The length goes in a
/// one-byte slot patched afterwards, and the contents shift right only when they turn out to
/// be 128 bytes or longer: no temporary buffer per message.
fn nested(out: &mut BytesMut, field: u32, body: impl FnOnce(&mut BytesMut)) {
    tag(out, field, 2);
    let slot = out.len();
    out.put_u8(0);
    body(out);
    let len = out.len() - slot - 1;
    let mut prefix = [0u8; 10];
    let n = varint_into(&mut prefix, len as u64);
    if n > 1 {
        let end = out.len();
        out.resize(end + n - 1, 0);
        out.copy_within(slot + 1..end, slot + n);
    }
    out[slot..slot + n].copy_from_slice(&prefix[..n]);
}

/// A span name, `"{operation} {model}"`, written without formatting a string first.
fn name(out: &mut BytesMut, field: u32, op: &str, model: &str) {
    tag(out, field, 2);
    varint(out, (op.len() + 1 + model.len()) as u64);
    out.extend_from_slice(op.as_bytes());
    out.put_u8(b' ');
    out.extend_from_slice(model.as_bytes());
}

fn tag(out: &mut BytesMut, field: u32, wire: u8) {
    varint(out, (u64::from(field) << 3) | u64::from(wire));
}

/// `v` as a protobuf varint into `buf`; returns the bytes used.
fn varint_into(buf: &mut [u8; 10], mut v: u64) -> usize {
    let mut n = 0;
    while v >= 0x80 {
        buf[n] = (v as u8) | 0x80;
        v >>= 7;
        n += 1;
    }
    buf[n] = v as u8;
    n + 1
}

fn varint(out: &mut BytesMut, v: u64) {
    let mut buf = [0u8; 10];
    let n = varint_into(&mut buf, v);
    out.extend_from_slice(&buf[..n]);
}

fn varint_field(out: &mut BytesMut, field: u32, v: u64) {
    tag(out, field, 0);
    varint(out, v);
}

fn fixed64(out: &mut BytesMut, field: u32, v: u64) {
    tag(out, field, 1);
    out.extend_from_slice(&v.to_le_bytes());
}

fn bytes_field(out: &mut BytesMut, field: u32, b: &[u8]) {
    tag(out, field, 2);
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn string(out: &mut BytesMut, field: u32, s: &str) {
    bytes_field(out, field, s.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_fields_follow_the_protobuf_encoding() {
        let mut v = BytesMut::new();
        varint(&mut v, 300);
        assert_eq!(&v[..], [0xac, 0x02]);
        let mut m = BytesMut::new();
        string(&mut m, 1, "hi");
        assert_eq!(&m[..], [0x0a, 2, b'h', b'i']);
        let mut f = BytesMut::new();
        fixed64(&mut f, 7, 1);
        assert_eq!(&f[..], [0x39, 1, 0, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn nested_messages_get_their_length_in_front_short_or_long() {
        for len in [0usize, 1, 127, 128, 300, 16_384, 70_000] {
            let body = vec![7u8; len];
            let mut out = BytesMut::from(&b"x"[..]);
            nested(&mut out, 2, |o| o.extend_from_slice(&body));
            let mut want = BytesMut::from(&b"x"[..]);
            bytes_field(&mut want, 2, &body);
            assert_eq!(out, want, "length {len}");
        }
        // Nested twice, the inner one long: both lengths right.
        let mut out = BytesMut::new();
        nested(&mut out, 1, |o| {
            string(o, 1, "k");
            nested(o, 2, |i| i.extend_from_slice(&[1u8; 200]));
        });
        let mut inner = BytesMut::new();
        bytes_field(&mut inner, 2, &[1u8; 200]);
        let mut mid = BytesMut::new();
        string(&mut mid, 1, "k");
        mid.extend_from_slice(&inner);
        let mut want = BytesMut::new();
        bytes_field(&mut want, 1, &mid);
        assert_eq!(out, want);
    }

    #[test]
    fn records_without_trace_ids_make_no_spans() {
        let r = sluice_core::record::RequestRecord::new(
            http::HeaderValue::from_static("r1"),
            http::Method::POST,
            "/v1/chat/completions",
            std::time::Instant::now(),
        );
        let rec = Arc::new(CallbackRecord::from_record(&r, false));
        let with = {
            let mut r = r.clone();
            r.trace = Some(Box::new(
                sluice_core::trace_context::TraceContext::from_headers(&HeaderMap::new()),
            ));
            Arc::new(CallbackRecord::from_record(&r, false))
        };
        let (mut empty, mut one) = (BytesMut::new(), BytesMut::new());
        export_request(&mut empty, "s", &[rec]);
        export_request(&mut one, "s", &[with]);
        assert!(one.len() > empty.len());
        assert!(one.windows(9).any(|w| w == b"sluice.re"));
    }
}
