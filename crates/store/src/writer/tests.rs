//! The writer against real databases: batching, spend and rollups, budget resets on the timer,
//! requests spooling when the channel is full, and a PostgreSQL outage (server stopped, then
//! started) during which every record is spooled and after which every record is present once.

use std::time::Duration;

use time::OffsetDateTime;

use std::sync::atomic::AtomicBool;

use super::*;
use crate::testing::{every_backend, postgres_database, sqlite, temp_dir};
use crate::SpendSink;
use crate::{KeyRow, Location, Page, SpendLogFilter, StoreOptions};
use sluice_core::record::{RecordJournal, RecordSink, RequestRecord};
use sluice_core::usage::Usage;

fn options(dir: &std::path::Path) -> WriterOptions {
    let mut o = WriterOptions::new(dir.join("spool").join("spend.jsonl"));
    o.batch_interval = Duration::from_millis(20);
    o.max_batch = 100;
    o
}

fn logs(key: &KeyRow, n: usize, tag: &str) -> Vec<SpendLog> {
    (0..n)
        .map(|i| {
            let mut l = SpendLog::new(
                format!("{tag}-{i}"),
                "gpt-4o".into(),
                OffsetDateTime::now_utc(),
            );
            l.api_key = Some(key.token.clone());
            l.usage = Usage {
                prompt_tokens: 10,
                completion_tokens: 2,
                ..Usage::default()
            };
            l.spend = 0.001;
            l
        })
        .collect()
}

async fn all_logs(store: &Store) -> Vec<SpendLog> {
    store
        .spend_logs(&SpendLogFilter {
            page: Page {
                offset: 0,
                limit: 100_000,
            },
            ..SpendLogFilter::default()
        })
        .await
        .unwrap()
}

/// Every record once, by request id.
fn assert_each_once(stored: &[SpendLog], sent: &[SpendLog]) {
    let mut got: Vec<&str> = stored.iter().map(|l| l.request_id.as_str()).collect();
    let mut want: Vec<&str> = sent.iter().map(|l| l.request_id.as_str()).collect();
    got.sort_unstable();
    want.sort_unstable();
    assert_eq!(
        got.len(),
        want.len(),
        "stored {} of {}",
        got.len(),
        want.len()
    );
    assert_eq!(got, want);
}

async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..200 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("timed out waiting for {what}");
}

#[tokio::test]
async fn batches_reach_the_store_with_spend_and_rollups() {
    for db in every_backend().await {
        let dir = temp_dir();
        let store = db.store.clone();
        let key = KeyRow::new("sk-writer", OffsetDateTime::now_utc());
        store.create_key(&key).await.unwrap();
        let (sender, task) = start(store.clone(), options(&dir)).unwrap();
        let sent = logs(&key, 1050, "w");
        for l in &sent {
            sender.send(l.clone());
        }
        // A full batch goes out without waiting for shutdown.
        eventually("the first batches", || async {
            all_logs(&store).await.len() >= 100
        })
        .await;
        drop(sender);
        task.await.unwrap();
        assert_each_once(&all_logs(&store).await, &sent);
        let spend = store
            .key(&key.token)
            .await
            .unwrap()
            .unwrap()
            .accounting
            .spend;
        assert!((spend - 1.05).abs() < 1e-9, "{spend}");
        let today = sent[0].start_time.date().to_string();
        let rollup = store.daily_spend(&today, &today).await.unwrap();
        assert_eq!(rollup.iter().map(|d| d.requests).sum::<u64>(), 1050);
        assert_eq!(rollup.iter().map(|d| d.prompt_tokens).sum::<u64>(), 10_500);
        std::fs::remove_dir_all(dir).unwrap();
    }
}

#[tokio::test]
async fn budget_windows_reset_on_the_writer_timer() {
    let db = sqlite().await;
    let dir = temp_dir();
    let store = db.store.clone();
    let past = OffsetDateTime::now_utc() - time::Duration::hours(2);
    let mut key = KeyRow::new("sk-reset", past);
    key.limits.budget_duration = Some("1h".parse().unwrap());
    key.limits.schedule(past);
    store.create_key(&key).await.unwrap();
    let mut o = options(&dir);
    o.budget_reset_every = Duration::from_millis(20);
    let (sender, task) = start(store.clone(), o).unwrap();
    sender.send(logs(&key, 1, "spent").remove(0));
    eventually("the reset", || async {
        let k = store.key(&key.token).await.unwrap().unwrap();
        k.limits.budget_reset_at > Some(OffsetDateTime::now_utc())
    })
    .await;
    drop(sender);
    task.await.unwrap();
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn a_full_channel_spools_on_the_request_side_and_loses_nothing() {
    let db = sqlite().await;
    let dir = temp_dir();
    let store = db.store.clone();
    let key = KeyRow::new("sk-full", OffsetDateTime::now_utc());
    store.create_key(&key).await.unwrap();
    let mut o = options(&dir);
    o.queue_capacity = 4;
    let (sender, task) = start(store.clone(), o).unwrap();
    // The test runtime has one thread: the writer cannot run while this loop does, so all but
    // four records find the channel full.
    let sent = logs(&key, 300, "full");
    for l in &sent {
        sender.send(l.clone());
    }
    let stats = sender.stats();
    assert_eq!(stats.queued, 4);
    assert!(stats.spooled_bytes > 0);
    drop(sender);
    task.await.unwrap();
    assert_each_once(&all_logs(&store).await, &sent);
    let spool = Spool::<SpendLog>::open(&dir.join("spool").join("spend.jsonl"), 1 << 30).unwrap();
    assert!(spool.is_empty());
    std::fs::remove_dir_all(dir).unwrap();
}

/// The records in a journal file, by request id.
fn journaled(dir: &std::path::Path, which: &str) -> Vec<String> {
    let path = dir.join("spool").join(format!("spend.jsonl.{which}"));
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<SpendLog>(l).unwrap().request_id)
        .collect()
}

/// A batch write held up by a lock on the database: records that arrive meanwhile are taken
/// and journaled anyway (into the second journal), so a kill during a slow write loses only
/// the last poll's records. Once the write goes through, both journals empty and every record
/// is stored once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_arriving_during_a_slow_write_are_journaled() {
    let db = sqlite().await;
    let dir = temp_dir();
    let key = KeyRow::new("sk-slow", OffsetDateTime::now_utc());
    db.store.create_key(&key).await.unwrap();
    // Another connection holds the write lock: the writer's batch waits on it (SQLite's busy
    // wait), as it would on a slow disk or a PostgreSQL lock.
    let mut lock = <sqlx::SqliteConnection as sqlx::Connection>::connect(&format!(
        "sqlite://{}",
        db.sqlite_file().display()
    ))
    .await
    .unwrap();
    sqlx::Executor::execute(&mut lock, "BEGIN IMMEDIATE")
        .await
        .unwrap();
    let mut o = options(&dir);
    o.write_timeout = Duration::from_secs(30);
    let (sender, task) = start(db.store.clone(), o).unwrap();
    let first = logs(&key, 5, "first");
    for l in &first {
        sender.send(l.clone());
    }
    // Taken, journaled, and its write started (a batch every 20 ms) and stuck on the lock.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let second = logs(&key, 7, "second");
    for l in &second {
        sender.send(l.clone());
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        sender.stats().queued,
        0,
        "taken from the channel during the write"
    );
    let mut held: Vec<String> = journaled(&dir, "journal");
    held.extend(journaled(&dir, "journal-2"));
    held.sort_unstable();
    let mut want: Vec<String> = first
        .iter()
        .chain(&second)
        .map(|l| l.request_id.clone())
        .collect();
    want.sort_unstable();
    assert_eq!(
        held, want,
        "both batches are on disk while the first is being written"
    );
    assert!(
        all_logs(&db.store).await.is_empty(),
        "nothing committed while the lock is held"
    );
    sqlx::Executor::execute(&mut lock, "COMMIT").await.unwrap();
    eventually("both batches stored", || async {
        all_logs(&db.store).await.len() == 12
    })
    .await;
    eventually("both journals emptied", || async {
        journaled(&dir, "journal").is_empty() && journaled(&dir, "journal-2").is_empty()
    })
    .await;
    drop(sender);
    task.await.unwrap();
    let all: Vec<SpendLog> = first.iter().chain(&second).cloned().collect();
    assert_each_once(&all_logs(&db.store).await, &all);
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn records_spooled_while_the_database_was_gone_are_replayed_by_the_next_run() {
    let db = sqlite().await;
    let dir = temp_dir();
    let key = KeyRow::new("sk-closed", OffsetDateTime::now_utc());
    db.store.create_key(&key).await.unwrap();
    // A store whose pool is closed fails every query, like a database that went away.
    let gone = db.store.clone();
    gone.close().await;
    let (sender, task) = start(gone, options(&dir)).unwrap();
    let sent = logs(&key, 250, "later");
    for l in &sent {
        sender.send(l.clone());
    }
    drop(sender);
    task.await.unwrap();
    let spooled = Spool::<SpendLog>::open(&dir.join("spool").join("spend.jsonl"), 1 << 30)
        .unwrap()
        .pending_bytes();
    assert!(spooled > 0);

    // Next run, database back: the spool is written first, then the new records.
    let back = db.reopen().await;
    let (sender, task) = start(back.clone(), options(&dir)).unwrap();
    let more = logs(&key, 10, "new");
    for l in &more {
        sender.send(l.clone());
    }
    drop(sender);
    task.await.unwrap();
    let all: Vec<SpendLog> = sent.iter().chain(&more).cloned().collect();
    assert_each_once(&all_logs(&back).await, &all);
    let spend = back
        .key(&key.token)
        .await
        .unwrap()
        .unwrap()
        .accounting
        .spend;
    assert!((spend - 0.26).abs() < 1e-9, "{spend}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// PostgreSQL stopped mid-stream and started again: requests never wait, every record is
/// stored exactly once, spend counts each once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_outage_spools_and_replays_every_record_once() {
    let Some((server, ctl)) = crate::testing::postgres_restartable() else {
        return;
    };
    let url = postgres_database(&server).await;
    let mut opts = StoreOptions::new(Location::Postgres(sluice_core::Secret::new(url)));
    opts.acquire_timeout = Duration::from_millis(500);
    let store = Store::open(opts).await.unwrap();
    let key = KeyRow::new("sk-outage", OffsetDateTime::now_utc());
    store.create_key(&key).await.unwrap();
    let dir = temp_dir();
    let mut o = options(&dir);
    o.write_timeout = Duration::from_secs(2);
    let (sender, task) = start(store.clone(), o).unwrap();

    let before = logs(&key, 200, "before");
    let during = logs(&key, 300, "during");
    let after = logs(&key, 200, "after");
    for l in &before {
        sender.send(l.clone());
    }
    eventually("the first records", || async {
        all_logs(&store).await.len() == 200
    })
    .await;

    crate::testing::pg_ctl(&ctl, "stop");
    let started = std::time::Instant::now();
    for l in &during {
        sender.send(l.clone());
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "sending never waits on the database"
    );
    // Wait until the writer has given up on the database and spooled what it had.
    let spooled = {
        let sender = sender.clone();
        move || {
            let s = sender.stats();
            async move { s.spooled_bytes > 0 && s.queued == 0 }
        }
    };
    eventually("records in the spool", spooled).await;

    crate::testing::pg_ctl(&ctl, "start");
    for l in &after {
        sender.send(l.clone());
    }
    eventually("every record after the restart", || async {
        all_logs(&store).await.len() == 700
    })
    .await;
    assert_eq!(sender.stats().spooled_bytes, 0);
    assert_eq!(sender.stats().lost, 0);
    drop(sender);
    task.await.unwrap();
    let all: Vec<SpendLog> = before
        .iter()
        .chain(&during)
        .chain(&after)
        .cloned()
        .collect();
    assert_each_once(&all_logs(&store).await, &all);
    let spend = store
        .key(&key.token)
        .await
        .unwrap()
        .unwrap()
        .accounting
        .spend;
    assert!((spend - 0.7).abs() < 1e-9, "{spend}");
    std::fs::remove_dir_all(dir).unwrap();
}

/// Two instances' writers on one database, batching spend for the same keys, team and end user
/// at once: every record once, spend exact, no deadlock between their transactions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_writers_on_one_database_count_exactly() {
    for db in every_backend().await {
        let store = db.store.clone();
        let now = OffsetDateTime::now_utc();
        let mut keys = Vec::new();
        for i in 0..5 {
            let mut k = KeyRow::new(&format!("sk-fleet-{i}"), now);
            k.team_id = Some("fleet".into());
            store.create_key(&k).await.unwrap();
            keys.push(k);
        }
        store
            .create_team(&crate::TeamRow::new("fleet".into(), now))
            .await
            .unwrap();
        let mut tasks = Vec::new();
        let mut sent = Vec::new();
        for instance in 0..2 {
            let dir = temp_dir();
            let (sender, task) = start(store.clone(), options(&dir)).unwrap();
            let mut mine = Vec::new();
            for (i, k) in keys.iter().cycle().take(600).enumerate() {
                let mut l = logs(k, 1, &format!("i{instance}-{i}")).remove(0);
                l.team_id = Some("fleet".into());
                l.end_user = Some("shared-customer".into());
                mine.push(l);
            }
            sent.extend(mine.iter().cloned());
            tasks.push((
                dir,
                tokio::spawn(async move {
                    for l in mine {
                        sender.send(l);
                        tokio::task::yield_now().await;
                    }
                }),
                task,
            ));
        }
        for (dir, feeder, task) in tasks {
            feeder.await.unwrap();
            task.await.unwrap();
            std::fs::remove_dir_all(dir).unwrap();
        }
        assert_each_once(&all_logs(&store).await, &sent);
        let team = store.team("fleet").await.unwrap().unwrap();
        assert!(
            (team.accounting.spend - 1.2).abs() < 1e-9,
            "{}",
            team.accounting.spend
        );
        for k in &keys {
            let spend = store.key(&k.token).await.unwrap().unwrap().accounting.spend;
            assert!((spend - 0.24).abs() < 1e-9, "{spend}");
        }
        let customer = store.end_user("shared-customer").await.unwrap().unwrap();
        assert!((customer.accounting.spend - 1.2).abs() < 1e-9);
    }
}

/// `spend_journal: per_request`: records journaled on the request's thread, the first ones
/// stored, the last ones still on their way (in a recorder queue) when the process dies — the
/// writer task is aborted, nothing swept or closed. The next run (here in batched mode: a
/// change of mode recovers too) replays the journal: every record is stored once, the key's
/// spend counts each once, and the journal folder is left empty.
#[tokio::test]
async fn a_kill_loses_no_journaled_record_and_counts_none_twice() {
    for db in every_backend().await {
        let dir = temp_dir();
        let store = db.store.clone();
        let key = KeyRow::new("sk-kill", OffsetDateTime::now_utc());
        store.create_key(&key).await.unwrap();
        let (sender, task) = start(store.clone(), options(&dir)).unwrap();
        let journal = sender.journal().expect("per-request journal by default");
        let sink = SpendSink::new(sender.clone(), Arc::new(AtomicBool::new(false)));
        let mut records: Vec<RequestRecord> = (0..40)
            .map(|i| {
                let mut r = journal::tests::answered(&format!("kill-{i}"), key.token.as_str());
                journal.journal(&mut r);
                r
            })
            .collect();
        assert!(records.iter().all(|r| r.journaled.is_some()));
        // The first 30 reach the writer (the recorder hands the spend log its hold and drops
        // the record's) and are stored.
        for r in records.drain(..30) {
            sink.accept(&r);
        }
        eventually("the first records stored", || async {
            all_logs(&store).await.len() == 30
        })
        .await;
        let segments = journal::journal_dir(&options(&dir).spool_path);
        assert!(
            std::fs::read_dir(&segments).unwrap().count() >= 1,
            "the unstored records' segment is kept"
        );
        task.abort();
        let _ = task.await;
        drop((sink, sender, journal, records));

        let mut again = options(&dir);
        again.journal = SpendJournalMode::Batched;
        let (sender, task) = start(store.clone(), again).unwrap();
        assert!(
            sender.journal().is_none(),
            "batched: no per-request journal"
        );
        drop(sender);
        task.await.unwrap();
        let stored = all_logs(&store).await;
        let mut ids: Vec<&str> = stored.iter().map(|l| l.request_id.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(stored.len(), 40, "every record once");
        assert_eq!(ids.len(), 40);
        let spend = store
            .key(&key.token)
            .await
            .unwrap()
            .unwrap()
            .accounting
            .spend;
        assert!((spend - 0.04).abs() < 1e-9, "spend counted once: {spend}");
        assert_eq!(std::fs::read_dir(&segments).unwrap().count(), 0);
        std::fs::remove_dir_all(dir).unwrap();
    }
}

/// A writer that ends normally removes its journal segments: every record is stored.
#[tokio::test]
async fn a_clean_end_leaves_no_journal() {
    let db = sqlite().await;
    let dir = temp_dir();
    let key = KeyRow::new("sk-clean", OffsetDateTime::now_utc());
    db.store.create_key(&key).await.unwrap();
    let (sender, task) = start(db.store.clone(), options(&dir)).unwrap();
    let journal = sender.journal().unwrap();
    let sink = SpendSink::new(sender.clone(), Arc::new(AtomicBool::new(false)));
    for i in 0..25 {
        let mut r = journal::tests::answered(&format!("clean-{i}"), key.token.as_str());
        journal.journal(&mut r);
        assert!(r.journaled.is_some());
        sink.accept(&r);
    }
    drop((sink, sender));
    task.await.unwrap();
    assert_eq!(all_logs(&db.store).await.len(), 25);
    assert_eq!(journal.segments(), 0);
    let segments = journal::journal_dir(&options(&dir).spool_path);
    assert_eq!(std::fs::read_dir(&segments).unwrap().count(), 0);
    std::fs::remove_dir_all(dir).unwrap();
}
