//! The spend-log writer: requests' spend records reach the database in batches, off the
//! request path, and nothing is lost when the database is down or slow.
//!
//! The recorder task hands each record over with a `try_send`; one task writes a batch every
//! `proxy_batch_write_at` seconds (or as soon as one fills). A batch the database does not take
//! within [`WRITE_TIMEOUT`] goes to the spool file instead, and while the spool holds anything,
//! new batches go behind it, so records reach the database in order. Each flush first replays
//! the spool a chunk at a time; writing is idempotent (every record has its own id), so a batch
//! that committed after its timeout and is replayed again is not counted twice.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use time::OffsetDateTime;
use tokio::sync::mpsc;

use super::spool::{Spool, SpoolError};
use super::{KeyHash, SpendLog, SpendStatus, Store};
use crate::limits::dollars;
use crate::telemetry::{Outcome, RecordSink, RequestRecord};

/// The longest one batch write may take before its records are spooled.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// Records waiting for the writer task before they go straight to the spool.
const QUEUE: usize = 64 * 1024;

/// Records per database batch (and per replayed spool chunk).
const BATCH: usize = 1_000;

/// How the writer runs.
#[derive(Debug, Clone)]
pub struct WriterOptions {
    /// `general_settings.proxy_batch_write_at` (default 10 s in LiteLLM; sluice writes each
    /// second unless told otherwise).
    pub every: Duration,
    /// The spool file.
    pub spool_path: PathBuf,
    /// Its size bound.
    pub spool_max_bytes: u64,
}

impl WriterOptions {
    /// Defaults: a batch each second, `sluice-spool/spend.jsonl`, at most 1 GiB spooled.
    pub fn new(every: Option<Duration>) -> Self {
        Self {
            every: every.unwrap_or(Duration::from_secs(1)),
            spool_path: PathBuf::from("sluice-spool/spend.jsonl"),
            spool_max_bytes: 1 << 30,
        }
    }
}

#[derive(Debug)]
struct Shared {
    spool: Mutex<Spool<SpendLog>>,
    db_up: AtomicBool,
    written: AtomicU64,
}

impl Shared {
    fn spool(&self) -> MutexGuard<'_, Spool<SpendLog>> {
        match self.spool.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    fn spill(&self, logs: &[SpendLog]) {
        match self.spool().append(logs) {
            Ok(0) => {}
            Ok(lost) => tracing::error!(lost, "spend spool full: records lost"),
            Err(e) => tracing::error!(error = %e, lost = logs.len(), "spend spool unwritable"),
        }
    }
}

/// What the writer task receives.
#[derive(Debug)]
enum Msg {
    /// A record to write.
    Log(Box<SpendLog>),
    /// Write everything received so far, then answer.
    Flush(tokio::sync::oneshot::Sender<()>),
}

/// The request side of the writer. Cheap to clone.
#[derive(Debug, Clone)]
pub struct SpendWriter {
    tx: mpsc::Sender<Msg>,
    shared: Arc<Shared>,
}

impl SpendWriter {
    /// Start the writer task over `store`.
    pub fn start(
        store: Store,
        options: WriterOptions,
    ) -> Result<(Self, tokio::task::JoinHandle<()>), SpoolError> {
        let spool = Spool::open(&options.spool_path, options.spool_max_bytes)?;
        let shared = Arc::new(Shared {
            spool: Mutex::new(spool),
            db_up: AtomicBool::new(true),
            written: AtomicU64::new(0),
        });
        let (tx, rx) = mpsc::channel(QUEUE);
        let task = tokio::spawn(run(store, options.every, rx, shared.clone()));
        Ok((Self { tx, shared }, task))
    }

    /// Hand a record over; if the writer is behind, it goes to the spool at once.
    pub fn submit(&self, log: SpendLog) {
        if let Err(
            mpsc::error::TrySendError::Full(Msg::Log(log))
            | mpsc::error::TrySendError::Closed(Msg::Log(log)),
        ) = self.tx.try_send(Msg::Log(Box::new(log)))
        {
            self.shared.spill(std::slice::from_ref(&log));
        }
    }

    /// Write everything handed over so far (or spool it), for a clean shutdown and tests.
    pub async fn flush(&self) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        if self.tx.send(Msg::Flush(tx)).await.is_ok() {
            let _ = rx.await;
        }
    }

    /// Whether the last write reached the database.
    pub fn db_up(&self) -> bool {
        self.shared.db_up.load(Relaxed)
    }

    /// Bytes waiting in the spool.
    pub fn spooled_bytes(&self) -> u64 {
        self.shared.spool().len_bytes()
    }

    /// Records written to the database since start.
    pub fn written(&self) -> u64 {
        self.shared.written.load(Relaxed)
    }
}

async fn run(store: Store, every: Duration, mut rx: mpsc::Receiver<Msg>, shared: Arc<Shared>) {
    let mut batch: Vec<SpendLog> = Vec::with_capacity(BATCH);
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            msg = rx.recv() => match msg {
                Some(Msg::Log(log)) => {
                    batch.push(*log);
                    if batch.len() >= BATCH {
                        flush(&store, &shared, &mut batch).await;
                    }
                }
                Some(Msg::Flush(done)) => {
                    flush(&store, &shared, &mut batch).await;
                    let _ = done.send(());
                }
                None => {
                    flush(&store, &shared, &mut batch).await;
                    return;
                }
            },
            _ = tick.tick() => flush(&store, &shared, &mut batch).await,
        }
    }
}

async fn write(store: &Store, shared: &Shared, logs: &[SpendLog]) -> bool {
    let ok = matches!(
        tokio::time::timeout(WRITE_TIMEOUT, store.write_spend_batch(logs)).await,
        Ok(Ok(_))
    );
    if shared.db_up.swap(ok, Relaxed) != ok {
        if ok {
            tracing::info!("database reachable again: writing spend logs");
        } else {
            tracing::warn!("database unreachable: spend logs go to the spool until it returns");
        }
    }
    if ok {
        shared.written.fetch_add(logs.len() as u64, Relaxed);
    }
    ok
}

/// Replay the spool, then write `batch` (or spool it behind what is still waiting).
async fn flush(store: &Store, shared: &Shared, batch: &mut Vec<SpendLog>) {
    if !shared.spool().is_empty() && !replay(store, shared).await {
        if !batch.is_empty() {
            shared.spill(batch);
            batch.clear();
        }
        return;
    }
    if batch.is_empty() {
        return;
    }
    if !write(store, shared, batch).await {
        shared.spill(batch);
    }
    batch.clear();
}

/// Write the spool to the database a chunk at a time; empty it once all of it is in. Returns
/// whether it is empty now.
async fn replay(store: &Store, shared: &Shared) -> bool {
    let mut offset = 0;
    loop {
        let chunk = shared.spool().read_chunk(offset, BATCH);
        let (logs, next) = match chunk {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(error = %e, "spend spool unreadable");
                return false;
            }
        };
        if logs.is_empty() && next == offset {
            let mut spool = shared.spool();
            // Anything appended since the last read is replayed on the next flush.
            if spool.len_bytes() <= offset {
                if let Err(e) = spool.clear() {
                    tracing::error!(error = %e, "spend spool could not be emptied");
                    return false;
                }
                tracing::info!("spend spool replayed into the database");
                return true;
            }
            return false;
        }
        if !logs.is_empty() && !write(store, shared, &logs).await {
            return false;
        }
        offset = next;
    }
}

/// Turns finished inference requests into spend logs for the writer (runs on the recorder
/// task).
#[derive(Debug)]
pub struct SpendSink {
    writer: SpendWriter,
}

impl SpendSink {
    /// A sink feeding `writer`.
    pub fn new(writer: SpendWriter) -> Self {
        Self { writer }
    }
}

/// The spend log of a finished request; `None` for requests that never named a model group
/// (health checks, unknown routes, refused credentials).
pub fn spend_log(r: &RequestRecord, now: OffsetDateTime) -> Option<SpendLog> {
    let model = r.model.as_deref()?;
    let elapsed = r.start.elapsed();
    let start = now - elapsed;
    let mut l = SpendLog::new(
        r.request_id.to_str().unwrap_or("-").to_owned(),
        model.to_owned(),
        start,
    );
    if let Some(k) = &r.key {
        l.api_key = KeyHash::from_hex(&k.hash);
        l.team_id = k.team_id.as_deref().map(str::to_owned);
        l.user_id = k.user_id.as_deref().map(str::to_owned);
    }
    l.end_user = r.end_user.as_deref().map(str::to_owned);
    l.deployment_id = r.deployment.as_deref().map(str::to_owned);
    l.provider = r.provider.map(str::to_owned);
    l.usage = r.usage.unwrap_or_default();
    l.spend = r.cost.map_or(0.0, dollars);
    l.status = if (200..300).contains(&r.status)
        && matches!(r.outcome, Outcome::Done | Outcome::StreamComplete)
    {
        SpendStatus::Success
    } else {
        SpendStatus::Failure
    };
    l.end_time = now;
    l.ttfb_ms = r.ttfb.map(|t| t.as_millis() as u64);
    Some(l)
}

impl RecordSink for SpendSink {
    fn accept(&mut self, record: &RequestRecord) {
        if let Some(l) = spend_log(record, OffsetDateTime::now_utc()) {
            self.writer.submit(l);
        }
    }
}
