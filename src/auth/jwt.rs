//! JWTs in place of virtual keys (LiteLLM's `enable_jwt_auth`): a bearer token shaped like a
//! JWT is verified against the identity provider's keys (`sluice_jwt`: signature, `exp`,
//! `nbf`, `aud`, `iss`; a token seen before costs a SHA-256 and a map read), and its claims
//! name who calls:
//!
//! - the admin scope (`admin_jwt_scope`, in `scope` or `scp`): the master key's rights;
//! - else a team (`team_id_jwt_field`, or `team_id_default`), a user (`user_id_jwt_field`) and
//!   an organization (`org_id_jwt_field`): the caller is a key of that team and user, held to
//!   their model access, limits and budgets as a virtual key of theirs would be, and its spend
//!   recorded under them (and under a key hash of its own, one per token subject). A team the
//!   token names must exist.
//!
//! The keys come from `JWT_PUBLIC_KEY_URL` (JWK Sets or OpenID discovery documents): fetched
//! at start, refreshed by a task of its own every `public_key_ttl`, and at once (rate-limited)
//! when a token names a key not seen yet (the provider rotated).

use std::sync::Arc;
use std::time::Duration;

use http::{HeaderMap, Method, Uri};
use serde_json::{Map, Value};

use sluice_core::error::ApiError;
use sluice_core::limits::{Counters, Limits, Scope, Subject, SubjectKind};
use sluice_core::record::KeyInfo;
use sluice_core::trace_context::hex;
use sluice_jwt::{Claims, JwtError, KeySettings, Keys, Validation};
use sluice_net::client::{ClientRegistry, HttpClient};
use sluice_telemetry::callbacks::deliver::send;

use sluice_config::JwtRole;

use super::access::ModelAccess;
use super::directory::{digest, Caller, Directory, KeyEntry};
use super::route_groups::{JwtGrants, RouteRules};

/// A team or user could not be made in the store.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the team or user could not be made in the store")]
pub struct ProvisionFailed;

/// What [`Provision::upsert`] returns.
pub type UpsertFuture<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), ProvisionFailed>> + Send + 'a>>;

/// Makes the teams and users JWTs name when none exists (`team_id_upsert`,
/// `user_id_upsert`): the store's side, which `auth::sync` implements.
pub trait Provision: Send + Sync {
    /// Make the team or user `id` and put it in the directory.
    fn upsert<'a>(&'a self, kind: SubjectKind, id: &'a str) -> UpsertFuture<'a>;
}

/// Most distinct token identities kept; past it the map starts again.
const MAX_CALLERS: usize = 10_000;

/// Least time between two fetches a token naming an unknown key may cause.
const UNKNOWN_KEY_FETCH_EVERY_SECS: u64 = 2;

/// How often the refresher looks whether the keys are due.
const REFRESH_CHECK: Duration = Duration::from_secs(5);

/// Whether a presented key is shaped like a JWT (a virtual key never is: `sk-…`).
pub fn looks_like_jwt(key: &str) -> bool {
    key.starts_with("eyJ") && key.bytes().filter(|b| *b == b'.').count() == 2
}

/// The JWT side of authentication.
pub struct JwtAuth {
    settings: sluice_config::JwtAuth,
    keys: Keys,
    client: HttpClient,
    /// One key entry per token identity (issuer, subject, team, user, organization).
    callers: papaya::HashMap<Box<str>, Arc<KeyEntry>>,
    /// One fetch at a time.
    fetching: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for JwtAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtAuth")
            .field("key_urls", &self.settings.key_urls.len())
            .field("callers", &self.callers.len())
            .finish()
    }
}

impl JwtAuth {
    /// JWT authentication as configured; its keys are fetched by a task started here (on the
    /// current runtime, when there is one).
    pub fn start(settings: &sluice_config::JwtAuth) -> Arc<Self> {
        let keys = Keys::new(
            Validation {
                audiences: settings.audiences.clone(),
                issuer: settings.issuer.clone(),
                leeway_secs: settings.leeway_secs,
                ..Validation::default()
            },
            KeySettings {
                public_key_ttl_secs: settings.public_key_ttl_secs,
                public_key_stale_ttl_secs: settings.public_key_stale_ttl_secs,
                // A token naming a key not seen yet fetches at most every 2 s: a rotation is
                // followed at once, a flood of made-up keys costs the provider one fetch each.
                min_refresh_interval_secs: UNKNOWN_KEY_FETCH_EVERY_SECS,
                ..KeySettings::default()
            },
        );
        let auth = Arc::new(Self {
            settings: settings.clone(),
            keys,
            client: ClientRegistry::default()
                .get(Duration::from_secs(5))
                .shared()
                .clone(),
            callers: papaya::HashMap::new(),
            fetching: tokio::sync::Mutex::new(()),
        });
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let weak = Arc::downgrade(&auth);
            rt.spawn(async move {
                let mut tick = tokio::time::interval(REFRESH_CHECK);
                loop {
                    tick.tick().await;
                    let Some(auth) = weak.upgrade() else {
                        return;
                    };
                    if auth.keys.claim_refresh(sluice_jwt::unix_now()) {
                        auth.refresh().await;
                    }
                }
            });
        }
        auth
    }

    /// Who the token says is calling; `Err` says why it is refused (never echoing it). A
    /// team or user the token names that does not exist is made through `loader` with
    /// `team_id_upsert` / `user_id_upsert`.
    pub async fn caller(
        &self,
        token: &str,
        dir: &Directory,
        loader: Option<&dyn Provision>,
    ) -> Result<Caller, ApiError> {
        let claims = self.verified(token).await?;
        let s = &self.settings;
        let role = self.role(&claims);
        if self.is_admin(&claims) || role == Some(JwtRole::ProxyAdmin) {
            return Ok(Caller::Master);
        }
        if s.enforce_rbac && role.is_none() {
            return Err(ApiError::NotPermitted(
                "the token's roles map to no role (litellm_jwtauth.role_mappings, enforce_rbac)",
            ));
        }
        if let (Some(field), Some(allowed)) = (&s.user_roles_field, &s.user_allowed_roles) {
            if !claim_texts(&claims, field)
                .iter()
                .any(|r| allowed.contains(r))
            {
                return Err(ApiError::NotPermitted(
                    "the token carries none of the allowed roles (litellm_jwtauth.user_allowed_roles)",
                ));
            }
        }
        let field = |f: &Option<String>| f.as_deref().and_then(|f| claim_text(&claims, f));
        let object = field(&s.object_id_field);
        let team = match (role, &object) {
            (Some(JwtRole::Team), Some(o)) => Some(o.clone()),
            _ => field(&s.team_id_field).or_else(|| s.team_id_default.clone()),
        };
        let user = match (role, &object) {
            (Some(JwtRole::InternalUser), Some(o)) => Some(o.clone()),
            _ => field(&s.user_id_field),
        };
        let org = field(&s.org_id_field);
        let end_user = field(&s.end_user_id_field);
        if team.is_none() && user.is_none() {
            return Err(ApiError::JwtRefused(
                "the token names no team or user (team_id_jwt_field, user_id_jwt_field)".into(),
            ));
        }
        if let Some(t) = &team {
            self.exists(dir, loader, SubjectKind::Team, t, s.team_id_upsert)
                .await?;
        }
        if let Some(u) = &user {
            if s.user_id_upsert {
                self.exists(dir, loader, SubjectKind::User, u, true).await?;
            }
        }
        // Scopes: with `enforce_scope_based_access`, the token reaches the models and routes its
        // scopes are mapped to, and no others.
        let (scoped, mut routes) = (
            s.enforce_scope_based_access && !s.scope_mappings.is_empty(),
            RouteRules::default().and(&s.team_allowed_routes),
        );
        let mut models = ModelAccess::All;
        let mut granted = String::new();
        if scoped {
            let scopes = scopes(&claims);
            let mapped: Vec<_> = s
                .scope_mappings
                .iter()
                .filter(|m| scopes.iter().any(|s| *s == m.scope))
                .collect();
            let names: Vec<String> = mapped.iter().flat_map(|m| m.models.clone()).collect();
            models = ModelAccess::from_list(&names);
            if models == ModelAccess::All && names.is_empty() {
                // No scope of the token grants a model: it reaches none.
                models = ModelAccess::Only(Box::new([]));
            }
            let paths: Vec<String> = mapped.iter().flat_map(|m| m.routes.clone()).collect();
            if mapped.iter().any(|m| !m.routes.is_empty()) {
                routes = routes.and(&paths);
            }
            granted = mapped
                .iter()
                .map(|m| m.scope.as_str())
                .collect::<Vec<_>>()
                .join(" ");
        }
        let text = |name: &str| claims.get(name).and_then(Value::as_str).unwrap_or("");
        let identity = format!(
            "{}\u{1f}{}\u{1f}{}\u{1f}{}\u{1f}{}\u{1f}{}\u{1f}{}",
            text("iss"),
            text("sub"),
            team.as_deref().unwrap_or(""),
            user.as_deref().unwrap_or(""),
            org.as_deref().unwrap_or(""),
            end_user.as_deref().unwrap_or(""),
            granted,
        );
        let callers = self.callers.pin();
        if let Some(k) = callers.get(identity.as_str()) {
            return Ok(Caller::Key(k.clone()));
        }
        if callers.len() >= MAX_CALLERS {
            callers.clear();
        }
        let hash: Arc<str> = hex(&digest(&identity)).into();
        let sub = text("sub");
        let entry = Arc::new(KeyEntry {
            info: Arc::new(KeyInfo {
                hash: hash.clone(),
                alias: Some(format!("jwt:{}", sub.chars().take(128).collect::<String>()).into()),
                team_id: team.map(Into::into),
                user_id: user.map(Into::into),
            }),
            expires_ms: None,
            blocked: false,
            models,
            subject: Subject {
                kind: SubjectKind::Key,
                scope: Scope::All,
                limits: Arc::new(Limits::default()),
                counters: Arc::new(Counters::new(hash)),
            },
            guardrails: Arc::default(),
            cache: None,
            aliases: None,
            organization: org.map(Into::into),
            per_model: None,
            allowed_ips: None,
            tags: Arc::default(),
            alerts: Arc::default(),
            jwt: Some(Arc::new(JwtGrants {
                routes,
                end_user: end_user.map(Into::into),
            })),
        });
        callers.insert(identity.into_boxed_str(), entry.clone());
        Ok(Caller::Key(entry))
    }

    /// The role the token's roles map to (`roles_jwt_field`, `role_mappings`): the strongest.
    fn role(&self, claims: &Map<String, Value>) -> Option<JwtRole> {
        let field = self.settings.roles_field.as_deref()?;
        let roles = claim_texts(claims, field);
        let mapped = |want: JwtRole| {
            self.settings
                .role_mappings
                .iter()
                .any(|(name, r)| *r == want && roles.contains(name))
        };
        [JwtRole::ProxyAdmin, JwtRole::Team, JwtRole::InternalUser]
            .into_iter()
            .find(|r| mapped(*r))
    }

    /// A team or user the token names must exist; with `upsert`, one that does not is made
    /// (once: the directory holds it after).
    async fn exists(
        &self,
        dir: &Directory,
        loader: Option<&dyn Provision>,
        kind: SubjectKind,
        id: &str,
        upsert: bool,
    ) -> Result<(), ApiError> {
        if dir.holder(kind, id).is_some() {
            return Ok(());
        }
        let what = if kind == SubjectKind::Team {
            "team"
        } else {
            "user"
        };
        let shown: String = id.chars().take(128).collect();
        match (upsert, loader) {
            (true, Some(l)) => l.upsert(kind, id).await.map_err(|_| {
                ApiError::JwtUnavailable(format!("{what} `{shown}` could not be made in the store"))
            }),
            _ => Err(ApiError::JwtRefused(format!(
                "{what} `{shown}` named by the token does not exist"
            ))),
        }
    }

    /// The token's claims, fetching the keys first when a token names one not seen yet or
    /// none are here (each at most once per few seconds).
    async fn verified(&self, token: &str) -> Result<Claims, ApiError> {
        let now = sluice_jwt::unix_now();
        let retry = match self.keys.verify(token, now) {
            Ok(c) => return Ok(c),
            // A key not seen yet, or a key whose material changed under the same `kid` (an
            // identity provider restarted with a new key): fetch, at most every 2 s.
            Err(JwtError::UnknownKid | JwtError::BadSignature) => {
                self.keys.claim_unknown_kid_refresh(now)
            }
            Err(JwtError::NoKeys | JwtError::KeysStale) => self.keys.claim_refresh(now),
            Err(e) => return Err(refusal(&e)),
        };
        if retry {
            self.refresh().await;
        } else {
            // Another fetch may be under way (the one at start, or a rotation's): wait for it
            // rather than refuse a token its keys are about to verify.
            drop(self.fetching.lock().await);
        }
        self.keys
            .verify(token, sluice_jwt::unix_now())
            .map_err(|e| refusal(&e))
    }

    fn is_admin(&self, claims: &Map<String, Value>) -> bool {
        let wanted = self.settings.admin_scope.as_str();
        scopes(claims).contains(&wanted)
    }

    /// Fetch every `JWT_PUBLIC_KEY_URL` (following an OpenID discovery document to its
    /// `jwks_uri`) and install what they hold; a failure keeps the keys as they were.
    pub async fn refresh(&self) {
        let _one = self.fetching.lock().await;
        let mut all: Option<sluice_jwt::Jwks> = None;
        for url in &self.settings.key_urls {
            match self.fetch_set(url).await {
                Ok(set) => match &mut all {
                    Some(a) => a.extend(set),
                    None => all = Some(set),
                },
                Err(why) => tracing::warn!(why, "JWT keys not fetched from one JWT_PUBLIC_KEY_URL"),
            }
        }
        if let Some(set) = all {
            let installed = self.keys.replace(set, sluice_jwt::unix_now());
            tracing::debug!(
                keys = installed.keys,
                changed = installed.changed,
                "JWT keys installed"
            );
        }
    }

    async fn fetch_set(&self, url: &str) -> Result<sluice_jwt::Jwks, String> {
        let body = self.get(url).await?;
        if let Ok(Value::Object(doc)) = serde_json::from_slice::<Value>(&body) {
            if let Some(jwks_uri) = doc.get("jwks_uri").and_then(Value::as_str) {
                let body = self.get(jwks_uri).await?;
                return sluice_jwt::Jwks::parse(&body).map_err(|e| e.to_string());
            }
        }
        sluice_jwt::Jwks::parse(&body).map_err(|e| e.to_string())
    }

    async fn get(&self, url: &str) -> Result<bytes::Bytes, String> {
        let uri: Uri = url.parse().map_err(|_| "not a URL".to_owned())?;
        let answer = send(
            &self.client,
            Method::GET,
            uri,
            HeaderMap::new(),
            bytes::Bytes::new(),
        )
        .await
        .map_err(|e| e.to_string())?;
        if !answer.status.is_success() {
            return Err(format!("answered {}", answer.status));
        }
        Ok(answer.body)
    }
}

fn refusal(e: &JwtError) -> ApiError {
    if e.is_unavailable() {
        ApiError::JwtUnavailable(e.to_string())
    } else {
        ApiError::JwtRefused(e.to_string())
    }
}

/// The token's scopes (`scope`, space-separated, or `scp`, a list or a string).
fn scopes(claims: &Map<String, Value>) -> Vec<&str> {
    ["scope", "scp"]
        .iter()
        .flat_map(|name| match claims.get(*name) {
            Some(Value::String(s)) => s.split_whitespace().collect(),
            Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        })
        .collect()
}

/// A claim as a list of texts, by a dotted path (one string alone is a list of one).
fn claim_texts(claims: &Map<String, Value>, path: &str) -> Vec<String> {
    let mut parts = path.split('.');
    let Some(mut v) = parts.next().and_then(|p| claims.get(p)) else {
        return Vec::new();
    };
    for p in parts {
        match v.get(p) {
            Some(next) => v = next,
            None => return Vec::new(),
        }
    }
    match v {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a
            .iter()
            .filter_map(|s| s.as_str().map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    }
}

/// A claim as text, by a dotted path (`realm.team`); a list gives its first string.
fn claim_text(claims: &Map<String, Value>, path: &str) -> Option<String> {
    let mut parts = path.split('.');
    let mut v = claims.get(parts.next()?)?;
    for p in parts {
        v = v.get(p)?;
    }
    match v {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Array(a) => a.iter().find_map(|s| s.as_str().map(str::to_owned)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn jwt_shape_and_claim_paths() {
        assert!(looks_like_jwt("eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln"));
        assert!(!looks_like_jwt("sk-1234"));
        assert!(!looks_like_jwt("eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0"));
        let c = json!({"team": "t1", "realm": {"team": "t2", "ids": ["a", "b"]}, "n": 7});
        let c = c.as_object().unwrap();
        assert_eq!(claim_text(c, "team").as_deref(), Some("t1"));
        assert_eq!(claim_text(c, "realm.team").as_deref(), Some("t2"));
        assert_eq!(claim_text(c, "realm.ids").as_deref(), Some("a"));
        assert_eq!(claim_text(c, "n").as_deref(), Some("7"));
        assert_eq!(claim_text(c, "realm.none"), None);
    }
}
