//! The per-request spend journal (`general_settings.spend_journal: per_request`, the default):
//! each answered request's spend line is appended to a journal file by the thread that
//! answers it, when its record is handed to the recorder — before the answer's last byte
//! leaves — so a process killed outright (`kill -9`, the OOM killer) loses no answered
//! request's record. One `write(2)` of one line prepared in a reused buffer, no `fsync` (the
//! kernel keeps written pages when the process dies; a lost machine is the spool's job), no
//! lock: each thread appends to a file of its own.
//!
//! Files are segments in `<spool>.journal.d/`, named `<pid>-<n>.jsonl`. A thread moves to a
//! new segment once its current one passes [`WriterOptions::journal_segment_bytes`]. Each
//! journaled record carries a hold on its segment ([`JournalHold`]) to the spend writer, which
//! drops it once the record's row is written or spooled; the writer removes a segment its
//! thread has left once no hold on it remains ([`SpendJournal::sweep`]), and every segment when
//! it ends (every record then is stored or spooled). At start, segments left by a killed run
//! are moved into the spool and replayed with it ([`recover`]): a record whose row was written
//! before the kill is in the store with the same id (the line's), and the store counts an id
//! once, so nothing is charged twice.
//!
//! [`WriterOptions::journal_segment_bytes`]: super::WriterOptions::journal_segment_bytes

use std::cell::RefCell;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use time::OffsetDateTime;

use super::recover_journal;
use crate::sink::Line;
use crate::spool::{Spool, SpoolError};
use crate::SpendLog;
use sluice_core::record::{JournalHold, JournalWatch, Journaled, RecordJournal, RequestRecord};

/// Default segment size: 256 KiB, about a thousand records. After a kill, at most this much
/// per thread is read back although already stored (a few milliseconds of replay); a thread
/// opens a new file once per this many bytes.
pub const DEFAULT_SEGMENT_BYTES: u64 = 256 << 10;

/// Tells journals apart in a thread's open files (tests run several in one process).
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// The request side of the per-request journal: cheap to clone; [`RecordJournal::journal`]
/// appends a record's line on the calling thread.
#[derive(Debug, Clone)]
pub struct SpendJournal {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    id: u64,
    dir: PathBuf,
    segment_bytes: u64,
    /// Numbers segment files.
    next: AtomicU64,
    /// Every segment file not yet removed, and whether any record in it is still unstored.
    segments: Mutex<Vec<Segment>>,
    /// Whether the last append failed, so that a failing disk is logged once.
    failing: AtomicBool,
    /// The writer has ended: later records are not journaled (they are spooled).
    closed: AtomicBool,
}

#[derive(Debug)]
struct Segment {
    path: PathBuf,
    /// Released once the thread has moved on and every record's hold is gone.
    watch: JournalWatch,
}

/// One thread's current segment of one journal.
struct Open {
    journal: u64,
    inner: Weak<Inner>,
    file: File,
    /// The segment's hold; each record journaled into it gets a clone.
    hold: JournalHold,
    bytes: u64,
    /// The line being written, reused.
    buf: Vec<u8>,
}

thread_local! {
    static OPEN: RefCell<Vec<Open>> = const { RefCell::new(Vec::new()) };
}

/// The journal's folder beside the spool: `spend_logs.jsonl` → `spend_logs.jsonl.journal.d`.
pub(super) fn journal_dir(spool: &Path) -> PathBuf {
    super::journal_path(spool, "journal.d")
}

/// Moves what a killed run left in the journal folder at `dir` into `spool` (replayed with
/// the rest) and removes the files. Returns the records that did not fit in the spool (lost).
pub(super) fn recover(
    dir: &Path,
    spool: &mut Spool<SpendLog>,
    max_batch: usize,
) -> Result<u64, SpoolError> {
    let io = |source| SpoolError::Io {
        path: dir.to_owned(),
        source,
    };
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(io(e)),
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
    paths.sort();
    let mut lost = 0;
    for path in paths {
        if path.extension().is_some_and(|e| e == "jsonl") {
            let mut segment = Spool::<SpendLog>::open(&path, u64::MAX)?;
            lost += recover_journal(&mut segment, spool, max_batch)?;
        }
        // The segment, or a cursor a recovery cut short left beside it.
        if let Err(e) = std::fs::remove_file(&path) {
            if e.kind() != std::io::ErrorKind::NotFound {
                return Err(SpoolError::Io { path, source: e });
            }
        }
    }
    Ok(lost)
}

impl SpendJournal {
    /// A journal writing segments of about `segment_bytes` into `dir` (created if missing).
    /// Recover what an earlier run left there first ([`recover`]).
    pub(super) fn open(dir: &Path, segment_bytes: u64) -> Result<Self, SpoolError> {
        std::fs::create_dir_all(dir).map_err(|source| SpoolError::Io {
            path: dir.to_owned(),
            source,
        })?;
        Ok(Self {
            inner: Arc::new(Inner {
                id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
                dir: dir.to_owned(),
                segment_bytes: segment_bytes.max(1),
                next: AtomicU64::new(0),
                segments: Mutex::new(Vec::new()),
                failing: AtomicBool::new(false),
                closed: AtomicBool::new(false),
            }),
        })
    }

    /// Removes the segment files whose records are all stored (or spooled) and that no thread
    /// writes to any more. Run by the spend writer after each batch.
    pub(super) fn sweep(&self) {
        self.inner.segments().retain(|s| {
            if !s.watch.released() {
                return true;
            }
            remove(&s.path);
            false
        });
    }

    /// The writer has ended, every record it was handed stored or spooled: the segment files
    /// are removed and later records are not journaled.
    pub(super) fn close(&self) {
        self.inner.closed.store(true, Ordering::Relaxed);
        for s in self.inner.segments().drain(..) {
            remove(&s.path);
        }
    }

    /// Segment files not yet removed (for tests and figures).
    pub fn segments(&self) -> usize {
        self.inner.segments().len()
    }

    /// Appends `line` to this thread's segment; its hold when the line is written.
    fn append(&self, open: &mut Vec<Open>, line: &Line<'_>) -> Option<JournalHold> {
        let inner = &self.inner;
        let at = open.iter().position(|o| o.journal == inner.id);
        if inner.closed.load(Ordering::Relaxed) {
            if let Some(at) = at {
                open.swap_remove(at);
            }
            return None;
        }
        let at = match at {
            Some(at) => at,
            None => {
                // Files of journals that are gone (a test's) are closed first.
                open.retain(|o| o.inner.strong_count() > 0);
                open.push(self.segment()?);
                open.len() - 1
            }
        };
        let o = open.get_mut(at)?;
        o.buf.clear();
        // A line that does not serialise would be a bug in `Line`; the record is then
        // journaled by the writer instead.
        serde_json::to_writer(&mut o.buf, line).ok()?;
        o.buf.push(b'\n');
        let hold = match (&o.file).write_all(&o.buf) {
            Ok(()) => {
                o.bytes += o.buf.len() as u64;
                Some(o.hold.clone())
            }
            Err(e) => {
                inner.failed(&e);
                None
            }
        };
        // Full, or failed (it may end in a torn line, which recovery skips): closed now; the
        // next record opens the next segment.
        if hold.is_none() || o.bytes >= inner.segment_bytes {
            open.swap_remove(at);
        }
        if hold.is_some()
            && inner.failing.load(Ordering::Relaxed)
            && inner.failing.swap(false, Ordering::Relaxed)
        {
            tracing::info!("the spend journal is written again");
        }
        hold
    }

    /// Opens this thread's next segment file.
    fn segment(&self) -> Option<Open> {
        let inner = &self.inner;
        let n = inner.next.fetch_add(1, Ordering::Relaxed);
        let path = inner
            .dir
            .join(format!("{}-{n:06}.jsonl", std::process::id()));
        let file = match OpenOptions::new().create(true).append(true).open(&path) {
            Ok(f) => f,
            Err(e) => {
                inner.failed(&e);
                return None;
            }
        };
        let (hold, watch) = JournalHold::new();
        inner.segments().push(Segment { path, watch });
        Some(Open {
            journal: inner.id,
            inner: Arc::downgrade(inner),
            file,
            hold,
            bytes: 0,
            buf: Vec::with_capacity(512),
        })
    }
}

impl Inner {
    fn segments(&self) -> MutexGuard<'_, Vec<Segment>> {
        // The list is only pushed to and filtered: a panic elsewhere cannot leave it torn.
        sluice_core::lock::lock(&self.segments)
    }

    /// Logs a failing journal once until it works again; the record goes on unjournaled
    /// (the writer journals it when it takes it, as with `spend_journal: batched`).
    fn failed(&self, e: &std::io::Error) {
        if !self.failing.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                error = %e,
                dir = %self.dir.display(),
                "cannot write the spend journal: records are journaled by the spend writer until it works again"
            );
        }
    }
}

fn remove(path: &Path) {
    if let Err(e) = std::fs::remove_file(path) {
        if e.kind() != std::io::ErrorKind::NotFound {
            tracing::warn!(error = %e, path = %path.display(), "cannot remove a spend journal file");
        }
    }
}

impl RecordJournal for SpendJournal {
    fn journal(&self, record: &mut RequestRecord) {
        if record.journaled.is_some() {
            return;
        }
        let Some(line) = Line::of(record, OffsetDateTime::now_utc()) else {
            return;
        };
        let id = line.id().as_u64_pair();
        // `try_with`: a record made while the thread exits (a stream dropped with its
        // runtime) finds no open file; the writer journals it.
        let hold = OPEN
            .try_with(|open| {
                let mut open = open.try_borrow_mut().ok()?;
                self.append(&mut open, &line)
            })
            .ok()
            .flatten();
        drop(line);
        if let Some(hold) = hold {
            record.journaled = Some(Box::new(Journaled {
                id: [id.0, id.1],
                hold,
            }));
        }
    }
}

#[cfg(test)]
pub(super) mod tests;
