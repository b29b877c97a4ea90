//! What kept state is made of, below everything that uses it: how a config snapshot keeps
//! (its seal, retention and what this instance is still writing), who owns what, and the
//! errors every route of it answers with.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use time::OffsetDateTime;

use sluice_core::error::ApiError;
use sluice_store::{Store, StoredResponse};

use crate::auth::Caller;
use crate::models::Seal;

/// Most items of a conversation a request is given.
pub(super) const MAX_CONVERSATION_ITEMS: u32 = 10_000;

/// How a config snapshot keeps responses: with a database and a key to seal with.
pub struct Keeping {
    seal: Seal,
    /// Answers and items this instance is still writing.
    pub(super) pending: Pending,
    pub(super) retention: Duration,
    /// Whether answers asked with `store` are kept (`general_settings.store_responses`).
    pub(super) store_answers: bool,
}

impl std::fmt::Debug for Keeping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keeping")
            .field("retention", &self.retention)
            .field("store_answers", &self.store_answers)
            .finish_non_exhaustive()
    }
}

impl crate::server::Part for Keeping {
    /// The keeping of a config: `None` without the master key or `LITELLM_SALT_KEY`, since
    /// kept content is sealed with it.
    fn build(
        config: &sluice_config::Config,
        _with: &crate::server::Building<'_>,
        _before: Option<&Arc<Self>>,
    ) -> Result<Option<Arc<Self>>, String> {
        let Some(master) = config.general.master_key.as_ref() else {
            return Ok(None);
        };
        let salt = std::env::var("LITELLM_SALT_KEY")
            .ok()
            .filter(|s| !s.is_empty());
        let seal = match Seal::for_responses(salt.as_deref(), master) {
            Ok(seal) => seal,
            Err(e) => {
                tracing::warn!("responses cannot be kept: {e}");
                return Ok(None);
            }
        };
        Ok(Some(Arc::new(Self {
            seal,
            pending: Pending::default(),
            retention: Duration::from_secs(
                u64::from(config.general.responses_retention_days) * 86_400,
            ),
            store_answers: config.general.store_responses,
        })))
    }
}

impl Keeping {
    pub(super) fn seal(&self, v: &Value) -> Result<String, ApiError> {
        let plain = serde_json::to_vec(v).map_err(|_| ApiError::Internal("unwritable item"))?;
        self.seal.seal(&plain).map_err(|e| {
            tracing::warn!("a response could not be sealed: {e}");
            ApiError::Internal("a response could not be sealed")
        })
    }

    /// A kept answer: one this instance is still writing, else the store's (unless expired).
    pub(super) async fn response(
        &self,
        store: &Store,
        id: &str,
    ) -> Result<Option<StoredResponse>, ApiError> {
        if let Some(row) = self.pending.response(id) {
            return Ok(Some(row));
        }
        store
            .response(id, OffsetDateTime::now_utc())
            .await
            .map_err(store_error)
    }

    pub(super) fn open(&self, sealed: &str) -> Result<Value, ApiError> {
        let plain = self.seal.open(sealed).map_err(|e| {
            tracing::warn!("a kept response could not be opened: {e}");
            ApiError::Internal(
                "a kept response cannot be opened (was the master key or LITELLM_SALT_KEY changed?)",
            )
        })?;
        serde_json::from_slice(&plain).map_err(|_| ApiError::Internal("a kept response is corrupt"))
    }
}

/// Who a request is, as kept state names its owner.
#[derive(Debug, Clone, Default)]
pub(crate) struct Owner {
    /// The key's hash; `None` for the master key (or an open gateway).
    pub(super) key: Option<String>,
    pub(super) team: Option<String>,
}

impl Owner {
    /// The owner a caller's new objects get.
    pub(crate) fn of(caller: &Caller) -> Self {
        match caller {
            Caller::Key(k) => Self {
                key: Some(k.info.hash.to_string()),
                team: k.info.team_id.as_deref().map(str::to_owned),
            },
            Caller::Master | Caller::Open => Self::default(),
        }
    }

    /// Whether this caller may read what `owner_key` made: its own key, or the master key
    /// (which reads everything). Another key's is not found, as if it did not exist.
    pub(super) fn reads(&self, owner_key: Option<&str>) -> bool {
        self.key.is_none() || self.key.as_deref() == owner_key
    }
}

/// The store failed: logged with its reason, answered as unavailable.
pub(super) fn store_error(e: sluice_store::StoreError) -> ApiError {
    tracing::warn!("responses and conversations: {e}");
    ApiError::StoreUnavailable
}

pub(super) fn not_found(param: &'static str, id: &str) -> ApiError {
    ApiError::NotFound {
        what: match param {
            "conversation" => "conversation",
            "item" => "item",
            _ => "response",
        },
        id: id.chars().take(256).collect(),
    }
}

/// A kept answer made ready to write: its row, and the items it adds to its conversation.
#[derive(Debug)]
pub(super) struct Ready {
    pub(super) row: Option<StoredResponse>,
    pub(super) added: Option<(String, Vec<Value>)>,
    pub(super) now: OffsetDateTime,
}

/// What this instance is still writing: read as if it were in the store, so that a request
/// that follows its answer at once finds it.
#[derive(Debug, Default)]
pub(super) struct Pending(std::sync::Mutex<PendingState>);

#[derive(Debug, Default)]
struct PendingState {
    responses: std::collections::HashMap<String, StoredResponse>,
    items: std::collections::HashMap<String, Vec<Value>>,
}

impl Pending {
    fn lock(&self) -> std::sync::MutexGuard<'_, PendingState> {
        sluice_core::lock::lock(&self.0)
    }

    pub(super) fn hold(&self, ready: &Ready) {
        let mut p = self.lock();
        if let Some(row) = &ready.row {
            p.responses.insert(row.id.clone(), row.clone());
        }
        if let Some((conversation, added)) = &ready.added {
            p.items
                .entry(conversation.clone())
                .or_default()
                .extend(added.iter().cloned());
        }
    }

    pub(super) fn release(&self, ready: &Ready) {
        let mut p = self.lock();
        if let Some(row) = &ready.row {
            p.responses.remove(&row.id);
        }
        if let Some((conversation, added)) = &ready.added {
            if let Some(items) = p.items.get_mut(conversation) {
                items.retain(|i| !added.iter().any(|a| a.get("id") == i.get("id")));
                if items.is_empty() {
                    p.items.remove(conversation);
                }
            }
        }
    }

    fn response(&self, id: &str) -> Option<StoredResponse> {
        self.lock().responses.get(id).cloned()
    }

    pub(super) fn items(&self, conversation: &str) -> Vec<Value> {
        self.lock()
            .items
            .get(conversation)
            .cloned()
            .unwrap_or_default()
    }
}
