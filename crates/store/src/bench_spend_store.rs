//! The spend store at ten million rows (docs/store.md, "A spend store that stays flat"):
//! ignored tests that fill a PostgreSQL (and a SQLite) spend log through the spend writer itself
//! (its channel, its batches — 5,000 records on PostgreSQL, 1,000 on SQLite — each batch one
//! transaction with the holders' spend and the rollups), ending today, and report the sustained
//! insert rate per million rows, then time the reads the console and `/spend/*` make (log
//! pages: first, deep by keyset, filtered, a date range; one request by id and by request id;
//! `/spend/logs`' default 10,000 rows; spend by team, key, model, user, end user and tag over
//! 30 days from the rollups, and the same sums from the log for comparison) and retention
//! removing the oldest three days.
//!
//! `cargo test --release -p sluice-store bench_spend_store_postgres -- --ignored --nocapture`
//! (or `_sqlite`), with `SLUICE_BENCH_ROWS` (default 10,000,000) and
//! `SLUICE_BENCH_ROWS_PER_DAY` (default 1,000,000: ten days of a busy gateway, ~12 requests a
//! second around the clock). PostgreSQL needs `SLUICE_TEST_POSTGRES_URL`; its database is
//! dropped at the end unless `SLUICE_BENCH_KEEP` is set (then retention is not run either, and
//! `bench_spend_logs_reads_postgres` with `SLUICE_BENCH_DATABASE_URL` and the same
//! `SLUICE_BENCH_ROWS*` times `/spend/logs`' 10,000-row reads on it again, to compare builds on
//! the same rows).

use std::time::{Duration, Instant};

use time::macros::datetime;
use time::OffsetDateTime;

use super::testing;
use super::*;

/// When keys and teams are made (before every row).
const T0: OffsetDateTime = datetime!(2020-01-01 00:00 UTC);
/// Rows a console page reads (200, and one more to know whether there is a next).
const PAGE: u64 = 201;
const KEYS: usize = 50;
const TEAMS: usize = 10;
const MODELS: [&str; 5] = [
    "gpt-4o",
    "gpt-4o-mini",
    "claude-sonnet",
    "gemini-flash",
    "embed",
];
const TAGS: [&[&str]; 4] = [&[], &["prod"], &["prod", "team-search"], &["eval"]];

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.replace('_', "").parse().ok())
        .unwrap_or(default)
}

/// Where the rows are: `per_day` a day, evenly, every seventh in the same millisecond as the
/// one before (ties the keyset's id breaks), the last day being today (UTC), as a live
/// gateway's log is.
#[derive(Clone, Copy)]
struct Layout {
    rows: usize,
    per_day: usize,
    /// The first day's midnight.
    first: OffsetDateTime,
}

impl Layout {
    fn new(rows: usize, per_day: usize) -> Self {
        let days = rows.div_ceil(per_day);
        let today = OffsetDateTime::now_utc().date().midnight().assume_utc();
        Self {
            rows,
            per_day,
            first: today - Duration::from_secs(86_400 * (days as u64 - 1)),
        }
    }

    fn start_of(self, i: usize) -> OffsetDateTime {
        let day = i / self.per_day;
        let within = i % self.per_day;
        let step = within - within / 7;
        let us = step as u64 * 86_400_000_000 / self.per_day as u64;
        self.first
            + Duration::from_secs(day as u64 * 86_400)
            + Duration::from_micros(us / 1000 * 1000)
    }

    fn days(self) -> usize {
        self.rows.div_ceil(self.per_day)
    }
}

fn key_of(i: usize) -> KeyRow {
    let mut k = KeyRow::new(&format!("sk-store-bench-{i:04}"), T0);
    k.key_alias = Some(format!("app-{i:02}"));
    k.team_id = Some(format!("team-{:02}", i % TEAMS));
    k
}

/// Row `i`: key `i % 50` (and its team), model group `i % 5`, user `i % 20`, end user
/// `i % 300`, a quarter of the rows with each tag set, one failure in 101.
fn row(l: Layout, i: usize, keys: &[KeyRow]) -> SpendLog {
    let key = &keys[i % KEYS];
    let mut s = SpendLog::new(
        format!("req-{i:08}"),
        MODELS[i % MODELS.len()].into(),
        l.start_of(i),
    );
    s.id = format!("{i:08x}-store-bench");
    s.api_key = Some(key.token.clone());
    s.team_id = key.team_id.clone();
    s.user_id = Some(format!("user-{:02}", i % 20));
    s.end_user = Some(format!("customer-{:03}", i % 300));
    s.deployment_id = Some(format!("dep-{}", i % 7));
    s.provider = Some("openai".into());
    s.usage.prompt_tokens = 100 + (i % 50) as u64;
    s.usage.completion_tokens = 20 + (i % 30) as u64;
    s.spend = 0.0001 * (1 + i % 9) as f64;
    s.end_time = s.start_time + Duration::from_millis(200 + (i % 500) as u64);
    s.request_tags = TAGS[i % TAGS.len()]
        .iter()
        .map(|t| (*t).to_owned())
        .collect();
    if i % 101 == 0 {
        s.status = SpendStatus::Failure;
        s.error = Some("429 rpm_limit_exceeded".into());
        s.http_status = Some(429);
        s.error_type = Some("rate_limit_error".into());
        s.error_message = Some("key requests-per-minute limit of 60 reached".into());
    } else {
        s.http_status = Some(200);
    }
    s
}

/// Sends every row through the spend writer, never faster than it takes them (the channel
/// is kept under half full, so no record takes the spool's way), and prints the rate of each
/// million rows and of the whole fill.
async fn fill(s: &Store, l: Layout, dir: &std::path::Path) -> Duration {
    let keys: Vec<KeyRow> = (0..KEYS).map(key_of).collect();
    for k in &keys {
        s.create_key(k).await.unwrap();
    }
    for t in 0..TEAMS {
        s.create_team(&TeamRow::new(format!("team-{t:02}"), T0))
            .await
            .unwrap();
    }
    let mut options =
        WriterOptions::new(dir.join("spool").join("spend.jsonl")).for_backend(s.backend());
    options.max_batch = env_usize("SLUICE_BENCH_BATCH", options.max_batch);
    let half = options.queue_capacity / 2;
    let (sender, task) = writer::start(s.clone(), options).unwrap();
    let started = Instant::now();
    let mut lap = Instant::now();
    println!("| rows written | this million, rows/s | whole fill so far, rows/s |");
    println!("| ---: | ---: | ---: |");
    for i in 0..l.rows {
        while sender.stats().queued >= half {
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
        sender.send(row(l, i, &keys));
        if (i + 1) % 1_000_000 == 0 || i + 1 == l.rows {
            // Written, not only queued: wait for the queue to drain and one more batch.
            while sender.stats().queued > 0 {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            let n = (i % 1_000_000) + 1;
            println!(
                "| {} | {:.0} | {:.0} |",
                i + 1,
                n as f64 / lap.elapsed().as_secs_f64(),
                (i + 1) as f64 / started.elapsed().as_secs_f64()
            );
            lap = Instant::now();
        }
    }
    let stats = sender.stats();
    drop(sender);
    task.await.unwrap();
    let took = started.elapsed();
    assert_eq!(stats.lost, 0);
    assert_eq!(
        stats.spooled_bytes, 0,
        "the writer spooled: the fill outran it"
    );
    took
}

/// The median and the slowest of seven runs of `read` (after one to warm the cache).
async fn time<F, Fut, T>(mut read: F) -> (Duration, Duration)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = T>,
{
    read().await;
    let mut runs = Vec::new();
    for _ in 0..7 {
        let t = Instant::now();
        read().await;
        runs.push(t.elapsed());
    }
    runs.sort();
    (runs[runs.len() / 2], runs[runs.len() - 1])
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1000.0)
}

async fn log_reads(s: &Store, l: Layout) {
    let keys: Vec<KeyRow> = (0..KEYS).map(key_of).collect();
    let far = l.rows * 9 / 10;
    let deep = || {
        Some(Cursor::Before(LogPosition::of(&row(
            l,
            l.rows - 1 - far,
            &keys,
        ))))
    };
    let page = |cursor: Option<Cursor>, limit: u64, f: SpendLogFilter| SpendLogFilter {
        cursor,
        page: Page { offset: 0, limit },
        ..f
    };
    let team = || SpendLogFilter {
        team_id: Some("team-03".into()),
        ..Default::default()
    };
    let failed = || SpendLogFilter {
        status: Some(SpendStatus::Failure),
        ..Default::default()
    };
    let alias = || SpendLogFilter {
        key_alias: Some("app-07".into()),
        ..Default::default()
    };
    let mid = l.start_of(l.rows / 2);
    let day = || SpendLogFilter {
        start: Some(mid),
        end: Some(mid + Duration::from_secs(86_400)),
        ..Default::default()
    };
    let key_day = || SpendLogFilter {
        api_key: Some(keys[7].token.clone()),
        start: Some(mid),
        end: Some(mid + Duration::from_secs(86_400)),
        ..Default::default()
    };
    let model_failed = || SpendLogFilter {
        model_group: Some("claude-sonnet".into()),
        status: Some(SpendStatus::Failure),
        ..Default::default()
    };
    let one = row(l, l.rows / 3, &keys);
    let by_id = SpendLogFilter {
        id: Some(one.id.clone()),
        content: true,
        ..Default::default()
    };
    let by_request = SpendLogFilter {
        request_id: Some(one.request_id.clone()),
        content: true,
        ..Default::default()
    };
    let cases: Vec<(&str, SpendLogFilter)> = vec![
        (
            "first page, no filter",
            page(None, PAGE, SpendLogFilter::default()),
        ),
        (
            "deep page (90 %), no filter",
            page(deep(), PAGE, SpendLogFilter::default()),
        ),
        ("first page, team", page(None, PAGE, team())),
        ("deep page (90 %), team", page(deep(), PAGE, team())),
        ("first page, failures", page(None, PAGE, failed())),
        ("deep page (90 %), failures", page(deep(), PAGE, failed())),
        ("first page, key alias", page(None, PAGE, alias())),
        ("deep page (90 %), key alias", page(deep(), PAGE, alias())),
        ("first page, one day's range", page(None, PAGE, day())),
        (
            "first page, one key over one day",
            page(None, PAGE, key_day()),
        ),
        (
            "first page, model group and failures",
            page(None, PAGE, model_failed()),
        ),
        ("/spend/logs?id= (one row, with content)", by_id),
        (
            "/spend/logs?request_id= (one row, with content)",
            by_request,
        ),
        (
            "/spend/logs default (10,000 newest rows)",
            page(None, 10_000, SpendLogFilter::default()),
        ),
        (
            "/spend/logs one day's range (10,000 rows)",
            page(None, 10_000, day()),
        ),
    ];
    println!(
        "| {:?} read at {} rows | median ms | slowest ms | rows |",
        s.backend(),
        l.rows
    );
    println!("| --- | ---: | ---: | ---: |");
    for (name, f) in &cases {
        let n = s.spend_logs(f).await.unwrap().len();
        let (median, max) = time(|| s.spend_logs(f)).await;
        println!("| {name} | {} | {} | {n} |", ms(median), ms(max));
    }
}

async fn sum_reads(s: &Store, l: Layout) {
    // 30 days ending with the last day written (the console's and /spend/groups' default
    // span): whole days, so the rollups answer.
    let end = l.start_of(l.rows - 1).date().midnight().assume_utc() + Duration::from_secs(86_400);
    let start = end - Duration::from_secs(30 * 86_400);
    println!(
        "| {:?} sums over 30 days at {} rows | rollups: median ms | slowest ms | the log summed: median ms | groups |",
        s.backend(),
        l.rows
    );
    println!("| --- | ---: | ---: | ---: | ---: |");
    for (name, by) in [
        ("/spend/groups?group_by=team", SpendBy::Team),
        ("/spend/groups?group_by=key", SpendBy::Key),
        ("/spend/groups?group_by=model", SpendBy::Model),
        ("/spend/groups?group_by=user", SpendBy::User),
        ("/spend/groups?group_by=end_user", SpendBy::EndUser),
    ] {
        let fast = s.spend_grouped(start, end, by).await.unwrap();
        let slow = s.spend_grouped_logs(start, end, by).await.unwrap();
        assert_eq!(fast.len(), slow.len(), "{name}");
        let (median, max) = time(|| s.spend_grouped(start, end, by)).await;
        let t = Instant::now();
        s.spend_grouped_logs(start, end, by).await.unwrap();
        let scan = t.elapsed();
        println!(
            "| {name} | {} | {} | {} | {} |",
            ms(median),
            ms(max),
            ms(scan),
            fast.len()
        );
    }
    let fast = s.spend_by_tag(Some(start), Some(end)).await.unwrap();
    let (median, max) = time(|| s.spend_by_tag(Some(start), Some(end))).await;
    let t = Instant::now();
    let slow = s.spend_by_tag_logs(Some(start), Some(end)).await.unwrap();
    let scan = t.elapsed();
    assert_eq!(fast.len(), slow.len());
    println!(
        "| /spend/tags | {} | {} | {} | {} |",
        ms(median),
        ms(max),
        ms(scan),
        fast.len()
    );
    let text = |t: OffsetDateTime| {
        let d = t.date();
        format!("{:04}-{:02}-{:02}", d.year(), u8::from(d.month()), d.day())
    };
    let (first, last) = (text(start), text(end - Duration::from_secs(86_400)));
    let daily = s.daily_spend(&first, &last).await.unwrap().len();
    let (median, max) = time(|| s.daily_spend(&first, &last)).await;
    println!(
        "| /spend/daily (console spend page, overview) | {} | {} | – | {daily} rows |",
        ms(median),
        ms(max)
    );
}

async fn count(s: &Store) -> i64 {
    let row = sqlx::query("SELECT COUNT(*) AS n FROM spend_logs")
        .fetch_one(s.pool())
        .await
        .unwrap();
    col(&row, "n").unwrap()
}

/// Retention removes the oldest days one at a time (the cutoff at each next midnight), each
/// timed whole (`Store::prune_spend_logs`: on PostgreSQL the catalog read, the drop and its
/// commit, the check for rows left before the cutoff; on SQLite the batched deletes). On
/// PostgreSQL each day is vacuumed first, as autovacuum would have long done to a day past
/// retention: a DROP that meets autovacuum still working on its table waits
/// `deadlock_timeout` (1 s) for it to be cancelled, which only a day written moments ago (this
/// bench's) would see.
async fn retention(s: &Store, l: Layout) {
    for day in 1..=l.days().min(3) {
        let cutoff = l.first + Duration::from_secs(86_400 * day as u64);
        if s.backend() == Backend::Postgres {
            let name = partitions::partition_name(partitions::day_of(to_ms(cutoff)) - 1);
            sqlx::query(&format!("VACUUM ANALYZE {name}"))
                .execute(s.pool())
                .await
                .unwrap();
        }
        let before = count(s).await;
        let t = Instant::now();
        let pruned = s
            .prune_spend_logs(cutoff, l.per_day as u64 + 1)
            .await
            .unwrap();
        let took = t.elapsed();
        let after = count(s).await;
        let gone = l.per_day.min(l.rows);
        match s.backend() {
            Backend::Postgres => assert_eq!((pruned.partitions, pruned.rows), (1, 0)),
            Backend::Sqlite => assert_eq!((pruned.partitions, pruned.rows), (0, gone as u64)),
        }
        assert_eq!(usize::try_from(before - after).unwrap(), gone);
        println!(
            "Retention: day {day} ({} rows) removed in {} ms ({} rows left)",
            before - after,
            ms(took),
            after
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "fills ten million rows: many minutes; see docs/store.md"]
async fn bench_spend_store_sqlite() {
    let l = Layout::new(
        env_usize("SLUICE_BENCH_ROWS", 10_000_000),
        env_usize("SLUICE_BENCH_ROWS_PER_DAY", 1_000_000),
    );
    let db = testing::sqlite().await;
    let store = db.store.clone();
    let dir = testing::temp_dir();
    let took = fill(&store, l, &dir).await;
    println!(
        "SQLite: {} rows ({} days) written through the spend writer in {:.1} s: {:.0} rows/s",
        l.rows,
        l.days(),
        took.as_secs_f64(),
        l.rows as f64 / took.as_secs_f64()
    );
    sqlx::query("ANALYZE").execute(store.pool()).await.unwrap();
    let size = std::fs::metadata(db.sqlite_file())
        .map(|m| m.len())
        .unwrap_or(0);
    println!("Database size: {} MB", size >> 20);
    log_reads(&store, l).await;
    sum_reads(&store, l).await;
    retention(&store, l).await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "fills ten million rows: many minutes; see docs/store.md"]
async fn bench_spend_store_postgres() {
    let Some(server) = testing::postgres_server() else {
        return;
    };
    let l = Layout::new(
        env_usize("SLUICE_BENCH_ROWS", 10_000_000),
        env_usize("SLUICE_BENCH_ROWS_PER_DAY", 1_000_000),
    );
    let url = testing::postgres_database(&server).await;
    let store = Store::open(StoreOptions::new(Location::Postgres(
        sluice_core::Secret::new(url.clone()),
    )))
    .await
    .unwrap();
    let dir = testing::temp_dir();
    let took = fill(&store, l, &dir).await;
    println!(
        "PostgreSQL: {} rows ({} days) written through the spend writer in {:.1} s: {:.0} rows/s",
        l.rows,
        l.days(),
        took.as_secs_f64(),
        l.rows as f64 / took.as_secs_f64()
    );
    sqlx::query("ANALYZE").execute(store.pool()).await.unwrap();
    let size = sqlx::query(
        "SELECT CAST(pg_size_pretty(pg_database_size(current_database())) AS TEXT) AS size",
    )
    .fetch_one(store.pool())
    .await
    .unwrap();
    println!("Database size: {}", col::<String>(&size, "size").unwrap());
    log_reads(&store, l).await;
    sum_reads(&store, l).await;
    let _ = std::fs::remove_dir_all(&dir);
    // A kept database is kept whole, for `bench_spend_logs_reads_postgres` to read again.
    if std::env::var_os("SLUICE_BENCH_KEEP").is_some() {
        println!("PostgreSQL database kept: {url}");
        return;
    }
    retention(&store, l).await;
    store.close().await;
    let (_, name) = url.rsplit_once('/').unwrap();
    let mut admin = <sqlx::AnyConnection as sqlx::Connection>::connect(&server)
        .await
        .unwrap();
    sqlx::Executor::execute(&mut admin, format!("DROP DATABASE {name}").as_str())
        .await
        .unwrap();
}

/// `/spend/logs`' two 10,000-row reads (the default, and one day's range), each the median and
/// slowest of 15 after one to warm the cache, on a database `bench_spend_store_postgres` filled
/// and kept (`SLUICE_BENCH_DATABASE_URL`, with the `SLUICE_BENCH_ROWS*` it was filled with):
/// the same rows for every build compared, and no fill to wait for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a database filled by bench_spend_store_postgres; see docs/store.md"]
async fn bench_spend_logs_reads_postgres() {
    let Some(url) = testing::required_var("SLUICE_BENCH_DATABASE_URL", "a kept bench database")
    else {
        return;
    };
    let l = Layout::new(
        env_usize("SLUICE_BENCH_ROWS", 10_000_000),
        env_usize("SLUICE_BENCH_ROWS_PER_DAY", 1_000_000),
    );
    let store = Store::open(StoreOptions::new(Location::Postgres(
        sluice_core::Secret::new(url),
    )))
    .await
    .unwrap();
    let mid = l.start_of(l.rows / 2);
    let cases = [
        ("/spend/logs default (10,000 newest rows)", None),
        ("/spend/logs one day's range (10,000 rows)", Some(mid)),
    ];
    println!(
        "| PostgreSQL read at {} rows | median ms | slowest ms | rows |",
        l.rows
    );
    println!("| --- | ---: | ---: | ---: |");
    for (name, start) in cases {
        let f = SpendLogFilter {
            start,
            end: start.map(|t| t + Duration::from_secs(86_400)),
            page: Page {
                offset: 0,
                limit: 10_000,
            },
            ..Default::default()
        };
        let n = store.spend_logs(&f).await.unwrap().len();
        store.spend_logs(&f).await.unwrap();
        let mut runs = Vec::new();
        for _ in 0..15 {
            let t = Instant::now();
            store.spend_logs(&f).await.unwrap();
            runs.push(t.elapsed());
        }
        runs.sort();
        println!(
            "| {name} | {} | {} | {n} |",
            ms(runs[runs.len() / 2]),
            ms(runs[runs.len() - 1])
        );
    }
    store.close().await;
}
