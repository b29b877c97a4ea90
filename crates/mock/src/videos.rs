//! OpenAI's Videos API (Sora), mocked so that a gateway's video routes can be tested end to
//! end: an in-memory store per mock process (bounded: the oldest videos go first). A video is
//! `queued` when created (from JSON or a form, as the SDK sends it) or remixed, and
//! `completed` on the next retrieve, as the Files mock's batches are; its content (the video,
//! a thumbnail or a spritesheet) is then small deterministic bytes of the right type, and a
//! 400 before. Lists are newest first in pages (`limit`, default 20, `after`, `order`).

use std::sync::{Mutex, MutexGuard};

use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_TYPE};
use http::{HeaderMap, Method, Response, StatusCode};
use serde_json::{json, Value};

use sluice_core::endpoint::Dialect;
use sluice_translate::multipart;

use crate::objects::{
    answer, api_path, json_object, locked, now, ok, page, query_param, Bounded, Refusal,
};
use crate::{error, MockBody, MockSettings};

/// Most videos one mock process keeps.
const MAX_VIDEOS: usize = 1000;

/// How long a completed video's assets can be downloaded, in seconds.
const EXPIRES_AFTER: u64 = 3600;

/// The model when the request names none.
const DEFAULT_MODEL: &str = "sora-2";

/// The clip lengths OpenAI accepts, in seconds; the first is the default.
const SECONDS: [&str; 3] = ["4", "8", "12"];

/// The resolutions OpenAI accepts; the first is the default.
const SIZES: [&str; 4] = ["720x1280", "1280x720", "1024x1792", "1792x1024"];

/// A 1×1 lossless WebP: every video's thumbnail.
const THUMBNAIL_WEBP: &[u8] = &[
    0x52, 0x49, 0x46, 0x46, 0x1a, 0x00, 0x00, 0x00, 0x57, 0x45, 0x42, 0x50, 0x56, 0x50, 0x38, 0x4c,
    0x0d, 0x00, 0x00, 0x00, 0x2f, 0x00, 0x00, 0x00, 0x10, 0x07, 0x10, 0x11, 0x11, 0x88, 0x88, 0xfe,
    0x07, 0x00,
];

/// The store of videos, by id, at most [`MAX_VIDEOS`].
struct Store {
    videos: Bounded<Value>,
    next: u64,
}

impl Store {
    fn id(&mut self) -> String {
        self.next += 1;
        format!("video_{:08x}{:08x}", fastrand::u32(..), self.next)
    }

    fn put(&mut self, video: Value) {
        let id = video["id"].as_str().unwrap_or_default().to_owned();
        self.videos.put(id, video);
    }
}

static STORE: Mutex<Store> = Mutex::new(Store {
    videos: Bounded::new(MAX_VIDEOS),
    next: 0,
});

fn store() -> MutexGuard<'static, Store> {
    locked(&STORE)
}

/// The Videos path `path` is, without `/v1` (or Azure's `/openai/v1`), if it is one.
pub(crate) fn route(path: &str) -> Option<&str> {
    api_path(path, "videos")
}

/// Answer a Videos call (`path` as [`route`] returns it). Never fails: unknown ids get
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
    match (method, segments.as_slice()) {
        (&Method::POST, ["videos"]) => answer(create(headers, body)),
        (&Method::GET, ["videos"]) => ok(&list(query)),
        (&Method::GET, ["videos", id]) => answer(retrieve(id)),
        (&Method::DELETE, ["videos", id]) => answer(delete(id)),
        (&Method::GET, ["videos", id, "content"]) => content(id, query).unwrap_or_else(Into::into),
        (&Method::POST, ["videos", id, "remix"]) => answer(remix(id, body)),
        _ => error(
            StatusCode::NOT_FOUND,
            &format!("Unknown request URL: {method} {path}"),
            None,
            "unknown_url",
        ),
    }
}

/// What a create request asks for, from JSON or form fields.
#[derive(Default)]
struct Ask {
    model: Option<String>,
    prompt: Option<String>,
    seconds: Option<String>,
    size: Option<String>,
}

/// Read a create request: a form (as the SDK sends it, with an optional `input_reference`
/// file) or a JSON object.
fn ask(headers: &HeaderMap, body: &Bytes) -> Result<Ask, Refusal> {
    let boundary = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(multipart::boundary);
    if let Some(boundary) = boundary {
        let parts =
            multipart::parts(body, boundary).map_err(|e| Refusal::bad(e.to_string(), "body"))?;
        let field = |name: &str| {
            multipart::field(&parts, name)
                .and_then(|p| multipart::text(body, p))
                .map(str::to_owned)
        };
        return Ok(Ask {
            model: field("model"),
            prompt: field("prompt"),
            seconds: field("seconds"),
            size: field("size"),
        });
    }
    let v = json_object(body)?;
    let text = |name: &str| match &v[name] {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    };
    Ok(Ask {
        model: text("model"),
        prompt: text("prompt"),
        seconds: text("seconds"),
        size: text("size"),
    })
}

/// `value` if it is one of `allowed` (the first when absent), else a 400 naming `param`.
fn one_of(value: Option<String>, allowed: &[&str], param: &str) -> Result<String, Refusal> {
    let value = value.unwrap_or_else(|| allowed.first().copied().unwrap_or_default().to_owned());
    if allowed.contains(&value.as_str()) {
        return Ok(value);
    }
    Err(Refusal::bad(
        format!(
            "Invalid value for '{param}': '{value}'. Supported values are: {}.",
            allowed.join(", ")
        ),
        param,
    ))
}

/// The prompt, required and non-empty.
fn prompt(prompt: Option<String>) -> Result<String, Refusal> {
    prompt
        .filter(|p| !p.trim().is_empty())
        .ok_or_else(|| Refusal::bad("Missing required parameter: 'prompt'.", "prompt"))
}

/// A queued video object.
fn video(
    id: &str,
    model: &str,
    prompt: &str,
    seconds: &str,
    size: &str,
    from: Option<&str>,
) -> Value {
    json!({
        "id": id, "object": "video", "model": model, "status": "queued", "progress": 0,
        "created_at": now(), "completed_at": null, "expires_at": null, "prompt": prompt,
        "seconds": seconds, "size": size, "remixed_from_video_id": from, "error": null,
    })
}

/// `POST /videos`: a queued video.
fn create(headers: &HeaderMap, body: &Bytes) -> Result<Value, Refusal> {
    let a = ask(headers, body)?;
    let prompt = prompt(a.prompt)?;
    let seconds = one_of(a.seconds, &SECONDS, "seconds")?;
    let size = one_of(a.size, &SIZES, "size")?;
    let model = a
        .model
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| DEFAULT_MODEL.to_owned());
    let mut s = store();
    let id = s.id();
    let object = video(&id, &model, &prompt, &seconds, &size, None);
    s.put(object.clone());
    Ok(object)
}

/// `GET /videos`: newest first, 20 to a page unless `limit` says otherwise.
fn list(query: Option<&str>) -> Value {
    let s = store();
    let data: Vec<&Value> = s.videos.newest_first().collect();
    page(&data, query, Some(20))
}

/// `GET /videos/{id}`: a queued video is completed by its first retrieve.
fn retrieve(id: &str) -> Result<Value, Refusal> {
    let mut s = store();
    let v = s
        .videos
        .get_mut(id)
        .ok_or_else(|| Refusal::missing("video", id))?;
    if v["status"] == "queued" {
        let t = now();
        v["status"] = json!("completed");
        v["progress"] = json!(100);
        v["completed_at"] = json!(t);
        v["expires_at"] = json!(t + EXPIRES_AFTER);
    }
    Ok(v.clone())
}

/// `DELETE /videos/{id}`.
fn delete(id: &str) -> Result<Value, Refusal> {
    store()
        .videos
        .remove(id)
        .ok_or_else(|| Refusal::missing("video", id))?;
    Ok(json!({"id": id, "object": "video.deleted", "deleted": true}))
}

/// `GET /videos/{id}/content?variant=video|thumbnail|spritesheet`: the asset's bytes once
/// the video is completed, a 400 before.
fn content(id: &str, query: Option<&str>) -> Result<Response<MockBody>, Refusal> {
    let variant = query_param(query, "variant").unwrap_or("video");
    let (bytes, content_type) = match variant {
        "video" => (mp4(id), "video/mp4"),
        "thumbnail" => (Bytes::from_static(THUMBNAIL_WEBP), "image/webp"),
        "spritesheet" => (Bytes::from(jpeg()), "image/jpeg"),
        other => {
            return Err(Refusal::bad(
                format!(
                    "Invalid value for 'variant': '{other}'. Supported values are: video, \
                     thumbnail, spritesheet."
                ),
                "variant",
            ))
        }
    };
    let status = match store().videos.get(id) {
        Some(v) => v["status"].as_str().unwrap_or_default().to_owned(),
        None => return Err(Refusal::missing("video", id)),
    };
    if status != "completed" {
        return Err(Refusal::new(
            StatusCode::BAD_REQUEST,
            format!("Video is not ready yet (status: {status}); retrieve it to check progress."),
            None,
            "video_not_ready",
        ));
    }
    let mut resp = Response::new(MockBody::full(bytes));
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    Ok(resp)
}

/// `POST /videos/{id}/remix`: a new queued video from `id` with a new prompt, the same model,
/// length and size.
fn remix(id: &str, body: &Bytes) -> Result<Value, Refusal> {
    let req = json_object(body)?;
    let prompt = prompt(req["prompt"].as_str().map(str::to_owned))?;
    let mut s = store();
    let source = s
        .videos
        .get(id)
        .ok_or_else(|| Refusal::missing("video", id))?;
    let text = |k: &str| source[k].as_str().unwrap_or_default().to_owned();
    let (model, seconds, size) = (text("model"), text("seconds"), text("size"));
    let new = s.id();
    let object = video(&new, &model, &prompt, &seconds, &size, Some(id));
    s.put(object.clone());
    Ok(object)
}

/// The video's bytes: an MP4 `ftyp` box, then an `mdat` box naming the video (so a test can
/// check it got this video's content).
fn mp4(id: &str) -> Bytes {
    let payload = format!("sluice-mock video {id}");
    let mut out = b"\0\0\0\x18ftypmp42\0\0\0\0mp42isom".to_vec();
    let size = u32::try_from(8 + payload.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&size.to_be_bytes());
    out.extend_from_slice(b"mdat");
    out.extend_from_slice(payload.as_bytes());
    Bytes::from(out)
}

/// A 1×1 grey baseline JPEG: every video's spritesheet. One quantisation table of ones, one
/// DC and one AC Huffman table of a single one-bit code each, and one block: DC difference 0,
/// then end of block.
fn jpeg() -> Vec<u8> {
    let mut out = vec![0xff, 0xd8];
    // DQT: table 0, 8-bit, all ones.
    out.extend_from_slice(&[0xff, 0xdb, 0x00, 0x43, 0x00]);
    out.extend_from_slice(&[1; 64]);
    // SOF0: 8 bits, 1×1, one component (id 1, 1×1 sampling, table 0).
    out.extend_from_slice(&[
        0xff, 0xc0, 0x00, 0x0b, 0x08, 0x00, 0x01, 0x00, 0x01, 0x01, 0x01, 0x11, 0x00,
    ]);
    // DHT: DC table 0, then AC table 0; each one code of length 1 for symbol 0.
    for class in [0x00, 0x10] {
        out.extend_from_slice(&[0xff, 0xc4, 0x00, 0x14, class, 1]);
        out.extend_from_slice(&[0; 15]);
        out.push(0x00);
    }
    // SOS: one component with tables 0/0, spectral 0..63; then the bits `00`, padded with 1s.
    out.extend_from_slice(&[
        0xff, 0xda, 0x00, 0x08, 0x01, 0x01, 0x00, 0x00, 0x3f, 0x00, 0x3f,
    ]);
    out.extend_from_slice(&[0xff, 0xd9]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    async fn call(
        method: Method,
        path: &str,
        ct: Option<&str>,
        body: &str,
    ) -> (u16, String, Bytes) {
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
            route(path).unwrap(),
            query,
            &h,
            &Bytes::from(body.to_owned()),
            &MockSettings::default(),
        );
        let status = resp.status().as_u16();
        let ct = resp
            .headers()
            .get(CONTENT_TYPE)
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        (status, ct, bytes)
    }

    async fn json_call(method: Method, path: &str, body: &str) -> (u16, Value) {
        let (s, _, b) = call(method, path, Some("application/json"), body).await;
        (s, serde_json::from_slice(&b).unwrap_or(Value::Null))
    }

    #[test]
    fn routes_with_and_without_v1() {
        assert_eq!(route("/v1/videos"), Some("/videos"));
        assert_eq!(
            route("/videos/video_1/content"),
            Some("/videos/video_1/content")
        );
        assert_eq!(route("/openai/v1/videos"), Some("/videos"));
        assert_eq!(route("/v1/videosx"), None);
    }

    #[test]
    fn the_assets_have_their_types_magic() {
        let v = mp4("video_1");
        assert_eq!(&v[..8], b"\0\0\0\x18ftyp");
        assert_eq!(&v[28..32], b"mdat");
        assert!(v.ends_with(b"video_1"));
        let j = jpeg();
        assert_eq!(
            (&j[..3], &j[j.len() - 2..]),
            (&[0xff, 0xd8, 0xff][..], &[0xff, 0xd9][..])
        );
        assert_eq!(&THUMBNAIL_WEBP[8..12], b"WEBP");
        assert_eq!(THUMBNAIL_WEBP.len(), 8 + 0x1a);
    }

    #[tokio::test]
    async fn a_video_is_queued_then_completed_then_downloaded() {
        let (s, v) = json_call(Method::POST, "/v1/videos", r#"{"prompt":"a cat"}"#).await;
        assert_eq!(s, 200, "{v}");
        let id = v["id"].as_str().unwrap().to_owned();
        assert!(id.starts_with("video_"));
        assert_eq!(v["object"], "video");
        assert_eq!(v["model"], "sora-2");
        assert_eq!(
            (v["status"].as_str(), v["progress"].as_u64()),
            (Some("queued"), Some(0))
        );
        assert_eq!(
            (v["seconds"].as_str(), v["size"].as_str()),
            (Some("4"), Some("720x1280"))
        );
        assert_eq!(v["completed_at"], Value::Null);
        assert_eq!(v["remixed_from_video_id"], Value::Null);
        let (s, _, _) = call(Method::GET, &format!("/v1/videos/{id}/content"), None, "").await;
        assert_eq!(s, 400, "not ready before it completes");
        let (_, done) = json_call(Method::GET, &format!("/v1/videos/{id}"), "").await;
        assert_eq!(
            (done["status"].as_str(), done["progress"].as_u64()),
            (Some("completed"), Some(100))
        );
        let t = done["completed_at"].as_u64().unwrap();
        assert_eq!(done["expires_at"].as_u64(), Some(t + EXPIRES_AFTER));
        for (variant, ct) in [
            ("", "video/mp4"),
            ("?variant=video", "video/mp4"),
            ("?variant=thumbnail", "image/webp"),
            ("?variant=spritesheet", "image/jpeg"),
        ] {
            let (s, got, bytes) = call(
                Method::GET,
                &format!("/v1/videos/{id}/content{variant}"),
                None,
                "",
            )
            .await;
            assert_eq!((s, got.as_str()), (200, ct));
            assert!(!bytes.is_empty());
        }
        let (s, _, _) = call(
            Method::GET,
            &format!("/v1/videos/{id}/content?variant=gif"),
            None,
            "",
        )
        .await;
        assert_eq!(s, 400);
        let (s, v) = json_call(Method::DELETE, &format!("/v1/videos/{id}"), "").await;
        assert_eq!(
            (s, v["object"].as_str(), v["deleted"].as_bool()),
            (200, Some("video.deleted"), Some(true))
        );
        let (s, v) = json_call(Method::GET, &format!("/v1/videos/{id}"), "").await;
        assert_eq!((s, v["error"]["code"].as_str()), (404, Some("not_found")));
    }

    #[tokio::test]
    async fn a_form_creates_and_a_remix_keeps_the_source_settings() {
        let form = "--B\r\nContent-Disposition: form-data; name=\"prompt\"\r\n\r\nwaves\r\n\
            --B\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nsora-2-pro\r\n\
            --B\r\nContent-Disposition: form-data; name=\"seconds\"\r\n\r\n8\r\n\
            --B\r\nContent-Disposition: form-data; name=\"size\"\r\n\r\n1280x720\r\n\
            --B\r\nContent-Disposition: form-data; name=\"input_reference\"; filename=\"r.png\"\r\n\
            Content-Type: image/png\r\n\r\nPNG\r\n--B--\r\n";
        let (s, _, b) = call(
            Method::POST,
            "/v1/videos",
            Some("multipart/form-data; boundary=B"),
            form,
        )
        .await;
        let v: Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(s, 200, "{v}");
        assert_eq!(
            (
                v["model"].as_str(),
                v["seconds"].as_str(),
                v["size"].as_str()
            ),
            (Some("sora-2-pro"), Some("8"), Some("1280x720"))
        );
        let id = v["id"].as_str().unwrap();
        let (s, r) = json_call(
            Method::POST,
            &format!("/v1/videos/{id}/remix"),
            r#"{"prompt":"calmer waves"}"#,
        )
        .await;
        assert_eq!(s, 200, "{r}");
        assert_eq!(r["remixed_from_video_id"], id);
        assert_eq!(
            (
                r["model"].as_str(),
                r["seconds"].as_str(),
                r["size"].as_str(),
                r["status"].as_str()
            ),
            (
                Some("sora-2-pro"),
                Some("8"),
                Some("1280x720"),
                Some("queued")
            )
        );
        assert_ne!(r["id"], v["id"]);
        let (s, _) = json_call(
            Method::POST,
            "/v1/videos/video_nope/remix",
            r#"{"prompt":"x"}"#,
        )
        .await;
        assert_eq!(s, 404);
        let (s, _) = json_call(Method::POST, &format!("/v1/videos/{id}/remix"), "{}").await;
        assert_eq!(s, 400);
    }

    #[tokio::test]
    async fn bad_creates_get_400s() {
        for body in [
            "{}",
            r#"{"prompt":""}"#,
            r#"{"prompt":"x","seconds":"5"}"#,
            r#"{"prompt":"x","size":"1x1"}"#,
            "[1]",
        ] {
            let (s, v) = json_call(Method::POST, "/v1/videos", body).await;
            assert_eq!(s, 400, "{body}: {v}");
        }
        let (s, v) = json_call(Method::POST, "/v1/videos", "{}").await;
        assert_eq!((s, v["error"]["param"].as_str()), (400, Some("prompt")));
        let (s, _) = json_call(Method::PUT, "/v1/videos", "{}").await;
        assert_eq!(s, 404);
    }

    #[tokio::test]
    async fn lists_page_newest_first() {
        let mut ids = Vec::new();
        for i in 0..3 {
            let (_, v) = json_call(
                Method::POST,
                "/v1/videos",
                &format!(r#"{{"prompt":"p{i}"}}"#),
            )
            .await;
            ids.push(v["id"].as_str().unwrap().to_owned());
        }
        // Other tests add videos concurrently: page from the newest of ours.
        let (_, all) = json_call(Method::GET, "/v1/videos?limit=1000", "").await;
        let listed: Vec<&str> = all["data"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|v| v["id"].as_str())
            .collect();
        let at = |id: &str| listed.iter().position(|l| *l == id).unwrap();
        assert!(at(&ids[2]) < at(&ids[1]) && at(&ids[1]) < at(&ids[0]));
        let (_, p) = json_call(
            Method::GET,
            &format!("/v1/videos?limit=1&after={}", ids[2]),
            "",
        )
        .await;
        assert_eq!(p["object"], "list");
        assert_eq!(p["data"].as_array().unwrap().len(), 1);
        assert_eq!(p["first_id"], p["last_id"]);
        assert_eq!(p["has_more"], true);
        let (_, d) = json_call(Method::GET, "/v1/videos", "").await;
        assert!(d["data"].as_array().unwrap().len() <= 20);
    }

    #[tokio::test]
    async fn the_mocks_key_is_required_when_set() {
        let keyed = MockSettings {
            api_key: Some("k".into()),
            ..MockSettings::default()
        };
        let resp = respond(
            &Method::GET,
            "/videos",
            None,
            &HeaderMap::new(),
            &Bytes::new(),
            &keyed,
        );
        assert_eq!(resp.status(), 401);
    }
}
