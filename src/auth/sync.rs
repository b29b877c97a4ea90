//! Keeps the directory in step with the store: filled whole at start, then a poll every half
//! second for rows changed since the last one (edits, blocks, restarted budget windows,
//! deletions), and single keys reloaded at once when the fleet says they changed or when a
//! request presents a key this instance has not seen. Budget windows that have ended are
//! restarted in the store by the same task (each instance may run it; a restart happens once).

use std::sync::Arc;
use std::time::Duration;

use time::OffsetDateTime;

use super::directory::{from_hex, Directory, KeyDigest, ModelAccess, Stored};
use super::gate::{KeyLoader, LoadFailed, LoadFuture, Loaded};
use crate::limits::{self, nanos, SubjectKind};
use crate::store::{self, Changes, KeyHash, KeyRow, Store, StoreError};

/// How often the store is asked what changed.
pub const POLL_EVERY: Duration = Duration::from_millis(500);

/// How far back each poll looks past the last change it saw: a transaction that committed
/// late with an earlier `updated_at` is still caught (applying a row twice is harmless).
const OVERLAP: time::Duration = time::Duration::seconds(2);

/// How often ended budget windows are restarted in the store.
const RESET_EVERY: Duration = Duration::from_secs(5);

/// The directory's link to the store.
#[derive(Debug, Clone)]
pub struct Sync {
    store: Store,
    directory: Arc<Directory>,
}

fn ms(t: OffsetDateTime) -> u64 {
    u64::try_from(t.unix_timestamp_nanos() / 1_000_000).unwrap_or(0)
}

fn stored(l: &store::Limits, spend: f64) -> Stored {
    Stored {
        limits: limits::Limits {
            rpm: l.rpm_limit,
            tpm: l.tpm_limit,
            max_parallel: l
                .max_parallel_requests
                .map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
            max_budget: l.max_budget.map(nanos),
        },
        spend: nanos(spend),
        window_end_ms: l.budget_reset_at.map(ms),
    }
}

impl Sync {
    /// A sync between `store` and `directory`.
    pub fn new(store: Store, directory: Arc<Directory>) -> Self {
        Self { store, directory }
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    fn put_key(&self, k: &KeyRow) {
        let Some(d) = from_hex(k.token.as_str()) else {
            return;
        };
        self.directory.put_key(
            d,
            k.key_alias.as_deref(),
            k.expires.map(ms),
            k.blocked,
            ModelAccess::from_list(&k.limits.models),
            k.team_id.as_deref(),
            k.user_id.as_deref(),
            &stored(&k.limits, k.accounting.spend),
        );
    }

    /// Put rows into the directory, and take deleted ones out.
    pub fn apply(&self, c: &Changes) {
        let dir = &self.directory;
        for t in &c.teams {
            dir.put_holder(
                SubjectKind::Team,
                &t.team_id,
                t.blocked,
                ModelAccess::from_list(&t.limits.models),
                &stored(&t.limits, t.accounting.spend),
            );
        }
        for u in &c.users {
            dir.put_holder(
                SubjectKind::User,
                &u.user_id,
                false,
                ModelAccess::from_list(&u.limits.models),
                &stored(&u.limits, u.accounting.spend),
            );
        }
        for e in &c.end_users {
            dir.put_holder(
                SubjectKind::EndUser,
                &e.user_id,
                e.blocked,
                ModelAccess::from_list(&e.limits.models),
                &stored(&e.limits, e.accounting.spend),
            );
        }
        for k in &c.keys {
            self.put_key(k);
        }
        for (kind, id) in &c.deleted {
            match kind.as_str() {
                "keys" => {
                    if let Some(d) = from_hex(id) {
                        dir.remove_key(&d);
                    }
                }
                "teams" => dir.remove_holder(SubjectKind::Team, id),
                "users" => dir.remove_holder(SubjectKind::User, id),
                "end_users" => dir.remove_holder(SubjectKind::EndUser, id),
                _ => {}
            }
        }
    }

    /// Fill the directory with everything the store holds.
    pub async fn fill(&self) -> Result<(), StoreError> {
        let all = self.store.everything().await?;
        self.apply(&all);
        Ok(())
    }

    /// Reload one key (and its team and user) from the store; a key the store no longer has
    /// leaves the directory.
    pub async fn reload_key(&self, hash: &str) -> Result<Loaded, StoreError> {
        let Some(h) = KeyHash::from_hex(hash) else {
            return Ok(Loaded::Missing);
        };
        let Some(k) = self.store.key(&h).await? else {
            if let Some(d) = from_hex(hash) {
                self.directory.remove_key(&d);
            }
            return Ok(Loaded::Missing);
        };
        let mut c = Changes::default();
        if let Some(t) = &k.team_id {
            c.teams.extend(self.store.team(t).await?);
        }
        if let Some(u) = &k.user_id {
            c.users.extend(self.store.user(u).await?);
        }
        c.keys.push(k);
        self.apply(&c);
        Ok(Loaded::Found)
    }

    /// Poll for changes and restart ended budget windows, for as long as the process lives.
    pub fn spawn(self: Arc<Self>) {
        tokio::spawn(async move {
            let mut since = OffsetDateTime::now_utc() - OVERLAP;
            let mut last_reset = tokio::time::Instant::now();
            let mut tick = tokio::time::interval(POLL_EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                if last_reset.elapsed() >= RESET_EVERY || self.any_renewing() {
                    last_reset = tokio::time::Instant::now();
                    if let Err(e) = self.store.reset_budgets(OffsetDateTime::now_utc()).await {
                        tracing::debug!(error = %e, "budget reset failed; will retry");
                    }
                }
                match self.store.changes_since(since).await {
                    Ok(c) => {
                        self.apply(&c);
                        if let Some(latest) = c.latest {
                            since = since.max(latest - OVERLAP);
                        }
                    }
                    Err(e) => tracing::debug!(error = %e, "key change poll failed; will retry"),
                }
            }
        });
    }

    /// Whether some holder's budget window ended in memory and waits for the store's restart.
    fn any_renewing(&self) -> bool {
        self.directory.any_subject(|s| s.counters.renewing())
    }
}

impl KeyLoader for Sync {
    fn load(&self, digest: KeyDigest) -> LoadFuture<'_> {
        Box::pin(async move {
            self.reload_key(&super::hex(&digest))
                .await
                .map_err(|_| LoadFailed)
        })
    }
}
