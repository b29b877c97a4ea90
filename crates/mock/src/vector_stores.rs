//! OpenAI's Vector Stores API, mocked so that a gateway's file-search routes can be tested
//! end to end: an in-memory store per mock process (bounded: the oldest vector stores and
//! file batches go first; a vector store holds at most [`MAX_FILES_PER_STORE`] files). Files
//! are the Files mock's (`files.rs`): attaching an unknown one is a 400 naming it. Everything
//! is `completed` at once.
//!
//! Search reads the attached files' content when asked: each file is cut into paragraphs (or
//! lines, when it has no blank line), and each piece is scored by the share of the query's
//! words it holds, so the pieces with the query's words come first and a test can check that
//! a result comes from the file it attached. `filters` and `rewrite_query` are accepted and
//! not applied; `ranking_options.score_threshold` is.
//!
//! A file's content is answered in both shapes OpenAI documents: the API reference's
//! (`file_id`, `filename`, `attributes`, `content`) and the page the SDKs read (`object`,
//! `data`, `has_more`, `next_page`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, MutexGuard};

use bytes::Bytes;
use http::{HeaderMap, Method, Response, StatusCode};
use serde_json::{json, Value};

use sluice_core::endpoint::Dialect;

use crate::files::file_content;
use crate::objects::{
    answer, api_path, json_object, locked, now, page, query_param, Bounded, Refusal,
};
use crate::{MockBody, MockSettings};

/// Most vector stores one mock process keeps.
const MAX_STORES: usize = 1000;
/// Most files one vector store holds.
const MAX_FILES_PER_STORE: usize = 1000;
/// Most file batches one mock process keeps.
const MAX_BATCHES: usize = 1000;
/// Most key-value pairs of `metadata` or `attributes`.
const MAX_PAIRS: usize = 16;
/// Longest piece of a file search answers, in characters (800 tokens of 4).
const MAX_CHUNK_CHARS: usize = 3200;
/// The score of a piece holding none of the query's words; one holding all of them scores 1.
const BASE_SCORE: f64 = 0.1;
/// Seconds in a day, for `expires_after`.
const DAY: u64 = 86_400;

/// One vector store: its object and its files (objects by file id, ids oldest first).
struct VectorStore {
    object: Value,
    files: BTreeMap<String, Value>,
    order: Vec<String>,
}

impl VectorStore {
    /// Attach (or re-attach) a file object, within [`MAX_FILES_PER_STORE`].
    fn attach(&mut self, file: Value) -> Result<(), Refusal> {
        let id = file["id"].as_str().unwrap_or_default().to_owned();
        if !self.files.contains_key(&id) {
            if self.order.len() >= MAX_FILES_PER_STORE {
                return Err(Refusal::bad(
                    format!("A vector store holds at most {MAX_FILES_PER_STORE} files."),
                    "file_id",
                ));
            }
            self.order.push(id.clone());
        }
        self.files.insert(id, file);
        Ok(())
    }

    /// Bring the object's usage, counts and activity up to date with its files.
    fn refresh(&mut self) {
        let bytes: u64 = self
            .files
            .values()
            .filter_map(|f| f["usage_bytes"].as_u64())
            .sum();
        let t = now();
        let o = &mut self.object;
        o["usage_bytes"] = json!(bytes);
        o["file_counts"] = counts(self.files.len());
        o["last_active_at"] = json!(t);
        o["expires_at"] = match o["expires_after"]["days"].as_u64() {
            Some(days) => json!(t + days * DAY),
            None => Value::Null,
        };
    }

    /// Its files' objects, newest first.
    fn newest_first(&self) -> Vec<&Value> {
        self.order
            .iter()
            .rev()
            .filter_map(|id| self.files.get(id))
            .collect()
    }
}

/// A file batch: its object and the ids of its files.
struct Batch {
    object: Value,
    file_ids: Vec<String>,
}

/// The vector stores (at most [`MAX_STORES`]) and file batches (at most [`MAX_BATCHES`]).
struct Store {
    stores: Bounded<VectorStore>,
    batches: Bounded<Batch>,
    next: u64,
}

impl Store {
    fn id(&mut self, prefix: &str) -> String {
        self.next += 1;
        format!("{prefix}_{:08x}{:08x}", fastrand::u32(..), self.next)
    }

    /// The vector store `id`, or OpenAI's 404.
    fn get(&mut self, id: &str) -> Result<&mut VectorStore, Refusal> {
        self.stores
            .get_mut(id)
            .ok_or_else(|| Refusal::missing("vector store", id))
    }

    /// The batch `batch` of vector store `vs`, or OpenAI's 404.
    fn batch(&self, vs: &str, batch: &str) -> Result<&Batch, Refusal> {
        if self.stores.get(vs).is_none() {
            return Err(Refusal::missing("vector store", vs));
        }
        self.batches
            .get(batch)
            .filter(|b| b.object["vector_store_id"] == vs)
            .ok_or_else(|| Refusal::missing("vector store file batch", batch))
    }
}

static STORE: Mutex<Store> = Mutex::new(Store {
    stores: Bounded::new(MAX_STORES),
    batches: Bounded::new(MAX_BATCHES),
    next: 0,
});

fn store() -> MutexGuard<'static, Store> {
    locked(&STORE)
}

/// The Vector Stores path `path` is, without `/v1` (or Azure's `/openai/v1`), if it is one.
pub(crate) fn route(path: &str) -> Option<&str> {
    api_path(path, "vector_stores")
}

/// Answer a Vector Stores call (`path` as [`route`] returns it). Never fails: unknown ids get
/// OpenAI's 404, bad requests its 400, a missing key (when the mock has one) its 401.
pub(crate) fn respond(
    method: &Method,
    path: &str,
    query: Option<&str>,
    headers: &HeaderMap,
    body: &Bytes,
    settings: &MockSettings,
) -> Response<MockBody> {
    if let Some(denied) = crate::key_refused(settings, headers, query, Dialect::OpenAi) {
        return denied;
    }
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    answer(match (method, segments.as_slice()) {
        (&Method::POST, ["vector_stores"]) => create(body),
        (&Method::GET, ["vector_stores"]) => Ok(list(query)),
        (&Method::GET, ["vector_stores", id]) => store().get(id).map(|vs| vs.object.clone()),
        (&Method::POST, ["vector_stores", id]) => modify(id, body),
        (&Method::DELETE, ["vector_stores", id]) => delete(id),
        (&Method::POST, ["vector_stores", id, "search"]) => search(id, body),
        (&Method::POST, ["vector_stores", id, "files"]) => attach(id, body),
        (&Method::GET, ["vector_stores", id, "files"]) => list_files(id, query),
        (&Method::GET, ["vector_stores", id, "files", file]) => vs_file(id, file),
        (&Method::POST, ["vector_stores", id, "files", file]) => update_file(id, file, body),
        (&Method::DELETE, ["vector_stores", id, "files", file]) => detach(id, file),
        (&Method::GET, ["vector_stores", id, "files", file, "content"]) => content(id, file),
        (&Method::POST, ["vector_stores", id, "file_batches"]) => create_batch(id, body),
        // A batch is completed as soon as it is made: cancelling it leaves it so.
        (&Method::GET, ["vector_stores", id, "file_batches", batch])
        | (&Method::POST, ["vector_stores", id, "file_batches", batch, "cancel"]) => {
            store().batch(id, batch).map(|b| b.object.clone())
        }
        (&Method::GET, ["vector_stores", id, "file_batches", batch, "files"]) => {
            batch_files(id, batch, query)
        }
        _ => Err(Refusal::new(
            StatusCode::NOT_FOUND,
            format!("Unknown request URL: {method} {path}"),
            None,
            "unknown_url",
        )),
    })
}

/// `file_counts` of `n` completed files.
fn counts(n: usize) -> Value {
    json!({"in_progress": 0, "completed": n, "failed": 0, "cancelled": 0, "total": n})
}

/// `metadata` (string values) or `attributes` (strings, numbers, booleans): at most
/// [`MAX_PAIRS`] pairs; `{}` when absent or null.
fn pairs(v: &Value, param: &str, any_scalar: bool) -> Result<Value, Refusal> {
    let fits = |x: &Value| x.is_string() || (any_scalar && (x.is_number() || x.is_boolean()));
    match v {
        Value::Null => Ok(json!({})),
        Value::Object(m) if m.len() <= MAX_PAIRS && m.values().all(fits) => Ok(v.clone()),
        _ => Err(Refusal::bad(
            format!("'{param}' must be an object of at most {MAX_PAIRS} pairs"),
            param,
        )),
    }
}

/// The chunking strategy a file gets: the static one asked for, else (absent or `auto`)
/// OpenAI's default, 800 tokens with 400 of overlap.
fn chunking(v: &Value) -> Result<Value, Refusal> {
    let strategy = |size: u64, overlap: u64| {
        json!({"type": "static", "static":
            {"max_chunk_size_tokens": size, "chunk_overlap_tokens": overlap}})
    };
    match v["type"].as_str() {
        None if v.is_null() => Ok(strategy(800, 400)),
        Some("auto") => Ok(strategy(800, 400)),
        Some("static") => {
            let size = v["static"]["max_chunk_size_tokens"].as_u64();
            let overlap = v["static"]["chunk_overlap_tokens"].as_u64();
            match (size, overlap) {
                (Some(s), Some(o)) if (100..=4096).contains(&s) && o <= s / 2 => Ok(strategy(s, o)),
                _ => Err(Refusal::bad(
                    "'chunking_strategy.static' needs max_chunk_size_tokens from 100 to 4096 \
                     and chunk_overlap_tokens at most half of it",
                    "chunking_strategy",
                )),
            }
        }
        _ => Err(Refusal::bad(
            "'chunking_strategy.type' must be 'auto' or 'static'",
            "chunking_strategy",
        )),
    }
}

/// `expires_after`: null, or `{"anchor": "last_active_at", "days": 1..=365}`.
fn expires_after(v: &Value) -> Result<Value, Refusal> {
    if v.is_null() {
        return Ok(Value::Null);
    }
    match (v["anchor"].as_str(), v["days"].as_u64()) {
        (Some("last_active_at"), Some(days)) if (1..=365).contains(&days) => {
            Ok(json!({"anchor": "last_active_at", "days": days}))
        }
        _ => Err(Refusal::bad(
            "'expires_after' must be {\"anchor\": \"last_active_at\", \"days\": 1..365}",
            "expires_after",
        )),
    }
}

/// The size of the Files mock's file `id`, or a 400 naming it (as `param`).
fn known_file(id: &str, param: &str) -> Result<usize, Refusal> {
    file_content(id)
        .map(|(_, content)| content.len())
        .ok_or_else(|| Refusal::bad(format!("No file found with id '{id}'."), param))
}

/// An array of strings `field` (absent: empty).
fn strings(req: &Value, field: &str) -> Result<Vec<String>, Refusal> {
    match &req[field] {
        Value::Null => Ok(Vec::new()),
        Value::Array(items) => items
            .iter()
            .map(|i| i.as_str().map(str::to_owned).ok_or(()))
            .collect::<Result<_, _>>()
            .map_err(|()| Refusal::bad(format!("'{field}' must be an array of strings"), field)),
        _ => Err(Refusal::bad(
            format!("'{field}' must be an array of strings"),
            field,
        )),
    }
}

/// A vector store file object.
fn file_object(vs: &str, file: &str, bytes: usize, attributes: Value, chunking: Value) -> Value {
    json!({
        "id": file, "object": "vector_store.file", "usage_bytes": bytes, "created_at": now(),
        "vector_store_id": vs, "status": "completed", "last_error": null,
        "attributes": attributes, "chunking_strategy": chunking,
    })
}

/// `POST /vector_stores`.
fn create(body: &[u8]) -> Result<Value, Refusal> {
    let req = json_object(body)?;
    let name = match &req["name"] {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        _ => return Err(Refusal::bad("'name' must be a string", "name")),
    };
    let metadata = pairs(&req["metadata"], "metadata", false)?;
    let expires = expires_after(&req["expires_after"])?;
    let strategy = chunking(&req["chunking_strategy"])?;
    let file_ids = strings(&req, "file_ids")?;
    if file_ids.len() > MAX_FILES_PER_STORE {
        return Err(Refusal::bad(
            format!("At most {MAX_FILES_PER_STORE} file_ids."),
            "file_ids",
        ));
    }
    let sizes = file_ids
        .iter()
        .map(|f| known_file(f, "file_ids"))
        .collect::<Result<Vec<_>, _>>()?;
    let mut s = store();
    let id = s.id("vs");
    let t = now();
    let mut vs = VectorStore {
        object: json!({
            "id": id, "object": "vector_store", "created_at": t, "name": name,
            "usage_bytes": 0, "file_counts": counts(0), "status": "completed",
            "expires_after": expires, "expires_at": null, "last_active_at": t,
            "metadata": metadata,
        }),
        files: BTreeMap::new(),
        order: Vec::new(),
    };
    for (file, bytes) in file_ids.iter().zip(sizes) {
        vs.attach(file_object(&id, file, bytes, json!({}), strategy.clone()))?;
    }
    vs.refresh();
    let object = vs.object.clone();
    s.stores.put(id, vs);
    Ok(object)
}

/// `GET /vector_stores`: newest first, 20 to a page unless `limit` says otherwise.
fn list(query: Option<&str>) -> Value {
    let s = store();
    let data: Vec<&Value> = s.stores.newest_first().map(|vs| &vs.object).collect();
    page(&data, query, Some(20))
}

/// `POST /vector_stores/{id}`: a new `name`, `metadata` or `expires_after` (null clears).
fn modify(id: &str, body: &[u8]) -> Result<Value, Refusal> {
    let req = json_object(body)?;
    let name = match req.get("name") {
        None | Some(Value::Null) => None,
        Some(Value::String(n)) => Some(n.clone()),
        Some(_) => return Err(Refusal::bad("'name' must be a string", "name")),
    };
    let metadata = req
        .get("metadata")
        .map(|m| pairs(m, "metadata", false))
        .transpose()?;
    let expires = req.get("expires_after").map(expires_after).transpose()?;
    let mut s = store();
    let vs = s.get(id)?;
    if let Some(name) = name {
        vs.object["name"] = json!(name);
    }
    if let Some(metadata) = metadata {
        vs.object["metadata"] = metadata;
    }
    if let Some(expires) = expires {
        vs.object["expires_after"] = expires;
    }
    vs.refresh();
    Ok(vs.object.clone())
}

/// `DELETE /vector_stores/{id}` (its files stay in the Files store).
fn delete(id: &str) -> Result<Value, Refusal> {
    store()
        .stores
        .remove(id)
        .ok_or_else(|| Refusal::missing("vector store", id))?;
    Ok(json!({"id": id, "object": "vector_store.deleted", "deleted": true}))
}

/// `POST /vector_stores/{id}/files`: attach a file of the Files store.
fn attach(id: &str, body: &[u8]) -> Result<Value, Refusal> {
    let req = json_object(body)?;
    let Some(file) = req["file_id"].as_str() else {
        return Err(Refusal::bad(
            "Missing required parameter: 'file_id'.",
            "file_id",
        ));
    };
    let attributes = pairs(&req["attributes"], "attributes", true)?;
    let strategy = chunking(&req["chunking_strategy"])?;
    let bytes = known_file(file, "file_id")?;
    let mut s = store();
    let vs = s.get(id)?;
    let object = file_object(id, file, bytes, attributes, strategy);
    vs.attach(object.clone())?;
    vs.refresh();
    Ok(object)
}

/// The page of `files` (newest first) a list query asks for: `filter` by status (every file
/// is `completed`), `limit` (default 20), `after`, `order`.
fn files_page(files: &[&Value], query: Option<&str>) -> Value {
    let wanted = query_param(query, "filter").is_none_or(|f| f == "completed");
    let files = if wanted { files } else { &[] };
    page(files, query, Some(20))
}

/// `GET /vector_stores/{id}/files`.
fn list_files(id: &str, query: Option<&str>) -> Result<Value, Refusal> {
    let mut s = store();
    let vs = s.get(id)?;
    Ok(files_page(&vs.newest_first(), query))
}

/// The attached file `file`, or OpenAI's 404.
fn attached<'a>(vs: &'a mut VectorStore, file: &str) -> Result<&'a mut Value, Refusal> {
    vs.files
        .get_mut(file)
        .ok_or_else(|| Refusal::missing("vector store file", file))
}

/// `GET /vector_stores/{id}/files/{file}`.
fn vs_file(id: &str, file: &str) -> Result<Value, Refusal> {
    let mut s = store();
    attached(s.get(id)?, file).map(|f| f.clone())
}

/// `POST /vector_stores/{id}/files/{file}`: new `attributes` (required, may be null).
fn update_file(id: &str, file: &str, body: &[u8]) -> Result<Value, Refusal> {
    let req = json_object(body)?;
    let Some(attributes) = req.get("attributes") else {
        return Err(Refusal::bad(
            "Missing required parameter: 'attributes'.",
            "attributes",
        ));
    };
    let attributes = pairs(attributes, "attributes", true)?;
    let mut s = store();
    let object = attached(s.get(id)?, file)?;
    object["attributes"] = attributes;
    Ok(object.clone())
}

/// `DELETE /vector_stores/{id}/files/{file}`: detach it (it stays in the Files store).
fn detach(id: &str, file: &str) -> Result<Value, Refusal> {
    let mut s = store();
    let vs = s.get(id)?;
    vs.files
        .remove(file)
        .ok_or_else(|| Refusal::missing("vector store file", file))?;
    vs.order.retain(|f| f != file);
    vs.refresh();
    Ok(json!({"id": file, "object": "vector_store.file.deleted", "deleted": true}))
}

/// `GET /vector_stores/{id}/files/{file}/content`: the file's pieces as text parts, in both
/// of OpenAI's shapes (see the module doc).
fn content(id: &str, file: &str) -> Result<Value, Refusal> {
    let attributes = {
        let mut s = store();
        attached(s.get(id)?, file)?["attributes"].clone()
    };
    let (filename, bytes) = file_content(file).ok_or_else(|| Refusal::missing("file", file))?;
    let parts: Vec<Value> = chunks(&bytes)
        .into_iter()
        .map(|text| json!({"type": "text", "text": text}))
        .collect();
    Ok(json!({
        "file_id": file, "filename": filename, "attributes": attributes, "content": parts,
        "object": "vector_store.file_content.page", "data": parts, "has_more": false,
        "next_page": null,
    }))
}

/// `POST /vector_stores/{id}/file_batches`: `file_ids` (with shared `attributes` and
/// `chunking_strategy`) or `files` (each with its own), attached at once.
fn create_batch(id: &str, body: &[u8]) -> Result<Value, Refusal> {
    let req = json_object(body)?;
    let entries = batch_entries(&req)?;
    if entries.is_empty() {
        return Err(Refusal::bad(
            "Missing required parameter: 'file_ids'.",
            "file_ids",
        ));
    }
    if entries.len() > MAX_FILES_PER_STORE {
        return Err(Refusal::bad(
            format!("A batch holds at most {MAX_FILES_PER_STORE} files."),
            "file_ids",
        ));
    }
    let sizes = entries
        .iter()
        .map(|(f, _, _)| known_file(f, "file_ids"))
        .collect::<Result<Vec<_>, _>>()?;
    let mut s = store();
    let batch_id = s.id("vsfb");
    let vs = s.get(id)?;
    for ((file, attributes, strategy), bytes) in entries.iter().zip(sizes) {
        vs.attach(file_object(
            id,
            file,
            bytes,
            attributes.clone(),
            strategy.clone(),
        ))?;
    }
    vs.refresh();
    let object = json!({
        "id": batch_id, "object": "vector_store.files_batch", "created_at": now(),
        "vector_store_id": id, "status": "completed", "file_counts": counts(entries.len()),
    });
    let file_ids = entries.into_iter().map(|(f, _, _)| f).collect();
    s.batches.put(
        batch_id,
        Batch {
            object: object.clone(),
            file_ids,
        },
    );
    Ok(object)
}

/// A batch request's files: each id with its attributes and chunking strategy.
fn batch_entries(req: &Value) -> Result<Vec<(String, Value, Value)>, Refusal> {
    let Some(files) = req.get("files").filter(|f| !f.is_null()) else {
        let attributes = pairs(&req["attributes"], "attributes", true)?;
        let strategy = chunking(&req["chunking_strategy"])?;
        return Ok(strings(req, "file_ids")?
            .into_iter()
            .map(|f| (f, attributes.clone(), strategy.clone()))
            .collect());
    };
    if !req["file_ids"].is_null() {
        return Err(Refusal::bad(
            "'file_ids' and 'files' are mutually exclusive.",
            "files",
        ));
    }
    let Some(files) = files.as_array() else {
        return Err(Refusal::bad("'files' must be an array", "files"));
    };
    files
        .iter()
        .map(|f| {
            let id = f["file_id"].as_str().ok_or_else(|| {
                Refusal::bad("Missing required parameter: 'files[].file_id'.", "files")
            })?;
            Ok((
                id.to_owned(),
                pairs(&f["attributes"], "attributes", true)?,
                chunking(&f["chunking_strategy"])?,
            ))
        })
        .collect()
}

/// `GET /vector_stores/{id}/file_batches/{batch}/files`: the batch's files still attached.
fn batch_files(id: &str, batch: &str, query: Option<&str>) -> Result<Value, Refusal> {
    let s = store();
    let ids = &s.batch(id, batch)?.file_ids;
    let Some(vs) = s.stores.get(id) else {
        return Err(Refusal::missing("vector store", id));
    };
    let files: Vec<&Value> = vs
        .newest_first()
        .into_iter()
        .filter(|f| ids.iter().any(|i| f["id"] == i.as_str()))
        .collect();
    Ok(files_page(&files, query))
}

/// `POST /vector_stores/{id}/search`: the attached files' pieces, best first.
fn search(id: &str, body: &[u8]) -> Result<Value, Refusal> {
    let req = json_object(body)?;
    let queries = search_queries(&req["query"])?;
    let max = match &req["max_num_results"] {
        Value::Null => 10,
        v => v
            .as_u64()
            .filter(|n| (1..=50).contains(n))
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| {
                Refusal::bad(
                    "'max_num_results' must be an integer from 1 to 50",
                    "max_num_results",
                )
            })?,
    };
    let threshold = req["ranking_options"]["score_threshold"]
        .as_f64()
        .unwrap_or(0.0);
    let files: Vec<(String, Value)> = {
        let mut s = store();
        let vs = s.get(id)?;
        vs.object["last_active_at"] = json!(now());
        vs.order
            .iter()
            .filter_map(|f| Some((f.clone(), vs.files.get(f)?["attributes"].clone())))
            .collect()
    };
    let wanted: BTreeSet<String> = queries.iter().flat_map(|q| words(q)).collect();
    let mut found: Vec<(f64, Value)> = Vec::new();
    for (file, attributes) in files {
        // A file deleted from the Files store since has nothing to search.
        let Some((filename, bytes)) = file_content(&file) else {
            continue;
        };
        for text in chunks(&bytes) {
            let score = score(&wanted, &text);
            found.push((
                score,
                json!({"file_id": file, "filename": filename, "score": score,
                    "attributes": attributes, "content": [{"type": "text", "text": text}]}),
            ));
        }
    }
    // Stable: equal scores keep the files' and pieces' order.
    found.sort_by(|a, b| b.0.total_cmp(&a.0));
    let data: Vec<Value> = found
        .into_iter()
        .filter(|(score, _)| *score >= threshold)
        .take(max)
        .map(|(_, hit)| hit)
        .collect();
    Ok(json!({
        "object": "vector_store.search_results.page", "search_query": queries, "data": data,
        "has_more": false, "next_page": null,
    }))
}

/// A search's `query`: a non-empty string or array of them.
fn search_queries(v: &Value) -> Result<Vec<String>, Refusal> {
    let found: Vec<String> = match v {
        Value::String(q) => vec![q.clone()],
        Value::Array(items) => items
            .iter()
            .filter_map(|i| i.as_str().map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    };
    let complete = v.as_array().is_none_or(|a| a.len() == found.len());
    if found.is_empty() || !complete || found.iter().any(|q| q.trim().is_empty()) {
        return Err(Refusal::bad(
            "'query' is required and must be a non-empty string or array of strings",
            "query",
        ));
    }
    Ok(found)
}

/// The lower-cased words of `text`.
fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
}

/// A piece's score: [`BASE_SCORE`], plus the rest of 1 in the share of `wanted` words it holds.
fn score(wanted: &BTreeSet<String>, text: &str) -> f64 {
    if wanted.is_empty() {
        return BASE_SCORE;
    }
    let held: BTreeSet<String> = words(text).collect();
    let hits = wanted.iter().filter(|w| held.contains(*w)).count();
    let share = f64::from(u32::try_from(hits).unwrap_or(u32::MAX))
        / f64::from(u32::try_from(wanted.len()).unwrap_or(u32::MAX));
    BASE_SCORE + (1.0 - BASE_SCORE) * share
}

/// A file's pieces: its paragraphs, or its lines when it has no blank line; none longer than
/// [`MAX_CHUNK_CHARS`].
fn chunks(content: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(content).replace("\r\n", "\n");
    let trimmed = |it: &mut dyn Iterator<Item = &str>| -> Vec<String> {
        it.map(str::trim)
            .filter(|p| !p.is_empty())
            .map(str::to_owned)
            .collect()
    };
    let mut pieces = trimmed(&mut text.split("\n\n"));
    if pieces.len() <= 1 {
        pieces = trimmed(&mut text.lines());
    }
    pieces.into_iter().flat_map(split_long).collect()
}

/// `text` cut into pieces of at most [`MAX_CHUNK_CHARS`] characters.
fn split_long(text: String) -> Vec<String> {
    if text.chars().count() <= MAX_CHUNK_CHARS {
        return vec![text];
    }
    let chars: Vec<char> = text.chars().collect();
    chars
        .chunks(MAX_CHUNK_CHARS)
        .map(|c| c.iter().collect())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::header::{HeaderValue, CONTENT_TYPE};
    use http_body_util::BodyExt;

    async fn call(method: Method, path: &str, body: &str) -> (u16, Value) {
        let (path, query) = match path.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (path, None),
        };
        let resp = respond(
            &method,
            route(path).unwrap(),
            query,
            &HeaderMap::new(),
            &Bytes::from(body.to_owned()),
            &MockSettings::default(),
        );
        let status = resp.status().as_u16();
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    /// Upload `content` as `name` to the Files mock; its id.
    async fn upload(name: &str, content: &str) -> String {
        let form = format!(
            "--XX\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nassistants\r\n\
             --XX\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\n\r\n\
             {content}\r\n--XX--\r\n"
        );
        let mut h = HeaderMap::new();
        h.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("multipart/form-data; boundary=XX"),
        );
        let resp = crate::files::respond(
            &Method::POST,
            "/files",
            None,
            &h,
            &Bytes::from(form),
            &MockSettings::default(),
        )
        .await;
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        let v: Value = serde_json::from_slice(&bytes).unwrap();
        v["id"].as_str().unwrap().to_owned()
    }

    #[test]
    fn routes_and_pieces() {
        assert_eq!(route("/v1/vector_stores"), Some("/vector_stores"));
        assert_eq!(
            route("/openai/vector_stores/vs_1/files"),
            Some("/vector_stores/vs_1/files")
        );
        assert_eq!(route("/v1/vector_storesx"), None);
        assert_eq!(chunks(b"a\n\nb c\r\n\r\n\n d \n"), ["a", "b c", "d"]);
        assert_eq!(chunks(b"one\ntwo\n"), ["one", "two"]);
        assert_eq!(chunks(&vec![b'x'; MAX_CHUNK_CHARS + 1]).len(), 2);
        let wanted: BTreeSet<String> = words("Refund POLICY").collect();
        assert!((score(&wanted, "our refund policy") - 1.0).abs() < 1e-9);
        assert!((score(&wanted, "nothing here") - BASE_SCORE).abs() < 1e-9);
    }

    #[tokio::test]
    async fn a_store_with_files_searches_their_content() {
        let manual = upload(
            "manual.txt",
            "Setup\n\nThe refund policy lasts 30 days.\n\nContact us",
        )
        .await;
        let other = upload("other.txt", "nothing relevant\nat all").await;
        let body = json!({"name": "docs", "file_ids": [manual, other],
            "metadata": {"team": "a"}, "expires_after": {"anchor": "last_active_at", "days": 7}});
        let (s, vs) = call(Method::POST, "/v1/vector_stores", &body.to_string()).await;
        assert_eq!(s, 200, "{vs}");
        let id = vs["id"].as_str().unwrap().to_owned();
        assert!(id.starts_with("vs_"));
        assert_eq!(vs["object"], "vector_store");
        assert_eq!(vs["file_counts"], counts(2));
        assert_eq!(vs["status"], "completed");
        assert!(vs["usage_bytes"].as_u64().unwrap() > 0);
        assert_eq!(vs["metadata"]["team"], "a");
        let t = vs["last_active_at"].as_u64().unwrap();
        assert_eq!(vs["expires_at"].as_u64(), Some(t + 7 * DAY));

        let (s, r) = call(
            Method::POST,
            &format!("/v1/vector_stores/{id}/search"),
            r#"{"query":"what is the refund policy?","max_num_results":2,"rewrite_query":true,
                "filters":{"type":"eq","key":"k","value":"v"},"ranking_options":{"ranker":"auto"}}"#,
        )
        .await;
        assert_eq!(s, 200, "{r}");
        assert_eq!(r["object"], "vector_store.search_results.page");
        assert_eq!(r["search_query"], json!(["what is the refund policy?"]));
        assert_eq!(
            (r["has_more"].as_bool(), &r["next_page"]),
            (Some(false), &Value::Null)
        );
        let data = r["data"].as_array().unwrap();
        assert_eq!(data.len(), 2);
        assert_eq!(data[0]["file_id"], manual.as_str());
        assert_eq!(data[0]["filename"], "manual.txt");
        assert_eq!(
            data[0]["content"][0]["text"],
            "The refund policy lasts 30 days."
        );
        assert!(data[0]["score"].as_f64() > data[1]["score"].as_f64());

        let (_, r) = call(
            Method::POST,
            &format!("/v1/vector_stores/{id}/search"),
            r#"{"query":["refund"],"ranking_options":{"score_threshold":0.5}}"#,
        )
        .await;
        assert_eq!(r["data"].as_array().unwrap().len(), 1);

        for bad_body in [
            r#"{}"#,
            r#"{"query":""}"#,
            r#"{"query":"q","max_num_results":51}"#,
        ] {
            let (s, _) = call(
                Method::POST,
                &format!("/v1/vector_stores/{id}/search"),
                bad_body,
            )
            .await;
            assert_eq!(s, 400, "{bad_body}");
        }

        let (s, c) = call(
            Method::GET,
            &format!("/v1/vector_stores/{id}/files/{manual}/content"),
            "",
        )
        .await;
        assert_eq!(s, 200, "{c}");
        assert_eq!(c["filename"], "manual.txt");
        assert_eq!(c["content"][1]["text"], "The refund policy lasts 30 days.");
        assert_eq!(c["data"], c["content"]);
        assert_eq!(c["object"], "vector_store.file_content.page");

        let (s, m) = call(
            Method::POST,
            &format!("/v1/vector_stores/{id}"),
            r#"{"name":"renamed","expires_after":null}"#,
        )
        .await;
        assert_eq!((s, m["name"].as_str()), (200, Some("renamed")));
        assert_eq!(
            (&m["expires_after"], &m["expires_at"]),
            (&Value::Null, &Value::Null)
        );
        assert_eq!(m["metadata"]["team"], "a", "kept when not sent");

        let (s, d) = call(Method::DELETE, &format!("/v1/vector_stores/{id}"), "").await;
        assert_eq!(
            (s, d["object"].as_str(), d["deleted"].as_bool()),
            (200, Some("vector_store.deleted"), Some(true))
        );
        let (s, _) = call(Method::GET, &format!("/v1/vector_stores/{id}"), "").await;
        assert_eq!(s, 404);
    }

    #[tokio::test]
    async fn unknown_files_are_refused_by_name() {
        let (s, v) = call(
            Method::POST,
            "/v1/vector_stores",
            r#"{"file_ids":["file-nope"]}"#,
        )
        .await;
        assert_eq!(s, 400);
        assert!(v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("file-nope"));
        assert_eq!(v["error"]["param"], "file_ids");
        let (s, v) = call(Method::POST, "/v1/vector_stores", "").await;
        assert_eq!(
            (s, v["name"].as_str(), &v["metadata"]),
            (200, Some(""), &json!({}))
        );
        let id = v["id"].as_str().unwrap();
        let (s, v) = call(
            Method::POST,
            &format!("/v1/vector_stores/{id}/files"),
            r#"{"file_id":"file-nope"}"#,
        )
        .await;
        assert_eq!((s, v["error"]["param"].as_str()), (400, Some("file_id")));
        let (s, _) = call(Method::POST, &format!("/v1/vector_stores/{id}/files"), "{}").await;
        assert_eq!(s, 400);
        let (s, _) = call(Method::POST, "/v1/vector_stores/vs_nope/files", "{}").await;
        assert_eq!(s, 400, "the body is checked first");
        let (s, _) = call(Method::GET, "/v1/vector_stores/vs_nope/files", "").await;
        assert_eq!(s, 404);
        for body in [
            r#"{"name":1}"#,
            r#"{"metadata":{"k":1}}"#,
            r#"{"expires_after":{"anchor":"created_at","days":1}}"#,
            r#"{"chunking_strategy":{"type":"static","static":{"max_chunk_size_tokens":50,"chunk_overlap_tokens":0}}}"#,
            "[]",
        ] {
            let (s, _) = call(Method::POST, "/v1/vector_stores", body).await;
            assert_eq!(s, 400, "{body}");
        }
    }

    #[tokio::test]
    async fn files_attach_update_list_and_detach() {
        let f = upload("a.md", "alpha").await;
        let (_, vs) = call(Method::POST, "/v1/vector_stores", r#"{"name":"x"}"#).await;
        let id = vs["id"].as_str().unwrap();
        let body = json!({"file_id": f, "attributes": {"lang": "en", "n": 1, "ok": true},
            "chunking_strategy": {"type": "static", "static": {"max_chunk_size_tokens": 400, "chunk_overlap_tokens": 100}}});
        let (s, vf) = call(
            Method::POST,
            &format!("/v1/vector_stores/{id}/files"),
            &body.to_string(),
        )
        .await;
        assert_eq!(s, 200, "{vf}");
        assert_eq!(vf["id"], f.as_str());
        assert_eq!(vf["object"], "vector_store.file");
        assert_eq!(vf["vector_store_id"], id);
        assert_eq!(
            (vf["status"].as_str(), &vf["last_error"]),
            (Some("completed"), &Value::Null)
        );
        assert_eq!(vf["usage_bytes"], 5);
        assert_eq!(
            vf["chunking_strategy"]["static"]["max_chunk_size_tokens"],
            400
        );
        let (_, vs) = call(Method::GET, &format!("/v1/vector_stores/{id}"), "").await;
        assert_eq!(
            (
                vs["file_counts"]["total"].as_u64(),
                vs["usage_bytes"].as_u64()
            ),
            (Some(1), Some(5))
        );

        let (s, u) = call(
            Method::POST,
            &format!("/v1/vector_stores/{id}/files/{f}"),
            r#"{"attributes":{"lang":"fr"}}"#,
        )
        .await;
        assert_eq!((s, &u["attributes"]), (200, &json!({"lang": "fr"})));
        let (_, g) = call(
            Method::GET,
            &format!("/v1/vector_stores/{id}/files/{f}"),
            "",
        )
        .await;
        assert_eq!(g["attributes"]["lang"], "fr");
        let (_, l) = call(Method::GET, &format!("/v1/vector_stores/{id}/files"), "").await;
        assert_eq!(
            (
                l["object"].as_str(),
                l["data"][0]["id"].as_str(),
                l["has_more"].as_bool()
            ),
            (Some("list"), Some(f.as_str()), Some(false))
        );
        assert_eq!(l["first_id"], f.as_str());
        let (_, l) = call(
            Method::GET,
            &format!("/v1/vector_stores/{id}/files?filter=failed"),
            "",
        )
        .await;
        assert_eq!(l["data"], json!([]));

        let (s, d) = call(
            Method::DELETE,
            &format!("/v1/vector_stores/{id}/files/{f}"),
            "",
        )
        .await;
        assert_eq!(
            (s, d["object"].as_str(), d["deleted"].as_bool()),
            (200, Some("vector_store.file.deleted"), Some(true))
        );
        let (s, _) = call(
            Method::GET,
            &format!("/v1/vector_stores/{id}/files/{f}"),
            "",
        )
        .await;
        assert_eq!(s, 404);
        let (_, vs) = call(Method::GET, &format!("/v1/vector_stores/{id}"), "").await;
        assert_eq!(
            (
                vs["file_counts"]["total"].as_u64(),
                vs["usage_bytes"].as_u64()
            ),
            (Some(0), Some(0))
        );
    }

    #[tokio::test]
    async fn file_batches_attach_at_once() {
        let a = upload("a.txt", "one").await;
        let b = upload("b.txt", "two").await;
        let (_, vs) = call(Method::POST, "/v1/vector_stores", "{}").await;
        let id = vs["id"].as_str().unwrap();
        let body = json!({"file_ids": [a, b], "attributes": {"k": "v"}});
        let (s, batch) = call(
            Method::POST,
            &format!("/v1/vector_stores/{id}/file_batches"),
            &body.to_string(),
        )
        .await;
        assert_eq!(s, 200, "{batch}");
        let bid = batch["id"].as_str().unwrap();
        assert!(bid.starts_with("vsfb_"));
        assert_eq!(batch["object"], "vector_store.files_batch");
        assert_eq!(
            (batch["status"].as_str(), batch["vector_store_id"].as_str()),
            (Some("completed"), Some(id))
        );
        assert_eq!(batch["file_counts"], counts(2));
        let (_, got) = call(
            Method::GET,
            &format!("/v1/vector_stores/{id}/file_batches/{bid}"),
            "",
        )
        .await;
        assert_eq!(got, batch);
        let (_, cancelled) = call(
            Method::POST,
            &format!("/v1/vector_stores/{id}/file_batches/{bid}/cancel"),
            "",
        )
        .await;
        assert_eq!(cancelled["status"], "completed");
        let (_, files) = call(
            Method::GET,
            &format!("/v1/vector_stores/{id}/file_batches/{bid}/files"),
            "",
        )
        .await;
        let ids: Vec<&str> = files["data"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|f| f["id"].as_str())
            .collect();
        assert_eq!(ids, [b.as_str(), a.as_str()], "newest first");
        assert_eq!(files["data"][0]["attributes"]["k"], "v");

        let body = json!({"files": [{"file_id": a, "attributes": {"only": "a"}}]});
        let (s, _) = call(
            Method::POST,
            &format!("/v1/vector_stores/{id}/file_batches"),
            &body.to_string(),
        )
        .await;
        assert_eq!(s, 200);
        let (_, fa) = call(
            Method::GET,
            &format!("/v1/vector_stores/{id}/files/{a}"),
            "",
        )
        .await;
        assert_eq!(fa["attributes"], json!({"only": "a"}));

        for body in [
            json!({}),
            json!({"file_ids": ["file-nope"]}),
            json!({"file_ids": [a], "files": [{"file_id": a}]}),
        ] {
            let (s, _) = call(
                Method::POST,
                &format!("/v1/vector_stores/{id}/file_batches"),
                &body.to_string(),
            )
            .await;
            assert_eq!(s, 400, "{body}");
        }
        let (s, _) = call(
            Method::GET,
            &format!("/v1/vector_stores/{id}/file_batches/vsfb_nope"),
            "",
        )
        .await;
        assert_eq!(s, 404);
    }

    #[tokio::test]
    async fn lists_page() {
        let (_, a) = call(Method::POST, "/v1/vector_stores", r#"{"name":"page-a"}"#).await;
        let (_, b) = call(Method::POST, "/v1/vector_stores", r#"{"name":"page-b"}"#).await;
        let (_, l) = call(
            Method::GET,
            &format!(
                "/v1/vector_stores?limit=1&after={}",
                b["id"].as_str().unwrap()
            ),
            "",
        )
        .await;
        assert_eq!(l["data"].as_array().unwrap().len(), 1);
        assert_eq!(l["object"], "list");
        assert!(l["first_id"].is_string() && l["last_id"].is_string());
        let (_, all) = call(Method::GET, "/v1/vector_stores?limit=100", "").await;
        let ids: Vec<&Value> = all["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| &v["id"])
            .collect();
        let at = |v: &Value| ids.iter().position(|i| *i == &v["id"]).unwrap();
        assert!(at(&b) < at(&a), "newest first");
        let (s, _) = call(Method::PUT, "/v1/vector_stores", "").await;
        assert_eq!(s, 404);
    }
}
