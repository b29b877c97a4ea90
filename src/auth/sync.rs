//! Keeps the directory in step with the store: filled whole at start, then a poll every half
//! second for rows changed since the last one (edits, blocks, budget windows the spend writer
//! restarted, deleted and regenerated keys), and single keys reloaded at once when the fleet
//! says they changed or when a request presents a key this instance has not seen.

use std::sync::Arc;
use std::time::Duration;

use time::OffsetDateTime;

use super::access::ModelAccess;
use super::addresses;
use super::aliases::Aliases;
use super::directory::{AlertFacts, Directory, KeyDigest, Stored};
use super::gate::{KeyLoader, LoadFailed, LoadFuture, Loaded};
use super::jwt::{Provision, ProvisionFailed, UpsertFuture};
use super::per_model;
use sluice_core::cache_control::CacheControl;
use sluice_core::limits::{self, nanos, SubjectKind};
use sluice_core::trace_context::{hex, unhex};
use sluice_store::{self as store, Changes, KeyHash, KeyRow, SpentBy, Store, StoreError};

/// How often the store is asked what changed.
pub const POLL_EVERY: Duration = Duration::from_millis(500);

/// How far back each poll looks past the last change it saw: a transaction that committed
/// late with an earlier `updated_at` is still caught (applying a row twice is harmless).
const OVERLAP: time::Duration = time::Duration::seconds(2);

/// The directory's link to the store.
#[derive(Debug, Clone)]
pub struct Sync {
    store: Store,
    directory: Arc<Directory>,
    /// Held from a read of the store to the end of applying it: a poll that read a row before
    /// an admin call changed it cannot apply that stale row after the admin call's refresh.
    applying: Arc<tokio::sync::Mutex<()>>,
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
        guardrails: l
            .metadata
            .get("guardrails")
            .and_then(serde_json::Value::as_array)
            .map(|names| {
                names
                    .iter()
                    .filter_map(|n| n.as_str().map(Arc::from))
                    .collect()
            })
            .unwrap_or_default(),
        // The admin API refuses a malformed one; a row written around it counts as none.
        cache: l
            .metadata
            .get("cache")
            .and_then(|c| CacheControl::from_metadata(c).ok())
            .map(Arc::new),
        // A key's or user's `aliases`, a team's `model_aliases`.
        aliases: Aliases::from_metadata(&l.metadata, "aliases")
            .or_else(|| Aliases::from_metadata(&l.metadata, "model_aliases")),
        proxy_admin: false,
        own_keys: false,
        // An end user's region (LiteLLM's `allowed_model_region`, kept in its metadata).
        region: l
            .metadata
            .get("allowed_model_region")
            .and_then(serde_json::Value::as_str)
            .map(Arc::from),
        organization: None,
        per_model: Arc::default(),
        allowed_ips: None,
        tags: Arc::default(),
        alerts: Arc::new(alert_facts(&l.metadata)),
    }
}

/// Give a holder's alert facts the name people know it by.
fn named(s: &mut Stored, alias: Option<&str>) {
    if let Some(a) = alias {
        Arc::make_mut(&mut s.alerts).alias = Some(a.to_owned());
    }
}

/// A holder's soft budget and alert e-mails, from its metadata (LiteLLM keeps
/// `soft_budget_alerting_emails` there; the admin API keeps `soft_budget` there).
fn alert_facts(m: &serde_json::Map<String, serde_json::Value>) -> AlertFacts {
    AlertFacts {
        soft_budget: m
            .get("soft_budget")
            .and_then(serde_json::Value::as_f64)
            .map(nanos),
        emails: m
            .get("soft_budget_alerting_emails")
            .and_then(serde_json::Value::as_array)
            .map(|l| {
                l.iter()
                    .filter_map(|e| e.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default(),
        alias: None,
    }
}

/// [`stored`], for a key or team: under an organization, with limits for single models and
/// the addresses it may be used from. A malformed per-model field (the admin API refuses one;
/// a row written around it) counts as none.
fn stored_under(l: &store::Limits, spend: f64, organization: Option<&str>) -> Stored {
    Stored {
        organization: organization.map(Arc::from),
        per_model: per_model::read(&l.metadata)
            .map(Arc::from)
            .unwrap_or_default(),
        // A malformed list (written around the admin API) allows no one rather than everyone.
        allowed_ips: addresses::from_metadata(&l.metadata).unwrap_or_else(|_| Some(Arc::default())),
        tags: l
            .metadata
            .get("tags")
            .and_then(serde_json::Value::as_array)
            .map(|t| t.iter().filter_map(|t| t.as_str().map(Arc::from)).collect())
            .unwrap_or_default(),
        ..stored(l, spend)
    }
}

impl Sync {
    /// A sync between `store` and `directory`.
    pub fn new(store: Store, directory: Arc<Directory>) -> Self {
        Self {
            store,
            directory,
            applying: Arc::default(),
        }
    }

    fn put_key(&self, k: &KeyRow) {
        let Some(d) = unhex::<32>(k.token.as_str().as_bytes()) else {
            return;
        };
        let mut s = stored_under(&k.limits, k.accounting.spend, k.organization_id.as_deref());
        named(&mut s, k.key_alias.as_deref());
        self.directory.put_key(
            d,
            k.key_alias.as_deref(),
            k.expires.map(ms),
            k.blocked,
            ModelAccess::from_list(&k.limits.models),
            k.team_id.as_deref(),
            k.user_id.as_deref(),
            &s,
        );
        let mcp = sluice_mcp::Access::from_metadata(&k.limits.metadata);
        self.directory.set_mcp_access(false, k.token.as_str(), mcp);
    }

    /// Put rows into the directory, and take deleted ones out.
    pub fn apply(&self, c: &Changes) {
        // Deletions first: a holder deleted and made again since the last poll is in both, and
        // starts again from zero.
        for (kind, id) in &c.deleted_holders {
            self.directory.remove_holder(*kind, id);
        }
        let holder = |kind, id: &str, blocked, limits: &store::Limits, spend| {
            let access = ModelAccess::from_list(&limits.models);
            self.directory
                .put_holder(kind, id, blocked, access, &stored(limits, spend));
        };
        for o in &c.organizations {
            holder(
                SubjectKind::Organization,
                &o.organization_id,
                false,
                &o.limits,
                o.accounting.spend,
            );
        }
        for t in &c.teams {
            let mcp = sluice_mcp::Access::from_metadata(&t.limits.metadata);
            self.directory.set_mcp_access(true, &t.team_id, mcp);
            let access = ModelAccess::from_list(&t.limits.models);
            let mut s = stored_under(&t.limits, t.accounting.spend, t.organization_id.as_deref());
            named(&mut s, t.team_alias.as_deref());
            self.directory
                .put_holder(SubjectKind::Team, &t.team_id, t.blocked, access, &s);
        }
        for u in &c.users {
            let mut s = stored(&u.limits, u.accounting.spend);
            s.proxy_admin = u.user_role.as_deref() == Some("proxy_admin");
            s.own_keys = matches!(u.user_role.as_deref(), None | Some("internal_user"));
            if let Some(email) = &u.user_email {
                let facts = Arc::make_mut(&mut s.alerts);
                facts.emails.push(email.clone());
                facts.alias = Some(email.clone());
            }
            let access = ModelAccess::from_list(&u.limits.models);
            self.directory
                .put_holder(SubjectKind::User, &u.user_id, false, access, &s);
        }
        for e in &c.end_users {
            holder(
                SubjectKind::EndUser,
                &e.user_id,
                e.blocked,
                &e.limits,
                e.accounting.spend,
            );
        }
        // A tag's `models` route requests (tag routing); they grant or refuse nothing.
        for t in &c.tags {
            self.directory.put_holder(
                SubjectKind::Tag,
                &t.tag_name,
                false,
                ModelAccess::All,
                &stored(&t.limits, t.accounting.spend),
            );
        }
        for k in &c.keys {
            self.put_key(k);
        }
        for h in &c.deleted_keys {
            if let Some(d) = unhex::<32>(h.as_str().as_bytes()) {
                self.directory.remove_key(&d);
            }
        }
    }

    /// Fill the directory with everything the store holds; returns where the poll starts.
    pub async fn fill(&self) -> Result<OffsetDateTime, StoreError> {
        let all = self.store.changed_since(OffsetDateTime::UNIX_EPOCH).await?;
        self.apply(&all);
        self.read_model_spend().await;
        Ok(all.watermark)
    }

    /// Reload one key (and its team, user and organization) from the store; a key the store no longer has
    /// leaves the directory.
    pub async fn reload_key(&self, hash: &str) -> Result<Loaded, StoreError> {
        let Some(h) = KeyHash::from_hex(hash) else {
            return Ok(Loaded::Missing);
        };
        let _one_at_a_time = self.applying.lock().await;
        let Some(k) = self.store.key(&h).await? else {
            if let Some(d) = unhex::<32>(hash.as_bytes()) {
                self.directory.remove_key(&d);
            }
            return Ok(Loaded::Missing);
        };
        let mut c = Changes::none(OffsetDateTime::UNIX_EPOCH);
        if let Some(t) = &k.team_id {
            c.teams.extend(self.store.team(t).await?);
        }
        let org = k
            .organization_id
            .as_deref()
            .or_else(|| c.teams.first().and_then(|t| t.organization_id.as_deref()));
        if let Some(o) = org {
            c.organizations.extend(self.store.organization(o).await?);
        }
        if let Some(u) = &k.user_id {
            c.users.extend(self.store.user(u).await?);
        }
        c.keys.push(k);
        self.apply(&c);
        self.read_model_spend().await;
        Ok(Loaded::Found)
    }

    /// Apply what changed since `since` now (after an admin call, without waiting for the
    /// poll); returns the digests of the keys that changed or went, for the fleet to announce.
    pub async fn refresh(&self, since: OffsetDateTime) -> Result<Vec<String>, StoreError> {
        let _one_at_a_time = self.applying.lock().await;
        let c = self.store.changed_since(since - OVERLAP).await?;
        self.apply(&c);
        self.read_model_spend().await;
        Ok(c.keys
            .iter()
            .map(|k| k.token.as_str().to_owned())
            .chain(c.deleted_keys.iter().map(|h| h.as_str().to_owned()))
            .collect())
    }

    /// Read from the spend logs what each per-model budget built since the last call has
    /// already spent in its window. The live count may have moved meanwhile (requests charged
    /// since the budget was built): the larger of the two stands, so nothing counts twice.
    /// A failed read is retried at the next poll.
    async fn read_model_spend(&self) {
        let budgets = self.directory.model_budgets();
        for u in budgets.take_unfilled() {
            let Some(counters) = u.counters.upgrade() else {
                continue;
            };
            let by = match u.kind {
                SubjectKind::Team => SpentBy::Team(&u.holder),
                _ => SpentBy::Key(&u.holder),
            };
            match self.store.model_spend(by, &u.model, u.since).await {
                Ok(spent) => {
                    let spent = nanos(spent);
                    if spent > counters.spent(limits::wall_ms()) {
                        counters.set_spent(spent);
                    }
                }
                Err(e) => {
                    tracing::debug!(error = %e, "reading a per-model budget's spend failed; will retry");
                    budgets.requeue(u);
                }
            }
        }
    }

    /// Poll for changes from `since` for as long as the process lives.
    pub fn spawn(self: Arc<Self>, since: OffsetDateTime) {
        tokio::spawn(async move {
            let mut since = since - OVERLAP;
            let mut tick = tokio::time::interval(POLL_EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let _one_at_a_time = self.applying.lock().await;
                match self.store.changed_since(since).await {
                    Ok(c) => {
                        self.apply(&c);
                        since = since.max(c.watermark - OVERLAP);
                    }
                    Err(e) => tracing::debug!(error = %e, "key change poll failed; will retry"),
                }
                self.read_model_spend().await;
                self.directory
                    .model_budgets()
                    .renew(OffsetDateTime::now_utc());
            }
        });
    }
}

impl KeyLoader for Sync {
    fn load(&self, digest: KeyDigest) -> LoadFuture<'_> {
        Box::pin(async move { self.reload_key(&hex(&digest)).await.map_err(|_| LoadFailed) })
    }
}

impl Provision for Sync {
    fn upsert<'a>(&'a self, kind: SubjectKind, id: &'a str) -> UpsertFuture<'a> {
        Box::pin(async move {
            let now = OffsetDateTime::now_utc();
            let mut changes = Changes::none(now);
            let made = match kind {
                SubjectKind::Team => {
                    let row = store::TeamRow::new(id.to_owned(), now);
                    let made = self.store.create_team(&row).await;
                    changes.teams.push(row);
                    made
                }
                SubjectKind::User => {
                    let row = store::UserRow::new(id.to_owned(), now);
                    let made = self.store.create_user(&row).await;
                    changes.users.push(row);
                    made
                }
                _ => return Err(ProvisionFailed),
            };
            match made {
                // Made by another instance or request a moment ago: the poll brings its row.
                Ok(()) | Err(store::StoreError::Conflict(_)) => {}
                Err(_) => return Err(ProvisionFailed),
            }
            if self.directory.holder(kind, id).is_none() {
                let _applying = self.applying.lock().await;
                self.apply(&changes);
            }
            Ok(())
        })
    }
}
