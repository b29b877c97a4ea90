//! The per-request journal on its own: lines as the store reads them, segments kept while a
//! record in them is unstored and removed after, recovery into the spool, and the cost of an
//! append. The writer's side (a kill and a restart against a database) is in
//! `writer/tests.rs`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_core::record::{KeyInfo, RequestRecord};
use sluice_core::usage::Usage;

use super::*;
use crate::testing::temp_dir;
use crate::SpendStatus;

/// A keyed chat request's record, answered.
pub(crate) fn answered(id: &str, key_hash: &str) -> RequestRecord {
    let mut r = RequestRecord::sample(id);
    r.model = Some(Arc::from("gpt-4o"));
    r.deployment = Some(Arc::from("gpt-4o-0"));
    r.provider = Some("openai");
    r.status = 200;
    r.usage = Some(Usage {
        prompt_tokens: 10,
        completion_tokens: 2,
        ..Usage::default()
    });
    r.cost = Some(sluice_core::limits::nanos(0.001));
    r.key = Some(Arc::new(KeyInfo {
        hash: Arc::from(key_hash),
        alias: None,
        team_id: Some(Arc::from("team-1")),
        user_id: None,
    }));
    r
}

const HASH: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn lines(dir: &Path) -> Vec<SpendLog> {
    let mut out = Vec::new();
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    for p in paths {
        for l in std::fs::read_to_string(p).unwrap().lines() {
            out.push(serde_json::from_str(l).unwrap());
        }
    }
    out
}

fn files(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| d.count())
}

#[test]
fn each_record_is_one_line_the_store_reads_with_the_rows_id() {
    let dir = temp_dir().join("journal.d");
    let j = SpendJournal::open(&dir, DEFAULT_SEGMENT_BYTES).unwrap();
    let mut r = answered("req-1", HASH);
    j.journal(&mut r);
    let journaled = r.journaled.clone().unwrap();
    // Journaling twice (a record handed over after an early journal) writes nothing more.
    j.journal(&mut r);
    let mut health = RequestRecord::sample("probe");
    j.journal(&mut health);
    assert!(health.journaled.is_none(), "no model group, no spend line");

    let read = lines(&dir);
    assert_eq!(read.len(), 1);
    let stored = crate::spend_log(&r, OffsetDateTime::now_utc()).unwrap();
    assert_eq!(read[0].id, stored.id, "the row keeps the line's id");
    assert_eq!(
        read[0].id,
        uuid::Uuid::from_u64_pair(journaled.id[0], journaled.id[1]).to_string()
    );
    assert_eq!(read[0].request_id, "req-1");
    assert_eq!(read[0].api_key.as_ref().unwrap().as_str(), HASH);
    assert_eq!(read[0].team_id.as_deref(), Some("team-1"));
    assert_eq!(read[0].usage, stored.usage);
    assert!((read[0].spend - 0.001).abs() < 1e-12);
    assert_eq!(read[0].status, SpendStatus::Success);
    j.close();
    assert_eq!(files(&dir), 0);
}

#[test]
fn a_segment_goes_once_its_thread_moved_on_and_its_records_are_stored() {
    let dir = temp_dir().join("journal.d");
    // Segments of about two lines.
    let j = SpendJournal::open(&dir, 400).unwrap();
    let mut records: Vec<RequestRecord> = (0..6)
        .map(|i| {
            let mut r = answered(&format!("r{i}"), HASH);
            j.journal(&mut r);
            r
        })
        .collect();
    assert!(records.iter().all(|r| r.journaled.is_some()));
    let segments = j.segments();
    assert!(segments >= 3, "{segments} segments");
    assert_eq!(files(&dir), segments);
    j.sweep();
    assert_eq!(files(&dir), segments, "every record still unstored");
    // The first two records are stored: their segment goes, the others stay.
    records.drain(..2);
    j.sweep();
    assert!(files(&dir) < segments);
    assert_eq!(
        lines(&dir).len(),
        4,
        "the unstored records' lines are all kept"
    );
    records.clear();
    j.sweep();
    // The thread's current segment stays open (it may take more lines) unless it just filled.
    assert!(files(&dir) <= 1, "{} files left", files(&dir));
    j.close();
    assert_eq!(files(&dir), 0);
    // A closed journal writes nothing.
    let mut late = answered("late", HASH);
    j.journal(&mut late);
    assert!(late.journaled.is_none());
    assert_eq!(files(&dir), 0);
}

#[test]
fn lines_left_by_a_killed_run_move_into_the_spool() {
    let root = temp_dir();
    let dir = root.join("journal.d");
    let j = SpendJournal::open(&dir, 400).unwrap();
    let records: Vec<RequestRecord> = (0..5)
        .map(|i| {
            let mut r = answered(&format!("k{i}"), HASH);
            j.journal(&mut r);
            r
        })
        .collect();
    // The process dies: nothing is swept or closed. A torn last line is skipped.
    std::fs::write(dir.join("999-000000.jsonl"), b"{\"id\":\"torn").unwrap();
    let mut spool = Spool::<SpendLog>::open(&root.join("spool.jsonl"), 1 << 20).unwrap();
    let lost = recover(&dir, &mut spool, 2).unwrap();
    assert_eq!(lost, 0);
    assert_eq!(files(&dir), 0, "every segment removed");
    let moved = spool.peek(100).unwrap();
    let mut ids: Vec<String> = moved.records.iter().map(|l| l.request_id.clone()).collect();
    ids.sort_unstable();
    assert_eq!(ids, ["k0", "k1", "k2", "k3", "k4"]);
    for (l, r) in moved.records.iter().zip(&records) {
        let want = r.journaled.as_ref().unwrap().id;
        assert_eq!(
            l.id,
            uuid::Uuid::from_u64_pair(want[0], want[1]).to_string()
        );
    }
    // Nothing to recover: nothing happens.
    assert_eq!(recover(&root.join("none"), &mut spool, 2).unwrap(), 0);
}

#[test]
fn an_unwritable_folder_leaves_records_unjournaled_for_the_writer() {
    let root = temp_dir();
    let dir = root.join("journal.d");
    let j = SpendJournal::open(&dir, DEFAULT_SEGMENT_BYTES).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    // A file where the folder was: no segment can be opened.
    std::fs::write(&dir, b"").unwrap();
    let mut r = answered("nowhere", HASH);
    j.journal(&mut r);
    assert!(r.journaled.is_none());
    assert_eq!(j.segments(), 0);
}

/// The cost of journaling a record on the request's thread: building its line, serialising it
/// and one `write(2)`. Prints the figure docs/reliability.md quotes (a debug build's figure is
/// several times a release build's).
#[test]
fn journaling_a_record_costs_microseconds() {
    let dir = temp_dir().join("journal.d");
    let j = SpendJournal::open(&dir, DEFAULT_SEGMENT_BYTES).unwrap();
    let template = answered("bench", HASH);
    let n = 20_000u32;
    let mut held = Vec::with_capacity(n as usize);
    let t = Instant::now();
    for _ in 0..n {
        let mut r = template.clone();
        j.journal(&mut r);
        held.push(r.journaled);
    }
    let per = t.elapsed() / n;
    let clones = Instant::now();
    for _ in 0..n {
        std::hint::black_box(template.clone());
    }
    let clone = clones.elapsed() / n;
    // The system call alone: the same number of lines of the same size, one `write` each.
    let line = std::fs::read_to_string(
        std::fs::read_dir(&dir)
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path(),
    )
    .unwrap();
    let line = line.lines().next().unwrap().to_owned() + "\n";
    let raw = OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("raw"))
        .unwrap();
    let writes = Instant::now();
    for _ in 0..n {
        (&raw).write_all(line.as_bytes()).unwrap();
    }
    let write = writes.elapsed() / n;
    std::fs::remove_file(dir.join("raw")).unwrap();
    eprintln!(
        "journal figure: {:?} per record, of which {:?} the write(2) of its {}-byte line \
         ({:?} cloning the test's record not counted), {} segments",
        per.saturating_sub(clone),
        write,
        line.len(),
        clone,
        j.segments()
    );
    assert!(held.iter().all(Option::is_some));
    assert!(per < Duration::from_millis(1), "{per:?} per record");
    drop(held);
    j.sweep();
    j.close();
}
