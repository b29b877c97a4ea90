//! What the hand-written encoder writes, read back by OTLP's own generated types
//! (`opentelemetry-proto`) and protobuf's decoder (`prost`): every field sluice sets decodes to
//! the value it was given, under the field the .proto files name.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::BytesMut;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use opentelemetry_proto::tonic::trace::v1::status::StatusCode;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;

use super::export_request;
use crate::callbacks::payload::{AttemptRecord, CallbackRecord, McpRecord, TraceIds};

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const SPAN_ID: &str = "00f067aa0ba902b7";
const PARENT_ID: &str = "b7ad6b7169203331";

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// A record with nothing set but what `RequestRecord::new` gives.
fn bare() -> CallbackRecord {
    let r = sluice_core::record::RequestRecord::new(
        http::HeaderValue::from_static("req-1"),
        http::Method::POST,
        "/v1/chat/completions",
        std::time::Instant::now(),
    );
    CallbackRecord::from_record(&r, false)
}

fn attempt(span_id: &str, result: &str, hedge: bool, start: u64) -> AttemptRecord {
    AttemptRecord {
        span_id: span_id.to_owned(),
        group: "gpt".to_owned(),
        deployment: "gpt-east".to_owned(),
        upstream_model: "gpt-4o-2024".to_owned(),
        provider: "openai".to_owned(),
        hedge,
        start_unix_nano: start,
        end_unix_nano: start + 500,
        result: result.to_owned(),
    }
}

/// A chat request with every field the server span carries, and two attempts: a timeout,
/// then a hedge that answered.
fn chat() -> CallbackRecord {
    let mut r = bare();
    r.trace = Some(TraceIds {
        trace_id: TRACE_ID.to_owned(),
        span_id: SPAN_ID.to_owned(),
        parent_span_id: Some(PARENT_ID.to_owned()),
        trace_state: Some("vendor=1".to_owned()),
    });
    r.call_type = Some("chat_completions".to_owned());
    r.requested_model = Some("gpt".to_owned());
    r.upstream_model = Some("gpt-4o-2024".to_owned());
    r.provider = Some("openai".to_owned());
    r.model_group = Some("gpt".to_owned());
    r.deployment = Some("gpt-east".to_owned());
    r.key_alias = Some("ci".to_owned());
    r.key_hash = Some("88dc28d0".to_owned());
    r.team_id = Some("team-a".to_owned());
    r.user_id = Some("user-b".to_owned());
    r.start_unix_nano = 1_700_000_000_000_000_000;
    r.end_unix_nano = 1_700_000_000_250_000_000;
    r.status = 200;
    r.status_text = "success".to_owned();
    r.stream = true;
    r.usage.prompt_tokens = 12;
    r.usage.completion_tokens = 300;
    r.usage.cached_tokens = 4;
    r.overhead_ms = 0.125;
    r.ttfb_ms = Some(80.5);
    r.retries = 1;
    r.fallbacks = 0;
    r.hedges = 1;
    r.attempts = vec![
        attempt("1111111111111111", "timeout", false, r.start_unix_nano + 1),
        attempt("2222222222222222", "ok", true, r.start_unix_nano + 2),
    ];
    r
}

/// An MCP tool call that failed.
fn tool() -> CallbackRecord {
    let mut r = bare();
    r.trace = Some(TraceIds {
        trace_id: TRACE_ID.to_owned(),
        span_id: "3333333333333333".to_owned(),
        parent_span_id: Some(SPAN_ID.to_owned()),
        trace_state: None,
    });
    r.start_unix_nano = 5;
    r.end_unix_nano = 9;
    r.cost = Some(0.5);
    r.mcp = Some(McpRecord {
        server: "github".to_owned(),
        method: "tools/call".to_owned(),
        tool: Some("search".to_owned()),
        status: "error".to_owned(),
        error: Some("rate limited".to_owned()),
    });
    r
}

fn attrs(kvs: &[KeyValue]) -> HashMap<&str, &Value> {
    let map: HashMap<_, _> = kvs
        .iter()
        .map(|kv| {
            let v = kv.value.as_ref().and_then(|v| v.value.as_ref()).unwrap();
            (kv.key.as_str(), v)
        })
        .collect();
    assert_eq!(map.len(), kvs.len(), "an attribute is written twice");
    map
}

fn s(v: &str) -> Value {
    Value::StringValue(v.to_owned())
}

fn decode() -> ExportTraceServiceRequest {
    let mut buf = BytesMut::new();
    let records = [Arc::new(chat()), Arc::new(tool()), Arc::new(bare())];
    export_request(&mut buf, "gateway", &records);
    ExportTraceServiceRequest::decode(&buf[..]).unwrap()
}

#[test]
fn the_resource_and_scope_decode_as_written() {
    let req = decode();
    assert_eq!(req.resource_spans.len(), 1);
    let rs = &req.resource_spans[0];
    let resource = attrs(&rs.resource.as_ref().unwrap().attributes);
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(resource["service.name"], &s("gateway"));
    assert_eq!(resource["telemetry.sdk.name"], &s("sluice"));
    assert_eq!(resource["service.version"], &s(version));
    assert_eq!(resource.len(), 3);
    assert_eq!(rs.scope_spans.len(), 1);
    let scope = rs.scope_spans[0].scope.as_ref().unwrap();
    assert_eq!(
        (scope.name.as_str(), scope.version.as_str()),
        ("sluice", version)
    );
    // The chat's span and its two attempts, the tool's span; the bare record has no trace.
    assert_eq!(rs.scope_spans[0].spans.len(), 4);
}

/// A span's ids, trace state, name, kind and times.
type Head = (Vec<u8>, Vec<u8>, Vec<u8>, String, String, i32, (u64, u64));

fn head(span: &Span) -> Head {
    let times = (span.start_time_unix_nano, span.end_time_unix_nano);
    (
        span.trace_id.clone(),
        span.span_id.clone(),
        span.parent_span_id.clone(),
        span.trace_state.clone(),
        span.name.clone(),
        span.kind,
        times,
    )
}

fn spans() -> Vec<Span> {
    decode()
        .resource_spans
        .remove(0)
        .scope_spans
        .remove(0)
        .spans
}

#[test]
fn the_request_span_decodes_as_written() {
    let r = chat();
    let span = &spans()[0];
    let want: Head = (
        unhex(TRACE_ID),
        unhex(SPAN_ID),
        unhex(PARENT_ID),
        "vendor=1".to_owned(),
        "chat gpt".to_owned(),
        SpanKind::Server as i32,
        (r.start_unix_nano, r.end_unix_nano),
    );
    assert_eq!(head(span), want);
    let a = attrs(&span.attributes);
    let want = [
        ("gen_ai.operation.name", s("chat")),
        ("gen_ai.request.model", s("gpt")),
        ("gen_ai.response.model", s("gpt-4o-2024")),
        ("gen_ai.provider.name", s("openai")),
        ("gen_ai.usage.input_tokens", Value::IntValue(12)),
        ("gen_ai.usage.output_tokens", Value::IntValue(300)),
        ("gen_ai.usage.cache_read.input_tokens", Value::IntValue(4)),
        ("http.request.method", s("POST")),
        ("http.route", s("/v1/chat/completions")),
        ("http.response.status_code", Value::IntValue(200)),
        ("sluice.request_id", s("req-1")),
        ("sluice.model_group", s("gpt")),
        ("sluice.deployment", s("gpt-east")),
        ("sluice.retries", Value::IntValue(1)),
        ("sluice.fallbacks", Value::IntValue(0)),
        ("sluice.hedges", Value::IntValue(1)),
        ("sluice.overhead_ms", Value::DoubleValue(0.125)),
        ("gen_ai.request.stream", Value::BoolValue(true)),
        ("sluice.ttfb_ms", Value::DoubleValue(80.5)),
        ("sluice.key_alias", s("ci")),
        ("sluice.key_hash", s("88dc28d0")),
        ("sluice.team_id", s("team-a")),
        ("sluice.user_id", s("user-b")),
    ];
    for (key, value) in &want {
        assert_eq!(a.get(key), Some(&value), "{key}");
    }
    assert_eq!(a.len(), want.len(), "{a:?}");
    let status = span.status.as_ref().unwrap();
    assert_eq!(status.code, StatusCode::Ok as i32);
    assert_eq!(status.message, "");
}

#[test]
fn attempt_spans_decode_as_children_of_the_request() {
    let r = chat();
    let spans = spans();
    for (n, (span, at)) in spans[1..3].iter().zip(&r.attempts).enumerate() {
        let want: Head = (
            unhex(TRACE_ID),
            unhex(&at.span_id),
            unhex(SPAN_ID),
            String::new(),
            "chat gpt-4o-2024".to_owned(),
            SpanKind::Client as i32,
            (at.start_unix_nano, at.end_unix_nano),
        );
        assert_eq!(head(span), want);
        let a = attrs(&span.attributes);
        assert_eq!(a["sluice.attempt"], &Value::IntValue(n as i64 + 1));
        assert_eq!(a["gen_ai.request.model"], &s("gpt-4o-2024"));
        assert_eq!(a["gen_ai.provider.name"], &s("openai"));
        assert_eq!(a["sluice.model_group"], &s("gpt"));
        assert_eq!(a["sluice.deployment"], &s("gpt-east"));
        assert_eq!(a["sluice.hedge"], &Value::BoolValue(at.hedge));
        assert_eq!(a["sluice.fallback"], &Value::BoolValue(false));
        assert_eq!(a["sluice.outcome"], &s(&at.result));
        let status = span.status.as_ref().unwrap();
        if at.result == "ok" {
            assert_eq!(status.code, StatusCode::Ok as i32);
            assert!(!a.contains_key("error.type"));
        } else {
            assert_eq!(status.code, StatusCode::Error as i32);
            assert_eq!(status.message, at.result);
            assert_eq!(a["error.type"], &s(&at.result));
        }
    }
}

#[test]
fn a_tool_span_decodes_as_written() {
    let span = &spans()[3];
    let want: Head = (
        unhex(TRACE_ID),
        unhex("3333333333333333"),
        unhex(SPAN_ID),
        String::new(),
        "execute_tool search".to_owned(),
        SpanKind::Client as i32,
        (5, 9),
    );
    assert_eq!(head(span), want);
    let a = attrs(&span.attributes);
    assert_eq!(a["gen_ai.operation.name"], &s("execute_tool"));
    assert_eq!(a["gen_ai.tool.name"], &s("search"));
    assert_eq!(a["mcp.method.name"], &s("tools/call"));
    assert_eq!(a["sluice.mcp.server"], &s("github"));
    assert_eq!(a["sluice.mcp.status"], &s("error"));
    assert_eq!(a["sluice.cost_usd"], &Value::DoubleValue(0.5));
    assert_eq!(a["error.type"], &s("error"));
    let status = span.status.as_ref().unwrap();
    assert_eq!(status.code, StatusCode::Error as i32);
    assert_eq!(status.message, "rate limited");
}
