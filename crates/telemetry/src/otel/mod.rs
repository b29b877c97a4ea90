//! OpenTelemetry traces over OTLP (HTTP/protobuf or gRPC), built from finished request records
//! on the otel sink's task, never on a request. Per request: one SERVER span (the request,
//! child of the client's `traceparent` when it sent one) and one CLIENT span per upstream
//! attempt, so retries, fallbacks and hedges show as siblings with their deployment and
//! outcome. Attributes follow the GenAI semantic conventions for what sluice knows without
//! parsing more of the body. The protobuf is written by hand (`wire`: a few message types, no
//! codegen crate to compile into the binary), each field by its name in the .proto files
//! (`fields`); `decode_tests` reads it back with OTLP's generated types.

use std::sync::Arc;

use bytes::BytesMut;
use http::header::{HeaderValue, CONTENT_TYPE};
use http::{HeaderMap, Method, Uri};

use super::callbacks::deliver::{ok_status, send, DeliverError, Http};
use super::callbacks::payload::{AttemptRecord, CallbackRecord, McpRecord};
use super::trace_context::unhex;

mod fields;
mod wire;

use fields::{
    any_value, export_trace_service_request as request, instrumentation_scope, key_value, resource,
    resource_spans, scope_spans, span, status as status_f,
};
use wire::{bytes_field, double, fixed64, nested, spaced, string, varint_field};

/// gRPC method path of the OTLP trace service.
const GRPC_PATH: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

/// Where a span's attributes go.
const ATTRS: u32 = span::ATTRIBUTES;

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
    let version = env!("CARGO_PKG_VERSION");
    nested(out, request::RESOURCE_SPANS, |rs| {
        nested(rs, resource_spans::RESOURCE, |res| {
            let a = resource::ATTRIBUTES;
            attr(res, a, "service.name", Val::Str(service_name));
            attr(res, a, "telemetry.sdk.name", Val::Str("sluice"));
            attr(res, a, "service.version", Val::Str(version));
        });
        nested(rs, resource_spans::SCOPE_SPANS, |ss| {
            nested(ss, scope_spans::SCOPE, |scope| {
                string(scope, instrumentation_scope::NAME, "sluice");
                string(scope, instrumentation_scope::VERSION, version);
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
    nested(out, scope_spans::SPANS, |a| {
        bytes_field(a, span::TRACE_ID, &trace_id);
        bytes_field(a, span::SPAN_ID, &span_id);
        if let Some(ts) = &t.trace_state {
            string(a, span::TRACE_STATE, ts);
        }
        if let Some(p) = t.parent_span_id.as_deref().and_then(id::<8>) {
            bytes_field(a, span::PARENT_SPAN_ID, &p);
        }
        spaced(a, span::NAME, op, requested);
        varint_field(a, span::KIND, span::KIND_SERVER);
        fixed64(a, span::START_TIME_UNIX_NANO, r.start_unix_nano);
        fixed64(a, span::END_TIME_UNIX_NANO, r.end_unix_nano);
        attr(a, ATTRS, "gen_ai.operation.name", Val::Str(op));
        if !requested.is_empty() {
            attr(a, ATTRS, "gen_ai.request.model", Val::Str(requested));
        }
        if let Some(m) = &r.upstream_model {
            attr(a, ATTRS, "gen_ai.response.model", Val::Str(m));
        }
        if let Some(p) = &r.provider {
            attr(a, ATTRS, "gen_ai.provider.name", Val::Str(p));
        }
        let u = &r.usage;
        if u.prompt_tokens + u.completion_tokens > 0 {
            attr(
                a,
                ATTRS,
                "gen_ai.usage.input_tokens",
                Val::Int(u.prompt_tokens),
            );
            attr(
                a,
                ATTRS,
                "gen_ai.usage.output_tokens",
                Val::Int(u.completion_tokens),
            );
            if u.cached_tokens > 0 {
                let cached = Val::Int(u.cached_tokens);
                attr(a, ATTRS, "gen_ai.usage.cache_read.input_tokens", cached);
            }
        }
        attr(a, ATTRS, "http.request.method", Val::Str("POST"));
        attr(a, ATTRS, "http.route", Val::Str(&r.route));
        let status_code = Val::Int(u64::from(r.status));
        attr(a, ATTRS, "http.response.status_code", status_code);
        attr(a, ATTRS, "sluice.request_id", Val::Str(&r.request_id));
        if let Some(g) = &r.model_group {
            attr(a, ATTRS, "sluice.model_group", Val::Str(g));
        }
        if let Some(d) = &r.deployment {
            attr(a, ATTRS, "sluice.deployment", Val::Str(d));
        }
        attr(a, ATTRS, "sluice.retries", Val::Int(u64::from(r.retries)));
        attr(
            a,
            ATTRS,
            "sluice.fallbacks",
            Val::Int(u64::from(r.fallbacks)),
        );
        attr(a, ATTRS, "sluice.hedges", Val::Int(u64::from(r.hedges)));
        attr(a, ATTRS, "sluice.overhead_ms", Val::F64(r.overhead_ms));
        attr(a, ATTRS, "gen_ai.request.stream", Val::Bool(r.stream));
        if let Some(ms) = r.ttfb_ms {
            attr(a, ATTRS, "sluice.ttfb_ms", Val::F64(ms));
        }
        if r.cache_hit {
            attr(a, ATTRS, "sluice.cache_hit", Val::Bool(true));
            if let Some(usd) = r.saved_cost {
                attr(a, ATTRS, "sluice.cache.saved_usd", Val::F64(usd));
            }
        }
        caller(a, r);
        if let Some(e) = &r.error {
            attr(a, ATTRS, "error.type", Val::Str(e));
        }
        if let Some(m) = &r.messages {
            attr(a, ATTRS, "gen_ai.input.messages", Val::Str(&m.to_string()));
        }
        if let Some(m) = &r.response {
            attr(a, ATTRS, "gen_ai.output.messages", Val::Str(&m.to_string()));
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
        attr(a, ATTRS, "sluice.key_alias", Val::Str(k));
    }
    if let Some(k) = &r.key_hash {
        attr(a, ATTRS, "sluice.key_hash", Val::Str(k));
    }
    if let Some(t) = &r.team_id {
        attr(a, ATTRS, "sluice.team_id", Val::Str(t));
    }
    if let Some(u) = &r.user_id {
        attr(a, ATTRS, "sluice.user_id", Val::Str(u));
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
    nested(out, scope_spans::SPANS, |a| {
        bytes_field(a, span::TRACE_ID, trace_id);
        bytes_field(a, span::SPAN_ID, span_id);
        if let Some(p) = parent.and_then(id::<8>) {
            bytes_field(a, span::PARENT_SPAN_ID, &p);
        }
        spaced(a, span::NAME, "execute_tool", tool);
        // Client: sluice calls the tool server.
        varint_field(a, span::KIND, span::KIND_CLIENT);
        fixed64(a, span::START_TIME_UNIX_NANO, r.start_unix_nano);
        fixed64(a, span::END_TIME_UNIX_NANO, r.end_unix_nano);
        attr(a, ATTRS, "gen_ai.operation.name", Val::Str("execute_tool"));
        if !tool.is_empty() {
            attr(a, ATTRS, "gen_ai.tool.name", Val::Str(tool));
        }
        attr(a, ATTRS, "mcp.method.name", Val::Str(&m.method));
        attr(a, ATTRS, "sluice.mcp.server", Val::Str(&m.server));
        attr(a, ATTRS, "sluice.mcp.status", Val::Str(&m.status));
        attr(a, ATTRS, "sluice.request_id", Val::Str(&r.request_id));
        if let Some(usd) = r.cost {
            attr(a, ATTRS, "sluice.cost_usd", Val::F64(usd));
        }
        caller(a, r);
        let ok = m.status == "ok";
        if !ok {
            attr(a, ATTRS, "error.type", Val::Str(&m.status));
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
    nested(out, scope_spans::SPANS, |a| {
        bytes_field(a, span::TRACE_ID, trace_id);
        bytes_field(a, span::SPAN_ID, &span_id);
        bytes_field(a, span::PARENT_SPAN_ID, parent);
        spaced(a, span::NAME, op, &at.upstream_model);
        varint_field(a, span::KIND, span::KIND_CLIENT);
        fixed64(a, span::START_TIME_UNIX_NANO, at.start_unix_nano);
        let end = at.end_unix_nano.max(at.start_unix_nano);
        fixed64(a, span::END_TIME_UNIX_NANO, end);
        attr(a, ATTRS, "gen_ai.operation.name", Val::Str(op));
        attr(
            a,
            ATTRS,
            "gen_ai.request.model",
            Val::Str(&at.upstream_model),
        );
        attr(a, ATTRS, "gen_ai.provider.name", Val::Str(&at.provider));
        attr(a, ATTRS, "sluice.attempt", Val::Int(n as u64 + 1));
        attr(a, ATTRS, "sluice.model_group", Val::Str(&at.group));
        attr(a, ATTRS, "sluice.deployment", Val::Str(&at.deployment));
        attr(a, ATTRS, "sluice.hedge", Val::Bool(at.hedge));
        let fallback = r.requested_model.as_deref().is_some_and(|m| m != at.group);
        attr(a, ATTRS, "sluice.fallback", Val::Bool(fallback));
        attr(a, ATTRS, "sluice.outcome", Val::Str(&at.result));
        let ok = matches!(at.result.as_str(), "ok" | "cancelled");
        if !ok {
            attr(a, ATTRS, "error.type", Val::Str(&at.result));
        }
        status(a, ok, (!ok).then_some(at.result.as_str()));
    });
}

/// A span's `Status`: OK, or ERROR with its message.
fn status(out: &mut BytesMut, ok: bool, msg: Option<&str>) {
    nested(out, span::STATUS, |s| {
        if let Some(m) = msg.filter(|_| !ok) {
            string(s, status_f::MESSAGE, m);
        }
        let code = if ok {
            status_f::CODE_OK
        } else {
            status_f::CODE_ERROR
        };
        varint_field(s, status_f::CODE, code);
    });
}

enum Val<'a> {
    Str(&'a str),
    Int(u64),
    F64(f64),
    Bool(bool),
}

/// A `KeyValue` (an attribute) as field `field` of the enclosing message (its `attributes`).
fn attr(out: &mut BytesMut, field: u32, key: &str, v: Val<'_>) {
    nested(out, field, |kv| {
        string(kv, key_value::KEY, key);
        nested(kv, key_value::VALUE, |any| match v {
            Val::Str(s) => string(any, any_value::STRING_VALUE, s),
            Val::Bool(b) => varint_field(any, any_value::BOOL_VALUE, u64::from(b)),
            Val::Int(i) => varint_field(any, any_value::INT_VALUE, i),
            Val::F64(f) => double(any, any_value::DOUBLE_VALUE, f),
        });
    });
}

#[cfg(test)]
mod decode_tests;

#[cfg(test)]
mod tests {
    use super::*;

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
