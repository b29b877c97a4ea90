//! What the mock's APIs beside inference share (Files and Batches, Videos, Vector Stores,
//! search): the clock, OpenAI's list pages, JSON bodies, [`Bounded`] stores, and [`Refusal`],
//! a refused request kept small until it is made into OpenAI's error answer at the edge.

use std::collections::{BTreeMap, VecDeque};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::{Response, StatusCode};
use serde_json::{json, Value};

use crate::{error, json as json_response, MockBody};

/// Seconds since the Unix epoch (0 if the clock is before it).
pub(crate) fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The path of an account-object API (`videos`, `vector_stores`) without `/v1` (or Azure's
/// `/openai/v1`), when `path` is one of its routes.
pub(crate) fn api_path<'p>(path: &'p str, api: &str) -> Option<&'p str> {
    let bare = path.strip_prefix("/openai").unwrap_or(path);
    let bare = bare.strip_prefix("/v1").unwrap_or(bare);
    let rest = bare.strip_prefix('/')?.strip_prefix(api)?;
    (rest.is_empty() || rest.starts_with('/')).then_some(bare)
}

/// A store's lock; a panic while it was held leaves what it holds usable.
pub(crate) use sluice_core::lock::lock as locked;

/// Objects by id, in the order they were made, the oldest dropped past a bound: so that a
/// long run of a mock cannot grow without end.
#[derive(Debug)]
pub(crate) struct Bounded<V> {
    by_id: BTreeMap<String, V>,
    order: VecDeque<String>,
    most: usize,
}

impl<V> Bounded<V> {
    /// A store keeping at most `most` objects.
    pub(crate) const fn new(most: usize) -> Self {
        Self {
            by_id: BTreeMap::new(),
            order: VecDeque::new(),
            most,
        }
    }

    /// Keep `v` under `id`, dropping the oldest past the bound.
    pub(crate) fn put(&mut self, id: String, v: V) {
        if self.by_id.insert(id.clone(), v).is_none() {
            self.order.push_back(id);
        }
        while self.order.len() > self.most {
            if let Some(old) = self.order.pop_front() {
                self.by_id.remove(&old);
            }
        }
    }

    /// The object of `id`.
    pub(crate) fn get(&self, id: &str) -> Option<&V> {
        self.by_id.get(id)
    }

    /// The object of `id`, to change.
    pub(crate) fn get_mut(&mut self, id: &str) -> Option<&mut V> {
        self.by_id.get_mut(id)
    }

    /// Forget `id`; its object, if it was kept.
    pub(crate) fn remove(&mut self, id: &str) -> Option<V> {
        let v = self.by_id.remove(id)?;
        self.order.retain(|o| o != id);
        Some(v)
    }

    /// The objects, newest first (OpenAI's list order).
    pub(crate) fn newest_first(&self) -> impl Iterator<Item = &V> {
        self.order.iter().rev().filter_map(|id| self.by_id.get(id))
    }
}

/// A request refused: the status and OpenAI's error fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    status: StatusCode,
    message: String,
    param: Option<String>,
    code: &'static str,
}

impl Refusal {
    /// A refusal with every field given.
    pub(crate) fn new(
        status: StatusCode,
        message: impl Into<String>,
        param: Option<&str>,
        code: &'static str,
    ) -> Self {
        Self {
            status,
            message: message.into(),
            param: param.map(str::to_owned),
            code,
        }
    }

    /// OpenAI's 400 naming the parameter at fault.
    pub(crate) fn bad(message: impl Into<String>, param: &str) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            message,
            Some(param),
            "invalid_request_error",
        )
    }

    /// OpenAI's 404 for an unknown id of a `what` (`file`, `video`, `vector store`, ...).
    pub(crate) fn missing(what: &str, id: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            format!("No such {what}: '{id}'"),
            Some("id"),
            "not_found",
        )
    }
}

impl From<Refusal> for Response<MockBody> {
    fn from(r: Refusal) -> Self {
        error(r.status, &r.message, r.param.as_deref(), r.code)
    }
}

/// A 200 with `v` as JSON.
pub(crate) fn ok(v: &Value) -> Response<MockBody> {
    json_response(StatusCode::OK, Bytes::from(v.to_string()))
}

/// A 200 with the object made, or the refusal's error.
pub(crate) fn answer(made: Result<Value, Refusal>) -> Response<MockBody> {
    match made {
        Ok(v) => ok(&v),
        Err(refusal) => refusal.into(),
    }
}

/// A request body as a JSON object (an empty body is `{}`).
pub(crate) fn json_object(body: &[u8]) -> Result<Value, Refusal> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(json!({}));
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(v) if v.is_object() => Ok(v),
        _ => Err(Refusal::bad(
            "We could not parse the JSON body of your request.",
            "body",
        )),
    }
}

/// A query parameter's value (not percent-decoded: ids and enum words need none).
pub(crate) fn query_param<'a>(query: Option<&'a str>, name: &str) -> Option<&'a str> {
    query
        .unwrap_or_default()
        .split('&')
        .find_map(|pair| pair.split_once('=').filter(|(k, _)| *k == name))
        .map(|(_, v)| v)
}

/// One page of a list (`all` newest first), as OpenAI pages: at most `limit` objects (else
/// `default_limit`, else all) after the one whose id is `after`, oldest first with
/// `order=asc`, `has_more` when some are left.
pub(crate) fn page(all: &[&Value], query: Option<&str>, default_limit: Option<usize>) -> Value {
    let limit = query_param(query, "limit")
        .and_then(|v| v.parse::<usize>().ok())
        .or(default_limit);
    let mut all = all.to_vec();
    if query_param(query, "order") == Some("asc") {
        all.reverse();
    }
    let start = query_param(query, "after")
        .and_then(|a| all.iter().position(|o| o["id"] == a))
        .map_or(0, |i| i + 1);
    let rest = all.get(start..).unwrap_or_default();
    let n = limit.unwrap_or(rest.len()).min(rest.len());
    let data = rest.get(..n).unwrap_or_default();
    json!({"object": "list", "data": data, "has_more": rest.len() > n,
        "first_id": data.first().map(|b| &b["id"]), "last_id": data.last().map(|b| &b["id"])})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_after_an_id_in_either_order() {
        let objects: Vec<Value> = (1..=5)
            .rev()
            .map(|i| json!({"id": format!("o{i}")}))
            .collect();
        let all: Vec<&Value> = objects.iter().collect();
        let p = page(&all, Some("limit=2&after=o4"), None);
        assert_eq!(p["data"], json!([{"id": "o3"}, {"id": "o2"}]));
        assert_eq!(
            (&p["first_id"], &p["last_id"], &p["has_more"]),
            (&json!("o3"), &json!("o2"), &json!(true))
        );
        let p = page(&all, Some("order=asc"), Some(3));
        assert_eq!(p["first_id"], "o1");
        assert_eq!(p["data"].as_array().map(Vec::len), Some(3));
        let p = page(&all, None, None);
        assert_eq!(
            (p["data"].as_array().map(Vec::len), &p["has_more"]),
            (Some(5), &json!(false))
        );
        let p = page(&[], None, Some(20));
        assert_eq!((&p["first_id"], &p["data"]), (&Value::Null, &json!([])));
    }

    #[test]
    fn bodies_and_params() {
        assert_eq!(json_object(b" ").ok(), Some(json!({})));
        assert!(json_object(b"[1]").is_err());
        assert_eq!(
            query_param(Some("a=1&variant=thumbnail"), "variant"),
            Some("thumbnail")
        );
        assert_eq!(query_param(None, "a"), None);
        let r: Response<MockBody> = Refusal::missing("video", "v1").into();
        assert_eq!(r.status(), StatusCode::NOT_FOUND);
    }
    #[test]
    fn api_paths() {
        assert_eq!(
            api_path("/v1/videos/v1/content", "videos"),
            Some("/videos/v1/content")
        );
        assert_eq!(api_path("/openai/v1/videos", "videos"), Some("/videos"));
        assert_eq!(api_path("/v1/videosx", "videos"), None);
        assert_eq!(api_path("/v1/files", "videos"), None);
    }

    #[test]
    fn bounded_stores_drop_the_oldest() {
        let mut b = Bounded::new(2);
        b.put("a".into(), 1);
        b.put("b".into(), 2);
        b.put("a".into(), 10);
        b.put("c".into(), 3);
        assert_eq!(b.get("a"), None, "the oldest went");
        assert_eq!(b.newest_first().copied().collect::<Vec<_>>(), [3, 2]);
        assert_eq!(b.remove("b"), Some(2));
        assert_eq!(b.newest_first().count(), 1);
    }
}
