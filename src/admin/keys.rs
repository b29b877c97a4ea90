//! `/key/*`: virtual keys. A new key is `sk-` + 32 bytes from the OS's CSPRNG (base64url), its
//! plaintext is in the `/key/generate` (or `/key/regenerate`) answer and nowhere else: the
//! store keeps its SHA-256 (`token`), which is what every other call shows.

use base64::Engine;
use serde::Deserialize;
use serde_json::{json, Value};
use time::OffsetDateTime;

use super::answers::keys::{IssuedKey, KeyInfo, KeyInfoAnswer, KeyList, ListedKey};
use super::fields::{set, LimitsPatch, KEPT_KEY};
use super::{
    body, body_object, body_with_limits, from_map, page, query_pairs, query_value, store_error,
    total_pages, AdminRequest, AdminResult,
};
use sluice_core::error::ApiError;
use sluice_core::limits::SubjectKind;
use sluice_store::{BudgetDuration, KeyFilter, KeyHash, KeyRow, Page, Store};

/// Random bytes per key: 256 bits, beyond guessing.
const KEY_BYTES: usize = 32;

/// A fresh `sk-…` key from OS entropy.
pub(super) fn new_key() -> Result<String, ApiError> {
    let mut bytes = [0u8; KEY_BYTES];
    sluice_core::random::fill(&mut bytes).map_err(|_| ApiError::Internal("no OS randomness"))?;
    Ok(format!(
        "sk-{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    ))
}

/// A key as the admin API names it: the plaintext `sk-…` or its hash (`token`).
pub(super) fn key_ref(given: &str) -> KeyHash {
    if given.starts_with("sk-") {
        KeyHash::of(given)
    } else {
        KeyHash::from_hex(given).unwrap_or_else(|| KeyHash::of(given))
    }
}

async fn existing(store: &Store, given: &str) -> Result<KeyRow, ApiError> {
    store
        .key(&key_ref(given))
        .await
        .map_err(store_error)?
        .ok_or_else(|| ApiError::NotFound {
            what: "key",
            id: printable(given),
        })
}

/// A key named in an error: the hash as given, or the abbreviated plaintext.
fn printable(given: &str) -> String {
    if given.starts_with("sk-") {
        sluice_store::keys::abbreviate(given)
    } else {
        given.to_owned()
    }
}

/// `duration` ("30d", "1h", ...) from now, or no expiry for `null`.
pub(super) fn expires(
    duration: Option<&str>,
    now: OffsetDateTime,
) -> Result<Option<OffsetDateTime>, ApiError> {
    let Some(d) = duration else { return Ok(None) };
    let d: BudgetDuration =
        d.parse().map_err(
            |e: sluice_store::budget::BadDuration| ApiError::InvalidParam {
                param: "duration",
                message: e.to_string(),
            },
        )?;
    Ok(d.next_reset(now, now))
}

async fn check_team(store: &Store, team: Option<&str>) -> Result<(), ApiError> {
    let Some(team) = team else { return Ok(()) };
    match store.team(team).await.map_err(store_error)? {
        Some(_) => Ok(()),
        None => Err(ApiError::InvalidParam {
            param: "team_id",
            message: format!("no team `{team}`"),
        }),
    }
}

/// The keys of a team or user, for `/team/info` and `/user/info` (at most 1,000).
pub(super) async fn keys_of(
    store: &Store,
    filter: KeyFilter<'_>,
) -> Result<Vec<KeyInfo>, ApiError> {
    let page = Page {
        offset: 0,
        limit: 1000,
    };
    let keys = store.list_keys(filter, page).await.map_err(store_error)?;
    Ok(keys.iter().map(KeyInfo::of).collect())
}

const OWN_FIELDS: &[&str] = &[
    "key",
    "key_alias",
    "duration",
    "user_id",
    "team_id",
    "blocked",
    "spend",
    "organization_id",
];

/// A `spend` as LiteLLM's clients send it: USD, 0 or more.
pub(super) fn checked_spend(spend: Option<f64>) -> Result<Option<f64>, ApiError> {
    match spend {
        Some(s) if !s.is_finite() || s < 0.0 => Err(ApiError::InvalidParam {
            param: "spend",
            message: "must be a number of USD, 0 or more".into(),
        }),
        other => Ok(other),
    }
}

#[derive(Deserialize)]
struct Generate {
    key: Option<String>,
    key_alias: Option<String>,
    duration: Option<String>,
    user_id: Option<String>,
    team_id: Option<String>,
    organization_id: Option<String>,
    #[serde(default)]
    blocked: bool,
    spend: Option<f64>,
}

/// `POST /key/generate`.
pub(super) async fn generate(store: &Store, req: AdminRequest<'_>) -> Result<IssuedKey, ApiError> {
    let (g, limits): (Generate, LimitsPatch) = body_with_limits(&req, OWN_FIELDS, KEPT_KEY)?;
    let now = OffsetDateTime::now_utc();
    let plaintext = match g.key {
        Some(k) if k.starts_with("sk-") && k.len() >= 8 => k,
        Some(_) => {
            return Err(ApiError::InvalidParam {
                param: "key",
                message: "a custom key must start with `sk-` and be at least 8 characters".into(),
            })
        }
        None => new_key()?,
    };
    check_team(store, g.team_id.as_deref()).await?;
    let mut key = KeyRow::new(&plaintext, now);
    key.key_alias = g.key_alias;
    key.expires = expires(g.duration.as_deref(), now)?;
    key.user_id = g.user_id;
    key.team_id = g.team_id;
    key.organization_id = super::organizations::placed(store, g.organization_id).await?;
    key.blocked = g.blocked;
    key.accounting.spend = checked_spend(g.spend)?.unwrap_or(0.0);
    limits.apply(&mut key.limits, now)?;
    super::budgets::follow(store, &mut key.limits, now).await?;
    store.create_key(&key).await.map_err(|e| match e {
        sluice_store::StoreError::Conflict(_) => {
            ApiError::Conflict("a key with this key_alias (or value)".into())
        }
        other => store_error(other),
    })?;
    Ok(IssuedKey::of(plaintext, &key))
}

#[derive(Deserialize)]
struct Update {
    key: String,
    #[serde(default, deserialize_with = "set")]
    key_alias: Option<Option<String>>,
    #[serde(default, deserialize_with = "set")]
    duration: Option<Option<String>>,
    #[serde(default, deserialize_with = "set")]
    user_id: Option<Option<String>>,
    #[serde(default, deserialize_with = "set")]
    team_id: Option<Option<String>>,
    #[serde(default, deserialize_with = "set")]
    organization_id: Option<Option<String>>,
    blocked: Option<bool>,
    spend: Option<f64>,
}

/// `POST /key/update`: only the fields sent change.
pub(super) async fn update(store: &Store, req: AdminRequest<'_>) -> Result<KeyInfo, ApiError> {
    let (u, limits): (Update, LimitsPatch) = body_with_limits(&req, OWN_FIELDS, KEPT_KEY)?;
    let now = OffsetDateTime::now_utc();
    let spend = checked_spend(u.spend)?;
    let mut key = existing(store, &u.key).await?;
    if let Some(alias) = u.key_alias {
        key.key_alias = alias;
    }
    if let Some(duration) = u.duration {
        key.expires = expires(duration.as_deref(), now)?;
    }
    if let Some(user) = u.user_id {
        key.user_id = user;
    }
    if let Some(team) = u.team_id {
        check_team(store, team.as_deref()).await?;
        key.team_id = team;
    }
    if let Some(org) = u.organization_id {
        key.organization_id = super::organizations::placed(store, org).await?;
    }
    if let Some(b) = u.blocked {
        key.blocked = b;
    }
    limits.apply(&mut key.limits, now)?;
    super::budgets::follow(store, &mut key.limits, now).await?;
    key.accounting.updated_at = now;
    save(store, &key).await?;
    if let Some(spend) = spend {
        store
            .set_spend(SubjectKind::Key, key.token.as_str(), spend, now)
            .await
            .map_err(store_error)?;
        key.accounting.spend = spend;
    }
    Ok(KeyInfo::of(&key))
}

async fn save(store: &Store, key: &KeyRow) -> Result<(), ApiError> {
    store.update_key(key).await.map_err(|e| match e {
        sluice_store::StoreError::Conflict(_) => {
            ApiError::Conflict("a key with this key_alias".into())
        }
        other => store_error(other),
    })
}

#[derive(Deserialize)]
struct Delete {
    keys: Option<Vec<String>>,
    key_aliases: Option<Vec<String>>,
}

/// `POST /key/delete` with `keys` (plaintext or hashes) or `key_aliases`. Every key must exist,
/// or nothing is deleted.
pub(super) async fn delete(store: &Store, req: AdminRequest<'_>) -> AdminResult {
    let d: Delete = body(&req, &[&["keys", "key_aliases"]])?;
    let now = OffsetDateTime::now_utc();
    let mut found: Vec<(String, KeyHash)> = Vec::new();
    match (d.keys, d.key_aliases) {
        (Some(keys), _) => {
            for k in keys {
                let row = existing(store, &k).await?;
                found.push((k, row.token));
            }
        }
        (None, Some(aliases)) => {
            for a in aliases {
                let row = store
                    .key_by_alias(&a)
                    .await
                    .map_err(store_error)?
                    .ok_or_else(|| ApiError::NotFound {
                        what: "key",
                        id: a.clone(),
                    })?;
                found.push((a, row.token));
            }
        }
        (None, None) => return Err(ApiError::MissingParam("keys")),
    }
    let mut deleted = Vec::with_capacity(found.len());
    for (given, token) in found {
        store.delete_key(&token, now).await.map_err(store_error)?;
        deleted.push(Value::String(given));
    }
    Ok(json!({ "deleted_keys": deleted }))
}

/// `GET /key/info?key=`: `{"key": <as asked>, "info": {...}}`.
pub(crate) async fn info(store: &Store, req: AdminRequest<'_>) -> Result<KeyInfoAnswer, ApiError> {
    let q = query_pairs(&req, &["key"])?;
    let given = query_value(&q, "key").ok_or(ApiError::MissingParam("key"))?;
    let key = existing(store, given).await?;
    Ok(KeyInfoAnswer {
        key: given.to_owned(),
        info: KeyInfo::of(&key),
    })
}

/// `GET /key/list`: hashes by default, whole keys with `return_full_object=true`.
pub(crate) async fn list(store: &Store, req: AdminRequest<'_>) -> Result<KeyList, ApiError> {
    let q = query_pairs(
        &req,
        &[
            "page",
            "size",
            "user_id",
            "team_id",
            "key_alias",
            "return_full_object",
        ],
    )?;
    let (current, page) = page(&q, "size")?;
    let full = query_value(&q, "return_full_object").is_some_and(|v| v == "true");
    let keys: Vec<KeyRow> = if let Some(alias) = query_value(&q, "key_alias") {
        store
            .key_by_alias(alias)
            .await
            .map_err(store_error)?
            .into_iter()
            .collect()
    } else {
        let filter = match (query_value(&q, "team_id"), query_value(&q, "user_id")) {
            (Some(t), _) => KeyFilter::Team(t),
            (None, Some(u)) => KeyFilter::User(u),
            (None, None) => KeyFilter::All,
        };
        let total = store.count_keys(filter).await.map_err(store_error)?;
        let keys = store.list_keys(filter, page).await.map_err(store_error)?;
        return Ok(listed(&keys, full, total, current, page.limit));
    };
    let total = keys.len() as u64;
    Ok(listed(&keys, full, total, current, page.limit))
}

fn listed(keys: &[KeyRow], full: bool, total: u64, current: u64, size: u64) -> KeyList {
    KeyList {
        keys: keys
            .iter()
            .map(|k| {
                if full {
                    ListedKey::Full(Box::new(KeyInfo::of(k)))
                } else {
                    ListedKey::Hash(k.token.as_str().to_owned())
                }
            })
            .collect(),
        total_count: total,
        current_page: current,
        total_pages: total_pages(total, size),
    }
}

#[derive(Deserialize)]
struct Regenerate {
    key: String,
    new_key: Option<String>,
}

/// `POST /key/regenerate`: same key row (alias, limits, spend), new secret. The old key stops
/// working at once (and is reported to the auth cache as removed).
pub(super) async fn regenerate(
    store: &Store,
    req: AdminRequest<'_>,
) -> Result<IssuedKey, ApiError> {
    let r: Regenerate = body(&req, &[&["key", "new_key"]])?;
    rotate(store, r).await
}

/// `POST /key/{key}/regenerate`: the key from the path, `new_key` optionally in the body.
pub(super) async fn regenerate_named(
    store: &Store,
    key: &str,
    req: AdminRequest<'_>,
) -> Result<IssuedKey, ApiError> {
    let mut map = body_object(&req, &[&["new_key"]])?;
    map.insert("key".into(), key.into());
    rotate(store, from_map(map)?).await
}

async fn rotate(store: &Store, r: Regenerate) -> Result<IssuedKey, ApiError> {
    let now = OffsetDateTime::now_utc();
    let old = existing(store, &r.key).await?;
    let plaintext = match r.new_key {
        Some(k) if k.starts_with("sk-") && k.len() >= 8 => k,
        Some(_) => {
            return Err(ApiError::InvalidParam {
                param: "new_key",
                message: "must start with `sk-` and be at least 8 characters".into(),
            })
        }
        None => new_key()?,
    };
    let token = store
        .rehash_key(&old.token, &plaintext, now)
        .await
        .map_err(store_error)?;
    let key = store
        .key(&token)
        .await
        .map_err(store_error)?
        .ok_or(ApiError::StoreUnavailable)?;
    Ok(IssuedKey::of(plaintext, &key))
}

#[derive(Deserialize)]
struct KeyOnly {
    key: String,
}

async fn set_blocked(
    store: &Store,
    req: AdminRequest<'_>,
    blocked: bool,
) -> Result<KeyInfo, ApiError> {
    let k: KeyOnly = from_map(body_object(&req, &[&["key"]])?)?;
    let mut key = existing(store, &k.key).await?;
    key.blocked = blocked;
    key.accounting.updated_at = OffsetDateTime::now_utc();
    save(store, &key).await?;
    Ok(KeyInfo::of(&key))
}

/// `POST /key/block`: the key is refused until unblocked; its spend and limits stay.
pub(super) async fn block(store: &Store, req: AdminRequest<'_>) -> Result<KeyInfo, ApiError> {
    set_blocked(store, req, true).await
}

/// `POST /key/unblock`.
pub(super) async fn unblock(store: &Store, req: AdminRequest<'_>) -> Result<KeyInfo, ApiError> {
    set_blocked(store, req, false).await
}
