//! The in-memory directory of virtual keys, teams, users, end users, organizations and tags. Every request is
//! authenticated and admitted from here without I/O: a SHA-256 of the presented key, one
//! lock-free map read per holder. The sync task (`auth::sync`) fills it from the store and keeps
//! it current; requests only read it. Counters (rate windows, spend) belong to the holder, not
//! to one version of its record, so an update from the store never resets them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use ring::digest::{digest as sha, SHA256};

use sluice_core::cache_control::CacheControl;
use sluice_core::error::{ApiError, KeyRefusal};
use sluice_core::limits::{Counters, Limits, Nanos, Scope, Subject, SubjectKind, Subjects};
use sluice_core::record::KeyInfo;
use sluice_core::trace_context::hex;

use super::access::{ModelAccess, Wanted};
use super::addresses;
use super::aliases::Aliases;
use super::per_model::{Budgets, ModelLimits, PerModel};
use sluice_net::networks::Networks;
use sluice_net::server::PeerAddresses;
use std::net::IpAddr;

/// SHA-256 of a key as presented: what the directory (and the store, in hex) know a key by.
pub type KeyDigest = [u8; 32];

/// Digest a presented key.
pub fn digest(key: &str) -> KeyDigest {
    let mut d = [0u8; 32];
    d.copy_from_slice(sha(&SHA256, key.as_bytes()).as_ref());
    d
}

/// A team, a user, an end user or an organization: who may be refused, what they may call,
/// and their limits.
#[derive(Debug)]
pub struct Holder {
    /// Its id.
    pub id: Arc<str>,
    /// Refused outright (`blocked`).
    pub blocked: bool,
    /// Model groups it may call.
    pub models: ModelAccess,
    /// Its limits and live counters.
    pub subject: Subject,
    /// Guardrails that always apply to its keys' requests (a team's `metadata.guardrails`).
    pub guardrails: Arc<[Arc<str>]>,
    /// Cache controls its keys' requests are held to (a team's `metadata.cache`).
    pub cache: Option<Arc<CacheControl>>,
    /// Its names for model groups (a team's `model_aliases`).
    pub aliases: Option<Arc<Aliases>>,
    /// A user whose `user_role` is `proxy_admin` (LiteLLM's rule: their keys are admins).
    pub proxy_admin: bool,
    /// A user whose role lets their keys make, change and delete the user's own keys
    /// (`internal_user`, or no role: LiteLLM's default).
    pub own_keys: bool,
    /// An end user's `allowed_model_region`.
    pub region: Option<Arc<str>>,
    /// The organization a team is under: its keys answer to it too.
    pub organization: Option<Arc<str>>,
    /// A team's limits for single models (`model_rpm_limit`, ...), shared by its keys.
    pub per_model: Option<Arc<PerModel>>,
    /// The addresses a team's keys may be used from (`metadata.allowed_ips`).
    pub allowed_ips: Option<Arc<Networks>>,
    /// A team's tags (`metadata.tags`): every request of its keys carries them.
    pub tags: Arc<[Arc<str>]>,
    /// Who its budget alerts are for, and when (`soft_budget`).
    pub alerts: Arc<AlertFacts>,
}

/// One virtual key as the request path needs it.
#[derive(Debug)]
pub struct KeyEntry {
    /// Its hash, alias, team and user: what a request's record names (shared with it).
    pub info: Arc<KeyInfo>,
    /// Wall-clock ms after which the key is refused.
    pub expires_ms: Option<u64>,
    /// Refused outright (`/key/block`).
    pub blocked: bool,
    /// Model groups it may call.
    pub models: ModelAccess,
    /// Its limits and live counters.
    pub subject: Subject,
    /// Guardrails that always apply to its requests (`metadata.guardrails`).
    pub guardrails: Arc<[Arc<str>]>,
    /// Cache controls its requests are held to (`metadata.cache`, LiteLLM's key-level
    /// cache settings).
    pub cache: Option<Arc<CacheControl>>,
    /// Its names for model groups (`aliases`).
    pub aliases: Option<Arc<Aliases>>,
    /// The organization it is under by its own `organization_id` (else its team's counts).
    pub organization: Option<Arc<str>>,
    /// Its limits for single models (`model_rpm_limit`, `model_tpm_limit`,
    /// `model_max_budget`).
    pub per_model: Option<Arc<PerModel>>,
    /// The addresses it may be used from (`metadata.allowed_ips`).
    pub allowed_ips: Option<Arc<Networks>>,
    /// Its tags (`metadata.tags`): every request it makes carries them (tag routing, spend by
    /// tag).
    pub tags: Arc<[Arc<str>]>,
    /// Who its budget alerts are for, and when (`soft_budget`).
    pub alerts: Arc<AlertFacts>,
    /// What a JWT's claims grant (routes, end user); `None` for a virtual key.
    pub jwt: Option<Arc<super::route_groups::JwtGrants>>,
}

/// What a holder's record says, as the sync task hands it over: the directory keeps the live
/// counters of the holder it replaces.
#[derive(Debug, Clone, Default)]
pub struct Stored {
    /// Limits.
    pub limits: Limits,
    /// Spend recorded in the store for the current window.
    pub spend: Nanos,
    /// End of the current budget window (wall-clock ms), if it has one.
    pub window_end_ms: Option<u64>,
    /// Guardrails that always apply to its requests (`metadata.guardrails`, LiteLLM's place).
    pub guardrails: Arc<[Arc<str>]>,
    /// Cache controls its requests are held to (`metadata.cache`).
    pub cache: Option<Arc<CacheControl>>,
    /// Its names for model groups (`metadata.aliases`, or a team's `metadata.model_aliases`).
    pub aliases: Option<Arc<Aliases>>,
    /// A user whose `user_role` is `proxy_admin`: their keys are admins.
    pub proxy_admin: bool,
    /// A user whose keys may manage the user's own keys (`internal_user` or no role).
    pub own_keys: bool,
    /// An end user's `allowed_model_region`.
    pub region: Option<Arc<str>>,
    /// The organization a key or team is under (`organization_id`).
    pub organization: Option<Arc<str>>,
    /// A key's or team's limits for single models.
    pub per_model: Arc<[ModelLimits]>,
    /// A key's or team's `allowed_ips`.
    pub allowed_ips: Option<Arc<Networks>>,
    /// A key's or team's `metadata.tags`.
    pub tags: Arc<[Arc<str>]>,
    /// What its budget alerts need.
    pub alerts: Arc<AlertFacts>,
}

/// What a holder's budget alerts need beyond its limits (`crate::alerts`): shared with its
/// record, read only by the alert task.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AlertFacts {
    /// `soft_budget`, in nano-dollars: an alert when spend reaches it, never a refusal.
    pub soft_budget: Option<Nanos>,
    /// Where e-mail alerts go: `metadata.soft_budget_alerting_emails` (LiteLLM's), and a
    /// user's own `user_email`.
    pub emails: Vec<String>,
    /// A name people know it by: a key's alias, a team's alias, a user's e-mail.
    pub alias: Option<String>,
}

/// A key or holder with a budget, as the budget alerts see it.
#[derive(Debug, Clone, Copy)]
pub struct Budgeted<'a> {
    /// Its kind, id, limits and live counters.
    pub subject: &'a Subject,
    /// Its soft budget, e-mails and name.
    pub facts: &'a AlertFacts,
    /// A key's team, or a team's own id.
    pub team: Option<&'a str>,
    /// A key's user, or a user's own id.
    pub user: Option<&'a str>,
}

/// The holders above a key that this instance knows: its team, its user and the organization
/// it (or else its team) is under. Found with one lock-free read each, no allocation.
#[derive(Debug, Default)]
pub struct Above {
    /// The key's team.
    pub team: Option<Arc<Holder>>,
    /// The key's user.
    pub user: Option<Arc<Holder>>,
    /// The key's organization, or its team's.
    pub organization: Option<Arc<Holder>>,
}

/// A group a caller reached by one of its own names, and whose name it was. A key's own
/// alias grants nothing: the key, its team, user and organization must allow the group
/// itself (a user who makes their own keys could otherwise name an allowed model as an alias
/// of a forbidden one). A team's `model_aliases` are the admin's, so a team list naming the
/// alias allows it.
#[derive(Debug, Clone)]
pub enum Alias {
    /// From the key's `aliases`.
    Key(Arc<str>),
    /// From its team's `model_aliases`.
    Team(Arc<str>),
}

impl Alias {
    /// The group's name.
    pub fn group(&self) -> &str {
        match self {
            Self::Key(g) | Self::Team(g) => g,
        }
    }
}

/// Who is calling.
#[derive(Debug, Clone)]
pub enum Caller {
    /// No master key is configured: the gateway is open and nothing is limited per caller.
    Open,
    /// The master key: every model, no per-caller limits.
    Master,
    /// A virtual key.
    Key(Arc<KeyEntry>),
}

impl Caller {
    /// The guardrails its key and the key's team carry (none for the master key or an open
    /// gateway). Allocates only when there are some.
    pub fn guardrails(&self, dir: &Directory) -> Vec<Arc<str>> {
        let Self::Key(k) = self else {
            return Vec::new();
        };
        let team = k
            .info
            .team_id
            .as_deref()
            .and_then(|t| dir.holder(SubjectKind::Team, t));
        k.guardrails
            .iter()
            .chain(team.iter().flat_map(|t| t.guardrails.iter()))
            .cloned()
            .collect()
    }

    /// The cache controls a request is held to, and the cache namespace it may reach. A
    /// virtual key's requests are scoped to its team (or, without one, to the key itself):
    /// whatever namespace the request names, or the config's (`default_namespace`), lives
    /// inside that scope, so that no caller is served another team's stored answers. An
    /// admin shares a namespace on purpose by setting it in the key's or team's
    /// `metadata.cache`: then it is used as set. `None` for the master key and an open gateway
    /// (the request's own controls apply, unscoped).
    pub fn cache_policy(
        &self,
        dir: &Directory,
        asked: Option<&CacheControl>,
        default_namespace: Option<&str>,
    ) -> Option<CacheControl> {
        let Self::Key(k) = self else {
            return None;
        };
        let team = k
            .info
            .team_id
            .as_deref()
            .and_then(|t| dir.holder(SubjectKind::Team, t));
        let team = team.as_ref().and_then(|t| t.cache.as_deref());
        let mut c = asked.cloned().unwrap_or_default();
        let mut shared = false;
        for policy in team.into_iter().chain(k.cache.as_deref()) {
            c.apply(policy);
            shared |= policy.namespace.is_some();
        }
        if !shared {
            let named = c.namespace.as_deref().or(default_namespace);
            let scope = match (&k.info.team_id, named) {
                (Some(t), Some(n)) => format!("team:{t}/{n}"),
                (Some(t), None) => format!("team:{t}"),
                (None, Some(n)) => format!("key:{}/{n}", k.info.hash),
                (None, None) => format!("key:{}", k.info.hash),
            };
            c.namespace = Some(scope);
        }
        Some(c)
    }

    /// The model group `model` stands for in the caller's own aliases: the key's `aliases`
    /// first, then its team's `model_aliases`. `None` when it is no alias of theirs (and
    /// always for the master key and an open gateway).
    pub fn alias(&self, dir: &Directory, model: &str) -> Option<Alias> {
        let Self::Key(k) = self else {
            return None;
        };
        if let Some(g) = k.aliases.as_ref().and_then(|a| a.get(model)) {
            return Some(Alias::Key(g.clone()));
        }
        if !dir.team_aliases.load(Ordering::Relaxed) {
            return None;
        }
        let team = dir.holder(SubjectKind::Team, k.info.team_id.as_deref()?)?;
        team.aliases.as_ref()?.get(model).cloned().map(Alias::Team)
    }

    /// The virtual key, when the caller has one: what records, spend headers and budgets
    /// name.
    pub fn into_key(self) -> Option<Arc<KeyEntry>> {
        match self {
            Self::Key(k) => Some(k),
            Self::Open | Self::Master => None,
        }
    }
}

/// Keys, teams, users, end users and organizations, each in a lock-free map.
#[derive(Default)]
pub struct Directory {
    keys: papaya::HashMap<KeyDigest, Arc<KeyEntry>>,
    teams: papaya::HashMap<Arc<str>, Arc<Holder>>,
    users: papaya::HashMap<Arc<str>, Arc<Holder>>,
    end_users: papaya::HashMap<Arc<str>, Arc<Holder>>,
    /// Whether any team has ever had `model_aliases`: until one does, a request's alias
    /// lookup costs no team lookup.
    team_aliases: AtomicBool,
    organizations: papaya::HashMap<Arc<str>, Arc<Holder>>,
    /// Tags with a record (`/tag/new`): their budgets and limits hold every request that
    /// carries them.
    tags: papaya::HashMap<Arc<str>, Arc<Holder>>,
    /// Whether any tag has ever had a limit: until one does, a request's tags cost no lookup.
    tag_limits: AtomicBool,
    /// Digests recently looked up in the store and not found, with when to ask again: a
    /// client retrying a bad key does not become a query per request.
    unknown: papaya::HashMap<KeyDigest, u64>,
    /// MCP permissions of keys (by hash) and teams (by id) that have any (`crate::mcp`);
    /// kept apart from the entries so the request path's records stay as they were.
    mcp_keys: papaya::HashMap<Arc<str>, Arc<sluice_mcp::Access>>,
    mcp_teams: papaya::HashMap<Arc<str>, Arc<sluice_mcp::Access>>,
    /// Per-model budgets: windows to renew, spend to read back.
    model_budgets: Budgets,
    /// Whether any team has ever had `allowed_ips`: until one does, authenticating a key costs
    /// no team lookup for it.
    team_addresses: AtomicBool,
    /// Whether any team has ever had `tags`: until one does, a request costs no team lookup
    /// for them.
    team_tags: AtomicBool,
    /// The accept loop's switch for recording peers, turned on by the first key or team with
    /// `allowed_ips` (`AppState` hands the same switch to the accept loop).
    peer_addresses: PeerAddresses,
}

impl std::fmt::Debug for Directory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Directory")
            .field("keys", &self.keys.len())
            .field("teams", &self.teams.len())
            .field("users", &self.users.len())
            .field("end_users", &self.end_users.len())
            .field("organizations", &self.organizations.len())
            .field("tags", &self.tags.len())
            .finish()
    }
}

/// Most digests remembered as unknown; past it the memory is cleared (a flood of random keys
/// cannot grow it without bound).
const MAX_UNKNOWN: usize = 10_000;

/// Counters carried over from the holder being replaced, with the stored spend reconciled:
/// the live spend includes requests the store has not seen yet, so it only moves up to the
/// store's (other instances' spend) unless the store has started a new window.
fn carry(old: Option<&Subject>, id: &Arc<str>, stored: &Stored) -> Arc<Counters> {
    match old {
        Some(o) => {
            let c = &o.counters;
            if c.renewing() || c.window_end() != stored.window_end_ms {
                c.set_spent(stored.spend);
                c.set_window_end(stored.window_end_ms);
            } else if stored.spend > c.spent(0) {
                c.set_spent(stored.spend);
            }
            o.counters.clone()
        }
        None => Arc::new(Counters::with_spend(
            id.clone(),
            stored.spend,
            stored.window_end_ms,
        )),
    }
}

impl Directory {
    /// The key with this digest, if the directory has it.
    pub fn key(&self, d: &KeyDigest) -> Option<Arc<KeyEntry>> {
        self.keys.pin().get(d).cloned()
    }

    /// Whether a digest was looked up recently and not found.
    pub fn known_unknown(&self, d: &KeyDigest, now_ms: u64) -> bool {
        self.unknown
            .pin()
            .get(d)
            .is_some_and(|until| *until > now_ms)
    }

    /// Remember that the store has no such key, until `until_ms`.
    pub fn mark_unknown(&self, d: KeyDigest, until_ms: u64) {
        let m = self.unknown.pin();
        if m.len() >= MAX_UNKNOWN {
            m.clear();
        }
        m.insert(d, until_ms);
    }

    /// Add or replace a key, keeping its live counters.
    #[allow(clippy::too_many_arguments)]
    pub fn put_key(
        &self,
        d: KeyDigest,
        alias: Option<&str>,
        expires_ms: Option<u64>,
        blocked: bool,
        models: ModelAccess,
        team_id: Option<&str>,
        user_id: Option<&str>,
        stored: &Stored,
    ) -> Arc<KeyEntry> {
        let keys = self.keys.pin();
        let old = keys.get(&d);
        let hash: Arc<str> = old.map_or_else(|| hex(&d).into(), |o| o.info.hash.clone());
        let per_model = self.model_budgets.build(
            SubjectKind::Key,
            &hash,
            &stored.per_model,
            old.and_then(|o| o.per_model.as_deref()),
            time::OffsetDateTime::now_utc(),
        );
        let entry = Arc::new(KeyEntry {
            info: Arc::new(KeyInfo {
                hash: hash.clone(),
                alias: alias.map(Into::into),
                team_id: team_id.map(Into::into),
                user_id: user_id.map(Into::into),
            }),
            expires_ms,
            blocked,
            models,
            subject: Subject {
                kind: SubjectKind::Key,
                scope: Scope::All,
                limits: Arc::new(stored.limits),
                counters: carry(old.map(|o| &o.subject), &hash, stored),
            },
            guardrails: stored.guardrails.clone(),
            cache: stored.cache.clone(),
            aliases: stored.aliases.clone(),
            organization: stored.organization.clone(),
            per_model,
            allowed_ips: stored.allowed_ips.clone(),
            tags: stored.tags.clone(),
            alerts: stored.alerts.clone(),
            jwt: None,
        });
        if entry.allowed_ips.is_some() {
            self.peer_addresses.turn_on();
        }
        keys.insert(d, entry.clone());
        self.unknown.pin().remove(&d);
        entry
    }

    /// Forget a key (deleted, or regenerated under a new digest).
    pub fn remove_key(&self, d: &KeyDigest) {
        self.keys.pin().remove(d);
        self.mcp_keys.pin().remove(hex(d).as_str());
    }

    /// Set the MCP permissions of a key (`Team: false`, by hash) or a team (by id); open
    /// permissions are not stored.
    pub fn set_mcp_access(&self, team: bool, id: &str, access: sluice_mcp::Access) {
        let map = if team {
            &self.mcp_teams
        } else {
            &self.mcp_keys
        };
        if access.is_open() {
            map.pin().remove(id);
        } else {
            map.pin().insert(id.into(), Arc::new(access));
        }
    }

    /// The MCP permissions of a key (by hash) or a team, when it has any.
    pub fn mcp_access(&self, team: bool, id: &str) -> Option<Arc<sluice_mcp::Access>> {
        let map = if team {
            &self.mcp_teams
        } else {
            &self.mcp_keys
        };
        map.pin().get(id).cloned()
    }

    fn map(&self, kind: SubjectKind) -> &papaya::HashMap<Arc<str>, Arc<Holder>> {
        match kind {
            SubjectKind::Team => &self.teams,
            SubjectKind::User => &self.users,
            SubjectKind::Organization => &self.organizations,
            SubjectKind::Tag => &self.tags,
            SubjectKind::EndUser | SubjectKind::Key => &self.end_users,
        }
    }

    /// Add or replace a team, user, end user, organization or tag, keeping its live counters.
    pub fn put_holder(
        &self,
        kind: SubjectKind,
        id: &str,
        blocked: bool,
        models: ModelAccess,
        stored: &Stored,
    ) {
        let map = self.map(kind).pin();
        let old = map.get(id);
        let id: Arc<str> = old.map_or_else(|| id.into(), |o| o.id.clone());
        let counters = carry(old.map(|o| &o.subject), &id, stored);
        let per_model = self.model_budgets.build(
            kind,
            &id,
            &stored.per_model,
            old.and_then(|o| o.per_model.as_deref()),
            time::OffsetDateTime::now_utc(),
        );
        map.insert(
            id.clone(),
            Arc::new(Holder {
                id: id.clone(),
                blocked,
                models,
                subject: Subject {
                    kind,
                    scope: Scope::All,
                    limits: Arc::new(stored.limits),
                    counters,
                },
                guardrails: stored.guardrails.clone(),
                cache: stored.cache.clone(),
                aliases: stored.aliases.clone(),
                proxy_admin: stored.proxy_admin,
                own_keys: stored.own_keys,
                region: stored.region.clone(),
                organization: stored.organization.clone(),
                per_model,
                allowed_ips: stored.allowed_ips.clone(),
                tags: stored.tags.clone(),
                alerts: stored.alerts.clone(),
            }),
        );
        if kind == SubjectKind::Tag && stored.limits.any() {
            self.tag_limits.store(true, Ordering::Relaxed);
        }
        if kind == SubjectKind::Team && !stored.tags.is_empty() {
            self.team_tags.store(true, Ordering::Relaxed);
        }
        if kind == SubjectKind::Team && stored.allowed_ips.is_some() {
            self.peer_addresses.turn_on();
            self.team_addresses.store(true, Ordering::Relaxed);
        }
        if kind == SubjectKind::Team && stored.aliases.is_some() {
            self.team_aliases.store(true, Ordering::Relaxed);
        }
    }

    /// Forget a team, user, end user, organization or tag.
    pub fn remove_holder(&self, kind: SubjectKind, id: &str) {
        self.map(kind).pin().remove(id);
        if kind == SubjectKind::Team {
            self.mcp_teams.pin().remove(id);
        }
    }

    /// The region an end user is held to (`allowed_model_region`), if any.
    pub fn end_user_region(&self, end_user: &str) -> Option<Arc<str>> {
        self.holder(SubjectKind::EndUser, end_user)?.region.clone()
    }

    /// The user whose own keys `key` may manage (LiteLLM's internal users), if any.
    pub fn key_manager(&self, key: &KeyEntry) -> Option<Arc<str>> {
        let user = key.info.user_id.as_deref()?;
        let holder = self.holder(SubjectKind::User, user)?;
        holder.own_keys.then(|| holder.id.clone())
    }

    /// Whether `key` belongs to a `proxy_admin` user, whose keys may do what the master key
    /// does on the management API (LiteLLM's roles).
    pub fn is_proxy_admin(&self, key: &KeyEntry) -> bool {
        key.info
            .user_id
            .as_deref()
            .and_then(|u| self.holder(SubjectKind::User, u))
            .is_some_and(|u| u.proxy_admin)
    }

    /// Every key and holder with a budget or a soft budget, for the budget alerts: what
    /// kind, its subject (limits and live counters) and its alert facts.
    pub fn budgeted(&self, mut each: impl FnMut(Budgeted<'_>)) {
        let has =
            |s: &Subject, a: &AlertFacts| s.limits.max_budget.is_some() || a.soft_budget.is_some();
        for (_, k) in self.keys.pin().iter() {
            if has(&k.subject, &k.alerts) {
                each(Budgeted {
                    subject: &k.subject,
                    facts: &k.alerts,
                    team: k.info.team_id.as_deref(),
                    user: k.info.user_id.as_deref(),
                });
            }
        }
        for kind in [
            SubjectKind::Team,
            SubjectKind::User,
            SubjectKind::EndUser,
            SubjectKind::Organization,
            SubjectKind::Tag,
        ] {
            for (_, h) in self.map(kind).pin().iter() {
                if has(&h.subject, &h.alerts) {
                    each(Budgeted {
                        subject: &h.subject,
                        facts: &h.alerts,
                        team: (kind == SubjectKind::Team).then_some(&*h.id),
                        user: (kind == SubjectKind::User).then_some(&*h.id),
                    });
                }
            }
        }
    }

    /// The tags of `key`'s team (`metadata.tags`), when it has some.
    pub fn team_tags(&self, key: &KeyEntry) -> Option<Arc<[Arc<str>]>> {
        if !self.team_tags.load(Ordering::Relaxed) {
            return None;
        }
        let team = self.holder(SubjectKind::Team, key.info.team_id.as_deref()?)?;
        (!team.tags.is_empty()).then(|| team.tags.clone())
    }

    /// Add the subjects of the request's tags that have limits (`/tag/new`) to `out`, each
    /// tag once: a tag's budget and limits hold every request that carries it, whoever calls
    /// (LiteLLM checks a tag's budget for every caller). Until some tag has a limit this costs
    /// one atomic load.
    pub fn tag_subjects(&self, tags: &[Arc<str>], out: &mut Subjects) {
        if tags.is_empty() || !self.tag_limits.load(Ordering::Relaxed) {
            return;
        }
        let map = self.tags.pin();
        for t in tags {
            if let Some(h) = map.get(&**t).filter(|h| h.subject.limits.any()) {
                out.push(h.subject.clone());
            }
        }
    }

    /// The switch that makes the accept loop record each request's peer.
    pub fn peer_addresses(&self) -> &PeerAddresses {
        &self.peer_addresses
    }

    /// Whether `key` may be used from `client`: its own `allowed_ips` and its team's, when
    /// they have them.
    pub fn check_addresses(&self, key: &KeyEntry, client: Option<IpAddr>) -> Result<(), ApiError> {
        if key
            .allowed_ips
            .as_ref()
            .is_some_and(|l| !addresses::allows(l, client))
        {
            return Err(ApiError::AddressNotAllowed("the key's"));
        }
        if !self.team_addresses.load(Ordering::Relaxed) {
            return Ok(());
        }
        let team = key
            .info
            .team_id
            .as_deref()
            .and_then(|t| self.holder(SubjectKind::Team, t));
        match team.and_then(|t| t.allowed_ips.clone()) {
            Some(l) if !addresses::allows(&l, client) => {
                Err(ApiError::AddressNotAllowed("the team's"))
            }
            _ => Ok(()),
        }
    }

    /// The per-model budgets this instance holds (the sync task renews their windows and
    /// reads their spend so far).
    pub fn model_budgets(&self) -> &Budgets {
        &self.model_budgets
    }

    /// A team, user, end user or organization.
    pub fn holder(&self, kind: SubjectKind, id: &str) -> Option<Arc<Holder>> {
        self.map(kind).pin().get(id).cloned()
    }

    /// The subjects a key's priced calls that are not model requests (MCP tools) are charged
    /// to: the key, its team, its user and its organization, those with a limit. The caller
    /// has checked that none of them is blocked.
    pub fn spend_subjects(&self, key: &KeyEntry) -> Subjects {
        limited(key, &self.above(key))
    }

    /// The key's team, user and organization, those this instance knows. The organization is
    /// the key's own, else its team's; without either, no lookup is made.
    pub fn above(&self, key: &KeyEntry) -> Above {
        let team = key
            .info
            .team_id
            .as_deref()
            .and_then(|t| self.holder(SubjectKind::Team, t));
        let user = key
            .info
            .user_id
            .as_deref()
            .and_then(|u| self.holder(SubjectKind::User, u));
        let organization = key
            .organization
            .as_deref()
            .or_else(|| team.as_ref().and_then(|t| t.organization.as_deref()))
            .and_then(|o| self.holder(SubjectKind::Organization, o));
        Above {
            team,
            user,
            organization,
        }
    }

    /// Whether `key` may use `wanted` by the model access of the key, its team, its user and
    /// its organization (the one rule, `auth::access`); `Err` names who refuses. Asked for the
    /// group a request names and again for each fallback it would move to.
    pub fn may_use(&self, key: &KeyEntry, wanted: &Wanted<'_>) -> Result<(), SubjectKind> {
        may_use(key, &self.above(key), wanted)
    }

    /// Whether `key` may be used at all now (not blocked or expired, nor its team or user
    /// blocked); the holders above it, those this instance knows.
    pub fn usable(&self, key: &KeyEntry, wall_ms: u64) -> Result<Above, ApiError> {
        if key.blocked {
            return Err(ApiError::KeyRefused(KeyRefusal::Blocked));
        }
        if key.expires_ms.is_some_and(|t| wall_ms >= t) {
            return Err(ApiError::KeyRefused(KeyRefusal::Expired));
        }
        let above = self.above(key);
        if above.team.as_ref().is_some_and(|t| t.blocked) {
            return Err(ApiError::KeyRefused(KeyRefusal::TeamBlocked));
        }
        if above.user.as_ref().is_some_and(|u| u.blocked) {
            return Err(ApiError::KeyRefused(KeyRefusal::UserBlocked));
        }
        Ok(above)
    }

    /// Check that `key` may call `wanted` now, and collect the subjects to admit the request
    /// against: the key, its team, its user, its organization and the request's end user
    /// (those that exist here).
    pub fn subjects(
        &self,
        key: &KeyEntry,
        end_user: Option<&str>,
        wanted: &Wanted<'_>,
        wall_ms: u64,
    ) -> Result<Subjects, ApiError> {
        let above = self.usable(key, wall_ms)?;
        may_use(key, &above, wanted).map_err(|by| ApiError::ModelNotAllowed {
            model: wanted.requested.chars().take(256).collect(),
            by,
        })?;
        let mut out = limited(key, &above);
        if let Some(h) = end_user.and_then(|e| self.holder(SubjectKind::EndUser, e)) {
            if h.blocked {
                return Err(ApiError::EndUserBlocked);
            }
            if h.subject.limits.any() {
                out.push(h.subject.clone());
            }
        }
        // The key's and its team's limits for this model, beside their own.
        let team = above.team.as_ref().and_then(|t| t.per_model.as_deref());
        for per_model in [key.per_model.as_deref(), team].into_iter().flatten() {
            if let Some(s) = per_model.get(wanted) {
                out.push(s.clone());
            }
        }
        Ok(out)
    }
}

impl Directory {
    /// The end user's own limits, for a request without a virtual key (the master key's, or
    /// an open gateway's): refused when the end user is blocked, empty when it has none.
    pub fn end_user_subjects(&self, end_user: &str) -> Result<Subjects, ApiError> {
        let mut out = Subjects::default();
        if let Some(h) = self.holder(SubjectKind::EndUser, end_user) {
            if h.blocked {
                return Err(ApiError::EndUserBlocked);
            }
            if h.subject.limits.any() {
                out.push(h.subject.clone());
            }
        }
        Ok(out)
    }
}

/// The access rule over a key's holders: the key's list, then its team's, its user's and its
/// organization's (LiteLLM keeps `models` on all four; each must allow).
fn may_use(key: &KeyEntry, above: &Above, wanted: &Wanted<'_>) -> Result<(), SubjectKind> {
    if !key.models.allows(wanted) {
        return Err(SubjectKind::Key);
    }
    let refuses = |h: &Option<Arc<Holder>>| h.as_ref().is_some_and(|h| !h.models.allows(wanted));
    if refuses(&above.team) {
        return Err(SubjectKind::Team);
    }
    if refuses(&above.user) {
        return Err(SubjectKind::User);
    }
    if refuses(&above.organization) {
        return Err(SubjectKind::Organization);
    }
    Ok(())
}

/// The key, its team, its user and its organization, those with a limit to count against.
fn limited(key: &KeyEntry, above: &Above) -> Subjects {
    let mut out = Subjects::default();
    if key.subject.limits.any() {
        out.push(key.subject.clone());
    }
    for h in [&above.team, &above.user, &above.organization]
        .into_iter()
        .flatten()
    {
        if h.subject.limits.any() {
            out.push(h.subject.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::limits::{admit, nanos};
    use sluice_core::trace_context::unhex;

    fn limits(rpm: u64) -> Stored {
        Stored {
            guardrails: Arc::default(),
            cache: None,
            limits: Limits {
                rpm: Some(rpm),
                ..Limits::default()
            },
            ..Stored::default()
        }
    }

    fn put(dir: &Directory, key: &str, team: Option<&str>, models: &[&str], stored: &Stored) {
        let models: Vec<String> = models.iter().map(|m| m.to_string()).collect();
        dir.put_key(
            digest(key),
            Some("alias"),
            None,
            false,
            ModelAccess::from_list(&models),
            team,
            None,
            stored,
        );
    }

    #[test]
    fn hex_round_trips() {
        let d = digest("sk-abc");
        assert_eq!(unhex::<32>(hex(&d).as_bytes()), Some(d));
        assert_eq!(unhex::<32>(b"zz"), None);
        assert_eq!(hex(&d).len(), 64);
    }

    #[test]
    fn team_and_key_both_decide_model_access() {
        let dir = Directory::default();
        dir.put_holder(
            SubjectKind::Team,
            "t1",
            false,
            ModelAccess::from_list(&["gpt-4o".into()]),
            &Stored::default(),
        );
        put(
            &dir,
            "sk-1",
            Some("t1"),
            &["all-team-models"],
            &Stored::default(),
        );
        let k = dir.key(&digest("sk-1")).unwrap();
        assert!(dir.subjects(&k, None, &Wanted::name("gpt-4o"), 0).is_ok());
        let e = dir
            .subjects(&k, None, &Wanted::name("claude"), 0)
            .unwrap_err();
        assert!(matches!(
            e,
            ApiError::ModelNotAllowed {
                by: SubjectKind::Team,
                ..
            }
        ));
    }

    #[test]
    fn a_requests_tags_with_limits_join_its_subjects_until_deleted() {
        let dir = Directory::default();
        let tags: Vec<Arc<str>> = vec!["eng".into(), "free".into(), "adhoc".into()];
        let mut out = Subjects::default();
        dir.tag_subjects(&tags, &mut out);
        assert!(out.is_empty(), "no tag has limits yet");
        dir.put_holder(
            SubjectKind::Tag,
            "free",
            false,
            ModelAccess::All,
            &Stored::default(),
        );
        dir.put_holder(SubjectKind::Tag, "eng", false, ModelAccess::All, &limits(1));
        dir.tag_subjects(&tags, &mut out);
        let got: Vec<_> = out.iter().map(|s| (s.kind, s.id().to_string())).collect();
        assert_eq!(got, [(SubjectKind::Tag, "eng".to_owned())]);
        // The tag's minute is shared by every request that carries it, whoever sends it.
        assert!(admit(out, 0).is_ok());
        let mut again = Subjects::default();
        dir.tag_subjects(&tags, &mut again);
        assert!(admit(again, 1).is_err());
        dir.remove_holder(SubjectKind::Tag, "eng");
        let mut gone = Subjects::default();
        dir.tag_subjects(&tags, &mut gone);
        assert!(gone.is_empty());
    }

    #[test]
    fn an_organization_binds_the_keys_of_its_teams_and_its_own() {
        let dir = Directory::default();
        let org = Stored {
            limits: Limits {
                max_budget: Some(nanos(1.0)),
                ..Limits::default()
            },
            ..Stored::default()
        };
        dir.put_holder(
            SubjectKind::Organization,
            "o1",
            false,
            ModelAccess::from_list(&["cheap".into()]),
            &org,
        );
        let under = Stored {
            organization: Some("o1".into()),
            ..Stored::default()
        };
        dir.put_holder(SubjectKind::Team, "t1", false, ModelAccess::All, &under);
        put(&dir, "sk-t", Some("t1"), &[], &Stored::default());
        put(&dir, "sk-o", None, &[], &under);
        put(&dir, "sk-free", None, &[], &Stored::default());
        for key in ["sk-t", "sk-o"] {
            let k = dir.key(&digest(key)).unwrap();
            let s = dir.subjects(&k, None, &Wanted::name("cheap"), 0).unwrap();
            assert_eq!(
                s.iter().map(|s| s.kind).collect::<Vec<_>>(),
                [SubjectKind::Organization],
                "{key}: the organization's budget counts"
            );
            assert!(matches!(
                dir.subjects(&k, None, &Wanted::name("dear"), 0),
                Err(ApiError::ModelNotAllowed {
                    by: SubjectKind::Organization,
                    ..
                })
            ));
        }
        let k = dir.key(&digest("sk-free")).unwrap();
        assert!(dir.subjects(&k, None, &Wanted::name("dear"), 0).is_ok());
        // Every key under the organization shares its counters.
        let a = dir.key(&digest("sk-t")).unwrap();
        let b = dir.key(&digest("sk-o")).unwrap();
        dir.above(&a)
            .organization
            .unwrap()
            .subject
            .counters
            .charge(nanos(1.0));
        assert!(admit(
            dir.subjects(&b, None, &Wanted::name("cheap"), 0).unwrap(),
            0
        )
        .is_err());
    }

    #[test]
    fn a_users_models_bind_its_keys() {
        let dir = Directory::default();
        dir.put_holder(
            SubjectKind::User,
            "u1",
            false,
            ModelAccess::from_list(&["cheap".into()]),
            &Stored::default(),
        );
        dir.put_key(
            digest("sk-u"),
            None,
            None,
            false,
            ModelAccess::All,
            None,
            Some("u1"),
            &Stored::default(),
        );
        let k = dir.key(&digest("sk-u")).unwrap();
        assert!(dir.subjects(&k, None, &Wanted::name("cheap"), 0).is_ok());
        assert!(matches!(
            dir.subjects(&k, None, &Wanted::name("expensive"), 0),
            Err(ApiError::ModelNotAllowed {
                by: SubjectKind::User,
                ..
            })
        ));
        assert_eq!(
            dir.may_use(&k, &Wanted::name("expensive")),
            Err(SubjectKind::User)
        );
    }

    #[test]
    fn an_update_keeps_live_counters() {
        let dir = Directory::default();
        put(&dir, "sk-1", None, &[], &limits(1));
        let k = dir.key(&digest("sk-1")).unwrap();
        let _p = admit(
            dir.subjects(&k, None, &Wanted::name("m"), 0).unwrap(),
            1_000,
        )
        .unwrap();
        // The store sends a new version (alias renamed): the minute's count stays.
        put(&dir, "sk-1", None, &[], &limits(1));
        let k = dir.key(&digest("sk-1")).unwrap();
        assert!(admit(
            dir.subjects(&k, None, &Wanted::name("m"), 0).unwrap(),
            1_001
        )
        .is_err());
    }

    #[test]
    fn stored_spend_only_raises_live_spend_within_a_window() {
        let dir = Directory::default();
        let stored = |spend: f64, end| Stored {
            guardrails: Arc::default(),
            cache: None,
            aliases: None,
            proxy_admin: false,
            own_keys: false,
            region: None,
            limits: Limits {
                max_budget: Some(nanos(10.0)),
                ..Limits::default()
            },
            spend: nanos(spend),
            window_end_ms: end,
            organization: None,
            per_model: Arc::default(),
            allowed_ips: None,
            tags: Arc::default(),
            alerts: Arc::default(),
        };
        put(&dir, "sk-1", None, &[], &stored(1.0, Some(5_000)));
        let k = dir.key(&digest("sk-1")).unwrap();
        k.subject.counters.charge(nanos(2.0));
        // The store lags (1.5 < 3 live): live spend stays.
        put(&dir, "sk-1", None, &[], &stored(1.5, Some(5_000)));
        let c = &dir.key(&digest("sk-1")).unwrap().subject.counters;
        assert_eq!(c.spent(0), nanos(3.0));
        // Another instance spent more: the store's figure wins.
        put(&dir, "sk-1", None, &[], &stored(7.0, Some(5_000)));
        assert_eq!(c.spent(0), nanos(7.0));
        // The store started a new window: its spend is taken as is.
        put(&dir, "sk-1", None, &[], &stored(0.0, Some(9_000)));
        assert_eq!(c.spent(0), 0);
        assert_eq!(c.window_end(), Some(9_000));
    }

    #[test]
    fn refusals() {
        let dir = Directory::default();
        dir.put_key(
            digest("sk-b"),
            None,
            None,
            true,
            ModelAccess::All,
            None,
            None,
            &Stored::default(),
        );
        dir.put_key(
            digest("sk-e"),
            None,
            Some(100),
            false,
            ModelAccess::All,
            None,
            None,
            &Stored::default(),
        );
        let b = dir.key(&digest("sk-b")).unwrap();
        let e = dir.key(&digest("sk-e")).unwrap();
        assert!(matches!(
            dir.subjects(&b, None, &Wanted::name("m"), 0),
            Err(ApiError::KeyRefused(KeyRefusal::Blocked))
        ));
        assert!(dir.subjects(&e, None, &Wanted::name("m"), 99).is_ok());
        assert!(matches!(
            dir.subjects(&e, None, &Wanted::name("m"), 100),
            Err(ApiError::KeyRefused(KeyRefusal::Expired))
        ));
        dir.mark_unknown(digest("sk-x"), 50);
        assert!(dir.known_unknown(&digest("sk-x"), 49));
        assert!(!dir.known_unknown(&digest("sk-x"), 50));
    }
}
