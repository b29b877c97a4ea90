//! Whose files, batches, videos and vector stores are whose. Each belongs to the virtual key that created
//! it (a batch's output and error files to the batch's creator): its id carries that key's
//! hash under a MAC ([`ids`]), and the store's `owned_objects` table records it, so that every
//! instance of a fleet agrees.
//!
//! - A virtual key sees (retrieves, reads, deletes, cancels, makes a batch from) only its own
//!   objects; another's id, a forged or altered id, or one with no creator is a 404, as if the
//!   object did not exist. Its lists are the upstream's lists filtered to the rows it owns.
//! - The master key (and everyone on an open gateway, which has no tenants) sees every object
//!   on the deployment's account, owned or not.
//!
//! Teams do not share objects: LiteLLM's managed files are visible to their creator (and proxy
//! admins) only, and sluice keeps the same line, with the key as the creator. The team is
//! recorded with each row for the operators' sake.

use std::sync::Arc;

use bytes::Bytes;
use http::{Method, StatusCode};
use serde_json::{Map, Value};
use time::OffsetDateTime;

use sluice_core::error::ApiError;
use sluice_providers::files::FilesCall;
use sluice_providers::DeploymentTarget;
use sluice_store::OwnedObject;

use super::ids::{self, IdKey, Kind};
use crate::auth::Caller;
use crate::http::collect_upstream;
use crate::server::AppState;

/// Most upstream pages one list of a virtual key reads while looking for its own objects; past
/// it the list says `has_more` with what it found (maybe nothing), and the next page starts
/// after the last object it shows.
const MAX_PAGES: usize = 10;

/// Who is asking, as far as objects go.
#[derive(Debug, Clone)]
pub(super) struct Viewer {
    /// The virtual key's hash; `None` for the master key or an open gateway (every object).
    key: Option<Arc<str>>,
    /// The virtual key's team.
    team: Option<Arc<str>>,
}

impl Viewer {
    /// The viewer a caller is.
    pub(super) fn of(caller: &Caller) -> Self {
        match caller {
            Caller::Key(k) => Self {
                key: Some(k.info.hash.clone()),
                team: k.info.team_id.clone(),
            },
            Caller::Open | Caller::Master => Self {
                key: None,
                team: None,
            },
        }
    }

    /// The creator its new objects get.
    pub(super) fn creator(&self) -> Option<&str> {
        self.key.as_deref()
    }

    /// Whether it may see an object created by `creator`.
    pub(super) fn may_see(&self, creator: Option<&str>) -> bool {
        match &self.key {
            None => true,
            Some(k) => creator == Some(&**k),
        }
    }

    /// A virtual key's viewer, for tests.
    #[cfg(test)]
    pub(super) fn key_for_tests(hash: &str) -> Self {
        Self {
            key: Some(hash.into()),
            team: None,
        }
    }

    /// Whether it may see an object whose row says `row` (`None`: no row).
    fn may_see_row(&self, row: Option<&Option<String>>) -> bool {
        match &self.key {
            None => true,
            Some(k) => row.is_some_and(|o| o.as_deref() == Some(&**k)),
        }
    }
}

/// The ids of an answer about one object made sluice's, all with `owner` as their creator:
/// a file, a batch and its files, a video, a vector store and what is below it (its files,
/// file batches, search results), or a list of any of them.
pub(super) fn rewrite_object(v: &mut Value, ids: &IdKey, deployment: &str, owner: Option<&str>) {
    let set = |v: &mut Value, field: &str, kind: Kind| {
        if let Some(slot) = v.get_mut(field) {
            if let Some(id) = slot.as_str().filter(|s| !s.is_empty()) {
                *slot = Value::String(ids::encode(ids, kind, deployment, owner, id));
            }
        }
    };
    let object = v
        .get("object")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    match object.as_str() {
        "file" => set(v, "id", Kind::File),
        "batch" => {
            set(v, "id", Kind::Batch);
            for f in ["input_file_id", "output_file_id", "error_file_id"] {
                set(v, f, Kind::File);
            }
        }
        "video" | "video.deleted" => {
            set(v, "id", Kind::Video);
            set(v, "remixed_from_video_id", Kind::Video);
        }
        "vector_store" | "vector_store.deleted" => set(v, "id", Kind::VectorStore),
        "vector_store.file" | "vector_store.file.deleted" => {
            set(v, "id", Kind::File);
            set(v, "vector_store_id", Kind::VectorStore);
        }
        "vector_store.files_batch" => set(v, "vector_store_id", Kind::VectorStore),
        // A file's parsed content names the file.
        _ if v.get("file_id").is_some() => set(v, "file_id", Kind::File),
        _ => {}
    }
    // Lists, and search results' pages: each entry.
    if object == "list" || object.ends_with(".page") {
        if let Some(Value::Array(items)) = v.get_mut("data") {
            for item in items {
                if item.get("object").is_some() {
                    rewrite_object(item, ids, deployment, owner);
                } else {
                    set(item, "file_id", Kind::File);
                }
            }
        }
        let first = v
            .get("data")
            .and_then(Value::as_array)
            .and_then(|d| d.first());
        if first.and_then(|o| o.get("object")) == Some(&Value::from("vector_store.file")) {
            for f in ["first_id", "last_id"] {
                set(v, f, Kind::File);
            }
        }
    }
}

/// Keep the store's rows in step with a successful answer about one object: a new file or
/// batch is its creator's, a batch's output and error files are the batch's creator's, a
/// deleted file is forgotten. A store that fails is logged: the object's id still carries its
/// creator, only lists miss it.
pub(super) async fn note(
    state: &AppState,
    ids: &IdKey,
    deployment: &str,
    answer: &Value,
    owner: Option<&str>,
    viewer: &Viewer,
    created: bool,
) {
    let Some(services) = state.store() else {
        return;
    };
    let store = &services.store;
    // The team is known when the owner is the caller.
    let team = viewer
        .key
        .as_deref()
        .filter(|k| Some(*k) == owner)
        .and(viewer.team.as_deref());
    let row = |kind: Kind, upstream: &str| OwnedObject {
        kind: kind.stored(),
        deployment: deployment.to_owned(),
        upstream_id: upstream.to_owned(),
        sluice_id: ids::encode(ids, kind, deployment, owner, upstream),
        owner_key: owner.map(str::to_owned),
        team_id: team.map(str::to_owned),
        created_at: OffsetDateTime::now_utc(),
        charged: false,
    };
    let mut rows = Vec::new();
    let id = answer.get("id").and_then(Value::as_str);
    let deleted = answer.get("deleted").and_then(Value::as_bool) == Some(true);
    let gone = match answer.get("object").and_then(Value::as_str) {
        Some("file") if deleted => Some(Kind::File),
        Some("video.deleted" | "video") if deleted => Some(Kind::Video),
        Some("vector_store.deleted" | "vector_store") if deleted => Some(Kind::VectorStore),
        _ => None,
    };
    if let (Some(kind), Some(id)) = (gone, id) {
        if let Err(e) = store.remove_object(kind.stored(), deployment, id).await {
            tracing::warn!(error = %e, object = id, "could not forget a deleted object's owner");
        }
        return;
    }
    match (answer.get("object").and_then(Value::as_str), id) {
        (Some("file"), Some(id)) if created => rows.push(row(Kind::File, id)),
        (Some("video"), Some(id)) if created => rows.push(row(Kind::Video, id)),
        (Some("vector_store"), Some(id)) if created => rows.push(row(Kind::VectorStore, id)),
        (Some("batch"), Some(id)) => {
            if created {
                rows.push(row(Kind::Batch, id));
            }
            for f in ["output_file_id", "error_file_id"] {
                if let Some(file) = answer.get(f).and_then(Value::as_str) {
                    rows.push(row(Kind::File, file));
                }
            }
        }
        _ => {}
    }
    for r in rows {
        if let Err(e) = store.add_object(&r).await {
            tracing::warn!(error = %e, object = %r.upstream_id, "could not record an object's owner");
        }
    }
}

/// What a list request asks of the upstream.
struct ListQuery {
    /// The client's own parameters that pass through (`purpose`, `order`).
    rest: Vec<(String, String)>,
    /// How many objects the client wants (`limit`); `None`: the upstream's page size.
    limit: Option<usize>,
    /// The upstream id to list after (the client's `after`, a sluice id, translated).
    after: Option<String>,
}

impl ListQuery {
    /// Read the client's query: sluice's own fields dropped, `after` checked and translated
    /// (an id that is not a valid sluice id of this deployment is a 400).
    fn read(
        query: Option<&str>,
        ids: &IdKey,
        kind: Kind,
        deployment: &str,
    ) -> Result<Self, ApiError> {
        let mut out = Self {
            rest: Vec::new(),
            limit: None,
            after: None,
        };
        for (k, v) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
            match &*k {
                "target_model_names" | "model" | "custom_llm_provider" => {}
                "limit" => {
                    out.limit = Some(v.parse::<usize>().map_err(|_| ApiError::InvalidParam {
                        param: "limit",
                        message: "expected a positive integer".into(),
                    })?)
                    .filter(|n| *n > 0);
                }
                "after" => {
                    let d = ids::decode(ids, kind, &v)
                        .filter(|d| d.deployment == deployment)
                        .ok_or_else(|| ApiError::InvalidParam {
                            param: "after",
                            message: format!("not a {} id of this list", kind.noun()),
                        })?;
                    out.after = Some(d.upstream);
                }
                _ => out.rest.push((k.into_owned(), v.into_owned())),
            }
        }
        Ok(out)
    }

    /// The upstream query for the page after `after`.
    fn upstream(&self, after: Option<&str>) -> Option<String> {
        let mut q = form_urlencoded::Serializer::new(String::new());
        for (k, v) in &self.rest {
            q.append_pair(k, v);
        }
        if let Some(n) = self.limit {
            q.append_pair("limit", &n.to_string());
        }
        if let Some(a) = after {
            q.append_pair("after", a);
        }
        Some(q.finish()).filter(|s| !s.is_empty())
    }
}

/// A list answer: its status and body (an upstream failure is passed on as it came).
pub(super) struct Listed {
    /// The status to answer with.
    pub(super) status: StatusCode,
    /// The answer's body.
    pub(super) body: Bytes,
}

/// `GET /files` (`/batches`, `/videos`, `/vector_stores`) on `target`, filtered to what `viewer` may see, ids made
/// sluice's with each object's recorded owner as its creator. The master key gets the
/// upstream's page as it is; a virtual key gets its own objects from as many upstream pages
/// (at most [`MAX_PAGES`]) as it takes to fill `limit`, `has_more` and `first_id`/`last_id`
/// describing what it got, so that `after=<last id>` continues where it stopped.
pub(super) async fn list(
    state: &AppState,
    target: &DeploymentTarget,
    ids: &IdKey,
    kind: Kind,
    viewer: &Viewer,
    query: Option<&str>,
) -> Result<Listed, ApiError> {
    let deployment = &*target.info.id;
    let q = ListQuery::read(query, ids, kind, deployment)?;
    let path = kind.collection();
    let timeout = target.timeouts.total;
    let mut kept: Vec<(Value, Option<String>)> = Vec::new();
    let mut want = q.limit;
    let mut cursor = q.after.clone();
    let mut rest = Map::new();
    let mut more = false;
    for page in 1..=MAX_PAGES {
        let query = q.upstream(cursor.as_deref());
        let call = FilesCall {
            method: &Method::GET,
            path,
            query: query.as_deref(),
            content_type: None,
            body: Vec::new(),
            upload: None,
            api: kind.api(),
        };
        let read = async {
            let (head, body) = target.files(call).await?.into_parts();
            Ok::<_, ApiError>((head.status, collect_upstream(body).await?))
        };
        let (status, bytes) = tokio::time::timeout(timeout, read)
            .await
            .unwrap_or(Err(ApiError::UpstreamTimeout(timeout)))?;
        if !status.is_success() {
            return Ok(Listed {
                status,
                body: bytes,
            });
        }
        let Ok(Value::Object(mut answer)) = serde_json::from_slice::<Value>(&bytes) else {
            return Err(ApiError::UpstreamInvalid(format!(
                "the {} list is not a JSON object",
                kind.noun()
            )));
        };
        let data = match answer.remove("data") {
            Some(Value::Array(d)) => d,
            _ => Vec::new(),
        };
        let upstream_more = answer.get("has_more").and_then(Value::as_bool) == Some(true);
        rest = answer;
        let here: Vec<&str> = data
            .iter()
            .filter_map(|o| o.get("id").and_then(Value::as_str))
            .collect();
        let last = here.last().map(|s| (*s).to_owned());
        let owners = match state.store() {
            Some(s) if !here.is_empty() => {
                match s
                    .store
                    .object_owners(kind.stored(), deployment, &here)
                    .await
                {
                    Ok(o) => o,
                    // A key's list never falls back to everything.
                    Err(e) if viewer.key.is_some() => {
                        tracing::warn!(error = %e, "object owners could not be read");
                        return Err(ApiError::StoreUnavailable);
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "object owners could not be read; ids without creators");
                        Default::default()
                    }
                }
            }
            _ => Default::default(),
        };
        let want_now = *want.get_or_insert(data.len().max(1));
        for item in data {
            let row = item
                .get("id")
                .and_then(Value::as_str)
                .and_then(|id| owners.get(id));
            if viewer.may_see_row(row) {
                let owner = row.cloned().flatten();
                kept.push((item, owner));
            }
        }
        if kept.len() >= want_now {
            more = kept.len() > want_now || upstream_more;
            break;
        }
        more = upstream_more;
        if !upstream_more || viewer.key.is_none() || last.is_none() {
            break;
        }
        if page == MAX_PAGES {
            break;
        }
        cursor = last;
    }
    kept.truncate(want.unwrap_or(usize::MAX));
    let data: Vec<Value> = kept
        .into_iter()
        .map(|(mut item, owner)| {
            rewrite_object(&mut item, ids, deployment, owner.as_deref());
            item
        })
        .collect();
    let id_at = |i: Option<&Value>| i.and_then(|o| o.get("id")).cloned().unwrap_or(Value::Null);
    rest.insert("object".into(), Value::String("list".into()));
    rest.insert("first_id".into(), id_at(data.first()));
    rest.insert("last_id".into(), id_at(data.last()));
    rest.insert("has_more".into(), Value::Bool(more));
    rest.insert("data".into(), Value::Array(data));
    let body = serde_json::to_vec(&rest).map_err(|_| ApiError::Internal("list body"))?;
    Ok(Listed {
        status: StatusCode::OK,
        body: Bytes::from(body),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_queries_translate_the_cursor() {
        let k = IdKey::new(None);
        let after = ids::encode(&k, Kind::File, "d1", Some("aa"), "file-9");
        let q = ListQuery::read(
            Some(&format!(
                "purpose=batch&limit=5&after={after}&target_model_names=g"
            )),
            &k,
            Kind::File,
            "d1",
        )
        .unwrap();
        assert_eq!(q.limit, Some(5));
        assert_eq!(q.after.as_deref(), Some("file-9"));
        assert_eq!(
            q.upstream(Some("file-12")).as_deref(),
            Some("purpose=batch&limit=5&after=file-12")
        );
        // Another deployment's id, an upstream id, a batch id: not a cursor of this list.
        for bad in [
            ids::encode(&k, Kind::File, "d2", None, "file-9"),
            "file-9".to_owned(),
            ids::encode(&k, Kind::Batch, "d1", None, "b"),
        ] {
            assert!(
                ListQuery::read(Some(&format!("after={bad}")), &k, Kind::File, "d1").is_err(),
                "{bad}"
            );
        }
        assert!(ListQuery::read(Some("limit=x"), &k, Kind::File, "d1").is_err());
        assert_eq!(
            ListQuery::read(None, &k, Kind::Batch, "d1")
                .unwrap()
                .upstream(None),
            None
        );
    }

    #[test]
    fn vector_store_answers_name_sluice_ids() {
        let k = IdKey::new(None);
        let decoded = |kind: Kind, v: &Value| ids::decode(&k, kind, v.as_str().unwrap()).unwrap();
        let mut list: Value = serde_json::from_str(
            r#"{"object":"list","first_id":"file-1","last_id":"file-1","data":[
                {"object":"vector_store.file","id":"file-1","vector_store_id":"vs_1"}]}"#,
        )
        .unwrap();
        rewrite_object(&mut list, &k, "d", Some("aa"));
        let item = &list["data"][0];
        assert_eq!(decoded(Kind::File, &item["id"]).upstream, "file-1");
        assert_eq!(
            decoded(Kind::VectorStore, &item["vector_store_id"]).upstream,
            "vs_1"
        );
        assert_eq!(list["first_id"], item["id"]);
        let mut page: Value = serde_json::from_str(
            r#"{"object":"vector_store.search_results.page","data":[{"file_id":"file-2","score":0.5}]}"#,
        )
        .unwrap();
        rewrite_object(&mut page, &k, "d", Some("aa"));
        let hit = decoded(Kind::File, &page["data"][0]["file_id"]);
        assert_eq!(
            (hit.upstream.as_str(), hit.creator.as_deref()),
            ("file-2", Some("aa"))
        );
        let mut video: Value = serde_json::from_str(
            r#"{"object":"video","id":"video_2","remixed_from_video_id":"video_1"}"#,
        )
        .unwrap();
        rewrite_object(&mut video, &k, "d", None);
        assert_eq!(
            decoded(Kind::Video, &video["remixed_from_video_id"]).upstream,
            "video_1"
        );
    }

    #[test]
    fn keys_see_their_own_and_the_master_everything() {
        let master = Viewer {
            key: None,
            team: None,
        };
        let a = Viewer {
            key: Some("aa".into()),
            team: Some("t".into()),
        };
        assert!(master.may_see(None) && master.may_see(Some("bb")));
        assert!(a.may_see(Some("aa")));
        assert!(!a.may_see(Some("bb")) && !a.may_see(None));
        let mine = Some("aa".to_owned());
        assert!(a.may_see_row(Some(&mine)));
        assert!(!a.may_see_row(Some(&None)) && !a.may_see_row(None));
        assert!(master.may_see_row(None));
    }
}
