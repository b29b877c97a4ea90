//! The spend-log writer: the one task that turns finished requests into database rows.
//!
//! Requests hand their [`SpendLog`] to a [`SpendSender`] (a `try_send` into a bounded
//! channel). The task collects them and writes a batch every `proxy_batch_write_at` or as soon
//! as a batch is full; each batch is one transaction that stores the logs, adds their cost to
//! keys, teams, users and end users, and updates the daily rollups.
//!
//! When the database is down or slower than `write_timeout`, the batch goes to the spool file
//! instead, and later batches follow it there until the spool has been replayed, oldest first,
//! so nothing is lost and memory holds at most one batch plus the channel. Replaying a batch
//! that did commit after all (a timeout whose commit landed) counts nothing twice: spend-log
//! ids are unique and only newly inserted rows add spend. If the channel itself is full, the
//! request appends its record to the spool directly (file I/O on the request path, only when
//! the writer is already behind). Only a full spool loses records; each loss is counted and
//! logged.
//!
//! A process killed outright (`kill -9`, the OOM killer) loses what is only in memory. With
//! `spend_journal: per_request` (the default) each record is journaled before it is queued, by
//! the thread that answered the request, before the answer's last byte leaves ([`journal`]:
//! one `write` per record into that thread's own segment file, no `fsync`); the writer drops
//! each record's hold on its segment once the record is written or spooled, and removes the
//! segments nothing holds. With `spend_journal: batched`, and for any record the per-request
//! journal could not take, the task appends each record it takes from its channel (every 5 ms)
//! to a journal beside the spool (`<spool>.journal`: one `write`, no `fsync`, off the request
//! path), emptied once its batch is written or spooled. The task keeps taking and journaling
//! while a batch is being written (into a second file, `<spool>.journal-2`; the two swap at
//! each batch), so a slow write does not widen the window. At start, journals left by a killed
//! run (both kinds) are moved into the spool and replayed like the rest; a record whose row was
//! written before the kill counts once (its journal line has the row's id, and ids are
//! unique). What a kill can lose in batched mode is what had not yet reached the journal: the
//! records of the last poll (at most 5 ms old), and those that arrived while a full batch
//! waited for the write before it.
//!
//! Budget resets (`budget_reset_at` passed → spend 0, next window) run on the same task, and
//! so does the spend log's maintenance: the next days' partitions made ahead (PostgreSQL) and,
//! with `maximum_spend_logs_retention_period`, retention every
//! `maximum_spend_logs_retention_interval` (`partitions`). Between batches, never beside one,
//! so the database sees one writer per instance.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use time::OffsetDateTime;
use tokio::sync::mpsc;
use tokio::time::{interval, timeout, MissedTickBehavior};

use super::spool::{Spool, SpoolError};
use super::{SpendLog, Store};
use sluice_config::SpendJournalMode;
use sluice_core::poll::Poller;

pub mod journal;

pub use journal::SpendJournal;

/// How the writer batches, spools and resets. Defaults are in [`WriterOptions::new`].
#[derive(Debug, Clone)]
pub struct WriterOptions {
    /// `general_settings.proxy_batch_write_at`: the longest a record waits for its batch.
    pub batch_interval: Duration,
    /// Records per batch; a full batch is written at once.
    pub max_batch: usize,
    /// Records the channel holds before requests spool their own.
    pub queue_capacity: usize,
    /// A batch write slower than this counts as a failure and the batch is spooled.
    pub write_timeout: Duration,
    /// How often budget windows that ended are reset.
    pub budget_reset_every: Duration,
    /// The spool file (its cursor is kept beside it).
    pub spool_path: PathBuf,
    /// The spool's size bound in bytes.
    pub spool_max_bytes: u64,
    /// `general_settings.spend_journal`: each record journaled by the thread that answers its
    /// request (per request), or by this task as it takes records (batched).
    pub journal: SpendJournalMode,
    /// Size past which a thread's per-request journal file is left for a new one.
    pub journal_segment_bytes: u64,
    /// How often the spend log's maintenance runs: the next days' partitions made ahead,
    /// and retention when it is due.
    pub maintenance_every: Duration,
    /// `general_settings.maximum_spend_logs_retention_period`: logs older than this are
    /// removed. `None` keeps them all.
    pub retention: Option<Duration>,
    /// `general_settings.maximum_spend_logs_retention_interval`: how often retention runs.
    pub retention_every: Duration,
}

/// Rows one retention run deletes one by one at most (SQLite; a PostgreSQL table spanning the
/// cutoff); more are left to the next maintenance, so a first run over a large backlog does
/// not hold the writer for long.
const RETENTION_ROWS_PER_RUN: u64 = 100_000;

/// sluice's default for `proxy_batch_write_at`. LiteLLM's is 10 s; sluice writes more often
/// because a batch is cheap (one transaction) and fresher spend makes budgets on other
/// instances more exact.
pub const DEFAULT_BATCH_INTERVAL: Duration = Duration::from_secs(1);

/// Where the spool lives unless the embedder says otherwise (relative to the working
/// directory, like the default SQLite file).
pub const DEFAULT_SPOOL_PATH: &str = "sluice-spool/spend_logs.jsonl";

/// Default spool bound: 256 MiB, about a million spend records at ~250 bytes each.
pub const DEFAULT_SPOOL_MAX_BYTES: u64 = 256 << 20;

impl WriterOptions {
    /// Defaults: 1 s batches of at most 1,000 records (see [`WriterOptions::for_backend`]), a
    /// 16,384-record channel, 5 s write timeout, budget resets every 10 s, spool at
    /// `spool_path` bounded to 256 MiB, records journaled per request in 256 KiB segments, the
    /// spend log's maintenance hourly, no retention (daily once set).
    pub fn new(spool_path: PathBuf) -> Self {
        Self {
            batch_interval: DEFAULT_BATCH_INTERVAL,
            max_batch: DEFAULT_MAX_BATCH,
            queue_capacity: 16 * 1024,
            write_timeout: Duration::from_secs(5),
            budget_reset_every: Duration::from_secs(10),
            spool_path,
            spool_max_bytes: DEFAULT_SPOOL_MAX_BYTES,
            journal: SpendJournalMode::PerRequest,
            journal_segment_bytes: journal::DEFAULT_SEGMENT_BYTES,
            maintenance_every: Duration::from_secs(3600),
            retention: None,
            retention_every: Duration::from_secs(86_400),
        }
    }
}

/// Records per batch by default: a batch is one transaction, so bigger batches spread its
/// fixed cost (commit, rollup and holder upserts) over more records.
pub const DEFAULT_MAX_BATCH: usize = 1000;

/// Records per batch by default on PostgreSQL, where a batch's fixed cost is network round
/// trips and a commit's `fsync`: 5,000 sustain ~25 % more records a second than 1,000 here
/// (docs/store.md). A batch is written as soon as it is full or its interval passes, so under
/// light load batches stay small either way.
pub const DEFAULT_MAX_BATCH_POSTGRES: usize = 5000;

impl WriterOptions {
    /// The batch size for `backend` ([`DEFAULT_MAX_BATCH_POSTGRES`] on PostgreSQL), unless
    /// `max_batch` was already changed from [`DEFAULT_MAX_BATCH`].
    #[must_use]
    pub fn for_backend(mut self, backend: super::Backend) -> Self {
        if backend == super::Backend::Postgres && self.max_batch == DEFAULT_MAX_BATCH {
            self.max_batch = DEFAULT_MAX_BATCH_POSTGRES;
        }
        self
    }

    /// Defaults with `general_settings.proxy_batch_write_at`, `spend_journal` and the
    /// spend-log retention keys applied.
    pub fn from_settings(general: &sluice_config::GeneralSettings, spool_path: PathBuf) -> Self {
        let mut o = Self::new(spool_path);
        o.journal = general.spend_journal;
        o.retention = general.spend_logs_retention;
        o.retention_every = general.spend_logs_retention_interval;
        if let Some(every) = general.proxy_batch_write_at.filter(|d| !d.is_zero()) {
            o.batch_interval = every;
        }
        o
    }
}

/// Counters for `/health/readiness` and metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriterStats {
    /// Records waiting in the channel.
    pub queued: usize,
    /// Bytes in the spool not yet written to the database.
    pub spooled_bytes: u64,
    /// Records lost because the spool was full (or its disk failed).
    pub lost: u64,
    /// Whether the last write reached the database (`/health/readiness`).
    pub database_up: bool,
}

#[derive(Debug)]
struct Shared {
    spool: Mutex<Spool<SpendLog>>,
    lost: AtomicU64,
    database_up: std::sync::atomic::AtomicBool,
}

impl Shared {
    fn spool(&self) -> MutexGuard<'_, Spool<SpendLog>> {
        // A panic while holding the lock cannot leave the spool half-written (appends are
        // all-or-nothing), so a poisoned lock is still usable.
        sluice_core::lock::lock(&self.spool)
    }

    /// Keeps records the database could not take; counts and logs the ones it cannot keep.
    fn keep(&self, logs: &[SpendLog]) {
        if logs.is_empty() {
            return;
        }
        if let Err(e) = self.spool().append(logs) {
            let n = u64::try_from(logs.len()).unwrap_or(u64::MAX);
            let total = self.lost.fetch_add(n, Ordering::Relaxed) + n;
            tracing::error!(error = %e, lost_total = total, "spend records lost");
        }
    }
}

/// The request side: cheap to clone, never waits.
#[derive(Debug, Clone)]
pub struct SpendSender {
    tx: mpsc::Sender<SpendLog>,
    shared: Arc<Shared>,
    /// The per-request journal (`spend_journal: per_request`).
    journal: Option<SpendJournal>,
}

impl SpendSender {
    /// The per-request journal the recorder writes each record to before queueing it; `None`
    /// with `spend_journal: batched`.
    pub fn journal(&self) -> Option<SpendJournal> {
        self.journal.clone()
    }

    /// Hands one request's record to the writer. If the writer is behind (channel full) the
    /// record is appended to the spool right here instead of being dropped.
    pub fn send(&self, log: SpendLog) {
        match self.tx.try_send(log) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(log) | mpsc::error::TrySendError::Closed(log)) => {
                self.shared.keep(std::slice::from_ref(&log));
            }
        }
    }

    /// Queue depth, spool size and losses.
    pub fn stats(&self) -> WriterStats {
        WriterStats {
            queued: self.tx.max_capacity() - self.tx.capacity(),
            spooled_bytes: self.shared.spool().pending_bytes(),
            lost: self.shared.lost.load(Ordering::Relaxed),
            database_up: self.shared.database_up.load(Ordering::Relaxed),
        }
    }
}

/// Opens the spool and starts the writer task. The task ends once every [`SpendSender`] is
/// dropped, after writing (or spooling) what it holds.
pub fn start(
    store: Store,
    options: WriterOptions,
) -> Result<(SpendSender, tokio::task::JoinHandle<()>), SpoolError> {
    let mut spool = Spool::open(&options.spool_path, options.spool_max_bytes)?;
    let mut lost = 0;
    let mut journal = |which: &str| -> Result<Spool<SpendLog>, SpoolError> {
        let mut j = Spool::open(
            &journal_path(&options.spool_path, which),
            options.spool_max_bytes,
        )?;
        lost += recover_journal(&mut j, &mut spool, options.max_batch.max(1))?;
        Ok(j)
    };
    let files = [journal("journal")?, journal("journal-2")?];
    // The per-request journal's segments, whatever the mode now (a run in the other mode may
    // have left them).
    let dir = journal::journal_dir(&options.spool_path);
    lost += journal::recover(&dir, &mut spool, options.max_batch.max(1))?;
    let requests = match options.journal {
        SpendJournalMode::PerRequest => {
            Some(SpendJournal::open(&dir, options.journal_segment_bytes)?)
        }
        SpendJournalMode::Batched => None,
    };
    if !spool.is_empty() {
        tracing::info!(
            path = %spool.path().display(),
            bytes = spool.pending_bytes(),
            "spend records spooled by an earlier run will be replayed"
        );
    }
    let shared = Arc::new(Shared {
        spool: Mutex::new(spool),
        lost: AtomicU64::new(lost),
        database_up: std::sync::atomic::AtomicBool::new(true),
    });
    let (tx, rx) = mpsc::channel(options.queue_capacity.max(1));
    let max_batch = options.max_batch.max(1);
    let timers = Timers {
        batch: options.batch_interval,
        reset: options.budget_reset_every,
        maintain: options.maintenance_every,
    };
    let writer = Writer {
        sink: Some(Sink {
            store,
            shared: shared.clone(),
            database_up: true,
            options,
            last_retention: None,
            retention_left: false,
        }),
        batch: Vec::with_capacity(max_batch),
        spare: Vec::with_capacity(max_batch),
        journal: Journal {
            files,
            live: 0,
            ok: true,
        },
        requests: requests.clone(),
        max_batch,
        maintain_next: false,
    };
    let task = tokio::spawn(writer.run(rx, timers));
    Ok((
        SpendSender {
            tx,
            shared,
            journal: requests,
        },
        task,
    ))
}

/// A journal beside the spool at `spool`: `spend_logs.jsonl` → `spend_logs.jsonl.journal`
/// (and `.journal-2`).
fn journal_path(spool: &std::path::Path, which: &str) -> PathBuf {
    let mut p = spool.as_os_str().to_owned();
    p.push(".");
    p.push(which);
    PathBuf::from(p)
}

/// Moves what a killed run left in its journal into the spool (replayed with the rest), then
/// empties the journal. Returns the records that did not fit in the spool (counted as lost).
fn recover_journal(
    journal: &mut Spool<SpendLog>,
    spool: &mut Spool<SpendLog>,
    max_batch: usize,
) -> Result<u64, SpoolError> {
    let mut moved = 0usize;
    let mut lost = 0u64;
    while !journal.is_empty() {
        let pending = journal.peek(max_batch)?;
        if pending.records.is_empty() && pending.unreadable == 0 {
            break;
        }
        match spool.append(&pending.records) {
            Ok(()) => moved += pending.records.len(),
            Err(SpoolError::Full { records, .. }) => {
                lost += u64::try_from(records).unwrap_or(u64::MAX);
            }
            Err(e) => return Err(e),
        }
        journal.confirm(&pending)?;
    }
    journal.clear()?;
    if moved > 0 || lost > 0 {
        tracing::warn!(
            moved,
            lost,
            "spend records of an interrupted run recovered from the journal"
        );
    }
    Ok(lost)
}

/// The writer's side of the journal: two files, so that records arriving while a batch is
/// being written are journaled too. New records go to `live`; starting a batch write switches
/// `live`, and the other file, which holds exactly that batch, is emptied once it is written or
/// spooled.
struct Journal {
    files: [Spool<SpendLog>; 2],
    live: usize,
    /// Whether the last journal write worked, so a failing disk is logged once.
    ok: bool,
}

impl Journal {
    /// Appends records just taken from the channel to the live file, but for those the
    /// per-request journal already holds. A failure costs only their safety against a kill
    /// before their batch is written; logged once until writes work again.
    fn append(&mut self, fresh: &[SpendLog]) {
        if fresh.iter().all(|l| l.journal.is_some()) {
            return;
        }
        match self.files[self.live].append_volatile(fresh.iter().filter(|l| l.journal.is_none())) {
            Ok(()) => self.ok = true,
            Err(e) => {
                if std::mem::replace(&mut self.ok, false) {
                    tracing::warn!(
                        error = %e,
                        "cannot journal spend records: a crash before their batch is written would lose them"
                    );
                }
            }
        }
    }

    /// The live file now holds the batch about to be written; later records go to the other.
    fn seal(&mut self) {
        self.live ^= 1;
    }

    /// The batch sealed last is written or spooled: its file is emptied.
    fn release(&mut self) {
        let sealed = &mut self.files[self.live ^ 1];
        if !sealed.is_empty() {
            if let Err(e) = sealed.clear() {
                tracing::warn!(error = %e, "cannot empty the spend journal");
            }
        }
    }
}

/// The writer's intervals: batches, budget resets, the spend log's maintenance.
#[derive(Debug, Clone, Copy)]
struct Timers {
    batch: Duration,
    reset: Duration,
    maintain: Duration,
}

/// What runs after a batch when due.
#[derive(Debug, Clone, Copy, Default)]
struct Due {
    reset: bool,
    maintain: bool,
}

/// A batch write (with the spool's replay before it and, when due, the budget reset and the
/// spend log's maintenance after it), run beside the loop that keeps taking and journaling
/// records.
type Job = Pin<Box<dyn Future<Output = (Sink, Vec<SpendLog>)> + Send>>;

struct Writer {
    /// `None` exactly while a [`Job`] holds it.
    sink: Option<Sink>,
    batch: Vec<SpendLog>,
    /// The last written batch's buffer, reused for the next one.
    spare: Vec<SpendLog>,
    journal: Journal,
    /// The per-request journal, whose finished segments are removed after each batch.
    requests: Option<SpendJournal>,
    max_batch: usize,
    /// Retention left rows for another run: maintenance goes on with the next batch rather
    /// than at the next maintenance tick.
    maintain_next: bool,
}

impl Writer {
    async fn run(mut self, rx: mpsc::Receiver<SpendLog>, timers: Timers) {
        // Polled, never parked on: a keyed request's spend log does not wake this task's
        // thread from the worker that answered it (`telemetry::Poller`).
        let mut rx = Poller::new(rx);
        let mut flush = interval(timers.batch);
        flush.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut resets = interval(timers.reset);
        resets.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut maintenance = interval(timers.maintain);
        maintenance.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut job: Option<Job> = None;
        let (mut flush_due, mut due, mut open) = (false, Due::default(), true);
        while open {
            // A full batch stops the taking until its write is done; the channel then fills
            // and requests spool their own records (bounded memory).
            let room = self.max_batch.saturating_sub(self.batch.len());
            let before = self.batch.len();
            tokio::select! {
                still = rx.next(&mut self.batch, room), if room > 0 => {
                    self.journal.append(self.batch.get(before..).unwrap_or_default());
                    open = still;
                }
                done = running(&mut job), if job.is_some() => {
                    job = None;
                    self.finish(done);
                }
                _ = flush.tick() => {
                    flush_due = true;
                    due.maintain |= std::mem::take(&mut self.maintain_next);
                }
                _ = resets.tick() => due.reset = true,
                _ = maintenance.tick() => due.maintain = true,
            }
            let any_due = flush_due || due.reset || due.maintain;
            if job.is_none() && (any_due || self.batch.len() >= self.max_batch) {
                job = self.begin(due);
                flush_due = false;
                due = Due::default();
            }
        }
        if let Some(j) = job.take() {
            self.finish(j.await);
        }
        if let Some(last) = self.begin(Due::default()) {
            self.finish(last.await);
        }
        if let Some(j) = &self.requests {
            j.close();
        }
    }

    /// Starts writing the current batch (`None` if a write is already running).
    fn begin(&mut self, due: Due) -> Option<Job> {
        let sink = self.sink.take()?;
        let batch = std::mem::replace(&mut self.batch, std::mem::take(&mut self.spare));
        self.journal.seal();
        Some(Box::pin(sink.run(batch, due)))
    }

    fn finish(&mut self, (sink, mut written): (Sink, Vec<SpendLog>)) {
        self.maintain_next = sink.retention_left;
        self.sink = Some(sink);
        self.journal.release();
        // Dropping the records drops their holds on the per-request journal's segments.
        written.clear();
        self.spare = written;
        if let Some(j) = &self.requests {
            j.sweep();
        }
    }
}

/// The running job's result; never ready when there is none (its `select!` arm is disabled).
async fn running(job: &mut Option<Job>) -> (Sink, Vec<SpendLog>) {
    match job {
        Some(j) => j.await,
        None => std::future::pending().await,
    }
}

/// Where batches go: the database, else the spool. Owned by one [`Job`] at a time.
struct Sink {
    store: Store,
    shared: Arc<Shared>,
    /// Last known state, so "down" and "back" are each logged once.
    database_up: bool,
    options: WriterOptions,
    /// When retention last ran to its end (`None`: not yet in this process).
    last_retention: Option<tokio::time::Instant>,
    /// The last retention run stopped at its row budget: the next maintenance goes on.
    retention_left: bool,
}

impl Sink {
    async fn run(mut self, batch: Vec<SpendLog>, due: Due) -> (Self, Vec<SpendLog>) {
        self.flush(&batch).await;
        if due.reset {
            self.reset_budgets().await;
        }
        if due.maintain {
            self.maintain().await;
        }
        (self, batch)
    }

    /// The spend log's maintenance: the next days' partitions, then retention when due (its
    /// interval passed since it last ran to its end, or rows are left from the last run).
    /// Failures are logged and tried again at the next maintenance.
    async fn maintain(&mut self) {
        let now = OffsetDateTime::now_utc();
        let limit = self.options.write_timeout;
        match timeout(limit, self.store.prepare_spend_partitions(now)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "spend log partitions not made; retrying later")
            }
            Err(_) => tracing::warn!("making spend log partitions timed out; retrying later"),
        }
        let Some(period) = self.options.retention else {
            return;
        };
        let due = self.retention_left
            || self
                .last_retention
                .is_none_or(|t| t.elapsed() >= self.options.retention_every);
        if !due {
            return;
        }
        let cutoff = super::retention_cutoff(self.store.backend(), now, period);
        let prune = self.store.prune_spend_logs(cutoff, RETENTION_ROWS_PER_RUN);
        // Retention may take longer than a batch write; a later batch waits for it (the
        // channel and the spool hold what arrives meanwhile), bounded by its row budget.
        match timeout(limit * 6, prune).await {
            Ok(Ok(p)) => {
                if p.partitions > 0 || p.rows > 0 {
                    tracing::info!(
                        days_dropped = p.partitions,
                        rows_deleted = p.rows,
                        more = p.more,
                        "spend log retention"
                    );
                }
                self.retention_left = p.more;
                if !p.more {
                    self.last_retention = Some(tokio::time::Instant::now());
                }
            }
            Ok(Err(e)) => tracing::warn!(error = %e, "spend log retention failed; retrying later"),
            Err(_) => tracing::warn!("spend log retention timed out; retrying later"),
        }
    }

    /// Writes `batch`, after anything spooled (so the database sees records in the order
    /// they were made); spools it when the database does not take it.
    async fn flush(&mut self, batch: &[SpendLog]) {
        if self.replay().await && !batch.is_empty() {
            if let Err(why) = self.write(batch).await {
                self.went_down(&why);
                self.shared.keep(batch);
            }
        } else {
            self.shared.keep(batch);
        }
    }
    /// Writes spooled records back, a batch at a time. True when the spool is empty.
    async fn replay(&mut self) -> bool {
        loop {
            let pending = {
                let mut spool = self.shared.spool();
                if spool.is_empty() {
                    return true;
                }
                spool.peek(self.options.max_batch.max(1))
            };
            let pending = match pending {
                Ok(p) => p,
                Err(e) => {
                    tracing::error!(error = %e, "cannot read the spend spool");
                    return false;
                }
            };
            if pending.unreadable > 0 {
                tracing::warn!(
                    lines = pending.unreadable,
                    "unreadable lines in the spend spool skipped"
                );
            }
            if let Err(why) = self.write(&pending.records).await {
                self.went_down(&why);
                return false;
            }
            if let Err(e) = self.shared.spool().confirm(&pending) {
                // Confirmed in the database but not on disk: a later replay writes them again,
                // which the database ignores (unique ids).
                tracing::error!(error = %e, "cannot advance the spend spool");
                return false;
            }
            tracing::debug!(
                records = pending.records.len(),
                "spooled spend records replayed"
            );
        }
    }

    async fn write(&mut self, logs: &[SpendLog]) -> Result<(), String> {
        if logs.is_empty() {
            return Ok(());
        }
        match timeout(
            self.options.write_timeout,
            self.store.write_spend_batch(logs),
        )
        .await
        {
            Ok(Ok(_)) => {
                self.shared.database_up.store(true, Ordering::Relaxed);
                if !self.database_up {
                    self.database_up = true;
                    tracing::info!("database reachable again; writing spend logs");
                }
                Ok(())
            }
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!(
                "batch write took longer than {:?}",
                self.options.write_timeout
            )),
        }
    }

    fn went_down(&mut self, why: &str) {
        self.shared.database_up.store(false, Ordering::Relaxed);
        if self.database_up {
            self.database_up = false;
            tracing::warn!(
                error = why,
                spool = %self.options.spool_path.display(),
                "database unavailable; spooling spend logs until it returns"
            );
        }
    }

    async fn reset_budgets(&mut self) {
        let now = OffsetDateTime::now_utc();
        match timeout(self.options.write_timeout, self.store.reset_budgets(now)).await {
            Ok(Ok(0)) => {}
            Ok(Ok(n)) => tracing::info!(reset = n, "budget windows reset"),
            Ok(Err(e)) => tracing::warn!(error = %e, "budget reset failed; retrying later"),
            Err(_) => tracing::warn!("budget reset timed out; retrying later"),
        }
    }
}

#[cfg(test)]
mod tests;
