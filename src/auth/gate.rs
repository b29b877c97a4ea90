//! Step 3 of the pipeline: turn a request's credentials into a [`Caller`]. The master key and
//! every key the directory holds cost a hash and a map read; only a key this instance has
//! never seen (created a moment ago on another instance) goes to the store, once, and a key the
//! store does not know is remembered as unknown for a second.

use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;

use http::HeaderMap;

use super::directory::{digest, Caller, Directory, KeyDigest};
use super::jwt::{JwtAuth, Provision};
use super::{presented_key, MasterKey};
use sluice_core::error::ApiError;
use sluice_core::error::KeyRefusal;

/// How long a digest the store does not know is refused without asking again.
const UNKNOWN_FOR_MS: u64 = 1_000;

/// What loading a key from the store produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loaded {
    /// The key (and its team and user) are now in the directory.
    Found,
    /// The store has no such key.
    Missing,
}

/// A boxed future, for the one dynamic call on the cold path.
pub type LoadFuture<'a> = Pin<Box<dyn Future<Output = Result<Loaded, LoadFailed>> + Send + 'a>>;

/// The store could not be read.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the key store could not be read")]
pub struct LoadFailed;

/// Fetches one key the directory lacks from the store into the directory (auth::sync
/// implements it over the store).
pub trait KeyLoader: Provision {
    /// Load the key with this digest, with its team and user.
    fn load(&self, digest: KeyDigest) -> LoadFuture<'_>;
}

/// The authenticator: the directory, and where to find keys it does not hold yet.
#[derive(Default)]
pub struct Gate {
    directory: Arc<Directory>,
    loader: Option<Arc<dyn KeyLoader>>,
    /// JWTs accepted in place of virtual keys (`enable_jwt_auth`).
    jwt: Option<Arc<JwtAuth>>,
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate")
            .field("directory", &self.directory)
            .field("loader", &self.loader.is_some())
            .finish()
    }
}

impl Gate {
    /// A gate over `directory`, asking `loader` for keys it lacks.
    pub fn new(directory: Arc<Directory>, loader: Option<Arc<dyn KeyLoader>>) -> Self {
        Self {
            directory,
            loader,
            jwt: None,
        }
    }

    /// This gate, also taking an identity provider's JWTs (`enable_jwt_auth`).
    #[must_use]
    pub fn with_jwt(mut self, jwt: Option<Arc<JwtAuth>>) -> Self {
        self.jwt = jwt;
        self
    }

    /// The directory (for admission and the sync task).
    pub fn directory(&self) -> &Arc<Directory> {
        &self.directory
    }

    /// Who is calling. Without a master key the gateway is open (as LiteLLM's is) and virtual
    /// keys are not checked.
    pub async fn authenticate(
        &self,
        master: Option<&MasterKey>,
        headers: &HeaderMap,
        (client, path): (Option<IpAddr>, &str),
        wall_ms: u64,
    ) -> Result<Caller, ApiError> {
        let caller = self.identify(master, headers, wall_ms).await?;
        if let Caller::Key(k) = &caller {
            self.directory.check_addresses(k, client)?;
            if k.jwt.as_ref().is_some_and(|j| !j.routes.allows(path)) {
                return Err(ApiError::NotPermitted(
                    "this route is not among the token's allowed routes \
                     (litellm_jwtauth.team_allowed_routes, scope_mappings)",
                ));
            }
        }
        Ok(caller)
    }

    /// The caller the presented key names, before its address is checked.
    async fn identify(
        &self,
        master: Option<&MasterKey>,
        headers: &HeaderMap,
        wall_ms: u64,
    ) -> Result<Caller, ApiError> {
        let Some(master) = master else {
            return Ok(Caller::Open);
        };
        let Some(key) = presented_key(headers) else {
            return Err(ApiError::Unauthorized(
                "no API key provided; pass it as 'Authorization: Bearer <key>'",
            ));
        };
        if let Some(j) = self
            .jwt
            .as_ref()
            .filter(|_| super::jwt::looks_like_jwt(key))
        {
            // Boxed: its key fetch would grow every request's future.
            let provision = self.loader.as_deref().map(|l| l as &dyn Provision);
            return Box::pin(j.caller(key, &self.directory, provision)).await;
        }
        let d = digest(key);
        if master.matches_digest(&d) {
            return Ok(Caller::Master);
        }
        if let Some(entry) = self.directory.key(&d) {
            return Ok(Caller::Key(entry));
        }
        let refused = ApiError::KeyRefused(KeyRefusal::Unknown);
        if self.directory.known_unknown(&d, wall_ms) {
            return Err(refused);
        }
        let Some(loader) = &self.loader else {
            return Err(refused);
        };
        match loader.load(d).await {
            Ok(Loaded::Found) => self.directory.key(&d).map(Caller::Key).ok_or(refused),
            Ok(Loaded::Missing) => {
                self.directory.mark_unknown(d, wall_ms + UNKNOWN_FOR_MS);
                Err(refused)
            }
            Err(LoadFailed) => Err(ApiError::StoreUnavailable),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::{ModelAccess, Stored};
    use http::HeaderValue;
    use sluice_core::Secret;
    use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

    fn bearer(key: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            http::header::AUTHORIZATION,
            HeaderValue::from_str(&format!("Bearer {key}")).unwrap(),
        );
        h
    }

    /// A store with one key, counting how often it is asked.
    struct OneKey {
        dir: Arc<Directory>,
        asked: AtomicU32,
    }

    impl Provision for OneKey {
        fn upsert<'a>(
            &'a self,
            _: sluice_core::limits::SubjectKind,
            _: &'a str,
        ) -> super::super::jwt::UpsertFuture<'a> {
            Box::pin(async { Err(super::super::jwt::ProvisionFailed) })
        }
    }

    impl KeyLoader for OneKey {
        fn load(&self, d: KeyDigest) -> LoadFuture<'_> {
            self.asked.fetch_add(1, Relaxed);
            Box::pin(async move {
                if d == digest("sk-remote") {
                    self.dir.put_key(
                        d,
                        None,
                        None,
                        false,
                        ModelAccess::All,
                        None,
                        None,
                        &Stored::default(),
                    );
                    Ok(Loaded::Found)
                } else {
                    Ok(Loaded::Missing)
                }
            })
        }
    }

    #[tokio::test]
    async fn master_cached_remote_and_unknown_keys() {
        let dir = Arc::new(Directory::default());
        let loader = Arc::new(OneKey {
            dir: dir.clone(),
            asked: AtomicU32::new(0),
        });
        let gate = Gate::new(dir.clone(), Some(loader.clone()));
        let master = MasterKey::new(&Secret::new("sk-master"));
        let m = Some(&master);
        assert!(matches!(
            gate.authenticate(m, &bearer("sk-master"), (None, "/v1/chat/completions"), 0)
                .await,
            Ok(Caller::Master)
        ));
        assert!(matches!(
            gate.authenticate(None, &HeaderMap::new(), (None, "/v1/chat/completions"), 0)
                .await,
            Ok(Caller::Open)
        ));
        // Created on another instance: loaded once, then served from memory.
        for _ in 0..3 {
            assert!(matches!(
                gate.authenticate(m, &bearer("sk-remote"), (None, "/v1/chat/completions"), 0)
                    .await,
                Ok(Caller::Key(_))
            ));
        }
        assert_eq!(loader.asked.load(Relaxed), 1);
        // Unknown: asked once per second at most.
        for _ in 0..3 {
            assert!(matches!(
                gate.authenticate(m, &bearer("sk-nope"), (None, "/v1/chat/completions"), 10)
                    .await,
                Err(ApiError::KeyRefused(KeyRefusal::Unknown))
            ));
        }
        assert_eq!(loader.asked.load(Relaxed), 2);
        assert!(gate
            .authenticate(m, &bearer("sk-nope"), (None, "/v1/chat/completions"), 1_010)
            .await
            .is_err());
        assert_eq!(loader.asked.load(Relaxed), 3);
        assert!(matches!(
            gate.authenticate(m, &HeaderMap::new(), (None, "/v1/chat/completions"), 0)
                .await,
            Err(ApiError::Unauthorized(_))
        ));
    }
}
