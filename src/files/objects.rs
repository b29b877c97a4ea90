//! OpenAI's Videos and Vector Stores APIs (`/v1/videos*`, `/v1/vector_stores*`): objects that
//! live on one deployment's account, like files, so they get the same signed ids ([`ids`]) and
//! owners ([`owners`](super::owners)). This module reads their paths and translates the ids in
//! their bodies; the steps of a call are `files::handle`'s.
//!
//! A vector store names files: the `file_id`s and `file_ids` a client sends are sluice's file
//! ids, each checked (the caller's own, on the vector store's deployment) and replaced by the
//! upstream's; the files, searches and batches below a vector store are reached through its id.

use serde_json::{Map, Value};

use sluice_core::error::ApiError;

use super::ids::{self, Decoded, IdKey, Kind};
use super::owners::Viewer;

/// An object API besides files and batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// `/v1/videos`: generated videos (Sora).
    Videos,
    /// `/v1/vector_stores`: file search indexes.
    VectorStores,
}

impl Api {
    /// The API a path's first segment names.
    pub fn of(segment: &str) -> Option<Self> {
        match segment {
            "videos" => Some(Self::Videos),
            "vector_stores" => Some(Self::VectorStores),
            _ => None,
        }
    }

    /// The kind of id its objects get.
    pub fn kind(self) -> Kind {
        match self {
            Self::Videos => Kind::Video,
            Self::VectorStores => Kind::VectorStore,
        }
    }
}

/// Where below one object a call goes. File and batch segments hold the ids the client sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sub<'a> {
    /// `/{id}`: retrieve, modify (vector stores), delete.
    Itself,
    /// `/videos/{id}/content`
    Content,
    /// `/videos/{id}/remix`
    Remix,
    /// `/vector_stores/{id}/search`
    Search,
    /// `/vector_stores/{id}/files`
    Files,
    /// `/vector_stores/{id}/files/{file}`
    File(&'a str),
    /// `/vector_stores/{id}/files/{file}/content`
    FileContent(&'a str),
    /// `/vector_stores/{id}/file_batches`
    Batches,
    /// `/vector_stores/{id}/file_batches/{batch}`
    Batch(&'a str),
    /// `/vector_stores/{id}/file_batches/{batch}/cancel`
    BatchCancel(&'a str),
    /// `/vector_stores/{id}/file_batches/{batch}/files`
    BatchFiles(&'a str),
}

impl<'a> Sub<'a> {
    /// The part of a path after an object's id; `None` when `api` has no such route.
    pub fn of(api: Api, rest: Option<&'a str>) -> Option<Self> {
        let Some(rest) = rest.filter(|r| !r.is_empty()) else {
            return Some(Self::Itself);
        };
        let parts: Vec<&str> = rest.split('/').collect();
        let sub = match (api, parts.as_slice()) {
            (Api::Videos, ["content"]) => Self::Content,
            (Api::Videos, ["remix"]) => Self::Remix,
            (Api::VectorStores, ["search"]) => Self::Search,
            (Api::VectorStores, ["files"]) => Self::Files,
            (Api::VectorStores, ["files", f]) if !f.is_empty() => Self::File(f),
            (Api::VectorStores, ["files", f, "content"]) if !f.is_empty() => Self::FileContent(f),
            (Api::VectorStores, ["file_batches"]) => Self::Batches,
            (Api::VectorStores, ["file_batches", b]) if !b.is_empty() => Self::Batch(b),
            (Api::VectorStores, ["file_batches", b, "cancel"]) if !b.is_empty() => {
                Self::BatchCancel(b)
            }
            (Api::VectorStores, ["file_batches", b, "files"]) if !b.is_empty() => {
                Self::BatchFiles(b)
            }
            _ => return None,
        };
        Some(sub)
    }

    /// Whether the route takes this method.
    pub fn allows(self, api: Api, method: &http::Method) -> bool {
        use http::Method as M;
        match self {
            Self::Itself => match api {
                Api::Videos => *method == M::GET || *method == M::DELETE,
                Api::VectorStores => [M::GET, M::POST, M::DELETE].contains(method),
            },
            Self::File(_) => [M::GET, M::POST, M::DELETE].contains(method),
            Self::Content | Self::FileContent(_) | Self::Batch(_) | Self::BatchFiles(_) => {
                *method == M::GET
            }
            Self::Remix | Self::Search | Self::Batches | Self::BatchCancel(_) => *method == M::POST,
            Self::Files => *method == M::GET || *method == M::POST,
        }
    }

    /// Stable label for logs and metrics.
    pub fn label(self, api: Api) -> &'static str {
        match (api, self) {
            (Api::Videos, Self::Content) => "/v1/videos/{id}/content",
            (Api::Videos, Self::Remix) => "/v1/videos/{id}/remix",
            (Api::Videos, _) => "/v1/videos/{id}",
            (Api::VectorStores, Self::Search) => "/v1/vector_stores/{id}/search",
            (Api::VectorStores, Self::Files | Self::File(_) | Self::FileContent(_)) => {
                "/v1/vector_stores/{id}/files"
            }
            (
                Api::VectorStores,
                Self::Batches | Self::Batch(_) | Self::BatchCancel(_) | Self::BatchFiles(_),
            ) => "/v1/vector_stores/{id}/file_batches",
            (Api::VectorStores, _) => "/v1/vector_stores/{id}",
        }
    }

    /// The upstream path below the object's (`/files/{upstream file id}`), the file named in
    /// the path translated by `file`.
    pub fn upstream_path(
        self,
        file: &dyn Fn(&str) -> Result<String, ApiError>,
    ) -> Result<String, ApiError> {
        Ok(match self {
            Self::Itself => String::new(),
            Self::Content => "/content".into(),
            Self::Remix => "/remix".into(),
            Self::Search => "/search".into(),
            Self::Files => "/files".into(),
            Self::File(f) => format!("/files/{}", file(f)?),
            Self::FileContent(f) => format!("/files/{}/content", file(f)?),
            Self::Batches => "/file_batches".into(),
            Self::Batch(b) => format!("/file_batches/{}", segment(b)?),
            Self::BatchCancel(b) => format!("/file_batches/{}/cancel", segment(b)?),
            Self::BatchFiles(b) => format!("/file_batches/{}/files", segment(b)?),
        })
    }
}

/// A batch id passed on as the client sent it: one path segment of plain characters.
fn segment(id: &str) -> Result<&str, ApiError> {
    if id.len() <= 256
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b))
    {
        Ok(id)
    } else {
        Err(ApiError::NotFound {
            what: "vector store file batch",
            id: id.chars().take(256).collect(),
        })
    }
}

/// The upstream id of a file the caller names on `deployment`: a sluice file id it may see,
/// held by that deployment; anything else is the same 404 as a file that does not exist.
pub fn upstream_file(
    ids: &IdKey,
    viewer: &Viewer,
    deployment: &str,
    id: &str,
) -> Result<String, ApiError> {
    file_on(ids, viewer, id)
        .filter(|d| d.deployment == deployment)
        .map(|d| d.upstream)
        .ok_or_else(|| file_not_found(id))
}

/// A sluice file id the caller may see, decoded.
pub fn file_on(ids: &IdKey, viewer: &Viewer, id: &str) -> Option<Decoded> {
    ids::decode(ids, Kind::File, id).filter(|d| viewer.may_see(d.creator.as_deref()))
}

fn file_not_found(id: &str) -> ApiError {
    ApiError::NotFound {
        what: "file",
        id: id.chars().take(256).collect(),
    }
}

/// A request body's `file_id` and `file_ids` translated to the upstream's ids, and sluice's
/// own fields (`target_model_names`, `custom_llm_provider`) taken out.
pub fn translate_body(
    body: &mut Map<String, Value>,
    file: &dyn Fn(&str) -> Result<String, ApiError>,
) -> Result<(), ApiError> {
    for own in ["target_model_names", "custom_llm_provider"] {
        body.remove(own);
    }
    if let Some(slot) = body.get_mut("file_id") {
        let id = slot.as_str().ok_or(ApiError::InvalidParam {
            param: "file_id",
            message: "expected a file id".into(),
        })?;
        *slot = Value::String(file(id)?);
    }
    if let Some(Value::Array(list)) = body.get_mut("file_ids") {
        for slot in list {
            let id = slot.as_str().ok_or(ApiError::InvalidParam {
                param: "file_ids",
                message: "expected a list of file ids".into(),
            })?;
            *slot = Value::String(file(id)?);
        }
    }
    // A file batch's `files` entries name a file each (`{"file_id", "attributes"}`).
    if let Some(Value::Array(list)) = body.get_mut("files") {
        for entry in list {
            if let Some(slot) = entry.get_mut("file_id") {
                let id = slot.as_str().ok_or(ApiError::InvalidParam {
                    param: "files",
                    message: "expected each entry's file_id to be a file id".into(),
                })?;
                *slot = Value::String(file(id)?);
            }
        }
    }
    Ok(())
}

/// The first file a body names (`file_ids[0]`, else `file_id`), for a vector store made
/// without a model group: it goes where its files are.
pub fn first_file(body: &Map<String, Value>) -> Option<&str> {
    body.get("file_ids")
        .and_then(Value::as_array)
        .and_then(|l| l.first())
        .or_else(|| body.get("file_id"))
        .and_then(Value::as_str)
}

/// The seconds of video an answer says it makes (`"seconds": "8"`), for its charge.
pub fn video_seconds(answer: &Value) -> Option<f64> {
    match answer.get("seconds")? {
        Value::String(s) => s.trim().parse().ok(),
        v => v.as_f64(),
    }
    .filter(|s: &f64| s.is_finite() && *s > 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Method;

    #[test]
    fn paths_below_an_object() {
        assert_eq!(Sub::of(Api::Videos, None), Some(Sub::Itself));
        assert_eq!(Sub::of(Api::Videos, Some("content")), Some(Sub::Content));
        assert_eq!(Sub::of(Api::Videos, Some("search")), None);
        assert_eq!(
            Sub::of(Api::VectorStores, Some("files/file-sluice-x/content")),
            Some(Sub::FileContent("file-sluice-x"))
        );
        assert_eq!(
            Sub::of(Api::VectorStores, Some("file_batches/vsfb_1/cancel")),
            Some(Sub::BatchCancel("vsfb_1"))
        );
        assert_eq!(Sub::of(Api::VectorStores, Some("files//content")), None);
        assert!(Sub::Search.allows(Api::VectorStores, &Method::POST));
        assert!(!Sub::Search.allows(Api::VectorStores, &Method::GET));
        assert!(Sub::Itself.allows(Api::VectorStores, &Method::POST));
        assert!(!Sub::Itself.allows(Api::Videos, &Method::POST));
    }

    #[test]
    fn file_ids_in_bodies_and_paths_become_the_upstreams() {
        let k = IdKey::new(None);
        let owner = Viewer::key_for_tests("aa");
        let mine = ids::encode(&k, Kind::File, "d1", Some("aa"), "file-1");
        let theirs = ids::encode(&k, Kind::File, "d1", Some("bb"), "file-2");
        let elsewhere = ids::encode(&k, Kind::File, "d2", Some("aa"), "file-3");
        let file = |id: &str| upstream_file(&k, &owner, "d1", id);
        assert_eq!(file(&mine).unwrap(), "file-1");
        for bad in [&theirs, &elsewhere, &"file-1".to_owned()] {
            assert!(matches!(file(bad), Err(ApiError::NotFound { .. })), "{bad}");
        }
        let mut body: Map<String, Value> = serde_json::from_value(serde_json::json!({
            "name": "kb", "file_ids": [mine], "target_model_names": "g",
            "files": [{"file_id": mine, "attributes": {"a": 1}}],
        }))
        .unwrap();
        translate_body(&mut body, &file).unwrap();
        assert_eq!(body["file_ids"][0], "file-1");
        assert_eq!(body["files"][0]["file_id"], "file-1");
        assert!(!body.contains_key("target_model_names"));
        let mut bad: Map<String, Value> =
            serde_json::from_value(serde_json::json!({"file_id": theirs})).unwrap();
        assert!(translate_body(&mut bad, &file).is_err());
        assert_eq!(
            Sub::File(&mine).upstream_path(&file).unwrap(),
            "/files/file-1"
        );
        assert!(Sub::Batch("../x").upstream_path(&file).is_err());
    }

    #[test]
    fn a_videos_seconds() {
        assert_eq!(
            video_seconds(&serde_json::json!({"seconds": "8"})),
            Some(8.0)
        );
        assert_eq!(video_seconds(&serde_json::json!({"seconds": 4})), Some(4.0));
        assert_eq!(video_seconds(&serde_json::json!({"seconds": "x"})), None);
        assert_eq!(video_seconds(&serde_json::json!({})), None);
    }
}
