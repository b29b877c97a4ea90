//! The management API, LiteLLM-compatible: virtual keys (`/key/*`), teams (`/team/*`), users
//! (`/user/*`), end users (`/customer/*`, also as `/end_user/*`), organizations
//! (`/organization/*`), budgets (`/budget/*`), tags (`/tag/*`) and spend logs (`GET /spend/logs`), with
//! LiteLLM's request and response field names.
//!
//! The pipeline calls [`handle`] behind the master key; nothing here is on the inference path.
//! Every handler is `async fn(&Store, AdminRequest) -> Result<Value, ApiError>`. Bodies and
//! query strings are checked strictly: an unknown field is a 400 naming it (a typo such as
//! `max_budjet` must not silently create a key without a budget), a missing required one a 400
//! too. Database errors never reach the client as text.

pub(crate) mod access_groups;
pub(crate) mod answers;
pub(crate) mod audit;
mod bounds;
pub(crate) use models::key_read;
pub(crate) use own::own_query;
pub(crate) use user_keys::{route as user_keys_route, serve as user_keys};
mod budgets;
pub(crate) mod customers;
mod fields;
pub(crate) mod keys;
pub(crate) mod models;
mod organizations;
mod own;
pub(crate) mod spend;
mod tags;
pub(crate) mod teams;
mod user_keys;
pub(crate) mod users;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod wire;

use std::future::Future;
use std::pin::Pin;

use http::Method;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{Map, Value};
use time::OffsetDateTime;

use sluice_core::error::ApiError;
use sluice_store::{Store, StoreError};

use crate::server::AppState;

/// One admin call: its query string and body, borrowed from the request.
#[derive(Debug, Clone, Copy)]
pub struct AdminRequest<'a> {
    /// The raw query string (without `?`), possibly empty.
    pub query: &'a str,
    /// The raw body, possibly empty.
    pub body: &'a [u8],
}

/// What a handler returns: the JSON to send with 200.
pub type AdminResult = Result<Value, ApiError>;

type Handler = for<'a> fn(
    &'a Store,
    AdminRequest<'a>,
) -> Pin<Box<dyn Future<Output = AdminResult> + Send + 'a>>;

/// Every admin route: method, path, handler. `/end_user/*` are LiteLLM's older names for
/// `/customer/*` and still served.
const ROUTES: &[(Method, &str, Handler)] = &[
    (Method::POST, "/key/generate", |s, r| {
        Box::pin(json(keys::generate(s, r)))
    }),
    (Method::POST, "/key/update", |s, r| {
        Box::pin(json(keys::update(s, r)))
    }),
    (Method::POST, "/key/delete", |s, r| {
        Box::pin(keys::delete(s, r))
    }),
    (Method::GET, "/key/info", |s, r| {
        Box::pin(json(keys::info(s, r)))
    }),
    (Method::GET, "/key/list", |s, r| {
        Box::pin(json(keys::list(s, r)))
    }),
    (Method::POST, "/key/regenerate", |s, r| {
        Box::pin(json(keys::regenerate(s, r)))
    }),
    (Method::POST, "/key/block", |s, r| {
        Box::pin(json(keys::block(s, r)))
    }),
    (Method::POST, "/key/unblock", |s, r| {
        Box::pin(json(keys::unblock(s, r)))
    }),
    (Method::POST, "/team/new", |s, r| {
        Box::pin(json(teams::new(s, r)))
    }),
    (Method::POST, "/team/update", |s, r| {
        Box::pin(json(teams::update(s, r)))
    }),
    (Method::POST, "/team/delete", |s, r| {
        Box::pin(teams::delete(s, r))
    }),
    (Method::GET, "/team/info", |s, r| {
        Box::pin(json(teams::info(s, r)))
    }),
    (Method::GET, "/team/list", |s, r| {
        Box::pin(json(teams::list(s, r)))
    }),
    (Method::POST, "/team/member_add", |s, r| {
        Box::pin(json(teams::member_add(s, r)))
    }),
    (Method::POST, "/team/member_update", |s, r| {
        Box::pin(json(teams::member_update(s, r)))
    }),
    (Method::POST, "/team/member_delete", |s, r| {
        Box::pin(json(teams::member_delete(s, r)))
    }),
    (Method::POST, "/user/new", |s, r| {
        Box::pin(json(users::new(s, r)))
    }),
    (Method::POST, "/user/update", |s, r| {
        Box::pin(json(users::update(s, r)))
    }),
    (Method::POST, "/user/delete", |s, r| {
        Box::pin(users::delete(s, r))
    }),
    (Method::GET, "/user/info", |s, r| {
        Box::pin(json(users::info(s, r)))
    }),
    (Method::GET, "/user/list", |s, r| {
        Box::pin(json(users::list(s, r)))
    }),
    (Method::POST, "/customer/new", |s, r| {
        Box::pin(json(customers::new(s, r)))
    }),
    (Method::POST, "/customer/update", |s, r| {
        Box::pin(json(customers::update(s, r)))
    }),
    (Method::POST, "/customer/delete", |s, r| {
        Box::pin(customers::delete(s, r))
    }),
    (Method::GET, "/customer/info", |s, r| {
        Box::pin(json(customers::info(s, r)))
    }),
    (Method::GET, "/customer/list", |s, r| {
        Box::pin(json(customers::list(s, r)))
    }),
    (Method::POST, "/customer/block", |s, r| {
        Box::pin(json(customers::block(s, r)))
    }),
    (Method::POST, "/customer/unblock", |s, r| {
        Box::pin(json(customers::unblock(s, r)))
    }),
    (Method::GET, "/spend/logs", |s, r| {
        Box::pin(json(spend::logs(s, r)))
    }),
    (Method::GET, "/spend/daily", |s, r| {
        Box::pin(json(spend::daily(s, r)))
    }),
    (Method::GET, "/spend/tags", |s, r| {
        Box::pin(json(spend::tags(s, r)))
    }),
    (Method::GET, "/spend/groups", |s, r| {
        Box::pin(json(spend::groups(s, r)))
    }),
    (Method::POST, "/tag/new", |s, r| Box::pin(tags::new(s, r))),
    (Method::POST, "/tag/update", |s, r| {
        Box::pin(tags::update(s, r))
    }),
    (Method::POST, "/tag/info", |s, r| Box::pin(tags::info(s, r))),
    (Method::GET, "/tag/list", |s, r| Box::pin(tags::list(s, r))),
    (Method::POST, "/tag/delete", |s, r| {
        Box::pin(tags::delete(s, r))
    }),
    (Method::GET, "/audit", |s, r| {
        Box::pin(json(audit::list(s, r)))
    }),
    (Method::POST, "/budget/new", |s, r| {
        Box::pin(budgets::new(s, r))
    }),
    (Method::POST, "/budget/update", |s, r| {
        Box::pin(budgets::update(s, r))
    }),
    (Method::POST, "/budget/info", |s, r| {
        Box::pin(budgets::info(s, r))
    }),
    (Method::GET, "/budget/list", |s, r| {
        Box::pin(budgets::list(s, r))
    }),
    (Method::POST, "/budget/delete", |s, r| {
        Box::pin(budgets::delete(s, r))
    }),
    (Method::POST, "/organization/new", |s, r| {
        Box::pin(organizations::new(s, r))
    }),
    // LiteLLM's methods are PATCH and DELETE; older clients POST.
    (Method::PATCH, "/organization/update", |s, r| {
        Box::pin(organizations::update(s, r))
    }),
    (Method::POST, "/organization/update", |s, r| {
        Box::pin(organizations::update(s, r))
    }),
    (Method::DELETE, "/organization/delete", |s, r| {
        Box::pin(organizations::delete(s, r))
    }),
    (Method::POST, "/organization/delete", |s, r| {
        Box::pin(organizations::delete(s, r))
    }),
    (Method::GET, "/organization/info", |s, r| {
        Box::pin(organizations::info(s, r))
    }),
    (Method::POST, "/organization/info", |s, r| {
        Box::pin(organizations::info_many(s, r))
    }),
    (Method::GET, "/organization/list", |s, r| {
        Box::pin(organizations::list(s, r))
    }),
    (Method::POST, "/organization/list", |s, r| {
        Box::pin(organizations::list(s, r))
    }),
    (Method::POST, "/organization/member_add", |s, r| {
        Box::pin(organizations::member_add(s, r))
    }),
    (Method::PATCH, "/organization/member_update", |s, r| {
        Box::pin(organizations::member_update(s, r))
    }),
    (Method::POST, "/organization/member_update", |s, r| {
        Box::pin(organizations::member_update(s, r))
    }),
    (Method::DELETE, "/organization/member_delete", |s, r| {
        Box::pin(organizations::member_delete(s, r))
    }),
    (Method::POST, "/organization/member_delete", |s, r| {
        Box::pin(organizations::member_delete(s, r))
    }),
];

/// A typed handler's answer as the JSON sent: its struct (`answers`) is the wire shape.
async fn json<T: Serialize>(answer: impl Future<Output = Result<T, ApiError>>) -> AdminResult {
    serde_json::to_value(answer.await?).map_err(|_| ApiError::Internal("admin answer"))
}

/// Serves an admin call, or `None` when `path` is not an admin route (the pipeline then goes on
/// to its own routes). A known path with the wrong method is a 405. `path` may carry LiteLLM's
/// `/end_user/` spelling or a `/v1` prefix; `/key/{key}/regenerate` is LiteLLM's other spelling
/// of `/key/regenerate`.
pub async fn handle(
    store: &Store,
    method: &Method,
    path: &str,
    query: &str,
    body: &[u8],
) -> Option<AdminResult> {
    let path = path.strip_prefix("/v1").unwrap_or(path);
    let aliased;
    let path = match path.strip_prefix("/end_user/") {
        Some(rest) => {
            aliased = format!("/customer/{rest}");
            aliased.as_str()
        }
        None => path,
    };
    if let Some(key) = path
        .strip_prefix("/key/")
        .and_then(|rest| rest.strip_suffix("/regenerate"))
        .filter(|k| !k.is_empty() && !k.contains('/'))
    {
        if method != Method::POST {
            return Some(Err(ApiError::MethodNotAllowed(method.to_string())));
        }
        return Some(
            json(keys::regenerate_named(
                store,
                key,
                AdminRequest { query, body },
            ))
            .await,
        );
    }
    let mut known_path = false;
    for (m, p, handler) in ROUTES {
        if *p == path {
            known_path = true;
            if m == method {
                return Some(handler(store, AdminRequest { query, body }).await);
            }
        }
    }
    known_path.then(|| Err(ApiError::MethodNotAllowed(method.to_string())))
}

/// Serves an admin call for a caller already allowed to make it (the management API behind the
/// master key, the console behind its session), then brings the key directory up to date after
/// a change, on this instance at once and on the fleet's others through Redis, so a key made,
/// blocked or deleted works (or stops working) everywhere without waiting for the poll.
/// A change is written to the audit log as `by`'s (`audit`).
pub async fn call(
    state: &AppState,
    method: &Method,
    path: &str,
    query: &str,
    body: &[u8],
    by: &str,
) -> AdminResult {
    let Some(services) = state.store() else {
        return Err(ApiError::StoreUnavailable);
    };
    let before = OffsetDateTime::now_utc();
    let route = normalised(path);
    if let Some(answer) = models::handle(state, method, &route, query, body, by).await {
        return answer;
    }
    if let Some(answer) = access_groups::handle(state, method, &route, body, by).await {
        return answer;
    }
    let changes = method != Method::GET;
    let audited = changes.then(|| audit::change_of(&route)).flatten();
    let before_values = match &audited {
        Some(c) => audit::read_before(&services.store, c, &route, body).await,
        None => Vec::new(),
    };
    // LiteLLM's `upperbound_key_generate_params` on every key made.
    let bounded = if route == "/key/generate" && method == Method::POST {
        bounds::apply(body, &state.snapshot().key_bounds)?
    } else {
        None
    };
    let body = bounded.as_deref().unwrap_or(body);
    let answer = handle(&services.store, method, path, query, body)
        .await
        .unwrap_or_else(|| {
            Err(ApiError::RouteNotFound {
                method: method.to_string(),
                path: path.chars().take(200).collect(),
            })
        })?;
    if let Some(c) = &audited {
        let objects = if before_values.is_empty() {
            let parsed: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
            c.objects(&route, &parsed, Some(&answer))
                .into_iter()
                .map(|id| (id, None))
                .collect()
        } else {
            before_values
        };
        audit::record(&services.store, by, c, objects, &answer).await;
    }
    if changes {
        match services.sync.refresh(before).await {
            Ok(changed) => {
                if let Some(fleet) = state.fleet() {
                    for hash in changed {
                        fleet.publish(&crate::fleet::KeyChange { hash }).await;
                    }
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "key directory refresh failed; the poll will catch up")
            }
        }
    }
    Ok(answer)
}

/// The answer to a call whose list is large, serialised straight to the response's bytes, or
/// `None` for every other call ([`call`] answers those): `GET /spend/logs` (10,000 records by
/// default), whose answer built as a [`Value`] first would be 370,000 map entries to allocate,
/// sort and drop. The bytes are the ones [`call`]'s answer serialises to: the record's fields
/// are declared in the order a [`Value`]'s map sorts them (`answers::spend`, tested there).
/// Only reads go this way, so there is nothing to audit or announce.
pub async fn call_bytes(
    state: &AppState,
    method: &Method,
    path: &str,
    query: &str,
    body: &[u8],
) -> Option<Result<Vec<u8>, ApiError>> {
    if method != Method::GET || normalised(path) != "/spend/logs" {
        return None;
    }
    let Some(services) = state.store() else {
        return Some(Err(ApiError::StoreUnavailable));
    };
    let answer = match spend::logs(&services.store, AdminRequest { query, body }).await {
        Ok(logs) => {
            // A record is ~850 bytes as JSON: room for the whole answer up front, where 8 MB
            // grown by doubling is copied a dozen times.
            let mut bytes = Vec::with_capacity(logs.len().saturating_mul(1024));
            serde_json::to_writer(&mut bytes, &logs)
                .map(|()| bytes)
                .map_err(|_| ApiError::Internal("admin answer"))
        }
        Err(e) => Err(e),
    };
    Some(answer)
}

/// `path` as the routes name it: no `/v1`, `/customer/` for LiteLLM's `/end_user/`.
fn normalised(path: &str) -> String {
    let path = path.strip_prefix("/v1").unwrap_or(path);
    match path.strip_prefix("/end_user/") {
        Some(rest) => format!("/customer/{rest}"),
        None => path.to_owned(),
    }
}

/// The body as a JSON object, every field checked against `allowed`.
fn body_object(
    req: &AdminRequest<'_>,
    allowed: &[&[&str]],
) -> Result<Map<String, Value>, ApiError> {
    let body = if req.body.iter().all(u8::is_ascii_whitespace) {
        b"{}".as_slice()
    } else {
        req.body
    };
    let map: Map<String, Value> =
        serde_json::from_slice(body).map_err(|e| ApiError::InvalidJson(e.to_string()))?;
    if let Some(unknown) = map
        .keys()
        .find(|k| !allowed.iter().any(|set| set.contains(&k.as_str())))
    {
        return Err(ApiError::UnknownParam(unknown.clone()));
    }
    Ok(map)
}

/// The body as `T`, after the field check. Type errors name the field.
fn body<T: DeserializeOwned>(req: &AdminRequest<'_>, allowed: &[&[&str]]) -> Result<T, ApiError> {
    from_map(body_object(req, allowed)?)
}

/// The body as `T` plus the shared budget and limit fields, each read from the same checked
/// object (not through `#[serde(flatten)]`, which would lose the name of a mistyped field).
/// `kept` names LiteLLM's fields that are stored in `metadata` (`fields::KEPT_*`): they are
/// taken out of the object before either typed read.
fn body_with_limits<T: DeserializeOwned>(
    req: &AdminRequest<'_>,
    own: &[&str],
    kept: &[&str],
) -> Result<(T, fields::LimitsPatch), ApiError> {
    let mut map = body_object(req, &[own, fields::LIMIT_FIELDS, kept])?;
    let mut taken = Map::new();
    for name in kept {
        if let Some((k, v)) = map.remove_entry(*name) {
            taken.insert(k, v);
        }
    }
    let mut limits: fields::LimitsPatch = from_map(map.clone())?;
    limits.kept = taken;
    Ok((from_map(map)?, limits))
}

/// A checked object as `T`; serde's message names the field (`missing field `key``, `invalid
/// type: ... for key `max_budget``).
fn from_map<T: DeserializeOwned>(map: Map<String, Value>) -> Result<T, ApiError> {
    serde_path_to_error::deserialize(Value::Object(map)).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        if let Some(field) = missing_field(&inner) {
            return ApiError::MissingParam(field);
        }
        let field = path.split(['.', '[']).next().unwrap_or_default();
        match fields::ALL.iter().find(|f| **f == field) {
            Some(param) => ApiError::InvalidParam {
                param,
                message: inner,
            },
            None => ApiError::InvalidJson(inner),
        }
    })
}

/// serde reports a missing field as "missing field `name`"; the static names of the request
/// structs let it become a `MissingParam`.
fn missing_field(message: &str) -> Option<&'static str> {
    let name = message.strip_prefix("missing field `")?.strip_suffix('`')?;
    fields::REQUIRED.iter().copied().find(|f| *f == name)
}

/// The query string's pairs, every name checked against `allowed`.
fn query_pairs(
    req: &AdminRequest<'_>,
    allowed: &[&str],
) -> Result<Vec<(String, String)>, ApiError> {
    let pairs: Vec<(String, String)> = form_urlencoded::parse(req.query.as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    if let Some((unknown, _)) = pairs.iter().find(|(k, _)| !allowed.contains(&k.as_str())) {
        return Err(ApiError::UnknownParam(unknown.clone()));
    }
    Ok(pairs)
}

/// One query parameter's value.
fn query_value<'p>(pairs: &'p [(String, String)], name: &str) -> Option<&'p str> {
    pairs
        .iter()
        .find(|(k, v)| k == name && !v.is_empty())
        .map(|(_, v)| v.as_str())
}

/// A whole-number query parameter.
fn query_number(
    pairs: &[(String, String)],
    name: &'static str,
    default: u64,
) -> Result<u64, ApiError> {
    query_value(pairs, name).map_or(Ok(default), |v| {
        v.parse().map_err(|_| ApiError::InvalidParam {
            param: name,
            message: format!("`{v}` is not a whole number"),
        })
    })
}

/// The page of a list call from LiteLLM's `page` (1-based) and `size`/`page_size`.
fn page(
    pairs: &[(String, String)],
    size_name: &'static str,
) -> Result<(u64, sluice_store::Page), ApiError> {
    let page = query_number(pairs, "page", 1)?.max(1);
    let size = query_number(pairs, size_name, 100)?.clamp(1, 1000);
    // A page past any list a database can hold is a client error, not an overflow (found by
    // the admin_body fuzz target: `page=9999999999999999999`).
    let offset = (page - 1)
        .checked_mul(size)
        .filter(|o| *o <= MAX_OFFSET)
        .ok_or_else(|| ApiError::InvalidParam {
            param: "page",
            message: format!("page {page} of {size} is past the end of any list"),
        })?;
    Ok((
        page,
        sluice_store::Page {
            offset,
            limit: size,
        },
    ))
}

/// The largest row offset a list call asks the database for (SQL offsets are signed 64-bit).
const MAX_OFFSET: u64 = 1 << 62;

/// What a client may see of a store failure: not-found and conflicts as such, everything else
/// as "database unavailable" (the text, which may name hosts or SQL, only in the log).
fn store_error(e: StoreError) -> ApiError {
    match e {
        StoreError::NotFound(what) => ApiError::NotFound {
            what,
            id: String::new(),
        },
        StoreError::Conflict(what) => ApiError::Conflict(what.to_owned()),
        other => {
            tracing::warn!(error = %other, "admin API: store error");
            ApiError::StoreUnavailable
        }
    }
}

/// A time as LiteLLM prints it (ISO 8601, UTC).
fn iso(t: OffsetDateTime) -> Value {
    answers::iso(t).map_or(Value::Null, Value::String)
}

/// An optional time as ISO 8601 or null.
fn iso_opt(t: Option<OffsetDateTime>) -> Value {
    t.map_or(Value::Null, iso)
}

/// Page count for a total.
fn total_pages(total: u64, size: u64) -> u64 {
    total.div_ceil(size.max(1))
}
