//! A local append-only file of records waiting for a destination that is down: spend logs while
//! the database is unreachable, and (issue 8) logging callbacks while their endpoint is.
//!
//! One JSON document per line, appended and `fsync`ed a batch at a time; read back in the order
//! written. A second small file holds how far the destination has confirmed, so a restart does
//! not replay what was already delivered (replaying twice is harmless for idempotent
//! destinations, but costs time). When every record is confirmed the file is truncated to zero.
//!
//! The file is bounded: an append that would pass `max_bytes` is refused with
//! [`SpoolError::Full`], and the caller decides what to say about the records it could not
//! keep. Memory is bounded by one batch: records are never held in memory beyond what the
//! caller asks [`Spool::peek`] for.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Seek, SeekFrom, Write};
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::Serialize;

/// Why a spool operation failed.
#[derive(Debug, thiserror::Error)]
pub enum SpoolError {
    /// The file system refused (disk full, permissions, ...).
    #[error("spool file {path}: {source}")]
    Io {
        /// The spool or cursor file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The records would take the file past its size limit; nothing was written.
    #[error("spool {path} is full ({max_bytes} bytes); {records} record(s) not kept")]
    Full {
        /// The spool file.
        path: PathBuf,
        /// Its limit.
        max_bytes: u64,
        /// Records refused.
        records: usize,
    },
}

/// Records read back by [`Spool::peek`], and where to confirm up to once they are delivered.
#[derive(Debug)]
pub struct Pending<T> {
    /// The records, oldest first.
    pub records: Vec<T>,
    /// Lines that did not decode (a write torn by a crash); skipped, and counted for the log.
    pub unreadable: usize,
    end: u64,
}

/// An append-only, size-bounded file of `T`s with a confirmed-up-to cursor.
#[derive(Debug)]
pub struct Spool<T> {
    path: PathBuf,
    cursor_path: PathBuf,
    file: File,
    len: u64,
    confirmed: u64,
    max_bytes: u64,
    _records: PhantomData<fn(T) -> T>,
}

impl<T: Serialize + DeserializeOwned> Spool<T> {
    /// Opens (or creates) the spool at `path`, with its cursor beside it (`<path>.offset`).
    /// Records left by an earlier run are kept and will be read back first.
    pub fn open(path: &Path, max_bytes: u64) -> Result<Self, SpoolError> {
        let io = |source| SpoolError::Io {
            path: path.to_owned(),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(path)
            .map_err(io)?;
        let mut len = file.metadata().map_err(io)?.len();
        if len > 0 && !ends_with_newline(&file, len).map_err(io)? {
            // A crash cut the last append short: end that line, so it reads back as one
            // unreadable record instead of swallowing the next append.
            (&file).write_all(b"\n").map_err(io)?;
            len += 1;
        }
        let mut cursor_path = path.as_os_str().to_owned();
        cursor_path.push(".offset");
        let cursor_path = PathBuf::from(cursor_path);
        let confirmed = std::fs::read_to_string(&cursor_path)
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .unwrap_or(0)
            .min(len);
        Ok(Self {
            path: path.to_owned(),
            cursor_path,
            file,
            len,
            confirmed,
            max_bytes,
            _records: PhantomData,
        })
    }

    /// True when every record written has been confirmed.
    pub fn is_empty(&self) -> bool {
        self.confirmed >= self.len
    }

    /// Bytes on disk not yet confirmed.
    pub fn pending_bytes(&self) -> u64 {
        self.len - self.confirmed
    }

    /// The spool file's path (for messages).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends every record, durably, or none of them (`Full` when they do not fit).
    pub fn append(&mut self, records: &[T]) -> Result<(), SpoolError> {
        self.write(records, true)
    }

    /// Appends every record without `fsync`: they survive the process being killed (they are
    /// in the kernel's page cache) but not the machine losing power. For a journal that is
    /// emptied every batch, where an `fsync` per append would cost more than it protects.
    pub fn append_volatile<'r>(
        &mut self,
        records: impl IntoIterator<Item = &'r T>,
    ) -> Result<(), SpoolError>
    where
        T: 'r,
    {
        self.write(records, false)
    }

    /// Forgets every record: the file is emptied and the cursor removed.
    pub fn clear(&mut self) -> Result<(), SpoolError> {
        let all = Pending {
            records: Vec::new(),
            unreadable: 0,
            end: self.len,
        };
        self.confirm(&all)
    }

    fn write<'r>(
        &mut self,
        records: impl IntoIterator<Item = &'r T>,
        sync: bool,
    ) -> Result<(), SpoolError>
    where
        T: 'r,
    {
        let mut buf = Vec::new();
        let mut count = 0usize;
        for r in records {
            count += 1;
            // A record that does not serialise is a bug in `T`; it is skipped rather than
            // poisoning the file.
            if serde_json::to_writer(&mut buf, r).is_ok() {
                buf.push(b'\n');
            }
        }
        if count == 0 {
            return Ok(());
        }
        let size = u64::try_from(buf.len()).unwrap_or(u64::MAX);
        if self.len.saturating_add(size) > self.max_bytes {
            return Err(SpoolError::Full {
                path: self.path.clone(),
                max_bytes: self.max_bytes,
                records: count,
            });
        }
        let io = |source| SpoolError::Io {
            path: self.path.clone(),
            source,
        };
        if let Err(e) =
            (&self.file).write_all(&buf).and_then(
                |()| {
                    if sync {
                        self.file.sync_data()
                    } else {
                        Ok(())
                    }
                },
            )
        {
            // A write cut short (disk full) may have left part of the batch on disk: cut it
            // off, so the file ends where `len` says and the next append does not land after
            // a torn line that `peek` would read as part of it.
            let _ = self.file.set_len(self.len);
            return Err(io(e));
        }
        self.len += size;
        Ok(())
    }

    /// Reads up to `max` unconfirmed records, oldest first, without consuming them.
    pub fn peek(&mut self, max: usize) -> Result<Pending<T>, SpoolError> {
        let io = |source| SpoolError::Io {
            path: self.path.clone(),
            source,
        };
        let mut reader = BufReader::new(&self.file);
        reader.seek(SeekFrom::Start(self.confirmed)).map_err(io)?;
        let mut pending = Pending {
            records: Vec::with_capacity(max.min(4096)),
            unreadable: 0,
            end: self.confirmed,
        };
        let mut line = Vec::new();
        while pending.records.len() < max && pending.end < self.len {
            line.clear();
            let n = reader.read_until(b'\n', &mut line).map_err(io)?;
            if n == 0 || line.last() != Some(&b'\n') {
                // A line without its newline was cut by a crash mid-append: count it and
                // move past it, so the next append starts clean.
                pending.unreadable += usize::from(n > 0);
                pending.end = self.len;
                break;
            }
            pending.end += u64::try_from(n).unwrap_or(0);
            match serde_json::from_slice(&line) {
                Ok(r) => pending.records.push(r),
                Err(_) => pending.unreadable += 1,
            }
        }
        Ok(pending)
    }

    /// Marks the records of `pending` as delivered. When nothing is left the file is emptied.
    pub fn confirm(&mut self, pending: &Pending<T>) -> Result<(), SpoolError> {
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| SpoolError::Io { path, source }
        };
        self.confirmed = pending.end.clamp(self.confirmed, self.len);
        if self.confirmed >= self.len {
            self.file.set_len(0).map_err(io(&self.path))?;
            self.file.sync_data().map_err(io(&self.path))?;
            self.len = 0;
            self.confirmed = 0;
            match std::fs::remove_file(&self.cursor_path) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(io(&self.cursor_path)(e)),
            }
        } else {
            std::fs::write(&self.cursor_path, self.confirmed.to_string())
                .map_err(io(&self.cursor_path))
        }
    }
}

fn ends_with_newline(file: &File, len: u64) -> std::io::Result<bool> {
    use std::io::Read;
    let mut reader = file;
    reader.seek(SeekFrom::Start(len - 1))?;
    let mut last = [0u8; 1];
    reader.read_exact(&mut last)?;
    Ok(last[0] == b'\n')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::temp_dir;

    #[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
    struct Rec {
        n: u32,
        text: String,
    }

    fn recs(range: std::ops::Range<u32>) -> Vec<Rec> {
        range
            .map(|n| Rec {
                n,
                text: format!("record {n}"),
            })
            .collect()
    }

    #[test]
    fn replays_in_order_across_reopen_and_empties_when_confirmed() {
        let dir = temp_dir();
        let path = dir.join("spool").join("spend.jsonl");
        let mut s = Spool::<Rec>::open(&path, 1 << 20).unwrap();
        assert!(s.is_empty());
        s.append(&recs(0..5)).unwrap();
        s.append(&recs(5..12)).unwrap();

        let first = s.peek(4).unwrap();
        assert_eq!(first.records, recs(0..4));
        // Not confirmed yet: peeking again gives the same records.
        assert_eq!(s.peek(4).unwrap().records, recs(0..4));
        s.confirm(&first).unwrap();
        drop(s);

        // A restart resumes after the confirmed records.
        let mut s = Spool::<Rec>::open(&path, 1 << 20).unwrap();
        let rest = s.peek(100).unwrap();
        assert_eq!(rest.records, recs(4..12));
        s.append(&recs(12..13)).unwrap();
        s.confirm(&rest).unwrap();
        assert!(!s.is_empty(), "a record appended after the peek stays");
        let last = s.peek(100).unwrap();
        assert_eq!(last.records, recs(12..13));
        s.confirm(&last).unwrap();
        assert!(s.is_empty());
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_journal_is_read_back_after_a_reopen_and_cleared_whole() {
        let dir = temp_dir();
        let path = dir.join("journal.jsonl");
        let mut s = Spool::<Rec>::open(&path, 1 << 20).unwrap();
        s.append_volatile(&recs(0..3)).unwrap();
        drop(s);
        let mut s = Spool::<Rec>::open(&path, 1 << 20).unwrap();
        assert_eq!(s.peek(10).unwrap().records, recs(0..3));
        s.append_volatile(&recs(3..4)).unwrap();
        s.clear().unwrap();
        assert!(s.is_empty());
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
        s.append_volatile(&recs(4..5)).unwrap();
        assert_eq!(s.peek(10).unwrap().records, recs(4..5));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn refuses_appends_past_its_bound_without_writing_part_of_them() {
        let dir = temp_dir();
        let path = dir.join("small.jsonl");
        let one = serde_json::to_vec(&recs(0..1)[0]).unwrap().len() as u64 + 1;
        let mut s = Spool::<Rec>::open(&path, one * 3).unwrap();
        s.append(&recs(0..2)).unwrap();
        let err = s.append(&recs(2..4)).unwrap_err();
        assert!(matches!(err, SpoolError::Full { records: 2, .. }), "{err}");
        assert_eq!(s.pending_bytes(), one * 2);
        s.append(&recs(2..3)).unwrap();
        assert_eq!(s.peek(10).unwrap().records, recs(0..3));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_torn_last_line_and_garbage_are_skipped() {
        let dir = temp_dir();
        let path = dir.join("torn.jsonl");
        let mut s = Spool::<Rec>::open(&path, 1 << 20).unwrap();
        s.append(&recs(0..2)).unwrap();
        drop(s);
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"not json\n{\"n\": 9, \"te").unwrap();
        drop(f);
        let mut s = Spool::<Rec>::open(&path, 1 << 20).unwrap();
        s.append(&recs(2..3)).unwrap();
        let p = s.peek(10).unwrap();
        assert_eq!((p.records.clone(), p.unreadable), (recs(0..3), 2));
        s.confirm(&p).unwrap();
        assert!(s.is_empty());
        std::fs::remove_dir_all(dir).unwrap();
    }
}
