//! The field numbers and enum values of the OTLP messages sluice writes, one module per
//! message, named as in opentelemetry-proto's .proto files (v1: `collector/trace/v1/
//! trace_service.proto`, `trace/v1/trace.proto`, `resource/v1/resource.proto`,
//! `common/v1/common.proto`). Only the fields sluice sets are here; a number is part of the
//! wire format and never changes (`decode_tests` reads the encoder's output back with the
//! generated types of those files).

/// `ExportTraceServiceRequest`: the body of an export.
pub mod export_trace_service_request {
    /// `repeated ResourceSpans resource_spans = 1`.
    pub const RESOURCE_SPANS: u32 = 1;
}

/// `ResourceSpans`: the spans of one resource (sluice is one).
pub mod resource_spans {
    /// `Resource resource = 1`.
    pub const RESOURCE: u32 = 1;
    /// `repeated ScopeSpans scope_spans = 2`.
    pub const SCOPE_SPANS: u32 = 2;
}

/// `Resource`: what emits the spans.
pub mod resource {
    /// `repeated KeyValue attributes = 1`.
    pub const ATTRIBUTES: u32 = 1;
}

/// `ScopeSpans`: the spans of one instrumentation scope.
pub mod scope_spans {
    /// `InstrumentationScope scope = 1`.
    pub const SCOPE: u32 = 1;
    /// `repeated Span spans = 2`.
    pub const SPANS: u32 = 2;
}

/// `InstrumentationScope`: the library that made the spans.
pub mod instrumentation_scope {
    /// `string name = 1`.
    pub const NAME: u32 = 1;
    /// `string version = 2`.
    pub const VERSION: u32 = 2;
}

/// `Span`, and its `SpanKind` values.
pub mod span {
    /// `bytes trace_id = 1` (16 bytes).
    pub const TRACE_ID: u32 = 1;
    /// `bytes span_id = 2` (8 bytes).
    pub const SPAN_ID: u32 = 2;
    /// `string trace_state = 3` (W3C `tracestate`).
    pub const TRACE_STATE: u32 = 3;
    /// `bytes parent_span_id = 4`.
    pub const PARENT_SPAN_ID: u32 = 4;
    /// `string name = 5`.
    pub const NAME: u32 = 5;
    /// `SpanKind kind = 6`.
    pub const KIND: u32 = 6;
    /// `fixed64 start_time_unix_nano = 7`.
    pub const START_TIME_UNIX_NANO: u32 = 7;
    /// `fixed64 end_time_unix_nano = 8`.
    pub const END_TIME_UNIX_NANO: u32 = 8;
    /// `repeated KeyValue attributes = 9`.
    pub const ATTRIBUTES: u32 = 9;
    /// `Status status = 15`.
    pub const STATUS: u32 = 15;

    /// `SPAN_KIND_SERVER`: a request sluice answered.
    pub const KIND_SERVER: u64 = 2;
    /// `SPAN_KIND_CLIENT`: a call sluice made (an upstream attempt, a tool call).
    pub const KIND_CLIENT: u64 = 3;
}

/// `Status`, and its `StatusCode` values.
pub mod status {
    /// `string message = 2` (field 1 is reserved).
    pub const MESSAGE: u32 = 2;
    /// `StatusCode code = 3`.
    pub const CODE: u32 = 3;

    /// `STATUS_CODE_OK`.
    pub const CODE_OK: u64 = 1;
    /// `STATUS_CODE_ERROR`.
    pub const CODE_ERROR: u64 = 2;
}

/// `KeyValue`: one attribute.
pub mod key_value {
    /// `string key = 1`.
    pub const KEY: u32 = 1;
    /// `AnyValue value = 2`.
    pub const VALUE: u32 = 2;
}

/// `AnyValue`: an attribute's value (a `oneof`).
pub mod any_value {
    /// `string string_value = 1`.
    pub const STRING_VALUE: u32 = 1;
    /// `bool bool_value = 2`.
    pub const BOOL_VALUE: u32 = 2;
    /// `int64 int_value = 3` (sluice's are never negative: the varint of the `u64`).
    pub const INT_VALUE: u32 = 3;
    /// `double double_value = 4`.
    pub const DOUBLE_VALUE: u32 = 4;
}
