//! Google's Gemini API (`generateContent`) as a client dialect: a Gemini client's request read into the internal representation, and answers written back in Gemini's shape (whole, and streamed as `alt=sse` events; [`ArrayStream`] turns those into the JSON array a client without `alt=sse` reads).
//!
//! The google-genai SDKs and Gemini CLI speak camelCase, but the Python SDK dumps its pydantic
//! objects (function declarations, schemas, `thinkingConfig`, function responses) in
//! snake_case, which Google accepts too: every member is read in either spelling, and named in
//! camelCase when it is dropped or refused.
//!
//! Gemini function calls need not have ids. A call without one gets a stable id from its place
//! in the conversation (`call_<n>_<name>`, the ids the Gemini codec gives the calls of Gemini's
//! answers), and a `functionResponse` answers the call with its id, else the earliest
//! unanswered call of its name. Gemini 3's `thoughtSignature` on a function call travels in
//! the call's id ([`call_id`], [`signature_of`]): every client format keeps tool-call ids in
//! its history, so the signature comes back without a field of its own. Answers carry each
//! call's id (without the signature) and the signature on the part, so a client that echoes
//! both sends the upstream its own id again.
//!
//! Reasoning goes both ways: a thinking block is a `thought: true` text part whose
//! `thoughtSignature` is the block's signature; redacted thinking is an empty thought part
//! whose signature is the data behind a marker. Consecutive thought parts read back join into
//! one block (a streamed answer comes back as one part per chunk). Signatures and inline data
//! are base64; the Python SDK re-encodes them URL-safe, so they are read back to the standard
//! alphabet the other providers use.

use std::borrow::Cow;

use base64::Engine as _;
use http::StatusCode;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::ir::{
    ChatRequest, ChatResponse, Effort, ImageSource, Part, ResponseFormat, Role, StopReason,
    StreamEvent, Text, Thinking, Tool, ToolCall, ToolChoice,
};
use crate::params::{asks_nothing, Key};
use crate::{to_json, tool_input, Params, TranslateError};
use sluice_core::error::google_status;
use sluice_core::usage::Usage;

// ---------------------------------------------------------------------------------------------
// Tool-call ids and thought signatures

/// What separates a call id from the thought signature it carries (LiteLLM's spelling, so a
/// client that moves between the two gateways keeps its history).
const SIGNATURE: &str = "__thought__";

/// The stable id of the `n`-th function call of an answer (or of a conversation, for calls
/// read without an id), carrying Gemini's thought signature when it has one.
pub fn call_id(n: usize, name: &str, signature: Option<&str>) -> String {
    let id = format!("call_{n}_{name}");
    match signature {
        None => id,
        Some(s) => signed_id(&id, s),
    }
}

/// `id` carrying a thought signature. Base64's `+`, `/` and `=` are made `-`, `_` and
/// nothing, so the id stays within the characters Anthropic allows in ids.
pub fn signed_id(id: &str, signature: &str) -> String {
    let safe: String = signature
        .chars()
        .filter(|c| *c != '=')
        .map(|c| match c {
            '+' => '-',
            '/' => '_',
            c => c,
        })
        .collect();
    format!("{id}{SIGNATURE}{safe}")
}

/// The thought signature an id carries, in standard base64 as Gemini wrote it.
pub fn signature_of(id: &str) -> Option<String> {
    let (_, safe) = id.split_once(SIGNATURE)?;
    let mut s = standard_base64(safe);
    while s.len() % 4 != 0 {
        s.push('=');
    }
    (!s.is_empty()).then_some(s)
}

/// The id without the signature it carries: what a client is shown.
fn unsigned_id(id: &str) -> &str {
    id.split_once(SIGNATURE).map_or(id, |(id, _)| id)
}

/// The function name inside a synthesised id.
pub fn parse_call_id(id: &str) -> Option<&str> {
    let rest = unsigned_id(id).strip_prefix("call_")?;
    let (n, name) = rest.split_once('_')?;
    n.parse::<usize>().ok().map(|_| name)
}

/// Base64 in the standard alphabet (the Python SDK sends bytes URL-safe).
fn standard_base64(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '-' => '+',
            '_' => '/',
            c => c,
        })
        .collect()
}

/// Standard base64 with or without padding (the Python SDK pads, other clients may not);
/// trailing bits must be zero, as the Python SDK's decoding requires.
const BASE64: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    base64::engine::GeneralPurposeConfig::new()
        .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
);

/// The bytes of base64 in either alphabet.
fn decode_base64(s: &str) -> Option<Vec<u8>> {
    BASE64.decode(standard_base64(s)).ok()
}

/// Whether `s` is base64 the Python SDK decodes into bytes, as it does a `thoughtSignature`.
fn is_base64(s: &str) -> bool {
    decode_base64(s).is_some()
}

/// Base64 of `redacted:`, before the data of redacted thinking in a `thoughtSignature`: whole
/// base64 quanta, so it survives the SDK's decoding and re-encoding unchanged.
const REDACTED: &str = "cmVkYWN0ZWQ6";

// ---------------------------------------------------------------------------------------------
// Requests

/// Members that name state kept at Google (a cached prefix, a paused generation): refused even
/// with `drop_params`, since the request without them is a different request.
const STATEFUL: [&str; 2] = ["cachedContent", "continuationToken"];

/// A top-level `generateContent` member the reader does not carry: LiteLLM's routing fields
/// and a `model` repeating the URL's are sluice's; everything else (`safetySettings`, `labels`,
/// `serviceTier`, `store`, future fields) only tunes Google's service, so is a hint.
pub fn gemini_key(key: &str, _value: &Value) -> Key {
    match key {
        // Keys are named in camelCase by then (`num_retries` is `numRetries`).
        "model" | "fallbacks" | "numRetries" | "timeout" | "cache" => Key::Carried,
        _ => Key::Hint,
    }
}

/// A member's name in camelCase (`system_instruction` → `systemInstruction`).
fn camel(key: &str) -> Cow<'_, str> {
    if !key.contains('_') || key.starts_with('_') {
        return Cow::Borrowed(key);
    }
    let mut out = String::with_capacity(key.len());
    let mut upper = false;
    for c in key.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// The members of an object, or an error naming `param`.
fn object(v: Value, param: &'static str) -> Result<Map<String, Value>, TranslateError> {
    match v {
        Value::Object(o) => Ok(o),
        _ => Err(TranslateError::invalid(param, "expected an object")),
    }
}

fn number(v: &Value, param: &'static str, key: &str) -> Result<f64, TranslateError> {
    v.as_f64()
        .ok_or_else(|| TranslateError::invalid(param, &format!("`{key}` must be a number")))
}

/// A count; the Python SDK types some (`topK`) as floats, and proto JSON writes 64-bit ones
/// as strings.
fn count(v: &Value, param: &'static str, key: &str) -> Result<u64, TranslateError> {
    let n = match v {
        Value::String(s) => s.parse::<u64>().ok(),
        _ => v.as_u64().or_else(|| {
            v.as_f64()
                .filter(|f| *f >= 0.0 && f.fract() == 0.0 && *f <= u32::MAX.into())
                .map(|f| f as u64)
        }),
    };
    n.ok_or_else(|| TranslateError::invalid(param, &format!("`{key}` must be a count")))
}

fn strings(v: Value, param: &'static str, key: &str) -> Result<Vec<String>, TranslateError> {
    let bad = || TranslateError::invalid(param, &format!("`{key}` must be a list of strings"));
    let Value::Array(items) = v else {
        return Err(bad());
    };
    items
        .into_iter()
        .map(|i| match i {
            Value::String(s) => Ok(s),
            _ => Err(bad()),
        })
        .collect()
}

/// The top-level members the reader translates, in either spelling.
#[derive(Default)]
struct Members {
    contents: Option<Value>,
    system: Option<Value>,
    tools: Option<Value>,
    tool_config: Option<Value>,
    generation: Option<Value>,
}

/// Read a request body (the model and whether it streams come from the URL, not the body).
/// Members it does not carry are noted as hints or refused by `params` (see [`gemini_key`]);
/// `cachedContent` is refused even with `drop_params`.
pub fn parse_request(body: &[u8], params: &mut Params) -> Result<ChatRequest, TranslateError> {
    let raw: Map<String, Value> =
        serde_json::from_slice(body).map_err(TranslateError::bad_request)?;
    let mut m = Members::default();
    for (key, value) in raw {
        if value.is_null() {
            continue;
        }
        let key = camel(&key).into_owned();
        match key.as_str() {
            "contents" => m.contents = Some(value),
            "systemInstruction" => m.system = Some(value),
            "tools" => m.tools = Some(value),
            "toolConfig" => m.tool_config = Some(value),
            "generationConfig" => m.generation = Some(value),
            k if STATEFUL.contains(&k) => {
                if !asks_nothing(&value) {
                    return Err(TranslateError::Unsupported(key));
                }
            }
            _ => params.unread(key, &value, gemini_key)?,
        }
    }
    let mut req = ChatRequest::default();
    if let Some(g) = m.generation {
        read_generation(g, &mut req, params)?;
    }
    if let Some(s) = m.system {
        req.system = read_system(s, params)?;
    }
    if let Some(t) = m.tools {
        req.tools = read_tools(t, params)?;
    }
    if let Some(c) = m.tool_config {
        read_tool_config(c, &mut req, params)?;
    }
    let contents = match m.contents {
        Some(Value::Array(c)) if !c.is_empty() => c,
        Some(Value::Array(_)) | None => {
            return Err(TranslateError::invalid(
                "contents",
                "at least one content is required",
            ))
        }
        Some(_) => return Err(TranslateError::invalid("contents", "expected a list")),
    };
    let mut cx = Reading {
        params,
        calls: Vec::new(),
    };
    for (i, c) in contents.into_iter().enumerate() {
        cx.content(&mut req, c, i)?;
    }
    Ok(req)
}

// --- generationConfig ------------------------------------------------------------------------

/// `generationConfig`: sampling, limits, structured output and thinking are carried; what
/// changes what the answer is (more candidates, log-probabilities, output other than text) is
/// a meaning parameter; the other knobs only tune Gemini (hints).
fn read_generation(
    v: Value,
    req: &mut ChatRequest,
    params: &mut Params,
) -> Result<(), TranslateError> {
    const P: &str = "generationConfig";
    let mut mime = None;
    let mut schema = None;
    let mut json_schema = None;
    for (key, value) in object(v, P)? {
        if value.is_null() {
            continue;
        }
        let key = camel(&key).into_owned();
        match key.as_str() {
            "temperature" => req.temperature = Some(number(&value, P, &key)?),
            "topP" => req.top_p = Some(number(&value, P, &key)?),
            "topK" => req.top_k = Some(count(&value, P, &key)?),
            "maxOutputTokens" => req.max_tokens = Some(count(&value, P, &key)?),
            "stopSequences" => req.stop = strings(value, P, &key)?,
            "candidateCount" => {
                if count(&value, P, &key)? > 1 {
                    params.meaning("generationConfig.candidateCount")?;
                }
            }
            "responseLogprobs" | "logprobs" => {
                if !asks_nothing(&value) {
                    params.meaning(format!("{P}.{key}"))?;
                }
            }
            "responseModalities" => {
                let text_only = strings(value, P, &key)?
                    .iter()
                    .all(|m| m.eq_ignore_ascii_case("text"));
                if !text_only {
                    params.meaning("generationConfig.responseModalities")?;
                }
            }
            "responseMimeType" => match value {
                Value::String(s) => mime = Some(s),
                _ => {
                    return Err(TranslateError::invalid(
                        P,
                        "`responseMimeType` must be a string",
                    ))
                }
            },
            "responseSchema" => schema = Some(value),
            "responseJsonSchema" | "_responseJsonSchema" => json_schema = Some(value),
            "thinkingConfig" => req.thinking = read_thinking(value, params)?,
            // Sampling knobs (the answer is one the model could give anyway), media input
            // resolution, speech and image settings for output modalities refused above, ...
            _ => {
                if !asks_nothing(&value) {
                    params.hint(format!("{P}.{key}"));
                }
            }
        }
    }
    req.response_format = response_format(mime.as_deref(), schema, json_schema, params)?;
    Ok(())
}

/// Structured output: JSON, with a schema when one is given (`responseSchema` in Gemini's
/// OpenAPI subset made JSON Schema, `responseJsonSchema` as is). Plain text asks for nothing;
/// any other type (`text/x.enum`) cannot be carried.
fn response_format(
    mime: Option<&str>,
    schema: Option<Value>,
    json_schema: Option<Value>,
    params: &mut Params,
) -> Result<Option<ResponseFormat>, TranslateError> {
    let schema = json_schema.or_else(|| schema.as_ref().map(json_schema_of));
    let mime = mime.map(str::to_ascii_lowercase);
    match mime.as_deref() {
        None | Some("" | "application/json") => Ok(match schema {
            Some(schema) => Some(ResponseFormat::Schema {
                name: "response".into(),
                schema,
                strict: None,
            }),
            None if mime.as_deref() == Some("application/json") => Some(ResponseFormat::Json),
            None => None,
        }),
        Some("text/plain") => {
            if schema.is_some() {
                params.hint("generationConfig.responseSchema");
            }
            Ok(None)
        }
        Some(_) => {
            params.meaning("generationConfig.responseMimeType")?;
            Ok(None)
        }
    }
}

/// `thinkingConfig`: a budget (`-1` is dynamic: the model decides; `0` turns thinking off) or
/// a level. Asking only to see the thoughts asks for thinking at the model's discretion.
fn read_thinking(v: Value, params: &mut Params) -> Result<Option<Thinking>, TranslateError> {
    const P: &str = "generationConfig";
    let mut budget = None;
    let mut level = None;
    let mut include = false;
    for (key, value) in object(v, P)? {
        if value.is_null() {
            continue;
        }
        match camel(&key).as_ref() {
            "thinkingBudget" => {
                budget = Some(match value.as_i64() {
                    Some(-1) => Thinking::Adaptive(None),
                    Some(0) => Thinking::Effort(Effort::None),
                    Some(n) if n > 0 => Thinking::Budget(n.unsigned_abs()),
                    _ => {
                        return Err(TranslateError::invalid(
                            P,
                            "`thinkingConfig.thinkingBudget` must be -1, 0 or a count",
                        ))
                    }
                });
            }
            "thinkingLevel" => {
                let name = value.as_str().unwrap_or_default().to_ascii_lowercase();
                match name.as_str() {
                    "" | "thinking_level_unspecified" => {}
                    "minimal" | "low" | "medium" | "high" | "xhigh" => {
                        level = Effort::parse(&name).map(Thinking::Effort);
                    }
                    _ => params.hint("generationConfig.thinkingConfig.thinkingLevel"),
                }
            }
            "includeThoughts" => include = value.as_bool() == Some(true),
            other => {
                if !asks_nothing(&value) {
                    params.hint(format!("generationConfig.thinkingConfig.{other}"));
                }
            }
        }
    }
    match (budget, level) {
        (Some(_), Some(_)) => Err(TranslateError::invalid(
            P,
            "`thinkingConfig` takes `thinkingBudget` or `thinkingLevel`, not both",
        )),
        (Some(t), None) | (None, Some(t)) => Ok(Some(t)),
        (None, None) => Ok(include.then_some(Thinking::Adaptive(None))),
    }
}

// --- Schemas ----------------------------------------------------------------------------------

/// Schema keywords whose value is one schema.
const ONE_SCHEMA: [&str; 3] = ["items", "additionalProperties", "not"];
/// Schema keywords whose value is a list of schemas.
const SCHEMA_LIST: [&str; 4] = ["anyOf", "oneOf", "allOf", "prefixItems"];
/// Schema keywords holding counts, which proto JSON may write as strings.
const COUNTS: [&str; 6] = [
    "maxItems",
    "minItems",
    "maxLength",
    "minLength",
    "maxProperties",
    "minProperties",
];

/// A schema in Gemini's OpenAPI subset (`responseSchema`, a declaration's `parameters`) as the
/// JSON Schema other providers take: types in lowercase, `nullable` as a `null` type,
/// `propertyOrdering` (Gemini's own) left out, `example` as `examples`, keywords in camelCase,
/// `$ref`/`$defs` spelt so. A schema already in JSON Schema comes out the same.
pub fn json_schema_of(schema: &Value) -> Value {
    let Value::Object(s) = schema else {
        return schema.clone();
    };
    let mut out = Map::new();
    let mut nullable = false;
    for (key, value) in s {
        let key = camel(key);
        let key = key.as_ref();
        match key {
            "type" => {
                if let Some(t) = value.as_str() {
                    let t = t.to_ascii_lowercase();
                    if t != "type_unspecified" {
                        out.insert("type".into(), t.into());
                    }
                } else {
                    out.insert("type".into(), value.clone());
                }
            }
            "nullable" => nullable = value.as_bool() == Some(true),
            "propertyOrdering" => {}
            "properties" | "defs" | "$defs" => {
                let name = if key == "properties" {
                    "properties"
                } else {
                    "$defs"
                };
                let map = match value {
                    Value::Object(m) => m
                        .iter()
                        .map(|(k, v)| (k.clone(), json_schema_of(v)))
                        .collect(),
                    _ => Map::new(),
                };
                out.insert(name.into(), Value::Object(map));
            }
            "ref" | "$ref" => {
                out.insert("$ref".into(), value.clone());
            }
            "example" => {
                out.insert("examples".into(), json!([value]));
            }
            "format" if value == "enum" => {}
            k if ONE_SCHEMA.contains(&k) => {
                out.insert(k.into(), json_schema_of(value));
            }
            k if SCHEMA_LIST.contains(&k) => {
                let list = value
                    .as_array()
                    .map(|l| l.iter().map(json_schema_of).collect())
                    .unwrap_or_default();
                out.insert(k.into(), Value::Array(list));
            }
            k if COUNTS.contains(&k) => {
                let n = value
                    .as_str()
                    .and_then(|s| s.parse::<u64>().ok())
                    .map_or_else(|| value.clone(), Value::from);
                out.insert(k.into(), n);
            }
            k => {
                out.insert(k.into(), value.clone());
            }
        }
    }
    if nullable {
        make_nullable(&mut out);
    }
    Value::Object(out)
}

/// Add `null` to what a schema allows: to its type, or to its alternatives.
fn make_nullable(schema: &mut Map<String, Value>) {
    let null = Value::from("null");
    match schema.get_mut("type") {
        Some(Value::Array(types)) => {
            if !types.contains(&null) {
                types.push(null);
            }
        }
        Some(t) => {
            if *t != null {
                *t = Value::Array(vec![t.take(), null]);
            }
        }
        None => {
            if let Some(Value::Array(alternatives)) = schema.get_mut("anyOf") {
                alternatives.push(json!({"type": "null"}));
            }
        }
    }
}

// --- Tools ------------------------------------------------------------------------------------

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawDeclaration {
    #[serde(default)]
    name: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    parameters: Option<Value>,
    #[serde(default, alias = "parameters_json_schema")]
    parameters_json_schema: Option<Value>,
    /// `response`, `responseJsonSchema`, `behavior`: hints, as `tools.functionDeclarations.<key>`.
    #[serde(flatten)]
    rest: Map<String, Value>,
}

/// `tools`: function declarations become tools; a built-in tool (`googleSearch`,
/// `codeExecution`, `urlContext`, `fileSearch`, `googleMaps`, `computerUse`, MCP servers, ...)
/// runs only at Google, so the answer would depend on what no translated target can do.
fn read_tools(v: Value, params: &mut Params) -> Result<Vec<Tool>, TranslateError> {
    let Value::Array(list) = v else {
        return Err(TranslateError::invalid("tools", "expected a list"));
    };
    let mut tools = Vec::new();
    for t in list {
        for (key, value) in object(t, "tools")? {
            if value.is_null() {
                continue;
            }
            let key = camel(&key).into_owned();
            if key != "functionDeclarations" {
                params.meaning(format!("tools.{key}"))?;
                continue;
            }
            let Value::Array(decls) = value else {
                return Err(TranslateError::invalid(
                    "tools",
                    "`functionDeclarations` must be a list",
                ));
            };
            for d in decls {
                tools.push(read_declaration(d, params)?);
            }
        }
    }
    Ok(tools)
}

fn read_declaration(d: Value, params: &mut Params) -> Result<Tool, TranslateError> {
    let d: RawDeclaration = serde_json::from_value(d)
        .map_err(|e| TranslateError::invalid("tools", &format!("functionDeclarations: {e}")))?;
    if d.name.is_empty() {
        return Err(TranslateError::invalid(
            "tools",
            "a function declaration without `name`",
        ));
    }
    for (key, value) in &d.rest {
        if !asks_nothing(value) {
            params.hint(format!("tools.functionDeclarations.{}", camel(key)));
        }
    }
    let parameters = match (d.parameters_json_schema, d.parameters) {
        (Some(schema), _) if !schema.is_null() => schema,
        (_, Some(schema)) if !schema.is_null() => json_schema_of(&schema),
        _ => json!({"type": "object", "properties": {}}),
    };
    Ok(Tool {
        name: d.name,
        description: d.description.filter(|s| !s.is_empty()),
        parameters,
        cache_control: None,
    })
}

/// `toolConfig.functionCallingConfig`: `AUTO`, `NONE`, and `ANY` (one allowed function is
/// that tool; several keep only those tools). `VALIDATED` (calls checked against their
/// schema) is the model's own choice elsewhere: its checking is a hint. The retrieval
/// settings of built-in tools are hints.
fn read_tool_config(
    v: Value,
    req: &mut ChatRequest,
    params: &mut Params,
) -> Result<(), TranslateError> {
    const P: &str = "toolConfig";
    let mut mode = String::new();
    let mut allowed = Vec::new();
    for (key, value) in object(v, P)? {
        if value.is_null() {
            continue;
        }
        let key = camel(&key).into_owned();
        if key != "functionCallingConfig" {
            if !asks_nothing(&value) {
                params.hint(format!("{P}.{key}"));
            }
            continue;
        }
        for (key, value) in object(value, P)? {
            if value.is_null() {
                continue;
            }
            match camel(&key).as_ref() {
                "mode" => {
                    mode = value
                        .as_str()
                        .ok_or_else(|| TranslateError::invalid(P, "`mode` must be a string"))?
                        .to_ascii_uppercase();
                }
                "allowedFunctionNames" => allowed = strings(value, P, "allowedFunctionNames")?,
                other => {
                    if !asks_nothing(&value) {
                        params.hint(format!("{P}.functionCallingConfig.{other}"));
                    }
                }
            }
        }
    }
    let choice = match mode.as_str() {
        "" | "MODE_UNSPECIFIED" => None,
        "AUTO" => Some(ToolChoice::Auto),
        "NONE" => Some(ToolChoice::None),
        "ANY" => Some(match allowed.as_slice() {
            [one] => ToolChoice::Tool(one.clone()),
            [] => ToolChoice::Any,
            many => {
                req.tools.retain(|t| many.contains(&t.name));
                ToolChoice::Any
            }
        }),
        "VALIDATED" => {
            params.hint("toolConfig.functionCallingConfig.mode");
            if !allowed.is_empty() {
                req.tools.retain(|t| allowed.contains(&t.name));
            }
            Some(ToolChoice::Auto)
        }
        other => {
            return Err(TranslateError::invalid(
                P,
                &format!("unknown functionCallingConfig mode `{other}`"),
            ))
        }
    };
    if !req.tools.is_empty() {
        req.tool_choice = choice;
    }
    Ok(())
}

// --- systemInstruction ------------------------------------------------------------------------

/// `systemInstruction`: a Content whose text parts are the system prompt, in order (a plain
/// string is taken too). Other parts cannot be a system prompt elsewhere.
fn read_system(v: Value, params: &mut Params) -> Result<Vec<Text>, TranslateError> {
    const P: &str = "systemInstruction";
    let parts = match v {
        Value::String(s) => return Ok(vec![Text::plain(s)]),
        Value::Object(mut o) => o.remove("parts").unwrap_or(Value::Null),
        _ => return Err(TranslateError::invalid(P, "expected a Content")),
    };
    let parts = match parts {
        Value::Null => Vec::new(),
        Value::Array(p) => p,
        _ => return Err(TranslateError::invalid(P, "`parts` must be a list")),
    };
    let mut system = Vec::with_capacity(parts.len());
    for p in parts {
        match p.get("text") {
            Some(Value::String(t)) => {
                if !t.is_empty() {
                    system.push(Text::plain(t.clone()));
                }
            }
            Some(Value::Null) => {}
            Some(_) => return Err(TranslateError::invalid(P, "`text` must be a string")),
            None => {
                if p.as_object()
                    .is_some_and(|o| o.values().any(|v| !v.is_null()))
                {
                    params.meaning("systemInstruction.parts")?;
                }
            }
        }
    }
    Ok(system)
}

// --- contents ---------------------------------------------------------------------------------

#[derive(Deserialize)]
struct RawContent {
    #[serde(default)]
    role: Option<String>,
    #[serde(default)]
    parts: Option<Vec<Value>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawPart {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    thought: Option<bool>,
    #[serde(default, alias = "thought_signature")]
    thought_signature: Option<String>,
    #[serde(default, alias = "inline_data")]
    inline_data: Option<RawBlob>,
    #[serde(default, alias = "file_data")]
    file_data: Option<RawFileData>,
    #[serde(default, alias = "function_call")]
    function_call: Option<RawCall>,
    #[serde(default, alias = "function_response")]
    function_response: Option<RawFunctionResponse>,
    /// Metadata (`mediaResolution`, `videoMetadata`, `partMetadata`) and data kinds sluice
    /// does not translate (`executableCode`, `codeExecutionResult`, `toolCall`, ...).
    #[serde(flatten)]
    rest: Map<String, Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawBlob {
    #[serde(default, alias = "mime_type")]
    mime_type: String,
    #[serde(default)]
    data: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawFileData {
    #[serde(default, alias = "mime_type")]
    mime_type: Option<String>,
    #[serde(default, alias = "file_uri")]
    file_uri: String,
}

#[derive(Deserialize)]
struct RawCall {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    name: String,
    #[serde(default)]
    args: Option<Value>,
}

#[derive(Deserialize)]
struct RawFunctionResponse {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    name: String,
    #[serde(default)]
    response: Option<Value>,
    /// Multimodal results (Gemini 3): images and files beside `response`.
    #[serde(default)]
    parts: Vec<RawResponsePart>,
    /// `willContinue`, `scheduling` (the Live API's): hints.
    #[serde(flatten)]
    rest: Map<String, Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawResponsePart {
    #[serde(default, alias = "inline_data")]
    inline_data: Option<RawBlob>,
    #[serde(default, alias = "file_data")]
    file_data: Option<RawFileData>,
}

/// Part members that only describe the part's data: hints.
const PART_METADATA: [&str; 3] = ["mediaResolution", "videoMetadata", "partMetadata"];

/// A function call met in the conversation.
struct Call {
    /// The id the client gave it, if any.
    shown: Option<String>,
    /// Its id in the internal request.
    id: String,
    name: String,
    answered: bool,
}

/// What reading the conversation keeps: the policy, and the calls met so far (to give calls
/// without ids stable ones and match the responses to them).
struct Reading<'p> {
    params: &'p mut Params,
    calls: Vec<Call>,
}

/// Where a part is, for errors.
#[derive(Clone, Copy)]
struct At {
    content: usize,
    part: usize,
}

impl At {
    fn invalid(self, what: &str) -> TranslateError {
        TranslateError::invalid(
            "contents",
            &format!("contents[{}].parts[{}]: {what}", self.content, self.part),
        )
    }
}

impl Reading<'_> {
    /// One Content: its role and parts, joined to the previous turn when the same role speaks.
    fn content(&mut self, req: &mut ChatRequest, c: Value, i: usize) -> Result<(), TranslateError> {
        let c: RawContent = serde_json::from_value(c)
            .map_err(|e| TranslateError::invalid("contents", &format!("contents[{i}]: {e}")))?;
        let role = match c.role.as_deref() {
            // A single-turn request may leave the role out; older clients send function
            // responses as `function` turns.
            None | Some("" | "user" | "function" | "tool") => Role::User,
            Some("model") => Role::Assistant,
            Some(other) => {
                return Err(TranslateError::invalid(
                    "contents",
                    &format!("contents[{i}]: unknown role `{other}`"),
                ))
            }
        };
        for (j, p) in c.parts.unwrap_or_default().into_iter().enumerate() {
            let at = At {
                content: i,
                part: j,
            };
            let p: RawPart = serde_json::from_value(p).map_err(|e| at.invalid(&e.to_string()))?;
            if let Some(part) = self.part(p, role, at)? {
                // Calls are the model's and their results the caller's, wherever sent.
                let role = match part {
                    Part::ToolCall(_) => Role::Assistant,
                    Part::ToolResult { .. } => Role::User,
                    _ => role,
                };
                push_part(req, role, part);
            }
        }
        Ok(())
    }

    fn part(&mut self, p: RawPart, role: Role, at: At) -> Result<Option<Part>, TranslateError> {
        let has_data = p.text.is_some()
            || p.inline_data.is_some()
            || p.file_data.is_some()
            || p.function_call.is_some()
            || p.function_response.is_some();
        for (key, value) in &p.rest {
            if value.is_null() {
                continue;
            }
            let key = camel(key);
            if has_data || PART_METADATA.contains(&key.as_ref()) {
                if !asks_nothing(value) {
                    self.params.hint(format!("contents.parts.{key}"));
                }
            } else {
                // Data of a kind sluice cannot translate (code execution, server-side tool
                // calls, ...): history only Gemini can read.
                self.params.meaning(format!("contents.parts.{key}"))?;
            }
        }
        if let Some(call) = p.function_call {
            return Ok(Some(self.call(call, p.thought_signature.as_deref(), at)?));
        }
        if let Some(response) = p.function_response {
            return Ok(Some(self.response(response, at)?));
        }
        if let Some(blob) = p.inline_data {
            return self.blob(blob, at);
        }
        if let Some(file) = p.file_data {
            return self.file(file, at);
        }
        let Some(text) = p.text else {
            return Ok(None);
        };
        if p.thought == Some(true) && role == Role::Assistant {
            return Ok(thinking(text, p.thought_signature));
        }
        Ok((!text.is_empty()).then(|| Part::Text(Text::plain(text))))
    }

    /// A function call: the client's id, else a stable one by its place in the conversation;
    /// the signature rides in the id.
    fn call(
        &mut self,
        call: RawCall,
        signature: Option<&str>,
        at: At,
    ) -> Result<Part, TranslateError> {
        if call.name.is_empty() {
            return Err(at.invalid("a functionCall without `name`"));
        }
        let shown = call.id.filter(|id| !id.is_empty());
        let signature = signature.filter(|s| !s.is_empty());
        let id = match (&shown, signature) {
            (Some(id), Some(s)) => signed_id(id, s),
            (Some(id), None) => id.clone(),
            (None, s) => call_id(self.calls.len(), &call.name, s),
        };
        let arguments = match call.args {
            None | Some(Value::Null) => "{}".to_owned(),
            Some(args) => args.to_string(),
        };
        self.calls.push(Call {
            shown,
            id: id.clone(),
            name: call.name.clone(),
            answered: false,
        });
        Ok(Part::ToolCall(ToolCall {
            id,
            name: call.name,
            arguments,
        }))
    }

    /// The call a function response answers: the one with its id, else the earliest
    /// unanswered one of its name. A response that answers no call keeps its own id (or gets
    /// one), for the target to judge.
    fn answered_id(&mut self, id: Option<&str>, name: &str) -> String {
        let by_id = id.and_then(|id| {
            self.calls
                .iter()
                .position(|c| !c.answered && (c.shown.as_deref() == Some(id) || c.id == id))
        });
        let found = by_id.or_else(|| {
            self.calls
                .iter()
                .position(|c| !c.answered && c.name == name)
        });
        if let Some(c) = found.and_then(|i| self.calls.get_mut(i)) {
            c.answered = true;
            return c.id.clone();
        }
        let id = id.map_or_else(|| call_id(self.calls.len(), name, None), str::to_owned);
        self.calls.push(Call {
            shown: None,
            id: id.clone(),
            name: name.to_owned(),
            answered: true,
        });
        id
    }

    fn response(&mut self, r: RawFunctionResponse, at: At) -> Result<Part, TranslateError> {
        if r.name.is_empty() && r.id.as_deref().is_none_or(str::is_empty) {
            return Err(at.invalid("a functionResponse without `name`"));
        }
        for (key, value) in &r.rest {
            if !asks_nothing(value) {
                self.params
                    .hint(format!("contents.parts.functionResponse.{}", camel(key)));
            }
        }
        let id = self.answered_id(r.id.as_deref().filter(|i| !i.is_empty()), &r.name);
        let (mut content, is_error) = result_content(r.response);
        for p in r.parts {
            let part = match (p.inline_data, p.file_data) {
                (Some(blob), _) => self.blob(blob, at)?,
                (None, Some(file)) => self.file(file, at)?,
                (None, None) => None,
            };
            content.extend(part);
        }
        Ok(Part::ToolResult {
            id,
            content,
            is_error,
            cache_control: None,
        })
    }

    /// Inline bytes: an image, or text (decoded); anything else (PDF, audio, video) has no
    /// place in the internal request.
    fn blob(&mut self, blob: RawBlob, at: At) -> Result<Option<Part>, TranslateError> {
        let mime = blob.mime_type.to_ascii_lowercase();
        if mime.starts_with("image/") {
            return Ok(Some(Part::Image {
                source: ImageSource::Base64 {
                    media_type: mime,
                    data: standard_base64(&blob.data),
                },
                cache_control: None,
            }));
        }
        if mime.starts_with("text/") || mime == "application/json" {
            let bytes = decode_base64(&blob.data)
                .ok_or_else(|| at.invalid("inlineData.data is not base64"))?;
            let text =
                String::from_utf8(bytes).map_err(|_| at.invalid("text inlineData is not UTF-8"))?;
            return Ok((!text.is_empty()).then(|| Part::Text(Text::plain(text))));
        }
        self.params.meaning_or("inlineData", || {
            at.invalid(&format!(
                "inlineData of type `{mime}` cannot be sent to this model; only images and text"
            ))
        })?;
        Ok(None)
    }

    /// A file by URI: an image the target fetches. A file uploaded to Google's Files API, or
    /// one that is not an image, has no place in the internal request.
    fn file(&mut self, file: RawFileData, at: At) -> Result<Option<Part>, TranslateError> {
        let uri = file.file_uri;
        let mime = file.mime_type.unwrap_or_default().to_ascii_lowercase();
        if uri.starts_with("https://generativelanguage.googleapis.com/") {
            self.params.meaning_or("fileData", || {
                at.invalid("fileData names a file in Google's Files API, which only Gemini reads")
            })?;
            return Ok(None);
        }
        if mime.is_empty() || mime.starts_with("image/") {
            return Ok(Some(Part::Image {
                source: ImageSource::Url(uri),
                cache_control: None,
            }));
        }
        self.params.meaning_or("fileData", || {
            at.invalid(&format!(
                "fileData of type `{mime}` cannot be sent to this model; only images"
            ))
        })?;
        Ok(None)
    }
}

/// A thought part: thinking with its signature; redacted thinking when the signature is its
/// data behind the marker.
fn thinking(text: String, signature: Option<String>) -> Option<Part> {
    let signature = signature
        .filter(|s| !s.is_empty())
        .map(|s| standard_base64(&s));
    if text.is_empty() {
        if let Some(data) = signature.as_deref().and_then(|s| s.strip_prefix(REDACTED)) {
            return Some(Part::RedactedThinking(data.to_owned()));
        }
        signature.as_ref()?;
    }
    Some(Part::Thinking { text, signature })
}

/// Append a part to the conversation. A thought part continues the thinking block before it
/// while that block is unsigned (a streamed answer's thoughts come back one part per chunk,
/// the signature last).
fn push_part(req: &mut ChatRequest, role: Role, part: Part) {
    if let Part::Thinking { text, signature } = &part {
        if let Some(last) = req.messages.last_mut().filter(|m| m.role == role) {
            if let Some(Part::Thinking {
                text: t,
                signature: s @ None,
            }) = last.content.last_mut()
            {
                t.push_str(text);
                *s = signature.clone();
                return;
            }
        }
    }
    req.push_turn(role, vec![part]);
}

/// A function response's `response` as a tool result's content: `{"error": …}` alone is a
/// failure; `{"output" | "content" | "result": "<text>"}` alone is that text (the Gemini
/// codec writes `content`, the Python SDK's automatic calling `result`); any other object is
/// its JSON.
fn result_content(response: Option<Value>) -> (Vec<Part>, bool) {
    let text = |v: Value| match v {
        Value::String(s) => s,
        v => v.to_string(),
    };
    let (text, is_error) = match response {
        None | Some(Value::Null) => (String::new(), false),
        Some(Value::Object(mut o)) if o.len() == 1 => {
            let only = o.keys().next().cloned().unwrap_or_default();
            match (only.as_str(), o.get(&only)) {
                ("error", _) => (o.remove("error").map(text).unwrap_or_default(), true),
                ("output" | "content" | "result", Some(Value::String(_))) => {
                    (o.remove(&only).map(text).unwrap_or_default(), false)
                }
                _ => (Value::Object(o).to_string(), false),
            }
        }
        Some(v) => (text(v), false),
    };
    let content = if text.is_empty() {
        Vec::new()
    } else {
        vec![Part::Text(Text::plain(text))]
    };
    (content, is_error)
}

// ---------------------------------------------------------------------------------------------
// Answers

/// Gemini's `finishReason`: a tool call ends with `STOP`, as Gemini's own do.
fn finish_reason(stop: StopReason) -> &'static str {
    match stop {
        StopReason::EndTurn
        | StopReason::StopSequence
        | StopReason::ToolUse
        | StopReason::PauseTurn => "STOP",
        StopReason::MaxTokens | StopReason::ContextWindow => "MAX_TOKENS",
        StopReason::ContentFilter => "SAFETY",
    }
}

/// Gemini's `usageMetadata`: the prompt count includes cached content, the candidates count
/// excludes thoughts.
fn usage_json(u: &Usage) -> Value {
    let mut v = json!({
        "promptTokenCount": u.prompt_tokens,
        "candidatesTokenCount": u.completion_tokens.saturating_sub(u.reasoning_tokens),
        "totalTokenCount": u.prompt_tokens + u.completion_tokens,
    });
    if u.reasoning_tokens > 0 {
        v["thoughtsTokenCount"] = u.reasoning_tokens.into();
    }
    if u.cached_tokens > 0 {
        v["cachedContentTokenCount"] = u.cached_tokens.into();
    }
    v
}

/// A `functionCall` part: the id the client is shown, and the signature the id carries.
fn call_part(id: &str, name: &str, arguments: &str) -> Value {
    let mut part = json!({"functionCall": {
        "id": unsigned_id(id), "name": name, "args": tool_input(arguments),
    }});
    if let Some(signature) = signature_of(id).filter(|s| is_base64(s)) {
        part["thoughtSignature"] = signature.into();
    }
    part
}

/// A thought part; a signature the SDK could not decode as bytes is left out.
fn thought_part(text: &str, signature: Option<&str>) -> Value {
    let mut part = json!({"text": text, "thought": true});
    if let Some(s) = signature.filter(|s| is_base64(s)) {
        part["thoughtSignature"] = s.into();
    }
    part
}

/// An answer's part, when it has one (answers hold no images or tool results).
fn answer_part(p: &Part) -> Option<Value> {
    Some(match p {
        Part::Text(t) => json!({"text": t.text}),
        Part::Thinking { text, signature } => thought_part(text, signature.as_deref()),
        Part::RedactedThinking(data) if is_base64(data) => {
            thought_part("", Some(&format!("{REDACTED}{data}")))
        }
        Part::ToolCall(c) => call_part(&c.id, &c.name, &c.arguments),
        Part::RedactedThinking(_) | Part::Image { .. } | Part::ToolResult { .. } => return None,
    })
}

/// A `GenerateContentResponse` with one candidate.
fn response_json(
    id: &str,
    model: &str,
    parts: Vec<Value>,
    finish: Option<StopReason>,
    usage: Option<&Usage>,
) -> Value {
    let mut candidate = json!({"content": {"role": "model", "parts": parts}, "index": 0});
    if let Some(stop) = finish {
        candidate["finishReason"] = finish_reason(stop).into();
    }
    let mut v = json!({ "candidates": [candidate] });
    if let Some(u) = usage {
        v["usageMetadata"] = usage_json(u);
    }
    if !model.is_empty() {
        v["modelVersion"] = model.into();
    }
    if !id.is_empty() {
        v["responseId"] = id.into();
    }
    v
}

/// Write a whole answer as a `GenerateContentResponse`.
pub fn write_response(r: &ChatResponse) -> Vec<u8> {
    let parts = r.content.iter().filter_map(answer_part).collect();
    to_json(&response_json(
        &r.id,
        &r.model,
        parts,
        Some(r.stop),
        Some(&r.usage),
    ))
}

// ---------------------------------------------------------------------------------------------
// Streams

/// A tool call whose arguments are still arriving.
#[derive(Debug)]
struct PendingCall {
    index: usize,
    id: String,
    name: String,
    arguments: String,
}

/// Writes stream events as Gemini's `alt=sse` chunks, each a `GenerateContentResponse`:
/// text and thoughts as they arrive, a function call whole when its block ends (Gemini never
/// streams one in pieces), and at the end a chunk with the finish reason and usage. Every
/// chunk has a part (the last an empty text, as Gemini's often is): the Python SDK's chat
/// keeps only turns whose chunks all have one.
#[derive(Debug, Default)]
pub struct EventWriter {
    id: String,
    model: String,
    calls: Vec<PendingCall>,
    stop: Option<StopReason>,
    usage: Usage,
    /// The end (or an error) was written: nothing more goes out.
    ended: bool,
}

/// Append `data: <json>\r\n\r\n`, Gemini's framing.
fn sse_data(v: &Value, out: &mut Vec<u8>) {
    out.extend_from_slice(b"data: ");
    let _ = serde_json::to_writer(&mut *out, v);
    out.extend_from_slice(b"\r\n\r\n");
}

/// The HTTP status of an upstream error's kind (Anthropic's types, OpenAI's codes, Google's
/// statuses, AWS's exceptions), for Google's `code` and `status`.
fn error_status(kind: &str) -> StatusCode {
    let k = kind.to_ascii_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| k.contains(w));
    if has(&["rate_limit", "resource_exhausted", "throttl", "quota"]) {
        StatusCode::TOO_MANY_REQUESTS
    } else if has(&["overloaded", "unavailable"]) {
        StatusCode::SERVICE_UNAVAILABLE
    } else if has(&["timeout", "deadline"]) {
        StatusCode::GATEWAY_TIMEOUT
    } else if has(&["unauthenticated", "authentication"]) {
        StatusCode::UNAUTHORIZED
    } else if has(&["permission", "accessdenied", "access_denied"]) {
        StatusCode::FORBIDDEN
    } else if has(&["not_found", "notfound"]) {
        StatusCode::NOT_FOUND
    } else if has(&["invalid", "validation", "too_large"]) {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::INTERNAL_SERVER_ERROR
    }
}

impl EventWriter {
    /// A chunk of these parts.
    fn chunk(&self, parts: Vec<Value>, out: &mut Vec<u8>) {
        sse_data(
            &response_json(&self.id, &self.model, parts, None, None),
            out,
        );
    }

    /// The call in block `index`, whole, when it is pending.
    fn finish_call(&mut self, index: usize, out: &mut Vec<u8>) {
        if let Some(pos) = self.calls.iter().position(|c| c.index == index) {
            let c = self.calls.remove(pos);
            self.chunk(vec![call_part(&c.id, &c.name, &c.arguments)], out);
        }
    }

    /// The calls still pending, then the last chunk: finish reason and usage.
    fn finish(&mut self, out: &mut Vec<u8>) {
        for c in std::mem::take(&mut self.calls) {
            self.chunk(vec![call_part(&c.id, &c.name, &c.arguments)], out);
        }
        let last = response_json(
            &self.id,
            &self.model,
            vec![json!({"text": ""})],
            Some(self.stop.unwrap_or(StopReason::EndTurn)),
            Some(&self.usage),
        );
        sse_data(&last, out);
        self.ended = true;
    }

    /// Write one event. Usage may follow the stop: the finish goes out at `Done`. Nothing
    /// follows the end or an error.
    pub fn write(&mut self, ev: StreamEvent, out: &mut Vec<u8>) {
        if self.ended {
            return;
        }
        match ev {
            StreamEvent::Start { id, model, usage } => {
                if self.id.is_empty() {
                    self.id = id;
                }
                if self.model.is_empty() {
                    self.model = model;
                }
                self.usage = self.usage.merge(usage);
            }
            StreamEvent::Text { text, .. } => {
                if !text.is_empty() {
                    self.chunk(vec![json!({ "text": text })], out);
                }
            }
            StreamEvent::Thinking { text, .. } => {
                if !text.is_empty() {
                    self.chunk(vec![thought_part(&text, None)], out);
                }
            }
            StreamEvent::Signature { signature, .. } => {
                if is_base64(&signature) {
                    self.chunk(vec![thought_part("", Some(&signature))], out);
                }
            }
            StreamEvent::ToolStart { index, id, name } => self.calls.push(PendingCall {
                index,
                id,
                name,
                arguments: String::new(),
            }),
            StreamEvent::ToolArgs { index, json } => {
                if let Some(c) = self.calls.iter_mut().find(|c| c.index == index) {
                    c.arguments.push_str(&json);
                }
            }
            StreamEvent::BlockStop { index } => self.finish_call(index, out),
            StreamEvent::Stop { reason, .. } => self.stop = Some(reason),
            StreamEvent::Usage(u) => self.usage = self.usage.merge(u),
            StreamEvent::Done => self.finish(out),
            StreamEvent::Error { kind, message } => {
                let status = error_status(&kind);
                sse_data(
                    &json!({"error": {
                        "code": status.as_u16(), "message": message, "status": google_status(status),
                    }}),
                    out,
                );
                self.ended = true;
            }
            StreamEvent::Ping => {}
        }
    }
}

/// Whether a `:streamGenerateContent` query asks for SSE (`alt=sse`); without it Google
/// answers one JSON array ([`ArrayStream`]).
pub fn asks_sse(query: Option<&str>) -> bool {
    query.is_some_and(|q| q.split('&').any(|p| p == "alt=sse"))
}

/// `:streamGenerateContent` without `alt=sse` answers one JSON array, sent element by
/// element (`[{…}`, `,\r\n{…}`, …, `]`). sluice's writers and Gemini deployments (asked
/// with `alt=sse`) speak SSE; this turns those events into the array's elements as they
/// arrive, so a client that asked for the array reads the same answer.
#[derive(Debug, Default)]
pub struct ArrayStream {
    /// Bytes after the last complete event.
    carry: Vec<u8>,
    /// The array's `[` went out.
    opened: bool,
}

impl ArrayStream {
    /// The array elements the events completed by `frame` make.
    pub fn feed(&mut self, frame: &[u8]) -> Vec<u8> {
        let from = self.carry.len();
        self.carry.extend_from_slice(frame);
        let Some(end) = crate::sse::last_event_end_after(&self.carry, from) else {
            return Vec::new();
        };
        let done: Vec<u8> = self.carry.drain(..end).collect();
        let mut out = Vec::with_capacity(done.len() + 8);
        for (start, end) in crate::sse::events(&done) {
            self.element(&done[start..end], &mut out);
        }
        out
    }

    /// What ends the array: a last event that came without its blank line, then `]` (`[]`
    /// when nothing came).
    pub fn finish(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        let rest = std::mem::take(&mut self.carry);
        self.element(&rest, &mut out);
        out.extend_from_slice(if self.opened { b"]" } else { b"[]" });
        self.opened = true;
        out
    }

    /// One event's data as the array's next element (events without data add nothing).
    fn element(&mut self, event: &[u8], out: &mut Vec<u8>) {
        let mut data = event
            .split(|b| *b == b'\n')
            .filter_map(|line| line.strip_prefix(b"data:"))
            .map(|d| d.strip_prefix(b" ").unwrap_or(d))
            .map(|d| d.strip_suffix(b"\r").unwrap_or(d))
            .peekable();
        if data.peek().is_none() {
            return;
        }
        out.extend_from_slice(if self.opened { b",\r\n" } else { b"[" });
        self.opened = true;
        for (i, d) in data.enumerate() {
            if i > 0 {
                out.push(b'\n');
            }
            out.extend_from_slice(d);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::Message;
    use crate::testing::{data_lines, dropped_names, json_of};
    use sluice_core::endpoint::Dialect;

    fn strict() -> Params {
        Params::new(false, Dialect::Gemini)
    }

    fn dropping() -> Params {
        Params::new(true, Dialect::Gemini)
    }

    fn parse(body: &Value, params: &mut Params) -> Result<ChatRequest, TranslateError> {
        parse_request(body.to_string().as_bytes(), params)
    }

    fn text(t: &str) -> Part {
        Part::Text(Text::plain(t))
    }

    fn call(id: &str, name: &str, arguments: &str) -> Part {
        Part::ToolCall(ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        })
    }

    fn result(id: &str, t: &str, is_error: bool) -> Part {
        Part::ToolResult {
            id: id.into(),
            content: vec![text(t)],
            is_error,
            cache_control: None,
        }
    }

    fn unsupported(r: Result<ChatRequest, TranslateError>) -> String {
        match r {
            Err(TranslateError::Unsupported(name)) => name,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    fn invalid(r: Result<ChatRequest, TranslateError>) -> (&'static str, String) {
        match r {
            Err(TranslateError::Invalid { param, message }) => (param, message),
            other => panic!("expected an invalid value, got {other:?}"),
        }
    }

    /// A google-genai chat with automatic function calling: two parallel calls of one
    /// function without ids (the first signed, as Gemini 3 signs them), their responses in
    /// order, and the next user turn.
    #[test]
    fn multi_turn_calls_without_ids_are_matched_in_order() {
        let body = json!({
            "contents": [
                {"role": "user", "parts": [{"text": "Weather in Paris and Rome?"}]},
                {"role": "model", "parts": [
                    {"text": "Let me think.", "thought": true},
                    {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}},
                     "thoughtSignature": "Cr8BAe_-x9Q="},
                    {"functionCall": {"name": "get_weather", "args": {"city": "Rome"}}}
                ]},
                {"role": "user", "parts": [
                    {"functionResponse": {"name": "get_weather", "response": {"result": "18C"}}},
                    {"functionResponse": {"name": "get_weather", "response": {"temp": 24}}}
                ]},
                {"role": "model", "parts": [{"text": "Rome is warmer."}]},
                {"role": "user", "parts": [{"text": "Thanks"}]}
            ],
            "systemInstruction": {"parts": [{"text": "You are terse."}, {"text": "Use Celsius."}]},
            "generationConfig": {"temperature": 0.5}
        });
        let mut p = strict();
        let req = parse(&body, &mut p).unwrap();
        assert!(p.dropped().is_empty(), "{:?}", p.dropped());
        assert_eq!(
            req.system,
            [Text::plain("You are terse."), Text::plain("Use Celsius.")]
        );
        assert_eq!(req.model, "", "the model is the URL's");
        assert!(!req.stream);
        let paris = call_id(0, "get_weather", Some("Cr8BAe/+x9Q="));
        assert_eq!(paris, "call_0_get_weather__thought__Cr8BAe_-x9Q");
        assert_eq!(
            req.messages,
            [
                Message {
                    role: Role::User,
                    content: vec![text("Weather in Paris and Rome?")]
                },
                Message {
                    role: Role::Assistant,
                    content: vec![
                        Part::Thinking {
                            text: "Let me think.".into(),
                            signature: None
                        },
                        call(&paris, "get_weather", r#"{"city":"Paris"}"#),
                        call("call_1_get_weather", "get_weather", r#"{"city":"Rome"}"#),
                    ]
                },
                Message {
                    role: Role::User,
                    content: vec![
                        result(&paris, "18C", false),
                        result("call_1_get_weather", r#"{"temp":24}"#, false),
                    ]
                },
                Message {
                    role: Role::Assistant,
                    content: vec![text("Rome is warmer.")]
                },
                Message {
                    role: Role::User,
                    content: vec![text("Thanks")]
                },
            ]
        );
        // The signature the id carries is Gemini's, in the standard alphabet.
        assert_eq!(signature_of(&paris).as_deref(), Some("Cr8BAe/+x9Q="));
        assert_eq!(parse_call_id(&paris), Some("get_weather"));
    }

    /// Ids the client gave are kept and matched, whatever the order of the responses; a
    /// response whose id matches no call (Gemini CLI makes its own) finds the earliest
    /// unanswered call of its name.
    #[test]
    fn responses_match_calls_by_id_then_by_name() {
        let body = json!({"contents": [
            {"role": "user", "parts": [{"text": "go"}]},
            {"role": "model", "parts": [
                {"functionCall": {"id": "a1", "name": "read", "args": {"path": "x"}}},
                {"functionCall": {"id": "b2", "name": "read", "args": {"path": "y"}},
                 "thoughtSignature": "c2ln"},
                {"functionCall": {"name": "ls"}}
            ]},
            {"role": "user", "parts": [
                {"functionResponse": {"id": "b2", "name": "read", "response": {"output": "Y"}}},
                {"functionResponse": {"id": "ls-1712-0", "name": "ls", "response": {"output": "a b"}}},
                {"functionResponse": {"id": "a1", "name": "read",
                    "response": {"error": "no such file"}}}
            ]}
        ]});
        let req = parse(&body, &mut strict()).unwrap();
        let signed = signed_id("b2", "c2ln");
        assert_eq!(
            req.messages[1].content,
            [
                call("a1", "read", r#"{"path":"x"}"#),
                call(&signed, "read", r#"{"path":"y"}"#),
                call("call_2_ls", "ls", "{}"),
            ]
        );
        assert_eq!(
            req.messages[2].content,
            [
                result(&signed, "Y", false),
                result("call_2_ls", "a b", false),
                result("a1", "no such file", true),
            ]
        );
    }

    /// The Python SDK's spellings: snake_case members (its pydantic dumps), URL-safe base64
    /// for bytes, `role` left out of a single turn.
    #[test]
    fn snake_case_members_and_url_safe_bytes() {
        let body = json!({
            "contents": [{"parts": [
                {"text": "What is this?"},
                {"inline_data": {"mime_type": "image/png", "data": "iVBO_w-x"}},
                {"file_data": {"file_uri": "gs://bucket/cat.jpg", "mime_type": "image/jpeg"}},
                {"inlineData": {"mimeType": "text/plain", "data": "aGVsbG8gd29ybGQ"}}
            ]}],
            "system_instruction": {"parts": [{"text": "Be brief."}]},
            "tools": [{"function_declarations": [{
                "name": "lookup",
                "description": "Look a thing up.",
                "parameters": {"type": "OBJECT", "properties": {
                    "q": {"type": "STRING", "nullable": true},
                    "tags": {"type": "ARRAY", "items": {"type": "STRING"}, "max_items": "3"}
                }, "required": ["q"], "property_ordering": ["q", "tags"]}
            }]}],
            "tool_config": {"function_calling_config": {"mode": "any",
                "allowed_function_names": ["lookup"]}},
            "generation_config": {"max_output_tokens": 256, "top_k": 40.0, "top_p": 0.9,
                "stop_sequences": ["END"],
                "thinking_config": {"thinking_budget": 2048, "include_thoughts": true}}
        });
        let req = parse(&body, &mut strict()).unwrap();
        assert_eq!(req.system, [Text::plain("Be brief.")]);
        assert_eq!(req.messages.len(), 1);
        assert_eq!(req.messages[0].role, Role::User);
        assert_eq!(
            req.messages[0].content,
            [
                text("What is this?"),
                Part::Image {
                    source: ImageSource::Base64 {
                        media_type: "image/png".into(),
                        data: "iVBO/w+x".into()
                    },
                    cache_control: None
                },
                Part::Image {
                    source: ImageSource::Url("gs://bucket/cat.jpg".into()),
                    cache_control: None
                },
                text("hello world"),
            ]
        );
        assert_eq!(req.tools.len(), 1);
        assert_eq!(
            req.tools[0].description.as_deref(),
            Some("Look a thing up.")
        );
        assert_eq!(
            req.tools[0].parameters,
            json!({"type": "object", "properties": {
                "q": {"type": ["string", "null"]},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3}
            }, "required": ["q"]})
        );
        assert_eq!(req.tool_choice, Some(ToolChoice::Tool("lookup".into())));
        assert_eq!(req.max_tokens, Some(256));
        assert_eq!(req.top_k, Some(40));
        assert_eq!(req.top_p, Some(0.9));
        assert_eq!(req.stop, ["END"]);
        assert_eq!(req.thinking, Some(Thinking::Budget(2048)));
    }

    /// The SDK's OpenAPI-subset schemas (uppercase types, `nullable`, `anyOf`, `example`,
    /// `format: enum`) become JSON Schema; `parametersJsonSchema` is taken as is.
    #[test]
    fn openapi_schemas_become_json_schema() {
        let schema = json!({
            "type": "OBJECT",
            "title": "Order",
            "properties": {
                "status": {"type": "STRING", "format": "enum", "enum": ["open", "shut"]},
                "count": {"type": "INTEGER", "minimum": 0, "example": 3},
                "note": {"anyOf": [{"type": "STRING"}, {"type": "NUMBER"}], "nullable": true},
                "meta": {"type": "OBJECT", "additionalProperties": {"type": "BOOLEAN"}},
                "when": {"type": "STRING", "format": "date-time", "nullable": false},
                "any": {"type": "TYPE_UNSPECIFIED", "description": "anything"}
            },
            "propertyOrdering": ["status", "count", "note", "meta", "when", "any"],
            "required": ["status"]
        });
        assert_eq!(
            json_schema_of(&schema),
            json!({
                "type": "object",
                "title": "Order",
                "properties": {
                    "status": {"type": "string", "enum": ["open", "shut"]},
                    "count": {"type": "integer", "minimum": 0, "examples": [3]},
                    "note": {"anyOf": [{"type": "string"}, {"type": "number"}, {"type": "null"}]},
                    "meta": {"type": "object", "additionalProperties": {"type": "boolean"}},
                    "when": {"type": "string", "format": "date-time"},
                    "any": {"description": "anything"}
                },
                "required": ["status"]
            })
        );
        // JSON Schema comes out the same (`$ref` and `$defs` included).
        let plain = json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}},
            "$defs": {"A": {"type": ["string", "null"]}}});
        assert_eq!(json_schema_of(&plain), plain);

        let body = json!({
            "contents": [{"role": "user", "parts": [{"text": "x"}]}],
            "tools": [{"functionDeclarations": [
                {"name": "f", "parametersJsonSchema": {"type": "object",
                    "properties": {"n": {"type": "integer"}}, "additionalProperties": false}},
                {"name": "g"}
            ]}]
        });
        let req = parse(&body, &mut strict()).unwrap();
        assert_eq!(
            req.tools[0].parameters,
            json!({"type": "object", "properties": {"n": {"type": "integer"}},
                "additionalProperties": false})
        );
        assert_eq!(
            req.tools[1].parameters,
            json!({"type": "object", "properties": {}})
        );
        assert_eq!(req.tool_choice, None);
    }

    /// A body exactly as google-genai (Python) sends it: its pydantic dumps in snake_case
    /// (`mime_type`, `parameters_json_schema`, `property_ordering`, `thinking_config`'s
    /// members), bytes in URL-safe base64, a Python function as a declaration with a JSON
    /// schema, a pydantic model as an OpenAPI `responseSchema`.
    #[test]
    fn google_genai_python_sdk_request() {
        let body = br#"{"contents":[{"parts":[{"text":"Weather in Paris and Rome?"},{"inlineData":{"data":"iVBORw0KGgr__g==","mime_type":"image/png"}}],"role":"user"},{"parts":[{"text":"Let me think.","thought":true},{"functionCall":{"args":{"city":"Paris"},"name":"get_weather"},"thoughtSignature":"Cr8BAe_-x9Q="},{"functionCall":{"args":{"city":"Rome"},"name":"get_weather"}}],"role":"model"},{"parts":[{"functionResponse":{"name":"get_weather","response":{"result":"18C"}}},{"functionResponse":{"name":"get_weather","response":{"error":"down"}}}],"role":"user"}],"systemInstruction":{"parts":[{"text":"You are terse."}],"role":"user"},"safetySettings":[{"category":"HARM_CATEGORY_HARASSMENT","threshold":"BLOCK_NONE"}],"tools":[{"functionDeclarations":[{"description":"Get the weather in a city.","name":"get_weather","parameters_json_schema":{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string","default":"c"}},"required":["city"]},"response_json_schema":{"additionalProperties":true,"type":"object"}},{"description":"Look up.","name":"lookup","parameters":{"properties":{"q":{"nullable":true,"type":"STRING"},"tags":{"items":{"type":"STRING"},"max_items":3,"type":"ARRAY"}},"required":["q"],"type":"OBJECT"}}]}],"toolConfig":{"functionCallingConfig":{"allowedFunctionNames":["lookup","get_weather"],"mode":"ANY"}},"labels":{"team":"a"},"generationConfig":{"temperature":0.3,"topK":40.0,"maxOutputTokens":512,"stopSequences":["END"],"seed":1,"responseMimeType":"application/json","responseSchema":{"properties":{"city":{"title":"City","type":"STRING"},"temp_c":{"nullable":true,"title":"Temp C","type":"INTEGER"}},"property_ordering":["city","temp_c"],"required":["city"],"title":"Weather","type":"OBJECT"},"thinkingConfig":{"include_thoughts":true,"thinking_budget":1024}}}"#;
        let mut p = strict();
        let req = parse_request(body, &mut p).unwrap();
        assert_eq!(
            dropped_names(&p),
            [
                "generationConfig.seed",
                "labels",
                "safetySettings",
                "tools.functionDeclarations.responseJsonSchema"
            ]
        );
        assert_eq!(req.system, [Text::plain("You are terse.")]);
        assert_eq!(
            req.messages[0].content[1],
            Part::Image {
                source: ImageSource::Base64 {
                    media_type: "image/png".into(),
                    data: "iVBORw0KGgr//g==".into()
                },
                cache_control: None
            }
        );
        let paris = call_id(0, "get_weather", Some("Cr8BAe/+x9Q="));
        assert_eq!(
            req.messages[2].content,
            [
                result(&paris, "18C", false),
                result("call_1_get_weather", "down", true)
            ]
        );
        let names: Vec<&str> = req.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["get_weather", "lookup"]);
        assert_eq!(
            req.tools[0].parameters["properties"]["unit"]["default"],
            "c"
        );
        assert_eq!(
            req.tools[1].parameters["properties"]["tags"],
            json!({"type": "array", "items": {"type": "string"}, "maxItems": 3})
        );
        assert_eq!(req.tool_choice, Some(ToolChoice::Any));
        assert_eq!(
            (req.temperature, req.top_k, req.max_tokens),
            (Some(0.3), Some(40), Some(512))
        );
        assert_eq!(req.thinking, Some(Thinking::Budget(1024)));
        assert_eq!(
            req.response_format
                .as_ref()
                .and_then(ResponseFormat::schema),
            Some(&json!({
                "type": "object",
                "title": "Weather",
                "properties": {
                    "city": {"type": "string", "title": "City"},
                    "temp_c": {"type": ["integer", "null"], "title": "Temp C"}
                },
                "required": ["city"]
            }))
        );
    }

    fn with_config(config: Value) -> Value {
        json!({"contents": [{"role": "user", "parts": [{"text": "x"}]}],
            "generationConfig": config})
    }

    #[test]
    fn structured_output() {
        let req = parse(
            &with_config(json!({"responseMimeType": "application/json",
                "responseSchema": {"type": "ARRAY", "items": {"type": "OBJECT",
                    "properties": {"name": {"type": "STRING"}}, "propertyOrdering": ["name"]}}})),
            &mut strict(),
        )
        .unwrap();
        assert_eq!(
            req.response_format,
            Some(ResponseFormat::Schema {
                name: "response".into(),
                schema: json!({"type": "array", "items": {"type": "object",
                    "properties": {"name": {"type": "string"}}}}),
                strict: None,
            })
        );
        let json_schema = json!({"type": "object", "properties": {"a": {"type": "string"}}});
        let req = parse(
            &with_config(json!({"response_mime_type": "application/json",
                "response_json_schema": json_schema})),
            &mut strict(),
        )
        .unwrap();
        assert_eq!(req.response_format.unwrap().schema(), Some(&json_schema));
        let req = parse(
            &with_config(json!({"responseMimeType": "application/json"})),
            &mut strict(),
        )
        .unwrap();
        assert_eq!(req.response_format, Some(ResponseFormat::Json));
        let req = parse(
            &with_config(json!({"responseMimeType": "text/plain"})),
            &mut strict(),
        )
        .unwrap();
        assert_eq!(req.response_format, None);
        let enum_mode = with_config(json!({"responseMimeType": "text/x.enum",
            "responseSchema": {"type": "STRING", "enum": ["a", "b"]}}));
        assert_eq!(
            unsupported(parse(&enum_mode, &mut strict())),
            "generationConfig.responseMimeType"
        );
        let mut d = dropping();
        assert_eq!(parse(&enum_mode, &mut d).unwrap().response_format, None);
        assert_eq!(dropped_names(&d), ["generationConfig.responseMimeType"]);
    }

    #[test]
    fn thinking_config() {
        let thinking = |config: Value| {
            parse(
                &with_config(json!({ "thinkingConfig": config })),
                &mut strict(),
            )
            .map(|r| r.thinking)
        };
        assert_eq!(
            thinking(json!({"thinkingBudget": -1})).unwrap(),
            Some(Thinking::Adaptive(None))
        );
        assert_eq!(
            thinking(json!({"thinkingBudget": 0})).unwrap(),
            Some(Thinking::Effort(Effort::None))
        );
        assert_eq!(
            thinking(json!({"thinking_budget": 8192, "include_thoughts": true})).unwrap(),
            Some(Thinking::Budget(8192))
        );
        assert_eq!(
            thinking(json!({"thinkingLevel": "HIGH"})).unwrap(),
            Some(Thinking::Effort(Effort::High))
        );
        assert_eq!(
            thinking(json!({"thinking_level": "low"})).unwrap(),
            Some(Thinking::Effort(Effort::Low))
        );
        assert_eq!(
            thinking(json!({"includeThoughts": true})).unwrap(),
            Some(Thinking::Adaptive(None))
        );
        assert_eq!(thinking(json!({"includeThoughts": false})).unwrap(), None);
        let (param, message) = invalid(parse(
            &with_config(
                json!({"thinkingConfig": {"thinkingBudget": 1024, "thinkingLevel": "LOW"}}),
            ),
            &mut strict(),
        ));
        assert_eq!(param, "generationConfig");
        assert!(message.contains("not both"), "{message}");
        let mut p = strict();
        let req = parse(
            &with_config(json!({"thinkingConfig": {"thinkingLevel": "ULTRA"}})),
            &mut p,
        )
        .unwrap();
        assert_eq!(req.thinking, None);
        assert_eq!(
            dropped_names(&p),
            ["generationConfig.thinkingConfig.thinkingLevel"]
        );
    }

    #[test]
    fn function_calling_modes() {
        let choice = |config: Value| {
            let body = json!({
                "contents": [{"role": "user", "parts": [{"text": "x"}]}],
                "tools": [{"functionDeclarations": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}],
                "toolConfig": {"functionCallingConfig": config}
            });
            let mut p = strict();
            let req = parse(&body, &mut p).unwrap();
            let names: Vec<String> = req.tools.into_iter().map(|t| t.name).collect();
            (req.tool_choice, names, dropped_names(&p).join(","))
        };
        assert_eq!(
            choice(json!({"mode": "AUTO"})),
            (
                Some(ToolChoice::Auto),
                vec!["a".into(), "b".into(), "c".into()],
                String::new()
            )
        );
        assert_eq!(choice(json!({"mode": "NONE"})).0, Some(ToolChoice::None));
        assert_eq!(choice(json!({"mode": "ANY"})).0, Some(ToolChoice::Any));
        assert_eq!(
            choice(json!({"mode": "ANY", "allowedFunctionNames": ["b"]})).0,
            Some(ToolChoice::Tool("b".into()))
        );
        // Several allowed functions: the model must call one of them, so only they are offered.
        assert_eq!(
            choice(json!({"mode": "ANY", "allowedFunctionNames": ["a", "c"]})),
            (
                Some(ToolChoice::Any),
                vec!["a".into(), "c".into()],
                String::new()
            )
        );
        assert_eq!(
            choice(json!({"mode": "VALIDATED"})),
            (
                Some(ToolChoice::Auto),
                vec!["a".into(), "b".into(), "c".into()],
                "toolConfig.functionCallingConfig.mode".into()
            )
        );
        assert_eq!(choice(json!({})).0, None);
        let (param, _) = invalid(parse(
            &json!({"contents": [{"parts": [{"text": "x"}]}],
                "tools": [{"functionDeclarations": [{"name": "a"}]}],
                "toolConfig": {"functionCallingConfig": {"mode": "SOMETIMES"}}}),
            &mut strict(),
        ));
        assert_eq!(param, "toolConfig");
    }

    #[test]
    fn generation_config_meaning_and_hints() {
        let config = json!({
            "temperature": 1, "topP": 0.95, "candidateCount": 1, "maxOutputTokens": "64",
            "presencePenalty": 0.5, "frequencyPenalty": 0.1, "seed": 7,
            "responseModalities": ["TEXT"], "mediaResolution": "MEDIA_RESOLUTION_LOW",
            "responseLogprobs": false
        });
        let mut p = strict();
        let req = parse(&with_config(config), &mut p).unwrap();
        assert_eq!(req.temperature, Some(1.0));
        assert_eq!(req.max_tokens, Some(64));
        assert_eq!(
            dropped_names(&p),
            [
                "generationConfig.frequencyPenalty",
                "generationConfig.mediaResolution",
                "generationConfig.presencePenalty",
                "generationConfig.seed",
            ]
        );
        for (config, name) in [
            (
                json!({"candidateCount": 2}),
                "generationConfig.candidateCount",
            ),
            (
                json!({"responseLogprobs": true}),
                "generationConfig.responseLogprobs",
            ),
            (json!({"logprobs": 3}), "generationConfig.logprobs"),
            (
                json!({"responseModalities": ["TEXT", "IMAGE"]}),
                "generationConfig.responseModalities",
            ),
        ] {
            assert_eq!(
                unsupported(parse(&with_config(config.clone()), &mut strict())),
                name
            );
            let mut d = dropping();
            parse(&with_config(config), &mut d).unwrap();
            assert_eq!(dropped_names(&d), [name]);
        }
        let (param, message) = invalid(parse(
            &with_config(json!({"temperature": "hot"})),
            &mut strict(),
        ));
        assert_eq!(
            (param, message.as_str()),
            ("generationConfig", "`temperature` must be a number")
        );
    }

    #[test]
    fn top_level_members_and_built_in_tools() {
        let body = json!({
            "contents": [{"role": "user", "parts": [{"text": "x"}]}],
            "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}],
            "labels": {"team": "a"},
            "model": "models/gemini-2.5-flash",
            "num_retries": 2,
            "someFutureField": {"a": 1},
            "cachedContent": null
        });
        let mut p = strict();
        parse(&body, &mut p).unwrap();
        assert_eq!(
            dropped_names(&p),
            ["labels", "safetySettings", "someFutureField"]
        );
        // A cached prefix is Google's state: refused even with drop_params.
        let cached = json!({"contents": [{"parts": [{"text": "x"}]}],
            "cached_content": "cachedContents/abc"});
        assert_eq!(
            unsupported(parse(&cached, &mut dropping())),
            "cachedContent"
        );

        let tools = json!({
            "contents": [{"role": "user", "parts": [{"text": "x"}]}],
            "tools": [{"googleSearch": {}}, {"code_execution": {}},
                {"functionDeclarations": [{"name": "f"}]}, {"urlContext": {}}]
        });
        assert_eq!(
            unsupported(parse(&tools, &mut strict())),
            "tools.googleSearch"
        );
        let mut d = dropping();
        let req = parse(&tools, &mut d).unwrap();
        assert_eq!(req.tools.len(), 1);
        assert_eq!(
            dropped_names(&d),
            [
                "tools.codeExecution",
                "tools.googleSearch",
                "tools.urlContext"
            ]
        );
    }

    #[test]
    fn content_other_than_text_and_images() {
        let body =
            |part: Value| json!({"contents": [{"role": "user", "parts": [{"text": "x"}, part]}]});
        let pdf = body(json!({"inlineData": {"mimeType": "application/pdf", "data": "JVBERi0="}}));
        let (param, message) = invalid(parse(&pdf, &mut strict()));
        assert_eq!(param, "contents");
        assert!(message.starts_with("contents[0].parts[1]:"), "{message}");
        assert!(message.contains("application/pdf"), "{message}");
        let mut d = dropping();
        let req = parse(&pdf, &mut d).unwrap();
        assert_eq!(req.messages[0].content, [text("x")]);
        assert_eq!(dropped_names(&d), ["inlineData"]);

        let uploaded = body(json!({"fileData": {"mimeType": "image/png",
            "fileUri": "https://generativelanguage.googleapis.com/v1beta/files/abc"}}));
        let (_, message) = invalid(parse(&uploaded, &mut strict()));
        assert!(message.contains("Files API"), "{message}");

        let code = json!({"contents": [{"role": "model", "parts": [
            {"executableCode": {"language": "PYTHON", "code": "print(1)"}}]}]});
        assert_eq!(
            unsupported(parse(&code, &mut strict())),
            "contents.parts.executableCode"
        );
        // Metadata beside data is a hint.
        let mut p = strict();
        parse(
            &body(
                json!({"inlineData": {"mimeType": "image/jpeg", "data": "/9j/"},
                "mediaResolution": {"level": "MEDIA_RESOLUTION_HIGH"}}),
            ),
            &mut p,
        )
        .unwrap();
        assert_eq!(dropped_names(&p), ["contents.parts.mediaResolution"]);
    }

    #[test]
    fn bad_input_names_the_field() {
        for (body, param, needle) in [
            (json!({"contents": "hi"}), "contents", "list"),
            (json!({"contents": []}), "contents", "at least one"),
            (json!({"generationConfig": {}}), "contents", "at least one"),
            (
                json!({"contents": [{"role": "user", "parts": [{"text": 5}]}]}),
                "contents",
                "contents[0].parts[0]",
            ),
            (
                json!({"contents": [{"role": "system", "parts": [{"text": "x"}]}]}),
                "contents",
                "unknown role `system`",
            ),
            (
                json!({"contents": [{"role": "model", "parts": [{"functionCall": {"args": {}}}]}]}),
                "contents",
                "without `name`",
            ),
            (
                json!({"contents": [{"parts": [{"text": "x"}]}], "tools": {"x": 1}}),
                "tools",
                "list",
            ),
            (
                json!({"contents": [{"parts": [{"text": "x"}]}], "generationConfig": []}),
                "generationConfig",
                "object",
            ),
        ] {
            let (p, message) = invalid(parse(&body, &mut strict()));
            assert_eq!(p, param, "{body}");
            assert!(message.contains(needle), "{body}: {message}");
        }
        assert!(matches!(
            parse_request(b"{not json", &mut strict()),
            Err(TranslateError::BadRequest(_))
        ));
    }

    fn answer(content: Vec<Part>, stop: StopReason) -> ChatResponse {
        ChatResponse {
            id: "msg_01".into(),
            model: "claude-sonnet-4-5".into(),
            content,
            stop,
            stop_sequence: None,
            usage: Usage {
                prompt_tokens: 120,
                completion_tokens: 55,
                cached_tokens: 100,
                reasoning_tokens: 25,
                ..Usage::default()
            },
            created: 0,
        }
    }

    #[test]
    fn whole_answer_with_thought_text_and_call() {
        let signed = call_id(0, "get_weather", Some("Cr8BAe/+x9Q="));
        let r = answer(
            vec![
                Part::Thinking {
                    text: "Paris first.".into(),
                    signature: Some("EqQBCgIYAg==".into()),
                },
                text("Checking."),
                call(&signed, "get_weather", r#"{"city":"Paris"}"#),
                call("toolu_01", "get_time", ""),
            ],
            StopReason::ToolUse,
        );
        assert_eq!(
            json_of(&write_response(&r)),
            json!({
                "candidates": [{
                    "content": {"role": "model", "parts": [
                        {"text": "Paris first.", "thought": true, "thoughtSignature": "EqQBCgIYAg=="},
                        {"text": "Checking."},
                        {"functionCall": {"id": "call_0_get_weather", "name": "get_weather",
                            "args": {"city": "Paris"}},
                         "thoughtSignature": "Cr8BAe/+x9Q="},
                        {"functionCall": {"id": "toolu_01", "name": "get_time", "args": {}}}
                    ]},
                    "finishReason": "STOP",
                    "index": 0
                }],
                "usageMetadata": {
                    "promptTokenCount": 120, "candidatesTokenCount": 30, "totalTokenCount": 175,
                    "thoughtsTokenCount": 25, "cachedContentTokenCount": 100
                },
                "modelVersion": "claude-sonnet-4-5",
                "responseId": "msg_01"
            })
        );
        // A signature the SDK could not decode as bytes would fail the whole answer.
        let odd = answer(
            vec![Part::Thinking {
                text: "t".into(),
                signature: Some("not base64!".into()),
            }],
            StopReason::EndTurn,
        );
        assert_eq!(
            json_of(&write_response(&odd))["candidates"][0]["content"]["parts"][0],
            json!({"text": "t", "thought": true})
        );
        for (stop, reason) in [
            (StopReason::MaxTokens, "MAX_TOKENS"),
            (StopReason::ContextWindow, "MAX_TOKENS"),
            (StopReason::ContentFilter, "SAFETY"),
            (StopReason::StopSequence, "STOP"),
            (StopReason::EndTurn, "STOP"),
        ] {
            let v = json_of(&write_response(&answer(vec![text("a")], stop)));
            assert_eq!(v["candidates"][0]["finishReason"], reason);
        }
    }

    /// What a client keeps of an answer comes back as the same internal parts: ids, Gemini's
    /// call signatures, Anthropic's thinking signatures and redacted thinking.
    #[test]
    fn answers_read_back_as_history_are_the_same_parts() {
        let signed = call_id(0, "get_weather", Some("Cr8BAe/+x9Q="));
        let content = vec![
            Part::RedactedThinking("EmwKAhgBEgy3va3pzix/LafPsn4a".into()),
            Part::Thinking {
                text: "Paris first.".into(),
                signature: Some("EqQBCgIYAhIM+w==".into()),
            },
            text("Checking."),
            call(&signed, "get_weather", r#"{"city":"Paris"}"#),
            call("toolu_01", "get_time", "{}"),
        ];
        let v = json_of(&write_response(&answer(
            content.clone(),
            StopReason::ToolUse,
        )));
        let mut model_turn = v["candidates"][0]["content"].clone();
        // The Python SDK sends bytes back URL-safe.
        model_turn["parts"][1]["thoughtSignature"] = "EqQBCgIYAhIM-w==".into();
        let body = json!({"contents": [
            {"role": "user", "parts": [{"text": "weather?"}]},
            model_turn,
            {"role": "user", "parts": [
                {"functionResponse": {"id": "call_0_get_weather", "name": "get_weather",
                    "response": {"result": "sunny"}}},
                {"functionResponse": {"id": "toolu_01", "name": "get_time",
                    "response": {"result": "noon"}}}
            ]}
        ]});
        let req = parse(&body, &mut strict()).unwrap();
        assert_eq!(req.messages[1].role, Role::Assistant);
        assert_eq!(req.messages[1].content, content);
        assert_eq!(
            req.messages[2].content,
            [
                result(&signed, "sunny", false),
                result("toolu_01", "noon", false)
            ]
        );
    }

    fn stream(events: Vec<StreamEvent>) -> String {
        let mut w = EventWriter::default();
        let mut out = Vec::new();
        for ev in events {
            w.write(ev, &mut out);
        }
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn stream_chunks() {
        let signed = call_id(0, "get_weather", Some("c2ln"));
        let out = stream(vec![
            StreamEvent::Start {
                id: "msg_01".into(),
                model: "claude-sonnet-4-5".into(),
                usage: Usage {
                    prompt_tokens: 40,
                    ..Usage::default()
                },
            },
            StreamEvent::Thinking {
                index: 0,
                text: "Hmm".into(),
            },
            StreamEvent::Signature {
                index: 0,
                signature: "EqQB".into(),
            },
            StreamEvent::BlockStop { index: 0 },
            StreamEvent::Text {
                index: 1,
                text: "Checking ".into(),
            },
            StreamEvent::Text {
                index: 1,
                text: "now.".into(),
            },
            StreamEvent::BlockStop { index: 1 },
            StreamEvent::ToolStart {
                index: 2,
                id: signed.clone(),
                name: "get_weather".into(),
            },
            StreamEvent::ToolArgs {
                index: 2,
                json: r#"{"city":"#.into(),
            },
            StreamEvent::Ping,
            StreamEvent::ToolArgs {
                index: 2,
                json: r#""Paris"}"#.into(),
            },
            StreamEvent::BlockStop { index: 2 },
            StreamEvent::Stop {
                reason: StopReason::ToolUse,
                stop_sequence: None,
            },
            StreamEvent::Usage(Usage {
                prompt_tokens: 40,
                completion_tokens: 20,
                reasoning_tokens: 8,
                cached_tokens: 32,
                ..Usage::default()
            }),
            StreamEvent::Done,
        ]);
        assert!(out.starts_with("data: {"));
        assert_eq!(out.matches("\r\n\r\n").count(), 6, "{out}");
        assert!(out.ends_with("}\r\n\r\n"));
        let chunks = data_lines(&out);
        let parts: Vec<Value> = chunks
            .iter()
            .map(|c| {
                assert_eq!(c["modelVersion"], "claude-sonnet-4-5");
                assert_eq!(c["responseId"], "msg_01");
                assert_eq!(c["candidates"][0]["content"]["role"], "model");
                let parts = c["candidates"][0]["content"]["parts"].as_array().unwrap();
                assert_eq!(parts.len(), 1, "{c}");
                parts[0].clone()
            })
            .collect();
        assert_eq!(
            parts,
            [
                json!({"text": "Hmm", "thought": true}),
                json!({"text": "", "thought": true, "thoughtSignature": "EqQB"}),
                json!({"text": "Checking "}),
                json!({"text": "now."}),
                json!({"functionCall": {"id": "call_0_get_weather", "name": "get_weather",
                    "args": {"city": "Paris"}}, "thoughtSignature": "c2ln"}),
                json!({"text": ""}),
            ]
        );
        for c in &chunks[..5] {
            assert!(c["candidates"][0].get("finishReason").is_none(), "{c}");
            assert!(c.get("usageMetadata").is_none(), "{c}");
        }
        let last = &chunks[5];
        assert_eq!(last["candidates"][0]["finishReason"], "STOP");
        assert_eq!(
            last["usageMetadata"],
            json!({"promptTokenCount": 40, "candidatesTokenCount": 12, "totalTokenCount": 60,
                "thoughtsTokenCount": 8, "cachedContentTokenCount": 32})
        );

        // The chunks a client keeps, sent back as history, are the same parts again.
        let contents: Vec<Value> = chunks
            .iter()
            .map(|c| c["candidates"][0]["content"].clone())
            .collect();
        let mut body = json!({"contents": [{"role": "user", "parts": [{"text": "weather?"}]}]});
        body["contents"].as_array_mut().unwrap().extend(contents);
        let req = parse(&body, &mut strict()).unwrap();
        assert_eq!(
            req.messages[1].content,
            [
                Part::Thinking {
                    text: "Hmm".into(),
                    signature: Some("EqQB".into())
                },
                text("Checking "),
                text("now."),
                call(&signed, "get_weather", r#"{"city":"Paris"}"#),
            ]
        );
    }

    /// The next request google-genai's chat made after the stream of `stream_chunks` (one
    /// model Content per chunk, signatures re-encoded URL-safe, its automatic function
    /// response echoing the call's id): the same internal parts as the answer's.
    #[test]
    fn google_genai_chat_history_of_a_stream() {
        let body = br#"{"contents":[{"parts":[{"text":"weather?"}],"role":"user"},{"parts":[{"text":"Hmm","thought":true}],"role":"model"},{"parts":[{"text":"","thought":true,"thoughtSignature":"EqQB"}],"role":"model"},{"parts":[{"text":"Checking."}],"role":"model"},{"parts":[{"functionCall":{"id":"call_0_get_weather","args":{"city":"Paris"},"name":"get_weather"},"thoughtSignature":"Cr8BAe_-x9Q="}],"role":"model"},{"parts":[{"text":""}],"role":"model"},{"parts":[{"functionResponse":{"id":"call_0_get_weather","name":"get_weather","response":{"result":"sunny"}}}],"role":"user"}],"generationConfig":{}}"#;
        let req = parse_request(body, &mut strict()).unwrap();
        let signed = call_id(0, "get_weather", Some("Cr8BAe/+x9Q="));
        assert_eq!(req.messages.len(), 3);
        assert_eq!(
            req.messages[1].content,
            [
                Part::Thinking {
                    text: "Hmm".into(),
                    signature: Some("EqQB".into())
                },
                text("Checking."),
                call(&signed, "get_weather", r#"{"city":"Paris"}"#),
            ]
        );
        assert_eq!(req.messages[2].content, [result(&signed, "sunny", false)]);
    }

    #[test]
    fn stream_ends_with_pending_calls_and_a_default_finish() {
        let out = stream(vec![
            StreamEvent::Start {
                id: String::new(),
                model: String::new(),
                usage: Usage::default(),
            },
            StreamEvent::ToolStart {
                index: 0,
                id: "call_a".into(),
                name: "f".into(),
            },
            StreamEvent::ToolArgs {
                index: 0,
                json: "{}".into(),
            },
            StreamEvent::Done,
            StreamEvent::Text {
                index: 1,
                text: "after the end".into(),
            },
        ]);
        let chunks = data_lines(&out);
        assert_eq!(chunks.len(), 2, "{out}");
        assert_eq!(
            chunks[0]["candidates"][0]["content"]["parts"][0]["functionCall"],
            json!({"id": "call_a", "name": "f", "args": {}})
        );
        assert!(chunks[0].get("responseId").is_none());
        assert_eq!(chunks[1]["candidates"][0]["finishReason"], "STOP");
        assert_eq!(chunks[1]["usageMetadata"]["totalTokenCount"], 0);
    }

    #[test]
    fn stream_error_ends_it() {
        let out = stream(vec![
            StreamEvent::Start {
                id: "r".into(),
                model: "m".into(),
                usage: Usage::default(),
            },
            StreamEvent::Text {
                index: 0,
                text: "Hel".into(),
            },
            StreamEvent::Error {
                kind: "rate_limit_error".into(),
                message: "slow down".into(),
            },
            StreamEvent::Stop {
                reason: StopReason::EndTurn,
                stop_sequence: None,
            },
            StreamEvent::Done,
        ]);
        let chunks = data_lines(&out);
        assert_eq!(chunks.len(), 2, "{out}");
        assert_eq!(
            chunks[1],
            json!({"error": {"code": 429, "message": "slow down", "status": "RESOURCE_EXHAUSTED"}})
        );
        for (kind, code, status) in [
            ("overloaded_error", 503, "UNAVAILABLE"),
            ("api_error", 500, "INTERNAL"),
            ("invalid_request_error", 400, "INVALID_ARGUMENT"),
            ("authentication_error", 401, "UNAUTHENTICATED"),
            ("ThrottlingException", 429, "RESOURCE_EXHAUSTED"),
        ] {
            let out = stream(vec![StreamEvent::Error {
                kind: kind.into(),
                message: "m".into(),
            }]);
            let v = &data_lines(&out)[0]["error"];
            assert_eq!(
                (v["code"].as_u64(), v["status"].as_str()),
                (Some(code), Some(status))
            );
        }
    }

    #[test]
    fn id_helpers() {
        assert_eq!(call_id(3, "f", None), "call_3_f");
        assert_eq!(signature_of("call_3_f"), None);
        assert_eq!(
            signature_of(&signed_id("x", "ab+/cw==")).as_deref(),
            Some("ab+/cw==")
        );
        assert_eq!(
            parse_call_id("call_3_get_weather__thought__abc"),
            Some("get_weather")
        );
        assert_eq!(parse_call_id("toolu_01"), None);
        assert!(is_base64("EqQBCgIYAg==") && is_base64("Cr8BAe_-x9Q"));
        assert!(!is_base64("not base64!") && !is_base64("abcde"));
        assert_eq!(camel("allowed_function_names"), "allowedFunctionNames");
        assert_eq!(camel("_responseJsonSchema"), "_responseJsonSchema");
    }
    #[test]
    fn only_alt_sse_asks_for_events() {
        assert!(asks_sse(Some("key=a&alt=sse")) && !asks_sse(Some("alt=json")) && !asks_sse(None));
    }

    #[test]
    fn events_become_one_json_array() {
        let mut a = ArrayStream::default();
        let mut out = a.feed(b"data: {\"a\":1}\r\n\r\nda");
        out.extend(a.feed(b"ta: {\"b\":2}\n\n: comment\n\n"));
        out.extend(a.feed(b"data: {\"c\":3}"));
        out.extend(a.finish());
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v, json!([{"a": 1}, {"b": 2}, {"c": 3}]));
        let mut empty = ArrayStream::default();
        assert_eq!(empty.finish(), b"[]");
    }
}
