//! Items as kept: a request's `input` (a string, or a list of items, messages perhaps in
//! their short form) made into whole items with ids, as OpenAI lists them back
//! (`input_items`, a conversation's items).

use serde_json::{json, Value};
use sluice_core::error::ApiError;

/// A fresh item id with OpenAI's prefix for its type.
pub(super) fn fresh_id(kind: &str) -> String {
    let prefix = match kind {
        "function_call" => "fc",
        "function_call_output" => "fco",
        "reasoning" => "rs",
        _ => "msg",
    };
    format!("{prefix}_{}", sluice_core::random::uuid_v4().simple())
}

/// A request's `input` as whole items: a string is one user message.
pub(super) fn input_items(input: Option<&Value>) -> Result<Vec<Value>, ApiError> {
    match input {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(s)) => Ok(vec![whole(json!({"role": "user", "content": s}))?]),
        Some(Value::Array(items)) => items.iter().cloned().map(whole).collect(),
        Some(_) => Err(ApiError::InvalidParam {
            param: "input",
            message: "expected a string or a list of items".into(),
        }),
    }
}

/// One item made whole: a message's `type`, `status` and parts (a string content is one
/// text part: `input_text`, or `output_text` for the assistant's), and an id when it has none.
/// Other items are kept as they are, with an id.
pub(super) fn whole(item: Value) -> Result<Value, ApiError> {
    let Value::Object(mut o) = item else {
        return Err(ApiError::InvalidParam {
            param: "input",
            message: "an item must be an object".into(),
        });
    };
    let kind = o
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("message")
        .to_owned();
    if kind == "message" {
        o.insert("type".into(), "message".into());
        let assistant = o.get("role").and_then(Value::as_str) == Some("assistant");
        if let Some(Value::String(text)) = o.get("content") {
            let part = if assistant {
                json!({"type": "output_text", "text": text, "annotations": []})
            } else {
                json!({"type": "input_text", "text": text})
            };
            o.insert("content".into(), Value::Array(vec![part]));
        }
        o.entry("status").or_insert_with(|| "completed".into());
    }
    if !o.get("id").is_some_and(Value::is_string) {
        o.insert("id".into(), fresh_id(&kind).into());
    }
    Ok(Value::Object(o))
}

/// One page of a list (`limit`, `order`, `after`), as OpenAI answers list calls.
pub(super) fn page(all: Vec<Value>, query: &Query) -> Value {
    let mut all = all;
    if query.descending {
        all.reverse();
    }
    let start = match &query.after {
        Some(after) => all
            .iter()
            .position(|i| i.get("id").and_then(Value::as_str) == Some(after))
            .map_or(all.len(), |p| p + 1),
        None => 0,
    };
    let rest = all.split_off(start.min(all.len()));
    let has_more = rest.len() > query.limit;
    let data: Vec<Value> = rest.into_iter().take(query.limit).collect();
    let id = |v: Option<&Value>| v.and_then(|i| i.get("id")).cloned().unwrap_or(Value::Null);
    json!({
        "object": "list",
        "data": data,
        "first_id": id(data.first()),
        "last_id": id(data.last()),
        "has_more": has_more,
    })
}

/// A list call's query: `limit` (1–100, default 20), `order` (`desc` by default, as OpenAI's
/// item lists are), `after` (an item id).
#[derive(Debug, Clone)]
pub(super) struct Query {
    pub limit: usize,
    pub descending: bool,
    pub after: Option<String>,
}

impl Query {
    /// Read from a query string; a bad value is a 400 naming it.
    pub(super) fn parse(query: Option<&str>, default_descending: bool) -> Result<Self, ApiError> {
        let mut q = Self {
            limit: 20,
            descending: default_descending,
            after: None,
        };
        for (k, v) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
            match &*k {
                "limit" => {
                    q.limit = v
                        .parse::<usize>()
                        .ok()
                        .filter(|n| (1..=100).contains(n))
                        .ok_or(ApiError::InvalidParam {
                            param: "limit",
                            message: "expected a whole number from 1 to 100".into(),
                        })?;
                }
                "order" => {
                    q.descending = match &*v {
                        "desc" => true,
                        "asc" => false,
                        _ => {
                            return Err(ApiError::InvalidParam {
                                param: "order",
                                message: "expected asc or desc".into(),
                            })
                        }
                    }
                }
                "after" => q.after = Some(v.into_owned()),
                _ => {}
            }
        }
        Ok(q)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_string_input_is_one_user_message() {
        let items = input_items(Some(&json!("hi"))).unwrap();
        assert_eq!(items.len(), 1);
        let m = &items[0];
        assert_eq!(m["type"], "message");
        assert_eq!(m["role"], "user");
        assert_eq!(m["content"], json!([{"type": "input_text", "text": "hi"}]));
        assert!(m["id"].as_str().unwrap().starts_with("msg_"));
    }

    #[test]
    fn items_keep_what_they_have_and_get_an_id() {
        let given = json!([
            {"role": "assistant", "content": "done"},
            {"type": "function_call_output", "call_id": "c1", "output": "ok"},
            {"type": "message", "id": "msg_given", "role": "user",
             "content": [{"type": "input_text", "text": "x"}], "status": "completed"},
        ]);
        let items = input_items(Some(&given)).unwrap();
        assert_eq!(items[0]["content"][0]["type"], "output_text");
        assert!(items[1]["id"].as_str().unwrap().starts_with("fco_"));
        assert_eq!(items[1]["output"], "ok");
        assert_eq!(items[2], given[2]);
        assert!(input_items(Some(&json!(3))).is_err());
    }

    #[test]
    fn pages_follow_order_and_after() {
        let all: Vec<Value> = (1..=5).map(|i| json!({"id": format!("i{i}")})).collect();
        let q = |s| Query::parse(Some(s), true).unwrap();
        let p = page(all.clone(), &q("limit=2"));
        assert_eq!(p["data"], json!([{"id": "i5"}, {"id": "i4"}]));
        assert_eq!(p["has_more"], true);
        let p = page(all.clone(), &q("order=asc&after=i3"));
        assert_eq!(p["data"], json!([{"id": "i4"}, {"id": "i5"}]));
        assert_eq!(
            (&p["first_id"], &p["last_id"]),
            (&json!("i4"), &json!("i5"))
        );
        assert_eq!(p["has_more"], false);
        assert!(Query::parse(Some("limit=0"), true).is_err());
        assert!(Query::parse(Some("order=up"), true).is_err());
    }
}
