//! Test helpers for every crate that reads translated answers back: the fixtures of the
//! providers' documented shapes (`tests/fixtures/`), and what an OpenAI or Anthropic client
//! assembles from a stream. Compiled for this crate's tests and with the `testing` feature.

#![allow(clippy::unwrap_used, clippy::panic, clippy::expect_used)]

use serde_json::{json, Value};

use sluice_core::endpoint::Dialect;

use crate::Params;

/// Refuse parameters the target cannot take, for an OpenAI client.
pub fn strict() -> Params {
    Params::new(false, Dialect::OpenAi)
}

/// `drop_params: true`, for an OpenAI client.
pub fn dropping() -> Params {
    Params::new(true, Dialect::OpenAi)
}

/// The names `params` dropped, sorted.
pub fn dropped_names(params: &Params) -> Vec<&str> {
    let mut names: Vec<&str> = params.dropped().iter().map(|d| d.as_ref()).collect();
    names.sort_unstable();
    names
}

/// A fixture file's text (`tests/fixtures/<path>` at the repository root).
pub fn fixture(path: &str) -> String {
    let full = format!("{}/../../tests/fixtures/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{full}: {e}"))
}

/// Parse JSON bytes.
pub fn json_of(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap()
}

/// The JSON data lines of an SSE text (`[DONE]` left out).
pub fn data_lines(sse: &str) -> Vec<Value> {
    sse.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

/// A tool call as an OpenAI client assembles it: id, name, arguments.
pub type AssembledCall = (String, String, String);

/// What an OpenAI client assembles from chunks: text, reasoning, tool calls by index, finish.
pub fn assemble_openai(sse: &str) -> (String, String, Vec<AssembledCall>, String, Value) {
    let (mut text, mut reasoning, mut finish, mut usage) =
        (String::new(), String::new(), String::new(), Value::Null);
    let mut tools: Vec<AssembledCall> = Vec::new();
    for c in data_lines(sse) {
        if !c["usage"].is_null() {
            usage = c["usage"].clone();
        }
        let Some(choice) = c["choices"].get(0) else {
            continue;
        };
        let d = &choice["delta"];
        text.push_str(d["content"].as_str().unwrap_or_default());
        reasoning.push_str(d["reasoning_content"].as_str().unwrap_or_default());
        for t in d["tool_calls"].as_array().into_iter().flatten() {
            let i = t["index"].as_u64().unwrap() as usize;
            if tools.len() <= i {
                tools.resize(i + 1, Default::default());
            }
            if let Some(id) = t["id"].as_str() {
                tools[i].0 = id.to_owned();
                tools[i].1 = t["function"]["name"].as_str().unwrap().to_owned();
            }
            tools[i]
                .2
                .push_str(t["function"]["arguments"].as_str().unwrap_or_default());
        }
        if let Some(f) = choice["finish_reason"].as_str() {
            finish = f.to_owned();
        }
    }
    (text, reasoning, tools, finish, usage)
}

/// What an Anthropic client assembles from events: blocks by index, stop reason, usage.
pub fn assemble_anthropic(sse: &str) -> (Vec<Value>, String, Value, Vec<String>) {
    let mut names = Vec::new();
    let mut blocks: Vec<Value> = Vec::new();
    let (mut stop, mut usage) = (String::new(), Value::Null);
    let mut open: Option<usize> = None;
    for line in sse.lines() {
        if let Some(n) = line.strip_prefix("event: ") {
            names.push(n.to_owned());
        }
    }
    for e in data_lines(sse) {
        match e["type"].as_str().unwrap() {
            "message_start" => usage = e["message"]["usage"].clone(),
            "content_block_start" => {
                let i = e["index"].as_u64().unwrap() as usize;
                assert_eq!(i, blocks.len(), "blocks start in order");
                assert!(open.is_none(), "previous block closed first");
                open = Some(i);
                let mut b = e["content_block"].clone();
                if b["type"] == "tool_use" {
                    b["partial"] = json!("");
                }
                blocks.push(b);
            }
            "content_block_delta" => {
                let i = e["index"].as_u64().unwrap() as usize;
                assert_eq!(open, Some(i));
                let d = &e["delta"];
                let b = &mut blocks[i];
                match d["type"].as_str().unwrap() {
                    "text_delta" => {
                        b["text"] = json!(format!(
                            "{}{}",
                            b["text"].as_str().unwrap(),
                            d["text"].as_str().unwrap()
                        ))
                    }
                    "input_json_delta" => {
                        b["partial"] = json!(format!(
                            "{}{}",
                            b["partial"].as_str().unwrap(),
                            d["partial_json"].as_str().unwrap()
                        ))
                    }
                    "thinking_delta" => {
                        b["thinking"] = json!(format!(
                            "{}{}",
                            b["thinking"].as_str().unwrap(),
                            d["thinking"].as_str().unwrap()
                        ))
                    }
                    "signature_delta" => b["signature"] = d["signature"].clone(),
                    other => panic!("{other}"),
                }
            }
            "content_block_stop" => {
                assert_eq!(open.take(), e["index"].as_u64().map(|i| i as usize));
            }
            "message_delta" => {
                stop = e["delta"]["stop_reason"].as_str().unwrap().to_owned();
                for (k, v) in e["usage"].as_object().unwrap() {
                    usage[k] = v.clone();
                }
            }
            _ => {}
        }
    }
    (blocks, stop, usage, names)
}
