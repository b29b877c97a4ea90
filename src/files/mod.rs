//! OpenAI's Files and Batches APIs (`/v1/files*`, `/v1/batches*`, also without `/v1`): the
//! gateway's side. The steps of an inference request, in the same order:
//!
//! 3. authenticate: the same `Gate` (virtual key, master key);
//! 4. read the body (an upload may be as large as any other upload);
//! 5. decide the deployment: an upload (and a list) goes to the model group named by the
//!    `target_model_names` form field (LiteLLM's managed files; its first name), the `model`
//!    field, the `target_model_names` query parameter or the `x-litellm-model` header, else to
//!    the first deployment of the config that has the Files API; a call on an id goes where
//!    the id says ([`ids`]: signed, so a forged id is a 404) and only when the caller owns the
//!    object ([`owners`]: another key's object is a 404 too); a batch goes where its input file
//!    is;
//! 6. admit: the key's access to that deployment's group, its limits and budgets; then a
//!    `purpose=batch` upload's lines are bound to that deployment's model ([`lines`]: a
//!    virtual key's lines naming another model are refused by line);
//! 7. one call to that deployment, no routing (the object lives there); a list made by a
//!    virtual key may take a few, to find its own objects among the account's;
//! 8. answer: ids in the answer rewritten to sluice's, new objects' owners recorded, file
//!    content relayed as it arrives; a retrieved batch that is `completed` is charged once to
//!    the key that created it ([`batch`]);
//! 9. record: like every request.

mod batch;
pub mod ids;
mod lines;
mod objects;
mod owners;

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_TYPE};
use http::{Method, Request, Response};
use http_body::Body;
use serde_json::Value;

use sluice_core::error::ApiError;
use sluice_core::record::RequestRecord;
use sluice_core::usage::Usage;
use sluice_net::Upload;
use sluice_providers::files::FilesCall;
use sluice_providers::passthrough::{answer_headers, Framing, Shape, Tap};
use sluice_providers::DeploymentTarget;
use sluice_translate::multipart;

use crate::auth::Caller;
use crate::http::{
    collect_upstream, declared_length, json, read_body, ResponseBody, MIN_UPLOAD_LIMIT,
};
use crate::passthrough::PassRelay;
use crate::server::steps::{self, Admitted, Ask, Authenticated, Presented};
use crate::server::upload::read_head_until;
use crate::server::{AppState, Snapshot};
use crate::spend::Charges;
use ids::{IdKey, Kind};
use lines::{Form, Rule};
pub use objects::{Api, Sub};
use owners::Viewer;

/// The form fields and query parameters that name a model group.
const GROUP_FIELDS: [&str; 2] = ["target_model_names", "model"];
/// sluice's (and LiteLLM's) own fields, taken out of what is sent upstream: the group names and
/// LiteLLM's `custom_llm_provider` (sluice takes the provider from the deployment).
const OWN_FIELDS: [&str; 3] = ["target_model_names", "model", "custom_llm_provider"];
/// The header that names a model group when the body cannot.
const GROUP_HEADER: &str = "x-litellm-model";

/// One Files or Batches operation, with the id the client named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op<'a> {
    /// `POST /v1/files` (multipart: `file`, `purpose`).
    Upload,
    /// `GET /v1/files`
    ListFiles,
    /// `GET /v1/files/{id}`
    GetFile(&'a str),
    /// `GET /v1/files/{id}/content`
    FileContent(&'a str),
    /// `DELETE /v1/files/{id}`
    DeleteFile(&'a str),
    /// `POST /v1/batches`
    CreateBatch,
    /// `GET /v1/batches`
    ListBatches,
    /// `GET /v1/batches/{id}`
    GetBatch(&'a str),
    /// `POST /v1/batches/{id}/cancel`
    CancelBatch(&'a str),
    /// `POST /v1/videos`, `POST /v1/vector_stores`
    Create(Api),
    /// `GET /v1/videos`, `GET /v1/vector_stores`
    List(Api),
    /// A call on one video or vector store, or below it.
    On(Api, &'a str, Sub<'a>),
}

impl<'a> Op<'a> {
    /// The kind of object a list operation lists; `None` for the others.
    fn lists(&self) -> Option<Kind> {
        match self {
            Self::ListFiles => Some(Kind::File),
            Self::ListBatches => Some(Kind::Batch),
            Self::List(api) => Some(api.kind()),
            _ => None,
        }
    }

    /// The operation at `path` (without `/v1`): `None` when the path is not one of these
    /// routes, `Some(None)` when it is but the method is wrong.
    pub fn of(method: &Method, path: &'a str) -> Option<Option<Self>> {
        let mut it = path.strip_prefix('/')?.splitn(3, '/');
        let (first, id, rest) = (it.next()?, it.next(), it.next());
        let id = id.filter(|i| !i.is_empty());
        if let Some(api) = Api::of(first) {
            let op = match id {
                None if rest.is_none() => match *method {
                    Method::POST => Self::Create(api),
                    Method::GET => Self::List(api),
                    _ => return Some(None),
                },
                None => return None,
                Some(id) => {
                    let sub = Sub::of(api, rest)?;
                    if !sub.allows(api, method) {
                        return Some(None);
                    }
                    Self::On(api, id, sub)
                }
            };
            return Some(Some(op));
        }
        let op = match (first, id, rest) {
            ("files", None, None) => match *method {
                Method::POST => Self::Upload,
                Method::GET => Self::ListFiles,
                _ => return Some(None),
            },
            ("files", Some(id), None) => match *method {
                Method::GET => Self::GetFile(id),
                Method::DELETE => Self::DeleteFile(id),
                _ => return Some(None),
            },
            ("files", Some(id), Some("content")) => match *method {
                Method::GET => Self::FileContent(id),
                _ => return Some(None),
            },
            ("batches", None, None) => match *method {
                Method::POST => Self::CreateBatch,
                Method::GET => Self::ListBatches,
                _ => return Some(None),
            },
            ("batches", Some(id), None) => match *method {
                Method::GET => Self::GetBatch(id),
                _ => return Some(None),
            },
            ("batches", Some(id), Some("cancel")) => match *method {
                Method::POST => Self::CancelBatch(id),
                _ => return Some(None),
            },
            _ => return None,
        };
        Some(Some(op))
    }

    /// Stable label for logs and metrics.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Upload | Self::ListFiles => "/v1/files",
            Self::GetFile(_) | Self::DeleteFile(_) => "/v1/files/{id}",
            Self::FileContent(_) => "/v1/files/{id}/content",
            Self::CreateBatch | Self::ListBatches => "/v1/batches",
            Self::GetBatch(_) => "/v1/batches/{id}",
            Self::CancelBatch(_) => "/v1/batches/{id}/cancel",
            Self::Create(Api::Videos) | Self::List(Api::Videos) => "/v1/videos",
            Self::Create(Api::VectorStores) | Self::List(Api::VectorStores) => "/v1/vector_stores",
            Self::On(api, _, sub) => sub.label(*api),
        }
    }

    /// The API a provider without it is refused for (`"files"`, `"videos"`, ...).
    fn api(&self) -> &'static str {
        match self {
            Self::Upload
            | Self::ListFiles
            | Self::GetFile(_)
            | Self::FileContent(_)
            | Self::DeleteFile(_) => "files",
            Self::CreateBatch | Self::ListBatches | Self::GetBatch(_) | Self::CancelBatch(_) => {
                "batches"
            }
            Self::Create(api) | Self::List(api) | Self::On(api, ..) => api.kind().api(),
        }
    }

    /// Whether its answer is content relayed as it arrives (a file's, a video's).
    fn relays_content(&self) -> bool {
        matches!(self, Self::FileContent(_) | Self::On(_, _, Sub::Content))
    }

    /// Whether a successful answer is a new object its caller owns.
    fn creates(&self) -> bool {
        matches!(
            self,
            Self::Upload | Self::CreateBatch | Self::Create(_) | Self::On(_, _, Sub::Remix)
        )
    }
}

/// Where a call goes and what it sends.
struct Plan {
    target: Arc<DeploymentTarget>,
    /// The upstream path (`/files/{upstream id}`).
    path: String,
    body: Vec<Bytes>,
    /// An upload's form (its `body` is made from it after admission).
    form: Option<Form>,
    /// The key hash that owns the object this call is about (or creates now): the creator of
    /// the ids in the answer. `None`: the master key's.
    owner: Option<String>,
}

/// Serve one Files or Batches request. Errors become the pipeline's OpenAI-shaped answers.
pub async fn handle<B>(
    state: &AppState,
    snap: &Snapshot,
    req: Request<B>,
    record: &mut RequestRecord,
) -> Result<Response<ResponseBody>, ApiError>
where
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: std::fmt::Display,
{
    // 3. Authenticate.
    let Authenticated { caller, wall } =
        steps::authenticate(state, snap, Presented::by(&req)).await?;
    let viewer = Viewer::of(&caller);
    let ids = IdKey::new(snap.master.as_ref());
    // 4. Read the body.
    let (parts, body) = req.into_parts();
    let path = parts.uri.path();
    let op = Op::of(&parts.method, path.strip_prefix("/v1").unwrap_or(path))
        .flatten()
        .ok_or(ApiError::Internal("files route without its operation"))?;
    let named = named_group(&parts);
    let content_type = parts.headers.get(CONTENT_TYPE);
    let body_limit = snap.max_body.max(MIN_UPLOAD_LIMIT);
    let (body, client_upload) = read(
        body,
        &parts.headers,
        &op,
        named.is_some(),
        (body_limit, snap.body_timeout),
    )
    .await?;
    // 5. Which deployment.
    // With no group named, the first deployment with the Files API that the key may use.
    let may_use = |group: &str| may_use(state, &caller, group, wall);
    let plan = plan(
        snap,
        op,
        &body,
        content_type,
        named,
        (&ids, &viewer),
        &may_use,
    )?;
    let target = plan.target.clone();
    served_by(record, &target);
    // 6. Admit: access to the deployment's group, the caller's limits and budgets.
    let strict = matches!(caller, Caller::Key(_));
    let ask = Ask::for_model(&target.info.model_name);
    let Admitted { key, mut charges } = steps::admit(state, caller, ask, record, wall).await?;
    // An upload's form as it goes on: sluice's fields out, a batch file's lines bound to the
    // deployment's model (a virtual key's checked).
    let (sent, upload, refused) = match &plan.form {
        Some(form) => {
            let declared = declared_length(&parts.headers, body_limit)?;
            let sent = outgoing_form(
                form,
                &target,
                strict,
                &body,
                client_upload.as_ref(),
                declared,
            )?;
            (sent.body, sent.upload, Some(sent.refused))
        }
        None => (plan.body, client_upload.clone(), None),
    };
    // 7. One call, to the deployment that holds the object.
    let before_send = record.start.elapsed();
    if let Some(kind) = op.lists() {
        // The caller's own objects (the master key's: all), from one or a few upstream pages.
        let query = parts.uri.query();
        let listed = owners::list(state, &target, &ids, kind, &viewer, query).await?;
        record.status = listed.status.as_u16();
        let mut out = json(listed.status, listed.body);
        steps::spend_headers(&charges, key.as_deref(), None, out.headers_mut());
        record.overhead = before_send;
        return Ok(out);
    }
    let query = upstream_query(parts.uri.query());
    let call = FilesCall {
        method: &parts.method,
        path: &plan.path,
        query: query.as_deref(),
        content_type,
        body: sent,
        upload: upload.as_ref(),
        api: op.api(),
    };
    let limit = target.timeouts.total;
    let resp = tokio::time::timeout(limit, target.files(call))
        .await
        .unwrap_or(Err(ApiError::UpstreamTimeout(limit)));
    cut_off(refused.as_deref(), client_upload.as_deref())?;
    let resp = resp?;
    let arrived = Instant::now();
    // 8. Answer.
    let (head, upstream) = resp.into_parts();
    record.status = head.status.as_u16();
    let mut out = Response::new(ResponseBody::full(Bytes::new()));
    *out.status_mut() = head.status;
    answer_headers(&head.headers, out.headers_mut());
    if op.relays_content() && head.status.is_success() {
        // The file as it arrives; the relay records the request when it ends.
        steps::spend_headers(&charges, key.as_deref(), None, out.headers_mut());
        record.ttfb = Some(arrived - record.start);
        record.overhead = before_send + arrived.elapsed();
        let tap = Tap::new(Shape::Common, Framing::Opaque, false);
        let recorder = state.recorder().clone();
        let relay = PassRelay::new(upstream, tap, record.clone(), recorder, charges);
        *out.body_mut() = ResponseBody::relay(relay);
        return Ok(out);
    }
    let bytes = tokio::time::timeout(limit, collect_upstream(upstream))
        .await
        .unwrap_or(Err(ApiError::UpstreamTimeout(limit)))?;
    let bytes = match head.status.is_success() {
        true => {
            let object = Object {
                state,
                ids: &ids,
                target: &target,
                owner: plan.owner.as_deref(),
                viewer: &viewer,
                op: &op,
            };
            object.settle(bytes, &mut charges, record).await
        }
        false => bytes,
    };
    if !out.headers().contains_key(CONTENT_TYPE) {
        out.headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    }
    // After the charge, so that the key's spend includes this call's.
    steps::spend_headers(&charges, key.as_deref(), record.cost, out.headers_mut());
    *out.body_mut() = ResponseBody::full(bytes);
    record.overhead = before_send + arrived.elapsed();
    Ok(out)
}

/// Step 4: the body, within `limit`. An upload is read up to its file once its group is known
/// (`named` outside the form, or by a field before the file); the file is relayed as it
/// arrives.
async fn read<B>(
    body: B,
    headers: &http::HeaderMap,
    op: &Op<'_>,
    named: bool,
    (limit, timeout): (usize, std::time::Duration),
) -> Result<(Bytes, Option<Arc<Upload>>), ApiError>
where
    B: Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: std::fmt::Display,
{
    let boundary = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(multipart::boundary)
        .filter(|_| matches!(op, Op::Upload));
    match boundary {
        Some(b) => {
            // The group, and `purpose` (a batch file's lines are read): fields before the
            // file, or the whole form when they follow it.
            let ready = |scanner: &multipart::Scanner, head: &[u8]| {
                scanner.has_field(head, "purpose")
                    && (named || GROUP_FIELDS.iter().any(|f| scanner.has_field(head, f)))
            };
            read_head_until(body, headers, limit, b, &ready).await
        }
        None => Ok((read_body(body, headers, limit, timeout).await?, None)),
    }
}

/// An upload cut off while it was relayed: a refused batch line (the line is the answer), or
/// the client breaking it off or passing the limit (the client's error, whatever the upstream
/// made of the cut body).
fn cut_off(
    refused: Option<&std::sync::OnceLock<lines::LineError>>,
    upload: Option<&Upload>,
) -> Result<(), ApiError> {
    if let Some(e) = refused.and_then(|r| r.get()) {
        return Err(e.clone().into());
    }
    match upload.and_then(Upload::client_error) {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}

/// The model group a request names outside its body: the query's, else LiteLLM's header.
fn named_group(parts: &http::request::Parts) -> Option<&str> {
    query_group(parts.uri.query()).or_else(|| {
        parts
            .headers
            .get(GROUP_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(first_name)
    })
}

/// The record names the deployment that holds the objects: its group, id and provider.
fn served_by(record: &mut RequestRecord, target: &DeploymentTarget) {
    record.model = Some(target.info.model_name.clone());
    record.requested_model = record.model.clone();
    record.deployment = Some(target.info.id.clone());
    record.provider = Some(target.provider.name());
}

/// Whether the caller may use `group` (its access rule, limits not asked).
fn may_use(state: &AppState, caller: &Caller, group: &str, wall: u64) -> bool {
    match caller {
        Caller::Key(k) => state
            .gate()
            .directory()
            .subjects(k, None, &group.into(), wall)
            .is_ok(),
        Caller::Open | Caller::Master => true,
    }
}

/// An object a call answered with, and whose it is.
struct Object<'a> {
    state: &'a AppState,
    ids: &'a IdKey,
    target: &'a DeploymentTarget,
    /// The key hash that owns it (`None`: the master key's).
    owner: Option<&'a str>,
    viewer: &'a Viewer,
    op: &'a Op<'a>,
}

impl Object<'_> {
    /// A successful answer's object: a completed batch's usage charged once, its owner noted,
    /// this call charged, its ids made sluice's. An answer that is not JSON passes as it is.
    async fn settle(
        &self,
        bytes: Bytes,
        charges: &mut Charges,
        record: &mut RequestRecord,
    ) -> Bytes {
        let Ok(mut v) = serde_json::from_slice::<Value>(&bytes) else {
            return bytes;
        };
        let (state, ids, target, owner) = (self.state, self.ids, self.target, self.owner);
        if let Op::GetBatch(_) = self.op {
            batch::charge_once(state, ids, target, owner, &v).await;
        }
        let creates = self.op.creates();
        owners::note(state, ids, &target.info.id, &v, owner, self.viewer, creates).await;
        charge(self.op, target, &v, charges, record);
        owners::rewrite_object(&mut v, ids, &target.info.id, owner);
        serde_json::to_vec(&v).map_or(bytes, Bytes::from)
    }
}

/// An upload's form as it goes on: sluice's fields out, a batch file's lines bound to the
/// deployment's model (a virtual key's, `strict`, checked line by line).
fn outgoing_form(
    form: &Form,
    target: &DeploymentTarget,
    strict: bool,
    head: &Bytes,
    rest: Option<&Arc<Upload>>,
    declared: Option<usize>,
) -> Result<lines::Sent, ApiError> {
    let rule = match form.batch {
        true => Rule::of(target, strict)?,
        false => None,
    };
    Ok(form.send(head, rest, rule, declared)?)
}

/// Decide the deployment and the upstream call of `op`.
fn plan(
    snap: &Snapshot,
    op: Op<'_>,
    body: &Bytes,
    content_type: Option<&HeaderValue>,
    named: Option<&str>,
    (keys, viewer): (&IdKey, &Viewer),
    may_use: &dyn Fn(&str) -> bool,
) -> Result<Plan, ApiError> {
    // An id sluice signed, of an object the caller owns, on a deployment of this config; else
    // the same 404 whatever the reason, so that another key's objects cannot be told apart
    // from ones that do not exist.
    let by_id = |kind: Kind, id: &str| {
        let not_found = || ApiError::NotFound {
            what: kind.noun(),
            id: id.chars().take(256).collect(),
        };
        let d = ids::decode(keys, kind, id)
            .filter(|d| viewer.may_see(d.creator.as_deref()))
            .ok_or_else(not_found)?;
        let target = deployment(snap, &d.deployment).ok_or_else(not_found)?;
        Ok::<_, ApiError>((target, d))
    };
    let creator = viewer.creator().map(str::to_owned);
    let whole = |target, path: String, owner| Plan {
        target,
        path,
        body: vec![body.clone()],
        form: None,
        owner,
    };
    Ok(match op {
        Op::Upload => {
            let boundary = content_type
                .and_then(|v| v.to_str().ok())
                .and_then(multipart::boundary)
                .ok_or(ApiError::InvalidParam {
                    param: "content-type",
                    message: "expected multipart/form-data with a boundary".into(),
                })?;
            let parts = multipart::head(body, boundary)?;
            let field = GROUP_FIELDS.iter().find_map(|name| {
                parts
                    .iter()
                    .find(|p| p.name == *name)
                    .and_then(|p| multipart::text(body, p))
                    .map(first_name)
                    .filter(|n| !n.is_empty())
            });
            let target = chosen(snap, field.or(named), may_use)?;
            let strip: Vec<_> = parts
                .iter()
                .filter(|p| OWN_FIELDS.contains(&p.name))
                .map(|p| p.value.clone())
                .collect();
            // One `purpose`, so that sluice and the upstream read the same one.
            let mut purposes = parts.iter().filter(|p| p.name == "purpose");
            let purpose = purposes.next().and_then(|p| multipart::text(body, p));
            if purposes.next().is_some() {
                return Err(ApiError::InvalidParam {
                    param: "purpose",
                    message: "`purpose` is given more than once".into(),
                });
            }
            let files = parts
                .iter()
                .filter(|p| p.filename.is_some() || p.name == "file")
                .map(|p| p.value.clone())
                .collect();
            Plan {
                target,
                path: "/files".into(),
                body: Vec::new(),
                form: Some(Form {
                    boundary: boundary.to_owned(),
                    strip,
                    batch: purpose.is_some_and(|p| p.trim().eq_ignore_ascii_case("batch")),
                    files,
                }),
                owner: creator,
            }
        }
        Op::ListFiles => whole(chosen(snap, named, may_use)?, "/files".into(), None),
        Op::ListBatches => whole(chosen(snap, named, may_use)?, "/batches".into(), None),
        Op::GetFile(id) | Op::DeleteFile(id) => {
            let (t, d) = by_id(Kind::File, id)?;
            whole(t, format!("/files/{}", d.upstream), d.creator)
        }
        Op::FileContent(id) => {
            let (t, d) = by_id(Kind::File, id)?;
            whole(t, format!("/files/{}/content", d.upstream), d.creator)
        }
        Op::GetBatch(id) => {
            let (t, d) = by_id(Kind::Batch, id)?;
            whole(t, format!("/batches/{}", d.upstream), d.creator)
        }
        Op::CancelBatch(id) => {
            let (t, d) = by_id(Kind::Batch, id)?;
            whole(t, format!("/batches/{}/cancel", d.upstream), d.creator)
        }
        Op::Create(api) => create(
            snap,
            api,
            body,
            content_type,
            named,
            (keys, viewer),
            may_use,
        )?,
        Op::List(api) => whole(
            chosen(snap, named, may_use)?,
            api.kind().collection().into(),
            None,
        ),
        Op::On(api, id, sub) => {
            let (t, d) = by_id(api.kind(), id)?;
            let file = |f: &str| objects::upstream_file(keys, viewer, &t.info.id, f);
            let path = format!(
                "{}/{}{}",
                api.kind().collection(),
                d.upstream,
                sub.upstream_path(&file)?
            );
            let sent = match json_object(body)? {
                Some(mut req) => {
                    objects::translate_body(&mut req, &file)?;
                    Bytes::from(serde_json::to_vec(&req).map_err(|_| ApiError::Internal("body"))?)
                }
                None => body.clone(),
            };
            Plan {
                target: t,
                path,
                body: vec![sent],
                form: None,
                owner: d.creator,
            }
        }
        Op::CreateBatch => {
            let mut req: serde_json::Map<String, Value> =
                serde_json::from_slice(body).map_err(|e| ApiError::InvalidJson(e.to_string()))?;
            let input = req
                .get("input_file_id")
                .and_then(Value::as_str)
                .ok_or(ApiError::MissingParam("input_file_id"))?;
            let (t, d) = by_id(Kind::File, input)?;
            for f in OWN_FIELDS {
                req.remove(f);
            }
            req.insert("input_file_id".into(), Value::String(d.upstream));
            let sent = serde_json::to_vec(&req).map_err(|_| ApiError::Internal("batch body"))?;
            Plan {
                target: t,
                path: "/batches".into(),
                body: vec![Bytes::from(sent)],
                form: None,
                owner: creator,
            }
        }
    })
}

/// What a successful answer costs: a new video its seconds (`output_cost_per_video_per_second`),
/// a vector store search one query (`input_cost_per_query`), at the deployment's prices.
fn charge(
    op: &Op<'_>,
    target: &DeploymentTarget,
    answer: &Value,
    charges: &mut Charges,
    record: &mut RequestRecord,
) {
    let usage = match op {
        Op::Create(Api::Videos) | Op::On(Api::Videos, _, Sub::Remix) => {
            let Some(seconds) = objects::video_seconds(answer) else {
                return;
            };
            Usage {
                video_seconds: seconds.round().min(f64::from(u16::MAX)) as u16,
                ..Usage::default()
            }
        }
        Op::On(Api::VectorStores, _, Sub::Search) => Usage {
            search_units: 1,
            ..Usage::default()
        },
        _ => return,
    };
    record.usage = Some(usage);
    charges.price = Some(target.price);
    charges.settle(record);
}

/// A body read as a JSON object; `None` when it is empty.
fn json_object(body: &Bytes) -> Result<Option<serde_json::Map<String, Value>>, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    serde_json::from_slice(body)
        .map(Some)
        .map_err(|e| ApiError::InvalidJson(e.to_string()))
}

/// `POST /videos` or `POST /vector_stores`: the deployment (a video's `model` group; a vector
/// store's named group, else where its first file is, else the first the caller may use), the
/// body with the deployment's model and the upstream's file ids.
fn create(
    snap: &Snapshot,
    api: Api,
    body: &Bytes,
    content_type: Option<&HeaderValue>,
    named: Option<&str>,
    (keys, viewer): (&IdKey, &Viewer),
    may_use: &dyn Fn(&str) -> bool,
) -> Result<Plan, ApiError> {
    let boundary = content_type
        .and_then(|v| v.to_str().ok())
        .and_then(multipart::boundary);
    let sent = match (api, boundary) {
        // A video with an image to start from: a form.
        (Api::Videos, Some(boundary)) => {
            let parts = multipart::parts(body, boundary)?;
            let group = parts
                .iter()
                .find(|p| p.name == "model")
                .and_then(|p| multipart::text(body, p))
                .or(named)
                .ok_or(ApiError::MissingParam("model"))?;
            let target = chosen(snap, Some(first_name(group)), may_use)?;
            let strip: Vec<_> = parts
                .iter()
                .filter(|p| OWN_FIELDS.contains(&p.name))
                .map(|p| p.value.clone())
                .collect();
            let mut sent = without_fields(body, boundary, &strip).concat();
            if target.info.upstream_model.is_empty() {
                return Err(ApiError::MissingParam("model"));
            }
            // The model field again, now the deployment's model.
            let model = format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\n{}\r\n",
                target.info.upstream_model
            );
            sent.splice(0..0, model.into_bytes());
            return Ok(Plan {
                target,
                path: "/videos".into(),
                body: vec![Bytes::from(sent)],
                form: None,
                owner: viewer.creator().map(str::to_owned),
            });
        }
        _ => json_object(body)?.ok_or(ApiError::InvalidJson("expected a JSON object".into()))?,
    };
    let mut req = sent;
    let target = match api {
        Api::Videos => {
            let group = req
                .get("model")
                .and_then(Value::as_str)
                .or(named)
                .ok_or(ApiError::MissingParam("model"))?;
            let target = chosen(snap, Some(first_name(group)), may_use)?;
            req.insert(
                "model".into(),
                Value::String(target.info.upstream_model.to_string()),
            );
            target
        }
        Api::VectorStores => {
            let field = req
                .get("target_model_names")
                .and_then(Value::as_str)
                .map(first_name);
            match (field.or(named), objects::first_file(&req)) {
                (Some(group), _) => chosen(snap, Some(group), may_use)?,
                // Where its files are.
                (None, Some(file)) => objects::file_on(keys, viewer, file)
                    .and_then(|d| deployment(snap, &d.deployment))
                    .ok_or_else(|| ApiError::NotFound {
                        what: "file",
                        id: file.chars().take(256).collect(),
                    })?,
                (None, None) => chosen(snap, None, may_use)?,
            }
        }
    };
    let file = |f: &str| objects::upstream_file(keys, viewer, &target.info.id, f);
    objects::translate_body(&mut req, &file)?;
    let sent = serde_json::to_vec(&req).map_err(|_| ApiError::Internal("create body"))?;
    Ok(Plan {
        path: api.kind().collection().into(),
        target,
        body: vec![Bytes::from(sent)],
        form: None,
        owner: viewer.creator().map(str::to_owned),
    })
}

/// The deployment with this id in the current config.
fn deployment(snap: &Snapshot, id: &str) -> Option<Arc<DeploymentTarget>> {
    snap.router
        .models
        .groups()
        .flat_map(|g| g.deployments())
        .find(|t| &*t.info.id == id)
        .cloned()
}

/// The deployment that gets a new file (or is listed): the first of the named group that has
/// the Files API, else the first such deployment of the config whose group the caller may use.
fn chosen(
    snap: &Snapshot,
    group: Option<&str>,
    may_use: &dyn Fn(&str) -> bool,
) -> Result<Arc<DeploymentTarget>, ApiError> {
    let models = &snap.router.models;
    match group {
        Some(name) => {
            let resolved = models
                .resolve(name)
                .ok_or_else(|| ApiError::ModelNotFound(name.chars().take(256).collect()))?;
            let mut all = resolved.group.deployments();
            let first = all.next().cloned();
            std::iter::once(first.clone())
                .flatten()
                .chain(all.cloned())
                .find(|t| t.serves_files())
                .ok_or_else(|| ApiError::EndpointNotSupported {
                    provider: first.map_or("none", |t| t.info.provider),
                    endpoint: "files",
                })
        }
        None => models
            .groups()
            .filter(|g| may_use(&g.name))
            .flat_map(|g| g.deployments())
            .find(|t| t.serves_files())
            .cloned()
            .ok_or(ApiError::InvalidParam {
                param: "target_model_names",
                message: "no deployment this key may use serves the Files API; name a model \
                          group in `target_model_names`"
                    .into(),
            }),
    }
}

/// The first name of a comma-separated list (`target_model_names: "a,b"`).
fn first_name(names: &str) -> &str {
    names.split(',').next().unwrap_or_default().trim()
}

/// `target_model_names` (or `model`) from a query string.
fn query_group(query: Option<&str>) -> Option<&str> {
    query?.split('&').find_map(|p| {
        let (k, v) = p.split_once('=')?;
        (GROUP_FIELDS.contains(&k) && !v.is_empty()).then(|| first_name(v))
    })
}

/// The client's query without sluice's own parameters.
fn upstream_query(query: Option<&str>) -> Option<String> {
    let kept: Vec<&str> = query?
        .split('&')
        .filter(|p| {
            let k = p.split_once('=').map_or(*p, |(k, _)| k);
            !p.is_empty() && !OWN_FIELDS.contains(&k)
        })
        .collect();
    (!kept.is_empty()).then(|| kept.join("&"))
}

/// A form without the parts whose values are at `values`: each part runs from its
/// `--boundary` line to the line break before the next, which is left in place.
fn without_fields(body: &Bytes, boundary: &str, values: &[std::ops::Range<usize>]) -> Vec<Bytes> {
    let delimiter = format!("--{boundary}");
    let mut cuts: Vec<(usize, usize)> = values
        .iter()
        .filter_map(|v| {
            let head = body.get(..v.start)?;
            let start = head
                .windows(delimiter.len())
                .rposition(|w| w == delimiter.as_bytes())?;
            // From this part's delimiter up to the next one's.
            let end = v.end + 2;
            (body.get(v.end..end) == Some(b"\r\n")).then_some((start, end))
        })
        .collect();
    cuts.sort_unstable();
    let mut out = Vec::with_capacity(cuts.len() + 1);
    let mut at = 0;
    for (start, end) in cuts {
        if start >= at {
            out.push(body.slice(at..start));
            at = end;
        }
    }
    out.push(body.slice(at..));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_by_path_and_method() {
        let (get, post, del) = (Method::GET, Method::POST, Method::DELETE);
        assert_eq!(Op::of(&post, "/files"), Some(Some(Op::Upload)));
        assert_eq!(
            Op::of(&get, "/files/f1/content"),
            Some(Some(Op::FileContent("f1")))
        );
        assert_eq!(Op::of(&post, "/files/f1/content"), Some(None));
        assert_eq!(Op::of(&del, "/files/f1"), Some(Some(Op::DeleteFile("f1"))));
        assert_eq!(
            Op::of(&post, "/batches/b/cancel"),
            Some(Some(Op::CancelBatch("b")))
        );
        assert_eq!(Op::of(&get, "/batches"), Some(Some(Op::ListBatches)));
        assert_eq!(Op::of(&get, "/filesx"), None);
        assert_eq!(Op::of(&get, "/files/a/b"), None);
    }

    #[test]
    fn sluice_fields_leave_the_form() {
        let form = Bytes::from_static(
            b"--XX\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n--XX\r\nContent-Disposition: form-data; name=\"target_model_names\"\r\n\r\ng1\r\n--XX\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a\"\r\n\r\nabc\r\n--XX--\r\n",
        );
        let parts = multipart::parts(&form, "XX").unwrap();
        let strip: Vec<_> = parts
            .iter()
            .filter(|p| p.name == "target_model_names")
            .map(|p| p.value.clone())
            .collect();
        let sent = without_fields(&form, "XX", &strip).concat();
        let text = String::from_utf8(sent.clone()).unwrap();
        assert!(!text.contains("target_model_names"), "{text}");
        let left = multipart::parts(&sent, "XX").unwrap();
        assert_eq!(
            left.iter().map(|p| p.name).collect::<Vec<_>>(),
            ["purpose", "file"]
        );
        assert_eq!(&sent[left[1].value.clone()], b"abc");
    }

    #[test]
    fn answers_get_sluice_ids() {
        let k = IdKey::new(None);
        let mut v: Value = serde_json::from_str(
            r#"{"object":"batch","id":"b1","input_file_id":"f1","output_file_id":null}"#,
        )
        .unwrap();
        owners::rewrite_object(&mut v, &k, "d", Some("h"));
        let id = ids::decode(&k, Kind::Batch, v["id"].as_str().unwrap()).unwrap();
        assert_eq!(
            (id.upstream.as_str(), id.creator.as_deref()),
            ("b1", Some("h"))
        );
        let input = ids::decode(&k, Kind::File, v["input_file_id"].as_str().unwrap()).unwrap();
        assert_eq!(
            (input.upstream.as_str(), input.creator.as_deref()),
            ("f1", Some("h")),
            "a batch's files are its creator's"
        );
        assert!(v["output_file_id"].is_null());
        assert_eq!(
            query_group(Some("limit=2&target_model_names=a,b")),
            Some("a")
        );
        assert_eq!(
            upstream_query(Some("limit=2&model=x&custom_llm_provider=openai")).as_deref(),
            Some("limit=2")
        );
    }
}
