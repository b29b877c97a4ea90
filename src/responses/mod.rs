//! The Responses API's state, kept by sluice so that it holds across providers and fallbacks:
//! an answer asked with `store` (OpenAI's default) is kept, sealed, in the store; a request
//! naming `previous_response_id` or a `conversation` is rewritten before it is routed, its
//! `input` preceded by the items it continues, so that any provider (and any fallback) gets
//! the whole conversation; the answer's items are added to the conversation afterwards. Kept
//! answers are read back by `GET /v1/responses/{id}` and its `input_items`, and conversations
//! through the Conversations API ([`routes`]).
//!
//! Nothing of this is on other requests' path: a Responses request pays one borrowed probe of
//! its body, and the answer is kept by a task of its own after the client has it.

mod asks;
pub(crate) mod background;
mod conversations;
mod echo;
mod items;
mod kept;
mod routes;

pub use background::Runs;
pub use kept::Keeping;
pub(crate) use routes::handle;
pub use routes::Op;

use std::sync::Arc;

use bytes::Bytes;
use serde_json::{Map, Value};
use time::OffsetDateTime;

use sluice_core::error::ApiError;
use sluice_store::{Store, StoredResponse};

use crate::auth::Caller;
use asks::{id_of, is_true, present, Asks};
use kept::{not_found, store_error, Owner, Ready};

/// Most answers one `previous_response_id` chain reaches back through.
const MAX_CHAIN: usize = 256;
/// What to keep of a Responses request once it is answered.
#[derive(Debug, Clone)]
pub(crate) struct Keeper {
    keeping: Arc<Keeping>,
    store: Store,
    owner: Owner,
    model: String,
    /// This request's own input items (not those it continues).
    input: Vec<Value>,
    previous_id: Option<String>,
    conversation: Option<String>,
    /// Keep the answer itself (`store`); else only add it to the conversation.
    keep_answer: bool,
    /// A background run's: the id its answer is kept under (its queued response's).
    background_id: Option<String>,
}

/// Step 4¾ for a Responses request: a request that continues a kept answer or a conversation
/// gets their items before its own `input` (the body rewritten, those members removed), and a
/// request whose answer is to be kept gets the [`Keeper`] that keeps it. A body that is not
/// JSON is left for the envelope to refuse.
pub(crate) async fn prepare(
    keeping: Option<&Arc<Keeping>>,
    store: Option<&Store>,
    caller: &Caller,
    body: &mut Bytes,
    run: Option<&background::BackgroundRun>,
) -> Result<Option<Box<Keeper>>, ApiError> {
    let Ok(asks) = serde_json::from_slice::<Asks<'_>>(body) else {
        return Ok(None);
    };
    let previous = asks
        .previous_response_id
        .filter(|v| present(Some(v)))
        .map(|v| id_of(v, "previous_response_id"))
        .transpose()?;
    let conversation = asks
        .conversation
        .filter(|v| present(Some(v)))
        .map(|v| id_of(v, "conversation"))
        .transpose()?;
    let store_asked = asks.store.is_none_or(|v| v.get() != "false");
    let background = is_true(asks.background);
    let model = asks
        .model
        .and_then(|m| serde_json::from_str::<String>(m.get()).ok())
        .unwrap_or_default();
    if previous.is_some() && conversation.is_some() {
        return Err(ApiError::InvalidParam {
            param: "conversation",
            message: "previous_response_id and conversation cannot both be given".into(),
        });
    }
    let stateful = previous.is_some() || conversation.is_some();
    let (Some(keeping), Some(store)) = (keeping, store) else {
        if stateful {
            return Err(ApiError::InvalidParam {
                param: if previous.is_some() {
                    "previous_response_id"
                } else {
                    "conversation"
                },
                message: "this gateway keeps no responses: that needs a database and \
                          general_settings.master_key (or LITELLM_SALT_KEY) to seal them with"
                    .into(),
            });
        }
        return Ok(None);
    };
    let keep_answer = store_asked && keeping.store_answers && !background;
    if !stateful && !keep_answer {
        return Ok(None);
    }
    let owner = Owner::of(caller);
    let mut request: Map<String, Value> =
        serde_json::from_slice(body).map_err(|e| ApiError::InvalidJson(e.to_string()))?;
    let input = items::input_items(request.get("input"))?;
    if stateful {
        let history = match (&previous, &conversation) {
            (Some(id), _) => chain(keeping, store, &owner, id).await?,
            (None, Some(id)) => conversations::items_of(keeping, store, &owner, id).await?,
            (None, None) => Vec::new(),
        };
        request.remove("previous_response_id");
        request.remove("conversation");
        let mut all = history;
        all.extend(input.iter().cloned());
        request.insert("input".into(), Value::Array(all));
        *body = Bytes::from(
            serde_json::to_vec(&request).map_err(|_| ApiError::Internal("unwritable request"))?,
        );
    }
    Ok(Some(Box::new(Keeper {
        keeping: keeping.clone(),
        store: store.clone(),
        owner,
        model,
        input,
        previous_id: previous,
        conversation,
        keep_answer,
        background_id: run.map(|b| b.0.clone()),
    })))
}

/// The items a kept answer continues, oldest first: each answer's input and output, back
/// through its `previous_response_id`s.
async fn chain(
    keeping: &Keeping,
    store: &Store,
    owner: &Owner,
    id: &str,
) -> Result<Vec<Value>, ApiError> {
    let mut turns = Vec::new();
    let mut next = Some(id.to_owned());
    while let Some(id) = next {
        if turns.len() >= MAX_CHAIN {
            return Err(ApiError::InvalidParam {
                param: "previous_response_id",
                message: format!("the conversation goes back more than {MAX_CHAIN} responses"),
            });
        }
        let row = keeping
            .response(store, &id)
            .await?
            .filter(|r| owner.reads(r.owner_key.as_deref()))
            .ok_or_else(|| not_found("previous_response_id", &id))?;
        let mut kept = keeping.open(&row.sealed)?;
        next = row.previous_id;
        let input = match kept.get_mut("input").map(Value::take) {
            Some(Value::Array(items)) => items,
            _ => Vec::new(),
        };
        let output = match kept.pointer_mut("/response/output").map(Value::take) {
            Some(Value::Array(items)) => items,
            _ => Vec::new(),
        };
        turns.push((input, output));
    }
    Ok(turns
        .into_iter()
        .rev()
        .flat_map(|(input, output)| input.into_iter().chain(output))
        .collect())
}

impl Keeper {
    /// A whole answer naming the response or conversation it continued, as OpenAI's do (the
    /// request reached the provider without them); any other answer is left as it is.
    pub(crate) fn echo(&self, answer: Bytes) -> Bytes {
        if self.previous_id.is_none() && self.conversation.is_none() {
            return answer;
        }
        let Ok(Value::Object(mut o)) = serde_json::from_slice::<Value>(&answer) else {
            return answer;
        };
        self.name_continued(&mut o);
        serde_json::to_vec(&o).map_or(answer, Bytes::from)
    }

    /// What makes a streamed answer's response objects name what it continued, when it
    /// continued anything (boxed: only such requests pay for it).
    pub(crate) fn stream_echo(&self) -> Option<Box<echo::EchoContinued>> {
        if self.previous_id.is_none() && self.conversation.is_none() {
            return None;
        }
        let mut fields = Map::new();
        self.name_continued(&mut fields);
        Some(Box::new(echo::EchoContinued::new(fields)))
    }

    /// Set `previous_response_id` and `conversation` on a response object.
    fn name_continued(&self, o: &mut Map<String, Value>) {
        if let Some(p) = &self.previous_id {
            o.insert("previous_response_id".into(), p.as_str().into());
        }
        if let Some(c) = &self.conversation {
            o.insert("conversation".into(), serde_json::json!({ "id": c }));
        }
    }

    /// Keep a whole answer (a Responses object).
    pub(crate) fn keep_whole(self: Box<Self>, answer: Bytes) {
        self.keep(&answer, false);
    }

    /// Keep a streamed answer from its final event's data (`response.completed`, whose
    /// `response` is the whole object).
    pub(crate) fn keep_streamed(self: Box<Self>, final_event: Bytes) {
        self.keep(&final_event, true);
    }

    /// The answer is made ready at once (read, sealed, and seen by this instance's reads, so
    /// that the client's next request finds it), and written to the store by a task.
    fn keep(self: Box<Self>, bytes: &[u8], event: bool) {
        let ready = match self.ready(bytes, event) {
            Ok(Some(ready)) => ready,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!("a response could not be kept: {e}");
                return;
            }
        };
        // A background run's answer replaces its queued response in the store, unless that
        // was cancelled meanwhile: it is not shown before it is written.
        let background = self.background_id.clone();
        if background.is_none() {
            self.keeping.pending.hold(&ready);
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        rt.spawn(async move {
            if let Some(id) = &background {
                if background::cancelled(&self.keeping, &self.store, id).await {
                    return;
                }
            }
            if let Err(e) = self.write(&ready).await {
                tracing::warn!("a response could not be kept: {e}");
            }
            if background.is_none() {
                self.keeping.pending.release(&ready);
            }
        });
    }

    fn ready(&self, bytes: &[u8], event: bool) -> Result<Option<Ready>, ApiError> {
        let mut v: Value =
            serde_json::from_slice(bytes).map_err(|_| ApiError::Internal("unreadable answer"))?;
        let mut response = if event {
            v.get_mut("response").map(Value::take).unwrap_or_default()
        } else {
            v
        };
        if let Value::Object(o) = &mut response {
            self.name_continued(o);
            if let Some(id) = &self.background_id {
                o.insert("id".into(), id.as_str().into());
                o.insert("background".into(), Value::Bool(true));
            }
        }
        let Some(id) = response
            .get("id")
            .and_then(Value::as_str)
            .map(str::to_owned)
        else {
            return Ok(None);
        };
        let now = OffsetDateTime::now_utc();
        let row = if self.keep_answer {
            let sealed = self
                .keeping
                .seal(&serde_json::json!({"input": self.input, "response": response}))?;
            Some(StoredResponse {
                id,
                owner_key: self.owner.key.clone(),
                team_id: self.owner.team.clone(),
                model: self.model.clone(),
                previous_id: self.previous_id.clone(),
                conversation_id: self.conversation.clone(),
                created_at: now,
                expires_at: Some(now + self.keeping.retention),
                sealed,
            })
        } else {
            None
        };
        let added = self.conversation.as_ref().map(|c| {
            let output = response
                .get("output")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            (
                c.clone(),
                self.input.iter().cloned().chain(output).collect(),
            )
        });
        Ok(Some(Ready { row, added, now }))
    }

    async fn write(&self, ready: &Ready) -> Result<(), ApiError> {
        if let Some(row) = &ready.row {
            self.store.put_response(row).await.map_err(store_error)?;
        }
        if let Some((conversation, added)) = &ready.added {
            conversations::append(&self.keeping, &self.store, conversation, added, ready.now)
                .await?;
        }
        Ok(())
    }
}
