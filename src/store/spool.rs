//! A local append-only file of records the database could not take yet: one JSON object per
//! line, appended in order, replayed in order when the database answers again, then emptied.
//! Bounded in bytes (records past the bound are counted and logged as lost, never held in
//! memory); replay reads a chunk at a time, so memory stays bounded however long the outage.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Seek, SeekFrom, Write};
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::Serialize;

/// Why the spool failed.
#[derive(Debug, thiserror::Error)]
pub enum SpoolError {
    /// The file could not be opened, written or read.
    #[error("spool file {path}: {source}")]
    Io {
        /// The spool file.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
}

/// An append-only file of `T`s.
#[derive(Debug)]
pub struct Spool<T> {
    path: PathBuf,
    max_bytes: u64,
    bytes: u64,
    lost: u64,
    _records: PhantomData<fn(T) -> T>,
}

impl<T: Serialize + DeserializeOwned> Spool<T> {
    /// Open (or create) the spool at `path`, holding at most `max_bytes`. Records left by a
    /// previous run are kept and replayed.
    pub fn open(path: &Path, max_bytes: u64) -> Result<Self, SpoolError> {
        let io = |source| SpoolError::Io {
            path: path.to_owned(),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        let f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(io)?;
        let bytes = f.metadata().map_err(io)?.len();
        Ok(Self {
            path: path.to_owned(),
            max_bytes,
            bytes,
            lost: 0,
            _records: PhantomData,
        })
    }

    fn io(&self, source: std::io::Error) -> SpoolError {
        SpoolError::Io {
            path: self.path.clone(),
            source,
        }
    }

    /// Append records; those past the size bound are counted as lost. Returns how many were
    /// lost now.
    pub fn append(&mut self, records: &[T]) -> Result<u64, SpoolError> {
        let mut buf = Vec::with_capacity(records.len() * 256);
        let mut lost = 0;
        for r in records {
            let start = buf.len();
            if serde_json::to_writer(&mut buf, r).is_err() {
                buf.truncate(start);
                lost += 1;
                continue;
            }
            buf.push(b'\n');
            if self.bytes + buf.len() as u64 > self.max_bytes {
                buf.truncate(start);
                lost += 1;
            }
        }
        if !buf.is_empty() {
            let mut f = OpenOptions::new()
                .append(true)
                .open(&self.path)
                .map_err(|e| self.io(e))?;
            f.write_all(&buf).map_err(|e| self.io(e))?;
            f.flush().map_err(|e| self.io(e))?;
            self.bytes += buf.len() as u64;
        }
        self.lost += lost;
        Ok(lost)
    }

    /// Bytes waiting.
    pub fn len_bytes(&self) -> u64 {
        self.bytes
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    /// Records lost to the size bound since start.
    pub fn lost(&self) -> u64 {
        self.lost
    }

    /// Up to `max` records starting at byte `offset`, and the offset after them. Lines that do
    /// not decode (a torn last write after a crash) are skipped.
    pub fn read_chunk(&self, offset: u64, max: usize) -> Result<(Vec<T>, u64), SpoolError> {
        let mut f = File::open(&self.path).map_err(|e| self.io(e))?;
        f.seek(SeekFrom::Start(offset)).map_err(|e| self.io(e))?;
        let mut reader = BufReader::new(f);
        let mut out = Vec::new();
        let mut pos = offset;
        let mut line = String::new();
        while out.len() < max {
            line.clear();
            let n = reader.read_line(&mut line).map_err(|e| self.io(e))?;
            if n == 0 || !line.ends_with('\n') {
                break;
            }
            pos += n as u64;
            if let Ok(r) = serde_json::from_str(line.trim_end()) {
                out.push(r);
            }
        }
        Ok((out, pos))
    }

    /// Forget everything (after a full replay).
    pub fn clear(&mut self) -> Result<(), SpoolError> {
        File::create(&self.path).map_err(|e| self.io(e))?;
        self.bytes = 0;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_replays_in_order_and_bounds_its_size() {
        let dir = crate::store::testing::temp_dir();
        let path = dir.join("spool.jsonl");
        let mut s: Spool<u32> = Spool::open(&path, 40).unwrap();
        assert_eq!(s.append(&[1, 2, 3]).unwrap(), 0);
        // Reopened (a restart): what was spooled is still there.
        let mut s: Spool<u32> = Spool::open(&path, 40).unwrap();
        assert_eq!(s.len_bytes(), 6);
        let (first, next) = s.read_chunk(0, 2).unwrap();
        assert_eq!(first, vec![1, 2]);
        let (rest, end) = s.read_chunk(next, 10).unwrap();
        assert_eq!(rest, vec![3]);
        assert_eq!(end, 6);
        // 40 bytes: 6 used, "1000000000\n" is 11 bytes: three more fit, the fourth is lost.
        assert_eq!(s.append(&[1_000_000_000; 4]).unwrap(), 1);
        assert_eq!(s.lost(), 1);
        s.clear().unwrap();
        assert!(s.is_empty());
        assert_eq!(s.read_chunk(0, 10).unwrap().0, Vec::<u32>::new());
        let _ = std::fs::remove_dir_all(dir);
    }
}
