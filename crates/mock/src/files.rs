//! OpenAI's Files and Batches APIs, mocked: an in-memory store per mock process (bounded: the
//! oldest files go first), file objects, content and delete, lists newest first in pages
//! (`limit`, `after`); batches that are `validating`
//! when created and `completed` on the next retrieve, with an output file of JSONL answers
//! made by the mock's own chat endpoint and the batch's summed `usage`; cancel.
//! Azure's spelling (`/openai/files?api-version=...`) is served too.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_TYPE};
use http::{HeaderMap, Method, Response, StatusCode};
use http_body_util::BodyExt as _;
use serde_json::{json, Value};

use sluice_core::endpoint::Endpoint;
use sluice_translate::multipart;

use crate::objects::{locked, now, ok, page, Bounded, Refusal};
use crate::{error, MockBody, MockSettings};

/// Most files one mock process keeps.
const MAX_FILES: usize = 1000;
/// Most bytes of file content one mock process keeps.
const MAX_BYTES: usize = 512 * 1024 * 1024;
/// Most batches one mock process keeps.
const MAX_BATCHES: usize = 1000;

struct Store {
    files: BTreeMap<String, (Value, Bytes)>,
    order: VecDeque<String>,
    bytes: usize,
    batches: Bounded<Value>,
    next: u64,
}

impl Store {
    fn id(&mut self, prefix: &str) -> String {
        self.next += 1;
        format!("{prefix}-mock{:08x}{:04x}", now() as u32, self.next)
    }

    fn put_file(&mut self, filename: &str, purpose: &str, content: Bytes) -> Value {
        let id = self.id("file");
        let object = json!({
            "id": id, "object": "file", "bytes": content.len(), "created_at": now(),
            "filename": filename, "purpose": purpose, "status": "processed",
            "expires_at": null, "status_details": null,
        });
        self.bytes += content.len();
        self.files.insert(id.clone(), (object.clone(), content));
        self.order.push_back(id);
        while self.order.len() > MAX_FILES || (self.bytes > MAX_BYTES && self.order.len() > 1) {
            if let Some(old) = self.order.pop_front() {
                if let Some((_, c)) = self.files.remove(&old) {
                    self.bytes -= c.len();
                }
            }
        }
        object
    }

    fn put_batch(&mut self, batch: Value) {
        let id = batch["id"].as_str().unwrap_or_default().to_owned();
        self.batches.put(id, batch);
    }
}

static STORE: Mutex<Store> = Mutex::new(Store {
    files: BTreeMap::new(),
    order: VecDeque::new(),
    bytes: 0,
    batches: Bounded::new(MAX_BATCHES),
    next: 0,
});

fn store() -> std::sync::MutexGuard<'static, Store> {
    locked(&STORE)
}

/// Whether a path (without `/v1`) is one of the Files or Batches routes, in OpenAI's or
/// Azure's spelling; returns the path in OpenAI's spelling.
pub fn route(path: &str) -> Option<&str> {
    let bare = path.strip_prefix("/v1").unwrap_or(path);
    let bare = bare.strip_prefix("/openai").unwrap_or(bare);
    (bare == "/files"
        || bare.starts_with("/files/")
        || bare == "/batches"
        || bare.starts_with("/batches/"))
    .then_some(bare)
}

/// Answer a Files or Batches call (`path` as [`route`] returns it; `query` pages the lists:
/// `limit`, `after`). Never fails: unknown ids get OpenAI's 404.
pub async fn respond(
    method: &Method,
    path: &str,
    query: Option<&str>,
    headers: &HeaderMap,
    body: &Bytes,
    settings: &MockSettings,
) -> Response<MockBody> {
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match (method, segments.as_slice()) {
        (&Method::POST, ["files"]) => upload(headers, body),
        (&Method::GET, ["files"]) => {
            let s = store();
            // Newest first, as OpenAI lists them.
            let data: Vec<&Value> = s
                .order
                .iter()
                .rev()
                .filter_map(|id| s.files.get(id))
                .map(|f| &f.0)
                .collect();
            ok(&page(&data, query, None))
        }
        (&Method::GET, ["files", id]) => match store().files.get(*id) {
            Some((object, _)) => ok(object),
            None => missing("file", id),
        },
        (&Method::GET, ["files", id, "content"]) => match store().files.get(*id) {
            Some((_, content)) => {
                let mut resp = Response::new(MockBody::full(content.clone()));
                resp.headers_mut().insert(
                    CONTENT_TYPE,
                    HeaderValue::from_static("application/octet-stream"),
                );
                resp
            }
            None => missing("file", id),
        },
        (&Method::DELETE, ["files", id]) => {
            let mut s = store();
            match s.files.remove(*id) {
                Some((_, c)) => {
                    s.bytes -= c.len();
                    s.order.retain(|o| o != id);
                    ok(&json!({"id": id, "object": "file", "deleted": true}))
                }
                None => missing("file", id),
            }
        }
        (&Method::POST, ["batches"]) => create_batch(body),
        (&Method::GET, ["batches"]) => {
            let s = store();
            let data: Vec<&Value> = s.batches.newest_first().collect();
            ok(&page(&data, query, None))
        }
        (&Method::GET, ["batches", id]) => retrieve_batch(id, settings).await,
        (&Method::POST, ["batches", id, "cancel"]) => {
            let mut s = store();
            match s.batches.get_mut(id) {
                Some(b) => {
                    if b["status"] != "completed" {
                        b["status"] = json!("cancelled");
                        b["cancelled_at"] = json!(now());
                    }
                    ok(b)
                }
                None => missing("batch", id),
            }
        }
        _ => error(
            StatusCode::NOT_FOUND,
            &format!("Unknown request URL: {method} {path}"),
            None,
            "unknown_url",
        ),
    }
}

/// The file `id`'s name and content, if the store holds it (what a vector store reads).
pub(crate) fn file_content(id: &str) -> Option<(String, Bytes)> {
    let s = store();
    let (object, content) = s.files.get(id)?;
    let name = object["filename"].as_str().unwrap_or_default().to_owned();
    Some((name, content.clone()))
}

fn missing(what: &str, id: &str) -> Response<MockBody> {
    Refusal::missing(what, id).into()
}

fn bad(message: &str, param: &str) -> Response<MockBody> {
    Refusal::bad(message, param).into()
}

fn upload(headers: &HeaderMap, body: &Bytes) -> Response<MockBody> {
    let Some(boundary) = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(multipart::boundary)
    else {
        return bad("expected multipart/form-data", "file");
    };
    let parts = match multipart::parts(body, boundary) {
        Ok(p) => p,
        Err(e) => return bad(&e.to_string(), "file"),
    };
    let purpose = parts
        .iter()
        .find(|p| p.name == "purpose")
        .and_then(|p| multipart::text(body, p));
    let Some(purpose) = purpose else {
        return bad("Missing required parameter: 'purpose'.", "purpose");
    };
    let Some(file) = parts.iter().find(|p| p.name == "file") else {
        return bad("Missing required parameter: 'file'.", "file");
    };
    let content = body.slice(file.value.clone());
    let object = store().put_file(file.filename.unwrap_or("upload"), purpose, content);
    ok(&object)
}

fn create_batch(body: &Bytes) -> Response<MockBody> {
    let Ok(req) = serde_json::from_slice::<Value>(body) else {
        return bad("We could not parse the JSON body of your request.", "body");
    };
    let Some(input) = req["input_file_id"].as_str() else {
        return bad(
            "Missing required parameter: 'input_file_id'.",
            "input_file_id",
        );
    };
    let Some(endpoint) = req["endpoint"].as_str() else {
        return bad("Missing required parameter: 'endpoint'.", "endpoint");
    };
    let mut s = store();
    if !s.files.contains_key(input) {
        return missing("file", input);
    }
    let id = s.id("batch");
    let batch = json!({
        "id": id, "object": "batch", "endpoint": endpoint, "errors": null,
        "input_file_id": input,
        "completion_window": req["completion_window"].as_str().unwrap_or("24h"),
        "status": "validating", "output_file_id": null, "error_file_id": null,
        "created_at": now(), "in_progress_at": null, "expires_at": now() + 86_400,
        "completed_at": null, "cancelled_at": null,
        "request_counts": {"total": 0, "completed": 0, "failed": 0},
        "metadata": req.get("metadata").cloned().unwrap_or(Value::Null),
    });
    s.put_batch(batch.clone());
    ok(&batch)
}

/// A batch is completed on the first retrieve after its creation: each input line is answered
/// by the mock's chat endpoint, the answers become the output file, their usage the batch's.
async fn retrieve_batch(id: &str, settings: &MockSettings) -> Response<MockBody> {
    let (batch, input) = {
        let s = store();
        let Some(batch) = s.batches.get(id).cloned() else {
            return missing("batch", id);
        };
        let input = batch["input_file_id"]
            .as_str()
            .and_then(|f| s.files.get(f))
            .map(|f| f.1.clone());
        (batch, input)
    };
    if batch["status"] != "validating" {
        return ok(&batch);
    }
    let mut out = Vec::new();
    let (mut total, mut input_tokens, mut output_tokens) = (0u64, 0u64, 0u64);
    for line in input.unwrap_or_default().split(|b| *b == b'\n') {
        let Ok(request) = serde_json::from_slice::<Value>(line) else {
            continue;
        };
        total += 1;
        let body = Bytes::from(request["body"].to_string());
        let resp = crate::respond(
            Endpoint::ChatCompletions,
            &HeaderMap::new(),
            &body,
            settings,
        )
        .await;
        let status = resp.status().as_u16();
        let bytes = resp
            .into_body()
            .collect()
            .await
            .map(|c| c.to_bytes())
            .unwrap_or_default();
        let answer: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        input_tokens += answer["usage"]["prompt_tokens"].as_u64().unwrap_or(0);
        output_tokens += answer["usage"]["completion_tokens"].as_u64().unwrap_or(0);
        let line = json!({
            "id": format!("batch_req_{total}"), "custom_id": request["custom_id"],
            "response": {"status_code": status, "request_id": format!("req_{total}"), "body": answer},
            "error": null,
        });
        out.extend_from_slice(line.to_string().as_bytes());
        out.push(b'\n');
    }
    let mut s = store();
    let output = s.put_file("batch_output.jsonl", "batch_output", Bytes::from(out));
    let Some(b) = s.batches.get_mut(id) else {
        return missing("batch", id);
    };
    if b["status"] == "validating" {
        let t = now();
        b["status"] = json!("completed");
        b["output_file_id"] = output["id"].clone();
        b["in_progress_at"] = json!(t);
        b["finalizing_at"] = json!(t);
        b["completed_at"] = json!(t);
        b["request_counts"] = json!({"total": total, "completed": total, "failed": 0});
        b["usage"] = json!({
            "input_tokens": input_tokens, "output_tokens": output_tokens,
            "total_tokens": input_tokens + output_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        });
    }
    ok(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn call(method: Method, path: &str, ct: Option<&str>, body: &str) -> (u16, Value) {
        let mut h = HeaderMap::new();
        if let Some(ct) = ct {
            h.insert(CONTENT_TYPE, HeaderValue::from_str(ct).unwrap());
        }
        let (path, query) = match path.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (path, None),
        };
        let resp = respond(
            &method,
            path,
            query,
            &h,
            &Bytes::from(body.to_owned()),
            &MockSettings::default(),
        )
        .await;
        let status = resp.status().as_u16();
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    #[tokio::test]
    async fn files_and_a_batch_round_trip() {
        let line = r#"{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"m","messages":[{"role":"user","content":"hi"}]}}"#;
        let form = format!(
            "--XX\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n--XX\r\nContent-Disposition: form-data; name=\"file\"; filename=\"in.jsonl\"\r\n\r\n{line}\n\r\n--XX--\r\n"
        );
        let (s, file) = call(
            Method::POST,
            "/files",
            Some("multipart/form-data; boundary=XX"),
            &form,
        )
        .await;
        assert_eq!(s, 200, "{file}");
        let fid = file["id"].as_str().unwrap().to_owned();
        assert_eq!(file["filename"], "in.jsonl");
        let body = format!(
            r#"{{"input_file_id":"{fid}","endpoint":"/v1/chat/completions","completion_window":"24h"}}"#
        );
        let (s, batch) = call(Method::POST, "/batches", None, &body).await;
        assert_eq!((s, batch["status"].as_str()), (200, Some("validating")));
        let bid = batch["id"].as_str().unwrap();
        let (_, done) = call(Method::GET, &format!("/batches/{bid}"), None, "").await;
        assert_eq!(done["status"], "completed");
        assert!(done["usage"]["input_tokens"].as_u64().unwrap() > 0);
        let (_, again) = call(Method::GET, &format!("/batches/{bid}"), None, "").await;
        assert_eq!(again["output_file_id"], done["output_file_id"]);
        let (s, _) = call(Method::DELETE, &format!("/files/{fid}"), None, "").await;
        assert_eq!(s, 200);
        let (s, _) = call(Method::GET, &format!("/files/{fid}"), None, "").await;
        assert_eq!(s, 404);
    }
}
